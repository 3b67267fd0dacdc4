"""The tf_keras layers the task heads (`heads.py`) are built of, each with a stable name in its head and a
`get_config` (no Lambda layers), so a fine-tuned model saves as a SavedModel and loads again: folding the
`[B, S, ...]` sequences of an example, gathering positions, GPT's auxiliary LM loss, ELMo's scalar mix in
tf_keras, the biLM tagger's own words and their casing, pooling, pair features and SQuAD's span logits.
"""

import tensorflow as tf
import tf_keras

from models.scalar_mix import elmo_layers, mix_layers


class FoldSequences(tf_keras.layers.Layer):
    """`[B, S, ...]` -> `[B * S, ...]`."""

    def call(self, x):
        return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


class UnfoldSequences(tf_keras.layers.Layer):
    """`[B * S, ...]` -> `[B, S, ...]`."""

    def __init__(self, sequences: int, **kwargs):
        super().__init__(**kwargs)
        self.sequences = sequences

    def call(self, x):
        return tf.reshape(x, tf.concat([[-1, self.sequences], tf.shape(x)[1:]], 0))

    def get_config(self):
        return {**super().get_config(), "sequences": self.sequences}


class GatherPositions(tf_keras.layers.Layer):
    """`(states [N, T, H], index [N])` -> `states[n, index[n]]` `[N, H]`."""

    def call(self, inputs):
        states, index = inputs
        return tf.gather(states, tf.cast(index, tf.int32), batch_dims=1)


class AuxLanguageModelLoss(tf_keras.layers.Layer):
    """Adds `coef` * the mean next-token cross-entropy (where `weights` is 1) as a model loss; passes
    `features` through."""

    def __init__(self, coef: float, **kwargs):
        super().__init__(**kwargs)
        self.coef = coef

    def call(self, inputs):
        features, logits, ids, weights = inputs  # [N, H], [N, T, V], [N, T], [N, T]
        targets = tf.concat([ids[:, 1:], tf.zeros_like(ids[:, :1])], axis=1)  # [N, T]: position t -> t + 1
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(targets, tf.int32), logits)  # [N, T]
        weights = tf.cast(weights, losses.dtype)
        loss = tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)
        self.add_loss(self.coef * loss)
        self.add_metric(loss, name="lm_loss")
        return features

    def get_config(self):
        return {**super().get_config(), "coef": self.coef}


