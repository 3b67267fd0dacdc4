"""Where the BERT data job's marginal CPU goes, stage by stage, in one process.

    .venv/bin/python -m benchmarks.data.data_stages [--corpus PATH] [--vocab PATH] [--copies 1] [--dupe_factor 5]
        [--max_documents N] [--output_dir DIR]

Runs the job's own DoFns and functions (`pipeline.documents.ReadDocuments`, `pipeline.example_makers`'
`TokenizeDocuments` and `MakeExamples`, `pipeline.buckets.bucket_of`) outside Beam, in the job's order and
with its batching (256 documents per tokenizer call, `ceil(documents / 500)` buckets), and charges the CPU
time of this process (`time.process_time`: every thread, TensorFlow's included) to the innermost stage
running:
  read       reading and decoding lines into documents;
  tokenize   the batched tf-text call and building each `Document`;
  hash       `stable_random.stable_hash` (bucket of each document, the seed of each pass and of its masks);
  pair       `sentence_pairs.sentence_pairs` (segments A and B, truncation; Python);
  pack       `sentence_pairs.pack` (`[CLS] A [SEP] B [SEP]` arrays; numpy);
  mask       the masking function (`masking.mask_tokens`, traced);
  serialize  `schema.serialize` and turning its result into Python bytes;
  write      `ShardWriter` (TFRecord framing and the file);
  other      the rest of `MakeExamples.process`: its loops, each chunk's shuffled order, the counters.
Set-up (building the tokenizer, tracing) is done on the first documents before timing starts, so every
figure is marginal work. Beam's own share (the three shuffles, pickling, bundles) is not here: it is what
the in-process job (`--runner FnApiRunner`) costs beyond the sum of these stages. The shards are written
as the job writes them (one per bucket) and their records are counted. Prints a table: CPU-seconds, share
and microseconds per instance per stage, and instances per CPU-second of the stages together.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time

from commands.tf_startup import quiet_command
from benchmarks.lib import pretraining_runs
from demo import shared_data

DOCS_PER_BUCKET = 500  # the job's --docs_per_bucket default
STAGES = ("read", "tokenize", "hash", "pair", "pack", "mask", "serialize", "write", "other")


class Clock:
    """Exclusive CPU time per stage: `with clock("pack"):` charges its time minus that of nested stages."""

    def __init__(self):
        self.spent = collections.Counter()
        self._stack = []  # [stage, start, time spent in nested stages]

    def __call__(self, stage: str):
        return _Span(self, stage)

    def wrap(self, stage: str, fn):
        def timed(*args, **kwargs):
            with self(stage):
                return fn(*args, **kwargs)
        return timed


class _Span:
    def __init__(self, clock: Clock, stage: str):
        self.clock, self.stage = clock, stage

    def __enter__(self):
        self.clock._stack.append([self.stage, time.process_time(), 0.0])

    def __exit__(self, *_):
        stage, start, nested = self.clock._stack.pop()
        took = time.process_time() - start
        self.clock.spent[stage] += took - nested
        if self.clock._stack:
            self.clock._stack[-1][2] += took
        return False


def instrument(clock: Clock) -> None:
    """Routes the job's functions through `clock` (module attributes, so the DoFns' own lookups find them)."""
    from pipeline import example_makers, shard_writer
    from preprocessing import sentence_pairs, stable_random

    stable_random.stable_hash = clock.wrap("hash", stable_random.stable_hash)
    sentence_pairs.sentence_pairs = clock.wrap("pair", sentence_pairs.sentence_pairs)
    sentence_pairs.pack = clock.wrap("pack", sentence_pairs.pack)
    # `_emit` serializes a chunk (`schema.serialize`) and lists its bytes
    example_makers.MakeExamples._emit = clock.wrap("serialize", example_makers.MakeExamples._emit)
    for name in ("__enter__", "write_all", "__exit__"):
        setattr(shard_writer.ShardWriter, name, clock.wrap("write", getattr(shard_writer.ShardWriter, name)))


def run_stages(corpus: str, vocab_path: str, dupe_factor: int, output_dir: str, clock: Clock | None,
               max_documents: int | None = None) -> dict:
    """The job's stages on `corpus` (timed when `clock` is given): instances, records, documents."""
    from pipeline import buckets, example_makers
    from pipeline.documents import ReadDocuments
    from pipeline.pretraining_data import _BATCH_DOCUMENTS
    from preprocessing.vocabulary import Vocabulary

    vocab = Vocabulary.from_file(vocab_path)
    config = example_makers.ExampleConfig(model="bert", vocab_tokens=vocab.tokens, lower_case=not vocab.looks_cased,
                                          max_seq_length=128, max_predictions_per_seq=20, dupe_factor=dupe_factor)
    clock = clock or Clock()
    os.makedirs(output_dir, exist_ok=True)
    tokenize = example_makers.TokenizeDocuments(config)
    make = example_makers.MakeExamples(config, output_dir, gzip=False)
    tokenize.setup()
    make.setup()
    make._mask = clock.wrap("mask", make._mask)

    with clock("read"):
        documents = [d for d in ReadDocuments().process((0, corpus)) if isinstance(d, tuple)]
    documents = documents[:max_documents]
    tokenized = []
    for start in range(0, len(documents), _BATCH_DOCUMENTS):
        with clock("tokenize"):
            tokenized += list(tokenize.process(documents[start:start + _BATCH_DOCUMENTS]))
    n = buckets.bucket_count(len(tokenized), 0, DOCS_PER_BUCKET)
    grouped = collections.defaultdict(list)
    for doc_id, document in tokenized:
        grouped[buckets.bucket_of(config.seed, doc_id, n)].append((doc_id, document))
    summaries = []
    for bucket in range(n):
        with clock("other"):
            summaries += list(make.process(((bucket, n), grouped[bucket])))
    return {"instances": sum(s["counters"]["instances"] for s in summaries),
            "records": sum(s["examples"] for s in summaries), "documents": len(tokenized), "buckets": n}


