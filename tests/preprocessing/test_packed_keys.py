"""Packed key ranges: the number of ranges from the input's size, the split of keys by range, and the runs of
repeated keys, against plain Python."""

import collections

import numpy as np
import pytest

from preprocessing import packed_keys


def test_ranges_grow_with_the_text_and_a_gz_counts_its_text():
    assert packed_keys.ranges_for(0) == packed_keys.ranges_for(packed_keys.RANGE_INPUT_BYTES) == 1
    assert packed_keys.ranges_for(packed_keys.RANGE_INPUT_BYTES + 1) == 2
    assert packed_keys.ranges_for(1 << 60) == packed_keys.MAX_RANGES
    assert packed_keys.text_bytes("a/b.txt.gz", 10) == 10 * packed_keys.GZIP_RATIO
    assert packed_keys.text_bytes("a/b.txt", 10) == 10


@pytest.mark.parametrize("ranges", [1, 3, 64])
def test_by_range_puts_every_key_in_its_one_range(ranges):
    keys = np.random.default_rng(0).integers(0, 2**63, 200, dtype=np.uint64)
    seen = []
    for key_range, rows in packed_keys.by_range(keys.tolist(), ranges):
        assert all(int(k) % ranges == key_range for k in keys[rows])
        seen.extend(np.arange(keys.size)[rows].tolist())
    assert sorted(seen) == list(range(keys.size))


def test_repeated_runs_are_the_keys_that_occur_twice_or_more():
    rng = np.random.default_rng(1)
    hi = rng.integers(0, 6, 300).astype(np.uint64)  # two columns: many repeats, some only in one column
    lo = rng.integers(0, 40, 300).astype(np.uint64)
    order = np.lexsort((np.arange(300), lo, hi))
    runs = packed_keys.repeated_runs(order, hi, lo)
    want = collections.defaultdict(list)
    for i, key in enumerate(zip(hi.tolist(), lo.tolist())):
        want[key].append(i)
    assert sorted(r.tolist() for r in runs) == sorted(v for v in want.values() if len(v) > 1)
    assert all(np.all(np.diff(r) > 0) for r in runs)  # in `order`'s order (here: by row)
    assert packed_keys.repeated_runs(np.arange(1), hi[:1]) == []
    assert packed_keys.repeated_runs(np.arange(3), np.array([1, 2, 3], np.uint64)) == []


def test_ids_round_trip():
    rows = b"".join(packed_keys.id_bytes(i) for i in [(0, 5), (-1, 2), (3, 2**40)])
    ids = np.frombuffer(rows, np.int64).reshape(-1, 2)
    assert [packed_keys.doc_id(ids, i) for i in range(3)] == [(0, 5), (-1, 2), (3, 2**40)]
    assert type(packed_keys.doc_id(ids, 0)[0]) is int  # Beam keys the join by Python ints
