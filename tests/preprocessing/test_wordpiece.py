"""The WordPiece tokenizer: exact ids on a tiny vocabulary, BERT parity on edge cases, batching, graphs."""

import pytest
import tensorflow as tf

from preprocessing.vocabulary import Vocabulary
from preprocessing.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def tiny(tiny_vocab):
    return WordPieceTokenizer(tiny_vocab, lower_case=True)


def test_greedy_longest_match_with_continuations(tiny):
    assert tiny.tokenize(tf.constant(["Unaffable, the!"])).to_list() == [[5, 6, 7, 8, 10, 9]]
    assert tiny.tokenize_pieces(tf.constant(["unaffable ab"])).to_list() == [
        [b"un", b"##aff", b"##able", b"a", b"##b"]]


def test_uncoverable_word_is_one_unk(tiny):
    # "unx": "un" matches but "##x" does not exist -> the whole word is [UNK], like BERT.
    assert tiny.tokenize(tf.constant(["unx the"])).to_list() == [[1, 10]]


def test_ragged_batch_with_empty_lines(tiny):
    out = tiny.tokenize(tf.constant(["the", "", "hello world"]))
    assert out.to_list() == [[10], [], [15, 16]]
    assert out.dtype == tf.int64


def test_words_grouping(tiny):
    out = tiny.tokenize_words(tf.constant(["Unaffable world", ""]))
    assert out.to_list() == [[[5, 6, 7], [16]], []]


def test_detokenize_round_trip_and_special_skipping(tiny):
    ids = tiny.tokenize(tf.constant(["Hello, unaffable world!"]))
    assert tiny.detokenize(ids).numpy().tolist() == [b"hello , unaffable world !"]
    with_specials = tf.constant([[2, 15, 3, 0, 0]])
    assert tiny.detokenize(with_specials).numpy().tolist() == [b"hello"]


def test_ids_to_pieces(tiny):
    assert tiny.ids_to_pieces(tf.constant([5, 6])).numpy().tolist() == [b"un", b"##aff"]


def test_cased_vocabulary_keeps_case():
    vocab = Vocabulary(("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Café", "cafe"))
    cased = WordPieceTokenizer(vocab, lower_case=False)
    uncased = WordPieceTokenizer(vocab, lower_case=True)
    assert cased.tokenize(tf.constant(["Café cafe CAFE"])).to_list() == [[5, 6, 1]]
    assert uncased.tokenize(tf.constant(["Café cafe CAFE"])).to_list() == [[6, 6, 6]]


def test_runs_inside_tf_function_and_saved_model(tmp_path, tiny):
    module = tf.Module()
    module.tokenizer = tiny
    module.encode = tf.function(lambda t: tiny.tokenize(t).to_tensor(),
                                input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    assert loaded.encode(tf.constant(["the hello", "!"])).numpy().tolist() == [[10, 15], [9, 0]]


EDGE_CASES = [
    "Café naïve résumé ÉCOLE",
    "中文字符测试 and 日本語のテキスト 한국어",
    "emoji 😀👍🏽 here",
    "ctrl\x00a\x01b\x7fc\u200bd\ufffde\u00adf",
    "tab\tnew\nline\r end\u3000ideo\u00a0nbsp",
    " ".join(["a" * 99, "b" * 100, "c" * 101, "é" * 60, "é" * 120, "α" * 60, "α" * 101]),
    "Straße İstanbul ǅ ﬁ ﬀ Ⅻ ①",
    "mixed русский עברית العربية हिन्दी ไทย",
    "½ ² … µ ´ ¨ ™ ‰",
    "don't stop-believing (now)! $5.00, 3.14%",
    "x\u0301y \u0300",
    "",
]


def test_parity_with_reference_bert_tokenizer_on_edge_cases(bert_tokenizer, bert_vocab_path):
    from tokenizers import BertWordPieceTokenizer

    reference = BertWordPieceTokenizer(bert_vocab_path, lowercase=True)
    ours = bert_tokenizer.tokenize(tf.constant(EDGE_CASES)).to_list()
    theirs = [e.ids for e in reference.encode_batch(EDGE_CASES, add_special_tokens=False)]
    for text, a, b in zip(EDGE_CASES, ours, theirs):
        assert a == b, text


def test_known_difference_final_sigma(bert_tokenizer, bert_vocab_path):
    """Python's str.lower() (the original BERT) writes a word-final capital sigma as ς; tf.strings.lower
    does too; HuggingFace's normalizer writes σ. We follow the original BERT."""
    from tokenizers import BertWordPieceTokenizer

    reference = BertWordPieceTokenizer(bert_vocab_path, lowercase=True)
    text = "ΟΔΟΣ"
    ours = bert_tokenizer.tokenize_pieces(tf.constant([text])).to_list()[0]
    assert [p.decode() for p in ours] == ["ο", "##δ", "##ος"]
    assert text.lower() == "οδος"
    theirs = reference.encode(text, add_special_tokens=False).tokens
    assert theirs == ["ο", "##δ", "##ο", "##σ"]
