"""Learning parity: does our trainer learn per token what an independent trainer learns on the same data?

    .venv/bin/python -m benchmarks.training.learning_parity [--models gpt,bert] [--gpt_steps 150] [--bert_steps 300] \\
        [--points 3] [--data_dir DEMO_DIR/data | --work_dir .cache/model_quality] [--out_dir .cache/learning_parity]

One run, side by side, on the same TFRecords with the same batch (32), steps, warm-up (a tenth), peak rate and
linear decay, each run in a process of its own (`benchmarks.lib.parity_runs`, `benchmarks/peers/`):

- GPT: our trainer on the GPT-2 shape (`normalize_first`, tied output, no bias) against keras-hub's
  `GPT2CausalLM` trained by Keras `fit`, the same shape: the trainer's parity. Then our `gpt_tiny` preset
  with its recipe (untied output with a bias, post-LN), and the same shape trained by `fit`: the recipe's gain.
- BERT: our trainer on google-research BERT's shape (post-LN, MLM output tied to the token embedding)
  against TF Model Garden's BERT pretrainer and data loader (`BertPretrainerV2`, `MaskedLMTask`'s loss, its
  AdamW, installed apart from the venv) and keras-hub's `BertBackbone` + `MaskedLMHead` under `fit`; then our
  `bert_tiny` preset with its recipe.

Held-out loss (GPT's next-token loss, BERT's MLM loss) over the same first batches of the held-out TFRecords,
before training (it must be about ln(vocab)) and at `--points` equal-token points; the ratio ours / peer at
each; the unigram baseline of the same targets. Data: the demo's layout (`--data_dir DEMO_DIR/data`:
`gpt/`, `gpt_heldout/`, `bert/`, `bert_heldout/`) or, by default, `benchmarks.training.model_quality`'s TFRecords of
the shared corpus (made on first use). Prints a table per model and a final JSON line.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import math
import os

from commands.tf_startup import quiet_command
from benchmarks.lib import quality_runs
from benchmarks.lib.proc import ROOT
from benchmarks.peers import model_garden_run

BATCH = 32
GPT2_SHAPE = ["normalize_first=true", "tie_output=true", "output_bias=false"]
BERT_SHAPE = ["tie_output=true", "normalize_first=false"]
LOSS_KEY = {"gpt": "loss", "bert": "mlm_loss"}


def runs(kind: str, steps: int, recipe_rate: float) -> list[tuple[str, str, list[str]]]:
    """(name, trainer, --set overrides) of each run of `kind`. Every run takes the same batch, schedule and
    peak rate; "matched" runs share the peer's shape."""
    common = [f"batch_size={BATCH}", f"warmup_steps={max(steps // 10, 1)}", f"learning_rate={recipe_rate}",
              "decay=linear"]
    if kind == "gpt":
        return [("ours, GPT-2 shape", "ours", common + GPT2_SHAPE),
                ("keras-hub GPT2CausalLM fit", "keras_hub", common),
                ("ours, gpt_tiny recipe", "ours", common)]
    return [("ours, BERT shape (tied)", "ours", common + BERT_SHAPE),
            ("Model Garden BertPretrainerV2", "model_garden", common),
            ("keras-hub BertBackbone fit", "keras_hub", common),
            ("ours, bert_tiny recipe", "ours", common)]


def data_patterns(args, kind: str) -> dict:
    if args.data_dir:
        return {"pretrain": os.path.join(args.data_dir, kind, f"{kind}-*.tfrecord"),
                "heldout": os.path.join(args.data_dir, f"{kind}_heldout", f"{kind}-*.tfrecord")}
    return quality_runs.prepare(args.work_dir, kind)


def run_kind(kind: str, args, steps: int) -> dict:
    patterns = data_patterns(args, kind)
    rate = {"gpt": args.gpt_rate, "bert": args.bert_rate}[kind]
    out_dir = os.path.join(args.out_dir, kind)
    os.makedirs(out_dir, exist_ok=True)
    results = {}
    for i, (name, trainer, overrides) in enumerate(runs(kind, steps, rate)):
        output = os.path.join(out_dir, f"run{i}.json")
        print(f"{kind}: {name}", flush=True)
        if trainer == "model_garden":
            model_garden_run.train(patterns, overrides, steps, args.points, args.eval_batches, output,
                                   args.cache_dir)
        else:
            model_garden_run.python(["-m", "benchmarks.lib.parity_runs", trainer, "--kind", kind, "--train_data",
                                     patterns["pretrain"], "--eval_data", patterns["heldout"], "--steps", str(steps),
                                     "--points", str(args.points), "--eval_batches", str(args.eval_batches),
                                     "--output", output, *[a for o in overrides for a in ("--set", o)]])
        with open(output) as f:
            results[name] = json.load(f)["evals"]
    with open(os.path.join(os.path.dirname(patterns["pretrain"]), "metadata.json")) as f:
        vocab_size = json.load(f)["vocab"]["size"]
    baseline = quality_runs.unigram_baseline(patterns["pretrain"], patterns["heldout"], kind, vocab_size)
    return {"runs": results, "unigram": baseline, "ln_vocab": math.log(vocab_size), "steps": steps}


def report(kind: str, result: dict) -> None:
    key, names = LOSS_KEY[kind], list(result["runs"])
    pairs = [(names[0], names[1])] + ([(names[0], names[2])] if kind == "bert" else [])
    print(f"\n{kind}: held-out {key} (unigram {result['unigram']['loss']:.3f}, ln(vocab) {result['ln_vocab']:.3f})")
    print(f"{'step':>6} {'tokens':>10} " + " ".join(f"{n[:30]:>30}" for n in names)
          + "".join(f" {'ratio ' + str(i + 1):>8}" for i in range(len(pairs))))
    rows = zip(*[result["runs"][n] for n in names])
    for row in rows:
        by_name = dict(zip(names, row))
        ratios = [by_name[a][key] / by_name[b][key] for a, b in pairs]
        print(f"{row[0]['step']:>6} {row[0]['tokens']:>10,} "
              + " ".join(f"{r[key]:>30.4f}" for r in row) + "".join(f" {x:>8.3f}" for x in ratios))
    print("ratio i: " + "; ".join(f"{i + 1} = {a} / {b}" for i, (a, b) in enumerate(pairs)))


@quiet_command
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training.learning_parity",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gpt,bert")
    parser.add_argument("--gpt_steps", type=int, default=150)
    parser.add_argument("--bert_steps", type=int, default=300)
    parser.add_argument("--gpt_rate", type=float, default=1e-3)
    parser.add_argument("--bert_rate", type=float, default=2e-3)
    parser.add_argument("--points", type=int, default=3)
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--data_dir", default=None, help="the demo's data folder (default: the shared corpus)")
    parser.add_argument("--work_dir", default=os.path.join(ROOT, ".cache", "model_quality"))
    parser.add_argument("--out_dir", default=os.path.join(ROOT, ".cache", "learning_parity"))
    parser.add_argument("--cache_dir", default=os.path.join(ROOT, ".cache"))
    args = parser.parse_args(argv)
    results = {}
    for kind in args.models.split(","):
        results[kind] = run_kind(kind, args, {"gpt": args.gpt_steps, "bert": args.bert_steps}[kind])
        report(kind, results[kind])
    print(json.dumps(results))


if __name__ == "__main__":
    main()
