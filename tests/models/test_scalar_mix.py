"""ScalarMix: exact against numpy transcriptions of bilm-tf / allennlp, masks, config round trip."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from models.scalar_mix import ScalarMix


def layers(rng, n=3, shape=(2, 4, 5)):
    return [rng.normal(size=shape).astype(np.float32) * (k + 1) + k for k in range(n)]


def numpy_layer_norm(x, mask, epsilon=1e-12):
    """allennlp's `_do_layer_norm` / bilm-tf's `_do_ln`: one mean and variance over the unmasked elements."""
    m = mask.astype(np.float64)[..., None]
    count = m.sum() * x.shape[-1]
    mean = (x * m).sum() / count
    variance = (((x * m - mean) * m) ** 2).sum() / count
    return (x - mean) / np.sqrt(variance + epsilon)


def test_softmax_weights_and_gamma_exact():
    rng = np.random.default_rng(0)
    xs = layers(rng)
    mix = ScalarMix(3, initial_scalar_parameters=[0.1, -0.5, 2.0], initial_gamma=0.7)
    out = mix([tf.constant(x) for x in xs]).numpy()
    w = np.exp([0.1, -0.5, 2.0])
    w /= w.sum()
    np.testing.assert_allclose(out, 0.7 * sum(wk * x for wk, x in zip(w, xs)), rtol=1e-5, atol=1e-6)


def test_defaults_average_the_layers_and_weights_have_stable_names():
    rng = np.random.default_rng(1)
    xs = layers(rng)
    mix = ScalarMix(3, name="mix")
    np.testing.assert_allclose(mix(xs).numpy(), np.mean(xs, axis=0), rtol=1e-5, atol=1e-6)
    assert [v.path for v in mix.weights] == ["mix/scalar_weights", "mix/gamma"]
    assert mix.scalar_weights.shape == (3,) and mix.gamma.shape == () and len(mix.trainable_weights) == 2


def test_layer_norm_with_mask_matches_allennlp_and_ignores_masked_values():
    rng = np.random.default_rng(2)
    xs = layers(rng)
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
    mix = ScalarMix(3, do_layer_norm=True, initial_scalar_parameters=[1.0, 0.0, -1.0], initial_gamma=2.0)
    out = mix(xs, mask=tf.constant(mask)).numpy()
    w = np.exp([1.0, 0.0, -1.0])
    w /= w.sum()
    expected = 2.0 * sum(wk * numpy_layer_norm(x, mask) for wk, x in zip(w, xs))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    noisy = [x + 100.0 * (~mask)[..., None] * rng.normal(size=x.shape).astype(np.float32) for x in xs]
    np.testing.assert_allclose(mix(noisy, mask=mask).numpy()[mask], out[mask], rtol=1e-4, atol=1e-5)
    unmasked = mix(xs).numpy()  # no mask: every position counts
    expected = 2.0 * sum(wk * numpy_layer_norm(x, np.ones(mask.shape, bool)) for wk, x in zip(w, xs))
    np.testing.assert_allclose(unmasked, expected, rtol=1e-4, atol=1e-5)


def test_get_config_round_trip_and_serialization():
    mix = ScalarMix(4, do_layer_norm=True, initial_scalar_parameters=[1, 2, 3, 4], initial_gamma=0.5,
                    name="elmo_mix")
    config = mix.get_config()
    again = ScalarMix.from_config(config)
    assert again.get_config() == config
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(mix))
    assert isinstance(restored, ScalarMix) and restored.get_config() == config
    xs = layers(np.random.default_rng(3), n=4)
    np.testing.assert_allclose(restored(xs).numpy(), mix(xs).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="expected num_layers=4"):
        ScalarMix(4, initial_scalar_parameters=[1.0])
    with pytest.raises(ValueError, match="expected 4"):
        mix(xs[:3])


def test_gradients_reach_both_weights_and_the_keras_mask_is_used():
    ids = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 6, mask_zero=True, name="e1")(ids)
    other = keras.layers.Embedding(10, 6, mask_zero=True, name="e2")(ids)
    mixed = ScalarMix(2, do_layer_norm=True, name="mix")([embedded, other])
    model = keras.Model(ids, mixed)
    x = np.array([[1, 2, 3, 0, 0], [4, 5, 0, 0, 0]])
    with_padding = model(x).numpy()
    direct = model.get_layer("mix")([model.get_layer("e1")(x), model.get_layer("e2")(x)], mask=x != 0).numpy()
    np.testing.assert_allclose(with_padding, direct, rtol=1e-5)
    mix = model.get_layer("mix")
    everything = mix([model.get_layer("e1")(x), model.get_layer("e2")(x)], mask=np.ones(x.shape, bool))
    assert not np.allclose(with_padding, everything.numpy())
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x) ** 2)
    grads = tape.gradient(loss, mix.trainable_variables)
    assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
    assert np.abs(grads[1].numpy()) > 0


def test_mixed_precision_keeps_float32_weights():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        mix = ScalarMix(2, do_layer_norm=True)
        out = mix([tf.ones((1, 2, 3), tf.bfloat16), tf.zeros((1, 2, 3), tf.bfloat16)])
        assert out.dtype == tf.bfloat16 and mix.gamma.dtype == "float32"
        assert mix.scalar_weights.dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")
