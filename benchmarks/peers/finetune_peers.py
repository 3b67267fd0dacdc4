"""The fine-tuning peers `benchmarks.downstream.finetune_parity` runs beside `downstream.finetune`, each on a
HuggingFace BERT folder, as their own users would run them, with the recipe given on the command line:

    python -m benchmarks.peers.finetune_peers keras_hub_classify --hf_dir DIR --train train.tsv --eval dev.tsv \\
        --seed 0 [--epochs 3 --batch_size 32 --learning_rate 5e-5 --warmup 0.1 --weight_decay 0.01 \\
        --clip_norm 1.0 --dropout 0.1 --max_seq_length 64]
    python -m benchmarks.peers.finetune_peers hf_tag --hf_dir DIR --train train.conll --eval dev.conll --seed 0 ...

- `keras_hub_classify`: keras-hub's `BertTextClassifier.from_preset(DIR)` (keras-hub's own HuggingFace loader)
  with its `BertTextClassifierPreprocessor` at `--max_seq_length`, the texts tokenized once before training
  (as `downstream.finetune` does), Keras 3 `fit` with `AdamW` (`global_clipnorm`, no decay on biases and
  layer norms) on the house's warm-up/linear-decay formula (`models.training.optimization`).
- `hf_tag`: HuggingFace `BertForTokenClassification.from_pretrained(DIR)` in PyTorch, the first piece of each
  word labelled (the rest -100), `torch.optim.AdamW`, `get_linear_schedule_with_warmup`,
  `clip_grad_norm_`; a word cut off by `--max_seq_length` gets the most frequent training tag, as ours does.

Both read the task files with `downstream.finetune.task_data` and score with `downstream.finetune`'s own
metrics, so only training differs. The last line printed is one JSON object: the dev metrics, `steps`,
`train_seconds` (the training loop's wall time, tracing and the first step included),
`steady_seconds_per_step` (after the first step) and `encode_seconds`.
"""

import argparse
import json
import os
import sys
import time

import numpy as np


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.finetune_peers")
    parser.add_argument("peer", choices=("keras_hub_classify", "hf_tag"))
    for name in ("--hf_dir", "--train", "--eval"):
        parser.add_argument(name, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--warmup", type=float, default=0.1)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--clip_norm", type=float, default=1.0)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--max_seq_length", type=int, default=64)
    return parser.parse_args(argv)


