"""One run per output folder: a lock file that names its holder, and the take-over of a stale one.

Two runs writing the same folder at once mix their outputs, and the folder then looks like one finished run
(two cleanings' files beside one report; two trainings' checkpoints and `history.jsonl` interleaved). Every
command that writes a run into a folder holds that folder's lock from before it looks at what the folder holds
(`commands.overwrite`) to its end: `.train.lock` in a model_dir (`models.training.train`, `models.convert
--from`: `model_dir_lock`), `.run.lock` in any other output folder (`pipeline.clean`,
`pipeline.pretraining_data`, `downstream.embed`, `downstream.finetune`, `models.convert --to`,
`serving.export`). A second run is refused in one line naming the first's host and PID.

`OutputLock` holds the lock file for the run's lifetime: an exclusive `flock` on it (the kernel releases it
when the process dies, however it dies) and, inside, who holds it (host, PID, start time, command). A lock
file left by a run that died without releasing it (`kill -9`, a crash) is stale: its `flock` is gone. Its
holder is checked on this host (the PID is gone, or now belongs to a process started later) and the lock is
taken over with a log line naming the dead run. A lock left by another host cannot be checked from here: the
run is refused, and the message says which file to remove if that run is known to be gone. Remote folders
(`gs://...`) have no file locks; they are not locked (a log line says so). A folder the lock created is
removed with it when the run left it empty (a refused run leaves no empty folder).

Example:
    with OutputLock("cleaned"):
        ...  # check the folder (`commands.overwrite.plan`), then write the run
    with model_dir_lock("runs/bert_tiny"):
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

RUN_LOCK = ".run.lock"
TRAIN_LOCK = ".train.lock"


class OutputBusyError(UserError):
    """Another run holds the folder."""


class OutputLockError(UserError):
    """The folder's lock file cannot be used (a folder in its place, no permission), or the folder cannot be made."""


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


class OutputLock:
    """Context manager: holds `<folder>/<lock_file>`, or raises `OutputBusyError` naming the holder.

    Args:
      folder: the run's output folder (created if missing).
      flag: the flag that names it, for messages (`--output_dir`).
      lock_file: the lock file's name in it (`RUN_LOCK`; a model_dir's is `TRAIN_LOCK`).
      run: what holds it, for messages (`run`, `training run`).
      resumes: what a take-over of a stale lock means for this run, added to its log line.
      logger: the logger of that line.
    """

    def __init__(self, folder: str, flag: str = "--output_dir", lock_file: str = RUN_LOCK, run: str = "run",
                 resumes: str = "", logger: str = "commands.output_lock"):
        self.folder, self.flag, self.run, self.resumes = folder, flag, run, resumes
        self.path = os.path.join(folder, lock_file)
        self.log = logging.getLogger(logger)
        self._fd = None
        self._created = False

    def __enter__(self) -> "OutputLock":
        self.acquire()
        return self

    def __exit__(self, *_):
        self.release()
        return False

    def acquire(self) -> None:
        if "://" in self.folder:
            self.log.info("%s is remote: not locked against a second %s (keep to one run per folder)", self.folder,
                          self.run)
            return
        self._created = not os.path.isdir(self.folder)
        try:
            os.makedirs(self.folder, exist_ok=True)
        except OSError as e:
            raise OutputLockError(f"{self.flag} {self.folder} cannot be made a folder ({e.strerror})") from None
        while self._fd is None:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as e:  # a folder, a link, or a file this user cannot open: not ours to remove
                self._remove_created()
                what = "is a folder" if os.path.isdir(self.path) else f"cannot be opened ({e.strerror})"
                raise OutputLockError(f"{self.flag} {self.folder}: its lock file {self.path} {what}: if no {self.run} "
                                      f"uses this {self.flag.lstrip('-')}, remove it and rerun") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.parse(_read(fd))
                os.close(fd)
                self._remove_created()
                who = holder.describe() if holder else "a process that has not written its name yet"
                raise OutputBusyError(f"{self.flag} {self.folder} is in use by another {self.run} ({who}): wait for "
                                      f"it to finish, or use another {self.flag}") from None
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
                raise OutputBusyError(
                    f"{self.flag} {self.folder} is locked by a {self.run} on another host ({previous.describe()}), "
                    f"which cannot be checked from {me.host}: if that run is gone, remove {self.path} and rerun")
            if previous.alive_here() and previous.pid != me.pid:
                # alive but not holding the flock: a lock file copied from elsewhere, or an old version's
                raise OutputBusyError(f"{self.flag} {self.folder} names a running process as its {self.run} "
                                      f"({previous.describe()}): if it is not one, remove {self.path} and rerun")
            self.log.warning("%s: taking over the lock of a %s that ended without releasing it (%s)%s", self.folder,
                             self.run, previous.describe(), f"; {self.resumes}" if self.resumes else "")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(dataclasses.asdict(me)).encode("utf-8"), 0)
        os.fsync(fd)

    def _remove_created(self) -> None:
        if self._created and os.path.isdir(self.folder) and not os.listdir(self.folder):
            os.rmdir(self.folder)

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


def model_dir_lock(model_dir: str, run: str = "training run") -> OutputLock:
    """A training run's lock on its model_dir (`TRAIN_LOCK`); `models.convert --from` takes it too (`run`: what
    its messages call the holder)."""
    return OutputLock(model_dir, "--model_dir", TRAIN_LOCK, run,
                      resumes="its last checkpoint is where this run resumes", logger="models.training.train")


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
