"""`ExportJob` and `ExportResult`: one export as a frozen, typed object, the checks made before the model loads,
and what the export returns. `python -m serving.export` parses its flags into an `ExportJob` and calls
`cli.export(job)`, which is also the Python API.

Example:
    result = export(ExportJob(model_dir="runs/bert_tiny", export_dir="export/bert"))
    result.hub["encoder"], result.serving, result.version
"""

import dataclasses
import json
import os
import re

from commands.overwrite import EXPORT, refuse_links, refuse_other
from commands.user_errors import UserError

MANIFEST_FILE = "export.json"
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # a plain folder name: no "/", no ".."
UNSERVABLE = 3  # the exit status for a model that cannot be served (unsupported ops, a failing warm-up)


class ExportError(UserError):
    """The export cannot proceed; its `status` is the command's exit status (2, or `UNSERVABLE`)."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message, status=code)


@dataclasses.dataclass(frozen=True)
class ExportJob:
    """One export; the fields are the command's flags.

    Args:
      model_dir: a model_dir of `models.training.train` or `models.convert --from` (local or gs://).
      export_dir: the local folder that receives `hub/`, `serving/` and `export.json`.
      version: the TF Serving version (default: one more than the highest present); never an existing one.
      warmup_text: a text file whose first lines become the warm-up requests (default: built-in sentences).
      model_name: the TF Serving model name (default: the family, bert, gpt or bilm).
      checkpoint: a checkpoint of model_dir (`ckpt-N` or a path; default: the latest).
      overwrite: replace the `hub/` modules of an earlier export of the same family.
    """

    model_dir: str
    export_dir: str
    version: int | None = None
    warmup_text: str | None = None
    model_name: str | None = None
    checkpoint: str | None = None
    overwrite: bool = False

    def check(self, kind: str, model_name: str) -> None:
        """Everything that can be refused before the model loads (`ExportError`, exit status 2), for a model of
        family `kind` exported as `model_name`."""
        import tensorflow as tf  # model_dir may be remote (gs://); export_dir is local (renames)
        if not tf.io.gfile.isdir(self.model_dir):
            problem = "is a file, not a folder" if tf.io.gfile.exists(self.model_dir) else "no such folder"
            raise ExportError(f"--model_dir {self.model_dir}: {problem}")
        writable_folder(self.export_dir, "--export_dir")
        if self.version is not None and self.version < 1:
            raise ExportError(f"--version must be >= 1, got {self.version}")
        if self.warmup_text is not None and os.path.exists(self.warmup_text) and \
                not os.path.isfile(self.warmup_text):
            raise ExportError(f"--warmup_text {self.warmup_text} is a folder, not a text file")
        if not MODEL_NAME.fullmatch(model_name):
            raise ExportError(f"--model_name {model_name!r} must be a plain folder name: letters, digits, '.', "
                              f"'_', '-', starting with a letter or digit, at most 128 characters")
        try:
            refuse_other(self.export_dir, EXPORT, self.overwrite, "--export_dir")
            refuse_links(self.export_dir, replaced(self.export_dir), EXPORT.command, "--export_dir")
        except UserError as e:
            raise ExportError(str(e)) from None
        there = existing_family(self.export_dir)
        if there is not None and there != kind:
            raise ExportError(f"{self.export_dir} holds a {there} export; a {kind} export there would mix the two: "
                              f"use another --export_dir")
        hub = os.path.join(self.export_dir, "hub")
        if os.path.exists(hub) and not self.overwrite:
            raise ExportError(f"{hub} holds the TF-Hub modules of an earlier {there or 'unknown'} export: pass "
                              f"--overwrite to replace them, or use another --export_dir")


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """What an export wrote.

    Args:
      hub: module name (`encoder`, `preprocessor`; `module`) -> its folder.
      serving: the TF Serving version folder (`<export_dir>/serving/<model_name>/<version>`).
      version: its version; warmup_requests: the warm-up records in it.
      model_config: `serving/models.config`, TF Serving's model_config_list of every model there.
    """

    hub: dict
    serving: str
    version: int
    warmup_requests: int
    model_config: str

    def summary(self) -> dict:
        """The command's last line."""
        return {"hub": self.hub, "version": self.version, "warmup_requests": self.warmup_requests,
                "serving": self.serving, "model_config": self.model_config}


def writable_folder(path: str, flag: str) -> None:
    """`path` is a writable folder, or can be made in one."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise ExportError(f"{flag} {path} is a file, not a folder")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ExportError(f"{flag} {path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ExportError(f"{flag} {path}: {existing} is not writable")


def replaced(export_dir: str) -> list[str]:
    """The paths in `export_dir` that an export writes into or replaces: `export.json`, `hub/` and `serving/`,
    and what each of those two folders holds (modules, models, the model config files)."""
    paths = [MANIFEST_FILE, "hub", "serving"]
    for folder in ("hub", "serving"):
        path = os.path.join(export_dir, folder)
        if os.path.isdir(path) and not os.path.islink(path):
            paths += [f"{folder}/{name}" for name in sorted(os.listdir(path))]
    return paths


def existing_family(export_dir: str) -> str | None:
    """The family an export folder holds: export.json's, else guessed from hub/'s modules; None if empty."""
    manifest = os.path.join(export_dir, MANIFEST_FILE)
    if os.path.isfile(manifest):
        with open(manifest) as f:
            return json.load(f).get("family")
    hub = os.path.join(export_dir, "hub")
    if os.path.isdir(os.path.join(hub, "encoder")) or os.path.isdir(os.path.join(hub, "preprocessor")):
        return "bert"
    if os.path.isdir(os.path.join(hub, "module")):
        return "bilm" if os.path.isfile(os.path.join(hub, "module", "assets", "options.json")) else "gpt"
    return None
