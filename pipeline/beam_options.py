"""What every runner needs from the jobs: options, DoFns that pickle after `setup()`, counters as data.

Options: without `--runner`, jobs run on the `DirectRunner` in multi-processing mode with one worker per
core: offline, all cores, no Prism download (which a bare `DirectRunner` in Beam 2.77 attempts first). A
small input (under `SMALL_INPUT_BYTES`, decided from the input files' total size before the job starts) runs
in-process on the `FnApiRunner` instead: each worker process imports TensorFlow and builds the tokenizer, about
9 CPU-seconds each, which a small job cannot win back; the output is byte-identical either way. Naming
`--direct_num_workers` or `--direct_running_mode` keeps the multi-processing default as given. Any
other runner (`DataflowRunner`, `FlinkRunner`, `PortableRunner`, the Dask runner, `FnApiRunner` for
in-process tests) is passed through unchanged. See docs/distributed_runners.md. Options that neither the
job nor Beam (nor the named runner) knows are refused before the job starts (Beam itself only logs
"Discarding unparseable args" and runs with the default: a mistyped `--max_seq_lenght 4` would be lost).

DoFns: runners pickle DoFns, and some (Beam's Dask runner) pickle one again after calling its `setup()` on
it. `SetupDoFn` leaves the state built in `setup()` (TF functions, tokenizers) out of the pickle.

Counters: some runners have no metrics API (the Dask runner's `metrics()` raises). The jobs count into
`Counts` elements that travel with the data and end up in the job's metadata, the same on every runner;
Beam metrics get the same numbers for live monitoring where the runner has them.
"""

import collections
import contextlib
import importlib
import io
import logging
import sys

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from commands.user_errors import UserError, check_range, verbose_wanted

LOCAL_DEFAULTS = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=0"]
IN_PROCESS = ["--runner=FnApiRunner"]
# Below this many input bytes (a .gz file counts GZIP_RATIO times its size) the default is one process: the
# 40-line job took 27.9 CPU-seconds on 2 worker processes and 9.9 in-process (docs/figures.md).
SMALL_INPUT_BYTES = 4 * 2**20
GZIP_RATIO = 3
_WORKER_OPTIONS = ("--direct_num_workers", "--direct_running_mode")
# Loggers that print a failing bundle's whole traceback, which the launcher reports itself in one line: the
# relay of local workers' log lines (multi-processing DirectRunner), and the DoFn runner (in-process runners).
_BUNDLE_ERROR_LOGGERS = ("apache_beam.runners.portability.local_job_service", "apache_beam.runners.common")

THREADED_DIRECT_WARNING = (
    "warning: --direct_running_mode multi_threading can corrupt elements on Beam 2.77 (its data plane "
    "flushes every second, also in the middle of an element: 'Unknown type tag'); see "
    "docs/distributed_runners.md")


def local_defaults(beam_args: list[str], input_bytes: int | None = None) -> list[str]:
    """The runner options put before `beam_args`: none when a runner is named; in-process for a small input
    (`input_bytes`, see `input_size`) unless the worker options are given; else the multi-processing default."""
    if _given(beam_args, ("--runner",)):
        return []
    if input_bytes is not None and input_bytes < SMALL_INPUT_BYTES and not _given(beam_args, _WORKER_OPTIONS):
        return list(IN_PROCESS)
    return list(LOCAL_DEFAULTS)


def input_size(paths_and_sizes) -> int:
    """What `SMALL_INPUT_BYTES` is compared with: the summed sizes, a `.gz` file's times `GZIP_RATIO`."""
    return sum(size * (GZIP_RATIO if path.endswith(".gz") else 1) for path, size in paths_and_sizes)


def measured_input_size(files: list[str]) -> int:
    """`input_size` of the files (local or remote: Beam's file systems give the sizes)."""
    from apache_beam.io.filesystems import FileSystems

    return input_size((m.path, m.size_in_bytes) for result in FileSystems.match(list(files))
                      for m in result.metadata_list)


def _given(beam_args: list[str], names) -> bool:
    return any(a == n or a.startswith(n + "=") for a in beam_args for n in names)


