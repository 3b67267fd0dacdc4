"""Command line: tokenize text with the project's WordPiece tokenizer, one output line per input line.

    python -m preprocessing.tokenize --vocab vocab.txt [--cased] [--input FILE] [--pieces]

Reads UTF-8 text (stdin by default), prints each line's word-piece ids separated by spaces (no `[CLS]` /
`[SEP]`), or the pieces themselves with `--pieces`. Lines are tokenized in batches through the same TF ops
the pipeline and the serving graphs use. Invalid UTF-8 is replaced (and counted on stderr), never fatal.

`LineTokenizer` is the one batch loop (text stream in, a line of ids or pieces per input line out, with
word, piece and `[UNK]` counts): this command and the demo's tokenization step both run it.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import codecs
import dataclasses
import os
import sys
from typing import IO, Iterator

from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status
from preprocessing.vocabulary import UNK, Vocabulary

_BATCH_LINES = 8192


def _batches(stream: IO[bytes], bad_bytes: list[int]) -> Iterator[list[str]]:
    """Yields lists of decoded lines (without the newline); counts invalid UTF-8 sequences."""

    def count_and_replace(error: UnicodeDecodeError):
        bad_bytes[0] += 1
        return "\ufffd", error.end

    codecs.register_error("count_and_replace", count_and_replace)
    batch = []
    for raw in stream:
        batch.append(raw.rstrip(b"\r\n").decode("utf-8", errors="count_and_replace"))
        if len(batch) == _BATCH_LINES:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclasses.dataclass
class TokenCounts:
    """Running totals of a `LineTokenizer` (mutable: one is added to over several streams)."""

    lines: int = 0
    words: int = 0
    pieces: int = 0
    unk: int = 0
    invalid_utf8: int = 0


class LineTokenizer:
    """Tokenizes text streams a batch of lines at a time: one output line per input line, word-piece ids
    separated by spaces (or the pieces, with `pieces=True`), and the counts.

    Args:
      tokenizer: a `preprocessing.wordpiece.WordPieceTokenizer`.
      pieces: write the pieces instead of their ids.

    Example:
      >>> counts = LineTokenizer(tokenizer).write(open("corpus.txt", "rb"), sys.stdout)
    """

    def __init__(self, tokenizer, pieces: bool = False):
        import tensorflow as tf  # here, not at the top: the command's argument errors need no TF

        self.pieces = pieces
        self.unk = tokenizer.special_ids[UNK]

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def encode(lines):
            words = tokenizer.tokenize_words(lines)  # [B, (W), (P)]
            ids = words.merge_dims(1, 2)  # [B, (T)], the same ids as `tokenizer.tokenize`
            rows = tokenizer.ids_to_pieces(ids) if pieces else ids  # [B, (T)]
            return rows, ids.flat_values, words.row_lengths(axis=1)  # [B, (T)], [N], [B]

        self._encode = encode

    def write(self, stream: IO[bytes], out: IO[str], counts: TokenCounts | None = None) -> TokenCounts:
        """Tokenizes every line of `stream` into `out`; returns `counts` (new if None) with this stream added."""
        import tensorflow as tf

        counts = counts if counts is not None else TokenCounts()
        bad = [0]
        for lines in _batches(stream, bad):
            rows, flat_ids, words = self._encode(tf.constant(lines))
            rows = rows.to_list()
            if self.pieces:
                out.write("".join(b" ".join(r).decode("utf-8", "replace") + "\n" for r in rows))
            else:
                out.write("".join(" ".join(map(str, r)) + "\n" for r in rows))
            flat = flat_ids.numpy()
            counts.lines += len(rows)
            counts.words += int(words.numpy().sum())
            counts.pieces += len(flat)
            counts.unk += int((flat == self.unk).sum())
        counts.invalid_utf8 += bad[0]
        return counts


@quiet_command
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m preprocessing.tokenize", description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", required=True, help="vocab.txt, one token per line")
    parser.add_argument("--cased", action="store_true", help="cased vocabulary (no lower-casing/accents)")
    parser.add_argument("--input", default="-", help="text file (default: stdin)")
    parser.add_argument("--pieces", action="store_true", help="print word pieces instead of ids")
    args = parser.parse_args(argv)

    try:
        vocab = Vocabulary.from_file(args.vocab)
        if args.input != "-" and not os.path.exists(args.input):
            raise UserError(f"input file not found: {args.input}")
    except UserError as e:  # a VocabularyError, a missing input: one line
        return exit_status(e)

    from preprocessing.wordpiece import WordPieceTokenizer  # late: argument errors should not wait for TF

    tokenizer = LineTokenizer(WordPieceTokenizer(vocab, lower_case=not args.cased), pieces=args.pieces)
    stream = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")
    try:
        counts = tokenizer.write(stream, sys.stdout)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if counts.invalid_utf8:
        print(f"warning: replaced {counts.invalid_utf8} invalid UTF-8 sequence(s) with U+FFFD", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
