"""Beam job: raw text in BERT's format -> sharded TFRecords for BERT, GPT or the biLM, plus metadata.json.

    python -m pipeline.pretraining_data --model {bert,gpt,bilm} --input 'PATTERN' --vocab vocab.txt \\
        --output_dir DIR [--max_seq_length 128] [--max_predictions_per_seq 20] [--masked_lm_prob 0.15] \\
        [--dupe_factor 10] [--short_seq_prob 0.1] [--whole_word_mask] [--masking static|dynamic] \\
        [--seed N] [--num_shards N] [--gzip] [--docs_per_bucket 500] [--overwrite] [Beam options]

The flow (each step a named Beam transform):
  ReadDocuments (one file per worker, streamed) -> [Clean, with the cleaning flags: `clean_report`] ->
  BatchDocuments (a GroupByKey on (file, document index // 256): spreads documents over workers in batches
  that are the same on every runner) ->
  TokenizeDocuments (batched tf-text) -> AssignBuckets (stable hash of the document id; no side input, see
  `pipeline.buckets`) -> GroupByKey ->
  MakeExamples (per bucket: BERT pairs with random next segments from the bucket's other documents and
  masking, or GPT / biLM windows; written as the bucket's shard) -> metadata.json (with the counters,
  which travel with the data: the same on every runner, metrics API or not).
One bucket is one output shard: `--num_shards`, or `ceil(documents / docs_per_bucket)`. No worker holds
the corpus: the largest unit is a bucket of tokenized documents, and examples are streamed to the shard.
The output is byte-identical for the same input and seed whatever the runner or worker count.

One run at a time: the run holds the output folder's lock (`commands.output_lock`); a second run into it is
refused naming the first, and one into a folder holding another run needs `--overwrite` (`commands.overwrite`).

The same job from Python is one call on a `PretrainingDataJob` (`pipeline.pretraining_job`), which holds
what the flags say:

    run(PretrainingDataJob(model="bert", input="corpus/*.txt", vocab="vocab.txt", output_dir="bert_data"))
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import json
import os
import sys
import time

import apache_beam as beam
import tensorflow as tf

from pipeline import beam_job, clean_report, corpus_io, dataset_metadata, progress
from pipeline.beam_options import split_counts
from pipeline.buckets import AssignBuckets
from pipeline.clean_report import CleanPlan
from pipeline.documents import ReadDocuments
from pipeline.example_makers import ExampleConfig, MakeExamples, TokenizeDocuments
from pipeline.pretraining_job import MASKING, MODELS, PretrainingDataJob
from pipeline.shard_writer import write_failed
from commands import overwrite
from commands.output_lock import OutputLock
from preprocessing.metadata import VOCAB_FILE, DatasetMetadata
from commands.tf_startup import quiet_command
from commands.user_errors import UserError
from preprocessing.vocabulary import Vocabulary

_BATCH_DOCUMENTS = 256


@dataclasses.dataclass(frozen=True)
class PretrainingDataResult:
    """What a finished job wrote: its `output_dir` and the `metadata` it wrote there (shards, examples,
    counters), the cleaning report's one line (with cleaning), the `warnings` it printed and its `seconds`."""

    output_dir: str
    metadata: DatasetMetadata
    cleaning_summary: str | None = None
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A job resolved against its files, before it runs: the examples' config (the vocabulary read, its case
    checked), the input `files` (matched once), the cleaning plan, and what `--overwrite` removes."""

    examples: ExampleConfig
    files: tuple[str, ...]
    cleaning: CleanPlan
    earlier: overwrite.Plan


class TokenizedDocuments(beam.PTransform):
    """Documents `(document id, [sentence, ...])` -> `(document id, tokenized document)`, in batches that are
    the same on every runner."""

    def __init__(self, config: ExampleConfig, progress_folder: str | None = None):
        super().__init__()
        self.config, self.progress_folder = config, progress_folder

    def expand(self, documents):
        batches = (documents
                   | "KeyByBatch" >> beam.Map(lambda doc: ((doc[0][0], doc[0][1] // _BATCH_DOCUMENTS), doc))
                   | "BatchDocuments" >> beam.GroupByKey()
                   | "InOrder" >> beam.MapTuple(lambda _, docs: sorted(docs)))
        return (progress.tally(batches, self.progress_folder, "tokenized", len)
                | "TokenizeDocuments" >> beam.ParDo(TokenizeDocuments(self.config)))


def build_pipeline(p, job: PretrainingDataJob, resolved: Resolved, progress_folder: str | None = None) -> None:
    """The job's graph (see the module docstring); `metadata.json` is its last write."""
    files, config = list(resolved.files), resolved.examples
    read = (p | "Files" >> beam.Create(list(enumerate(files)))
            | "ReadDocuments" >> beam.ParDo(ReadDocuments(progress_folder=progress_folder)))
    documents, read_counts = split_counts(read, "Read")
    documents, report = clean_report.clean_step(p, resolved.cleaning, documents)
    if report is not None:  # --dedup / --filters / --decontaminate
        base = os.path.join(job.output_dir, clean_report.REPORT_FILES[0].removesuffix(".json"))
        cleaned = report | "CleanReport" >> beam.Map(clean_report.write_job_report, base, files,
                                                     resolved.cleaning.heldout, "pretraining_data")
        read_counts = (read_counts, cleaned) | "WithCleanCounts" >> beam.Flatten()
    summaries = (documents
                 | "Documents" >> TokenizedDocuments(config, progress_folder)
                 | "AssignBuckets" >> AssignBuckets(config.seed, job.num_shards, job.docs_per_bucket,
                                                    _BATCH_DOCUMENTS)
                 | "GroupBuckets" >> beam.GroupByKey()
                 | "MakeExamples" >> beam.ParDo(MakeExamples(config, job.output_dir, job.gzip)))
    summaries = progress.tally(summaries, progress_folder, "written",
                               lambda s: s["counters"].get("documents_with_tokens", 0))
    ((summaries, read_counts)
     | "WithCounts" >> beam.Flatten()
     | "Gather" >> beam.combiners.ToList()
     | "WriteMetadata" >> beam.Map(dataset_metadata.finish, job.output_dir,
                                   dataset_metadata.planned(job, config, len(files))))


