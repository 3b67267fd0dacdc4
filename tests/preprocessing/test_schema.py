"""The on-disk schema: byte-identical to Python-built protos, round trips, model input names."""

import numpy as np
import pytest
import tensorflow as tf

from preprocessing import schema


def python_example(batch, features, row):
    feature = {}
    for f in features:
        values = np.asarray(batch[f.name])[row]
        if f.dtype == tf.float32:
            feature[f.name] = tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))
        elif f.dtype == tf.string:
            feature[f.name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values.tolist()))
        else:
            feature[f.name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(deterministic=True)


def bert_batch(n=3, length=8, p=3):
    rng = np.random.default_rng(1)
    return {"input_ids": rng.integers(0, 30000, (n, length)), "input_mask": np.ones((n, length), np.int64),
            "segment_ids": rng.integers(0, 2, (n, length)), "next_sentence_labels": rng.integers(0, 2, (n, 1)),
            "masked_lm_positions": rng.integers(0, length, (n, p)), "masked_lm_ids": rng.integers(0, 30000, (n, p)),
            "masked_lm_weights": rng.integers(0, 2, (n, p)).astype(np.float32)}


def test_google_research_names_dtypes_and_shapes():
    described = schema.describe(schema.bert_features(128, 20))
    assert described == {
        "input_ids": {"dtype": "int64", "shape": [128]}, "input_mask": {"dtype": "int64", "shape": [128]},
        "segment_ids": {"dtype": "int64", "shape": [128]}, "next_sentence_labels": {"dtype": "int64", "shape": [1]},
        "masked_lm_positions": {"dtype": "int64", "shape": [20]}, "masked_lm_ids": {"dtype": "int64", "shape": [20]},
        "masked_lm_weights": {"dtype": "float32", "shape": [20]}}


def test_serialize_equals_python_protos_and_parses_back():
    features = schema.bert_features(8, 3)
    batch = bert_batch()
    serialized = schema.serialize(batch, features)
    assert [s for s in serialized] == [python_example(batch, features, i) for i in range(3)]
    parsed = schema.parse(tf.constant(serialized), features)
    for name, values in batch.items():
        np.testing.assert_array_equal(parsed[name].numpy(), values)


def test_every_varint_width_negatives_and_casts_equal_python_protos():
    """Values of 1 to 10 varint bytes (the table's range and the general path), negatives (10 bytes), bools
    and integral floats for int64 features, ints for float32 ones."""
    features = schema.bert_features(12, 3)
    batch = bert_batch(n=4, length=12)
    edges = [0, 127, 128, 16383, 16384, 65535, 65536, 2**21, 2**35, 2**63 - 1, -1, -2**63]
    batch["input_ids"] = np.array([edges, edges[::-1], np.arange(12) * 5000, np.full(12, 300)])
    batch["input_mask"] = batch["input_mask"].astype(bool)
    batch["segment_ids"] = batch["segment_ids"].astype(np.float64)
    batch["masked_lm_weights"] = np.ones((4, 3), np.int64)
    expected = [python_example({k: np.asarray(v).astype(np.float32 if k == "masked_lm_weights" else np.int64)
                                for k, v in batch.items()}, features, i) for i in range(4)]
    assert schema.serialize(batch, features) == expected
    assert schema.serialize({k: v[:0] for k, v in batch.items()}, features) == []


def test_strings_round_trip():
    features = schema.bilm_features(2)
    batch = {"tokens": np.array([[b"<S>", b"caf\xc3\xa9", b"b", b"</S>"]], dtype=object),
             "token_ids": np.array([[101, 5, 6, 102]])}
    serialized = schema.serialize(batch, features)
    assert serialized[0] == python_example(batch, features, 0)
    assert schema.parse(tf.constant(serialized), features)["tokens"].numpy().tolist() == batch["tokens"].tolist()


def test_wrong_shapes_and_missing_features_are_named():
    features = schema.bert_features(8, 3)
    with pytest.raises(KeyError, match="masked_lm_ids"):
        schema.serialize({k: v for k, v in bert_batch().items() if k != "masked_lm_ids"}, features)
    bad = bert_batch(length=9)
    with pytest.raises(ValueError, match=r"input_ids: expected shape \[N, 8\]"):
        schema.serialize(bad, features)


def test_model_input_names():
    batch = {k: tf.constant(v) for k, v in bert_batch().items()}
    x, y, w = schema.bert_model_inputs(batch)
    assert sorted(x) == ["input_mask", "input_type_ids", "input_word_ids", "masked_lm_positions"]
    assert sorted(y) == sorted(w) == ["mlm", "nsp"]
    x, y, w = schema.gpt_model_inputs({"input_ids": tf.constant([[1, 2, 3, 4]])})
    assert x["input_word_ids"].numpy().tolist() == [[1, 2, 3]] and y.numpy().tolist() == [[2, 3, 4]]
    x, y, w = schema.bilm_model_inputs({"tokens": tf.constant([[b"<S>", b"a", b"b", b"</S>"]]),
                                        "token_ids": tf.constant([[101, 5, 6, 102]], tf.int64)})
    assert x["char_ids"].shape == (1, 2, 50)
    assert y["forward"].numpy().tolist() == [[6, 102]] and y["backward"].numpy().tolist() == [[101, 5]]
