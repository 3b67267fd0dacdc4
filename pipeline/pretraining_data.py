"""Beam job: raw text in BERT's format -> sharded TFRecords for BERT, GPT or the biLM, plus metadata.json.

    python -m pipeline.pretraining_data --model {bert,gpt,bilm} --input 'PATTERN' --vocab vocab.txt \\
        --output_dir DIR [--max_seq_length 128] [--max_predictions_per_seq 20] [--masked_lm_prob 0.15] \\
        [--dupe_factor 10] [--short_seq_prob 0.1] [--whole_word_mask] [--masking static|dynamic] \\
        [--seed N] [--num_shards N] [--gzip] [--docs_per_bucket 500] [--overwrite] [Beam options]

The flow (each step a named Beam transform):
  ReadDocuments (one file per worker, streamed) -> BatchDocuments (a GroupByKey on (file, document index
  // 256): spreads documents over workers in batches that are the same on every runner) ->
  TokenizeDocuments (batched tf-text) -> AssignBuckets (stable hash of the document id; no side input, see
  `pipeline.buckets`) -> GroupByKey ->
  MakeExamples (per bucket: BERT pairs with random next segments from the bucket's other documents and
  masking, or GPT / biLM windows; written as the bucket's shard) -> metadata.json (with the counters,
  which travel with the data: the same on every runner, metrics API or not).
One bucket is one output shard: `--num_shards`, or `ceil(documents / docs_per_bucket)`. No worker holds
the corpus: the largest unit is a bucket of tokenized documents, and examples are streamed to the shard.
The output is byte-identical for the same input and seed whatever the runner or worker count.
"""

import argparse
import dataclasses
import json
import os
import sys
import time

import apache_beam as beam
import tensorflow as tf

from pipeline import clean_report, corpus_io, progress
from pipeline.buckets import AssignBuckets
from pipeline.beam_options import (Counts, check_beam_args, pipeline_options, quiet_worker_logs, split_counts,
                                     total)
from pipeline.documents import SKIPPED_AT, ReadDocuments
from pipeline.termination import Terminated, stopped, stopping_workers
from pipeline.worker_stderr import without_worker_tracebacks
from pipeline.example_makers import JobConfig, MakeExamples, TokenizeDocuments
from pipeline.shard_writer import write_failed
from commands import overwrite
from preprocessing import schema, sentence_pairs
from preprocessing.metadata import FILE_NAME as METADATA, VOCAB_FILE, DatasetMetadata, VocabRecord
from commands.user_errors import UserError, check_range, exit_status, require_file, writable_dir
from preprocessing.vocabulary import Vocabulary

DEFAULT_LENGTH = {"bert": 128, "gpt": 128, "bilm": 20}
_BATCH_DOCUMENTS = 256


