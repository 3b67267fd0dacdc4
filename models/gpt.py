"""GPT (GPT-1): a left-to-right Transformer decoder language model, and its objective.

By default faithful to Radford et al. (2018): learned token and position embeddings, dropout,
post-layer-norm decoder blocks (causal self-attention, no cross-attention) with GELU (tanh approximation), and
the output layer tied to the token embedding (no bias). keras-hub's `TransformerDecoder` with
`use_causal_mask=True` provides the blocks. Three config fields change the recipe, measured in
`docs/learning.md`: `output_bias` (a learned bias on the logits, as BERT's MLM head has), `tie_output=False`
(an output matrix of its own) and `normalize_first` (pre-layer-norm blocks and a final layer norm, GPT-2).
A small tied model trained with Adam at a high rate collapses to a context-free unigram predictor: the
output's softmax gradient moves every row of the shared matrix along one direction (Adam gives a rare
token's small gradient a full-sized step), the inputs stop telling tokens apart, and every position's hidden
state becomes the same vector. A bias does not prevent it; an untied output does, so the tiny presets take
`tie_output=False` (with a bias, as an untied output layer usually has).

Windows have no padding (the data job packs documents), so no padding mask is needed; a right-padded batch
is still correct for the real positions, which never see later ones.

Example:
    task = GptTask(GptConfig(**PRESETS["gpt_tiny"], vocab_size=8000), max_seq_length=128)
    model = task.build_model()
    logits = model({"input_word_ids": ids})["logits"]  # [B, T, V]
"""

import dataclasses

import keras
import keras_hub
import tensorflow as tf

from models import common
from models.objective import PretrainingTask, perplexity, ratio, weighted_cross_entropy


@dataclasses.dataclass(frozen=True)
class GptConfig(common.TransformerConfig):
    """The decoder's shape: `common.TransformerConfig`'s fields (GPT-1's 40k BPE vocabulary by default), then
    GPT's."""

    vocab_size: int = 40478
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-5
    output_bias: bool = False
    tie_output: bool = True
    normalize_first: bool = False


PRESETS = {
    "gpt_tiny": common.transformer_preset(2, 128, 2, output_bias=True, tie_output=False),
    "gpt_mini": common.transformer_preset(4, 256, 4, output_bias=True, tie_output=False),
    "gpt_small": common.transformer_preset(4, 512, 8),
    "gpt_medium": common.transformer_preset(8, 512, 8),
    "gpt_base": common.transformer_preset(12, 768, 12),
    # GPT-1 as published (its 40k BPE vocabulary aside: the data's vocabulary sets vocab_size)
    "gpt_gpt1": common.transformer_preset(12, 768, 12, max_position_embeddings=512),
}

# Training recipe per preset: TrainConfig fields that `models.training.train` starts from (an explicit `--set`
# still wins). Measured on the shared corpus (docs/accelerators.md); presets not listed keep TrainConfig's.
RECIPES = {"gpt_tiny": {"learning_rate": 1e-3}}


def build_decoder(config: GptConfig) -> keras.Model:
    """ids [B, T] -> `hidden_states` [B, T, H] (last block), next-token `logits` [B, T, V], and for
    feature-based use `embedding_output` [B, T, H] (token + position, before dropout) and `layer_outputs`
    (every block's output, each [B, T, H]; training reads only `logits`)."""
    init = common.initializer(config.initializer_range)
    ids = keras.Input((None,), dtype="int32", name="input_word_ids")
    token_embedding = keras_hub.layers.ReversibleEmbedding(
        config.vocab_size, config.hidden_size, tie_weights=config.tie_output, embeddings_initializer=init,
        name="token_embedding")
    tokens = token_embedding(ids)  # [B, T, H]
    positions = keras_hub.layers.PositionEmbedding(
        config.max_position_embeddings, initializer=init, name="position_embedding")(tokens)  # [B, T, H]
    x = embedding_output = keras.layers.Add(name="embeddings_add")([tokens, positions])
    x = keras.layers.Dropout(config.dropout, name="embeddings_dropout")(x)
    layer_outputs = []
    for i in range(config.num_layers):
        x = keras_hub.layers.TransformerDecoder(
            intermediate_dim=config.intermediate_size, num_heads=config.num_heads, dropout=config.dropout,
            activation=common.activation(config.hidden_act), layer_norm_epsilon=config.layer_norm_epsilon,
            kernel_initializer=init, normalize_first=config.normalize_first, name=f"transformer_layer_{i}",
        )(x, use_causal_mask=True)  # [B, T, H]
        layer_outputs.append(x)
    if config.normalize_first:  # pre-LN blocks leave their sum unnormalised: GPT-2's final layer norm
        x = keras.layers.LayerNormalization(epsilon=config.layer_norm_epsilon, name="final_layer_norm")(x)
    logits = token_embedding(x, reverse=True)  # [B, T, V]
    if config.output_bias:
        logits = common.OutputBias(name="output_bias")(logits)  # [B, T, V]
    return keras.Model(inputs={"input_word_ids": ids},
                       outputs={"hidden_states": x, "logits": logits, "embedding_output": embedding_output,
                                "layer_outputs": layer_outputs}, name="gpt")


class GptTask(PretrainingTask):
    """Next-token cross-entropy over every position."""

    kind = "gpt"
    config_class = GptConfig

    def __init__(self, config: GptConfig, max_seq_length: int = 128):
        super().__init__(config)
        if max_seq_length > config.max_position_embeddings:
            raise ValueError(f"max_seq_length {max_seq_length} exceeds max_position_embeddings "
                             f"{config.max_position_embeddings}")
        self.max_seq_length = max_seq_length

    def build_model(self) -> keras.Model:
        return build_decoder(self.config)

    def loss_and_stats(self, model, x, y, sample_weight, training):
        outputs = model({"input_word_ids": tf.cast(x["input_word_ids"], tf.int32)}, training=training)
        loss_sum, correct, count = weighted_cross_entropy(y, outputs["logits"], sample_weight)  # [B, T, V]
        return loss_sum / tf.maximum(count, 1e-5), {"lm_loss": (loss_sum, count), "lm_correct": (correct, count)}

    def metrics(self, totals):
        return {"loss": ratio(totals, "lm_loss"), "perplexity": perplexity(totals, "lm_loss"),
                "accuracy": ratio(totals, "lm_correct")}

    def data_expectations(self):
        return {"model": "gpt", "max_seq_length": self.max_seq_length}

    def tokens_per_example(self):
        return self.max_seq_length

    def flops_per_example(self):
        c, t = self.config, self.max_seq_length
        per_token = common.transformer_flops_per_token(c.num_layers, c.hidden_size, c.intermediate_size, t)
        return 3.0 * t * (per_token + 2.0 * c.hidden_size * c.vocab_size)


TASK_CLASS = GptTask  # what models.families looks up
