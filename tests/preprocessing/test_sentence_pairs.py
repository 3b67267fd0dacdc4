"""BERT sentence pairs: exact instances on crafted documents, truncation, packing."""

import random

import numpy as np
import pytest

from preprocessing.sentence_pairs import Document, PairConfig, pack, sentence_pairs, truncated_lengths


def doc(*lengths, start=1):
    out, next_id = [], start
    for n in lengths:
        out.append(list(range(next_id, next_id + n)))
        next_id += n
    return Document.from_sentences(out)


def as_lists(instances):
    return [(i.tokens_a.tolist(), i.tokens_b.tolist(), i.is_random_next) for i in instances]


def test_true_continuations_when_random_next_is_off():
    config = PairConfig(max_seq_length=9, short_seq_prob=0.0, random_next_prob=0.0)
    out = sentence_pairs(doc(3, 3, 3, 3), [], config, random.Random(0))
    assert as_lists(out) == [([1, 2, 3], [4, 5, 6], False), ([7, 8, 9], [10, 11, 12], False)]
    assert all(i.target_length == 6 for i in out)


def test_random_next_puts_unused_sentences_back():
    other = doc(2, 2, start=100)
    config = PairConfig(max_seq_length=9, short_seq_prob=0.0, random_next_prob=1.0)
    out = sentence_pairs(doc(3, 3, 3), [other], config, random.Random(0))
    # chunk [s0, s1] -> A = s0, B random, s1 put back; chunk [s1, s2] -> A = s1; chunk [s2] -> A = s2
    assert [i.tokens_a.tolist() for i in out] == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert all(i.is_random_next for i in out)
    assert all(set(i.tokens_b.tolist()) <= {100, 101, 102, 103} and len(i.tokens_b) >= 1 for i in out)


def test_one_sentence_chunk_without_others_is_dropped():
    config = PairConfig(max_seq_length=9, short_seq_prob=0.0, random_next_prob=0.0)
    assert sentence_pairs(doc(8), [], config, random.Random(0)) == []


@pytest.mark.parametrize("la, lb, limit, expected", [
    (3, 4, 10, (3, 4)), (10, 2, 8, (6, 2)), (2, 10, 8, (2, 6)), (6, 5, 9, (5, 4)), (5, 5, 7, (4, 3)),
    (100, 100, 125, (63, 62))])
def test_truncation_lengths_follow_the_reference_loop(la, lb, limit, expected):
    assert truncated_lengths(la, lb, limit) == expected
    a, b = la, lb  # the reference: one token at a time from the longer, ties cut B
    while a + b > limit:
        if a > b:
            a -= 1
        else:
            b -= 1
    assert (a, b) == expected


def test_long_sentences_are_truncated_to_fit():
    config = PairConfig(max_seq_length=20, short_seq_prob=0.0, random_next_prob=0.0)
    out = sentence_pairs(doc(50, 40, 30, 5), [doc(4, 4, start=200)], config, random.Random(3))
    assert len(out) == 4 and all(len(i.tokens_a) + len(i.tokens_b) <= 17 for i in out)
    for inst in out:  # truncation keeps a contiguous run of the original ids
        for part in (inst.tokens_a, inst.tokens_b):
            assert (np.diff(part) == 1).all()


def test_short_target_share():
    config = PairConfig(max_seq_length=128, short_seq_prob=0.1)
    long_doc = doc(*([20] * 30))
    short = sum(sentence_pairs(long_doc, [long_doc], config, random.Random(s))[0].target_length < 125
                for s in range(4000))
    assert 0.085 < short / 4000 < 0.115


def test_pack_layout():
    from preprocessing.sentence_pairs import Instance

    batch = pack([Instance(np.array([7, 8]), np.array([9]), True, 5)], max_seq_length=8, cls_id=101, sep_id=102)
    assert batch["input_ids"].tolist() == [[101, 7, 8, 102, 9, 102, 0, 0]]
    assert batch["segment_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 0, 0]]
    assert batch["input_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0, 0]]
    assert batch["next_sentence_labels"].tolist() == [[1]]


def test_pack_batch_matches_a_per_row_build():
    from preprocessing.sentence_pairs import Instance

    rng = np.random.default_rng(0)
    instances = [Instance(rng.integers(5, 99, rng.integers(1, 6)), rng.integers(5, 99, rng.integers(1, 6)),
                          bool(k % 2), 9) for k in range(20)]
    batch = pack(instances, max_seq_length=16, cls_id=1, sep_id=2)
    for row, inst in enumerate(instances):
        expected = [1, *inst.tokens_a, 2, *inst.tokens_b, 2]
        assert batch["input_ids"][row].tolist() == expected + [0] * (16 - len(expected))
        segment = [0] * (len(inst.tokens_a) + 2) + [1] * (len(inst.tokens_b) + 1)
        assert batch["segment_ids"][row].tolist() == segment + [0] * (16 - len(segment))
        assert batch["input_mask"][row].sum() == len(expected)
        assert batch["next_sentence_labels"][row, 0] == row % 2