class TokenizedDocuments(beam.PTransform):
    """`(file index, path)` pairs -> (`(document id, tokenized document)`, the reader's `Counts`)."""

    def __init__(self, config: JobConfig, progress_folder: str | None = None, args=None):
        super().__init__()
        self.config, self.progress_folder, self.args = config, progress_folder, args
        self.cleaning_report = None  # with cleaning flags: the report PCollection (`pipeline.cleaning`)

    def expand(self, files):
        read = files | "ReadDocuments" >> beam.ParDo(ReadDocuments(progress_folder=self.progress_folder))
        documents, counts = split_counts(read, "Read")
        if self.args is not None:
            documents, self.cleaning_report = clean_report.clean_step(files.pipeline, self.args, documents)
        batches = (documents
                   | "KeyByBatch" >> beam.Map(lambda doc: ((doc[0][0], doc[0][1] // _BATCH_DOCUMENTS), doc))
                   | "BatchDocuments" >> beam.GroupByKey()
                   | "InOrder" >> beam.MapTuple(lambda _, docs: sorted(docs)))
        tokenized = (progress.tally(batches, self.progress_folder, "tokenized", len)
                     | "TokenizeDocuments" >> beam.ParDo(TokenizeDocuments(self.config)))
        return tokenized, counts


def build_pipeline(p, args, config: JobConfig, files: list[str], progress_folder: str | None = None):
    tokenized = TokenizedDocuments(config, progress_folder, args)
    docs, read_counts = p | "Files" >> beam.Create(list(enumerate(files))) | "Documents" >> tokenized
    if tokenized.cleaning_report is not None:  # --dedup / --filters / --decontaminate
        cleaned = tokenized.cleaning_report | "CleanReport" >> beam.Map(_write_clean_report, args, files)
        read_counts = (read_counts, cleaned) | "WithCleanCounts" >> beam.Flatten()
    summaries = (docs
                 | "AssignBuckets" >> AssignBuckets(config.seed, args.num_shards, args.docs_per_bucket,
                                                    _BATCH_DOCUMENTS)
                 | "GroupBuckets" >> beam.GroupByKey()
                 | "MakeExamples" >> beam.ParDo(MakeExamples(config, args.output_dir, args.gzip)))
    summaries = progress.tally(summaries, progress_folder, "written",
                               lambda s: s["counters"].get("documents_with_tokens", 0))
    ((summaries, read_counts)
     | "WithCounts" >> beam.Flatten()
     | "Gather" >> beam.combiners.ToList()
     | "WriteMetadata" >> beam.Map(_finish, args.output_dir, _metadata(args, config, files)))


def _write_clean_report(report, args, files) -> Counts:
    base = os.path.join(args.output_dir, clean_report.REPORT_FILES[0].removesuffix(".json"))
    heldout = clean_report.heldout_files(args, files)
    clean_report.write_report(report, base, files, heldout, "pretraining_data")
    return Counts(report["counters"])


def _metadata(args, config: JobConfig, files) -> DatasetMetadata:
    """What is known before the job runs; `_finish` adds the shards and counts."""
    vocab = Vocabulary(config.vocab_tokens)
    job = clean_report.job_config(args)  # not progress_seconds (the output's bytes ignore it)
    job.update(max_seq_length=config.max_seq_length, lower_case=config.lower_case)
    features = schema.features_for({"model": config.model, "config": job})
    return DatasetMetadata(schema_version=schema.SCHEMA_VERSION, model=config.model, config=job,
                           features=schema.describe(features), compression="GZIP" if args.gzip else "",
                           vocab=VocabRecord(file=VOCAB_FILE, sha256=vocab.sha256, size=len(vocab),
                                             special_ids=vocab.special_ids()),
                           input_files=len(files))


def _finish(gathered, output_dir, metadata: DatasetMetadata):
    """Writes metadata.json from the shard summaries and the reader's `Counts` (`gathered`)."""
    summaries = sorted((s for s in gathered if not isinstance(s, Counts)), key=lambda s: s["file"])
    num_shards = {s["num_shards"] for s in summaries}
    if len(num_shards) > 1 or (summaries and len(summaries) != min(num_shards)):
        raise RuntimeError(f"{len(summaries)} shard summaries for num_shards {sorted(num_shards)}")
    num_shards = num_shards.pop() if num_shards else 0
    counters = total([s["counters"] for s in summaries] + [c for c in gathered if isinstance(c, Counts)])
    skipped = tuple(k[len(SKIPPED_AT):] for k in counters if k.startswith(SKIPPED_AT))
    counters = {k: v for k, v in counters.items() if not k.startswith(SKIPPED_AT)}
    examples = sum(s["examples"] for s in summaries)
    if examples == 0:
        over = counters.get("lines_over_max_bytes", 0)
        if over:
            raise UserError(f"the corpus produced no examples: {skipped_lines_note(over, skipped)}, and the rest "
                            f"is shorter than one window; nothing written")
        raise UserError("the corpus produced no examples (empty, or every document shorter than one window): "
                        "check --input, or lower --max_seq_length; nothing written")
    try:
        dataclasses.replace(metadata, config={**metadata.config, "num_shards": num_shards},
                            files=tuple(s["file"] for s in summaries),
                            examples_per_file={s["file"]: s["examples"] for s in summaries},
                            examples=examples, counters=counters, skipped_lines=skipped or None).write(output_dir)
    except (OSError, tf.errors.OpError) as e:
        raise write_failed(os.path.join(output_dir, METADATA), e) from e


def skipped_lines_note(count: int, where) -> str:
    """`N line(s) over the 1 MiB line limit were skipped (path line 3, ...)` for messages."""
    shown = ", ".join(f"{p.rpartition(':')[0]} line {p.rpartition(':')[2]}" for p in where)
    more = f", {count - len(where)} more" if count > len(where) else ""
    return (f"{count} line(s) over the {corpus_io.MAX_LINE_BYTES >> 20} MiB line limit were skipped "
            f"({shown}{more}; put one sentence per line)")


def warnings_for(metadata: DatasetMetadata) -> list[str]:
    """What the user should know about a finished run: skipped over-long lines; a BERT corpus that is one
    document, where no pair can take its second segment from another document."""
    counters, out = metadata.counters or {}, []
    if counters.get("lines_over_max_bytes"):
        out.append(skipped_lines_note(counters["lines_over_max_bytes"], metadata.skipped_lines or ()))
    if metadata.model == "bert" and counters.get("documents") == 1:
        out.append("the corpus is one document (no blank line between documents): every BERT pair's second "
                   "segment is its real next one, so all next_sentence_labels are 0 ('is next') and next-sentence "
                   "prediction learns nothing; separate documents with blank lines")
    return out


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m pipeline.pretraining_data", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, choices=["bert", "gpt", "bilm"])
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
    parser.add_argument("--masking", choices=["static", "dynamic"], default="static")
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
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    progress.add_argument(parser)
    clean_report.add_arguments(parser)
    return parser.parse_known_args(argv)


MIN_LENGTH = {"bert": sentence_pairs.MIN_SEQ_LENGTH, "gpt": 1, "bilm": 1}
MAX_SHARDS = 99_999  # shard names have five digits


def check_args(args, beam_args) -> None:
    """Every parameter's range and every path, before anything runs; raises `UserError`."""
    check_beam_args(beam_args)
    length = args.max_seq_length or DEFAULT_LENGTH[args.model]
    check_range("--max_seq_length", length, MIN_LENGTH[args.model])
    check_range("--max_predictions_per_seq", args.max_predictions_per_seq, 1,
                length if args.model == "bert" else None)
    check_range("--masked_lm_prob", args.masked_lm_prob, 0.0, 1.0, low_open=True)
    check_range("--dupe_factor", args.dupe_factor, 1)
    check_range("--short_seq_prob", args.short_seq_prob, 0.0, 1.0)
    check_range("--seed", args.seed, 0, 2**63 - 1)
    check_range("--num_shards", args.num_shards, 0, MAX_SHARDS)
    check_range("--docs_per_bucket", args.docs_per_bucket, 1)
    progress.check_seconds(args.progress_seconds)
    require_file("--vocab", args.vocab)
    writable_dir("--output_dir", args.output_dir)
    clean_report.clean_config(args)  # raises UserError for a bad --filters / --dedup
    clean_report.heldout_files(args)  # and for a --decontaminate pattern that matches nothing


def prepare(args) -> tuple[JobConfig, list[str], overwrite.Plan]:
    """Checks everything that can be checked before the job runs; raises `UserError` with the reason. Returns
    the config, the input files and what `--overwrite` removes (`commands.overwrite`)."""
    vocab = Vocabulary.from_file(args.vocab)
    lower_case = (not vocab.looks_cased) if args.lower_case is None else args.lower_case
    if lower_case and vocab.looks_cased:
        raise UserError(f"--lower_case with a cased vocabulary ({args.vocab} has upper-case entries)")
    if not lower_case and not vocab.looks_cased:
        raise UserError(f"--cased with an uncased vocabulary ({args.vocab} has no upper-case entries)")
    files = corpus_io.check_pattern(args.input)
    heldout = clean_report.heldout_files(args, files)
    earlier = overwrite.plan(args.output_dir, overwrite.PRETRAINING_DATA, args.overwrite,
                             input_files=files + heldout, reads=corpus_io.pattern_reads(args.input))
    length = args.max_seq_length or DEFAULT_LENGTH[args.model]
    config = JobConfig(model=args.model, vocab_tokens=vocab.tokens, lower_case=lower_case, max_seq_length=length,
                       max_predictions_per_seq=args.max_predictions_per_seq, masked_lm_prob=args.masked_lm_prob,
                       dupe_factor=args.dupe_factor, short_seq_prob=args.short_seq_prob,
                       whole_word_mask=args.whole_word_mask, masking=args.masking, seed=args.seed)
    return config, files, earlier


def run(argv=None) -> int:
    args, beam_args = parse_args(argv)
    quiet_worker_logs(args.verbose)
    try:
        return _run(args, beam_args)
    except Terminated as e:
        return stopped("pretraining_data", e)
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)


def _run(args, beam_args) -> int:
    check_args(args, beam_args)
    config, files, earlier = prepare(args)
    created = not tf.io.gfile.exists(args.output_dir)
    tf.io.gfile.makedirs(args.output_dir)
    earlier.remove()  # --overwrite: the earlier run's own files, once every check has passed
    print(f"pretraining_data: {args.model}, {len(files)} file(s) -> {args.output_dir}", file=sys.stderr)
    started = time.time()
    line = progress.ProgressLine("pretraining_data", "documents", ("tokenized", "written"),
                                 progress.input_bytes(files))

    def cleanup():  # a failed run leaves nothing that looks like output (signals too)
        overwrite.remove_unfinished(args.output_dir, overwrite.PRETRAINING_DATA)
        if created and not tf.io.gfile.listdir(args.output_dir):
            tf.io.gfile.rmtree(args.output_dir)

    with stopping_workers(cleanup):  # SIGTERM: the local workers stopped first, as on Ctrl-C
        try:
            Vocabulary(config.vocab_tokens).write(os.path.join(args.output_dir, VOCAB_FILE))
        except (OSError, tf.errors.OpError) as e:
            raise write_failed(os.path.join(args.output_dir, VOCAB_FILE), e) from e
        with (without_worker_tracebacks(args.verbose), progress.reporter(line, args.progress_seconds, beam_args)
              as reporter, beam.Pipeline(options=pipeline_options(beam_args, files)) as p):
            build_pipeline(p, args, config, files, reporter.folder)
    _report(args, time.time() - started)
    return 0


def _report(args, seconds):
    metadata = DatasetMetadata.read(args.output_dir)
    counters = metadata.counters
    print(f"pretraining_data: done in {seconds:.1f} s", file=sys.stderr)
    for name in sorted(counters):
        print(f"  {name:<28} {counters[name]:>12,}", file=sys.stderr)
    files = metadata.files
    print(f"  {'shards':<28} {len(files):>12,}  {files[0]} ...", file=sys.stderr)
    report = os.path.join(args.output_dir, clean_report.REPORT_FILES[0])
    if tf.io.gfile.exists(report):
        with tf.io.gfile.GFile(report) as f:
            print(json.load(f)["summary"], file=sys.stderr)
    for warning in warnings_for(metadata):
        print(f"warning: {warning}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(run())
