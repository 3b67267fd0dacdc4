"""Pipeline options: the offline local default, and anything Beam accepts for the rest.

Without `--runner`, jobs run on the `DirectRunner` in multi-processing mode with one worker per core:
offline, all cores, no Prism download (which a bare `DirectRunner` in Beam 2.77 attempts first). Any other
runner (`DataflowRunner`, `FlinkRunner`, `FnApiRunner` for in-process tests) is passed through unchanged.
"""

from apache_beam.options.pipeline_options import PipelineOptions

LOCAL_DEFAULTS = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=0"]


def pipeline_options(beam_args: list[str]) -> PipelineOptions:
    """Beam options from the job's leftover command-line arguments, local-by-default."""
    has_runner = any(a == "--runner" or a.startswith("--runner=") for a in beam_args)
    return PipelineOptions(list(beam_args) if has_runner else LOCAL_DEFAULTS + list(beam_args))
