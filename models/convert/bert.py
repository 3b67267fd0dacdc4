"""BERT weights between this project's model and google-research/bert's TF1 checkpoints or HuggingFace safetensors.

`weights(num_layers, tie_output)` lists every weight once: google-research's variable name, HuggingFace's
tensor name and the Keras weight path here, with how the layout differs. The canonical layout is
google-research's (dense kernels `[in, out]`); HuggingFace's linear weights are the transpose (`[out, in]`),
and keras-hub's attention keeps heads apart (`query/kernel` `[H, heads, H / heads]`,
`attention_output/kernel` `[heads, H / heads, H]`). The next-sentence weights are `[2, H]` in both sources
and `[H, 2]` here.

The masked-LM decoder: a tied model (`tie_output`, google-research's only kind) reuses the word embeddings;
HuggingFace may store a copy, which must be equal. An untied model (the tiny presets) has an output matrix
of its own, `mlm_head/output_kernel` `[H, V]`: HuggingFace's `cls.predictions.decoder.weight` `[V, H]` with
`"tie_word_embeddings": false` in config.json (and `cls.predictions.decoder.bias`, which HuggingFace uses
instead of `cls.predictions.bias` once nothing is tied). google-research's checkpoint has no place for it:
`--to bert_tf1` refuses such a model (`models/convert/formats.py` says what each format can carry).

google-research's `hidden_act: "gelu"` is the tanh approximation (its `modeling.gelu`), HuggingFace's is
exact; both map to this project's `hidden_act` names. The pooler and the two heads may be absent from a
checkpoint (HuggingFace's `BertModel` has no heads): they then keep a fresh initialisation, reported.
"""

import dataclasses
import json
import os
import re

import numpy as np

from models.bert import PRESETS, BertConfig
from models.convert.common import ConversionError, assign, beside, check_shape, read_json, read_weights
from models.convert.sources import HF_WEIGHTS, SafetensorsTensors, TF1Tensors, safetensors_files, tf1_prefix

TF1_CHECKPOINT, TF1_CONFIG = "bert_model.ckpt", "bert_config.json"
HF_CONFIG = "config.json"
OPTIONAL_GROUPS = ("pooler", "mlm", "nsp")  # may be missing from a checkpoint; every other weight must be there
# Tensors a checkpoint may hold that are not weights of the model (optimizer slots, counters, buffers, copies).
IGNORED = re.compile(r"(^|/)(global_step|adam_[mv]|bad_steps|good_steps|loss_scale)(/|$)|position_ids$"
                     r"|cls\.predictions\.decoder\.(weight|bias)$")
# HuggingFace hidden_act -> ours; google-research's "gelu" is the tanh approximation.
HF_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_approximate", "gelu_pytorch_tanh": "gelu_approximate",
                  "gelu_fast": "gelu_approximate", "relu": "relu"}
TF1_ACTIVATIONS = {"gelu": "gelu_approximate", "relu": "relu"}


@dataclasses.dataclass(frozen=True)
class Weight:
    """One weight: `tf1` name, `hf` name (without the `bert.` prefix of the encoder's), Keras `path`, the
    `layout` change from the canonical (tf1) layout to ours, `linear` (HF stores it transposed), `group`."""

    tf1: str
    hf: str
    path: str
    layout: str = "same"  # same | heads | heads_bias | heads_out | transpose
    linear: bool = False
    group: str = "encoder"


def _dense(tf1, hf, path, group="encoder", layout=("same", "same")):
    return [Weight(f"{tf1}/kernel", f"{hf}.weight", f"{path}/kernel", layout[0], True, group),
            Weight(f"{tf1}/bias", f"{hf}.bias", f"{path}/bias", layout[1], False, group)]


def _norm(tf1, hf, path, group="encoder"):
    return [Weight(f"{tf1}/gamma", f"{hf}.weight", f"{path}/gamma", group=group),
            Weight(f"{tf1}/beta", f"{hf}.bias", f"{path}/beta", group=group)]


