"""Beam job: clean and deduplicate a corpus, writing it back in the same format, with a report.

    python -m pipeline.clean --input 'corpus/*.txt' --output_dir cleaned/ [--filters c4,...] \\
        [--dedup exact,spans,near,threshold=0.8,...] [--decontaminate 'heldout/*.txt'] [--overwrite] \\
        [Beam options]

ReadDocuments (one file per worker) -> CleanDocuments (`pipeline.cleaning`) -> one output file per input file,
`NNNNN-<name>` (`.gz` inputs are written uncompressed), its kept documents in their input order, one sentence a
line and a blank line between documents (a file whose documents were all dropped is written empty). Then
`clean_report.json` / `clean_report.md` (counters, shares, the largest clusters with a text sample) beside
them, written last (a folder without it is an unfinished run), and one summary line on stderr. The output is
byte-identical on every runner. The same cleaning runs inside `pipeline.vocab` and
`pipeline.pretraining_data` with the same flags.

One run at a time: the run holds the folder's lock (`commands.output_lock`); a second run into it is refused
naming the first. `--overwrite` (`commands.overwrite`, every command's one contract) removes, once every
check has passed, the earlier run's report and the cleaned files it lists, nothing else; an output folder
holding another kind of output, or that an input file sits in (a rerun would read its own output), is
refused. A failed or stopped
run (SIGTERM: its local workers stopped first) leaves none of its files; exit status 128 + N on signal N.

The same job from Python is one call on a `CleanJob`, which holds what the flags say:

    run(CleanJob(input="corpus/*.txt", output_dir="cleaned", cleaning=Cleaning(dedup="all")))
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import json
import os
import sys

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline import beam_job, clean_report, corpus_io
from pipeline.beam_job import RunOptions
from pipeline.beam_options import Counts, split_counts, total
from pipeline.clean_report import Cleaning, CleanPlan
from pipeline.cleaning import CleanDocuments, read_heldout
from pipeline.documents import ReadDocuments
from commands import overwrite
from commands.job_fields import checked, output_of
from commands.output_lock import OutputLock
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, writable_dir

REPORT = "clean_report"


@checked({"output_dir": output_of("input")})
@dataclasses.dataclass(frozen=True)
class CleanJob:
    """A cleaning job: what `python -m pipeline.clean` runs, and its Python API (`run`).

    Args:
      input: file pattern, one sentence a line, a blank line between documents (local or gs://, `.gz` ok).
      output_dir: the folder of the cleaned files and the report.
      cleaning: the filters, deduplication and decontamination to run (`clean_report.Cleaning`; none: the
        files are copied as read, blank-line and encoding fixes counted).
      overwrite: replace an earlier run in `output_dir` (`commands.overwrite`).
      run_options: Beam's options and `verbose` (`beam_job.RunOptions`; this job prints no progress lines).

    Example:
      >>> CleanJob(input="corpus/*.txt", output_dir="cleaned", cleaning=Cleaning(dedup="all")).metadata_config()
      {'input': 'corpus/*.txt', 'output_dir': 'cleaned', 'dedup': 'all', 'overwrite': False, 'verbose': False}
    """

    input: str
    output_dir: str
    cleaning: Cleaning = Cleaning()
    overwrite: bool = False
    run_options: RunOptions = RunOptions()

    def metadata_config(self) -> dict:
        """The report's `config`: the job under stable keys, in this order (the file keeps it)."""
        return {"input": self.input, "output_dir": self.output_dir, **self.cleaning.flags(),
                "overwrite": self.overwrite, "verbose": self.run_options.verbose}


@dataclasses.dataclass(frozen=True)
class CleanResult:
    """What a finished cleaning job wrote: `output_dir`, its cleaned `files` (names in it, one per input file),
    the `report` (`clean_report.json`; `.md` beside it), its `counters` and one-line `summary`."""

    output_dir: str
    files: tuple[str, ...]
    report: str
    counters: dict
    summary: str


def output_name(index: int, path: str) -> str:
    return f"{index:05d}-{os.path.basename(path).removesuffix('.gz')}"


def _write_file(item, output_dir: str, files: list[str]) -> str:
    """`(file index, [(document index, lines) or None, ...])` -> the file, written aside then renamed."""
    index, docs = item
    docs = sorted(d for d in docs if d is not None)
    name = output_name(index, files[index])
    path, tmp = os.path.join(output_dir, name), os.path.join(output_dir, f".{name}.incomplete")
    with FileSystems.create(tmp) as f:
        for n, (_, lines) in enumerate(docs):
            f.write((("\n" if n else "") + "\n".join(lines) + "\n").encode("utf-8"))
    FileSystems.rename([tmp], [path])
    return name


def _finish(gathered, output_dir: str, files: list[str], heldout: tuple[str, ...], job: dict) -> None:
    reports = [x for x in gathered if isinstance(x, dict) and "clusters" in x]
    (report,) = reports
    counters = total([report["counters"]] + [x for x in gathered if isinstance(x, Counts)])
    report = {**report, "counters": counters}
    extra = {"config": job, "files": sorted(x for x in gathered if isinstance(x, str))}
    clean_report.write_report(report, os.path.join(output_dir, REPORT), files, list(heldout), "clean", extra)


def build_pipeline(p, job: CleanJob, files: list[str], cleaning: CleanPlan) -> None:
    """The job's graph over the input `files`, cleaned as `cleaning` plans (`clean_report.plan`)."""
    read = p | "Files" >> beam.Create(list(enumerate(files))) | "ReadDocuments" >> beam.ParDo(ReadDocuments())
    docs, read_counts = split_counts(read, "Read")
    held = read_heldout(p, list(cleaning.heldout)) if cleaning.heldout else None
    kept, report = docs | "Clean" >> CleanDocuments(cleaning.config, held)  # a report even with nothing asked
    markers = p | "EveryFile" >> beam.Create([(i, None) for i in range(len(files))])
    written = ((kept | "ByFile" >> beam.MapTuple(lambda doc_id, lines: (doc_id[0], (doc_id[1], lines))), markers)
               | "WithEveryFile" >> beam.Flatten()
               | "GroupFiles" >> beam.GroupByKey()
               | "WriteFiles" >> beam.Map(_write_file, job.output_dir, files))
    ((report, read_counts, written)
     | "WithCounts" >> beam.Flatten()
     | "Gather" >> beam.combiners.ToList()
     | "WriteReport" >> beam.Map(_finish, job.output_dir, files, cleaning.heldout, job.metadata_config()))


def _plan_output(job: CleanJob, files: list[str], heldout: tuple[str, ...]) -> overwrite.Plan:
    """What `--overwrite` removes; `UserError` for an output folder this run may not write into."""
    earlier = overwrite.plan(job.output_dir, overwrite.CLEAN, job.overwrite, input_files=files + list(heldout),
                             reads=corpus_io.pattern_reads(job.input))
    names = [output_name(i, f) for i, f in enumerate(files)]
    taken = sorted(set(names) & overwrite.existing(job.output_dir) - set(earlier.names))
    if taken:
        raise UserError(f"--output_dir {job.output_dir} holds {taken[0]}, which this run would write and which is "
                        f"no earlier run's output: move it, or use another --output_dir")
    return earlier


def run(job: CleanJob) -> CleanResult:
    """Runs `job` to its end and returns what it wrote, printing its summary line on stderr. Raises
    `UserError` (bad flags or input, a full disk) or `termination.Terminated` (SIGTERM): a failed run leaves
    none of its files."""
    job.run_options.check()
    files = corpus_io.check_pattern(job.input)
    cleaning = clean_report.plan(job.cleaning, files)
    writable_dir("--output_dir", job.output_dir)
    with OutputLock(job.output_dir):  # one run per folder: its files and its report, never another's
        return _run(job, files, cleaning)


def _run(job: CleanJob, files: list[str], cleaning: CleanPlan) -> CleanResult:
    """`run` under the output folder's lock: the folder checked, cleared (`--overwrite`), written."""
    earlier = _plan_output(job, files, cleaning.heldout)
    local = "://" not in job.output_dir
    created = local and not os.path.exists(job.output_dir)
    os.makedirs(job.output_dir, exist_ok=True) if local else None
    earlier.remove()  # --overwrite: the earlier run's files (its report lists them), once every check passed
    print(f"clean: {len(files)} file(s) -> {job.output_dir}", file=sys.stderr)
    names = [output_name(i, f) for i, f in enumerate(files)]

    def cleanup():  # a failed or stopped run leaves none of its files
        overwrite.remove_unfinished(job.output_dir, overwrite.CLEAN)
        present = overwrite.existing(job.output_dir)
        for name in names:
            if name in present:
                FileSystems.delete([os.path.join(job.output_dir, name)])
        if created and not os.listdir(job.output_dir):
            os.rmdir(job.output_dir)

    beam_job.run_pipeline(lambda p, _: build_pipeline(p, job, files, cleaning), job.run_options,
                          files + list(cleaning.heldout), cleanup=cleanup)
    report = os.path.join(job.output_dir, REPORT + ".json")
    with FileSystems.open(report) as f:
        record = json.load(f)
    print(record["summary"], file=sys.stderr)
    return CleanResult(job.output_dir, tuple(record["files"]), report, record["counters"], record["summary"])


def parse_args(argv) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m pipeline.clean", description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="file pattern, BERT format (local or gs://, .gz ok)")
    parser.add_argument("--output_dir", required=True)
    clean_report.add_arguments(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier run in --output_dir")
    beam_job.add_arguments(parser, progress_lines=False)
    return parser.parse_known_args(argv)


def job_from_args(args: argparse.Namespace, beam_args: list[str]) -> CleanJob:
    """The `CleanJob` that parsed flags describe; raises `UserError` for bad cleaning specs."""
    return CleanJob(input=args.input, output_dir=args.output_dir, cleaning=clean_report.from_args(args),
                    overwrite=args.overwrite, run_options=beam_job.run_options(args, beam_args))


@quiet_command
def main(argv=None) -> int:
    """`python -m pipeline.clean`: parse, build the job, run it."""
    args, beam_args = parse_args(argv)
    return beam_job.command("clean", args.verbose, lambda: run(job_from_args(args, beam_args)))


if __name__ == "__main__":
    sys.exit(main())
