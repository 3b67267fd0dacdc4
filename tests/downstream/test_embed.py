"""`downstream.embed`, the Beam embedding job, on tiny exports of the three families: its vectors equal
`python -m downstream.features`' for the same lines and layer choices; bad lines are counted (Beam counters
and metadata.json) and skipped or truncated; one model per worker process on the default runner and on
Dask workers with several threads; a failed run leaves nothing that looks complete."""

import collections
import contextlib
import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter

from downstream import embed, features
from downstream.embed_model import EmbeddingHandler, parse_example

TEXTS = ["the river bank flooded", "a play", "Café, café! The bank's bank", "she went to the bank",
         "the river was flooded by noon", "a bank of the river"]
LONG = " ".join(["the river bank"] * 30)  # 90 words: past the BERT / GPT fixtures' 48-piece window
CHOICES = {"bert": "embeddings,last,sum_last4,concat_last4,weighted_all,layer_1",
           "gpt": "embeddings,last,second_to_last,concat_last4",
           "bilm": "word_emb,last,sum_last4,weighted_all,elmo"}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    from tests.fixtures.features import train_and_export

    root = str(tmp_path_factory.mktemp("exports"))
    vocab_texts = [t for t in TEXTS if t.isascii()] + ["cafe s"]  # the biLM fixture's vocabulary is ASCII
    return {kind: train_and_export(root, kind, vocab_texts) for kind in ("bert", "gpt", "bilm")}


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
    assert embed.run(["--module", module, "--input", pattern, "--output_dir", str(out), "--num_shards", "2",
                      "--batch_size", "2", *extra, *runner]) == 0
    return json.load(open(os.path.join(out, "metadata.json")))


@pytest.mark.parametrize("kind, pool", [("bert", "none"), ("gpt", "none"), ("bilm", "none"), ("bilm", "mean")])
def test_vectors_equal_the_features_command(exports, clean, tmp_path, kind, pool):
    choices = CHOICES[kind]
    meta = run_embed(exports[kind], os.path.join(clean, "[ab].txt"), tmp_path / "embed", "--layers", choices,
                     "--pool", pool, "--bad_lines", "truncate")
    npz = str(tmp_path / "features.npz")
    assert features.main(["--module", exports[kind], "--input", os.path.join(clean, "all.txt"), "--output", npz,
                          "--layers", choices, "--pool", pool]) == 0
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


@pytest.fixture(scope="module")
def bad_corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")
    lines = [b"the river bank flooded", b"", b"   ", b"a \xff play", LONG.encode(), b"a bank"]
    (base / "bad.txt").write_bytes(b"\n".join(lines) + b"\n")
    return str(base / "bad.txt")


@pytest.mark.parametrize("mode", ["skip", "truncate"])
def test_bad_lines_are_counted_and_skipped_or_truncated(exports, bad_corpus, tmp_path, mode):
    args, beam_args = embed.parse_args(["--module", exports["bert"], "--input", bad_corpus, "--output_dir",
                                        str(tmp_path / "out"), "--num_shards", "1", "--bad_lines", mode,
                                        "--runner", "FnApiRunner"])
    config, files, metadata = embed.prepare(args)
    result = embed.execute(args, beam_args, config, files, metadata)
    counters = json.load(open(tmp_path / "out" / "metadata.json"))["counters"]
    kept = 4 if mode == "truncate" else 2
    assert counters == {"lines": 6, "empty_lines": 2, "lines_with_invalid_utf8": 1, "lines_over_max_bytes": 0,
                        "lines_over_window": 1, "skipped": 6 - kept, "examples": kept}
    beam_counts = collections.Counter()  # summed over the steps that count (ReadLines, Embed)
    for c in result.metrics().query(MetricsFilter().with_namespace("embed"))["counters"]:
        beam_counts[c.key.metric.name] += c.committed
    assert beam_counts["lines_with_invalid_utf8"] == 1 and beam_counts["lines_over_window"] == 1
    assert beam_counts["empty_lines"] == 2 and beam_counts["lines"] == 6
    got = records(str(tmp_path / "out"))
    assert [r["line"] for r in got] == ([1, 4, 5, 6] if mode == "truncate" else [1, 6])
    if mode == "truncate":
        assert got[1]["text"] == "a \ufffd play" and got[2]["truncated"] and 0 < len(got[2]["words"]) < 90
        assert got[2]["last"].shape == (len(got[2]["words"]), got[0]["last"].shape[1])


