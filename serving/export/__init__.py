"""`python -m serving.export`: a model_dir to TF-Hub reusable SavedModels (`hub/`) and TF Serving version
folders (`serving/<name>/<version>/`), checked (servable ops, warm-up replayed) before they move into place.
The job (`job.py`: `ExportJob`, the checks before the model loads, `ExportResult`), the command and the run
(`cli.py`), the families' modules (`bert.py`, `gpt.py`, `bilm.py`) over the TF-Hub contract (`hub_module.py`),
model cards, the servable-op check (`op_check.py`) and staged writes (`saved_models.py`).

Example:
    from serving.export import ExportJob, export

    result = export(ExportJob(model_dir="runs/bert_tiny", export_dir="export/bert"))
"""

from serving.export.cli import export
from serving.export.job import ExportError, ExportJob, ExportResult

__all__ = ["ExportError", "ExportJob", "ExportResult", "export"]
