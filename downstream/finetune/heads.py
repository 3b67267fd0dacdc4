"""Task models over the exported modules, in `tf_keras` (what `hub.KerasLayer` fine-tunes in).

`build_model(task, backbone, num_labels, config)` returns a `tf_keras.Model` whose inputs are those of
`downstream/finetune/inputs.py` and whose output is `logits`:
  - BERT (Devlin et al. 2018): classify / pair / choice over `pooled_output` (`[CLS]`) with dropout and one
    dense layer (choice: one score per `[CLS] context [SEP] choice [SEP]`, softmax over the choices);
    tagging: a dense layer on `sequence_output`, read at each word's first piece; SQuAD: start and end
    vectors on `sequence_output` (`start_logits`, `end_logits`).
  - GPT (Radford et al. 2018): the last block's state at the extract token, one dense layer; similarity adds
    the two orders' states; choice scores each sequence; the auxiliary LM loss on the module's logits,
    weighted `lm_coef`, is added to the task loss (`AuxLanguageModelLoss`).
  - biLM (Peters et al. 2018): the module frozen and the task's own `TfKerasScalarMix` (softmax weights +
    gamma) over the module's layers (`models.scalar_mix.elmo_layers`: word_emb ‖ word_emb, lstm_outputs1,
    lstm_outputs2); with `train_module` the whole module trains and its own `elmo` mix is used. Classify: the mix mean-pooled over real tokens, then a dense layer;
    pairs: [u, v, u * v, u - v]; tagging: a small BiLSTM over `[x_k ; ELMo_k]`, where `x_k` is the task
    model's own context-independent word vector (`TaskWordSplit` + `TaskWords`: the training set's words, case
    kept, an embedding trained from scratch, plus a casing class, `WordCasing`; `task_word_dim=0` leaves both
    out),
    as the paper adds ELMo to a task model that has its own word representations; `elmo=False` leaves ELMo
    out (the paper's baseline, a control).
Layers have stable names and `get_config` (no Lambda layers), so the model saves as a SavedModel.
"""

import tensorflow as tf
import tf_keras

from models.scalar_mix import elmo_layer_names, elmo_layers, mix_layers

SUPPORTED = {"bert": ("classify", "pair", "tag", "squad", "choice"), "gpt": ("classify", "pair", "choice"),
             "bilm": ("classify", "pair", "tag")}


class FoldSequences(tf_keras.layers.Layer):
    """`[B, S, ...]` -> `[B * S, ...]`."""

    def call(self, x):
        return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], 0))


class UnfoldSequences(tf_keras.layers.Layer):
    """`[B * S, ...]` -> `[B, S, ...]`."""

    def __init__(self, sequences: int, **kwargs):
        super().__init__(**kwargs)
        self.sequences = sequences

    def call(self, x):
        return tf.reshape(x, tf.concat([[-1, self.sequences], tf.shape(x)[1:]], 0))

    def get_config(self):
        return {**super().get_config(), "sequences": self.sequences}


class GatherPositions(tf_keras.layers.Layer):
    """`(states [N, T, H], index [N])` -> `states[n, index[n]]` `[N, H]`."""

    def call(self, inputs):
        states, index = inputs
        return tf.gather(states, tf.cast(index, tf.int32), batch_dims=1)


class AuxLanguageModelLoss(tf_keras.layers.Layer):
    """Adds `coef` * the mean next-token cross-entropy (where `weights` is 1) as a model loss; passes
    `features` through."""

    def __init__(self, coef: float, **kwargs):
        super().__init__(**kwargs)
        self.coef = coef

    def call(self, inputs):
        features, logits, ids, weights = inputs  # [N, H], [N, T, V], [N, T], [N, T]
        targets = tf.concat([ids[:, 1:], tf.zeros_like(ids[:, :1])], axis=1)  # [N, T]: position t -> t + 1
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.cast(targets, tf.int32), logits)  # [N, T]
        weights = tf.cast(weights, losses.dtype)
        loss = tf.reduce_sum(losses * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)
        self.add_loss(self.coef * loss)
        self.add_metric(loss, name="lm_loss")
        return features

    def get_config(self):
        return {**super().get_config(), "coef": self.coef}


