"""Faults that used to end in a traceback now end in one `error:` line naming the file (issue 27, item 6): a
cut eval shard, a cut checkpoint (evaluate, export), another family's checkpoint without config.json, a
folder or a missing file as input (features, tokenize), a hidden size the heads do not divide (convert), a
full disk at a training checkpoint and in the data job; and the commands print no TensorFlow start-up lines.
The "full disk" is a file-size limit (RLIMIT_FSIZE) on the command's process: its writes fail as they would."""

import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys

import pytest

from models.training import evaluate, train
from serving.export import cli as export
from tests.conftest import ROOT
from tests.fixtures.training import train_tiny, write_dataset

FAST = ["--set", "warmup_steps=1", "--set", "log_every=2", "--set", "checkpoint_every=2", "--set", "batch_size=8",
        "--set", "steps_per_execution=2", "--set", "jit_compile=false", "--set", "train_steps=2"]
ENV = dict(os.environ, PYTHONPATH=ROOT)
ENV.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user's shell has it: the commands must quiet TF themselves


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A gpt_tiny model_dir trained 2 steps, and its data."""
    return train_tiny(tmp_path_factory.mktemp("run"), "gpt", *FAST)


def _error_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


def _cut(path: str, keep: float = 0.5) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:int(len(data) * keep)])


def _copy(run, name: str) -> str:
    target = str(run["root"] / name)
    shutil.copytree(run["model_dir"], target)
    return target


@pytest.mark.slow
def test_evaluate_on_a_cut_shard_names_it(run, tmp_path, capsys):
    data_dir = str(tmp_path / "data")
    shutil.copytree(os.path.dirname(run["data"]), data_dir)
    shard = sorted(glob.glob(os.path.join(data_dir, "gpt-*.tfrecord")))[0]
    with open(shard, "rb") as f:
        size = len(f.read())
    _cut(shard, (size - 6) / size)  # inside the last record: "truncated record"
    pattern = os.path.join(data_dir, "gpt-*.tfrecord")
    assert evaluate.main(["--model_dir", run["model_dir"], "--eval_data", pattern]) == train.CORRUPT_DATA
    line = _error_line(capsys.readouterr().err)
    assert line.startswith(f"error: corrupt eval data: {shard}: ")


@pytest.mark.parametrize("part", ["data", "index"])
def test_a_cut_checkpoint_is_named_by_evaluate_and_export(run, tmp_path, capsys, part):
    model_dir = _copy(run, f"cut_{part}")
    files = glob.glob(os.path.join(model_dir, "ckpt-2.data-*" if part == "data" else "ckpt-2.index"))
    _cut(files[0], 0.5)
    assert evaluate.main(["--model_dir", model_dir, "--eval_data", run["data"], "--steps", "1"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line.startswith(f"error: checkpoint {os.path.join(model_dir, 'ckpt-2')} cannot be read (")
    assert "cut short or damaged" in line
    assert export.main(["--model_dir", model_dir, "--export_dir", str(tmp_path / "export")]) == 2
    line = _error_line(capsys.readouterr().err)
    assert f"checkpoint {os.path.join(model_dir, 'ckpt-2')} cannot be read" in line


def test_another_familys_checkpoint_without_config_json_is_named(run, tmp_path, capsys):
    model_dir = _copy(run, "no_config")
    os.remove(os.path.join(model_dir, "config.json"))
    bert = write_dataset(str(tmp_path / "bert"), "bert")
    assert train.main(["--model", "bert", "--preset", "bert_tiny", "--train_data", bert, "--model_dir", model_dir,
                       *FAST, "--set", "train_steps=4"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {os.path.join(model_dir, 'ckpt-2')} does not hold every weight of the model")


def _limited(size: int):
    def preexec():
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead
    return preexec


@pytest.mark.slow
def test_a_full_disk_at_a_training_checkpoint_is_one_line_and_leaves_no_temp_folder(run, tmp_path):
    model_dir = str(tmp_path / "full")
    size = os.path.getsize(glob.glob(os.path.join(run["model_dir"], "ckpt-2.data-*"))[0])
    proc = subprocess.run([sys.executable, "-m", "models.training.train", "--model", "gpt", "--preset", "gpt_tiny",
                           "--train_data", run["data"], "--model_dir", model_dir, *FAST], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=900, preexec_fn=_limited(size // 2))
    assert proc.returncode == 2, proc.stderr
    line = _error_line(proc.stderr)
    assert line.startswith(f"error: cannot write checkpoint {os.path.join(model_dir, 'ckpt-2')} (")
    assert line.endswith("nothing of it is kept; free space and rerun, which starts again from step 0")
    assert not glob.glob(os.path.join(model_dir, "ckpt-2*")) and not os.path.exists(os.path.join(model_dir,
                                                                                                 ".train.lock"))


@pytest.mark.slow
def test_a_full_disk_in_the_data_job_is_one_line_and_cleans_up(bert_vocab_path, tmp_path):
    from tests.pipeline.test_pretraining_data_job import SENTENCES

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(SENTENCES[i % 7:] + SENTENCES[:i % 7]) for i in range(300)) + "\n")
    out = tmp_path / "out"
    limit = os.path.getsize(bert_vocab_path) + 4096  # vocab.txt fits, the shard does not
    proc = subprocess.run([sys.executable, "-m", "pipeline.pretraining_data", "--model", "bert", "--input",
                           str(corpus), "--vocab", bert_vocab_path, "--output_dir", str(out), "--num_shards", "1",
                           "--runner", "FnApiRunner"], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=900, preexec_fn=_limited(limit))
    assert proc.returncode == 2, proc.stderr
    line = _error_line(proc.stderr)
    assert line.startswith(f"error: cannot write {out / 'bert-00000-of-00001.tfrecord'}: ")
    assert line.endswith("free space (or use another --output_dir) and rerun; this run's output was removed")
    assert not out.exists()


def _command(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *map(str, argv)], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_features_and_tokenize_name_a_folder_or_missing_input_with_no_start_up_lines(tmp_path):
    """Only the error line on stderr: no TensorFlow start-up lines, no pkg_resources warning (hub)."""
    text, folder, module = tmp_path / "t.txt", tmp_path / "folder", tmp_path / "module"
    text.write_text("a sentence\n")
    folder.mkdir()
    module.mkdir()
    for given, said in ((folder, "is a folder; give a text file"), (tmp_path / "nope.txt", "no such file")):
        proc = _command("downstream.features", "--module", module, "--input", given, "--output", tmp_path / "f.npz")
        assert proc.returncode == 2
        assert proc.stderr == f"error: --input {given}{':' if 'no such' in said else ''} {said}" + (
            ", one sentence a line\n" if "folder" in said else "\n")
    proc = _command("downstream.features", "--module", module, "--input", text, "--output", tmp_path / "f.npz")
    assert proc.returncode == 2 and proc.stderr.startswith("error: no exported module under")
    assert len(proc.stderr.splitlines()) == 1
    proc = _command("preprocessing.tokenize", "--vocab", tmp_path)
    assert (proc.returncode, proc.stderr) == (2, f"error: vocabulary {tmp_path} is a folder; give its vocab.txt\n")


@pytest.mark.slow
def test_convert_names_a_hidden_size_the_heads_do_not_divide(tmp_path):
    source = tmp_path / "hf"
    source.mkdir()
    config = {"vocab_size": 40, "num_hidden_layers": 1, "hidden_size": 30, "num_attention_heads": 4,
              "intermediate_size": 16, "hidden_act": "gelu", "model_type": "bert"}
    (source / "config.json").write_text(json.dumps(config))
    (source / "model.safetensors").write_bytes(b"\0" * 64)
    proc = _command("models.convert", "--from", "hf_bert", "--checkpoint", source / "model.safetensors",
                    "--model_dir", tmp_path / "m")
    assert proc.returncode == 2
    assert proc.stderr == (f"error: {source / 'config.json'}: hidden_size 30 is not divisible by num_attention_heads "
                           f"4: each head takes hidden_size / num_attention_heads dimensions; fix the config\n")
