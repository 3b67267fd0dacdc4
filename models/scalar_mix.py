"""ELMo's scalar mix: a learned, softmax-weighted sum of a model's layers, times a learned scale.

Owns `ScalarMix`, the task-specific combination of biLM layers from Peters et al. (2018), eq. 1:

    mix = gamma * sum_k softmax(s)_k * h_k

as allenai/bilm-tf's `weight_layers` and allennlp's `ScalarMix` compute it, with the optional layer
normalisation of each `h_k` over the unmasked positions first (`do_layer_norm=True`). Like both
originals, that normalisation uses ONE mean and variance per layer over all unmasked positions and
features of the batch (not per token), so its output depends on the batch; most users leave it off.
Any downstream model can use the layer; the exported biLM (`elmo` output) does.

Also owns the two rules every ELMo mix shares, whatever Keras runs it:
  - `mix_layers(layers, scalar_weights, gamma)`: the formula above (no layer norm), in the layers' dtype;
    `ScalarMix` here (Keras 3) and the fine-tuning heads' `TfKerasScalarMix` (tf_keras) both call it;
  - `elmo_layers(outputs)` / `elmo_layer_names(outputs)`: the mixed layers of a biLM, lowest first:
    `word_emb` doubled to the LSTM width (`word_emb ‖ word_emb`), then `lstm_outputs1..K`; the export's
    `elmo` output, the heads' task mix and `downstream.features` all take their layer list from here.
"""

import keras
from keras import ops

WORD_EMB, LSTM_OUTPUTS = "word_emb", "lstm_outputs"


def elmo_layer_names(outputs) -> list[str]:
    """The names of a biLM's mixed layers, lowest first: `word_emb`, `lstm_outputs1`, ..., from the
    output names present in `outputs` (a dict or its keys)."""
    lstm = sorted((k for k in outputs if k.startswith(LSTM_OUTPUTS) and k[len(LSTM_OUTPUTS):].isdigit()),
                  key=lambda k: int(k[len(LSTM_OUTPUTS):]))
    return [WORD_EMB] + lstm


def elmo_layers(outputs: dict) -> list:
    """A biLM's outputs -> the mix's inputs, lowest first: `word_emb ‖ word_emb` `[..., 2P]`, then each
    `lstm_outputsK` `[..., 2L]` (ELMo doubles the context-independent layer so every layer is 2L wide)."""
    return [ops.concatenate([outputs[name]] * 2, axis=-1) if name == WORD_EMB else outputs[name]
            for name in elmo_layer_names(outputs)]


def mix_layers(layers: list, scalar_weights, gamma):
    """`gamma * sum_k softmax(scalar_weights)_k * layers[k]`, computed in the layers' dtype (the weights
    are softmaxed in their own, float32)."""
    weights = ops.softmax(ops.convert_to_tensor(scalar_weights), axis=0)  # [N]
    dtype = layers[0].dtype
    mixed = 0.0
    for k, tensor in enumerate(layers):
        mixed = mixed + ops.cast(weights[k], dtype) * tensor  # [B, T, D]
    return ops.cast(ops.convert_to_tensor(gamma), dtype) * mixed


@keras.saving.register_keras_serializable(package="models")
class ScalarMix(keras.layers.Layer):
    """Softmax-normalised weighted sum of N same-shape tensors, scaled by a learned gamma.

    Args:
      num_layers: N, the number of tensors mixed.
      do_layer_norm: normalise each tensor over the unmasked positions before mixing.
      initial_scalar_parameters: the N pre-softmax weights' initial values (default zeros: an average).
      initial_gamma: the scale's initial value.
      epsilon: added to the variance (bilm-tf: 1e-12).

    Call args:
      inputs: a list of N tensors `[B, T, D]`.
      mask: optional `[B, T]` (bool or 0/1); only used by the layer normalisation.

    Weights (stable names, for checkpoints and export): `scalar_weights` `[N]`, `gamma` `[]`.
    Both stay float32 under a mixed-precision policy; the mix is computed in the inputs' dtype.

    Example:
      >>> mix = ScalarMix(3)
      >>> mix([ops.ones((2, 4, 8)), ops.zeros((2, 4, 8)), ops.ones((2, 4, 8))]).shape
      TensorShape([2, 4, 8])
    """

    def __init__(self, num_layers: int, do_layer_norm: bool = False, initial_scalar_parameters=None,
                 initial_gamma: float = 1.0, epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        if initial_scalar_parameters is not None and len(initial_scalar_parameters) != num_layers:
            raise ValueError(f"initial_scalar_parameters has {len(initial_scalar_parameters)} values, "
                             f"expected num_layers={num_layers}")
        self.num_layers = num_layers
        self.do_layer_norm = do_layer_norm
        self.initial_scalar_parameters = (None if initial_scalar_parameters is None
                                          else [float(v) for v in initial_scalar_parameters])
        self.initial_gamma = float(initial_gamma)
        self.epsilon = epsilon
        self.supports_masking = True

    def build(self, input_shape):
        initial = self.initial_scalar_parameters or [0.0] * self.num_layers
        self.scalar_weights = self.add_weight(
            name="scalar_weights", shape=(self.num_layers,), autocast=False,
            initializer=keras.initializers.Constant(initial))
        self.gamma = self.add_weight(name="gamma", shape=(), autocast=False,
                                     initializer=keras.initializers.Constant(self.initial_gamma))

    def call(self, inputs, mask=None):
        if len(inputs) != self.num_layers:
            raise ValueError(f"ScalarMix got {len(inputs)} tensors, expected {self.num_layers}")
        if isinstance(mask, (list, tuple)):  # Keras passes one mask per input
            mask = next((m for m in mask if m is not None), None)
        if self.do_layer_norm:
            inputs = [self._layer_norm(tensor, mask) for tensor in inputs]  # each [B, T, D]
        return mix_layers(list(inputs), self.scalar_weights, self.gamma)

    def _layer_norm(self, tensor, mask):
        """allennlp's `_do_layer_norm`: one mean and variance over every unmasked element, in float32."""
        x = ops.cast(tensor, "float32")  # [B, T, D]
        if mask is None:
            mask = ops.ones(ops.shape(x)[:-1], "float32")
        mask = ops.cast(mask, "float32")[..., None]  # [B, T, 1]
        count = ops.maximum(ops.sum(mask) * ops.cast(ops.shape(x)[-1], "float32"), 1.0)
        mean = ops.sum(x * mask) / count
        variance = ops.sum(ops.square((x - mean) * mask)) / count
        return ops.cast((x - mean) / ops.sqrt(variance + self.epsilon), tensor.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def compute_mask(self, inputs, mask=None):
        if isinstance(mask, (list, tuple)):
            return next((m for m in mask if m is not None), None)
        return mask

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers, "do_layer_norm": self.do_layer_norm,
                "initial_scalar_parameters": self.initial_scalar_parameters,
                "initial_gamma": self.initial_gamma, "epsilon": self.epsilon}
