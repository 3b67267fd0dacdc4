"""`python -m serving.export`: a model_dir to TF-Hub reusable SavedModels (`hub/`) and TF Serving version
folders (`serving/<name>/<version>/`), checked (servable ops, warm-up replayed) before they move into place.
The job (`job.py`: `ExportJob`, the checks before the model loads, `ExportResult`), the command and the run
(`cli.py`), the families' modules (`bert.py`, `gpt.py`, `bilm.py`) over the TF-Hub contract (`hub_module.py`),
model cards, the servable-op check (`op_check.py`) and staged writes (`saved_models.py`).

Example:
    from serving.export import ExportJob, export

    result = export(ExportJob(model_dir="runs/bert_tiny", export_dir="export/bert"))
"""

import importlib

# Loaded on first use, so that `python -m serving.export` quiets TensorFlow before this package loads it
_API = {"export": "serving.export.cli", "ExportError": "serving.export.job", "ExportJob": "serving.export.job",
        "ExportResult": "serving.export.job"}
__all__ = sorted(_API)


def __getattr__(name):
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)
