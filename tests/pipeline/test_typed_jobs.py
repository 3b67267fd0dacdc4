"""The data jobs' Python API: a typed job and `run(job)` write what the command writes from the same flags and
return it as a typed result; a bad job is a `UserError` before anything runs; `beam_job.command` is the
commands' one error path (one line and status 2, 128 + N on signal N, any other error its traceback)."""

import os
import shutil
import signal

import pytest

from pipeline import beam_job, pretraining_data, vocab
from pipeline.beam_job import RunOptions
from pipeline.clean_report import Cleaning
from pipeline.pretraining_data import PretrainingDataJob
from pipeline.termination import Terminated
from pipeline.vocab import VocabJob
from pipeline.wordpiece_learner import LearnerConfig
from commands.user_errors import UserError
from tests.pipeline.test_data_v1 import FIXTURE, fixture_bytes


@pytest.mark.slow
def test_the_python_api_writes_what_the_command_wrote(tmp_path, monkeypatch):
    """The fixture's vocabulary and GPT data (tests/fixtures/data_v1/README.md), from typed jobs."""
    shutil.copy(os.path.join(FIXTURE, "corpus.txt"), tmp_path / "corpus.txt")
    monkeypatch.chdir(tmp_path)
    learned = vocab.run(VocabJob(input="corpus.txt", output="vocab.txt", learner=LearnerConfig(vocab_size=200)))
    assert (learned.vocab, learned.metadata, learned.size, learned.words, learned.distinct_words) == (
        "vocab.txt", "vocab.txt.json", 200, 355, 162)
    assert learned.counters == {"lines": 39, "lines_over_max_bytes": 0, "lines_with_invalid_utf8": 0}
    data = pretraining_data.run(PretrainingDataJob(model="gpt", input="corpus.txt", vocab=learned.vocab,
                                                   output_dir="gpt", max_seq_length=16))
    assert data.metadata.files == ("gpt-00000-of-00001.tfrecord",) and data.warnings == ()
    for path in ("vocab.txt", "vocab.txt.json", "gpt/metadata.json", "gpt/gpt-00000-of-00001.tfrecord"):
        assert (tmp_path / path).read_bytes() == fixture_bytes(path), path


def test_a_bad_job_is_a_user_error_before_anything_runs(tmp_path):
    with pytest.raises(UserError, match="unknown 'fuzzy'"):
        Cleaning(dedup="fuzzy")
    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence.\n")
    job = VocabJob(input=str(corpus), output=str(tmp_path / "v.txt"), learner=LearnerConfig(vocab_size=5))
    with pytest.raises(UserError, match=r"--vocab_size 5 is out of range; allowed: \[6, "):
        vocab.run(job)
    with pytest.raises(UserError, match="unknown option --no_such_option"):
        vocab.run(VocabJob(input=str(corpus), output=str(tmp_path / "v.txt"),
                           run_options=RunOptions(beam_args=("--no_such_option=1",))))
    data = dict(input=str(corpus), vocab=os.path.join(FIXTURE, "vocab.txt"), output_dir=str(tmp_path / "out"))
    for fields, said in ((dict(model="xl"), "--model 'xl': choose from bert, gpt, bilm"),
                         (dict(model="bert", masking="sometimes"), "--masking 'sometimes'"),
                         (dict(model="bert", max_seq_length=4), "--max_seq_length 4 is out of range"),
                         (dict(model="gpt", lower_case=False), "--cased with an uncased vocabulary")):
        with pytest.raises(UserError, match=said):
            pretraining_data.run(PretrainingDataJob(**data, **fields))
    assert sorted(os.listdir(tmp_path)) == ["c.txt"]


def test_command_is_the_one_error_path(capsys):
    def fails(error):
        def call():
            raise error
        return call

    assert beam_job.command("job", False, lambda: None) == 0
    assert beam_job.command("job", False, fails(UserError("a bad flag"))) == 2
    assert capsys.readouterr().err == "error: a bad flag\n"
    assert beam_job.command("job", False, fails(Terminated(signal.SIGTERM)), removed="nothing kept") == 143
    assert capsys.readouterr().err == "job: stopped by signal 15; nothing kept\n"
    with pytest.raises(RuntimeError, match="a bug"):
        beam_job.command("job", False, fails(RuntimeError("a bug")))
