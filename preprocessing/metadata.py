"""`metadata.json`, the record beside every pretraining dataset: its file name, its fields, its JSON form.

The one definition of the contract. `pipeline.pretraining_data` builds a `DatasetMetadata` and writes it
last, after every shard (a directory without it is an unfinished run); the `tf.data` readers check data
against it, `models.families` copies its data section into `config.json`, the demo reuses data by it.
The JSON keys are the field names (nested for `vocab`); optional fields left unset (None) are not
written, so a file round-trips to the same bytes and files written before this module still read.
"""

import dataclasses
import json
import os

import tensorflow as tf

from preprocessing import schema

FILE_NAME = "metadata.json"
VOCAB_FILE = "vocab.txt"  # the vocabulary the data was tokenized with, beside the shards


class MetadataError(ValueError):
    """A `metadata.json` that is not one: not JSON, or a required key missing."""


@dataclasses.dataclass(frozen=True)
class VocabRecord:
    """The vocabulary the data was made with.

    Args:
      sha256: of the vocabulary (`Vocabulary.sha256`); None for data this project did not write (not checked).
      file: its file name beside the shards.
      size: entries.
      special_ids: `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]` (and the biLM's) -> id.
    """

    sha256: str | None
    file: str | None = None
    size: int | None = None
    special_ids: dict | None = None


@dataclasses.dataclass(frozen=True)
class DatasetMetadata:
    """What a dataset's `metadata.json` records. Treat the dict fields as read-only.

    Args:
      model: `bert`, `gpt` or `bilm`: the examples' schema.
      config: the job's configuration, flags and resolved values (`max_seq_length`, `lower_case`,
        `masking`, `max_predictions_per_seq`, `input`, `seed`, `num_shards`, ...).
      vocab: the vocabulary.
      compression: `""` or `"GZIP"`.
      files: the shards' file names; None for data this project did not write (not checked).
      examples_per_file: shard name -> examples.
      examples: examples in all shards.
      features: the on-disk features (`schema.describe`).
      schema_version: `schema.SCHEMA_VERSION` when written.
      input_files: input text files read.
      counters: the job's Beam counters by name (added when the job has finished).
      skipped_lines: input lines the job skipped for being over its line limit, as `path:line` (the first
        few of each file).

    Example:
      >>> meta = DatasetMetadata("gpt", {"max_seq_length": 8}, VocabRecord(None))
      >>> DatasetMetadata.from_json(meta.to_json()) == meta
      True
    """

    model: str
    config: dict
    vocab: VocabRecord
    compression: str = ""
    files: tuple[str, ...] | None = None
    examples_per_file: dict | None = None
    examples: int | None = None
    features: dict | None = None
    schema_version: int | None = None
    input_files: int | None = None
    counters: dict | None = None
    skipped_lines: tuple[str, ...] | None = None

    @property
    def max_seq_length(self) -> int | None:
        return self.config.get("max_seq_length")

    @property
    def max_predictions_per_seq(self) -> int | None:
        return self.config.get("max_predictions_per_seq")

    def schema_features(self) -> tuple[schema.Feature, ...]:
        """The records' features, from the model and the job's config."""
        return schema.features_for(self.to_json())

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}
        data["vocab"] = {k: v for k, v in dataclasses.asdict(self.vocab).items() if v is not None or k == "sha256"}
        for key in ("files", "skipped_lines"):
            if getattr(self, key) is not None:
                data[key] = list(getattr(self, key))
        return data

    @classmethod
    def from_json(cls, data: dict) -> "DatasetMetadata":
        """Inverse of `to_json`; keys it does not know are ignored."""
        missing = [k for k in ("model", "config", "vocab") if k not in data]
        if missing or "sha256" not in data.get("vocab", {}):
            raise MetadataError(f"missing key(s): {', '.join(missing or ['vocab.sha256'])}")
        vocab_keys = {f.name for f in dataclasses.fields(VocabRecord)}
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["vocab"] = VocabRecord(**{k: v for k, v in data["vocab"].items() if k in vocab_keys})
        for key in ("files", "skipped_lines"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        return cls(**values)

    @classmethod
    def read(cls, directory: str) -> "DatasetMetadata":
        """The `metadata.json` in `directory` (local or any `tf.io.gfile` file system)."""
        path = os.path.join(directory, FILE_NAME)
        with tf.io.gfile.GFile(path) as f:
            text = f.read()
        try:
            return cls.from_json(json.loads(text))
        except (json.JSONDecodeError, MetadataError, TypeError) as e:
            raise MetadataError(f"{path}: not a dataset's {FILE_NAME} ({e})") from None

    def write(self, directory: str) -> None:
        """Writes `directory/metadata.json` aside and renames it: readers never see half a file."""
        write_json(os.path.join(directory, FILE_NAME), self.to_json())


def write_json(path: str, payload: dict) -> None:
    """`payload` as sorted, indented JSON, written aside and renamed into `path` (local or gs://): the one
    way a job's metadata file is written (this module's, and the embedding job's own record)."""
    tmp = path + ".incomplete"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)
