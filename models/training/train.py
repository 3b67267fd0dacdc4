"""Pretrain BERT, GPT or the biLM on TFRecords from `pipeline.pretraining_data`, under any strategy.

    python -m models.training.train --model bert --preset bert_tiny --train_data 'data/bert/*.tfrecord' \\
        --model_dir runs/bert_tiny [--eval_data 'heldout/*.tfrecord'] [--strategy auto] [--tpu NAME] \\
        [--set train_steps=2000 --set batch_size=64 --set dropout=0.0 ...]

The data's `metadata.json` is checked before anything is built (model kind, sequence lengths; the
vocabulary size becomes the model's). Running again with the same `model_dir` resumes from the last
checkpoint (model, optimizer, step and data position); the model config must then be the one saved in
`model_dir/config.json`, and training fields default to the saved ones. A larger `train_steps` and the
bookkeeping fields (log/eval/checkpoint intervals) may change; a smaller `train_steps` than the steps trained
is refused, and so is any other changed field (learning rate, batch size, ..., and other `--train_data`) unless
`--allow_change FIELD` names it (config.json's `run.changes` then records from which step it applies:
`models.training.rerun`; new data is read from its start); a name that is no field is refused.
One run at a time: the run holds `model_dir/.train.lock`, and a second one is refused naming the first's
host and PID; a lock left by a killed run on this host is taken over with a log line
(`commands.output_lock`). The last line printed
is one JSON object with the final training metrics (a non-finite value is `null`).

Continued pretraining: `--init_checkpoint SOURCE` (a model_dir, e.g. one `models.convert` wrote) starts a new
`model_dir` from SOURCE's weights only (fresh optimizer, step 0), as google-research/bert's flag does; the
model kind, preset and config default to SOURCE's config.json, its vocabulary must be the data's, and its
weights' shapes the model's (checked before anything is written). Weights SOURCE lacks start fresh and are
logged. A `model_dir` that already holds checkpoints resumes from them and ignores the flag.

The same run from Python is one call on a `TrainJob`, whose fields are the flags (`train_job.py`):

    result = train(TrainJob(train_data="data/bert/bert-*.tfrecord", model_dir="runs/bert_tiny", model="bert",
                            preset="bert_tiny", overrides={"train_steps": 20}))
    result.step, result.metrics

Exit status: 0 done; 2 bad input (one line on stderr, `--verbose` for the traceback); 3 a corrupt shard;
4 a non-finite loss (the last finite checkpoint is kept); 128 + N stopped by signal N (SIGTERM: 143,
SIGINT: 130) after saving a checkpoint, so `train && export` does not go on with a partly trained model.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import logging
import os
import sys

import tensorflow as tf

from models import families
from models.training import distribute
from models.training import rerun
from commands.output_lock import model_dir_lock
from models.training.train_job import STRATEGIES, TrainJob, TrainResult
from models.training.train_plan import TrainPlan, resolve
from models.training.trainer import NonFiniteLossError, Trainer, json_safe
from preprocessing import readers
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status

log = logging.getLogger("models.training.train")
# exit statuses beside user errors' 2; stopped by signal N: 128 + N
CORRUPT_DATA, NON_FINITE_LOSS = readers.CorruptDataError.status, NonFiniteLossError.status


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m models.training.train", description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=families.KINDS, help="required unless model_dir has a config.json")
    parser.add_argument("--preset", help="<model>_<size>, e.g. bert_tiny, gpt_base, bilm_original; required unless "
                        "model_dir has a config.json (then its model config is continued, e.g. a converted one)")
    parser.add_argument("--train_data", required=True, help="TFRecord pattern (metadata.json beside it)")
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--eval_data", default=None)
    parser.add_argument("--strategy", default="auto", choices=STRATEGIES)
    parser.add_argument("--tpu", default=None, help="TPU name or grpc:// address")
    parser.add_argument("--init_checkpoint", default=None, metavar="SOURCE_MODEL_DIR",
                        help="start a new model_dir from this model_dir's weights (fresh optimizer, step 0)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override any model or training config field (model.X / train.X when ambiguous)")
    parser.add_argument(rerun.ALLOW_FLAG, dest="allow_change", action="append", default=[], metavar="FIELD[,FIELD]",
                        help="resuming a model_dir: training fields (learning_rate, batch_size, ...) or train_data "
                        "this run may change from its config.json (recorded there); without it such a rerun is "
                        "refused")
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    return parser.parse_args(argv)


def job_from_args(args) -> TrainJob:
    """The parsed flags as the job (`--set` as `key=value` pairs, `--allow_change`'s lists as names)."""
    return TrainJob(train_data=args.train_data, model_dir=args.model_dir, model=args.model, preset=args.preset,
                    eval_data=args.eval_data, init_checkpoint=args.init_checkpoint, overrides=args.overrides,
                    allow_change=args.allow_change, strategy=args.strategy, tpu=args.tpu)


@quiet_command
def main(argv=None) -> int:
    """`python -m models.training.train`: parse, build the job, train; the result as the last line."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("tensorflow", "absl"):  # absl: TF's per-checkpoint "Sharding callback duration" lines
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = parse_args(argv)
    try:
        result = train(job_from_args(args))
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)
    print(json.dumps(json_safe(result.summary())))
    return 128 + result.stopped_by_signal if result.stopped_by_signal else 0


def train(job: TrainJob) -> TrainResult:
    """Runs `job` to its end (or to a signal, after saving a checkpoint) and returns its `TrainResult`. Raises
    `UserError` (bad input, a corrupt shard: `readers.CorruptDataError`, a non-finite loss:
    `trainer.NonFiniteLossError`) with the message the command prints."""
    plan = resolve(job)
    if not distribute.chief_task():  # the chief holds the lock for the whole cluster
        return _train(job, plan, None)
    with model_dir_lock(job.model_dir):
        return _train(job, plan, _rerun_changes(job, plan))


def _rerun_changes(job: TrainJob, plan: TrainPlan) -> list | None:
    """Under the lock: refuses a rerun that contradicts the steps already trained, or its data
    (`models.training.rerun`); returns config.json's `run.changes`."""
    saved = (families.read_config(job.model_dir)
             if tf.io.gfile.exists(os.path.join(job.model_dir, families.CONFIG_FILE)) else None)
    done = rerun.trained_steps(tf.train.latest_checkpoint(job.model_dir))
    return rerun.check_rerun(job.model_dir, done, saved and saved["train_config"], plan.train_config,
                             set(job.allow_change), (saved or {}).get("run", {}).get("changes"),
                             (saved or {}).get("data"), plan.data)


def _train(job: TrainJob, plan: TrainPlan, changes) -> TrainResult:
    strategy = distribute.make_strategy(job.strategy, job.tpu)
    task = families.make_task(plan.model, plan.model_config, plan.data)
    trainer = Trainer(task, plan.train_config, strategy, job.model_dir)
    start = trainer.restore()
    if plan.init_checkpoint:
        _init_weights(trainer, plan.init_checkpoint)
    if trainer.chief:
        families.write_config(job.model_dir, plan.model, plan.preset, plan.model_config, plan.train_config,
                              plan.data, run={"mixed_precision": trainer.precision, "jit_compile": trainer.use_xla,
                                              **({"changes": changes} if changes else {})})
        _copy_vocab(job.train_data, job.model_dir)
    log.info("%s %s: %s parameters, %d replica(s), %s, XLA %s, from step %d to %d", plan.model, plan.preset,
             f"{trainer.model.count_params():,}", strategy.num_replicas_in_sync, trainer.precision,
             "on" if trainer.use_xla else "off", start, plan.train_config.train_steps)
    # the batches of this data already consumed (none when the data changed at this step: `rerun`)
    skip = trainer.data_position() - rerun.data_start_step(changes) * plan.train_config.accumulation_steps
    train_data = distributed_dataset(strategy, job.train_data, task, plan.train_config, training=True,
                                     skip_batches=max(skip, 0), vocab_sha256=plan.data["vocab_sha256"])
    evaluation = (distributed_dataset(strategy, job.eval_data, task, plan.train_config, training=False,
                                      vocab_sha256=plan.data["vocab_sha256"])
                  if job.eval_data else None)
    try:
        metrics = trainer.train(train_data, evaluation)
    except tf.errors.DataLossError as e:
        raise readers.CorruptDataError(f"corrupt training data: {corrupt_shard(job.train_data, e)} (last "
                                       f"checkpoint kept; fix or drop the shard and rerun)") from e
    return TrainResult(job.model_dir, int(trainer.step.numpy()), metrics, trainer.stopped_by_signal or None)


def _init_weights(trainer: Trainer, source: str) -> None:
    """`--init_checkpoint`: the source's weights into the built model (`families.init_from`)."""
    try:
        fresh = families.init_from(trainer.model, source)
    except families.CheckpointMismatchError as e:
        raise UserError(f"--init_checkpoint: {e}") from e
    log.info("initialised from %s (weights only, fresh optimizer, step 0)%s", source,
             f"; fresh weights the source lacks: {', '.join(fresh)}" if fresh else "")


def distributed_dataset(strategy, pattern: str, task, train_config, *, training: bool, skip_batches: int = 0,
                        vocab_sha256: str | None = None):
    """Per-replica batches of the task's `(x, y, w)`, one input pipeline per worker (or per TPU host)."""
    micro_batch = train_config.batch_size // (train_config.accumulation_steps if training else 1)

    def dataset_fn(context):
        ds = readers.make_dataset(pattern, micro_batch, input_context=context, shuffle=training, repeat=True,
                                  seed=train_config.seed, shuffle_buffer=train_config.shuffle_buffer,
                                  skip_batches=skip_batches, vocab_sha256=vocab_sha256,
                                  **task.data_expectations())
        return ds.map(task.prepare_batch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

    return strategy.distribute_datasets_from_function(dataset_fn)


def corrupt_shard(pattern: str, error) -> str:
    """`file: reason` for the shard of `pattern` behind `error` (a `DataLossError` from an interleaved read,
    whose message names no file)."""
    metadata, files = readers.read_metadata(pattern)
    culprit = readers.find_corrupt_shard(files, metadata.compression)
    return f"{culprit[0]}: {culprit[1]}" if culprit else error.message.splitlines()[0]


def _copy_vocab(train_data: str, model_dir: str) -> None:
    source = os.path.join(os.path.dirname(train_data), families.VOCAB_FILE)
    if tf.io.gfile.exists(source):
        tf.io.gfile.copy(source, os.path.join(model_dir, families.VOCAB_FILE), overwrite=True)


if __name__ == "__main__":
    sys.exit(main())
