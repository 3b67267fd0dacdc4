"""The project's one WordPiece tokenizer: BERT's behaviour on tf-text's fast path, batched.

Used by the Beam jobs, by `tf.data` pipelines and inside exported serving graphs, so that what a model is
trained on and what it is served with are tokenized by the same ops. `BasicTokenizer.normalize` does
BERT's cleaning; tf-text's `FastWordpieceTokenizer` (end-to-end mode) splits on whitespace, punctuation and CJK
ideographs and applies greedy longest-match-first WordPiece with `##` continuations.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from preprocessing.basic_tokenizer import MAX_BYTES_PER_WORD, BasicTokenizer
from preprocessing.vocabulary import SUFFIX_INDICATOR, UNK, Vocabulary



class WordPieceTokenizer(tf.Module):
    """BERT WordPiece tokenization (cased or uncased) as TF ops.

    Args:
      vocab: the `Vocabulary` (must hold the BERT special tokens).
      lower_case: True for uncased vocabularies (lower-case, strip accents).

    Example:
      >>> tok = WordPieceTokenizer(Vocabulary(("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff",
      ...                                      "##able", ",")), lower_case=True)
      >>> tok.tokenize(tf.constant(["Unaffable, unX"])).to_list()
      [[5, 6, 7, 8, 1]]
    """

    def __init__(self, vocab: Vocabulary, lower_case: bool = True, name: str = "wordpiece_tokenizer"):
        super().__init__(name=name)
        self.vocab = vocab
        self.lower_case = lower_case
        self.special_ids = vocab.special_ids()
        self.basic = BasicTokenizer(lower_case)
        self._ids = tf_text.FastWordpieceTokenizer(
            list(vocab.tokens), suffix_indicator=SUFFIX_INDICATOR, unknown_token=UNK,
            max_bytes_per_word=MAX_BYTES_PER_WORD, token_out_type=tf.int64, support_detokenization=True)
        self._word_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(vocab.tokens)),
                                                tf.range(len(vocab), dtype=tf.int64)),
            default_value=self.special_ids[UNK])
        self._pieces = tf_text.FastWordpieceTokenizer(
            list(vocab.tokens), suffix_indicator=SUFFIX_INDICATOR, unknown_token=UNK,
            max_bytes_per_word=MAX_BYTES_PER_WORD, token_out_type=tf.string)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        return self.basic.normalize(texts)

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """`[B]` strings -> `[B, (T)]` int64 word-piece ids (no `[CLS]`/`[SEP]`)."""
        return self._ids.tokenize(self.normalize(texts))

    def tokenize_pieces(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """`[B]` strings -> `[B, (T)]` word-piece strings (`##` marks continuations)."""
        return self._pieces.tokenize(self.normalize(texts))

    def tokenize_words(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """`[B]` strings -> `[B, (W)]` word -> `[B, (W), (P)]` int64 ids: the word grouping that whole-word
        masking and first-piece tagging need."""
        normalized = self.normalize(texts)
        words = self.basic.split_words(normalized)  # [B, (W)]
        pieces = self._ids.tokenize(words.flat_values)  # [N, (P)]
        return words.with_flat_values(pieces)  # [B, (W), (P)]

    def words_and_ids(self, texts: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
        """`[B]` strings -> BERT words `[B, (W)]` and their whole-word ids `[B, (W)]` (`[UNK]` for a word
        that is not a vocabulary entry): the word-level view the biLM's softmax uses."""
        words = self.basic.split_words(self.normalize(texts))
        return words, tf.ragged.map_flat_values(self._word_table.lookup, words)

    def detokenize(self, ids: tf.Tensor | tf.RaggedTensor, skip_special: bool = True) -> tf.Tensor:
        """`[B, (T)]` ids -> `[B]` strings, words joined by single spaces (BERT's convention: punctuation
        comes out space-separated, lower-cased when uncased)."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, tf.int64)
        if skip_special:
            special = tf.constant(sorted(self.special_ids.values()), tf.int64)
            keep = tf.reduce_all(tf.not_equal(ids[..., tf.newaxis], special), axis=-1)
            ids = tf.ragged.boolean_mask(ids, keep)
        return self._ids.detokenize(ids)

    def ids_to_pieces(self, ids: tf.Tensor | tf.RaggedTensor) -> tf.Tensor | tf.RaggedTensor:
        table = tf.constant(list(self.vocab.tokens))
        return tf.ragged.map_flat_values(tf.gather, table, ids) if isinstance(ids, tf.RaggedTensor) \
            else tf.gather(table, ids)
