"""The pretraining-data Beam job end to end on tiny corpora (in-process runner), and its readers."""

import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from pipeline import pretraining_data
from preprocessing import readers
from preprocessing.metadata import DatasetMetadata
from preprocessing.vocabulary import Vocabulary

SENTENCES = ["The cat sat on the mat.", "It was a sunny day in the park.", "Birds sang loudly overhead!",
             "Then the rain came down hard.", "Everyone ran for cover under the trees.",
             "The river bank was flooded by noon.", "She went to the bank to deposit money.",
             "Interest rates rose again this year.", "Unaffable clerks counted the coins slowly."]


def write_corpus(path, documents=12, extra=b""):
    rng = np.random.default_rng(0)
    docs = []
    for d in range(documents):
        n = 1 + d % 5  # includes one-sentence documents
        docs.append("\n".join(SENTENCES[(d + k * 3) % len(SENTENCES)] for k in range(rng.integers(1, 6) if n > 1 else 1)))
    path.write_bytes("\n\n\n".join(docs).encode() + b"\n\n" + extra)
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, bert_vocab_path):
    base = tmp_path_factory.mktemp("corpus")
    bad = b"A line with \xff bad bytes.\nAnd a long one " + b"word " * 3000 + b"\n\n"
    return write_corpus(base / "corpus.txt", extra=bad)


def run_job(corpus, vocab, out, *extra):
    return pretraining_data.main(["--input", corpus, "--vocab", vocab, "--output_dir", str(out),
                                  "--runner", "FnApiRunner", *extra])


