"""The Model Garden BERT peer (`benchmarks/peers`): it stays independent of the project, and, installed from
PyPI into `.cache/peers/model_garden`, it trains on our tiny synthetic TFRecords: held-out masked-LM loss
starts at ln(vocabulary) and falls, and its answers depend on the context."""

import ast
import json
import math
import os
import subprocess
import sys

import pytest

from benchmarks.peers import model_garden
from tests.conftest import PROJECT_CACHE, ROOT
from tests.fixtures.training import write_dataset

RUNNER = os.path.join(ROOT, "benchmarks", "peers", "model_garden_bert.py")
PEER_IMPORTS = {"tensorflow", "tf_keras", "official", "orbit"}


def test_the_runner_imports_no_project_code():
    tree = ast.parse(open(RUNNER, encoding="utf-8").read())
    tops = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    tops |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert tops - PEER_IMPORTS <= set(sys.stdlib_module_names)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_model_garden_learns_on_our_tfrecords(tmp_path):
    path = model_garden.ensure_installed(PROJECT_CACHE)
    train = write_dataset(str(tmp_path / "train"), "bert", examples=256, seq=16, preds=4, vocab_size=40, seed=0)
    heldout = write_dataset(str(tmp_path / "heldout"), "bert", examples=64, seq=16, preds=4, vocab_size=40, seed=1)
    output = tmp_path / "mg.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([path, ROOT]))
    subprocess.run([sys.executable, RUNNER, "--train_data", train, "--eval_data", heldout, "--vocab_size", "40",
                    "--max_seq_length", "16", "--max_predictions_per_seq", "4", "--batch_size", "32",
                    "--train_steps", "100", "--warmup_steps", "10", "--learning_rate", "3e-3", "--dropout", "0",
                    "--eval_at", "0,100", "--eval_batches", "2", "--output", str(output)],
                   env=env, check=True, capture_output=True)
    report = json.loads(output.read_text())
    first, last = report["evals"]
    assert report["peer"].startswith("model_garden ")
    assert (first["step"], last["step"], last["tokens"]) == (0, 100, 100 * 32 * 16)
    assert abs(first["mlm_loss"] - math.log(40)) < 0.2
    assert last["mlm_loss"] < 0.7 * first["mlm_loss"] and last["mlm_accuracy"] > 0.2
    assert last["cpu_seconds"] > 0 and first["cpu_seconds"] == 0
    assert last["mlm_context_spread"] > 0.3  # its answers depend on the context (measured: 0.95)
