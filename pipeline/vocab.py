"""Beam job: learn a WordPiece vocabulary from a raw text corpus.

    python -m pipeline.vocab --input 'corpus/*.txt' --output vocab.txt --vocab_size 30522 \\
        [--lower_case | --cased] [--reserved_tokens [PAD] [UNK] ...] [--num_unused N] [Beam options]

Each file is read in batches of lines, spread over the workers, normalized and split into BERT words by
the project's `BasicTokenizer`; word counts are summed with a Beam combiner across workers, and one worker
learns the vocabulary from the count table (`wordpiece_learner`). The vocabulary file appears only once
complete (written aside, then renamed), with `<output>.json` beside it (config, counts, sha256, counters).
Runs offline on all local cores by default and unchanged on Dataflow, Dask, Flink or Spark
(docs/distributed_runners.md).
"""

import argparse
import collections
import json
import logging
import os
import sys

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline import clean_report, corpus_io, progress
from pipeline.beam_options import (Counts, SetupDoFn, check_beam_args, pipeline_options, quiet_worker_logs,
                                     split_counts, total)
from pipeline.termination import Terminated, stopped, stopping_workers
from pipeline.worker_stderr import without_worker_tracebacks
from pipeline.wordpiece_learner import LearnerConfig, learn_vocabulary
from commands.user_errors import UserError, check_range, exit_status, writable_file
from preprocessing.vocabulary import SPECIAL_TOKENS, Vocabulary

_BATCH_LINES = 4096
INCOMPLETE = ".incomplete"


class CountWordsInBatch(SetupDoFn):
    """A batch of lines -> `(word, count)` pairs for that batch (pre-aggregated before the shuffle)."""

    setup_state = ("_split", "_tf")

    def __init__(self, lower_case: bool):
        self.lower_case = lower_case

    def setup(self):
        import tensorflow as tf

        from preprocessing.basic_tokenizer import BasicTokenizer

        basic = BasicTokenizer(self.lower_case)
        # One trace for every batch size.
        self._split = tf.function(lambda lines: basic.split_words(basic.normalize(lines)).flat_values,
                                  input_signature=[tf.TensorSpec([None], tf.string)])
        self._tf = tf

    def process(self, lines: list[str]):
        words = self._split(self._tf.constant(lines, self._tf.string)).numpy()
        for word, count in collections.Counter(words).items():
            yield word.decode("utf-8"), count


class CountWords(beam.PTransform):
    """Batches (lists) of lines -> `(word, total count)`, BERT words as the project's tokenizer splits them."""

    def __init__(self, lower_case: bool):
        super().__init__()
        self.lower_case = lower_case

    def expand(self, lines):
        return (lines
                | "CountInBatch" >> beam.ParDo(CountWordsInBatch(self.lower_case))
                | "Sum" >> beam.CombinePerKey(sum))


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


def build_pipeline(p: beam.Pipeline, args: argparse.Namespace, progress_folder: str | None = None) -> None:
    config = LearnerConfig(vocab_size=args.vocab_size, reserved_tokens=tuple(args.reserved_tokens),
                           num_unused=args.num_unused, min_frequency=args.min_frequency,
                           limit_alphabet=args.limit_alphabet)
    job_config = clean_report.job_config(args)  # not progress_seconds (the output's bytes ignore it)
    if clean_report.clean_config(args).active:
        batches, counts = _cleaned_line_batches(p, args, progress_folder)
    else:
        read = p | "Read" >> corpus_io.ReadCorpusLines(args.input, _BATCH_LINES, progress_folder)
        batches, counts = split_counts(read, "Read")
    spread = progress.tally(batches | "Spread" >> beam.Reshuffle(), progress_folder, "counted", len)
    word_counts = spread | "CountWords" >> CountWords(args.lower_case)
    ((word_counts, counts)
     | "WithCounts" >> beam.Flatten()
     | "Gather" >> beam.combiners.ToList()
     | "Learn" >> beam.Map(_write_vocabulary, config, args.output, job_config))


def _write_clean_report(report, args, files) -> Counts:
    heldout = clean_report.heldout_files(args, files)
    clean_report.write_report(report, args.output + ".cleaning", files, heldout, "vocab")
    return Counts(report["counters"])