def weights(num_layers: int, tie_output: bool = True) -> list[Weight]:
    """Every weight of the pretrainer, embeddings first, in the order errors report them. An untied model
    (`tie_output=False`) has the masked-LM output matrix too, which only HuggingFace names (`tf1` empty)."""
    rows = [Weight("bert/embeddings/word_embeddings", "embeddings.word_embeddings.weight",
                   "token_embedding/embeddings"),
            Weight("bert/embeddings/position_embeddings", "embeddings.position_embeddings.weight",
                   "position_embedding/embeddings"),
            Weight("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings.weight",
                   "segment_embedding/embeddings"),
            *_norm("bert/embeddings/LayerNorm", "embeddings.LayerNorm", "embeddings_layer_norm")]
    for i in range(num_layers):
        tf1, hf, ours = f"bert/encoder/layer_{i}", f"encoder.layer.{i}", f"transformer_layer_{i}"
        for part in ("query", "key", "value"):
            rows += _dense(f"{tf1}/attention/self/{part}", f"{hf}.attention.self.{part}",
                           f"{ours}/self_attention_layer/{part}", layout=("heads", "heads_bias"))
        rows += _dense(f"{tf1}/attention/output/dense", f"{hf}.attention.output.dense",
                       f"{ours}/self_attention_layer/attention_output", layout=("heads_out", "same"))
        rows += _norm(f"{tf1}/attention/output/LayerNorm", f"{hf}.attention.output.LayerNorm",
                      f"{ours}/self_attention_layer_norm")
        rows += _dense(f"{tf1}/intermediate/dense", f"{hf}.intermediate.dense",
                       f"{ours}/feedforward_intermediate_dense")
        rows += _dense(f"{tf1}/output/dense", f"{hf}.output.dense", f"{ours}/feedforward_output_dense")
        rows += _norm(f"{tf1}/output/LayerNorm", f"{hf}.output.LayerNorm", f"{ours}/feedforward_layer_norm")
    rows += _dense("bert/pooler/dense", "pooler.dense", "pooled_dense", group="pooler")
    rows += _dense("cls/predictions/transform/dense", "cls.predictions.transform.dense", "mlm_head/intermediate_dense",
                   group="mlm")
    rows += _norm("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm",
                  "mlm_head/intermediate_layer_norm", group="mlm")
    if not tie_output:  # [H, V] here and canonically, HuggingFace's decoder [V, H]
        rows.append(Weight("", "cls.predictions.decoder.weight", "mlm_head/output_kernel", linear=True, group="mlm"))
    rows += [Weight("cls/predictions/output_bias", "cls.predictions.bias", "mlm_head/output_bias", group="mlm"),
             Weight("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", "nsp_head/kernel",
                    "transpose", group="nsp"),
             Weight("cls/seq_relationship/output_bias", "cls.seq_relationship.bias", "nsp_head/bias", group="nsp")]
    return rows


def hf_name(weight: Weight) -> str:
    """The name in a `BertForPreTraining` state dict (encoder under `bert.`, heads under `cls.`)."""
    return weight.hf if weight.hf.startswith("cls.") else f"bert.{weight.hf}"


# --- layouts -----------------------------------------------------------------------------------------------

def to_ours(array: np.ndarray, layout: str, shape: tuple) -> np.ndarray:
    """Canonical (google-research) layout -> the Keras weight of `shape`."""
    if layout == "transpose":
        return array.T
    return array.reshape(shape)


def from_ours(array: np.ndarray, layout: str) -> np.ndarray:
    """The Keras weight -> canonical layout."""
    if layout == "transpose":
        return array.T
    if layout == "heads":  # [H, heads, d] -> [H, heads * d]
        return array.reshape(array.shape[0], -1)
    if layout == "heads_out":  # [heads, d, H] -> [heads * d, H]
        return array.reshape(-1, array.shape[-1])
    if layout == "heads_bias":
        return array.reshape(-1)
    return array


def canonical_shape(shape: tuple, layout: str) -> tuple:
    return from_ours(np.zeros(shape, np.int8), layout).shape


# --- configs -----------------------------------------------------------------------------------------------

def config_from_json(payload: dict, source: str, hf: bool) -> BertConfig:
    """A google-research `bert_config.json` (`hf=False`) or a HuggingFace `config.json` -> `BertConfig`."""
    if hf and payload.get("model_type", "bert") != "bert":
        raise ConversionError(f"{source}: model_type {payload.get('model_type')!r} is not a BERT architecture")
    if payload.get("position_embedding_type", "absolute") != "absolute":
        raise ConversionError(f"{source}: position_embedding_type {payload['position_embedding_type']!r}: only "
                              f"absolute positions are supported")
    table = HF_ACTIVATIONS if hf else TF1_ACTIVATIONS
    act = payload.get("hidden_act", "gelu")
    if act not in table:
        raise ConversionError(f"{source}: hidden_act {act!r} is not supported ({', '.join(table)})")
    hidden, heads = payload.get("hidden_size"), payload.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and (heads < 1 or hidden % heads):
        raise ConversionError(f"{source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}: "
                              f"each head takes hidden_size / num_attention_heads dimensions; fix the config")
    tied = payload.get("tie_word_embeddings", True) if hf else True  # google-research: always tied
    if not isinstance(tied, bool):
        raise ConversionError(f"{source}: tie_word_embeddings {tied!r} is not true or false")
    try:
        return BertConfig(vocab_size=payload["vocab_size"], num_layers=payload["num_hidden_layers"],
                          hidden_size=payload["hidden_size"], num_heads=payload["num_attention_heads"],
                          intermediate_size=payload["intermediate_size"], hidden_act=table[act],
                          dropout=payload.get("hidden_dropout_prob", 0.1),
                          max_position_embeddings=payload.get("max_position_embeddings", 512),
                          type_vocab_size=payload.get("type_vocab_size", 2),
                          initializer_range=payload.get("initializer_range", 0.02),
                          layer_norm_epsilon=payload.get("layer_norm_eps", 1e-12), tie_output=tied)
    except KeyError as e:
        raise ConversionError(f"{source} lacks {e.args[0]!r}") from None


