"""Masked-LM masking (BERT), one TF implementation for the Beam job (static masking) and `tf.data`
(dynamic masking, a new mask each epoch).

Semantics of google-research/bert's `create_masked_lm_predictions`:
  - `num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) * masked_lm_prob)))`, where
    `len(tokens)` counts `[CLS]`/`[SEP]` and `round` halves to even (Python's `round`, `tf.round`);
  - candidates are all real positions except `[CLS]`/`[SEP]` (and padding); in whole-word mode a `##` piece
    joins the word before it (here: never across a special token, where the original would join the
    previous segment's last word);
  - candidates are visited in random order and taken while they fit (a whole word that would overflow
    `num_to_predict` is skipped, a later smaller one may still fit);
  - each chosen position becomes `[MASK]` with probability 0.8, a uniformly random vocabulary id with 0.1,
    and stays unchanged with 0.1;
  - predictions are reported sorted by position, padded with 0 (weights 0.0) to `max_predictions_per_seq`.
Randomness comes from per-row seeds (`stable_random.uniform`), so each row's mask depends only on its seed.
Shapes are static: `[N, L]` in, `[N, L]` and `[N, P]` out.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from preprocessing import stable_random
from preprocessing.vocabulary import MASK, SUFFIX_INDICATOR, Vocabulary


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """Args:
      masked_lm_prob: share of tokens to predict.
      max_predictions_per_seq: P, the fixed number of prediction slots.
      whole_word_mask: mask all pieces of a word together.
      mask_token_rate / random_token_rate: replacement shares (the rest keep the original token).
    """

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    whole_word_mask: bool = False
    mask_token_rate: float = 0.8
    random_token_rate: float = 0.1


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """What masking needs to know about the vocabulary."""

    size: int
    mask_id: int
    special_ids: tuple[int, ...]  # never masked ([CLS], [SEP], [PAD], ...)
    continuation_ids: tuple[int, ...] = ()  # `##` pieces, for whole-word masking

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary, whole_word_mask: bool) -> "VocabInfo":
        special = vocab.special_ids()
        continuation = tuple(i for i, t in enumerate(vocab.tokens) if t.startswith(SUFFIX_INDICATOR)) \
            if whole_word_mask else ()
        return cls(size=len(vocab), mask_id=special[MASK], special_ids=tuple(sorted(special.values())),
                   continuation_ids=continuation)


def mask_tokens(input_ids: tf.Tensor, input_mask: tf.Tensor, row_seeds: tf.Tensor, vocab: VocabInfo,
                config: MaskingConfig) -> dict[str, tf.Tensor]:
    """Masks a batch of packed sequences.

    Args:
      input_ids: `[N, L]` int ids, `[CLS] A [SEP] B [SEP]` then padding.
      input_mask: `[N, L]` 1 on real tokens.
      row_seeds: `[N]` int64, one seed per row.

    Returns:
      `input_ids` `[N, L]` (masked), `masked_lm_positions` / `masked_lm_ids` `[N, P]` int64 and
      `masked_lm_weights` `[N, P]` float32.
    """
    ids = tf.cast(input_ids, tf.int64)
    length = ids.shape[1]
    p = config.max_predictions_per_seq
    real = tf.cast(input_mask, tf.bool)
    special = _isin(ids, vocab.special_ids, vocab.size)
    candidate = real & ~special  # [N, L]
    n_tokens = tf.reduce_sum(tf.cast(real, tf.float32), axis=1)  # [N]
    to_predict = tf.cast(tf.minimum(float(p), tf.maximum(1.0, tf.round(n_tokens * config.masked_lm_prob))),
                         tf.int32)  # [N]

    keys = stable_random.uniform(row_seeds, 0, length, tf.float64)  # [N, L] random visiting order
    if config.whole_word_mask and vocab.continuation_ids:
        follows_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
        starts = candidate & ~(_isin(ids, vocab.continuation_ids, vocab.size) & follows_candidate)
        chosen = _choose_words(candidate, starts, to_predict, keys)
        order_key = tf.where(chosen, tf.range(length)[tf.newaxis, :], 2 * length)  # [N, L]
        slots = -tf.math.top_k(-order_key, k=min(p, length)).values  # [N, P'] ascending positions
    else:
        slots = _choose_tokens(candidate, to_predict, keys, min(p, length))

    # Predictions sorted by position, padding slots (position 2L) last.
    slots = tf.pad(slots, [[0, 0], [0, p - min(p, length)]], constant_values=2 * length)  # [N, P]
    slot_valid = slots < length  # [N, P]
    slots = tf.where(slot_valid, slots, 0)
    originals = tf.gather(ids, slots, batch_dims=1)  # [N, P]

    # The chosen positions are the valid slots: their replacements are drawn there only (the values equal
    # `stable_random.uniform`'s at those positions) and scattered back.
    u = stable_random.uniform_at(row_seeds, 1, slots)  # [N, P]
    random_ids = tf.cast(stable_random.uniform_at(row_seeds, 2, slots) * vocab.size, tf.int64)  # [N, P]
    replacement = tf.where(u < config.mask_token_rate, tf.constant(vocab.mask_id, tf.int64),
                           tf.where(u < config.mask_token_rate + config.random_token_rate, random_ids, originals))
    n = tf.shape(ids)[0]
    flat = tf.where(slot_valid, slots + tf.range(n)[:, tf.newaxis] * length, n * length)  # [N, P]; padding: a spare
    masked = tf.tensor_scatter_nd_update(tf.concat([tf.reshape(ids, [-1]), [0]], 0), flat[..., tf.newaxis],
                                         replacement)  # [N * L + 1]
    masked = tf.reshape(masked[:-1], [n, length])  # [N, L]
    return {
        "input_ids": masked,
        "masked_lm_positions": tf.where(slot_valid, tf.cast(slots, tf.int64), 0),
        "masked_lm_ids": tf.where(slot_valid, originals, 0),
        "masked_lm_weights": tf.cast(slot_valid, tf.float32),
    }


def _isin(ids: tf.Tensor, values: tuple[int, ...], size: int) -> tf.Tensor:
    """`[N, L]` bool: which ids are among `values` (ids in `[0, size)`), by a lookup in a `[size + 1]` table
    (thousands of `##` ids cost no more than five special ones); ids outside the vocabulary are not."""
    table = np.zeros(size + 1, bool)
    table[list(values)] = True
    inside = (ids >= 0) & (ids < size)
    return tf.gather(tf.constant(table), tf.where(inside, ids, size))


def _choose_tokens(candidate, to_predict, keys, k):
    """The `to_predict` candidates with the smallest keys (each token its own word): their positions
    `[N, k]`, ascending, padded with `2L`."""
    length = candidate.shape[1]
    keys = tf.where(candidate, keys, 2.0)  # [N, L]
    smallest = tf.math.top_k(-keys, k=k)  # [N, k] by ascending key
    rank_ok = tf.range(k)[tf.newaxis, :] < to_predict[:, tf.newaxis]  # [N, k]
    taken = rank_ok & (smallest.values > -2.0)  # [N, k] real candidates among the first to_predict
    return tf.sort(tf.where(taken, smallest.indices, 2 * length), axis=1)  # [N, k] ascending


def _choose_words(candidate, starts, to_predict, keys):
    """Greedy fill in random word order: `[N, L]` bool of chosen positions."""
    n, length = tf.shape(candidate)[0], candidate.shape[1]
    word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # [N, L] word index of each position
    word = tf.where(candidate, word, length)  # non-candidates -> a dummy slot
    rows = tf.broadcast_to(tf.range(n)[:, tf.newaxis], tf.shape(word))
    index = tf.stack([rows, word], axis=-1)  # [N, L, 2]
    size = tf.tensor_scatter_nd_add(tf.zeros([n, length + 1], tf.int32), index,
                                    tf.cast(candidate, tf.int32))[:, :length]  # [N, W=L]
    word_key = tf.tensor_scatter_nd_update(tf.fill([n, length + 1], tf.constant(2.0, keys.dtype)), tf.stack(
        [rows, tf.where(starts, word, length)], axis=-1), tf.where(starts, keys, 2.0))[:, :length]  # [N, W]
    order = tf.argsort(word_key, axis=1, stable=True)  # [N, W] words in random order (empty slots last)
    sizes = tf.gather(size, order, batch_dims=1)  # [N, W]

    def step(total, size_r):  # total [N], size_r [N]
        take = (size_r > 0) & (total + size_r <= to_predict)
        return total + tf.where(take, size_r, 0)

    totals = tf.scan(step, tf.transpose(sizes), initializer=tf.zeros([n], tf.int32))  # [W, N] running
    before = tf.concat([tf.zeros([1, n], tf.int32), totals[:-1]], axis=0)  # [W, N]
    taken_sorted = tf.transpose(totals > before)  # [N, W]
    taken = tf.tensor_scatter_nd_update(tf.zeros([n, length], tf.bool), tf.stack(
        [tf.broadcast_to(tf.range(n)[:, tf.newaxis], tf.shape(order)), order], axis=-1), taken_sorted)
    return candidate & tf.gather(tf.pad(taken, [[0, 0], [0, 1]]), word, batch_dims=1)  # [N, L]
