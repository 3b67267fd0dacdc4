"""The fine-tuning loop: the task model compiled with the task's losses and BERT's optimizer
(`schedule.adamw`), trained with tf_keras `fit` on the encoded examples in a seeded shuffle, with progress
lines (`progress.py`). `hub.KerasLayer` fine-tunes under tf_keras only, so this is `fit`, not the
pretraining loop of `models.training`.

Example:
    steps = total_steps(encoded, config)
    compile_model(model, task, config, steps)
    losses = train(model, encoded, config, log=print)  # the mean loss of each epoch
"""

import dataclasses
import time


def total_steps(encoded, config) -> int:
    """Optimizer steps of the whole run: `epochs` over `encoded.rows` in batches of `batch_size` (the last
    one smaller)."""
    return config.epochs * -(-encoded.rows // config.batch_size)


def compile_model(model, task, config, steps: int) -> None:
    """Compiles `model` for `task` (a `tasks.FinetuneTask`): sparse cross-entropy on each of its outputs,
    weighted by its `loss_weights`, and AdamW over `steps` steps."""
    import tf_keras

    from downstream.finetune.schedule import adamw

    loss = tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(adamw(config, steps), {name: loss for name in task.outputs}, loss_weights=task.loss_weights)


def train(model, encoded, config, log=print, callbacks=()) -> list[float]:
    """`fit` over `config.epochs` (fewer when a callback stops it, `selection.best_epoch_callback`); returns
    each epoch's mean training loss."""
    import tensorflow as tf

    from downstream.finetune.progress import progress_callback

    n = encoded.rows
    parts = (encoded.x, encoded.y) if encoded.weights is None else (encoded.x, encoded.y, encoded.weights)
    data = tf.data.Dataset.from_tensor_slices(parts).shuffle(n, seed=config.seed, reshuffle_each_iteration=True)
    data = data.batch(config.batch_size).prefetch(2)
    progress = progress_callback(total_steps(encoded, config), config.epochs, config.batch_size, log)
    history = model.fit(data, epochs=config.epochs, verbose=0, callbacks=[progress, *callbacks])
    return [float(v) for v in history.history["loss"]]


@dataclasses.dataclass(frozen=True)
class Trained:
    """What a run of `fit` reports: optimizer steps taken, each epoch's mean loss, seconds spent."""
    steps: int
    losses: list
    seconds: float


def fit(model, task, encoded, config, log=print, callbacks=()) -> Trained:
    """Compiles and trains `model` on `encoded` for `task`; `callbacks` (tf_keras) join the progress lines."""
    steps = total_steps(encoded, config)
    compile_model(model, task, config, steps)
    started = time.time()
    losses = train(model, encoded, config, log, callbacks)
    return Trained(steps * len(losses) // config.epochs, losses, time.time() - started)
