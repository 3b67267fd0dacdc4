"""The formats `models.convert` reads and writes, and what each can carry of a model's config.

An export is exact in its peer's own code, or refused: every field of a model family's config dataclass is
listed once per format that family can be written in, as

- `CARRIED`: written so that the peer computes what this project computes;
- `IGNORED`: does not change any output (it only initialises fresh weights), with the reason;
- `only(...)`: only those values can be expressed; any other is refused in one line naming the field.

`check(fmt, kind, config)` applies the table before anything is read or written and names every field it
refuses. A field missing from a table is refused too, and `tests/models/test_convert_formats.py` fails when a
config dataclass gains a field that a table does not list: a new setting is decided here once, not
discovered by a user.

Example:
    check("hf_bert", "bert", BertConfig(normalize_first=True))
    # ConversionError: --to hf_bert cannot carry this bert model's normalize_first=True (it needs False:
    # HuggingFace's BertForPreTraining has post-layer-norm blocks only); nothing was written
"""

import dataclasses
from typing import Callable

from models.convert.common import ConversionError

# format -> the model kind it holds
FORMATS = {"bert_tf1": "bert", "hf_bert": "bert", "keras_hub": "bert", "hf_gpt": "gpt", "bilm_hdf5": "bilm"}


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a format does with one config field. `ok(config, value)` says whether the value can be written
    (None: any value); `needs` names the values it can (for the error); `why` says why, or why it does not
    matter (`IGNORED`)."""

    ok: Callable | None = None
    needs: str = ""
    why: str = ""


CARRIED = Rule()


def IGNORED(why: str) -> Rule:  # noqa: N802 - reads as a constant in the tables
    return Rule(why=why)


def only(*values, why: str) -> Rule:
    return Rule(lambda config, value: value in values, " or ".join(repr(v) for v in values), why)


def four_times_hidden(why: str) -> Rule:
    return Rule(lambda config, value: value == 4 * config.hidden_size, "4 x hidden_size", why)


_POST_LN_BERT = "HuggingFace's BertForPreTraining has post-layer-norm blocks only"
_TF1_GELU = ("google-research's modeling.py has gelu (the tanh approximation) and relu; an exact GELU would run as "
             "the approximation")
_KH_GELU = "keras-hub's BertBackbone always uses the tanh GELU (gelu_approximate)"
_KH_EPS = "keras-hub's BertBackbone fixes its layer norms' epsilon at 1e-12"
_FRESH_ONLY = "it only initialises fresh weights"

TABLES = {
    ("hf_bert", "bert"): {
        "vocab_size": CARRIED, "num_layers": CARRIED, "hidden_size": CARRIED, "num_heads": CARRIED,
        "intermediate_size": CARRIED, "hidden_act": only("gelu", "gelu_approximate", "relu",
                                                         why="HuggingFace's names: gelu, gelu_new, relu"),
        "dropout": CARRIED, "max_position_embeddings": CARRIED, "type_vocab_size": CARRIED,
        "initializer_range": CARRIED, "layer_norm_epsilon": CARRIED,
        "tie_output": CARRIED,  # tie_word_embeddings, and cls.predictions.decoder.* when untied
        "normalize_first": only(False, why=_POST_LN_BERT),
        "next_sentence": only(True, why="HuggingFace's BertForPreTraining has a next-sentence head, which a "
                                        "masked-LM-only model has not learned"),
    },
    ("bert_tf1", "bert"): {
        "vocab_size": CARRIED, "num_layers": CARRIED, "hidden_size": CARRIED, "num_heads": CARRIED,
        "intermediate_size": CARRIED, "hidden_act": only("gelu_approximate", "relu", why=_TF1_GELU),
        "dropout": CARRIED, "max_position_embeddings": CARRIED, "type_vocab_size": CARRIED,
        "initializer_range": CARRIED,
        "layer_norm_epsilon": only(1e-12, why="google-research's layer_norm fixes epsilon at 1e-12"),
        "tie_output": only(True, why="google-research's masked-LM output is the word embeddings: its checkpoint "
                                     "has no output matrix of its own, and run_pretraining.py would read the "
                                     "embeddings (use --to hf_bert)"),
        "normalize_first": only(False, why="google-research's BERT has post-layer-norm blocks only"),
        "next_sentence": only(True, why="run_pretraining.py reads and trains a next-sentence head, which a "
                                        "masked-LM-only model has not learned"),
    },
    ("keras_hub", "bert"): {
        "vocab_size": CARRIED, "num_layers": CARRIED, "hidden_size": CARRIED, "num_heads": CARRIED,
        "intermediate_size": CARRIED, "hidden_act": only("gelu_approximate", why=_KH_GELU),
        "dropout": CARRIED, "max_position_embeddings": CARRIED, "type_vocab_size": CARRIED,
        "initializer_range": IGNORED(_FRESH_ONLY),
        "layer_norm_epsilon": only(1e-12, why=_KH_EPS),
        "tie_output": IGNORED("the preset holds the backbone, not the masked-LM head"),
        "normalize_first": only(False, why="keras-hub's BertBackbone has post-layer-norm blocks only"),
        "next_sentence": IGNORED("the preset holds the backbone, not the pretraining heads"),
    },
    ("hf_gpt", "gpt"): {
        "vocab_size": CARRIED, "num_layers": CARRIED, "hidden_size": CARRIED, "num_heads": CARRIED,
        "intermediate_size": four_times_hidden("openai-gpt's MLP is 4 x n_embd wide, with no setting"),
        "hidden_act": only("gelu_approximate", "relu",
                           why="openai-gpt's afn gelu is the tanh approximation (gelu_new); it has no exact GELU"),
        "dropout": CARRIED, "max_position_embeddings": CARRIED, "initializer_range": CARRIED,
        "layer_norm_epsilon": CARRIED,
        "output_bias": only(False, why="OpenAIGPTLMHeadModel's lm_head has no bias"),
        "tie_output": CARRIED,  # tie_word_embeddings, and lm_head.weight when untied
        "normalize_first": only(False, why="openai-gpt's blocks are post-layer-norm (GPT-1), with no final "
                                           "layer norm"),
    },
    ("bilm_hdf5", "bilm"): None,  # bilm-tf's options.json carries every BiLMConfig field (models/convert/bilm.py)
}

# (format, kind) pairs that no table can make work, with the reason.
NO_FAMILY = {
    ("keras_hub", "gpt"): "keras-hub has no family with GPT-1's post-layer-norm blocks (GPT2Backbone is pre-LN "
                          "with a final layer norm, and its tokenizer is byte-level BPE, not WordPiece): use "
                          "--to hf_gpt",
    ("keras_hub", "bilm"): "keras-hub has no ELMo / character-CNN biLM family: use --to bilm_hdf5",
}


def check(fmt: str, kind: str, config) -> None:
    """Raises `ConversionError` naming every field of `config` that format `fmt` cannot carry (one line)."""
    if (fmt, kind) in NO_FAMILY:
        raise ConversionError(f"--to {fmt} cannot hold a {kind} model: {NO_FAMILY[fmt, kind]}")
    if FORMATS.get(fmt) != kind:
        raise ConversionError(f"this is a {kind} model; {fmt} is a format for {FORMATS.get(fmt)}")
    table = TABLES[fmt, kind]
    if table is None:
        return
    refused = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        rule = table.get(field.name)
        if rule is None:
            refused.append(f"{field.name}={value!r} (a field this writer does not know)")
        elif rule.ok is not None and not rule.ok(config, value):
            refused.append(f"{field.name}={value!r} (it needs {rule.needs}: {rule.why})")
    if refused:
        raise ConversionError(f"--to {fmt} cannot carry this {kind} model's {'; '.join(refused)}; nothing was "
                              f"written")