def keras_hub_classify(args) -> dict:
    import keras
    import keras_hub
    import tensorflow as tf

    from downstream.finetune import task_data
    from models.training.optimization import warmup_decay_rate

    keras.utils.set_random_seed(args.seed)
    train, dev = (task_data.read_classification(p) for p in (args.train, args.eval))
    labels = task_data.label_list(train)
    index = {n: i for i, n in enumerate(labels)}
    started = time.time()
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(
        args.hf_dir, sequence_length=args.max_seq_length)
    classifier = keras_hub.models.BertTextClassifier.from_preset(
        args.hf_dir, num_classes=len(labels), preprocessor=None, dropout=args.dropout)

    def encode(examples):  # {token_ids, segment_ids, padding_mask} [N, T], int labels [N]
        x = preprocessor(tf.constant([e.texts[0] for e in examples]))
        return {k: np.asarray(v) for k, v in x.items()}, np.array([index.get(e.label, 0) for e in examples])

    (x, y), (dev_x, dev_y) = encode(train), encode(dev)
    encode_seconds = time.time() - started
    steps = args.epochs * -(-len(y) // args.batch_size)

    class WarmupLinear(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return warmup_decay_rate(step, args.learning_rate, int(steps * args.warmup), steps)

    optimizer = keras.optimizers.AdamW(WarmupLinear(), weight_decay=args.weight_decay, epsilon=1e-6,
                                       global_clipnorm=args.clip_norm or None)
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    classifier.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(y), seed=args.seed, reshuffle_each_iteration=True)
    first = []

    class FirstStep(keras.callbacks.Callback):  # when the first step (and its tracing) is over
        def on_train_batch_end(self, batch, logs=None):
            if not first:
                first.append(time.time())

    started = time.time()
    history = classifier.fit(data.batch(args.batch_size).prefetch(2), epochs=args.epochs, verbose=0,
                             callbacks=[FirstStep()])
    ended = time.time()
    predicted = classifier.predict(dev_x, batch_size=64, verbose=0).argmax(-1)
    return {"accuracy": float(np.mean(predicted == dev_y)), **_times(started, first[0], ended, steps),
            "encode_seconds": encode_seconds, "train_examples": len(y), "eval_examples": len(dev_y),
            "losses": [float(v) for v in history.history["loss"]]}


def _times(started: float, first_step_done: float, ended: float, steps: int) -> dict:
    """The training loop's wall time, its steps, and seconds per step after the first (None for one step)."""
    steady = (ended - first_step_done) / (steps - 1) if steps > 1 else None
    return {"steps": steps, "train_seconds": ended - started, "steady_seconds_per_step": steady}


def _tag_batch(tokenizer, sentences, tags, index, max_seq_length):
    """Token ids, mask and first-piece labels [N, T] (-100 elsewhere), and each word's first position (-1: cut)."""
    encoded = tokenizer([list(s.words) for s in sentences], is_split_into_words=True, truncation=True,
                        max_length=max_seq_length, padding="max_length", return_tensors="np")
    labels = np.full(encoded["input_ids"].shape, -100, np.int64)
    firsts = []
    for n, sentence in enumerate(sentences):
        first = [-1] * len(sentence.words)
        for position, word in enumerate(encoded.word_ids(n)):
            if word is not None and first[word] < 0:
                first[word] = position
                if tags is not None:
                    labels[n, position] = index[tags[n][word]]
        firsts.append(first)
    return encoded, labels, firsts


def hf_tag(args) -> dict:
    import torch
    import transformers

    from downstream.finetune import task_data
    from downstream.finetune.ner_scores import tag_scores
    from downstream.finetune.inputs import words_from_positions

    torch.manual_seed(args.seed)
    torch.set_num_threads(os.cpu_count() or 1)
    rng = np.random.default_rng(args.seed)
    train, dev = (task_data.read_conll(p) for p in (args.train, args.eval))
    labels = task_data.label_list(train)
    index = {n: i for i, n in enumerate(labels)}
    started = time.time()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(args.hf_dir)
    encoded, y, _ = _tag_batch(tokenizer, train, [s.tags for s in train], index, args.max_seq_length)
    dev_encoded, _, dev_firsts = _tag_batch(tokenizer, dev, None, index, args.max_seq_length)
    encode_seconds = time.time() - started
    model = transformers.BertForTokenClassification.from_pretrained(
        args.hf_dir, num_labels=len(labels), hidden_dropout_prob=0.1, classifier_dropout=args.dropout)
    decay = [p for n, p in model.named_parameters() if not any(k in n for k in ("bias", "LayerNorm"))]
    rest = [p for n, p in model.named_parameters() if any(k in n for k in ("bias", "LayerNorm"))]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": rest, "weight_decay": 0.0}], lr=args.learning_rate, eps=1e-6)
    per_epoch = -(-len(train) // args.batch_size)
    steps = args.epochs * per_epoch
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, int(steps * args.warmup), steps)
    tensors = {k: torch.tensor(v) for k, v in encoded.items()}
    labels_t = torch.tensor(y)
    model.train()
    losses, first, started = [], [], time.time()
    for _ in range(args.epochs):
        order = torch.tensor(rng.permutation(len(train)))
        total = 0.0
        for b in range(per_epoch):
            rows = order[b * args.batch_size:(b + 1) * args.batch_size]
            out = model(**{k: v[rows] for k, v in tensors.items()}, labels=labels_t[rows])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_norm)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            total += float(out.loss)
            if not first:
                first.append(time.time())
        losses.append(total / per_epoch)
    ended = time.time()
    model.eval()
    with torch.no_grad():
        logits = np.concatenate([model(**{k: torch.tensor(v[i:i + 64]) for k, v in dev_encoded.items()}).logits.numpy()
                                 for i in range(0, len(dev), 64)])
    fallback = task_data.most_frequent_tags(train)[1]
    predicted = words_from_positions(logits, dev_firsts, labels, fallback)
    return {**tag_scores([s.tags for s in dev], predicted), **_times(started, first[0], ended, steps),
            "encode_seconds": encode_seconds, "train_examples": len(train), "eval_examples": len(dev),
            "losses": losses}


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local folder or nothing
    args = parse_args(argv)
    result = keras_hub_classify(args) if args.peer == "keras_hub_classify" else hf_tag(args)
    print(json.dumps({"peer": args.peer, "seed": args.seed, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
