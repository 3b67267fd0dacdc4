"""Task heads over the exported modules, in `tf_keras` (what `hub.KerasLayer` fine-tunes in): one builder per
head, each `(backbone, config, num_labels, sequences, task_words) -> (inputs, outputs)`, whose inputs are
those `inputs.py` makes and whose outputs are `logits` (SQuAD: `start_logits`, `end_logits`). Each task
(`tasks.py`) names its builder for each family it supports.
  - BERT (Devlin et al. 2018): `bert_classifier` (classify, pair) and `bert_choice` over `pooled_output`
    (`[CLS]`) with dropout and one dense layer (choice: one score per `[CLS] context [SEP] choice [SEP]`,
    softmax over the choices); `bert_tagger`: a dense layer on `sequence_output`, read at each word's first
    piece; `bert_span` (SQuAD): start and end vectors on `sequence_output`.
  - GPT (Radford et al. 2018): the last block's state at the extract token, one dense layer
    (`gpt_classifier`; similarity adds the two orders' states; `gpt_choice` scores each sequence); the
    auxiliary LM loss on the module's logits, weighted `lm_coef`, is added to the task loss
    (`layers.AuxLanguageModelLoss`).
  - biLM (Peters et al. 2018): the module frozen and the task's own `TfKerasScalarMix` (softmax weights +
    gamma) over the module's layers (`models.scalar_mix.elmo_layers`: word_emb ‖ word_emb, lstm_outputs1,
    lstm_outputs2); with `train_module` the whole module trains and its own `elmo` mix is used.
    `bilm_classifier`: the mix mean-pooled over real tokens, then a dense layer; or, with
    `bilm_task_model=bilstm`, the paper's kind of task model: a BiLSTM over `[x_k ; ELMo_k]` max-pooled over
    the words (`elmo=False`: the same network without the biLM, its baseline); pairs: [u, v, u * v, u - v];
    `bilm_tagger`: a small BiLSTM over `[x_k ; ELMo_k]`, where `x_k` is the task model's own
    context-independent word vector (`TaskWordSplit` + `TaskWords`: the training set's words, case kept, an
    embedding trained from scratch, plus a casing class, `WordCasing`; `task_word_dim=0` leaves both out),
    as the paper adds ELMo to a task model that has its own word representations; `elmo=False` leaves ELMo
    out (the paper's baseline, a control).
Layers have stable names (`layers.py`), so the model saves as a SavedModel.
"""

import tensorflow as tf
import tf_keras

from commands.user_errors import UserError
from downstream.finetune import layers
from models.scalar_mix import elmo_layer_names

BERT_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def _dense(units: int, name: str, config) -> tf_keras.layers.Dense:
    initializer = tf_keras.initializers.TruncatedNormal(stddev=0.02, seed=config.seed)
    return tf_keras.layers.Dense(units, name=name, kernel_initializer=initializer)


def _hub_layer(backbone, trainable: bool):
    import tensorflow_hub as hub

    return hub.KerasLayer(backbone.path, trainable=trainable, name="module")


def _choice_logits(features, sequences: int, config):
    """`[B * C, H]` -> one score per choice `[B, C]`."""
    scores = layers.UnfoldSequences(sequences, name="unfold")(_dense(1, "choice_score", config)(features))  # [B, C, 1]
    return tf_keras.layers.Reshape([sequences], name="choice_logits")(scores)


def _bert_states(backbone, config):
    """BERT's inputs `[B, T]` and `sequence_output` after dropout `[B, T, H]`."""
    encoder = _hub_layer(backbone, config.train_module)
    dropout = tf_keras.layers.Dropout(config.dropout, name="head_dropout")
    inputs = {n: tf_keras.Input([config.max_seq_length], dtype=tf.int32, name=n) for n in BERT_INPUTS}
    return inputs, dropout(encoder(inputs)["sequence_output"])  # [B, T, H]


