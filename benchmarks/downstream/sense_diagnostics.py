"""What the demo's models' vectors are made of, beside the same models before training: the diagnostics table.

    .venv/bin/python -m benchmarks.downstream.sense_diagnostics --demo_dir DEMO_DIR [--models bert,gpt,bilm,minilm] \\
        [--max_sentences 2000] [--out_dir .cache/sense_diagnostics]

For every model of a finished `make demo` (its exports under `DEMO_DIR/export/`), and for the same config
with its initial weights (seed 42, never trained: `benchmarks.lib.model_dirs.random_model_dir`; not for MiniLM, which
was not trained here), per layer:

- `downstream.vector_diagnostics` over the held-out sentences (`DEMO_DIR/corpus/heldout.txt`): anisotropy,
  the largest dimension's and principal component's share of the variance, and the shares explained by the
  word, its position, both, the sentence and the context;
- `downstream.evaluate_senses` on the demo's WordNet sentences: 1-NN sense accuracy of the raw, centred and
  standardised vectors (the trained models' scores are read from `DEMO_DIR/polysemy/<model>.json`).

Prints one table per model (trained and initial rows per layer) and a final JSON line. Each export, score and
diagnosis is kept under `--out_dir` and reused. About 10 minutes for the four models (AMD EPYC, AVX2,
2 cores).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import os
import sys

from commands.tf_startup import quiet_command
from benchmarks.lib.proc import ROOT, last_json, run_module
COLUMNS = ("sense", "centred", "standardised", "anisotropy", "top_component_share", "word", "position",
           "sentence", "context")


def _cached_json(path: str, make) -> dict:
    if not os.path.exists(path):
        result = make()
        with open(path + ".tmp", "w") as f:
            json.dump(result, f)
        os.replace(path + ".tmp", path)
    with open(path) as f:
        return json.load(f)


def measure(export_dir: str, senses: str, sentences: str, max_sentences: int, out: str, polysemy: str | None) -> dict:
    """{"senses": evaluate_senses' summary, "diagnostics": vector_diagnostics' result} of one export."""
    summary = (json.load(open(polysemy))["summary"] if polysemy and os.path.exists(polysemy) else
               _cached_json(out + ".senses.json", lambda: last_json(run_module(
                   ["downstream.evaluate_senses", "--module", export_dir, "--data", senses, "--examples", ""]))))
    diagnostics = _cached_json(out + ".diagnostics.json", lambda: last_json(run_module(
        ["downstream.vector_diagnostics", "--module", export_dir, "--input", sentences, "--max_sentences",
         str(max_sentences)])))
    return {"senses": summary, "diagnostics": diagnostics}


def initial_export(demo_dir: str, kind: str, out_dir: str) -> str:
    """The export of `kind`'s demo config with its initial weights (made once under `out_dir`)."""
    from benchmarks.lib.model_dirs import random_model_dir

    model_dir = random_model_dir(os.path.join(demo_dir, "runs", kind), os.path.join(out_dir, f"{kind}_initial"), 42)
    export_dir = model_dir + "_export"
    if not os.path.isdir(os.path.join(export_dir, "hub")):
        run_module(["serving.export", "--model_dir", model_dir, "--export_dir", export_dir])
    return export_dir


def rows(measured: dict) -> list[tuple[str, dict]]:
    """(layer, {column: value}) for every layer both measures cover."""
    s, d = measured["senses"], measured["diagnostics"]["layers"]
    out = []
    for layer in d:
        values = {"sense": s["layers"].get(layer), "centred": s["layers_centred"].get(layer),
                  "standardised": s["layers_standardised"].get(layer), **d[layer]}
        out.append((layer, values))
    return out


def report(name: str, trained: dict, initial: dict | None) -> None:
    print(f"\n{name} (MFS ceiling {trained['senses']['baseline']:.4f})")
    print(f"{'layer':<16}{'weights':<9}" + "".join(f"{c:>13}" for c in COLUMNS))
    for label, measured in (("trained", trained), ("initial", initial)):
        if measured is None:
            continue
        for layer, values in rows(measured):
            cells = "".join(f"{values[c]:>13.4f}" if values[c] is not None else f"{'':>13}" for c in COLUMNS)
            print(f"{layer:<16}{label:<9}{cells}")


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo_dir", required=True)
    parser.add_argument("--models", default="bert,gpt,bilm,minilm")
    parser.add_argument("--max_sentences", type=int, default=2000)
    parser.add_argument("--out_dir", default=os.path.join(ROOT, ".cache", "sense_diagnostics"))
    args = parser.parse_args(argv)
    from benchmarks.lib import history
    from demo import wordnet

    print(f"machine: {history.machine()}")
    os.makedirs(args.out_dir, exist_ok=True)
    senses = wordnet.fetch(os.path.join(ROOT, ".cache"))
    sentences = os.path.join(args.demo_dir, "corpus", "heldout.txt")
    results = {}
    for name in args.models.split(","):
        trained = measure(os.path.join(args.demo_dir, "export", name), senses, sentences, args.max_sentences,
                          os.path.join(args.out_dir, name), os.path.join(args.demo_dir, "polysemy", f"{name}.json"))
        initial = None
        if name in ("bert", "gpt", "bilm"):
            initial = measure(initial_export(args.demo_dir, name, args.out_dir), senses, sentences,
                              args.max_sentences, os.path.join(args.out_dir, f"{name}_initial"), None)
        results[name] = {"trained": trained, "initial": initial}
        report(name, trained, initial)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
