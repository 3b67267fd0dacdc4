"""The Beam vocabulary job on the in-process runner: counting, bad input, the written files."""

import gzip
import json
import subprocess
import sys

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipeline import vocab as vocab_job
from pipeline.corpus_io import CorpusError, ReadCorpusLines, check_pattern
from pipeline.word_counts import CountWords
from preprocessing.vocabulary import SPECIAL_TOKENS, Vocabulary
from tests.conftest import ROOT


def test_count_words_uses_the_tokenizers_word_boundaries():
    with TestPipeline(runner="FnApiRunner") as p:
        counts = (p | beam.Create([["Hello, hello WORLD!", ""], ["Café 中文", "world"]])
                  | CountWords(lower_case=True))
        assert_that(counts, equal_to([("hello", 2), (",", 1), ("world", 2), ("!", 1), ("cafe", 1),
                                      ("中", 1), ("文", 1)]))


def test_reader_replaces_and_counts_invalid_utf8_and_reads_gzip(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"good line\nbad \xff line\n")
    with gzip.open(tmp_path / "b.txt.gz", "wb") as f:
        f.write(b"zipped\n")
    (tmp_path / "empty.txt").write_bytes(b"")
    p = TestPipeline(runner="FnApiRunner")
    lines = p | ReadCorpusLines(check_pattern(str(tmp_path / "*")))
    assert_that(lines, equal_to(["good line", "bad \ufffd line", "zipped"]))
    result = p.run()
    result.wait_until_finish()
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    assert counters["lines"] == 3 and counters["lines_with_invalid_utf8"] == 1


def test_missing_pattern_is_named(tmp_path):
    with pytest.raises(CorpusError, match="no input files match .*nothing-here"):
        check_pattern(str(tmp_path / "nothing-here" / "*.txt"))


def test_job_end_to_end_writes_vocab_and_metadata(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\n\nThe dog sat on the log!\nThen they sat.\n" * 20)
    out = tmp_path / "vocab.txt"
    code = vocab_job.main(["--input", str(corpus), "--output", str(out), "--vocab_size", "60",
                           "--num_unused", "3", "--runner", "FnApiRunner"])
    assert code == 0
    vocab = Vocabulary.from_file(str(out))
    assert vocab.tokens[:8] == SPECIAL_TOKENS + ("[unused0]", "[unused1]", "[unused2]")
    assert "the" in vocab.tokens and "sat" in vocab.tokens
    meta = json.loads((tmp_path / "vocab.txt.json").read_text())
    assert meta["sha256"] == vocab.sha256 and meta["words"] == 20 * 18
    assert meta["config"]["vocab_size"] == 60
    assert meta["counters"] == {"lines": 80, "lines_with_invalid_utf8": 0, "lines_over_max_bytes": 0}
    assert not list(tmp_path.glob("*.incomplete"))


@pytest.mark.slow
def test_cli_errors_leave_no_output(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pipeline.vocab", "--input", str(tmp_path / "none*.txt"),
                          "--output", str(tmp_path / "v.txt")], capture_output=True, cwd=ROOT, timeout=300)
    assert out.returncode == 2 and b"no input files match" in out.stderr
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert vocab_job.main(["--input", str(empty), "--output", str(tmp_path / "v.txt"), "--runner", "FnApiRunner"]) == 2
    assert not (tmp_path / "v.txt").exists() and not list(tmp_path.glob("*.incomplete"))
