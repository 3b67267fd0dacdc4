"""The fine-tuning benchmark's table and its pieces that run without models: rows, gains, the JSON writer
(`benchmarks.lib.gain_table`), the arms of each task and the classic baselines on a tiny fixture."""

import json

import pytest

from benchmarks.downstream import finetune_gain
from benchmarks.lib import classic_baselines
from benchmarks.lib import gain_table
from downstream.finetune import task_data

ROWS = [
    gain_table.Row("sst2", "-", "majority", "majority", "accuracy", (0.5,), (), {"label": "1"}),
    gain_table.Row("sst2", "bert", "pretrained", "cls_head", "accuracy", (0.80, 0.82, 0.81), (1, 2, 3),
                   {"learning_rate": 1e-3, "epochs": [3, 2, 4], "grid": [3e-4, 1e-3]}, 3.0),
    gain_table.Row("sst2", "bert", "random", "cls_head", "accuracy", (0.70, 0.74, 0.72), (1, 2, 3),
                   {"learning_rate": 3e-4, "epochs": [5, 5, 4], "grid": [3e-4, 1e-3]}, 2.5),
]


def test_rows_summarise_their_seeds_and_gain_over_their_reference():
    pretrained, random = ROWS[1], ROWS[2]
    assert pretrained.mean == pytest.approx(0.81) and pretrained.stderr == pytest.approx(0.01 / 3 ** 0.5)
    assert ROWS[0].stderr is None
    assert gain_table.reference_arm(pretrained) == ("bert", "random")
    assert gain_table.gain(pretrained, random) == pytest.approx((0.09, (0.01 ** 2 / 3 + 0.02 ** 2 / 3) ** 0.5))
    elmo = gain_table.Row("ud_pos", "bilm", "pretrained", "elmo_bilstm", "accuracy", (0.9, 0.91), (1, 2))
    assert gain_table.reference_arm(elmo) == ("-", "random_embeddings")
    with pytest.raises(ValueError, match="one score per seed"):
        gain_table.Row("sst2", "bert", "random", "cls_head", "accuracy", (0.7,), (1, 2))
    with pytest.raises(ValueError, match="task must be one of"):
        gain_table.Row("mnli", "bert", "random", "cls_head", "accuracy", (0.7,))


def test_the_writer_writes_the_documented_object(tmp_path):
    path = str(tmp_path / "finetune_gain_table.json")
    gain_table.write(path, ROWS, "abc1234", "Some CPU, AVX2 (no AVX-512), 2 cores", "python -m x --quick")
    with open(path) as f:
        table = json.load(f)
    assert set(table) == {"commit", "machine", "command", "rows"} and table["commit"] == "abc1234"
    row = table["rows"][1]
    assert {"task", "model", "arm", "task_model", "metric", "mean", "stderr", "seeds", "chosen",
            "cpu_minutes"} <= set(row)
    assert (row["task"], row["model"], row["arm"], row["task_model"]) == ("sst2", "bert", "pretrained", "cls_head")
    assert row["mean"] == pytest.approx(0.81) and row["seeds"] == [1, 2, 3] and row["cpu_minutes"] == 3.0
    assert row["chosen"] == {"learning_rate": 1e-3, "epochs": [3, 2, 4], "grid": [3e-4, 1e-3]}
    assert table["rows"][0]["stderr"] is None and table["rows"][0]["seeds"] == []
    printed = gain_table.format_table(ROWS)
    assert "+0.0900 ± 0.0129 vs random" in printed and "learning_rate=0.001 epochs=3,2,4" in printed


def test_each_task_gets_its_arms():
    sst2 = finetune_gain.arms("sst2", ["bert", "gpt", "bilm", "minilm"], ["pretrained", "random", "keras_hub_peer",
                                                                         "baselines"])
    assert [(a.model, a.arm) for a in sst2] == [
        ("bert", "pretrained"), ("bert", "random"), ("bert", "keras_hub_peer"), ("gpt", "pretrained"),
        ("gpt", "random"), ("bilm", "pretrained"), ("bilm", "random"), ("-", "random_embeddings"),
        ("minilm", "pretrained")]
    assert sst2[7].task_model("sst2") == "no_bilm_bilstm" and sst2[7].extra == ("elmo=false",)
    pos = finetune_gain.arms("ud_pos", ["bert", "gpt", "bilm"], ["pretrained", "random"])
    assert [(a.model, a.arm) for a in pos] == [("bert", "pretrained"), ("bert", "random"), ("bilm", "pretrained"),
                                               ("bilm", "random")]  # no GPT tagging head
    quick = finetune_gain.arms("sst2", ["bert", "gpt", "bilm"], ["pretrained", "random", "baselines"], quick=True)
    assert ("bilm", "random") not in [(a.model, a.arm) for a in quick] and len(quick) == 6
    levers = finetune_gain.arms("sst2", ["bert"], ["pretrained", "random"],
                                variants=finetune_gain.parse_variants("cls_pooler:bert_pooling=cls,dropout=0"))
    assert [(a.arm, a.start, a.extra) for a in levers[2:]] == [
        ("pretrained_cls_pooler", "pretrained", ("bert_pooling=cls", "dropout=0")),
        ("random_cls_pooler", "random", ("bert_pooling=cls", "dropout=0"))]
    lever = gain_table.Row("sst2", "bert", "pretrained_cls_pooler", "cls_head", "accuracy", (0.8,))
    assert gain_table.reference_arm(lever) == ("bert", "random_cls_pooler")
    quick = finetune_gain.parse_args(["--demo_dir", "d", "--quick"])
    assert (quick.tasks, quick.seeds, quick.rates) == ("sst2", "1", "0.0003,0.001")


def test_the_classic_baselines_choose_on_validation_only():
    words = {"1": ["good", "great", "fine", "nice"], "0": ["bad", "awful", "poor", "dull"]}
    train = [task_data.TextExample((f"a {w} film {i}",), label, i) for i in range(60)
             for label, ws in words.items() for w in ws[:3]]
    split = classic_baselines.splits(train, 0.2)
    dev = [task_data.TextExample((f"a {ws[3]} film",), label) for label, ws in words.items()]
    found = classic_baselines.bow_logreg(split.train, split.validation, dev, c_grid=(0.01, 1.0))
    assert found["chosen"]["C"] in (0.01, 1.0) and found["chosen"]["validation_score"] == 1.0
    assert classic_baselines.majority(split.train, dev)["score"] == 0.5
    tagged = [task_data.TaggedSentence(("the", "bank"), ("DET", "NOUN")),
              task_data.TaggedSentence(("they", "bank"), ("PRON", "VERB")),
              task_data.TaggedSentence(("the", "bank"), ("DET", "NOUN"))]
    dev_tags = [task_data.TaggedSentence(("the", "river", "bank"), ("DET", "NOUN", "NOUN"))]
    found = classic_baselines.most_frequent_tag(tagged, dev_tags)
    assert found["score"] == pytest.approx(2 / 3)  # "river" unseen: the most frequent tag, DET; wrong
    assert found["chosen"] == {"known_word_accuracy": 1.0, "unknown_word_share": pytest.approx(0.3333, abs=1e-4)}
