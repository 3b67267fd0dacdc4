"""Randomness that is a pure function of names: stable hashes and counter-based uniforms.

Every random choice in the data pipeline derives from `(seed, document id, duplicate index, ...)` through
these functions, never from a stateful generator or Python's salted `hash()`, so the same input and seed
give byte-identical output whatever the runner, the number of workers, the bundle sizes or retries.

`stable_hash` (Python, BLAKE2b) seeds per-document `random.Random` generators and names keys; `stable_fraction`
turns it into a number in [0, 1) for deterministic splits and choices; `uniform` (TF, SplitMix64 finalizer) gives
per-row, per-position uniforms from per-row seeds, so a batch's values do not depend on how rows were
batched together (`uniform_at`: the same values at chosen positions only). TensorFlow is imported by `uniform` only: the jobs that need hashes alone (cleaning,
bucketing) start without it.
"""

from __future__ import annotations

import hashlib

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def stable_hash(*parts) -> int:
    """A 63-bit hash of `repr(parts)` that is the same in every process and on every machine."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def stable_fraction(*parts) -> float:
    """`stable_hash(*parts)` as a number in [0, 1): a key lands in a split when this is below its share.

    Example:
      >>> stable_fraction(0, "bank") == stable_fraction(0, "bank") and 0.0 <= stable_fraction(1, "x") < 1.0
      True
    """
    return (stable_hash(*parts) >> 10) / float(1 << 53)  # 53 bits: exact in a float, never 1.0


def _mix(x: tf.Tensor) -> tf.Tensor:
    """SplitMix64's finalizer on uint64 (wrapping arithmetic)."""
    import tensorflow as tf

    x = x + tf.constant(_GOLDEN, tf.uint64)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(30, tf.uint64))) * tf.constant(_MIX1, tf.uint64)
    x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(27, tf.uint64))) * tf.constant(_MIX2, tf.uint64)
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(31, tf.uint64)))


def uniform(row_seeds: tf.Tensor, stream: int, length: int, dtype="float32") -> tf.Tensor:
    """`[N]` int64 seeds -> `[N, length]` uniforms in [0, 1), one independent stream per `stream`.

    float32 carries 24 random bits, float64 53 (use it to rank: ties are then practically impossible).

    Example:
      >>> import tensorflow as tf
      >>> u = uniform(tf.constant([7, 7, 8], tf.int64), stream=0, length=4)
      >>> bool(tf.reduce_all(u[0] == u[1])), bool(tf.reduce_any(u[0] != u[2]))
      (True, True)
    """
    import tensorflow as tf

    counters = tf.range(length, dtype=tf.int64) + tf.constant(stream, tf.int64) * (1 << 32)  # [L]
    counters = _mix(tf.bitcast(counters, tf.uint64))  # [L]
    return _uniforms(_mix(_seeds(row_seeds))[:, tf.newaxis], counters[tf.newaxis, :], dtype)  # [N, L]


def uniform_at(row_seeds: tf.Tensor, stream: int, positions: tf.Tensor, dtype="float32") -> tf.Tensor:
    """`uniform`'s values at `[N, K]` positions only: `uniform_at(s, k, p)[i, j] == uniform(s, k, L)[i, p[i, j]]`
    for positions in `[0, L)` (for work that needs a few positions of long rows)."""
    import tensorflow as tf

    counters = tf.cast(positions, tf.int64) + tf.constant(stream, tf.int64) * (1 << 32)  # [N, K]
    counters = _mix(tf.bitcast(counters, tf.uint64))  # [N, K]
    return _uniforms(_mix(_seeds(row_seeds))[:, tf.newaxis], counters, dtype)  # [N, K]


def _seeds(row_seeds: tf.Tensor) -> tf.Tensor:
    import tensorflow as tf

    return tf.bitcast(tf.cast(row_seeds, tf.int64), tf.uint64)  # [N]


def _uniforms(mixed_seeds: tf.Tensor, mixed_counters: tf.Tensor, dtype) -> tf.Tensor:
    """Mixed seeds and counters (broadcasting) -> uniforms in [0, 1) of `dtype`."""
    import tensorflow as tf

    dtype = tf.as_dtype(dtype)
    keys = _mix(tf.bitwise.bitwise_xor(mixed_seeds, mixed_counters))
    bits = 53 if dtype == tf.float64 else 24
    top = tf.cast(tf.bitwise.right_shift(keys, tf.constant(64 - bits, tf.uint64)), dtype)
    return top * (1.0 / (1 << bits))
