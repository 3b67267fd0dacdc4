"""Writing TFRecord shards, and finding an earlier run's files.

A shard is written by one worker, streamed, aside under a hidden name and renamed when complete, so a
retried bundle rewrites it whole and a reader never sees half a shard. `metadata.json`
(`preprocessing.metadata`) is written last, after all shards: a directory without it is an unfinished run,
and the readers refuse it.
"""

import os

import tensorflow as tf

from preprocessing.metadata import FILE_NAME as METADATA


def shard_name(model: str, index: int, num_shards: int, gzip: bool) -> str:
    return f"{model}-{index:05d}-of-{num_shards:05d}.tfrecord" + (".gz" if gzip else "")


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
        for record in records:
            self.writer.write(record)
            self.count += 1

    def __exit__(self, exc_type, *_):
        self.writer.close()
        if exc_type is None:
            tf.io.gfile.rename(self.tmp, self.path, overwrite=True)
        elif tf.io.gfile.exists(self.tmp):
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
