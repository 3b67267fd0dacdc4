"""Vector parity: do our pretrained Transformers tell word senses apart as well as a peer's, trained on the same
records with the same recipe?

    .venv/bin/python -m benchmarks.training.vector_parity --data_dir DEMO_DIR/data [--models bert,gpt] \\
        [--seeds 1,2,3] [--steps 600] [--trainers ours,peer] [--out_dir .cache/vector_parity] [--senses PATH] [--no_history]

Per model kind and seed, each in a process of its own, on the demo's TFRecords (`DEMO_DIR/data/<kind>/` and
`<kind>_heldout/`) at the demo's recipe (`demo.training_steps`: peak rate, batch, warm-up a tenth, linear
decay, dropout) and the same seed:

- `ours`: `models.training.train` with the tiny preset, as `make demo` trains it;
- `peer`: keras-hub's own model of the same shape trained by Keras `fit` (`benchmarks.lib.parity_runs keras_hub
  --head untied`): BERT's `BertBackbone` + `MaskedLMHead`; GPT's `GPT2Backbone` with an untied output layer.
  GPT-2's blocks are pre-LN, so for GPT `ours_pre_ln` (our GPT with `normalize_first=true`) is the like-for-like
  run, and `ours` the demo's post-LN model (`--trainers` picks a subset: `ours,peer` skips it);
- every run is written as a model_dir (the peer's weights moved into our layout, checked to compute the
  peer's outputs), exported by `serving.export`, and scored by `downstream.evaluate_senses` on WordNet's
  sense-labelled sentences (`demo.wordnet`, the demo's data; `--senses` another file) and by
  `models.training.evaluate` on the held-out records: the same feature extraction and the same held-out
  measure for every trainer.

Prints, per kind, each layer's sense accuracy as mean ± standard error over the seeds for every trainer, the
best contextual layer (per run, the best layer but the static one), held-out loss and training CPU-minutes,
and the difference ours - peer with its standard error (a gap over two standard errors is flagged). Finished
runs are kept under `--out_dir` and reused, so an interrupted benchmark resumes. Records the best contextual
accuracies in `benchmarks/results/vector_parity.jsonl`. The demo's three 600-step trainers of both kinds
with 3 seeds take about 1.5 hours (AMD EPYC, AVX2, 2 cores).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import math
import os
import resource
import subprocess
import sys

from commands.tf_startup import quiet_command
from benchmarks.lib.proc import ROOT, child_env, last_json
from benchmarks.lib.stats import mean_se
TRAINERS = {"bert": ("ours", "peer"), "gpt": ("ours", "ours_pre_ln", "peer")}
LOSS = {"bert": "mlm_loss", "gpt": "loss"}


def recipe(kind: str, steps: int, seed: int) -> list[str]:
    """The demo's `--set` overrides for `kind` (demo.training_steps), at `steps` and `seed`."""
    from demo import training_steps

    fields = {"batch_size": training_steps.BATCHES[kind], "learning_rate": training_steps.LEARNING_RATES[kind],
              "warmup_steps": max(steps // 10, 1), "decay": "linear", "seed": seed,
              **training_steps.MODEL_FLAGS[kind]}
    return [f"{k}={v}" for k, v in fields.items()]


def _run(args: list[str]) -> tuple[str, float]:
    """`python -m ARGS` from the root: (stdout, CPU-seconds of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          env=child_env())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise RuntimeError(f"python -m {' '.join(args[:2])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def train(kind: str, trainer: str, seed: int, steps: int, data: dict, model_dir: str) -> float:
    """Trains one run into `model_dir`; returns its CPU-seconds."""
    sets = recipe(kind, steps, seed) + (["normalize_first=true"] if trainer == "ours_pre_ln" else [])
    if trainer == "peer":
        args = ["benchmarks.lib.parity_runs", "keras_hub", "--kind", kind, "--train_data", data["train"],
                "--eval_data", data["heldout"], "--steps", str(steps), "--points", "1", "--eval_batches", "1",
                "--head", "untied", "--model_dir", model_dir, "--output", model_dir + ".json"]
    else:
        args = ["models.training.train", "--model", kind, "--preset", f"{kind}_tiny", "--train_data", data["train"],
                "--model_dir", model_dir, "--set", f"train_steps={steps}", "--set", f"checkpoint_every={steps}",
                "--set", f"log_every={max(steps // 10, 1)}", "--set", "steps_per_execution=25"]
    return _run(args + [a for s in sets for a in ("--set", s)])[1]


def score(kind: str, model_dir: str, data: dict, senses: str) -> dict:
    """Held-out metrics and the sense summary of a trained model_dir (exported first)."""
    export_dir = model_dir + "_export"
    if not os.path.isdir(os.path.join(export_dir, "hub")):
        _run(["serving.export", "--model_dir", model_dir, "--export_dir", export_dir])
    heldout = last_json(_run(["models.training.evaluate", "--model_dir", model_dir, "--eval_data",
                               data["heldout"], "--batch_size", "32"])[0])  # every full batch
    summary = last_json(_run(["downstream.evaluate_senses", "--module", export_dir, "--data", senses,
                               "--examples", ""])[0])
    return {"heldout": heldout, "senses": summary}


def one_run(kind: str, trainer: str, seed: int, args, data: dict) -> dict:
    """A finished run's result, from `--out_dir` when it is there already."""
    name = f"{kind}_{trainer}_seed{seed}"
    result_path = os.path.join(args.out_dir, name + ".result.json")
    if os.path.exists(result_path):
        with open(result_path) as f:
            return json.load(f)
    model_dir = os.path.join(args.out_dir, name)
    print(f"{name}: training", flush=True)
    cpu = train(kind, trainer, seed, args.steps, data, model_dir)
    result = {"kind": kind, "trainer": trainer, "seed": seed, "steps": args.steps, "cpu_seconds": round(cpu, 1),
              **score(kind, model_dir, data, args.senses)}
    with open(result_path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(result_path + ".tmp", result_path)
    print(f"{name}: best contextual {best_contextual(result['senses']):.4f}, {cpu / 60:.1f} CPU-min", flush=True)
    return result


def best_contextual(summary: dict) -> float:
    return max(v for k, v in summary["layers"].items() if k != summary["static_layer"])


def table(kind: str, results: list[dict]) -> dict:
    """Prints the per-layer table of one kind; returns {trainer: {figure: (mean, se)}}."""
    trainers = [t for t in TRAINERS[kind] if any(r["trainer"] == t for r in results)]
    by = {t: [r for r in results if r["trainer"] == t] for t in trainers}
    layers = list(by[trainers[0]][0]["senses"]["layers"])
    stats = {}
    for t in trainers:
        stats[t] = {layer: mean_se([r["senses"]["layers"][layer] for r in by[t]]) for layer in layers}
        stats[t]["best contextual"] = mean_se([best_contextual(r["senses"]) for r in by[t]])
        stats[t]["held-out loss"] = mean_se([r["heldout"][LOSS[kind]] for r in by[t]])
        stats[t]["CPU-minutes"] = mean_se([r["cpu_seconds"] / 60 for r in by[t]])
    ceiling = by[trainers[0]][0]["senses"]["baseline"]
    print(f"\n{kind}: sense accuracy per layer, mean ± standard error over {len(by[trainers[0]])} seeds "
          f"(MFS ceiling {ceiling:.4f})")
    print(f"{'':<18}" + "".join(f"{t:>20}" for t in trainers) + f"{'ours - peer':>24}")
    for row in layers + ["best contextual", "held-out loss", "CPU-minutes"]:
        cells = "".join(f"{stats[t][row][0]:>12.4f} ± {stats[t][row][1]:<6.4f}" for t in trainers)
        (a, sa), (b, sb) = stats["ours"][row], stats["peer"][row]
        se = math.sqrt(sa ** 2 + sb ** 2)
        flag = "  <- over 2 SE" if row not in ("CPU-minutes",) and abs(a - b) > 2 * se else ""
        print(f"{row:<18}{cells}{a - b:>+12.4f} ± {se:<6.4f}{flag}")
    return {t: {k: list(v) for k, v in s.items()} for t, s in stats.items()} | {"ceiling": ceiling}


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", required=True, help="the demo's data folder (DEMO_DIR/data)")
    parser.add_argument("--models", default="bert,gpt")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--trainers", default=None, help="comma-separated subset of each kind's trainers "
                                                             "(default: all; ours and peer are always kept)")
    parser.add_argument("--senses", default=None, help="sense records (default: the demo's WordNet 3.1 data)")
    parser.add_argument("--out_dir", default=os.path.join(ROOT, ".cache", "vector_parity"))
    parser.add_argument("--no_history", action="store_true")
    args = parser.parse_args(argv)
    from benchmarks.lib import history
    from demo import wordnet

    args.senses = args.senses or wordnet.fetch(os.path.join(ROOT, ".cache"))
    os.makedirs(args.out_dir, exist_ok=True)
    started_on = history.git_commit()
    print(f"machine: {history.machine()}")
    summary, figures = {}, []
    for kind in args.models.split(","):
        data = {"train": os.path.join(args.data_dir, kind, f"{kind}-*.tfrecord"),
                "heldout": os.path.join(args.data_dir, f"{kind}_heldout", f"{kind}-*.tfrecord")}
        wanted = {"ours", "peer", *args.trainers.split(",")} if args.trainers else set(TRAINERS[kind])
        trainers = [t for t in TRAINERS[kind] if t in wanted]
        results = [one_run(kind, t, int(s), args, data) for s in args.seeds.split(",") for t in trainers]
        summary[kind] = table(kind, results)
        workload = f"demo data, {kind}_tiny {args.steps} steps, seeds {args.seeds}"
        figures += [history.Figure(f"{kind}_{t}_best_contextual_sense_accuracy", summary[kind][t]["best contextual"][0],
                                   workload=workload) for t in trainers]
    if not args.no_history:
        history.record("vector_parity", figures, measured_at=started_on)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
