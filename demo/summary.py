"""The demo's closing report: `summary.json` and three tables (every artefact, the cleaned text's row with what
each dedup rule removed; sense accuracy per model with its static layer and the most-frequent-sense ceiling;
what continued pretraining bought). Pure functions of the steps' results, apart from the sizes of the files
they name."""

import os

from demo.commands import size
from models.training.hardware import machine

TRACKS = {"bert": "from scratch", "gpt": "from scratch", "bilm": "from scratch",
          "minilm_converted": "continued: before", "minilm": "continued: after"}


def polysemy_figures(s: dict) -> dict:
    """`downstream.evaluate_senses`' summary -> the demo's figures. `best_layer` is the best *contextual*
    layer (the static layer is what any static vector could do); `stderr` is the binomial standard error of
    its accuracy over the `occurrences`, the unit a difference from the ceiling is judged in."""
    contextual = {k: v for k, v in s["layers"].items() if k != s["static_layer"]}
    best = max(contextual, key=contextual.get)
    n = s["occurrences"]
    accuracy = contextual[best]
    return {"static_layer": s["static_layer"], "static_accuracy": round(s["static_accuracy"], 4),
            "best_layer": best, "accuracy": round(accuracy, 4),
            "stderr": round((accuracy * (1 - accuracy) / n) ** 0.5, 4) if n else None, "occurrences": n,
            "mfs_baseline": round(s["baseline"], 4), "wic_accuracy": s.get("wic_accuracy")}


def ceiling_verdicts(polysemy: dict) -> list[str]:
    """One plain line per model: does its best contextual layer beat the most-frequent-sense ceiling, and by
    how much in points and in standard errors, saying so when the gap is under one standard error."""
    lines = []
    for name, p in polysemy.items():
        gap = p["accuracy"] - p["mfs_baseline"]
        errors = f" = {gap / p['stderr']:+.1f} standard errors" if p.get("stderr") else ""
        verdict = "beats" if gap > 0 else "ties" if gap == 0 else "stays below"
        if gap and p.get("stderr") and abs(gap) < p["stderr"]:
            verdict += " the ceiling within one standard error, so not measurably:" if gap > 0 else \
                " the ceiling by less than one standard error:"
        else:
            verdict += " the ceiling:"
        lines.append(f"{name} ({TRACKS.get(name, '')}): {verdict} {p['best_layer']} "
                     f"{p['accuracy']:.3f} ± {p.get('stderr') or 0:.3f} against {p['mfs_baseline']:.3f}, "
                     f"{100 * gap:+.1f} points{errors}")
    return lines


def adaptation(continued: dict, polysemy: dict) -> dict:
    """Held-out MLM loss and accuracy and sense accuracy before and after continued pretraining."""
    figures = {}
    for stage, export in (("before", "minilm_converted"), ("after", "minilm")):
        run = continued[stage]
        figures[stage] = {"mlm_loss": round(run["mlm_loss"], 4), "mlm_accuracy": round(run["mlm_accuracy"], 4),
                          "sense_accuracy": round(polysemy[export]["accuracy"], 4), "steps": run["steps"],
                          "train_seconds": run["train_seconds"]}
    return figures


def sense_rows(polysemy: dict) -> list[tuple]:
    rows = []
    for name, s in polysemy.items():
        error = f" ± {s['stderr']:.3f}" if s.get("stderr") else ""
        rows.append((name, TRACKS.get(name, ""), f"{s['static_layer']} {s['static_accuracy']:.3f}",
                     f"{s['best_layer']} {s['accuracy']:.3f}{error}", f"{s['mfs_baseline']:.3f}",
                     f"{100 * (s['accuracy'] - s['mfs_baseline']):+.1f}",
                     f"{100 * (s['accuracy'] - s['static_accuracy']):+.1f}"))
    return rows


SENSE_HEADER = ("model", "track", "static layer", "best contextual layer", "MFS ceiling", "best-MFS (pts)",
                "best-static (pts)")


