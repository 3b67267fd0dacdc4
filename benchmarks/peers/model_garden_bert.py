"""The Model Garden peer of the learning-parity benchmark: TF Model Garden trains BERT (masked LM + next
sentence) on our TFRecords, and this script reports held-out losses at given steps as one JSON file.

    PYTHONPATH=$(.venv/bin/python -m benchmarks.peers.model_garden) \\
        .venv/bin/python benchmarks/peers/model_garden_bert.py --train_data 'train/*.tfrecord' \\
        --eval_data 'heldout/*.tfrecord' --vocab_size 8000 --num_layers 2 --hidden_size 128 --num_heads 2 \\
        --intermediate_size 512 --batch_size 32 --train_steps 300 --warmup_steps 30 --learning_rate 2e-3 \\
        --eval_at 0,100,200,300 --output mg.json

It is independent of the project: it imports TensorFlow, tf_keras and Model Garden only, and each piece is Model
Garden's own:
- model: `networks.BertEncoderV2` (post-LN, token + segment + position embeddings, embedding layer norm eps
  1e-12, truncated-normal 0.02 initialisation) in `models.BertPretrainerV2`, whose `MaskedLM` head is
  dense + activation + layer norm, tied to the token embedding plus a bias; the next-sentence head is a
  `layers.ClassificationHead` named `next_sentence` (dense + tanh on [CLS], then 2 logits), as
  `MaskedLMTask.build_model` makes it. Its dense + tanh is the pooler (BertPretrainerV2 does not use the
  encoder's `pooled_output`); its dropout defaults to 0 here, like our NSP head (Model Garden's config: 0.1).
- data: `pretrain_dataloader.BertPretrainDataLoader` through `MaskedLMTask.build_inputs`, reading the
  google-research feature names. Held-out data is read in order (`is_training=False`: sorted files, one record
  from each of up to 8 files in turn, as our reader evaluates), `drop_remainder`.
- loss and step: `MaskedLMTask.build_losses` (masked-LM cross-entropy weighted by `masked_lm_weights` and
  divided by their sum, plus the mean next-sentence cross-entropy) inside `MaskedLMTask.train_step`, run
  Orbit-style (`orbit.utils.create_tf_while_loop_fn`, a `tf.function` of several steps).
- optimizer: `OptimizerFactory` from an `OptimizationConfig` as `bert/pretraining` configures it: `adamw`
  (`AdamWeightDecay`, weight decay off for `LayerNorm`, `layer_norm`, `bias`, global-norm clipping),
  polynomial warm-up (power 1) then polynomial decay (power 1) to 0. The decay is offset by the warm-up
  (`decay_steps = train_steps - warmup_steps`), so the rate peaks at `--learning_rate` as ours does (the
  stock config decays over all `train_steps`, so its peak is `lr * (1 - warmup/steps)`). One difference
  remains: Model Garden's warm-up gives step 0 the rate `lr / warmup_steps`, ours gives it 0.

Held-out metrics are sums over the first `--eval_batches` batches (losses and accuracy weighted by
`masked_lm_weights` over all of them, not means of per-batch means). `mlm_context_spread` (mean over batches,
`context_spread`) shows a collapse to context-free outputs, which the loss alone does not. `cpu_seconds` is the process's CPU time
(all threads) spent in training steps up to that evaluation, tracing and compilation included.
"""

import argparse
import functools
import importlib
import importlib.metadata
import json
import logging
import os
import sys
import time
import types

import tensorflow as tf
import tf_keras

NO_DECAY = ["LayerNorm", "layer_norm", "bias"]  # Model Garden's BERT pretraining exclusions


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train_data", required=True, help="TFRecord pattern (google-research BERT features)")
    parser.add_argument("--eval_data", required=True, help="held-out TFRecord pattern")
    parser.add_argument("--output", required=True, help="JSON file to write")
    parser.add_argument("--vocab_size", type=int, required=True)
    parser.add_argument("--num_layers", type=int, default=2)
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--num_heads", type=int, default=2)
    parser.add_argument("--intermediate_size", type=int, default=512)
    parser.add_argument("--hidden_act", choices=["gelu_approximate", "gelu"], default="gelu_approximate")
    parser.add_argument("--dropout", type=float, default=0.1, help="embeddings, attention and residual dropout")
    parser.add_argument("--nsp_head_dropout", type=float, default=0.0)
    parser.add_argument("--max_position_embeddings", type=int, default=512)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--train_steps", type=int, default=300)
    parser.add_argument("--warmup_steps", type=int, default=30)
    parser.add_argument("--learning_rate", type=float, default=2e-3, help="peak")
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--beta_1", type=float, default=0.9)
    parser.add_argument("--beta_2", type=float, default=0.999)
    parser.add_argument("--epsilon", type=float, default=1e-6)
    parser.add_argument("--clip_norm", type=float, default=1.0, help="global norm; 0 = off")
    parser.add_argument("--shuffle_buffer", type=int, default=10_000, help="training records (Model Garden: 100)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval_at", default="0,100,200,300", help="steps, comma-separated; 0 = before training")
    parser.add_argument("--eval_batches", type=int, default=20)
    parser.add_argument("--jit_compile", type=int, choices=[0, 1], default=1, help="XLA for the training step")
    args = parser.parse_args(argv)
    args.eval_at = sorted({int(s) for s in args.eval_at.split(",") if s.strip()})
    if args.eval_at and not 0 <= args.eval_at[-1] <= args.train_steps:
        parser.error(f"--eval_at must lie in [0, --train_steps={args.train_steps}]")
    return args


