"""Do the models learn? Brief pretraining on the real corpus, evaluation on held-out text, against the
baselines a model that learned nothing about context would reach.

    python -m benchmarks.model_quality [--work_dir .cache/model_quality] [--steps N] [--models bert,gpt,bilm]

Runs the product end to end, each step a real command: `pipeline.vocab` learns an 8k WordPiece vocabulary
from `../shared/data/corpus/pretrain.txt.gz`; `pipeline.pretraining_data` writes TFRecords for each model from
pretrain and from `heldout.txt.gz`; `models.training.train` trains the `<model>_tiny` preset; `models.training.evaluate` scores
every full held-out batch. Baselines come from the same TFRecords:

- BERT: the unigram-frequency baseline predicts the most frequent masked token of the training data at
  every masked position (its accuracy on held-out masked positions); its loss is the cross-entropy of the
  add-one-smoothed unigram distribution.
- GPT and biLM: the unigram perplexity of the held-out targets under the add-one-smoothed training unigram
  distribution (what any model without context can at best approach).

Prints a table and, last, one JSON object. Finished steps are reused when their outputs exist.
"""

import argparse
import json
import math
import os
import time

import numpy as np

from benchmarks._proc import run_module
from demo import shared_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = {"pretrain": shared_data.path("corpus", "pretrain.txt.gz"),
          "heldout": shared_data.path("corpus", "heldout.txt.gz")}
TRAIN_FLAGS = {"batch_size": 32, "log_every": 100, "steps_per_execution": 50}
# Per model: optimizer steps and peak learning rate of the brief run (warm-up: a tenth of the steps).
RECIPES = {"bert": (1000, 2e-3), "gpt": (600, 1e-3), "bilm": (1000, 2e-3)}


def prepare(work_dir: str, kind: str) -> dict[str, str]:
    """Vocabulary (shared) and the model's train/held-out TFRecords; returns their patterns."""
    vocab = os.path.join(work_dir, "vocab.txt")
    if not os.path.exists(vocab):
        run_module(["pipeline.vocab", "--input", CORPUS["pretrain"], "--output", vocab, "--vocab_size", "8000"])
    patterns = {}
    for split, corpus in CORPUS.items():
        out = os.path.join(work_dir, f"{kind}-{split}")
        if not os.path.exists(os.path.join(out, "metadata.json")):
            run_module(["pipeline.pretraining_data", "--model", kind, "--input", corpus, "--vocab", vocab,
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


def train_and_evaluate(work_dir: str, kind: str, patterns: dict, steps: int | None = None) -> dict:
    steps, learning_rate = (steps or RECIPES[kind][0]), RECIPES[kind][1]
    model_dir = os.path.join(work_dir, f"run-{kind}-{steps}")
    flags = {**TRAIN_FLAGS, "train_steps": steps, "learning_rate": learning_rate, "warmup_steps": steps // 10,
             "checkpoint_every": steps}
    start = time.time()
    run_module(["models.training.train", "--model", kind, "--preset", f"{kind}_tiny", "--train_data", patterns["pretrain"],
                "--model_dir", model_dir, *[a for k, v in flags.items() for a in ("--set", f"{k}={v}")]])
    seconds = time.time() - start
    result = json.loads(run_module(["models.training.evaluate", "--model_dir", model_dir, "--eval_data",
                                    patterns["heldout"]]).strip().splitlines()[-1])
    return {**result, "train_seconds": round(seconds, 1), "train_steps": steps,
            "train_tokens": steps * TRAIN_FLAGS["batch_size"] * _seq_length(patterns["pretrain"])}


def _seq_length(pattern: str) -> int:
    with open(os.path.join(os.path.dirname(pattern), "metadata.json")) as f:
        return json.load(f)["config"]["max_seq_length"]


def run(work_dir: str, kinds: list[str], steps: int | None = None) -> dict:
    os.makedirs(work_dir, exist_ok=True)
    results = {}
    for kind in kinds:
        patterns = prepare(work_dir, kind)
        with open(os.path.join(os.path.dirname(patterns["pretrain"]), "metadata.json")) as f:
            vocab_size = json.load(f)["vocab"]["size"]
        results[kind] = {"model": train_and_evaluate(work_dir, kind, patterns, steps),
                         "baseline": unigram_baseline(patterns["pretrain"], patterns["heldout"], kind, vocab_size)}
    return results


def report(results: dict) -> None:
    print(f"{'model':6} {'metric':22} {'trained':>10} {'unigram':>10} {'train time':>11}")
    for kind, r in results.items():
        model, base = r["model"], r["baseline"]
        rows = ([("mlm_accuracy", model["mlm_accuracy"], base["accuracy"]),
                 ("mlm_loss", model["mlm_loss"], base["loss"]), ("nsp_accuracy", model["nsp_accuracy"], 0.5)]
                if kind == "bert" else
                [("perplexity", model["perplexity"], base["perplexity"])] + (
                    [("forward_perplexity", model["forward_perplexity"], base["perplexity"]),
                     ("backward_perplexity", model["backward_perplexity"], base["perplexity"])]
                    if kind == "bilm" else []))
        for i, (name, value, baseline) in enumerate(rows):
            time_text = f"{model['train_seconds']:.0f} s" if i == 0 else ""
            print(f"{kind if i == 0 else '':6} {name:22} {value:10.4g} {baseline:10.4g} {time_text:>11}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", default=os.path.join(ROOT, ".cache", "model_quality"))
    parser.add_argument("--steps", type=int, default=None, help=f"default per model: {RECIPES}")
    parser.add_argument("--models", default="bert,gpt,bilm")
    args = parser.parse_args(argv)
    results = run(args.work_dir, args.models.split(","), args.steps)
    report(results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
