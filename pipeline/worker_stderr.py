"""Local Beam workers' stderr: the raw traceback an SDK worker prints for a failing bundle is dropped.

The multi-processing `DirectRunner` runs workers as subprocesses sharing the launcher's stderr, and Beam's
worker prints a failing bundle's whole traceback there (`sdk_worker.py`: `print(traceback, file=sys.stderr)`),
which no logging level controls. While a job runs, file descriptor 2 goes through a filter that passes
every line but Python traceback blocks; the launcher then prints the worker's message in one line
(`commands.user_errors`). `--verbose` (or `PRETRAINING_TRACEBACK=1`) leaves stderr untouched.
"""

import contextlib
import os
import sys
import threading

from commands.user_errors import verbose_wanted

_HEADER = "Traceback (most recent call last):"
_CHAINS = ("During handling of the above exception", "The above exception was the direct cause")


class TracebackFilter:
    """Line by line: `feed(line)` -> the line, or None when it belongs to a traceback block."""

    def __init__(self):
        self.state = "text"  # text | frames | after

    def feed(self, line: str) -> str | None:
        bare = line.rstrip("\r\n")
        if bare == _HEADER:
            self.state = "frames"
            return None
        if self.state == "frames":
            if not bare.startswith(" ") and bare:
                self.state = "after"  # the exception line ends the frames
            return None
        if self.state == "after":
            if not bare.strip() or bare.startswith(_CHAINS):
                return None
            self.state = "text"
        return line


def _pump(read_fd: int, out_fd: int) -> None:
    keep = TracebackFilter()
    with os.fdopen(read_fd, "r", errors="replace", closefd=True) as lines:
        for line in lines:
            if keep.feed(line) is not None:
                os.write(out_fd, line.encode())
    os.close(out_fd)


@contextlib.contextmanager
def without_worker_tracebacks(verbose: bool = False):
    """Within the block, traceback blocks written to file descriptor 2 (by any process) are dropped."""
    if verbose_wanted(verbose):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    pump = threading.Thread(target=_pump, args=(read_fd, os.dup(saved)), daemon=True)
    pump.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe ends when the last worker holding it exits
        os.close(saved)
        pump.join(timeout=10)
