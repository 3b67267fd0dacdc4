"""The usage code of TF-Hub's BERT model pages (`bert_en_uncased_preprocess`: basic and general usage, the
special tokens; `bert_en_uncased_L-12_H-768_A-12`: the encoder's outputs, the legacy `vocab_file` and
`do_lower_case` read through `resolved_object`), written here as a user writes it (tf_keras + tensorflow_hub),
run unchanged on a tiny BERT export: only the handles differ."""

import os

import numpy as np
import pytest
import tensorflow as tf

from preprocessing.vocabulary import Vocabulary
from preprocessing.wordpiece import WordPieceTokenizer

TEXTS = ["the river bank flooded", "she went to the bank", "a play"]
SEQ = 48  # the fixture's trained sequence length


@pytest.fixture(scope="module")
def handles(tiny_models):
    """(preprocessor, encoder) paths of the session's tiny BERT export, as a user's `tfhub_handle_*`."""
    export_dir = tiny_models["bert"].export_dir
    return os.path.join(export_dir, "hub", "preprocessor"), os.path.join(export_dir, "hub", "encoder")


@pytest.fixture(scope="module")
def vocab(handles):
    return Vocabulary.from_file(os.path.join(handles[1], "assets", "vocab.txt"))


def test_basic_usage_sentence_embeddings(handles):
    import tensorflow_hub as hub
    import tf_keras

    tfhub_handle_preprocess, tfhub_handle_encoder = handles
    text_input = tf_keras.layers.Input(shape=(), dtype=tf.string)
    preprocessor = hub.KerasLayer(tfhub_handle_preprocess)
    encoder_inputs = preprocessor(text_input)
    encoder = hub.KerasLayer(tfhub_handle_encoder, trainable=True)
    outputs = encoder(encoder_inputs)
    pooled_output = outputs["pooled_output"]      # [batch_size, H].
    sequence_output = outputs["sequence_output"]  # [batch_size, seq_length, H].
    embedding_model = tf_keras.Model(text_input, pooled_output)
    sentences = tf.constant(TEXTS)
    embeddings = embedding_model(sentences)
    assert embeddings.shape[0] == 3
    word_model = tf_keras.Model(text_input, sequence_output)
    assert word_model(sentences).shape == (3, SEQ, embeddings.shape[1])


def test_general_usage_sentence_pairs_with_seq_length(handles):
    import tensorflow_hub as hub
    import tf_keras

    tfhub_handle_preprocess, tfhub_handle_encoder = handles
    preprocessor = hub.load(tfhub_handle_preprocess)
    text_inputs = [tf_keras.layers.Input(shape=(), dtype=tf.string) for _ in range(2)]
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    tokenized_inputs = [tokenize(segment) for segment in text_inputs]
    seq_length = 16  # the page uses 128; any length up to the encoder's positions works
    bert_pack_inputs = hub.KerasLayer(preprocessor.bert_pack_inputs, arguments=dict(seq_length=seq_length))
    encoder_inputs = bert_pack_inputs(tokenized_inputs)
    encoder = hub.KerasLayer(tfhub_handle_encoder, trainable=True)
    encoder_outputs = encoder(encoder_inputs)
    pair_model = tf_keras.Model(text_inputs, [encoder_outputs["pooled_output"], encoder_inputs["input_type_ids"]])
    pooled, type_ids = pair_model([tf.constant(TEXTS[:2]), tf.constant(TEXTS[1:])])
    assert pooled.shape[0] == 2 and type_ids.shape == (2, seq_length)
    direct = preprocessor.bert_pack_inputs([preprocessor.tokenize(tf.constant(TEXTS[:2])),
                                            preprocessor.tokenize(tf.constant(TEXTS[1:]))], seq_length=seq_length)
    np.testing.assert_array_equal(type_ids, direct["input_type_ids"])
    assert set(type_ids.numpy().ravel()) == {0, 1}


def test_tokenize_gives_int32_words_and_pieces_and_the_special_tokens(handles, vocab):
    preprocessor = tf.saved_model.load(handles[0])
    tokens = preprocessor.tokenize(tf.constant(["the river bank", "a"]))
    assert isinstance(tokens, tf.RaggedTensor) and tokens.dtype == tf.int32 and tokens.shape.rank == 3
    assert tokens.row_lengths().numpy().tolist() == [3, 1]  # words per text
    special_tokens_dict = preprocessor.tokenize.get_special_tokens_dict()
    assert {k: (v.dtype, v.shape.rank) for k, v in special_tokens_dict.items()} == {
        k: (tf.int32, 0) for k in ("vocab_size", "padding_id", "start_of_sequence_id", "end_of_segment_id",
                                   "mask_id")}
    ids = vocab.special_ids()
    assert {k: int(v) for k, v in special_tokens_dict.items()} == {
        "vocab_size": len(vocab), "padding_id": ids["[PAD]"], "start_of_sequence_id": ids["[CLS]"],
        "end_of_segment_id": ids["[SEP]"], "mask_id": ids["[MASK]"]}


