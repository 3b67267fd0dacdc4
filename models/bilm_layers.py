"""The biLM's building blocks, as allenai/bilm-tf defines them: the character-CNN token encoder (with its
highway layers and projection) and the LSTM-with-projection layer.

Equations and initialisers follow bilm-tf (`bilm/training.py`) and TF1's `LSTMCell`, so a converter can
load bilm-tf's hdf5 weights; `BILM_TF_NAMES` maps each weight here to its name there. Every layer computes
in the Keras dtype policy's compute dtype (bf16 under `mixed_bfloat16`), except the LSTM's cell state,
which is carried in float32 across time steps.
"""

import keras
import numpy as np
import tensorflow as tf

from preprocessing.elmo_chars import CHAR_VOCAB_SIZE

# Keras weight path (inside the token encoder / one LSTM layer) -> bilm-tf hdf5 name. `{i}` is the filter or
# highway index. bilm-tf's char embedding has no row for the 0 padding id (its Batcher prepends zeros),
# and its conv kernels have a leading 1 (`[1, width, char_dim, channels]`).
BILM_TF_NAMES = {
    "char_embed/embeddings": "char_embed",
    "cnn_{i}/kernel": "CNN/W_cnn_{i}", "cnn_{i}/bias": "CNN/b_cnn_{i}",
    "highway_{i}/carry_kernel": "CNN_high_{i}/W_carry", "highway_{i}/carry_bias": "CNN_high_{i}/b_carry",
    "highway_{i}/transform_kernel": "CNN_high_{i}/W_transform",
    "highway_{i}/transform_bias": "CNN_high_{i}/b_transform",
    "projection/kernel": "CNN_proj/W_proj", "projection/bias": "CNN_proj/b_proj",
    # RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/...
    "kernel": "W_0", "bias": "B", "projection": "W_P_0",
}


def track_by_name(layer, sublayers) -> None:
    """Makes each of `sublayers` an attribute of `layer` under its name. Keras 3 layers held only in a Python
    list are invisible to `tf.train.Checkpoint`'s object graph: their weights would be saved through the
    optimizer alone, and restoring the model without the optimizer (export, fine-tuning) would skip them."""
    for sublayer in sublayers:
        setattr(layer, sublayer.name, sublayer)


@keras.saving.register_keras_serializable(package="models")
class Highway(keras.layers.Layer):
    """bilm-tf's highway layer: `g * relu(x W_t + b_t) + (1 - g) * x`, `g = sigmoid(x W_c + b_c)`.

    The carry gate's bias starts at -2.0, so a new layer mostly passes its input through.
    """

    def __init__(self, carry_bias_init: float = -2.0, **kwargs):
        super().__init__(**kwargs)
        self.carry_bias_init = carry_bias_init

    def build(self, input_shape):
        dim = input_shape[-1]
        # One initializer object per weight: an unseeded Keras 3 initializer called twice returns the same values.
        def normal():
            return keras.initializers.RandomNormal(stddev=float(np.sqrt(1.0 / dim)))

        self.carry_kernel = self.add_weight(name="carry_kernel", shape=(dim, dim), initializer=normal())
        self.carry_bias = self.add_weight(name="carry_bias", shape=(dim,),
                                          initializer=keras.initializers.Constant(self.carry_bias_init))
        self.transform_kernel = self.add_weight(name="transform_kernel", shape=(dim, dim), initializer=normal())
        self.transform_bias = self.add_weight(name="transform_bias", shape=(dim,), initializer="zeros")

    def call(self, x):  # [..., F]
        gate = tf.sigmoid(tf.matmul(x, self.carry_kernel) + self.carry_bias)  # [..., F]
        transform = tf.nn.relu(tf.matmul(x, self.transform_kernel) + self.transform_bias)  # [..., F]
        return gate * transform + (1.0 - gate) * x

    def get_config(self):
        return {**super().get_config(), "carry_bias_init": self.carry_bias_init}