class TfKerasScalarMix(tf_keras.layers.Layer):
    """ELMo's `gamma * sum_k softmax(s)_k h_k` over a list of same-shape tensors (Peters et al., eq. 1), as a
    tf_keras layer (what a `hub.KerasLayer` model is built of); the formula is `models.scalar_mix.mix_layers`,
    the one the Keras 3 `ScalarMix` of the export uses. Weights: `scalar_weights` `[N]`, `gamma` `[]`."""

    def build(self, input_shape):
        self.scalars = self.add_weight(name="scalar_weights", shape=(len(input_shape),), initializer="zeros")
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")

    def call(self, inputs):
        return mix_layers(list(inputs), self.scalars, self.gamma)


class TaskWordSplit(tf_keras.layers.Layer):
    """`[B]` sentences -> `[B, T]` words ("" padding), split as the biLM module splits them (BERT's basic
    tokenizer) but with case kept, so position t is the module's t-th word. `TaskWords` and `WordCasing`
    read its output, so a sentence is split once."""

    def __init__(self, length: int, **kwargs):
        super().__init__(**kwargs)
        self.length = length

    def call(self, text):
        words = _cased_splitter()(text)  # [B, (W)]
        return words.to_tensor(default_value="", shape=[None, self.length])  # [B, T]

    def get_config(self):
        return {**super().get_config(), "length": self.length}


class TaskWords(tf_keras.layers.Layer):
    """`[B, T]` words (`TaskWordSplit`) -> `[B, T]` ids in the task's own vocabulary (0 padding, 1 a word not
    in it, then `vocabulary` in order)."""

    def __init__(self, vocabulary, **kwargs):
        super().__init__(**kwargs)
        self.vocabulary = list(vocabulary)
        self.lookup = tf_keras.layers.StringLookup(vocabulary=self.vocabulary, mask_token="", num_oov_indices=1)

    def call(self, words):
        return self.lookup(words)  # [B, T]

    def get_config(self):
        return {**super().get_config(), "vocabulary": self.vocabulary}


class WordCasing(tf_keras.layers.Layer):
    """`[B, T]` words (`TaskWordSplit`) -> `[B, T]` casing classes (Collobert et al. 2011's caps feature):
    0 padding, 1 no upper-case letter, 2 first letter upper-case, 3 all letters upper-case (two or more),
    4 upper-case inside only. An uncased module never sees case; this gives it back for every word, seen in
    training or not."""

    CLASSES = 5

    def call(self, words):
        has_upper = tf.strings.regex_full_match(words, r".*\p{Lu}.*")
        first_upper = tf.strings.regex_full_match(words, r"\p{Lu}.*")
        all_upper = tf.strings.regex_full_match(words, r"[^\p{Ll}]*\p{Lu}[^\p{Ll}]*\p{Lu}[^\p{Ll}]*")
        classes = tf.where(all_upper, 3, tf.where(first_upper, 2, tf.where(has_upper, 4, 1)))
        return tf.where(words == "", 0, classes)  # [B, T]


def _cased_splitter():
    """`[B]` sentences -> `[B, (W)]` words, cased: the split `TaskWordSplit` and `task_vocabulary` share."""
    from preprocessing.basic_tokenizer import BasicTokenizer

    basic = BasicTokenizer(lower_case=False)
    return lambda text: basic.split_words(basic.normalize(text))


class ElmoLayers(tf_keras.layers.Layer):
    """The biLM module's outputs (a dict) -> the mix's layer list, lowest first (`word_emb ‖ word_emb`,
    `lstm_outputs1..K`), by `models.scalar_mix.elmo_layers`, the rule the export's `elmo` mix follows."""

    def call(self, outputs):
        return elmo_layers(outputs)


class MaskedMean(tf_keras.layers.Layer):
    """`(x [N, T, D] zero past each length, lengths [N])` -> the mean over real tokens `[N, D]`."""

    def call(self, inputs):
        x, lengths = inputs
        return tf.reduce_sum(x, axis=1) / tf.maximum(tf.cast(lengths, x.dtype), 1.0)[:, None]


class FixLength(tf_keras.layers.Layer):
    """`[N, t, D]` -> `[N, length, D]`, cut or zero-padded on the right (labels have a fixed length)."""

    def __init__(self, length: int, **kwargs):
        super().__init__(**kwargs)
        self.length = length

    def call(self, x):
        x = x[:, :self.length]
        return tf.pad(x, [[0, 0], [0, self.length - tf.shape(x)[1]], [0, 0]])

    def get_config(self):
        return {**super().get_config(), "length": self.length}


