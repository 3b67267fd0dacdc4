"""Keyed entries packed per key range: how deduplication sends its LSH band keys and span digests through a
shuffle as a few elements per key range instead of one element per key, and how a range finds its equal keys.

Why: a runner's shuffle costs about the same per element whatever its size (8 us in Beam's in-process runner),
and deduplication has ~10 band keys and ~6 span digests per document, almost all of them unique. Each document
instead sends one entry per key range its keys fall in, as columns of bytes (`pipeline.dedup_stages.
ConcatColumns`, a `CombinePerKey`): runners that lift combiners (the FnApi runners, Dataflow) concatenate a
bundle's entries of a range before the shuffle, so a bundle sends one element per range. A range's combined
columns are then sorted (numpy) to find the keys that occur more than once.

Memory: a range's group holds every entry of its range: `entries in the corpus / ranges` rows of a few
hundred bytes. `ranges_for` picks the number of ranges from the input's size, so that a group stays near
`RANGE_INPUT_BYTES` of text whatever the corpus; the result never depends on it (a key's entries all land in
one range, and the same keys are compared whatever the packing).

Pure numpy, no Beam: `pipeline.near_dedup` and `pipeline.dedup_stages` call these on every worker alike.
Document ids are `(file index, document index)` pairs, stored as int64 rows `[k, 2]`.
"""

import struct

import numpy as np

RANGE_INPUT_BYTES = 4 << 20  # text per key range: ~40k band entries of 10 bands (~20 MB of signatures)
GZIP_RATIO = 4  # a .gz input's text per compressed byte, for `ranges_for`
MAX_RANGES = 1 << 20
_ID = struct.Struct("=2q")  # an id row: two native int64, as numpy reads them (`np.int64`, `[k, 2]`)


def text_bytes(path: str, size: int) -> int:
    """A file's estimated text size: its size, times `GZIP_RATIO` for a `.gz` file."""
    return size * (GZIP_RATIO if path.endswith(".gz") else 1)


def ranges_for(text: int) -> int:
    """The number of key ranges for an input of about `text` bytes of text (`text_bytes`).

    Example:
      >>> ranges_for(1 << 20), ranges_for(40 << 20), ranges_for(1 << 50)
      (1, 10, 1048576)
    """
    return int(min(MAX_RANGES, max(1, -(-text // RANGE_INPUT_BYTES))))


def by_range(keys: list[int], ranges: int):
    """One document's keys (non-negative ints) -> `(range, entry indices)` for each range present, in range order
    (one range: range 0 and `slice(None)`, all of them, without copying). A few keys a call: plain Python, which
    costs less than numpy's sorting per call."""
    if ranges == 1:
        yield 0, slice(None)
        return
    groups = {}
    for i, key in enumerate(keys):
        groups.setdefault(key % ranges, []).append(i)
    for key_range in sorted(groups):
        yield key_range, groups[key_range]


def digest_key(digest: bytes) -> int:
    """A digest's first 8 bytes as a non-negative int (its first uint64 column): its key for `by_range`."""
    return int.from_bytes(digest[:8], "little")


def repeated_runs(order: np.ndarray, *keys: np.ndarray):
    """Entries sorted by `order` (equal keys adjacent) -> the index arrays (into the entries, in `order`'s
    order) of every key that occurs at least twice. `keys`: one or more `[k]` arrays that together are the
    key (e.g. a 128-bit digest as two uint64 columns).

    Example:
      >>> k = np.array([5, 3, 5, 9, 3, 5], np.uint64)
      >>> [r.tolist() for r in repeated_runs(np.argsort(k, kind="stable"), k)]
      [[1, 4], [0, 2, 5]]
    """
    if order.size < 2:
        return []
    same = np.ones(order.size - 1, bool)  # same[i]: sorted entries i and i + 1 share the key
    for column in keys:
        ordered = column[order]
        same &= ordered[1:] == ordered[:-1]
    starts = np.flatnonzero(same & ~np.concatenate([[False], same[:-1]]))  # first pair of each run
    if not starts.size:
        return []
    ends = np.flatnonzero(same & ~np.concatenate([same[1:], [False]])) + 2  # one past each run's last
    return [order[s:e] for s, e in zip(starts.tolist(), ends.tolist())]


def id_bytes(doc_id) -> bytes:
    """One `(file index, document index)` as the bytes of an ids row (`doc_id` reads them back)."""
    return _ID.pack(*doc_id)


def doc_id(ids: np.ndarray, i: int) -> tuple:
    """Row `i` of an ids array (int64 `[k, 2]`, rows of `id_bytes`) as the pipeline's `(file index, document index)` of Python ints."""
    return tuple(ids[i].tolist())
