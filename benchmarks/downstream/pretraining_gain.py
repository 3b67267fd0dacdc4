"""What pretraining buys when you fine-tune: the demo's pretrained models against the same shapes from random
weights, fine-tuned on SST-2 with the same recipe and seeds.

    .venv/bin/python -m benchmarks.downstream.pretraining_gain --demo_dir DEMO_DIR [--models bert,gpt,bilm] \\
        [--seeds 1,2,3] [--tasks ../shared/data/tasks] [--out_dir .cache/pretraining_gain] [--no_history]

For each model kind and seed, two runs of `python -m downstream.finetune --task classify` on SST-2's train
split, scored on its dev split, at `benchmarks.downstream.finetune`'s recipe for that kind
(`benchmarks.lib.finetune_recipes.RUNS["sst2_<kind>"]`; BERT and GPT fine-tune every weight with a head on
`[CLS]` / the last token, the biLM trains ELMo's scalar mix and a classifier over the frozen biLM) with
`seed=<seed>`:

- `pretrained`: the demo's trained model (`DEMO_DIR/runs/<kind>`);
- `random`: the same config, vocabulary and shape, its weights as initialised with the seed, never trained.

Prints dev accuracy per kind as mean ± standard error over the seeds for both, and the gain (pretrained -
random) with its standard error; records the gains in `benchmarks/results/pretraining_gain.jsonl`. Finished
runs are reused from `--out_dir`. Three kinds, 3 seeds: about 40 minutes (AMD EPYC, AVX2, 2 cores).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import subprocess
import sys

from commands.tf_startup import quiet_command
from benchmarks.lib.finetune_recipes import RUNS
from benchmarks.lib.model_dirs import random_model_dir
from benchmarks.lib.proc import ROOT, child_env, last_json
from benchmarks.lib.stats import gain, mean_se
from demo import shared_data


def finetune(model_dir: str, recipe: list[str], seed: int, tasks: str, out: str) -> dict:
    """One SST-2 fine-tuning of `model_dir`; its metrics (reused when `out/result.json` exists)."""
    result_path = os.path.join(out, "result.json")
    if os.path.exists(result_path):
        with open(result_path) as f:
            return json.load(f)
    sets = [a for s in recipe + [f"seed={seed}"] for a in ("--set", s)]
    done = subprocess.run([sys.executable, "-m", "downstream.finetune", "--task", "classify", "--model_dir",
                           model_dir, "--train", os.path.join(tasks, "sst2", "train.tsv"), "--eval",
                           os.path.join(tasks, "sst2", "dev.tsv"), "--output_dir", os.path.join(out, "run"),
                           "--overwrite", *sets], cwd=ROOT, capture_output=True, text=True,
                          env=child_env())
    if done.returncode:
        raise RuntimeError(f"fine-tuning {model_dir} failed:\n{done.stderr[-3000:]}")
    metrics = last_json(done.stdout)
    with open(result_path, "w") as f:
        json.dump(metrics, f, indent=1)
    return metrics


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo_dir", required=True)
    parser.add_argument("--models", default="bert,gpt,bilm")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--tasks", default=shared_data.path("tasks"))
    parser.add_argument("--out_dir", default=os.path.join(ROOT, ".cache", "pretraining_gain"))
    parser.add_argument("--no_history", action="store_true")
    args = parser.parse_args(argv)
    from benchmarks.lib import history

    started_on = history.git_commit()
    print(f"machine: {history.machine()}")
    seeds = [int(s) for s in args.seeds.split(",")]
    table, figures = {}, []
    for kind in args.models.split(","):
        recipe = RUNS[f"sst2_{kind}"][4]
        trained = os.path.join(args.demo_dir, "runs", kind)
        accuracy = {"pretrained": [], "random": []}
        for seed in seeds:
            random_dir = random_model_dir(trained, os.path.join(args.out_dir, f"{kind}_random_seed{seed}"), seed)
            for start, model_dir in (("pretrained", trained), ("random", random_dir)):
                out = os.path.join(args.out_dir, f"sst2_{kind}_{start}_seed{seed}")
                accuracy[start].append(finetune(model_dir, recipe, seed, args.tasks, out)["accuracy"])
                print(f"{kind} {start} seed {seed}: dev accuracy {accuracy[start][-1]:.4f}", flush=True)
        table[kind] = {"pretrained": mean_se(accuracy["pretrained"]), "random": mean_se(accuracy["random"]),
                       "gain": gain(accuracy["pretrained"], accuracy["random"]), "runs": accuracy}
        figures.append(history.Figure(f"{kind}_sst2_gain_over_random", table[kind]["gain"][0],
                                      workload=f"{args.demo_dir}, seeds {args.seeds}, {' '.join(recipe)}"))
    print(f"\nSST-2 dev accuracy, mean ± standard error over {len(seeds)} seeds")
    print(f"{'model':<6}{'pretrained':>20}{'random weights':>20}{'gain':>20}")
    for kind, t in table.items():
        print(f"{kind:<6}" + "".join(f"{t[k][0]:>12.4f} ± {t[k][1]:.4f}" for k in ("pretrained", "random", "gain")))
    if not args.no_history:
        history.record("pretraining_gain", figures, measured_at=started_on)
    print(json.dumps(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
