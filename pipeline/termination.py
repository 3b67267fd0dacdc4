"""A data job stopped by a signal cleans up, stops its local workers, and says so in one line.

SIGTERM (what `kill`, schedulers and containers send) ends the process at once by default, leaving
full-named shards and `vocab.txt` behind, and Python turns SIGINT (Ctrl-C) into `KeyboardInterrupt`, which
Beam re-raises from a step as a `RuntimeError` (it has no message to add the step's name to).
`terminate_raises` makes both raise `Terminated` in the main thread instead (SIGINT only where its default
action is in force: a process started in the background ignores it). A step re-raises it as `Terminated`
with the step named in its message; the signal's number is read back from that message. The
local multi-processing runner's workers are child processes that a `kill PID` does not reach (Ctrl-C in a
terminal reaches the whole process group): `stop_new_children` stops those the job started, before the
clean-up, so that none renames a finished shard into place afterwards. Linux (`/proc`); elsewhere it
stops nothing. `stopping_workers(cleanup)` is that sequence for a job's run, the one every Beam job
(`pipeline.clean`, `pipeline.vocab`, `pipeline.pretraining_data`, `downstream.embed`) wraps its pipeline in;
`stopped(job, error, removed)` is its one line and exit status.
"""

import contextlib
import logging
import os
import re
import signal
import sys
import threading
import time


class Terminated(BaseException):
    """Raised in the main thread by SIGTERM (or SIGINT) under `terminate_raises` (a BaseException, as
    KeyboardInterrupt: `except Exception` does not swallow it).

    Args:
      signum: the signal's number, or a message that names it (`stopped by signal 15 [while running 'X']`:
        Beam re-raises an error from a step as `type(error)(message + step)`)."""

    def __init__(self, signum: "int | str"):
        message = signum if isinstance(signum, str) else f"stopped by signal {int(signum)}"
        super().__init__(message)
        named = re.search(r"stopped by signal (\d+)", message)
        self.signum = int(named.group(1)) if named else int(signal.SIGTERM)


@contextlib.contextmanager
def terminate_raises():
    """Inside: SIGTERM raises `Terminated`; yields the process's child PIDs at entry (see `stop_new_children`).
    Outside the main thread signals cannot be handled: then nothing changes.

    Python runs a signal handler only when the main thread returns to Python code, and the local runner's
    main thread waits inside gRPC for its workers, which a `kill PID` does not reach: it would wait forever.
    So the signal's C-level handler also writes to a wake-up pipe (`signal.set_wakeup_fd`); a watcher thread
    reading it stops the job's workers (SIGTERM and SIGINT), the main thread's wait ends, and the Python
    handler raises."""
    def handler(signum, frame):
        _quieten()  # before the raise: a step's runner logs what it re-raises
        raise Terminated(signum)

    before = descendants()
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield before
        return
    previous_int = signal.getsignal(signal.SIGINT)
    if previous_int is signal.default_int_handler:
        signal.signal(signal.SIGINT, handler)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd)
    signalled = []
    watcher = threading.Thread(target=_watch, args=(read_fd, before, signalled), name="stop-workers-on-signal",
                               daemon=True)
    watcher.start()
    excepthook = threading.excepthook
    try:
        yield before
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGTERM, previous)
        if previous_int is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous_int)
        os.close(write_fd)  # the watcher reads what is left, then end-of-file, and returns
        watcher.join()
        os.close(read_fd)
        if not signalled:  # after a signal the runner's threads go on failing as their workers go: stay quiet
            threading.excepthook = excepthook


def _watch(read_fd: int, before: set[int], signalled: list) -> None:
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGTERM in data or signal.SIGINT in data:
            signalled.append(True)
            _quieten()
            stop_new_children(before)


def _quieten() -> None:
    """After a signal: the runner's threads fail as their workers go, which is not news, nor what they log
    about it (data plane, gRPC, a step's error): the job says one line."""
    threading.excepthook = _quiet
    logging.disable(logging.ERROR)


def _quiet(args) -> None:
    pass


@contextlib.contextmanager
def stopping_workers(cleanup=lambda: None):
    """A job's run: inside, SIGTERM raises `Terminated` (`terminate_raises`); on any failure (a signal, Ctrl-C,
    an error) the local workers the job started are stopped first when it was a signal, so that none writes or
    renames anything afterwards, then `cleanup()` removes what the run wrote, then the error goes on."""
    children = set()
    try:
        with terminate_raises() as children:
            yield
    except BaseException as e:
        if isinstance(e, (Terminated, KeyboardInterrupt)):
            stop_new_children(children)
        cleanup()
        raise


def stopped(job: str, error: "Terminated | KeyboardInterrupt", removed: str = "this run's output was removed") -> int:
    """Prints the one line of a job stopped by a signal (a `KeyboardInterrupt`: SIGINT); returns its exit
    status, 128 + the signal."""
    signum = error.signum if isinstance(error, Terminated) else int(signal.SIGINT)
    print(f"{job}: stopped by signal {signum}; {removed}", file=sys.stderr)
    return 128 + signum


def descendants(pid: int | None = None) -> set[int]:
    """The PIDs of `pid`'s (default: this process's) children, grandchildren, ... that are running."""
    parents = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return set()
    for name in names:
        if name.isdigit():
            state = _stat(int(name))
            if state and state[0] != "Z":
                parents.setdefault(state[1], []).append(int(name))
    found, todo = set(), [pid or os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def stop_new_children(before: set[int], timeout: float = 30.0) -> None:
    """SIGTERMs this process's descendants not in `before`; waits until they are gone (SIGKILL after
    `timeout` seconds)."""
    new = descendants() - before
    for pid in new:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while new:
        new = {pid for pid in new if _running(pid)}
        if new and time.monotonic() > deadline:
            for pid in new:
                _signal(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.05)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent PID) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int) -> bool:
    state = _stat(pid)
    return state is not None and state[0] != "Z"


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
