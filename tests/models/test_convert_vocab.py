"""`models.convert --from`: a vocabulary that does not match its checkpoint is refused (issue 46). A `--vocab` of
the right size with the checkpoint's own lines shuffled would make every id name another word than the one
its embedding row learned; it is refused, saying how many lines differ, unless `--allow_vocab_change`. Where
the checkpoint has no vocabulary of its own, the file used is named on stderr and recorded with its sha256."""

import json
import os

import numpy as np
import pytest

from models import families
from preprocessing.vocabulary import Vocabulary
from tests.fixtures.training import tiny_vocabulary
from tests.models.test_convert import TINY, convert_cli, hf_bert_tensors, one_error_line, random_model_dir, write_hf


def _shuffled(vocab: Vocabulary, path) -> tuple[str, int]:
    """`vocab`'s lines in another order, written to `path`; returns the path and how many lines moved."""
    order = np.random.default_rng(0).permutation(len(vocab))
    tokens = [vocab.tokens[i] for i in order]
    Vocabulary(tuple(tokens)).write(str(path))
    return str(path), sum(a != b for a, b in zip(tokens, vocab.tokens))


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    return write_hf(tmp_path_factory.mktemp("hf"), hf_bert_tensors(TINY), TINY, tiny_vocabulary(TINY["vocab_size"]))


def test_a_shuffled_vocab_is_refused_unless_the_change_is_allowed(hf, tmp_path, capsys):
    own = Vocabulary.from_file(os.path.join(hf, "vocab.txt"))
    shuffled, moved = _shuffled(own, tmp_path / "shuffled.txt")
    assert 0 < moved <= len(own)
    assert convert_cli("--from", "hf_bert", "--checkpoint", hf, "--vocab", shuffled, "--model_dir", tmp_path / "a") == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: --vocab {shuffled} differs from the checkpoint's own vocabulary "
                           f"{os.path.join(hf, 'vocab.txt')} in {moved} of {len(own)} lines"), line
    assert "--allow_vocab_change" in line
    assert not (tmp_path / "a").exists()

    assert convert_cli("--from", "hf_bert", "--checkpoint", hf, "--vocab", shuffled, "--model_dir", tmp_path / "b",
                    "--allow_vocab_change") == 0
    err = capsys.readouterr().err
    assert f"differs from the checkpoint's own {os.path.join(hf, 'vocab.txt')} in {moved} lines" in err, err
    data = families.read_config(str(tmp_path / "b"))["data"]
    assert data["vocab_sha256"] == Vocabulary.from_file(shuffled).sha256
    assert data["vocab_file"] == shuffled and data["vocab_check"].startswith("differs from")

    same = tmp_path / "copy.txt"  # the same lines from another file: nothing to say
    same.write_text(own.to_text())
    assert convert_cli("--from", "hf_bert", "--checkpoint", hf, "--vocab", same, "--model_dir", tmp_path / "c") == 0
    assert "vocabulary" not in capsys.readouterr().err
    assert families.read_config(str(tmp_path / "c"))["data"]["vocab_check"].startswith("the checkpoint's own")


def test_a_keras_hub_presets_own_vocabulary_is_checked_too(tmp_path, capsys):
    source = random_model_dir(tmp_path / "md", "bert", num_layers=1, hidden_size=8, num_heads=2, intermediate_size=16)
    preset = tmp_path / "preset"
    assert convert_cli("--to", "keras_hub", "--model_dir", source, "--output", preset) == 0
    capsys.readouterr()
    own = preset / "assets" / "tokenizer" / "vocabulary.txt"
    shuffled, moved = _shuffled(Vocabulary.from_file(str(own)), tmp_path / "shuffled.txt")
    assert convert_cli("--from", "keras_hub", "--checkpoint", preset, "--vocab", shuffled, "--model_dir",
                    tmp_path / "a") == 2
    line = one_error_line(capsys)
    assert f"differs from the checkpoint's own vocabulary {own} in {moved} of 40 lines" in line, line
    assert not (tmp_path / "a").exists()


def test_a_vocab_nothing_can_check_is_named_and_recorded(hf, tmp_path, capsys):
    """A checkpoint folder without a vocabulary of its own: `--vocab` is the only word on which id is which."""
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        os.symlink(os.path.join(hf, name), bare / name)
    vocab, _ = _shuffled(tiny_vocabulary(40), tmp_path / "given.txt")
    sha = Vocabulary.from_file(vocab).sha256
    assert convert_cli("--from", "hf_bert", "--checkpoint", bare, "--vocab", vocab, "--model_dir", tmp_path / "m") == 0
    err = capsys.readouterr().err
    assert (f"vocabulary {vocab} (sha256 {sha[:12]}, 40 entries), from --vocab: the checkpoint has no vocabulary of "
            f"its own to check it against") in err, err
    saved = json.loads((tmp_path / "m" / "config.json").read_text())["data"]
    assert saved["vocab_sha256"] == sha and saved["vocab_file"] == vocab
    assert saved["vocab_check"] == "unchecked: the checkpoint has no vocabulary of its own"
    assert Vocabulary.from_file(str(tmp_path / "m" / "vocab.txt")).sha256 == sha
