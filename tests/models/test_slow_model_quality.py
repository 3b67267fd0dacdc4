"""Each model, pretrained briefly on the real corpus (`../shared/data/corpus/pretrain.txt.gz`), beats the
context-free baselines on held-out text (`heldout.txt.gz`). Runs the real commands through
`benchmarks.model_quality` (vocabulary job, data job, models.training.train, models.training.evaluate) and prints the figures."""

import json

import pytest

from benchmarks import model_quality

# The first test trains the three models (module fixture): about 17 minutes on a quiet 2-core machine, 43
# beside two busy processes. The timeout bounds a hang only.
pytestmark = [pytest.mark.shared_data("corpus/pretrain.txt.gz", "corpus/heldout.txt.gz"),
              pytest.mark.timeout(5400)]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = model_quality.run(str(tmp_path_factory.mktemp("quality")), ["bert", "gpt", "bilm"])
    model_quality.report(out)
    print(json.dumps(out))
    return out


@pytest.mark.slow
def test_bert_masked_lm_beats_the_unigram_frequency_baseline(results):
    model, baseline = results["bert"]["model"], results["bert"]["baseline"]
    assert model["examples"] > 500  # every full held-out batch (864 examples here)
    assert model["mlm_accuracy"] > 1.8 * baseline["accuracy"]
    assert model["mlm_loss"] < baseline["loss"] - 0.3
    assert model["nsp_accuracy"] > 0.55


@pytest.mark.slow
def test_gpt_perplexity_is_well_below_the_unigram_perplexity(results):
    model, baseline = results["gpt"]["model"], results["gpt"]["baseline"]
    assert model["perplexity"] < 0.5 * baseline["perplexity"]


@pytest.mark.slow
def test_bilm_perplexities_are_well_below_the_unigram_perplexity(results):
    model, baseline = results["bilm"]["model"], results["bilm"]["baseline"]
    for key in ("forward_perplexity", "backward_perplexity", "perplexity"):
        assert model[key] < 0.75 * baseline["perplexity"], key
