"""Tokenization throughput, in tokens per CPU-second, of the project's WordPiece tokenizer and its peers.

    .venv/bin/python -m benchmarks.data.tokenization [--lines N] [--corpus PATH] [--vocab PATH] [--keras_hub_lines N]
        [--no_history]

Engines, side by side on the same lines and vocabulary, in batches of 8192 lines:
  ours       `preprocessing.wordpiece.WordPieceTokenizer(...).tokenize` under `tf.function`;
  hf         HuggingFace `tokenizers.BertWordPieceTokenizer.encode_batch`, single-threaded (the reference);
  keras_hub  `keras_hub.tokenizers.WordPieceTokenizer(lowercase=True, strip_accents=True)` under `tf.function`
             (graph mode, as in `tf.data`; eagerly it converts outputs to Python lists; --keras_hub_lines N
             limits it to the first N lines);
  fastbert   tf-text's `FastBertTokenizer(lower_case_nfd_strip_accents=True)` under `tf.function` (raw tf-text).
CPU time is `time.process_time()` (all threads of this process); each engine runs 3 times over its lines
after a one-batch warm-up (tracing excluded) and the best run counts. Prints a table, the number of lines
whose ids differ from HuggingFace's, and a final line holding a JSON object of the figures. Unless
--no_history, ours' tokens per CPU-second and its ratio to HuggingFace's (measured in the same run, so less
sensitive to a busy machine) go to benchmarks/results/tokenization.jsonl with the change against the last
figure on this CPU model (`benchmarks.lib.history`; timed passes exclude start-up and tracing: fixed cost 0).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import gzip
import json
import os
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tensorflow as tf  # noqa: E402
import tensorflow_text as tf_text  # noqa: E402
from tokenizers import BertWordPieceTokenizer  # noqa: E402

from commands.tf_startup import quiet_command  # noqa: E402
from benchmarks.lib import history  # noqa: E402
from demo import shared_data  # noqa: E402
from preprocessing.vocabulary import Vocabulary  # noqa: E402
from preprocessing.wordpiece import WordPieceTokenizer  # noqa: E402

BATCH = 8192
REPEATS = 3


def read_lines(path: str, limit: int | None) -> list[str]:
    """Non-empty lines of a (gzipped) corpus, without their line ends."""
    opener = gzip.open if path.endswith(".gz") else open
    lines = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip():
                lines.append(line)
                if limit is not None and len(lines) >= limit:
                    break
    return lines


def batches(lines: list[str]) -> list[list[str]]:
    return [lines[i:i + BATCH] for i in range(0, len(lines), BATCH)]


def tf_engine(fn):
    """A `[B]` strings -> ragged ids callable as (count tokens of a batch, ids per line of a batch)."""
    graph = tf.function(fn)

    def count(batch):
        return int(graph(tf.constant(batch)).flat_values.shape[0])

    def ids(batch):
        ragged = graph(tf.constant(batch))
        while ragged.ragged_rank > 1:  # keras-hub / FastBert return [B, (words), (pieces)]
            ragged = ragged.merge_dims(1, 2)
        return [[int(i) for i in row] for row in ragged.to_list()]

    return count, ids


def hf_engine(hf):
    def count(batch):
        return sum(len(e.ids) for e in hf.encode_batch(batch, add_special_tokens=False))

    def ids(batch):
        return [list(e.ids) for e in hf.encode_batch(batch, add_special_tokens=False)]

    return count, ids


def measure(count, lines: list[str]) -> tuple[int, float]:
    """(tokens, best CPU seconds over REPEATS passes), after a one-batch warm-up."""
    chunks = batches(lines)
    count(chunks[0])
    best, tokens = float("inf"), 0
    for _ in range(REPEATS):
        start = time.process_time()
        tokens = sum(count(b) for b in chunks)
        best = min(best, time.process_time() - start)
    return tokens, best


def differing_lines(ids, ref_ids, lines: list[str]) -> tuple[int, list[int]]:
    """Number of lines whose ids differ from the reference's, and the first few of their indices."""
    diff = []
    for offset, batch in enumerate(batches(lines)):
        for j, (a, b) in enumerate(zip(ids(batch), ref_ids(batch))):
            if a != b:
                diff.append(offset * BATCH + j)
    return len(diff), diff[:5]


