"""The distributed paths, each in fresh processes: MirroredStrategy over two logical CPUs follows the
single-device trajectory, and a two-process MultiWorkerMirroredStrategy on localhost trains and
checkpoints (the chief writes; the other worker cleans up its scratch checkpoint)."""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import ROOT
from tests.fixtures.training import write_dataset

ENV = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
WORKER_S = 900  # one training process's whole run on a loaded machine (about 115 s seen): bounds a hang only


def _losses(model_dir):
    with open(os.path.join(model_dir, "history.jsonl")) as f:
        return [json.loads(line)["loss"] for line in f]


@pytest.mark.slow
def test_mirrored_two_cpus_matches_one_device(tmp_path):
    pattern = write_dataset(str(tmp_path / "data"), "gpt")
    outputs = {}
    for mode in ("mirrored", "default"):
        run = subprocess.run([sys.executable, "-m", "tests.fixtures.mirrored_script", mode, pattern, str(tmp_path / mode)],
                             cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=WORKER_S)
        assert run.returncode == 0, run.stderr[-3000:]
        outputs[mode] = run.stdout
    assert "replicas 2 xla False" in outputs["mirrored"] and "replicas 1 xla True" in outputs["default"]
    mirrored, single = _losses(tmp_path / "mirrored"), _losses(tmp_path / "default")
    assert len(mirrored) == 6
    np.testing.assert_allclose(mirrored, single, rtol=1e-4)


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


PORT_TAKEN = "Could not start gRPC server"  # a port picked here was taken by another process before TF bound it


def _run_two_workers(pattern, model_dir, log_dir):
    """Runs the two workers to their end -> (return codes, outputs). When one fails, the other is stopped at
    once: it would wait for its peer in a collective for 10+ minutes, ignoring SIGTERM."""
    workers = [f"localhost:{port}" for port in _free_ports(2)]
    processes, logs = [], [os.path.join(log_dir, f"worker{i}.log") for i in range(2)]
    for index, log in enumerate(logs):
        env = dict(ENV, TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                              "task": {"type": "worker", "index": index}}))
        # `timeout -k`: kills a worker stuck past any reasonable time even if this process is gone
        command = ["timeout", "-k", "10", str(WORKER_S), sys.executable, "-m", "models.training.train", "--model",
                   "gpt", "--preset", "gpt_tiny", "--train_data", pattern, "--model_dir", model_dir,
                   "--strategy", "multi_worker", "--set", "train_steps=20", "--set", "batch_size=8",
                   "--set", "warmup_steps=0", "--set", "learning_rate=3e-3", "--set", "log_every=5",
                   "--set", "checkpoint_every=10", "--set", "dropout=0.0"]
        with open(log, "w") as out:
            processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                              text=True))
    try:
        while any(p.poll() is None for p in processes):
            if any(p.poll() not in (None, 0) for p in processes):
                break
            time.sleep(0.2)
    finally:
        for p in processes:
            if p.poll() is None:
                p.terminate()  # `timeout` passes SIGTERM on to the worker, and SIGKILL 10 s later (-k)
                p.wait()
    return [p.returncode for p in processes], [open(log).read() for log in logs]


@pytest.mark.slow
def test_two_process_multi_worker_on_localhost(tmp_path):
    pattern = write_dataset(str(tmp_path / "data"), "gpt", examples=128)
    for attempt in range(3):  # again on new ports only when one was taken before a worker could bind it
        model_dir = str(tmp_path / f"model{attempt}")
        os.makedirs(tmp_path / f"logs{attempt}")
        codes, outputs = _run_two_workers(pattern, model_dir, str(tmp_path / f"logs{attempt}"))
        if not any(PORT_TAKEN in out for out in outputs):
            break
    for code, out in zip(codes, outputs):
        assert code == 0, out[-3000:]
    assert "2 replica(s)" in outputs[0]
    assert tf.train.latest_checkpoint(model_dir).endswith("ckpt-20")
    assert not [name for name in os.listdir(model_dir) if name.startswith(".worker_")]
    losses = _losses(model_dir)
    assert len(losses) == 4 and losses[-1] < 0.5 * losses[0]
