"""TensorFlow's start-up lines are filtered from the first import in any process that imported a project
package first; everything else written to stderr meanwhile is kept."""

import os
import subprocess
import sys

import pytest

from commands.tf_startup import KEEP_ENV, is_startup_noise
from tests.conftest import ROOT

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    "I0000 00:00:1796160232.209529    5705 port.cc:153] oneDNN custom operations are on. You may see ...\n",
    "I0000 00:00:1796160232.212092    5705 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU ...\n",
    "E0000 00:00:1796161662.747324   23380 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error\n",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate "
    "compiler flags.\n",
]
KEPT = ["error: --vocab x is a folder\n", "E0000 00:00:1.0 7 op_kernel.cc:1] a real kernel error\n",
        "/x/y.py:3: UserWarning: something\n"]


def test_the_noise_is_recognised_and_nothing_else():
    assert all(is_startup_noise(line) for line in NOISE)
    assert not any(is_startup_noise(line) for line in KEPT)


def _stderr(code: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", KEEP_ENV)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**environ, "PYTHONPATH": ROOT, **env}).stderr


@pytest.mark.slow
def test_a_project_import_first_silences_tensorflow_and_tensorflow_hub():
    code = ("import sys, models, tensorflow as tf, tensorflow_hub\n"
            "print('kept', file=sys.stderr); tf.constant(1) + 1\n")
    assert _stderr(code) == "kept\n"
    assert "absl::InitializeLog" in _stderr(code, **{KEEP_ENV: "1"})  # the switch that shows them
