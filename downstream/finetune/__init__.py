"""`python -m downstream.finetune` and its Python API: one small head on an exported module (classification,
pairs, tagging, SQuAD spans, multiple choice). The job (`FinetuneJob`, `FinetuneConfig`), the tasks as
objects (`tasks.py`), their data (`task_data.py`), encoding (`encoding.py`, over the inputs shared with the
serving export, `inputs.py`), heads (`heads.py`, `layers.py`), the training loop (`training.py`,
`schedule.py`), evaluation (`evaluation.py`, `ner_scores.py`, `squad.py`), the outputs (`outputs.py`,
`export.py`) and the run itself (`run.py`).

Example:
    from downstream.finetune import FinetuneConfig, FinetuneJob, finetune

    result = finetune(FinetuneJob(task="classify", module="export/bert", train="train.tsv", eval="dev.tsv",
                                  output_dir="out", config=FinetuneConfig(epochs=1)))
"""

from downstream.finetune.config import FinetuneConfig
from downstream.finetune.job import FinetuneJob
from downstream.finetune.outputs import FinetuneResult
from downstream.finetune.run import finetune

__all__ = ["FinetuneConfig", "FinetuneJob", "FinetuneResult", "finetune"]
