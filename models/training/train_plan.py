"""What a `TrainJob` resolves to before any model is built: the model kind and preset, the model config and the
`TrainConfig` with the job's overrides applied, and config.json's `data` section, every one checked.

Where the fields come from, first match wins: the job's overrides; then a model_dir's own config.json (a rerun
continues its model and its training fields); then the `init_checkpoint` source's (its model, a converted one
too); then the preset and its recipe (`RECIPES`), with the data's vocabulary size. The data's metadata.json
must be for the model kind and its vocabulary the model's (and the source's); a model_dir must hold the same
model. Every failure is a `UserError` naming the flag or file.
"""

import dataclasses
import logging
import os

import tensorflow as tf

from commands.user_errors import UserError, check_range, writable_dir
from models import config as config_lib
from models import families
from models.training.train_job import TrainJob
from preprocessing import readers

log = logging.getLogger("models.training.train")

# TrainConfig fields beyond its own checks: (low, high, low_open, high_open); None = unbounded.
TRAIN_RANGES = {"learning_rate": (0, None, True, False), "warmup_steps": (0, None, False, False),
                "decay_power": (0, None, True, False), "end_learning_rate_ratio": (0, 1, False, False),
                "weight_decay": (0, None, False, False), "beta_1": (0, 1, False, True), "beta_2": (0, 1, False, True),
                "epsilon": (0, None, True, False), "adagrad_initial_accumulator": (0, None, False, False),
                "clip_norm": (0, None, False, False), "eval_every": (0, None, False, False),
                "shuffle_buffer": (1, None, False, False), "seed": (0, 2**31 - 1, False, False)}


class ModelDirMismatchError(UserError):
    """`model_dir` holds a different model than the one asked for."""


@dataclasses.dataclass(frozen=True)
class TrainPlan:
    """A `TrainJob` resolved: what config.json will say.

    Args:
      model, preset: the model kind and preset (a model_dir's or the source's when the job names none).
      model_config: the family's config dataclass; train_config: the `TrainConfig`, overrides applied.
      data: config.json's `data` section (`families.data_section`: sequence lengths, vocabulary, casing).
      init_checkpoint: the source model_dir to take the weights of; None also when model_dir holds checkpoints
        (it resumes from them and the job's `init_checkpoint` is dropped).
    """

    model: str
    preset: str
    model_config: object
    train_config: config_lib.TrainConfig
    data: dict
    init_checkpoint: str | None = None


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


def resolve(job: TrainJob) -> TrainPlan:
    """The job's `TrainPlan`, every check done before any model is built; raises `UserError` (a missing file
    or another library's refusal of a value becomes one, with its message)."""
    try:
        return _resolve(job)
    except (FileNotFoundError, ValueError) as e:  # all of these checks are about the input
        if isinstance(e, UserError):
            raise
        raise UserError(str(e)) from e


def _resolve(job: TrainJob) -> TrainPlan:
    source, init = _init_source(job)
    saved = _saved(job.model_dir)
    kind, preset = job.model, job.preset
    if saved:
        kind, preset = kind or saved["model"], preset or saved["preset"]
    elif source:
        kind, preset = kind or source["model"], preset or source["preset"]
    if source and source["model"] != kind:
        raise UserError(f"--init_checkpoint {init} holds a {source['model']} model, not {kind}")
    writable_dir("--model_dir", job.model_dir)
    if job.eval_data:
        readers.read_metadata(job.eval_data)
    if not kind or not preset:
        raise UserError("--model and --preset are required for a new model_dir")
    data = _data(job.train_data, kind, source, init)
    continues = saved and saved["model"] == kind and saved["preset"] == preset
    model_config, train_config = config_lib.apply_overrides(
        _base_model(kind, preset, data, saved if continues else None, source),
        saved["train_config"] if continues else  # a rerun continues with the saved training fields
        config_lib.TrainConfig(**families.module(kind).RECIPES.get(preset, {})), job.overrides)
    check_configs(model_config, train_config)
    if model_config.vocab_size != data["vocab_size"]:
        raise readers.DataMismatchError(f"vocab_size {model_config.vocab_size} but the data's vocabulary has "
                                        f"{data['vocab_size']} entries")
    _check_resume(job.model_dir, kind, model_config, data)
    return TrainPlan(kind, preset, model_config, train_config, data, init)


def _saved(model_dir: str) -> dict | None:
    """model_dir's config.json, or None for a new model_dir."""
    if tf.io.gfile.exists(os.path.join(model_dir, families.CONFIG_FILE)):
        return families.read_config(model_dir)
    return None


def _init_source(job: TrainJob) -> tuple[dict | None, str | None]:
    """`(config.json, path)` of `--init_checkpoint`; `(None, None)` without the flag, or when model_dir already
    holds checkpoints (then it resumes from them and the flag is dropped)."""
    if not job.init_checkpoint:
        return None, None
    if tf.io.gfile.isdir(job.model_dir) and tf.train.latest_checkpoint(job.model_dir):
        log.info("%s holds checkpoints: resuming from them, ignoring --init_checkpoint %s", job.model_dir,
                 job.init_checkpoint)
        return None, None
    if not tf.train.latest_checkpoint(job.init_checkpoint):
        raise FileNotFoundError(f"--init_checkpoint {job.init_checkpoint}: no checkpoint in it")
    return families.read_config(job.init_checkpoint), job.init_checkpoint


def _data(train_data: str, kind: str, source: dict | None, init: str | None) -> dict:
    """config.json's `data` section from the training data's metadata.json, checked against the model kind
    and the source's vocabulary."""
    metadata, _ = readers.read_metadata(train_data)
    if metadata.model != kind:
        raise readers.DataMismatchError(f"{train_data}: the data was made for {metadata.model}, not {kind}")
    data = families.data_section(metadata, train_data)
    theirs = source and (source["data"]["vocab_sha256"], source["data"]["vocab_size"])
    if theirs and theirs != (data["vocab_sha256"], data["vocab_size"]):
        raise readers.DataMismatchError(
            f"--init_checkpoint {init} has another vocabulary ({source['data']['vocab_size']} "
            f"entries, sha256 {source['data']['vocab_sha256'][:12]}) than {train_data} "
            f"({data['vocab_size']} entries, sha256 {data['vocab_sha256'][:12]})")
    return data


def _base_model(kind: str, preset: str, data: dict, saved: dict | None, source: dict | None):
    """The model config the overrides apply to: the saved model's (a rerun), the source's when its preset is
    the one asked for (a converted one too), else the preset's with the data's vocabulary size."""
    if saved:
        return saved["model_config"]
    if source and source["preset"] == preset:
        return source["model_config"]
    if not preset.startswith(kind + "_"):
        raise UserError(f"--preset {preset} is not a {kind} preset: {', '.join(families.presets(kind))}")
    return families.preset_config(kind, preset, vocab_size=data["vocab_size"])


def _check_resume(model_dir: str, kind: str, model_config, data: dict) -> None:
    saved = _saved(model_dir)
    if saved is None:
        return
    if saved["model"] != kind:
        raise ModelDirMismatchError(f"{model_dir} holds a {saved['model']} model, not {kind}")
    for field in dataclasses.fields(model_config):
        old, new = getattr(saved["model_config"], field.name), getattr(model_config, field.name)
        if old != new:
            raise ModelDirMismatchError(f"{model_dir} holds a model with {field.name}={old!r}, asked for {new!r}; "
                                        f"use another --model_dir or the same config")
    if saved["data"]["vocab_sha256"] != data["vocab_sha256"]:
        raise ModelDirMismatchError(f"{model_dir} was trained with another vocabulary than {data['train_data']}'s")
