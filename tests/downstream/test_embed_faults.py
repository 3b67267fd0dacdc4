"""`downstream.embed`'s faults of issue 38: `--module` missing or no export is one line that names no flag the
command lacks; the `--overwrite` contract (another kind of output refused, the earlier run's own files only);
a failed run's `.staging-*` folder goes with the next successful run; SIGTERM stops the local workers first."""

import json
import os
import subprocess
import sys
import time

import pytest

from downstream import embed
from tests.conftest import ROOT
from tests.fixtures.stopping import alive, sigterm_when_ready

FN_API = ["--runner", "FnApiRunner", "--progress_seconds", "0"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def text(tmp_path):
    folder = tmp_path / "text"
    folder.mkdir()
    (folder / "a.txt").write_text("the bank raised its interest rates\nthey sat on the river bank\n")
    return folder


def test_bad_modules_and_output_folders_are_one_line_before_any_work(tiny_models, text, tmp_path, capsys):
    a = str(text / "a.txt")
    for module in (tmp_path / "nope", text):
        assert embed.main(["--module", str(module), "--input", a, "--output_dir", str(tmp_path / "o"), *FN_API]) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"error: no exported module under {module}") and "--model_dir" not in line, line
    export = tiny_models["bert"].export_dir
    for out, said in ((tiny_models["gpt"].export_dir, "holds an export of serving.export"), (export, "is --module"),
                      (str(text), "is the folder of the input file"),
                      (os.path.join(export, "emb"), "is inside --module")):
        assert embed.main(["--module", export, "--input", a, "--output_dir", out, "--overwrite", *FN_API]) == 2
        assert said in one_error_line(capsys)
    assert not os.path.exists(os.path.join(export, "emb")) and not (tmp_path / "o").exists()


def test_a_later_run_removes_a_failed_runs_staging_and_overwrite_only_its_own(tiny_models, text, tmp_path, capsys):
    out = tmp_path / "emb"
    stale = out / ".staging-0123456789ab"
    stale.mkdir(parents=True)
    (stale / "embeddings-00000-of-00002.tfrecord").write_text("half")
    (out / "embedded_from.json").write_text("{}")  # someone else's file (the demo keeps one here)
    argv = ["--module", tiny_models["bert"].export_dir, "--input", str(text / "a.txt"), "--output_dir", str(out),
            "--num_shards", "2", *FN_API]
    assert embed.main(argv) == 0
    assert sorted(os.listdir(out)) == ["embedded_from.json", "embeddings-00000-of-00002.tfrecord",
                                       "embeddings-00001-of-00002.tfrecord", "metadata.json"]
    assert embed.main([*argv[:-4], "--num_shards", "1", "--overwrite", *FN_API]) == 0
    assert sorted(os.listdir(out)) == ["embedded_from.json", "embeddings-00000-of-00001.tfrecord", "metadata.json"]
    assert json.loads((out / "metadata.json").read_text())["examples"] == 2


@pytest.mark.slow
def test_sigterm_stops_the_embed_workers_first(tiny_models, tmp_path):
    from pipeline.termination import descendants

    big = tmp_path / "big.txt"
    big.write_text("the bank raised its interest rates again and again\n" * 30000)
    out = tmp_path / "emb"
    proc = subprocess.Popen([sys.executable, "-m", "downstream.embed", "--module", tiny_models["bert"].export_dir,
                             "--input", str(big), "--output_dir", str(out), "--direct_num_workers", "2",
                             "--direct_running_mode", "multi_processing", "--progress_seconds", "0"], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), stderr=subprocess.PIPE, text=True)
    # settle: the workers load the module and start embedding
    workers, err = sigterm_when_ready(proc, lambda: len(descendants(proc.pid)) >= 2, "workers", timeout=300,
                                      settle=5)
    assert err.strip().splitlines()[-1] == "embed: stopped by signal 15; this run's shards were removed", err
    assert not [pid for pid in workers if alive(pid)]
    time.sleep(3)  # and nothing moved into place after the signal
    assert [n for n in os.listdir(out) if not n.startswith(".")] == []
