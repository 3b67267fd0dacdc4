"""Bad input to the data jobs: refused before any work with the allowed range, one line on stderr (also for
errors raised inside Beam workers), exit status 2, and nothing left behind that looks like output."""

import gzip
import os
import subprocess
import sys

import pytest

from pipeline import pretraining_data, vocab as vocab_job
from pipeline.corpus_io import InputFileError
from commands.user_errors import UserError, check_range, user_message
from tests.conftest import ROOT, raised_from

CORPUS = "The cat sat on the mat.\nIt was a sunny day.\n\nBirds sang loudly overhead!\nThen the rain came.\n" * 4


@pytest.fixture()
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(CORPUS)
    return str(path)


@pytest.fixture()
def truncated_gz(tmp_path):
    data = gzip.compress(CORPUS.encode() * 200)
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[:len(data) // 2])
    return str(path)


def last_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("extra, message", [
    (["--max_predictions_per_seq", "0"], "--max_predictions_per_seq 0 is out of range; allowed: [1, 32]"),
    (["--max_predictions_per_seq", "33"], "--max_predictions_per_seq 33 is out of range; allowed: [1, 32]"),
    (["--masked_lm_prob", "1.5"], "--masked_lm_prob 1.5 is out of range; allowed: (0.0, 1.0]"),
    (["--masked_lm_prob", "nan"], "--masked_lm_prob nan is not a finite number"),
    (["--dupe_factor", "0"], "--dupe_factor 0 is out of range; allowed: [1, inf)"),
    (["--short_seq_prob", "-0.1"], "--short_seq_prob -0.1 is out of range; allowed: [0.0, 1.0]"),
    (["--max_seq_length", "4"], "--max_seq_length 4 is out of range; allowed: [5, inf)"),
    (["--num_shards", "100000"], "--num_shards 100000 is out of range; allowed: [0, 99999]"),
    (["--docs_per_bucket", "0"], "--docs_per_bucket 0 is out of range; allowed: [1, inf)"),
    (["--direct_num_workers", "-2"], "--direct_num_workers -2 is out of range"),
    (["--max_seq_lenght", "4"], "unknown option --max_seq_lenght"),
])
def test_pretraining_parameters_are_range_checked_before_any_work(corpus, bert_vocab_path, tmp_path, capsys,
                                                                   extra, message):
    out = tmp_path / "out"
    args = ["--model", "bert", "--input", corpus, "--vocab", bert_vocab_path, "--output_dir", str(out),
            "--max_seq_length", "32", "--runner", "FnApiRunner", *extra]
    assert pretraining_data.main(args) == 2
    err = capsys.readouterr().err
    assert message in last_error(err)
    assert "pretraining_data:" not in err  # refused before the job started
    assert not out.exists()


def test_pretraining_paths_are_checked(corpus, bert_vocab_path, tmp_path, capsys):
    a_file, a_folder = tmp_path / "a_file", tmp_path / "a_folder"
    a_file.write_text("x")
    a_folder.mkdir()
    base = ["--model", "gpt", "--runner", "FnApiRunner"]
    cases = [(["--input", corpus, "--vocab", bert_vocab_path, "--output_dir", str(a_file)],
              f"--output_dir {a_file} is a file"),
             (["--input", corpus, "--vocab", str(tmp_path), "--output_dir", str(tmp_path / "o")],
              f"--vocab {tmp_path} is a folder"),
             (["--input", str(a_folder), "--vocab", bert_vocab_path, "--output_dir", str(tmp_path / "o")],
              f"--input {a_folder} is a folder; give a file pattern")]
    for args, message in cases:
        assert pretraining_data.main(base + args) == 2
        assert message in last_error(capsys.readouterr().err)
    assert not (tmp_path / "o").exists()


def test_a_worker_error_is_one_line_and_the_failed_run_leaves_nothing(truncated_gz, bert_vocab_path, tmp_path,
                                                                       capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("kept")  # the user's own file survives the clean-up
    assert pretraining_data.main(["--model", "bert", "--input", truncated_gz, "--vocab", bert_vocab_path,
                                  "--output_dir", str(out), "--runner", "FnApiRunner"]) == 2
    line = last_error(capsys.readouterr().err)
    assert line == (f"error: cannot read input file {truncated_gz}: Compressed file ended before the "
                    "end-of-stream marker was reached")
    assert sorted(os.listdir(out)) == ["notes.txt"]  # no shard, no vocab.txt, no metadata.json


def test_vocab_parameters_and_paths_are_checked(corpus, tmp_path, capsys):
    out = str(tmp_path / "v" / "vocab.txt")
    cases = [(["--vocab_size", "5"], "--vocab_size 5 is out of range; allowed: [6, "),
             (["--num_unused", "10", "--vocab_size", "15"], "--vocab_size 15 is out of range; allowed: [16, "),
             (["--min_frequency", "0"], "--min_frequency 0 is out of range; allowed: [1, inf)"),
             (["--limit_alphabet", "0"], "--limit_alphabet 0 is out of range"),
             (["--reserved_tokens", "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[PAD]"],
              "--reserved_tokens repeats [PAD]"),
             (["--output", str(tmp_path)], f"--output {tmp_path} is a folder")]
    for extra, message in cases:
        args = ["--input", corpus, "--output", out, "--runner", "FnApiRunner", *extra]
        assert vocab_job.main(args) == 2
        assert message in last_error(capsys.readouterr().err)
    assert not (tmp_path / "v").exists()


def test_vocab_worker_error_leaves_no_incomplete_file(truncated_gz, tmp_path, capsys):
    out = tmp_path / "vocab.txt"
    assert vocab_job.main(["--input", truncated_gz, "--output", str(out), "--runner", "FnApiRunner"]) == 2
    assert "cannot read input file" in last_error(capsys.readouterr().err)
    assert os.listdir(tmp_path) == ["cut.txt.gz"]


@pytest.mark.slow
def test_cli_on_the_default_multiprocess_runner_prints_the_workers_message_not_its_stack(truncated_gz, tmp_path):
    """The local default runner relays worker tracebacks through logging; only the message is printed, and
    `--verbose` brings the traceback back."""
    args = [sys.executable, "-m", "pipeline.vocab", "--input", truncated_gz, "--output", str(tmp_path / "v.txt"),
            "--direct_num_workers", "1"]
    quiet = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert quiet.returncode == 2
    assert last_error(quiet.stderr) == quiet.stderr.strip().splitlines()[-1]
    assert "cannot read input file" in quiet.stderr.strip().splitlines()[-1]
    loud = subprocess.run(args + ["--verbose"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert loud.returncode == 2 and "Traceback" in loud.stderr
    assert "cannot read input file" in loud.stderr.strip().splitlines()[-1]
    assert sorted(os.listdir(tmp_path)) == ["cut.txt.gz"]


def test_user_message_finds_the_innermost_user_error_in_a_workers_text():
    text = ("Traceback (most recent call last):\n  File ...\npipeline.corpus_io.InputFileError: the file x is gone\n\n"
            "During handling ...\nRuntimeError: pipeline failed [while running 'Read/ReadLines']")
    assert user_message(RuntimeError(text)) == "the file x is gone"
    assert user_message(RuntimeError("KeyError: 'x'")) is None  # an internal bug keeps its traceback
    assert user_message(raised_from(InputFileError("inner"), RuntimeError("wrapped"))) == "inner"
    with pytest.raises(UserError, match=r"--x 1.5 is out of range; allowed: \(0, 1\)"):
        check_range("--x", 1.5, 0, 1, low_open=True, high_open=True)


def test_sentence_pairs_refuses_a_length_that_holds_no_pair():
    from preprocessing.sentence_pairs import PairConfig

    with pytest.raises(ValueError, match="max_seq_length 4 is below 5"):
        PairConfig(max_seq_length=4)
    assert PairConfig(max_seq_length=5).max_seq_length == 5
