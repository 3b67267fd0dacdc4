"""The arithmetic of the vector and time-to-quality benchmarks on made-up curves and scores: where a loss
curve crosses a target (linear between evaluations, or never), means and standard errors over seeds, and the
best contextual layer (the static layer never counts)."""

import math

import pytest

from benchmarks.lib.stats import gain, mean_se
from benchmarks.training import time_to_quality, vector_parity

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
    mean, se = mean_se([0.30, 0.34, 0.32])
    assert mean == pytest.approx(0.32) and se == pytest.approx(0.02 / math.sqrt(3))
    assert math.isnan(mean_se([0.3])[1])


def test_a_gain_combines_both_standard_errors():
    difference, se = gain([0.30, 0.34, 0.32], [0.20, 0.20, 0.20])
    assert difference == pytest.approx(0.12) and se == pytest.approx(0.02 / math.sqrt(3))


def test_the_best_contextual_layer_leaves_the_static_one_out():
    summary = {"layers": {"embeddings": 0.45, "layer_1": 0.33, "sum_last4": 0.36}, "static_layer": "embeddings"}
    assert vector_parity.best_contextual(summary) == 0.36


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bert", "gpt"])
def test_a_keras_hub_peer_moves_into_our_model_dir_exactly(kind, tmp_path):
    """The vector benchmark scores a peer through our export: our model with the peer's weights must compute
    the peer's outputs (the check `write_model_dir` makes before it writes), here on weights perturbed away from
    their initial values, and the model_dir it writes loads as ours."""
    import dataclasses

    import numpy as np

    from benchmarks.peers import keras_hub_models
    from models import families

    c = dataclasses.replace(families.preset_config(kind, f"{kind}_tiny", vocab_size=60), dropout=0.0,
                            max_position_embeddings=32)
    peer = keras_hub_models.peer_model(kind, c, "untied")
    rng = np.random.default_rng(0)
    for w in peer.weights:
        w.assign(w.numpy() + rng.normal(0, 0.05, w.shape))
    ids = rng.integers(1, 60, (2, 16)).astype("int32")
    sample = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    if kind == "bert":
        sample.update(segment_ids=np.zeros_like(ids), mask_positions=np.array([[1, 2], [3, 4]], "int32"))
    data = {"train_data": "x", "max_seq_length": 16, "max_predictions_per_seq": 2 if kind == "bert" else None,
            "lower_case": True, "vocab_size": 60, "vocab_sha256": "0", "special_ids": {}}
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(f"w{i}" for i in range(60)) + "\n")
    model_dir = str(tmp_path / "peer")
    difference = keras_hub_models.write_model_dir(kind, peer, keras_hub_models.our_config(kind, c, "untied"), data,
                                                   str(vocab), model_dir, sample)
    assert difference < 1e-5
    _, _, saved = families.load_model(model_dir)
    assert saved["model_config"].normalize_first == (kind == "gpt") and not saved["model_config"].tie_output
