"""Do the models learn? Brief pretraining on the real corpus, evaluation on held-out text, against the
baselines a model that learned nothing about context would reach.

    python -m benchmarks.training.model_quality [--work_dir .cache/model_quality] [--steps N] [--models bert,gpt,bilm]
        [--senses wordnet|PATH --sense_every K] [--data_dir DEMO_DIR/data] [--preset bilm_mini] \\
        [--set FIELD=VALUE ...] [--no_history] [--note TEXT]

Runs the product end to end, each step a real command: `pipeline.vocab` learns an 8k WordPiece vocabulary
from `../shared/data/corpus/pretrain.txt.gz`; `pipeline.pretraining_data` writes TFRecords for each model from
pretrain and from `heldout.txt.gz`; `models.training.train` trains the `<model>_tiny` preset; `models.training.evaluate` scores
every full held-out batch (`--data_dir`: the TFRecords already made there instead, in the demo's layout
`<model>/` and `<model>_heldout/`, e.g. to train the same recipe on the demo's corpus). Baselines come from the
same TFRecords:

- BERT: the unigram-frequency baseline predicts the most frequent masked token of the training data at
  every masked position (its accuracy on held-out masked positions); its loss is the cross-entropy of the
  add-one-smoothed unigram distribution.
- GPT and biLM: the unigram perplexity of the held-out targets under the add-one-smoothed training unigram
  distribution (what any model without context can at best approach).

With `--senses`, the moonshot: every `--sense_every` steps the run keeps a checkpoint, which is exported
(`serving.export --checkpoint`) and scored by `downstream.evaluate_senses` on the sense records (`wordnet`: the
demo's WordNet 3.1 example sentences, `demo.wordnet`, built under `.cache/`). The table gives, per checkpoint,
the training process's CPU-minutes so far (`cpu_seconds` in history.jsonl: start-up and tracing included), the
best *contextual* layer's sense accuracy, the static layer's and the most-frequent-sense ceiling (the best
any static embedding can do), and the first checkpoint whose contextual accuracy reaches that ceiling. One run
with its own schedule (warm-up a tenth, linear decay to the last step): an earlier checkpoint was taken at a
higher learning rate than a run that ended there would have, so its figure is, if anything, pessimistic.

The checks (`checks`): BERT's held-out MLM accuracy above 1.8x the most frequent token's and its loss 0.3 nats
below the unigram's, NSP accuracy above 0.55, over more than 500 held-out examples; GPT's perplexity below
0.5x the unigram's; each of the biLM's three perplexities below 0.75x. A run with the default recipes on the
shared corpus exits with status 1 when one fails (`make bench` runs it; until this round the same checks were
a test, 17 minutes of the suite). Each figure against its baseline goes to the history,
`benchmarks/results/model_quality.jsonl` (`--no_history`: not), with the CPU, as the speed figures do.

Prints a table and, last, one JSON object. Finished steps are reused when their outputs exist.
"""

import argparse
import json
import math
import os
import time

import numpy as np

from benchmarks.lib.proc import run_module
from demo import shared_data

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = {"pretrain": shared_data.path("corpus", "pretrain.txt.gz"),
          "heldout": shared_data.path("corpus", "heldout.txt.gz")}
TRAIN_FLAGS = {"batch_size": 32, "log_every": 100, "steps_per_execution": 50}
# Per model: optimizer steps and peak learning rate of the brief run (warm-up: a tenth of the steps), and
# model fields: the demo's recipe (demo/training_steps.py; BERT learns more per token without dropout).
RECIPES = {"bert": (1000, 2e-3), "gpt": (600, 1e-3), "bilm": (1000, 2e-3)}
MODEL_FLAGS = {"bert": {"dropout": 0.0}, "gpt": {}, "bilm": {}}


