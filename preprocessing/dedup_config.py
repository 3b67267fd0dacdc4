"""What deduplication runs (`--dedup exact,spans,near,threshold=0.8,...`), and the sentence spans it compares.

Three stages, each opt-in, in this order after the filters of `text_filters`:
- `exact`: documents whose normalised text (`near_duplicates.normalize_for_matching`) is equal; the one with
  the smallest document id is kept.
- `spans`: C4's rule: every run of `span_sentences` consecutive sentences is kept once in the corpus (at the
  smallest `(document id, position)`); the sentences of later copies are removed, and a document left empty is
  dropped.
- `near`: MinHash + LSH (`near_duplicates`): a document is dropped when a document with a smaller id has
  estimated Jaccard similarity >= `threshold` with it.
Held-out decontamination uses the exact and near rules against the held-out documents whatever is chosen here.
"""

import dataclasses

from preprocessing import near_duplicates
from preprocessing.text_filters import parse_spec

STAGES = ("exact", "spans", "near")
_MINHASH = near_duplicates.MinHashConfig()  # the MinHash fields' defaults


@dataclasses.dataclass(frozen=True)
class DedupConfig:
    """Deduplication stages and their parameters.

    Args:
      exact, spans, near: the stages to run (see the module docstring).
      span_sentences: sentences per span for `spans` (C4: 3).
      shingle_words, num_perm, bands, band_rows, threshold, seed: the MinHash settings
        (`near_duplicates.MinHashConfig`).
      max_comparisons: in one LSH band group, each document is compared with at most this many of the group's
        smallest ids (bounds the work and memory of a band shared by very many documents).
      report_clusters: how many of the largest clusters the report lists.
      key_ranges: the key ranges that span digests and band keys are grouped by, each range's entries packed
        into byte columns (`packed_keys`); 0: from the input's size (`packed_keys.ranges_for`, set by the
        job's launcher). Only speed and memory depend on it, never the result.
    """

    exact: bool = False
    spans: bool = False
    near: bool = False
    span_sentences: int = 3
    shingle_words: int = _MINHASH.shingle_words
    num_perm: int = _MINHASH.num_perm
    bands: int = _MINHASH.bands
    band_rows: int = _MINHASH.band_rows
    threshold: float = _MINHASH.threshold
    seed: int = _MINHASH.seed
    max_comparisons: int = 64
    report_clusters: int = 20
    key_ranges: int = 0

    def __post_init__(self):
        self.minhash  # checks the MinHash fields
        if self.span_sentences < 1 or self.max_comparisons < 1 or self.report_clusters < 0 or self.key_ranges < 0:
            raise ValueError(f"span_sentences and max_comparisons must be positive, report_clusters and "
                             f"key_ranges not negative: {self}")

    @property
    def minhash(self) -> near_duplicates.MinHashConfig:
        return near_duplicates.MinHashConfig(**{f.name: getattr(self, f.name)
                                                for f in dataclasses.fields(near_duplicates.MinHashConfig)})

    @property
    def active(self) -> bool:
        return self.exact or self.spans or self.near


PRESETS = {"all": {"exact": True, "spans": True, "near": True}}


def parse_dedup(spec: str) -> DedupConfig:
    """`"exact,near,threshold=0.85"` or `"all"` -> `DedupConfig`; raises `ValueError` for unknown names.

    Example:
      >>> c = parse_dedup("exact,near,threshold=0.9")
      >>> (c.exact, c.spans, c.near, c.threshold)
      (True, False, True, 0.9)
    """
    return parse_spec(spec, DedupConfig, PRESETS)[0]


def copy_digests(lines: list[str], span_sentences: int) -> tuple[bytes, list[bytes]]:
    """The document's `near_duplicates.text_digest` and the digest of every run of `span_sentences` lines
    (the run starting at line i at position i; none if shorter, or for `span_sentences` 0), each line
    normalised once.

    Example:
      >>> document, spans = copy_digests(["a", "b", "c", "d"], 3)
      >>> document == near_duplicates.text_digest("a\\nb\\nc\\nd"), len(spans)
      (True, 2)
    """
    n = span_sentences
    normalized = [near_duplicates.normalize_for_matching(line) for line in lines]
    document = near_duplicates.normalized_digest(" ".join(filter(None, normalized)))
    return document, [near_duplicates.normalized_digest(" ".join(filter(None, normalized[i:i + n])))
                      for i in range(len(lines) - n + 1 if n else 0)]


def remove_positions(lines: list[str], starts, span_sentences: int) -> list[str]:
    """`lines` without the spans starting at `starts`.

    Example:
      >>> remove_positions(list("abcdef"), [1], 3)
      ['a', 'e', 'f']
    """
    dropped = {i for s in starts for i in range(s, min(s + span_sentences, len(lines)))}
    return [line for i, line in enumerate(lines) if i not in dropped]