@quiet_command
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=None, help="first N non-empty lines (default: all)")
    parser.add_argument("--corpus", default=shared_data.path("corpus", "pretrain.txt.gz"))
    parser.add_argument("--vocab", default=shared_data.path("vocab", "bert_uncased_vocab.txt"))
    parser.add_argument("--keras_hub_lines", type=int, default=None, help="first N lines for keras-hub")
    parser.add_argument("--no_history", action="store_true", help="do not append to benchmarks/results/")
    args = parser.parse_args(argv)

    lines = read_lines(args.corpus, args.lines)
    vocab = Vocabulary.from_file(args.vocab)
    print(f"corpus {args.corpus}: {len(lines)} non-empty lines; vocab {args.vocab}: {len(vocab)} entries; "
          f"batches of {BATCH}, best of {REPEATS}, CPU time of all threads")

    import keras_hub  # late: imports keras, which is slow and noisy

    ours = WordPieceTokenizer(vocab, lower_case=True)
    kh = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=args.vocab, lowercase=True, strip_accents=True)
    fast = tf_text.FastBertTokenizer(list(vocab.tokens), token_out_type=tf.int64,
                                     lower_case_nfd_strip_accents=True)
    kh_lines = lines[:args.keras_hub_lines]
    engines = {  # name -> ((count, ids), lines it runs on)
        "ours": (tf_engine(ours.tokenize), lines),
        "hf": (hf_engine(BertWordPieceTokenizer(args.vocab, lowercase=True)), lines),
        "keras_hub": (tf_engine(kh.tokenize), kh_lines),
        "fastbert": (tf_engine(fast.tokenize), lines),
    }

    results = {}
    for name, ((count, _), engine_lines) in engines.items():
        tokens, seconds = measure(count, engine_lines)
        results[name] = {"lines": len(engine_lines), "tokens": tokens, "cpu_s": seconds,
                         "rate": tokens / seconds}
    hf_rate = results["hf"]["rate"]

    print(f"\n{'engine':<10} {'lines':>8} {'tokens':>10} {'CPU s':>8} {'tokens/CPU-s':>13} {'vs HF':>6}")
    for name, r in results.items():
        print(f"{name:<10} {r['lines']:>8} {r['tokens']:>10} {r['cpu_s']:>8.3f} {r['rate']:>13,.0f} "
              f"{r['rate'] / hf_rate:>6.2f}")
    if len(kh_lines) < len(lines):
        print(f"(keras_hub ran on the first {len(kh_lines)} lines only; its rate is per CPU-second as well)")

    print()
    hf_ids = engines["hf"][0][1]
    diffs = {}
    for name in ("ours", "keras_hub", "fastbert"):
        (_, ids), engine_lines = engines[name]
        diffs[name], first = differing_lines(ids, hf_ids, engine_lines)
        print(f"{name} vs hf: {diffs[name]} of {len(engine_lines)} lines differ"
              + (f" (first at line indices {first})" if first else ""))

    print(json.dumps({
        "lines": len(lines), "keras_hub_lines": len(kh_lines),
        "ours_tokens_per_cpu_s": round(results["ours"]["rate"]),
        "hf_tokens_per_cpu_s": round(hf_rate),
        "keras_hub_tokens_per_cpu_s": round(results["keras_hub"]["rate"]),
        "fastbert_tokens_per_cpu_s": round(results["fastbert"]["rate"]),
        "ratio_vs_hf": round(results["ours"]["rate"] / hf_rate, 3),
        "keras_hub_ratio": round(results["keras_hub"]["rate"] / hf_rate, 3),
        "fastbert_ratio": round(results["fastbert"]["rate"] / hf_rate, 3),
        "ours_lines_differing_from_hf": diffs["ours"],
        "keras_hub_lines_differing_from_hf": diffs["keras_hub"],
        "fastbert_lines_differing_from_hf": diffs["fastbert"],
    }))
    if not args.no_history:
        workload = f"{os.path.basename(args.corpus)}, {len(lines)} lines, batches of {BATCH}"
        ours_cpu = results["ours"]["cpu_s"]
        history.record("tokenization", [
            history.Figure("tokens_per_cpu_s", results["ours"]["rate"], True, workload, ours_cpu, 0.0),
            history.Figure("ratio_vs_hf", results["ours"]["rate"] / hf_rate, True, workload,
                           ours_cpu + results["hf"]["cpu_s"], 0.0)])


if __name__ == "__main__":
    main()
