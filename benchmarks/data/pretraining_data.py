"""BERT pretraining data: instances per CPU-second, memory and worker scaling of the project's Beam job.

    .venv/bin/python -m benchmarks.data.pretraining_data [--corpus PATH] [--vocab PATH] [--dupe_factor 5]
        [--scaling_dupe_factor 1] [--speedup_dupe_factor 3] [--max_documents N] [--skip_scaling]
        [--skip_speedup] [--no_history]

Engines, each run as a subprocess, one after the other, with TF_CPP_MIN_LOG_LEVEL=2, max_seq_length 128,
max_predictions_per_seq 20, seed 12345:
  reference  `python -m benchmarks.peers.reference_create_pretraining_data` (written next to this file): a
             single-process, pure-Python implementation of google-research/bert's create_pretraining_data.py
             (all documents and instances in memory; the original's pure-Python tokenizer) writing one
             TFRecord file; section 1 also runs it with `--tokenizer hf` (HuggingFace `tokenizers`, Rust: the
             same pieces, a stronger peer than the original);
  ours       `python -m pipeline.pretraining_data --model bert ...`: without Beam options the project's default,
             Beam's DirectRunner in multi-processing mode with one worker per core (2 here); section 1 also
             runs it on one process (`--runner FnApiRunner`); in section 4
             `--runner DirectRunner --direct_running_mode multi_processing --direct_num_workers N`.
Sections:
  0. the fixed cost: the corpus's first 40 lines at --dupe_factor on the default runner (what a small job pays;
     in-process since it is small), on the multi-processing DirectRunner and on the FnApiRunner (each the
     fixed part of a section-1 run, which tells the speed history whether that run was large enough);
  1. throughput at --dupe_factor (default 5) on the corpus: instances per CPU-second of the four runs, and
     the ratios (goal: ours >= 10x the reference);
  2. peak memory of the same two runs: the reference's, and for ours the driver's, the largest single Beam
     worker's (the `sdk_worker_main` processes) and the whole tree's;
  3. memory scaling (unless --skip_scaling), at --scaling_dupe_factor (default 1, to keep the run short):
     ours and the reference on the corpus and on a 4x corpus (the corpus concatenated 4 times; documents
     repeat). Goal: the per-worker peak of ours does not grow with the corpus;
  4. worker speed-up (unless --skip_speedup), at --speedup_dupe_factor (default 3) on the 4x corpus (a
     workload large enough that the per-process start-up, TF imports mostly, does not hide the work): ours
     with 1 and 2 workers, wall times and their ratio.
Measurement (benchmarks/lib/proc.py): each command runs under a small Python wrapper that makes itself a child
subreaper; CPU time is the wrapper's `resource.getrusage(RUSAGE_CHILDREN)` after it has waited for the
command and every orphaned descendant: user + sys of the whole process tree (Beam's workers are the
driver's children, the command's grandchildren), the wrapper excluded. Wall time is measured around the
wrapper (Python and TensorFlow start-up included). Memory is sampled every 0.1 s: the tree peak is the largest
sum of VmRSS over the tree; a single process's peak is the largest VmHWM (the kernel's peak RSS) seen for it.
RSS counts shared pages once per process, so tree sums overstate physical memory. Instances: the project's
metadata.json `examples` (checked against its `instances` counter and the records in its shards); the
reference's printed count (checked against the records in its file). --max_documents N runs everything on
the corpus's first N documents (a quick test). Outputs go to a temporary directory, removed at the end.
Prints a table per section and a final line holding a JSON object of all figures. Unless --no_history,
appends the fixed cost and section 1's instances per CPU-second (whole, and marginal: instances over the CPU
beyond the 40-line job's) to benchmarks/results/pretraining_data.jsonl and prints each against the last
figure on the same CPU model (`benchmarks.lib.history`).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

from commands.tf_startup import quiet_command
from benchmarks.lib import history
from benchmarks.lib.pretraining_runs import (COMMON, MULTI_PROCESSING, SMALL_JOB_LINES, corpus_stats, count_records,
                                             first_lines, measure, read_documents, run_reference, write_corpus)
from benchmarks.lib.proc import POLL_S
from benchmarks.lib.stats import rounded as _r
from demo import shared_data

GOAL = 10.0
CPU_METHOD = ("user+sys from getrusage(RUSAGE_CHILDREN) in a child-subreaper wrapper that waits for the command "
              "and all its descendants")
SHELLS = {"sh", "bash", "dash"}


# ---------------------------------------------------------------------------------------------------------
# Runs


def run_ours(corpus: str, vocab: str, dupe_factor: int, tmp: str, tag: str, beam_args: list[str]) -> dict:
    output_dir = os.path.join(tmp, f"ours_{tag}")
    log = os.path.join(tmp, f"ours_{tag}.log")
    cmd = [sys.executable, "-m", "pipeline.pretraining_data", "--model", "bert", "--input", corpus, "--vocab", vocab,
           "--output_dir", output_dir, *COMMON, "--dupe_factor", str(dupe_factor), *beam_args]
    run = measure(f"ours ({tag}, dupe_factor {dupe_factor}{', ' + ' '.join(beam_args) if beam_args else ''})",
                  cmd, log)
    with open(os.path.join(output_dir, "metadata.json")) as f:
        metadata = json.load(f)
    run["instances"] = metadata["examples"]
    shards = [os.path.join(output_dir, name) for name in metadata["files"]]
    run["records"] = sum(count_records(path) for path in shards)
    run["shards"] = len(shards)
    run["output_mb"] = sum(os.path.getsize(path) for path in shards) / 2**20
    with open(log, errors="replace") as f:
        text = f.read()
    counters = dict((m.group(1), int(m.group(2).replace(",", "")))
                    for m in re.finditer(r"^  (\w+)\s+([\d,]+)$", text, re.M))
    run["counters"] = counters
    done = re.search(r"pretraining_data: done in ([\d.]+) s", text)
    run["job_s"] = float(done.group(1)) if done else None
    if counters.get("instances") != run["instances"] or run["records"] != run["instances"]:
        print(f"  WARNING: metadata says {run['instances']} examples, the counter {counters.get('instances')}, "
              f"the shards hold {run['records']} records")
    _split_processes(run)
    shutil.rmtree(output_dir)
    return run


def _is_worker(proc: dict) -> bool:
    cmdline = proc["cmdline"]
    return (any("sdk_worker_main" in a for a in cmdline) and bool(cmdline)
            and os.path.basename(cmdline[0]) not in SHELLS)


def _split_processes(run: dict) -> None:
    """Driver (the command itself), Beam workers, others: peaks (MB) and sampled CPU seconds."""
    procs = run["processes"]
    workers = [p for p in procs if _is_worker(p)]
    top = [p for p in procs if p["depth"] == 1 and not _is_worker(p)]
    driver = top[0] if top else None
    others = [p for p in procs if p is not driver and p not in workers]
    run["driver_peak_mb"] = driver["peak_kb"] / 1024 if driver else 0.0
    run["worker_peak_mb"] = max((p["peak_kb"] for p in workers), default=0) / 1024
    run["worker_peaks_mb"] = [round(p["peak_kb"] / 1024, 1) for p in workers]
    run["workers"] = len(workers)
    run["others"] = [(" ".join(p["cmdline"])[:60], round(p["peak_kb"] / 1024, 1)) for p in others]
    run["driver_cpu_s"] = driver["cpu_s"] if driver else 0.0
    run["workers_cpu_s"] = sum(p["cpu_s"] for p in workers)


# ---------------------------------------------------------------------------------------------------------
# Report



def section1(ref: dict, ref_hf: dict, ours: dict, ours_one: dict, dupe_factor: int) -> dict:
    rate = {name: r["instances"] / r["cpu_s"] for name, r in
            (("ref", ref), ("ref_hf", ref_hf), ("ours", ours), ("ours_one", ours_one))}
    ratio = rate["ours"] / rate["ref"]
    print(f"\n1. Throughput, dupe_factor {dupe_factor} (CPU s = {CPU_METHOD})")
    print(f"{'engine':<14} {'instances':>10} {'wall s':>8} {'job s':>7} {'CPU s':>8} {'user s':>8} {'sys s':>7} "
          f"{'inst/CPU-s':>11} {'inst/wall-s':>12} {'output MB':>10}")
    rows = (("reference", ref), ("reference hf", ref_hf), ("ours", ours), ("ours 1 proc", ours_one))
    for name, r in rows:
        job = f"{r['job_s']:>7.1f}" if r.get("job_s") is not None else f"{'':>7}"
        print(f"{name:<14} {r['instances']:>10,} {r['wall_s']:>8.1f} {job} {r['cpu_s']:>8.1f} {r['user_s']:>8.1f} "
              f"{r['sys_s']:>7.1f} {r['instances'] / r['cpu_s']:>11,.0f} {r['instances'] / r['wall_s']:>12,.0f} "
              f"{r['output_mb']:>10.1f}")
    wall_ratio = (ours["instances"] / ours["wall_s"]) / (ref["instances"] / ref["wall_s"])
    print(f"{'ours/ref':<14} {ours['instances'] / ref['instances']:>10.3f} {ours['wall_s'] / ref['wall_s']:>8.2f} "
          f"{'':>7} {ours['cpu_s'] / ref['cpu_s']:>8.2f} {'':>8} {'':>7} {ratio:>11.2f} {wall_ratio:>12.2f}")
    print(f"instances per CPU-second, ours / reference: {ratio:.2f}x (goal >= {GOAL:.0f}x: "
          f"{'met' if ratio >= GOAL else 'NOT met'}); against the reference with HuggingFace's tokenizer "
          f"{rate['ours'] / rate['ref_hf']:.2f}x; ours on one process (--runner FnApiRunner) "
          f"{rate['ours_one'] / rate['ref']:.2f}x and {rate['ours_one'] / rate['ref_hf']:.2f}x. 'job s' is the "
          f"project's own 'done in' time (pipeline only, no start-up); ours' CPU split (sampled): driver "
          f"{ours['driver_cpu_s']:.1f} s, workers {ours['workers_cpu_s']:.1f} s")
    return {"dupe_factor": dupe_factor,
            "ref_instances": ref["instances"], "ref_wall_s": _r(ref["wall_s"], 2), "ref_cpu_s": _r(ref["cpu_s"], 2),
            "ref_instances_per_cpu_s": _r(rate["ref"]), "ref_hf_cpu_s": _r(ref_hf["cpu_s"], 2),
            "ref_hf_wall_s": _r(ref_hf["wall_s"], 2), "ref_hf_instances_per_cpu_s": _r(rate["ref_hf"]),
            "ours_instances": ours["instances"],
            "ours_wall_s": _r(ours["wall_s"], 2), "ours_job_s": ours["job_s"], "ours_cpu_s": _r(ours["cpu_s"], 2),
            "ours_driver_cpu_s": _r(ours["driver_cpu_s"], 2), "ours_workers_cpu_s": _r(ours["workers_cpu_s"], 2),
            "ours_instances_per_cpu_s": _r(rate["ours"]), "instances_per_cpu_s_ratio": _r(ratio, 3),
            "instances_per_cpu_s_ratio_vs_hf": _r(rate["ours"] / rate["ref_hf"], 3),
            "ours_one_process_cpu_s": _r(ours_one["cpu_s"], 2), "ours_one_process_wall_s": _r(ours_one["wall_s"], 2),
            "ours_one_process_instances_per_cpu_s": _r(rate["ours_one"]),
            "one_process_ratio": _r(rate["ours_one"] / rate["ref"], 3),
            "one_process_ratio_vs_hf": _r(rate["ours_one"] / rate["ref_hf"], 3),
            "instances_per_wall_s_ratio": _r(wall_ratio, 3), "goal_ratio": GOAL, "goal_met": ratio >= GOAL,
            "ref_output_mb": _r(ref["output_mb"]), "ours_output_mb": _r(ours["output_mb"]),
            "ours_shards": ours["shards"]}


def section2(ref: dict, ours: dict, dupe_factor: int) -> dict:
    print(f"\n2. Peak memory, dupe_factor {dupe_factor} (MB; single process: largest VmHWM seen; tree: largest "
          f"summed VmRSS, sampled every {POLL_S} s)")
    print(f"{'engine':<10} {'driver':>8} {'max worker':>11} {'workers':>8} {'tree':>8} {'procs':>6} "
          f"{'kernel max':>11}")
    print(f"{'reference':<10} {ref['peak_rss_mb']:>8.0f} {'-':>11} {'-':>8} {ref['peak_tree_rss_mb']:>8.0f} "
          f"{ref['max_procs']:>6} {ref['kernel_max_rss_mb']:>11.0f}")
    print(f"{'ours':<10} {ours['driver_peak_mb']:>8.0f} {ours['worker_peak_mb']:>11.0f} {ours['workers']:>8} "
          f"{ours['peak_tree_rss_mb']:>8.0f} {ours['max_procs']:>6} {ours['kernel_max_rss_mb']:>11.0f}")
    print(f"ours' workers' peaks (MB): {ours['worker_peaks_mb']}; other processes in the tree: "
          f"{ours['others'] or 'none'}; 'kernel max' = ru_maxrss of RUSAGE_CHILDREN (largest single process)")
    return {"ref_peak_rss_mb": _r(ref["peak_rss_mb"]), "ours_driver_peak_rss_mb": _r(ours["driver_peak_mb"]),
            "ours_worker_peak_rss_mb": _r(ours["worker_peak_mb"]), "ours_workers": ours["workers"],
            "ours_worker_peaks_mb": ours["worker_peaks_mb"], "ours_tree_peak_rss_mb": _r(ours["peak_tree_rss_mb"]),
            "ours_max_procs": ours["max_procs"], "ours_kernel_max_rss_mb": _r(ours["kernel_max_rss_mb"]),
            "ref_kernel_max_rss_mb": _r(ref["kernel_max_rss_mb"])}


def section3(runs: dict, stats: dict, dupe_factor: int) -> dict:
    print(f"\n3. Memory scaling, dupe_factor {dupe_factor} (reduced to keep the run short), corpus 1x and 4x "
          f"(concatenated 4 times) (MB)")
    print(f"{'corpus':<7} {'documents':>10} {'instances':>10} {'ours wall s':>12} {'driver':>8} {'max worker':>11} "
          f"{'tree':>8} {'ref instances':>14} {'ref wall s':>11} {'ref peak':>9}")
    for tag in ("1x", "4x"):
        o, r = runs[f"ours_{tag}"], runs[f"ref_{tag}"]
        print(f"{tag:<7} {stats[tag]['documents']:>10,} {o['instances']:>10,} {o['wall_s']:>12.1f} "
              f"{o['driver_peak_mb']:>8.0f} {o['worker_peak_mb']:>11.0f} {o['peak_tree_rss_mb']:>8.0f} "
              f"{r['instances']:>14,} {r['wall_s']:>11.1f} {r['peak_rss_mb']:>9.0f}")
    o1, o4, r1, r4 = runs["ours_1x"], runs["ours_4x"], runs["ref_1x"], runs["ref_4x"]
    ratios = {"driver": o4["driver_peak_mb"] / o1["driver_peak_mb"],
              "worker": o4["worker_peak_mb"] / o1["worker_peak_mb"],
              "tree": o4["peak_tree_rss_mb"] / o1["peak_tree_rss_mb"], "ref": r4["peak_rss_mb"] / r1["peak_rss_mb"]}
    print(f"{'4x/1x':<7} {'':>10} {o4['instances'] / o1['instances']:>10.2f} {o4['wall_s'] / o1['wall_s']:>12.2f} "
          f"{ratios['driver']:>8.2f} {ratios['worker']:>11.2f} {ratios['tree']:>8.2f} "
          f"{r4['instances'] / r1['instances']:>14.2f} {r4['wall_s'] / r1['wall_s']:>11.2f} {ratios['ref']:>9.2f}")
    print(f"ours' workers' peaks (MB): 1x {o1['worker_peaks_mb']}, 4x {o4['worker_peaks_mb']}; shards: 1x "
          f"{o1['shards']}, 4x {o4['shards']}")
    figures = {"scaling_dupe_factor": dupe_factor, "scaling_documents_1x": stats["1x"]["documents"],
               "scaling_documents_4x": stats["4x"]["documents"]}
    for tag in ("1x", "4x"):
        o, r = runs[f"ours_{tag}"], runs[f"ref_{tag}"]
        figures.update({f"scaling_ours_{tag}_instances": o["instances"],
                        f"scaling_ours_{tag}_wall_s": _r(o["wall_s"], 2),
                        f"scaling_ours_{tag}_cpu_s": _r(o["cpu_s"], 2),
                        f"scaling_ours_{tag}_driver_peak_rss_mb": _r(o["driver_peak_mb"]),
                        f"scaling_ours_{tag}_worker_peak_rss_mb": _r(o["worker_peak_mb"]),
                        f"scaling_ours_{tag}_tree_peak_rss_mb": _r(o["peak_tree_rss_mb"]),
                        f"scaling_ours_{tag}_shards": o["shards"],
                        f"scaling_ref_{tag}_instances": r["instances"], f"scaling_ref_{tag}_wall_s": _r(r["wall_s"], 2),
                        f"scaling_ref_{tag}_cpu_s": _r(r["cpu_s"], 2),
                        f"scaling_ref_{tag}_peak_rss_mb": _r(r["peak_rss_mb"])})
    figures.update({f"scaling_{k}_peak_ratio_4x_1x": _r(v, 3) for k, v in ratios.items()})
    return figures


def section4(runs: dict, dupe_factor: int) -> dict:
    one, two = runs["workers_1"], runs["workers_2"]
    print(f"\n4. Worker speed-up, dupe_factor {dupe_factor}, corpus 4x (--runner DirectRunner "
          f"--direct_running_mode multi_processing --direct_num_workers N)")
    print(f"{'workers':<8} {'instances':>10} {'wall s':>8} {'job s':>7} {'CPU s':>8} {'driver CPU s':>13} "
          f"{'workers CPU s':>14} {'max worker MB':>14}")
    for n, r in (("1", one), ("2", two)):
        print(f"{n:<8} {r['instances']:>10,} {r['wall_s']:>8.1f} {r['job_s'] or float('nan'):>7.1f} {r['cpu_s']:>8.1f} "
              f"{r['driver_cpu_s']:>13.1f} {r['workers_cpu_s']:>14.1f} {r['worker_peak_mb']:>14.0f}")
    speedup = one["wall_s"] / two["wall_s"]
    job_speedup = one["job_s"] / two["job_s"] if one["job_s"] and two["job_s"] else None
    print(f"speed-up 2 workers vs 1: {speedup:.2f}x wall"
          + (f", {job_speedup:.2f}x job ('done in', no start-up)" if job_speedup else ""))
    return {"speedup_dupe_factor": dupe_factor, "workers_1_wall_s": _r(one["wall_s"], 2),
            "workers_2_wall_s": _r(two["wall_s"], 2), "workers_1_job_s": one["job_s"], "workers_2_job_s": two["job_s"],
            "workers_1_cpu_s": _r(one["cpu_s"], 2), "workers_2_cpu_s": _r(two["cpu_s"], 2),
            "workers_1_instances": one["instances"], "workers_2_instances": two["instances"],
            "speedup_wall": _r(speedup, 3), "speedup_job": _r(job_speedup, 3)}


def section0(runs: dict, dupe_factor: int) -> dict:
    print(f"\n0. Fixed cost: the first {SMALL_JOB_LINES} lines, dupe_factor {dupe_factor} (whole process tree)")
    for name, r in runs.items():
        print(f"  {name:<22} {r['cpu_s']:>6.1f} CPU s {r['wall_s']:>6.1f} s wall, {r['workers']} worker processes, "
              f"{r['instances']:,} instances")
    return {f"small_job_{name}_cpu_s": _r(r["cpu_s"], 2) for name, r in runs.items()}


def history_figures(corpus_name: str, small: dict, ours: dict, ours_one: dict, dupe_factor: int) -> list:
    """Section 0's default-runner cost and section 1's rates, each with the fixed cost of its runner."""
    workload = f"{corpus_name}, dupe_factor {dupe_factor}, max_seq_length 128"
    fixed = small["multi_processing"] if ours["workers"] else small["one_process"]
    return [history.Figure("small_job_cpu_s", small["default"]["cpu_s"], False,
                           f"first {SMALL_JOB_LINES} lines of {workload}, default runner",
                           small["default"]["cpu_s"], 0.0),
            history.Figure("instances_per_cpu_s", ours["instances"] / ours["cpu_s"], True,
                           f"{workload}, default runner", ours["cpu_s"], fixed["cpu_s"]),
            history.Figure("marginal_instances_per_cpu_s", ours["instances"] / (ours["cpu_s"] - fixed["cpu_s"]), True,
                           f"{workload}, default runner", ours["cpu_s"], fixed["cpu_s"]),
            history.Figure("one_process_instances_per_cpu_s", ours_one["instances"] / ours_one["cpu_s"], True,
                           f"{workload}, --runner FnApiRunner", ours_one["cpu_s"], small["one_process"]["cpu_s"])]


# ---------------------------------------------------------------------------------------------------------


@quiet_command
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=shared_data.path("corpus", "pretrain.txt.gz"))
    parser.add_argument("--vocab", default=shared_data.path("vocab", "bert_uncased_vocab.txt"))
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--scaling_dupe_factor", type=int, default=1,
                        help="dupe_factor of the scaling (3) and speed-up (4) runs")
    parser.add_argument("--max_documents", type=int, default=None, help="use only the first N documents")
    parser.add_argument("--skip_scaling", action="store_true", help="skip section 3 (memory scaling)")
    parser.add_argument("--speedup_dupe_factor", type=int, default=3, help="dupe_factor of the speed-up (4) runs")
    parser.add_argument("--skip_speedup", action="store_true", help="skip section 4 (worker speed-up)")
    parser.add_argument("--no_history", action="store_true", help="do not append to benchmarks/results/")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    figures = {"corpus": args.corpus, "max_documents": args.max_documents, "cpus": os.cpu_count(),
               "cpu_time_method": CPU_METHOD, "poll_s": POLL_S}
    with tempfile.TemporaryDirectory(prefix="pretraining_bench_") as tmp:
        documents = read_documents(args.corpus, args.max_documents)
        stats = {"1x": corpus_stats(documents)}
        corpus = args.corpus
        if args.max_documents is not None:
            corpus = os.path.join(tmp, f"corpus_{args.max_documents}.txt.gz")
            write_corpus(corpus, documents)
        figures.update(stats["1x"])
        print(f"corpus {args.corpus}{f' (first {args.max_documents} documents)' if args.max_documents else ''}: "
              f"{stats['1x']['documents']:,} documents, {stats['1x']['sentences']:,} sentences, "
              f"{stats['1x']['words']:,} words; vocab {args.vocab}; {os.cpu_count()} CPUs; max_seq_length 128, "
              f"max_predictions_per_seq 20", flush=True)

        small_corpus = os.path.join(tmp, f"corpus_{SMALL_JOB_LINES}_lines.txt.gz")
        write_corpus(small_corpus, first_lines(documents))
        print(f"\nsection 0 (dupe_factor {args.dupe_factor}, first {SMALL_JOB_LINES} lines):", flush=True)
        small = {name: run_ours(small_corpus, args.vocab, args.dupe_factor, tmp, f"small_{name}", beam_args)
                 for name, beam_args in (("default", []), ("multi_processing", MULTI_PROCESSING),
                                         ("one_process", ["--runner", "FnApiRunner"]))}
        figures.update(section0(small, args.dupe_factor))

        print(f"\nsections 1-2 (dupe_factor {args.dupe_factor}):", flush=True)
        ref = run_reference(corpus, args.vocab, args.dupe_factor, tmp, "main")
        ref_hf = run_reference(corpus, args.vocab, args.dupe_factor, tmp, "main_hf", tokenizer="hf")
        ours = run_ours(corpus, args.vocab, args.dupe_factor, tmp, "main", [])
        ours_one = run_ours(corpus, args.vocab, args.dupe_factor, tmp, "one_process", ["--runner", "FnApiRunner"])
        figures.update(section1(ref, ref_hf, ours, ours_one, args.dupe_factor))
        figures.update(section2(ref, ours, args.dupe_factor))
        if not args.no_history:
            name = os.path.basename(args.corpus) + (f" first {args.max_documents} documents"
                                                    if args.max_documents is not None else "")
            history.record("pretraining_data", history_figures(name, small, ours, ours_one, args.dupe_factor))

        d = args.scaling_dupe_factor
        corpus4 = os.path.join(tmp, "corpus_4x.txt.gz")
        if not (args.skip_scaling and args.skip_speedup):
            write_corpus(corpus4, documents, copies=4)
            stats["4x"] = {k: 4 * v for k, v in stats["1x"].items()}
        if not args.skip_scaling:
            print(f"\nsection 3 (dupe_factor {d}):", flush=True)
            runs = {"ours_1x": run_ours(corpus, args.vocab, d, tmp, "1x", []),
                    "ours_4x": run_ours(corpus4, args.vocab, d, tmp, "4x", []),
                    "ref_1x": run_reference(corpus, args.vocab, d, tmp, "1x"),
                    "ref_4x": run_reference(corpus4, args.vocab, d, tmp, "4x")}
            figures.update(section3(runs, stats, d))

        if not args.skip_speedup:
            d = args.speedup_dupe_factor
            print(f"\nsection 4 (dupe_factor {d}, corpus 4x):", flush=True)
            runs = {f"workers_{n}": run_ours(corpus4, args.vocab, d, tmp, f"workers{n}",
                                             ["--runner", "DirectRunner", "--direct_running_mode", "multi_processing",
                                              "--direct_num_workers", str(n)])
                    for n in (1, 2)}
            figures.update(section4(runs, d))

    figures["benchmark_wall_s"] = _r(time.perf_counter() - started)
    print(f"\nbenchmark wall time {figures['benchmark_wall_s']:.0f} s")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
