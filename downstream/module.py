"""The one loader of this project's exported modules, and the rules every consumer of one shares.

`ExportedModule.load(path)` takes an export dir (`serving.export`'s `--export_dir`, holding `hub/`) or a hub
module dir, and tells the family from the SavedModel itself, as `serving.export` builds it: a BERT encoder has
the `mlm` sub-object (its `preprocessor` sits beside it), a GPT module `generate`, a biLM module the `tokens`
signature. The folder's name plays no part. It owns, for fine-tuning (`downstream.finetune`), features
(`downstream.features`) and the polysemy evaluation (`downstream.evaluate_senses`, through features):
  - the vocabulary (`assets/vocab.txt`, read once, `token_id`);
  - the module's own tokenizer (`tokenize`, a TF function: BERT's preprocessor, GPT's `tokenize`);
  - the word grouping, pieces -> words (`group_word_pieces`, TF, also run inside served graphs): each word
    tokenized alone, a word the normalizer empties becomes `[UNK]` (as the served tagging graph has it);
  - the hidden layers, lowest first, and their names (`layer_names`): BERT and GPT `embeddings`,
    `layer_1..L`; the biLM's from `models.scalar_mix.elmo_layers` (`word_emb` doubled, `lstm_outputs1..K`).

Example:
    module = ExportedModule.load("export/bert")
    module.kind, module.word_pieces([["The", "riverbank"]])  # "bert", [[[pieces of The], [pieces of riverbank]]]
"""

import dataclasses
import os

import numpy as np

from commands.user_errors import UserError

CHUNK = 4096  # texts per tokenizer call


class ModuleError(UserError):
    """The path holds no module this project exported (a `UserError`: one line at every command's edge)."""


def group_word_pieces(tokenize, words, unk_id: int | None):
    """`words` `[B, (W)]` strings -> `[B, (W), (P)]` piece ids: each word through `tokenize` (`[N] -> [N, (P)]`)
    alone; a word with no piece (the normalizer emptied it) gets `[UNK]`, so every word has a first piece
    (`unk_id=None` leaves it empty, as tokenizing the whole text does)."""
    import tensorflow as tf

    pieces = tokenize(words.flat_values)  # [N, (P)]
    if unk_id is None:
        return tf.RaggedTensor.from_row_splits(pieces, words.row_splits)
    empty = tf.cast(tf.equal(pieces.row_lengths(), 0), tf.int64)  # [N] 1 where the word has no piece
    unk = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(empty)], tf.constant(unk_id, pieces.dtype)), empty)  # [N, (0 or 1)]
    pieces = tf.concat([pieces, unk], axis=1)  # [N, (P)]: [UNK] appended to the empty words only
    return tf.RaggedTensor.from_row_splits(pieces, words.row_splits)  # [B, (W), (P)]


class _Bert:
    """A BERT encoder (`hub/encoder`) with its `hub/preprocessor`."""

    def __init__(self, module, preprocessor):
        self.module, self.preprocessor = module, preprocessor

    def tokenize(self, texts):
        return self.preprocessor.tokenize(texts).merge_dims(-2, -1)  # [N, (P)]

    def max_pieces(self) -> int:
        import tensorflow as tf

        return int(self.preprocessor(tf.constant(["a"]))["input_word_ids"].shape[1]) - 2  # less [CLS], [SEP]

    def hidden(self, ids: np.ndarray) -> list:
        """`[B, T]` ids (0 padding) -> the hidden layers, each `[B, T, D]`, lowest first."""
        out = self.module({"input_word_ids": ids, "input_mask": (ids > 0).astype(np.int32),
                           "input_type_ids": np.zeros_like(ids)}, training=False)
        return [out["embedding_output"]] + list(out["encoder_outputs"])


class _Gpt:
    """A GPT module (`hub/module`)."""

    def __init__(self, module):
        self.module = module

    def tokenize(self, texts):
        return self.module.tokenize(texts)  # [N, (P)]

    def max_pieces(self) -> int:
        import tensorflow as tf

        return int(self.module.from_text(tf.constant([" a" * 4096]))["input_word_ids"].shape[1]) - 1

    def hidden(self, ids: np.ndarray) -> list:
        out = self.module({"input_word_ids": ids}, training=False)
        return [out["embedding_output"]] + list(out["layer_outputs"])


class _Bilm:
    """A biLM module (`hub/module`, `elmo/2`-shaped): word-level, no pieces."""

    def __init__(self, module):
        self.module = module

    def tokenize(self, texts):
        raise ValueError("the biLM reads words, not word pieces")

    def max_pieces(self):
        return None

    def outputs(self, words: list[list[str]]) -> dict:
        """Words per sentence -> the `tokens` signature's outputs (`[B, T, ...]`)."""
        import tensorflow as tf

        width = max(1, max((len(w) for w in words), default=1))
        tokens = tf.constant([w + [""] * (width - len(w)) for w in words] or [[""]])
        return self.module.tokens(tokens=tokens, sequence_len=tf.constant([len(w) for w in words] or [0], tf.int32))


