"""Data written by the data jobs before they took typed jobs (`tests/fixtures/data_v1`, whose README holds the
commands that wrote it) still reads and is still written byte for byte: the readers check its metadata.json and
batch it for every model kind, and a model trains a few steps on it; the typed jobs that the jobs' flags parse
to rewrite its metadata.json, the vocabulary's record and the cleaning report byte for byte without running;
and each job, run again from the same flags, writes every file of the fixture byte for byte."""

import filecmp
import json
import os
import shutil

import numpy as np
import pytest

from pipeline import clean, corpus_io, dataset_metadata, pretraining_data, vocab
from preprocessing import readers
from preprocessing.metadata import FILE_NAME as METADATA, DatasetMetadata
from preprocessing.vocabulary import Vocabulary
from tests.conftest import ROOT

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "data_v1")
DATA = ["--input", "corpus.txt", "--vocab", "vocab.txt", "--output_dir"]
# The commands of the fixture's README, run in its folder: name -> (job module, flags).
COMMANDS = {
    "vocab": (vocab, ["--input", "corpus.txt", "--output", "vocab.txt", "--vocab_size", "200"]),
    "bert": (pretraining_data, ["--model", "bert", *DATA, "bert", "--max_seq_length", "32",
                                "--max_predictions_per_seq", "5", "--dupe_factor", "1"]),
    "bert_dynamic": (pretraining_data, ["--model", "bert", *DATA, "bert_dynamic", "--max_seq_length", "32",
                                        "--max_predictions_per_seq", "5", "--dupe_factor", "1", "--masking",
                                        "dynamic", "--whole_word_mask", "--gzip", "--dedup", "exact"]),
    "gpt": (pretraining_data, ["--model", "gpt", *DATA, "gpt", "--max_seq_length", "16"]),
    "bilm": (pretraining_data, ["--model", "bilm", *DATA, "bilm", "--max_seq_length", "8"]),
    "clean": (clean, ["--input", "corpus.txt", "--output_dir", "clean", "--dedup", "exact"]),
}
DATASETS = {"bert": "bert", "bert_dynamic": "bert", "gpt": "gpt", "bilm": "bilm"}  # folder -> model


def typed_job(name: str):
    module, argv = COMMANDS[name]
    return module.job_from_args(*module.parse_args(argv))


def fixture_bytes(*path) -> bytes:
    with open(os.path.join(FIXTURE, *path), "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", list(DATASETS))
def test_metadata_json_is_rewritten_byte_for_byte_from_the_typed_job(name, tmp_path, monkeypatch):
    """`planned` and `finished` (what the job writes before and after its run), given the run's outcome (shard
    summaries with the written counters) and nothing else from the file."""
    monkeypatch.chdir(FIXTURE)  # the flags name the files relative to the folder they were run in
    job = typed_job(name)
    on_disk = DatasetMetadata.read(name)
    planned = dataset_metadata.planned(job, pretraining_data.example_config(job),
                                       len(corpus_io.check_pattern(job.input)))
    summaries = [{"file": file, "examples": n, "num_shards": len(on_disk.files), "counters": {}}
                 for file, n in on_disk.examples_per_file.items()]
    summaries[0]["counters"] = on_disk.counters
    dataset_metadata.finished(summaries, planned).write(str(tmp_path))
    assert (tmp_path / METADATA).read_bytes() == fixture_bytes(name, METADATA)


def test_the_vocabulary_record_and_the_cleaning_report_keep_their_config_bytes():
    for name, path in (("vocab", "vocab.txt.json"), ("clean", "clean/clean_report.json")):
        text = fixture_bytes(path).decode()
        record = json.loads(text)
        rewritten = {**record, "config": typed_job(name).metadata_config()}  # in place: the keys keep their order
        assert json.dumps(rewritten, indent=2) + "\n" == text, name


def corpus_text() -> str:
    """The corpus as the uncased word-piece stream reads it: lower case, punctuation split off."""
    text = fixture_bytes("corpus.txt").decode().lower()
    return " ".join(text.replace(".", " .").replace(",", " ,").split())


def words_of(ids, tokens) -> str:
    return " ".join(tokens[i] for i in ids).replace(" ##", "")


