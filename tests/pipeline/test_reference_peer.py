"""The pretraining-data benchmark's peer (`benchmarks/peers/reference_create_pretraining_data.py`) tokenizes as the
original script does: its pure-Python tokenizer gives the project tokenizer's pieces (and HuggingFace's), so
the benchmark compares the same work."""

import gzip
import itertools

import pytest

from benchmarks.peers.reference_create_pretraining_data import OriginalTokenizer, load_vocab
from tests.conftest import PRETRAIN

TRICKY = ["Café au lait, s'il vous plaît!", "Don't stop\tthe 中文 text\x00 here\u200b.",
          "ﬁnancial naïve résumé…", "unaffable xqzvw 3.14 $5", "  ", "ALL CAPS AND Mixed-case"]


@pytest.mark.shared_data("corpus/pretrain.txt.gz")
def test_original_tokenizer_gives_the_project_tokenizers_pieces(bert_vocab_path, bert_tokenizer):
    vocab = load_vocab(bert_vocab_path)
    ours = OriginalTokenizer(vocab)
    with gzip.open(PRETRAIN, "rt", encoding="utf-8") as f:
        lines = TRICKY + [line.strip() for line in itertools.islice(f, 3000) if line.strip()]
    inverse = {i: t for t, i in vocab.items()}
    expected = [[inverse[i] for i in row] for row in bert_tokenizer.tokenize(lines).to_list()]
    got = [ours.encode(line).tokens for line in lines]
    assert got[:len(TRICKY)] == expected[:len(TRICKY)]
    assert sum(a != b for a, b in zip(got, expected)) == 0
    assert ours.encode("Don't").tokens == ["don", "'", "t"]
    assert ours.encode("x" * 201).tokens == ["[UNK]"]  # the original's 200-character cap
