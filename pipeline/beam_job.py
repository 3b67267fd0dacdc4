"""The one edge of the Beam jobs (`pipeline.clean`, `pipeline.vocab`, `pipeline.pretraining_data` and
`downstream.embed`): how a job's launcher settings are given, how its pipeline runs to its end, and how its
command ends.

- `RunOptions`: the launcher's part of every job object: Beam's own options (passed through to Beam: the
  runner and its settings), `--verbose` and `--progress_seconds`. None of it changes the output's bytes.
- `run_pipeline`: the runner options (`beam_options.pipeline_options`: local by default, in-process for a
  small input), the pipeline built, run and waited for; around it the progress lines of the local runners
  (`progress`), the local workers' tracebacks filtered (`worker_stderr`), and SIGTERM stopping the local
  workers before the job's clean-up runs (`termination`).
- `command`: the one error path of the commands: a user error becomes `error: <message>` and exit status 2
  (`commands.user_errors`), a signal `JOB: stopped by signal N; ...` and 128 + N, and any other exception keeps
  its traceback.
"""

import dataclasses
from typing import Callable

import apache_beam as beam

from pipeline import progress
from pipeline.beam_options import check_beam_args, pipeline_options, quiet_worker_logs
from pipeline.termination import Terminated, stopped, stopping_workers
from pipeline.worker_stderr import without_worker_tracebacks
from commands.user_errors import exit_status


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a job runs, apart from what it computes.

    Args:
      beam_args: Beam's options as on a command line (`("--runner", "DataflowRunner", "--project", "P")`);
        none: the local default (`pipeline.beam_options`). Options Beam does not know are refused.
      verbose: full tracebacks with errors (also `PRETRAINING_TRACEBACK=1`).
      progress_seconds: on the local runners, a progress line this often (0: never), for the jobs that print
        them (`pipeline.vocab`, `pipeline.pretraining_data`, `downstream.embed`).
    """

    beam_args: tuple[str, ...] = ()
    verbose: bool = False
    progress_seconds: float = progress.DEFAULT_SECONDS

    def check(self) -> None:
        """Raises `UserError` for an unknown Beam option or a progress period out of range."""
        check_beam_args(list(self.beam_args))
        progress.check_seconds(self.progress_seconds)


def add_arguments(parser, progress_lines: bool = True) -> None:
    """`--verbose` (and `--progress_seconds` for a job that prints progress lines)."""
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    if progress_lines:
        progress.add_argument(parser)


def run_options(args, beam_args: list[str]) -> RunOptions:
    """The `RunOptions` of parsed flags (`add_arguments`') and the arguments left for Beam."""
    return RunOptions(beam_args=tuple(beam_args), verbose=args.verbose,
                      progress_seconds=getattr(args, "progress_seconds", 0.0))


def run_pipeline(build: Callable[[beam.Pipeline, str | None], None], options: RunOptions, files: list[str], *,
                 line: progress.ProgressLine | None = None, cleanup: Callable[[], None] = lambda: None,
                 before: Callable[[], None] = lambda: None):
    """Runs the pipeline that `build(p, progress_folder)` makes to its end; returns Beam's result.

    `files` (the input) size the local default runner; `line` says how progress lines read (None: no lines);
    `before()` runs first, inside the same guard as the pipeline (a file the run writes before its graph).
    On any failure (an error, Ctrl-C, SIGTERM: `Terminated`) the local workers are stopped first when it was
    a signal, then `cleanup()` removes what the run wrote, then the exception goes on."""
    quiet_worker_logs(options.verbose)
    beam_args = list(options.beam_args)
    seconds = options.progress_seconds if line is not None else 0
    with (stopping_workers(cleanup), without_worker_tracebacks(options.verbose),
          progress.reporter(line, seconds, beam_args) as reporter):
        before()
        with beam.Pipeline(options=pipeline_options(beam_args, files)) as p:
            build(p, reporter.folder)
    return p.result


def command(job: str, verbose: bool, call: Callable[[], object],
            removed: str = "this run's output was removed") -> int:
    """A job's command after its flags are parsed: `call()`, then exit status 0; `error: <message>` and 2 for a
    user error; `JOB: stopped by signal N; <removed>` and 128 + N for a signal (SIGINT outside the pipeline:
    `KeyboardInterrupt`); any other exception propagates with its traceback."""
    try:
        call()
    except (Terminated, KeyboardInterrupt) as e:
        return stopped(job, e, removed)
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, verbose)
    return 0
