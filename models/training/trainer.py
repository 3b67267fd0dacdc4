"""The one training loop, for every strategy (default, mirrored, multi-worker, TPU).

A custom loop, as TF Model Garden's Orbit runs it, because Keras 3's `fit` fails under
`MultiWorkerMirroredStrategy` in this stack: a `tf.function` pulls `steps_per_execution` optimizer steps
from a distributed iterator and runs each with `strategy.run`. A replica step accumulates gradients over
`accumulation_steps` micro-batches, all-reduces them once, and applies them (the optimizer clips the global
gradient). With `jit_compile` the replica step is compiled by XLA: wholly on one device; its gradient part
under several GPU replicas; not at all for mirrored CPU replicas (a TF limitation, logged).

State is `model`, `optimizer` and `step` in a `tf.train.Checkpoint`, saved every `checkpoint_every` steps,
at the end, and on SIGTERM/SIGINT (preemption) before exiting (`stopped_by_signal` says which; the command
exits 128 + signal). A non-finite loss stops training with `NonFiniteLossError` before anything is saved,
and no checkpoint is ever written with non-finite weights: the last one kept is the last finite one. The
data position is the step: the readers are deterministic for a seed, so a resumed run skips the batches
already consumed and sees exactly the batches an uninterrupted run would have. The chief writes TensorBoard summaries (`train/`, `eval/`), a
`history.jsonl` of logged metrics and the checkpoints; other workers save to a scratch folder they remove.
"""

import json
import logging
import os
import shutil
import signal
import time

import keras
import numpy as np
import tensorflow as tf

from models import families
from models.training import distribute
from models.training import optimization
from models.config import TrainConfig
from models.objective import PretrainingTask
from commands.user_errors import UserError

log = logging.getLogger("models.training.train")
HISTORY = "history.jsonl"


