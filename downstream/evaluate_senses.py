"""The polysemy evaluation: does a module's vector for a word in context tell its senses apart?

A static (context-free) embedding gives every occurrence of "bank" one vector, so it can do no better than
always guessing the lemma's most frequent sense (MFS): that is the ceiling of any static embedding. A
contextual one can place "river bank" and "bank loan" apart. For each layer choice (`downstream.features`):

- **Nearest-neighbour sense accuracy** (leave-one-out): every occurrence of a lemma with >= 2 senses takes
  the sense of its most cosine-similar other occurrence of the same lemma. Exact ties (within `TIE`, as
  a static layer gives for identical words) vote; a tied vote goes to the sense more frequent among the
  other occurrences. Reported against `baseline` (MFS, counted on all of the lemma's occurrences: the static
  ceiling), `baseline_loo` (MFS of the *other* occurrences, what an all-tied static layer scores under this
  very protocol) and `chance` (a random other occurrence's sense).
- **Static control**: the non-contextual layer (BERT/GPT `embeddings`, biLM `word_emb`) run the same way.
  (BERT's and GPT's embeddings add position embeddings, so they are nearly, not exactly, static.)
- **Post-processed vectors**: the same 1-NN accuracy after centring every layer's occurrence vectors (the mean
  over all evaluated occurrences subtracted: `layers_centred`) and after standardising them (each dimension
  also divided by its standard deviation: `layers_standardised`). Both use no labels; they undo a common
  direction or a rogue dimension that can dominate cosines (`downstream.vector_diagnostics`). The ranking
  figures (`accuracy`, `best_layer`) stay those of the raw vectors; compare models post-processed the same way.
- **WiC-style pairs** (`--pairs`): same sense or not from the cosine of the two occurrences; the threshold is
  the one that maximises accuracy on the `train` split and is applied to the `test` split (without a
  `split` column: tuned on a deterministic half of the lemmas, by the house's stable hash
  (`preprocessing.stable_random.stable_fraction`), and applied to the other half).
  Reported with the test split's majority-class accuracy.

    python -m downstream.evaluate_senses --module export/bert --data wordnet_senses.jsonl.gz \\
        [--pairs wordnet_wic_pairs.tsv.gz] [--png bank.png] [--png_word bank] [--examples bank,play,plant]

The last stdout line is one JSON object: `layers` (name -> accuracy), `layers_centred`, `layers_standardised`,
`best_layer`, `accuracy`, `baseline`,
`baseline_loo`, `chance`, `static_layer`, `static_accuracy`, `lemmas`, `occurrences`, and with `--pairs`
`wic_accuracy` (the best layer's), `wic_layers`, `wic_threshold`, `wic_majority`, `wic_pairs`.

The same from Python is one call on a `SensesJob`, whose fields are the flags; it prints the same report,
writes the same PNG and returns a `SensesResult` (`summary` is the JSON line):

    result = run(SensesJob(module="export/bert", data="wordnet_senses.jsonl.gz", examples=("bank",)))
    result.summary["best_layer"], result.summary["accuracy"]
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import collections
import csv
import dataclasses
import gzip
import json
import sys

import numpy as np

from commands.job_fields import COUNT, checked, output_of
from commands.tf_startup import quiet_command
from commands.user_errors import UserError, require_file, run_to_summary
from preprocessing.stable_random import stable_fraction

TIE = 1e-6
CONTEXT_CHOICES = ("sum_last4", "concat_last4", "weighted_all")


def _open(path):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def read_senses(path: str) -> list[dict]:
    with _open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_pairs(path: str) -> list[dict]:
    with _open(path) as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def sense_groups(lemmas: list[str], senses: list[str]) -> dict[str, list[int]]:
    """lemma -> occurrence indices, for lemmas with >= 2 occurrences and >= 2 senses."""
    groups = collections.defaultdict(list)
    for i, lemma in enumerate(lemmas):
        groups[lemma].append(i)
    return {k: v for k, v in groups.items() if len({senses[i] for i in v}) >= 2}


def _vote(candidates: list[str], others: collections.Counter) -> str:
    votes = collections.Counter(candidates)
    return min(votes, key=lambda s: (-votes[s], -others[s], s))


def nearest_neighbours(vectors: np.ndarray, senses: list[str], groups: dict[str, list[int]]) -> dict[int, tuple]:
    """occurrence -> (predicted sense, nearest other occurrence) under leave-one-out cosine 1-NN."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    out = {}
    for members in groups.values():
        sims = unit[members] @ unit[members].T  # [n, n]
        np.fill_diagonal(sims, -np.inf)
        for a, i in enumerate(members):
            tied = [members[b] for b in np.flatnonzero(sims[a] >= sims[a].max() - TIE)]
            others = collections.Counter(senses[j] for j in members if j != i)
            out[i] = (_vote([senses[j] for j in tied], others), tied[0])
    return out


