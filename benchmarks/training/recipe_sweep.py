"""The recipe sweep for word senses: candidate recipes of the demo's from-scratch models, each judged by the
held-out loss and the sense accuracy it reaches and the CPU-minutes it costs.

    .venv/bin/python -m benchmarks.training.recipe_sweep --demo_dir DEMO_DIR --model bert \\
        [--candidates base,mlm_only] [--steps 600] [--seeds 42] [--work_dir .cache/recipe_sweep] [--no_history]

Every candidate starts from the demo's recipe (`demo.training_steps`: the tiny preset, its peak rate, batch,
dropout, warm-up a tenth, linear decay) on the demo's cleaned corpus and vocabulary, and changes one thing:
a model or training field (`--set`), or how the data job makes the examples (a variant of the TFRecords made
here with `pipeline.pretraining_data` from `DEMO_DIR/corpus`). Each run is `benchmarks.training.model_quality`'s: train
`--steps`, evaluate every full held-out batch, export the last checkpoint and score it with
`downstream.evaluate_senses` on the demo's WordNet sentences; its figures and sense curve go to
`benchmarks/results/model_quality.jsonl` with the candidate in the workload.

Held-out records keep the standard masking (15%) whatever the candidate trains on, so held-out MLM losses
compare across masking rates and whole-word masking; a candidate with another sequence length is scored on
held-out windows of its own length (its loss is marked: not comparable). Prints one row per candidate and
seed: held-out loss and accuracy, the best contextual layer's sense accuracy against the most-frequent-sense
ceiling, and the training CPU-minutes. Finished runs are reused from `--work_dir`. A BERT candidate at 600
steps takes about 6 minutes (AMD EPYC, AVX2, 2 cores), a GPT one about 4.
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
from benchmarks.lib.proc import ROOT, child_env
# candidate -> (data job flags, --set fields) over the demo's recipe
CANDIDATES = {
    "bert": {
        "base": ({}, {}),
        "mlm_only": ({}, {"next_sentence": "false"}),
        "whole_word_mask": ({"whole_word_mask": True}, {}),
        "mask_30": ({"masked_lm_prob": 0.3, "max_predictions_per_seq": 40}, {}),
        "mask_40": ({"masked_lm_prob": 0.4, "max_predictions_per_seq": 52}, {}),
        "pre_ln": ({}, {"normalize_first": "true"}),
        "deeper_4x128": ({}, {"num_layers": 4}),
        "wider_2x256": ({}, {"hidden_size": 256, "num_heads": 4, "intermediate_size": 1024}),
        "seq_64_batch_64": ({"max_seq_length": 64, "max_predictions_per_seq": 10}, {"batch_size": 64}),
        "seq_32_batch_128": ({"max_seq_length": 32, "max_predictions_per_seq": 5}, {"batch_size": 128}),
        "lr_1e-3": ({}, {"learning_rate": 1e-3}),
        "lr_4e-3": ({}, {"learning_rate": 4e-3}),
        "warmup_0.3": ({}, {"warmup_fraction": 0.3}),
        "dropout_0.1": ({}, {"dropout": 0.1}),
    },
    "gpt": {
        "base": ({}, {}),
        "pre_ln": ({}, {"normalize_first": "true"}),
        "dropout_0": ({}, {"dropout": 0.0}),
        "lr_5e-4": ({}, {"learning_rate": 5e-4}),
        "lr_2e-3": ({}, {"learning_rate": 2e-3}),
        "deeper_4x128": ({}, {"num_layers": 4}),
        "seq_64_batch_32": ({"max_seq_length": 64}, {"batch_size": 32}),
    },
}
DATA_DEFAULTS = {"bert": {"max_seq_length": 128, "max_predictions_per_seq": 20, "masked_lm_prob": 0.15},
                 "gpt": {"max_seq_length": 128}}


def demo_recipe(kind: str, steps: int) -> dict:
    """The demo's `--set` fields for `kind` at `steps` (demo.training_steps)."""
    from demo import training_steps

    return {"batch_size": training_steps.BATCHES[kind], "learning_rate": training_steps.LEARNING_RATES[kind],
            "warmup_steps": max(steps // 10, 1), **training_steps.MODEL_FLAGS[kind]}


def _data_job(kind: str, text: str, vocab: str, out: str, flags: dict) -> None:
    if os.path.exists(os.path.join(out, "metadata.json")):
        return
    args = [sys.executable, "-m", "pipeline.pretraining_data", "--model", kind, "--input", text, "--vocab", vocab,
            "--output_dir", out, "--dupe_factor", "1", "--overwrite"]
    for key, value in flags.items():
        args += [f"--{key}"] if value is True else [f"--{key}", str(value)]
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True,
                          env=child_env())
    if done.returncode:
        raise RuntimeError(f"{' '.join(args[2:6])} failed:\n{done.stderr[-3000:]}")


def data_dir(kind: str, data_flags: dict, demo_dir: str, work_dir: str) -> str:
    """A folder in the demo's data layout (`<kind>/`, `<kind>_heldout/`) for the data flags: the demo's own
    for none, else TFRecords made here (held-out with the standard masking rate)."""
    if not data_flags:
        return os.path.join(demo_dir, "data")
    flags = {**DATA_DEFAULTS[kind], **data_flags}
    name = "-".join(f"{k}={v}" for k, v in sorted(data_flags.items()))
    folder = os.path.join(work_dir, "data", name)
    vocab = os.path.join(demo_dir, "vocab.txt")
    _data_job(kind, os.path.join(demo_dir, "corpus", "cleaned", "00000-train.txt"), vocab,
              os.path.join(folder, kind), flags)
    heldout_flags = {k: v for k, v in flags.items() if k != "whole_word_mask"}
    if "masked_lm_prob" in heldout_flags:
        heldout_flags["masked_lm_prob"] = DATA_DEFAULTS[kind]["masked_lm_prob"]
    _data_job(kind, os.path.join(demo_dir, "corpus", "heldout.txt"), vocab, os.path.join(folder, f"{kind}_heldout"),
              heldout_flags)
    return folder


def run_candidate(kind: str, name: str, seed: int, args, senses: str) -> dict:
    from benchmarks.lib import history

    from benchmarks.lib import quality_runs

    data_flags, fields = CANDIDATES[kind][name]
    fields = {**demo_recipe(kind, args.steps), **fields, "seed": seed}
    if "warmup_fraction" in fields:
        fields["warmup_steps"] = max(int(args.steps * float(fields.pop("warmup_fraction"))), 1)
    folder = data_dir(kind, data_flags, args.demo_dir, args.work_dir)
    work = os.path.join(args.work_dir, "runs", f"{kind}-{name}-seed{seed}")
    results = quality_runs.run(work, [kind], args.steps, senses, args.steps, folder, overrides=fields)
    if not args.no_history:
        workload = (f"recipe sweep, {args.demo_dir} data; {kind} {name}; {args.steps} steps; seed {seed}; "
                    + " ".join(f"{k}={v}" for k, v in {**data_flags, **fields}.items()))
        history.record("model_quality", quality_runs.history_figures(results, workload))
    return {"kind": kind, "candidate": name, "seed": seed, "comparable_loss": "max_seq_length" not in data_flags,
            **summary(kind, results[kind])}


def summary(kind: str, result: dict) -> dict:
    model, last = result["model"], result["senses"]["curve"][-1]
    loss = model["mlm_loss"] if kind == "bert" else model["loss"]
    accuracy = model["mlm_accuracy"] if kind == "bert" else model["accuracy"]
    return {"heldout_loss": loss, "heldout_accuracy": accuracy, "sense_accuracy": last["contextual_accuracy"],
            "sense_layer": last["best_contextual_layer"], "static_accuracy": last["static_accuracy"],
            "mfs_ceiling": last["mfs_ceiling"], "occurrences": last["occurrences"], "cpu_minutes": last["cpu_minutes"]}


def report(rows: list[dict]) -> None:
    print(f"\n{'candidate':<18}{'seed':>5}{'held-out loss':>15}{'accuracy':>10}{'senses':>9}{'layer':>14}"
          f"{'vs MFS':>9}{'CPU-min':>9}")
    for r in rows:
        loss = f"{r['heldout_loss']:.4f}" + ("" if r["comparable_loss"] else "*")
        print(f"{r['candidate']:<18}{r['seed']:>5}{loss:>15}{r['heldout_accuracy']:>10.4f}{r['sense_accuracy']:>9.4f}"
              f"{r['sense_layer']:>14}{100 * (r['sense_accuracy'] - r['mfs_ceiling']):>+9.1f}{r['cpu_minutes']:>9.1f}")
    if any(not r["comparable_loss"] for r in rows):
        print("* held-out windows of another length: the loss does not compare with the others")


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo_dir", required=True, help="a finished `make demo` folder (its corpus and data)")
    parser.add_argument("--model", choices=sorted(CANDIDATES), required=True)
    parser.add_argument("--candidates", default=None, help="comma-separated (default: all of the model's)")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seeds", default="42", help="comma-separated; the demo trains with 42")
    parser.add_argument("--work_dir", default=os.path.join(ROOT, ".cache", "recipe_sweep"))
    parser.add_argument("--no_history", action="store_true")
    args = parser.parse_args(argv)
    names = args.candidates.split(",") if args.candidates else list(CANDIDATES[args.model])
    unknown = [n for n in names if n not in CANDIDATES[args.model]]
    if unknown:
        parser.error(f"unknown candidate(s) {unknown}; {args.model} has {list(CANDIDATES[args.model])}")
    from benchmarks.lib import history
    from demo import wordnet

    print(f"machine: {history.machine()}")
    senses = wordnet.fetch(os.path.join(ROOT, ".cache"))
    rows = [run_candidate(args.model, name, int(seed), args, senses) for seed in args.seeds.split(",")
            for name in names]
    report(rows)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