def adaptation_rows(figures: dict) -> list[tuple]:
    b, a = figures["before"], figures["after"]
    return [("held-out MLM loss", f"{b['mlm_loss']:.3f}", f"{a['mlm_loss']:.3f}"),
            ("held-out MLM accuracy", f"{b['mlm_accuracy']:.3f}", f"{a['mlm_accuracy']:.3f}"),
            ("sense accuracy (best layer)", f"{b['sense_accuracy']:.3f}", f"{a['sense_accuracy']:.3f}"),
            ("training", f"heads only, {b['steps']} steps, {b['train_seconds']:.0f} s",
             f"all weights, {a['steps']} steps, {a['train_seconds']:.0f} s")]


def learning(runs: dict) -> dict:
    """Per from-scratch model: its held-out figure beside the context-free baseline on the same targets, and
    their ratio (perplexity: lower is better, the goal at most 0.5x; MLM accuracy: higher, at least 2x)."""
    figures = {}
    for name in ("bert", "gpt", "bilm"):
        run = runs[name]
        if name == "bert":
            value, base, what = run["mlm_accuracy"], run["baseline"]["most_frequent_accuracy"], "MLM accuracy"
            versus = "most frequent token"
        else:
            value, base, what = run["perplexity"], run["baseline"]["unigram_perplexity"], "perplexity"
            versus = "unigram"
        figures[name] = {"metric": what, "value": round(value, 4), "baseline": versus,
                         "baseline_value": round(base, 4), "ratio": round(value / base, 3) if base else None}
    return figures


def learning_rows(figures: dict) -> list[tuple]:
    return [(name, f"held-out {f['metric']}", f"{f['value']:.3f}", f"{f['baseline']} {f['baseline_value']:.3f}",
             f"{f['ratio']:.2f}x") for name, f in figures.items()]


LEARNING_HEADER = ("model", "figure", "trained", "context-free baseline", "ratio")
ADAPTATION_HEADER = ("all-MiniLM-L6-v2 on the corpus", "before (converted)", "after (continued)")


def cleaning_cell(c: dict) -> str:
    """The cleaning row's figures: documents kept, then what each rule removed (a zero too: nothing found is news)."""
    return (f"kept {c['kept']:,} of {c['documents_seen']:,} training documents; removed: exact {c['exact']:,}, "
            f"near {c['near']:,}, held-out exact {c['heldout_exact']:,}, held-out near {c['heldout_near']:,} "
            f"(of {c['heldout_read']:,}); spans: {c['span_sentences']:,} sentences, "
            f"{c['span_emptied']:,} documents emptied")


def _of_batch(run: dict) -> str:
    return f" of {run['batch_size']}" if "batch_size" in run else ""


