"""BERT pretraining throughput (tokens/s, MFU) of the project's training path and of a keras-hub reference.

    .venv/bin/python -m benchmarks.training.training [--sizes tiny,mini,base] [--batch_size N] [--steps N] \\
        [--steps_per_execution N] [--seq_length 128] [--repeats 2] [--mixed_precision float32] [--xla on,off] \\
        [--peak_tflops T] [--no_history]
    .venv/bin/python -m benchmarks.training.training --precision [--models bert,gpt,bilm] [--size tiny] [--steps 300] \\
        [--log_every 25] [--precisions float32,mixed_bfloat16]

Per size (`models.bert.PRESETS`), four runs in one process, with XLA on and off for each engine:
  ours       `models.training.trainer.Trainer(BertTask(...), TrainConfig(...))` trained by `Trainer.train` on
             `models.training.train.distributed_dataset` (the TFRecord reader) over TFRecords that
             `tests.fixtures.training.write_dataset` writes (vocabulary 30522, `--seq_length`, 20 predictions);
  reference  `keras_hub.models.BertBackbone` + `keras_hub.layers.MaskedLMHead` (tied to the token embedding,
             GELU) + a 2-way next-sentence `Dense` on the pooled output, compiled with AdamW (same
             hyper-parameters, global-norm clipping) and a weighted masked-LM accuracy, trained by Keras `fit`
             on an in-memory `tf.data` dataset of the same examples.
Same batch and `steps_per_execution` for both. `--repeats` times, the four runs take turns (ours and the
reference alternating who goes first) and each trains `steps_per_execution + steps` steps, timed from the end
of its first execution to the end of its last (so tracing, XLA compilation and iterator start-up are excluded;
the loop around the executions is included); the best repeat counts. The first execution of the first repeat
(tracing + compiling + one execution) is reported too.
Checkpoint writes are switched off (`Trainer.save`) since they are not per-step work.
With `--precision`, instead: per model family (`--models`, their tiny presets by default), the Trainer in
each of `float32` / `mixed_bfloat16` x XLA on / off (`--precisions`), each from the same seed for `--steps`
steps on `write_dataset` data (vocabulary 8,000); tokens/s and tokens per CPU-second over all executions after
the first, and the loss curve from `history.jsonl` every `--log_every` steps, compared with the float32,
XLA-off curve (largest |difference| over the logged points, and of the mean of the last three). The CPU's
bfloat16 flags (`models.training.hardware`) are printed with it.

Tokens/s = examples/s x seq_length (wall clock). Tokens per CPU-second (`time.process_time()`, all threads)
is printed beside it: on a shared machine it moves much less than wall time when other jobs take cores, so
its ratio is the steadier comparison. MFU = examples/s x `BertTask.flops_per_example()` (the same formula for
both, the architecture being the same) / `--peak_tflops` if given (e.g. 989 for an H200's dense bfloat16),
else the machine's float32 matmul peak, measured in this run (a
square matmul, XLA-compiled or not, best of a few sizes). Prints a table and a final line holding a JSON object;
then, unless --no_history, per size and XLA setting our tokens per CPU-second and its ratio to the reference's
are appended to `benchmarks/results/training.jsonl`, each compared with the last figure recorded on this CPU
model (`benchmarks.lib.history`; timed executions only, so there is no fixed cost in the figures).
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import dataclasses
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import tensorflow as tf  # noqa: E402

from commands.tf_startup import quiet_command  # noqa: E402
from benchmarks.lib import history  # noqa: E402
from models import families  # noqa: E402
from models.training import distribute, hardware  # noqa: E402
from models.bert import PRESETS, BertConfig, BertTask  # noqa: E402
from models.config import TrainConfig  # noqa: E402
from models.training.train import distributed_dataset  # noqa: E402
from models.training.trainer import Trainer  # noqa: E402
from preprocessing import readers  # noqa: E402
from tests.fixtures.training import write_dataset  # noqa: E402

VOCAB, PREDICTIONS, EXAMPLES = 30522, 20, 1024
# size -> (batch, timed steps, steps_per_execution) when not given on the command line
DEFAULTS = {"tiny": (32, 10, 5), "mini": (16, 5, 5), "small": (16, 4, 4), "medium": (8, 2, 2),
            "base": (4, 1, 1), "large": (2, 1, 1)}


def matmul_peak_gflops(sizes=(1024, 2048, 4096), seconds: float = 0.5) -> float:
    """Best float32 GFLOP/s of a square [n, n] x [n, n] matmul, XLA-compiled or not (oneDNN is faster on large
    ones), over `sizes`, each timed 3 x ~`seconds`."""
    best = 0.0
    for jit in (True, False):
        matmul = tf.function(tf.matmul, jit_compile=jit)
        for n in sizes:
            a, b = tf.random.normal([n, n]), tf.random.normal([n, n])
            matmul(a, b).numpy()
            start = time.perf_counter()
            matmul(a, b).numpy()
            iters = max(1, int(seconds / (time.perf_counter() - start)))
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(iters):
                    c = matmul(a, b)
                c.numpy()
                best = max(best, 2.0 * n ** 3 * iters / (time.perf_counter() - start) / 1e9)
    return best


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _timed(train, stamps: list, examples: int) -> tuple[float, float, float]:
    """Runs `train`, which appends `_clocks()` to `stamps` after each execution -> (examples per second and
    per CPU-second after the first execution, seconds to the end of the first execution: tracing,
    compiling, iterator start-up)."""
    stamps.clear()
    start = time.perf_counter()
    train()
    (wall0, cpu0), (wall1, cpu1) = stamps[0], stamps[-1]
    return examples / (wall1 - wall0), examples / (cpu1 - cpu0), wall0 - start


class Ours:
    """The project's Trainer on the TFRecord reader; `run(steps)` -> examples/s."""

    def __init__(self, task, pattern, batch, spe, xla, model_dir, policy="float32"):
        config = TrainConfig(batch_size=batch, train_steps=spe, steps_per_execution=spe, jit_compile=xla,
                             log_every=10 ** 9, checkpoint_every=10 ** 9, warmup_steps=0, mixed_precision=policy)
        strategy = distribute.make_strategy("default")
        self.trainer = Trainer(task, config, strategy, model_dir)
        self.trainer.save = lambda: ""  # not per-step work (1.3 GB per save at base size)
        self.dataset = distributed_dataset(strategy, pattern, task, config, training=True)
        self.stamps, train_fn = [], self.trainer._make_train_fn()

        def timed(iterator, steps):  # the Trainer's own compiled function, with a clock after each call
            totals = train_fn(iterator, steps)
            self.stamps.append(_clocks())
            return totals
        self.trainer._train_fn = timed
        self.batch, self.spe = batch, spe

    def run(self, steps: int) -> tuple[float, float, float]:
        trainer = self.trainer
        trainer.config = dataclasses.replace(trainer.config, train_steps=int(trainer.step.numpy()) + self.spe + steps)
        return _timed(lambda: trainer.train(self.dataset), self.stamps, steps * self.batch)


