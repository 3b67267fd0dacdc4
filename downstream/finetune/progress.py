"""Fine-tuning's progress lines, as `models.training.train` prints pretraining's: every few optimizer steps
the step, the epoch, the epoch's mean loss so far, the learning rate, examples per second over the last
interval, and the time left; one line at the end of each epoch.

    step 50/651 epoch 1/3 loss 0.6931 learning_rate 2.5e-05 examples/s 38.2 | eta 4m10s

Example:
    callback = progress_callback(total_steps=651, epochs=3, batch_size=32, log=print)
    model.fit(data, epochs=3, verbose=0, callbacks=[callback])
"""

import time

LOG_LINES = 10  # lines per run at least, for runs under 500 steps
LOG_EVERY = 50  # steps between lines otherwise, as models.training.train's default log_every


def log_every(total_steps: int) -> int:
    return max(1, min(LOG_EVERY, total_steps // LOG_LINES))


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def progress_line(step: int, total_steps: int, epoch: int, epochs: int, loss: float, learning_rate: float,
                  examples_per_second: float, seconds_per_step: float) -> str:
    eta = (total_steps - step) * seconds_per_step
    return (f"step {step}/{total_steps} epoch {epoch}/{epochs} loss {loss:.4f} learning_rate {learning_rate:.3g} "
            f"examples/s {examples_per_second:.1f} | eta {duration(eta)}")


def progress_callback(total_steps: int, epochs: int, batch_size: int, log=print):
    """A tf_keras callback that logs `progress_line`s every `log_every(total_steps)` steps and each epoch's
    metrics at its end."""
    import tf_keras

    every = log_every(total_steps)

    class Progress(tf_keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.step, self.epoch = 0, 0
            self.mark, self.mark_step = time.time(), 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch + 1

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            if self.step % every and self.step != total_steps:
                return
            now = time.time()
            steps, seconds = self.step - self.mark_step, max(now - self.mark, 1e-9)
            rate = self.model.optimizer.learning_rate  # the rate of the step just taken
            loss = float((logs or {}).get("loss", float("nan")))  # the epoch's mean so far
            log(progress_line(self.step, total_steps, self.epoch, epochs, loss,
                              float(rate.numpy() if hasattr(rate, "numpy") else rate),
                              steps * batch_size / seconds, seconds / steps))
            self.mark, self.mark_step = now, self.step

        def on_epoch_end(self, epoch, logs=None):
            log(f"epoch {epoch + 1}/{epochs}: " + ", ".join(f"{k} {v:.4f}" for k, v in (logs or {}).items()))

    return Progress()
