"""Writing sharded TFRecords deterministically, and the `metadata.json` that marks a finished run.

Each example carries a sort key (a stable hash); its shard is `key % num_shards` and a shard's examples are
written in key order, so shard contents and order are a pure function of the input and seed (a
pseudo-random order, which also shuffles instances of one document apart). Every shard file is written
aside and renamed when complete. `metadata.json` is written last, after all shards: a directory without it
is an unfinished run, and the readers refuse it.
"""

import json
import os

import apache_beam as beam
import tensorflow as tf

METADATA = "metadata.json"


def shard_name(model: str, index: int, num_shards: int, gzip: bool) -> str:
    return f"{model}-{index:05d}-of-{num_shards:05d}.tfrecord" + (".gz" if gzip else "")


class WriteShard(beam.DoFn):
    """`(shard index, [(key, bytes) or None, ...])` -> `{"file": name, "examples": n}`."""

    def __init__(self, output_dir: str, model: str, num_shards: int, gzip: bool):
        self.output_dir, self.model, self.num_shards, self.gzip = output_dir, model, num_shards, gzip

    def process(self, element):
        index, items = element
        examples = sorted(item for item in items if item is not None)
        name = shard_name(self.model, index, self.num_shards, self.gzip)
        path = os.path.join(self.output_dir, name)
        tmp = os.path.join(self.output_dir, f".{name}.incomplete")
        options = tf.io.TFRecordOptions(compression_type="GZIP" if self.gzip else None)
        with tf.io.TFRecordWriter(tmp, options) as writer:
            for _, serialized in examples:
                writer.write(serialized)
        tf.io.gfile.rename(tmp, path, overwrite=True)
        yield {"file": name, "examples": len(examples)}


def write_metadata(output_dir: str, metadata: dict) -> None:
    path = os.path.join(output_dir, METADATA)
    tmp = path + ".incomplete"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps(metadata, indent=2, sort_keys=True) + "\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)


def previous_run(output_dir: str) -> list[str]:
    """Files of an earlier run in `output_dir` (metadata, shards, unfinished shards)."""
    if not tf.io.gfile.isdir(output_dir):
        return []
    return sorted(f for f in tf.io.gfile.listdir(output_dir)
                  if f == METADATA or ".tfrecord" in f or f.endswith(".incomplete"))
