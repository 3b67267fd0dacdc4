"""BERT: the Transformer encoder, its pretraining heads (masked LM + next sentence), and its objective.

Built from keras-hub layers as the paper describes the model: token + segment + position embeddings, a
layer norm and dropout, post-layer-norm Transformer encoder blocks with GELU, a pooler (dense + tanh on
`[CLS]`); the masked-LM head (dense + GELU + layer norm, output tied to the token embedding, plus a bias)
gathers only the masked positions; the next-sentence head is a dense layer on the pooled output.
`tie_output=False` gives the MLM head an output matrix of its own: the tiny presets take it, since a small
tied model trained with Adam at a high rate drifts every token embedding the same way through the output's
softmax gradient, and its inputs stop telling tokens apart (measured in `docs/learning.md`).
`next_sentence=False` drops the next-sentence head and its loss: a masked LM only, as RoBERTa trains (the
pooler stays, for fine-tuning on `[CLS]`).

Inputs use the TF-Hub names (`input_word_ids`, `input_mask`, `input_type_ids`, `masked_lm_positions`);
`schema.bert_model_inputs` maps the on-disk names to them.

Example:
    config = BertConfig(**PRESETS["bert_tiny"], vocab_size=30522)
    task = BertTask(config)
    model = task.build_model()
    outputs = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                     "masked_lm_positions": positions})  # {"mlm": [B, P, V], "nsp": [B, 2], ...}
"""

import dataclasses

import keras
import keras_hub
import tensorflow as tf

from models import common
from models.objective import PretrainingTask, ratio, weighted_cross_entropy


@dataclasses.dataclass(frozen=True)
class BertConfig(common.TransformerConfig):
    """The encoder's shape: `common.TransformerConfig`'s fields, then BERT's. `vocab_size` comes from the
    data's vocabulary."""

    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_epsilon: float = 1e-12
    tie_output: bool = True
    normalize_first: bool = False
    next_sentence: bool = True


# The sizes of google-research/bert's released models (the 24 small BERTs and base/large).
PRESETS = {
    "bert_tiny": common.transformer_preset(2, 128, 2, tie_output=False),
    "bert_mini": common.transformer_preset(4, 256, 4, tie_output=False),
    "bert_small": common.transformer_preset(4, 512, 8),
    "bert_medium": common.transformer_preset(8, 512, 8),
    "bert_base": common.transformer_preset(12, 768, 12),
    "bert_large": common.transformer_preset(24, 1024, 16),
}

# Training recipe per preset: TrainConfig fields that `models.training.train` starts from (an explicit `--set`
# still wins). Measured on the shared corpus (docs/accelerators.md); presets not listed keep TrainConfig's.
RECIPES = {"bert_tiny": {"learning_rate": 2e-3}}


def build_encoder(config: BertConfig) -> keras.Model:
    """The backbone: ids, mask, types -> `sequence_output` [B, T, H], `pooled_output` [B, H],
    `encoder_outputs` (every block's output, each [B, T, H]), `embedding_output` [B, T, H] (after the
    embeddings' layer norm, before dropout: layer 0 for feature-based use)."""
    init = common.initializer(config.initializer_range)
    ids = keras.Input((None,), dtype="int32", name="input_word_ids")
    mask = keras.Input((None,), dtype="int32", name="input_mask")
    types = keras.Input((None,), dtype="int32", name="input_type_ids")

    token_embedding = keras_hub.layers.ReversibleEmbedding(
        config.vocab_size, config.hidden_size, embeddings_initializer=init, name="token_embedding")
    tokens = token_embedding(ids)  # [B, T, H]
    positions = keras_hub.layers.PositionEmbedding(
        config.max_position_embeddings, initializer=init, name="position_embedding")(tokens)  # [B, T, H]
    segments = keras.layers.Embedding(config.type_vocab_size, config.hidden_size, embeddings_initializer=init,
                                      name="segment_embedding")(types)  # [B, T, H]
    x = keras.layers.Add(name="embeddings_add")([tokens, positions, segments])
    x = embedding_output = keras.layers.LayerNormalization(epsilon=config.layer_norm_epsilon,
                                                           name="embeddings_layer_norm")(x)
    x = keras.layers.Dropout(config.dropout, name="embeddings_dropout")(x)

    encoder_outputs = []
    for i in range(config.num_layers):
        x = keras_hub.layers.TransformerEncoder(
            intermediate_dim=config.intermediate_size, num_heads=config.num_heads, dropout=config.dropout,
            activation=common.activation(config.hidden_act), layer_norm_epsilon=config.layer_norm_epsilon,
            kernel_initializer=init, normalize_first=config.normalize_first, name=f"transformer_layer_{i}",
        )(x, padding_mask=mask)  # [B, T, H]
        encoder_outputs.append(x)
    if config.normalize_first:  # pre-LN blocks leave their sum unnormalised
        x = keras.layers.LayerNormalization(epsilon=config.layer_norm_epsilon, name="final_layer_norm")(x)
    pooled = keras.layers.Dense(config.hidden_size, activation="tanh", kernel_initializer=init,
                                name="pooled_dense")(x[:, 0, :])  # [B, H]
    return keras.Model(
        inputs={"input_word_ids": ids, "input_mask": mask, "input_type_ids": types},
        outputs={"sequence_output": x, "pooled_output": pooled, "encoder_outputs": encoder_outputs,
                 "embedding_output": embedding_output},
        name="bert_encoder")