def example_config(job: PretrainingDataJob) -> ExampleConfig:
    """What the DoFns need of `job`: the vocabulary read, its case resolved (or checked against the job's)."""
    vocab = Vocabulary.from_file(job.vocab)
    lower_case = (not vocab.looks_cased) if job.lower_case is None else job.lower_case
    if lower_case and vocab.looks_cased:
        raise UserError(f"--lower_case with a cased vocabulary ({job.vocab} has upper-case entries)")
    if not lower_case and not vocab.looks_cased:
        raise UserError(f"--cased with an uncased vocabulary ({job.vocab} has no upper-case entries)")
    return ExampleConfig(
        model=job.model, vocab_tokens=vocab.tokens, lower_case=lower_case, max_seq_length=job.length,
        max_predictions_per_seq=job.max_predictions_per_seq, masked_lm_prob=job.masked_lm_prob,
        dupe_factor=job.dupe_factor, short_seq_prob=job.short_seq_prob, whole_word_mask=job.whole_word_mask,
        masking=job.masking, seed=job.seed)


def resolve(job: PretrainingDataJob) -> Resolved:
    """Checks everything that can be checked before the job runs, against the vocabulary and the input files
    (matched here, once); raises `UserError` with the reason."""
    job.check()
    examples = example_config(job)
    files = corpus_io.check_pattern(job.input)
    cleaning = clean_report.plan(job.cleaning, files)
    earlier = overwrite.plan(job.output_dir, overwrite.PRETRAINING_DATA, job.overwrite,
                             input_files=files + list(cleaning.heldout), reads=corpus_io.pattern_reads(job.input))
    return Resolved(examples, tuple(files), cleaning, earlier)


def run(job: PretrainingDataJob) -> PretrainingDataResult:
    """Runs `job` to its end and returns what it wrote, printing the command's lines on stderr. Raises
    `UserError` (bad flags or input, a full disk) or `termination.Terminated` (SIGTERM): a failed run leaves
    nothing that looks like output."""
    job.check()
    with OutputLock(job.output_dir):  # one run per folder: its shards and its metadata.json, never another's
        return _run(job)