@dataclasses.dataclass
class ExportedModule:
    """A loaded export.

    Args:
      kind: `bert`, `gpt` or `bilm`.
      path: the fine-tunable module's folder (`hub/encoder` or `hub/module`).
      module: the loaded SavedModel; preprocessor: BERT's (else None); vocab: a `Vocabulary`.
    """

    kind: str
    path: str
    module: object
    preprocessor: object
    vocab: object

    @classmethod
    def load(cls, path: str) -> "ExportedModule":
        import tensorflow_hub as hub
        import tensorflow_text  # noqa: F401  (registers the ops the modules use)

        from preprocessing.vocabulary import Vocabulary

        path = path.rstrip("/") or "/"
        candidates = [os.path.join(path, "hub", "encoder"), os.path.join(path, "hub", "module"), path]
        module_path = next((p for p in candidates if os.path.exists(os.path.join(p, "saved_model.pb"))), None)
        if module_path is None:
            what = "no such folder" if not os.path.exists(path) else "a file, not a folder" if not \
                os.path.isdir(path) else "expected hub/encoder, hub/module or a SavedModel in it"
            raise ModuleError(f"no exported module under {path} ({what}): give an export dir of "
                              f"`python -m serving.export`, or its hub module")
        module = hub.load(module_path)
        preprocessor = None
        if hasattr(module, "mlm"):
            kind = "bert"
            prep_path = os.path.join(os.path.dirname(module_path), "preprocessor")
            if not os.path.exists(os.path.join(prep_path, "saved_model.pb")):
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

    def __post_init__(self):
        self.family = {"bert": lambda: _Bert(self.module, self.preprocessor), "gpt": lambda: _Gpt(self.module),
                       "bilm": lambda: _Bilm(self.module)}[self.kind]()
        self._max_pieces = self._layer_names = None

    def token_id(self, token: str) -> int:
        return self.vocab.id_of(token)

    @property
    def lower_case(self) -> bool:
        return not self.vocab.looks_cased

    @property
    def max_pieces(self) -> int | None:
        """Word pieces the module reads besides its special tokens (BERT: less `[CLS]`, `[SEP]`; GPT: less
        the document start); None for the biLM."""
        if self._max_pieces is None:
            self._max_pieces = self.family.max_pieces()
        return self._max_pieces

    def tokenize(self, texts):
        """`[N]` strings -> `[N, (P)]` piece ids, the module's own tokenizer (a TF function)."""
        return self.family.tokenize(texts)

    def group_word_pieces(self, words, unk_for_empty: bool = True):
        """`[B, (W)]` words -> `[B, (W), (P)]` pieces (`group_word_pieces` with this module's tokenizer)."""
        return group_word_pieces(self.tokenize, words, self.token_id("[UNK]") if unk_for_empty else None)

    def pieces(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids of each text (no special tokens)."""
        import tensorflow as tf

        out = []
        for i in range(0, len(texts), CHUNK):
            out.extend(self.tokenize(tf.constant(texts[i:i + CHUNK])).to_list())
        return out

    def word_pieces(self, sentences: list, unk_for_empty: bool = True) -> list[list[list[int]]]:
        """Per sentence (a sequence of words), per word, its pieces (`group_word_pieces`)."""
        import tensorflow as tf

        out, start = [], 0
        while start < len(sentences):
            end, count = start, 0
            while end < len(sentences) and (end == start or count + len(sentences[end]) <= CHUNK):
                count += len(sentences[end])
                end += 1
            words = tf.ragged.constant([list(s) for s in sentences[start:end]], tf.string, ragged_rank=1)
            out.extend(self.group_word_pieces(words, unk_for_empty).to_list())
            start = end
        return out

    def hidden(self, ids: np.ndarray) -> list:
        """BERT, GPT: `[B, T]` ids -> hidden layers `[B, T, D]`, lowest first."""
        return self.family.hidden(ids)

    def bilm_outputs(self, words: list[list[str]]) -> dict:
        """biLM: words per sentence -> the module's outputs by name, `[B, T, ...]`."""
        return self.family.outputs(words)

    @property
    def layer_names(self) -> list[str]:
        """The hidden layers' names, lowest first."""
        if self._layer_names is None:
            from models.scalar_mix import elmo_layer_names

            if self.kind == "bilm":
                self._layer_names = elmo_layer_names(self.bilm_outputs([["a"]]))
            else:
                count = len(self.hidden(np.array([[self.token_id("[CLS]"), self.token_id("[SEP]")]], np.int32)))
                self._layer_names = ["embeddings"] + [f"layer_{k}" for k in range(1, count)]
        return self._layer_names
