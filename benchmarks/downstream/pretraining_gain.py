"""What pretraining buys when you fine-tune: the demo's pretrained models against the same shapes from random
weights, fine-tuned on SST-2 with the same recipe and seeds.

    .venv/bin/python -m benchmarks.downstream.pretraining_gain --demo_dir DEMO_DIR [--models bert,gpt,bilm] \\
        [--seeds 1,2,3] [--tasks ../shared/data/tasks] [--out_dir .cache/pretraining_gain] [--no_history]

For each model kind and seed, two runs of `python -m downstream.finetune --task classify` on SST-2's train
split, scored on its dev split, at `benchmarks.downstream.finetune`'s recipe for that kind (`RUNS["sst2_<kind>"]`; BERT
and GPT fine-tune every weight with a head on `[CLS]` / the last token, the biLM trains ELMo's scalar mix and
a classifier over the frozen biLM) with `seed=<seed>`:

- `pretrained`: the demo's trained model (`DEMO_DIR/runs/<kind>`);
- `random`: the same config, vocabulary and shape, its weights as initialised with the seed, never trained.

Prints dev accuracy per kind as mean ± standard error over the seeds for both, and the gain (pretrained -
random) with its standard error; records the gains in `benchmarks/results/pretraining_gain.jsonl`. Finished
runs are reused from `--out_dir`. Three kinds, 3 seeds: about 40 minutes (AMD EPYC, AVX2, 2 cores).
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys

from demo import shared_data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def random_model_dir(trained: str, out: str, seed: int) -> str:
    """A model_dir with `trained`'s config and vocabulary and freshly initialised weights (seeded): what the
    same run would have started from."""
    import keras
    import tensorflow as tf

    from models import families

    if tf.train.latest_checkpoint(out):
        return out
    saved = families.read_config(trained)
    keras.utils.set_random_seed(seed)
    model = families.make_task(saved["model"], saved["model_config"], saved["data"]).build_model()
    families.write_config(out, saved["model"], saved["preset"], saved["model_config"], saved["train_config"],
                          saved["data"])
    shutil.copy(os.path.join(trained, families.VOCAB_FILE), os.path.join(out, families.VOCAB_FILE))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step), out, 1).save(checkpoint_number=0)
    return out


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
                          env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
    if done.returncode:
        raise RuntimeError(f"fine-tuning {model_dir} failed:\n{done.stderr[-3000:]}")
    metrics = json.loads(done.stdout.strip().splitlines()[-1])
    with open(result_path, "w") as f:
        json.dump(metrics, f, indent=1)
    return metrics


def mean_se(values: list[float]) -> tuple[float, float]:
    n, mean = len(values), sum(values) / len(values)
    return mean, (math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else float("nan"))


def gain(pretrained: list[float], random: list[float]) -> tuple[float, float]:
    """Mean difference and its standard error (the two samples' errors combined)."""
    (a, sa), (b, sb) = mean_se(pretrained), mean_se(random)
    return a - b, math.sqrt(sa ** 2 + sb ** 2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo_dir", required=True)
    parser.add_argument("--models", default="bert,gpt,bilm")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--tasks", default=shared_data.path("tasks"))
    parser.add_argument("--out_dir", default=os.path.join(ROOT, ".cache", "pretraining_gain"))
    parser.add_argument("--no_history", action="store_true")
    args = parser.parse_args(argv)
    from benchmarks.downstream import finetune as finetune_runs
    from benchmarks.lib import history

    started_on = history.git_commit()
    print(f"machine: {history.machine()}")
    seeds = [int(s) for s in args.seeds.split(",")]
    table, figures = {}, []
    for kind in args.models.split(","):
        recipe = finetune_runs.RUNS[f"sst2_{kind}"][4]
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
