"""Benchmark of the near-duplicate stage: precision and recall against exact all-pairs Jaccard, and its cost.

    .venv/bin/python -m benchmarks.data.dedup [--base 1000] [--per_rate 40] [--exact 40] [--repeats 3]
        [--baseline DIR] [--skip_cost] [--dask_memory [--dask_threads 2]]

Quality: a synthetic corpus (Zipf-distributed words, 4-12 sentences of 8-20 words per document) of `--base`
documents, plus planted copies: `--exact` exact copies, and `--per_rate` copies at each word-substitution rate
of `RATES`. The truth is computed exactly over all pairs: the Jaccard similarity of every pair of documents
that shares a shingle (an inverted index over the shingles; pairs sharing none have similarity 0). A document
should be dropped when some document with a smaller id has Jaccard >= the threshold (the stage's rule); the
stage (`pipeline.cleaning` with `near` only, in-process runner) drops some: precision and recall of the
dropped set, overall and per planted edit rate.

Cost: `pipeline.pretraining_data --model bert --dupe_factor 1` (or `--dupe_factor`; 4 files, in-process runner
so the figure is one process's CPU) on such a corpus and on one `--scale` times larger (distinct documents),
without cleaning, with `--dedup all`, and with every stage (`--dedup all --filters c4 --decontaminate` a held-out
file of 50 documents of the 1x corpus and 50 others): the CPU per document from the difference between the
two sizes (start-up cancels out), and the process's peak RSS (`benchmarks/proc.run_tree`). Each job runs
`--repeats` times and its figure is the least CPU of them: on a shared machine other work only ever adds CPU
time (cache and core contention), so the least is the closest to the job's own.

`--in_process`: each checkout's jobs of one repeat run one after the other in one process (`pipeline.
pretraining_data.main`, CPU from `getrusage` around each), which imports TensorFlow and Beam once: the figures
leave out the start-up (about 8 of a 1x job's 10 CPU-seconds, and most of the noise on a loaded machine); no
peak RSS.

`--dask_memory`: the same job, alone and with `--dedup all`, on Beam's Dask runner (one `distributed.
LocalCluster` worker process with `--dask_threads` threads, a fresh cluster per run, `--dask_npartitions 4`) at
1x and `--scale`x the corpus: the worker's VmHWM (kernel peak RSS) after the job, beside its idle figure
before it. The stage's own units (a band group, a digest or span group, a document with its edges) do not
grow with the corpus; what the runner keeps of each stage in the worker's memory does (docs/data.md).

`--baseline DIR`: another checkout of the project (e.g. `git archive <commit> | tar -x -C DIR`). Its jobs run
with the same interpreter on the same corpora and vocabulary, each right after the same job of this
checkout, so both see the same machine load; its quality is measured too.

Each run appends its figures (the baseline's beside them), the commit, the CPU model and the load average
to `benchmarks/results/dedup.jsonl` and prints the change against the last run on the same CPU model and
instruction sets (`benchmarks.lib.history.cpu_isa`).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Sequence

from commands.tf_startup import quiet_command
from benchmarks.lib import history, proc
from benchmarks.lib.proc import ROOT
from preprocessing import near_duplicates

RATES = (0.0, 0.01, 0.02, 0.04, 0.08, 0.15, 0.3)
RESULTS = os.path.join(history.RESULTS_DIR, "dedup.jsonl")


def zipf_words(rng, size=20000, s=1.1):
    weights = [1.0 / (k ** s) for k in range(1, size + 1)]
    return lambda n: [f"w{k}" for k in rng.choices(range(size), weights=weights, k=n)]


def make_corpus(base: int, per_rate: int, exact: int, seed: int = 0) -> list[list[str]]:
    """Base documents, then exact copies, then near copies at each rate, shuffled into random ids."""
    rng = random.Random(seed)
    draw = zipf_words(rng)
    docs = [[" ".join(draw(rng.randint(8, 20))).capitalize() + "." for _ in range(rng.randint(4, 12))]
            for _ in range(base)]
    planted = [list(rng.choice(docs[:base])) for _ in range(exact)]
    for rate in RATES:
        for _ in range(per_rate):
            source = rng.choice(docs[:base])
            planted.append([" ".join(w if rng.random() >= rate else draw(1)[0] for w in line.split())
                            for line in source])
    docs += planted
    rng.shuffle(docs)
    return docs


def true_drops(docs, config) -> tuple[set[int], dict[int, float]]:
    """Exact all pairs: the documents with a Jaccard >= threshold neighbour of smaller index, and each
    document's highest similarity to a smaller index."""
    sets = [set(near_duplicates.shingles("\n".join(d), config.shingle_words).tolist()) for d in docs]
    index = collections.defaultdict(list)
    for i, s in enumerate(sets):
        for h in s:
            index[h].append(i)
    shared = collections.Counter()
    for postings in index.values():
        for a in range(len(postings)):
            for b in range(a):
                shared[(postings[b], postings[a])] += 1
    best = collections.defaultdict(float)
    for (i, j), inter in shared.items():
        best[j] = max(best[j], inter / (len(sets[i]) + len(sets[j]) - inter))
    return {j for j, v in best.items() if v >= config.threshold}, best