@pytest.mark.parametrize("name", list(DATASETS))
def test_the_readers_check_the_metadata_and_batch_every_kind(name):
    folder, kind = os.path.join(FIXTURE, name), DATASETS[name]
    metadata = DatasetMetadata.read(folder)
    vocab_file = Vocabulary.from_file(os.path.join(FIXTURE, "vocab.txt"))
    pattern = os.path.join(folder, f"{kind}-*")
    expected = dict(model=kind, max_seq_length=metadata.max_seq_length, vocab_sha256=vocab_file.sha256)
    batches = list(readers.make_dataset(pattern, 4, shuffle=False, repeat=False, **expected))
    assert len(batches) == metadata.examples // 4 > 1
    check = {"bert": check_bert, "gpt": check_gpt, "bilm": check_bilm}[kind]
    for x, y, weights in batches:
        check(x, y, weights, vocab_file.tokens, metadata)
    for wrong in (dict(max_seq_length=metadata.max_seq_length + 1), dict(vocab_sha256="0" * 64), dict(model="xl")):
        with pytest.raises(readers.DataMismatchError, match=next(iter(wrong))):
            readers.make_dataset(pattern, 4, **{**expected, **wrong})
    if metadata.config["masking"] == "dynamic":  # the reader masks, anew for another seed
        again = next(iter(readers.make_dataset(pattern, 4, shuffle=False, repeat=False, seed=1)))
        assert not np.array_equal(again[0]["masked_lm_positions"], batches[0][0]["masked_lm_positions"])


def check_bert(x, y, weights, tokens, metadata):
    ids, positions = x["input_word_ids"].numpy(), x["masked_lm_positions"].numpy()  # [4, 32], [4, 5]
    assert ids.shape == (4, 32) and positions.shape == (4, 5)
    assert (ids[:, 0] == tokens.index("[CLS]")).all() and set(np.unique(y["nsp"])) <= {0, 1}
    real = weights["mlm"].numpy() > 0  # [4, 5]
    assert real.any(axis=1).all() and (real.sum(axis=1) <= 5).all()
    labels = y["mlm"].numpy()[real]
    assert (labels > 0).all() and (labels < len(tokens)).all()
    lengths = x["input_mask"].numpy().sum(axis=1)
    assert (positions[real] < np.repeat(lengths, real.sum(axis=1))).all()  # masked tokens are real tokens


def check_gpt(x, y, weights, tokens, metadata):
    ids, labels = x["input_word_ids"].numpy(), y.numpy()  # [4, 16] each
    assert ids.shape == (4, 16) and (labels[:, :-1] == ids[:, 1:]).all() and (weights.numpy() == 1).all()
    text = corpus_text()
    for row in np.concatenate([ids, labels[:, -1:]], axis=1):
        for piece in words_of(row, tokens).split("[SEP]"):  # documents are joined by [SEP]
            inner = piece.split()[1:-1]  # the first and last word may be cut
            assert " ".join(inner) in text, piece


def check_bilm(x, y, weights, tokens, metadata):
    words = x["tokens"].numpy()  # [4, 8]
    assert words.shape == (4, 8) and x["char_ids"].shape == (4, 8, 50)
    forward, backward = y["forward"].numpy(), y["backward"].numpy()  # [4, 8] each
    assert (forward[:, :-2] == backward[:, 2:]).all()
    ids = {token: i for i, token in enumerate(tokens)}
    ids.update({"<S>": ids["[CLS]"], "</S>": ids["[SEP]"]})  # sentence bounds
    known = set(corpus_text().split()) | {"<S>", "</S>"}
    for row_words, row_forward in zip(words, forward):
        row = [word.decode() for word in row_words]
        assert set(row) <= known, row
        assert [ids.get(word, ids["[UNK]"]) for word in row[1:]] == row_forward[:-1].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "gpt", "bilm"])
def test_a_model_trains_on_the_data(name, tmp_path):
    from models.training import train

    pattern = os.path.join(FIXTURE, name, f"{name}-*")
    model_dir = tmp_path / "model"
    assert train.main(["--model", name, "--preset", f"{name}_tiny", "--train_data", pattern, "--model_dir",
                       str(model_dir), "--set", "train_steps=2", "--set", "batch_size=4", "--set",
                       "jit_compile=false", "--set", "warmup_steps=1", "--set", "checkpoint_every=2"]) == 0
    data = json.loads((model_dir / "config.json").read_text())["data"]
    metadata = DatasetMetadata.read(os.path.join(FIXTURE, name))
    assert (data["max_seq_length"], data["vocab_size"], data["vocab_sha256"]) == (
        metadata.max_seq_length, 200, metadata.vocab.sha256)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_job_rerun_from_the_same_flags_writes_the_same_bytes(name, tmp_path, monkeypatch):
    for source in ("corpus.txt", "vocab.txt") if name != "vocab" else ("corpus.txt",):
        shutil.copy(os.path.join(FIXTURE, source), tmp_path / source)
    monkeypatch.chdir(tmp_path)
    module, argv = COMMANDS[name]
    assert module.main(argv) == 0
    written = ["vocab.txt", "vocab.txt.json"] if name == "vocab" else sorted(os.listdir(name))
    if name != "vocab":
        assert written == sorted(os.listdir(os.path.join(FIXTURE, name)))
    base = "." if name == "vocab" else name
    match, mismatch, errors = filecmp.cmpfiles(os.path.join(FIXTURE, base), base,
                                               [os.path.basename(w) for w in written], shallow=False)
    assert (mismatch, errors) == ([], []) and len(match) == len(written)
