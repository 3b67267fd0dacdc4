"""What each `models.convert --to` format can carry (`models/convert/formats.py`): every field of every model
config is decided for every format that holds the family, and each setting a format cannot express is
refused in one line naming the field, before anything is read or written.

A refusal needs only config.json (the check runs before the weights are read), so these model_dirs hold no
checkpoint: nothing here builds a model.
"""

import dataclasses
import os

import pytest

from models import bert, families, gpt
from models.config import TrainConfig
from models.convert import cli as convert
from models.convert import formats
from tests.fixtures.training import tiny_vocabulary


def test_every_config_field_is_decided_for_every_format():
    for (fmt, kind), table in formats.TABLES.items():
        assert formats.FORMATS[fmt] == kind
        if table is None:
            continue
        fields = {f.name for f in dataclasses.fields(families.module(kind).TASK_CLASS.config_class)}
        assert set(table) == fields, (f"{fmt} does not decide {sorted(fields - set(table))} "
                                      f"(or lists unknown {sorted(set(table) - fields)}): add them to "
                                      f"models/convert/formats.py TABLES")
        for name, rule in table.items():
            assert rule.ok is None or (rule.needs and rule.why), (fmt, name)
    assert set(formats.FORMATS.items()) == set(formats.TABLES)  # every format has its table


def _config_only_dir(folder, kind: str, **fields) -> str:
    """config.json and vocab.txt of a model_dir, no checkpoint."""
    vocab = tiny_vocabulary(40)
    config = families.module(kind).TASK_CLASS.config_class(**{**fields, "vocab_size": len(vocab)})
    data = {"train_data": "none", "max_seq_length": 16, "max_predictions_per_seq": 4, "lower_case": True,
            "vocab_size": len(vocab), "vocab_sha256": vocab.sha256, "special_ids": vocab.special_ids()}
    families.write_config(str(folder), kind, "random", config, TrainConfig(), data)
    vocab.write(os.path.join(str(folder), "vocab.txt"))
    return str(folder)


SMALL = {"num_layers": 1, "hidden_size": 8, "num_heads": 2, "intermediate_size": 32}
# (format, kind, config fields that format cannot carry, words the one error line must hold)
REFUSALS = [
    ("hf_bert", "bert", {"normalize_first": True}, ["normalize_first=True", "post-layer-norm"]),
    ("bert_tf1", "bert", {"normalize_first": True}, ["normalize_first=True"]),
    ("bert_tf1", "bert", {"tie_output": False}, ["tie_output=False", "--to hf_bert"]),
    ("bert_tf1", "bert", {"hidden_act": "gelu"}, ["hidden_act='gelu'", "tanh approximation"]),
    ("bert_tf1", "bert", {"layer_norm_epsilon": 1e-6}, ["layer_norm_epsilon=1e-06", "1e-12"]),
    ("keras_hub", "bert", {"hidden_act": "gelu"}, ["hidden_act='gelu'", "BertBackbone"]),
    ("keras_hub", "bert", {"hidden_act": "relu"}, ["hidden_act='relu'"]),
    ("keras_hub", "bert", {"layer_norm_epsilon": 1e-5}, ["layer_norm_epsilon=1e-05"]),
    ("keras_hub", "bert", {"normalize_first": True}, ["normalize_first=True"]),
    ("hf_gpt", "gpt", {"output_bias": True}, ["output_bias=True", "lm_head has no bias"]),
    ("hf_gpt", "gpt", {"normalize_first": True}, ["normalize_first=True", "post-layer-norm"]),
    ("hf_gpt", "gpt", {"hidden_act": "gelu"}, ["hidden_act='gelu'", "gelu_new"]),
    ("hf_gpt", "gpt", {"intermediate_size": 24}, ["intermediate_size=24", "4 x hidden_size"]),
    # the demo's gpt_tiny (untied with an output bias): the bias is what openai-gpt cannot hold
    ("hf_gpt", "gpt", dict(gpt.PRESETS["gpt_tiny"], num_layers=1), ["output_bias=True"]),
    ("keras_hub", "gpt", {}, ["GPT-1's post-layer-norm", "--to hf_gpt"]),
    ("keras_hub", "bilm", None, ["ELMo", "--to bilm_hdf5"]),
    ("hf_bert", "gpt", {}, ["hf_bert is a format for bert"]),
]


@pytest.mark.parametrize("fmt,kind,fields,words", REFUSALS,
                         ids=[f"{r[0]}-{r[1]}-{'-'.join(r[2]) if r[2] else 'family'}" for r in REFUSALS])
def test_what_a_format_cannot_carry_is_refused_in_one_line(fmt, kind, fields, words, tmp_path, capsys):
    if kind == "bilm":
        from models.bilm import PRESETS
        model_dir = _config_only_dir(tmp_path / "md", kind, **PRESETS["bilm_tiny"])
    else:
        model_dir = _config_only_dir(tmp_path / "md", kind, **{**SMALL, **fields})
    assert convert.main(["--to", fmt, "--model_dir", model_dir, "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]
    assert not os.path.exists(tmp_path / "out")  # nothing written


def test_several_fields_are_named_together():
    config = bert.BertConfig(**SMALL, hidden_act="gelu", tie_output=False)
    with pytest.raises(formats.ConversionError) as raised:
        formats.check("bert_tf1", "bert", config)
    assert "hidden_act='gelu'" in str(raised.value) and "tie_output=False" in str(raised.value)


def test_the_presets_we_train_are_written_where_they_can_be():
    """The decisions for the shapes this project trains, in one place (tiny/mini untied, base tied)."""
    expected = {  # preset -> formats that can hold it
        "bert_tiny": {"hf_bert", "keras_hub"}, "bert_mini": {"hf_bert", "keras_hub"},
        "bert_base": {"hf_bert", "keras_hub", "bert_tf1"},
        "gpt_tiny": set(), "gpt_base": {"hf_gpt"}, "gpt_gpt1": {"hf_gpt"},
    }
    for preset, allowed in expected.items():
        kind = preset.split("_")[0]
        config = families.preset_config(kind, preset, vocab_size=40)
        can = set()
        for fmt, holds in formats.FORMATS.items():
            try:
                formats.check(fmt, kind, config)
                can.add(fmt)
            except formats.ConversionError:
                pass
        assert can == allowed, (preset, can)
