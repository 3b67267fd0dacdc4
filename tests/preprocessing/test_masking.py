"""Masking: exact outputs with rates forced to 1.0/0.0, counts, specials, whole words, determinism."""

import numpy as np
import pytest
import tensorflow as tf

from preprocessing.masking import MaskingConfig, VocabInfo, mask_tokens

CLS, SEP, PAD, MASK = 2, 3, 0, 4
VOCAB = VocabInfo(size=100, mask_id=MASK, special_ids=(0, 1, 2, 3, 4), continuation_ids=tuple(range(50, 100)))


def run(rows, config, seeds=None):
    ids = tf.constant(rows, tf.int64)
    seeds = tf.constant(seeds if seeds is not None else list(range(len(rows))), tf.int64)
    out = mask_tokens(ids, tf.cast(ids != PAD, tf.int64), seeds, VOCAB, config)
    return {k: v.numpy() for k, v in out.items()}


ROW = [CLS, 10, 11, 12, 13, 14, SEP, 15, 16, 17, SEP, PAD, PAD]  # 11 real tokens


def test_count_positions_and_always_mask_token():
    out = run([ROW], MaskingConfig(masked_lm_prob=0.3, max_predictions_per_seq=5, mask_token_rate=1.0,
                                   random_token_rate=0.0))
    n = int(out["masked_lm_weights"].sum())
    assert n == 3  # round(11 * 0.3) = round(3.3) = 3
    positions = out["masked_lm_positions"][0, :n]
    assert list(positions) == sorted(positions)
    assert all(ROW[p] not in (CLS, SEP, PAD) for p in positions)
    assert [out["input_ids"][0, p] for p in positions] == [MASK] * 3
    assert list(out["masked_lm_ids"][0, :n]) == [ROW[p] for p in positions]
    assert list(out["masked_lm_positions"][0, n:]) == [0, 0] and list(out["masked_lm_ids"][0, n:]) == [0, 0]
    unmasked = [i for i in range(len(ROW)) if i not in positions]
    assert [out["input_ids"][0, i] for i in unmasked] == [ROW[i] for i in unmasked]


def test_keep_and_random_rates():
    keep = run([ROW], MaskingConfig(masked_lm_prob=0.5, mask_token_rate=0.0, random_token_rate=0.0))
    assert (keep["input_ids"][0] == ROW).all() and keep["masked_lm_weights"].sum() == 6  # round(5.5) = 6
    rand = run([ROW] * 50, MaskingConfig(masked_lm_prob=0.5, mask_token_rate=0.0, random_token_rate=1.0))
    changed = rand["input_ids"] != np.array([ROW] * 50)
    assert changed.sum() > 250  # random ids in [0, 100): equal to the original 1% of the time
    assert (rand["input_ids"] < 100).all()


@pytest.mark.parametrize("length, prob, expected", [(10, 0.15, 2), (30, 0.15, 4), (3, 0.15, 1), (200, 0.15, 20)])
def test_number_to_predict_rounds_half_to_even_and_caps(length, prob, expected):
    row = [CLS] + [10] * (length - 2) + [SEP]
    out = run([row], MaskingConfig(masked_lm_prob=prob, max_predictions_per_seq=20))
    assert out["masked_lm_weights"].sum() == expected


def test_whole_word_masking_takes_all_pieces_of_a_word():
    # words: [10 50 51] [11] [12 52] | SEP | [53] starts a word after the separator
    row = [CLS, 10, 50, 51, 11, 12, 52, SEP, 53, 13, SEP]
    config = MaskingConfig(masked_lm_prob=0.5, max_predictions_per_seq=6, whole_word_mask=True,
                           mask_token_rate=1.0, random_token_rate=0.0)
    words = [{1, 2, 3}, {4}, {5, 6}, {8}, {9}]
    for seed in range(40):
        out = run([row], config, seeds=[seed])
        chosen = set(out["masked_lm_positions"][0][out["masked_lm_weights"][0] > 0].tolist())
        assert len(chosen) <= 6  # round(11 * 0.5) = 6
        assert all(w <= chosen or not (w & chosen) for w in words), (seed, chosen)


def test_rows_depend_only_on_their_seed():
    config = MaskingConfig()
    rows = np.random.default_rng(0).integers(5, 100, (6, 40))
    rows[:, 0], rows[:, -1] = CLS, SEP
    together = run(rows.tolist(), config, seeds=[7, 8, 9, 10, 11, 12])
    alone = run(rows[2:3].tolist(), config, seeds=[9])
    for key in together:
        np.testing.assert_array_equal(together[key][2], alone[key][0])
    again = run(rows.tolist(), config, seeds=[7, 8, 9, 10, 11, 12])
    np.testing.assert_array_equal(together["input_ids"], again["input_ids"])
    other = run(rows.tolist(), config, seeds=[70, 80, 90, 100, 110, 120])
    assert not np.array_equal(together["masked_lm_positions"], other["masked_lm_positions"])


def test_more_prediction_slots_than_positions():
    out = run([[CLS, 10, SEP, 11, SEP]], MaskingConfig(masked_lm_prob=1.0, max_predictions_per_seq=8))
    assert out["masked_lm_positions"].shape == (1, 8)
    assert sorted(out["masked_lm_positions"][0][:2].tolist()) == [1, 3]