@keras.saving.register_keras_serializable(package="models")
class CharCNNEncoder(keras.layers.Layer):
    """Character ids `[B, T, C]` -> token vectors `[B, T, projection_dim]` (bilm-tf's token encoder).

    Each token's characters are embedded, convolved with every filter (VALID), max-pooled over character
    positions, THEN passed through relu (bilm-tf's order), concatenated, sent through `n_highway` highway
    layers and linearly projected. Padding tokens (all ids 0) come out as zeros.

    Args:
      filters: `(width, channels)` pairs; bilm-tf: widths 1-7 with 32, 32, 64, 128, 256, 512, 1024.
      n_highway: highway layers after the CNN.
      projection_dim: output size.
      char_embedding_dim: bilm-tf: 16.
      char_vocab_size: 262 (`elmo_chars.CHAR_VOCAB_SIZE`); id 0 is padding.
    """

    def __init__(self, filters, n_highway: int, projection_dim: int, char_embedding_dim: int = 16,
                 char_vocab_size: int = CHAR_VOCAB_SIZE, **kwargs):
        super().__init__(**kwargs)
        self.filters = tuple((int(w), int(c)) for w, c in filters)
        self.n_highway = n_highway
        self.projection_dim = projection_dim
        self.char_embedding_dim = char_embedding_dim
        self.char_vocab_size = char_vocab_size
        self.char_embed = keras.layers.Embedding(
            char_vocab_size, char_embedding_dim, name="char_embed",
            embeddings_initializer=keras.initializers.RandomUniform(-1.0, 1.0))
        self.convolutions = [keras.layers.Conv1D(channels, width, padding="valid", name=f"cnn_{i}",
                                                 kernel_initializer=keras.initializers.RandomUniform(-0.05, 0.05))
                             for i, (width, channels) in enumerate(self.filters)]
        self.highways = [Highway(name=f"highway_{i}") for i in range(n_highway)]
        track_by_name(self, self.convolutions + self.highways)
        n_filters = sum(c for _, c in self.filters)
        self.projection = keras.layers.Dense(
            projection_dim, name="projection",
            kernel_initializer=keras.initializers.RandomNormal(stddev=float(np.sqrt(1.0 / n_filters))))
        self.supports_masking = True  # the output's mask: real tokens (any character id != 0)

    def build(self, input_shape):
        chars = input_shape[-1]
        if chars is not None and any(width > chars for width, _ in self.filters):
            raise ValueError(f"a filter is wider than max_characters_per_token={chars}: {self.filters}")
        self.char_embed.build((None, chars))
        for conv in self.convolutions:
            conv.build((None, chars, self.char_embedding_dim))
        n_filters = sum(c for _, c in self.filters)
        for highway in self.highways:
            highway.build((None, n_filters))
        self.projection.build((None, n_filters))

    def call(self, char_ids):  # [B, T, C] int
        batch, steps = tf.shape(char_ids)[0], tf.shape(char_ids)[1]
        flat = tf.reshape(char_ids, [-1, char_ids.shape[-1]])  # [B*T, C]
        embedded = self.char_embed(flat)  # [B*T, C, E]
        pooled = [tf.nn.relu(tf.reduce_max(conv(embedded), axis=1))  # max-pool, then relu: [B*T, channels]
                  for conv in self.convolutions]
        token = tf.concat(pooled, axis=-1)  # [B*T, F]
        for highway in self.highways:
            token = highway(token)  # [B*T, F]
        token = self.projection(token)  # [B*T, P]
        token = tf.reshape(token, [batch, steps, self.projection_dim])  # [B, T, P]
        real = self.compute_mask(char_ids)  # [B, T]
        return token * tf.cast(real, token.dtype)[..., None]

    def compute_mask(self, char_ids, mask=None):
        return tf.reduce_any(tf.not_equal(char_ids, 0), axis=-1)  # [B, T]

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.projection_dim,)

    def get_config(self):
        return {**super().get_config(), "filters": [list(f) for f in self.filters], "n_highway": self.n_highway,
                "projection_dim": self.projection_dim, "char_embedding_dim": self.char_embedding_dim,
                "char_vocab_size": self.char_vocab_size}


