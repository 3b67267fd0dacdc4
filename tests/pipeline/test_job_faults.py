"""The data jobs' faults of issue 38: `pipeline.clean --overwrite` replaces exactly the earlier run (serious case
3), and the cleaning, option and signal cases: each refused in one line naming the flag or file (exit 2, no
traceback) or counted in the summary; SIGTERM stops the clean and vocab jobs' local workers before anything
else (no orphan, nothing renamed into place after the signal); a full disk stops the vocab job with its one
error line and nothing else on stderr (issue 46). One clean run checks several things at once."""

import json
import os
import random
import resource
import signal
import subprocess
import sys
import time

import pytest

from pipeline import clean, pretraining_data, vocab as vocab_job
from pipeline.termination import descendants
from tests.conftest import ROOT
from tests.pipeline.test_pretraining_data_job import SENTENCES

FN_API = ["--runner", "FnApiRunner"]
ENV = dict(os.environ, PYTHONPATH=ROOT)


def documents(n: int, offset: int = 0) -> str:
    """`n` distinct documents of three sentences each, blank lines between them."""
    return "\n\n".join(f"Document {offset + i} begins here.\n" + "\n".join(SENTENCES[i % 9:i % 9 + 2])
                       for i in range(n)) + "\n"


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err and "usage:" not in err, err
    return lines[0]


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    # a.txt: ordinary documents, two distinct documents of symbols only, and a document that is one 1.9 MB line
    (folder / "a.txt").write_text(documents(4) + "\n\u2605 \u2605 \u2605\n\n\u2014 \u2026 \u2014 !!\n\n"
                                  + "x" * (19 << 17) + "\n\n" + documents(1, 10))
    (folder / "b.txt").write_text(documents(3, 20))
    return folder


def test_clean_overwrite_replaces_exactly_the_earlier_run_and_counts_every_removal(corpus, tmp_path, capsys):
    out = tmp_path / "cleaned"
    assert clean.main(["--input", str(corpus / "*.txt"), "--output_dir", str(out), "--dedup", "exact", *FN_API]) == 0
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    # 12 documents read: 4 + 2 symbol-only + 1 over-long + 1 in a.txt, 3 in b.txt; only the over-long one goes
    assert summary == ("clean: cleaning kept 10 of 11 documents (90.9%); removed: over the 1 MiB line limit 1, "
                       "lines over 1 MiB 1"), summary
    cleaned_a = (out / "00000-a.txt").read_text()
    assert "\u2605 \u2605 \u2605" in cleaned_a and "\u2014 \u2026 \u2014 !!" in cleaned_a  # not "exact duplicates"
    (out / "notes.txt").write_text("mine")

    other = tmp_path / "other"
    other.mkdir()
    (other / "c.txt").write_text(documents(2, 40))
    assert clean.main(["--input", str(other / "c.txt"), "--output_dir", str(out), *FN_API]) == 2
    assert "already holds a run of pipeline.clean (clean_report.json" in one_error_line(capsys)
    assert clean.main(["--input", str(other / "c.txt"), "--output_dir", str(out), "--overwrite", *FN_API]) == 0
    # before: 00000-a.txt and 00001-b.txt of the first run stayed beside 00000-c.txt
    assert sorted(os.listdir(out)) == ["00000-c.txt", "clean_report.json", "clean_report.md", "notes.txt"]
    assert json.loads((out / "clean_report.json").read_text())["files"] == ["00000-c.txt"]