class Trainer:
    """Builds the model and optimizer under the strategy, restores the latest checkpoint, trains.

    Args:
      task: the model family's objective.
      config: the training configuration.
      strategy: from `distribute.make_strategy`.
      model_dir: checkpoints, summaries and history go here.
    """

    def __init__(self, task: PretrainingTask, config: TrainConfig, strategy: tf.distribute.Strategy,
                 model_dir: str):
        self.task, self.config, self.strategy, self.model_dir = task, config, strategy, model_dir
        self.chief = distribute.is_chief(strategy)
        self.use_xla = config.jit_compile and distribute.xla_supported(strategy)
        if config.jit_compile and not self.use_xla:
            log.warning("XLA is off: TF cannot compile mirrored replica steps on CPU devices")
        self.precision = optimization.set_precision(config)  # `auto` decided for this machine
        keras.utils.set_random_seed(config.seed)
        with strategy.scope():
            self.model = task.build_model()
            self.variables = trained_variables(self.model, config.train_only)
            self.optimizer = optimization.make_optimizer(config)
            self.optimizer.build(self.variables)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # Keras 3 does not track its random seed generators' states (dropout) for tf.train.Checkpoint; saving
        # them is what makes a resumed run draw the same dropout masks as an uninterrupted one.
        rng_states = [v.value for v in self.model.non_trainable_variables if "seed_generator" in v.path]
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step,
                                              rng_states=rng_states)
        save_dir = model_dir if self.chief else os.path.join(model_dir, f".worker_{distribute.worker_id(strategy)}")
        self.manager = tf.train.CheckpointManager(self.checkpoint, save_dir, config.keep_checkpoints,
                                                  step_counter=self.step)
        self._train_fn = self._eval_fn = None
        # CPU-seconds (every thread) this process spent in training steps, tracing and compiling included;
        # evaluations, checkpoints and start-up left out: what a step budget costs, comparable across trainers.
        self.train_cpu_seconds = 0.0
        self._stop_signal = None
        self.stopped_by_signal = None  # the signal that ended the last `train`, if one did

    # --- checkpoints ------------------------------------------------------------------------------------

    def restore(self) -> int:
        """Restores the latest checkpoint in `model_dir` if there is one; returns the step."""
        latest = tf.train.latest_checkpoint(self.model_dir)
        if latest and not any(name.startswith("optimizer/") for name, _ in families.checkpoint_variables(latest)):
            # A model-only checkpoint (`models.convert`): the weights and step, a fresh optimizer.
            families.restore(tf.train.Checkpoint(model=self.model, step=self.step), latest, partial=True)
            log.info("restored the model of %s (step %d); no optimizer state in it: starting afresh", latest,
                     int(self.step.numpy()))
        elif latest:
            families.restore(self.checkpoint, latest)
            log.info("restored %s (step %d)", latest, int(self.step.numpy()))
        return int(self.step.numpy())

    def save(self) -> str:
        """Saves the current state, which must be finite (raises `NonFiniteLossError` otherwise)."""
        self._check_finite_weights()
        try:
            path = self.manager.save(checkpoint_number=self.step)
        except (tf.errors.OpError, OSError) as e:  # a full disk, a quota, a lost mount
            raise self._save_failed(e) from e
        if not self.chief:
            shutil.rmtree(self.manager.directory, ignore_errors=True)
        return path

    def _save_failed(self, error) -> "CheckpointWriteError":
        """Removes what the failed save left (`ckpt-N_temp/`, a partial `ckpt-N.*`); the error to raise."""
        prefix = f"{self.manager._checkpoint_prefix}-{int(self.step.numpy())}"
        for leftover in tf.io.gfile.glob(prefix + "_temp*") + tf.io.gfile.glob(prefix + ".*"):
            try:
                if tf.io.gfile.isdir(leftover):
                    tf.io.gfile.rmtree(leftover)
                else:
                    tf.io.gfile.remove(leftover)
            except (tf.errors.OpError, OSError):
                pass
        reason = (getattr(error, "message", None) or str(error)).strip().splitlines()[0][:300]
        last = self.manager.latest_checkpoint
        return CheckpointWriteError(f"cannot write checkpoint {prefix} ({reason}): nothing of it is kept; free "
                                    f"space and rerun, which " + (f"resumes from {last}" if last else
                                                                  "starts again from step 0"))

    # --- the compiled steps -----------------------------------------------------------------------------

    def _gradients(self, batches):
        """Per replica: micro-batches -> (summed gradients, summed stats)."""
        scale = 1.0 / (self.strategy.num_replicas_in_sync * len(batches))
        variables = self.variables
        grads, totals = None, None
        for x, y, w in batches:
            with tf.GradientTape() as tape:
                loss, stats = self.task.loss_and_stats(self.model, x, y, w, training=True)
                scaled = self.optimizer.scale_loss(loss * scale)
            g = [tf.convert_to_tensor(t) for t in tape.gradient(scaled, variables)]  # dense (IndexedSlices)
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            totals = stats if totals is None else _add(totals, stats)
        return grads, totals

    def _apply(self, grads):
        grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)
        self.optimizer.apply(grads, self.variables)

    def _replica_step_fn(self):
        if self.use_xla and self.strategy.num_replicas_in_sync == 1:
            @tf.function(jit_compile=True)
            def whole(batches):
                grads, stats = self._gradients(batches)
                self._apply(grads)
                return stats
            return whole
        gradients = tf.function(self._gradients, jit_compile=True) if self.use_xla else self._gradients

        def replica_step(batches):
            grads, stats = gradients(batches)
            self._apply(grads)
            return stats
        return replica_step

    def _reduce(self, per_replica):
        return {k: (self.strategy.reduce("SUM", s, axis=None), self.strategy.reduce("SUM", c, axis=None))
                for k, (s, c) in per_replica.items()}

    def _make_train_fn(self):
        replica_step = self._replica_step_fn()
        accumulation = self.config.accumulation_steps

        def one_step(iterator):
            batches = [next(iterator) for _ in range(accumulation)]
            stats = self._reduce(self.strategy.run(replica_step, args=(batches,)))
            self.step.assign_add(1)
            return stats

        @tf.function
        def train_fn(iterator, steps):
            totals = one_step(iterator)
            for _ in tf.range(steps - 1):
                totals = _add(totals, one_step(iterator))
            return totals
        return train_fn

    def _make_eval_fn(self):
        def replica_eval(x, y, w):
            return self.task.loss_and_stats(self.model, x, y, w, training=False)[1]
        if self.use_xla and self.strategy.num_replicas_in_sync == 1:
            replica_eval = tf.function(replica_eval, jit_compile=True)

        @tf.function
        def eval_fn(iterator):
            return self._reduce(self.strategy.run(replica_eval, args=next(iterator)))
        return eval_fn

    # --- loops ------------------------------------------------------------------------------------------

    def evaluate(self, dataset, steps: int) -> dict[str, float]:
        """`dataset`: a distributed dataset of `(x, y, w)`. Returns the task's metrics over `steps` batches."""
        self._eval_fn = self._eval_fn or self._make_eval_fn()
        iterator, totals = iter(dataset), {}
        for _ in range(steps):
            totals = _add_numpy(totals, self._eval_fn(iterator))
        return self.task.metrics(totals)

    def train(self, dataset, eval_dataset=None) -> dict[str, float]:
        """Trains from the current step to `train_steps`; returns the last logged training metrics.

        `dataset` is a distributed dataset already positioned at the current step (see `data_position`).
        """
        cfg = self.config
        self._train_fn = self._train_fn or self._make_train_fn()
        iterator = iter(dataset)
        writers = self._summary_writers()
        step, interval, start = int(self.step.numpy()), {}, time.time()
        interval_start, interval_first = start, step
        metrics = {}
        self.stopped_by_signal = None
        self._install_signal_handlers()
        try:
            while step < cfg.train_steps and self._stop_signal is None:
                n = _steps_to_boundary(step, cfg)
                started = time.process_time()
                stats = _add_numpy({}, self._train_fn(iterator, tf.constant(n)))
                self.train_cpu_seconds += time.process_time() - started
                step = int(self.step.numpy())
                self._check_finite_loss(stats, step - n + 1, step)
                interval = _add_numpy(interval, stats)
                if step % cfg.log_every == 0 or step == cfg.train_steps:
                    now = time.time()
                    metrics = self._log(writers, step, interval, step - interval_first, now - interval_start,
                                        now - start, start_step=interval_first)
                    interval, interval_start, interval_first = {}, now, step
                if step % cfg.checkpoint_every == 0 or step == cfg.train_steps:
                    self.save()
                if eval_dataset is not None and cfg.eval_every and step % cfg.eval_every == 0:
                    self._log_eval(writers, step, self.evaluate(eval_dataset, cfg.eval_steps))
            if self._stop_signal is not None:
                self.stopped_by_signal = self._stop_signal
                path = self.save()
                log.warning("stopped by signal %d at step %d; saved %s (run again to resume)",
                            self._stop_signal, step, path)
                return metrics
        finally:
            self._restore_signal_handlers()
        if eval_dataset is not None and not (cfg.eval_every and step % cfg.eval_every == 0):
            self._log_eval(writers, step, self.evaluate(eval_dataset, cfg.eval_steps))
        return metrics

    def _check_finite_loss(self, stats: dict, first: int, last: int) -> None:
        bad = {k: s for k, (s, _) in stats.items() if not np.isfinite(s)}
        if bad:
            raise NonFiniteLossError(
                f"non-finite loss in steps {first}-{last} ({', '.join(f'{k} {v}' for k, v in bad.items())}): "
                f"training stopped, the last checkpoint kept is {self._last_checkpoint()}; lower learning_rate (now "
                f"{self.config.learning_rate:g}) or raise warmup_steps, or check the data")

    def _check_finite_weights(self) -> None:
        finite = [bool(tf.reduce_all(tf.math.is_finite(v.value))) for v in self.model.trainable_variables]
        if not all(finite):
            raise NonFiniteLossError(
                f"non-finite weights at step {int(self.step.numpy())}: training stopped, not saved; the last "
                f"checkpoint kept is {self._last_checkpoint()}; lower learning_rate (now "
                f"{self.config.learning_rate:g}) or raise warmup_steps")

    def _last_checkpoint(self) -> str:
        return self.manager.latest_checkpoint or "none"

    def data_position(self) -> int:
        """Micro-batches each replica has consumed, i.e. per-replica batches to skip on resume."""
        return int(self.step.numpy()) * self.config.accumulation_steps

    # --- reporting --------------------------------------------------------------------------------------

    def _summary_writers(self):
        if not self.chief:
            return {k: tf.summary.create_noop_writer() for k in ("train", "eval")}
        return {k: tf.summary.create_file_writer(os.path.join(self.model_dir, k)) for k in ("train", "eval")}

    def _log(self, writers, step, totals, steps, seconds, elapsed, start_step):
        cfg = self.config
        metrics = self.task.metrics(totals)
        examples = steps * cfg.batch_size
        metrics["learning_rate"] = float(optimization.schedule(cfg)(step))
        metrics["examples_per_second"] = examples / max(seconds, 1e-9)
        metrics["tokens_per_second"] = metrics["examples_per_second"] * self.task.tokens_per_example()
        metrics["flops_per_second"] = metrics["examples_per_second"] * self.task.flops_per_example()
        eta = (cfg.train_steps - step) * seconds / max(steps, 1)
        shown = " ".join(f"{k} {v:.4g}" for k, v in metrics.items()
                         if k not in ("examples_per_second", "flops_per_second"))
        log.info("step %d/%d %s | eta %s", step, cfg.train_steps, shown, _duration(eta))
        with writers["train"].as_default(step=step):
            for k, v in metrics.items():
                tf.summary.scalar(k, v)
        writers["train"].flush()
        # The training process's CPU seconds so far (all threads, start-up and tracing included): what a step
        # budget costs on this machine (`benchmarks.training.model_quality --senses` reads it per checkpoint); and the
        # part spent in training steps (`train_cpu_seconds`, `benchmarks.training.time_to_quality`).
        self._append_history({"step": step, "split": "train", **metrics, "cpu_seconds": round(time.process_time(), 1),
                              "train_cpu_seconds": round(self.train_cpu_seconds, 1)})
        return metrics

    def _log_eval(self, writers, step, metrics):
        log.info("eval at step %d: %s", step, " ".join(f"{k} {v:.4g}" for k, v in metrics.items()))
        with writers["eval"].as_default(step=step):
            for k, v in metrics.items():
                tf.summary.scalar(k, v)
        writers["eval"].flush()
        self._append_history({"step": step, "split": "eval", **metrics})

    def _append_history(self, record):
        if self.chief:
            with tf.io.gfile.GFile(os.path.join(self.model_dir, HISTORY), "a") as f:
                f.write(json.dumps(json_safe(record)) + "\n")

    # --- preemption -------------------------------------------------------------------------------------

    def _install_signal_handlers(self):
        self._previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._previous[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread
                pass

    def _restore_signal_handlers(self):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum, frame):
        if self._stop_signal is not None:  # a second signal: give up at once
            raise KeyboardInterrupt
        self._stop_signal = signum
        log.warning("signal %d: saving a checkpoint after the current steps", signum)


