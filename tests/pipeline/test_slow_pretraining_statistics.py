"""Statistics of BERT pretraining data made from the real corpus (../shared/data): the targets of the
original recipe, within tight bounds."""

import re

import numpy as np
import pytest

from pipeline import pretraining_data
from preprocessing import readers
from tests.conftest import PRETRAIN

pytestmark = [pytest.mark.slow, pytest.mark.shared_data("corpus/pretrain.txt.gz")]
MASK, CLS, SEP = 103, 101, 102


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory, bert_vocab_path):
    out = tmp_path_factory.mktemp("real_bert")
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert pretraining_data.main(["--model", "bert", "--input", PRETRAIN, "--vocab", bert_vocab_path,
                                      "--output_dir", str(out), "--dupe_factor", "1", "--num_shards", "2",
                                      "--runner", "FnApiRunner"]) == 0
    counters = {m.group(1): int(m.group(2).replace(",", ""))
                for m in re.finditer(r"^\s+(\w+)\s+([\d,]+)$", err.getvalue(), re.M)}
    ds = readers.make_dataset(str(out / "bert-*.tfrecord"), 512, shuffle=False, repeat=False)
    cols = {"ids": [], "mask": [], "pos": [], "lm": [], "w": [], "nsp": []}
    for x, y, w in ds.as_numpy_iterator():
        cols["ids"].append(x["input_word_ids"]); cols["mask"].append(x["input_mask"])
        cols["pos"].append(x["masked_lm_positions"]); cols["lm"].append(y["mlm"])
        cols["w"].append(w["mlm"]); cols["nsp"].append(y["nsp"])
    return {k: np.concatenate(v) for k, v in cols.items()}, counters


def test_number_of_masked_tokens_is_the_recipes(corpus_run):
    data, counters = corpus_run
    lengths = data["mask"].sum(axis=1)
    expected = np.minimum(20, np.maximum(1, np.round(lengths * 0.15)))  # numpy rounds half to even too
    assert len(lengths) > 25_000
    np.testing.assert_array_equal(data["w"].sum(axis=1), expected)
    share = data["w"].sum() / lengths.sum()
    assert 0.145 < share < 0.152, share  # 15% of tokens, less the cap at 20


def test_replacement_split_is_80_10_10(corpus_run):
    data, _ = corpus_run
    real = data["w"] > 0
    now = np.take_along_axis(data["ids"], data["pos"], axis=1)[real]
    original = data["lm"][real]
    masked = (now == MASK).mean()
    kept = (now == original).mean()
    assert abs(masked - 0.8) < 0.005, masked
    assert abs(kept - 0.1) < 0.005, kept  # (a random id equal to the original: 1 in 30,522)
    assert abs(1 - masked - kept - 0.1) < 0.005
    assert not np.isin(original, [CLS, SEP, 0]).any()


def test_random_next_share(corpus_run):
    data, counters = corpus_run
    # One-sentence chunks always take a random B (as in the original); the others take one half the time.
    forced, randoms, total = (counters[k] for k in ("forced_random_next_instances", "random_next_instances",
                                                     "instances"))
    free_share = (randoms - forced) / (total - forced)
    assert abs(free_share - 0.5) < 0.01, free_share
    assert 0.5 < data["nsp"].mean() < 0.56  # overall, as written (measured 0.545)


def test_short_target_share(corpus_run):
    _, counters = corpus_run
    share = counters["short_target_passes"] / counters["document_passes"]
    assert counters["document_passes"] > 2500
    assert 0.085 < share < 0.115, share


def test_sequences_fill_the_length(corpus_run):
    data, _ = corpus_run
    lengths = data["mask"].sum(axis=1)
    assert lengths.max() == 128
    assert np.median(lengths) > 110  # long targets dominate; short ones are 10% of passes
