"""Fine-tuning's `--set` parser and learning-rate schedule are training's: the same parser
(`models.config.override`) and the same formula (`optimization.warmup_decay_rate`) under tf_keras, checked
through both Keras versions' optimizers over a whole run. No exported module needed (fast)."""

import numpy as np
import pytest
import tensorflow as tf

from downstream.finetune import config as finetune
from downstream.finetune.schedule import warmup_linear
from models.config import OverrideError


def test_overrides_parse_to_the_field_types():
    config = finetune.apply_overrides(finetune.FinetuneConfig(), [
        "epochs=2", "learning_rate=3e-5", "train_module=true", "gpt_pair=similarity", "finetune.seed=7"])
    assert (config.epochs, config.learning_rate, config.train_module, config.gpt_pair, config.seed) == \
        (2, 3e-5, True, "similarity", 7)


def test_override_errors_name_the_key_and_the_valid_ones():
    with pytest.raises(OverrideError) as e:
        finetune.apply_overrides(finetune.FinetuneConfig(), ["epoch=2"])
    assert "--set epoch: unknown key" in str(e.value) and "epochs, batch_size, learning_rate" in str(e.value)
    with pytest.raises(OverrideError, match="expected key=value"):
        finetune.apply_overrides(finetune.FinetuneConfig(), ["epochs"])
    with pytest.raises(OverrideError, match="not an integer"):
        finetune.apply_overrides(finetune.FinetuneConfig(), ["epochs=1.5"])
    with pytest.raises(ValueError, match="gpt_pair must be"):
        finetune.apply_overrides(finetune.FinetuneConfig(), ["gpt_pair=both"])


def _rates_over_a_run(optimizer, variable, steps):
    """The learning rate each step really applied: SGD with a gradient of 1 moves the variable by it."""
    rates = []
    for _ in range(steps):
        before = float(variable.numpy()[0])
        optimizer.apply_gradients([(tf.ones_like(variable), variable)])
        rates.append(before - float(variable.numpy()[0]))
    return rates


@pytest.mark.parametrize("warmup,total", [(3, 10), (0, 6), (8, 5)])
def test_finetuning_and_training_schedules_give_the_same_rates_over_a_run(warmup, total):
    import keras
    import tf_keras

    from models.training.optimization import WarmupDecay

    steps = total + 3  # past the end too
    keras2 = tf_keras.optimizers.SGD(warmup_linear(0.5, warmup, total))
    keras3 = keras.optimizers.SGD(WarmupDecay(0.5, warmup, total, decay="linear"))
    by_keras2 = _rates_over_a_run(keras2, tf.Variable([1.0]), steps)
    by_keras3 = _rates_over_a_run(keras3, keras.Variable([1.0]), steps)
    assert by_keras2 == by_keras3
    expected = [0.5 * s / warmup if s < warmup else 0.5 * max(0.0, 1 - (s - warmup) / max(total - warmup, 1))
                for s in range(steps)]
    np.testing.assert_allclose(by_keras2, expected, atol=1e-6)
