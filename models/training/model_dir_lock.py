"""One training run per model_dir: a lock file that names its holder, and the take-over of a stale one.

Two trainings writing the same model_dir overwrite each other's checkpoints and interleave their
`history.jsonl`, and the folder then looks like one finished run. `ModelDirLock` holds
`<model_dir>/.train.lock` for the run's lifetime: an exclusive `flock` on the file (the kernel releases it
when the process dies, however it dies) and, inside, who holds it (host, PID, start time, command), which
is what a refused second run prints.

A lock file left by a run that died without releasing it (`kill -9`, a crash) is stale: its `flock` is gone.
Its holder is checked on this host (the PID is gone, or now belongs to a process started later) and the
lock is taken over with a log line naming the dead run. A lock left by another host cannot be checked from
here: the run is refused, and the message says which file to remove if that run is known to be gone.
Remote model_dirs (`gs://...`) have no file locks; they are not locked (a log line says so).

Example:
    with ModelDirLock("runs/bert_tiny"):
        ...  # train
"""

import dataclasses
import fcntl
import json
import logging
import os
import socket
import sys
import time

from commands.user_errors import UserError

log = logging.getLogger("models.training.train")
LOCK_FILE = ".train.lock"


class ModelDirBusyError(UserError):
    """Another training run holds the model_dir."""


class ModelDirLockError(UserError):
    """The model_dir's lock file cannot be used (a folder in its place, no permission)."""


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds (or held) a lock.

    Args:
      host: `socket.gethostname()` of the run.
      pid: its process id.
      started: its process start time (seconds since the epoch), which tells a reused PID from the holder.
      command: its command line, for the message.
    """

    host: str
    pid: int
    started: float
    command: str = ""

    @classmethod
    def this_process(cls) -> "Holder":
        return cls(socket.gethostname(), os.getpid(), process_start_time(os.getpid()) or time.time(),
                   " ".join(sys.argv))

    @classmethod
    def parse(cls, text: str) -> "Holder | None":
        try:
            fields = json.loads(text)
            return cls(str(fields["host"]), int(fields["pid"]), float(fields["started"]), str(fields.get("command", "")))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        return f"host {self.host}, PID {self.pid}, started {when}"

    def alive_here(self) -> bool:
        """On this host: is the holder's process still running (the same process, not a reused PID)?"""
        started = process_start_time(self.pid)
        if started is None:
            return False
        return abs(started - self.started) < 2.0


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), or None when there is no such process.
    Linux: from /proc; elsewhere only whether it exists (then the start time is unknown: 0)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # field 22, after the command name's closing parenthesis
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, IndexError, StopIteration):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0.0


class ModelDirLock:
    """Context manager: holds `<model_dir>/.train.lock`, or raises `ModelDirBusyError` naming the holder.

    Args:
      model_dir: the run's folder (created if missing).
    """

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        self.path = os.path.join(model_dir, LOCK_FILE)
        self._fd = None
        self._created = False

    def __enter__(self) -> "ModelDirLock":
        self.acquire()
        return self

    def __exit__(self, *_):
        self.release()
        return False

    def acquire(self) -> None:
        if "://" in self.model_dir:
            log.info("%s is remote: not locked against a second training run (keep to one run per folder)",
                     self.model_dir)
            return
        self._created = not os.path.isdir(self.model_dir)
        os.makedirs(self.model_dir, exist_ok=True)
        while self._fd is None:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:  # a folder, or a file this user cannot open: not ours to remove
                self._remove_created()
                what = "is a folder" if os.path.isdir(self.path) else f"cannot be opened ({e.strerror})"
                raise ModelDirLockError(f"--model_dir {self.model_dir}: its lock file {self.path} {what}: if no "
                                        f"training run uses this model_dir, remove it and rerun") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.parse(_read(fd))
                os.close(fd)
                self._remove_created()
                who = holder.describe() if holder else "a process that has not written its name yet"
                raise ModelDirBusyError(f"--model_dir {self.model_dir} is in use by another training run ({who}): "
                                        f"wait for it to finish, or use another --model_dir") from None
            if not _same_file(fd, self.path):  # released and removed between our open and flock: again
                os.close(fd)
                continue
            try:
                self._take(fd)
            except BaseException:
                os.close(fd)
                self._remove_created()
                raise
            self._fd = fd

    def _take(self, fd: int) -> None:
        previous = Holder.parse(_read(fd))
        me = Holder.this_process()
        if previous is not None:
            if previous.host != me.host:
                raise ModelDirBusyError(
                    f"--model_dir {self.model_dir} is locked by a training run on another host ({previous.describe()}), "
                    f"which cannot be checked from {me.host}: if that run is gone, remove {self.path} and rerun")
            if previous.alive_here() and previous.pid != me.pid:
                # alive but not holding the flock: a lock file copied from elsewhere, or an old version's
                raise ModelDirBusyError(f"--model_dir {self.model_dir} names a running process as its training run "
                                        f"({previous.describe()}): if it is not one, remove {self.path} and rerun")
            log.warning("%s: taking over the lock of a training run that ended without releasing it (%s); "
                        "its last checkpoint is where this run resumes", self.model_dir, previous.describe())
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(dataclasses.asdict(me)).encode("utf-8"), 0)
        os.fsync(fd)

    def _remove_created(self) -> None:
        if self._created and os.path.isdir(self.model_dir) and not os.listdir(self.model_dir):
            os.rmdir(self.model_dir)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.path)  # before unlocking: a waiting opener then sees another file and retries
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None
        self._remove_created()  # a run refused before writing anything leaves no empty folder


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 1 << 16, 0).decode("utf-8", "replace")
    except OSError:
        return ""


def _same_file(fd: int, path: str) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
