"""The vocabulary learner on count tables: layout, coverage, determinism, errors."""

import pytest

from pipeline.wordpiece_learner import LearnerConfig, _as_text_chunks, learn_vocabulary
from preprocessing.vocabulary import SPECIAL_TOKENS

COUNTS = [("the", 50), ("then", 20), ("there", 15), ("other", 10), ("hello", 8), ("help", 6), ("é", 1)]


def test_chunks_repeat_each_word_count_times():
    text = "".join(_as_text_chunks([("a", 3), ("bc", 2)]))
    assert text.split() == ["a", "a", "a", "bc", "bc"]


def test_layout_specials_unused_then_characters_both_ways():
    vocab = learn_vocabulary(COUNTS, LearnerConfig(vocab_size=60, num_unused=2, min_frequency=1))
    assert vocab[:7] == list(SPECIAL_TOKENS) + ["[unused0]", "[unused1]"]
    for ch in "theorlpé":
        assert ch in vocab and "##" + ch in vocab
    assert len(vocab) == len(set(vocab)) <= 60
    assert "the" in vocab  # the most frequent word is learned whole


def test_deterministic_and_size_respected():
    config = LearnerConfig(vocab_size=40, min_frequency=1)
    first = learn_vocabulary(COUNTS, config)
    assert first == learn_vocabulary(list(reversed(COUNTS)), config)
    assert len(first) <= 40  # a tiny corpus runs out of merges before the size
    assert len(learn_vocabulary(COUNTS, LearnerConfig(vocab_size=27, min_frequency=1))) == 27


def test_errors():
    with pytest.raises(ValueError, match="no words"):
        learn_vocabulary([], LearnerConfig())
    with pytest.raises(ValueError, match="leaves no room"):
        learn_vocabulary(COUNTS, LearnerConfig(vocab_size=5))
