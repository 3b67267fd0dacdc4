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

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os

from commands.tf_startup import quiet_command
from benchmarks.lib.proc import ROOT
from benchmarks.lib.quality_runs import RECIPES, history_figures, run


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


@quiet_command
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