def prepare(work_dir: str, kind: str, corpus: dict[str, str] | None = None) -> dict[str, str]:
    """Vocabulary (shared) and the model's train/held-out TFRecords from `corpus` (`CORPUS` by default: split ->
    text file); returns their patterns."""
    corpus = corpus or CORPUS
    vocab = os.path.join(work_dir, "vocab.txt")
    if not os.path.exists(vocab):
        run_module(["pipeline.vocab", "--input", corpus["pretrain"], "--output", vocab, "--vocab_size", "8000"])
    patterns = {}
    for split, text in corpus.items():
        out = os.path.join(work_dir, f"{kind}-{split}")
        if not os.path.exists(os.path.join(out, "metadata.json")):
            run_module(["pipeline.pretraining_data", "--model", kind, "--input", text, "--vocab", vocab,
                        "--output_dir", out, "--dupe_factor", "1", "--overwrite"])
        patterns[split] = os.path.join(out, f"{kind}-*.tfrecord")
    return patterns


def _targets(pattern: str, kind: str) -> np.ndarray:
    """Every weighted prediction target in the files: masked ids (BERT), next ids (GPT), forward ids (biLM)."""
    import tensorflow as tf

    from preprocessing import readers

    chunks = []
    for _, y, w in readers.make_dataset(pattern, 256, shuffle=False, repeat=False):
        if kind == "bert":
            y, w = y["mlm"], w["mlm"]
        elif kind == "bilm":
            y, w = y["forward"], w["forward"]
        chunks.append(tf.boolean_mask(y, w > 0).numpy())
    return np.concatenate(chunks)


def unigram_baseline(train_pattern: str, heldout_pattern: str, kind: str, vocab_size: int) -> dict:
    counts = np.bincount(_targets(train_pattern, kind), minlength=vocab_size) + 1.0  # add-one
    log_p = np.log(counts / counts.sum())
    heldout = _targets(heldout_pattern, kind)
    loss = float(-log_p[heldout].mean())
    return {"accuracy": float((heldout == counts.argmax()).mean()), "loss": loss, "perplexity": math.exp(loss),
            "targets": int(heldout.size)}


