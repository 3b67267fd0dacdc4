"""ELMo character ids, as allenai/bilm-tf defines them, computed with TF ops.

Owns the token -> character-id encoding that the biLM's character CNN reads, so the same code runs in
the Beam job, in `tf.data` and inside the exported `elmo/2`-style serving graph.

bilm-tf (`UnicodeCharsVocabulary` + `Batcher`) encodes a token as its UTF-8 bytes, truncated to
`max_characters_per_token - 2`, wrapped in begin-of-word / end-of-word markers and padded:

    [bow, b_0, ..., b_{n-1}, eow, pad, pad, ...]     with bow=258, eow=259, pad=260

The sentence boundary tokens `<S>` and `</S>` are `[bow, 256, eow, pad...]` and `[bow, 257, eow, pad...]`.
The `Batcher` then adds 1 to every id, so that 0 means "no token here" (padding positions of a batch are all
zeros). Every function here returns the shifted ids. Output shapes are static whenever the input's are, so
the ids feed XLA-compiled models; the string ops themselves run in the input pipeline or the serving graph
(TF has no XLA kernels for strings).
"""

import tensorflow as tf

MAX_CHARACTERS_PER_TOKEN = 50
# Unshifted ids, as bilm-tf writes them; the shifted id is one more.
BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
# Character-vocabulary size of the CNN's embedding table: 261 ids + the 0 padding id (bilm-tf uses 262).
CHAR_VOCAB_SIZE = 262

BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _special_row(char: int, width: int) -> tf.Tensor:
    row = [PAD_CHAR] * width
    row[0], row[1], row[2] = BOW_CHAR, char, EOW_CHAR
    return tf.constant(row, tf.int32)  # (W,)


def char_ids(tokens: tf.Tensor, sequence_len: tf.Tensor | None = None,
             max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN) -> tf.Tensor:
    """Encodes a dense batch of tokens into shifted bilm-tf character ids.

    Args:
      tokens: string tensor of shape `[..., T]` (any rank >= 1); `<S>` and `</S>` get their special rows.
      sequence_len: optional int tensor of shape `[...]`; tokens at positions `>= sequence_len` become all
        zeros (batch padding). Without it every position is a real token, empty strings included.
      max_characters_per_token: width of the encoding (bilm-tf: 50).

    Returns:
      int32 tensor of shape `tokens.shape + [max_characters_per_token]`.

    Example:
      >>> char_ids(tf.constant([["a"]]))[0, 0, :4].numpy()
      array([259,  98, 260, 261], dtype=int32)
    """
    width = max_characters_per_token
    max_bytes = width - 2
    tokens = tf.convert_to_tensor(tokens, tf.string)
    truncated = tf.strings.substr(tokens, 0, max_bytes, unit="BYTE")  # [..., T]
    n_bytes = tf.strings.length(truncated, unit="BYTE")  # [..., T]
    raw = tf.io.decode_raw(truncated, tf.uint8, fixed_length=max_bytes)  # [..., T, max_bytes]
    raw = tf.cast(raw, tf.int32)
    # Place byte k at column k + 1, behind the begin-of-word marker.
    body = tf.pad(raw, [[0, 0]] * (raw.shape.rank - 1) + [[1, 1]])  # [..., T, W]
    column = tf.range(width, dtype=tf.int32)  # (W,)
    n = n_bytes[..., tf.newaxis]  # [..., T, 1]
    ids = tf.where(column == 0, BOW_CHAR,
                   tf.where(column <= n, body,
                            tf.where(column == n + 1, EOW_CHAR, PAD_CHAR)))  # [..., T, W]
    is_bos = (tokens == BOS_TOKEN)[..., tf.newaxis]
    is_eos = (tokens == EOS_TOKEN)[..., tf.newaxis]
    ids = tf.where(is_bos, _special_row(BOS_CHAR, width), ids)
    ids = tf.where(is_eos, _special_row(EOS_CHAR, width), ids)
    ids = ids + 1
    if sequence_len is not None:
        positions = tf.range(tf.shape(tokens)[-1])  # (T,)
        real = positions < tf.cast(sequence_len, tf.int32)[..., tf.newaxis]  # [..., T]
        ids = tf.where(real[..., tf.newaxis], ids, 0)
    return ids


def add_sentence_boundaries(tokens: tf.RaggedTensor) -> tf.RaggedTensor:
    """Wraps each sentence of a ragged `[B, (T)]` string batch in `<S>` ... `</S>`."""
    batch = tokens.nrows()
    bos = tf.fill([batch, 1], BOS_TOKEN)
    eos = tf.fill([batch, 1], EOS_TOKEN)
    return tf.concat([bos, tokens, eos], axis=1)
