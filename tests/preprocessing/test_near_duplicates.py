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
    a, b = nd.band_keys(sig, config.bands, config.rows), nd.band_keys(other, config.bands, config.rows)
    assert len(a) == config.bands == len(set(a)) and all(0 <= k < 2**63 for k in a)
    assert a[0] != b[0] and a[1:] == b[1:]
    assert nd.band_keys(sig, config.bands, config.rows) == a  # stable


def test_band_keys_use_the_first_bands_times_rows_values_and_the_band_index():
    sig = np.arange(120, dtype=np.uint32)
    other = sig.copy()
    other[40:] = 0
    assert nd.band_keys(sig, 10, 4) == nd.band_keys(other, 10, 4)
    same_values = np.zeros(120, np.uint32)
    assert len(set(nd.band_keys(same_values, 20, 6))) == 20  # equal values in two bands: two keys


def test_candidate_probability_around_the_threshold():
    config = nd.MinHashConfig()
    assert nd.candidate_probability(0.8, config) > 0.99
    assert nd.candidate_probability(0.3, config) < 0.1
    assert nd.candidate_probability(0.3, nd.MinHashConfig(bands=20, band_rows=6)) < 0.02
    assert nd.candidate_probability(0.5, nd.MinHashConfig(bands=10, band_rows=4)) == pytest.approx(1 - (1 - 0.5**4)**10)


def test_the_ascii_path_of_normalisation_is_the_general_rule():
    """`normalize_for_matching` takes a shortcut for ASCII text: it must give what NFKC + the regex give."""
    rng = random.Random(0)
    alphabet = [chr(c) for c in range(128)]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(40))) for _ in range(2000)]
    texts += alphabet + ["a_b", "__x__", " \t\x0b\x0c\x1c\x1d\x1e\x1f\x7f ", "Tab\tand\nnew-line", "MiXeD 42!"]
    for text in texts:
        assert text.isascii()
        general = nd._NOT_WORD.sub(" ", nd.unicodedata.normalize("NFKC", text).lower()).strip()
        assert nd.normalize_for_matching(text) == general, repr(text)


def test_word_hashes_do_not_depend_on_the_memo():
    words = "the cat sat on the mat the end".split()
    first = nd.word_hashes(words)
    nd._WORD_HASHES.clear()
    again = nd.word_hashes(list(reversed(words)))[::-1]
    assert first.dtype == np.uint64 and (first == again).all()
    assert first[0] == first[4] == first[6] and len(set(first.tolist())) == 6
    assert first[1] == int.from_bytes(nd.hashlib.blake2b(b"cat", digest_size=8).digest(), "little")


def test_shingles_depend_on_word_order_and_not_on_punctuation():
    assert not set(nd.shingles("a b c", 2).tolist()) & set(nd.shingles("b a c", 2).tolist()) - set(
        nd.shingles("a c", 2).tolist())
    assert (nd.shingles("The cat, sat.", 2) == nd.shingles("the CAT sat", 2)).all()
    assert nd.shingles("a b c d", 2)[0] not in nd.shingles("a b c d", 3)  # other n, other hashes


def test_minhash_is_the_minimum_of_each_hash_function():
    """The vectorised signature against the definition, in Python integers."""
    config = nd.MinHashConfig(num_perm=8, bands=2)
    perms = nd.permutations(config)
    hashes = nd.shingles(_text(random.Random(3), 30), 5)
    want = [min(((int(a) * int(x) + int(b)) % 2**64) >> 32 for x in hashes) for a, b in zip(*perms)]
    assert nd.minhash(hashes, perms).tolist() == want
    assert (nd.minhash(np.concatenate([hashes, hashes[:5]]), perms) == nd.minhash(hashes, perms)).all()
    assert all(int(a) % 2 == 1 for a in perms[0])


def test_signatures_are_the_same_in_every_process():
    """Fixed values: the hashes never depend on Python's salted `hash()` or on the process."""
    config = nd.MinHashConfig()
    sig = nd.signature("The cat sat on the mat, and the dog sat on the log.", config)
    assert sig[:4].tolist() == GOLDEN_SIGNATURE
    assert nd.band_keys(sig, config.bands, config.rows)[0] == GOLDEN_BAND_KEY
    assert nd.text_digest("The cat.").hex() == GOLDEN_DIGEST


GOLDEN_SIGNATURE = [34103065, 577730241, 365512516, 1128583136]
GOLDEN_BAND_KEY = 3420734315096038558
GOLDEN_DIGEST = "7203293719e4a3efb9ec20e2c682397f"


def test_jaccard_edges():
    empty = np.zeros([0], np.uint64)
    assert nd.jaccard(empty, empty) == 1.0
    assert nd.jaccard(np.array([1, 2], np.uint64), np.array([2, 3], np.uint64)) == pytest.approx(1 / 3)


@pytest.mark.parametrize("kwargs", [{"num_perm": 100, "bands": 30}, {"threshold": 0.0}, {"shingle_words": 0},
                                    {"bands": 31, "band_rows": 4}, {"band_rows": -1}])
def test_bad_configs_are_refused(kwargs):
    with pytest.raises(ValueError):
        nd.MinHashConfig(**kwargs)