def _run(job: PretrainingDataJob) -> PretrainingDataResult:
    """`run` under the output folder's lock: the job resolved, the folder cleared (`--overwrite`), written."""
    resolved = resolve(job)
    created = not tf.io.gfile.exists(job.output_dir)
    tf.io.gfile.makedirs(job.output_dir)
    resolved.earlier.remove()  # --overwrite: the earlier run's own files, once every check has passed
    files = list(resolved.files)
    print(f"pretraining_data: {job.model}, {len(files)} file(s) -> {job.output_dir}", file=sys.stderr)
    started = time.time()
    line = progress.ProgressLine("pretraining_data", "documents", ("tokenized", "written"),
                                 progress.input_bytes(files))

    def cleanup():  # a failed run leaves nothing that looks like output (signals too)
        overwrite.remove_unfinished(job.output_dir, overwrite.PRETRAINING_DATA)
        if created and not tf.io.gfile.listdir(job.output_dir):
            tf.io.gfile.rmtree(job.output_dir)

    beam_job.run_pipeline(lambda p, folder: build_pipeline(p, job, resolved, folder), job.run_options, files,
                          line=line, cleanup=cleanup, before=lambda: _write_vocab(job, resolved.examples))
    return _report(job, time.time() - started)


def _write_vocab(job: PretrainingDataJob, examples: ExampleConfig) -> None:
    path = os.path.join(job.output_dir, VOCAB_FILE)
    try:
        Vocabulary(examples.vocab_tokens).write(path)
    except (OSError, tf.errors.OpError) as e:
        raise write_failed(path, e) from e


def _report(job: PretrainingDataJob, seconds: float) -> PretrainingDataResult:
    """The finished job's result, printed on stderr as the command's summary."""
    metadata = DatasetMetadata.read(job.output_dir)
    counters = metadata.counters
    print(f"pretraining_data: done in {seconds:.1f} s", file=sys.stderr)
    for name in sorted(counters):
        print(f"  {name:<28} {counters[name]:>12,}", file=sys.stderr)
    files = metadata.files
    print(f"  {'shards':<28} {len(files):>12,}  {files[0]} ...", file=sys.stderr)
    summary, report = None, os.path.join(job.output_dir, clean_report.REPORT_FILES[0])
    if tf.io.gfile.exists(report):
        with tf.io.gfile.GFile(report) as f:
            summary = json.load(f)["summary"]
        print(summary, file=sys.stderr)
    warnings = tuple(dataset_metadata.warnings_for(metadata))
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return PretrainingDataResult(job.output_dir, metadata, summary, warnings, seconds)


def parse_args(argv) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m pipeline.pretraining_data", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, choices=list(MODELS))
    parser.add_argument("--input", required=True, help="file pattern, BERT format (local or gs://, .gz ok)")
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--max_seq_length", type=int, default=None,
                        help="bert/gpt: sequence length (128); bilm: window length in tokens (20)")
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--masked_lm_prob", type=float, default=0.15)
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--short_seq_prob", type=float, default=0.1)
    parser.add_argument("--whole_word_mask", action="store_true")
    parser.add_argument("--masking", choices=list(MASKING), default="static")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--num_shards", type=int, default=0,
                        help="output shards = document buckets (0: one per --docs_per_bucket documents)")
    parser.add_argument("--gzip", action="store_true", help="write .tfrecord.gz")
    parser.add_argument("--docs_per_bucket", type=int, default=500,
                        help="documents per bucket (= per shard), which share a pool of random next segments")
    case = parser.add_mutually_exclusive_group()
    case.add_argument("--lower_case", dest="lower_case", action="store_true", default=None)
    case.add_argument("--cased", dest="lower_case", action="store_false")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier run in --output_dir")
    beam_job.add_arguments(parser)
    clean_report.add_arguments(parser)
    return parser.parse_known_args(argv)


def job_from_args(args: argparse.Namespace, beam_args: list[str]) -> PretrainingDataJob:
    """The `PretrainingDataJob` that parsed flags describe; raises `UserError` for bad cleaning specs."""
    return PretrainingDataJob(
        model=args.model, input=args.input, vocab=args.vocab, output_dir=args.output_dir,
        max_seq_length=args.max_seq_length, max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob, dupe_factor=args.dupe_factor, short_seq_prob=args.short_seq_prob,
        whole_word_mask=args.whole_word_mask, masking=args.masking, seed=args.seed, num_shards=args.num_shards,
        gzip=args.gzip, docs_per_bucket=args.docs_per_bucket, lower_case=args.lower_case, overwrite=args.overwrite,
        cleaning=clean_report.from_args(args), run_options=beam_job.run_options(args, beam_args))


@quiet_command
def main(argv=None) -> int:
    """`python -m pipeline.pretraining_data`: parse, build the job, run it."""
    args, beam_args = parse_args(argv)
    return beam_job.command("pretraining_data", args.verbose, lambda: run(job_from_args(args, beam_args)))


if __name__ == "__main__":
    sys.exit(main())
