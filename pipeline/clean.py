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

`--overwrite` (`commands.overwrite`, every command's one contract) removes, once every check has passed,
the earlier run's report and the cleaned files it lists, nothing else; an output folder holding another kind
of output, or that an input file sits in (a rerun would read its own output), is refused. A failed or stopped
run (SIGTERM: its local workers stopped first) leaves none of its files; exit status 128 + N on signal N.
"""

import argparse
import json
import os
import sys

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline import clean_report, corpus_io
from pipeline.beam_options import Counts, check_beam_args, pipeline_options, quiet_worker_logs, split_counts, total
from pipeline.cleaning import CleanDocuments, read_heldout
from pipeline.documents import ReadDocuments
from pipeline.termination import Terminated, stopped, stopping_workers
from pipeline.worker_stderr import without_worker_tracebacks
from commands import overwrite
from commands.user_errors import UserError, exit_status, writable_dir

REPORT = "clean_report"


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


def _finish(gathered, output_dir: str, files: list[str], heldout: list[str], job: dict) -> None:
    reports = [x for x in gathered if isinstance(x, dict) and "clusters" in x]
    (report,) = reports
    counters = total([report["counters"]] + [x for x in gathered if isinstance(x, Counts)])
    report = {**report, "counters": counters}
    extra = {"config": job, "files": sorted(x for x in gathered if isinstance(x, str))}
    clean_report.write_report(report, os.path.join(output_dir, REPORT), files, heldout, "clean", extra)


def build_pipeline(p, args, files: list[str], heldout: list[str]) -> None:
    config = clean_report.with_key_ranges(clean_report.clean_config(args), files + heldout)
    read = p | "Files" >> beam.Create(list(enumerate(files))) | "ReadDocuments" >> beam.ParDo(ReadDocuments())
    docs, read_counts = split_counts(read, "Read")
    held = read_heldout(p, heldout) if heldout else None
    kept, report = docs | "Clean" >> CleanDocuments(config, held)
    markers = p | "EveryFile" >> beam.Create([(i, None) for i in range(len(files))])
    written = ((kept | "ByFile" >> beam.MapTuple(lambda doc_id, lines: (doc_id[0], (doc_id[1], lines))), markers)
               | "WithEveryFile" >> beam.Flatten()
               | "GroupFiles" >> beam.GroupByKey()
               | "WriteFiles" >> beam.Map(_write_file, args.output_dir, files))
    ((report, read_counts, written)
     | "WithCounts" >> beam.Flatten()
     | "Gather" >> beam.combiners.ToList()
     | "WriteReport" >> beam.Map(_finish, args.output_dir, files, heldout, clean_report.job_config(args)))


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m pipeline.clean", description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="file pattern, BERT format (local or gs://, .gz ok)")
    parser.add_argument("--output_dir", required=True)
    clean_report.add_arguments(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier run in --output_dir")
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    return parser.parse_known_args(argv)


def run(argv=None) -> int:
    args, beam_args = parse_args(argv)
    quiet_worker_logs(args.verbose)
    try:
        return _run(args, beam_args)
    except Terminated as e:
        return stopped("clean", e)
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)


def _run(args, beam_args) -> int:
    check_beam_args(beam_args)
    writable_dir("--output_dir", args.output_dir)
    clean_report.clean_config(args)
    files = corpus_io.check_pattern(args.input)
    heldout = clean_report.heldout_files(args, files)
    names = [output_name(i, f) for i, f in enumerate(files)]
    earlier = overwrite.plan(args.output_dir, overwrite.CLEAN, args.overwrite, input_files=files + heldout,
                             reads=corpus_io.pattern_reads(args.input))
    taken = sorted(set(names) & overwrite.existing(args.output_dir) - set(earlier.names))
    if taken:
        raise UserError(f"--output_dir {args.output_dir} holds {taken[0]}, which this run would write and which is "
                        f"no earlier run's output: move it, or use another --output_dir")
    local = "://" not in args.output_dir
    created = local and not os.path.exists(args.output_dir)
    os.makedirs(args.output_dir, exist_ok=True) if local else None
    earlier.remove()  # --overwrite: the earlier run's files (its report lists them), once every check passed
    print(f"clean: {len(files)} file(s) -> {args.output_dir}", file=sys.stderr)
    options = pipeline_options(beam_args, files + heldout)

    def cleanup():  # a failed or stopped run leaves none of its files
        overwrite.remove_unfinished(args.output_dir, overwrite.CLEAN)
        present = overwrite.existing(args.output_dir)
        for name in names:
            if name in present:
                FileSystems.delete([os.path.join(args.output_dir, name)])
        if created and not os.listdir(args.output_dir):
            os.rmdir(args.output_dir)

    with stopping_workers(cleanup), without_worker_tracebacks(args.verbose), beam.Pipeline(options=options) as p:
        build_pipeline(p, args, files, heldout)
    with FileSystems.open(os.path.join(args.output_dir, REPORT + ".json")) as f:
        print(json.load(f)["summary"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(run())
