"""Tiny synthetic pretraining datasets in the pipeline's on-disk format (shards + metadata.json + vocab.txt),
written with the same `schema.serialize`, so that model and training tests run in seconds.

The content is learnable: GPT and biLM sequences count upwards (mod the vocabulary), BERT's masked tokens
are such counting sequences too, so a model that learns anything gets its loss well below uniform.
"""

import json
import os

import numpy as np
import tensorflow as tf

from preprocessing import schema
from preprocessing.vocabulary import Vocabulary

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def tiny_vocabulary(size: int) -> Vocabulary:
    return Vocabulary(SPECIALS + tuple(f"w{i}" for i in range(len(SPECIALS), size)))


def text_vocabulary(texts: list[str]) -> Vocabulary:
    """A small real vocabulary for `texts`: the specials, their lower-cased words and punctuation, and
    every character as a word start and as a `##` continuation (so no word becomes [UNK])."""
    import re

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    chars = sorted({c for w in words for c in w})
    entries = list(SPECIALS) + words + [c for c in chars if c not in words] + [f"##{c}" for c in chars]
    return Vocabulary(tuple(entries))


def _counting(rng, rows: int, length: int, vocab_size: int) -> np.ndarray:
    first = len(SPECIALS)
    starts = rng.integers(0, vocab_size - first, size=(rows, 1))
    return (starts + np.arange(length)[None, :]) % (vocab_size - first) + first  # [rows, length]


def _bert_columns(rng, n, seq, preds, vocab_size):
    ids = np.zeros((n, seq), np.int64)
    body = _counting(rng, n, seq - 2, vocab_size)
    ids[:, 0], ids[:, 1:-1], ids[:, -1] = 2, body, 3
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq - 1), preds, replace=False) for _ in range(n)]), 1)
    labels = np.take_along_axis(ids, positions, 1)
    np.put_along_axis(ids, positions, 4, 1)
    segments = np.zeros_like(ids)
    segments[:, seq // 2:] = 1
    return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segments,
            "next_sentence_labels": rng.integers(0, 2, (n, 1)), "masked_lm_positions": positions,
            "masked_lm_ids": labels, "masked_lm_weights": np.ones((n, preds), np.float32)}


def _columns(kind, rng, n, seq, preds, vocab):
    if kind == "bert":
        return _bert_columns(rng, n, seq, preds, len(vocab))
    if kind == "gpt":
        return {"input_ids": _counting(rng, n, seq + 1, len(vocab))}
    ids = _counting(rng, n, seq + 2, len(vocab))
    ids[:, 0], ids[:, -1] = 2, 3  # stand-ins for <S>, </S>
    tokens = np.vectorize(lambda i: vocab.tokens[i])(ids).astype(object)
    return {"tokens": tokens.astype(bytes), "token_ids": ids}


def write_dataset(directory: str, kind: str, *, examples: int = 64, seq: int = 16, preds: int = 4,
                  vocab_size: int = 40, shards: int = 2, seed: int = 0, vocab: Vocabulary | None = None) -> str:
    """Writes the dataset (over `vocab`, default a tiny synthetic one of `vocab_size` entries); returns the
    file pattern to train on."""
    os.makedirs(directory, exist_ok=True)
    vocab = vocab or tiny_vocabulary(vocab_size)
    vocab.write(os.path.join(directory, "vocab.txt"))
    job = {"model": kind, "max_seq_length": seq, "max_predictions_per_seq": preds, "masking": "static",
           "lower_case": True, "whole_word_mask": False}
    features = schema.features_for({"model": kind, "config": job})
    columns = _columns(kind, np.random.default_rng(seed), examples, seq, preds, vocab)
    serialized = schema.serialize({k: tf.constant(v) for k, v in columns.items()}, features).numpy()
    files, counts = [], {}
    for shard in range(shards):
        name = f"{kind}-{shard:05d}-of-{shards:05d}.tfrecord"
        rows = serialized[shard::shards]
        with tf.io.TFRecordWriter(os.path.join(directory, name)) as writer:
            for row in rows:
                writer.write(row)
        files.append(name)
        counts[name] = len(rows)
    metadata = {"schema_version": schema.SCHEMA_VERSION, "model": kind, "config": job,
                "features": schema.describe(features), "compression": "",
                "vocab": {"file": "vocab.txt", "sha256": vocab.sha256, "size": len(vocab),
                          "special_ids": vocab.special_ids()},
                "files": files, "examples_per_file": counts, "examples": examples}
    with open(os.path.join(directory, "metadata.json"), "w") as f:
        json.dump(metadata, f)
    return os.path.join(directory, f"{kind}-*.tfrecord")