class TfKerasScalarMix(tf_keras.layers.Layer):
    """ELMo's `gamma * sum_k softmax(s)_k h_k` over a list of same-shape tensors (Peters et al., eq. 1), as a
    tf_keras layer (what a `hub.KerasLayer` model is built of); the formula is `models.scalar_mix.mix_layers`,
    the one the Keras 3 `ScalarMix` of the export uses. Weights: `scalar_weights` `[N]`, `gamma` `[]`."""

    def build(self, input_shape):
        self.scalars = self.add_weight(name="scalar_weights", shape=(len(input_shape),), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")

    def call(self, inputs):
        return mix_layers(list(inputs), self.scalars, self.gamma)


class TaskWordSplit(tf_keras.layers.Layer):
    """`[B]` sentences -> `[B, T]` words ("" padding), split as the biLM module splits them (BERT's basic
    tokenizer) but with case kept, so position t is the module's t-th word. `TaskWords` and `WordCasing`
    read its output, so a sentence is split once."""

    def __init__(self, length: int, **kwargs):
        super().__init__(**kwargs)
        self.length = length

    def call(self, text):
        words = _cased_splitter()(text)  # [B, (W)]
        return words.to_tensor(default_value="", shape=[None, self.length])  # [B, T]

    def get_config(self):
        return {**super().get_config(), "length": self.length}


class TaskWords(tf_keras.layers.Layer):
    """`[B, T]` words (`TaskWordSplit`) -> `[B, T]` ids in the task's own vocabulary (0 padding, 1 a word not
    in it, then `vocabulary` in order)."""

    def __init__(self, vocabulary, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary = list(vocabulary)
        self.lookup = tf_keras.layers.StringLookup(vocabulary=self.vocabulary, mask_token="", num_oov_indices=1)

    def call(self, words):
        return self.lookup(words)  # [B, T]

    def get_config(self):
        return {**super().get_config(), "vocabulary": self.vocabulary}


class WordCasing(tf_keras.layers.Layer):
    """`[B, T]` words (`TaskWordSplit`) -> `[B, T]` casing classes (Collobert et al. 2011's caps feature):
    0 padding, 1 no upper-case letter, 2 first letter upper-case, 3 all letters upper-case (two or more),
    4 upper-case inside only. An uncased module never sees case; this gives it back for every word, seen in
    training or not."""

    CLASSES = 5

    def call(self, words):
        has_upper = tf.strings.regex_full_match(words, r".*\p{Lu}.*")
        first_upper = tf.strings.regex_full_match(words, r"\p{Lu}.*")
        all_upper = tf.strings.regex_full_match(words, r"[^\p{Ll}]*\p{Lu}[^\p{Ll}]*\p{Lu}[^\p{Ll}]*")
        classes = tf.where(all_upper, 3, tf.where(first_upper, 2, tf.where(has_upper, 4, 1)))
        return tf.where(words == "", 0, classes)  # [B, T]


def _cased_splitter():
    """`[B]` sentences -> `[B, (W)]` words, cased: the split `TaskWordSplit` and `task_vocabulary` share."""
    from preprocessing.basic_tokenizer import BasicTokenizer

    basic = BasicTokenizer(lower_case=False)
    return lambda text: basic.split_words(basic.normalize(text))


class ElmoLayers(tf_keras.layers.Layer):
    """The biLM module's outputs (a dict) -> the mix's layer list, lowest first (`word_emb ‖ word_emb`,
    `lstm_outputs1..K`), by `models.scalar_mix.elmo_layers`, the rule the export's `elmo` mix follows."""

    def call(self, outputs):
        return elmo_layers(outputs)


class MaskedTokenMean(tf_keras.layers.Layer):
    """`(x [N, T, D], mask [N, T])` -> the mean of `x` where `mask` is 1 `[N, D]`."""

    def call(self, inputs):
        x, mask = inputs
        mask = tf.cast(mask, x.dtype)[:, :, None]  # [N, T, 1]
        return tf.reduce_sum(x * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)


class ZerosLike(tf_keras.layers.Layer):
    """`[N, T]` -> `[N]` zeros (position 0 of every row: `[CLS]`)."""

    def call(self, x):
        return tf.zeros_like(x[:, 0], dtype=tf.int32)


class MaskedMean(tf_keras.layers.Layer):
    """`(x [N, T, D] zero past each length, lengths [N])` -> the mean over real tokens `[N, D]`."""

    def call(self, inputs):
        x, lengths = inputs
        return tf.reduce_sum(x, axis=1) / tf.maximum(tf.cast(lengths, x.dtype), 1.0)[:, None]


class WordMask(tf_keras.layers.Layer):
    """`[N, T]` words (`TaskWordSplit`, "" padding) -> `[N, T]` bool, true at real words."""

    def call(self, words):
        return tf.not_equal(words, "")


class MaskedMax(tf_keras.layers.Layer):
    """`(x [N, T, D], mask [N, T])` -> the maximum over the masked-in positions `[N, D]` (0 for a row with
    none)."""

    def call(self, inputs):
        x, mask = inputs
        keep = tf.cast(mask, tf.bool)[:, :, None]  # [N, T, 1]
        peak = tf.reduce_max(tf.where(keep, x, tf.fill(tf.shape(x), x.dtype.min)), axis=1)  # [N, D]
        return tf.where(tf.reduce_any(keep, axis=1), peak, tf.zeros_like(peak))


class FixLength(tf_keras.layers.Layer):
    """`[N, t, D]` -> `[N, length, D]`, cut or zero-padded on the right (labels have a fixed length)."""

    def __init__(self, length: int, **kwargs):
        super().__init__(**kwargs)
        self.length = length

    def call(self, x):
        x = x[:, :self.length]
        return tf.pad(x, [[0, 0], [0, self.length - tf.shape(x)[1]], [0, 0]])

    def get_config(self):
        return {**super().get_config(), "length": self.length}


class PairFeatures(tf_keras.layers.Layer):
    """`[N, 2, D]` -> `[u, v, u * v, u - v]` `[N, 4D]`."""

    def call(self, x):
        u, v = x[:, 0], x[:, 1]
        return tf.concat([u, v, u * v, u - v], axis=-1)


class SumSequences(tf_keras.layers.Layer):
    def call(self, x):
        return tf.reduce_sum(x, axis=1)


class SplitLogits(tf_keras.layers.Layer):
    """`[N, T, 2]` -> `(start [N, T], end [N, T])`, padding positions pushed to -10000."""

    def call(self, inputs):
        logits, mask = inputs
        penalty = (1.0 - tf.cast(mask, logits.dtype)) * -10000.0
        return logits[..., 0] + penalty, logits[..., 1] + penalty


def task_vocabulary(sentences: list[tuple[str, ...]], min_count: int) -> tuple[str, ...]:
    """The biLM tagger's own words (`TaskWords`): those of the training sentences (split as `TaskWordSplit`
    splits) seen at least `min_count` times, most frequent first (ties in first-seen order)."""
    import collections

    split = _cased_splitter()
    counts = collections.Counter()
    texts = [" ".join(words) for words in sentences]
    for i in range(0, len(texts), 4096):
        for row in split(tf.constant(texts[i:i + 4096])).to_list():
            counts.update(w.decode("utf-8") for w in row)
    return tuple(w for w, n in counts.most_common() if n >= min_count and w)
