"""What the pretraining-data benchmarks share (`benchmarks.data.pretraining_data`, `data_stages`,
`data_versions`, `scaling`): corpora in BERT's format read, cut and written, the job's flags, TFRecords
counted, a measured run, and the reference peer's run."""

import gzip
import os
import struct
import sys

from benchmarks.lib.proc import ROOT, child_env, log_tail, run_tree

COMMON = ["--max_seq_length", "128", "--max_predictions_per_seq", "20"]  # the job's flags in every run
SMALL_JOB_LINES = 40  # the small job that shows the fixed cost
MULTI_PROCESSING = ["--runner", "DirectRunner", "--direct_running_mode", "multi_processing",
                    "--direct_num_workers", "0"]


def read_documents(path: str, limit: int | None = None) -> list[list[str]]:
    """Documents (lists of non-empty lines, without line ends) of a BERT-format corpus."""
    opener = gzip.open if path.endswith(".gz") else open
    documents, current = [], []
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\r\n")
            if line.strip():
                current.append(line)
                continue
            if current:
                documents.append(current)
                current = []
                if limit is not None and len(documents) >= limit:
                    break
    if current and (limit is None or len(documents) < limit):
        documents.append(current)
    return documents


def write_corpus(path: str, documents: list[list[str]], copies: int = 1) -> None:
    """A gzipped BERT-format corpus of `documents`, `copies` times over."""
    text = "".join("\n".join(doc) + "\n\n" for doc in documents)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
        for _ in range(copies):
            f.write(text)


def first_lines(documents: list[list[str]], lines: int = SMALL_JOB_LINES) -> list[list[str]]:
    """The documents cut after `lines` sentences in all."""
    out = []
    for doc in documents:
        left = lines - sum(len(d) for d in out)
        if left <= 0:
            break
        out.append(doc[:left])
    return out


def corpus_stats(documents: list[list[str]]) -> dict:
    """Documents, sentences and words."""
    return {"documents": len(documents), "sentences": sum(len(d) for d in documents),
            "words": sum(len(line.split()) for d in documents for line in d)}


def count_records(path: str) -> int:
    """Records in an uncompressed TFRecord file (length-prefixed frames; payloads skipped)."""
    n = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(12)  # uint64 length, uint32 masked CRC of the length
            if not header:
                return n
            (length,) = struct.unpack("<Q", header[:8])
            f.seek(length + 4, os.SEEK_CUR)  # payload, its CRC
            n += 1


def measure(name: str, cmd: list[str], log_path: str) -> dict:
    """Runs `cmd` from the root under `run_tree`, printing its wall and CPU seconds; exits on failure."""
    print(f"  running {name} ...", end="", flush=True)
    run = run_tree(cmd, log_path, cwd=ROOT, env=child_env())
    if run["rc"] != 0:
        print()
        sys.exit(f"{name} failed (exit {run['rc']}); command: {' '.join(cmd)}\n{log_tail(log_path)}")
    print(f" {run['wall_s']:.1f} s wall, {run['cpu_s']:.1f} CPU s", flush=True)
    return run


def run_reference(corpus: str, vocab: str, dupe_factor: int, tmp: str, tag: str, tokenizer: str = "original") -> dict:
    """The reference peer's run, measured: its instances, records, output size and peak RSS."""
    output = os.path.join(tmp, f"reference_{tag}.tfrecord")
    log = os.path.join(tmp, f"reference_{tag}.log")
    cmd = [sys.executable, "-m", "benchmarks.peers.reference_create_pretraining_data", "--input", corpus,
           "--vocab", vocab, "--output", output, "--dupe_factor", str(dupe_factor), *COMMON, "--seed", "12345",
           "--tokenizer", tokenizer]
    run = measure(f"reference ({tag}, dupe_factor {dupe_factor}, {tokenizer} tokenizer)", cmd, log)
    with open(log, errors="replace") as f:
        numbers = [line.strip() for line in f if line.strip().isdigit()]
    run["instances"] = int(numbers[-1])
    run["records"] = count_records(output)
    run["output_mb"] = os.path.getsize(output) / 2**20
    run["peak_rss_mb"] = max((p["peak_kb"] for p in run["processes"]), default=0) / 1024
    if run["records"] != run["instances"]:
        print(f"  WARNING: reference printed {run['instances']} instances but wrote {run['records']} records")
    os.remove(output)
    return run


