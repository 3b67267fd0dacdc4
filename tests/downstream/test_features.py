"""`downstream.features` on tiny exported models of the three families: span -> word mapping on tricky text,
word vectors aligned with the modules' own outputs (mean of a word's pieces), the layer choices' arithmetic
and shapes, and the CLI's .npz / .tfrecord output."""

import json

import numpy as np
import pytest
import tensorflow as tf

from downstream import features
from downstream.features import ModuleEncoder, combine
from downstream.words import span_words, split_words

TRICKY = "Café, café! The bank's  bank\u00a0(banks)-bank... naïve riverbank"
TEXTS = [TRICKY, "the river bank flooded", "a play"]


@pytest.fixture(scope="module")
def encoders(tiny_models):
    """The session's tiny models (tests/fixtures/tiny_models.py): "riverbank" is not in their vocabulary."""
    return {kind: ModuleEncoder(m.export_dir) for kind, m in tiny_models.items()}


def _span(text, word, occurrence=0):
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(word, start + 1)
    return start, start + len(word)


def test_split_words_keeps_case_and_splits_punctuation():
    assert split_words([TRICKY])[0] == ["Café", ",", "café", "!", "The", "bank", "'", "s", "bank", "(", "banks", ")",
                                        "-", "bank", ".", ".", ".", "naïve", "riverbank"]


@pytest.mark.parametrize("word, occurrence, want", [
    ("Café", 0, (0, 1)), ("café", 0, (2, 3)), ("bank", 0, (5, 6)), ("bank", 1, (8, 9)),
    ("banks", 0, (10, 11)), ("bank", 3, (13, 14)), ("naïve", 0, (17, 18)), ("bank's", 0, (5, 8)),
    ("river", 0, (18, 19)),  # a span inside a word maps to that word
    ("bank", 2, (10, 11)),   # "bank" inside "(banks)"
    ("é, c", 0, (0, 3)),     # boundaries inside words on both sides
])
def test_span_words_on_tricky_text(word, occurrence, want):
    assert span_words([TRICKY], [_span(TRICKY, word, occurrence)]) == [want]


def test_span_without_a_word_fails():
    with pytest.raises(ValueError, match="covers no word"):
        span_words(["a  b"], [(1, 2)])


def test_combine_arithmetic():
    hidden = np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3)  # [K, W, D]
    np.testing.assert_array_equal(combine(hidden, "embeddings"), hidden[0])
    np.testing.assert_array_equal(combine(hidden, "last"), hidden[4])
    np.testing.assert_array_equal(combine(hidden, "second_to_last"), hidden[3])
    np.testing.assert_array_equal(combine(hidden, "sum_last4"), hidden[1] + hidden[2] + hidden[3] + hidden[4])
    np.testing.assert_array_equal(combine(hidden, "concat_last4"),
                                  np.concatenate([hidden[1], hidden[2], hidden[3], hidden[4]], -1))
    np.testing.assert_allclose(combine(hidden, "weighted_all"), hidden.mean(0), rtol=1e-6)
    np.testing.assert_allclose(combine(hidden, "weighted_all", [0, 0, 1, 0, 2]), hidden[2] + 2 * hidden[4])
    with pytest.raises(ValueError, match="5 weights"):
        combine(hidden, "weighted_all", [1, 2])
    with pytest.raises(ValueError, match="unknown layer choice"):
        combine(hidden, "middle")


@pytest.mark.parametrize("kind", ["bert", "gpt", "bilm"])
def test_encoders_give_every_layer_for_every_word(encoders, kind):
    encoder = encoders[kind]
    encoded = encoder.encode(TEXTS, batch_size=2)  # two batches, padded differently
    assert [e.words for e in encoded] == split_words(TEXTS)
    names = {"bilm": ["word_emb", "lstm_outputs1", "lstm_outputs2"],
             "bert": ["embeddings", "layer_1", "layer_2"], "gpt": ["embeddings", "layer_1", "layer_2"]}[kind]
    assert encoder.layer_names == names
    e = encoded[0]
    k, w, d = e.hidden.shape
    assert (k, w) == (3, 19) and np.isfinite(e.hidden).all()
    assert encoder.select(e, "concat_last4").shape == (w, 3 * d)  # 3 hidden layers: all of them
    np.testing.assert_allclose(encoder.select(e, "sum_last4"), e.hidden.sum(0), rtol=1e-6)
    np.testing.assert_array_equal(encoder.select(e, "last"), e.hidden[-1])
    np.testing.assert_array_equal(encoder.select(e, "embeddings"), e.hidden[0])
    [alone] = encoder.encode([TEXTS[0]])  # batching and padding change nothing
    np.testing.assert_allclose(alone.hidden, e.hidden, atol=1e-5)


