"""Quiet TensorFlow start-up for every command: installed by the packages' `__init__`, before any TF import.

A command's one-line error should be the only line it prints. TensorFlow's C++ side writes 5-8 lines to
stderr while it is imported (`WARNING: All log messages before absl::InitializeLog() ...`, oneDNN's notice,
"Could not find cuda drivers", the CPU-instructions notice), before its logging is configured: setting
`TF_CPP_MIN_LOG_LEVEL` hides only the last, and only when set before the import (it was set in the
commands' `main`, after their module had imported TF). tensorflow_hub adds a `pkg_resources` deprecation
warning.

`quiet_tensorflow_startup()` (idempotent, cheap: TF is not imported here):
  - sets `TF_CPP_MIN_LOG_LEVEL=2` unless the environment sets it;
  - ignores the `pkg_resources is deprecated` warning;
  - installs a one-shot import hook around the first `import tensorflow`: while TF's module runs (and its
    first device query, where the CUDA probe prints), file descriptor 2 points at a temporary file; afterwards every line of it that is not start-up noise
    (`is_startup_noise`) is written to the real stderr, so errors printed during the import are kept.
`PRETRAINING_TF_STARTUP_LOGS=1` in the environment leaves everything as TensorFlow prints it.
"""

import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile
import warnings

KEEP_ENV = "PRETRAINING_TF_STARTUP_LOGS"
# absl lines of TF's start-up: info/warning from any file; errors only from the CUDA probes (a CPU machine)
_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
                    r"|[IW]\d{4} [\d:.]+ +\d+ [\w.]+\.cc:\d+\] "
                    r"|E\d{4} [\d:.]+ +\d+ (cuda\w*|cudart_stub)\.cc:\d+\] "
                    r"|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler)")


def is_startup_noise(line: str) -> bool:
    """True for a line TensorFlow prints at start-up that says nothing to a user of a CPU machine."""
    return bool(_NOISE.match(line))


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
    """Context manager: file descriptor 2 into a temporary file; on exit, its lines that are not start-up
    noise go to the real stderr."""

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
                if not is_startup_noise(line)]
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
    if os.environ.get(KEEP_ENV, "") not in ("", "0"):
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
