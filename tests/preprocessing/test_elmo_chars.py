"""ELMo character ids against a direct transcription of bilm-tf's UnicodeCharsVocabulary + Batcher."""

import numpy as np
import tensorflow as tf

from preprocessing import elmo_chars


def bilm_tf_reference(sentences, max_len=50):
    """bilm-tf: `_convert_word_to_char_ids`, `<S>`/`</S>` rows, then the Batcher's `+ 1`."""
    bos, eos, bow, eow, pad = 256, 257, 258, 259, 260

    def word_ids(word):
        if word in ("<S>", "</S>"):
            row = np.full(max_len, pad, np.int32)
            row[0], row[1], row[2] = bow, bos if word == "<S>" else eos, eow
            return row
        code = np.full(max_len, pad, np.int32)
        encoded = word.encode("utf-8", "ignore")[:max_len - 2]
        code[0] = bow
        for k, byte in enumerate(encoded, start=1):
            code[k] = byte
        code[len(encoded) + 1] = eow
        return code

    longest = max(len(s) for s in sentences)
    out = np.zeros((len(sentences), longest, max_len), np.int32)
    for i, sentence in enumerate(sentences):
        for j, word in enumerate(sentence):
            out[i, j] = word_ids(word) + 1
    return out


def test_matches_bilm_tf_including_boundaries_padding_and_truncation():
    sentences = [["<S>", "The", "café", "x" * 70, "</S>"], ["<S>", "中文", "</S>"], ["<S>", "</S>"]]
    longest = max(map(len, sentences))
    tokens = tf.constant([s + [""] * (longest - len(s)) for s in sentences])
    lengths = tf.constant([len(s) for s in sentences])
    ours = elmo_chars.char_ids(tokens, lengths).numpy()
    np.testing.assert_array_equal(ours, bilm_tf_reference(sentences))
    assert ours.shape == (3, 5, 50)
    assert (ours[2, 2:] == 0).all()  # batch padding is all zeros


def test_docstring_example_and_vocab_bound():
    row = elmo_chars.char_ids(tf.constant([["a"]]))[0, 0].numpy()
    assert row[:4].tolist() == [259, 98, 260, 261]
    assert row.max() < elmo_chars.CHAR_VOCAB_SIZE


def test_add_sentence_boundaries():
    tokens = tf.ragged.constant([["a", "b"], []])
    assert elmo_chars.add_sentence_boundaries(tokens).to_list() == [
        [b"<S>", b"a", b"b", b"</S>"], [b"<S>", b"</S>"]]


def test_static_shapes_for_xla_models():
    """Strings have no XLA kernels, so the ids are made in the input pipeline; their shape must be fully
    static there so the model that reads them compiles once."""
    fn = tf.function(elmo_chars.char_ids, input_signature=[tf.TensorSpec([8, 7], tf.string),
                                                           tf.TensorSpec([8], tf.int32)])
    assert fn.get_concrete_function().structured_outputs.shape.as_list() == [8, 7, 50]