def build_pretrainer(config: BertConfig) -> keras.Model:
    """The encoder with its masked-LM and next-sentence heads: adds input `masked_lm_positions` [B, P] and
    outputs `mlm` logits [B, P, V] and, unless `next_sentence=False`, `nsp` logits [B, 2] (index 1 = random
    next)."""
    encoder = build_encoder(config)
    init = common.initializer(config.initializer_range)
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")}
    encoded = encoder({k: inputs[k] for k in ("input_word_ids", "input_mask", "input_type_ids")})
    mlm = keras_hub.layers.MaskedLMHead(
        vocabulary_size=config.vocab_size,
        token_embedding=encoder.get_layer("token_embedding") if config.tie_output else None,
        intermediate_activation=common.activation(config.hidden_act), kernel_initializer=init,
        layer_norm_epsilon=config.layer_norm_epsilon, name="mlm_head",
    )(encoded["sequence_output"], mask_positions=inputs["masked_lm_positions"])  # [B, P, V]
    outputs = {"mlm": mlm}
    if config.next_sentence:
        outputs["nsp"] = keras.layers.Dense(2, kernel_initializer=init, name="nsp_head")(
            encoded["pooled_output"])  # [B, 2]
    return keras.Model(inputs=inputs, outputs=outputs, name="bert_pretrainer")


def encoder_of(pretrainer: keras.Model) -> keras.Model:
    return pretrainer.get_layer("bert_encoder")


class BertTask(PretrainingTask):
    """Masked LM + next-sentence prediction; the loss is their sum, as in the paper (the masked LM alone with
    `next_sentence=False`)."""

    kind = "bert"
    config_class = BertConfig

    def __init__(self, config: BertConfig, max_seq_length: int = 128, max_predictions_per_seq: int = 20):
        super().__init__(config)
        if max_seq_length > config.max_position_embeddings:
            raise ValueError(f"max_seq_length {max_seq_length} exceeds max_position_embeddings "
                             f"{config.max_position_embeddings}")
        self.max_seq_length = max_seq_length
        self.max_predictions_per_seq = max_predictions_per_seq

    def build_model(self) -> keras.Model:
        return build_pretrainer(self.config)

    def loss_and_stats(self, model, x, y, sample_weight, training):
        x = {k: tf.cast(v, tf.int32) for k, v in x.items()}
        outputs = model(x, training=training)
        mlm_loss, mlm_correct, mlm_count = weighted_cross_entropy(
            y["mlm"], outputs["mlm"], sample_weight["mlm"])  # labels [B, P], logits [B, P, V]
        loss = mlm_loss / tf.maximum(mlm_count, 1e-5)
        stats = {"mlm_loss": (mlm_loss, mlm_count), "mlm_correct": (mlm_correct, mlm_count)}
        if self.config.next_sentence:
            nsp_labels = tf.reshape(y["nsp"], [-1])  # [B]
            nsp_loss, nsp_correct, nsp_count = weighted_cross_entropy(
                nsp_labels, outputs["nsp"], tf.reshape(sample_weight["nsp"], [-1]))
            loss += nsp_loss / tf.maximum(nsp_count, 1e-5)
            stats.update({"nsp_loss": (nsp_loss, nsp_count), "nsp_correct": (nsp_correct, nsp_count)})
        return loss, stats

    def metrics(self, totals):
        values = {"mlm_accuracy": ratio(totals, "mlm_correct"), "mlm_loss": ratio(totals, "mlm_loss")}
        if self.config.next_sentence:
            values.update({"nsp_accuracy": ratio(totals, "nsp_correct"), "nsp_loss": ratio(totals, "nsp_loss")})
        values["loss"] = values["mlm_loss"] + values.get("nsp_loss", 0.0)
        return values

    def data_expectations(self):
        return {"model": "bert", "max_seq_length": self.max_seq_length,
                "max_predictions_per_seq": self.max_predictions_per_seq}

    def tokens_per_example(self):
        return self.max_seq_length

    def flops_per_example(self):
        c, t = self.config, self.max_seq_length
        encoder = t * common.transformer_flops_per_token(c.num_layers, c.hidden_size, c.intermediate_size, t)
        heads = 2.0 * self.max_predictions_per_seq * (c.hidden_size * c.hidden_size + c.hidden_size * c.vocab_size)
        return 3.0 * (encoder + heads)  # backward = 2x forward


TASK_CLASS = BertTask  # what models.families looks up
