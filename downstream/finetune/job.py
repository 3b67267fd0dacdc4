"""`FinetuneJob`: one fine-tuning run as a frozen, typed object: the task, the module (or the pretraining run
to export first), the task files, the output folder, the recipe (`FinetuneConfig`) and whether an earlier run
there may be replaced. The command line parses its flags into one (`cli.py`); the Python API takes one
(`run.finetune`). Pure: checks that need the file system run with the job (`run.check_job`).

Example:
    job = FinetuneJob(task="classify", module="export/bert", train="train.tsv", eval="dev.tsv",
                      output_dir="out", config=FinetuneConfig(epochs=1))
"""

import dataclasses

from commands.user_errors import UserError
from downstream.finetune import tasks
from downstream.finetune.config import FinetuneConfig


@dataclasses.dataclass(frozen=True)
class FinetuneJob:
    """One fine-tuning run; the fields are the command's flags.

    Args:
      task: classify, pair, tag, squad or choice (`tasks.NAMES`).
      train, eval: the task files (formats: `task_data.py`).
      output_dir: where the run writes `model/`, `serving/`, `metrics.json`, ... (`outputs.py`).
      module: an export dir (`serving.export`'s `--export_dir`) or a hub module dir; or else
      model_dir: a pretraining run, exported to a temporary folder first (the same code path).
      validation: a validation file (the train file's format) that picks epochs and rates (`selection.py`);
        or else `config.validation_fraction` carves one from `train`. Never the eval file.
      config: the recipe (`--set key=value` overrides it on the command line).
      overwrite: replace an earlier fine-tuning in `output_dir` (`commands.overwrite`).

    Raises `UserError` for an unknown task, and unless exactly one of `module` and `model_dir` is given.
    """

    task: str
    train: str
    eval: str
    output_dir: str
    module: str | None = None
    model_dir: str | None = None
    validation: str | None = None
    config: FinetuneConfig = dataclasses.field(default_factory=FinetuneConfig)
    overwrite: bool = False

    def __post_init__(self):
        tasks.get(self.task)
        if bool(self.module) == bool(self.model_dir):
            raise UserError("give one of module (an export dir or a hub module dir) and model_dir (a pretraining "
                            "run)")
        if self.validation and self.config.validation_fraction:
            raise UserError("give a validation file or validation_fraction, not both")

    @property
    def source(self) -> dict[str, str]:
        """The module's flag and folder, as the `--overwrite` contract names an input folder."""
        return {"--module": self.module} if self.module else {"--model_dir": self.model_dir}
