"""What a fine-tuning run writes into its `output_dir`, and what it returns (`FinetuneResult`):
  - `model/`: the trained tf_keras model (SavedModel; inputs as `inputs.py` makes them);
  - `serving/1/`: a text-in SavedModel for TF Serving, where the task has one (`export.py`);
  - `metrics.json`: the eval metrics, the trivial baseline's, the budget (steps, seconds, losses);
  - `finetune_config.json` (the task and the resolved `FinetuneConfig`), `labels.json`; for SQuAD
    `predictions.json` (answers by question id).
An `output_dir` that already holds those is refused unless `--overwrite`, which removes them (nothing else),
only once the run has trained its model (`commands.overwrite.FINETUNE`, the one `--overwrite` contract).
"""

import dataclasses
import json
import os

from commands import overwrite
from commands.user_errors import writable_dir

# What a run writes into output_dir: an earlier run is these, and `--overwrite` removes only these.
OUTPUTS = overwrite.FINETUNE.fixed


def check_output_dir(output_dir: str, overwrite_flag: bool,
                     inputs: dict[str, str] | None = None) -> overwrite.Plan:
    """What `--overwrite` removes from `output_dir` (`commands.overwrite.plan`): raises `UserError` for a
    file, a folder holding another kind of output (an export, a model_dir, a data job's run) or an earlier
    fine-tuning without `overwrite_flag`, and for an input folder (`inputs`: `--module` or `--model_dir`) or a
    folder inside it."""
    writable_dir("--output_dir", output_dir)
    return overwrite.plan(output_dir, overwrite.FINETUNE, overwrite_flag, input_folders=inputs)


@dataclasses.dataclass(frozen=True)
class Finetuned:
    """A trained and scored task model: what `write` puts into the output folder.

    Args:
      task: the `tasks.FinetuneTask`; backbone: the `ExportedModule`; model: the tf_keras model.
      labels: the label names; config: the resolved `FinetuneConfig`; metrics: `metrics.json`'s content.
      predictions: SQuAD's answers by question id (None for the other tasks).
      fallback_tag: the served tag of words cut off by the length limit (tagging).
    """
    task: object
    backbone: object
    model: object
    labels: list
    config: object
    metrics: dict
    predictions: dict | None = None
    fallback_tag: str = ""


@dataclasses.dataclass(frozen=True)
class FinetuneResult:
    """What a run returns: its metrics (as `metrics.json` holds them) and the paths it wrote."""
    metrics: dict
    output_dir: str
    model: str
    serving: str | None
    metrics_file: str
    config_file: str
    labels_file: str
    predictions_file: str | None = None

    def summary(self) -> str:
        """The line the command prints last: the metrics as one JSON object, without the per-epoch losses."""
        return json.dumps({k: v for k, v in self.metrics.items() if k != "losses"})


def write(output_dir: str, run: Finetuned, earlier: overwrite.Plan | None = None) -> FinetuneResult:
    """Writes the run into `output_dir`, removing `earlier` (an earlier run, `--overwrite`) first."""
    from downstream.finetune import export

    os.makedirs(output_dir, exist_ok=True)
    if earlier is not None:
        earlier.remove()  # --overwrite: the earlier fine-tuning's files, now that this one has its own to write
    paths = {name: os.path.join(output_dir, name)
             for name in ("finetune_config.json", "labels.json", "predictions.json", "metrics.json")}
    # first the files that mark the folder as a fine-tuning's (`commands.overwrite.FINETUNE.marks`): a run
    # stopped while it saves the model leaves a folder the next run's --overwrite may clear
    _write_json(paths["finetune_config.json"], {"task": run.task.name, **dataclasses.asdict(run.config)})
    _write_json(paths["labels.json"], run.labels)
    model_path = os.path.join(output_dir, "model")
    run.model.save(model_path, include_optimizer=False)
    served = export.export(run.task, run.backbone, run.model, run.labels, run.config,
                           os.path.join(output_dir, "serving"), run.fallback_tag)
    metrics = {**run.metrics, **({"serving": served} if served else {})}
    if run.predictions is not None:
        _write_json(paths["predictions.json"], run.predictions)
    _write_json(paths["metrics.json"], metrics)
    return FinetuneResult(metrics, output_dir, model_path, served, paths["metrics.json"],
                          paths["finetune_config.json"], paths["labels.json"],
                          paths["predictions.json"] if run.predictions is not None else None)


def _write_json(path: str, payload) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
