"""The demo's child processes: one way to start them, one way to stop them all, and the demo's hold on its
`--demo_dir`, which lasts as long as the demo or any process it started lives.

- `child(cmd)` starts every command the demo runs (`demo.commands` calls it), in a session of its own, so
  that only the demo decides how its children stop: a terminal's Ctrl-C reaches the demo alone, which
  then sends each running child one SIGTERM (a training saves a checkpoint and exits 143; a Beam job stops
  its workers) and waits for it (`stop_all`). After that no child starts (`Stopped`): a failure in step 7
  ends the track beside it at once instead of running it to its end.
- Ctrl-C, SIGTERM and SIGHUP to the demo stop the children at once and raise `KeyboardInterrupt` or
  `Stopped` in its main thread (`stop_on_signals`): a stopped demo leaves no process behind.
- `holding(demo_dir)` locks `<demo_dir>/.demo.lock` (`flock`) for one run; every child inherits the lock's
  descriptor, so the lock is held until the demo and all its children have ended. A second demo on the same
  folder, such as a re-run while a killed run's trainings still run (kill -9 cannot be caught), is refused
  before it starts anything, naming the processes that hold it: a re-run never trains beside an earlier
  run's processes.
"""

import contextlib
import fcntl
import os
import signal
import subprocess
import threading

from commands.user_errors import UserError

LOCK_FILE = ".demo.lock"
STOP_GRACE_S = 120  # what a stopped child gets to finish (a training saves its checkpoint), then SIGKILL

_lock = threading.RLock()  # also taken in the main thread's signal handler, which may interrupt a holder
_running: set = set()
_signalled: set = set()  # children already sent their one SIGTERM
_stopping = threading.Event()
_held: dict = {}  # "fd": the demo_dir lock's descriptor, passed to every child


class Stopped(Exception):
    """The demo is stopping (a signal, or a failure elsewhere): no further command starts."""

    def __init__(self, signum: int | None = None):
        self.signum = signum
        super().__init__(f"stopped by signal {signum}" if signum else "stopped")


@contextlib.contextmanager
def child(cmd: list[str], **popen_args):
    """`subprocess.Popen(cmd, **popen_args)` in its own session, holding the demo_dir lock, for the `with`
    block; it is waited for (or stopped, then waited for) when the block ends. Raises `Stopped` instead of
    starting once `stop_all` was called."""
    with _lock:
        if _stopping.is_set():
            raise Stopped()
        fds = (_held["fd"],) if "fd" in _held else ()
        proc = subprocess.Popen(cmd, start_new_session=True, pass_fds=fds, **popen_args)
        _running.add(proc)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            _stop(proc)
        with _lock:
            _running.discard(proc)
            _signalled.discard(proc)


def stop_all() -> None:
    """Starts no more children; sends each running one SIGTERM and waits for it (`STOP_GRACE_S`, then
    SIGKILL)."""
    for proc in _signal_all():
        _stop(proc)


def _signal_all() -> list:
    """Starts no more children and sends each running one its SIGTERM, without waiting; returns them."""
    _stopping.set()
    with _lock:
        running = list(_running)
    for proc in running:
        _signal(proc)
    return running


def _signal(proc: subprocess.Popen) -> None:
    with _lock:
        first = proc not in _signalled
        _signalled.add(proc)
    if first:  # once: a training that gets a second signal gives up unsaved
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)


def _stop(proc: subprocess.Popen) -> None:
    _signal(proc)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_on_signals() -> None:
    """In the main thread: Ctrl-C (SIGINT, unless it is ignored), SIGTERM and SIGHUP send every running child
    its SIGTERM at once and keep any other from starting, then raise `KeyboardInterrupt` (SIGINT) or `Stopped`
    there, so that the clean-up on the way out only waits. A second Ctrl-C stops that waiting; a repeated
    SIGTERM or SIGHUP is ignored."""
    def on_signal(signum, frame):
        if _stopping.is_set() and signum != signal.SIGINT:
            return
        _signal_all()
        raise KeyboardInterrupt if signum == signal.SIGINT else Stopped(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        if signum != signal.SIGINT or signal.getsignal(signum) is signal.default_int_handler:
            signal.signal(signum, on_signal)


@contextlib.contextmanager
def holding(demo_dir: str):
    """Context manager for one run: creates `demo_dir` and locks it for this process and the children it
    starts (or raises `UserError` naming the processes that hold it); at the end, stops whatever still runs
    and lets the folder go."""
    os.makedirs(demo_dir, exist_ok=True)
    path = os.path.join(demo_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holders = "; ".join(f"PID {pid} {what}" for pid, what in holders_of(path)) or "a process not seen here"
        raise UserError(f"--demo_dir {demo_dir} is in use by another demo run or the processes it started "
                        f"({holders}): wait for them to end, or stop them, then rerun") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _held["fd"] = fd
    _stopping.clear()
    try:
        yield
    finally:
        stop_all()
        _held.pop("fd", None)
        os.close(fd)
        _stopping.clear()


def holders_of(path: str) -> list[tuple[int, str]]:
    """(pid, what it runs) of each process that has `path` open (Linux's /proc; empty elsewhere)."""
    found, real = [], os.path.realpath(path)
    pids = sorted(int(name) for name in (os.listdir("/proc") if os.path.isdir("/proc") else []) if name.isdigit())
    for pid in pids:
        with contextlib.suppress(OSError):
            fd_dir = f"/proc/{pid}/fd"
            if pid != os.getpid() and any(os.readlink(os.path.join(fd_dir, fd)) == real for fd in os.listdir(fd_dir)):
                found.append((pid, _what(pid)))
    return found


def _what(pid: int) -> str:
    """`python -m NAME` -> `(NAME)`, else the program's name."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = f.read().decode(errors="replace").split("\0")
    return f"({argv[argv.index('-m') + 1]})" if "-m" in argv[:-1] else f"({os.path.basename(argv[0])})"
