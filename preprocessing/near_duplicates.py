"""Text matching for deduplication: normalisation, word shingles, MinHash signatures, LSH band keys.

Pure functions (numpy and hashlib, no files, no Beam), used by `pipeline.dedup_stages` and `pipeline.near_dedup`
on every worker alike. They run on every document of a corpus, so the work is one numpy operation per step
and document, never a Python call per shingle or per hash function:

- `normalize_for_matching`: NFKC, lower-case, every run of non-alphanumeric characters one space. Two texts
  that differ only in case, punctuation or spacing match. ASCII text takes a faster path with the same result.
- `word_hashes`: each word's 64-bit BLAKE2b hash, the same in every process (memoised per process: natural
  text repeats its words).
- `shingle_hashes` / `shingles`: the hashes of a text's word n-grams (`shingle_words` words; a text shorter
  than that is one shingle): `mix64(sum_k K_k * word[i + k])` over the n-gram's word hashes, with fixed odd
  64-bit weights `K_k` (wrapping arithmetic; `mix64` is SplitMix64's finalizer), computed for all n-grams at
  once. `shingles` is the sorted distinct set.
- `minhash`: for each of `num_perm` hash functions `h_i(x) = (a_i * x + b_i) mod 2**64` (multiply-add-shift;
  `a_i` odd; `a_i`, `b_i` from `stable_random.stable_hash(seed, ...)`), the minimum over the shingles, kept
  as its top 32 bits: `P(sig_a[i] == sig_b[i])` is the Jaccard similarity of the two shingle sets. One
  `[shingles, num_perm]` multiply-add and a column minimum.
- `band_keys`: the signature's first `bands * rows` values cut into `bands` rows of `rows` values, each band
  (with its index) hashed to one 63-bit int. Two texts of Jaccard `s` share at least one key with
  probability `1 - (1 - s**rows)**bands` (`candidate_probability`); candidates are then confirmed by
  `estimated_jaccard >= threshold` over the whole signature. The default 10 bands of 4 values give 0.995 at
  s = 0.8, 0.48 at 0.5 and 0.08 at 0.3 (20 bands of 6, before: 0.998, 0.27, 0.015): half the shuffled keys,
  for more candidates below the threshold, which the confirmation rejects.
"""

import dataclasses
import functools
import hashlib
import re
import unicodedata

import numpy as np

from preprocessing import stable_random

_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
# ASCII characters that `_NOT_WORD` matches (all but letters and digits) -> a space
_ASCII_NOT_WORD = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
_WORD_HASHES_MAX = 1 << 18  # memoised words per process (about 30 MB); the memo is emptied when full


@dataclasses.dataclass(frozen=True)
class MinHashConfig:
    """How documents are compared.

    Args:
      shingle_words: words per shingle (word n-grams).
      num_perm: MinHash values per signature (all of them estimate the Jaccard similarity).
      bands: LSH bands (one shuffled key per band and document).
      band_rows: signature values per band (`rows`); 0: `num_perm // bands`, which must then leave no
        remainder. The first `bands * rows` values are banded; all `num_perm` estimate the similarity.
      threshold: estimated Jaccard similarity at or above which two documents are near duplicates.
      seed: the hash functions' seed.
    """

    shingle_words: int = 5
    num_perm: int = 120
    bands: int = 10
    band_rows: int = 4
    threshold: float = 0.8
    seed: int = 0

    def __post_init__(self):
        if min(self.shingle_words, self.num_perm, self.bands) < 1 or self.band_rows < 0:
            raise ValueError(f"shingle_words, num_perm and bands must be positive, band_rows >= 0: {self}")
        if not self.band_rows and self.num_perm % self.bands:
            raise ValueError(f"num_perm {self.num_perm} is not a multiple of bands {self.bands}")
        if self.bands * self.rows > self.num_perm:
            raise ValueError(f"bands {self.bands} x rows {self.rows} is more than num_perm {self.num_perm}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold {self.threshold} is not in (0, 1]")

    @property
    def rows(self) -> int:
        """Signature values per band."""
        return self.band_rows or self.num_perm // self.bands


def normalize_for_matching(text: str) -> str:
    """NFKC, lower-case, non-alphanumeric runs as one space, stripped.

    Example:
      >>> normalize_for_matching("  The  CAT, sat!\\n")
      'the cat sat'
    """
    if text.isascii():  # NFKC keeps ASCII as it is; the same result as below, about 3x faster
        return " ".join(text.lower().translate(_ASCII_NOT_WORD).split())
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def words_for_matching(text: str) -> list[str]:
    """`normalize_for_matching(text).split()`, without joining the ASCII path's words only to split them."""
    if text.isascii():
        return text.lower().translate(_ASCII_NOT_WORD).split()
    return normalize_for_matching(text).split()


def text_digest(text: str) -> bytes:
    """A 128-bit digest of the normalised text: the key of exact (normalised) duplicates."""
    return normalized_digest(normalize_for_matching(text))


def normalized_digest(normalized: str) -> bytes:
    """`text_digest` of a text already normalised. Normalising lines one by one and joining the non-empty
    ones with a space gives the normalised text of the lines joined by new lines (a new line is a
    separator that no normalisation step looks across)."""
    return hashlib.blake2b(normalized.encode("utf-8"), digest_size=16).digest()