def test_users_own_masking_with_the_special_tokens(handles):
    """The page's reason for `get_special_tokens_dict()`: pack and mask by hand, then ask the MLM head."""
    preprocessor = tf.saved_model.load(handles[0])
    encoder = tf.saved_model.load(handles[1])
    special = {k: int(v) for k, v in preprocessor.tokenize.get_special_tokens_dict().items()}
    pieces = preprocessor.tokenize(tf.constant(["the river bank flooded"])).merge_dims(1, 2)  # [1, (P)]
    ids = pieces[0].numpy().tolist()
    word_ids = [special["start_of_sequence_id"], *ids, special["end_of_segment_id"]]
    word_ids[2] = special["mask_id"]
    pad = 16 - len(word_ids)
    inputs = {"input_word_ids": tf.constant([word_ids + [special["padding_id"]] * pad], tf.int32),
              "input_mask": tf.constant([[1] * len(word_ids) + [0] * pad], tf.int32),
              "input_type_ids": tf.zeros([1, 16], tf.int32),
              "masked_lm_positions": tf.constant([[2]], tf.int32)}
    packed = preprocessor.bert_pack_inputs([pieces], seq_length=16)
    np.testing.assert_array_equal(packed["input_mask"], inputs["input_mask"])
    logits = encoder.mlm(inputs)["mlm_logits"]
    assert logits.shape == (1, 1, special["vocab_size"])


def test_bert_pack_inputs_takes_one_or_two_segments_and_a_seq_length(handles):
    preprocessor = tf.saved_model.load(handles[0])
    a = preprocessor.tokenize(tf.constant(TEXTS))
    for segments in ([a], [a.merge_dims(1, 2)], [a, a], [a.merge_dims(1, 2), a.merge_dims(1, 2)]):
        packed = preprocessor.bert_pack_inputs(segments, seq_length=10)
        assert packed["input_word_ids"].shape == (3, 10)
        assert int(tf.reduce_max(packed["input_type_ids"])) == len(segments) - 1
    assert preprocessor.bert_pack_inputs([a])["input_word_ids"].shape == (3, SEQ)  # the default length
    with pytest.raises((ValueError, TypeError)):  # as TF-Hub's: no third segment type in this encoder
        preprocessor.bert_pack_inputs([a, a, a], seq_length=10)


def test_encoder_outputs_as_the_encoder_page_lists_them(handles):
    import tensorflow_hub as hub

    preprocessor = hub.load(handles[0])
    encoder = hub.KerasLayer(handles[1], trainable=True)
    outputs = encoder(preprocessor(tf.constant(TEXTS)))
    encoder_outputs = outputs["encoder_outputs"]  # one [batch, seq_length, H] per Transformer block
    assert isinstance(encoder_outputs, list) and len(encoder_outputs) >= 1
    np.testing.assert_allclose(encoder_outputs[-1], outputs["sequence_output"], atol=1e-6)
    np.testing.assert_allclose(outputs["default"], outputs["pooled_output"], atol=1e-6)


def test_legacy_vocab_file_and_do_lower_case_through_resolved_object(handles):
    """Older code (the TF 2.0-era BERT tutorials) builds its own tokenizer from these two attributes."""
    import tensorflow_hub as hub

    bert_layer = hub.KerasLayer(handles[1], trainable=True)
    vocab_file = bert_layer.resolved_object.vocab_file.asset_path.numpy()
    do_lower_case = bert_layer.resolved_object.do_lower_case.numpy()
    assert isinstance(do_lower_case, (bool, np.bool_)) and do_lower_case
    assert not bert_layer.resolved_object.do_lower_case.trainable
    assert all("do_lower_case" not in w.name for w in bert_layer.weights)  # not a weight to train or save
    tokenizer = WordPieceTokenizer(Vocabulary.from_file(vocab_file.decode()), lower_case=bool(do_lower_case))
    ours = tokenizer.tokenize_words(tf.constant(["The River BANK"]))
    served = hub.load(handles[0]).tokenize(tf.constant(["The River BANK"]))
    assert tf.cast(ours, tf.int32).to_list() == served.to_list()
