"""`downstream.finetune`'s job and tasks: the flags parse once into a frozen `FinetuneJob`, the same object
the Python API takes; each task is one object, looked up by name, that names a head for every module family
it supports; the API refuses bad task data and a bad module folder in one line before anything loads. No
exported module needed (fast)."""

import dataclasses

import pytest

from commands.user_errors import UserError
from downstream.finetune import FinetuneConfig, FinetuneJob, finetune
from downstream.finetune import cli
from downstream.finetune import heads
from downstream.finetune import tasks


def test_the_flags_parse_once_into_the_job_the_python_api_takes(tmp_path):
    args = cli.parse_args(["--task", "pair", "--module", "export/bert", "--train", "t.tsv", "--eval", "e.tsv",
                           "--output_dir", "out", "--set", "epochs=2", "--set", "gpt_pair=similarity", "--overwrite"])
    job = cli.job_from_args(args)
    assert job == FinetuneJob(task="pair", module="export/bert", train="t.tsv", eval="e.tsv", output_dir="out",
                              config=FinetuneConfig(epochs=2, gpt_pair="similarity"), overwrite=True)
    assert job.source == {"--module": "export/bert"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.task = "classify"


def test_a_job_names_a_known_task_and_exactly_one_module_source():
    with pytest.raises(UserError, match="unknown task 'ner': use one of classify, pair, tag, squad, choice"):
        FinetuneJob(task="ner", module="m", train="t", eval="e", output_dir="o")
    for sources in ({}, {"module": "m", "model_dir": "r"}):
        with pytest.raises(UserError, match="give one of module"):
            FinetuneJob(task="tag", train="t", eval="e", output_dir="o", **sources)
    assert FinetuneJob(task="tag", model_dir="r", train="t", eval="e", output_dir="o").source == {"--model_dir": "r"}


def test_each_task_names_a_head_for_each_family_it_supports():
    assert tasks.NAMES == ("classify", "pair", "tag", "squad", "choice")
    by_family = {kind: [t.name for t in tasks.TASKS.values() if kind in t.families] for kind in ("bert", "gpt", "bilm")}
    assert by_family == {"bert": ["classify", "pair", "tag", "squad", "choice"], "gpt": ["classify", "pair", "choice"],
                         "bilm": ["classify", "pair", "tag"]}
    for task in tasks.TASKS.values():
        assert tasks.get(task.name) is task
        assert all(callable(getattr(heads, name)) for name in task.heads.values()), task.name
    assert tasks.get("squad").outputs == ("start_logits", "end_logits") and tasks.get("tag").outputs == ("logits",)
    assert tasks.get("tag").refusal("gpt", by_family["gpt"]) == (
        "task 'tag' is not available for a gpt module (it supports classify, pair, choice)")


def test_each_text_task_reads_its_texts_as_the_family_does():
    texts = [("a", "b", "c"), ("d", "e", "f")]
    assert tasks.get("classify").sequences("bert", texts, "entail") == [[("a",), ("d",)]]
    assert tasks.get("pair").sequences("bert", texts, "entail") == [[("a", "b"), ("d", "e")]]
    assert tasks.get("pair").sequences("gpt", texts, "similarity") == [[("a", "b"), ("d", "e")],
                                                                       [("b", "a"), ("e", "d")]]
    assert tasks.get("pair").sequences("bilm", texts, "entail") == [[("a",), ("d",)], [("b",), ("e",)]]
    assert tasks.get("choice").sequences("gpt", texts, "entail") == [[("a", "b"), ("d", "e")], [("a", "c"), ("d", "f")]]


def test_the_python_api_refuses_bad_data_and_a_missing_module_before_anything_loads(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("pos\tgood film\nneg\tbad film\n")
    job = FinetuneJob(task="classify", module=str(tmp_path / "nope"), train=str(train), eval=str(tmp_path / "e.tsv"),
                      output_dir=str(tmp_path / "out"))
    with pytest.raises(UserError, match=r"^--eval .*e\.tsv: no such file$"):
        finetune(job)
    with pytest.raises(UserError, match=r"^--module .*nope: no such folder \(give an export dir"):
        finetune(dataclasses.replace(job, eval=str(train)))
    assert not (tmp_path / "out").exists()
