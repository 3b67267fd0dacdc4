"""Beam job: learn a WordPiece vocabulary from a raw text corpus.

    python -m pipeline.vocab --input 'corpus/*.txt' --output vocab.txt --vocab_size 30522 \\
        [--lower_case | --cased] [--reserved_tokens [PAD] [UNK] ...] [--num_unused N] [Beam options]

The same job from Python is one call on a `VocabJob`, which holds what the flags say:

    run(VocabJob(input="corpus/*.txt", output="vocab.txt", learner=LearnerConfig(vocab_size=8000)))

Each file is read in batches of lines, spread over the workers, normalized and split into BERT words by
the project's `BasicTokenizer` (`pipeline.word_counts`); word counts are summed with a Beam combiner across
workers, and one worker learns the vocabulary from the count table (`wordpiece_learner`). The vocabulary
file appears only once complete (written aside, then renamed), with `<output>.json` beside it (config,
counts, sha256, counters).
Runs offline on all local cores by default and unchanged on Dataflow, Dask, Flink or Spark
(docs/distributed_runners.md).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import json
import logging
import os
import sys

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline import beam_job, clean_report, corpus_io, progress
from pipeline.beam_job import RunOptions
from pipeline.beam_options import Counts, split_counts, total
from pipeline.clean_report import Cleaning, CleanPlan
from pipeline.word_counts import CountWords
from pipeline.wordpiece_learner import LearnerConfig, learn_vocabulary
from commands.job_fields import checked, output_of
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, check_range, writable_file
from preprocessing.vocabulary import SPECIAL_TOKENS, Vocabulary

_BATCH_LINES = 4096
INCOMPLETE = ".incomplete"
MAX_VOCAB_SIZE = 1 << 22


@checked({"output": output_of("input")})
@dataclasses.dataclass(frozen=True)
class VocabJob:
    """A vocabulary job: what `python -m pipeline.vocab` runs, and its Python API (`run`).

    Args:
      input: file pattern of raw text, one sentence a line (local or gs://, `.gz` read as gzip).
      output: the `vocab.txt` to write; `<output>.json` goes beside it.
      learner: the vocabulary's size, reserved tokens, `[unused*]` slots, minimum word frequency and alphabet
        (`wordpiece_learner.LearnerConfig`).
      lower_case: an uncased vocabulary (lower-cased, accents stripped); False: a cased one.
      cleaning: filters, deduplication and decontamination before counting (`clean_report.Cleaning`).
      run_options: Beam's options, `verbose`, `progress_seconds` (`beam_job.RunOptions`).

    Example:
      >>> job = VocabJob(input="corpus/*.txt", output="vocab.txt", learner=LearnerConfig(vocab_size=8000))
      >>> job.metadata_config()["vocab_size"]
      8000
    """

    input: str
    output: str
    learner: LearnerConfig = LearnerConfig()
    lower_case: bool = True
    cleaning: Cleaning = Cleaning()
    run_options: RunOptions = RunOptions()

    def check(self) -> None:
        """The ranges that depend on several fields and the output's folder, before anything runs (each field
        alone is checked when the job is made); raises `UserError`."""
        self.run_options.check()
        reserved = self.learner.reserved_tokens
        missing = [t for t in SPECIAL_TOKENS if t not in reserved]
        if missing:
            raise UserError(f"--reserved_tokens lacks {' '.join(missing)}")
        repeated = sorted({t for t in reserved if reserved.count(t) > 1})
        if repeated:
            raise UserError(f"--reserved_tokens repeats {' '.join(repeated)}")
        check_range("--num_unused", self.learner.num_unused, 0, MAX_VOCAB_SIZE)
        room = len(reserved) + self.learner.num_unused  # the size must leave room after the reserved tokens
        check_range("--vocab_size", self.learner.vocab_size, room + 1, MAX_VOCAB_SIZE)
        writable_file("--output", self.output)
        writable_file("--output", self.output + ".json")

    def metadata_config(self) -> dict:
        """`<output>.json`'s `config`: the job under stable keys, in this order (the file keeps it); not
        `progress_seconds` nor Beam's options, which do not change the output."""
        learner = self.learner
        return {"input": self.input, "output": self.output, "vocab_size": learner.vocab_size,
                "lower_case": self.lower_case, "reserved_tokens": list(learner.reserved_tokens),
                "num_unused": learner.num_unused, "min_frequency": learner.min_frequency,
                "limit_alphabet": learner.limit_alphabet, "verbose": self.run_options.verbose,
                **self.cleaning.flags()}


