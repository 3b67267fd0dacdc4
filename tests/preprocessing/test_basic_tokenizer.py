"""Table-driven checks of BERT's basic tokenizer: cleaning, case, accents, CJK, punctuation, long words."""

import pytest
import tensorflow as tf

from preprocessing.basic_tokenizer import LONG_WORD_MARKER, MAX_CHARS_PER_WORD, BasicTokenizer

UNCASED = BasicTokenizer(lower_case=True)
CASED = BasicTokenizer(lower_case=False)


def words(basic, text):
    normalized = basic.normalize(tf.constant([text]))
    return [w.decode("utf-8") for w in basic.split_words(normalized).to_list()[0]]


@pytest.mark.parametrize("text, expected", [
    ("Hello, World!", ["hello", ",", "world", "!"]),
    ("Café NAÏVE résumé", ["cafe", "naive", "resume"]),
    ("don't stop-believing", ["don", "'", "t", "stop", "-", "believing"]),
    ("中文abc日本", ["中", "文", "abc", "日", "本"]),  # CJK ideographs split; kana/latin do not
    ("ひらがな", ["ひらかな"]),  # like BERT: NFD + dropping marks removes the dakuten
    ("nul\x00byte ctrl\x01x zw\u200bj fffd\ufffdz soft\u00adhyphen", ["nulbyte", "ctrlx", "zwj", "fffdz", "softhyphen"]),
    ("tab\tnl\ncr\rnbsp\u00a0ideo\u3000end", ["tab", "nl", "cr", "nbsp", "ideo", "end"]),
    ("emoji😀here 👍🏽", ["emoji😀here", "👍🏽"]),
    ("x\u0301y \u0300", ["xy"]),
    ("İstanbul Straße", ["istanbul", "straße"]),  # lower(), not case folding: ß stays
    ("½ … ²", ["½", "…", "²"]),  # no NFKC: these stay as they are
    ("$5.00 a+b", ["$", "5", ".", "00", "a", "+", "b"]),
    ("", []),
])
def test_uncased_words(text, expected):
    assert words(UNCASED, text) == expected


def test_cased_keeps_case_and_accents_but_cleans():
    assert words(CASED, "Café NAÏVE\x00X, 中文") == ["Café", "NAÏVEX", ",", "中", "文"]


def test_words_over_the_character_cap_become_the_marker():
    at_cap, over_cap = "a" * MAX_CHARS_PER_WORD, "b" * (MAX_CHARS_PER_WORD + 1)
    greek = "α" * 60  # 120 bytes but 60 characters: under the cap
    assert words(UNCASED, f"x {at_cap} {over_cap} {greek}, y") == ["x", at_cap, LONG_WORD_MARKER, greek, ",", "y"]


def test_invalid_utf8_never_fails_and_is_dropped():
    out = UNCASED.normalize(tf.constant([b"ab\xffcd \xc3", b"ok"])).numpy().tolist()
    assert out == [b"abcd ", b"ok"]
    out = CASED.normalize(tf.constant([b"Ab\xffcd"])).numpy().tolist()
    assert out == [b"Abcd"]


def test_batch_shapes_and_graph_mode():
    fn = tf.function(lambda t: UNCASED.split_words(UNCASED.normalize(t)))
    out = fn(tf.constant(["A b", "", "c"]))
    assert out.to_list() == [[b"a", b"b"], [], [b"c"]]
