"""Counter-based uniforms: `uniform_at` draws `uniform`'s values at chosen positions only."""

import numpy as np
import tensorflow as tf

from preprocessing import stable_random


def test_uniform_at_equals_uniform_at_those_positions():
    seeds = tf.constant([3, 99, 2**40, -7], tf.int64)
    positions = tf.constant([[0, 5, 127], [127, 1, 1], [64, 3, 0], [2, 2, 100]])
    for stream, dtype in ((0, tf.float64), (1, tf.float32), (2, tf.float32)):
        full = stable_random.uniform(seeds, stream, 128, dtype)  # [4, 128]
        at = stable_random.uniform_at(seeds, stream, positions, dtype)  # [4, 3]
        np.testing.assert_array_equal(at.numpy(), tf.gather(full, positions, batch_dims=1).numpy())
    assert not np.array_equal(stable_random.uniform_at(seeds, 1, positions).numpy(),
                              stable_random.uniform_at(seeds, 2, positions).numpy())
