"""Progress lines of the local Beam jobs (`pipeline.progress`): the line's text, the workers' files, and the
vocabulary and pretraining-data jobs printing progress with a short interval, their outputs byte-identical
with progress on and off; the default (multi-process) runner's workers reach the launcher's folder."""

import os
import re

import apache_beam as beam
import pytest

from pipeline import clean_report, progress, pretraining_data
from pipeline import vocab as vocab_job
from pipeline.wordpiece_learner import LearnerConfig
from pipeline.beam_options import pipeline_options
from tests.pipeline.test_pretraining_data_job import write_corpus

LINE = re.compile(r"^(vocab|pretraining_data): read [\d.]+ [KMG]?B/[\d.]+ [KMG]?B \(\d+%\) [\d,]+ (lines|documents)"
                  r" \| .* \| \d+(s|m\d\ds|h\d\dm)$")


def test_the_line_reads_like_the_trainers():
    line = progress.ProgressLine("pretraining_data", "documents", ("tokenized", "written"), 96_000_000)
    reading = {"read": {"units": 1130, "bytes": 41_200_000}, "tokenized": {"units": 768, "bytes": 0}}
    assert line.format(reading, 21.4, {"read": 1_900_000}) == (
        "pretraining_data: read 41.2 MB/96.0 MB (43%) 1,130 documents | tokenized 768 | written 0 | 1.9 MB/s"
        " | eta 28s | 21s")
    read = {"read": {"units": 2000, "bytes": 96_000_000}, "tokenized": {"units": 2000, "bytes": 0},
            "written": {"units": 500, "bytes": 0}}
    assert line.format(read, 3725, {"read": 1e6, "written": 25.0}) == (
        "pretraining_data: read 96.0 MB/96.0 MB (100%) 2,000 documents | tokenized 2,000 | written 500"
        " | written 25 documents/s | eta 1m00s | 1h02m")
    assert line.format({"written": {"units": 0, "bytes": 0}}, 5, {}).endswith("| 0 B/s | eta ? | 5s")


def test_workers_files_are_summed_per_stage(tmp_path):
    first = progress.StageProgress(str(tmp_path), "read", name="0", every_seconds=3600)
    first.update(units=3, position=100)
    assert progress.read_totals(str(tmp_path)) == {}  # nothing written before the interval or a flush
    first.flush()
    first.update(units=1, position=150)
    first.flush()  # replaces the file's figures: a retried read does not count twice
    second = progress.StageProgress(str(tmp_path), "read", name="1", every_seconds=0)
    second.update(units=2, position=50)
    progress.StageProgress(str(tmp_path), "tokenized", every_seconds=0).update(units=5)
    assert progress.read_totals(str(tmp_path)) == {"read": {"units": 6, "bytes": 200},
                                                   "tokenized": {"units": 5, "bytes": 0}}
    off = progress.StageProgress(None, "read")
    off.update(units=1, position=10)
    off.flush()  # no folder: nothing written anywhere


def test_only_local_runners_report():
    assert progress.is_local([]) and progress.is_local(["--runner", "FnApiRunner"])
    assert progress.is_local(["--runner=DirectRunner", "--direct_num_workers=2"])
    assert not progress.is_local(["--runner", "DataflowRunner", "--project", "p"])
    assert not progress.is_local(["--runner=apache_beam.runners.dask.dask_runner.DaskRunner"])
    line = progress.ProgressLine("vocab", "lines", (), 1)
    with progress.reporter(line, 15, ["--runner", "DataflowRunner"]) as off:
        assert off.folder is None
    with progress.reporter(line, 0, []) as off:
        assert off.folder is None


def progress_lines(text: str, job: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"{job}: read ")]


def test_vocab_job_prints_progress_and_writes_the_same_bytes(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\n\nThe dog sat on the log!\nThen they sat.\n" * 200)
    out, outputs = tmp_path / "vocab.txt", {}
    for seconds in ("0.2", "0"):  # the same output path: metadata records it
        assert vocab_job.main(["--input", str(corpus), "--output", str(out), "--vocab_size", "60",
                               "--runner", "FnApiRunner", "--progress_seconds", seconds]) == 0
        outputs[seconds] = ({name: (tmp_path / name).read_bytes() for name in ("vocab.txt", "vocab.txt.json")},
                            progress_lines(capsys.readouterr().err, "vocab"))
    lines = outputs["0.2"][1]
    assert lines and all(LINE.match(line) for line in lines), lines
    assert "| counted " in lines[-1]
    assert outputs["0"][1] == []  # --progress_seconds 0: no line
    assert outputs["0.2"][0] == outputs["0"][0]


@pytest.mark.slow
def test_pretraining_data_job_prints_progress_and_writes_the_same_bytes(tmp_path, capsys, bert_vocab_path):
    corpus = write_corpus(tmp_path / "corpus.txt", documents=40)
    out, runs = tmp_path / "out", {}
    for seconds in ("0.2", "0"):  # the same output dir: metadata records it
        assert pretraining_data.main(["--input", corpus, "--vocab", bert_vocab_path, "--output_dir", str(out),
                                      "--model", "bert", "--max_seq_length", "32", "--max_predictions_per_seq",
                                      "5", "--dupe_factor", "2", "--runner", "FnApiRunner", "--overwrite",
                                      "--progress_seconds", seconds]) == 0
        runs[seconds] = ({name: (out / name).read_bytes() for name in os.listdir(out)},
                         progress_lines(capsys.readouterr().err, "pretraining_data"))
    lines = runs["0.2"][1]
    assert lines and all(LINE.match(line) for line in lines), lines
    assert "| tokenized " in lines[-1] and "| written " in lines[-1]
    assert "metadata.json" in runs["0"][0] and len(runs["0"][0]) > 2
    assert runs["0.2"][0] == runs["0"][0]


@pytest.mark.slow
def test_the_default_runners_worker_processes_report_to_the_launcher(tmp_path):
    """No --runner: the multi-processing DirectRunner; its workers write into the launcher's folder."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one two three\nfour five\n" * 3000)
    size = corpus.stat().st_size
    job = vocab_job.VocabJob(input=str(corpus), output=str(tmp_path / "v.txt"), learner=LearnerConfig(vocab_size=60))
    files = [str(corpus)]
    line = progress.ProgressLine("vocab", "lines", ("counted",), progress.input_bytes([str(corpus)]))
    assert line.total_bytes == size
    with progress.reporter(line, 3600, []) as reporter:  # the thread never prints: the test asks itself
        with beam.Pipeline(options=pipeline_options(["--direct_num_workers=1"])) as p:
            vocab_job.build_pipeline(p, job, files, clean_report.plan(job.cleaning, files), reporter.folder)
        final = reporter.report()
    assert f"read {progress.size(size)}/{progress.size(size)} (100%) 6,000 lines | counted 6,000 |" in final
    assert not os.path.exists(reporter.folder)
