"""The arithmetic of the vector and time-to-quality benchmarks on made-up curves and scores: where a loss
curve crosses a target (linear between evaluations, or never), means and standard errors over seeds, and the
best contextual layer (the static layer never counts)."""

import math

import pytest

from benchmarks import time_to_quality, vector_parity

CURVE = [{"step": 0, "mlm_loss": 9.0, "cpu_seconds": 0.0}, {"step": 50, "mlm_loss": 7.0, "cpu_seconds": 100.0},
         {"step": 100, "mlm_loss": 6.0, "cpu_seconds": 200.0}]


def test_a_curve_reaches_a_target_between_evaluations():
    assert time_to_quality.cpu_to_reach(CURVE, 6.5) == pytest.approx(150.0)
    assert time_to_quality.cpu_to_reach(CURVE, 7.0) == pytest.approx(100.0)
    assert time_to_quality.cpu_to_reach(CURVE, 9.5) == 0.0  # reached before training
    assert time_to_quality.cpu_to_reach(CURVE, 5.9) is None


def test_the_ratio_is_ours_over_the_peers(capsys):
    peer = [{"step": 0, "mlm_loss": 9.0, "cpu_seconds": 0.0}, {"step": 100, "mlm_loss": 6.5, "cpu_seconds": 300.0}]
    ratios = time_to_quality.report({"Model Garden, its default recipe": peer, "ours": CURVE})
    assert ratios["Model Garden, its default recipe"]["ratio"] == pytest.approx(150.0 / 300.0)
    assert "ratio 0.500" in capsys.readouterr().out


def test_mean_and_standard_error_over_seeds():
    mean, se = vector_parity.mean_se([0.30, 0.34, 0.32])
    assert mean == pytest.approx(0.32) and se == pytest.approx(0.02 / math.sqrt(3))
    assert math.isnan(vector_parity.mean_se([0.3])[1])


def test_the_best_contextual_layer_leaves_the_static_one_out():
    summary = {"layers": {"embeddings": 0.45, "layer_1": 0.33, "sum_last4": 0.36}, "static_layer": "embeddings"}
    assert vector_parity.best_contextual(summary) == 0.36