def config_to_json(config: BertConfig, hf: bool) -> dict:
    """The target's config file; `formats.check` has already refused what it cannot say."""
    shared = {"vocab_size": config.vocab_size, "hidden_size": config.hidden_size,
              "num_hidden_layers": config.num_layers, "num_attention_heads": config.num_heads,
              "intermediate_size": config.intermediate_size, "hidden_dropout_prob": config.dropout,
              "attention_probs_dropout_prob": config.dropout,
              "max_position_embeddings": config.max_position_embeddings,
              "type_vocab_size": config.type_vocab_size, "initializer_range": config.initializer_range}
    if not hf:  # google-research has one GELU, the tanh one, and a fixed epsilon of 1e-12
        return {**shared, "hidden_act": "relu" if config.hidden_act == "relu" else "gelu"}
    act = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu"}[config.hidden_act]
    return {"architectures": ["BertForPreTraining"], "model_type": "bert", **shared, "hidden_act": act,
            "layer_norm_eps": config.layer_norm_epsilon, "pad_token_id": 0, "position_embedding_type": "absolute",
            "tie_word_embeddings": config.tie_output}


def nearest_preset(config: BertConfig) -> str:
    """The preset with this config's shape, else "converted"."""
    for name, fields in PRESETS.items():
        if all(getattr(config, k) == v for k, v in fields.items()):
            return name
    return "converted"


# --- reading -----------------------------------------------------------------------------------------------

def load(model, config: BertConfig, tensors, source: str, hf: bool) -> list[str]:
    """Assigns the checkpoint's tensors to `model` by name. `tensors`: a `TensorSource`. Returns the optional
    groups that the checkpoint lacks (kept freshly initialised)."""
    shapes = {v.path: tuple(v.shape) for v in model.weights}
    rows = weights(config.num_layers, config.tie_output)
    names = {row.path: _find(row, tensors, hf) for row in rows}
    missing_groups = []
    for group in OPTIONAL_GROUPS:
        members = [row for row in rows if row.group == group]
        found = [names[row.path] is not None for row in members]
        if not any(found):
            missing_groups.append(group)
        elif not all(found):
            absent = next(row for row, ok in zip(members, found) if not ok)
            raise ConversionError(f"{source} lacks {hf_name(absent) if hf else absent.tf1} but holds other "
                                  f"weights of the same layer")
    arrays = {}
    for row in rows:
        name = names[row.path]
        if name is None:
            if row.group in missing_groups:
                continue
            raise ConversionError(f"{source} lacks {hf_name(row) if hf else row.tf1}: not a checkpoint of the "
                                  f"model that the config describes ({config.num_layers} layers)")
        expected = canonical_shape(shapes[row.path], row.layout)
        if hf and row.linear:
            expected = expected[::-1]
        check_shape(name, tensors.shape(name), expected, source)
        array = tensors.get(name)
        array = array.T if hf and row.linear else array
        arrays[row.path] = to_ours(array, row.layout, shapes[row.path])
    _check_leftovers(tensors, set(n for n in names.values() if n), source)
    if hf and config.tie_output:
        _check_tied_decoder(tensors, arrays["token_embedding/embeddings"], source)
    elif hf and "mlm_head/output_bias" in arrays:
        arrays["mlm_head/output_bias"] = _untied_decoder_bias(tensors, arrays["mlm_head/output_bias"], source)
    assign(model, arrays)
    return missing_groups


def _find(row: Weight, tensors, hf: bool) -> str | None:
    if not hf:
        return row.tf1 if tensors.has(row.tf1) else None
    candidates = [hf_name(row), row.hf]
    if row.hf.endswith(".weight") and "LayerNorm" in row.hf:  # old PyTorch checkpoints: gamma / beta
        candidates += [c[:-len("weight")] + "gamma" for c in candidates[:2]]
    if row.hf.endswith(".bias") and "LayerNorm" in row.hf:
        candidates += [c[:-len("bias")] + "beta" for c in candidates[:2]]
    return next((c for c in candidates if tensors.has(c)), None)