def test_bert_word_vectors_are_the_mean_of_their_pieces(encoders):
    encoder = encoders["bert"]
    text = "the riverbank flooded"  # "riverbank" is not in the vocabulary: several pieces
    packed = encoder.preprocessor(tf.constant([text]))
    out = encoder.module(packed, training=False)
    pieces = [len(p) for p in encoder.preprocessor.tokenize(tf.constant([text])).to_list()[0]]
    assert pieces[0] == 1 and pieces[1] > 1
    [enc] = encoder.encode([text])
    sequence = out["sequence_output"].numpy()[0]
    np.testing.assert_allclose(enc.hidden[-1, 0], sequence[1], atol=1e-5)
    np.testing.assert_allclose(enc.hidden[-1, 1], sequence[2:2 + pieces[1]].mean(0), atol=1e-5)
    np.testing.assert_allclose(enc.hidden[0, 0], out["embedding_output"].numpy()[0, 1], atol=1e-5)


def test_gpt_word_vectors_read_the_modules_hidden_states_after_a_document_start(encoders):
    encoder = encoders["gpt"]
    ids = encoder.module.tokenize(tf.constant(["the river bank"])).to_list()[0]
    sep = encoder.exported.token_id("[SEP]")
    out = encoder.module({"input_word_ids": tf.constant([[sep] + ids], tf.int32)}, training=False)
    [enc] = encoder.encode(["the river bank"])
    np.testing.assert_allclose(enc.hidden[-1], out["hidden_states"].numpy()[0, 1:], atol=1e-5)
    np.testing.assert_allclose(enc.hidden[1], out["layer_outputs"][0].numpy()[0, 1:], atol=1e-5)


def test_bilm_elmo_is_the_modules_scalar_mix(encoders):
    encoder = encoders["bilm"]
    assert encoder.extra_names == ["elmo"]
    out = encoder.module.default(tf.constant(["the river bank flooded"]))
    [enc] = encoder.encode(["the river bank flooded"])
    np.testing.assert_allclose(encoder.select(enc, "elmo"), out["elmo"].numpy()[0], atol=1e-5)
    np.testing.assert_allclose(enc.hidden[1], out["lstm_outputs1"].numpy()[0], atol=1e-5)


def test_embed_spans_averages_the_span_words(encoders):
    encoder = encoders["bert"]
    spans = [_span(TRICKY, "bank", 1), _span(TRICKY, "bank's")]
    got = encoder.embed_spans([TRICKY, TRICKY], spans, ["last"])["last"]
    [enc] = encoder.encode([TRICKY])
    np.testing.assert_allclose(got[0], enc.hidden[-1, 8], atol=1e-6)
    np.testing.assert_allclose(got[1], enc.hidden[-1, 5:8].mean(0), atol=1e-6)


def test_cli_writes_npz_and_tfrecord(encoders, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n\n")
    module = encoders["bilm"]
    path = str(tmp_path / "f.npz")
    choices = "embeddings,sum_last4,concat_last4,elmo"
    export_dir = module.path
    assert features.main(["--module", export_dir, "--input", str(corpus), "--output", path, "--layers", choices]) == 0
    data = np.load(path)
    assert data["row_splits"].tolist() == [0, 19, 23, 25]
    assert data["concat_last4"].shape == (25, 3 * data["elmo"].shape[1])
    assert list(data["words"][19:23]) == ["the", "river", "bank", "flooded"]
    info = json.loads(open(path + ".json").read())
    assert info["pool"] == "none" and info["words"] == 25 and info["module_kind"] == "bilm"

    record = str(tmp_path / "f.tfrecord")
    assert features.main(["--module", export_dir, "--input", str(corpus), "--output", record, "--layers", "elmo",
                          "--pool", "mean"]) == 0
    examples = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(record)]
    assert len(examples) == 3
    pooled = np.array(examples[1].features.feature["features/elmo"].float_list.value)
    np.testing.assert_allclose(pooled, data["elmo"][19:23].mean(0), atol=1e-5)
    assert features.main(["--module", export_dir, "--input", str(corpus), "--output", path, "--layers", "bogus"]) == 2
