"""ELMo's bidirectional language model (biLM): its config and presets, the Keras model, and its
pretraining task.

Owns `BiLMConfig`, `PRESETS`, `BiLM` and `BiLMTask`. As in allenai/bilm-tf: a character-CNN token
encoder shared by both directions, a forward and a backward stack of LSTMs with projections (a residual
connection around every layer but the first, dropout on each layer's input and before the softmax) and
one softmax shared by both directions. The backward LM reads each row reversed within its length
(`tf.reverse_sequence`), so padding may only be on the right. Position t of the forward output has read
tokens 0..t and predicts token t+1; position t of the backward output has read tokens t..end and predicts
token t-1 (the data's `y["forward"]` / `y["backward"]`, see `preprocessing/lm_windows.py`).

Unlike bilm-tf, which carries the LSTM states from one batch to the next over a continuous stream, each
window starts from zero states: windows are shuffled, and nothing is carried between steps.
"""

import dataclasses

import keras
import tensorflow as tf

from models import objective as task_lib
from models.bilm_layers import CharCNNEncoder, ProjectedLSTM, track_by_name
from models.bilm_softmax import SAMPLERS, LMSoftmax
from preprocessing.elmo_chars import CHAR_VOCAB_SIZE, MAX_CHARACTERS_PER_TOKEN

ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclasses.dataclass(frozen=True)
class BiLMConfig:
    """Shape of a biLM. Defaults are ELMo's original model (`bilm_original`).

    Args:
      vocab_size: softmax size; set it from the data (`metadata.json` "vocab"."size").
      char_embedding_dim: character embedding size (bilm-tf: 16).
      filters: the char CNN's `(width, channels)` pairs.
      max_characters_per_token: character ids per token (the data's: 50).
      n_highway: highway layers after the CNN.
      projection_dim: token-encoder output size (`word_emb`).
      cell_size: LSTM cell size.
      lstm_projection_dim: LSTM output size, and the softmax's input size.
      n_lstm_layers: LSTM layers per direction.
      cell_clip, proj_clip: LSTM clip values (0 = none).
      dropout: rate on every LSTM layer's input and before the softmax.
      residual: add each LSTM layer's input to its output, from the second layer on.
      softmax: "full", or "sampled" (training only; evaluation is always full).
      num_sampled: candidates of the sampled softmax.
      sampler: its proposal, "log_uniform" (bilm-tf) or "uniform"; see `models/bilm_softmax.py`.
    """

    vocab_size: int = 30522
    char_embedding_dim: int = 16
    filters: tuple[tuple[int, int], ...] = ELMO_FILTERS
    max_characters_per_token: int = MAX_CHARACTERS_PER_TOKEN
    n_highway: int = 2
    projection_dim: int = 512
    cell_size: int = 4096
    lstm_projection_dim: int = 512
    n_lstm_layers: int = 2
    cell_clip: float = 3.0
    proj_clip: float = 3.0
    dropout: float = 0.1
    residual: bool = True
    softmax: str = "sampled"
    num_sampled: int = 8192
    sampler: str = "log_uniform"

    def __post_init__(self):
        object.__setattr__(self, "filters", tuple((int(w), int(c)) for w, c in self.filters))
        for name in ("vocab_size", "char_embedding_dim", "max_characters_per_token", "projection_dim",
                     "cell_size", "lstm_projection_dim", "n_lstm_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.filters or any(w < 1 or c < 1 or w > self.max_characters_per_token for w, c in self.filters):
            raise ValueError(f"filters must be (width, channels) pairs with 1 <= width <= "
                             f"max_characters_per_token={self.max_characters_per_token}: {self.filters}")
        if self.n_highway < 0 or self.cell_clip < 0 or self.proj_clip < 0:
            raise ValueError("n_highway, cell_clip and proj_clip must be >= 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.softmax not in ("full", "sampled"):
            raise ValueError(f"softmax must be 'full' or 'sampled', got {self.softmax!r}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if self.softmax == "sampled" and self.num_sampled < 1:
            raise ValueError(f"num_sampled must be >= 1 for the sampled softmax, got {self.num_sampled}")

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "BiLMConfig":
        if name not in PRESETS:
            raise ValueError(f"unknown biLM preset {name!r}; choose from {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


_ELMO = {"cell_clip": 3.0, "proj_clip": 3.0, "dropout": 0.1}  # bilm-tf's clips and dropout
# small, medium, original: the published ELMo models (13.6M, 28.0M, 93.6M parameters without the softmax).
PRESETS: dict[str, dict] = {
    # tiny and mini: for tests, demos and short runs (tiny's 128-wide states match bert_tiny's hidden size).
    "bilm_tiny": dict(char_embedding_dim=16, filters=ELMO_FILTERS[:4], n_highway=1, projection_dim=128,
                      cell_size=512, lstm_projection_dim=128, softmax="full", **_ELMO),
    "bilm_mini": dict(filters=ELMO_FILTERS[:5], n_highway=1, projection_dim=256, cell_size=1024,
                      lstm_projection_dim=256, softmax="full", **_ELMO),
    "bilm_small": dict(filters=ELMO_FILTERS, n_highway=1, projection_dim=128, cell_size=1024,
                       lstm_projection_dim=128, softmax="full", **_ELMO),
    "bilm_medium": dict(filters=ELMO_FILTERS, n_highway=1, projection_dim=256, cell_size=2048,
                        lstm_projection_dim=256, softmax="sampled", num_sampled=8192, **_ELMO),
    "bilm_original": dict(filters=ELMO_FILTERS, n_highway=2, projection_dim=512, cell_size=4096,
                          lstm_projection_dim=512, softmax="sampled", num_sampled=8192, **_ELMO),
}

# Training recipe per preset: TrainConfig fields that `models.training.train` starts from (an explicit `--set`
# still wins). Measured on the shared corpus (docs/accelerators.md); presets not listed keep TrainConfig's.
RECIPES = {"bilm_tiny": {"learning_rate": 2e-3}}


def parameter_count(config: BiLMConfig, include_softmax: bool = True) -> int:
    """Weights of `BiLM(config)`, counted from the config (ELMo's published figures exclude the softmax)."""
    n_filters = sum(c for _, c in config.filters)
    encoder = (CHAR_VOCAB_SIZE * config.char_embedding_dim
               + sum(w * config.char_embedding_dim * c + c for w, c in config.filters)
               + config.n_highway * 2 * (n_filters * n_filters + n_filters)
               + n_filters * config.projection_dim + config.projection_dim)
    lstms = 0
    for layer in range(config.n_lstm_layers):
        inputs = config.projection_dim if layer == 0 else config.lstm_projection_dim
        gates = 4 * config.cell_size
        lstms += (inputs + config.lstm_projection_dim) * gates + gates + config.cell_size * config.lstm_projection_dim
    softmax = config.vocab_size * (config.lstm_projection_dim + 1)
    return encoder + 2 * lstms + (softmax if include_softmax else 0)


def bilm_tf_options(config: BiLMConfig, max_seq_length: int | None) -> dict:
    """The model's shape in bilm-tf's `options.json` layout (shipped with the export; read and written by
    `models.convert`)."""
    return {"char_cnn": {"activation": "relu", "embedding": {"dim": config.char_embedding_dim},
                         "filters": [list(f) for f in config.filters], "max_characters_per_token":
                         config.max_characters_per_token, "n_characters": 262, "n_highway": config.n_highway},
            "lstm": {"cell_clip": config.cell_clip, "dim": config.cell_size, "n_layers": config.n_lstm_layers,
                     "proj_clip": config.proj_clip, "projection_dim": config.lstm_projection_dim,
                     "use_skip_connections": config.residual},
            "dropout": config.dropout, "n_tokens_vocab": config.vocab_size,
            "unroll_steps": max_seq_length, "bidirectional": True}


@keras.saving.register_keras_serializable(package="models")
class BiLM(keras.Model):
    """The biLM: `{"char_ids": int32 [B, T, C]}` -> dict of hidden states (see `call`).

    Layers (stable names): `char_cnn` (the token encoder), `forward_lstm_{i}`, `backward_lstm_{i}`,
    `dropout`, `softmax` (an `LMSoftmax`, applied by the task: `model.softmax(hidden[, labels])`).

    Example:
      >>> model = BiLM(BiLMConfig.from_preset("bilm_tiny", vocab_size=100))
      >>> out = model({"char_ids": tf.ones([2, 5, 50], tf.int32)})
      >>> out["lstm_outputs2"].shape, model.softmax(out["forward"]).shape
      (TensorShape([2, 5, 256]), TensorShape([2, 5, 100]))
    """

    def __init__(self, config: BiLMConfig, **kwargs):
        super().__init__(**kwargs)
        self.model_config = config
        self.char_cnn = CharCNNEncoder(config.filters, config.n_highway, config.projection_dim,
                                       config.char_embedding_dim, CHAR_VOCAB_SIZE, name="char_cnn")
        self.forward_lstms = [self._lstm(f"forward_lstm_{i}") for i in range(config.n_lstm_layers)]
        self.backward_lstms = [self._lstm(f"backward_lstm_{i}") for i in range(config.n_lstm_layers)]
        track_by_name(self, self.forward_lstms + self.backward_lstms)
        self.dropout = keras.layers.Dropout(config.dropout, name="dropout")
        self.softmax = LMSoftmax(config.vocab_size, config.num_sampled if config.softmax == "sampled" else 0,
                                 config.sampler, name="softmax")

    def _lstm(self, name: str) -> ProjectedLSTM:
        c = self.model_config
        return ProjectedLSTM(c.cell_size, c.lstm_projection_dim, c.cell_clip or None, c.proj_clip or None,
                             name=name)

    def build(self, input_shape=None):
        c = self.model_config
        self.char_cnn.build((None, None, c.max_characters_per_token))
        for lstms in (self.forward_lstms, self.backward_lstms):
            for i, lstm in enumerate(lstms):
                lstm.build((None, None, c.projection_dim if i == 0 else c.lstm_projection_dim))
        self.softmax.build((None, c.lstm_projection_dim))
        self.built = True

    def call(self, inputs, training=False):
        """Returns `word_emb` [B, T, P], `lstm_outputs{k}` [B, T, 2L] for k = 1..n_lstm_layers (forward ‖
        backward outputs of layer k), `mask` [B, T] (bool, real tokens), and `forward` / `backward`
        [B, T, L]: the top layer's outputs after dropout, the softmax inputs that predict `y[...]`."""
        char_ids = inputs["char_ids"]  # [B, T, C]
        mask = self.char_cnn.compute_mask(char_ids)  # [B, T] real tokens
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)  # [B]
        word_emb = self.char_cnn(char_ids)  # [B, T, P]
        forward = self._stack(self.forward_lstms, word_emb, mask, training)  # n x [B, T, L]

        def reverse(x):  # [B, T, ...] reversed within each row's length; padding stays on the right
            return tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)

        backward = [reverse(h) for h in self._stack(self.backward_lstms, reverse(word_emb), mask, training)]
        outputs = {"word_emb": word_emb, "mask": mask,
                   "forward": self.dropout(forward[-1], training=training),
                   "backward": self.dropout(backward[-1], training=training)}
        for k, (f, b) in enumerate(zip(forward, backward), start=1):
            outputs[f"lstm_outputs{k}"] = tf.concat([f, b], axis=-1)  # [B, T, 2L]
        return outputs

    def _stack(self, lstms, x, mask, training) -> list:
        """One direction's LSTM layers over `x` [B, T, P] (time already reversed for the backward LM)."""
        outputs = []
        for i, lstm in enumerate(lstms):
            inputs = self.dropout(x, training=training)  # bilm-tf's DropoutWrapper(input_keep_prob)
            x = lstm(inputs, mask=mask)  # [B, T, L]
            if self.model_config.residual and i > 0:
                x = x + inputs  # bilm-tf's ResidualWrapper, inside the dropout
            outputs.append(x)
        return outputs

    def embed(self, char_ids):
        """The export outputs (like TF-Hub's `elmo/2`): `word_emb`, `lstm_outputs1..n`, `mask`."""
        outputs = self({"char_ids": char_ids}, training=False)
        return {k: v for k, v in outputs.items() if k not in ("forward", "backward")}

    def get_config(self):
        return {**super().get_config(), "config": dataclasses.asdict(self.model_config)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        model_config = BiLMConfig(**config.pop("config"))
        return cls(model_config, **{k: v for k, v in config.items() if k in ("name", "trainable", "dtype")})


class BiLMTask(task_lib.PretrainingTask):
    """Pretraining objective of the biLM: the mean of the forward and backward LMs' cross-entropies.

    Args:
      config: a `BiLMConfig`.
      max_seq_length: the data's window length T (its `metadata.json` config), when known: checked
        against the data, and needed for `tokens_per_example` / `flops_per_example`.
    """

    kind = "bilm"
    config_class = BiLMConfig
    directions = ("forward", "backward")

    def __init__(self, config: BiLMConfig, max_seq_length: int | None = None):
        super().__init__(config)
        self.max_seq_length = max_seq_length

    def build_model(self) -> BiLM:
        model = BiLM(self.config, name="bilm")
        model.build({"char_ids": (None, None, self.config.max_characters_per_token)})
        return model

    def prepare_batch(self, x, y, sample_weight):
        return {"char_ids": x["char_ids"]}, y, sample_weight  # x["tokens"] (strings) cannot enter XLA

    def loss_and_stats(self, model, x, y, sample_weight, training: bool):
        outputs = model(x, training=training)
        sampled = training and self.config.softmax == "sampled"
        losses, stats = [], {}
        for direction in self.directions:
            hidden, labels, weights = outputs[direction], y[direction], sample_weight[direction]
            if sampled:  # the target is column 0 of the sampled logits
                logits = model.softmax(hidden, labels)  # [B, T, 1 + S]
                labels = tf.zeros_like(labels)
            else:
                logits = model.softmax(hidden)  # [B, T, V]
            loss_sum, correct, count = task_lib.weighted_cross_entropy(labels, logits, weights)
            losses.append(tf.math.divide_no_nan(loss_sum, count))
            stats[f"{direction}_loss"] = (loss_sum, count)
            if not sampled:
                stats[f"{direction}_accuracy"] = (correct, count)
        return tf.add_n(losses) / len(losses), stats

    def metrics(self, totals):
        result = {}
        means = []
        for direction in self.directions:
            means.append(task_lib.ratio(totals, f"{direction}_loss"))
            result[f"{direction}_perplexity"] = task_lib.perplexity(totals, f"{direction}_loss")
            if f"{direction}_accuracy" in totals:
                result[f"{direction}_accuracy"] = task_lib.ratio(totals, f"{direction}_accuracy")
        result["loss"] = sum(means) / len(means)
        result["perplexity"] = task_lib.perplexity({"loss": (result["loss"], 1.0)}, "loss")
        return result

    def data_expectations(self):
        return {"model": "bilm", "max_seq_length": self.max_seq_length}

    def tokens_per_example(self) -> int:
        return self._steps()

    def flops_per_example(self) -> float:
        """3 x forward matmul FLOPs (2 per multiply-add) of one window, softmax as trained."""
        c = self.config
        n_filters = sum(ch for _, ch in c.filters)
        chars = c.max_characters_per_token
        encoder = (sum(2 * w * c.char_embedding_dim * ch * (chars - w + 1) for w, ch in c.filters)
                   + c.n_highway * 2 * 2 * n_filters * n_filters + 2 * n_filters * c.projection_dim)
        lstm = 0
        for layer in range(c.n_lstm_layers):
            inputs = c.projection_dim if layer == 0 else c.lstm_projection_dim
            lstm += 2 * (inputs + c.lstm_projection_dim) * 4 * c.cell_size + 2 * c.cell_size * c.lstm_projection_dim
        classes = c.num_sampled + 1 if c.softmax == "sampled" else c.vocab_size
        per_token = encoder + 2 * lstm + 2 * 2 * c.lstm_projection_dim * classes
        return 3.0 * per_token * self._steps()

    def _steps(self) -> int:
        if not self.max_seq_length:
            raise ValueError("BiLMTask needs max_seq_length (the data's window length) for per-example counts")
        return self.max_seq_length


TASK_CLASS = BiLMTask  # what models.families looks up
