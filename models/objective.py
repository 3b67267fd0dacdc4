"""The contract between a model family and the one training loop (`models/training/trainer.py`).

A `PretrainingTask` knows how to build its Keras model from its frozen config, how to run it on one
batch of the reader's `(x, y, sample_weight)` and turn the outputs into a loss and metric statistics,
and what data it expects. The loop knows nothing else about the model: strategies, XLA, accumulation,
checkpoints and summaries are the same for all three families.

Statistics are `(sum, count)` pairs of float32 scalars so that they add up across replicas, micro-batches
and steps exactly; `metrics()` turns accumulated totals into the reported numbers (accuracy = sum/count,
perplexity = exp(loss_sum/count), ...).
"""

import abc
import math

import tensorflow as tf

Stats = dict[str, tuple[tf.Tensor, tf.Tensor]]


class PretrainingTask(abc.ABC):
    """One model family's pretraining objective.

    Subclasses set `kind` ("bert" | "gpt" | "bilm") and `config_class`, and take their config in
    `__init__`.
    """

    kind: str
    config_class: type

    def __init__(self, config):
        self.config = config

    @abc.abstractmethod
    def build_model(self):
        """The Keras pretraining model (built, with its weights created)."""

    def prepare_batch(self, x, y, sample_weight):
        """Runs in the input pipeline (outside the compiled step): drop or convert what the model does not
        take (strings cannot enter an XLA computation). Default: unchanged."""
        return x, y, sample_weight

    @abc.abstractmethod
    def loss_and_stats(self, model, x, y, sample_weight, training: bool) -> tuple[tf.Tensor, Stats]:
        """Forward pass on this replica's batch.

        Returns the loss to minimise (a float32 scalar, the mean over this replica's batch; the loop scales
        it for replicas and accumulation) and `(sum, count)` statistics for `metrics`.
        """

    @abc.abstractmethod
    def metrics(self, totals: dict[str, tuple[float, float]]) -> dict[str, float]:
        """Accumulated `(sum, count)` totals -> the reported metrics (the keys `models.training.evaluate` writes)."""

    @abc.abstractmethod
    def data_expectations(self) -> dict:
        """Keyword arguments for `readers.make_dataset` checks: model, max_seq_length, ..."""

    @abc.abstractmethod
    def tokens_per_example(self) -> int:
        """Input positions per example, for tokens/s."""

    @abc.abstractmethod
    def flops_per_example(self) -> float:
        """Training FLOPs (forward + backward, matmuls only) per example, for model FLOPs utilisation."""


def ratio(totals: dict, name: str) -> float:
    total, count = totals.get(name, (0.0, 0.0))
    return float(total) / float(count) if count else float("nan")


def perplexity(totals: dict, name: str) -> float:
    mean = ratio(totals, name)
    return math.exp(min(mean, 700.0)) if mean == mean else float("nan")


def weighted_cross_entropy(labels, logits, weights) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Sparse cross-entropy in float32. Returns `(loss_sum, correct_sum, weight_sum)`.

    labels [...], logits [..., V], weights [...] (0.0 on padding).
    """
    logits = tf.cast(logits, tf.float32)
    weights = tf.cast(weights, tf.float32)
    labels = tf.cast(labels, tf.int32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)  # [...]
    # Correct when the label's logit is the largest (ties count as correct). Cheaper than argmax over a
    # large vocabulary: 3.7 vs 26 ms a step for BERT-tiny's [32, 20, 30522] logits under XLA on CPU.
    label_logits = tf.gather(logits, labels[..., None], batch_dims=labels.shape.rank)[..., 0]  # [...]
    correct = tf.cast(label_logits >= tf.reduce_max(logits, axis=-1), tf.float32)
    return tf.reduce_sum(losses * weights), tf.reduce_sum(correct * weights), tf.reduce_sum(weights)
