"""BERT as a keras-hub preset folder, both ways: what `keras_hub.models.BertBackbone.from_preset(path)` and
`BertTextClassifier.from_preset(path, num_classes=...)` load, written and read with keras-hub's own code.

The folder (keras-hub's layout, written by its `save_to_preset`): `config.json` (the `BertBackbone` config),
`model.weights.h5`, `metadata.json` (keras and keras-hub versions, parameter count, the tasks it serves),
`preprocessor.json` (a `BertTextClassifierPreprocessor` at the trained sequence length), `tokenizer.json`
and `assets/tokenizer/vocabulary.txt` (a `BertTokenizer`: lower-case and strip accents when uncased).

keras-hub's `BertBackbone` has this project's encoder layer for layer, with the same weight paths
(`token_embedding/embeddings`, `transformer_layer_0/self_attention_layer/query/kernel`, ..., `pooled_dense`),
so weights move by path. What it fixes, and `formats.TABLES["keras_hub", "bert"]` therefore requires: the
tanh GELU, layer norms' epsilon 1e-12, post-layer-norm blocks. The heads are not written: keras-hub's
`BertMaskedLM` head has an exact GELU and a layer norm epsilon of 1e-5 hard-coded while its backbone has the
tanh GELU, so no model here (one `hidden_act` for both) has outputs it can reproduce; keras-hub has no
next-sentence head. A user calling `BertMaskedLM.from_preset` on the folder gets a fresh masked-LM head.

Reading (`--from keras_hub`) takes a Keras preset folder of a `BertBackbone` (a HuggingFace folder is
refused: use `--from hf_bert`, which is exact where keras-hub's own HuggingFace loader replaces an exact GELU
with the tanh one); the heads start fresh, as from a HuggingFace `BertModel`.
"""

import dataclasses
import json
import os

from models.bert import BertConfig
from models.convert.common import ConversionError, assign, read_json, read_weights, unreadable

BACKBONE_CLASS = "BertBackbone"
VOCAB_ASSET = os.path.join("assets", "tokenizer", "vocabulary.txt")
FRESH = ["mlm", "nsp"]  # what an imported preset leaves freshly initialised (the pooler comes with it)
# What `--to keras_hub` leaves out, and why (printed with the result).
NOT_WRITTEN = {"mlm": "keras-hub's BertMaskedLM head has an exact GELU and layer norm epsilon 1e-5 fixed, beside a "
                      "tanh-GELU backbone: it cannot compute this model's head",
               "nsp": "keras-hub has no next-sentence head"}


def write(model, config: BertConfig, output: str, vocab, lower_case: bool, max_seq_length: int) -> list[str]:
    """Writes the preset folder `output` from the pretrainer `model` (`formats.check` passed); returns the
    files written."""
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers, num_heads=config.num_heads,
        hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size)
    ours = read_weights(model)
    theirs = [v.path for v in backbone.weights]
    missing = [p for p in theirs if p not in ours]
    if missing:  # a layer renamed on either side: a bug here, not the user's
        raise AssertionError(f"keras-hub's BertBackbone has weights this model lacks: {missing[:3]}")
    assign(backbone, {p: ours[p] for p in theirs})
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=list(vocab.tokens), lowercase=lower_case,
                                               strip_accents=lower_case)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=max_seq_length)
    os.makedirs(output, exist_ok=True)
    backbone.save_to_preset(output)
    preprocessor.save_to_preset(output)
    return sorted(os.path.join(root, f) for root, _, files in os.walk(output) for f in files)


@dataclasses.dataclass(frozen=True)
class Preset:
    """A keras-hub BERT preset as read: its config, backbone weights `{keras path: array}`, files, casing and
    the preprocessor's sequence length (None when it has none)."""

    config: BertConfig
    arrays: dict
    config_path: str
    vocab_path: str
    lower_case: bool | None
    sequence_length: int | None


def read(folder: str) -> Preset:
    """Reads a keras-hub `BertBackbone` preset folder with keras-hub's loader."""
    import keras_hub

    if not os.path.isdir(folder):
        raise ConversionError(f"--from keras_hub takes a preset folder (config.json, model.weights.h5); "
                              f"{folder} is not a folder")
    config_path = os.path.join(folder, "config.json")
    payload = read_json(config_path, "keras-hub preset config", "--checkpoint")
    if "model_type" in payload:
        raise ConversionError(f"{folder} is a HuggingFace folder, not a keras-hub preset: use --from hf_bert")
    name = payload.get("class_name") or str(payload.get("registered_name", "?"))
    if name != BACKBONE_CLASS:
        raise ConversionError(f"{config_path} holds a {name} preset; --from keras_hub reads {BACKBONE_CLASS} only")
    try:
        backbone = keras_hub.models.BertBackbone.from_preset(folder)
    except (OSError, ValueError, KeyError) as e:  # h5py raises OSError for a cut file
        raise unreadable(os.path.join(folder, "model.weights.h5"), e) from None
    c = payload["config"]
    config = BertConfig(vocab_size=c["vocabulary_size"], num_layers=c["num_layers"], hidden_size=c["hidden_dim"],
                        num_heads=c["num_heads"], intermediate_size=c["intermediate_dim"],
                        hidden_act="gelu_approximate", dropout=c.get("dropout", 0.1),
                        max_position_embeddings=c.get("max_sequence_length", 512),
                        type_vocab_size=c.get("num_segments", 2), layer_norm_epsilon=1e-12)
    return Preset(config, read_weights(backbone), config_path, os.path.join(folder, VOCAB_ASSET),
                  _saved_config_value(folder, "tokenizer.json", "lowercase"),
                  _saved_config_value(folder, "preprocessor.json", "sequence_length"))


def _saved_config_value(folder: str, name: str, key: str):
    """`key` of the config that keras-hub saved as `folder/name` (the tokenizer's, the preprocessor's); None
    when the file or the key is absent."""
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f).get("config", {}).get(key)


def load(model, preset: Preset) -> list[str]:
    """Assigns the backbone's weights to the pretrainer `model` by path; returns the groups left fresh."""
    shapes = {v.path: tuple(v.shape) for v in model.weights}
    for path, array in preset.arrays.items():
        if path not in shapes:
            raise ConversionError(f"{preset.config_path}: the preset holds {path}, which this project's BERT "
                                  f"does not have")
        if shapes[path] != array.shape:  # a config.json that does not match its weights file
            raise ConversionError(f"the config does not match the weights: {path} in {preset.config_path} has "
                                  f"shape {list(array.shape)}, the config gives {list(shapes[path])}")
    assign(model, preset.arrays)
    return list(FRESH)
