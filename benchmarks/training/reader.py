"""How fast the training reader feeds a model: examples per CPU-second (= per core) of `readers.make_dataset`.

    .venv/bin/python -m benchmarks.training.reader [--kinds bert_dynamic,bert_static,gpt,bilm] [--batch_size 32] \\
        [--seq_length 128] [--examples 4096] [--batches 200] [--repeats 3] [--whole_word_mask] [--no_history]

Per kind, TFRecords in the pipeline's format (`tests.fixtures.training.write_dataset`: 30,522-entry vocabulary,
seq 128, 20 predictions, 8 shards; `bert_dynamic` drops the masked features and marks the data
`masking: dynamic`, so the reader masks each batch itself with `masking.mask_tokens`), read by the training
reader exactly as `models.training.train` calls it (shuffled, repeated, batched, parsed, masked, prefetched).
Each repeat pulls `--batches` batches after 5 warm-up ones; the clock is the process CPU time
(`time.process_time()`: every thread of tf.data's pool), so the figure is examples per core and does not move
when other jobs share the machine. Wall-clock examples/s is printed beside it. The best repeat counts.
The goal (docs/accelerators.md): 5,000 BERT examples per core-second, so that two host cores feed one H200.
Last line: one JSON object; then, unless --no_history, each kind's examples per CPU-second appended to
benchmarks/results/reader.jsonl and compared with the last figure on this CPU model (`benchmarks.lib.history`).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from commands.tf_startup import quiet_command  # noqa: E402
from benchmarks.lib import history  # noqa: E402
from preprocessing import readers, schema  # noqa: E402
from tests.fixtures.training import write_dataset  # noqa: E402

VOCAB, PREDICTIONS = 30522, 20
GOAL = 5000  # BERT examples per core-second


def make_dynamic(pattern: str, whole_word_mask: bool) -> str:
    """Rewrites a static BERT dataset (`write_dataset`) as unmasked `--masking dynamic` data, in place."""
    directory = os.path.dirname(pattern)
    with open(os.path.join(directory, readers.METADATA)) as f:
        metadata = json.load(f)
    static = schema.features_for(metadata)
    metadata["config"].update(masking="dynamic", masked_lm_prob=0.15, whole_word_mask=whole_word_mask)
    dynamic = schema.features_for(metadata)
    for name in metadata["files"]:
        path = os.path.join(directory, name)
        rows = schema.parse(tf.constant(list(tf.data.TFRecordDataset(path).as_numpy_iterator())), static)
        serialized = schema.serialize({f.name: rows[f.name] for f in dynamic}, dynamic)
        with tf.io.TFRecordWriter(path) as writer:
            for row in serialized:
                writer.write(row)
    metadata["features"] = schema.describe(dynamic)
    with open(os.path.join(directory, readers.METADATA), "w") as f:
        json.dump(metadata, f)
    return pattern


def write(kind: str, directory: str, args) -> str:
    model = kind.split("_")[0]
    pattern = write_dataset(os.path.join(directory, kind), model, examples=args.examples, seq=args.seq_length,
                            preds=PREDICTIONS, vocab_size=VOCAB, shards=8)
    return make_dynamic(pattern, args.whole_word_mask) if kind == "bert_dynamic" else pattern


def measure(pattern: str, args) -> tuple[float, float]:
    """-> (examples per CPU-second, examples per wall second), the best of `--repeats`."""
    dataset = readers.make_dataset(pattern, args.batch_size, shuffle=True, repeat=True, seed=1,
                                   shuffle_buffer=min(args.examples, 10_000))
    iterator = iter(dataset)
    best = (0.0, 0.0)
    for _ in range(args.repeats):
        for _ in range(5):
            next(iterator)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(args.batches):
            batch = next(iterator)
        tf.nest.map_structure(lambda t: t.numpy(), batch)
        examples = args.batches * args.batch_size
        rate = (examples / (time.process_time() - cpu), examples / (time.perf_counter() - wall))
        best = max(best, rate)
    return best


@quiet_command
def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="bert_dynamic,bert_static,gpt,bilm")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--examples", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--whole_word_mask", action="store_true", help="bert_dynamic masks whole words")
    parser.add_argument("--no_history", action="store_true", help="do not append to benchmarks/results/")
    args = parser.parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    results = {}
    with tempfile.TemporaryDirectory() as directory:
        for kind in kinds:
            per_core, wall = measure(write(kind, directory, args), args)
            results[kind] = {"examples_per_cpu_s": round(per_core), "examples_per_s": round(wall)}
            print(f"{kind:<13} {per_core:>10,.0f} examples/CPU-s {wall:>10,.0f} examples/s (wall) "
                  f"{1e6 / per_core:>7.1f} CPU-us/example", flush=True)
    summary = {"batch_size": args.batch_size, "seq_length": args.seq_length, "cpus": os.cpu_count(),
               "goal_bert_examples_per_cpu_s": GOAL, **results}
    print(json.dumps(summary))
    if not args.no_history:  # timed batches after a warm-up: no fixed cost in the figure
        examples = args.batches * args.batch_size
        workload = (f"batch {args.batch_size}, seq {args.seq_length}, {args.examples} examples, "
                    f"{args.batches} batches"
                    f"{', whole-word mask' if args.whole_word_mask else ''}")
        history.record("reader", [history.Figure("examples_per_cpu_s", r["examples_per_cpu_s"], True,
                                                 f"{kind}, {workload}", examples / r["examples_per_cpu_s"], 0.0)
                                  for kind, r in results.items()])
    return summary


if __name__ == "__main__":
    main()
