"""What an export writes, and writing it: `SavedModelSpec` (one SavedModel: where it goes, its root object,
its signatures), `stage` (write and check it in a staging folder) and `publish` (rename it into place:
a reader or a polling server never sees half a folder).

Each family's export module (`bert_export`, `gpt_export`, `bilm_export`) returns a list of specs;
`serving.export` decides the folders, adds warm-up records and model cards, and checks the ops.
"""

import dataclasses
import os
import shutil
from typing import Callable

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class SavedModelSpec:
    """One SavedModel of an export.

    Args:
      place: "hub" (a TF-Hub module under `<export_dir>/hub/<name>/`) or "serving" (a TF Serving version
        folder under `<export_dir>/serving/<model_name>/<version>/`).
      name: the hub module's folder name; None for the serving model (the export's model name is used).
      root: the object to save.
      signatures: SavedModel signatures (name -> `tf.function` with an input signature), or None.
      card: the model card template's key for a hub module (see `model_card.py`).
    """

    place: str
    name: str | None
    root: tf.Module
    signatures: dict | None = None
    card: str | None = None

    def __post_init__(self):
        if self.place not in ("hub", "serving"):
            raise ValueError(f"place must be 'hub' or 'serving', got {self.place!r}")


def stage(spec: SavedModelSpec, path: str, extra_files: dict[str, bytes] | None = None,
          verify: Callable[[str], None] | None = None) -> None:
    """Writes `spec` to the new folder `path` (plus `extra_files`: relative path -> bytes) and runs
    `verify(path)` on it; on any failure the folder is removed."""
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        tf.saved_model.save(spec.root, path, signatures=spec.signatures)
        for relative, data in (extra_files or {}).items():
            target = os.path.join(path, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        if verify is not None:
            verify(path)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise


def publish(staged: str, path: str) -> None:
    """Moves a staged folder to `path` (same file system) with renames; an existing `path` is replaced.
    A server polling the parent sees either the old folder or the complete new one."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    if os.path.exists(path):
        old = os.path.join(os.path.dirname(os.path.abspath(path)), f".old-{os.path.basename(path)}-{os.getpid()}")
        os.rename(path, old)
        os.rename(staged, path)
        shutil.rmtree(old)
    else:
        os.rename(staged, path)