class CheckpointWriteError(UserError):
    """A checkpoint could not be written (disk full, quota); its partial files were removed."""


class NonFiniteLossError(UserError):
    """The loss (or the weights) became NaN or infinite; the last finite checkpoint is kept. Exit status 4."""

    status = 4


def trained_variables(model, train_only: tuple[str, ...]) -> list:
    """The weights the optimizer updates: all trainable ones, or those under the `train_only` path prefixes
    (each names a layer, `mlm_head`, or a weight path). Raises `UserError` for a prefix that matches nothing."""
    if not train_only:
        return list(model.trainable_variables)

    def under(variable, prefix: str) -> bool:
        return variable.path == prefix or variable.path.startswith(prefix.rstrip("/") + "/")

    unmatched = [p for p in train_only if not any(under(v, p) for v in model.trainable_variables)]
    if unmatched:
        layers = sorted({v.path.split("/")[0] for v in model.trainable_variables})
        raise UserError(f"--set train_only: {', '.join(unmatched)} matches no weight; layers: {', '.join(layers)}")
    return [v for v in model.trainable_variables if any(under(v, p) for p in train_only)]


def json_safe(record: dict) -> dict:
    """`record` with non-finite floats as None, so that it is valid JSON (`null`, never a bare `NaN`)."""
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in record.items()}


def _steps_to_boundary(step: int, cfg: TrainConfig) -> int:
    """Steps to run in the next call: never past a log, checkpoint, eval or final step."""
    boundaries = [cfg.log_every, cfg.checkpoint_every] + ([cfg.eval_every] if cfg.eval_every else [])
    next_stop = min([cfg.train_steps] + [(step // b + 1) * b for b in boundaries])
    return max(1, min(cfg.steps_per_execution, next_stop - step))


def _add(a: dict, b: dict) -> dict:
    return {k: (a[k][0] + b[k][0], a[k][1] + b[k][1]) for k in a}


def _add_numpy(totals: dict, stats: dict) -> dict:
    out = dict(totals)
    for k, (s, c) in stats.items():
        prev = out.get(k, (0.0, 0.0))
        out[k] = (prev[0] + float(np.asarray(s)), prev[1] + float(np.asarray(c)))
    return out


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"
