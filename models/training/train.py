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
(`models.training.model_dir_lock`). The last line printed
is one JSON object with the final training metrics (a non-finite value is `null`).

Continued pretraining: `--init_checkpoint SOURCE` (a model_dir, e.g. one `models.convert` wrote) starts a new
`model_dir` from SOURCE's weights only (fresh optimizer, step 0), as google-research/bert's flag does; the
model kind, preset and config default to SOURCE's config.json, its vocabulary must be the data's, and its
weights' shapes the model's (checked before anything is written). Weights SOURCE lacks start fresh and are
logged. A `model_dir` that already holds checkpoints resumes from them and ignores the flag.

Exit status: 0 done; 2 bad input (one line on stderr, `--verbose` for the traceback); 3 a corrupt shard;
4 a non-finite loss (the last finite checkpoint is kept); 128 + N stopped by signal N (SIGTERM: 143,
SIGINT: 130) after saving a checkpoint, so `train && export` does not go on with a partly trained model.
"""

import argparse
import dataclasses
import json
import logging
import os
import sys

import tensorflow as tf

from models import config as config_lib
from models import families
from models.training import distribute
from models.training import rerun
from models.training.model_dir_lock import ModelDirLock
from models.training.trainer import NonFiniteLossError, Trainer, json_safe
from preprocessing import readers
from commands.user_errors import UserError, check_range, exit_status, writable_dir

log = logging.getLogger("models.training.train")
CORRUPT_DATA, NON_FINITE_LOSS = 3, 4  # exit statuses; user errors 2, stopped by signal N: 128 + N


class ModelDirMismatchError(UserError):
    """`model_dir` holds a different model than the one asked for."""


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m models.training.train", description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=families.KINDS, help="required unless model_dir has a config.json")
    parser.add_argument("--preset", help="<model>_<size>, e.g. bert_tiny, gpt_base, bilm_original; required unless "
                        "model_dir has a config.json (then its model config is continued, e.g. a converted one)")
    parser.add_argument("--train_data", required=True, help="TFRecord pattern (metadata.json beside it)")
    parser.add_argument("--model_dir", required=True)
    parser.add_argument("--eval_data", default=None)
    parser.add_argument("--strategy", default="auto", choices=["auto", "tpu", "multi_worker", "mirrored", "default"])
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


# TrainConfig fields beyond its own checks: (low, high, low_open, high_open); None = unbounded.
TRAIN_RANGES = {"learning_rate": (0, None, True, False), "warmup_steps": (0, None, False, False),
                "decay_power": (0, None, True, False), "end_learning_rate_ratio": (0, 1, False, False),
                "weight_decay": (0, None, False, False), "beta_1": (0, 1, False, True), "beta_2": (0, 1, False, True),
                "epsilon": (0, None, True, False), "adagrad_initial_accumulator": (0, None, False, False),
                "clip_norm": (0, None, False, False), "eval_every": (0, None, False, False),
                "shuffle_buffer": (1, None, False, False), "seed": (0, 2**31 - 1, False, False)}


def check_configs(model_config, train_config) -> None:
    """Every numeric field finite and in range (the flag named as `--set` takes it); raises `UserError`."""
    for name, (low, high, low_open, high_open) in TRAIN_RANGES.items():
        check_range(f"--set train.{name}", getattr(train_config, name), low, high, low_open=low_open,
                    high_open=high_open)
    for field in dataclasses.fields(model_config):
        value = getattr(model_config, field.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if "dropout" in field.name:
            check_range(f"--set model.{field.name}", value, 0, 1, high_open=True)
        else:
            check_range(f"--set model.{field.name}", value, 0)


def resolve(args) -> tuple:
    """-> (model_config, train_config, data section), all checked, before any model is built. Fills in
    `args.model` / `args.preset` from `model_dir/config.json` when they are not given."""
    saved, source = None, _init_source(args)
    if tf.io.gfile.exists(os.path.join(args.model_dir, families.CONFIG_FILE)):
        saved = families.read_config(args.model_dir)
        args.model, args.preset = args.model or saved["model"], args.preset or saved["preset"]
    elif source:
        args.model, args.preset = args.model or source["model"], args.preset or source["preset"]
    if source and source["model"] != args.model:
        raise UserError(f"--init_checkpoint {args.init_checkpoint} holds a {source['model']} model, not {args.model}")
    writable_dir("--model_dir", args.model_dir)
    if args.eval_data:
        readers.read_metadata(args.eval_data)
    if not args.model or not args.preset:
        raise UserError("--model and --preset are required for a new model_dir")
    metadata, _ = readers.read_metadata(args.train_data)
    if metadata.model != args.model:
        raise readers.DataMismatchError(f"{args.train_data}: the data was made for {metadata.model}, "
                                        f"not {args.model}")
    data = families.data_section(metadata, args.train_data)
    if source and (source["data"]["vocab_sha256"], source["data"]["vocab_size"]) != (data["vocab_sha256"],
                                                                                     data["vocab_size"]):
        raise readers.DataMismatchError(
            f"--init_checkpoint {args.init_checkpoint} has another vocabulary ({source['data']['vocab_size']} "
            f"entries, sha256 {source['data']['vocab_sha256'][:12]}) than {args.train_data} "
            f"({data['vocab_size']} entries, sha256 {data['vocab_sha256'][:12]})")
    if saved and saved["model"] == args.model and saved["preset"] == args.preset:
        base = saved["model_config"]  # continue the saved model (its preset may be "converted")
    elif source and source["preset"] == args.preset:
        base = source["model_config"]  # continue the source's model (a converted one too)
    elif not args.preset.startswith(args.model + "_"):
        raise UserError(f"--preset {args.preset} is not a {args.model} preset: "
                         f"{', '.join(families.presets(args.model))}")
    else:
        base = families.preset_config(args.model, args.preset, vocab_size=data["vocab_size"])
    if saved and saved["model"] == args.model and saved["preset"] == args.preset:
        train_base = saved["train_config"]  # a rerun continues with the saved training fields
    else:
        train_base = config_lib.TrainConfig(**families.module(args.model).RECIPES.get(args.preset, {}))
    try:
        model_config, train_config = config_lib.apply_overrides(base, train_base, args.overrides)
    except ValueError as e:  # an OverrideError, or a config's own range check
        raise UserError(str(e)) from e
    check_configs(model_config, train_config)
    if model_config.vocab_size != data["vocab_size"]:
        raise readers.DataMismatchError(f"vocab_size {model_config.vocab_size} but the data's vocabulary has "
                                        f"{data['vocab_size']} entries")
    _check_resume(args.model_dir, args.model, model_config, data)
    return model_config, train_config, data


def _init_source(args) -> dict | None:
    """--init_checkpoint's config.json; None without the flag, or when model_dir already holds checkpoints
    (then it resumes from them and the flag is dropped)."""
    if not args.init_checkpoint:
        return None
    if tf.io.gfile.isdir(args.model_dir) and tf.train.latest_checkpoint(args.model_dir):
        log.info("%s holds checkpoints: resuming from them, ignoring --init_checkpoint %s", args.model_dir,
                 args.init_checkpoint)
        args.init_checkpoint = None
        return None
    if not tf.train.latest_checkpoint(args.init_checkpoint):
        raise FileNotFoundError(f"--init_checkpoint {args.init_checkpoint}: no checkpoint in it")
    return families.read_config(args.init_checkpoint)


def _check_resume(model_dir: str, kind: str, model_config, data: dict) -> None:
    if not tf.io.gfile.exists(os.path.join(model_dir, families.CONFIG_FILE)):
        return
    saved = families.read_config(model_dir)
    if saved["model"] != kind:
        raise ModelDirMismatchError(f"{model_dir} holds a {saved['model']} model, not {kind}")
    for field in dataclasses.fields(model_config):
        old, new = getattr(saved["model_config"], field.name), getattr(model_config, field.name)
        if old != new:
            raise ModelDirMismatchError(f"{model_dir} holds a model with {field.name}={old!r}, asked for {new!r}; "
                                        f"use another --model_dir or the same config")
    if saved["data"]["vocab_sha256"] != data["vocab_sha256"]:
        raise ModelDirMismatchError(f"{model_dir} was trained with another vocabulary than {data['train_data']}'s")


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


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for noisy in ("tensorflow", "absl"):  # absl: TF's per-checkpoint "Sharding callback duration" lines
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = parse_args(argv)
    try:
        return _main(args)
    except NonFiniteLossError as e:
        exit_status(e, args.verbose)
        return NON_FINITE_LOSS
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)


def _main(args) -> int:
    try:
        model_config, train_config, data = resolve(args)
    except (FileNotFoundError, ValueError) as e:  # all of resolve's checks are about the input
        if isinstance(e, UserError):
            raise
        raise UserError(str(e)) from e
    if not distribute.chief_task():  # the chief holds the lock for the whole cluster
        return _train(args, model_config, train_config, data, None)
    with ModelDirLock(args.model_dir):
        return _train(args, model_config, train_config, data, _rerun_changes(args, train_config, data))


def _rerun_changes(args, train_config, data: dict) -> list | None:
    """Under the lock: refuses a rerun that contradicts the steps already trained, or its data
    (`models.training.rerun`); returns config.json's `run.changes`."""
    saved = (families.read_config(args.model_dir)
             if tf.io.gfile.exists(os.path.join(args.model_dir, families.CONFIG_FILE)) else None)
    done = rerun.trained_steps(tf.train.latest_checkpoint(args.model_dir))
    allowed = {f.strip() for item in args.allow_change for f in item.split(",") if f.strip()}
    return rerun.check_rerun(args.model_dir, done, saved and saved["train_config"], train_config, allowed,
                             (saved or {}).get("run", {}).get("changes"), (saved or {}).get("data"), data)