@pytest.fixture(scope="module")
def bert_dir(corpus, bert_vocab_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("bert")
    assert run_job(corpus, bert_vocab_path, out, "--model", "bert", "--max_seq_length", "32",
                   "--max_predictions_per_seq", "5", "--dupe_factor", "3", "--num_shards", "3",
                   "--docs_per_bucket", "4") == 0
    return out


def read_all(pattern, batch_size=1, **kwargs):
    ds = readers.make_dataset(pattern, batch_size, shuffle=False, repeat=False, **kwargs)
    return list(ds.as_numpy_iterator())


@pytest.mark.slow
def test_bert_output_metadata_and_reader_round_trip(bert_dir, bert_vocab_path):
    meta = json.loads((bert_dir / "metadata.json").read_text())
    assert meta["model"] == "bert" and meta["files"] == [f"bert-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert meta["examples"] == sum(meta["examples_per_file"].values()) > 20
    assert meta["config"]["dupe_factor"] == 3 and meta["vocab"]["special_ids"]["[MASK]"] == 103
    batches = read_all(str(bert_dir / "bert-*.tfrecord"), batch_size=4, max_seq_length=32)
    assert len(batches) == meta["examples"] // 4  # drop_remainder
    x, y, w = batches[0]
    assert x["input_word_ids"].shape == (4, 32) and x["masked_lm_positions"].shape == (4, 5)
    ids, mask = x["input_word_ids"], x["input_mask"]
    assert (ids[:, 0] == 101).all() and ((ids == 102).sum(axis=1) == 2).all()
    assert ((ids != 0) == (mask == 1)).all()
    positions, weights = x["masked_lm_positions"], w["mlm"]
    real = weights > 0
    assert (np.take_along_axis(ids, positions, 1)[real] != 101).all()
    assert set(np.unique(y["nsp"])) <= {0, 1}


def test_the_written_metadata_is_exactly_a_dataset_metadata(bert_dir):
    """Every key the job writes is a field of `DatasetMetadata` (to_json gives the file back unchanged),
    and readers see the same record."""
    written = json.loads((bert_dir / "metadata.json").read_text())
    meta = DatasetMetadata.read(str(bert_dir))
    assert meta.to_json() == written
    # counters too: the job finished; `skipped_lines` is written only when a line was skipped (none here)
    assert set(written) == {f.name for f in dataclasses.fields(DatasetMetadata)} - {"skipped_lines"}
    assert meta.vocab.sha256 == Vocabulary.from_file(str(bert_dir / meta.vocab.file)).sha256
    assert readers.read_metadata(str(bert_dir / "bert-*.tfrecord"))[0] == meta


@pytest.mark.slow
def test_rerun_is_byte_identical_on_another_runner_with_two_workers(corpus, bert_vocab_path, bert_dir, tmp_path):
    out = tmp_path / "again"
    args = ["--input", corpus, "--vocab", bert_vocab_path, "--output_dir", str(out), "--model", "bert",
            "--max_seq_length", "32", "--max_predictions_per_seq", "5", "--dupe_factor", "3",
            "--num_shards", "3", "--docs_per_bucket", "4",
            "--runner", "DirectRunner", "--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]
    assert pretraining_data.main(args) == 0
    for i in range(3):
        name = f"bert-0000{i}-of-00003.tfrecord"
        assert (out / name).read_bytes() == (bert_dir / name).read_bytes(), name


@pytest.mark.slow
def test_other_seed_changes_the_data(corpus, bert_vocab_path, bert_dir, tmp_path):
    assert run_job(corpus, bert_vocab_path, tmp_path, "--model", "bert", "--max_seq_length", "32",
                   "--max_predictions_per_seq", "5", "--dupe_factor", "3", "--num_shards", "3",
                   "--docs_per_bucket", "4", "--seed", "7") == 0
    assert (tmp_path / "bert-00000-of-00003.tfrecord").read_bytes() != (bert_dir / "bert-00000-of-00003.tfrecord").read_bytes()


@pytest.mark.slow
def test_gpt_and_bilm_windows(corpus, bert_vocab_path, tmp_path, capsys):
    assert run_job(corpus, bert_vocab_path, tmp_path / "gpt", "--model", "gpt", "--max_seq_length", "16",
                   "--gzip") == 0
    (x, y, w), = read_all(str(tmp_path / "gpt" / "gpt-*.tfrecord.gz"), model="gpt")[:1]
    assert x["input_word_ids"].shape == (1, 16) and (x["input_word_ids"][0, 1:] == y[0, :-1]).all()
    assert run_job(corpus, bert_vocab_path, tmp_path / "bilm", "--model", "bilm", "--max_seq_length", "6") == 0
    batches = read_all(str(tmp_path / "bilm" / "bilm-*.tfrecord"), model="bilm")
    x, y, w = batches[0]
    assert x["char_ids"].shape == (1, 6, 50) and y["forward"].shape == (1, 6)
    tokens = np.concatenate([b[0]["tokens"][0] for b in batches]).tolist()
    assert b"<S>" in tokens and b"</S>" in tokens and b"bank" in tokens
    err = capsys.readouterr().err
    assert "lines_with_invalid_utf8" in err and "empty_documents" in err


@pytest.mark.slow
def test_dynamic_masking_is_seeded_and_changes_each_epoch(corpus, bert_vocab_path, tmp_path):
    out = tmp_path / "dyn"
    assert run_job(corpus, bert_vocab_path, out, "--model", "bert", "--max_seq_length", "32",
                   "--max_predictions_per_seq", "5", "--dupe_factor", "1", "--masking", "dynamic") == 0
    meta = json.loads((out / "metadata.json").read_text())
    assert "masked_lm_ids" not in meta["features"]
    n = meta["examples"]

    def epochs(seed):
        ds = readers.make_dataset(str(out / "bert-*.tfrecord"), 1, shuffle=False, repeat=True, seed=seed)
        return [b[0]["masked_lm_positions"][0].tolist() for b in ds.take(2 * n).as_numpy_iterator()]

    first = epochs(1)
    assert first == epochs(1)
    assert first[:n] != first[n:]  # a new mask in the second epoch
    assert first != epochs(2)


def test_input_context_shards_are_disjoint(bert_dir):
    pattern = str(bert_dir / "bert-*.tfrecord")
    everything = sorted(b[0]["input_word_ids"][0].tobytes() for b in read_all(pattern))
    parts = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=2)
        ds = readers.make_dataset(pattern, 2, input_context=context, shuffle=False, repeat=False)
        parts.append([x["input_word_ids"][0].tobytes() for x, _, _ in ds.as_numpy_iterator()])
        assert all(x["input_word_ids"].shape == (1, 32) for x, _, _ in ds.take(1).as_numpy_iterator())
    assert not set(parts[0]) & set(parts[1])
    assert sorted(parts[0] + parts[1]) == everything


def test_reader_refuses_mismatches(bert_dir, tmp_path):
    pattern = str(bert_dir / "bert-*.tfrecord")
    with pytest.raises(readers.DataMismatchError, match="max_seq_length is 32, expected 128"):
        readers.make_dataset(pattern, 2, max_seq_length=128)
    with pytest.raises(readers.DataMismatchError, match="vocab_sha256"):
        readers.make_dataset(pattern, 2, vocab_sha256="0" * 64)
    with pytest.raises(readers.DataMismatchError, match="model is 'bert', expected 'gpt'"):
        readers.make_dataset(pattern, 2, model="gpt")
    with pytest.raises(readers.DataMismatchError, match="no metadata.json"):
        readers.make_dataset(str(tmp_path / "*.tfrecord"), 2)
    stray = bert_dir / "bert-99999-of-00003.tfrecord"
    stray.write_bytes(b"")
    try:
        with pytest.raises(readers.DataMismatchError, match="not listed"):
            readers.make_dataset(pattern, 2)
    finally:
        stray.unlink()


def test_reads_files_in_google_research_format(tmp_path):
    """Records built exactly as create_pretraining_data.py's write_instance_to_example_files does."""
    path = str(tmp_path / "google.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(4):
            ids = [101] + [2000 + i] * 5 + [102] + [3000] * 3 + [102] + [0] * 5
            feature = {
                "input_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
                "input_mask": tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * 11 + [0] * 5)),
                "segment_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[0] * 7 + [1] * 4 + [0] * 5)),
                "masked_lm_positions": tf.train.Feature(int64_list=tf.train.Int64List(value=[2, 8, 0])),
                "masked_lm_ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[2000 + i, 3000, 0])),
                "masked_lm_weights": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 1.0, 0.0])),
                "next_sentence_labels": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 2])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    batches = read_all(path, batch_size=2, metadata=readers.external_bert_metadata(16, 3))
    x, y, w = batches[1]
    assert x["input_word_ids"][0, 1] == 2002 and y["mlm"][0].tolist() == [2002, 3000, 0]
    assert w["mlm"][0].tolist() == [1.0, 1.0, 0.0] and y["nsp"][:, 0].tolist() == [0, 1]