def artefact_rows(s: dict) -> list[tuple]:
    """One row per artefact, with its size and the figures a user looks for."""
    rows = [
        ("1 corpus", f"{s['corpus_mb']} MB", f"{s['train_documents']:,} training + {s['heldout_documents']:,} "
         f"held-out documents", s["corpus"]),
        ("2 cleaning", size(s["cleaning"]["train"]), cleaning_cell(s["cleaning"]), s["cleaning"]["report_md"]),
        ("3 vocabulary", size(s["vocab"]), f"{sum(1 for _ in open(s['vocab'])):,} WordPieces", s["vocab"]),
        ("4 tokens", size(s["tokens"]), f"{s['pieces_per_word']} pieces/word, [UNK] {100 * s['unk_rate']:.3f}%",
         s["tokens"]),
    ]
    for name, n in s["examples"].items():
        rows.append((f"6 {name} TFRecords", size(os.path.join(s["data"], name)), f"{n:,} examples",
                     os.path.join(s["data"], name)))
    figures = {"bert": lambda r: f"MLM acc {r['mlm_accuracy']:.3f} (most frequent token "
                                 f"{r['baseline']['most_frequent_accuracy']:.3f})"
                                 + (f", NSP acc {r['nsp_accuracy']:.3f}" if "nsp_accuracy" in r else ""),
               "gpt": lambda r: f"perplexity {r['perplexity']:.1f} (unigram {r['baseline']['unigram_perplexity']:.1f})",
               "bilm": lambda r: f"perplexity {r['perplexity']:.1f} (unigram {r['baseline']['unigram_perplexity']:.1f})"}
    for name, run in s["runs"].items():
        kind = "bert" if name.startswith("minilm") else name
        cpu = f", {run['train_cpu_minutes']} CPU-min" if run.get("train_cpu_minutes") is not None else ""
        rows.append((f"7-8 {name}", size(run["model_dir"]), f"{figures[kind](run)} (held-out); {run['steps']} "
                     f"steps{_of_batch(run)}, {run['train_seconds']:.0f} s{cpu} this run", run["model_dir"]))
    for name, export in s["exports"].items():
        version = max(int(v) for v in os.listdir(export["base"]) if v.isdigit())
        rows.append((f"9 {name} export", size(export["export_dir"]), f"TF-Hub module + TF Serving v{version}",
                     export["export_dir"]))
    e = s["embeddings"]
    rows.append(("10 embeddings", size(e["output_dir"]), f"{e['examples']:,} held-out sentences x "
                 f"{e['dims']['last']} (minilm, mean of `last`), {len(e['files'])} shard(s)", e["output_dir"]))
    a = s["serving"]
    rows.append(("11 serving", "", ", ".join(f"{k[:-3]} {v} ms" for k, v in a.items() if k.endswith("_ms")),
                 os.path.join(s["export"], "models.config")))
    for name, p in s["polysemy"].items():
        rows.append((f"12 {name} polysemy", "", f"sense acc {p['accuracy']:.3f} ({p['best_layer']}) vs static "
                     f"{p['static_accuracy']:.3f}, MFS {p['mfs_baseline']:.3f}", p["png"]))
    for name, path in s["training_curves"].items():
        rows.append((f"13 {name} curves", size(path), "", path))
    return rows


ARTEFACT_HEADER = ("step", "what", "figures", "where")


def print_table(header: tuple, rows: list[tuple]) -> None:
    """Rows as an aligned table under `header`."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  " + "  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())


def write(demo_dir: str, out: dict, wall_seconds: float) -> dict:
    """The steps' results -> the summary (also `demo_dir/summary.json`)."""
    import json

    stats = out["stats"]
    report = {
        "corpus": out["corpus"], "corpus_mb": out["corpus_mb"],
        "train_documents": out["split"]["train_documents"], "heldout_documents": out["split"]["heldout_documents"],
        "cleaning": out["cleaning"],
        "vocab": out["vocab"], "tokens": out["tokens"], **stats,
        "unk_rate": round(stats["unk"] / max(stats["pieces"], 1), 6),
        "pieces_per_word": round(stats["pieces"] / max(stats["words"], 1), 4),
        "data": out["data"], "examples": out["examples"],
        "runs": {**out["scratch"], "minilm_head": out["continued"]["before"], "minilm": out["continued"]["after"]},
        "learning": learning(out["scratch"]),
        "adaptation": adaptation(out["continued"], out["polysemy"]),
        "export": out["export"],
        "exports": {name: {"export_dir": e["export_dir"], "base": e["base"]} for name, e in out["exports"].items()},
        "embeddings": out["embeddings"], "serving": out["serving"],
        "polysemy": out["polysemy"], "polysemy_dir": out["polysemy_dir"],
        "training_curves": out["training_curves"], "step_seconds": out.get("step_seconds", {}),
        "wall_seconds": wall_seconds, "machine": machine(), "profile": out.get("profile", "default"),
    }
    with open(os.path.join(demo_dir, "summary.json"), "w") as f:
        json.dump(report, f, indent=2)
    return report
