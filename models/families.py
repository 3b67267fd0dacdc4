"""The three model families by name: their presets, configs and tasks, and `model_dir/config.json`.

`config.json` is the contract between training and everything downstream (evaluation, export,
fine-tuning, conversion): the model kind, its config, the training config, and the data it was trained
on (sequence lengths, vocabulary size and sha256, casing). `vocab.txt` sits beside it.
"""

import importlib
import json
import os

import tensorflow as tf

from models import config as config_lib
from preprocessing.metadata import DatasetMetadata
from commands.user_errors import UserError

KINDS = ("bert", "gpt", "bilm")
CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.txt"


def module(kind: str):
    if kind not in KINDS:
        raise ValueError(f"unknown model {kind!r}: use one of {', '.join(KINDS)}")
    return importlib.import_module(f"models.{kind}")


def presets(kind: str) -> dict[str, dict]:
    return module(kind).PRESETS


def preset_config(kind: str, preset: str, **fields):
    """The model config of preset `preset` (e.g. `bert_tiny`) with `fields` set."""
    table = presets(kind)
    if preset not in table:
        raise ValueError(f"unknown preset {preset!r} for {kind}: {', '.join(table)}")
    return module(kind).TASK_CLASS.config_class(**{**table[preset], **fields})


def make_task(kind: str, model_config, data: dict):
    """`data`: the `data` section of config.json (sequence lengths from the training data)."""
    mod = module(kind)
    if kind == "bert":
        return mod.TASK_CLASS(model_config, data["max_seq_length"], data["max_predictions_per_seq"])
    return mod.TASK_CLASS(model_config, max_seq_length=data["max_seq_length"])


def data_section(metadata: DatasetMetadata, train_data: str) -> dict:
    """What config.json records about the training data, from its metadata.json."""
    job = metadata.config
    return {"train_data": train_data, "max_seq_length": metadata.max_seq_length,
            "max_predictions_per_seq": metadata.max_predictions_per_seq if metadata.model == "bert" else None,
            "lower_case": job.get("lower_case"), "vocab_size": metadata.vocab.size,
            "vocab_sha256": metadata.vocab.sha256, "special_ids": metadata.vocab.special_ids}


def write_config(model_dir: str, kind: str, preset: str, model_config, train_config, data: dict,
                 run: dict | None = None) -> None:
    """Writes config.json; `run` records what this machine decided (the dtype policy `auto` became, XLA)."""
    import keras
    import keras_hub

    payload = {"model": kind, "preset": preset, "model_config": config_lib.to_json(model_config),
               "train_config": config_lib.to_json(train_config), "data": data, **({"run": run} if run else {}),
               "versions": {"tensorflow": tf.__version__, "keras": keras.__version__,
                            "keras_hub": keras_hub.__version__}}
    tf.io.gfile.makedirs(model_dir)
    path = os.path.join(model_dir, CONFIG_FILE)
    with tf.io.gfile.GFile(path + ".tmp", "w") as f:
        json.dump(payload, f, indent=2)
    tf.io.gfile.rename(path + ".tmp", path, overwrite=True)


def read_config(model_dir: str) -> dict:
    """config.json with `model_config` and `train_config` as dataclasses."""
    path = os.path.join(model_dir, CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"no {CONFIG_FILE} in {model_dir}: not a model_dir written by models.training.train")
    with tf.io.gfile.GFile(path) as f:
        payload = json.load(f)
    payload["model_config"] = config_lib.from_json(module(payload["model"]).TASK_CLASS.config_class,
                                                 payload["model_config"])
    payload["train_config"] = config_lib.from_json(config_lib.TrainConfig, payload["train_config"])
    return payload


class CheckpointMismatchError(UserError):
    """A checkpoint does not hold the weights of the model built from config.json."""


class CorruptCheckpointError(CheckpointMismatchError):
    """A checkpoint's files cannot be read (cut short, overwritten, not a checkpoint)."""


def checkpoint_variables(path: str) -> list[tuple[str, list[int]]]:
    """`tf.train.list_variables(path)`, or `CorruptCheckpointError` naming the checkpoint."""
    try:
        return tf.train.list_variables(path)
    except (tf.errors.OpError, ValueError, IndexError) as e:
        raise _corrupt(path, e) from None