def write_files(docs, folder: str, files: int = 4) -> str:
    os.makedirs(folder, exist_ok=True)
    for f in range(files):
        part = docs[f::files]
        with open(os.path.join(folder, f"part{f}.txt"), "w") as out:
            out.write("\n\n".join("\n".join(d) for d in part) + "\n")
    return os.path.join(folder, "part*.txt")


def stage_drops(docs, tmp: str, root: str = ROOT, label: str = "") -> set[int]:
    """Runs `pipeline.clean --dedup near` (of the checkout at `root`) on the corpus in one file; the indices
    it dropped."""
    folder = os.path.join(tmp, "quality")
    pattern = write_files(docs, folder, files=1)
    out = os.path.join(tmp, f"quality_out{label}")
    proc.run_module(["pipeline.clean", "--input", pattern, "--output_dir", out, "--dedup", "near",
                      "--runner", "FnApiRunner"], root=root)
    with open(os.path.join(out, "00000-part0.txt")) as f:
        kept = {tuple(d.split("\n")) for d in f.read().rstrip("\n").split("\n\n")}
    return {i for i, d in enumerate(docs) if tuple(d) not in kept or
            any(tuple(docs[j]) == tuple(d) for j in range(i))}


def quality(docs, tmp: str, roots: list[str]) -> list[dict]:
    """Precision and recall of the stage of each checkout in `roots` against the same truth."""
    config = near_duplicates.MinHashConfig()
    started = time.perf_counter()
    truth, best = true_drops(docs, config)
    exact_s = time.perf_counter() - started
    return [_scores(docs, truth, best, stage_drops(docs, tmp, root, str(i)), exact_s) for i, root in enumerate(roots)]


def _scores(docs, truth, best, dropped, exact_s) -> dict:
    hits = len(truth & dropped)
    bands = {}
    for low, high in ((0.0, 0.5), (0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)):
        members = [j for j in range(len(docs)) if low <= best.get(j, 0.0) < high]
        bands[f"{low:.1f}-{min(high, 1.0):.1f}"] = {"documents": len(members),
                                                    "dropped": sum(j in dropped for j in members)}
    return {"documents": len(docs), "true_drops": len(truth), "stage_drops": len(dropped),
            "precision": round(hits / len(dropped), 4) if dropped else 1.0,
            "recall": round(hits / len(truth), 4) if truth else 1.0, "by_true_jaccard": bands,
            "exact_all_pairs_s": round(exact_s, 1)}


def cost(args, tmp: str, roots: list[str]) -> list[dict]:
    """CPU and peak RSS of the pretraining-data job without and with cleaning, at 1x and `scale`x distinct
    documents (more planted copies of more base documents); the extra CPU per document from the difference
    between the two sizes, so the process start-up (about 6 s of imports) cancels out. One figure dict per
    checkout in `roots`, whose jobs run one after the other for each job and repeat."""
    sizes = {1: None, args.scale: None}
    for m in sizes:
        docs = make_corpus(args.base * m, args.per_rate * m, args.exact * m, seed=m)
        sizes[m] = (write_files(docs, os.path.join(tmp, f"cost{m}x")), len(docs))
    vocab = os.path.join(tmp, "vocab.txt")
    proc.run_module(["pipeline.vocab", "--input", sizes[1][0], "--output", vocab, "--vocab_size", "3000",
                      "--runner", "FnApiRunner"])
    heldout = write_heldout(make_corpus(args.base, 0, 0, seed=1), os.path.join(tmp, "heldout.txt"))
    every = ["--dedup", "all", "--filters", "c4", "--decontaminate", heldout]
    runs = {"plain": [], "dedup": ["--dedup", "all"], "every": every}
    jobs = [(name, m, _job_args(pattern, vocab, extra, args.dupe_factor)) for m, (pattern, _) in sizes.items()
            for name, extra in runs.items()]
    measured = [collections.defaultdict(list) for _ in roots]
    for repeat in range(args.repeats):
        if args.in_process:
            for i, root in enumerate(roots):
                for name, m, run in _jobs_in_one_process(root, jobs, os.path.join(tmp, f"r{repeat}_{i}")):
                    measured[i][(name, m)].append(run)
            continue
        for name, m, job_args in jobs:
            for i, root in enumerate(roots):
                out = os.path.join(tmp, f"{name}_{m}x_{i}_{repeat}")
                measured[i][(name, m)].append(_job(root, job_args, out))
                shutil.rmtree(out, ignore_errors=True)
    mode = {"mode": "in_process, start-up left out" if args.in_process else "one process per job"}
    return [mode | _cost_figures(runs_of_root, {m: n for m, (_, n) in sizes.items()}, args.scale)
            for runs_of_root in measured]