def import_masked_lm():
    """`official.nlp.tasks.masked_lm` without the package's `__init__`, which imports every NLP task and with
    them scikit-learn, seqeval and sacrebleu."""
    import official.nlp

    name = "official.nlp.tasks"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(os.path.dirname(official.nlp.__file__), "tasks")]
        sys.modules[name] = package
    return importlib.import_module(f"{name}.masked_lm")


def data_config(args, pattern: str, training: bool):
    from official.nlp.data import pretrain_dataloader

    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
        raise SystemExit(f"{pattern}: no files")
    return pretrain_dataloader.BertPretrainDataConfig(
        input_path=files, global_batch_size=args.batch_size, is_training=training, seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq, use_next_sentence_label=True, drop_remainder=True,
        shuffle_buffer_size=args.shuffle_buffer, cycle_length=min(len(files), 8), block_length=1,
        deterministic=True, seed=args.seed)


def activation(name: str):
    if name == "gelu":  # Model Garden's "gelu" is the tanh approximation
        return functools.partial(tf_keras.activations.gelu, approximate=False)
    return "gelu"


def build_model(args) -> tf_keras.Model:
    from official.modeling import tf_utils
    from official.nlp.modeling import layers, models, networks

    init = tf_keras.initializers.TruncatedNormal(stddev=0.02)
    act = tf_utils.get_activation(activation(args.hidden_act))
    encoder = networks.BertEncoderV2(
        vocab_size=args.vocab_size, hidden_size=args.hidden_size, num_layers=args.num_layers,
        num_attention_heads=args.num_heads, max_sequence_length=args.max_position_embeddings, type_vocab_size=2,
        inner_dim=args.intermediate_size, inner_activation=act, output_dropout=args.dropout,
        attention_dropout=args.dropout, initializer=init, norm_first=False)
    nsp = layers.ClassificationHead(inner_dim=args.hidden_size, num_classes=2, activation="tanh",
                                    dropout_rate=args.nsp_head_dropout, initializer=init, name="next_sentence")
    return models.BertPretrainerV2(encoder_network=encoder, mlm_activation=act, mlm_initializer=init,
                                   classification_heads=[nsp])


def optimization_config(args):
    from official.modeling import optimization

    warmup = min(args.warmup_steps, args.train_steps)
    return optimization.OptimizationConfig({
        "optimizer": {"type": "adamw", "adamw": {
            "weight_decay_rate": args.weight_decay, "exclude_from_weight_decay": NO_DECAY, "beta_1": args.beta_1,
            "beta_2": args.beta_2, "epsilon": args.epsilon, "gradient_clip_norm": args.clip_norm}},
        "learning_rate": {"type": "polynomial", "polynomial": {
            "initial_learning_rate": args.learning_rate, "decay_steps": max(args.train_steps - warmup, 1),
            "end_learning_rate": 0.0, "power": 1.0, "offset": warmup}},
        "warmup": {"type": "polynomial", "polynomial": {"power": 1, "warmup_steps": warmup}},
    })


def make_train_loop(task, model, optimizer, metrics, jit_compile: bool):
    """A `tf.function(iterator, num_steps)` running `task.train_step` on that many batches."""
    import orbit

    step = tf.function(lambda inputs: task.train_step(inputs, model, optimizer, metrics), jit_compile=jit_compile)
    return tf.function(orbit.utils.create_tf_while_loop_fn(lambda iterator: step(next(iterator))))


