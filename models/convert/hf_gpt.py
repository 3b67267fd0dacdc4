"""GPT weights between this project's model and HuggingFace's `openai-gpt` (`OpenAIGPTLMHeadModel`), in
safetensors, read and written without torch.

`openai-gpt` is GPT-1's own shape and this project's default GPT: learned token and position embeddings,
post-layer-norm blocks, an MLP 4x as wide, the tanh GELU (its `afn: "gelu"` is `gelu_new`), no output bias.
`formats.TABLES["hf_gpt", "gpt"]` lists what it cannot carry (an output bias, pre-LN blocks, an exact GELU,
another MLP width): such a model is refused, naming the field. An untied output is carried:
`lm_head.weight` with `"tie_word_embeddings": false`.

Layouts: HuggingFace's `Conv1D` weights are `[in, out]` as Keras kernels are; `c_attn` holds query, key and
value side by side (`[H, 3H]`), where keras-hub's attention keeps them apart with heads split
(`query/kernel` `[H, heads, H / heads]`); `c_proj` is `attention_output/kernel` `[heads, H / heads, H]`
flattened. `lm_head.weight` is `[V, H]`, `token_embedding/reverse_embeddings` `[H, V]`.

The vocabulary stays this project's WordPiece `vocab.txt` (with a `tokenizer_config.json` naming
`BertTokenizer`, so `AutoTokenizer` reads it; GPT's windows have no `[CLS]`: tokenize with
`add_special_tokens=False`). A real `openai-gpt` checkpoint's BPE vocabulary (`vocab.json`, `merges.txt`)
cannot drive this project's tokenizer: `--from hf_gpt` then needs `--vocab`.
"""

import json
import os

import numpy as np

from models.convert.sources import SafetensorsTensors, safetensors_files
from models.convert.common import ConversionError, assign, beside, check_shape, read_json, read_weights
from models.gpt import GptConfig

WEIGHTS, CONFIG = "model.safetensors", "config.json"
ACTIVATIONS = {"gelu": "gelu_approximate", "relu": "relu"}  # HuggingFace afn -> ours
PREFIX = "transformer."


def config_to_json(config: GptConfig) -> dict:
    afn = {v: k for k, v in ACTIVATIONS.items()}[config.hidden_act]
    return {"architectures": ["OpenAIGPTLMHeadModel"], "model_type": "openai-gpt", "vocab_size": config.vocab_size,
            "n_positions": config.max_position_embeddings, "n_embd": config.hidden_size, "n_layer": config.num_layers,
            "n_head": config.num_heads, "afn": afn, "resid_pdrop": config.dropout, "embd_pdrop": config.dropout,
            "attn_pdrop": config.dropout, "layer_norm_epsilon": config.layer_norm_epsilon,
            "initializer_range": config.initializer_range, "tie_word_embeddings": config.tie_output}


def config_from_json(payload: dict, source: str) -> GptConfig:
    if payload.get("model_type") != "openai-gpt":
        raise ConversionError(f"{source}: model_type {payload.get('model_type')!r} is not openai-gpt")
    afn = payload.get("afn", "gelu")
    if afn not in ACTIVATIONS:
        raise ConversionError(f"{source}: afn {afn!r} is not supported ({', '.join(ACTIVATIONS)})")
    tied = payload.get("tie_word_embeddings", True)
    try:
        hidden, heads = payload["n_embd"], payload["n_head"]
        if heads < 1 or hidden % heads:
            raise ConversionError(f"{source}: n_embd {hidden} is not divisible by n_head {heads}")
        return GptConfig(vocab_size=payload["vocab_size"], num_layers=payload["n_layer"], hidden_size=hidden,
                         num_heads=heads, intermediate_size=4 * hidden, hidden_act=ACTIVATIONS[afn],
                         dropout=payload.get("resid_pdrop", 0.1),
                         max_position_embeddings=payload.get("n_positions", 512),
                         initializer_range=payload.get("initializer_range", 0.02),
                         layer_norm_epsilon=payload.get("layer_norm_epsilon", 1e-5), output_bias=False,
                         tie_output=bool(tied), normalize_first=False)
    except KeyError as e:
        raise ConversionError(f"{source} lacks {e.args[0]!r}") from None


def to_hf(ours: dict, config: GptConfig) -> dict:
    """`{keras path: array}` -> `OpenAIGPTLMHeadModel`'s state dict `{name: array}` (encoder under
    `transformer.`)."""
    out = {"transformer.tokens_embed.weight": ours["token_embedding/embeddings"],
           "transformer.positions_embed.weight": ours["position_embedding/embeddings"]}
    for i in range(config.num_layers):
        k, h = f"transformer_layer_{i}", f"transformer.h.{i}"
        hidden = config.hidden_size
        out[f"{h}.attn.c_attn.weight"] = np.concatenate(  # [H, 3H]
            [ours[f"{k}/self_attention/{p}/kernel"].reshape(hidden, hidden) for p in ("query", "key", "value")], 1)
        out[f"{h}.attn.c_attn.bias"] = np.concatenate(
            [ours[f"{k}/self_attention/{p}/bias"].reshape(-1) for p in ("query", "key", "value")])
        for name, path in _one_to_one(k, h):
            out[name] = ours[path]
        out[f"{h}.attn.c_proj.weight"] = out[f"{h}.attn.c_proj.weight"].reshape(hidden, hidden)  # [heads, d, H]
    if not config.tie_output:
        out["lm_head.weight"] = ours["token_embedding/reverse_embeddings"].T  # [V, H]
    return {name: np.ascontiguousarray(a, dtype=np.float32) for name, a in out.items()}


