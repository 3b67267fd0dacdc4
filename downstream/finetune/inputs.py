"""Task examples -> fixed-shape model inputs for each family, tokenized by the exported module itself.

`Backbone.load(path)` finds the module (an export dir, or a hub module dir) and its kind from what the
SavedModel offers (BERT's encoder has `mlm`, GPT's module `generate`, the biLM's the `tokens` signature);
tokenization is the module's own (`preprocessor.tokenize`, `module.tokenize`), so fine-tuning sees exactly
the pieces serving will.

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
  - biLM: `text` string `[N, S]` (words joined by spaces, at most T words); tagging `[N]` plus the first
    sub-word of each word (the module splits words further at punctuation, as BERT's basic tokenizer does).
Tagging labels sit on each word's first piece (`sample_weight` 1 there, 0 elsewhere); `word_positions`
maps predictions back to words.
"""

import dataclasses
import os

import numpy as np

GPT_START, GPT_DELIMITER, GPT_EXTRACT = "[SEP]", "[CLS]", "[MASK]"
CHUNK = 4096


class ModuleError(ValueError):
    """The path holds no module this project exported."""


@dataclasses.dataclass
class Backbone:
    """A loaded export: `kind` (bert, gpt, bilm), `path` (the fine-tunable module), `preprocessor`
    (BERT), `vocab` (a `Vocabulary`)."""

    kind: str
    path: str
    module: object
    preprocessor: object
    vocab: object

    @classmethod
    def load(cls, path: str) -> "Backbone":
        import tensorflow_hub as hub
        import tensorflow_text  # noqa: F401  (registers the ops the modules use)

        from preprocessing.vocabulary import Vocabulary

        candidates = [os.path.join(path, "hub", "encoder"), os.path.join(path, "hub", "module"), path]
        module_path = next((p for p in candidates if os.path.exists(os.path.join(p, "saved_model.pb"))), None)
        if module_path is None:
            raise ModuleError(f"no exported module under {path} (expected hub/encoder, hub/module or a "
                              f"SavedModel): export a model_dir with `python -m serving.export` or pass --model_dir")
        module = hub.load(module_path)
        preprocessor = None
        if hasattr(module, "mlm"):
            kind = "bert"
            prep_path = os.path.join(os.path.dirname(module_path), "preprocessor")
            if not os.path.exists(prep_path):
                raise ModuleError(f"BERT encoder {module_path} has no preprocessor beside it ({prep_path})")
            preprocessor = hub.load(prep_path)
        elif hasattr(module, "generate"):
            kind = "gpt"
        elif "tokens" in getattr(module, "signatures", {}):
            kind = "bilm"
        else:
            raise ModuleError(f"{module_path} is not a BERT encoder, GPT or biLM module exported by this project")
        vocab = Vocabulary.from_file(os.path.join(module_path, "assets", "vocab.txt"))
        return cls(kind, module_path, module, preprocessor, vocab)

    def token_id(self, token: str) -> int:
        return self.vocab.id_of(token)

    @property
    def lower_case(self) -> bool:
        return not self.vocab.looks_cased

    def pieces(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids of each text (no special tokens)."""
        import tensorflow as tf

        out = []
        for i in range(0, len(texts), CHUNK):
            batch = tf.constant(texts[i:i + CHUNK])
            ragged = self.preprocessor.tokenize(batch).merge_dims(-2, -1) if self.kind == "bert" \
                else self.module.tokenize(batch)
            out.extend(ragged.to_list())
        return out

    def word_pieces(self, sentences: list[tuple[str, ...]]) -> list[list[list[int]]]:
        """Per sentence, per word, its pieces (one tokenizer call over every word)."""
        flat = self.pieces([w for words in sentences for w in words])
        out, i = [], 0
        for words in sentences:
            out.append(flat[i:i + len(words)])
            i += len(words)
        return out


def bert_text_inputs(backbone: Backbone, sequences: list[list[tuple[str, ...]]], seq_length: int) -> dict:
    """`sequences[s][n]`: the segments (1 or 2 texts) of example n's s-th sequence -> `[N, S, T]` inputs."""
    import tensorflow as tf

    per_sequence = []
    for segments_of in sequences:
        rows = {"input_word_ids": [], "input_mask": [], "input_type_ids": []}
        for i in range(0, len(segments_of), CHUNK):
            chunk = segments_of[i:i + CHUNK]
            segments = [backbone.preprocessor.tokenize(tf.constant([seg[k] for seg in chunk]))
                        for k in range(len(chunk[0]))]
            packed = backbone.preprocessor.bert_pack_inputs(segments, seq_length=tf.constant(seq_length))
            for name in rows:
                rows[name].append(packed[name].numpy())
        per_sequence.append({k: np.concatenate(v) for k, v in rows.items()})
    return {k: np.stack([p[k] for p in per_sequence], axis=1).astype(np.int32) for k in per_sequence[0]}


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


def gpt_lm_weights(ids: np.ndarray, extract_index: np.ndarray, specials: set[int]) -> np.ndarray:
    """`[N, T]` float32: 1 where position t's next token (t + 1 <= the extract position) is text, the
    targets of the auxiliary LM loss."""
    following = np.zeros_like(ids)
    following[:, :-1] = ids[:, 1:]
    before_extract = np.arange(ids.shape[1])[None, :] < extract_index[:, None]
    return (before_extract & ~np.isin(following, list(specials))).astype(np.float32)


def gpt_sequence(parts: list[list[int]], seq_length: int, start: int, delimiter: int, extract: int):
    """One example through `pack_gpt`: ids `[T]`, the extract position, LM weights `[T]`."""
    import tensorflow as tf

    ids, index = pack_gpt([tf.ragged.constant([p], tf.int64, ragged_rank=1) for p in parts], seq_length, start,
                          delimiter, extract)
    ids, index = ids.numpy(), index.numpy()
    return ids[0], int(index[0]), gpt_lm_weights(ids, index, {start, delimiter, extract})[0]


def gpt_text_inputs(backbone: Backbone, sequences: list[list[tuple[str, ...]]], seq_length: int) -> dict:
    """`sequences[s][n]`: the parts of example n's s-th sequence -> `[N, S, T]` GPT inputs."""
    import tensorflow as tf

    start, delimiter, extract = (backbone.token_id(t) for t in (GPT_START, GPT_DELIMITER, GPT_EXTRACT))
    ids, indices, weights = [], [], []
    for parts_of in sequences:
        pieces = [tf.ragged.constant(backbone.pieces([parts[k] for parts in parts_of]), tf.int64, ragged_rank=1)
                  for k in range(len(parts_of[0]))]
        packed, index = (t.numpy() for t in pack_gpt(pieces, seq_length, start, delimiter, extract))
        ids.append(packed)
        indices.append(index)
        weights.append(gpt_lm_weights(packed, index, {start, delimiter, extract}))
    return {"input_word_ids": np.stack(ids, axis=1), "extract_index": np.stack(indices, axis=1),
            "lm_weights": np.stack(weights, axis=1)}


def sequences_for(task: str, kind: str, texts: list[tuple[str, ...]], gpt_pair: str = "entail"):
    """How each family reads a task's texts: a list over sequences of per-example segment tuples."""
    if task == "classify":
        return [[t[:1] for t in texts]]
    if task == "pair":
        if kind == "bert":
            return [[t[:2] for t in texts]]
        if kind == "gpt" and gpt_pair == "entail":
            return [[t[:2] for t in texts]]
        if kind == "gpt":  # similarity: both orders, representations added
            return [[t[:2] for t in texts], [(t[1], t[0]) for t in texts]]
        return [[t[:1] for t in texts], [t[1:2] for t in texts]]  # biLM: each sentence encoded alone
    if task == "choice":
        return [[(t[0], t[1 + c]) for t in texts] for c in range(len(texts[0]) - 1)]
    raise ValueError(f"no sequence form for task {task}")


def text_inputs(backbone: Backbone, task: str, texts: list[tuple[str, ...]], seq_length: int,
                gpt_pair: str = "entail") -> dict:
    sequences = sequences_for(task, backbone.kind, texts, gpt_pair)
    if backbone.kind == "bert":
        return bert_text_inputs(backbone, sequences, seq_length)
    if backbone.kind == "gpt":
        return gpt_text_inputs(backbone, sequences, seq_length)
    if task == "choice":
        raise ValueError("the biLM has no multiple-choice head: use a BERT or GPT module")
    return {"text": np.array([[" ".join(seg[0].split()[:seq_length]) for seg in s] for s in zip(*sequences)],
                             dtype=object)}


def bert_tag_inputs(backbone: Backbone, sentences: list[tuple[str, ...]], seq_length: int):
    """`[CLS] word pieces [SEP]` `[N, T]` and each word's first-piece position (-1: truncated away)."""
    cls_id, sep_id = backbone.token_id("[CLS]"), backbone.token_id("[SEP]")
    ids = np.zeros((len(sentences), seq_length), np.int32)
    positions = []
    for n, words in enumerate(backbone.word_pieces(sentences)):
        row, first = [cls_id], []
        for pieces in words:
            pieces = pieces or [backbone.token_id("[UNK]")]  # a word the normaliser empties
            if len(row) + len(pieces) > seq_length - 1 or (first and first[-1] < 0):
                first.append(-1)  # this word and every later one are cut off, as the serving graph cuts
                continue
            first.append(len(row))
            row.extend(pieces)
        row.append(sep_id)
        ids[n, :len(row)] = row
        positions.append(first)
    mask = (ids != 0).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}, positions


def bilm_tag_inputs(backbone: Backbone, sentences: list[tuple[str, ...]], max_words: int):
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