def _check_leftovers(tensors, used: set, source: str) -> None:
    extra = [n for n in tensors.names() if n not in used and not IGNORED.search(n)]
    if extra:
        raise ConversionError(f"{source} holds weights that the config does not use, e.g. {extra[0]} "
                              f"{list(tensors.shape(extra[0]))} ({len(extra)} in all): does num_hidden_layers match?")


def _check_tied_decoder(tensors, embeddings: np.ndarray, source: str) -> None:
    for name in ("cls.predictions.decoder.weight", "bert.cls.predictions.decoder.weight"):
        if tensors.has(name) and not np.array_equal(tensors.get(name), embeddings):
            raise ConversionError(f"{source}: {name} differs from the word embeddings, but the config ties them "
                                  f"(tie_word_embeddings absent or true); if the decoder is its own, set "
                                  f"\"tie_word_embeddings\": false in config.json")


def _untied_decoder_bias(tensors, bias: np.ndarray, source: str) -> np.ndarray:
    """An untied HuggingFace model computes with `cls.predictions.decoder.bias` (tied to `cls.predictions.bias`
    only when the embeddings are): use it when present; two different biases are an error."""
    name = "cls.predictions.decoder.bias"
    if not tensors.has(name):
        return bias
    check_shape(name, tensors.shape(name), bias.shape, source)
    decoder_bias = tensors.get(name)
    if not np.array_equal(decoder_bias, bias):
        raise ConversionError(f"{source}: {name} differs from cls.predictions.bias; which one the masked-LM "
                              f"output uses depends on the transformers version: make them equal")
    return decoder_bias


def read_source(fmt: str, checkpoint: str, config_path: str | None):
    """-> (BertConfig, tensors, config path, lower_case hint or None)."""
    hf = fmt == "hf_bert"
    config_path = config_path or beside(checkpoint, HF_CONFIG if hf else TF1_CONFIG)
    config = config_from_json(read_json(config_path, "model config", "--config"), config_path, hf)  # first: cheap
    tensors = SafetensorsTensors(safetensors_files(checkpoint)) if hf else TF1Tensors(tf1_prefix(checkpoint))
    lower_case = None
    tokenizer_config = beside(checkpoint, "tokenizer_config.json")
    if hf and os.path.exists(tokenizer_config):
        lower_case = read_json(tokenizer_config, "tokenizer config", "--config").get("do_lower_case")
    return config, tensors, config_path, lower_case


# --- writing -----------------------------------------------------------------------------------------------

def canonical_tensors(model, config: BertConfig, hf: bool) -> dict:
    """{source name: array} of every weight of `model`, in the target format's names and layouts."""
    ours = read_weights(model)
    out = {}
    for row in weights(config.num_layers, config.tie_output):
        array = np.ascontiguousarray(from_ours(ours[row.path], row.layout), dtype=np.float32)
        if hf:
            out[hf_name(row)] = np.ascontiguousarray(array.T) if row.linear else array
        else:
            assert row.tf1, f"{row.path} has no google-research name (formats.check refuses such a model)"
            out[row.tf1] = array
    if hf and not config.tie_output:  # what HuggingFace computes with once nothing is tied
        out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"].copy()
    return out


def write(model, config: BertConfig, fmt: str, output: str, vocab, lower_case: bool) -> list[str]:
    """Writes `output/` as the format's tools expect it; returns the files written."""
    os.makedirs(output, exist_ok=True)
    hf = fmt == "hf_bert"
    tensors = canonical_tensors(model, config, hf)
    files = [os.path.join(output, "vocab.txt")]
    vocab.write(files[0])
    if hf:
        from safetensors.numpy import save_file

        files.append(os.path.join(output, HF_WEIGHTS))
        save_file(tensors, files[-1], metadata={"format": "pt"})
        payload = config_to_json(config, hf=True)
        _write_json(os.path.join(output, "tokenizer_config.json"),
                    {"do_lower_case": lower_case, "tokenizer_class": "BertTokenizer", "model_max_length":
                     config.max_position_embeddings})
        files.append(os.path.join(output, "tokenizer_config.json"))
    else:
        import tensorflow as tf

        prefix = os.path.join(output, TF1_CHECKPOINT)
        names = sorted(tensors)
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(tensors[n]) for n in names])
        with open(os.path.join(output, "checkpoint"), "w") as f:  # what tf.train.latest_checkpoint reads
            f.write(f'model_checkpoint_path: "{TF1_CHECKPOINT}"\nall_model_checkpoint_paths: "{TF1_CHECKPOINT}"\n')
        files += [prefix + ".index", prefix + ".data-00000-of-00001"]
        payload = config_to_json(config, hf=False)
    config_file = os.path.join(output, HF_CONFIG if hf else TF1_CONFIG)
    _write_json(config_file, payload)
    return files + [config_file]


def _write_json(path: str, payload: dict) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
        f.write("\n")
