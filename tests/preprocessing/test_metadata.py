"""`metadata.json`'s one definition: JSON round trips, files in the format written before the dataclass
existed, the reader's fake for external files, clear errors."""

import json

import pytest

from preprocessing import schema
from preprocessing.metadata import FILE_NAME, DatasetMetadata, MetadataError, VocabRecord

# A file as pipeline.pretraining_data wrote it before DatasetMetadata existed (keys as on disk today).
WRITTEN = {
    "schema_version": 1, "model": "bert", "compression": "GZIP", "input_files": 2, "examples": 7,
    "config": {"input": "c/*.txt", "max_seq_length": 32, "max_predictions_per_seq": 5, "masking": "static",
               "lower_case": True, "num_shards": 2, "seed": 12345},
    "features": schema.describe(schema.bert_features(32, 5)),
    "vocab": {"file": "vocab.txt", "sha256": "ab" * 32, "size": 120, "special_ids": {"[PAD]": 0, "[MASK]": 103}},
    "files": ["bert-00000-of-00002.tfrecord.gz", "bert-00001-of-00002.tfrecord.gz"],
    "examples_per_file": {"bert-00000-of-00002.tfrecord.gz": 3, "bert-00001-of-00002.tfrecord.gz": 4},
    "counters": {"documents": 4},
}


def test_a_written_file_reads_into_fields_and_writes_back_the_same_keys_and_values():
    meta = DatasetMetadata.from_json(WRITTEN)
    assert (meta.model, meta.compression, meta.examples, meta.max_seq_length, meta.max_predictions_per_seq) == \
        ("bert", "GZIP", 7, 32, 5)
    assert meta.vocab == VocabRecord(sha256="ab" * 32, file="vocab.txt", size=120,
                                     special_ids={"[PAD]": 0, "[MASK]": 103})
    assert meta.files == ("bert-00000-of-00002.tfrecord.gz", "bert-00001-of-00002.tfrecord.gz")
    assert meta.to_json() == WRITTEN
    assert meta.schema_features() == schema.bert_features(32, 5)


def test_write_then_read_round_trip(tmp_path):
    meta = DatasetMetadata.from_json(WRITTEN)
    meta.write(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME]  # nothing left aside
    assert DatasetMetadata.read(str(tmp_path)) == meta
    assert json.loads((tmp_path / FILE_NAME).read_text()) == WRITTEN


def test_unset_fields_are_not_written():
    """A job's metadata before it has finished, and the reader's fake for external BERT files."""
    early = {k: v for k, v in WRITTEN.items() if k not in ("files", "examples_per_file", "examples", "counters")}
    assert DatasetMetadata.from_json(early).to_json() == early
    external = DatasetMetadata("bert", {"max_seq_length": 16}, VocabRecord(sha256=None))
    assert external.to_json() == {"model": "bert", "config": {"max_seq_length": 16}, "compression": "",
                                  "vocab": {"sha256": None}}
    assert DatasetMetadata.from_json(external.to_json()) == external


def test_missing_keys_and_bad_json_are_clear_errors(tmp_path):
    with pytest.raises(MetadataError, match="missing key.*config"):
        DatasetMetadata.from_json({"model": "gpt", "vocab": {"sha256": None}})
    with pytest.raises(MetadataError, match="vocab.sha256"):
        DatasetMetadata.from_json({"model": "gpt", "config": {}, "vocab": {}})
    (tmp_path / FILE_NAME).write_text("{not json")
    with pytest.raises(MetadataError, match="not a dataset's metadata.json"):
        DatasetMetadata.read(str(tmp_path))
