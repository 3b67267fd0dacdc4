"""Quiet TensorFlow for the commands: what a command's process calls before TensorFlow loads, and the filter
its `main` runs in. Importing a package calls none of it: TensorFlow logs as usual in a notebook.

A command's own lines (its start line, its summary, a one-line error) should be the only lines it prints.
TensorFlow's C++ side writes lines that say nothing to the user of a CPU machine, in every process that loads
it (the command's own, and a local Beam job's workers):
  - while it is imported, before its logging is configured, so that `TF_CPP_MIN_LOG_LEVEL` cannot hide them:
    `WARNING: All log messages before absl::InitializeLog() ...`, oneDNN's notice, "Could not find cuda
    drivers", the CPU-instructions notice; at the first device query, `E... cuda_platform.cc] failed call to
    cuInit` (an error line);
  - later, where oneDNN is on (by default on CPUs with AVX-512's VNNI, BF16 or AMX; `TF_ENABLE_ONEDNN_OPTS=1`
    elsewhere): `E... util.cc] oneDNN supports DT_INT64 only on platforms with AVX-512. Falling back ...`,
    once per process, when a graph with int64 ops is optimised (a module loaded by `downstream.embed`, by
    each of its workers): an error line, which `TF_CPP_MIN_LOG_LEVEL=2` does not hide.
tensorflow_hub adds a `pkg_resources is deprecated` warning.

- `quiet_tensorflow_startup()` (idempotent, cheap: TF is not imported here): `TF_CPP_MIN_LOG_LEVEL=2` unless
  the environment sets it, and the `pkg_resources` warning ignored (also through `PYTHONWARNINGS`), for this
  process and every process it starts; a one-shot import hook around the first `import tensorflow`: while
  TF's module runs (and its first device query), file descriptor 2 points at a temporary file, and afterwards
  its lines that are not `is_tensorflow_noise` go to the real stderr. A command's module calls it first thing
  when run as `python -m` (`if __name__ == "__main__":` above its imports), a `__main__.py` before it imports
  its command.
- `@quiet_command` on a command's `main`: `quiet_tensorflow_startup()`, then `main` with file descriptor 2
  through a pipe that drops `is_tensorflow_noise` lines: the command's own, and those of every process started
  meanwhile (they inherit the descriptor: Beam's local workers).

What the user asked for wins: `PRETRAINING_TF_STARTUP_LOGS=1` leaves everything as TensorFlow prints it, and
so does a `TF_CPP_MIN_LOG_LEVEL` below 2 (0: every line, 1: no info lines), which is passed on unchanged.
"""

import contextlib
import functools
import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile
import threading
import warnings

KEEP_ENV = "PRETRAINING_TF_STARTUP_LOGS"
LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LEVEL = 2  # no info or warning lines; errors stay
CHILD_WARNINGS = "ignore:pkg_resources is deprecated:UserWarning"  # PYTHONWARNINGS' form of the filter below
# absl lines of TF (info and warnings, from any file: TF's start-up, as level 2 hides the later ones; errors
# only from the CUDA probes of a CPU machine, and oneDNN's data-type notice), and the CPU-instructions line
_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
                    r"|[IW]\d{4} [\d:.]+ +\d+ [\w.]+\.cc:\d+\] "
                    r"|E\d{4} [\d:.]+ +\d+ (cuda\w*|cudart_stub)\.cc:\d+\] "
                    r"|E\d{4} [\d:.]+ +\d+ util\.cc:\d+\] oneDNN supports DT_\w+ only on platforms with AVX-512"
                    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler)")


def is_tensorflow_noise(line: str) -> bool:
    """True for a line TensorFlow prints that says nothing to a user of a CPU machine."""
    return bool(_NOISE.match(line))


def logs_wanted() -> bool:
    """True when the environment asks for TensorFlow's logging as it is: `PRETRAINING_TF_STARTUP_LOGS=1`, or
    a `TF_CPP_MIN_LOG_LEVEL` below 2."""
    if os.environ.get(KEEP_ENV, "") not in ("", "0"):
        return True
    level = os.environ.get(LEVEL_ENV, "").strip()
    return level.isdigit() and int(level) < QUIET_LEVEL


class _QuietTensorFlowFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` as the normal path finder does, and runs its module with stderr filtered."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        _uninstall()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with filtered_stderr():
            self.loader.exec_module(module)
            try:  # the CUDA probe ("failed call to cuInit") runs at the first device query: here, filtered
                module.config.list_physical_devices()
            except Exception:  # noqa: BLE001 - a broken device set-up shows again where it is used
                pass

    def __getattr__(self, name):  # get_resource_reader, is_package, ... of the real loader
        return getattr(self.loader, name)


class filtered_stderr:
    """Context manager: file descriptor 2 into a temporary file; on exit, its lines that are not
    `is_tensorflow_noise` go to the real stderr."""

    def __enter__(self):
        sys.stderr.flush()
        self._saved = os.dup(2)
        self._file = tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *_):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        kept = [line for line in self._file.read().decode("utf-8", "replace").splitlines(keepends=True)
                if not is_tensorflow_noise(line)]
        self._file.close()
        if kept:
            sys.stderr.write("".join(kept))
            sys.stderr.flush()
        return False


_FINDER = _QuietTensorFlowFinder()


def _uninstall() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


def quiet_tensorflow_startup() -> None:
    """See the module docstring; safe to call any number of times, before or after TF is imported."""
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    given = os.environ.get("PYTHONWARNINGS", "")
    if CHILD_WARNINGS not in given.split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(w for w in (given, CHILD_WARNINGS) if w)
    if logs_wanted():
        return
    os.environ.setdefault(LEVEL_ENV, str(QUIET_LEVEL))
    if "tensorflow" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def _pump(read_fd: int, out_fd: int) -> None:
    """Copies the pipe's lines to `out_fd` but TF's noise, until every writer has closed it."""
    with os.fdopen(read_fd, "rb") as lines:
        for line in lines:
            if is_tensorflow_noise(line.decode("utf-8", "replace")):
                continue
            try:
                while line:
                    line = line[os.write(out_fd, line):]
            except OSError:  # the real stderr is gone (a closed pipe): keep reading, so writers never block
                pass
    os.close(out_fd)


@contextlib.contextmanager
def tensorflow_noise_dropped():
    """Within the block, file descriptor 2 goes through a pipe whose lines reach the real stderr unless they
    are `is_tensorflow_noise`: this process's, and those of every process started meanwhile (they inherit
    the descriptor). Nothing changes when `logs_wanted()`."""
    if logs_wanted():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)  # inheritable, as descriptor 2 always is
    os.close(write_fd)
    pump = threading.Thread(target=_pump, args=(read_fd, os.dup(saved)), name="tensorflow-noise-filter",
                            daemon=True)
    pump.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe ends when the last process started meanwhile lets it go
        os.close(saved)
        pump.join(timeout=10)


def quiet_command(main):
    """Decorator for a command's `main`: `quiet_tensorflow_startup()`, then `main` inside
    `tensorflow_noise_dropped()`."""

    @functools.wraps(main)
    def quiet_main(*args, **kwargs):
        quiet_tensorflow_startup()
        with tensorflow_noise_dropped():
            return main(*args, **kwargs)

    return quiet_main
