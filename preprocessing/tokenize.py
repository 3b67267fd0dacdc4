"""Command line: tokenize text with the project's WordPiece tokenizer, one output line per input line.

    python -m preprocessing.tokenize --vocab vocab.txt [--cased] [--input FILE] [--pieces]

Reads UTF-8 text (stdin by default), prints each line's word-piece ids separated by spaces (no `[CLS]` /
`[SEP]`), or the pieces themselves with `--pieces`. Lines are tokenized in batches through the same TF ops
the pipeline and the serving graphs use. Invalid UTF-8 is replaced (and counted on stderr), never fatal.
"""

import argparse
import codecs
import os
import sys
from typing import IO, Iterator

from preprocessing.vocabulary import Vocabulary, VocabularyError

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m preprocessing.tokenize", description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", required=True, help="vocab.txt, one token per line")
    parser.add_argument("--cased", action="store_true", help="cased vocabulary (no lower-casing/accents)")
    parser.add_argument("--input", default="-", help="text file (default: stdin)")
    parser.add_argument("--pieces", action="store_true", help="print word pieces instead of ids")
    args = parser.parse_args(argv)

    try:
        vocab = Vocabulary.from_file(args.vocab)
    except VocabularyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.input != "-" and not os.path.exists(args.input):
        print(f"error: input file not found: {args.input}", file=sys.stderr)
        return 2

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf  # late: argument errors should not wait for TensorFlow to load

    from preprocessing.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(vocab, lower_case=not args.cased)
    encode = tf.function(tokenizer.tokenize_pieces if args.pieces else tokenizer.tokenize)
    bad = [0]
    stream = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")
    out = sys.stdout
    try:
        for lines in _batches(stream, bad):
            rows = encode(tf.constant(lines)).to_list()
            if args.pieces:
                out.write("".join(b" ".join(r).decode("utf-8", "replace") + "\n" for r in rows))
            else:
                out.write("".join(" ".join(map(str, r)) + "\n" for r in rows))
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if bad[0]:
        print(f"warning: replaced {bad[0]} invalid UTF-8 sequence(s) with U+FFFD", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