def train_and_evaluate(work_dir: str, kind: str, patterns: dict, steps: int | None = None,
                       checkpoint_every: int | None = None, preset: str | None = None,
                       overrides: dict | None = None) -> dict:
    """Trains `preset` (default `<kind>_tiny`) with the brief recipe, `overrides` (`--set` fields) on top;
    evaluates every full held-out batch."""
    steps, learning_rate = (steps or RECIPES[kind][0]), RECIPES[kind][1]
    preset = preset or f"{kind}_tiny"
    overrides = overrides or {}
    tag = "".join(f"-{k}={v}" for k, v in sorted(overrides.items()))
    model_dir = os.path.join(work_dir, f"run-{kind}-{steps}" + ("" if preset == f"{kind}_tiny" else f"-{preset}") + tag)
    every = checkpoint_every or steps
    flags = {**TRAIN_FLAGS, "train_steps": steps, "learning_rate": learning_rate, "warmup_steps": steps // 10,
             "checkpoint_every": every, "keep_checkpoints": -(-steps // every), **MODEL_FLAGS[kind]}
    if checkpoint_every:  # one history row per checkpoint (its CPU seconds)
        flags.update(log_every=every, steps_per_execution=math.gcd(every, TRAIN_FLAGS["steps_per_execution"]))
    flags.update(overrides)
    start = time.time()
    run_module(["models.training.train", "--model", kind, "--preset", preset, "--train_data", patterns["pretrain"],
                "--model_dir", model_dir, *[a for k, v in flags.items() for a in ("--set", f"{k}={v}")]])
    seconds = time.time() - start
    result = json.loads(run_module(["models.training.evaluate", "--model_dir", model_dir, "--eval_data",
                                    patterns["heldout"]]).strip().splitlines()[-1])
    return {**result, "train_seconds": round(seconds, 1), "train_steps": steps, "model_dir": model_dir,
            "train_tokens": steps * int(flags["batch_size"]) * _seq_length(patterns["pretrain"])}


def sense_curve(model_dir: str, senses: str, every: int) -> list[dict]:
    """Per kept checkpoint (every `every` steps): its step, the training process's CPU seconds at that step, and
    the sense figures of its export (`downstream.evaluate_senses`); each export and score reused when present."""
    with open(os.path.join(model_dir, "history.jsonl")) as f:
        cpu = {r["step"]: r["cpu_seconds"] for r in map(json.loads, f) if r.get("split") == "train"}
    curve = []
    for step in sorted(s for s in cpu if s % every == 0):
        export_dir = os.path.join(model_dir, "exports", f"ckpt-{step}")
        scores = export_dir + ".senses.json"
        if not os.path.exists(scores):
            if not os.path.exists(os.path.join(export_dir, "export.json")):
                run_module(["serving.export", "--model_dir", model_dir, "--export_dir", export_dir,
                            "--checkpoint", f"ckpt-{step}", "--overwrite"])
            line = run_module(["downstream.evaluate_senses", "--module", export_dir, "--data", senses]
                              ).strip().splitlines()[-1]
            with open(scores + ".tmp", "w") as f:
                f.write(line)
            os.replace(scores + ".tmp", scores)
        with open(scores) as f:
            s = json.load(f)
        contextual = {k: v for k, v in s["layers"].items() if k != s["static_layer"]}
        best = max(contextual, key=contextual.get)
        curve.append({"step": step, "cpu_minutes": round(cpu[step] / 60, 2), "best_contextual_layer": best,
                      "contextual_accuracy": contextual[best], "static_accuracy": s["static_accuracy"],
                      "mfs_ceiling": s["baseline"], "occurrences": s["occurrences"]})
    return curve


def first_at_ceiling(curve: list[dict], strictly: bool = False) -> dict | None:
    """The first checkpoint whose best contextual layer reaches (`strictly`: passes) the most-frequent-sense
    ceiling, or None. Both are fractions of the same occurrences, so a tie is an equal count."""
    return next((c for c in curve if c["contextual_accuracy"] > c["mfs_ceiling"]
                 or (not strictly and c["contextual_accuracy"] == c["mfs_ceiling"])), None)


def _seq_length(pattern: str) -> int:
    with open(os.path.join(os.path.dirname(pattern), "metadata.json")) as f:
        return json.load(f)["config"]["max_seq_length"]


def run(work_dir: str, kinds: list[str], steps: int | dict | None = None, senses: str | None = None,
        sense_every: int | None = None, data_dir: str | None = None, corpus: dict[str, str] | None = None,
        preset: str | None = None, overrides: dict | None = None) -> dict:
    """Each model's figures and baselines; `steps`: one budget for all, per model (a dict), or the recipes'.
    `preset` and `overrides` (TrainConfig and model fields) apply to every model in `kinds`."""
    os.makedirs(work_dir, exist_ok=True)
    results = {}
    for kind in kinds:
        patterns = ({split: os.path.join(data_dir, kind + suffix, f"{kind}-*.tfrecord")
                     for split, suffix in (("pretrain", ""), ("heldout", "_heldout"))}
                    if data_dir else prepare(work_dir, kind, corpus))
        with open(os.path.join(os.path.dirname(patterns["pretrain"]), "metadata.json")) as f:
            vocab_size = json.load(f)["vocab"]["size"]
        budget = steps.get(kind) if isinstance(steps, dict) else steps
        model = train_and_evaluate(work_dir, kind, patterns, budget, sense_every if senses else None, preset,
                                   overrides)
        results[kind] = {"model": model,
                         "baseline": unigram_baseline(patterns["pretrain"], patterns["heldout"], kind, vocab_size)}
        if senses:
            curve = sense_curve(model["model_dir"], senses, sense_every or model["train_steps"])
            results[kind]["senses"] = {"curve": curve, "reaches_ceiling": first_at_ceiling(curve),
                                       "passes_ceiling": first_at_ceiling(curve, strictly=True)}
    return results


def report(results: dict) -> None:
    print(f"{'model':6} {'metric':22} {'trained':>10} {'unigram':>10} {'train time':>11}")
    for kind, r in results.items():
        model, base = r["model"], r["baseline"]
        rows = ([("mlm_accuracy", model["mlm_accuracy"], base["accuracy"]),
                 ("mlm_loss", model["mlm_loss"], base["loss"])]
                + ([("nsp_accuracy", model["nsp_accuracy"], 0.5)] if "nsp_accuracy" in model else [])
                if kind == "bert" else
                [("perplexity", model["perplexity"], base["perplexity"])] + (
                    [("forward_perplexity", model["forward_perplexity"], base["perplexity"]),
                     ("backward_perplexity", model["backward_perplexity"], base["perplexity"])]
                    if kind == "bilm" else []))
        for i, (name, value, baseline) in enumerate(rows):
            time_text = f"{model['train_seconds']:.0f} s" if i == 0 else ""
            print(f"{kind if i == 0 else '':6} {name:22} {value:10.4g} {baseline:10.4g} {time_text:>11}")
    for kind, r in results.items():
        if "senses" not in r:
            continue
        print(f"\n{kind}: sense accuracy per checkpoint (nearest neighbour, leave-one-out)")
        print(f"{'step':>6} {'CPU min':>8} {'contextual':>10} {'layer':>14} {'static':>7} {'MFS':>6}")
        for c in r["senses"]["curve"]:
            print(f"{c['step']:6d} {c['cpu_minutes']:8.1f} {c['contextual_accuracy']:10.4f} "
                  f"{c['best_contextual_layer']:>14} {c['static_accuracy']:7.4f} {c['mfs_ceiling']:6.4f}")
        for verb, infinitive in (("reaches", "reach"), ("passes", "pass")):
            hit = r["senses"][f"{verb}_ceiling"]
            print(f"{kind}: " + (f"{verb} the most-frequent-sense ceiling at step {hit['step']}, "
                                 f"{hit['cpu_minutes']:.1f} CPU-minutes of training" if hit
                                 else f"does not {infinitive} the ceiling in this run"))


def checks(results: dict) -> list[tuple[str, bool, str]]:
    """(check, passed, the figures) for each model in `results`: the thresholds the docstring gives."""
    out = []
    if "bert" in results:
        model, base = results["bert"]["model"], results["bert"]["baseline"]
        out += [("bert: held-out examples > 500", model["examples"] > 500, f"{model['examples']}"),
                ("bert: MLM accuracy > 1.8x the most frequent token's",
                 model["mlm_accuracy"] > 1.8 * base["accuracy"],
                 f"{model['mlm_accuracy']:.4f} vs {base['accuracy']:.4f}"),
                ("bert: MLM loss < unigram loss - 0.3", model["mlm_loss"] < base["loss"] - 0.3,
                 f"{model['mlm_loss']:.4f} vs {base['loss']:.4f}")]
        if "nsp_accuracy" in model:  # a masked-LM-only model (next_sentence=false) has no NSP head
            out.append(("bert: NSP accuracy > 0.55", model["nsp_accuracy"] > 0.55, f"{model['nsp_accuracy']:.4f}"))
    if "gpt" in results:
        model, base = results["gpt"]["model"], results["gpt"]["baseline"]
        out.append(("gpt: perplexity < 0.5x the unigram's", model["perplexity"] < 0.5 * base["perplexity"],
                    f"{model['perplexity']:.1f} vs {base['perplexity']:.1f}"))
    if "bilm" in results:
        model, base = results["bilm"]["model"], results["bilm"]["baseline"]
        for key in ("forward_perplexity", "backward_perplexity", "perplexity"):
            out.append((f"bilm: {key} < 0.75x the unigram's", model[key] < 0.75 * base["perplexity"],
                        f"{model[key]:.1f} vs {base['perplexity']:.1f}"))
    return out


def history_figures(results: dict, workload: str) -> list:
    """Each model's figure over its context-free baseline (for perplexity, lower is better), its training
    wall seconds and, when senses were scored, each checkpoint's best contextual sense accuracy over the
    most-frequent-sense ceiling (its `total_cpu_s`: the training CPU so far), for `benchmarks.lib.history`."""
    from benchmarks.lib.history import Figure

    figures = []
    for kind, r in results.items():
        model, base = r["model"], r["baseline"]
        if kind == "bert":
            figures.append(Figure("bert_mlm_accuracy_over_most_frequent", model["mlm_accuracy"] / base["accuracy"],
                                  True, workload))
        else:
            figures.append(Figure(f"{kind}_perplexity_over_unigram", model["perplexity"] / base["perplexity"],
                                  False, workload))
        figures.append(Figure(f"{kind}_train_seconds", model["train_seconds"], False, workload))
        for point in (r.get("senses") or {}).get("curve", []):  # the sense curve: one figure per checkpoint
            figures.append(Figure(f"{kind}_sense_accuracy_over_mfs_at_step_{point['step']}",
                                  point["contextual_accuracy"] / point["mfs_ceiling"], True, workload,
                                  total_cpu_s=point["cpu_minutes"] * 60))
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", default=os.path.join(ROOT, ".cache", "model_quality"))
    parser.add_argument("--steps", type=int, default=None, help=f"default per model: {RECIPES}")
    parser.add_argument("--models", default="bert,gpt,bilm")
    parser.add_argument("--senses", default=None, metavar="wordnet|PATH",
                        help="score sense accuracy per checkpoint on these records (wordnet: the demo's)")
    parser.add_argument("--sense_every", type=int, default=None, help="steps between scored checkpoints")
    parser.add_argument("--data_dir", default=None, help="train on the TFRecords there (the demo's layout) instead")
    parser.add_argument("--no_history", action="store_true", help="do not append to benchmarks/results/")
    parser.add_argument("--note", default="",
                        help="added to the history's workload, so that a run beside other jobs is kept apart")
    parser.add_argument("--preset", default=None, help="instead of <model>_tiny (one model per run)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="a TrainConfig or model field over the recipe (batch_size=16, learning_rate=3e-3, ...)")
    args = parser.parse_args(argv)
    from benchmarks.lib import history

    started_on = history.git_commit()  # the code measured, should the checkout move during the run
    overrides = dict(item.split("=", 1) for item in args.set)
    senses = args.senses
    if senses == "wordnet":
        from demo import wordnet
        senses = wordnet.fetch(os.path.join(ROOT, ".cache"))
    results = run(args.work_dir, args.models.split(","), args.steps, senses, args.sense_every, args.data_dir,
                  preset=args.preset, overrides=overrides)
    report(results)
    verdicts = checks(results)
    print("\nchecks:")
    for name, passed, figures in verdicts:
        print(f"  {'ok    ' if passed else 'FAILED'} {name} ({figures})")
    default = args.steps is None and args.data_dir is None and not overrides and not args.preset  # the recipes
    # the thresholds were set for
    if not args.no_history:
        workload = (f"{args.data_dir or 'shared corpus'}; steps {args.steps or 'default recipes'}; "
                    f"models {args.models}" + (f"; preset {args.preset}" if args.preset else "")
                    + "".join(f"; {item}" for item in args.set) + (f"; {args.note}" if args.note else ""))
        history.record("model_quality", history_figures(results, workload), measured_at=started_on)
    print(json.dumps(results))
    return 1 if default and not all(passed for _, passed, _ in verdicts) else 0


if __name__ == "__main__":
    raise SystemExit(main())
