"""docs/python.md runs as written: its ```python blocks, in order, in one namespace, in an empty working
folder, so the guide to the Python API can never fall behind the code. Then what the blocks made is checked:
every stage's result, and the files the commands would have written."""

import os
import re

import pytest

from tests.conftest import ROOT

GUIDE = os.path.join(ROOT, "docs", "python.md")


def code_blocks(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```", f.read(), re.S | re.M)


def test_the_guide_walks_every_stage():
    code = "\n".join(code_blocks(GUIDE))
    for call in ("clean(CleanJob(", "vocab(VocabJob(", "pretraining_data(PretrainingDataJob(", "train(TrainJob(",
                 "evaluate(EvaluateJob(", "export(ExportJob(", "hub.KerasLayer(", "hub.load(",
                 "finetune(FinetuneJob(", "features(FeaturesJob(", "ModelServer(", "RestClient("):
        assert call in code, f"docs/python.md has no {call}"


@pytest.mark.slow  # every stage once at toy sizes: 80 CPU-s on 2 AVX2 cores, within the default budget
def test_the_guide_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", ROOT)  # for any worker process a Beam runner starts
    namespace = {"__name__": "__guide__"}
    for number, block in enumerate(code_blocks(GUIDE), 1):
        exec(compile(block, f"docs/python.md, python block {number}", "exec"), namespace)  # noqa: S102
    ns = namespace
    assert ns["learned"].size > 100 and ns["data"].metadata.examples > 16
    assert ns["trained"].step == 4 and ns["trained"].stopped_by_signal is None
    assert os.path.exists("runs/bert/config.json") and os.path.exists("runs/bert/metrics.json")
    assert ns["scores"].step == 4 and 0.0 <= ns["scores"].metrics["mlm_accuracy"] <= 1.0
    assert ns["exported"].version == 1 and os.path.isdir(os.path.join(ns["exported"].serving, "variables"))
    assert set(ns["exported"].hub) == {"encoder", "preprocessor"}
    assert ns["outputs"]["sequence_output"].shape == (1, 32, 32)
    assert os.path.exists(os.path.join("finetuned", "metrics.json")) and "accuracy" in ns["tuned"].metrics
    assert ns["vectors"].sentences == 33 and os.path.exists("features.npz.json")
    assert len(ns["answer"]["predictions"][0]["pooled_output"]) == 32
