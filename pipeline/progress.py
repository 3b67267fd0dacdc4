"""Progress lines for the Beam jobs on the local runners: bytes read of the total, units per stage, rate, ETA.

The jobs run for an hour on a few GB on one machine, and Beam's local runners print nothing until the end.
The workers (separate processes under the default multi-processing DirectRunner) write their running totals
now and then (at most once a second each) as tiny JSON files into a folder of the launcher's; a thread in the
launcher sums them and prints one line every `--progress_seconds`, in the style of the trainer's:

    pretraining_data: read 41.2 MB/96.0 MB (43%) 1,130 documents | tokenized 768 | written 0 | 1.9 MB/s | eta 29s | 21s

The ETA is that of the first stage not done: reading while bytes remain (by the byte rate), then each later
stage against the units read (by its own rate). Nothing here touches the data, so the output bytes do not
change; with the folder unset (any other runner: Dataflow, Dask, Flink, which have their own monitoring)
the DoFns skip it with one `if`. A retried bundle may count twice in a later stage: the lines are a sign of
life and an estimate, the counters in metadata.json are the figures.
"""

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid

import apache_beam as beam

LOCAL_RUNNERS = ("DirectRunner", "FnApiRunner", "SwitchingDirectRunner", "BundleBasedDirectRunner")
DEFAULT_SECONDS = 15.0


def is_local(beam_args: list[str]) -> bool:
    """True for the jobs' default runner and the in-process ones (the workers share this machine's disk)."""
    for i, arg in enumerate(beam_args):
        if arg == "--runner" or arg.startswith("--runner="):
            name = arg.partition("=")[2] if "=" in arg else (beam_args[i + 1] if i + 1 < len(beam_args) else "")
            return name.rpartition(".")[2] in LOCAL_RUNNERS
    return True


class StageProgress:
    """Worker side: running totals of one stage, written to `folder` at most every `every_seconds`.

    Args:
      folder: the launcher's progress folder (None: do nothing).
      stage: the stage's name (`read`, `tokenized`, ...).
      name: the file's name within the stage; a stable one (the input file's index) is overwritten by a
        retry instead of counted twice; by default one per instance.

    Example:
      progress = StageProgress(folder, "read", name=str(file_index))
      progress.update(units=1)                      # per document
      progress.update(position=f.tell())            # now and then
      progress.flush()                              # at the end of the file
    """

    def __init__(self, folder: str | None, stage: str, name: str | None = None, every_seconds: float = 1.0,
                 check_every: int = 1):
        self.folder, self.every_seconds, self.check_every = folder, every_seconds, check_every
        self.path = folder and os.path.join(folder, f"{stage}.{name or uuid.uuid4().hex[:12]}.json")
        self.units, self.bytes, self._written, self._calls = 0, 0, time.monotonic(), 0

    def update(self, units: int = 0, position: int | None = None) -> None:
        """Adds `units`, sets the bytes read to `position` if given; writes if `every_seconds` have passed
        (looked at on every `check_every`-th call without a position: a reader calls this per line)."""
        self.units += units
        self._calls += 1
        if position is not None:
            self.bytes = position
        elif self._calls % self.check_every:
            return
        if self.folder and time.monotonic() - self._written >= self.every_seconds:
            self.flush()

    def flush(self) -> None:
        if not self.folder:
            return
        self._written = time.monotonic()
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with contextlib.suppress(OSError):  # the launcher may have finished and removed the folder
            with open(temporary, "w") as f:
                json.dump({"units": self.units, "bytes": self.bytes}, f)
            os.replace(temporary, self.path)


def read_totals(folder: str) -> dict[str, dict[str, int]]:
    """Stage -> summed `units` and `bytes` of every worker file in `folder`."""
    totals = {}
    for name in os.listdir(folder):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name)) as f:
                figures = json.load(f)
        except (OSError, ValueError):  # replaced or removed while listed
            continue
        stage = totals.setdefault(name.split(".")[0], {"units": 0, "bytes": 0})
        stage["units"] += figures["units"]
        stage["bytes"] += figures["bytes"]
    return totals


def duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


@dataclasses.dataclass(frozen=True)
class ProgressLine:
    """How a job's line reads: `job` prefix, the `unit` counted when reading (`documents`, `lines`), the later
    `stages` in order, and the input's `total_bytes`."""
    job: str
    unit: str
    stages: tuple[str, ...]
    total_bytes: int

    def format(self, totals: dict, elapsed: float, rates: dict[str, float]) -> str:
        read = totals.get("read", {"units": 0, "bytes": 0})
        done_bytes = min(read["bytes"], self.total_bytes)
        pct = 100 * done_bytes / self.total_bytes if self.total_bytes else 100
        parts = [f"read {size(done_bytes)}/{size(self.total_bytes)} ({pct:.0f}%) {read['units']:,} {self.unit}"]
        parts += [f"{stage} {totals.get(stage, {}).get('units', 0):,}" for stage in self.stages]
        parts += self._rate_and_eta(totals, done_bytes, read["units"], rates)
        return f"{self.job}: " + " | ".join(parts + [duration(elapsed)])

    def _rate_and_eta(self, totals, done_bytes, read_units, rates) -> list[str]:
        if done_bytes < self.total_bytes:
            rate = rates.get("read", 0.0)
            eta = duration((self.total_bytes - done_bytes) / rate) if rate > 0 else "?"
            return [f"{size(rate)}/s", f"eta {eta}"]
        for stage in self.stages:
            units = totals.get(stage, {}).get("units", 0)
            if units < read_units:
                rate = rates.get(stage, 0.0)
                eta = duration((read_units - units) / rate) if rate > 0 else "?"
                return [f"{stage} {rate:,.0f} {self.unit}/s", f"eta {eta}"]
        return ["finishing"]


