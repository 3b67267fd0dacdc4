"""`downstream.embed`, the Beam embedding job, on tiny exports of the three families: its vectors equal
`python -m downstream.features`' for the same lines and layer choices; bad lines are counted (Beam counters
and metadata.json), truncated by default (one record per line with text) and dropped only when they cannot be
embedded (or with `--bad_lines skip`); one model per worker process on the default runner and on
Dask workers with several threads; a failed run leaves nothing that looks complete; the command prints its own
lines only."""

import collections
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter

from downstream import embed, features
from pipeline import corpus_io
from downstream.embed_model import EmbeddingHandler, parse_example
from tests.conftest import ROOT
from tests.fixtures.dask_cluster import dask_cluster

TEXTS = ["the river bank flooded", "a play", "Café, café! The bank's bank", "she went to the bank",
         "the river was flooded by noon", "a bank of the river"]
LONG = " ".join(["the river bank"] * 30)  # 90 words: past the BERT / GPT fixtures' 48-piece window
CHOICES = {"bert": "embeddings,last,sum_last4,concat_last4,weighted_all,layer_1",
           "gpt": "embeddings,last,second_to_last,concat_last4",
           "bilm": "word_emb,last,sum_last4,weighted_all,elmo"}


@pytest.fixture(scope="module")
def exports(tiny_models):
    """The session's tiny models (tests/fixtures/tiny_models.py: 48-piece windows, an ASCII vocabulary)."""
    return {kind: m.export_dir for kind, m in tiny_models.items()}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """Two files of valid lines (one over the window, one blank), and their concatenation for features."""
    base = tmp_path_factory.mktemp("clean")
    (base / "a.txt").write_text("\n".join(TEXTS[:3] + ["", LONG]) + "\n")
    (base / "b.txt").write_text("\n".join(TEXTS[3:]) + "\n")
    (base / "all.txt").write_text((base / "a.txt").read_text() + (base / "b.txt").read_text())
    return str(base)


def records(output_dir: str) -> list[dict]:
    meta = json.load(open(os.path.join(output_dir, "metadata.json")))
    out = []
    for name in meta["files"]:
        out += [parse_example(r.numpy(), meta["dims"], meta["pool"])
                for r in tf.data.TFRecordDataset(os.path.join(output_dir, name))]
    return sorted(out, key=lambda r: (r["file"], r["line"]))


def run_embed(module, pattern, out, *extra, runner=("--runner", "FnApiRunner")):
    assert embed.main(["--module", module, "--input", pattern, "--output_dir", str(out), "--num_shards", "2",
                      "--batch_size", "2", *extra, *runner]) == 0
    return json.load(open(os.path.join(out, "metadata.json")))


@pytest.mark.parametrize("kind, pool", [("bert", "none"), ("gpt", "none"), ("bilm", "none"), ("bilm", "mean")])
def test_vectors_equal_the_features_command(exports, clean, tmp_path, kind, pool):
    choices = CHOICES[kind]
    npz = str(tmp_path / "features.npz")
    if pool == "mean":  # through the Python API: the jobs the commands build from their flags
        meta = _embed_and_features_from_python(exports[kind], clean, tmp_path, choices, npz)
    else:
        meta = run_embed(exports[kind], os.path.join(clean, "[ab].txt"), tmp_path / "embed", "--layers", choices,
                         "--pool", pool)  # the default --bad_lines truncate
        assert features.main(["--module", exports[kind], "--input", os.path.join(clean, "all.txt"), "--output",
                              npz, "--layers", choices, "--pool", pool]) == 0
    want = np.load(npz)
    got = records(str(tmp_path / "embed"))
    assert [r["text"] for r in got] == list(want["sentences"]) == TEXTS[:3] + [LONG] + TEXTS[3:]
    assert [r["line"] for r in got] == [1, 2, 3, 5, 1, 2, 3]
    assert meta["examples"] == 7 and meta["counters"]["empty_lines"] == 1 and meta["model_loads"] == 1
    assert [r["truncated"] for r in got] == [False] * 3 + [kind != "bilm"] + [False] * 3
    splits = want["row_splits"]
    for i, r in enumerate(got):
        assert r["words"] == list(want["words"][splits[i]:splits[i + 1]])
        for c in choices.split(","):
            expected = want[c][i] if pool == "mean" else want[c][splits[i]:splits[i + 1]]
            np.testing.assert_allclose(r[c], expected, atol=1e-5, err_msg=f"{kind} {c} line {i}")
    assert meta["dims"] == {c: int(want[c].shape[-1]) for c in choices.split(",")}
    assert set(meta["module"]["sha256"]["module"]) >= {"saved_model.pb", "variables/variables.index"}