class _Stamps(keras.callbacks.Callback):
    def __init__(self, stamps):
        super().__init__()
        self.stamps = stamps

    def on_train_batch_end(self, batch, logs=None):  # once per execution of `steps_per_execution` steps
        self.stamps.append(_clocks())


def reference_model(config: BertConfig, spe: int, xla: bool) -> keras.Model:
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers, num_heads=config.num_heads,
        hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
        max_sequence_length=config.max_position_embeddings)
    inputs = {**backbone.input, "mask_positions": keras.Input((PREDICTIONS,), dtype="int32", name="mask_positions")}
    encoded = backbone({k: inputs[k] for k in backbone.input})
    mlm = keras_hub.layers.MaskedLMHead(token_embedding=backbone.token_embedding, intermediate_activation="gelu",
                                        kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02),
                                        name="mlm")(encoded["sequence_output"], mask_positions=inputs["mask_positions"])
    nsp = keras.layers.Dense(2, name="nsp")(encoded["pooled_output"])
    model = keras.Model(inputs, {"mlm": mlm, "nsp": nsp})
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
                  loss={"mlm": loss, "nsp": loss},
                  weighted_metrics={"mlm": [keras.metrics.SparseCategoricalAccuracy()]},
                  steps_per_execution=spe, jit_compile=xla)
    return model


