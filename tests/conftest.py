"""Shared fixtures: tiny vocabularies for exact tests, and the real data in ../shared/data for slow ones."""

import os

import pytest

from demo.shared_data import SHARED_DATA

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Downloaded reference models (test_convert); under Bazel ROOT is the runfiles tree, and its test runner
# points this at the source tree's .cache.
PROJECT_CACHE = os.environ.get("PROJECT_CACHE", os.path.join(ROOT, ".cache"))
BERT_VOCAB = os.path.join(SHARED_DATA, "vocab", "bert_uncased_vocab.txt")
PRETRAIN = os.path.join(SHARED_DATA, "corpus", "pretrain.txt.gz")
HELDOUT = os.path.join(SHARED_DATA, "corpus", "heldout.txt.gz")

TINY_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", ",", "!", "the",
               "cafe", "中", "a", "##b", "hello", "world", "'", "t", "don")


@pytest.fixture(scope="session")
def tiny_vocab():
    from preprocessing.vocabulary import Vocabulary
    return Vocabulary(TINY_TOKENS)


@pytest.fixture(scope="session")
def bert_vocab_path():
    if not os.path.exists(BERT_VOCAB):
        pytest.fail(f"shared data missing: {BERT_VOCAB} (set SHARED_DATA)")
    return BERT_VOCAB


@pytest.fixture(scope="session")
def bert_tokenizer(bert_vocab_path):
    from preprocessing.vocabulary import Vocabulary
    from preprocessing.wordpiece import WordPieceTokenizer
    return WordPieceTokenizer(Vocabulary.from_file(bert_vocab_path), lower_case=True)


def read_corpus_lines(path: str) -> list[str]:
    import gzip
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]
