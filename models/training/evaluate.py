"""Evaluate a trained model_dir on held-out TFRecords.

    python -m models.training.evaluate --model_dir runs/bert_tiny --eval_data 'heldout/*.tfrecord' [--steps N]
        [--batch_size 32] [--strategy auto]

Rebuilds the model from `model_dir/config.json`, restores the latest checkpoint, and runs the task's
metrics over the data (all full batches, or `--steps` of them): BERT `mlm_accuracy`, `mlm_loss`,
`nsp_accuracy`; GPT `loss`, `perplexity`; biLM `forward_perplexity`, `backward_perplexity`, `perplexity`.
Writes them to `model_dir/metrics.json` and prints them as one JSON object on the last line (a
non-finite metric is `null`). Bad input: exit status 2 and one line on stderr (`--verbose`: the traceback),
a damaged checkpoint named too; a corrupt eval shard: exit status 3, the shard named.

The same from Python is one call on an `EvaluateJob`, whose fields are the flags; it writes the same
`metrics.json` and returns an `EvaluateResult`:

    result = evaluate(EvaluateJob(model_dir="runs/bert_tiny", eval_data="heldout/bert-*.tfrecord", steps=10))
    result.step, result.metrics["mlm_accuracy"]
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import json
import logging
import os
import sys

import tensorflow as tf

from models import families
from models.training import distribute
from models.training.train import corrupt_shard, distributed_dataset
from models.training.train_job import STRATEGIES
from models.training.trainer import Trainer, json_safe
from preprocessing import readers
from commands.job_fields import COUNT, JobFieldError, checked
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status, require_dir, require_file, writable_file

METRICS_FILE = "metrics.json"


@checked({"steps": COUNT, "batch_size": COUNT})
@dataclasses.dataclass(frozen=True)
class EvaluateJob:
    """One evaluation of a model_dir's latest checkpoint; the fields are the command's flags.

    Args:
      model_dir: a model_dir of `models.training.train` (or `models.convert --from`).
      eval_data: a TFRecord pattern of `pipeline.pretraining_data` (metadata.json beside it).
      steps: batches to evaluate (default: every full batch).
      batch_size: default: the training batch size.
      strategy, tpu: as `TrainJob`'s.

    Raises `JobFieldError` for a field of the wrong type, a count below 1 or an unknown strategy.
    """

    model_dir: str
    eval_data: str
    steps: int | None = None
    batch_size: int | None = None
    strategy: str = "auto"
    tpu: str | None = None

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise JobFieldError(f"--strategy {self.strategy}: use one of {', '.join(STRATEGIES)}")

    def check(self) -> None:
        """The paths, before any model is built; raises `UserError`."""
        require_dir("--model_dir", self.model_dir)
        require_file("--model_dir", os.path.join(self.model_dir, families.CONFIG_FILE))
        writable_file("--model_dir", os.path.join(self.model_dir, METRICS_FILE))


@dataclasses.dataclass(frozen=True)
class EvaluateResult:
    """An evaluation's figures: the checkpoint's `step`, the `examples` read, the task's `metrics` (BERT
    `mlm_accuracy`, `mlm_loss`, `nsp_accuracy`; GPT `loss`, `perplexity`; the biLM's perplexities), and the
    `metrics_file` they were written to."""

    step: int
    examples: int
    metrics: dict
    metrics_file: str

    def summary(self) -> dict:
        """The command's last line (and metrics.json without its `eval_data`)."""
        return {"step": self.step, "examples": self.examples, **self.metrics}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m models.training.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--eval_data", required=True, help="TFRecord pattern (metadata.json beside it)")
    parser.add_argument("--steps", type=int, default=None, help="batches (default: every full batch)")
    parser.add_argument("--batch_size", type=int, default=None, help="default: the training batch size")
    parser.add_argument("--strategy", default="auto", choices=STRATEGIES)
    parser.add_argument("--tpu", default=None)
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    return parser.parse_args(argv)


def job_from_args(args) -> EvaluateJob:
    return EvaluateJob(model_dir=args.model_dir, eval_data=args.eval_data, steps=args.steps,
                       batch_size=args.batch_size, strategy=args.strategy, tpu=args.tpu)


@quiet_command
def main(argv=None) -> int:
    """`python -m models.training.evaluate`: parse, build the job, evaluate; the figures as the last line."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("tensorflow").setLevel(logging.WARNING)  # per-checkpoint "Sharding callback" lines
    args = parse_args(argv)
    try:
        result = evaluate(job_from_args(args))
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)
    print(json.dumps(json_safe(result.summary()), allow_nan=False))
    return 0


def evaluate(job: EvaluateJob) -> EvaluateResult:
    """Evaluates the latest checkpoint of `job.model_dir` on `job.eval_data`, writes `metrics.json` there and
    returns the figures. Raises `UserError` for bad input (a damaged checkpoint named), and
    `readers.CorruptDataError` (exit status 3) for a corrupt eval shard, named."""
    job.check()
    strategy = distribute.make_strategy(job.strategy, job.tpu)
    try:
        step, examples, metrics = _evaluate(job, strategy)
    except tf.errors.DataLossError as e:
        raise readers.CorruptDataError(f"corrupt eval data: {corrupt_shard(job.eval_data, e)} (fix or drop the "
                                       f"shard and rerun)") from e
    except (FileNotFoundError, ValueError) as e:  # raised before any evaluation: about the input
        if isinstance(e, UserError):
            raise
        raise UserError(str(e)) from e
    path = os.path.join(job.model_dir, METRICS_FILE)
    result = EvaluateResult(step, examples, metrics, path)
    with tf.io.gfile.GFile(path, "w") as f:
        json.dump({"eval_data": job.eval_data, **json_safe(result.summary())}, f, indent=2, allow_nan=False)
    return result


def _evaluate(job: EvaluateJob, strategy: tf.distribute.Strategy) -> tuple[int, int, dict]:
    """`(step, examples, metrics)` of the latest checkpoint in `job.model_dir`."""
    saved = families.read_config(job.model_dir)
    if not tf.train.latest_checkpoint(job.model_dir):
        raise FileNotFoundError(f"no checkpoint in {job.model_dir}")
    train_config = saved["train_config"]
    if job.batch_size:
        train_config = dataclasses.replace(train_config, batch_size=job.batch_size, accumulation_steps=1)
    task = families.make_task(saved["model"], saved["model_config"], saved["data"])
    metadata, files = readers.read_metadata(job.eval_data)
    available = readers.count_examples(metadata, files)
    full_batches = available // train_config.batch_size if available is not None else None
    if full_batches == 0:
        raise readers.DataMismatchError(f"{job.eval_data}: {available} examples, fewer than one batch of "
                                        f"{train_config.batch_size}")
    if full_batches is None:  # no per-file counts (files this project did not write)
        steps = job.steps or 100
    else:
        steps = min(job.steps or full_batches, full_batches)
    trainer = Trainer(task, train_config, strategy, job.model_dir)
    step = trainer.restore()
    dataset = distributed_dataset(strategy, job.eval_data, task, train_config, training=False,
                                  vocab_sha256=saved["data"]["vocab_sha256"])
    return step, steps * train_config.batch_size, trainer.evaluate(dataset, steps)


if __name__ == "__main__":
    sys.exit(main())