def test_bad_runs_are_refused_and_leave_nothing_that_looks_complete(corpus, bert_vocab_path, bert_dir, tmp_path, capsys):
    assert run_job(corpus, bert_vocab_path, bert_dir, "--model", "bert", "--max_seq_length", "32") == 2
    assert "already holds a run" in capsys.readouterr().err
    assert run_job(corpus, bert_vocab_path, tmp_path / "x", "--model", "bert", "--cased") == 2
    assert "--cased with an uncased vocabulary" in capsys.readouterr().err
    assert run_job(str(tmp_path / "none*.txt"), bert_vocab_path, tmp_path / "y", "--model", "gpt") == 2
    assert "no input files match" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n\n")
    assert run_job(str(empty), bert_vocab_path, tmp_path / "z", "--model", "bert") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: the corpus produced no examples")
    assert not (tmp_path / "z").exists()  # no 0-byte shard, no vocab.txt: the folder it made is gone


@pytest.mark.slow
def test_overwrite_replaces_an_earlier_run(corpus, bert_vocab_path, tmp_path):
    out = tmp_path / "o"
    assert run_job(corpus, bert_vocab_path, out, "--model", "gpt", "--max_seq_length", "16", "--num_shards", "2") == 0
    assert run_job(corpus, bert_vocab_path, out, "--model", "gpt", "--max_seq_length", "16", "--overwrite") == 0
    names = sorted(os.listdir(out))
    assert names == ["gpt-00000-of-00001.tfrecord", "metadata.json", "vocab.txt"]


def test_dofns_survive_beams_pickling(bert_vocab_path, tmp_path):
    """Remote runners pickle DoFns and call setup() on the copy: nothing TF-side may be pickled."""
    from apache_beam.internal import pickler

    from pipeline.example_makers import ExampleConfig, MakeExamples, TokenizeDocuments
    from preprocessing.vocabulary import Vocabulary

    config = ExampleConfig(model="bert", vocab_tokens=Vocabulary.from_file(bert_vocab_path).tokens,
                           lower_case=True, max_seq_length=32, dupe_factor=2)
    tokenize = pickler.loads(pickler.dumps(TokenizeDocuments(config)))
    tokenize.setup()
    docs = list(tokenize.process([((0, i), SENTENCES[i:i + 3]) for i in range(4)]))
    assert [d[0] for d in docs] == [(0, i) for i in range(4)] and len(docs[0][1]) == 3
    make = pickler.loads(pickler.dumps(MakeExamples(config, str(tmp_path), False)))
    make.setup()
    summary, = make.process((0, docs), num_shards=1)
    assert summary["file"] == "bert-00000-of-00001.tfrecord" and summary["examples"] > 4