@dataclasses.dataclass(frozen=True)
class VocabResult:
    """What a finished vocabulary job wrote.

    Args:
      vocab: the vocabulary file; metadata: `<vocab>.json` beside it.
      size: entries; sha256: the vocabulary's (`Vocabulary.sha256`).
      words, distinct_words: the words counted (after cleaning).
      counters: the reader's counters (and cleaning's), by name.
      cleaning_summary: with cleaning, the report's one line (`<vocab>.cleaning.json` / `.md` hold the rest).
    """

    vocab: str
    metadata: str
    size: int
    sha256: str
    words: int
    distinct_words: int
    counters: dict
    cleaning_summary: str | None = None


def _write_vocabulary(gathered: list, config: LearnerConfig, output: str, job_config: dict) -> None:
    """Learns and writes the vocabulary and its metadata, atomically, from the `(word, count)` pairs and
    the reader's `Counts` of `gathered`."""
    import tensorflow as tf

    word_counts = [x for x in gathered if not isinstance(x, Counts)]
    tokens = learn_vocabulary(word_counts, config)
    vocab = Vocabulary(tuple(tokens), source=output)
    meta = {"config": job_config, "vocab_size": len(tokens), "distinct_words": len(word_counts),
            "words": sum(c for _, c in word_counts), "sha256": vocab.sha256,
            "counters": total(x for x in gathered if isinstance(x, Counts))}
    if os.path.dirname(output):
        tf.io.gfile.makedirs(os.path.dirname(output))
    files = ((output, vocab.to_text()), (output + ".json", json.dumps(meta, indent=2) + "\n"))
    for path, text in files:  # both written aside first, then both renamed
        try:
            with tf.io.gfile.GFile(path + INCOMPLETE, "w") as f:
                f.write(text)
        except (OSError, tf.errors.OpError) as e:  # a full disk, a quota: one line naming the file
            reason = (getattr(e, "message", None) or getattr(e, "strerror", None) or str(e)).strip()
            # a plain UserError: the launcher (which has not imported pipeline.shard_writer) knows its name
            raise UserError(f"cannot write {path}: {reason.splitlines()[0] if reason else type(e).__name__}: "
                            f"free space (or use another --output) and rerun; no vocabulary was written") from e
    for path, _ in files:
        tf.io.gfile.rename(path + INCOMPLETE, path, overwrite=True)


def _remove_partial(output: str, cleaning: bool = False) -> None:
    """After a failed run: no `.incomplete` file, no vocabulary without its metadata, and (`cleaning`: this run
    cleaned) no cleaning report of a vocabulary that was not written."""
    import tensorflow as tf

    for path in (output + INCOMPLETE, output + ".json" + INCOMPLETE):
        if tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
    if tf.io.gfile.exists(output) and not tf.io.gfile.exists(output + ".json"):
        tf.io.gfile.remove(output)
    for suffix in (".cleaning.json", ".cleaning.md") if cleaning else ():
        if tf.io.gfile.exists(output + suffix):
            tf.io.gfile.remove(output + suffix)


def build_pipeline(p: beam.Pipeline, job: VocabJob, files: list[str], cleaning: CleanPlan,
                   progress_folder: str | None = None) -> None:
    """The job's graph over the input `files`, cleaned as `cleaning` plans (`clean_report.plan`)."""
    if cleaning.active:
        batches, counts = _cleaned_line_batches(p, job, files, cleaning, progress_folder)
    else:
        read = p | "Read" >> corpus_io.ReadCorpusLines(files, _BATCH_LINES, progress_folder)
        batches, counts = split_counts(read, "Read")
    spread = progress.tally(batches | "Spread" >> beam.Reshuffle(), progress_folder, "counted", len)
    word_counts = spread | "CountWords" >> CountWords(job.lower_case)
    ((word_counts, counts)
     | "WithCounts" >> beam.Flatten()
     | "Gather" >> beam.combiners.ToList()
     | "Learn" >> beam.Map(_write_vocabulary, job.learner, job.output, job.metadata_config()))


