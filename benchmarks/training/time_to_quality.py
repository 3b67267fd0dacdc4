"""Time to quality against TF Model Garden: how many CPU-seconds of training does our BERT need to reach the
held-out masked-LM loss that Model Garden's `BertPretrainerV2` reaches in N steps?

    .venv/bin/python -m benchmarks.training.time_to_quality --data_dir DEMO_DIR/data [--steps 1000] [--points 20] \\
        [--eval_batches 19] [--out_dir .cache/time_to_quality] [--no_history]

Three runs on the same TFRecords (the demo's `bert/` and `bert_heldout/`), each in a process of its own, all
at batch 32 and the `bert_tiny` shape, each evaluated on the same first `--eval_batches` held-out batches
every N / `--points` steps:

- `Model Garden, its default recipe`: `benchmarks/peers/model_garden_bert.py` (Model Garden's own model, data
  loader, loss, AdamW and schedule) at the recipe of its `bert/pretraining` experiment: peak rate 1e-4, a
  linear warm-up over 1% of the steps (10,000 of 1,000,000), linear decay to 0, dropout 0.1, weight decay
  0.01, its masked-LM output tied to the token embedding;
- `Model Garden, our recipe`: the same trainer at the demo's recipe (`demo.training_steps`: peak 2e-3, warm-up
  a tenth, no dropout): the trainers' parity at equal recipe;
- `ours`: `models.training.Trainer` with the demo's `bert_tiny` recipe (`benchmarks.lib.parity_runs ours`).

CPU-seconds are every thread's, spent in training steps (tracing and compiling included; evaluations and
start-up left out), as each trainer counts them. For each Model Garden run, its held-out MLM loss at N steps is
the target; ours reaches it where its curve first crosses it (linear between evaluations). Prints each run's
curve, then per target the CPU-seconds each needed and the ratio ours / Model Garden (under 1: ours is
faster to that quality), and records the ratios in `benchmarks/results/time_to_quality.jsonl`. Finished runs
are reused from `--out_dir`. At 1,000 steps the three runs take about 40 minutes (AMD EPYC, AVX2, 2 cores).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import sys

from commands.tf_startup import quiet_command
from benchmarks.lib.proc import ROOT
BATCH = 32
MG_DEFAULT = {"learning_rate": 1e-4, "warmup_fraction": 0.01, "dropout": 0.1}


def recipes(steps: int) -> dict[str, tuple[str, list[str]]]:
    """name -> (trainer, --set overrides on bert_tiny) of each run."""
    from demo import training_steps

    ours = [f"batch_size={BATCH}", f"learning_rate={training_steps.LEARNING_RATES['bert']}",
            f"warmup_steps={max(steps // 10, 1)}", "decay=linear",
            *[f"{k}={v}" for k, v in training_steps.MODEL_FLAGS["bert"].items()]]
    mg_default = [f"batch_size={BATCH}", f"learning_rate={MG_DEFAULT['learning_rate']}",
                  f"warmup_steps={max(int(steps * MG_DEFAULT['warmup_fraction']), 1)}", "decay=linear",
                  f"dropout={MG_DEFAULT['dropout']}", "weight_decay=0.01", "tie_output=true"]
    return {"Model Garden, its default recipe": ("model_garden", mg_default),
            "Model Garden, our recipe": ("model_garden", ours + ["tie_output=true"]),
            "ours": ("ours", ours)}


def run(name: str, trainer: str, overrides: list[str], args, patterns: dict) -> list[dict]:
    """The run's evaluations (step, mlm_loss, cpu_seconds, ...), from `--out_dir` when finished before."""
    from benchmarks.peers import model_garden_run

    output = os.path.join(args.out_dir, name.replace(",", "").replace(" ", "_") + ".json")
    if not os.path.exists(output):
        print(f"{name}: training", flush=True)
        if trainer == "model_garden":
            model_garden_run.train(patterns, overrides, args.steps, args.points, args.eval_batches, output + ".tmp",
                                   args.cache_dir)
        else:
            model_garden_run.python(["-m", "benchmarks.lib.parity_runs", "ours", "--kind", "bert", "--train_data",
                                     patterns["pretrain"], "--eval_data", patterns["heldout"], "--steps",
                                     str(args.steps), "--points", str(args.points), "--eval_batches",
                                     str(args.eval_batches), "--output", output + ".tmp",
                                     *[a for o in overrides for a in ("--set", o)]])
        os.replace(output + ".tmp", output)
    with open(output) as f:
        return json.load(f)["evals"]