@keras.saving.register_keras_serializable(package="models")
class ProjectedLSTM(keras.layers.Layer):
    """One LSTM layer with a projection, equal to TF1's `LSTMCell(units, num_proj, cell_clip, proj_clip)`.

    For each step, with gates in bilm-tf's order `(i, j, f, o)` from one kernel over `[x, h_prev]`:

        i, j, f, o = split([x, h_prev] @ kernel + bias, 4)
        c = sigmoid(f + forget_bias) * c_prev + sigmoid(i) * tanh(j)     (clipped to +-cell_clip)
        h = (sigmoid(o) * tanh(c)) @ projection                          (clipped to +-proj_clip)

    The forget bias (1.0) is added at run time, not stored in `bias`. The input part of the kernel is
    applied to all steps at once before the loop. A masked step (padding, right-aligned) keeps the
    previous state and outputs zeros. The loop is a `tf.scan` over static `T`: it compiles under XLA.

    Args:
      units: cell size.
      projection_dim: output (and recurrent state `h`) size.
      cell_clip, proj_clip: clip values, or None for none.
      forget_bias: added to the forget gate's pre-activation.

    Call args: `inputs` `[B, T, D]`, `mask` `[B, T]` (optional). Returns `[B, T, projection_dim]`.
    Weights: `kernel` `[D + projection_dim, 4 * units]`, `bias` `[4 * units]`, `projection`
    `[units, projection_dim]` (bilm-tf's `W_0`, `B`, `W_P_0`).
    """

    def __init__(self, units: int, projection_dim: int, cell_clip: float | None = None,
                 proj_clip: float | None = None, forget_bias: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.projection_dim = projection_dim
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip
        self.forget_bias = forget_bias
        self.supports_masking = True

    def build(self, input_shape):
        self.input_dim = int(input_shape[-1])
        def uniform():  # bilm-tf's LSTMCell initializer; one object per weight (see Highway.build)
            return keras.initializers.RandomUniform(-0.05, 0.05)

        self.kernel = self.add_weight(name="kernel", shape=(self.input_dim + self.projection_dim, 4 * self.units),
                                      initializer=uniform())
        self.bias = self.add_weight(name="bias", shape=(4 * self.units,), initializer="zeros")
        self.projection = self.add_weight(name="projection", shape=(self.units, self.projection_dim),
                                          initializer=uniform())

    def call(self, inputs, mask=None):  # inputs [B, T, D]
        kernel = tf.convert_to_tensor(self.kernel)
        input_kernel, recurrent_kernel = kernel[:self.input_dim], kernel[self.input_dim:]
        x_gates = tf.einsum("btd,dg->btg", inputs, input_kernel) + self.bias  # [B, T, 4U]
        if mask is None:
            mask = tf.ones(tf.shape(inputs)[:2], tf.bool)
        mask = tf.cast(mask, tf.bool)  # [B, T]
        batch = tf.shape(inputs)[0]
        c0 = tf.zeros([batch, self.units], tf.float32)  # [B, U]
        h0 = tf.zeros([batch, self.projection_dim], inputs.dtype)  # [B, P]
        projection = tf.convert_to_tensor(self.projection)

        def step(state, elems):
            c_prev, h_prev = state
            gates, real = elems  # [B, 4U], [B]
            gates = tf.cast(gates + tf.matmul(h_prev, recurrent_kernel), tf.float32)  # [B, 4U]
            c, h = self._cell(gates, c_prev, projection)
            real = real[:, None]  # [B, 1]
            return tf.where(real, c, c_prev), tf.where(real, h, h_prev)

        elems = (tf.transpose(x_gates, [1, 0, 2]), tf.transpose(mask))  # [T, B, 4U], [T, B]
        _, hs = tf.scan(step, elems, initializer=(c0, h0))  # [T, B, P]
        outputs = tf.transpose(hs, [1, 0, 2])  # [B, T, P]
        return outputs * tf.cast(mask, outputs.dtype)[..., None]

    def _cell(self, gates, c_prev, projection):
        """float32 gates `[B, 4U]`, c_prev `[B, U]` -> new `c` (float32) and `h` (compute dtype)."""
        i, j, f, o = tf.split(gates, 4, axis=-1)  # each [B, U]
        c = tf.sigmoid(f + self.forget_bias) * c_prev + tf.sigmoid(i) * tf.tanh(j)  # [B, U]
        if self.cell_clip:
            c = tf.clip_by_value(c, -self.cell_clip, self.cell_clip)
        m = tf.cast(tf.sigmoid(o) * tf.tanh(c), projection.dtype)  # [B, U]
        h = tf.matmul(m, projection)  # [B, P]
        if self.proj_clip:
            h = tf.clip_by_value(h, -self.proj_clip, self.proj_clip)
        return c, h

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.projection_dim,)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "projection_dim": self.projection_dim,
                "cell_clip": self.cell_clip, "proj_clip": self.proj_clip, "forget_bias": self.forget_bias}