def _bert_pooled(backbone, config, sequences: int):
    """BERT's inputs `[B, S, T]` and each sequence's vector after dropout `[B * S, H]`: the module's
    `pooled_output` (`bert_pooling=pooled`: its pooler, trained with next-sentence prediction), a fresh
    dense tanh pooler on `[CLS]` (`cls`), or the mean of `sequence_output` over real tokens (`mean`)."""
    encoder = _hub_layer(backbone, config.train_module)
    dropout = tf_keras.layers.Dropout(config.dropout, name="head_dropout")
    inputs = {n: tf_keras.Input([sequences, config.max_seq_length], dtype=tf.int32, name=n) for n in BERT_INPUTS}
    fold = layers.FoldSequences(name="fold")
    folded = {n: fold(inputs[n]) for n in BERT_INPUTS}
    out = encoder(folded)
    if config.bert_pooling == "pooled":
        return inputs, dropout(out["pooled_output"])  # [B * S, H]
    states = out["sequence_output"]  # [B * S, T, H]
    if config.bert_pooling == "mean":
        return inputs, dropout(layers.MaskedTokenMean(name="mean_pool")([states, folded["input_mask"]]))
    first = layers.GatherPositions(name="cls_state")([states, layers.ZerosLike(name="cls_index")(
        folded["input_mask"])])  # [B * S, H]
    pooler = tf_keras.layers.Dense(states.shape[-1], activation="tanh", name="fresh_pooler",
                                   kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02,
                                                                                            seed=config.seed))
    return inputs, dropout(pooler(first))


def bert_classifier(backbone, config, num_labels: int, sequences: int, task_words=()):
    inputs, pooled = _bert_pooled(backbone, config, sequences)
    return inputs, {"logits": _dense(num_labels, "classifier", config)(pooled)}


def bert_choice(backbone, config, num_labels: int, sequences: int, task_words=()):
    inputs, pooled = _bert_pooled(backbone, config, sequences)
    return inputs, {"logits": _choice_logits(pooled, sequences, config)}


def bert_tagger(backbone, config, num_labels: int, sequences: int, task_words=()):
    inputs, states = _bert_states(backbone, config)
    return inputs, {"logits": _dense(num_labels, "tag_logits", config)(states)}  # [B, T, K]


def bert_span(backbone, config, num_labels: int, sequences: int, task_words=()):
    inputs, states = _bert_states(backbone, config)
    start, end = layers.SplitLogits(name="span")([_dense(2, "span_logits", config)(states), inputs["input_mask"]])
    return inputs, {"start_logits": start, "end_logits": end}  # [B, T] each


def _gpt_features(backbone, config, sequences: int):
    """GPT's inputs `[B, S, T]` (`[B, S]` extract positions) and the state at each sequence's extract token
    after dropout `[B * S, H]`, with the auxiliary LM loss added when `lm_coef > 0`."""
    t = config.max_seq_length
    inputs = {"input_word_ids": tf_keras.Input([sequences, t], dtype=tf.int32, name="input_word_ids"),
              "extract_index": tf_keras.Input([sequences], dtype=tf.int32, name="extract_index"),
              "lm_weights": tf_keras.Input([sequences, t], dtype=tf.float32, name="lm_weights")}
    fold = layers.FoldSequences(name="fold")
    ids, extract, lm_weights = (fold(inputs[k]) for k in ("input_word_ids", "extract_index", "lm_weights"))
    out = _hub_layer(backbone, True)({"input_word_ids": ids})
    features = layers.GatherPositions(name="extract")([out["hidden_states"], extract])  # [B * S, H]
    if config.lm_coef > 0:
        features = layers.AuxLanguageModelLoss(config.lm_coef, name="aux_lm")(
            [features, out["logits"], ids, lm_weights])
    return inputs, tf_keras.layers.Dropout(config.dropout, name="head_dropout")(features)


def gpt_classifier(backbone, config, num_labels: int, sequences: int, task_words=()):
    inputs, features = _gpt_features(backbone, config, sequences)
    if sequences > 1:  # similarity: the two orders' representations added
        features = layers.SumSequences(name="sum_orders")(layers.UnfoldSequences(sequences, name="unfold")(features))
    return inputs, {"logits": _dense(num_labels, "classifier", config)(features)}


def gpt_choice(backbone, config, num_labels: int, sequences: int, task_words=()):
    inputs, features = _gpt_features(backbone, config, sequences)
    return inputs, {"logits": _choice_logits(features, sequences, config)}


def _elmo_mix(backbone, config, text):
    out = _hub_layer(backbone, config.train_module)(text)
    if config.train_module:
        return out["elmo"], out["sequence_len"]
    mixed = layers.ElmoLayers(name="elmo_layers")({k: out[k] for k in elmo_layer_names(out)})  # K + 1 of [N, T, 2L]
    return layers.TfKerasScalarMix(name="task_scalar_mix")(mixed), out["sequence_len"]  # [N, T, 2L], [N]


