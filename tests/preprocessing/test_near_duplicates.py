"""Matching for deduplication: normalisation, shingles, MinHash, LSH band keys, the Jaccard estimate."""

import random

import numpy as np
import pytest

from preprocessing import near_duplicates as nd


@pytest.mark.parametrize("text, expected", [
    ("The cat sat.", "the cat sat"),
    ("  THE   cat,\tsat!!  ", "the cat sat"),
    ("ﬁne café", "fine café"),          # NFKC: the ligature splits, the accent stays
    ("a_b--c", "a b c"),
    ("...", ""),
])
def test_normalize_for_matching(text, expected):
    assert nd.normalize_for_matching(text) == expected


@pytest.mark.parametrize("text, n, count", [
    ("a b c d", 2, 3), ("a b a b", 2, 2), ("a b", 5, 1), ("", 3, 0), ("A, b. C!", 3, 1),
])
def test_shingle_counts(text, n, count):
    hashes = nd.shingles(text, n)
    assert hashes.dtype == np.uint64 and len(hashes) == count
    assert list(hashes) == sorted(set(hashes.tolist()))


def test_digest_ignores_case_and_punctuation_only():
    assert nd.text_digest("The cat, sat.") == nd.text_digest("the  CAT sat")
    assert nd.text_digest("the cat sat") != nd.text_digest("the cat sat down")


def _text(rng, words=120):
    return " ".join(f"w{rng.randrange(1000)}" for _ in range(words))


def _edited(rng, text, rate):
    return " ".join(f"x{rng.randrange(1000)}" if rng.random() < rate else w for w in text.split())


def test_signatures_are_seeded_and_the_same_in_every_call():
    config = nd.MinHashConfig()
    text = _text(random.Random(0))
    a, b = nd.signature(text, config), nd.signature(text, config)
    assert a.dtype == np.uint32 and a.shape == (config.num_perm,) and (a == b).all()
    assert not (nd.signature(text, nd.MinHashConfig(seed=1)) == a).all()
    assert (nd.signature("", config) == 0xFFFFFFFF).all()


@pytest.mark.parametrize("rate", [0.0, 0.02, 0.05, 0.2, 0.5])
def test_estimated_jaccard_is_close_to_the_exact_one(rate):
    rng = random.Random(int(rate * 100))
    config = nd.MinHashConfig(num_perm=256, bands=32)
    a = _text(rng)
    b = _edited(rng, a, rate)
    exact = nd.jaccard(nd.shingles(a, 5), nd.shingles(b, 5))
    estimate = nd.estimated_jaccard(nd.signature(a, config), nd.signature(b, config))
    assert abs(exact - estimate) < 0.1, (exact, estimate)


def test_band_keys_match_exactly_where_bands_match():
    config = nd.MinHashConfig()
    sig = nd.signature(_text(random.Random(1)), config)
    other = sig.copy()
    other[0] ^= 1  # changes band 0 only
    a, b = nd.band_keys(sig, config.bands), nd.band_keys(other, config.bands)
    assert len(a) == config.bands == len(set(a))
    assert a[0] != b[0] and a[1:] == b[1:]
    assert nd.band_keys(sig, config.bands) == a  # stable


def test_candidate_probability_around_the_threshold():
    config = nd.MinHashConfig()
    assert nd.candidate_probability(0.8, config) > 0.99
    assert nd.candidate_probability(0.3, config) < 0.05


def test_jaccard_edges():
    empty = np.zeros([0], np.uint64)
    assert nd.jaccard(empty, empty) == 1.0
    assert nd.jaccard(np.array([1, 2], np.uint64), np.array([2, 3], np.uint64)) == pytest.approx(1 / 3)


@pytest.mark.parametrize("kwargs", [{"num_perm": 100, "bands": 30}, {"threshold": 0.0}, {"shingle_words": 0}])
def test_bad_configs_are_refused(kwargs):
    with pytest.raises(ValueError):
        nd.MinHashConfig(**kwargs)
