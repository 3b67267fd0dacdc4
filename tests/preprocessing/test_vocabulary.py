import pytest

from preprocessing.vocabulary import SPECIAL_TOKENS, Vocabulary, VocabularyError
from tests.conftest import TINY_TOKENS


def test_ids_are_positions_and_specials_found(tiny_vocab):
    assert tiny_vocab.id_of("##aff") == 6
    assert tiny_vocab.special_ids() == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    assert len(tiny_vocab) == len(TINY_TOKENS)


def test_file_round_trip_keeps_tokens_and_sha(tmp_path, tiny_vocab):
    path = str(tmp_path / "vocab.txt")
    tiny_vocab.write(path)
    loaded = Vocabulary.from_file(path)
    assert loaded.tokens == tiny_vocab.tokens
    assert loaded.sha256 == tiny_vocab.sha256
    assert len(loaded.sha256) == 64


def test_sha_changes_with_order():
    a = Vocabulary(SPECIAL_TOKENS + ("x", "y"))
    b = Vocabulary(SPECIAL_TOKENS + ("y", "x"))
    assert a.sha256 != b.sha256


def test_missing_file_is_named(tmp_path):
    with pytest.raises(VocabularyError, match="not found: .*nope.txt"):
        Vocabulary.from_file(str(tmp_path / "nope.txt"))


def test_vocab_without_special_tokens_is_refused(tmp_path):
    path = tmp_path / "gpt2.txt"
    path.write_text("hello\nworld\n[UNK]\n")
    with pytest.raises(VocabularyError, match=r"lacks the special token\(s\) \[PAD\], \[CLS\], \[SEP\], \[MASK\]"):
        Vocabulary.from_file(str(path))


def test_empty_and_duplicate_and_non_utf8(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(VocabularyError, match="empty"):
        Vocabulary.from_file(str(empty))
    with pytest.raises(VocabularyError, match="repeats entries: \\['x'\\]"):
        Vocabulary(SPECIAL_TOKENS + ("x", "x"))
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("\n".join(SPECIAL_TOKENS).encode() + b"\ncaf\xe9\n")
    with pytest.raises(VocabularyError, match="not UTF-8"):
        Vocabulary.from_file(str(latin1))


def test_real_bert_vocab_loads(bert_vocab_path):
    vocab = Vocabulary.from_file(bert_vocab_path)
    assert len(vocab) == 30522
    assert vocab.special_ids() == {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
