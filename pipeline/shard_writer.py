"""Writing TFRecord shards, and finding an earlier run's files.

A shard is written by one worker, streamed, aside under a hidden name and renamed when complete, so a
retried bundle rewrites it whole and a reader never sees half a shard. `metadata.json`
(`preprocessing.metadata`) is written last, after all shards: a directory without it is an unfinished run,
and the readers refuse it.
"""

import os

import tensorflow as tf

from preprocessing.metadata import FILE_NAME as METADATA
from commands.user_errors import UserError


def shard_name(model: str, index: int, num_shards: int, gzip: bool) -> str:
    return f"{model}-{index:05d}-of-{num_shards:05d}.tfrecord" + (".gz" if gzip else "")


class OutputWriteError(UserError):
    """An output file could not be written (disk full, quota, permissions); the job stops and cleans up."""


def write_failed(path: str, error: Exception) -> OutputWriteError:
    """The one-line error for a failed write of `path` (an `OSError` or a TF `OpError`)."""
    reason = (getattr(error, "message", None) or getattr(error, "strerror", None) or str(error)).strip()
    return OutputWriteError(f"cannot write {path}: {reason.splitlines()[0] if reason else type(error).__name__}: "
                            f"free space (or use another --output_dir) and rerun; this run's output was removed")


class ShardWriter:
    """Context manager writing one shard: `write_all(records)`, then `summary()`."""

    def __init__(self, output_dir: str, model: str, index: int, num_shards: int, gzip: bool):
        self.name = shard_name(model, index, num_shards, gzip)
        self.path = os.path.join(output_dir, self.name)
        self.tmp = os.path.join(output_dir, f".{self.name}.incomplete")
        self.options = tf.io.TFRecordOptions(compression_type="GZIP" if gzip else None)
        self.count = 0

    def __enter__(self):
        self.writer = tf.io.TFRecordWriter(self.tmp, self.options)
        return self

    def write_all(self, records) -> None:
        try:
            for record in records:
                self.writer.write(record)
                self.count += 1
            self.writer.flush()
        except (OSError, tf.errors.OpError) as e:
            raise write_failed(self.path, e) from e

    def __exit__(self, exc_type, *_):
        try:
            self.writer.close()
            if exc_type is None:
                tf.io.gfile.rename(self.tmp, self.path, overwrite=True)
        except (OSError, tf.errors.OpError) as e:
            if exc_type is None:
                raise write_failed(self.path, e) from e
        finally:
            if tf.io.gfile.exists(self.tmp):
                tf.io.gfile.remove(self.tmp)
        return False

    def summary(self) -> dict:
        return {"file": self.name, "examples": self.count}


def previous_run(output_dir: str) -> list[str]:
    """Files of an earlier run in `output_dir` (metadata, shards, unfinished shards)."""
    if not tf.io.gfile.isdir(output_dir):
        return []
    return sorted(f for f in tf.io.gfile.listdir(output_dir)
                  if f == METADATA or ".tfrecord" in f or f.endswith(".incomplete"))
