"""Optimizers and learning-rate schedules as the papers train: AdamW (BERT, GPT) or LAMB (large batches)
with linear warm-up then linear/polynomial decay, weight decay off for biases and layer norms, global-norm
clipping; Adagrad for the biLM as bilm-tf trained it; dynamic loss scaling under `mixed_float16`; the global
dtype policy (`auto` decided by `hardware`). `warmup_decay_rate` is the one learning-rate formula: fine-tuning's
tf_keras schedule calls it too.

Gradients reach the optimizer already summed over replicas (the loop all-reduces once, after gradient
accumulation), so clipping sees the global gradient. Keras 3's TF optimizer would otherwise all-reduce
inside `apply`, after clipping each replica's share on its own; `_PreReduced` turns that off.
"""

import keras
import tensorflow as tf

from models.config import TrainConfig
from models.training import hardware

# Keras 3 variable names (`variable.name` is the short name) exempt from weight decay: biases (incl. the
# MLM head's `output_bias`), layer-norm scales and offsets, and ScalarMix's weights.
NO_DECAY = ["bias", "gamma", "beta", "scalar_weights"]


def warmup_decay_rate(step, peak: float, warmup_steps: int, total_steps: int, decay: str = "linear",
                      power: float = 1.0, end_ratio: float = 0.0) -> tf.Tensor:
    """The house's one learning-rate formula (TF ops, so Keras 3 and tf_keras schedules both call it): linear
    warm-up from 0 to `peak` over `warmup_steps`, then decay to `peak * end_ratio` at `total_steps`
    (`linear`; `polynomial` with `power`; `constant` keeps the peak). A warm-up of 0 starts at the peak, as
    BERT's `optimization.py` does; a warm-up longer than the run never reaches it.

    Example:
      >>> [round(float(warmup_decay_rate(s, 1.0, 10, 110)), 2) for s in (0, 5, 10, 60, 110)]
      [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    step = tf.cast(step, tf.float32)  # scalar
    warmup = peak * step / max(warmup_steps, 1)
    if decay == "constant":
        after = tf.constant(peak, tf.float32)
    else:
        power = 1.0 if decay == "linear" else power
        span = max(total_steps - warmup_steps, 1)
        remaining = tf.clip_by_value(1.0 - (step - warmup_steps) / span, 0.0, 1.0)
        end = peak * end_ratio
        after = (peak - end) * remaining ** power + end
    return tf.where(step < warmup_steps, warmup, after)


@keras.saving.register_keras_serializable(package="models")
class WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """`warmup_decay_rate` as a Keras 3 schedule (training's optimizers)."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int, decay: str = "linear",
                 power: float = 1.0, end_ratio: float = 0.0):
        self.peak, self.warmup_steps, self.total_steps = peak, warmup_steps, total_steps
        self.decay, self.power, self.end_ratio = decay, power, end_ratio

    def __call__(self, step):
        return warmup_decay_rate(step, **self.get_config())

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps,
                "decay": self.decay, "power": self.power, "end_ratio": self.end_ratio}


class _PreReduced:
    """Mixin: gradients are already all-reduced by the caller."""

    def _all_reduce_sum_gradients(self, grads_and_vars):
        return list(grads_and_vars)


class AdamW(_PreReduced, keras.optimizers.AdamW):
    pass


class Lamb(_PreReduced, keras.optimizers.Lamb):
    pass


class Adagrad(_PreReduced, keras.optimizers.Adagrad):
    pass


def schedule(config: TrainConfig) -> WarmupDecay:
    return WarmupDecay(config.learning_rate, config.warmup_steps, config.train_steps, config.decay,
                       config.decay_power, config.end_learning_rate_ratio)


def make_optimizer(config: TrainConfig) -> keras.optimizers.Optimizer:
    """Call inside `strategy.scope()`."""
    clip = {"global_clipnorm": config.clip_norm} if config.clip_norm > 0 else {}
    lr = schedule(config)
    if config.optimizer == "adagrad":
        optimizer = Adagrad(learning_rate=lr, initial_accumulator_value=config.adagrad_initial_accumulator,
                            epsilon=config.epsilon, **clip)
    else:
        cls = AdamW if config.optimizer == "adamw" else Lamb
        optimizer = cls(learning_rate=lr, weight_decay=config.weight_decay, beta_1=config.beta_1,
                        beta_2=config.beta_2, epsilon=config.epsilon, **clip)
        optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    if config.mixed_precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def set_precision(config: TrainConfig) -> str:
    """Sets the global Keras dtype policy (`auto` decided for this machine and `jit_compile`,
    `hardware.resolve_precision`) and returns it; call before building the model."""
    policy = hardware.resolve_precision(config.mixed_precision, config.jit_compile)
    keras.config.set_dtype_policy(policy)
    return policy
