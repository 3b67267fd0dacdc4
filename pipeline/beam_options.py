"""Pipeline options: the offline local default, and anything Beam accepts for the rest.

Without `--runner`, jobs run on the `DirectRunner` in multi-processing mode with one worker per core:
offline, all cores, no Prism download (which a bare `DirectRunner` in Beam 2.77 first attempts). Any other
runner (`DataflowRunner`, `FlinkRunner`, `FnApiRunner` for in-process tests) is passed through unchanged.
Options that neither the job nor Beam knows are refused before the job starts (Beam itself only logs
"Discarding unparseable args" and runs with the default: a mistyped `--max_seq_lenght 4` would be lost).
"""

import logging

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions

from preprocessing.user_errors import UserError, check_range, verbose_wanted

LOCAL_DEFAULTS = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=0"]
# Loggers that print a failing bundle's whole traceback, which the launcher reports itself in one line: the
# relay of local workers' log lines (multi-processing DirectRunner), and the DoFn runner (in-process runners).
_BUNDLE_ERROR_LOGGERS = ("apache_beam.runners.portability.local_job_service", "apache_beam.runners.common")


def pipeline_options(beam_args: list[str]) -> PipelineOptions:
    """Beam options from the job's leftover command-line arguments, local-by-default."""
    has_runner = any(a == "--runner" or a.startswith("--runner=") for a in beam_args)
    return PipelineOptions(list(beam_args) if has_runner else LOCAL_DEFAULTS + list(beam_args))


def check_beam_args(beam_args: list[str]) -> None:
    """Raises `UserError` for an option Beam does not know or a worker count out of range."""
    options = PipelineOptions(list(beam_args))
    beams_warning = logging.getLogger("apache_beam.options.pipeline_options")
    level = beams_warning.level
    beams_warning.setLevel(logging.ERROR)  # its "Discarding unparseable args": the error below says it
    try:
        known = options.get_all_options(retain_unknown_options=False)
        every = options.get_all_options(retain_unknown_options=True)
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
