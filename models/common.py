"""Small pieces the Transformer families share: the config's common fields, activations by name, the
initializer, FLOP counting."""

import dataclasses

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


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """The fields BERT's and GPT's configs share, first in both (`config.json` keeps this order), and their
    checks. A family's config adds its own fields after these and may change a default (`vocab_size`).

    Args:
      vocab_size: rows of the token embedding; the data's vocabulary sets it.
      num_layers: Transformer blocks.
      hidden_size: the width of every block; a multiple of `num_heads`.
      num_heads: attention heads per block.
      intermediate_size: the width of each block's MLP.
      hidden_act: a name in `ACTIVATIONS`.
      dropout: the rate of every dropout layer.
      max_position_embeddings: rows of the learned position embedding (the longest input).
    """

    vocab_size: int = 30522
    num_layers: int = 12
    hidden_size: int = 768
    num_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu_approximate"
    dropout: float = 0.1
    max_position_embeddings: int = 512

    def __post_init__(self):
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}")
        activation(self.hidden_act)


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
