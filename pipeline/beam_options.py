"""What every runner needs from the jobs: options, DoFns that pickle after `setup()`, counters as data.

Options: without `--runner`, jobs run on the `DirectRunner` in multi-processing mode with one worker per
core: offline, all cores, no Prism download (which a bare `DirectRunner` in Beam 2.77 attempts first). Any
other runner (`DataflowRunner`, `FlinkRunner`, `PortableRunner`, the Dask runner, `FnApiRunner` for
in-process tests) is passed through unchanged. See docs/distributed_runners.md.

DoFns: runners pickle DoFns, and some (Beam's Dask runner) pickle one again after calling its `setup()` on
it. `SetupDoFn` leaves the state built in `setup()` (TF functions, tokenizers) out of the pickle.

Counters: some runners have no metrics API (the Dask runner's `metrics()` raises). The jobs count into
`Counts` elements that travel with the data and end up in the job's metadata, the same on every runner;
Beam metrics get the same numbers for live monitoring where the runner has them.
"""

import collections
import sys

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

LOCAL_DEFAULTS = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=0"]

THREADED_DIRECT_WARNING = (
    "warning: --direct_running_mode multi_threading can corrupt elements on Beam 2.77 (its data plane "
    "flushes every second, also in the middle of an element: 'Unknown type tag'); see "
    "docs/distributed_runners.md")


def pipeline_options(beam_args: list[str]) -> PipelineOptions:
    """Beam options from the job's leftover command-line arguments, local-by-default."""
    has_runner = any(a == "--runner" or a.startswith("--runner=") for a in beam_args)
    options = PipelineOptions(list(beam_args) if has_runner else LOCAL_DEFAULTS + list(beam_args))
    if options.get_all_options().get("direct_running_mode") == "multi_threading":
        print(THREADED_DIRECT_WARNING, file=sys.stderr)
    return options


class SetupDoFn(beam.DoFn):
    """A DoFn whose `setup()` state never travels: attributes named in `setup_state` are left out of the
    pickle (a copy is set up again where it lands)."""

    setup_state: tuple[str, ...] = ()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in self.setup_state}


class Counts(dict):
    """Counter name -> count, as an element of a PCollection (see the module docstring)."""

    def report(self, namespace: str) -> "Counts":
        """Adds these counts to the runner's Beam metrics too; returns self."""
        for name, value in self.items():
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
