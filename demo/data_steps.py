"""The demo's data steps: the cleaned training text (`pipeline.clean`: dedup, and decontamination against the
held-out documents), the vocabulary (`pipeline.vocab`), the tokenized corpus (`preprocessing.tokenize`'s
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


# What the cleaning step asks of `pipeline.clean`, besides `--decontaminate` (always: the held-out file). Every
# dedup stage (on Shakespeare only the span stage finds anything: docs/demo.md says what, and why).
CLEAN_FLAGS = ["--dedup", "all"]
# Below this many bytes of training and held-out text the cleaning job runs in-process. Beam's local default
# (one process under 4 MB, else a worker per core) suits the tokenizing jobs; this job's work per MB is small,
# so the workers' start-up dominates: on 2 cores, 14-21 s in-process against 32-41 s on two workers for the
# demo's 5.9 MB, 36 s against 52 s for 24 MB.
CLEAN_IN_PROCESS_BYTES = 32 * 2**20
CLEAN_REPORT = "clean_report.json"  # `pipeline.clean.REPORT` (not imported: that module imports Beam)
# The report's counters the demo keeps, under shorter names: documents kept and read, what each rule removed.
CLEAN_COUNTERS = {"kept": "clean_documents_kept", "exact": "dedup_exact_documents", "near": "dedup_near_documents",
                  "span_sentences": "dedup_span_sentences", "span_emptied": "dedup_span_documents_emptied",
                  "heldout_exact": "decontaminate_exact_documents",
                  "heldout_near": "decontaminate_near_documents", "heldout_read": "heldout_documents"}


def clean_training_text(split: dict, out_dir: str) -> dict:
    """`pipeline.clean` on `split["train"]` (`CLEAN_FLAGS`, `--decontaminate split["heldout"]`) into `out_dir`,
    reused while both files (path, size, mtime) and the flags are unchanged (`out_dir.key.json`). Returns the
    cleaned file (`train`), the report's paths, its summary line and `CLEAN_COUNTERS`' figures."""
    files = [split["train"], split["heldout"]]
    runner = ["--runner=FnApiRunner"] if sum(map(os.path.getsize, files)) < CLEAN_IN_PROCESS_BYTES else []
    key_path, key = out_dir + ".key.json", {"files": [commands.files_key(f) for f in files], "flags": CLEAN_FLAGS}
    report_path = os.path.join(out_dir, CLEAN_REPORT)
    reused = os.path.exists(report_path) and commands.key_matches(key_path, key)
    if not reused:
        commands.module("pipeline.clean", "--input", split["train"], "--output_dir", out_dir, "--decontaminate",
                        split["heldout"], "--overwrite", *CLEAN_FLAGS, *runner)
        commands.write_key(key_path, key)
    with open(report_path) as f:
        record = json.load(f)
    if reused:  # a run prints the line itself
        print(f"reusing {out_dir} (same training and held-out files, same flags)\n{record['summary']}")
    (name,) = record["files"]  # one input file, one output file
    return cleaning_figures(record, os.path.join(out_dir, name), report_path)


def cleaning_figures(record: dict, train: str, report_path: str) -> dict:
    """`pipeline.clean`'s report -> what the demo's summary keeps of it (pure)."""
    counters = record["counters"]
    return {"train": train, "report": report_path, "report_md": report_path.removesuffix(".json") + ".md",
            "dedup": record["config"]["dedup"], "summary": record["summary"],
            **{name: counters.get(key, 0) for name, key in CLEAN_COUNTERS.items()},
            "documents_seen": record["documents_seen"]}


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


def make_pretraining_data(train: str, heldout: str, vocabs: dict, data_dir: str) -> dict:
    """Runs the Beam job for each model's training and held-out sets (`data_dir/<model>[_heldout]/`, two jobs
    at a time; `train` and `heldout`: their text files), reusing finished output for the same input and
    vocabulary; reads one batch of each back.
    `vocabs`: model -> the vocab.txt its data is tokenized with. Returns set name -> examples."""
    from preprocessing import readers
    from preprocessing.metadata import FILE_NAME, DatasetMetadata
    from preprocessing.vocabulary import Vocabulary

    shas, jobs, keys = {}, {}, {}
    for model, vocab_path in vocabs.items():
        sha = Vocabulary.from_file(vocab_path).sha256
        for name, corpus in ((model, train), (f"{model}_heldout", heldout)):
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