def cpu_to_reach(curve: list[dict], target: float) -> float | None:
    """CPU-seconds at which `curve`'s `mlm_loss` first reaches `target`, linear between evaluations; None if
    it never does."""
    for before, after in zip(curve, curve[1:]):
        if after["mlm_loss"] <= target:
            if before["mlm_loss"] <= target:
                return before["cpu_seconds"]
            share = (before["mlm_loss"] - target) / (before["mlm_loss"] - after["mlm_loss"])
            return before["cpu_seconds"] + share * (after["cpu_seconds"] - before["cpu_seconds"])
    return None


def report(curves: dict[str, list[dict]]) -> dict:
    names = list(curves)
    print(f"\nheld-out MLM loss (CPU-seconds in training steps) by step")
    print(f"{'step':>6} " + "".join(f"{n:>36}" for n in names))
    for rows in zip(*curves.values()):
        print(f"{rows[0]['step']:>6} " + "".join(f"{r['mlm_loss']:>26.4f} ({r['cpu_seconds']:>6.0f} s)" for r in rows))
    ratios = {}
    print()
    for name in names[:-1]:
        target, theirs = curves[name][-1]["mlm_loss"], curves[name][-1]["cpu_seconds"]
        ours = cpu_to_reach(curves["ours"], target)
        ratios[name] = {"target_mlm_loss": target, "peer_cpu_seconds": theirs, "ours_cpu_seconds": ours,
                        "ratio": ours / theirs if ours is not None else None}
        print(f"to {name}'s held-out MLM loss at step {curves[name][-1]['step']} ({target:.4f}): "
              + (f"ours {ours:.0f} CPU-s, Model Garden {theirs:.0f} CPU-s: ratio {ours / theirs:.3f}"
                 if ours is not None else "ours does not reach it in this run"))
    return ratios


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", required=True, help="the demo's data folder (DEMO_DIR/data)")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--points", type=int, default=20, help="evaluations after training starts")
    parser.add_argument("--eval_batches", type=int, default=19)
    parser.add_argument("--out_dir", default=os.path.join(ROOT, ".cache", "time_to_quality"))
    parser.add_argument("--cache_dir", default=os.path.join(ROOT, ".cache"), help="where Model Garden is installed")
    parser.add_argument("--no_history", action="store_true")
    args = parser.parse_args(argv)
    if args.steps % args.points:
        parser.error(f"--steps {args.steps} is not a multiple of --points {args.points}")
    from benchmarks.lib import history

    started_on = history.git_commit()
    print(f"machine: {history.machine()}")
    os.makedirs(args.out_dir, exist_ok=True)
    patterns = {"pretrain": os.path.join(args.data_dir, "bert", "bert-*.tfrecord"),
                "heldout": os.path.join(args.data_dir, "bert_heldout", "bert-*.tfrecord")}
    curves = {name: run(name, trainer, overrides, args, patterns)
              for name, (trainer, overrides) in recipes(args.steps).items()}
    ratios = report(curves)
    if not args.no_history:
        workload = f"demo data, bert_tiny, batch {BATCH}, {args.steps} steps"
        history.record("time_to_quality", [
            history.Figure(f"cpu_to_reach_{'mg_default' if 'default' in name else 'mg_our_recipe'}_loss_ratio",
                           r["ratio"], higher_is_better=False, workload=workload)
            for name, r in ratios.items() if r["ratio"] is not None], measured_at=started_on)
    print(json.dumps({"curves": curves, "ratios": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
