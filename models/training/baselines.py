"""The context-free baselines a pretrained model is judged against, on the same held-out examples it is
evaluated on: what a model that learned nothing about context can at best reach.

    python -m models.training.baselines --train_data 'data/gpt/*.tfrecord' --eval_data 'heldout/*.tfrecord' \\
        [--batch_size 32] [--batches 40]

- unigram: the add-one-smoothed unigram distribution of the training targets (masked ids for BERT, next
  ids for GPT, forward ids for the biLM); its cross-entropy and perplexity on the held-out targets;
- most frequent: always answering the most frequent training target; its held-out accuracy.

The held-out targets are those of the first `batches` batches of `batch_size`, read in order: the examples
that `models.training.train --eval_data` and `models.training.evaluate` score. Prints one JSON object.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import math
import sys

import numpy as np

from commands.tf_startup import quiet_command

TARGETS = {"bert": "mlm", "bilm": "forward", "gpt": None}  # which of the reader's labels a model predicts


def targets(pattern: str, batch_size: int = 256, batches: int | None = None) -> np.ndarray:
    """Every weighted prediction target of the files' first `batches` batches (all of them by default)."""
    import tensorflow as tf

    from preprocessing import readers

    metadata, _ = readers.read_metadata(pattern)
    dataset = readers.make_dataset(pattern, batch_size, shuffle=False, repeat=False)
    if batches is not None:
        dataset = dataset.take(batches)
    key, chunks = TARGETS[metadata.model], []
    for _, y, w in dataset:
        y, w = (y[key], w[key]) if key else (y, w)
        chunks.append(tf.boolean_mask(y, w > 0).numpy())
    return np.concatenate(chunks) if chunks else np.zeros([0], np.int64)


def context_free(train_targets: np.ndarray, heldout_targets: np.ndarray, vocab_size: int) -> dict:
    """The unigram and most-frequent baselines of `heldout_targets` from `train_targets` (ids < vocab_size)."""
    counts = np.bincount(train_targets, minlength=vocab_size) + 1.0  # add-one
    log_p = np.log(counts / counts.sum())
    loss = float(-log_p[heldout_targets].mean()) if heldout_targets.size else float("nan")
    return {"unigram_loss": loss, "unigram_perplexity": math.exp(loss),
            "most_frequent_accuracy": float((heldout_targets == counts.argmax()).mean()),
            "targets": int(heldout_targets.size)}


@quiet_command
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.training.baselines", description=__doc__.split("\n")[0])
    parser.add_argument("--train_data", required=True)
    parser.add_argument("--eval_data", required=True)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=None, help="held-out batches (default: all)")
    args = parser.parse_args(argv)
    from preprocessing import readers
    from commands.user_errors import exit_status

    try:
        metadata, _ = readers.read_metadata(args.train_data)
        result = context_free(targets(args.train_data), targets(args.eval_data, args.batch_size, args.batches),
                              metadata.vocab.size)
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e, False)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
