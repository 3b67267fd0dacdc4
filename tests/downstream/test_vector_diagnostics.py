"""`downstream.vector_diagnostics`: each measure on vectors built with a known make-up (exact or within a
sampling tolerance), and the CLI end to end on the shared tiny exports (every layer measured, JSON last)."""

import json

import numpy as np
import pytest

from commands.user_errors import UserError
from downstream import vector_diagnostics as vd


def _design(rng, words=12, positions=8, sentences=60):
    """Occurrence labels: every sentence has `positions` words drawn from `words` types."""
    word = rng.integers(0, words, sentences * positions)
    position = np.tile(np.arange(positions), sentences)
    sentence = np.repeat(np.arange(sentences), positions)
    return word, position, sentence


def test_word_plus_position_explains_an_additive_make_up_exactly():
    rng = np.random.default_rng(0)
    word, position, sentence = _design(rng)
    vectors = rng.normal(0, 1, (12, 16))[word] + rng.normal(0, 1, (8, 16))[position]  # [N, 16], no context
    shares = vd.layer_diagnostics(vectors, word, position, sentence, rng)
    assert shares["word+position"] == pytest.approx(1.0, abs=1e-6)
    assert shares["context"] == pytest.approx(0.0, abs=1e-6)
    assert 0.2 < shares["word"] < 0.8 and 0.2 < shares["position"] < 0.8


def test_a_vector_of_its_own_per_occurrence_is_all_context():
    rng = np.random.default_rng(1)
    word, position, sentence = _design(rng)
    vectors = rng.normal(0, 1, (len(word), 16))
    shares = vd.layer_diagnostics(vectors, word, position, sentence, rng)
    # adjusted R^2: groups fitted to pure noise are not credited with it
    for name in ("word", "position", "word+position", "sentence"):
        assert abs(shares[name]) < 0.05, name
    assert shares["context"] == pytest.approx(1.0, abs=0.05)
    assert abs(shares["anisotropy"]) < 0.02


def test_a_sentence_component_shows_as_sentence_and_context():
    rng = np.random.default_rng(2)
    word, position, sentence = _design(rng)
    vectors = rng.normal(0, 1, (60, 16))[sentence] + 0.1 * rng.normal(0, 1, (len(word), 16))
    shares = vd.layer_diagnostics(vectors, word, position, sentence, rng)
    assert shares["sentence"] > 0.95 and shares["context"] > 0.9 and shares["word"] < 0.1


def test_anisotropy_and_the_largest_dimension():
    rng = np.random.default_rng(3)
    shared = np.full((500, 8), 3.0) + rng.normal(0, 0.1, (500, 8))
    assert vd.anisotropy(shared, rng) > 0.99
    rogue = rng.normal(0, 1, (4000, 8)) * np.array([10.0] + [1.0] * 7)  # variances 100, 1, ..., 1
    assert vd.top_dimension_share(rogue) == pytest.approx(100 / 107, abs=0.02)
    assert vd.top_component_share(rogue) == pytest.approx(100 / 107, abs=0.02)


def test_only_frequent_words_at_early_positions_take_part():
    class Sentence:
        def __init__(self, words):
            self.words = words

    encoded = [Sentence(["The", "bank", "rose"]), Sentence(["the", "bank", "fell", "the"])]
    sentence, position, word = vd.occurrences(encoded, min_count=2, max_position=3)
    assert sentence.tolist() == [0, 0, 1, 1]  # "the" at 3 is past max_position; rose and fell are rare
    assert position.tolist() == [0, 1, 0, 1]
    assert word.tolist() == [1, 0, 1, 0]  # bank, the: lower-cased, sorted


@pytest.mark.slow
def test_cli_measures_every_layer_of_an_export(tiny_models, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text("\n".join(["the river bank flooded", "she went to the bank", "the bank raised rates again",
                               "they sat on the river bank", "interest rates at the bank"] * 4) + "\n")
    assert vd.main(["--module", tiny_models["bert"].export_dir, "--input", str(text), "--min_count", "3"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(result["layers"]) == ["embeddings", "layer_1", "layer_2"]
    assert result["occurrences"] > 50 and result["module_kind"] == "bert"
    for values in result["layers"].values():
        assert set(values) == set(vd.COLUMNS) and -1 <= values["anisotropy"] <= 1
    assert vd.main(["--module", str(tmp_path), "--input", str(text)]) == 2
    same = vd.run(vd.DiagnosticsJob(module=tiny_models["bert"].export_dir, input=str(text), min_count=3))
    assert same.summary() == result  # the Python API: the command's figures
    with pytest.raises(UserError, match="--min_count 0 is out of range"):
        vd.run(vd.DiagnosticsJob(module=tiny_models["bert"].export_dir, input=str(text), min_count=0))