class PairFeatures(tf_keras.layers.Layer):
    """`[N, 2, D]` -> `[u, v, u * v, u - v]` `[N, 4D]`."""

    def call(self, x):
        u, v = x[:, 0], x[:, 1]
        return tf.concat([u, v, u * v, u - v], axis=-1)


class SumSequences(tf_keras.layers.Layer):
    def call(self, x):
        return tf.reduce_sum(x, axis=1)


class SplitLogits(tf_keras.layers.Layer):
    """`[N, T, 2]` -> `(start [N, T], end [N, T])`, padding positions pushed to -10000."""

    def call(self, inputs):
        logits, mask = inputs
        penalty = (1.0 - tf.cast(mask, logits.dtype)) * -10000.0
        return logits[..., 0] + penalty, logits[..., 1] + penalty


def _dense(units: int, name: str, config) -> tf_keras.layers.Dense:
    return tf_keras.layers.Dense(units, name=name,
                                 kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02, seed=config.seed))


def _hub_layer(backbone, trainable: bool):
    import tensorflow_hub as hub

    return hub.KerasLayer(backbone.path, trainable=trainable, name="module")


def _bert(task, backbone, num_labels, config, sequences):
    names = ("input_word_ids", "input_mask", "input_type_ids")
    encoder = _hub_layer(backbone, config.train_module)
    dropout = tf_keras.layers.Dropout(config.dropout, name="head_dropout")
    if task in ("tag", "squad"):
        inputs = {n: tf_keras.Input([config.max_seq_length], dtype=tf.int32, name=n) for n in names}
        states = dropout(encoder(inputs)["sequence_output"])  # [B, T, H]
        if task == "tag":
            return inputs, {"logits": _dense(num_labels, "tag_logits", config)(states)}
        start, end = SplitLogits(name="span")([_dense(2, "span_logits", config)(states), inputs["input_mask"]])
        return inputs, {"start_logits": start, "end_logits": end}
    inputs = {n: tf_keras.Input([sequences, config.max_seq_length], dtype=tf.int32, name=n) for n in names}
    fold = FoldSequences(name="fold")
    pooled = dropout(encoder({n: fold(inputs[n]) for n in names})["pooled_output"])  # [B * S, H]
    if task == "choice":
        scores = UnfoldSequences(sequences, name="unfold")(_dense(1, "choice_score", config)(pooled))  # [B, C, 1]
        return inputs, {"logits": tf_keras.layers.Reshape([sequences], name="choice_logits")(scores)}
    return inputs, {"logits": _dense(num_labels, "classifier", config)(pooled)}


def _gpt(task, backbone, num_labels, config, sequences):
    t = config.max_seq_length
    inputs = {"input_word_ids": tf_keras.Input([sequences, t], dtype=tf.int32, name="input_word_ids"),
              "extract_index": tf_keras.Input([sequences], dtype=tf.int32, name="extract_index"),
              "lm_weights": tf_keras.Input([sequences, t], dtype=tf.float32, name="lm_weights")}
    fold = FoldSequences(name="fold")
    ids, extract, lm_weights = (fold(inputs[k]) for k in ("input_word_ids", "extract_index", "lm_weights"))
    out = _hub_layer(backbone, True)({"input_word_ids": ids})
    features = GatherPositions(name="extract")([out["hidden_states"], extract])  # [B * S, H]
    if config.lm_coef > 0:
        features = AuxLanguageModelLoss(config.lm_coef, name="aux_lm")([features, out["logits"], ids, lm_weights])
    features = tf_keras.layers.Dropout(config.dropout, name="head_dropout")(features)
    if task == "choice":
        scores = UnfoldSequences(sequences, name="unfold")(_dense(1, "choice_score", config)(features))
        return inputs, {"logits": tf_keras.layers.Reshape([sequences], name="choice_logits")(scores)}
    if sequences > 1:  # similarity: the two orders' representations added
        features = SumSequences(name="sum_orders")(UnfoldSequences(sequences, name="unfold")(features))
    return inputs, {"logits": _dense(num_labels, "classifier", config)(features)}


