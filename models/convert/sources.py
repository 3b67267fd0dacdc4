"""The tensors of a checkpoint file read by name, whatever its format: a google-research TF1 checkpoint
(`TF1Tensors`) or HuggingFace safetensors, one file or shards (`SafetensorsTensors`). Each has `names()`,
`has(name)`, `shape(name)` and `get(name)` (a numpy array); a file that cannot be read raises the
`ConversionError` of `common.unreadable`, naming it.
"""

import json
import os
import re

import numpy as np

from models.convert.common import ConversionError, unreadable

HF_WEIGHTS, HF_INDEX = "model.safetensors", "model.safetensors.index.json"


class TF1Tensors:
    """A google-research TF1 checkpoint, read by name (`tf.train.load_checkpoint`)."""

    def __init__(self, prefix: str):
        import tensorflow as tf

        self.prefix = prefix
        try:
            self.reader = tf.train.load_checkpoint(prefix)
            self.shapes = self.reader.get_variable_to_shape_map()
        except (tf.errors.OpError, IndexError, ValueError) as e:
            raise unreadable(f"{prefix}.index", e) from None

    def names(self):
        return sorted(self.shapes)

    def has(self, name):
        return name in self.shapes

    def shape(self, name):
        return tuple(self.shapes[name])

    def get(self, name):
        import tensorflow as tf

        try:
            return np.asarray(self.reader.get_tensor(name))
        except (tf.errors.OpError, IndexError, ValueError) as e:  # IndexError: a cut data file
            raise unreadable(f"{self.prefix}.data-*", e, name) from None


class SafetensorsTensors:
    """HuggingFace safetensors (one file, or shards listed by `model.safetensors.index.json`), read lazily with
    the `safetensors` package's numpy API."""

    def __init__(self, files: list[str]):
        from safetensors import safe_open

        self.handles, self.files = [], {}
        for f in files:
            try:
                self.handles.append(safe_open(f, framework="np"))
            except Exception as e:  # noqa: BLE001 - SafetensorError (not importable by name), OSError
                raise unreadable(f, e) from None
            self.files[id(self.handles[-1])] = f
        self.where = {name: h for h in self.handles for name in h.keys()}

    def names(self):
        return sorted(self.where)

    def has(self, name):
        return name in self.where

    def shape(self, name):
        return tuple(self.where[name].get_slice(name).get_shape())

    def get(self, name):
        try:
            return self.where[name].get_tensor(name)
        except Exception as e:  # noqa: BLE001 - a truncated file fails here
            raise unreadable(self.files[id(self.where[name])], e, name) from None


def tf1_prefix(path: str) -> str:
    """`bert_model.ckpt` (a prefix), one of its files, or a folder holding one -> the checkpoint prefix."""
    import tensorflow as tf

    for suffix in (".index", ".meta"):
        if path.endswith(suffix):
            path = path[:-len(suffix)]
    path = re.sub(r"\.data-\d+-of-\d+$", "", path)
    if os.path.isdir(path):
        found = tf.train.latest_checkpoint(path) or next(
            (os.path.join(path, f[:-len(".index")]) for f in sorted(os.listdir(path)) if f.endswith(".index")), None)
        if not found:
            raise ConversionError(f"no TF1 checkpoint (*.index) in {path}")
        return found
    if not os.path.exists(path + ".index"):
        raise ConversionError(f"TF1 checkpoint not found: {path}.index")
    return path


def safetensors_files(path: str) -> list[str]:
    """`model.safetensors`, a folder holding it, or a shard index -> the files to read."""
    if os.path.isdir(path):
        for name in (HF_WEIGHTS, HF_INDEX):
            if os.path.exists(os.path.join(path, name)):
                return safetensors_files(os.path.join(path, name))
        raise ConversionError(f"no {HF_WEIGHTS} or {HF_INDEX} in {path}")
    if not os.path.exists(path):
        raise ConversionError(f"safetensors file not found: {path}")
    if path.endswith(".json"):
        with open(path) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(os.path.dirname(path), s) for s in shards]
    return [path]