def _train(args, model_config, train_config, data, changes) -> int:
    strategy = distribute.make_strategy(args.strategy, args.tpu)
    task = families.make_task(args.model, model_config, data)
    trainer = Trainer(task, train_config, strategy, args.model_dir)
    start = trainer.restore()
    if args.init_checkpoint:
        try:
            fresh = families.init_from(trainer.model, args.init_checkpoint)
        except families.CheckpointMismatchError as e:
            print(f"error: --init_checkpoint: {e}", file=sys.stderr)
            return 2
        log.info("initialised from %s (weights only, fresh optimizer, step 0)%s", args.init_checkpoint,
                 f"; fresh weights the source lacks: {', '.join(fresh)}" if fresh else "")
    if trainer.chief:
        families.write_config(args.model_dir, args.model, args.preset, model_config, train_config, data,
                              run={"mixed_precision": trainer.precision, "jit_compile": trainer.use_xla,
                                   **({"changes": changes} if changes else {})})
        _copy_vocab(args.train_data, args.model_dir)
    log.info("%s %s: %s parameters, %d replica(s), %s, XLA %s, from step %d to %d", args.model, args.preset,
             f"{trainer.model.count_params():,}", strategy.num_replicas_in_sync, trainer.precision,
             "on" if trainer.use_xla else "off", start, train_config.train_steps)
    # the batches of this data already consumed (none when the data changed at this step: `rerun`)
    skip = trainer.data_position() - rerun.data_start_step(changes) * train_config.accumulation_steps
    train = distributed_dataset(strategy, args.train_data, task, train_config, training=True,
                                skip_batches=max(skip, 0), vocab_sha256=data["vocab_sha256"])
    evaluation = (distributed_dataset(strategy, args.eval_data, task, train_config, training=False,
                                      vocab_sha256=data["vocab_sha256"])
                  if args.eval_data else None)
    try:
        metrics = trainer.train(train, evaluation)
    except tf.errors.DataLossError as e:
        print(f"error: corrupt training data: {corrupt_shard(args.train_data, e)} (last checkpoint kept; fix or "
              f"drop the shard and rerun)", file=sys.stderr)
        return CORRUPT_DATA
    signum = trainer.stopped_by_signal
    print(json.dumps(json_safe({"step": int(trainer.step.numpy()), **metrics,
                                **({"stopped_by_signal": signum} if signum else {})})))
    return 128 + signum if signum else 0


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
