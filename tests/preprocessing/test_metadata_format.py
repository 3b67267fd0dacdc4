"""`metadata.json` carries its format's version and is read only in that format: the datasets an earlier release
wrote (`tests/fixtures/data_v1`, today's format, `schema_version` 1) read; a file with a key removed, a key of
the wrong type, a key the format does not have, or a newer `schema_version` is refused in one line naming the
file and the key, by the reader and by training before anything is built or written."""

import json
import os
import shutil

import pytest

from preprocessing import readers
from preprocessing.metadata import CONFIG, FILE_NAME, OPTIONAL, DatasetMetadata, MetadataError
from tests.pipeline.test_data_v1 import DATASETS, FIXTURE


def fixture_record(name: str = "gpt") -> dict:
    with open(os.path.join(FIXTURE, name, FILE_NAME)) as f:
        return json.load(f)


def dataset_with(tmp_path, change) -> str:
    """A copy of the fixture's GPT dataset whose metadata.json `change(record)` edited; its folder."""
    folder = tmp_path / "gpt"
    shutil.copytree(os.path.join(FIXTURE, "gpt"), folder)
    record = fixture_record()
    change(record)
    (folder / FILE_NAME).write_text(json.dumps(record, indent=2))
    return str(folder)


def refusal(folder: str) -> str:
    """The one-line message of reading `folder`'s metadata.json, which must be refused; the readers' too."""
    with pytest.raises(MetadataError) as e:
        DatasetMetadata.read(folder)
    with pytest.raises(readers.DataMismatchError) as mismatch:
        readers.read_metadata(os.path.join(folder, "gpt-*.tfrecord"))
    assert str(mismatch.value) == str(e.value) and "\n" not in str(e.value)
    return str(e.value)


def removed(key: str):
    def change(record):
        parent, _, name = key.rpartition(".")
        del (record[parent] if parent else record)[name]
    return change


def set_to(key: str, value):
    def change(record):
        parent, _, name = key.rpartition(".")
        (record[parent] if parent else record)[name] = value
    return change


@pytest.mark.parametrize("name", list(DATASETS))
def test_the_datasets_an_earlier_release_wrote_still_read(name):
    folder = os.path.join(FIXTURE, name)
    assert fixture_record(name)["schema_version"] == 1
    metadata, files = readers.read_metadata(os.path.join(folder, f"{DATASETS[name]}-*"))
    assert metadata == DatasetMetadata.read(folder) and [os.path.basename(f) for f in files] == list(metadata.files)


REQUIRED = ([k for k in fixture_record() if k not in OPTIONAL] + [f"config.{k}" for k in CONFIG]
            + [f"vocab.{k}" for k in fixture_record()["vocab"]])


@pytest.mark.parametrize("key", REQUIRED)
def test_a_missing_key_is_refused_naming_the_file_and_the_key(key, tmp_path):
    folder = dataset_with(tmp_path, removed(key))
    assert refusal(folder) == f"{os.path.join(folder, FILE_NAME)}: key {key!r} is missing"


def test_the_optional_keys_may_be_missing(tmp_path):
    assert set(OPTIONAL) - set(fixture_record()) == {"skipped_lines"}  # written only when lines were skipped
    folder = dataset_with(tmp_path, lambda record: [record.pop(k, None) for k in OPTIONAL])
    assert DatasetMetadata.read(folder).counters is None


@pytest.mark.parametrize("key, value", [
    ("schema_version", "1"), ("schema_version", True), ("model", 1), ("config", []), ("vocab", "vocab.txt"),
    ("compression", None), ("files", "gpt-00000-of-00001.tfrecord"), ("files", [1]), ("examples_per_file", []),
    ("examples", "36"), ("examples", 36.0), ("features", []), ("input_files", True), ("skipped_lines", "a:1"),
    ("counters", {"lines": "39"}), ("examples_per_file", {"gpt-00000-of-00001.tfrecord": None}),
    ("config.max_seq_length", "16"), ("config.max_predictions_per_seq", None), ("config.lower_case", "true"),
    ("config.masking", 0), ("vocab.size", "200"), ("vocab.sha256", 5), ("vocab.file", None),
    ("vocab.special_ids", {"[PAD]": "0"})])
def test_a_key_of_the_wrong_type_is_refused_naming_the_file_and_the_key(key, value, tmp_path):
    folder = dataset_with(tmp_path, set_to(key, value))
    named = {"counters": "counters.lines", "examples_per_file": "examples_per_file.gpt-00000-of-00001.tfrecord",
             "vocab.special_ids": "vocab.special_ids.[PAD]"}.get(key, key) if isinstance(value, dict) else key
    message = refusal(folder)
    assert message.startswith(f"{os.path.join(folder, FILE_NAME)}: key {named!r} is "), message
    assert "expected" in message, message


@pytest.mark.parametrize("key, value, said", [
    ("model", "xl", "allowed: 'bert', 'gpt', 'bilm'"), ("compression", "ZLIB", "allowed: '', 'GZIP'"),
    ("config.masking", "sometimes", "allowed: 'static', 'dynamic'"), ("config.max_seq_length", 0, "allowed: >= 1"),
    ("schema_version", 0, "formats start at 1")])
def test_a_value_the_format_does_not_allow_is_refused(key, value, said, tmp_path):
    message = refusal(dataset_with(tmp_path, set_to(key, value)))
    assert f"key {key!r} is {value!r}; {said}" in message, message


@pytest.mark.parametrize("key", ["shards", "vocab.lower_case"])
def test_an_unknown_key_is_refused_naming_the_file_and_the_key(key, tmp_path):
    folder = dataset_with(tmp_path, set_to(key, 1))
    assert refusal(folder) == (f"{os.path.join(folder, FILE_NAME)}: unknown key {key!r}: format 1 has no such key "
                               f"(written by a newer release, or by hand?)")


def test_a_newer_format_is_refused_before_its_keys_are_looked_at(tmp_path):
    folder = dataset_with(tmp_path, lambda record: record.update(schema_version=99, shards=record.pop("files")))
    assert refusal(folder) == (f"{os.path.join(folder, FILE_NAME)}: key 'schema_version' is 99, a newer format than "
                               f"this release reads (1): read the data with the release that wrote it, or write it "
                               f"again with this one")


@pytest.mark.parametrize("change, key", [(set_to("schema_version", 99), "schema_version"),
                                         (removed("config.max_seq_length"), "config.max_seq_length"),
                                         (set_to("vocab.size", "200"), "vocab.size")])
def test_training_refuses_it_in_one_line_before_anything_is_built(change, key, tmp_path, capsys):
    from models.training import train

    folder = dataset_with(tmp_path, change)
    model_dir = tmp_path / "run"
    assert train.main(["--model", "gpt", "--preset", "gpt_tiny", "--train_data", os.path.join(folder, "gpt-*"),
                       "--model_dir", str(model_dir), "--set", "train_steps=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {os.path.join(folder, FILE_NAME)}: key {key!r} is ") and err.count("\n") == 1, err
    assert not model_dir.exists()
