"""`tf.data` readers: pretraining TFRecords -> batched model inputs `(x, y, sample_weight)`.

Static shapes throughout (`drop_remainder=True`), per-replica sharding under a `tf.distribute` input
context, shuffled file order and records, interleaved reads, prefetch. The `metadata.json` beside the files
(`preprocessing.metadata.DatasetMetadata`) is checked first: every matched file must be one the job wrote, and the model, sequence length and vocab
must be the ones the caller expects, otherwise `DataMismatchError` says which and where. Dynamic masking
(`--masking dynamic` data) masks here with the same `masking.mask_tokens` the Beam job uses, seeded per
record and epoch, so a run is reproducible and each epoch sees a new mask.
"""

import os

import tensorflow as tf

from preprocessing import masking, schema
from commands.user_errors import UserError
from preprocessing.metadata import FILE_NAME as METADATA, VOCAB_FILE, DatasetMetadata, MetadataError, VocabRecord
from preprocessing.vocabulary import Vocabulary


class DataMismatchError(UserError):
    """The data on disk is not what the reader was asked to read."""


class CorruptDataError(UserError):
    """A data shard does not read (cut short, damaged); the commands exit with status 3 for it."""

    status = 3


def read_metadata(file_pattern: str) -> tuple[DatasetMetadata, list[str]]:
    """Returns the metadata beside `file_pattern` and the matched files, after checking both."""
    directory = os.path.dirname(file_pattern) or "."
    path = os.path.join(directory, METADATA)
    if not tf.io.gfile.exists(path):
        raise DataMismatchError(f"no {METADATA} in {directory}: not the output of pipeline.pretraining_data, "
                                f"or the job did not finish")
    try:
        metadata = DatasetMetadata.read(directory)
    except MetadataError as e:
        raise DataMismatchError(str(e)) from None
    files = sorted(tf.io.gfile.glob(file_pattern))
    if not files:
        raise DataMismatchError(f"no files match {file_pattern!r}")
    known = set(metadata.files or ())
    strangers = [f for f in files if os.path.basename(f) not in known]
    if strangers:
        raise DataMismatchError(f"{strangers[0]} is not listed in {path} (files from another run?)")
    return metadata, files


def external_bert_metadata(max_seq_length: int, max_predictions_per_seq: int,
                           compression: str = "") -> DatasetMetadata:
    """Metadata for BERT files this project did not write (google-research's `create_pretraining_data.py`
    output has none): pass it as `make_dataset(..., metadata=...)`. Their vocabulary is not checked."""
    return DatasetMetadata(model="bert", compression=compression, vocab=VocabRecord(sha256=None),
                           config={"max_seq_length": max_seq_length,
                                   "max_predictions_per_seq": max_predictions_per_seq, "masking": "static"})


def check_expectations(metadata: DatasetMetadata, source: str, **expected) -> None:
    """`expected` keys: model, max_seq_length, max_predictions_per_seq, vocab_sha256."""
    actual = {"model": metadata.model, "vocab_sha256": metadata.vocab.sha256,
              "max_seq_length": metadata.max_seq_length, "max_predictions_per_seq": metadata.max_predictions_per_seq}
    for key, want in expected.items():
        if want is not None and actual.get(key) != want:
            raise DataMismatchError(f"{source}: {key} is {actual.get(key)!r}, expected {want!r}")