def nn_accuracy(vectors: np.ndarray, senses: list[str], groups: dict[str, list[int]]) -> float:
    predicted = nearest_neighbours(vectors, senses, groups)
    return float(np.mean([predicted[i][0] == senses[i] for i in predicted]))


def baselines(senses: list[str], groups: dict[str, list[int]]) -> dict[str, float]:
    """`baseline` (MFS over all occurrences), `baseline_loo` (MFS of the others), `chance` (a random other's)."""
    mfs, loo, chance, n = 0, 0, 0.0, 0
    for members in groups.values():
        counts = collections.Counter(senses[i] for i in members)
        mfs += counts.most_common(1)[0][1]
        for i in members:
            others = counts.copy()
            others[senses[i]] -= 1
            loo += _vote(list(others.elements()), others) == senses[i]
            chance += others[senses[i]] / (len(members) - 1)
        n += len(members)
    return {"baseline": mfs / n, "baseline_loo": loo / n, "chance": chance / n}


POSTPROCESSING = ("centred", "standardised")


def postprocess(vectors: np.ndarray, how: str) -> np.ndarray:
    """`vectors` [N, D] centred (the mean row subtracted) or standardised (then each dimension divided by its
    standard deviation; a constant dimension is left at 0)."""
    centred = vectors - vectors.mean(axis=0)
    if how == "centred":
        return centred
    if how == "standardised":
        return centred / np.maximum(vectors.std(axis=0), 1e-12)
    raise ValueError(f"unknown post-processing {how!r}; one of {POSTPROCESSING}")


def best_threshold(sims: np.ndarray, labels: np.ndarray) -> float:
    """The cosine threshold (same sense iff sim >= t) with the highest accuracy on (sims, labels)."""
    order = np.sort(np.unique(sims))
    candidates = np.concatenate([[order[0] - 1], (order[1:] + order[:-1]) / 2, [order[-1] + 1]])
    accuracy = [np.mean((sims >= t) == labels) for t in candidates]
    return float(candidates[int(np.argmax(accuracy))])


