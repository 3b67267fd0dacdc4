"""The BERT data job of this checkout against another checkout, run in turns: marginal instances per
CPU-second of each, and whether their shards are byte-identical.

    .venv/bin/python -m benchmarks.data.data_versions --baseline COMMIT|DIR [--corpus PATH] [--vocab PATH] [--copies 3]
        [--dupe_factor 5] [--rounds 3] [--runners default one_process] [--no_history]

The baseline is a commit of this repository (extracted with `git archive` into a temporary directory) or
another checkout's directory; both run with this interpreter, each from its own directory. The workload is the corpus concatenated
`--copies` times (3: about 690k instances at dupe_factor 5, several times any fixed cost), BERT,
max_seq_length 128, 20 predictions, seed 12345. Per runner and round, each checkout runs (the order
alternates from round to round, so a machine that slows down or speeds up hurts both alike):
  - the job on the corpus's first 40 lines, on the same runner: the fixed cost (imports, worker start-up,
    tracing);
  - the job on the workload.
Runners: `default` is the job without runner flags (for this input, Beam's multi-processing DirectRunner
with one worker per core; the 40-line job is forced onto it with `--direct_num_workers 0`); `one_process`
is `--runner FnApiRunner` for both. CPU is the whole process tree's (`benchmarks.lib.proc.run_tree`).
Marginal instances per CPU-second = instances / (workload CPU - 40-line CPU); the table gives each round's
and the median, and the ratio of the medians (this checkout / the baseline). The shards' SHA-256 must be
equal for every run of both checkouts, or the benchmark says so and exits 1. Unless --no_history, this
checkout's median per runner is appended to `benchmarks/results/pretraining_data.jsonl` and compared with
the last figure on this CPU model (`benchmarks.lib.history`).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from commands.tf_startup import quiet_command
from benchmarks.lib import history
from benchmarks.lib import pretraining_runs
from benchmarks.lib.proc import ROOT, child_env, log_tail, run_tree
from demo import shared_data

RUNNERS = {"default": ([], pretraining_runs.MULTI_PROCESSING), "one_process": (["--runner", "FnApiRunner"],) * 2}


def run_job(root: str, corpus: str, vocab: str, dupe_factor: int, beam_args: list[str], tmp: str, tag: str) -> dict:
    """One job of checkout `root`: CPU-seconds, instances and the SHA-256 of its shards, in name order."""
    output_dir = os.path.join(tmp, tag)
    log = os.path.join(tmp, f"{tag}.log")
    cmd = [sys.executable, "-m", "pipeline.pretraining_data", "--model", "bert", "--input", corpus, "--vocab", vocab,
           "--output_dir", output_dir, *pretraining_runs.COMMON, "--dupe_factor", str(dupe_factor), "--seed", "12345",
           *beam_args]
    run = run_tree(cmd, log, cwd=root, env=child_env(root))
    if run["rc"] != 0:
        sys.exit(f"{tag} failed (exit {run['rc']}) in {root}: {' '.join(cmd)}\n{log_tail(log)}")
    with open(os.path.join(output_dir, "metadata.json")) as f:
        metadata = json.load(f)
    digest = hashlib.sha256()
    for name in metadata["files"]:
        with open(os.path.join(output_dir, name), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    shutil.rmtree(output_dir)
    return {"cpu_s": run["cpu_s"], "wall_s": run["wall_s"], "instances": metadata["examples"],
            "sha256": digest.hexdigest()}


def baseline_root(baseline: str, tmp: str) -> str:
    """A checkout's directory as given, or a commit's tree extracted under `tmp`."""
    if os.path.isdir(baseline):
        return os.path.abspath(baseline)
    root = os.path.join(tmp, "baseline")
    os.makedirs(root)
    archive = subprocess.run(["git", "-C", ROOT, "archive", baseline], capture_output=True)
    if archive.returncode != 0:
        sys.exit(f"--baseline {baseline}: neither a directory nor a commit ({archive.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", root], input=archive.stdout, check=True)
    return root


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", required=True, metavar="COMMIT|DIR",
                        help="a commit of this repository, or another checkout's directory")
    parser.add_argument("--corpus", default=shared_data.path("corpus", "pretrain.txt.gz"))
    parser.add_argument("--vocab", default=shared_data.path("vocab", "bert_uncased_vocab.txt"))
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--dupe_factor", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runners", nargs="+", choices=sorted(RUNNERS), default=["default", "one_process"])
    parser.add_argument("--no_history", action="store_true")
    args = parser.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="data_versions_")
    results, digests = {}, set()
    try:
        roots = {"this": ROOT, "baseline": baseline_root(args.baseline, tmp)}
        commit, dirty = history.git_commit()
        commits = {"this": commit + ("+changes" if dirty else ""),
                   "baseline": history.git_commit(roots["baseline"])[0] if os.path.isdir(args.baseline)
                   else subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", args.baseline],
                                       capture_output=True, text=True).stdout.strip() or args.baseline}
        documents = pretraining_runs.read_documents(args.corpus)
        workload = os.path.join(tmp, "workload.txt.gz")
        pretraining_runs.write_corpus(workload, documents, copies=args.copies)
        small = os.path.join(tmp, "small.txt.gz")
        pretraining_runs.write_corpus(small, pretraining_runs.first_lines(documents))
        for runner in args.runners:
            big_args, small_args = RUNNERS[runner]
            for r in range(args.rounds):
                order = ["this", "baseline"] if r % 2 == 0 else ["baseline", "this"]
                for name in order:
                    fixed = run_job(roots[name], small, args.vocab, args.dupe_factor, small_args, tmp, "small")
                    big = run_job(roots[name], workload, args.vocab, args.dupe_factor, big_args, tmp, "big")
                    digests.add(big["sha256"])
                    big["fixed_cpu_s"] = fixed["cpu_s"]
                    big["marginal"] = big["instances"] / (big["cpu_s"] - fixed["cpu_s"])
                    results.setdefault((runner, name), []).append(big)
                    print(f"  {runner:<11} round {r + 1} {name:<8} ({commits[name]}): {big['instances']:,} instances, "
                          f"{big['cpu_s']:.1f} CPU-s, fixed {fixed['cpu_s']:.1f}, marginal "
                          f"{big['marginal']:,.0f}/CPU-s, {big['wall_s']:.0f} s wall", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nBERT data job, {os.path.basename(args.corpus)} x{args.copies}, dupe_factor {args.dupe_factor}, "
          f"{args.rounds} rounds in turns; CPU: {history.cpu_model()}, {os.cpu_count()} cpus")
    print(f"{'runner':<12} {'checkout':<20} {'marginal instances per CPU-second (rounds)':<44} {'median':>8}")
    summary = {}
    for runner in args.runners:
        medians = {}
        for name in ("this", "baseline"):
            runs = results[(runner, name)]
            medians[name] = statistics.median(x["marginal"] for x in runs)
            rounds = ", ".join(f"{x['marginal']:,.0f}" for x in runs)
            print(f"{runner:<12} {name + ' (' + commits[name] + ')':<20} {rounds:<44} {medians[name]:>8,.0f}")
        summary[runner] = {**medians, "ratio": medians["this"] / medians["baseline"]}
        print(f"{runner:<12} this / baseline: {summary[runner]['ratio']:.2f}x")
    identical = len(digests) == 1
    print(f"shards byte-identical across all runs of both checkouts: {'yes' if identical else 'NO'}")
    if not args.no_history:
        figures = []
        for runner in args.runners:
            runs = results[(runner, "this")]
            figures.append(history.Figure(
                "marginal_instances_per_cpu_s", summary[runner]["this"], True,
                f"{os.path.basename(args.corpus)} x{args.copies}, dupe_factor {args.dupe_factor}, max_seq_length 128, "
                f"{runner} runner, median of {args.rounds} in turns",
                statistics.median(x["cpu_s"] for x in runs), statistics.median(x["fixed_cpu_s"] for x in runs)))
        history.record("pretraining_data", figures)  # prints each against the last figure
    print(json.dumps({"commits": commits, "summary": summary, "identical": identical}))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
