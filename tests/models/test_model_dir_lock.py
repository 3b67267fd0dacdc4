"""One training per model_dir: a second run is refused naming the first (host, PID); a stale lock is taken
over with a log line; a rerun that contradicts the trained steps is refused unless `--allow_change` says so,
and config.json then records the change."""

import json
import logging
import os
import socket
import subprocess
import sys

import pytest

from models import families
from models.training import rerun, train
from commands.output_lock import TRAIN_LOCK as LOCK_FILE, Holder, OutputBusyError, model_dir_lock
from tests.fixtures.locking import held_lock
from tests.fixtures.training import write_dataset

FAST = ["--set", "warmup_steps=1", "--set", "log_every=2", "--set", "checkpoint_every=2", "--set", "batch_size=8",
        "--set", "steps_per_execution=2", "--set", "learning_rate=1e-3", "--set", "jit_compile=false"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_dataset(str(tmp_path_factory.mktemp("data") / "gpt"), "gpt")


def _argv(data, model_dir, *more):
    return ["--model", "gpt", "--preset", "gpt_tiny", "--train_data", data, "--model_dir", model_dir, *FAST, *more]


@pytest.fixture
def holder(tmp_path):
    """Another process holding `tmp_path/run`'s lock until the test ends."""
    model_dir = str(tmp_path / "run")
    with held_lock(model_dir, LOCK_FILE) as pid:
        yield model_dir, pid


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_second_training_is_refused_naming_the_first(holder, data, capsys):
    model_dir, pid = holder
    assert train.main(_argv(data, model_dir, "--set", "train_steps=2")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: --model_dir {model_dir} is in use by another training run")
    assert f"host {socket.gethostname()}, PID {pid}" in err
    assert not os.path.exists(os.path.join(model_dir, families.CONFIG_FILE))


def test_the_lock_is_released_and_the_folder_reusable(tmp_path):
    model_dir = str(tmp_path / "m")
    with model_dir_lock(model_dir):
        with pytest.raises(OutputBusyError, match=f"PID {os.getpid()}"):
            model_dir_lock(model_dir).acquire()  # flock is per open file: the same process is refused too
    assert not os.path.exists(model_dir)  # created for the lock, left empty: removed
    with model_dir_lock(model_dir):
        assert os.path.exists(os.path.join(model_dir, LOCK_FILE))


@pytest.mark.slow
def test_a_stale_lock_is_taken_over_with_a_log_line(data, tmp_path, caplog, capsys):
    model_dir = str(tmp_path / "m")
    os.makedirs(model_dir)
    dead = Holder(socket.gethostname(), _gone_pid(), 1.0e9, "python -m models.training.train ...")
    with open(os.path.join(model_dir, LOCK_FILE), "w") as f:
        json.dump(vars(dead), f)
    caplog.set_level(logging.INFO, logger="models.training.train")
    assert train.main(_argv(data, model_dir, "--set", "train_steps=2")) == 0
    assert f"taking over the lock of a training run that ended without releasing it (host " \
           f"{dead.host}, PID {dead.pid}" in caplog.text
    assert not os.path.exists(os.path.join(model_dir, LOCK_FILE))


def test_a_lock_from_another_host_is_refused_with_the_file_to_remove(data, tmp_path, capsys):
    model_dir = str(tmp_path / "m")
    os.makedirs(model_dir)
    with open(os.path.join(model_dir, LOCK_FILE), "w") as f:
        json.dump(vars(Holder("tpu-vm-7", 4242, 1.0e9)), f)
    assert train.main(_argv(data, model_dir, "--set", "train_steps=2")) == 2
    err = capsys.readouterr().err.strip()
    assert "host tpu-vm-7, PID 4242" in err and f"remove {os.path.join(model_dir, LOCK_FILE)}" in err
    assert len(err.splitlines()) == 1


@pytest.mark.slow
def test_a_rerun_that_contradicts_the_trained_steps_is_refused_unless_meant(data, tmp_path, capsys):
    model_dir = str(tmp_path / "m")
    assert train.main(_argv(data, model_dir, "--set", "train_steps=4")) == 0
    capsys.readouterr()
    with open(os.path.join(model_dir, families.CONFIG_FILE)) as f:
        before = f.read()

    assert train.main(_argv(data, model_dir, "--set", "train_steps=2")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {model_dir} has already trained 4 steps; train_steps=2") and "\n" not in err

    assert train.main(_argv(data, model_dir, "--set", "train_steps=6", "--set", "learning_rate=0.01")) == 2
    err = capsys.readouterr().err.strip()
    assert "learning_rate=0.001 -> 0.01" in err and "pass --allow_change learning_rate" in err and "\n" not in err
    with open(os.path.join(model_dir, families.CONFIG_FILE)) as f:
        assert f.read() == before  # config.json never describes a run that did not happen

    # the same command without the flags continues with the saved values: nothing to refuse, nothing to do
    assert train.main(["--train_data", data, "--model_dir", model_dir]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step"] == 4

    assert train.main(_argv(data, model_dir, "--set", "train_steps=6", "--set", "learning_rate=0.01",
                            "--allow_change", "learning_rate")) == 0
    saved = families.read_config(model_dir)
    assert saved["train_config"].learning_rate == 0.01 and saved["train_config"].train_steps == 6
    assert saved["run"]["changes"] == [{"from_step": 4, "learning_rate": [0.001, 0.01]}]


def test_trained_steps_come_from_the_checkpoint_name():
    assert rerun.trained_steps(None) == 0
    assert rerun.trained_steps("/runs/a-b/ckpt-400") == 400
