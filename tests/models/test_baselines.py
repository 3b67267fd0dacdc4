"""The context-free baselines (`models.training.baselines`) and the learning-parity runs' independent pieces
(`benchmarks.lib.parity_runs`): exact values on tiny inputs, and agreement with the product's own formulas."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.lib import parity_runs
from models.objective import weighted_cross_entropy
from models.training import baselines, optimization
from tests.fixtures.training import write_dataset


def test_context_free_baselines_exact():
    train = np.array([1, 1, 1, 2, 3])
    heldout = np.array([1, 2, 0])
    result = baselines.context_free(train, heldout, vocab_size=4)
    counts = np.array([0, 3, 1, 1]) + 1.0
    p = counts / counts.sum()
    expected = -np.mean(np.log(p[[1, 2, 0]]))
    assert result["unigram_loss"] == pytest.approx(expected)
    assert result["unigram_perplexity"] == pytest.approx(math.exp(expected))
    assert result["most_frequent_accuracy"] == pytest.approx(1 / 3) and result["targets"] == 3


def test_baselines_cli_reads_the_evaluated_batches(tmp_path, capsys):
    train = write_dataset(str(tmp_path / "train"), "gpt", examples=32, seq=8, content="zipf_markov")
    heldout = write_dataset(str(tmp_path / "heldout"), "gpt", examples=32, seq=8, content="zipf_markov", seed=1)
    assert baselines.main(["--train_data", train, "--eval_data", heldout, "--batch_size", "4", "--batches", "2"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["targets"] == 2 * 4 * 8  # two batches of four 8-token windows
    assert 0 <= result["most_frequent_accuracy"] < 1 and result["unigram_perplexity"] > 1


def test_baselines_cli_names_a_missing_input(tmp_path, capsys):
    assert baselines.main(["--train_data", str(tmp_path / "nothing/*.tfrecord"), "--eval_data", "x"]) == 2
    assert "nothing" in capsys.readouterr().err


def test_the_parity_schedule_is_the_trainers():
    for step in (0, 3, 10, 11, 50, 99, 100, 120):
        ours = float(optimization.warmup_decay_rate(step, 2e-3, 10, 100))
        assert float(parity_runs.linear_rate(step, 2e-3, 10, 100)) == pytest.approx(ours, abs=1e-9), step


def test_the_parity_metrics_are_the_trainers():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 11)).astype(np.float32)
    labels = rng.integers(0, 11, (3, 5))
    weights = (rng.random((3, 5)) > 0.3).astype(np.float32)
    ours = [float(t) for t in weighted_cross_entropy(tf.constant(labels), tf.constant(logits), tf.constant(weights))]
    theirs = parity_runs.numpy_metrics(logits, labels, weights)
    np.testing.assert_allclose(theirs, ours, rtol=1e-5)