def _embed_and_features_from_python(module, clean, tmp_path, choices, npz) -> dict:
    """`embed.run` and `features.run` with mean pooling; their results are what the files say."""
    from downstream.embed_job import EmbedJob
    from downstream.embed_model import EmbedConfig
    from pipeline.beam_job import RunOptions

    config = EmbedConfig(module=module, choices=tuple(choices.split(",")), pool="mean", batch_size=2)
    result = embed.run(EmbedJob(input=os.path.join(clean, "[ab].txt"), output_dir=str(tmp_path / "embed"),
                                config=config, num_shards=2, run_options=RunOptions(("--runner", "FnApiRunner"))))
    meta = json.load(open(result.metadata))
    assert (result.examples, result.files, result.counters) == (meta["examples"], tuple(meta["files"]),
                                                                 meta["counters"]) and result.examples == 7
    made = features.run(features.FeaturesJob(module=module, input=os.path.join(clean, "all.txt"), output=npz,
                                             choices=config.choices, pool="mean"))
    assert made.summary() == json.load(open(npz + ".json")) and made.sentences == 7
    return meta


OVER_MAX = b"a " * 600  # 1,200 bytes: over the 1,000-byte cap the bad-lines test sets


@pytest.fixture(scope="module")
def bad_corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")
    lines = [b"the river bank flooded", b"", b"   ", b"a \xff play", LONG.encode(), b"a bank", OVER_MAX]
    (base / "bad.txt").write_bytes(b"\n".join(lines) + b"\n")
    return str(base / "bad.txt")


BAD_LINES_CASES = {  # flags -> (records' line numbers, counters, dropped by reason)
    (): ([1, 4, 5, 6, 7], dict(truncated=2, lines_over_window=2, dropped=2), dict(empty=2)),
    ("--bad_lines", "truncate"): ([1, 4, 5, 6, 7], dict(truncated=2, lines_over_window=2, dropped=2),
                                  dict(empty=2)),
    ("--strict_utf8",): ([1, 5, 6, 7], dict(truncated=2, lines_over_window=2, dropped=3),
                         dict(empty=2, invalid_utf8=1)),
    ("--bad_lines", "skip"): ([1, 6], dict(truncated=0, lines_over_window=1, dropped=5),
                              dict(empty=2, invalid_utf8=1, over_window=1, over_max_bytes=1)),
}