def _elmo_mix(backbone, config, text):
    out = _hub_layer(backbone, config.train_module)(text)
    if config.train_module:
        return out["elmo"], out["sequence_len"]
    layers = ElmoLayers(name="elmo_layers")({k: out[k] for k in elmo_layer_names(out)})  # K + 1 of [N, T, 2L]
    return TfKerasScalarMix(name="task_scalar_mix")(layers), out["sequence_len"]  # [N, T, 2L], [N]


def _bilm(task, backbone, num_labels, config, sequences, task_words=()):
    if task == "tag":
        text = tf_keras.Input([], dtype=tf.string, name="text")
        parts = []
        if config.task_word_dim:
            words = TaskWordSplit(config.max_seq_length, name="task_word_split")(text)  # [B, T]
            ids = TaskWords(task_words, name="task_words")(words)  # [B, T]
            vectors = tf_keras.layers.Embedding(len(task_words) + 2, config.task_word_dim,
                                                name="task_word_embedding")(ids)  # [B, T, E]
            vectors = tf_keras.layers.Dropout(config.dropout, name="task_word_dropout")(vectors)
            casing = tf_keras.layers.Embedding(WordCasing.CLASSES, 8, name="casing_embedding")(
                WordCasing(name="word_casing")(words))  # [B, T, 8]
            parts += [vectors, casing]  # [B, T, E], [B, T, 8]
        if config.elmo:
            mixed, _ = _elmo_mix(backbone, config, text)
            states = FixLength(config.max_seq_length, name="fix_length")(mixed)  # [B, T, 2L]
            parts.append(tf_keras.layers.Dropout(config.dropout, name="mix_dropout")(states))
        if not parts:
            raise ValueError("the biLM tagger needs ELMo (elmo=true) or its own word vectors (task_word_dim > 0)")
        states = parts[0] if len(parts) == 1 else tf_keras.layers.Concatenate(name="words_and_elmo")(parts)
        states = tf_keras.layers.Bidirectional(tf_keras.layers.LSTM(config.tagger_units, return_sequences=True),
                                               name="tagger_bilstm")(states)
        return {"text": text}, {"logits": _dense(num_labels, "tag_logits", config)(states)}
    text = tf_keras.Input([sequences], dtype=tf.string, name="text")
    mixed, lengths = _elmo_mix(backbone, config, FoldSequences(name="fold")(text))
    pooled = MaskedMean(name="mean_pool")([mixed, lengths])  # [B * S, 2L]
    if sequences > 1:
        pooled = PairFeatures(name="pair_features")(UnfoldSequences(sequences, name="unfold")(pooled))
    pooled = tf_keras.layers.Dropout(config.dropout, name="head_dropout")(pooled)
    hidden = tf_keras.layers.Dense(config.classifier_units, activation="relu", name="classifier_hidden")(pooled)
    return {"text": text}, {"logits": _dense(num_labels, "classifier", config)(hidden)}


def build_model(task: str, backbone, num_labels: int, config, sequences: int = 1,
                task_words: tuple[str, ...] = ()) -> tf_keras.Model:
    """The task model. `sequences`: S of the inputs (`task_inputs.py`); `config`: a `FinetuneConfig`;
    `task_words`: the biLM tagger's own vocabulary (`task_vocabulary`)."""
    if task not in SUPPORTED[backbone.kind]:
        raise ValueError(f"task {task!r} is not available for a {backbone.kind} module "
                         f"(it supports {', '.join(SUPPORTED[backbone.kind])})")
    build = {"bert": _bert, "gpt": _gpt, "bilm": _bilm}[backbone.kind]
    tf_keras.utils.set_random_seed(config.seed)
    extra = {"task_words": task_words} if backbone.kind == "bilm" else {}
    inputs, outputs = build(task, backbone, num_labels, config, sequences, **extra)
    return tf_keras.Model(inputs, outputs, name=f"{backbone.kind}_{task}")


def task_vocabulary(sentences: list[tuple[str, ...]], min_count: int) -> tuple[str, ...]:
    """The biLM tagger's own words: those of the training sentences (split as `TaskWordSplit` splits) seen
    at least `min_count` times, most frequent first (ties in first-seen order)."""
    import collections

    split = _cased_splitter()
    counts = collections.Counter()
    texts = [" ".join(words) for words in sentences]
    for i in range(0, len(texts), 4096):
        for row in split(tf.constant(texts[i:i + 4096])).to_list():
            counts.update(w.decode("utf-8") for w in row)
    return tuple(w for w, n in counts.most_common() if n >= min_count and w)
