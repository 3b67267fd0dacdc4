"""A command prints none of TensorFlow's noise: its start-up lines from the first import (the command's module
quiets it before its imports), and its C++ notices (oneDNN's data-type fallback) in the command's process and
in every process it starts; everything else written to stderr meanwhile is kept. Importing a package does
none of it. The user's own TF_CPP_MIN_LOG_LEVEL below 2, or PRETRAINING_TF_STARTUP_LOGS=1, shows it all."""

import ast
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
# The packages (and two command modules, imported as libraries) that a notebook imports
PACKAGES = ["commands", "commands.tf_startup", "preprocessing", "pipeline", "models", "models.training",
            "models.convert", "serving", "serving.export", "serving.server", "downstream", "downstream.finetune",
            "demo", "benchmarks"]
# Where the `python -m` entry points live; not the peers' own code (benchmarks/peers), which stays apart from
# the project's plumbing (`model_garden_bert.py` runs where the project is not on the path)
ENTRY_PACKAGES = ["preprocessing", "pipeline", "models", "serving", "downstream", "demo", "benchmarks"]
PEERS = os.path.join("benchmarks", "peers")
ONEDNN_NOTICE = "oneDNN supports DT_INT64 only on platforms with AVX-512"


def test_the_noise_is_recognised_and_nothing_else():
    assert all(is_tensorflow_noise(line) for line in NOISE)
    assert not any(is_tensorflow_noise(line) for line in KEPT)


def _run(code: str, **env) -> subprocess.CompletedProcess:
    """`code` in a fresh Python, as from a user's shell: no TF_CPP_MIN_LOG_LEVEL (the tests' conftest sets it)."""
    environ = {k: v for k, v in os.environ.items() if k not in (LEVEL_ENV, KEEP_ENV, "PYTHONWARNINGS")}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**environ, "PYTHONPATH": ROOT, **env})


def test_importing_the_packages_changes_nothing():
    """No environment variable, import hook or warnings filter comes with `import pipeline, models, ...`
    (issue 56, item 5); nor with a command's module imported as a library (its quieting runs only as
    `python -m`), past what TensorFlow itself changes when it loads."""
    code = ("import os, sys, warnings\n"
            "before = dict(os.environ), list(sys.meta_path), list(warnings.filters)\n"
            f"for name in {PACKAGES!r}: __import__(name)\n"
            "after = dict(os.environ), list(sys.meta_path), list(warnings.filters)\n"
            "assert after == before, (after, before)\n"
            "assert 'tensorflow' not in sys.modules\n"
            "import downstream.embed\n"
            f"assert {LEVEL_ENV!r} not in os.environ and 'PYTHONWARNINGS' not in os.environ\n"
            "assert not any('Quiet' in type(m).__name__ for m in sys.meta_path), sys.meta_path\n"
            "assert not any('pkg_resources' in str(f[1]) for f in warnings.filters), warnings.filters\n"
            "print('unchanged')\n")
    proc = _run(code)
    assert proc.returncode == 0 and proc.stdout == "unchanged\n", proc.stderr


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
# TF_ENABLE_ONEDNN_OPTS=1: oneDNN on, as TensorFlow turns it on by default on AVX-512 CPUs only (VNNI, BF16), so
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


def _entry_points():
    """(module path, parsed source) of every `python -m` entry point: a module with a top-level
    `if __name__ == "__main__":`, or a `__main__.py`."""
    for package in ENTRY_PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            if os.path.relpath(folder, ROOT).startswith(PEERS):
                continue
            for name in sorted(files):
                path = os.path.join(folder, name)
                if not name.endswith(".py"):
                    continue
                tree = ast.parse(open(path, encoding="utf-8").read(), path)
                if name == "__main__.py" or any(_is_main_guard(node) for node in tree.body):
                    yield os.path.relpath(path, ROOT), tree


def _is_main_guard(node) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'"


def _calls_startup(nodes) -> bool:
    return any(isinstance(n, ast.Call) and ast.unparse(n.func) == "quiet_tensorflow_startup"
               for node in nodes for n in ast.walk(node))


def _main_is_quiet(tree) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == "main"
               and any(ast.unparse(d) == "quiet_command" for d in n.decorator_list) for n in tree.body)


def entry_point_faults() -> list[str]:
    """Every entry point that does not quiet TensorFlow before its first import, or whose `main` is not a
    `@quiet_command`, as `path: what`."""
    faults = []
    for path, tree in _entry_points():
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        if path.endswith("__main__.py"):
            first_import = next(i for i, n in enumerate(body) if isinstance(n, ast.ImportFrom)
                                and n.module.split(".")[0] in ENTRY_PACKAGES)
            if not _calls_startup(body[:first_import]):
                faults.append(f"{path}: no quiet_tensorflow_startup() before it imports the command")
            [module] = [n.module for n in body if isinstance(n, ast.ImportFrom)
                        and any(a.name == "main" for a in n.names)]
            imported = os.path.join(ROOT, *module.split(".")) + ".py"
            main_tree = ast.parse(open(imported, encoding="utf-8").read(), imported)
        else:
            if not (_is_main_guard(body[0]) and _calls_startup(body[0].body)):
                faults.append(f"{path}: its first statement is not `if __name__ == \"__main__\": "
                              "quiet_tensorflow_startup()`")
            main_tree = tree
        if not _main_is_quiet(main_tree):
            faults.append(f"{path}: its main is not a @quiet_command")
    return faults


def test_every_command_quiets_tensorflow_before_its_imports_and_in_its_main():
    assert len(list(_entry_points())) > 35
    assert entry_point_faults() == []
