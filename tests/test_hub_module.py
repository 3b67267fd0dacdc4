"""A trained model_dir's BERT encoder as a reusable SavedModel: reloads with the same outputs, dropout is
live in training mode, and `hub.KerasLayer(trainable=True)` fine-tunes it inside a tf_keras model."""

import numpy as np
import pytest
import tensorflow as tf

from models import bert, families, train
from serving.hub_module import ReusableModule
from tests.training_fixtures import write_dataset

NAMES = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    pattern = write_dataset(str(root / "data"), "bert")
    model_dir = str(root / "model")
    assert train.main(["--model", "bert", "--preset", "bert_tiny", "--train_data", pattern, "--model_dir",
                       model_dir, "--set", "train_steps=2", "--set", "batch_size=8", "--set", "jit_compile=false"]) == 0
    _, pretrainer, _ = families.load_model(model_dir)
    encoder = bert.encoder_of(pretrainer)
    spec = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in NAMES}
    module = ReusableModule(encoder, spec, outputs=lambda out: {**out, "default": out["pooled_output"]})
    path = str(root / "encoder")
    tf.saved_model.save(module, path)
    return encoder, path


def _inputs(batch=4, seq=16):
    rng = np.random.default_rng(0)
    return {"input_word_ids": rng.integers(5, 40, (batch, seq)).astype(np.int32),
            "input_mask": np.ones((batch, seq), np.int32), "input_type_ids": np.zeros((batch, seq), np.int32)}


def test_reloaded_module_gives_the_keras_outputs(exported):
    encoder, path = exported
    loaded = tf.saved_model.load(path)
    x = _inputs()
    got = loaded(x, training=False)
    want = encoder(x, training=False)
    np.testing.assert_allclose(got["sequence_output"], want["sequence_output"], atol=1e-5)
    np.testing.assert_allclose(got["default"], want["pooled_output"], atol=1e-5)
    assert len(got["encoder_outputs"]) == 2
    assert len(loaded.trainable_variables) == len(encoder.trainable_variables) and loaded.variables
    assert loaded.regularization_losses == []
    a, b = loaded(x, training=True)["pooled_output"], loaded(x, training=True)["pooled_output"]
    assert np.abs(a.numpy() - b.numpy()).max() > 1e-6  # dropout is live when training


def test_hub_keras_layer_fine_tunes_it(exported):
    import tensorflow_hub as hub
    import tf_keras

    _, path = exported
    layer = hub.KerasLayer(path, trainable=True)
    inputs = {name: tf_keras.Input([16], dtype=tf.int32, name=name) for name in NAMES}
    logits = tf_keras.layers.Dense(2)(layer(inputs)["pooled_output"])
    model = tf_keras.Model(inputs, logits)
    model.compile(tf_keras.optimizers.Adam(1e-3), tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [v.numpy().copy() for v in layer.trainable_variables]
    model.fit(_inputs(batch=16), np.arange(16) % 2, epochs=1, verbose=0)
    changed = sum(not np.allclose(a, v.numpy()) for a, v in zip(before, layer.trainable_variables))
    # All but the attention key biases (one a layer), whose gradient is zero: softmax ignores a shift.
    assert len(layer.trainable_variables) > 30 and changed == len(before) - 2