def reference_dataset(pattern: str, batch: int) -> tf.data.Dataset:
    """The same TFRecords, read once into memory, in keras-hub's input names, repeated and batched."""
    x, y, w = next(iter(readers.make_dataset(pattern, EXAMPLES, shuffle=False, repeat=False)))
    to32 = lambda t: tf.cast(t, tf.int32)  # noqa: E731
    x = {"token_ids": to32(x["input_word_ids"]), "segment_ids": to32(x["input_type_ids"]),
         "padding_mask": to32(x["input_mask"]), "mask_positions": to32(x["masked_lm_positions"])}
    y = {"mlm": to32(y["mlm"]), "nsp": to32(tf.reshape(y["nsp"], [-1]))}
    w = {"mlm": w["mlm"], "nsp": tf.reshape(w["nsp"], [-1])}
    return tf.data.Dataset.from_tensor_slices((x, y, w)).repeat().batch(batch, drop_remainder=True).prefetch(2)


class Reference:
    """The keras-hub model trained by `fit`; `run(steps)` -> examples/s."""

    def __init__(self, config, dataset, batch, spe, xla, policy="float32"):
        keras.config.set_dtype_policy(policy)  # fit wraps the optimizer in a LossScaleOptimizer for float16
        self.model = reference_model(config, spe, xla)
        self.dataset, self.batch, self.spe, self.stamps = dataset, batch, spe, []

    def run(self, steps: int) -> tuple[float, float, float]:
        return _timed(lambda: self.model.fit(self.dataset, epochs=1, steps_per_epoch=self.spe + steps, verbose=0,
                                             callbacks=[_Stamps(self.stamps)]), self.stamps, steps * self.batch)


