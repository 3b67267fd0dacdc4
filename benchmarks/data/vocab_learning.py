"""Vocabulary learning: wall time and peak memory of the project's Beam job against HuggingFace's trainer.

    .venv/bin/python -m benchmarks.data.vocab_learning [--corpus PATH] [--vocab_size N] [--runner R] [--heldout PATH]

Engines, each run as a subprocess, one after the other, on the same corpus:
  ours  `python -m pipeline.vocab --input CORPUS --output ours.txt --vocab_size N [--runner R]` (without
        --runner: Beam's DirectRunner in multi-processing mode, one worker process per core);
  hf    `BertWordPieceTokenizer(lowercase=True).train_from_iterator(<corpus lines>, min_frequency=2,
        limit_alphabet=1000)` then `save_model` (HuggingFace's default threading: all cores).
Peak memory is the largest sum of VmRSS over the child's whole process tree (the child and every
descendant, found through the ppid fields of /proc/*/stat), sampled every 0.1 s; `procs` is the most
processes seen in that tree at once. Afterwards both vocabularies tokenize the held-out corpus through the
project's `WordPieceTokenizer.tokenize_words`: UNK rate (words that are exactly `[UNK]` / words) and pieces
per word. Prints a table and a final line holding a JSON object.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import gzip
import json
import os
import sys
import tempfile

from commands.tf_startup import quiet_command
from benchmarks.lib.proc import POLL_S, ROOT, log_tail, run_tree
from demo import shared_data


HF_SCRIPT = r"""
import gzip, sys
from tokenizers import BertWordPieceTokenizer
corpus, vocab_size, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def lines():
    with gzip.open(corpus, "rt", encoding="utf-8") if corpus.endswith(".gz") else open(corpus, encoding="utf-8") as f:
        for line in f:
            yield line.rstrip("\n")
tok = BertWordPieceTokenizer(lowercase=True)
tok.train_from_iterator(lines(), vocab_size=vocab_size, min_frequency=2, limit_alphabet=1000,
                        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
tok.save_model(out_dir, "hf")
"""


def run_measured(name: str, cmd: list[str], log_path: str) -> dict:
    """Runs `cmd`; returns wall seconds, peak tree RSS (MB) and the most processes seen in the tree. Exits
    with the log's tail if it fails."""
    result = run_tree(cmd, log_path, cwd=ROOT)
    if result["rc"] != 0:
        sys.exit(f"{name} failed (exit {result['rc']}):\n" + log_tail(log_path))
    return {"wall_s": result["wall_s"], "peak_rss_mb": result["peak_tree_rss_mb"],
            "processes": result["max_procs"]}


def quality(vocab_path: str, lines: list[str]) -> dict:
    """UNK rate and pieces per word of `lines` under the vocabulary, through the project's tokenizer."""
    import tensorflow as tf

    from preprocessing.vocabulary import UNK, Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer

    vocab = Vocabulary.from_file(vocab_path)
    tok = WordPieceTokenizer(vocab, lower_case=True)
    unk_id = vocab.id_of(UNK)
    words = pieces = unk = 0
    for i in range(0, len(lines), 4096):
        per_word = tok.tokenize_words(tf.constant(lines[i:i + 4096])).values  # [N, (P)]
        lengths = per_word.row_lengths()
        single = tf.boolean_mask(per_word.row_starts(), tf.equal(lengths, 1))
        words += int(per_word.nrows())
        pieces += int(per_word.flat_values.shape[0])
        unk += int(tf.reduce_sum(tf.cast(tf.equal(tf.gather(per_word.flat_values, single), unk_id), tf.int64)))
    return {"entries": len(vocab), "words": words, "pieces": pieces, "unk_words": unk,
            "unk_rate": unk / words, "pieces_per_word": pieces / words}


@quiet_command
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=shared_data.path("corpus", "pretrain.txt.gz"))
    parser.add_argument("--vocab_size", type=int, default=30522)
    parser.add_argument("--runner", default=None, help="Beam runner for ours (default: the project's)")
    parser.add_argument("--heldout", default=shared_data.path("corpus", "heldout.txt.gz"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    with tempfile.TemporaryDirectory(prefix="vocab_bench_") as tmp:
        ours_cmd = [sys.executable, "-m", "pipeline.vocab", "--input", args.corpus,
                    "--output", os.path.join(tmp, "ours.txt"), "--vocab_size", str(args.vocab_size)]
        if args.runner:
            ours_cmd += ["--runner", args.runner]
        hf_cmd = [sys.executable, "-c", HF_SCRIPT, args.corpus, str(args.vocab_size), tmp]
        print(f"corpus {args.corpus}, vocab_size {args.vocab_size}, runner {args.runner or '(project default)'}, "
              f"{os.cpu_count()} CPUs; RSS summed over each process tree every {POLL_S} s", flush=True)
        runs = {"ours": run_measured("ours", ours_cmd, os.path.join(tmp, "ours.log")),
                "hf": run_measured("hf", hf_cmd, os.path.join(tmp, "hf.log"))}

        opener = gzip.open if args.heldout.endswith(".gz") else open
        with opener(args.heldout, "rt", encoding="utf-8") as f:
            heldout = [line.rstrip("\n") for line in f if line.strip()]
        for name, path in (("ours", "ours.txt"), ("hf", "hf-vocab.txt")):
            runs[name].update(quality(os.path.join(tmp, path), heldout))

    o, h = runs["ours"], runs["hf"]
    print(f"\n{'engine':<7} {'wall s':>8} {'peak RSS MB':>12} {'procs':>6} {'entries':>8} {'UNK rate':>9} "
          f"{'pieces/word':>12}")
    for name, r in runs.items():
        print(f"{name:<7} {r['wall_s']:>8.1f} {r['peak_rss_mb']:>12.0f} {r['processes']:>6} {r['entries']:>8} "
              f"{r['unk_rate']:>9.4%} {r['pieces_per_word']:>12.4f}")
    ratios = {"wall_ratio": o["wall_s"] / h["wall_s"], "rss_ratio": o["peak_rss_mb"] / h["peak_rss_mb"],
              "unk_rate_ratio": o["unk_rate"] / h["unk_rate"] if h["unk_rate"] else None,
              "pieces_per_word_ratio": o["pieces_per_word"] / h["pieces_per_word"]}
    print(f"{'ours/hf':<7} {ratios['wall_ratio']:>8.2f} {ratios['rss_ratio']:>12.2f} {'':>6} {'':>8} "
          f"{ratios['unk_rate_ratio'] if ratios['unk_rate_ratio'] is not None else float('nan'):>9.2f} "
          f"{ratios['pieces_per_word_ratio']:>12.4f}")
    print(f"held-out {args.heldout}: {len(heldout)} lines, {o['words']} words (UNK rate = words that are exactly "
          f"[UNK] / words)")

    figures = {"vocab_size": args.vocab_size, "runner": args.runner, "cpus": os.cpu_count(),
               "heldout_words": o["words"]}
    for name, r in runs.items():
        figures.update({f"{name}_wall_s": round(r["wall_s"], 2), f"{name}_peak_rss_mb": round(r["peak_rss_mb"], 1),
                        f"{name}_processes": r["processes"],
                        f"{name}_entries": r["entries"], f"{name}_unk_words": r["unk_words"],
                        f"{name}_unk_rate": round(r["unk_rate"], 6),
                        f"{name}_pieces_per_word": round(r["pieces_per_word"], 4)})
    figures.update({k: (round(v, 4) if v is not None else None) for k, v in ratios.items()})
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