def _cost_figures(jobs: dict, documents: dict, scale: int) -> dict:
    """`(run name, corpus multiple)` -> its repeats' measurements => the figures (least CPU of the repeats)."""
    figures, cpu = {}, {}
    for (name, m), runs in jobs.items():
        cpu[name, m] = min(r["cpu_s"] for r in runs)
        figures[f"{name}_{m}x"] = {"documents": documents[m], "cpu_s": round(cpu[name, m], 2),
                                   "cpu_s_runs": [round(r["cpu_s"], 2) for r in runs],
                                   "peak_rss_mb": max((round(r["kernel_max_rss_mb"]) for r in runs
                                                       if "kernel_max_rss_mb" in r), default=None)}
    small, big = documents[1], documents[scale]
    marginal = {name: (cpu[name, scale] - cpu[name, 1]) / (big - small) for name in ("plain", "dedup", "every")}
    figures["cpu_ms_per_document"] = {k: round(1000 * v, 3) for k, v in marginal.items()}
    for name in ("dedup", "every"):
        figures[f"overhead_{name}_per_document"] = round(marginal[name] / marginal["plain"] - 1, 3)
        figures[f"overhead_{name}_whole_job_1x"] = round(cpu[name, 1] / cpu["plain", 1] - 1, 3)
    return figures


def write_heldout(docs, path: str, copies: int = 50, fresh: int = 50) -> str:
    """A held-out file for `--decontaminate`: `copies` documents of the 1x corpus (its seed's base documents:
    the job drops their training copies) and `fresh` others."""
    with open(path, "w") as out:
        out.write("\n\n".join("\n".join(d) for d in docs[:copies] + make_corpus(fresh, 0, 0, seed=99)) + "\n")
    return path


def _job_args(pattern: str, vocab: str, extra: list[str], dupe_factor: int = 1,
              runner: Sequence[str] = ("--runner", "FnApiRunner")) -> list[str]:
    return ["--model", "bert", "--vocab", vocab, "--max_seq_length", "128", "--dupe_factor", str(dupe_factor),
            "--num_shards", "4", *runner, "--progress_seconds", "0", "--input", pattern, *extra]


def dask_memory(args, tmp: str) -> dict:
    """The Dask worker's peak RSS running the job alone and with `--dedup all`, at 1x and `args.scale`x the
    corpus, each on a fresh one-worker cluster."""
    from benchmarks.lib.dask_worker import on_fresh_worker

    out = {"threads": args.dask_threads}
    vocab = os.path.join(tmp, "mem_vocab.txt")
    for m in (1, args.scale):
        docs = make_corpus(args.base * m, args.per_rate * m, args.exact * m, seed=m)
        pattern = write_files(docs, os.path.join(tmp, f"mem{m}x"))
        if m == 1:
            proc.run_module(["pipeline.vocab", "--input", pattern, "--output", vocab, "--vocab_size", "3000",
                              "--runner", "FnApiRunner"])
        for name, extra in (("plain", []), ("dedup", ["--dedup", "all"])):
            target = os.path.join(tmp, f"dask_{name}_{m}x")
            run, idle, peak = on_fresh_worker(args.dask_threads, lambda runner: _job(
                ROOT, _job_args(pattern, vocab, extra, args.dupe_factor, runner), target))
            meta = json.load(open(os.path.join(target, "metadata.json")))
            out[f"{name}_{m}x"] = {"documents": len(docs), "instances": meta["examples"],
                                   "worker_peak_mb": round(peak / 1024), "worker_idle_mb": round(idle / 1024),
                                   "driver_peak_mb": round(run["kernel_max_rss_mb"])}
            print(f"dask worker ({args.dask_threads} threads), {name}, {m}x ({len(docs)} documents): peak "
                  f"{peak / 1024:.0f} MB (idle {idle / 1024:.0f} MB)", flush=True)
    for name in ("plain", "dedup"):
        out[f"{name}_peak_ratio"] = round(out[f"{name}_{args.scale}x"]["worker_peak_mb"]
                                          / out[f"{name}_1x"]["worker_peak_mb"], 3)
    return out


