"""Evaluate a trained model_dir on held-out TFRecords.

    python -m models.training.evaluate --model_dir runs/bert_tiny --eval_data 'heldout/*.tfrecord' [--steps N]
        [--batch_size 32] [--strategy auto]

Rebuilds the model from `model_dir/config.json`, restores the latest checkpoint, and runs the task's
metrics over the data (all full batches, or `--steps` of them): BERT `mlm_accuracy`, `mlm_loss`,
`nsp_accuracy`; GPT `loss`, `perplexity`; biLM `forward_perplexity`, `backward_perplexity`, `perplexity`.
Writes them to `model_dir/metrics.json` and prints them as one JSON object on the last line (a
non-finite metric is `null`). Bad input: exit status 2 and one line on stderr (`--verbose`: the traceback),
a damaged checkpoint named too; a corrupt eval shard: exit status 3, the shard named.
"""

import argparse
import dataclasses
import json
import logging
import os
import sys

import tensorflow as tf

from models import families
from models.training import distribute
from models.training.train import CORRUPT_DATA, corrupt_shard, distributed_dataset
from models.training.trainer import Trainer, json_safe
from preprocessing import readers
from commands.user_errors import UserError, check_range, exit_status, require_dir, require_file, writable_file

METRICS_FILE = "metrics.json"


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m models.training.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--eval_data", required=True, help="TFRecord pattern (metadata.json beside it)")
    parser.add_argument("--steps", type=int, default=None, help="batches (default: every full batch)")
    parser.add_argument("--batch_size", type=int, default=None, help="default: the training batch size")
    parser.add_argument("--strategy", default="auto", choices=["auto", "tpu", "multi_worker", "mirrored", "default"])
    parser.add_argument("--tpu", default=None)
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    return parser.parse_args(argv)


def check_args(args) -> None:
    """Ranges and paths, before any model is built; raises `UserError`."""
    if args.steps is not None:
        check_range("--steps", args.steps, 1)
    if args.batch_size is not None:
        check_range("--batch_size", args.batch_size, 1)
    require_dir("--model_dir", args.model_dir)
    require_file("--model_dir", os.path.join(args.model_dir, families.CONFIG_FILE))
    writable_file("--model_dir", os.path.join(args.model_dir, METRICS_FILE))


def evaluate(model_dir: str, eval_data: str, steps: int | None = None, batch_size: int | None = None,
             strategy: tf.distribute.Strategy | None = None) -> dict:
    """Returns `{"step": N, "examples": M, **metrics}` for the latest checkpoint in `model_dir`."""
    saved = families.read_config(model_dir)
    if not tf.train.latest_checkpoint(model_dir):
        raise FileNotFoundError(f"no checkpoint in {model_dir}")
    train_config = saved["train_config"]
    if batch_size:
        train_config = dataclasses.replace(train_config, batch_size=batch_size, accumulation_steps=1)
    strategy = strategy or distribute.make_strategy("auto")
    task = families.make_task(saved["model"], saved["model_config"], saved["data"])
    metadata, files = readers.read_metadata(eval_data)
    available = readers.count_examples(metadata, files)
    full_batches = available // train_config.batch_size if available is not None else None
    if full_batches == 0:
        raise readers.DataMismatchError(f"{eval_data}: {available} examples, fewer than one batch of "
                                        f"{train_config.batch_size}")
    if full_batches is None:  # no per-file counts (files this project did not write)
        steps = steps or 100
    else:
        steps = min(steps or full_batches, full_batches)
    trainer = Trainer(task, train_config, strategy, model_dir)
    step = trainer.restore()
    dataset = distributed_dataset(strategy, eval_data, task, train_config, training=False,
                                  vocab_sha256=saved["data"]["vocab_sha256"])
    metrics = trainer.evaluate(dataset, steps)
    return {"step": step, "examples": steps * train_config.batch_size, **metrics}


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("tensorflow").setLevel(logging.WARNING)  # per-checkpoint "Sharding callback" lines
    args = parse_args(argv)
    try:
        check_args(args)
        strategy = distribute.make_strategy(args.strategy, args.tpu)
        try:
            result = json_safe(evaluate(args.model_dir, args.eval_data, args.steps, args.batch_size, strategy))
        except tf.errors.DataLossError as e:
            print(f"error: corrupt eval data: {corrupt_shard(args.eval_data, e)} (fix or drop the shard and rerun)",
                  file=sys.stderr)
            return CORRUPT_DATA
        except (FileNotFoundError, ValueError) as e:  # raised before any evaluation: about the input
            if isinstance(e, UserError):
                raise
            raise UserError(str(e)) from e
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)
    with tf.io.gfile.GFile(os.path.join(args.model_dir, METRICS_FILE), "w") as f:
        json.dump({"eval_data": args.eval_data, **result}, f, indent=2, allow_nan=False)
    print(json.dumps(result, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
