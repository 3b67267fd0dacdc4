"""`python -m demo` checks its flags and its corpus before any step starts (demo/job.py, demo/corpus.py): each
bad input is one `error:` line on stderr, exit status 2, nothing printed on stdout and nothing written."""

import gzip
import os
import random
import re
import subprocess
import sys

import pytest

from demo import job as demo_job
from demo import steps
from tests.conftest import ROOT


def _corpus(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / "input" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return str(path)


def _random_bytes(size: int) -> bytes:
    return random.Random(46).randbytes(size)


def _is(line: str, expected: str) -> bool:
    """`line` is `expected`, where each `*` of `expected` stands for any text."""
    return re.fullmatch(".*".join(map(re.escape, expected.split("*"))), line) is not None


# (flags, the case's input under tmp_path, the error line); {input}: the case's file, {tmp}: tmp_path
CASES = {
    "empty corpus": (["--corpus", "{input}"], b"",
                     "error: --corpus '{input}': its 1 file(s) hold no text (empty, or blank lines only): give "
                     "UTF-8 text, one sentence per line, a blank line between documents"),
    "blank lines only": (["--corpus", "{input}"], b"\n \n\t\n\n",
                         "error: --corpus '{input}': its 1 file(s) hold no text (empty, or blank lines only): give "
                         "UTF-8 text, one sentence per line, a blank line between documents"),
    "20 KB of random bytes": (["--corpus", "{input}"], _random_bytes(20480),
                              "error: --corpus file {input} is not text: *% of the first 20,480 bytes are not UTF-8 "
                              "or are control characters; give UTF-8 text, one sentence per line, a blank line "
                              "between documents"),
    "random bytes, gzipped": (["--corpus", "{input}"], gzip.compress(_random_bytes(20480)),
                              "error: --corpus file {input} is not text: *% of the first 20,480 bytes are not UTF-8 "
                              "or are control characters; *"),
    "a .gz that is not gzip": (["--corpus", "{input}"], b"plain text\n",
                               "error: --corpus file {input} cannot be read (Not a gzipped file (b'pl')): give UTF-8 "
                               "text, one sentence per line, a blank line between documents (or a .gz of it)"),
    "no file matches": (["--corpus", "{tmp}/input/none*.txt"], b"text\n",
                        "error: no files match --corpus '{tmp}/input/none*.txt': give brown, shakespeare or a pattern "
                        "of UTF-8 text, one sentence per line, a blank line between documents"),
    "--demo_steps 0": (["--demo_steps", "0"], None, "error: --demo_steps 0 is out of range; allowed: [1, inf)"),
    "--demo_steps -1": (["--demo_steps", "-1"], None, "error: --demo_steps -1 is out of range; allowed: [1, inf)"),
    "--minilm_steps 0": (["--minilm_steps", "0"], None, "error: --minilm_steps 0 is out of range; allowed: [1, inf)"),
    "--vocab_size 5": (["--vocab_size", "5"], None, "error: --vocab_size 5 is out of range; allowed: [6, 4194304]"),
    "--demo_dir a file": (["--demo_dir", "{input}"], b"a file\n",
                          "error: --demo_dir {input} is a file; give a folder (new or existing)"),
    "--senses missing": (["--senses", "{tmp}/none.jsonl"], None, "error: --senses {tmp}/none.jsonl: no such file"),
}


def _flags(tmp_path, name: str) -> tuple[list[str], str, str]:
    """The case's flags (its input written), its expected error line (a glob), and its demo_dir."""
    flags, data, error = CASES[name]
    suffix = ".txt.gz" if "gz" in name else ".txt"
    given = {"input": _corpus(tmp_path, "case" + suffix, data) if data is not None else "", "tmp": str(tmp_path)}
    flags = [f.format(**given) for f in flags]
    demo_dir = flags[flags.index("--demo_dir") + 1] if "--demo_dir" in flags else str(tmp_path / "demo")
    return ["--demo_dir", demo_dir, "--cache_dir", str(tmp_path / "cache"), *flags], error.format(**given), demo_dir


@pytest.mark.parametrize("name", CASES)
def test_a_bad_input_is_one_line_before_any_step(name, tmp_path, capsys):
    argv, error, demo_dir = _flags(tmp_path, name)
    assert steps.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no step started
    assert len(err.splitlines()) == 1 and _is(err.strip(), error), err
    assert not os.path.isdir(demo_dir) and not (tmp_path / "cache").exists()  # nothing written


@pytest.mark.slow
@pytest.mark.parametrize("name", ["empty corpus", "20 KB of random bytes", "--demo_steps -1", "--demo_dir a file"])
def test_the_command_says_it_in_one_line_with_status_2(name, tmp_path):
    """As a user runs it: `python -m demo`, through its stderr filter and exit path."""
    argv, error, _ = _flags(tmp_path, name)
    done = subprocess.run([sys.executable, "-m", "demo", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert len(done.stderr.splitlines()) == 1 and _is(done.stderr.strip(), error), done.stderr


def test_a_named_corpus_is_not_read_before_it_is_fetched(tmp_path):
    """`brown` and `shakespeare` (and "", the default) are fetched in step 1: the checks leave them alone."""
    for corpus in ("", "brown", "shakespeare"):
        job = demo_job.checked(demo_job.DemoJob(demo_dir=str(tmp_path / "demo"), corpus=corpus,
                                                cache_dir=str(tmp_path / "cache")))
        assert job.corpus == corpus and not (tmp_path / "cache").exists()


def test_text_with_a_few_stray_bytes_passes(tmp_path):
    """A Latin-1 byte or two in a UTF-8 corpus is read as U+FFFD, as the split does: not refused."""
    text = "Caf\xe9 au lait.\nA second sentence.\n\nAnother document.\n".encode("latin-1") * 20
    path = _corpus(tmp_path, "latin.txt", text)
    assert demo_job.checked(demo_job.DemoJob(demo_dir=str(tmp_path / "d"), corpus=path)).corpus == path
