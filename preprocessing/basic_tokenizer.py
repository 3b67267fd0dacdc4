"""BERT's "basic tokenizer" as TF string ops: text normalisation and the word splitter.

The reference (google-research/bert `BasicTokenizer`, HuggingFace `BertNormalizer` + `BertPreTokenizer`):
  1. drop NUL, U+FFFD and control/format characters (Unicode category C*), treat \\t \\n \\r and the space
     separators (Zs) as spaces;
  2. uncased models only: lower-case, decompose (NFD) and drop combining marks (Mn);
  3. split on whitespace; every punctuation character and every CJK ideograph is a word of its own;
  4. a word over 100 characters becomes `[UNK]` (in the WordPiece step).
Steps 1-2 and 4 happen in `normalize`; step 3 is the end-to-end mode of tf-text's `FastWordpieceTokenizer`,
which uses BERT's definitions of whitespace, punctuation and CJK. `split_words` exposes that splitter.

Why not tf-text's `FastBertNormalizer(lower_case_nfd_strip_accents=True)`: it applies NFKD and Unicode case
folding, which turn `…` into `...`, `²` into `2`, `ß` into `ss` and `µ` into `μ`; it changed the ids of 33 of
164,169 corpus lines against the reference. Its cased path, like `tf.strings.lower`, stops at a NUL byte.

Why a marker for long words: tf-text caps words in *bytes*, the reference in *characters*. Here the byte cap
is lifted and words over `MAX_CHARS_PER_WORD` characters are replaced by `LONG_WORD_MARKER`, a Unicode
noncharacter that no vocabulary holds, so the WordPiece step maps it to `[UNK]`.
"""

import tensorflow as tf
import tensorflow_text as tf_text

MAX_CHARS_PER_WORD = 100
LONG_WORD_MARKER = "\ufdd0"
# tf-text's cap is in bytes; set past any 100-character word so that only the character cap applies.
MAX_BYTES_PER_WORD = 4 * MAX_CHARS_PER_WORD + 4

# Deleted: control characters (Cc less \t \n \r), format (Cf), private use (Co), surrogates (Cs), U+FFFD.
# Whitespace is left for the splitter, which already splits on exactly BERT's whitespace.
_DELETED = r"\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\p{Cf}\p{Co}\p{Cs}\x{FFFD}"
_PRINTABLE_ASCII = r"[\t\n\r -~]*"
# A cheap over-approximation of "this line has a word over the cap": a run of non-spaces that long.
_MAYBE_LONG_WORD = r"(?s).*\S{%d}.*" % (MAX_CHARS_PER_WORD + 1)


class BasicTokenizer(tf.Module):
    """Text normalisation and word splitting exactly as BERT's basic tokenizer does them.

    Args:
      lower_case: True for uncased vocabularies (lower-case, strip accents).

    Example:
      >>> basic = BasicTokenizer(lower_case=True)
      >>> basic.normalize(tf.constant(["Café\\x00 au lait"])).numpy()
      array([b'cafe au lait'], dtype=object)
      >>> basic.split_words(tf.constant(["Don't stop, 中文"])).to_list()
      [[b'don', b"'", b't', b'stop', b',', b'\xe4\xb8\xad', b'\xe6\x96\x87']]
    """

    def __init__(self, lower_case: bool = True, name: str = "basic_tokenizer"):
        super().__init__(name=name)
        self.lower_case = lower_case
        # A vocabulary that covers nothing: each word comes back as one [UNK] whose offsets span it, which
        # turns the WordPiece op's own splitter into the word splitter (one definition of "word").
        self._splitter = tf_text.FastWordpieceTokenizer(
            ["[UNK]", "\ufdd1"], unknown_token="[UNK]", max_bytes_per_word=MAX_BYTES_PER_WORD,
            token_out_type=tf.int64)

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """`[B]` strings -> `[B]` normalized strings (steps 1, 2 and 4 above).

        Invalid UTF-8 becomes U+FFFD, which is then dropped like the reference drops it.
        """
        # Most lines are printable ASCII, for which all of steps 1-2 is ASCII lower-casing; only the others
        # pay for the Unicode passes (this doubles throughput on English text).
        x = tf.strings.lower(texts) if self.lower_case else texts
        other = tf.where(~tf.strings.regex_full_match(texts, _PRINTABLE_ASCII))  # [S, 1]
        fixed = self._normalize_unicode(tf.gather_nd(texts, other))  # [S]
        x = tf.tensor_scatter_nd_update(x, other, fixed)
        return self._mark_long_words(x)

    def _normalize_unicode(self, texts: tf.Tensor) -> tf.Tensor:
        x = tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace")
        if not self.lower_case:
            return tf.strings.regex_replace(x, "[" + _DELETED + "]", "")
        # NFD first, so that one pass deletes controls and combining marks; lower-case last, since
        # `tf.strings.lower` truncates at a NUL byte. On NFD text lower-casing creates no marks.
        x = tf_text.normalize_utf8(x, "NFD")
        x = tf.strings.regex_replace(x, "[" + _DELETED + r"\p{Mn}]", "")
        return tf.strings.lower(x, encoding="utf-8")

    def split_words(self, normalized: tf.Tensor) -> tf.RaggedTensor:
        """Normalized `[B]` strings -> `[B, (W)]` words."""
        _, starts, ends = self._splitter.tokenize_with_offsets(normalized)  # [B, (W)] each
        texts = tf.repeat(normalized, starts.row_lengths())  # [N]
        words = tf.strings.substr(texts, starts.flat_values, ends.flat_values - starts.flat_values)  # [N]
        return starts.with_flat_values(words)

    def _mark_long_words(self, texts: tf.Tensor) -> tf.Tensor:
        """Replaces words over the cap by the marker; only the rare lines that may hold one pay for the
        exact split, and batches without any skip it (`tf.cond`)."""
        suspect = tf.where(tf.strings.regex_full_match(texts, _MAYBE_LONG_WORD))  # [S, 1]

        def fix():
            words = self.split_words(tf.gather_nd(texts, suspect))  # [S, (W)]
            too_long = tf.strings.length(words, unit="UTF8_CHAR") > MAX_CHARS_PER_WORD  # [S, (W)]
            words = tf.ragged.map_flat_values(
                lambda w, long: tf.where(long, LONG_WORD_MARKER, w), words, too_long)
            fixed = tf.strings.reduce_join(words, axis=1, separator=" ")  # [S]
            return tf.tensor_scatter_nd_update(texts, suspect, fixed)

        return tf.cond(tf.size(suspect) > 0, fix, lambda: tf.identity(texts))