@pytest.mark.parametrize("flags", list(BAD_LINES_CASES), ids=lambda f: " ".join(f) or "default")
def test_bad_lines_are_truncated_by_default_and_drops_counted_by_reason(exports, bad_corpus, tmp_path,
                                                                        monkeypatch, flags):
    monkeypatch.setattr(corpus_io, "MAX_LINE_BYTES", 1000)
    job = embed.job_from_args(*embed.parse_args(["--module", exports["bert"], "--input", bad_corpus,
                                                 "--output_dir", str(tmp_path / "out"), "--num_shards", "1", *flags,
                                                 "--runner", "FnApiRunner"]))
    files, metadata = embed.prepare(job)
    result = embed.execute(job, files, metadata)
    meta = json.load(open(tmp_path / "out" / "metadata.json"))
    lines, counters, dropped = BAD_LINES_CASES[flags]
    assert meta["counters"] == {"lines": 7, "empty_lines": 2, "lines_with_invalid_utf8": 1,
                                "lines_over_max_bytes": 1, **counters, "examples": len(lines)}
    assert meta["dropped"] == {"empty": 0, "invalid_utf8": 0, "over_max_bytes": 0, "over_window": 0, **dropped}
    assert meta["counters"]["lines"] == meta["examples"] + meta["counters"]["dropped"]
    beam_counts = collections.Counter()  # summed over the steps that count (ReadLines, Embed)
    for c in result.metrics().query(MetricsFilter().with_namespace("embed"))["counters"]:
        beam_counts[c.key.metric.name] += c.committed
    assert beam_counts["lines_with_invalid_utf8"] == 1 and beam_counts["lines_over_window"] == counters[
        "lines_over_window"]
    assert beam_counts["empty_lines"] == 2 and beam_counts["lines"] == 7
    assert beam_counts["truncated"] == counters["truncated"]
    assert sum(beam_counts[f"dropped_{reason}"] for reason in dropped) == counters["dropped"]
    got = {r["line"]: r for r in records(str(tmp_path / "out"))}
    assert list(got) == lines
    assert [got[n]["truncated"] for n in lines] == [n in (5, 7) for n in lines]
    if 4 in got:
        assert got[4]["text"] == "a \ufffd play"
    if 7 in got:  # over 1,000 bytes: its first 1,000 bytes, then words past the window dropped
        assert got[7]["text"] == OVER_MAX[:1000].decode().strip() and 0 < len(got[7]["words"]) < 500
        assert got[5]["last"].shape == (len(got[5]["words"]), got[1]["last"].shape[1])


def test_a_line_cut_inside_a_character_loses_only_that_character():
    cut = "ééé".encode()[:5]  # the third é cut after its first byte
    assert embed.decode_line(cut, cut=True) == ("éé", False)
    assert embed.decode_line(cut, cut=False) == ("éé\ufffd", True)
    assert embed.decode_line(b"a \xff b\xc3", cut=True) == ("a \ufffd b\ufffd", True)


def test_the_job_prints_progress_lines(exports, clean, tmp_path, capsys):
    meta = run_embed(exports["gpt"], os.path.join(clean, "[ab].txt"), tmp_path / "out", "--layers", "last",
                     "--progress_seconds", "0.1")
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("embed: read ")]
    assert lines and all(" lines | embedded " in line for line in lines), lines
    assert meta["examples"] == 7