def bilm_classifier(backbone, config, num_labels: int, sequences: int, task_words=()):
    """`bilm_task_model=mean`: the mix mean-pooled, a hidden layer; `bilstm`: `_bilm_bilstm_features`."""
    text = tf_keras.Input([sequences], dtype=tf.string, name="text")
    folded = layers.FoldSequences(name="fold")(text)  # [B * S]
    if config.bilm_task_model == "bilstm":
        pooled = _bilm_bilstm_features(backbone, config, folded, task_words)  # [B * S, 2U]
    else:
        mixed, lengths = _elmo_mix(backbone, config, folded)
        pooled = layers.MaskedMean(name="mean_pool")([mixed, lengths])  # [B * S, 2L]
    if sequences > 1:
        pooled = layers.PairFeatures(name="pair_features")(layers.UnfoldSequences(sequences, name="unfold")(pooled))
    pooled = tf_keras.layers.Dropout(config.dropout, name="head_dropout")(pooled)
    hidden = tf_keras.layers.Dense(config.classifier_units, activation="relu", name="classifier_hidden")(pooled)
    return {"text": text}, {"logits": _dense(num_labels, "classifier", config)(hidden)}


def _word_parts(backbone, config, text, words, task_words) -> list:
    """What the biLM's task models read at each word `[B, T, *]`: the task's own word vectors and casing
    (`task_word_dim > 0`) and the frozen module's ELMo mix (`elmo`)."""
    parts = _task_word_vectors(config, words, task_words) if config.task_word_dim else []
    if config.elmo:
        mixed, _ = _elmo_mix(backbone, config, text)
        states = layers.FixLength(config.max_seq_length, name="fix_length")(mixed)  # [B, T, 2L]
        parts.append(tf_keras.layers.Dropout(config.dropout, name="mix_dropout")(states))
    if not parts:
        raise UserError("the biLM task models need ELMo (elmo=true) or their own word vectors (task_word_dim > 0)")
    return parts


def _bilm_bilstm_features(backbone, config, text, task_words):
    """Peters et al.'s task model for sentences: a BiLSTM over `[x_k ; ELMo_k]` at each word, max-pooled over
    the sentence's words `[N, 2U]`; with `elmo=false` the same network without the biLM."""
    words = layers.TaskWordSplit(config.max_seq_length, name="task_word_split")(text)  # [N, T]
    parts = _word_parts(backbone, config, text, words, task_words)
    states = parts[0] if len(parts) == 1 else tf_keras.layers.Concatenate(name="words_and_elmo")(parts)
    mask = layers.WordMask(name="word_mask")(words)  # [N, T]
    states = tf_keras.layers.Bidirectional(tf_keras.layers.LSTM(config.classifier_units, return_sequences=True),
                                           name="classifier_bilstm")(states, mask=mask)  # [N, T, 2U]
    return layers.MaskedMax(name="max_pool")([states, mask])  # [N, 2U]


def _task_word_vectors(config, words, task_words):
    """The task's own word vectors and casing embeddings `[B, T, E]`, `[B, T, 8]` of `words` `[B, T]`."""
    ids = layers.TaskWords(task_words, name="task_words")(words)  # [B, T]
    vectors = tf_keras.layers.Embedding(len(task_words) + 2, config.task_word_dim,
                                        name="task_word_embedding")(ids)  # [B, T, E]
    vectors = tf_keras.layers.Dropout(config.dropout, name="task_word_dropout")(vectors)
    casing = tf_keras.layers.Embedding(layers.WordCasing.CLASSES, 8, name="casing_embedding")(
        layers.WordCasing(name="word_casing")(words))  # [B, T, 8]
    return [vectors, casing]


def bilm_tagger(backbone, config, num_labels: int, sequences: int, task_words=()):
    text = tf_keras.Input([], dtype=tf.string, name="text")
    words = layers.TaskWordSplit(config.max_seq_length, name="task_word_split")(text)  # [B, T]
    parts = _word_parts(backbone, config, text, words, task_words)
    states = parts[0] if len(parts) == 1 else tf_keras.layers.Concatenate(name="words_and_elmo")(parts)
    states = tf_keras.layers.Bidirectional(tf_keras.layers.LSTM(config.tagger_units, return_sequences=True),
                                           name="tagger_bilstm")(states)
    return {"text": text}, {"logits": _dense(num_labels, "tag_logits", config)(states)}  # [B, T, K]
