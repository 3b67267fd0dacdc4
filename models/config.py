"""Training configuration, and the house's one `--set key=value` parser, checked against config dataclasses.

`TrainConfig` holds everything about optimisation and the loop; each model family keeps its own frozen
config dataclass and presets beside the model (`models/bert.py`, `models/gpt.py`, `models/bilm.py`).
`override` applies overrides to any set of named frozen dataclasses (training: `model` and `train`;
fine-tuning, `downstream/finetune`: `finetune`): a bare key (`batch_size`) when it names a field of exactly
one of them, or a qualified one (`model.dropout`, `train.seed`) always. An unknown key is an error
that lists the valid ones; values given as text (`--set key=value`) are parsed to the field's type (`int`,
`float`, `bool`, `str`, tuples, `Optional[...]` of those), values given from Python (`("batch_size", 64)`)
must already be of it.
"""

import dataclasses
import json
import types
import typing

from commands.user_errors import UserError


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """How to train. Defaults follow BERT's pretraining recipe, scaled for short runs.

    Args:
      batch_size: the global batch, over all replicas, per optimizer step (after accumulation).
      train_steps: optimizer steps.
      learning_rate: the peak learning rate, reached after `warmup_steps` of linear warm-up (a warm-up
        longer than the run just never reaches the peak).
      decay: `linear` | `polynomial` (with `decay_power`) | `constant`, from the peak to
        `end_learning_rate_ratio` * peak at `train_steps`.
      optimizer: `adamw` (BERT, GPT), `lamb` (large batches), `adagrad` (bilm-tf).
      weight_decay: decoupled weight decay; never applied to biases, layer norms or embeddings' norms.
      clip_norm: global-norm gradient clipping (0 = off).
      accumulation_steps: micro-batches per optimizer step; each is `batch_size / accumulation_steps`.
      steps_per_execution: optimizer steps per `tf.function` call (what TPUs want).
      jit_compile: compile the step with XLA.
      mixed_precision: `auto` (decided at run time by `models.training.hardware`: `mixed_bfloat16` on TPUs and
        GPUs; on a CPU from its bfloat16 flags and measurements, `float32` today), `float32`,
        `mixed_bfloat16` (TPU, recent CPUs/GPUs) or `mixed_float16` (GPUs, with dynamic loss scaling).
      checkpoint_every: optimizer steps between checkpoints (a final one is always written).
      log_every: optimizer steps between log lines and TensorBoard summaries.
      eval_every: optimizer steps between evaluations when `--eval_data` is given (0 = only at the end).
      eval_steps: batches per evaluation.
      shuffle_buffer: records held by the reader's shuffle.
      seed: weights' initialisation, dropout, data order and dynamic masking.
      train_only: weight-path prefixes (`mlm_head`, `nsp_head`): only those weights train, the rest stay
        frozen, e.g. to fit a fresh head on a converted encoder; empty = every weight trains.
    """

    batch_size: int = 32
    train_steps: int = 1000
    learning_rate: float = 1e-4
    warmup_steps: int = 100
    decay: str = "linear"
    decay_power: float = 1.0
    end_learning_rate_ratio: float = 0.0
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    adagrad_initial_accumulator: float = 1.0
    clip_norm: float = 1.0
    accumulation_steps: int = 1
    steps_per_execution: int = 10
    jit_compile: bool = True
    mixed_precision: str = "auto"
    checkpoint_every: int = 500
    keep_checkpoints: int = 3
    log_every: int = 50
    eval_every: int = 0
    eval_steps: int = 50
    shuffle_buffer: int = 10_000
    seed: int = 42
    train_only: tuple[str, ...] = ()

    def __post_init__(self):
        _check_choice("decay", self.decay, ("linear", "polynomial", "constant"))
        _check_choice("optimizer", self.optimizer, ("adamw", "lamb", "adagrad"))
        _check_choice("mixed_precision", self.mixed_precision, ("auto", "float32", "mixed_bfloat16",
                                                                  "mixed_float16"))
        for name in ("batch_size", "train_steps", "accumulation_steps", "steps_per_execution",
                     "checkpoint_every", "log_every", "eval_steps", "keep_checkpoints"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batch_size % self.accumulation_steps:
            raise ValueError(f"batch_size {self.batch_size} is not a multiple of accumulation_steps "
                             f"{self.accumulation_steps}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")


def _check_choice(name: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


class OverrideError(UserError):
    """A `--set` override names no field, is ambiguous, or its value does not parse."""


def _unwrap_optional(annotation):
    """`Optional[X]` -> `X`; anything else as it is."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            return inner[0]
    return annotation


def parse_value(text: str, annotation):
    """`text` -> a value of the dataclass field type `annotation` (`Optional[X]` parses as `X`)."""
    annotation = _unwrap_optional(annotation)
    if annotation is bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"not a boolean: {text!r}")
        return lowered in ("true", "1", "yes")
    if annotation is int:
        number = float(text)  # accepts 1e6
        if number != int(number):
            raise ValueError(f"not an integer: {text!r}")
        return int(number)
    if annotation in (float, str):
        return annotation(text)
    if typing.get_origin(annotation) is tuple:  # "1,2,3" or JSON "[[1, 32], [2, 32]]"
        args = typing.get_args(annotation)
        item = args[0] if len(args) == 2 and args[1] is Ellipsis else None
        raw = json.loads(text) if text.strip().startswith("[") else [t.strip() for t in text.split(",") if t.strip()]
        if item in (bool, int, float, str):
            return tuple(parse_value(str(v), item) for v in raw)
        return tuple(tuple(v) if isinstance(v, list) else v for v in raw)
    raise ValueError(f"cannot parse {annotation}")


def typed_value(value, annotation):
    """A value given from Python for the field type `annotation`: text is parsed (`parse_value`); otherwise it
    must be of the type already (an int is a float too; a list a tuple), else ValueError."""
    if isinstance(value, str):
        return parse_value(value, annotation)
    if value is None and _unwrap_optional(annotation) is not annotation:
        return None
    annotation = _unwrap_optional(annotation)
    if annotation is bool and isinstance(value, bool) or annotation is int and type(value) is int:
        return value
    if annotation is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typing.get_origin(annotation) is tuple and isinstance(value, (list, tuple)):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    raise ValueError(f"{value!r} is not a {getattr(annotation, '__name__', annotation)}")


def as_pairs(overrides) -> tuple[tuple[str, object], ...]:
    """Overrides as `(key, value)` pairs, from `key=value` strings (as `--set` gives them), `(key, value)`
    pairs or a mapping; raises `OverrideError` for a string without `=`."""
    items = overrides.items() if isinstance(overrides, dict) else overrides
    pairs = []
    for item in items:
        if isinstance(item, str):
            key, sep, text = item.partition("=")
            if not sep:
                raise OverrideError(f"--set {item!r}: expected key=value")
            item = (key.strip(), text)
        key, value = item
        pairs.append((str(key), value))
    return tuple(pairs)


def override(configs: dict, overrides) -> dict:
    """Applies overrides to the named frozen dataclasses in `configs`; returns the new ones.

    Args:
      configs: scope name -> dataclass instance, e.g. `{"model": BertConfig(), "train": TrainConfig()}`.
      overrides: `key=value` strings, `(key, value)` pairs or a mapping (`as_pairs`); `key` is `field` (a
        field of exactly one config) or `scope.field`; a value given as text is parsed to the field's type.

    Raises `OverrideError` for a malformed, unknown or ambiguous key or a value that does not parse, and
    whatever `ValueError` a config's `__post_init__` raises for the new values.

    Example:
      >>> override({"train": TrainConfig()}, ["batch_size=64"])["train"].batch_size
      64
    """
    fields = {scope: {f.name for f in dataclasses.fields(obj)} for scope, obj in configs.items()}
    changes = {scope: {} for scope in configs}
    for key, value in as_pairs(overrides):
        scope, _, name = key.rpartition(".")
        scopes = [scope] if scope else [s for s in fields if name in fields[s]]
        if scope and scope not in fields or not scopes or any(name not in fields[s] for s in scopes):
            raise OverrideError(f"--set {key}: unknown key. Valid keys: {valid_keys(configs)}")
        if len(scopes) > 1:
            raise OverrideError(f"--set {key}: ambiguous, say {' or '.join(f'{s}.{name}' for s in scopes)}")
        hints = typing.get_type_hints(type(configs[scopes[0]]))
        try:
            changes[scopes[0]][name] = typed_value(value, hints[name])
        except ValueError as e:  # json.JSONDecodeError is one
            raise OverrideError(f"--set {key}={value}: {e}") from None
    return {scope: dataclasses.replace(obj, **changes[scope]) for scope, obj in configs.items()}


def valid_keys(configs: dict) -> str:
    """The keys `override` accepts, qualified when there are several configs."""
    if len(configs) == 1:
        return ", ".join(f.name for f in dataclasses.fields(next(iter(configs.values()))))
    return ", ".join(f"{scope}.{f.name}" for scope, obj in configs.items() for f in dataclasses.fields(obj))


def apply_overrides(model_config, train_config: TrainConfig, overrides):
    """Training's `--set`: `override` over `model` and `train`; returns the new `(model_config, train_config)`."""
    new = override({"model": model_config, "train": train_config}, overrides)
    return new["model"], new["train"]


def to_json(config) -> dict:
    return {"class": type(config).__name__, **dataclasses.asdict(config)}


def from_json(cls, data: dict):
    """Inverse of `to_json` (lists back to tuples)."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            v = data[f.name]
            if typing.get_origin(hints[f.name]) is tuple:
                v = tuple(tuple(x) if isinstance(x, list) else x for x in v)
            values[f.name] = v
    return cls(**values)