def test_the_command_prints_its_own_lines_only(exports, clean, tmp_path):
    """The start line and the summary: not Beam's `WARNING:root:Resource module is not available for current
    platform`, twice per model load, that RunInference logs where torch or scipy is missing (issue 46)."""
    proc = subprocess.run([sys.executable, "-m", "downstream.embed", "--module", exports["gpt"], "--input",
                           os.path.join(clean, "b.txt"), "--output_dir", str(tmp_path / "out"), "--layers", "last",
                           "--progress_seconds", "0"], cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith(f"embed: gpt {exports['gpt']}, 1 file(s) -> ") and lines[1].startswith("embed: done")


def test_the_command_and_its_workers_print_no_tensorflow_lines(exports, clean, tmp_path):
    """Issue 57: TensorFlow's error line `oneDNN supports DT_INT64 only on platforms with AVX-512. Falling back
    ...`, printed once by each process that loads a module where oneDNN is on (by default on CPUs with AVX-512
    only), reached stderr from the command's process and from each worker. TF_ENABLE_ONEDNN_OPTS=1 turns
    oneDNN on whatever the CPU; no TF_CPP_MIN_LOG_LEVEL, as in a user's shell; two worker processes."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    proc = subprocess.run([sys.executable, "-m", "downstream.embed", "--module", exports["gpt"], "--input",
                           os.path.join(clean, "[ab].txt"), "--output_dir", str(tmp_path / "out"), "--layers", "last",
                           "--progress_seconds", "0", "--direct_num_workers", "2"], cwd=ROOT,
                          env=dict(env, PYTHONPATH=ROOT, TF_ENABLE_ONEDNN_OPTS="1"), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 and lines[1].startswith("embed: done"), proc.stderr
    assert json.load(open(tmp_path / "out" / "metadata.json"))["worker_processes"] == 2


def test_default_runner_loads_one_model_per_worker_process(exports, clean, tmp_path):
    """The multi-processing DirectRunner, one worker per core: the default for an input over
    `beam_options.SMALL_INPUT_BYTES` (this small one would run in-process without `--direct_num_workers`)."""
    meta = run_embed(exports["gpt"], os.path.join(clean, "[ab].txt"), tmp_path / "out", "--layers", "last",
                     runner=("--direct_num_workers", "0"))
    # the defaults: one record per line with text, LONG truncated (GPT's window); only the blank line dropped
    assert meta["examples"] == 7 and meta["counters"]["truncated"] == 1 and meta["dropped"]["empty"] == 1
    assert 1 <= meta["model_loads"] == meta["worker_processes"] <= os.cpu_count()
    names = sorted(os.listdir(tmp_path / "out"))
    assert names == ["embeddings-00000-of-00002.tfrecord", "embeddings-00001-of-00002.tfrecord", "metadata.json"]
    assert sum(meta["examples_per_file"].values()) == len(records(str(tmp_path / "out"))) == 7


def test_dask_workers_with_threads_share_one_model(exports, tmp_path):
    """Three bundles at once in one worker process (as Dataflow runs DoFn threads): one model."""
    for f in range(4):  # the Dask runner's parallelism is over files
        (tmp_path / f"part{f}.txt").write_text("\n".join(TEXTS[f:] + TEXTS[:f]) + "\n")
    pattern = str(tmp_path / "part*.txt")
    reference = run_embed(exports["bert"], pattern, tmp_path / "ref", "--layers", "last,embeddings")
    with dask_cluster(workers=1, threads=3) as dask:
        meta = run_embed(exports["bert"], pattern, tmp_path / "dask", "--layers", "last,embeddings", runner=dask)
    assert meta["model_loads"] == 1 and meta["worker_processes"] == 1
    assert meta["counters"] == reference["counters"] and meta["examples"] == 24
    for a, b in zip(records(str(tmp_path / "ref")), records(str(tmp_path / "dask")), strict=True):
        assert (a["file"], a["line"], a["words"]) == (b["file"], b["line"], b["words"])
        np.testing.assert_allclose(a["last"], b["last"], atol=1e-6)


def test_a_failed_run_leaves_nothing_that_looks_complete(exports, clean, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_embed(exports["bilm"], os.path.join(clean, "[ab].txt"), out, "--layers", "elmo")
    assert embed.main(["--module", exports["bilm"], "--input", os.path.join(clean, "a.txt"), "--output_dir",
                      str(out), "--runner", "FnApiRunner"]) == 2  # an earlier run: --overwrite needed

    def fail(self, batch, model, inference_args=None):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(EmbeddingHandler, "run_inference", fail)
    with pytest.raises(Exception, match="worker lost"):
        embed.main(["--module", exports["bilm"], "--input", os.path.join(clean, "[ab].txt"), "--output_dir",
                   str(out), "--layers", "elmo", "--overwrite", "--runner", "FnApiRunner"])
    visible = [n for n in os.listdir(out) if not n.startswith(".")]
    assert visible == [] and glob.glob(str(out / ".staging-*"))


def test_unknown_layer_choice_is_a_one_line_error(exports, clean, tmp_path, capsys):
    assert embed.main(["--module", exports["gpt"], "--input", os.path.join(clean, "a.txt"), "--output_dir",
                      str(tmp_path / "out"), "--layers", "elmo"]) == 2
    assert "unknown layer choice" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")