def test_cleaning_flags_and_folders_are_checked_before_any_work(corpus, tmp_path, capsys):
    a = str(corpus / "a.txt")
    cases = [
        (["--input", a, "--output_dir", str(corpus), "--overwrite"], f"--output_dir {corpus} is the folder of the "
                                                                      f"input file {a}"),
        (["--input", str(corpus / "**"), "--output_dir", str(corpus / "sub")], "the job would write where it reads"),
        (["--input", a, "--output_dir", str(tmp_path / "o"), "--decontaminate", str(corpus / "*.txt")],
         f"--decontaminate {corpus / '*.txt'} matches the --input file {a}"),
        (["--input", a, "--output_dir", str(tmp_path / "o"), "--decontaminate", str(corpus)],
         f"--decontaminate {corpus} is a folder"),
        (["--input", a, "--output_dir", str(tmp_path / "o"), "--filters", "max_non_letter_share=nan"],
         "max_non_letter_share=nan is out of range; allowed: [0, 1]"),
        (["--input", a, "--output_dir", str(tmp_path / "o"), "--filters", "max_non_letter_share=-1"],
         "max_non_letter_share=-1.0 is out of range"),
        (["--input", a, "--output_dir", str(tmp_path / "o"), "--filters", "min_words_per_line=-3"],
         "min_words_per_line=-3 is out of range; allowed: [0, inf)"),
        (["--input", a, "--output_dir", str(tmp_path / "o"), "--direct_running_mode", "multi_threadingg"],
         "argument --direct_running_mode: invalid choice: 'multi_threadingg'"),
    ]
    for argv, said in cases:
        assert clean.main(argv) == 2, argv
        line = one_error_line(capsys)
        assert said in line, (argv, line)
    export = tmp_path / "export"
    (export / "hub").mkdir(parents=True)
    (export / "export.json").write_text("{}")
    assert clean.main(["--input", a, "--output_dir", str(export), "--overwrite", *FN_API]) == 2
    assert f"--output_dir {export} holds an export of serving.export" in one_error_line(capsys)
    assert sorted(os.listdir(export)) == ["export.json", "hub"] and not (tmp_path / "o").exists()

    out = tmp_path / "vocab" / "vocab.txt"
    assert vocab_job.main(["--input", a, "--output", str(out), "--vocab_size", "60", "--decontaminate", a,
                           *FN_API]) == 2
    assert "matches the --input file" in one_error_line(capsys)
    assert not out.parent.exists() or os.listdir(out.parent) == []  # no .cleaning.json / .md left behind
    assert vocab_job.main(["--input", str(corpus / "*"), "--output", str(corpus / "vocab.txt"), *FN_API]) == 2
    said = f"--output {corpus / 'vocab.txt'} matches --input {corpus / '*'}: the job would write where it reads"
    assert said in one_error_line(capsys)  # the job object refuses it when built (commands.job_fields)


def test_pretraining_data_keeps_the_same_contract(corpus, bert_vocab_path, tmp_path, capsys):
    cleaned = tmp_path / "cleaned"
    cleaned.mkdir()
    (cleaned / "clean_report.json").write_text(json.dumps({"counters": {}, "files": []}))
    base = ["--model", "gpt", "--vocab", bert_vocab_path, *FN_API]
    for argv, said in ((["--input", str(corpus / "a.txt"), "--output_dir", str(cleaned), "--overwrite"],
                        f"--output_dir {cleaned} holds a run of pipeline.clean (clean_report.json), not a "
                        f"pipeline.pretraining_data run"),
                       (["--input", str(corpus / "*.txt"), "--output_dir", str(corpus), "--overwrite"],
                        f"--output_dir {corpus} is the folder of the input file {corpus / 'a.txt'}")):
        assert pretraining_data.main([*base, *argv]) == 2
        assert said in one_error_line(capsys)
    assert os.listdir(cleaned) == ["clean_report.json"] and sorted(os.listdir(corpus)) == ["a.txt", "b.txt"]


@pytest.mark.parametrize("seconds", ["-5", "nan", "inf", "0.001"])
def test_progress_seconds_out_of_range_is_refused(corpus, bert_vocab_path, tmp_path, capsys, seconds):
    argv = ["--model", "gpt", "--input", str(corpus / "b.txt"), "--vocab", bert_vocab_path, "--output_dir",
            str(tmp_path / "out"), "--progress_seconds", seconds, *FN_API]
    assert pretraining_data.main(argv) == 2
    assert f"--progress_seconds {seconds} is out of range; allowed: 0 (no progress lines) or [0.1, 86400]" in \
        one_error_line(capsys)


