"""Fine-tuning's optimizer and learning-rate schedule: BERT's recipe, AdamW on a linear warm-up to the peak
rate and a linear decay to 0, in tf_keras (what `hub.KerasLayer` fine-tunes in). The formula is pretraining's
(`models.training.optimization.warmup_decay_rate`); only the Keras 2 base class is this module's.

Example:
    optimizer = adamw(FinetuneConfig(learning_rate=3e-5, warmup=0.1), steps=651)
"""


def warmup_linear(peak: float, warmup_steps: int, total_steps: int):
    """BERT's fine-tuning schedule as a tf_keras schedule: linear warm-up to `peak` over `warmup_steps`, then
    linear decay to 0 at `total_steps`."""
    import tf_keras

    from models.training.optimization import warmup_decay_rate

    class WarmupLinear(tf_keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return warmup_decay_rate(step, peak, warmup_steps, total_steps)

        def get_config(self):
            return {"peak": peak, "warmup_steps": warmup_steps, "total_steps": total_steps}

    return WarmupLinear()


# Names of the weights that take no weight decay (biases and layer norms), as in BERT.
NO_DECAY = ["bias", "LayerNorm", "layer_norm", "gamma", "beta"]


def adamw(config, steps: int):
    """A tf_keras AdamW over `steps` optimizer steps with `config`'s (a `FinetuneConfig`) peak rate, warm-up
    fraction, weight decay (none on `NO_DECAY`) and global gradient clipping (`clip_norm=0`: none)."""
    import tf_keras

    schedule = warmup_linear(config.learning_rate, int(steps * config.warmup), steps)
    optimizer = tf_keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay, epsilon=1e-6,
                                          global_clipnorm=config.clip_norm or None)
    optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    return optimizer