def pipeline_options(beam_args: list[str], files: list[str] | None = None) -> PipelineOptions:
    """Beam options from the job's leftover command-line arguments, local-by-default: in-process when the
    input `files` (sized only when no runner or worker option is given) are under `SMALL_INPUT_BYTES`."""
    size = None
    if files is not None and not _given(beam_args, ("--runner",) + _WORKER_OPTIONS):
        size = measured_input_size(files)
    options = PipelineOptions(local_defaults(beam_args, size) + list(beam_args))
    if options.get_all_options().get("direct_running_mode") == "multi_threading":
        print(THREADED_DIRECT_WARNING, file=sys.stderr)
    return options



def check_beam_args(beam_args: list[str]) -> None:
    """Raises `UserError` for an option Beam does not know or a worker count out of range."""
    _import_named_runner(beam_args)
    options = PipelineOptions(list(beam_args))
    beams_warning = logging.getLogger("apache_beam.options.pipeline_options")
    level = beams_warning.level
    beams_warning.setLevel(logging.ERROR)  # its "Discarding unparseable args": the error below says it
    usage = io.StringIO()
    try:
        with contextlib.redirect_stderr(usage):  # a bad value: argparse's usage (144 lines) and exit 2
            known = options.get_all_options(retain_unknown_options=False)
            every = options.get_all_options(retain_unknown_options=True)
    except SystemExit:
        said = [line for line in usage.getvalue().splitlines() if ": error: " in line]
        raise UserError(said[-1].split(": error: ", 1)[1] if said else "bad Beam option") from None
    finally:
        beams_warning.setLevel(level)
    unknown = sorted(set(every) - set(known))
    if unknown:
        raise UserError(f"unknown option --{unknown[0]} (neither this job's nor Beam's; see --help)")
    check_range("--direct_num_workers", options.view_as(DirectOptions).direct_num_workers or 0, 0, 1024)


def quiet_worker_logs(verbose: bool = False) -> None:
    """Hides the tracebacks Beam logs for a failing bundle (and local workers' relayed lines) unless
    `--verbose`."""
    if not verbose_wanted(verbose):
        for name in _BUNDLE_ERROR_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _import_named_runner(beam_args: list[str]) -> None:
    """A runner given by its module path (`apache_beam.runners.dask.dask_runner.DaskRunner`) defines its own
    options (`--dask_client_address`, ...): import it, so that they count as known."""
    for i, arg in enumerate(beam_args):
        name = arg.partition("=")[2] if arg.startswith("--runner=") else (
            beam_args[i + 1] if arg == "--runner" and i + 1 < len(beam_args) else "")
        module = name.rpartition(".")[0]
        if module:
            try:
                importlib.import_module(module)
            except ImportError as e:
                raise UserError(f"--runner {name}: cannot import {module} ({e})") from None

class SetupDoFn(beam.DoFn):
    """A DoFn whose `setup()` state never travels: attributes named in `setup_state` are left out of the
    pickle (a copy is set up again where it lands)."""

    setup_state: tuple[str, ...] = ()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in self.setup_state}


class Counts(dict):
    """Counter name -> count, as an element of a PCollection (see the module docstring)."""

    def report(self, namespace: str) -> "Counts":
        """Adds these counts to the runner's Beam metrics too (not the keys starting with `@`, which only
        travel with the data); returns self."""
        for name, value in self.items():
            if name.startswith("@"):
                continue
            Metrics.counter(namespace, name).inc(value)
        return self


def split_counts(pcoll, label: str):
    """`pcoll` of data and `Counts` -> (the data, the `Counts`). Two filters, not tagged outputs: the Dask
    runner hands every tagged output of a ParDo to each consumer."""
    data = pcoll | f"{label}Data" >> beam.Filter(lambda x: not isinstance(x, Counts))
    counts = pcoll | f"{label}Counts" >> beam.Filter(lambda x: isinstance(x, Counts))
    return data, counts


def total(counts) -> dict[str, int]:
    """The sum of several `Counts` (or plain dicts), as a plain dict sorted by name."""
    summed = collections.Counter()
    for c in counts:
        summed.update(c)
    return dict(sorted(summed.items()))