def wic_split(pairs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Masks (tune, test): the file's train/test splits, or else halves of the lemmas by `stable_fraction`."""
    splits = [p.get("split") for p in pairs]
    if "train" in splits and "test" in splits:
        return np.array([s == "train" for s in splits]), np.array([s == "test" for s in splits])
    half = np.array([stable_fraction("wic", p["lemma"]) < 0.5 for p in pairs], dtype=bool)
    return half, ~half


def wic_accuracy(a: np.ndarray, b: np.ndarray, labels: np.ndarray, tune: np.ndarray, test: np.ndarray):
    """Cosine of each pair's two vectors; threshold tuned on `tune`, accuracy on `test`."""
    sims = np.sum(a * b, 1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    t = best_threshold(sims[tune], labels[tune])
    return float(np.mean((sims[test] >= t) == labels[test])), t


def print_neighbours(rows, vectors, groups, lemma, layer, limit=8) -> None:
    senses = [r["synset"] for r in rows]
    members = groups.get(lemma)
    if not members:
        print(f"\n{lemma}: not in the data (or a single sense)")
        return
    predicted = nearest_neighbours(vectors, senses, {lemma: members})
    hits = sum(predicted[i][0] == senses[i] for i in members)
    print(f"\n{lemma} ({layer}): {hits}/{len(members)} nearest neighbours share the sense")
    for i in members[:limit]:
        j = predicted[i][1]
        mark = "same" if senses[j] == senses[i] else "DIFF"
        print(f"  [{rows[i]['lexname']} {senses[i]}] {rows[i]['sentence']!r}\n"
              f"     -> {mark} [{rows[j]['lexname']} {senses[j]}] {rows[j]['sentence']!r}")


def sense_label(row: dict, width: int = 48) -> str:
    """A sense as a reader names it: its gloss (the records' `gloss`, when they carry one) cut at a word
    boundary to about `width` characters, with its coarse class; else its synset id and class."""
    gloss = (row.get("gloss") or "").split(";")[0].strip()
    if not gloss:
        return f"{row['synset']} ({row['lexname']})"
    if len(gloss) > width:
        gloss = gloss[:width + 1].rsplit(" ", 1)[0].rstrip(",(") + "…"  # whole words only
    return f"{gloss} ({row['lexname']})"


def draw_projection(path, rows, vectors, members, lemma, layer) -> None:
    """PCA (numpy SVD) of one lemma's occurrence vectors to 2-D, coloured by sense (`sense_label`), to a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = vectors[members] - vectors[members].mean(0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    xy = x @ vt[:2].T  # [n, 2]
    senses = sorted({rows[i]["synset"] for i in members})
    colours = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(9, 7))
    for k, sense in enumerate(senses):
        idx = [a for a, i in enumerate(members) if rows[i]["synset"] == sense]
        ax.scatter(xy[idx, 0], xy[idx, 1], color=colours(k % 20), s=60, label=sense_label(rows[members[idx[0]]]))
        for a in idx:
            ax.annotate(rows[members[a]]["sentence"][:40], xy[a], fontsize=6, alpha=0.7)
    ax.set_title(f"'{lemma}' in context: {layer}, first two principal components")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def evaluate(encoder, rows: list[dict], pairs: list[dict] | None = None, batch_size: int = 64) -> dict:
    """Embeds every occurrence (and pair) once; returns the summary and, per layer, the occurrence vectors."""
    layers = encoder.layer_names + list(CONTEXT_CHOICES) + encoder.extra_names
    texts = [r["sentence"] for r in rows]
    spans = [(int(r["start"]), int(r["end"])) for r in rows]
    for p in pairs or []:
        texts += [p["sentence1"], p["sentence2"]]
        spans += [(int(p["start1"]), int(p["end1"])), (int(p["start2"]), int(p["end2"]))]
    vectors = encoder.embed_spans(texts, spans, layers, batch_size)
    n = len(rows)
    usable = ~np.isnan(vectors[layers[0]][:n]).any(1)  # spans past a module's window are left out
    kept = [i for i in range(n) if usable[i]]
    kept_rows = [rows[i] for i in kept]
    senses = [r["synset"] for r in kept_rows]
    groups = sense_groups([r["lemma"] for r in kept_rows], senses)
    occurrence = {name: v[:n][kept] for name, v in vectors.items()}
    accuracy = {name: nn_accuracy(occurrence[name], senses, groups) for name in layers}
    best = max(layers, key=lambda name: accuracy[name])
    static = encoder.layer_names[0]
    processed = {f"layers_{how}": {name: nn_accuracy(postprocess(occurrence[name], how), senses, groups)
                                   for name in layers} for how in POSTPROCESSING}
    summary = {"module_kind": encoder.kind, "layers": accuracy, **processed, "best_layer": best,
               "accuracy": accuracy[best],
               **baselines(senses, groups), "static_layer": static, "static_accuracy": accuracy[static],
               "lemmas": len(groups), "occurrences": sum(len(m) for m in groups.values()),
               "skipped_past_window": n - len(kept)}
    if pairs:
        labels = np.array([p["same_sense"] == "1" for p in pairs])
        tune, test = wic_split(pairs)
        wic, thresholds = {}, {}
        for name in layers:
            a, b = vectors[name][n::2], vectors[name][n + 1::2]
            ok = ~(np.isnan(a).any(1) | np.isnan(b).any(1))
            wic[name], thresholds[name] = wic_accuracy(a[ok], b[ok], labels[ok], tune[ok], test[ok])
        majority = max(np.mean(labels[test]), 1 - np.mean(labels[test]))
        summary.update({"wic_accuracy": wic[best], "wic_threshold": thresholds[best], "wic_layers": wic,
                        "wic_majority": float(majority), "wic_pairs": {"tune": int(tune.sum()),
                                                                      "test": int(test.sum())}})
    return {"summary": summary, "rows": kept_rows, "groups": groups, "vectors": occurrence}


def print_report(summary: dict) -> None:
    print(f"module: {summary['module_kind']}; {summary['occurrences']} occurrences of {summary['lemmas']} lemmas "
          f"with >= 2 senses ({summary['skipped_past_window']} left out: past the module's window)")
    print(f"most-frequent-sense baseline {summary['baseline']:.4f}: the ceiling of any static, context-free "
          f"embedding (one vector per word can only pick one sense per lemma)")
    print(f"  leave-one-out MFS {summary['baseline_loo']:.4f} (what an all-tied static layer scores here); "
          f"random neighbour {summary['chance']:.4f}")
    wic = summary.get("wic_layers", {})
    print(f"\n{'layer':<16}{'1-NN sense acc':>16}{'vs MFS':>9}{'centred':>9}{'stdised':>9}"
          + (f"{'WiC acc':>9}" if wic else ""))
    for name, acc in summary["layers"].items():
        note = "  <- static control" if name == summary["static_layer"] else ""
        note += "  <- best" if name == summary["best_layer"] else ""
        wic_cell = f"{wic[name]:>9.4f}" if wic else ""
        processed = "".join(f"{summary[f'layers_{how}'][name]:>9.4f}" for how in POSTPROCESSING)
        print(f"{name:<16}{acc:>16.4f}{acc - summary['baseline']:>+9.4f}{processed}{wic_cell}{note}")
    if wic:
        print(f"WiC: threshold tuned on {summary['wic_pairs']['tune']} pairs, accuracy on "
              f"{summary['wic_pairs']['test']} held-out pairs; majority class {summary['wic_majority']:.4f}")


@checked({"batch_size": COUNT, "png": output_of("data", "pairs", "module")})
@dataclasses.dataclass(frozen=True)
class SensesJob:
    """One run of `python -m downstream.evaluate_senses`; the fields are the flags.

    Args:
      module: an export dir, or its `hub/encoder` (BERT) or `hub/module` (GPT, biLM).
      data: sense-labelled sentences (`.jsonl[.gz]`: `sentence`, `start`, `end`, `lemma`, `synset`, `lexname`).
      pairs: WiC-style pairs (`.tsv[.gz]`), for the `wic_*` figures.
      png: write a 2-D PCA projection of one word's occurrences here; png_word: that word (default: the first
        of `examples` in the data).
      examples: words to print nearest neighbours for.
      batch_size: sentences per model call.
    """

    module: str
    data: str
    pairs: str | None = None
    png: str | None = None
    png_word: str | None = None
    examples: tuple[str, ...] = ("bank", "play", "plant")
    batch_size: int = 64

    def check(self) -> None:
        """The files, before the module loads; raises `UserError`."""
        require_file("--data", self.data)
        if self.pairs:
            require_file("--pairs", self.pairs)


@dataclasses.dataclass(frozen=True)
class SensesResult:
    """The evaluation's figures (`summary`: the command's last line) and the PNG it drew (`png`, of `png_word`),
    if one was asked for."""

    summary: dict
    png: str | None = None
    png_word: str | None = None


def run(job: SensesJob) -> SensesResult:
    """Embeds every occurrence, prints the command's report (per-layer table, nearest neighbours of the
    examples) and draws the PNG; raises `UserError` (no module there, a missing file, a `png_word` without
    occurrences of >= 2 senses) with the command's message."""
    from downstream.features import ModuleEncoder

    job.check()
    rows = read_senses(job.data)
    pairs = read_pairs(job.pairs) if job.pairs else None
    result = evaluate(ModuleEncoder(job.module), rows, pairs, job.batch_size)
    summary, groups = result["summary"], result["groups"]
    best = summary["best_layer"]
    print_report(summary)
    for lemma in job.examples:
        print_neighbours(result["rows"], result["vectors"][best], groups, lemma, best)
    if not job.png:
        return SensesResult(summary)
    word = job.png_word or next((w for w in job.examples if w in groups), None) or next(iter(groups))
    if word not in groups:
        raise UserError(f"--png_word {word!r} has no occurrences with >= 2 senses")
    draw_projection(job.png, result["rows"], result["vectors"][best], groups[word], word, best)
    print(f"\nwrote {job.png} ({word}, {best})")
    return SensesResult(summary, job.png, word)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m downstream.evaluate_senses",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", required=True, help="an export dir, or its hub/encoder or hub/module")
    parser.add_argument("--data", required=True, help="sense-labelled sentences (.jsonl[.gz])")
    parser.add_argument("--pairs", help="WiC-style pairs (.tsv[.gz])")
    parser.add_argument("--png", help="write a 2-D PCA projection of one word's occurrences here")
    parser.add_argument("--png_word", help="the word to draw (default: the first example word in the data)")
    parser.add_argument("--examples", default="bank,play,plant", help="words to print nearest neighbours for")
    parser.add_argument("--batch_size", type=int, default=64)
    return parser.parse_args(argv)


def job_from_args(args) -> SensesJob:
    return SensesJob(module=args.module, data=args.data, pairs=args.pairs, png=args.png, png_word=args.png_word,
                     examples=tuple(w for w in args.examples.split(",") if w), batch_size=args.batch_size)


@quiet_command
def main(argv=None) -> int:
    """`python -m downstream.evaluate_senses`: parse, build the job, run it; the summary as the last line."""
    args = parse_args(argv)
    return run_to_summary(lambda: run(job_from_args(args)).summary)


if __name__ == "__main__":
    sys.exit(main())