def bench_size(size, args, pattern, workdir) -> dict:
    batch, steps, spe = DEFAULTS[size]
    batch, steps = args.batch_size or batch, args.steps or steps
    spe = args.steps_per_execution or min(spe, steps)
    steps = -(-steps // spe) * spe  # whole executions
    config = BertConfig(**PRESETS[f"bert_{size}"], vocab_size=VOCAB)
    task = BertTask(config, args.seq_length, PREDICTIONS)
    ref_data = reference_dataset(pattern, batch)
    engines = {}
    for xla in args.xla:
        engines["ours", xla] = Ours(task, pattern, batch, spe, xla, os.path.join(workdir, f"{size}_{xla}"),
                                    args.mixed_precision)
        engines["reference", xla] = Reference(config, ref_data, batch, spe, xla, args.mixed_precision)
    keras.config.set_dtype_policy("float32")
    rates, warmup = {key: [] for key in engines}, {}
    for repeat in range(args.repeats):  # the first execution of the first repeat traces and compiles
        for xla in args.xla:
            for name in ("ours", "reference") if repeat % 2 == 0 else ("reference", "ours"):
                *rate, first = engines[name, xla].run(steps)
                rates[name, xla].append(rate)
                warmup.setdefault((name, xla), first)
    return {"batch": batch, "steps": steps, "steps_per_execution": spe, "flops_per_example": task.flops_per_example(),
            "rates": rates, "warmup": warmup}


def precision_run(kind, pattern, policy, xla, args, model_dir) -> dict:
    """One Trainer run of `args.steps` steps -> tokens/s, tokens per CPU-second (after the first execution)
    and the logged losses {step: loss}."""
    metadata, _ = readers.read_metadata(pattern)
    data = families.data_section(metadata, pattern)
    task = families.make_task(kind, families.preset_config(kind, f"{kind}_{args.size}",
                                                           vocab_size=data["vocab_size"]), data)
    config = TrainConfig(batch_size=args.batch_size or 32, train_steps=args.steps, jit_compile=xla,
                         steps_per_execution=args.log_every, log_every=args.log_every, checkpoint_every=10 ** 9,
                         learning_rate=1e-3, warmup_steps=args.steps // 10, mixed_precision=policy)
    strategy = distribute.make_strategy("default")
    trainer = Trainer(task, config, strategy, model_dir)
    trainer.save = lambda: ""
    stamps, train_fn = [], trainer._make_train_fn()

    def timed(iterator, steps):
        totals = train_fn(iterator, steps)
        stamps.append(_clocks())
        return totals
    trainer._train_fn = timed
    dataset = distributed_dataset(strategy, pattern, task, config, training=True)
    try:
        examples_per_s, examples_per_cpu_s, first = _timed(lambda: trainer.train(dataset), stamps,
                                                           (args.steps - args.log_every) * config.batch_size)
    finally:
        keras.config.set_dtype_policy("float32")
        keras.backend.clear_session()
    with open(os.path.join(model_dir, "history.jsonl")) as f:
        losses = {r["step"]: r["loss"] for r in map(json.loads, f) if r["split"] == "train"}
    tokens = task.tokens_per_example()
    return {"tokens_per_s": examples_per_s * tokens, "tokens_per_cpu_s": examples_per_cpu_s * tokens,
            "first_execution_s": first, "losses": losses}


def precision_main(args) -> None:
    flags = hardware.cpu_flags()
    print(f"CPU bfloat16 flags: {sorted(flags) or 'none'} -> class {hardware.cpu_class(flags)}; "
          f"{os.cpu_count()} CPUs; {args.steps} steps of batch {args.batch_size or 32}, seq {args.seq_length}",
          flush=True)
    combos = [(p, x) for p in args.precisions.split(",") for x in (True, False)]
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        for kind in args.models.split(","):
            pattern = write_dataset(os.path.join(workdir, f"data_{kind}"), kind, examples=2048,
                                    seq=args.seq_length, preds=PREDICTIONS, vocab_size=8000, shards=4)
            for policy, xla in combos:
                run = precision_run(kind, pattern, policy, xla, args, os.path.join(workdir, f"{kind}_{policy}_{xla}"))
                results[kind, policy, xla] = run
                print(f"{kind} {policy} XLA {'on' if xla else 'off'}: {run['tokens_per_s']:,.0f} tok/s, "
                      f"{run['tokens_per_cpu_s']:,.0f} tok/CPU-s, losses "
                      f"{[round(v, 3) for v in run['losses'].values()]}", flush=True)
    print(f"\n{'model':<5} {'policy':<15} {'XLA':<3} {'tok/s':>9} {'tok/CPU-s':>9} {'vs f32':>6} "
          f"{'1st exec s':>10} {'final loss':>10} {'max|dL|':>7} {'|dL| end':>8}")
    summary = {"cpu_class": hardware.cpu_class(flags), "steps": args.steps}
    for kind, policy, xla in results:
        run, base = results[kind, policy, xla], results[kind, "float32", False]
        steps = sorted(run["losses"])
        diffs = [abs(run["losses"][s] - base["losses"][s]) for s in steps]
        tail = lambda r: sum(r["losses"][s] for s in steps[-3:]) / len(steps[-3:])  # noqa: E731
        speed = run["tokens_per_cpu_s"] / base["tokens_per_cpu_s"]
        print(f"{kind:<5} {policy:<15} {'on' if xla else 'off':<3} {run['tokens_per_s']:>9,.0f} "
              f"{run['tokens_per_cpu_s']:>9,.0f} {speed:>6.2f} {run['first_execution_s']:>10.1f} "
              f"{run['losses'][steps[-1]]:>10.4f} {max(diffs):>7.4f} {abs(tail(run) - tail(base)):>8.4f}")
        tag = f"{kind}_{policy}_{'xla' if xla else 'noxla'}"
        summary.update({f"{tag}_tokens_per_s": round(run["tokens_per_s"]),
                        f"{tag}_tokens_per_cpu_s": round(run["tokens_per_cpu_s"]), f"{tag}_vs_f32": round(speed, 3),
                        f"{tag}_max_loss_diff": round(max(diffs), 4)})
    print(json.dumps(summary))


@quiet_command
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="tiny,mini,base", help=f"comma-separated, of {', '.join(DEFAULTS)}")
    parser.add_argument("--batch_size", type=int, default=None, help="default: per size, " + str(
        {k: v[0] for k, v in DEFAULTS.items()}))
    parser.add_argument("--steps", type=int, default=None, help="timed steps per repeat (default: per size)")
    parser.add_argument("--steps_per_execution", type=int, default=None, help="default: per size, at most --steps")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--precision", action="store_true", help="compare precisions x XLA instead (see above)")
    parser.add_argument("--models", default="bert,gpt,bilm", help="--precision: model families")
    parser.add_argument("--size", default="tiny", help="--precision: preset size")
    parser.add_argument("--precisions", default="float32,mixed_bfloat16", help="--precision: dtype policies")
    parser.add_argument("--log_every", type=int, default=25, help="--precision: steps per logged loss")
    parser.add_argument("--mixed_precision", default="float32", help="dtype policy of both engines")
    parser.add_argument("--xla", default="on,off", help="XLA settings to run: on, off or on,off")
    parser.add_argument("--no_history", action="store_true", help="do not append to benchmarks/results/")
    parser.add_argument("--peak_tflops", type=float, default=None,
                        help="MFU against this peak (e.g. 989 for an H200 in bfloat16) instead of the measured "
                             "float32 matmul peak")
    args = parser.parse_args(argv)
    args.xla = [x.strip() == "on" for x in args.xla.split(",")]
    if args.precision:
        args.steps = args.steps or 300
        return precision_main(args)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]

    peak = args.peak_tflops * 1e3 if args.peak_tflops else matmul_peak_gflops()
    print(f"{args.mixed_precision}; peak ({'given' if args.peak_tflops else 'measured float32 matmul, best of XLA/oneDNN'}): "
          f"{peak:,.1f} GFLOP/s; "
          f"{os.cpu_count()} CPUs; seq {args.seq_length}, {PREDICTIONS} predictions, vocab {VOCAB}", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as workdir:
        pattern = write_dataset(os.path.join(workdir, "data"), "bert", examples=EXAMPLES, seq=args.seq_length,
                                preds=PREDICTIONS, vocab_size=VOCAB, shards=4)
        for size in sizes:
            results[size] = bench_size(size, args, pattern, workdir)
            keras.backend.clear_session()
            rates = {f"{n}_xla_{x}": [round(r[0], 1) for r in v] for (n, x), v in results[size]["rates"].items()}
            print(f"{size}: examples/s per repeat {json.dumps(rates)}", flush=True)
    peak = peak if args.peak_tflops else max(peak, matmul_peak_gflops())  # once more at the end: the machine is shared

    print(f"\n{'size':<5} {'XLA':<3} {'batch':>5} {'steps':>5} {'ours tok/s':>10} {'ref tok/s':>9} {'ours MFU':>8} "
          f"{'ref MFU':>7} {'ours/ref':>8} {'tok/CPU-s ours/ref':>18} {'ratio':>5} {'1st exec s':>10}")
    summary = {"peak_gflops": round(peak, 1), "seq_length": args.seq_length, "mixed_precision": args.mixed_precision}
    figures = []  # (workload, ours tokens per CPU-second, ours / reference per CPU-second, ours timed CPU-s)
    for size, r in results.items():
        for xla in args.xla:
            (ours, _), (ref, _) = (max(r["rates"][name, xla]) for name in ("ours", "reference"))
            ours_cpu, ref_cpu = (max(c for _, c in r["rates"][name, xla]) for name in ("ours", "reference"))
            mfu = lambda rate: 100.0 * rate * r["flops_per_example"] / (peak * 1e9)  # noqa: E731
            tag, t = f"{size}_{'xla' if xla else 'noxla'}", args.seq_length
            print(f"{size:<5} {'on' if xla else 'off':<3} {r['batch']:>5} {r['steps']:>5} {ours * t:>10,.0f} "
                  f"{ref * t:>9,.0f} {mfu(ours):>7.1f}% {mfu(ref):>6.1f}% {ours / ref:>8.2f} "
                  f"{ours_cpu * t:>9,.0f}/{ref_cpu * t:<8,.0f} {ours_cpu / ref_cpu:>5.2f} "
                  f"{r['warmup']['ours', xla]:>4.0f}/{r['warmup']['reference', xla]:<4.0f}")
            summary.update({f"{tag}_ours_tokens_per_s": round(ours * t), f"{tag}_ref_tokens_per_s": round(ref * t),
                            f"{tag}_ours_mfu": round(mfu(ours), 2), f"{tag}_ref_mfu": round(mfu(ref), 2),
                            f"{tag}_ratio": round(ours / ref, 3), f"{tag}_cpu_ratio": round(ours_cpu / ref_cpu, 3)})
            figures.append((f"{tag}, batch {r['batch']}, seq {t}, {args.mixed_precision}", ours_cpu * t,
                            ours_cpu / ref_cpu, r["steps"] * r["batch"] / ours_cpu))
    print(json.dumps(summary))
    if not args.no_history:
        history.record("training", [f for workload, per_cpu_s, ratio, cpu_s in figures for f in (
            history.Figure("ours_tokens_per_cpu_s", round(per_cpu_s), True, workload, round(cpu_s, 1), 0.0),
            history.Figure("cpu_ratio_vs_keras_hub", round(ratio, 3), True, workload, round(cpu_s, 1), 0.0))])


if __name__ == "__main__":
    main()