@pytest.mark.slow
def test_a_full_disk_in_the_vocab_job_is_one_line_and_leaves_nothing(tmp_path):
    """The "full disk" is a file-size limit (RLIMIT_FSIZE) on the command: every write past 4 KiB fails, as on a
    disk that is full, the temporary files of the process included (TensorFlow's start-up lines, a few hundred
    bytes held by `commands.tf_startup`, fit). Its stderr is the job's first line and the one error line: no
    AutoGraph warnings (its conversion of the word splitter would write a temporary file)."""
    words = sorted({"".join(random.Random(n).choices("abcdefghijklmnopqrstuvwxyz", k=7)) for n in range(3000)})
    corpus = tmp_path / "words.txt"
    corpus.write_text("\n".join(" ".join(words[i:i + 10]) + "." for i in range(0, len(words), 10)) + "\n")
    out = tmp_path / "v" / "vocab.txt"

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # the vocabulary (over 1,000 tokens) does not fit
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    proc = subprocess.run([sys.executable, "-m", "pipeline.vocab", "--input", str(corpus), "--output", str(out),
                           "--vocab_size", "1500", "--min_frequency", "1", "--runner", "FnApiRunner"],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600, preexec_fn=limited)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    first, error = lines
    assert first == f"vocab: 1 input file(s) match {str(corpus)!r}"
    assert error.startswith(f"error: cannot write {out}: ") and error.endswith("no vocabulary was written")
    assert not out.parent.exists() or os.listdir(out.parent) == []


def _wait_for(condition, what: str, proc, timeout: float = 300.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the job ended (status {proc.returncode}) before {what}: {proc.stderr.read()}"
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.1)


def _alive(pids) -> set:
    alive = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] != b"Z":
                    alive.add(pid)
        except OSError:
            pass
    return alive


@pytest.mark.slow
def test_sigterm_stops_the_clean_and_vocab_workers_first(tmp_path):
    """Both jobs at once on two local worker processes each; each gets SIGTERM once its workers run."""
    big = tmp_path / "big.txt"
    big.write_text(documents(6000) * 3)  # over 4 MB: the default runner would start workers too
    clean_out, vocab_out = tmp_path / "cleaned", tmp_path / "v" / "vocab.txt"
    workers = ["--direct_num_workers", "2", "--direct_running_mode", "multi_processing"]
    jobs = {"clean": ["pipeline.clean", "--input", str(big), "--output_dir", str(clean_out), "--dedup", "all"],
            "vocab": ["pipeline.vocab", "--input", str(big), "--output", str(vocab_out), "--vocab_size", "500",
                      "--dedup", "exact", "--progress_seconds", "0"]}
    procs = {name: subprocess.Popen([sys.executable, "-m", *argv, *workers], cwd=ROOT, env=ENV, text=True,
                                    stderr=subprocess.PIPE) for name, argv in jobs.items()}
    try:
        seen = {}
        for name, proc in procs.items():
            # running: two worker processes (each a child with its own children) have started
            _wait_for(lambda: len(descendants(proc.pid)) >= 2, f"{name}'s workers", proc)
            time.sleep(2)
            seen[name] = descendants(proc.pid)
            proc.send_signal(signal.SIGTERM)
        errors = {name: proc.communicate(timeout=300)[1] for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    for name, proc in procs.items():
        assert proc.returncode == 128 + signal.SIGTERM, errors[name]
        assert errors[name].strip().splitlines()[-1].startswith(f"{name}: stopped by signal 15"), errors[name]
        assert "Traceback" not in errors[name], errors[name]
        assert not _alive(seen[name]), f"{name}'s workers outlived the launcher"
    time.sleep(3)  # nothing renamed into place after the signal
    assert not clean_out.exists() or os.listdir(clean_out) == []
    assert not vocab_out.parent.exists() or os.listdir(vocab_out.parent) == []