def _cleaned_line_batches(p, args, progress_folder):
    """With cleaning flags: documents read, cleaned (`pipeline.cleaning`), and their lines in batches; the
    report goes to `<output>.cleaning.json` / `.md` and its counters into the vocabulary's metadata."""
    from pipeline.documents import ReadDocuments

    files = corpus_io.check_pattern(args.input)
    read = (p | "Files" >> beam.Create(list(enumerate(files)))
            | "ReadDocuments" >> beam.ParDo(ReadDocuments(progress_folder=progress_folder)))
    documents, counts = split_counts(read, "Read")
    kept, report = clean_report.clean_step(p, args, documents)
    batches = (kept
               | "KeyByBatch" >> beam.Map(lambda doc: ((doc[0][0], doc[0][1] // 256), doc[1]))
               | "BatchDocuments" >> beam.GroupByKey()
               | "Lines" >> beam.MapTuple(lambda _, docs: [line for doc in docs for line in doc]))
    written = report | "CleanReport" >> beam.Map(_write_clean_report, args, files)
    return batches, (counts, written) | "WithCleanCounts" >> beam.Flatten()


def parse_args(argv):
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
    parser.add_argument("--verbose", action="store_true", help="full tracebacks with errors")
    progress.add_argument(parser)
    clean_report.add_arguments(parser)
    return parser.parse_known_args(argv)


MAX_VOCAB_SIZE = 1 << 22


def check_args(args, beam_args) -> list[str]:
    """Every parameter's range and every path, before anything runs; returns the input files."""
    check_beam_args(beam_args)
    missing = [t for t in SPECIAL_TOKENS if t not in args.reserved_tokens]
    if missing:
        raise UserError(f"--reserved_tokens lacks {' '.join(missing)}")
    repeated = sorted({t for t in args.reserved_tokens if args.reserved_tokens.count(t) > 1})
    if repeated:
        raise UserError(f"--reserved_tokens repeats {' '.join(repeated)}")
    check_range("--num_unused", args.num_unused, 0, MAX_VOCAB_SIZE)
    reserved = len(args.reserved_tokens) + args.num_unused
    check_range("--vocab_size", args.vocab_size, reserved + 1, MAX_VOCAB_SIZE)  # room after the reserved tokens
    check_range("--min_frequency", args.min_frequency, 1)
    check_range("--limit_alphabet", args.limit_alphabet, 1)
    progress.check_seconds(args.progress_seconds)
    writable_file("--output", args.output)
    writable_file("--output", args.output + ".json")
    clean_report.clean_config(args)  # raises UserError for a bad --filters / --dedup
    files = corpus_io.check_pattern(args.input)
    clean_report.heldout_files(args, files)  # a --decontaminate matching nothing, a folder or an --input file
    reads = corpus_io.pattern_reads(args.input)
    for path in (args.output, args.output + ".json"):
        if reads(path) or os.path.abspath(path) in {os.path.abspath(f) for f in files}:
            raise UserError(f"--output {args.output}: the --input pattern {args.input!r} matches {path}, so a rerun "
                            f"would learn from this run's output; write it elsewhere")
    return files


def run(argv=None) -> int:
    args, beam_args = parse_args(argv)
    quiet_worker_logs(args.verbose)
    try:
        return _run(args, beam_args)
    except Terminated as e:
        return stopped("vocab", e, "no vocabulary was written")
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, args.verbose)


def _run(args, beam_args) -> int:
    files = check_args(args, beam_args)
    print(f"vocab: {len(files)} input file(s) match {args.input!r}", file=sys.stderr)
    line = progress.ProgressLine("vocab", "lines", ("counted",), progress.input_bytes(files))
    cleaning = clean_report.clean_config(args).active
    with (stopping_workers(lambda: _remove_partial(args.output, cleaning)), without_worker_tracebacks(args.verbose),
          progress.reporter(line, args.progress_seconds, beam_args) as reporter,
          beam.Pipeline(options=pipeline_options(beam_args, files)) as p):
        build_pipeline(p, args, reporter.folder)
    with FileSystems.open(args.output + ".json") as f:  # the counters travel with the data (any runner)
        meta = json.load(f)
    for name, value in {**meta["counters"], "words": meta["words"], "distinct_words": meta["distinct_words"]}.items():
        print(f"vocab: {name} = {value}", file=sys.stderr)
    print(f"vocab: wrote {args.output} ({args.output}.json beside it)", file=sys.stderr)
    if clean_report.clean_config(args).active:
        with FileSystems.open(args.output + ".cleaning.json") as f:
            print(json.load(f)["summary"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    logging.getLogger().setLevel(logging.WARNING)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(run())
