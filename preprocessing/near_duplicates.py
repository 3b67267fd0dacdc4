"""Text matching for deduplication: normalisation, word shingles, MinHash signatures, LSH band keys.

Pure functions (numpy and hashlib, no files, no Beam), used by `pipeline.cleaning` on every worker alike:

- `normalize_for_matching`: NFKC, lower-case, every run of non-alphanumeric characters one space. Two texts
  that differ only in case, punctuation or spacing match.
- `shingles`: the set of 64-bit hashes of a text's word n-grams (`shingle_words` words; a text shorter than
  that is one shingle). Hashes are BLAKE2b of the n-gram, the same in every process.
- `minhash`: for each of `num_perm` hash functions `h_i(x) = mix64(x ^ seed_i)` (SplitMix64's finalizer,
  seeds from `stable_random.stable_hash(seed, "minhash", i)`), the minimum over the shingles, kept as its top
  32 bits: `P(sig_a[i] == sig_b[i])` is the Jaccard similarity of the two shingle sets.
- `band_keys`: the signature cut into `bands` rows of `num_perm // bands` values, each band hashed to one key.
  Two texts of Jaccard `s` share at least one key with probability `1 - (1 - s**r)**b`: with the default
  20 bands of 6 (120 values) that is 0.998 at s = 0.8 and 0.27 at s = 0.5; candidates are then confirmed by
  `estimated_jaccard >= threshold`.
"""

import dataclasses
import hashlib
import re
import unicodedata

import numpy as np

from preprocessing import stable_random

_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
_MASK64 = (1 << 64) - 1


@dataclasses.dataclass(frozen=True)
class MinHashConfig:
    """How documents are compared.

    Args:
      shingle_words: words per shingle (word n-grams).
      num_perm: MinHash values per signature.
      bands: LSH bands; `num_perm` must be a multiple of it.
      threshold: estimated Jaccard similarity at or above which two documents are near duplicates.
      seed: the hash functions' seed.
    """

    shingle_words: int = 5
    num_perm: int = 120
    bands: int = 20
    threshold: float = 0.8
    seed: int = 0

    def __post_init__(self):
        if self.shingle_words < 1 or self.num_perm < 1 or self.bands < 1:
            raise ValueError(f"shingle_words, num_perm and bands must be positive: {self}")
        if self.num_perm % self.bands:
            raise ValueError(f"num_perm {self.num_perm} is not a multiple of bands {self.bands}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold {self.threshold} is not in (0, 1]")

    @property
    def rows(self) -> int:
        return self.num_perm // self.bands


def normalize_for_matching(text: str) -> str:
    """NFKC, lower-case, non-alphanumeric runs as one space, stripped.

    Example:
      >>> normalize_for_matching("  The  CAT, sat!\\n")
      'the cat sat'
    """
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).lower()).strip()


def text_digest(text: str) -> str:
    """A 128-bit hex digest of the normalised text: the key of exact (normalised) duplicates."""
    return hashlib.blake2b(normalize_for_matching(text).encode("utf-8"), digest_size=16).hexdigest()


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def shingles(text: str, shingle_words: int) -> np.ndarray:
    """Sorted distinct uint64 hashes of the normalised text's word `shingle_words`-grams (empty: no words).

    Example:
      >>> len(shingles("a b c d", 2)), len(shingles("a b a b", 2)), len(shingles("a b", 5))
      (3, 2, 1)
    """
    words = normalize_for_matching(text).split()
    if not words:
        return np.zeros([0], np.uint64)
    n = min(shingle_words, len(words))
    grams = {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}
    return np.unique(np.array([_hash64(g) for g in grams], np.uint64))


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def permutation_seeds(config: MinHashConfig) -> np.ndarray:
    """`[num_perm]` uint64 seeds of the hash functions, from `stable_random`."""
    return np.array([stable_random.stable_hash(config.seed, "minhash", i) for i in range(config.num_perm)],
                    np.uint64)


def minhash(hashes: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Shingle hashes `[S]` -> signature `[num_perm]` uint32 (all 0xFFFFFFFF for no shingles)."""
    if hashes.size == 0:
        return np.full(seeds.shape, 0xFFFFFFFF, np.uint32)
    with np.errstate(over="ignore"):
        mixed = _mix64(hashes[:, np.newaxis] ^ seeds[np.newaxis, :])  # [S, num_perm]
    return (mixed.min(axis=0) >> np.uint64(32)).astype(np.uint32)


def signature(text: str, config: MinHashConfig, seeds: np.ndarray | None = None) -> np.ndarray:
    """The MinHash signature of a text (`seeds`: `permutation_seeds(config)`, computed once per worker)."""
    seeds = permutation_seeds(config) if seeds is None else seeds
    return minhash(shingles(text, config.shingle_words), seeds)


def band_keys(sig: np.ndarray, bands: int) -> list[int]:
    """One 63-bit key per band: BLAKE2b of the band index and the band's values."""
    rows = sig.size // bands
    return [int.from_bytes(hashlib.blake2b(bytes([b % 256, b // 256]) + sig[b * rows:(b + 1) * rows].tobytes(),
                                           digest_size=8).digest(), "little") >> 1 for b in range(bands)]


def estimated_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The share of equal signature values: an unbiased estimate of the shingle sets' Jaccard similarity."""
    return float(np.mean(a == b))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The exact Jaccard similarity of two shingle-hash sets (1.0 for two empty sets)."""
    if a.size == 0 and b.size == 0:
        return 1.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / float(a.size + b.size - inter)


def candidate_probability(similarity: float, config: MinHashConfig) -> float:
    """The probability that two texts of this Jaccard similarity share a band key."""
    return 1.0 - (1.0 - similarity ** config.rows) ** config.bands
