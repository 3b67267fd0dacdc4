"""`python -m preprocessing.tokenize` as a user runs it (one subprocess per case kept few: imports are slow)."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run_cli(args, stdin: bytes):
    return subprocess.run([sys.executable, "-m", "preprocessing.tokenize", *args], input=stdin,
                          capture_output=True, cwd=ROOT, timeout=300)


@pytest.mark.slow
def test_ids_per_line_with_invalid_utf8_counted(tmp_path, tiny_vocab):
    vocab = tmp_path / "vocab.txt"
    tiny_vocab.write(str(vocab))
    out = run_cli(["--vocab", str(vocab)], b"Unaffable, the!\n\ncaf\xff\xfee hello\n")
    assert out.returncode == 0, out.stderr.decode()
    # the replacement characters are dropped like BERT drops U+FFFD, so "caf??e" reads as "cafe" (11)
    assert out.stdout.decode().splitlines() == ["5 6 7 8 10 9", "", "11 15"]
    assert b"replaced 2 invalid UTF-8 sequence(s)" in out.stderr


@pytest.mark.slow
def test_pieces_from_file(tmp_path, tiny_vocab):
    vocab = tmp_path / "vocab.txt"
    tiny_vocab.write(str(vocab))
    text = tmp_path / "in.txt"
    text.write_text("unaffable world\r\n中\n")
    out = run_cli(["--vocab", str(vocab), "--input", str(text), "--pieces"], b"")
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.decode("utf-8").splitlines() == ["un ##aff ##able world", "中"]


@pytest.mark.slow
def test_bad_vocab_and_missing_input_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("hello\nworld\n")
    out = run_cli(["--vocab", str(bad)], b"x\n")
    assert out.returncode == 2
    assert b"lacks the special token(s) [PAD], [UNK], [CLS], [SEP], [MASK]" in out.stderr
    out = run_cli(["--vocab", str(tmp_path / "missing.txt")], b"x\n")
    assert out.returncode == 2 and b"vocabulary file not found" in out.stderr


def test_the_batch_loop_counts_words_pieces_and_unk_over_streams(tiny_vocab):
    """`LineTokenizer`, the loop behind the command and the demo: ids equal `tokenize`'s, pieces equal
    `tokenize_pieces`', and counts add up over several streams."""
    import io

    import tensorflow as tf

    from preprocessing.tokenize import LineTokenizer, TokenCounts
    from preprocessing.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(tiny_vocab)
    lines = ["Unaffable, the!", "", "hello unX world", "caf\ufffd\ufffde"]
    counts, out = TokenCounts(), io.StringIO()
    loop = LineTokenizer(tokenizer)
    loop.write(io.BytesIO("\n".join(lines[:2]).encode() + b"\n"), out, counts)
    loop.write(io.BytesIO(b"hello unX world\ncaf\xff\xfee\r\n"), out, counts)
    assert out.getvalue().splitlines() == [" ".join(map(str, r)) for r in tokenizer.tokenize(tf.constant(lines)).to_list()]
    assert counts == TokenCounts(lines=4, words=8, pieces=10, unk=1, invalid_utf8=2)
    pieces = io.StringIO()
    LineTokenizer(tokenizer, pieces=True).write(io.BytesIO("\n".join(lines).encode()), pieces)
    assert pieces.getvalue().splitlines() == [
        b" ".join(r).decode() for r in tokenizer.tokenize_pieces(tf.constant(lines)).to_list()]