def from_hf(tensors, config: GptConfig, shapes: dict, source: str) -> dict:
    """The checkpoint's tensors -> `{keras path: array}` for a model whose weights have `shapes`
    (`{path: shape}`); every tensor shape-checked first, then leftovers refused."""
    expected = {n: a.shape for n, a in to_hf({p: np.zeros(s, np.float32) for p, s in shapes.items()}, config).items()}
    hf, used = {}, set()
    for name, shape in expected.items():
        found = next((c for c in (name, name.removeprefix(PREFIX)) if tensors.has(c)), None)
        if found is None:
            raise ConversionError(f"{source} lacks {name}: not a checkpoint of the model that the config describes "
                                  f"({config.num_layers} layers{', untied' if not config.tie_output else ''})")
        check_shape(found, tensors.shape(found), shape, source)
        hf[name], _ = tensors.get(found), used.add(found)
    extra = [n for n in tensors.names() if n not in used and not n.endswith((".attn.bias", "position_ids"))]
    if config.tie_output and "lm_head.weight" in extra:
        if not np.array_equal(tensors.get("lm_head.weight"), hf["transformer.tokens_embed.weight"]):
            raise ConversionError(f"{source}: lm_head.weight differs from the token embeddings, but the config ties "
                                  f"them; if the output is its own, set \"tie_word_embeddings\": false in config.json")
        extra.remove("lm_head.weight")
    if extra:
        raise ConversionError(f"{source} holds weights that the config does not use, e.g. {extra[0]} "
                              f"{list(tensors.shape(extra[0]))} ({len(extra)} in all): does n_layer match?")
    return _to_ours(hf, config, shapes)


def _to_ours(hf: dict, config: GptConfig, shapes: dict) -> dict:
    ours = {"token_embedding/embeddings": hf["transformer.tokens_embed.weight"],
            "position_embedding/embeddings": hf["transformer.positions_embed.weight"]}
    for i in range(config.num_layers):
        k, h = f"transformer_layer_{i}", f"transformer.h.{i}"
        kernels = np.split(hf[f"{h}.attn.c_attn.weight"], 3, axis=1)  # 3 x [H, H]
        biases = np.split(hf[f"{h}.attn.c_attn.bias"], 3)
        for part, kernel, bias in zip(("query", "key", "value"), kernels, biases):
            ours[f"{k}/self_attention/{part}/kernel"] = kernel
            ours[f"{k}/self_attention/{part}/bias"] = bias
        for name, path in _one_to_one(k, h):
            ours[path] = hf[name]
    if not config.tie_output:
        ours["token_embedding/reverse_embeddings"] = hf["lm_head.weight"].T
    return {path: np.asarray(a).reshape(shapes[path]) for path, a in ours.items()}


def _one_to_one(k: str, h: str):
    """(HuggingFace name, keras path) of the tensors of block `h` / `k` that are one tensor on both sides, the
    same values up to a reshape: all but the query, key and value, which HuggingFace holds as one `c_attn`."""
    yield f"{h}.attn.c_proj.weight", f"{k}/self_attention/attention_output/kernel"
    yield f"{h}.attn.c_proj.bias", f"{k}/self_attention/attention_output/bias"
    for theirs, mine in (("ln_1", "self_attention_layer_norm"), ("ln_2", "feedforward_layer_norm")):
        yield f"{h}.{theirs}.weight", f"{k}/{mine}/gamma"
        yield f"{h}.{theirs}.bias", f"{k}/{mine}/beta"
    for theirs, mine in (("c_fc", "feedforward_intermediate_dense"), ("c_proj", "feedforward_output_dense")):
        yield f"{h}.mlp.{theirs}.weight", f"{k}/{mine}/kernel"
        yield f"{h}.mlp.{theirs}.bias", f"{k}/{mine}/bias"


def read_source(checkpoint: str, config_path: str | None, vocab_path: str | None):
    """-> (GptConfig, tensors, config path, vocab path)."""
    config_path = config_path or beside(checkpoint, CONFIG)
    config = config_from_json(read_json(config_path, "model config", "--config"), config_path)
    vocab_path = vocab_path or beside(checkpoint, "vocab.txt")
    if not os.path.exists(vocab_path) and os.path.exists(beside(checkpoint, "merges.txt")):
        raise ConversionError(f"{os.path.dirname(vocab_path)} has openai-gpt's BPE vocabulary (vocab.json, "
                              f"merges.txt), which this project's WordPiece tokenizer cannot use: give --vocab a "
                              f"WordPiece vocab.txt of {config.vocab_size} entries")
    return config, SafetensorsTensors(safetensors_files(checkpoint)), config_path, vocab_path


def load(model, config: GptConfig, tensors, source: str) -> list[str]:
    """Assigns the checkpoint to `model`; nothing is optional, so returns no fresh groups."""
    shapes = {v.path: tuple(v.shape) for v in model.weights}
    assign(model, from_hf(tensors, config, shapes, source))
    return []


def write(model, config: GptConfig, output: str, vocab, lower_case: bool) -> list[str]:
    """Writes `output/` for `OpenAIGPTLMHeadModel.from_pretrained` (`formats.check` passed); returns the files."""
    from safetensors.numpy import save_file

    os.makedirs(output, exist_ok=True)
    files = [os.path.join(output, name) for name in (WEIGHTS, CONFIG, "vocab.txt", "tokenizer_config.json")]
    save_file(to_hf(read_weights(model), config), files[0], metadata={"format": "pt"})
    _write_json(files[1], config_to_json(config))
    vocab.write(files[2])
    _write_json(files[3], {"tokenizer_class": "BertTokenizer", "do_lower_case": lower_case,
                           "model_max_length": config.max_position_embeddings})
    return files


def _write_json(path: str, payload: dict) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
        f.write("\n")
