"""A command prints none of TensorFlow's noise: its start-up lines from the first import, and its C++ notices
(oneDNN's data-type fallback) in the command's process and in every process it starts; everything else
written to stderr meanwhile is kept. The user's own TF_CPP_MIN_LOG_LEVEL below 2, or
PRETRAINING_TF_STARTUP_LOGS=1, shows it all."""

import os
import subprocess
import sys

import pytest

from commands.tf_startup import KEEP_ENV, LEVEL_ENV, is_tensorflow_noise
from tests.conftest import ROOT

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    "I0000 00:00:1796160232.209529    5705 port.cc:153] oneDNN custom operations are on. You may see ...\n",
    "I0000 00:00:1796160232.212092    5705 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU ...\n",
    "E0000 00:00:1796161662.747324   23380 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error\n",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate "
    "compiler flags.\n",
    "E0000 00:00:1796686031.718527   11503 util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512. "
    "Falling back to the default Eigen-based implementation if present.\n",
]
KEPT = ["error: --vocab x is a folder\n", "E0000 00:00:1.0 7 op_kernel.cc:1] a real kernel error\n",
        "E0000 00:00:1.0 7 util.cc:1] another error of util.cc\n", "/x/y.py:3: UserWarning: something\n"]
ONEDNN_NOTICE = "oneDNN supports DT_INT64 only on platforms with AVX-512"


def test_the_noise_is_recognised_and_nothing_else():
    assert all(is_tensorflow_noise(line) for line in NOISE)
    assert not any(is_tensorflow_noise(line) for line in KEPT)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh Python, as from a user's shell: no TF_CPP_MIN_LOG_LEVEL (the tests' conftest sets it)."""
    environ = {k: v for k, v in os.environ.items() if k not in (LEVEL_ENV, KEEP_ENV, "PYTHONWARNINGS")}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**environ, "PYTHONPATH": ROOT, **env})


@pytest.mark.slow
def test_the_start_up_call_silences_tensorflow_and_tensorflow_hub():
    code = ("import sys\n"
            "from commands.tf_startup import quiet_tensorflow_startup\n"
            "quiet_tensorflow_startup()\n"
            "import models, tensorflow as tf, tensorflow_hub\n"
            "print('kept', file=sys.stderr); tf.constant(1) + 1\n")
    assert _run(code).stderr == "kept\n"
    assert "absl::InitializeLog" in _run(code, **{KEEP_ENV: "1"}).stderr  # the switch that shows them
    assert "absl::InitializeLog" in _run(code, **{LEVEL_ENV: "0"}).stderr  # and the user's own level


# A command whose main loads TensorFlow and starts a child that loads it too (as Beam's local workers do);
# each runs a graph with an int64 transpose, which oneDNN declines with an error line once per process.
# TF_ENABLE_ONEDNN_OPTS=1: oneDNN on, as TensorFlow turns it on by default on CPUs with AVX-512 only, so
# that the notice comes on any CPU.
COMMAND = """
import subprocess, sys
from commands.tf_startup import quiet_command

INT64_GRAPH = "import sys, tensorflow as tf; tf.function(tf.transpose)(tf.constant([[1, 2]], tf.int64))"

@quiet_command
def main():
    exec(INT64_GRAPH)
    print("mine", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-c", INT64_GRAPH + "; print('child', file=sys.stderr)"], check=True)
    return 0

sys.exit(main())
"""


@pytest.mark.slow
def test_a_command_and_the_processes_it_starts_print_no_tensorflow_notices():
    """Issue 57: `oneDNN supports DT_INT64 only on platforms with AVX-512` came from `downstream.embed` on an
    AVX-512 CPU (its own process, after the import-time filter; each worker process too). With the user's
    TF_CPP_MIN_LOG_LEVEL=0 the notices show: TensorFlow's own logging, unfiltered."""
    quiet = _run(COMMAND, TF_ENABLE_ONEDNN_OPTS="1")
    assert quiet.returncode == 0 and quiet.stderr == "mine\nchild\n", quiet.stderr
    shown = _run(COMMAND, TF_ENABLE_ONEDNN_OPTS="1", **{LEVEL_ENV: "0"})
    assert shown.returncode == 0 and shown.stderr.count(ONEDNN_NOTICE) == 2, shown.stderr
