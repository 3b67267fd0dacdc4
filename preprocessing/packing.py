"""BERT model inputs from tokenized segments, as TF ops: round-robin truncation, `[CLS] A [SEP] B [SEP]`,
segment ids and padding.

Owns the packing that the exported preprocessor's `bert_pack_inputs` (the TF-Hub BERT preprocessor
contract), the text-in serving graph and fine-tuning use. The pretraining data job packs its own pairs
(`sentence_pairs.py`, google-research's random front/back truncation); this is the deterministic form
for inference: tf-text's `RoundRobinTrimmer` takes one token at a time from each segment that still has
some, so short segments keep all of theirs.

Example:
    ids = pack_inputs([tokenize(a), tokenize(b)], seq_length=128, cls_id=2, sep_id=3)
    ids["input_word_ids"]  # [B, 128] int32; also "input_mask", "input_type_ids"
"""

import tensorflow as tf
import tensorflow_text as tf_text


def merge_word_dims(segment: tf.RaggedTensor) -> tf.RaggedTensor:
    """`[B, (W), (P)]` (word pieces grouped by word) or `[B, (P)]` -> `[B, (P)]`."""
    if segment.ragged_rank > 1:
        return segment.merge_dims(-2, -1)
    return segment


def pack_inputs(segments: list[tf.RaggedTensor], seq_length, cls_id: int, sep_id: int,
                pad_to: str = "seq_length") -> dict[str, tf.Tensor]:
    """Packs 1..n tokenized segments into BERT inputs.

    Args:
      segments: each `[B, (P)]` or `[B, (W), (P)]` word-piece ids (any integer dtype).
      seq_length: the packed length (Python int or scalar tensor); segments are trimmed round-robin to
        `seq_length - len(segments) - 1` pieces in all.
      cls_id, sep_id: the vocabulary's `[CLS]` and `[SEP]` ids.
      pad_to: "seq_length" (always `seq_length` wide, as TF-Hub preprocessors do) or "longest" (only as
        wide as the longest packed row, at most `seq_length`: less work for short serving requests).

    Returns:
      `input_word_ids`, `input_mask`, `input_type_ids`: int32 `[B, L]`, 0-padded on the right.
    """
    if not segments:
        raise ValueError("pack_inputs needs at least one segment")
    if pad_to not in ("seq_length", "longest"):
        raise ValueError(f"pad_to must be 'seq_length' or 'longest', got {pad_to!r}")
    seq_length = tf.cast(seq_length, tf.int32)
    segments = [tf.cast(merge_word_dims(s), tf.int64) for s in segments]
    budget = tf.maximum(seq_length - len(segments) - 1, 0)
    trimmed = tf_text.RoundRobinTrimmer(budget).trim(segments)
    ids, types = tf_text.combine_segments(trimmed, start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
    longest = tf.maximum(tf.cast(tf.reduce_max(ids.row_lengths()), tf.int32), 1)  # an empty batch: 1
    width = seq_length if pad_to == "seq_length" else tf.minimum(longest, seq_length)
    word_ids, mask = tf_text.pad_model_inputs(ids, width)  # [B, L]
    type_ids, _ = tf_text.pad_model_inputs(types, width)  # [B, L]
    return {"input_word_ids": tf.cast(word_ids, tf.int32), "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32)}
