"""`metadata.json`, the record beside every pretraining dataset: its file name, its fields, its JSON form.

The one definition of the contract. `pipeline.pretraining_data` builds a `DatasetMetadata` and writes it
last, after every shard (a directory without it is an unfinished run); the `tf.data` readers check data
against it, `models.families` copies its data section into `config.json`, the demo reuses data by it.
The JSON keys are the field names (nested for `vocab`); optional fields left unset (None) are not
written, so a file round-trips to the same bytes and files written before this module still read.

The file carries its format's version, `schema_version` (`schema.SCHEMA_VERSION`, 1 since the first data job
wrote one). `read` checks a file against its format before anything uses it (`check_format`): a version newer
than this release reads, a key the format does not have, a key it requires that is missing (all of them but
`OPTIONAL`; in `config`, the ones the readers use, `CONFIG`), a value of the wrong type or outside its few
allowed values are each a `MetadataError` naming the file and the key, in one line. The rest of `config` is
the job's own record (its flags), not checked.
"""

import dataclasses
import json
import os
import typing

import tensorflow as tf

from commands.job_fields import conform, describe
from commands.user_errors import UserError
from preprocessing import schema

FILE_NAME = "metadata.json"
VOCAB_FILE = "vocab.txt"  # the vocabulary the data was tokenized with, beside the shards


class MetadataError(UserError):
    """A `metadata.json` that is not one of the format this release reads: not JSON, a newer version, a key
    missing, unknown or of the wrong type. Its message names the file (when read from one) and the key."""


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
        """The `metadata.json` in `directory` (local or any `tf.io.gfile` file system), checked against its
        format (`check_format`): `MetadataError` naming the file and the key."""
        path = os.path.join(directory, FILE_NAME)
        with tf.io.gfile.GFile(path) as f:
            text = f.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise MetadataError(f"{path}: not a dataset's {FILE_NAME} ({e})") from None
        try:
            check_format(data)
        except MetadataError as e:
            raise MetadataError(f"{path}: {e}") from None
        return cls.from_json(data)

    def write(self, directory: str) -> None:
        """Writes `directory/metadata.json` aside and renames it: readers never see half a file."""
        write_json(os.path.join(directory, FILE_NAME), self.to_json())


# The format (`schema_version` 1): every field of `DatasetMetadata` and `VocabRecord`, of its annotated type
# (a JSON list for a tuple; null nowhere but `vocab.sha256`), all required but these: the counts of the Beam
# job's input (absent from data made another way, as the tests' synthetic datasets), and the lines it skipped
# (written only when there were some).
OPTIONAL = ("input_files", "counters", "skipped_lines")
# `config`'s keys that the readers use, and their types; its other keys are the job's flags.
CONFIG = {"max_seq_length": int, "max_predictions_per_seq": int, "masking": str, "lower_case": bool}
# The few values some keys may take.
ALLOWED = {"model": ("bert", "gpt", "bilm"), "compression": ("", "GZIP"), "config.masking": ("static", "dynamic")}


def check_format(data) -> None:
    """Raises `MetadataError` naming the key for anything in `data` (a parsed `metadata.json`) that this
    release's format does not allow; the version first, since a newer format may have other keys."""
    if not isinstance(data, dict):
        raise MetadataError(f"not a dataset's {FILE_NAME}: a JSON {type(data).__name__}, not an object")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > schema.SCHEMA_VERSION:
        raise MetadataError(f"key 'schema_version' is {version}, a newer format than this release reads "
                            f"({schema.SCHEMA_VERSION}): read the data with the release that wrote it, or write it "
                            f"again with this one")
    _check_keys(data, DatasetMetadata, "")
    _check_keys(data["vocab"], VocabRecord, "vocab.")
    for key, kind in CONFIG.items():
        _check_value(data["config"], key, kind, "config.", required=True)
    if data["schema_version"] < 1:
        raise MetadataError(f"key 'schema_version' is {data['schema_version']}; formats start at 1")
    for name, values in ALLOWED.items():
        parent, _, key = name.rpartition(".")
        value = (data[parent] if parent else data)[key]
        if value not in values:
            raise MetadataError(f"key {name!r} is {value!r}; allowed: {', '.join(map(repr, values))}")
    for key in ("max_seq_length", "max_predictions_per_seq"):
        if data["config"][key] < 1:
            raise MetadataError(f"key 'config.{key}' is {data['config'][key]}; allowed: >= 1")


def _check_keys(data, cls, prefix: str) -> None:
    """`data` (an object of the file) holds exactly the fields of `cls`, each of its type."""
    hints = typing.get_type_hints(cls)
    unknown = sorted(set(data) - set(hints))
    if unknown:
        raise MetadataError(f"unknown key {prefix + unknown[0]!r}: format {schema.SCHEMA_VERSION} has no such key "
                            f"(written by a newer release, or by hand?)")
    for key, hint in hints.items():
        if hint is VocabRecord:
            hint = dict
        elif key != "sha256":  # null stands for no value but the hash of a vocabulary this project did not write
            hint = _not_none(hint)
        _check_value(data, key, hint, prefix, required=key not in OPTIONAL)
    for key in ("examples_per_file", "counters", "special_ids"):
        for name, value in (data.get(key) or {}).items():
            _check_value({name: value}, name, int, f"{prefix}{key}.", required=True)


def _not_none(hint):
    """`X | None` -> `X`: a key left unset is not written, so null is no value of it in a file."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if len(args) == 1 and type(None) in typing.get_args(hint) else hint


def _check_value(data: dict, key: str, hint, prefix: str, required: bool) -> None:
    if key not in data:
        if required:
            raise MetadataError(f"key {prefix + key!r} is missing")
        return
    if not conform(data[key], hint)[0]:
        expected = describe(hint).replace("a tuple of", "a list of")  # JSON's name for it
        raise MetadataError(f"key {prefix + key!r} is {data[key]!r} ({type(data[key]).__name__}); expected "
                            f"{expected}")


def write_json(path: str, payload: dict) -> None:
    """`payload` as sorted, indented JSON, written aside and renamed into `path` (local or gs://): the one
    way a job's metadata file is written (this module's, and the embedding job's own record)."""
    tmp = path + ".incomplete"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)
