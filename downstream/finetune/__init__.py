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

import importlib

# Loaded on first use, so that `python -m downstream.finetune` quiets TensorFlow before this package loads it
_API = {"FinetuneConfig": "downstream.finetune.config", "FinetuneJob": "downstream.finetune.job",
        "FinetuneResult": "downstream.finetune.outputs", "finetune": "downstream.finetune.run"}
__all__ = sorted(_API)


def __getattr__(name):
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)
