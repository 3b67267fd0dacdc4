"""The Beam embedding job against `downstream.features` in one process: sentences per CPU-second (per core)
on the same module and sentences, and the job's peak memory per worker with 1 and with 4 threads.

    .venv/bin/python -m benchmarks.serving.embed [--corpus PATH] [--sentences 2000] [--startup_sentences 20] \\
        [--kind bert] [--layers last] [--skip_memory] [--no_history]

The module: a tiny export of `--kind` (bert: `bert_tiny`, 2 layers x 128) built as the tests build theirs
(`tests.fixtures.features.train_and_export`: two training steps, a vocabulary from the sentences), so the
model's own work is small and the job's overhead shows as much as it ever will.
Sentences: the corpus's first `--sentences` non-blank lines (default ../shared/data/corpus/heldout.txt.gz),
written as 4 files of equal size (the job reads a file per worker) and as one file for `downstream.features`.
Runs, each a subprocess measured by `benchmarks/_proc.run_tree` (user + sys CPU of the whole process tree):
  features  `python -m downstream.features --input all.txt --output f.tfrecord --layers L --batch_size 64`;
  job       `python -m downstream.embed ... --bad_lines truncate --runner DirectRunner
            --direct_running_mode multi_processing --direct_num_workers 1` (the default runner, one worker);
each on all the sentences and on the first `--startup_sentences`. Start-up (Python and TF imports, loading
the module, first traces; for the job also the driver and the worker process) is subtracted: rate =
(sentences - startup_sentences) / (CPU of the full run - CPU of the small run). Goal: the job's rate at least
90% of features' (Beam's overhead at most 10% per core).
Memory (unless --skip_memory): the job on Beam's Dask runner, one `distributed.LocalCluster` worker process
with 1 thread, then a fresh one with 4 threads (`--dask_npartitions 4`: four bundles at once in the 4-thread
worker); the worker's VmHWM (kernel peak RSS) after the run, and metadata.json's `model_loads`.
Prints a table and a final line holding a JSON object of all figures; then, unless --no_history, both
engines' sentences per CPU-second (start-up subtracted) go to benchmarks/results/embed.jsonl with the change
against the last figure on this CPU model (`benchmarks.lib.history`; the small run's CPU is the fixed cost).
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
from benchmarks.lib import history
from benchmarks.lib.dask_worker import on_fresh_worker
from benchmarks.lib.proc import ROOT, child_env, log_tail, run_tree
from demo import shared_data

GOAL = 0.9
ONE_WORKER = ["--runner", "DirectRunner", "--direct_running_mode", "multi_processing", "--direct_num_workers", "1"]


def read_sentences(path: str, count: int) -> list[str]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(line.strip())
                if len(out) == count:
                    break
    return out


def write_corpus(folder: str, sentences: list[str], files: int = 4) -> tuple[str, str]:
    """`files` parts (for the job) and `all.txt` (for features); returns (pattern, all.txt)."""
    os.makedirs(folder, exist_ok=True)
    size = -(-len(sentences) // files)
    for f in range(files):
        with open(os.path.join(folder, f"part{f}.txt"), "w", encoding="utf-8") as out:
            out.write("".join(s + "\n" for s in sentences[f * size:(f + 1) * size]))
    with open(os.path.join(folder, "all.txt"), "w", encoding="utf-8") as out:
        out.write("".join(s + "\n" for s in sentences))
    return os.path.join(folder, "part*.txt"), os.path.join(folder, "all.txt")


def measure(cmd: list[str], log: str) -> dict:
    result = run_tree([sys.executable, "-m", *cmd], log, cwd=ROOT, env=child_env())
    if result["rc"]:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed:\n{log_tail(log)}")
    return result


def features_cmd(module, corpus_file, out, layers):
    return ["downstream.features", "--module", module, "--input", corpus_file, "--output", out, "--layers", layers,
            "--batch_size", "64"]


def embed_cmd(module, pattern, out, layers, runner):
    return ["downstream.embed", "--module", module, "--input", pattern, "--output_dir", out, "--layers", layers,
            "--batch_size", "64", "--bad_lines", "truncate", "--num_shards", "4", "--overwrite", *runner]


def throughput(tmp, module, full, small, layers, n_full, n_small) -> dict:
    runs = {}
    for name, (pattern, single) in {"full": full, "small": small}.items():
        runs[f"features_{name}"] = measure(features_cmd(module, single, os.path.join(tmp, f"f_{name}.tfrecord"), layers),
                                           os.path.join(tmp, f"features_{name}.log"))
        out = os.path.join(tmp, f"embed_{name}")
        runs[f"embed_{name}"] = measure(embed_cmd(module, pattern, out, layers, ONE_WORKER),
                                        os.path.join(tmp, f"embed_{name}.log"))
        examples = json.load(open(os.path.join(out, "metadata.json")))["examples"]
        assert examples == (n_full if name == "full" else n_small), examples
    figures = {}
    for engine in ("features", "embed"):
        cpu = runs[f"{engine}_full"]["cpu_s"] - runs[f"{engine}_small"]["cpu_s"]
        figures[engine] = {"cpu_full_s": runs[f"{engine}_full"]["cpu_s"], "cpu_startup_s": runs[f"{engine}_small"]["cpu_s"],
                           "wall_full_s": runs[f"{engine}_full"]["wall_s"],
                           "sentences_per_cpu_s": (n_full - n_small) / cpu if cpu > 0 else float("nan")}
    figures["ratio"] = figures["embed"]["sentences_per_cpu_s"] / figures["features"]["sentences_per_cpu_s"]
    return figures


def memory(tmp, module, full, layers) -> dict:
    out = {}
    for threads in (1, 4):
        target = os.path.join(tmp, f"dask_{threads}")
        _, before, peak = on_fresh_worker(
            threads, lambda runner: measure(embed_cmd(module, full[0], target, layers, runner), target + ".log"))
        meta = json.load(open(os.path.join(target, "metadata.json")))
        out[f"threads_{threads}"] = {"worker_peak_mb": peak / 1024, "worker_idle_peak_mb": before / 1024,
                                     "model_loads": meta["model_loads"], "examples": meta["examples"]}
    return out


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=shared_data.path("corpus", "heldout.txt.gz"))
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--startup_sentences", type=int, default=20)
    parser.add_argument("--kind", default="bert", choices=["bert", "gpt", "bilm"])
    parser.add_argument("--layers", default="last")
    parser.add_argument("--skip_memory", action="store_true")
    parser.add_argument("--no_history", action="store_true", help="do not append to benchmarks/results/")
    args = parser.parse_args(argv)
    from tests.fixtures.features import train_and_export

    sentences = read_sentences(args.corpus, args.sentences)
    with tempfile.TemporaryDirectory() as tmp:
        ascii_only = [s for s in sentences if s.isascii()]  # the biLM fixture's vocabulary must be ASCII
        module = train_and_export(os.path.join(tmp, "model"), args.kind, ascii_only)
        full = write_corpus(os.path.join(tmp, "full"), sentences)
        small = write_corpus(os.path.join(tmp, "small"), sentences[:args.startup_sentences])
        figures = {"sentences": len(sentences), "startup_sentences": args.startup_sentences, "kind": args.kind,
                   "layers": args.layers, **throughput(tmp, module, full, small, args.layers, len(sentences),
                                                       min(len(sentences), args.startup_sentences))}
        if not args.skip_memory:
            figures["memory"] = memory(tmp, module, full, args.layers)
    print(f"{'engine':<10} {'CPU s':>8} {'start-up CPU s':>15} {'wall s':>8} {'sentences/CPU-s':>16}")
    for engine in ("features", "embed"):
        f = figures[engine]
        print(f"{engine:<10} {f['cpu_full_s']:>8.1f} {f['cpu_startup_s']:>15.1f} {f['wall_full_s']:>8.1f} "
              f"{f['sentences_per_cpu_s']:>16.1f}")
    print(f"job / features per core: {figures['ratio']:.3f} (goal >= {GOAL})")
    for name, m in figures.get("memory", {}).items():
        print(f"dask worker, {name}: peak {m['worker_peak_mb']:.0f} MB (idle {m['worker_idle_peak_mb']:.0f} MB), "
              f"model loads {m['model_loads']}")
    print(json.dumps(figures))
    if not args.no_history:
        workload = f"{os.path.basename(args.corpus)}, {len(sentences)} sentences, {args.kind}, layers {args.layers}"
        history.record("embed", [history.Figure(f"{engine}_sentences_per_cpu_s", figures[engine]["sentences_per_cpu_s"],
                                                True, workload, figures[engine]["cpu_full_s"],
                                                figures[engine]["cpu_startup_s"]) for engine in ("embed", "features")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
