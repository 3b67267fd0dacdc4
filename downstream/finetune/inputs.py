"""Task examples -> fixed-shape model inputs for each family, tokenized by the exported module itself.

The module is a `downstream.module.ExportedModule` (the one loader: family, vocabulary, word grouping).
Each input rule is ONE TensorFlow function that training-input building (here, eagerly, in chunks) and the
fine-tuned serving graph (`downstream/finetune/export.py`) both call, so served inputs are training inputs:
  - `pair_sequences`: how a pair becomes sequences, per family;
  - `pack_sequence`: one sequence's parts (string tensors) -> the family's inputs (BERT's `bert_pack_inputs`,
    GPT's `pack_gpt` + `gpt_lm_weights`, the biLM's text as given);
  - `bert_first_pieces`: words -> `[CLS] pieces [SEP]` and each word's first piece (tagging).

Shapes (S = sequences per example: 1 for classify and BERT pairs, 2 for GPT similarity and biLM pairs,
C for choice):
  - BERT: `input_word_ids`, `input_mask`, `input_type_ids` int32 `[N, S, T]`, packed by the preprocessor's
    `bert_pack_inputs` (round-robin truncation); tagging and SQuAD `[N, T]`.
  - GPT (Radford et al. 2018's input transformations): `input_word_ids` `[N, S, T]` = `start parts... extract`
    with `delimiter` between parts, `extract_index` `[N, S]`, `lm_weights` `[N, S, T]` (1 where the next
    token is text: the auxiliary LM loss). Tokens (the vocabulary has no new ones): start = `[SEP]`, the
    end-of-document token GPT saw before every document in pretraining, so a text starts as documents did;
    delimiter = `[CLS]` and extract = `[MASK]`, never seen by GPT in pretraining, so they act as the paper's
    new tokens whose embeddings are learned in fine-tuning.
  - biLM: `text` string `[N, S]`, each sentence as given (the module splits it); tagging `[N]` plus the
    first sub-word of each word (the module splits words further at punctuation, as BERT's basic tokenizer
    does), at most T words.
Tagging labels sit on each word's first piece (`sample_weight` 1 there, 0 elsewhere); `word_positions`
maps predictions back to words.
"""

import numpy as np

from downstream.module import CHUNK

GPT_START, GPT_DELIMITER, GPT_EXTRACT = "[SEP]", "[CLS]", "[MASK]"


def pair_sequences(kind: str, gpt_pair: str, a, b) -> list[list]:
    """How a family reads a pair (`a`, `b`: texts or string tensors): a list over sequences of parts. The
    pair task (`tasks.PairTask`) and the served pair graph (`export.TextTaskModel.pair`) both read pairs so."""
    if kind == "bert" or (kind == "gpt" and gpt_pair == "entail"):
        return [[a, b]]
    if kind == "gpt":  # similarity: both orders, representations added
        return [[a, b], [b, a]]
    return [[a], [b]]  # biLM: each sentence encoded alone