def make_eval_step(model):
    @tf.function
    def eval_step(inputs):
        outputs = model(inputs, training=False)
        logits = tf.cast(outputs["mlm_logits"], tf.float32)  # [B, P, V]
        labels, weights = inputs["masked_lm_ids"], inputs["masked_lm_weights"]  # [B, P]
        losses = tf_keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels), tf.float32)
        nsp_logits = tf.cast(outputs["next_sentence"], tf.float32)  # [B, 2]
        nsp_labels = tf.reshape(inputs["next_sentence_labels"], [-1])  # [B]
        nsp_losses = tf_keras.losses.sparse_categorical_crossentropy(nsp_labels, nsp_logits, from_logits=True)
        nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=nsp_labels.dtype), nsp_labels),
                              tf.float32)
        return {"mlm_loss": tf.reduce_sum(losses * weights), "mlm_correct": tf.reduce_sum(correct * weights),
                "mlm_weight": tf.reduce_sum(weights), "nsp_loss": tf.reduce_sum(nsp_losses),
                "nsp_correct": tf.reduce_sum(nsp_correct), "nsp_count": tf.cast(tf.size(nsp_labels), tf.float32),
                "mlm_context_spread": context_spread(logits, weights), "batches": tf.constant(1.0)}

    return eval_step


def context_spread(logits, weights):
    """How much the masked-LM logits depend on the context: the std of each vocabulary entry's logit across the
    batch's masked positions (mean over the vocabulary), over the std of a position's logits across the
    vocabulary (mean over positions). Near 0 for a collapsed model, which answers the same everywhere."""
    logits = tf.reshape(logits, [-1, tf.shape(logits)[-1]])  # [N, V]
    w = tf.reshape(weights, [-1, 1]) / tf.reduce_sum(weights)  # [N, 1], sums to 1
    mean = tf.reduce_sum(w * logits, 0, keepdims=True)  # [1, V]
    across_positions = tf.reduce_mean(tf.sqrt(tf.reduce_sum(w * tf.square(logits - mean), 0)))
    across_vocab = tf.reduce_sum(w[:, 0] * tf.math.reduce_std(logits, -1))
    return across_positions / across_vocab


def evaluate(eval_step, dataset, batches: int) -> dict:
    totals, seen = {}, 0
    for inputs in dataset.take(batches):
        for key, value in eval_step(inputs).items():
            totals[key] = totals.get(key, 0.0) + float(value)
        seen += 1
    if not seen:
        raise SystemExit("--eval_data holds fewer examples than one batch")
    return {"mlm_loss": totals["mlm_loss"] / totals["mlm_weight"],
            "mlm_accuracy": totals["mlm_correct"] / totals["mlm_weight"],
            "nsp_loss": totals["nsp_loss"] / totals["nsp_count"],
            "nsp_accuracy": totals["nsp_correct"] / totals["nsp_count"], "eval_batches": seen,
            "mlm_context_spread": totals["mlm_context_spread"] / totals["batches"]}


def train(args, masked_lm) -> list[dict]:
    """Trains to the last `--eval_at` step and returns one evaluation per `--eval_at` step."""
    train_data, eval_data = data_config(args, args.train_data, True), data_config(args, args.eval_data, False)
    task = masked_lm.MaskedLMTask(masked_lm.MaskedLMConfig(train_data=train_data, validation_data=eval_data))
    model = build_model(args)
    optimizer = task.create_optimizer(optimization_config(args))
    metrics = task.build_metrics(training=True)
    train_loop = make_train_loop(task, model, optimizer, metrics, bool(args.jit_compile))
    eval_step, eval_dataset = make_eval_step(model), task.build_inputs(eval_data)
    iterator = iter(task.build_inputs(train_data))
    evals, step, cpu = [], 0, 0.0
    for target in args.eval_at:
        if target > step:
            start = time.process_time()
            train_loop(iterator, tf.constant(target - step))
            cpu += time.process_time() - start
            step = target
        train_logs = {m.name: round(float(m.result()), 4) for m in metrics}
        result = {"step": step, "tokens": step * args.batch_size * args.max_seq_length,
                  **evaluate(eval_step, eval_dataset, args.eval_batches), "cpu_seconds": round(cpu, 2)}
        logging.info("step %d: %s; training since last: %s", step, result, train_logs)
        for m in metrics:
            m.reset_state()
        evals.append(result)
    return evals


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    args = parse_args(argv)
    tf_keras.utils.set_random_seed(args.seed)
    masked_lm = import_masked_lm()
    evals = train(args, masked_lm)
    config = {k: v for k, v in vars(args).items() if k not in ("train_data", "eval_data", "output")}
    report = {"peer": f"model_garden {importlib.metadata.version('tf-models-no-deps')}",
              "tensorflow": tf.__version__, "tf_keras": tf_keras.__version__, "config": config,
              "train_data": args.train_data, "eval_data": args.eval_data, "evals": evals}
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(evals[-1] if evals else {}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
