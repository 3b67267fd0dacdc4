"""One training run of the learning-parity benchmark (`benchmarks.training.learning_parity`), in a process of its own.

    python -m benchmarks.lib.parity_runs {ours,keras_hub} --kind {gpt,bert} --train_data P --eval_data P \\
        --steps N --points 3 --output run.json [--preset gpt_tiny] [--set key=value ...] \\
        [--head tied|untied] [--model_dir DIR]

Every run trains on the same TFRecords, read by the same reader in the same order (`readers.make_dataset`,
one seed), with the same batch, steps and learning-rate schedule (linear warm-up, linear decay to 0), and
writes the same JSON: held-out metrics over the first `--eval_batches` batches of `--eval_data` (read in
order) before training and after every `steps / points` steps, with the CPU-seconds spent in training so far
(`cpu_seconds`: every thread, tracing and compiling included, evaluations and start-up left out, as Model
Garden's peer counts them).

- `ours`: `models.training.trainer.Trainer`, the product's loop, on the family's task with the preset, the
  preset's recipe and the `--set` overrides, resolved as `models.training.train` resolves them.
- `keras_hub`: an independent trainer on the same recipe: keras-hub's own models
  (`benchmarks/peers/keras_hub_models.py`; `--head tied`: GPT-2's `GPT2CausalLM` and BERT's tied masked-LM
  head; `--head untied`: an output matrix of its own, the tiny presets' output). Keras' own AdamW (no decay
  on biases and layer norms, global-norm clipping) and `fit`, with the schedule written here; the held-out
  metrics are computed here in NumPy from the model's logits, not by Keras' metrics. `--model_dir` writes
  the trained peer as this project's model_dir (checked to compute the peer's outputs), for `serving.export`.

Model Garden's BERT runs in an environment of its own (`benchmarks/peers/`) and writes the same JSON.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import json
import os
import time

import keras
import numpy as np

from commands.tf_startup import quiet_command
from benchmarks.peers import keras_hub_models


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lib.parity_runs")
    parser.add_argument("trainer", choices=["ours", "keras_hub"])
    parser.add_argument("--kind", choices=["gpt", "bert"], required=True)
    parser.add_argument("--preset", default=None, help="default: <kind>_tiny")
    parser.add_argument("--train_data", required=True)
    parser.add_argument("--eval_data", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--points", type=int, default=3, help="evaluations after training starts, evenly spaced")
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--output", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--head", choices=["tied", "untied"], default="tied",
                        help="keras_hub: the output layer (benchmarks/peers/keras_hub_models.py)")
    parser.add_argument("--model_dir", help="keras_hub: also write the trained peer as this project's model_dir")
    args = parser.parse_args(argv)
    args.preset = args.preset or f"{args.kind}_tiny"
    if args.steps % args.points:
        parser.error(f"--steps {args.steps} is not a multiple of --points {args.points}")
    return args


def resolve_configs(kind: str, preset: str, vocab_size: int, overrides: list[str], steps: int):
    """(model config, TrainConfig) as `models.training.train` makes them: preset, recipe, then `--set`."""
    from models import config as config_lib
    from models import families

    recipe = families.module(kind).RECIPES.get(preset, {})
    base = families.preset_config(kind, preset, vocab_size=vocab_size)
    model_config, train_config = config_lib.apply_overrides(base, config_lib.TrainConfig(**recipe), overrides)
    if train_config.decay != "linear" or train_config.end_learning_rate_ratio:
        raise ValueError("the parity runs compare a linear decay to 0 (--set decay=linear)")
    return model_config, dataclasses.replace(train_config, train_steps=steps)


def linear_rate(step, peak: float, warmup: int, total: int):
    """The schedule, written apart from `models.training.optimization` (tested equal): linear from 0 to
    `peak` over `warmup` steps (a warm-up of 0 starts at the peak), then linear to 0 at `total`."""
    import tensorflow as tf

    step = tf.cast(step, tf.float32)
    up = peak * step / max(warmup, 1)
    down = peak * tf.maximum(0.0, 1.0 - (step - warmup) / max(total - warmup, 1))
    return tf.where(step < warmup, up, down)


def numpy_metrics(logits, labels, weights) -> tuple[float, float, float]:
    """(loss sum, correct sum, weight sum) of softmax cross-entropy: logits [..., V], labels [...]."""
    logits = np.asarray(logits, np.float64)
    labels, weights = np.asarray(labels).astype(np.int64), np.asarray(weights, np.float64)
    shifted = logits - logits.max(-1, keepdims=True)  # [..., V]
    log_z = np.log(np.exp(shifted).sum(-1))  # [...]
    label_logit = np.take_along_axis(shifted, labels[..., None], -1)[..., 0]  # [...]
    correct = (label_logit >= 0).astype(np.float64)  # the label's logit is the largest (ties count)
    return float(((log_z - label_logit) * weights).sum()), float((correct * weights).sum()), float(weights.sum())


class _TrainCpu:
    """CPU-seconds (every thread) spent between `start` and `stop` calls, summed: the training steps' share
    of a process that also evaluates (Model Garden's peer counts the same way)."""

    def __init__(self):
        self.total, self._started = 0.0, None

    def start(self):
        self._started = time.process_time()

    def stop(self) -> float:
        if self._started is not None:
            self.total += time.process_time() - self._started
            self._started = None
        return round(self.total, 1)


# --- ours ------------------------------------------------------------------------------------------------

def run_ours(args, metadata) -> tuple[list[dict], dict]:
    import tensorflow as tf

    from models import families
    from models.training import train as train_cli
    from models.training.trainer import HISTORY, Trainer

    model_config, train_config = resolve_configs(args.kind, args.preset, metadata.vocab.size, args.overrides,
                                                 args.steps)
    every = args.steps // args.points
    train_config = dataclasses.replace(train_config, eval_every=every, eval_steps=args.eval_batches,
                                       checkpoint_every=args.steps, log_every=every,
                                       steps_per_execution=min(every, 25))
    task = families.make_task(args.kind, model_config, families.data_section(metadata, args.train_data))
    strategy = tf.distribute.get_strategy()
    model_dir = os.path.splitext(args.output)[0] + "_model"
    trainer = Trainer(task, train_config, strategy, model_dir)
    data = train_cli.distributed_dataset(strategy, args.train_data, task, train_config, training=True)
    heldout = train_cli.distributed_dataset(strategy, args.eval_data, task, train_config, training=False)
    rows = [{"step": 0, **trainer.evaluate(heldout, args.eval_batches), "cpu_seconds": 0.0}]
    trainer.train(data, heldout)
    with open(os.path.join(model_dir, HISTORY)) as f:
        history = [json.loads(line) for line in f]
    train_cpu = {r["step"]: r["train_cpu_seconds"] for r in history if r["split"] == "train"}
    rows += [{**{k: v for k, v in e.items() if k != "split"}, "cpu_seconds": train_cpu[e["step"]]}
             for e in history if e["split"] == "eval"]
    return rows, {"model": dataclasses.asdict(model_config), "train": dataclasses.asdict(train_config)}


# --- keras-hub's models, trained by Keras' fit ------------------------------------------------------------

def to_keras_hub(kind: str):
    """Our reader's `(x, y, w)` -> keras-hub's input names (and flat NSP labels)."""
    import tensorflow as tf

    def convert(x, y, w):
        ids = tf.cast(x["input_word_ids"], tf.int32)  # [B, T]
        if kind == "gpt":
            return {"token_ids": ids, "padding_mask": tf.ones_like(ids)}, tf.cast(y, tf.int32), w
        x = {"token_ids": ids, "segment_ids": tf.cast(x["input_type_ids"], tf.int32),
             "padding_mask": tf.cast(x["input_mask"], tf.int32),
             "mask_positions": tf.cast(x["masked_lm_positions"], tf.int32)}
        return (x, {"mlm": tf.cast(y["mlm"], tf.int32), "nsp": tf.cast(tf.reshape(y["nsp"], [-1]), tf.int32)},
                {"mlm": w["mlm"], "nsp": tf.reshape(w["nsp"], [-1])})
    return convert


def heldout_metrics(kind: str, model, batches) -> dict:
    """The held-out metrics `ours` reports (same keys), computed in NumPy from the model's logits."""
    totals = {}
    for x, y, w in batches:
        out = model(x, training=False)
        pairs = {"lm": (out, y, w)} if kind == "gpt" else {
            "mlm": (out["mlm"], y["mlm"], w["mlm"]), "nsp": (out["nsp"], y["nsp"], w["nsp"])}
        for name, (logits, labels, weights) in pairs.items():
            totals[name] = np.add(totals.get(name, 0.0), numpy_metrics(logits, labels, weights))
    if kind == "gpt":
        loss, correct, n = totals["lm"]
        return {"loss": loss / n, "perplexity": float(np.exp(loss / n)), "accuracy": correct / n}
    (ml, mc, mn), (nl, nc, nn) = totals["mlm"], totals["nsp"]
    return {"mlm_accuracy": mc / mn, "mlm_loss": ml / mn, "nsp_accuracy": nc / nn, "nsp_loss": nl / nn,
            "loss": ml / mn + nl / nn}


def run_keras_hub(args, metadata) -> tuple[list[dict], dict]:
    from models import families
    from preprocessing import readers

    model_config, tc = resolve_configs(args.kind, args.preset, metadata.vocab.size, args.overrides, args.steps)
    keras.utils.set_random_seed(tc.seed)
    model = keras_hub_models.peer_model(args.kind, model_config, args.head)
    rate = _Schedule(tc.learning_rate, tc.warmup_steps, tc.train_steps)
    optimizer = keras.optimizers.AdamW(rate, weight_decay=tc.weight_decay, beta_1=tc.beta_1, beta_2=tc.beta_2,
                                       epsilon=tc.epsilon, global_clipnorm=tc.clip_norm or None)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizer, loss=cross_entropy if args.kind == "gpt" else {"mlm": cross_entropy,
                  "nsp": cross_entropy}, jit_compile=tc.jit_compile, steps_per_execution=min(args.steps // args.points, 25))
    expected = families.make_task(args.kind, model_config,
                                  families.data_section(metadata, args.train_data)).data_expectations()
    convert = to_keras_hub(args.kind)
    train = readers.make_dataset(args.train_data, tc.batch_size, seed=tc.seed, shuffle_buffer=tc.shuffle_buffer,
                                 **expected).map(convert)
    heldout = list(readers.make_dataset(args.eval_data, tc.batch_size, shuffle=False, repeat=True, **expected)
                   .map(convert).take(args.eval_batches))
    rows = [{"step": 0, **heldout_metrics(args.kind, model, heldout), "cpu_seconds": 0.0}]
    every, cpu = args.steps // args.points, _TrainCpu()

    def evaluate(epoch):
        cpu_seconds = cpu.stop()
        rows.append({"step": (epoch + 1) * every, **heldout_metrics(args.kind, model, heldout),
                     "cpu_seconds": cpu_seconds})
        cpu.start()

    cpu.start()
    model.fit(train, epochs=args.points, steps_per_epoch=every, verbose=0, callbacks=[_EvalEachEpoch(evaluate)])
    info = {"model": dataclasses.asdict(model_config), "train": dataclasses.asdict(tc), "head": args.head,
            "keras_hub_model": type(model).__name__}
    if args.model_dir:
        data = families.data_section(metadata, args.train_data)
        vocab = os.path.join(os.path.dirname(args.train_data), families.VOCAB_FILE)
        info["model_dir_difference"] = keras_hub_models.write_model_dir(
            args.kind, model, keras_hub_models.our_config(args.kind, model_config, args.head), data, vocab,
            args.model_dir, heldout[0][0])
    return rows, info


class _Schedule(keras.optimizers.schedules.LearningRateSchedule):
    """`linear_rate` as a Keras schedule (the keras-hub runs' optimizer)."""

    def __init__(self, peak, warmup, total):
        self.peak, self.warmup, self.total = peak, warmup, total

    def __call__(self, step):
        return linear_rate(step, self.peak, self.warmup, self.total)


class _EvalEachEpoch(keras.callbacks.Callback):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def on_epoch_end(self, epoch, logs=None):
        self.fn(epoch)


@quiet_command
def main(argv=None) -> None:
    from preprocessing import readers

    args = parse_args(argv)
    metadata, _ = readers.read_metadata(args.train_data)
    started = time.time()
    rows, config = (run_ours if args.trainer == "ours" else run_keras_hub)(args, metadata)
    tokens = config["train"]["batch_size"] * metadata.max_seq_length
    for row in rows:
        row["tokens"] = row["step"] * tokens
    result = {"trainer": args.trainer, "kind": args.kind, "preset": args.preset, "overrides": args.overrides,
              "config": config, "evals": rows, "wall_seconds": round(time.time() - started, 1)}
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result["evals"]))


if __name__ == "__main__":
    main()