def test_default_runner_loads_one_model_per_worker_process(exports, clean, tmp_path):
    """No --runner: the multi-processing DirectRunner, one worker per core."""
    meta = run_embed(exports["gpt"], os.path.join(clean, "[ab].txt"), tmp_path / "out", "--layers", "last",
                     runner=())
    assert meta["examples"] == 6 and meta["counters"]["lines_over_window"] == 1  # --bad_lines skip: LONG goes
    assert 1 <= meta["model_loads"] == meta["worker_processes"] <= os.cpu_count()
    names = sorted(os.listdir(tmp_path / "out"))
    assert names == ["embeddings-00000-of-00002.tfrecord", "embeddings-00001-of-00002.tfrecord", "metadata.json"]
    assert sum(meta["examples_per_file"].values()) == len(records(str(tmp_path / "out"))) == 6


@contextlib.contextmanager
def dask_worker(threads: int):
    """One `distributed.LocalCluster` worker process with `threads` threads; yields the runner's options."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=threads, processes=True, dashboard_address=None,
                           silence_logs=40)
    try:
        yield ["--runner", "apache_beam.runners.dask.dask_runner.DaskRunner", "--dask_client_address",
               cluster.scheduler_address, "--dask_npartitions", "4"]
    finally:
        with contextlib.suppress(ValueError):  # the runner leaves its client open
            Client.current(allow_global=True).close()
        cluster.close(timeout=30)


def test_dask_workers_with_threads_share_one_model(exports, tmp_path):
    """Three bundles at once in one worker process (as Dataflow runs DoFn threads): one model."""
    for f in range(4):  # the Dask runner's parallelism is over files
        (tmp_path / f"part{f}.txt").write_text("\n".join(TEXTS[f:] + TEXTS[:f]) + "\n")
    pattern = str(tmp_path / "part*.txt")
    reference = run_embed(exports["bert"], pattern, tmp_path / "ref", "--layers", "last,embeddings")
    with dask_worker(threads=3) as dask:
        meta = run_embed(exports["bert"], pattern, tmp_path / "dask", "--layers", "last,embeddings", runner=dask)
    assert meta["model_loads"] == 1 and meta["worker_processes"] == 1
    assert meta["counters"] == reference["counters"] and meta["examples"] == 24
    for a, b in zip(records(str(tmp_path / "ref")), records(str(tmp_path / "dask")), strict=True):
        assert (a["file"], a["line"], a["words"]) == (b["file"], b["line"], b["words"])
        np.testing.assert_allclose(a["last"], b["last"], atol=1e-6)


def test_a_failed_run_leaves_nothing_that_looks_complete(exports, clean, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_embed(exports["bilm"], os.path.join(clean, "[ab].txt"), out, "--layers", "elmo")
    assert embed.run(["--module", exports["bilm"], "--input", os.path.join(clean, "a.txt"), "--output_dir",
                      str(out), "--runner", "FnApiRunner"]) == 2  # an earlier run: --overwrite needed

    def fail(self, batch, model, inference_args=None):
        raise RuntimeError("worker lost")

    monkeypatch.setattr(EmbeddingHandler, "run_inference", fail)
    with pytest.raises(Exception, match="worker lost"):
        embed.run(["--module", exports["bilm"], "--input", os.path.join(clean, "[ab].txt"), "--output_dir",
                   str(out), "--layers", "elmo", "--overwrite", "--runner", "FnApiRunner"])
    visible = [n for n in os.listdir(out) if not n.startswith(".")]
    assert visible == [] and glob.glob(str(out / ".staging-*"))


def test_unknown_layer_choice_is_a_one_line_error(exports, clean, tmp_path, capsys):
    assert embed.run(["--module", exports["gpt"], "--input", os.path.join(clean, "a.txt"), "--output_dir",
                      str(tmp_path / "out"), "--layers", "elmo"]) == 2
    assert "unknown layer choice" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")
