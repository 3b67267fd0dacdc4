"""The demo's data steps: the vocabulary (`pipeline.vocab`), the tokenized corpus (`preprocessing.tokenize`'s
loop) and the pretraining TFRecords (`pipeline.pretraining_data`) of every training and held-out set, each
reused while its inputs are unchanged: the input files (path, size, mtime: a new split rewrites them), the
vocabulary's sha256 and the job's flags, recorded beside the output (`*.key.json`) once it is complete."""

import glob
import gzip
import json
import os
import sys
import time

from demo import commands

# Data-job flags per set: the three tiny models on the demo's own vocabulary, MiniLM on its own (`--vocab` of
# the converted model_dir) at a sequence length a 2-core CPU can train in minutes. One duplicate of each
# document: the demo's runs see a fraction of the examples even so.
DATA_FLAGS = {"bert": ["--model", "bert", "--max_seq_length", "128", "--dupe_factor", "1"],
              "gpt": ["--model", "gpt", "--max_seq_length", "128"],
              "bilm": ["--model", "bilm", "--max_seq_length", "20"],
              "minilm": ["--model", "bert", "--max_seq_length", "64", "--max_predictions_per_seq", "10",
                         "--dupe_factor", "1"]}


def learn_vocab(corpus: str, vocab_path: str, vocab_size: int) -> None:
    """`pipeline.vocab` on `corpus`, reused while the corpus files (path, size, mtime) and the size are unchanged."""
    key_path, key = vocab_path + ".key.json", {"files": commands.files_key(corpus), "vocab_size": vocab_size}
    if os.path.exists(vocab_path) and commands.key_matches(key_path, key):
        print(f"reusing {vocab_path} (same corpus and size)")
        return
    commands.module("pipeline.vocab", "--input", corpus, "--output", vocab_path, "--vocab_size", str(vocab_size))
    commands.write_key(key_path, key)


def tokenize_corpus(corpus: str, vocab_path: str, out_path: str) -> dict:
    """Token ids of every line to `out_path` (written aside, then renamed) and coverage figures, kept in
    `out_path.json` with the corpus files and vocabulary they came from: reused while those are unchanged.
    The lines go through `preprocessing.tokenize`'s batch loop, as `python -m preprocessing.tokenize` does."""
    from preprocessing.tokenize import LineTokenizer, TokenCounts
    from preprocessing.vocabulary import Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer

    vocab = Vocabulary.from_file(vocab_path)
    key = {"files": commands.files_key(corpus), "vocab_sha256": vocab.sha256}
    meta_path = out_path + ".json"
    if os.path.exists(out_path) and os.path.exists(meta_path):
        saved = json.load(open(meta_path))
        if saved.get("key") == key:
            print(f"reusing {out_path} (same corpus files and vocabulary)")
            return saved["stats"]
    tokenizer = LineTokenizer(WordPieceTokenizer(vocab, lower_case=not vocab.looks_cased))  # the data job's rule
    counts = TokenCounts()
    cpu = time.process_time()
    with open(out_path + ".partial", "w") as out:
        for path, _, _ in key["files"]:
            with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
                tokenizer.write(f, out, counts)
    stats = {"lines": counts.lines, "words": counts.words, "pieces": counts.pieces, "unk": counts.unk}
    stats["tokenize_step_cpu_seconds"] = round(time.process_time() - cpu, 2)  # includes writing tokens.txt
    os.replace(out_path + ".partial", out_path)
    with open(meta_path, "w") as f:
        json.dump({"key": key, "stats": stats}, f)
    return stats


def pattern(data_dir: str, name: str) -> str:
    """The TFRecord pattern of the set `name` (`bert`, `bert_heldout`, `minilm`, ...) under `data_dir`."""
    kind = DATA_FLAGS[name.removesuffix("_heldout")][1]
    return os.path.join(data_dir, name, f"{kind}-*.tfrecord")


def make_pretraining_data(split: dict, vocabs: dict, data_dir: str) -> dict:
    """Runs the Beam job for each model's training and held-out sets (`data_dir/<model>[_heldout]/`, two jobs
    at a time), reusing finished output for the same input and vocabulary; reads one batch of each back.
    `vocabs`: model -> the vocab.txt its data is tokenized with. Returns set name -> examples."""
    from preprocessing import readers
    from preprocessing.metadata import FILE_NAME, DatasetMetadata
    from preprocessing.vocabulary import Vocabulary

    shas, jobs, keys = {}, {}, {}
    for model, vocab_path in vocabs.items():
        sha = Vocabulary.from_file(vocab_path).sha256
        for name, corpus in ((model, split["train"]), (f"{model}_heldout", split["heldout"])):
            shas[name], out = sha, os.path.join(data_dir, name)
            keys[name] = {"files": commands.files_key(corpus), "vocab_sha256": sha, "flags": DATA_FLAGS[model]}
            if os.path.exists(os.path.join(out, FILE_NAME)) and commands.key_matches(out + ".key.json", keys[name]):
                print(f"reusing {out} ({DatasetMetadata.read(out).examples:,} examples)")
                continue
            jobs[name] = [sys.executable, "-m", "pipeline.pretraining_data", "--input", corpus, "--vocab", vocab_path,
                          "--output_dir", out, "--overwrite", *DATA_FLAGS[model]]
    commands.run_all(list(jobs.values()))
    for name in jobs:
        commands.write_key(os.path.join(data_dir, name) + ".key.json", keys[name])
    results = {}
    for name, sha in shas.items():
        results[name] = DatasetMetadata.read(os.path.join(data_dir, name))
        if name in jobs:
            x, _, _ = next(iter(readers.make_dataset(pattern(data_dir, name), 8, model=results[name].model,
                                                     vocab_sha256=sha)))
            shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in sorted(x.items()))
            print(f"{name}: {results[name].examples:,} examples in {len(results[name].files)} shard(s); "
                  f"a batch: {shapes}")
    return {name: meta.examples for name, meta in results.items()}


def corpus_files(corpus: str) -> list[str]:
    return sorted(glob.glob(corpus))