def _cleaned_line_batches(p, job: VocabJob, files: list[str], cleaning: CleanPlan, progress_folder):
    """With cleaning: documents read, cleaned (`pipeline.cleaning`), and their lines in batches; the report
    goes to `<output>.cleaning.json` / `.md` and its counters into the vocabulary's metadata."""
    from pipeline.documents import ReadDocuments

    read = (p | "Files" >> beam.Create(list(enumerate(files)))
            | "ReadDocuments" >> beam.ParDo(ReadDocuments(progress_folder=progress_folder)))
    documents, counts = split_counts(read, "Read")
    kept, report = clean_report.clean_step(p, cleaning, documents)
    batches = (kept
               | "KeyByBatch" >> beam.Map(lambda doc: ((doc[0][0], doc[0][1] // 256), doc[1]))
               | "BatchDocuments" >> beam.GroupByKey()
               | "Lines" >> beam.MapTuple(lambda _, docs: [line for doc in docs for line in doc]))
    written = report | "CleanReport" >> beam.Map(clean_report.write_job_report, job.output + ".cleaning", files,
                                                 cleaning.heldout, "vocab")
    return batches, (counts, written) | "WithCleanCounts" >> beam.Flatten()


def _check_output(job: VocabJob, files: list[str]) -> None:
    """The `--input` pattern must not match the output: a rerun would learn from this run's vocabulary."""
    reads = corpus_io.pattern_reads(job.input)
    inputs = {os.path.abspath(f) for f in files}
    for path in (job.output, job.output + ".json"):
        if reads(path) or os.path.abspath(path) in inputs:
            raise UserError(f"--output {job.output}: the --input pattern {job.input!r} matches {path}, so a rerun "
                            f"would learn from this run's output; write it elsewhere")


def run(job: VocabJob) -> VocabResult:
    """Runs `job` to its end and returns what it wrote, printing the command's lines on stderr. Raises
    `UserError` (bad flags or input, a full disk) or `termination.Terminated` (SIGTERM): no vocabulary is left
    behind then."""
    job.check()
    files = corpus_io.check_pattern(job.input)
    cleaning = clean_report.plan(job.cleaning, files)  # a --decontaminate matching nothing, a folder or an input
    _check_output(job, files)
    print(f"vocab: {len(files)} input file(s) match {job.input!r}", file=sys.stderr)
    line = progress.ProgressLine("vocab", "lines", ("counted",), progress.input_bytes(files))
    beam_job.run_pipeline(lambda p, folder: build_pipeline(p, job, files, cleaning, folder), job.run_options,
                          files, line=line, cleanup=lambda: _remove_partial(job.output, cleaning.active))
    result = _result(job, cleaning.active)
    for name, value in {**result.counters, "words": result.words, "distinct_words": result.distinct_words}.items():
        print(f"vocab: {name} = {value}", file=sys.stderr)
    print(f"vocab: wrote {job.output} ({job.output}.json beside it)", file=sys.stderr)
    if result.cleaning_summary is not None:
        print(result.cleaning_summary, file=sys.stderr)
    return result


def _result(job: VocabJob, cleaning: bool) -> VocabResult:
    """The finished job's `VocabResult`, from `<output>.json` (the counters travel with the data: any runner)."""
    with FileSystems.open(job.output + ".json") as f:
        meta = json.load(f)
    summary = None
    if cleaning:
        with FileSystems.open(job.output + ".cleaning.json") as f:
            summary = json.load(f)["summary"]
    return VocabResult(vocab=job.output, metadata=job.output + ".json", size=meta["vocab_size"],
                       sha256=meta["sha256"], words=meta["words"], distinct_words=meta["distinct_words"],
                       counters=meta["counters"], cleaning_summary=summary)


def parse_args(argv) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m pipeline.vocab", description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="file pattern of raw text (local or gs://, .gz ok)")
    parser.add_argument("--output", required=True, help="vocab.txt to write")
    parser.add_argument("--vocab_size", type=int, default=30522)
    case = parser.add_mutually_exclusive_group()
    case.add_argument("--lower_case", dest="lower_case", action="store_true", default=True,
                      help="uncased vocabulary: lower-case and strip accents (default)")
    case.add_argument("--cased", dest="lower_case", action="store_false", help="cased vocabulary")
    parser.add_argument("--reserved_tokens", nargs="+", default=list(SPECIAL_TOKENS),
                        help="tokens placed first (must include %s)" % " ".join(SPECIAL_TOKENS))
    parser.add_argument("--num_unused", type=int, default=0, help="[unused*] slots after the reserved tokens")
    parser.add_argument("--min_frequency", type=int, default=2)
    parser.add_argument("--limit_alphabet", type=int, default=1000)
    beam_job.add_arguments(parser)
    clean_report.add_arguments(parser)
    return parser.parse_known_args(argv)


def job_from_args(args: argparse.Namespace, beam_args: list[str]) -> VocabJob:
    """The `VocabJob` that parsed flags describe; raises `UserError` for bad cleaning specs."""
    learner = LearnerConfig(vocab_size=args.vocab_size, reserved_tokens=tuple(args.reserved_tokens),
                            num_unused=args.num_unused, min_frequency=args.min_frequency,
                            limit_alphabet=args.limit_alphabet)
    return VocabJob(input=args.input, output=args.output, learner=learner, lower_case=args.lower_case,
                    cleaning=clean_report.from_args(args), run_options=beam_job.run_options(args, beam_args))


@quiet_command
def main(argv=None) -> int:
    """`python -m pipeline.vocab`: parse, build the job, run it."""
    args, beam_args = parse_args(argv)
    return beam_job.command("vocab", args.verbose, lambda: run(job_from_args(args, beam_args)),
                            removed="no vocabulary was written")


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    sys.exit(main())