def _corrupt(path: str, error: Exception) -> CorruptCheckpointError:
    reason = getattr(error, "message", str(error)).strip().splitlines()[0][:300]
    return CorruptCheckpointError(f"checkpoint {path} cannot be read ({reason}): its files (.index, "
                                  f".data-*) are cut short or damaged; restore them from a copy, or point the "
                                  f"model_dir's `checkpoint` file at an earlier checkpoint")


def restore(checkpoint: tf.train.Checkpoint, path: str, partial: bool = False) -> None:
    """Restores `path` into `checkpoint`, every existing object matched, or raises `CheckpointMismatchError`
    with a readable reason (Keras' own assertion prints whole weight tensors). `partial`: the checkpoint
    may hold more than `checkpoint` asks for (e.g. the optimizer when only the model is restored)."""
    try:
        status = checkpoint.restore(path)
    except (tf.errors.OpError, IndexError) as e:  # "Read less bytes than requested", "not an sstable"
        raise _corrupt(path, e) from None
    except ValueError as e:  # "Received incompatible tensor with shape ...": another model's weights
        raise _mismatch(path, str(e).strip().splitlines()[0][:300]) from None
    if partial:
        status.expect_partial()
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise _mismatch(path, str(e).split("\n")[0][:300]) from None


def _mismatch(path: str, reason: str) -> CheckpointMismatchError:
    return CheckpointMismatchError(
        f"{path} does not hold every weight of the model that config.json describes ({reason}). It was "
        f"written by another model, or it is a biLM checkpoint without the weights of its character CNN and "
        f"LSTM layers (these cannot be restored): retrain it")


def load_model(model_dir: str, checkpoint: str | None = None):
    """Rebuilds the model of `model_dir` from its config.json and restores the weights (not the optimizer) of
    `checkpoint` (a name in model_dir such as `ckpt-2000`, or a path) or else of the latest checkpoint.
    Returns `(task, model, config)`; for export, fine-tuning and conversion."""
    saved = read_config(model_dir)
    latest = checkpoint_path(model_dir, checkpoint)
    task = make_task(saved["model"], saved["model_config"], saved["data"])
    model = task.build_model()
    restore(tf.train.Checkpoint(model=model), latest, partial=True)
    return task, model, saved



def checkpoint_path(model_dir: str, checkpoint: str | None = None) -> str:
    """The checkpoint prefix to restore: `checkpoint` (a name in model_dir, or a path), else the latest one.
    Raises FileNotFoundError naming what is there when it does not exist."""
    if checkpoint is None:
        latest = tf.train.latest_checkpoint(model_dir)
        if not latest:
            raise FileNotFoundError(f"no checkpoint in {model_dir}")
        return latest
    path = checkpoint if tf.io.gfile.exists(checkpoint + ".index") else os.path.join(model_dir, checkpoint)
    if not tf.io.gfile.exists(path + ".index"):
        state = tf.train.get_checkpoint_state(model_dir)
        there = [os.path.basename(p) for p in state.all_model_checkpoint_paths] if state else []
        raise FileNotFoundError(f"no checkpoint {checkpoint} in {model_dir} (there: {', '.join(there) or 'none'})")
    return path


def init_from(model, source_dir: str) -> list[str]:
    """Copies the weights of `source_dir`'s model (config.json + latest checkpoint) into the built `model`,
    matched by weight path (`encoder/.../kernel`; layers have stable names): weights only, as
    google-research/bert's `--init_checkpoint`. Returns the paths of `model`'s weights the source lacks (a head
    it never had), left as initialised. Raises `CheckpointMismatchError` before assigning anything when a
    weight both have differs in shape."""
    _, source, _ = load_model(source_dir)
    theirs = {v.path: v for v in source.weights}
    differ = [f"{v.path} {tuple(theirs[v.path].shape)} there, {tuple(v.shape)} here"
              for v in model.weights if v.path in theirs and tuple(theirs[v.path].shape) != tuple(v.shape)]
    if differ:
        raise CheckpointMismatchError(f"{source_dir} holds weights of other shapes than this model's "
                                      f"({len(differ)} of {len(model.weights)}, e.g. {'; '.join(differ[:2])})")
    for v in model.weights:
        if v.path in theirs:
            v.assign(theirs[v.path].value)
    return sorted(v.path for v in model.weights if v.path not in theirs)