def _job(root: str, job_args: list[str], out: str) -> dict:
    cmd = [sys.executable, "-m", "pipeline.pretraining_data", *job_args, "--output_dir", out]
    run = proc.run_tree(cmd, out + ".log", cwd=root, env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2"))
    if run["rc"]:
        raise RuntimeError(open(out + ".log").read()[-3000:])
    return run


IN_PROCESS = r"""
import json, resource, shutil, sys
from pipeline import pretraining_data

def cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

out, jobs = sys.argv[1], json.loads(sys.argv[2])
for i, (name, m, job_args) in enumerate([jobs[0]] + jobs):  # the first once more: a warm-up, not reported
    before = cpu_s()
    rc = pretraining_data.main(job_args + ["--output_dir", f"{out}/{i}"])
    cpu = cpu_s() - before
    shutil.rmtree(f"{out}/{i}", ignore_errors=True)
    if i:
        print(json.dumps({"name": name, "m": m, "rc": rc, "cpu_s": cpu}), flush=True)
"""


def _jobs_in_one_process(root: str, jobs: list, out: str) -> list[tuple]:
    """`jobs` run one after the other in one process of the checkout at `root` -> `(name, m, measurement)`."""
    result = subprocess.run([sys.executable, "-c", IN_PROCESS, out, json.dumps(jobs)], cwd=root, text=True,
                            capture_output=True, env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2"))
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode or len(lines) != len(jobs) or any(line["rc"] for line in lines):
        raise RuntimeError(result.stderr[-3000:])
    return [(line["name"], line["m"], {"cpu_s": line["cpu_s"]}) for line in lines]


def record(figures: dict) -> None:
    """Appends to the results file and prints the change against the last run on the same CPU model."""
    commit, dirty = history.git_commit(ROOT)
    entry = {"commit": commit, "dirty": dirty, "cpu": history.cpu_model(), "cpu_isa": history.cpu_isa(),
             "cpus": os.cpu_count(),
             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **figures}
    last = None
    if os.path.exists(RESULTS):
        same = [json.loads(line) for line in open(RESULTS) if line.strip()]
        last = next((e for e in reversed(same) if (e.get("cpu"), e.get("cpu_isa")) == (entry["cpu"], entry["cpu_isa"])),
                    None)
    for key in ("precision", "recall"):
        if last and key in last.get("quality", {}) and key in figures.get("quality", {}):
            print(f"{key}: {last['quality'][key]} -> {figures['quality'][key]} (last run {last['commit']})")
    with open(RESULTS, "a") as f:
        f.write(json.dumps(entry) + "\n")


@quiet_command
def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.data.dedup", description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=int, default=1000)
    parser.add_argument("--per_rate", type=int, default=40)
    parser.add_argument("--exact", type=int, default=40)
    parser.add_argument("--scale", type=int, default=4, help="the corpus multiple of the memory run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each cost job; the least CPU counts")
    parser.add_argument("--dupe_factor", type=int, default=1, help="of the cost jobs (BERT's usual: 10)")
    parser.add_argument("--in_process", action="store_true", help="one process per checkout and repeat (no start-up)")
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="another checkout of the project, measured the same way, job by job beside this one")
    parser.add_argument("--skip_cost", action="store_true")
    parser.add_argument("--dask_memory", action="store_true", help="peak RSS of a Dask worker at 1x and --scale x")
    parser.add_argument("--dask_threads", type=int, default=2, help="--dask_memory: threads of the worker")
    args = parser.parse_args(argv)
    roots = [ROOT] + ([os.path.abspath(args.baseline)] if args.baseline else [])
    docs = make_corpus(args.base, args.per_rate, args.exact)
    figures = {"corpus": vars(args) | {"rates": RATES}, "load_average": {"start": os.getloadavg()}}
    with tempfile.TemporaryDirectory(prefix="dedup_bench_") as tmp:
        scores = quality(docs, tmp, roots)
        figures["quality"] = scores[0]
        print(json.dumps(figures["quality"]), flush=True)
        if not args.skip_cost:
            costs = cost(args, tmp, roots)
            figures["cost"] = costs[0]
            print(json.dumps(figures["cost"]), flush=True)
        if args.dask_memory:
            figures["dask_memory"] = dask_memory(args, tmp)
            print(json.dumps(figures["dask_memory"]), flush=True)
    if args.baseline:
        figures["baseline"] = {"path": roots[1], "commit": history.git_commit(roots[1])[0], "quality": scores[1]}
        if not args.skip_cost:
            figures["baseline"]["cost"] = costs[1]
        print("baseline:", json.dumps(figures["baseline"]), flush=True)
    figures["load_average"]["end"] = os.getloadavg()
    record(figures)
    return figures


if __name__ == "__main__":
    main()
