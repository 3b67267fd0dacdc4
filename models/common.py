"""Small pieces the Transformer families share: activations by name, the initializer, FLOP counting."""

import keras


@keras.saving.register_keras_serializable(package="models")
def gelu_approximate(x):
    """GELU with the tanh approximation (google-research BERT's `gelu`, GPT-1)."""
    return keras.activations.gelu(x, approximate=True)


@keras.saving.register_keras_serializable(package="models")
def gelu_exact(x):
    """GELU with the error function (HuggingFace's `gelu`)."""
    return keras.activations.gelu(x, approximate=False)


ACTIVATIONS = {"gelu": gelu_exact, "gelu_approximate": gelu_approximate, "relu": "relu"}


def activation(name: str):
    if name not in ACTIVATIONS:
        raise ValueError(f"hidden_act must be one of {', '.join(ACTIVATIONS)}; got {name!r}")
    return ACTIVATIONS[name]


def check_transformer_shape(hidden_size: int, num_heads: int, hidden_act: str) -> None:
    """The checks every Transformer config makes in `__post_init__`."""
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
    activation(hidden_act)


def transformer_preset(layers: int, hidden: int, heads: int, **fields) -> dict:
    """A preset's fields: `layers` blocks of width `hidden` with `heads` heads and a 4x MLP."""
    return {"num_layers": layers, "hidden_size": hidden, "num_heads": heads, "intermediate_size": 4 * hidden,
            **fields}


@keras.saving.register_keras_serializable(package="models")
class OutputBias(keras.layers.Layer):
    """A learned bias over the last axis (the vocabulary), zero-initialised: the output bias of a language
    model whose logits come from keras-hub's `ReversibleEmbedding`, tied or not, which has none of its own
    (BERT's MLM head has one). Named `bias`, so weight decay leaves it alone."""

    def build(self, input_shape):
        self.bias = self.add_weight(shape=(input_shape[-1],), initializer="zeros", name="bias")

    def call(self, logits):
        return logits + keras.ops.cast(self.bias, logits.dtype)


def initializer(stddev: float):
    return keras.initializers.TruncatedNormal(stddev=stddev)


def transformer_flops_per_token(num_layers: int, hidden: int, intermediate: int, seq_len: int) -> float:
    """Forward matmul FLOPs per token of a Transformer stack: QKV + output projections (4 d^2), the MLP
    (2 d f), attention scores and the weighted sum (2 T d), each multiply-add counted as 2 FLOPs."""
    return 2.0 * num_layers * (4 * hidden * hidden + 2 * hidden * intermediate + 2 * seq_len * hidden)