def pack_gpt(pieces: list, seq_length: int, start: int, delimiter: int, extract: int):
    """GPT's input transformation as TF ops, the one implementation training and the serving export use:
    `start p1 [delimiter p2 ...] extract`, parts trimmed round-robin (tf-text's `RoundRobinTrimmer`) to
    fit, 0-padded. `pieces`: one ragged `[N, (P)]` int tensor per part -> ids int32 `[N, T]`, the extract
    position int32 `[N]`."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    pieces = [tf.cast(p, tf.int64) for p in pieces]
    trimmed = tf_text.RoundRobinTrimmer(seq_length - len(pieces) - 1).trim(pieces)
    rows = pieces[0].nrows()

    def column(token):
        return tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.constant(token, tf.int64)))

    parts = [column(start)]
    for k, part in enumerate(trimmed):
        parts += ([column(delimiter)] if k else []) + [part]
    ids = tf.concat(parts + [column(extract)], axis=1)  # [N, (L)]
    return (tf.cast(ids.to_tensor(shape=[None, seq_length]), tf.int32),
            tf.cast(ids.row_lengths(), tf.int32) - 1)


def gpt_lm_weights(ids, extract_index, specials):
    """`ids` `[N, T]`, `extract_index` `[N]` -> `[N, T]` float32: 1 where position t's next token (t + 1 <=
    the extract position) is text, the targets of the auxiliary LM loss (TF ops)."""
    import tensorflow as tf

    ids = tf.convert_to_tensor(ids)
    following = tf.concat([ids[:, 1:], tf.zeros_like(ids[:, :1])], axis=1)  # [N, T]
    before_extract = tf.range(tf.shape(ids)[1])[None, :] < tf.cast(extract_index, tf.int32)[:, None]  # [N, T]
    special = tf.reduce_any(tf.equal(following[..., None], tf.constant(sorted(specials), ids.dtype)), -1)
    return tf.cast(before_extract & ~special, tf.float32)


def gpt_specials(module) -> tuple[int, int, int]:
    return tuple(module.token_id(t) for t in (GPT_START, GPT_DELIMITER, GPT_EXTRACT))


def pack_sequence(module, parts: list, seq_length: int) -> dict:
    """One sequence's parts (`[N]` string tensors) -> the family's inputs `[N, T]` (biLM: `text` `[N]`), TF."""
    import tensorflow as tf

    if module.kind == "bert":
        segments = [module.preprocessor.tokenize(p) for p in parts]  # each [N, (W), (P)]
        packed = module.preprocessor.bert_pack_inputs(segments, seq_length=tf.constant(seq_length))
        return {k: tf.cast(packed[k], tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    if module.kind == "bilm":
        return {"text": parts[0]}
    specials = gpt_specials(module)
    ids, extract_index = pack_gpt([module.tokenize(p) for p in parts], seq_length, *specials)
    return {"input_word_ids": ids, "extract_index": extract_index,
            "lm_weights": gpt_lm_weights(ids, extract_index, set(specials))}


def gpt_sequence(parts: list[list[int]], seq_length: int, start: int, delimiter: int, extract: int):
    """One example of piece ids through `pack_gpt`: ids `[T]`, the extract position, LM weights `[T]`."""
    import tensorflow as tf

    ids, index = pack_gpt([tf.ragged.constant([p], tf.int64, ragged_rank=1) for p in parts], seq_length, start,
                          delimiter, extract)
    weights = gpt_lm_weights(ids, index, {start, delimiter, extract})
    return ids.numpy()[0], int(index.numpy()[0]), weights.numpy()[0]


def text_inputs(module, sequences: list[list[tuple[str, ...]]], seq_length: int) -> dict:
    """Examples' texts as sequences -> `[N, S, ...]` inputs, each sequence packed by `pack_sequence` in chunks.
    `sequences`: a list over the S sequences, each a list over the N examples of that sequence's parts (a
    task's `sequences`: classify `[[(text,), ...]]`; a pair as `pair_sequences` reads it; choice one per
    choice, `(context, choice)`)."""
    import tensorflow as tf

    per_sequence = []
    for parts_of in sequences:
        chunks = []
        for i in range(0, len(parts_of), CHUNK):
            chunk = parts_of[i:i + CHUNK]
            parts = [tf.constant([p[k] for p in chunk]) for k in range(len(chunk[0]))]
            chunks.append({k: v.numpy() for k, v in pack_sequence(module, parts, seq_length).items()})
        per_sequence.append({k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]})
    out = {k: np.stack([p[k] for p in per_sequence], axis=1) for k in per_sequence[0]}
    if "text" in out:  # the biLM's sentences, as given: back to Python strings
        out["text"] = np.char.decode(out["text"].astype(bytes), "utf-8").astype(object)
    return out


def bert_first_pieces(module, words, seq_length: int, width=None):
    """BERT tagging, TF: `words` `[B, (W)]` -> (`[CLS] pieces [SEP]` inputs `[B, T]`, each word's first piece
    `[B, W]`, whether it fits `[B, W]`). Pieces past `seq_length - 2` are cut by `bert_pack_inputs` (a word
    cut in the middle keeps its pieces that fit, but no label); every later word does not fit either.
    `width`: W of the outputs (default the longest sentence)."""
    import tensorflow as tf

    grouped = module.group_word_pieces(words)  # [B, (W), (P)]
    counts = grouped.row_lengths(axis=2)  # [B, (W)]
    per_word = counts.to_tensor()  # [B, W], 0 past the end
    if width is not None:
        per_word = tf.pad(per_word, [[0, 0], [0, width - tf.shape(per_word)[1]]])
    end = tf.math.cumsum(per_word, axis=1)  # [B, W] pieces up to and including each word
    first = tf.cast(1 + end - per_word, tf.int32)  # [B, W] after [CLS]
    keep = (end <= tf.cast(seq_length - 2, end.dtype)) & (per_word > 0)  # [B, W]
    packed = module.preprocessor.bert_pack_inputs([grouped.merge_dims(1, 2)], seq_length=tf.constant(seq_length))
    x = {k: tf.cast(packed[k], tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    return x, first, keep


def bert_tag_inputs(module, sentences: list[tuple[str, ...]], seq_length: int):
    """Sentences of words -> `bert_first_pieces` inputs `[N, T]` and each word's first-piece position
    (-1: cut off)."""
    import tensorflow as tf

    rows = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
    positions = []
    for i in range(0, len(sentences), CHUNK):
        chunk = [list(s) for s in sentences[i:i + CHUNK]]
        x, first, keep = bert_first_pieces(module, tf.ragged.constant(chunk, tf.string, ragged_rank=1), seq_length)
        for k in rows:
            rows[k].append(x[k].numpy())
        first = tf.where(keep, first, -1).numpy()
        positions.extend(first[n, :len(words)].tolist() for n, words in enumerate(chunk))
    return {k: np.concatenate(v) for k, v in rows.items()}, positions


def bilm_tag_inputs(backbone, sentences: list[tuple[str, ...]], max_words: int):
    """Sentences as the module's text input and each word's first sub-word position (-1: cut off), from
    the same word splitter the module runs (`BasicTokenizer`)."""
    import tensorflow as tf

    from preprocessing.basic_tokenizer import BasicTokenizer

    basic = BasicTokenizer(backbone.lower_case)
    flat = [w for words in sentences for w in words]
    counts = []
    for i in range(0, len(flat), CHUNK):
        split = basic.split_words(basic.normalize(tf.constant(flat[i:i + CHUNK])))
        counts.extend(split.row_lengths().numpy().tolist())
    texts, positions, i = [], [], 0
    for words in sentences:
        first, at, kept = [], 0, []
        for word, count in zip(words, counts[i:i + len(words)]):
            if count == 0 or at + count > max_words:
                first.append(-1)
                continue
            first.append(at)
            kept.append(word)
            at += count
        i += len(words)
        texts.append(" ".join(kept))
        positions.append(first)
    return {"text": np.array(texts, dtype=object)}, positions


def tag_labels(positions: list[list[int]], tags: list[tuple[str, ...]], tag_ids: dict, seq_length: int):
    """Labels `[N, T]` at each word's first position, and sample weights there (0 elsewhere), scaled so the
    loss Keras averages over all N * T positions is the mean over words."""
    labels = np.zeros((len(positions), seq_length), np.int32)
    weights = np.zeros((len(positions), seq_length), np.float32)
    for n, (first, sentence_tags) in enumerate(zip(positions, tags)):
        for p, tag in zip(first, sentence_tags):
            if p >= 0 and tag in tag_ids:
                labels[n, p], weights[n, p] = tag_ids[tag], 1.0
    # Keras averages the weighted loss over every position; rescale so it is the mean over words.
    return labels, weights * (weights.size / max(weights.sum(), 1.0))


def words_from_positions(logits: np.ndarray, positions: list[list[int]], tag_names: list[str],
                         fallback: str) -> list[list[str]]:
    """Each word's predicted tag from its first piece; `fallback` for words truncated away."""
    best = logits.argmax(-1)  # [N, T]
    return [[tag_names[best[n, p]] if p >= 0 else fallback for p in first] for n, first in enumerate(positions)]