def warm_up(documents: list[list[str]], vocab: str, dupe_factor: int, tmp: str) -> None:
    """Builds and traces everything on the corpus's first 40 lines (the set-up is not marginal work)."""
    small = os.path.join(tmp, "first_lines.txt.gz")
    pretraining_runs.write_corpus(small, pretraining_runs.first_lines(documents))
    run_stages(small, vocab, dupe_factor, os.path.join(tmp, "warm"), None)


def table(clock: Clock, instances: int) -> str:
    total = sum(clock.spent.values())
    rows = [f"{'stage':<10} {'CPU s':>8} {'share':>6} {'us/instance':>12}"]
    for stage in STAGES:
        s = clock.spent.get(stage, 0.0)
        rows.append(f"{stage:<10} {s:>8.2f} {s / total:>6.1%} {1e6 * s / instances:>12.2f}")
    rows.append(f"{'all':<10} {total:>8.2f} {1:>6.0%} {1e6 * total / instances:>12.2f}"
                f"   = {instances / total:,.0f} instances per CPU-second")
    return "\n".join(rows)


@quiet_command
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=shared_data.path("corpus", "pretrain.txt.gz"))
    parser.add_argument("--vocab", default=shared_data.path("vocab", "bert_uncased_vocab.txt"))
    parser.add_argument("--copies", type=int, default=1, help="the corpus concatenated this many times")
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--max_documents", type=int, default=None)
    args = parser.parse_args(argv)
    from benchmarks.lib import history

    tmp = tempfile.mkdtemp(prefix="data_stages_")
    try:
        corpus, documents = args.corpus, pretraining_runs.read_documents(args.corpus)
        if args.copies > 1:
            corpus = os.path.join(tmp, f"corpus_x{args.copies}.txt.gz")
            pretraining_runs.write_corpus(corpus, documents, copies=args.copies)
        warm_up(documents, args.vocab, args.dupe_factor, tmp)
        clock = Clock()
        instrument(clock)
        out = run_stages(corpus, args.vocab, args.dupe_factor, os.path.join(tmp, "out"), clock, args.max_documents)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if out["records"] != out["instances"]:
        sys.exit(f"the shards hold {out['records']} records, the counters say {out['instances']} instances")
    print(f"BERT data job's stages in one process: {os.path.basename(args.corpus)} x{args.copies}, "
          f"{out['documents']:,} documents, {out['buckets']} buckets, dupe_factor {args.dupe_factor}, "
          f"max_seq_length 128, {out['instances']:,} instances; CPU: {history.cpu_model()}, {os.cpu_count()} cpus")
    print(table(clock, out["instances"]))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
