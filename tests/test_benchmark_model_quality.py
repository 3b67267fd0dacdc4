"""benchmarks.training.model_quality's checks (the thresholds `make bench` holds the brief real-corpus runs to)
and the run's history figures (`benchmarks.lib.quality_runs`), on made-up results: each check passes on good
figures and fails when its figure crosses."""

import pytest

from benchmarks.lib import quality_runs
from benchmarks.training import model_quality

GOOD = {"bert": {"model": {"examples": 864, "mlm_accuracy": 0.15, "mlm_loss": 5.0, "nsp_accuracy": 0.6,
                           "train_seconds": 600.0},
                 "baseline": {"accuracy": 0.07, "loss": 6.0, "perplexity": 400.0}},
        "gpt": {"model": {"perplexity": 150.0, "train_seconds": 300.0}, "baseline": {"perplexity": 500.0}},
        "bilm": {"model": {"perplexity": 100.0, "forward_perplexity": 110.0, "backward_perplexity": 105.0,
                           "train_seconds": 400.0},
                 "baseline": {"perplexity": 300.0}}}


def _with(kind, **fields):
    return {**GOOD, kind: {**GOOD[kind], "model": {**GOOD[kind]["model"], **fields}}}


def test_good_figures_pass_every_check():
    verdicts = model_quality.checks(GOOD)
    assert len(verdicts) == 8 and all(passed for _, passed, _ in verdicts)


@pytest.mark.parametrize("kind,fields,failing", [
    ("bert", {"mlm_accuracy": 0.12}, "bert: MLM accuracy > 1.8x the most frequent token's"),
    ("bert", {"mlm_loss": 5.8}, "bert: MLM loss < unigram loss - 0.3"),
    ("bert", {"nsp_accuracy": 0.5}, "bert: NSP accuracy > 0.55"),
    ("bert", {"examples": 400}, "bert: held-out examples > 500"),
    ("gpt", {"perplexity": 260.0}, "gpt: perplexity < 0.5x the unigram's"),
    ("bilm", {"backward_perplexity": 230.0}, "bilm: backward_perplexity < 0.75x the unigram's"),
])
def test_each_check_fails_when_its_figure_crosses(kind, fields, failing):
    failed = [name for name, passed, _ in model_quality.checks(_with(kind, **fields)) if not passed]
    assert failed == [failing]


def test_history_figures_are_ratios_to_the_baselines():
    figures = {f.metric: f for f in quality_runs.history_figures(GOOD, "w")}
    assert figures["bert_mlm_accuracy_over_most_frequent"].value == pytest.approx(0.15 / 0.07)
    assert figures["gpt_perplexity_over_unigram"].value == pytest.approx(0.3)
    assert not figures["gpt_perplexity_over_unigram"].higher_is_better
    assert figures["bilm_train_seconds"].value == 400.0


def test_history_keeps_the_sense_curve_with_its_cpu():
    curve = [{"step": 300, "cpu_minutes": 3.5, "contextual_accuracy": 0.38, "mfs_ceiling": 0.40},
             {"step": 600, "cpu_minutes": 7.0, "contextual_accuracy": 0.42, "mfs_ceiling": 0.40}]
    results = {"bilm": dict(GOOD["bilm"], senses={"curve": curve})}
    figures = {f.metric: f for f in quality_runs.history_figures(results, "w")}
    assert figures["bilm_sense_accuracy_over_mfs_at_step_300"].value == pytest.approx(0.95)
    assert figures["bilm_sense_accuracy_over_mfs_at_step_600"].value == pytest.approx(1.05)
    assert figures["bilm_sense_accuracy_over_mfs_at_step_600"].total_cpu_s == pytest.approx(420.0)
    assert figures["bilm_sense_accuracy_over_mfs_at_step_600"].higher_is_better