def _hash64(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


class _WordHashes(dict):
    """word -> `_hash64(word)`, filled on a miss (a bounded memo: a pure function of the word, so a
    cleared or per-process memo never changes a result)."""

    def __missing__(self, word: str) -> int:
        if len(self) >= _WORD_HASHES_MAX:
            self.clear()
        value = self[word] = _hash64(word)
        return value


_WORD_HASHES = _WordHashes()


def word_hashes(words: list[str]) -> np.ndarray:
    """`[W]` uint64 BLAKE2b hashes of the words."""
    return np.array(list(map(_WORD_HASHES.__getitem__, words)), np.uint64)


@functools.lru_cache(maxsize=64)
def _odd_weights(salt: str, count: int) -> np.ndarray:
    """`[count]` fixed odd uint64 weights (read-only), the same in every process."""
    weights = np.array([2 * stable_random.stable_hash("near_duplicates", salt, k) + 1 for k in range(count)],
                       np.uint64)
    weights.flags.writeable = False
    return weights


_U = {k: np.uint64(k) for k in (1, 27, 30, 31, 32)}  # shifts, as numpy scalars made once
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on a uint64 array (wrapping arithmetic), in place: `x` must be the caller's own."""
    x ^= x >> _U[30]
    x *= _MIX1
    x ^= x >> _U[27]
    x *= _MIX2
    x ^= x >> _U[31]
    return x


def shingle_hashes(hashes: np.ndarray, shingle_words: int) -> np.ndarray:
    """Word hashes `[W]` -> the hashes of their `shingle_words`-grams, in text order, repeats kept
    (`[W - shingle_words + 1]`; one for `0 < W < shingle_words`; none for no words)."""
    if hashes.size == 0:
        return np.zeros([0], np.uint64)
    n = min(shingle_words, hashes.size)
    count = hashes.size - n + 1
    weights = _odd_weights("shingle", n)
    combined = hashes[:count] * weights[0]  # [count]
    for k in range(1, n):
        combined += hashes[k:k + count] * weights[k]
    return _mix64(combined)


def text_shingle_hashes(text: str, shingle_words: int) -> np.ndarray:
    """`shingle_hashes` of the normalised text's words."""
    return shingle_hashes(word_hashes(words_for_matching(text)), shingle_words)


def shingles(text: str, shingle_words: int) -> np.ndarray:
    """Sorted distinct uint64 hashes of the normalised text's word `shingle_words`-grams (empty: no words).

    Example:
      >>> len(shingles("a b c d", 2)), len(shingles("a b a b", 2)), len(shingles("a b", 5))
      (3, 2, 1)
    """
    return np.unique(text_shingle_hashes(text, shingle_words))


def permutations(config: MinHashConfig) -> np.ndarray:
    """`[2, num_perm]` uint64: the hash functions' odd multipliers `a_i` and their increments `b_i`."""
    a = [2 * stable_random.stable_hash(config.seed, "minhash", i) + 1 for i in range(config.num_perm)]
    b = [stable_random.stable_hash(config.seed, "minhash_add", i) for i in range(config.num_perm)]
    return np.array([a, b], np.uint64)


def minhash(hashes: np.ndarray, perms: np.ndarray) -> np.ndarray:
    """Shingle hashes `[S]` (repeats change nothing) -> signature `[num_perm]` uint32 (all 0xFFFFFFFF for
    no shingles)."""
    if hashes.size == 0:
        return np.full(perms.shape[1:], 0xFFFFFFFF, np.uint32)
    values = np.multiply.outer(hashes, perms[0])  # [S, num_perm]
    values += perms[1]
    return (values.min(axis=0) >> _U[32]).astype(np.uint32)


def signature(text: str, config: MinHashConfig, perms: np.ndarray | None = None) -> np.ndarray:
    """The MinHash signature of a text (`perms`: `permutations(config)`, computed once per worker)."""
    perms = permutations(config) if perms is None else perms
    return minhash(text_shingle_hashes(text, config.shingle_words), perms)


def band_keys(sig: np.ndarray, bands: int, rows: int) -> list[int]:
    """One 63-bit key per band: `mix64(sum_j K_j * value_j + K'_band)` over the band's values."""
    return band_key_matrix(sig[None], bands, rows)[0].tolist()


def band_key_matrix(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Signatures `[n, num_perm]` -> their band keys `[n, bands]` uint64 (`band_keys` of each row)."""
    values = sigs[:, :bands * rows].reshape(-1, bands, rows).astype(np.uint64)  # [n, bands, rows]
    combined = values @ _odd_weights("band_row", rows)  # [n, bands]
    combined += _odd_weights("band", bands)
    return _mix64(combined) >> _U[1]


def estimated_jaccard(a: np.ndarray, b: np.ndarray):
    """The share of equal signature values: an unbiased estimate of the shingle sets' Jaccard similarity.
    Signatures `[..., num_perm]` (broadcast against each other) -> estimates `[...]` (a float for two)."""
    return np.count_nonzero(a == b, axis=-1) / a.shape[-1]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The exact Jaccard similarity of two shingle-hash sets (1.0 for two empty sets)."""
    if a.size == 0 and b.size == 0:
        return 1.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / float(a.size + b.size - inter)


def candidate_probability(similarity: float, config: MinHashConfig) -> float:
    """The probability that two texts of this Jaccard similarity share a band key."""
    return 1.0 - (1.0 - similarity ** config.rows) ** config.bands