def make_dataset(file_pattern: str, global_batch_size: int, *, input_context: tf.distribute.InputContext = None,
                 shuffle: bool = True, repeat: bool = True, seed: int = 0, shuffle_buffer: int = 10_000,
                 metadata: DatasetMetadata | None = None, skip_batches: int = 0, **expected) -> tf.data.Dataset:
    """Batched `(x, y, sample_weight)` for the model the data was made for.

    Args:
      file_pattern: the TFRecord shards (a `metadata.json` must sit beside them).
      global_batch_size: divided by the replicas of `input_context`.
      input_context: from `strategy.distribute_datasets_from_function`; shards files (or records, when
        there are fewer files than input pipelines) per pipeline.
      seed: shuffling and dynamic-masking seed.
      metadata: for files without a `metadata.json` (see `external_bert_metadata`).
      skip_batches: batches of this pipeline to pass over first (a resumed training run's data position);
        they are read but not decoded, and the order after them is the one an uninterrupted read gives.
      **expected: see `check_expectations`.
    """
    if metadata is None:
        metadata, files = read_metadata(file_pattern)
    else:
        files = sorted(tf.io.gfile.glob(file_pattern))
        if not files:
            raise DataMismatchError(f"no files match {file_pattern!r}")
    check_expectations(metadata, os.path.dirname(file_pattern), **expected)
    features = metadata.schema_features()
    batch_size = input_context.get_per_replica_batch_size(global_batch_size) if input_context else global_batch_size
    pipelines, pipeline_id = ((input_context.num_input_pipelines, input_context.input_pipeline_id)
                              if input_context else (1, 0))

    ds = tf.data.Dataset.from_tensor_slices(files)
    by_file = len(files) >= pipelines
    if by_file and pipelines > 1:
        ds = ds.shard(pipelines, pipeline_id)
    if shuffle:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    compression = metadata.compression or None
    ds = ds.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
                       cycle_length=min(len(files), 8), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if not by_file:
        ds = ds.shard(pipelines, pipeline_id)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    ds = ds.enumerate().batch(batch_size, drop_remainder=True)
    if skip_batches:
        ds = ds.skip(skip_batches)
    ds = ds.map(_decoder(metadata, features, file_pattern, seed, pipeline_id),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(tf.data.AUTOTUNE)


def count_examples(metadata: DatasetMetadata, files: list[str]) -> int | None:
    """Examples in `files` by the metadata's per-file counts (None when it has none)."""
    per_file = metadata.examples_per_file
    if not per_file:
        return None
    return sum(per_file.get(os.path.basename(f), 0) for f in files)


def find_corrupt_shard(files: list[str], compression: str = "") -> tuple[str, str] | None:
    """Reads each file through; returns `(file, error)` for the first that does not read, else None. For
    naming the culprit after a `DataLossError` in an interleaved read (whose message names no file)."""
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset(path, compression_type=compression or None):
                pass
        except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
            return path, e.message.splitlines()[0]
    return None


def _dynamic_masker(metadata: DatasetMetadata, file_pattern: str, seed: int, pipeline_id: int):
    """For unmasked BERT data: parsed features + record indexes -> masked features (None otherwise)."""
    config = metadata.config
    if metadata.model != "bert" or config["masking"] != "dynamic":
        return None
    vocab = Vocabulary.from_file(os.path.join(os.path.dirname(file_pattern), metadata.vocab.file or VOCAB_FILE))
    info = masking.VocabInfo.from_vocabulary(vocab, config["whole_word_mask"])
    mask_config = masking.MaskingConfig(masked_lm_prob=config["masked_lm_prob"],
                                        max_predictions_per_seq=config["max_predictions_per_seq"],
                                        whole_word_mask=config["whole_word_mask"])

    def remask(parsed, index):
        row_seeds = index + (seed * 1_000_003 + pipeline_id) * (1 << 32)  # [B] new per record and epoch
        masked = masking.mask_tokens(parsed["input_ids"], parsed["input_mask"], row_seeds, info, mask_config)
        return {**parsed, **masked}

    return remask


def _decoder(metadata: DatasetMetadata, features, file_pattern: str, seed: int, pipeline_id: int):
    remask = _dynamic_masker(metadata, file_pattern, seed, pipeline_id)
    to_inputs = {"bert": schema.bert_model_inputs, "gpt": schema.gpt_model_inputs,
                 "bilm": schema.bilm_model_inputs}[metadata.model]

    def decode(index, serialized):
        parsed = schema.parse(serialized, features)
        if remask is not None:
            parsed = remask(parsed, index)
        return to_inputs(parsed)

    return decode
