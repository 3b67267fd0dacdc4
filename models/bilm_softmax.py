"""The biLM's output softmax (shared by the forward and backward LMs): full, and sampled in an XLA-friendly way.

`tf.nn.sampled_softmax_loss` draws its candidates with `LogUniformCandidateSampler`, which has no XLA
kernel. Here candidates are drawn by inverse CDF from a stateless uniform (a Keras `SeedGenerator`), WITH
replacement (so their count is static), shared by every position of the batch; each logit is corrected by
the log of its expected count `num_sampled * p(k)`, and a candidate equal to a row's label (an accidental
hit) is removed from that row.

The log-uniform (Zipf) proposal `p(k) = log((k + 2) / (k + 1)) / log(V + 1)` assumes ids sorted by falling
frequency, as bilm-tf's vocabularies are. This project's softmax vocabulary is the WordPiece vocab's ids
(`lm_windows`): frequency-ordered only roughly, within the whole-word tail, after `[unused]` and
single-character entries that hardly occur as words. The correction keeps the estimate consistent, but
many samples are spent on rare ids; `sampler="uniform"` is the alternative. Evaluation always uses the
full softmax.
"""

import math

import keras
import tensorflow as tf

SAMPLERS = ("log_uniform", "uniform")
_REMOVED = -1e9  # logit of an accidental hit (float32)


def draw_candidates(uniform: tf.Tensor, vocab_size: int, sampler: str) -> tf.Tensor:
    """`[S]` uniforms in [0, 1) -> `[S]` int32 ids drawn from `sampler`'s distribution, by inverse CDF."""
    if sampler == "uniform":
        ids = tf.floor(uniform * vocab_size)
    else:  # P(X <= k) = log(k + 2) / log(V + 1)
        ids = tf.floor(tf.exp(uniform * math.log(vocab_size + 1.0))) - 1.0
    return tf.clip_by_value(tf.cast(ids, tf.int32), 0, vocab_size - 1)


def log_expected_count(ids: tf.Tensor, num_sampled: int, vocab_size: int, sampler: str) -> tf.Tensor:
    """log(num_sampled * p(id)), float32, the shape of `ids`."""
    if sampler == "uniform":
        return tf.fill(tf.shape(ids), math.log(num_sampled / vocab_size))
    k = tf.cast(ids, tf.float32)
    p = (tf.math.log1p(1.0 / (k + 1.0))) / math.log(vocab_size + 1.0)
    return tf.math.log(num_sampled * p)


def sampled_logits(hidden, labels, kernel, bias, candidates, log_q_labels, log_q_candidates) -> tf.Tensor:
    """Corrected logits of `[label, candidates...]`: `[N, 1 + S]` float32; the label is column 0.

    hidden `[N, D]`, labels `[N]`, kernel `[V, D]`, bias `[V]`, candidates `[S]`, log_q_labels `[N]`,
    log_q_candidates `[S]`. Candidates equal to a row's label get a logit of -1e9 in that row.
    """
    labels = tf.cast(labels, tf.int32)
    true_w = tf.gather(kernel, labels)  # [N, D]
    true = tf.reduce_sum(hidden * true_w, axis=-1) + tf.gather(bias, labels)  # [N]
    sampled_w = tf.gather(kernel, candidates)  # [S, D]
    sampled = tf.matmul(hidden, sampled_w, transpose_b=True) + tf.gather(bias, candidates)  # [N, S]
    true = tf.cast(true, tf.float32) - log_q_labels  # [N]
    sampled = tf.cast(sampled, tf.float32) - log_q_candidates  # [N, S]
    hits = tf.equal(labels[:, None], candidates[None, :])  # [N, S]
    sampled = tf.where(hits, _REMOVED, sampled)
    return tf.concat([true[:, None], sampled], axis=1)  # [N, 1 + S]


@keras.saving.register_keras_serializable(package="models")
class LMSoftmax(keras.layers.Layer):
    """Output embedding `kernel` `[V, D]` + `bias` `[V]` (bilm-tf's `softmax/W`, `softmax/b`).

    Call `layer(hidden)` for full logits `[..., V]` (compute dtype), or `layer(hidden, labels)` for
    sampled-softmax logits `[..., 1 + num_sampled]` (float32) whose target is always class 0.

    Args:
      vocab_size: V.
      num_sampled: candidates per call for the sampled softmax (0: full softmax only).
      sampler: "log_uniform" (bilm-tf, TF's default) or "uniform".
      seed: optional seed of the candidate sampler.
    """

    def __init__(self, vocab_size: int, num_sampled: int = 0, sampler: str = "log_uniform", seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        self.vocab_size = vocab_size
        self.num_sampled = num_sampled
        self.sampler = sampler
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed, name="sampler_seed")
        self.supports_masking = True

    def build(self, input_shape):
        dim = int(input_shape[-1])
        self.kernel = self.add_weight(name="kernel", shape=(self.vocab_size, dim),
                                      initializer=keras.initializers.RandomNormal(stddev=1.0 / math.sqrt(dim)))
        self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")

    def call(self, hidden, labels=None):  # hidden [..., D]
        if labels is None:
            # A 2-D matmul: the gradient of the equivalent `einsum("...d,vd->...v")` w.r.t. the kernel
            # broadcasts over the batch dimensions ([B, V, D] per row) and was 20x slower.
            flat = tf.reshape(hidden, [-1, hidden.shape[-1]])  # [N, D]
            logits = tf.matmul(flat, self.kernel, transpose_b=True) + self.bias  # [N, V]
            return tf.reshape(logits, tf.concat([tf.shape(hidden)[:-1], [self.vocab_size]], 0))  # [..., V]
        if self.num_sampled < 1:
            raise ValueError("LMSoftmax was built without num_sampled: no sampled softmax")
        flat = tf.reshape(hidden, [-1, hidden.shape[-1]])  # [N, D]
        flat_labels = tf.reshape(tf.cast(labels, tf.int32), [-1])  # [N]
        uniform = keras.random.uniform([self.num_sampled], seed=self.seed_generator)  # [S]
        candidates = draw_candidates(uniform, self.vocab_size, self.sampler)  # [S]
        count = (self.num_sampled, self.vocab_size, self.sampler)
        logits = sampled_logits(flat, flat_labels, self.kernel, self.bias, candidates,
                                log_expected_count(flat_labels, *count), log_expected_count(candidates, *count))
        return tf.reshape(logits, tf.concat([tf.shape(labels), [1 + self.num_sampled]], 0))  # [..., 1 + S]

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "num_sampled": self.num_sampled,
                "sampler": self.sampler, "seed": self.seed}
