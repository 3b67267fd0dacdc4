"""The model-quality run (`benchmarks.training.model_quality`), for every benchmark that trains the same way:
the data made by the product's commands, a `<model>_tiny` run trained and evaluated, the context-free
baselines from the same TFRecords, the sense curve of its checkpoints, and the history's figures."""

import json
import math
import os
import time

import numpy as np

from benchmarks.lib.proc import run_module
from demo import shared_data

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


