"""The data job stopped by SIGTERM cleans up as on Ctrl-C (its local workers stopped too); a signal that lands
inside a step, on the in-process and the multi-processing runner, is one line and 128 + N; a one-document
corpus is warned about (NSP); over-long lines are reported as skipped, with their line numbers."""

import os
import signal
import subprocess
import sys

import pytest

from pipeline import dataset_metadata
from pipeline.termination import descendants
from preprocessing.metadata import DatasetMetadata
from tests.conftest import ROOT
from tests.fixtures.stopping import alive, sigterm_when_ready, wait_for
from tests.pipeline.test_pretraining_data_job import SENTENCES, run_job as _run_job


def run_job(corpus, vocab, out, *extra):
    model = [] if "--model" in extra else ["--model", "bert"]
    return _run_job(corpus, vocab, out, *model, *extra)


@pytest.mark.slow
def test_sigterm_stops_the_workers_and_leaves_no_output(bert_vocab_path, tmp_path):
    corpus = tmp_path / "big.txt"
    corpus.write_text("\n\n".join("\n".join(SENTENCES[i % 7:] + SENTENCES[:i % 7]) for i in range(4000)) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("kept")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline.pretraining_data", "--model", "bert", "--input",
                             str(corpus), "--vocab", bert_vocab_path, "--output_dir", str(out), "--num_shards", "4",
                             "--direct_num_workers", "2"], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    # the job is running once its vocab.txt is written and its local workers have started
    workers, err = sigterm_when_ready(proc, lambda: (out / "vocab.txt").exists() and descendants(proc.pid),
                                      "running workers")
    assert "stopped by signal 15; this run's output was removed" in err.strip().splitlines()[-1]
    wait_for(lambda: not any(alive(pid) for pid in workers), "workers gone", timeout=120)
    assert sorted(os.listdir(out)) == ["notes.txt"]  # no shard, no .incomplete, no vocab.txt, no metadata


# A job whose one step signals its launcher, as a scheduler's SIGTERM or a terminal's Ctrl-C (SIGINT, its
# default action restored: a test runner started in the background may ignore it) reaching it mid-step.
STOPPED_IN_A_STEP = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import apache_beam as beam
from pipeline import beam_job
from tests.fixtures.stopping import signal_launcher
launcher, signum = os.getpid(), int(sys.argv[1])
build = lambda p, _: p | beam.Create([1]) | beam.Map(signal_launcher, launcher, signum)
run = lambda: beam_job.run_pipeline(build, beam_job.RunOptions(tuple(sys.argv[2:])), [])
sys.exit(beam_job.command("job", False, run))
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum, runner", [
    (signal.SIGTERM, ["--runner", "FnApiRunner"]),
    (signal.SIGINT, ["--runner", "FnApiRunner"]),
    (signal.SIGTERM, ["--direct_running_mode", "multi_processing", "--direct_num_workers", "1"]),
    (signal.SIGINT, ["--direct_running_mode", "multi_processing", "--direct_num_workers", "1"])])
def test_a_signal_inside_a_step_is_one_line_and_128_plus_n(signum, runner):
    # Beam re-raises what a step raised as the same type with its step named in the message (`Terminated(
    # "stopped by signal 15 [while running ...]")`; a KeyboardInterrupt, which has no message, as a RuntimeError)
    proc = subprocess.run([sys.executable, "-c", STOPPED_IN_A_STEP, str(int(signum)), *runner], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 128 + signum, proc.stderr
    assert proc.stderr.strip() == f"job: stopped by signal {int(signum)}; this run's output was removed", proc.stderr


@pytest.mark.slow
def test_a_one_document_corpus_is_warned_about_for_nsp(bert_vocab_path, tmp_path, capsys):
    corpus = tmp_path / "one.txt"
    corpus.write_text("\n".join(SENTENCES * 4) + "\n")  # no blank line: one document
    assert run_job(str(corpus), bert_vocab_path, tmp_path / "out", "--max_seq_length", "32") == 0
    err = capsys.readouterr().err
    assert ("warning: the corpus is one document (no blank line between documents): every BERT pair's second "
            "segment is its real next one, so all next_sentence_labels are 0 ('is next')") in err
    assert run_job(str(corpus), bert_vocab_path, tmp_path / "gpt", "--model", "gpt", "--max_seq_length", "8") == 0
    assert "one document" not in capsys.readouterr().err  # no NSP there


@pytest.mark.slow
def test_an_over_long_line_is_reported_as_skipped_with_its_number(bert_vocab_path, tmp_path, capsys):
    alone = tmp_path / "alone.txt"
    alone.write_bytes(b"word " * (3 << 18) + b"\n")  # 3.75 MiB, the corpus's only line
    assert run_job(str(alone), bert_vocab_path, tmp_path / "a") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"error: the corpus produced no examples: 1 line(s) over the 1 MiB line limit were skipped "
                   f"({alone} line 1; put one sentence per line), and the rest is shorter than one window; "
                   f"nothing written")

    mixed = tmp_path / "mixed.txt"
    mixed.write_bytes(("\n".join(SENTENCES) + "\n\n").encode() * 3 + b"x" * (2 << 20) + b"\n\n"
                      + ("\n".join(SENTENCES) + "\n").encode())
    assert run_job(str(mixed), bert_vocab_path, tmp_path / "m", "--max_seq_length", "32") == 0
    line = 3 * (len(SENTENCES) + 1) + 1
    assert (f"warning: 1 line(s) over the 1 MiB line limit were skipped ({mixed} line {line}; put one sentence "
            f"per line)") in capsys.readouterr().err
    metadata = DatasetMetadata.read(str(tmp_path / "m"))
    assert metadata.skipped_lines == (f"{mixed}:{line}",) and metadata.counters["lines_over_max_bytes"] == 1
    assert not any(k.startswith("@") for k in metadata.counters)


def test_warnings_name_a_few_lines_and_count_the_rest():
    note = dataset_metadata.skipped_lines_note(5, ("a.txt:3", "a.txt:9"))
    assert note == "5 line(s) over the 1 MiB line limit were skipped (a.txt line 3, a.txt line 9, 3 more; " \
                   "put one sentence per line)"