class ProgressReporter:
    """Launcher side: a thread printing `line`'s progress every `seconds` from the workers' files in its
    own temporary folder (`self.folder`, to give the DoFns; None when `seconds` <= 0). A context manager:
    the folder is removed at the end.

    Example:
      with ProgressReporter(ProgressLine("vocab", "lines", ("counted",), total), 15) as reporter:
          run the pipeline with DoFns given reporter.folder
    """

    def __init__(self, line: ProgressLine, seconds: float, stream=None):
        self.line, self.seconds, self.stream = line, seconds, stream or sys.stderr
        self.folder = tempfile.mkdtemp(prefix="beam-progress-") if seconds > 0 else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._first_seen: dict[str, tuple[float, int]] = {}  # stage -> (time, amount) when first non-zero

    def __enter__(self):
        self._started = time.monotonic()
        if self.folder:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.folder:
            self._thread.join()
            shutil.rmtree(self.folder, ignore_errors=True)

    def _loop(self):
        while not self._stop.wait(self.seconds):
            print(self.report(), file=self.stream, flush=True)

    def report(self) -> str:
        """The line for now (the thread prints it every `seconds`)."""
        now = time.monotonic()
        totals = read_totals(self.folder)
        rates = {}
        for stage in ("read",) + self.line.stages:
            amount = totals.get(stage, {}).get("bytes" if stage == "read" else "units", 0)
            if amount and stage not in self._first_seen:
                self._first_seen[stage] = (now, amount) if stage != "read" else (self._started, 0)
            if stage in self._first_seen:
                since, base = self._first_seen[stage]
                rates[stage] = (amount - base) / max(now - since, 1e-9)
        return self.line.format(totals, now - self._started, rates)


class Tally(beam.DoFn):
    """A pass-through step that counts `units(element)` into stage `stage`'s progress (see the module
    docstring); written at most once a second and at the end of each bundle. Output unchanged."""

    def __init__(self, folder: str, stage: str, units=lambda element: 1):
        self.folder, self.stage, self.units = folder, stage, units
        self._progress = None

    def setup(self):
        self._progress = StageProgress(self.folder, self.stage)

    def process(self, element):
        self._progress.update(self.units(element))
        yield element

    def finish_bundle(self):
        self._progress.flush()

    def __getstate__(self):
        return {**self.__dict__, "_progress": None}


def tally(pcoll, folder: str | None, stage: str, units=lambda element: 1):
    """`pcoll` through a `Tally` step named `Progress<Stage>` when `folder` is set; `pcoll` itself otherwise."""
    if not folder:
        return pcoll
    return pcoll | f"Progress{stage.capitalize()}" >> beam.ParDo(Tally(folder, stage, units))


MIN_SECONDS, MAX_SECONDS = 0.1, 86400.0  # at most ten lines a second


def add_argument(parser) -> None:
    """The jobs' `--progress_seconds` flag (checked by `check_seconds` with the job's other flags)."""
    parser.add_argument("--progress_seconds", type=float, default=DEFAULT_SECONDS,
                        help=f"on the local runners, print a progress line this often (0: never; else "
                             f"{MIN_SECONDS:g} to {MAX_SECONDS:g})")


def check_seconds(seconds: float) -> float:
    """`--progress_seconds`: 0 (no progress lines) or in [0.1, 86400]; `UserError` otherwise (a negative or
    nan value would turn the lines off unsaid, inf would stop the reporting thread, 0.001 floods stderr)."""
    from commands.user_errors import UserError

    if seconds == 0:
        return seconds
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:  # nan compares false
        raise UserError(f"--progress_seconds {seconds:g} is out of range; allowed: 0 (no progress lines) or "
                        f"[{MIN_SECONDS:g}, {MAX_SECONDS:g}]")
    return seconds


def input_bytes(files: list[str]) -> int:
    """The summed size of the input files (compressed size for `.gz`: what the reader's position counts)."""
    from apache_beam.io.filesystems import FileSystems

    return sum(m.size_in_bytes for result in FileSystems.match(files) for m in result.metadata_list)


def reporter(line: ProgressLine, seconds: float, beam_args: list[str]) -> "ProgressReporter":
    """A `ProgressReporter` for a job: off (no folder, no thread) on non-local runners or with seconds <= 0."""
    return ProgressReporter(line, seconds if is_local(beam_args) else 0)
