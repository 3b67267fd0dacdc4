"""`TrainJob` and `TrainResult`: one pretraining run as a frozen, typed object, and what it returns.

`python -m models.training.train` parses its flags into a `TrainJob` and calls `train.train(job)`, which is
also the Python API. Pure: the checks that need the data, the model_dir or the `--init_checkpoint` source run
with the job (`train_plan.resolve`), which resolves the overrides into the model config and the `TrainConfig`.

Example:
    job = TrainJob(train_data="data/bert/bert-*.tfrecord", model_dir="runs/bert_tiny", model="bert",
                   preset="bert_tiny", overrides={"train_steps": 20, "batch_size": 8})
"""

import dataclasses

from commands.job_fields import JobFieldError, Rule, checked, output_of
from models import families
from models.config import as_pairs

STRATEGIES = ("auto", "tpu", "multi_worker", "mirrored", "default")


def field_names(allow_change) -> tuple[str, ...]:
    """`--allow_change`'s values (a name, comma-separated names, or several of either) as names."""
    items = (allow_change,) if isinstance(allow_change, str) else allow_change
    if not isinstance(items, (list, tuple)) or not all(isinstance(item, str) for item in items):
        raise TypeError("expected a name, or a tuple of names")
    return tuple(f.strip() for item in items for f in item.split(",") if f.strip())


RULES = {"overrides": Rule(convert=as_pairs), "allow_change": Rule(convert=field_names),
         "model_dir": output_of("train_data", "eval_data")}


@checked(RULES)

@dataclasses.dataclass(frozen=True)
class TrainJob:
    """One pretraining run; the fields are the command's flags.

    Args:
      train_data: the TFRecord pattern of `pipeline.pretraining_data` (its metadata.json beside it).
      model_dir: where checkpoints and config.json go; a model_dir holding checkpoints resumes.
      model: bert, gpt or bilm; preset: `<model>_<size>` (`bert_tiny`, ...). Both may be left out when
        model_dir (or `init_checkpoint`) has a config.json: then they are its.
      eval_data: a held-out TFRecord pattern, evaluated every `eval_every` steps and at the end.
      init_checkpoint: a model_dir whose weights (only) start a new model_dir (fresh optimizer, step 0).
      overrides: model and training config fields to set (`--set key=value`): a mapping
        (`{"train_steps": 20, "model.dropout": 0.0}`), `(key, value)` pairs or `key=value` strings; kept as
        `(key, value)` pairs. Keys are those of `models.config.override`.
      allow_change: training fields (or `train_data`) a rerun on this model_dir may change from its config.json.
      strategy: auto, tpu, multi_worker, mirrored or default (`distribute.make_strategy`); tpu: a TPU name or
        grpc:// address.

    Raises `JobFieldError` for a field of the wrong type, an unknown model kind or strategy, an override
    string without `=`, or a model_dir that is (or is inside, or matches) the data.
    """

    train_data: str
    model_dir: str
    model: str | None = None
    preset: str | None = None
    eval_data: str | None = None
    init_checkpoint: str | None = None
    overrides: tuple[tuple[str, object], ...] = ()
    allow_change: tuple[str, ...] = ()
    strategy: str = "auto"
    tpu: str | None = None

    def __post_init__(self):
        if self.model is not None and self.model not in families.KINDS:
            raise JobFieldError(f"--model {self.model}: use one of {', '.join(families.KINDS)}")
        if self.strategy not in STRATEGIES:
            raise JobFieldError(f"--strategy {self.strategy}: use one of {', '.join(STRATEGIES)}")


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What a finished (or signal-stopped) training run returns.

    Args:
      model_dir: the run's folder (config.json, checkpoints, vocab.txt).
      step: the optimizer step reached (the last checkpoint's).
      metrics: the final training metrics (and `eval_*` with eval data); a non-finite value is NaN here and
        `null` in the command's last line.
      stopped_by_signal: the signal that stopped the run after saving a checkpoint (SIGTERM: 15), else None.
    """

    model_dir: str
    step: int
    metrics: dict
    stopped_by_signal: int | None = None

    def summary(self) -> dict:
        """The command's last line: `{"step": N, **metrics}` (and `stopped_by_signal`)."""
        return {"step": self.step, **self.metrics,
                **({"stopped_by_signal": self.stopped_by_signal} if self.stopped_by_signal else {})}
