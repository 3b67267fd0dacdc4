"""The fine-tuned model as a text-in SavedModel for TF Serving (`output_dir/serving/1/`).

The graph tokenizes with the module's own functions (the BERT preprocessor's `tokenize` and
`bert_pack_inputs`, GPT's `tokenize`, the biLM's in-module splitter) and builds the same inputs as
`task_inputs.py` builds for training, with TF ops:
  - classify: `serving_default(text [B])`; pair: `serving_default(text_a [B], text_b [B])`;
    choice: `serving_default(context [B], choices [B, C])` -> `probabilities` [B, K], `label` [B] (string);
  - BERT tagging: `serving_default(words [B, W] string, lengths [B])` -> `tags` [B, W] (one per word, read at
    its first piece; words cut off by the length limit get the most frequent training tag), `probabilities`.
SQuAD and biLM tagging are not exported here (the trained tf_keras model in `output_dir/model` serves ids).
"""

import os

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF-Text ops the modules use)

from downstream.finetune import inputs as inputs_lib


class TextTaskModel(tf.Module):
    """Strings in, the task's prediction out.

    Args:
      task, backbone, model, labels, config: as `models.finetune.run` has them.
      fallback_tag: the tag for words the length limit cut off (tagging).
    """

    def __init__(self, task, backbone, model, labels, config, fallback_tag="O"):
        super().__init__()
        self.model = model
        self.module = backbone.module
        self.preprocessor = backbone.preprocessor
        self.kind, self.task, self.seq_length = backbone.kind, task, config.max_seq_length
        self.gpt_pair = config.gpt_pair
        self.label_names = tf.constant(labels)
        self.fallback = fallback_tag
        self.ids = {t: backbone.token_id(t) for t in ("[CLS]", "[SEP]", "[MASK]", "[UNK]")}
        string = tf.string
        if task == "classify":
            self.serve = tf.function(lambda text: self._predict([[text]]),
                                     input_signature=[tf.TensorSpec([None], string, name="text")])
        elif task == "pair":
            self.serve = tf.function(lambda text_a, text_b: self._predict(self._pair(text_a, text_b)),
                                     input_signature=[tf.TensorSpec([None], string, name="text_a"),
                                                      tf.TensorSpec([None], string, name="text_b")])
        elif task == "choice":
            self.serve = tf.function(self._choice, input_signature=[tf.TensorSpec([None], string, name="context"),
                                                                     tf.TensorSpec([None, None], string,
                                                                                   name="choices")])
        else:
            self.serve = tf.function(self._tag, input_signature=[tf.TensorSpec([None, None], string, name="words"),
                                                                  tf.TensorSpec([None], tf.int32, name="lengths")])

    def _pair(self, a, b):
        if self.kind == "bert" or (self.kind == "gpt" and self.gpt_pair == "entail"):
            return [[a, b]]
        if self.kind == "gpt":
            return [[a, b], [b, a]]
        return [[a], [b]]

    def _sequence(self, parts):
        """One sequence (list of [N] string tensors) -> the family's inputs `[N, T]` (or `[N]` text)."""
        t = self.seq_length
        if self.kind == "bert":
            segments = [self.preprocessor.tokenize(p) for p in parts]
            return self.preprocessor.bert_pack_inputs(segments, seq_length=tf.constant(t))
        if self.kind == "bilm":
            return {"text": parts[0]}
        special = (inputs_lib.GPT_START, inputs_lib.GPT_DELIMITER, inputs_lib.GPT_EXTRACT)
        dense, extract_index = inputs_lib.pack_gpt([self.module.tokenize(p) for p in parts], t,
                                                   *(self.ids[k] for k in special))
        return {"input_word_ids": dense, "extract_index": extract_index,
                "lm_weights": tf.zeros(tf.shape(dense), tf.float32)}

    def _inputs(self, sequences):
        per = [self._sequence(parts) for parts in sequences]
        return {k: tf.stack([p[k] for p in per], axis=1) for k in per[0]}

    def _predict(self, sequences):
        logits = self.model(self._inputs(sequences), training=False)["logits"]  # [B, K]
        return {"probabilities": tf.nn.softmax(logits), "label": tf.gather(self.label_names, tf.argmax(logits, -1))}

    def _choice(self, context, choices):
        count = tf.shape(choices)[1]
        flat_context = tf.reshape(tf.repeat(context[:, None], count, axis=1), [-1])  # [B * C]
        x = self._sequence([flat_context, tf.reshape(choices, [-1])])
        x = {k: tf.reshape(v, tf.concat([[-1, count], tf.shape(v)[1:]], 0)) for k, v in x.items()}
        logits = self.model(x, training=False)["logits"]
        return {"probabilities": tf.nn.softmax(logits), "label": tf.strings.as_string(tf.argmax(logits, -1))}

    def _tag(self, words, lengths):
        sentences = tf.RaggedTensor.from_tensor(words, lengths=lengths)  # [B, (W)]
        pieces = self.preprocessor.tokenize(sentences.flat_values).merge_dims(-2, -1)  # [N, (P)] int32
        empty = tf.equal(pieces.row_lengths(), 0)
        pieces = tf.where(empty[:, None], tf.RaggedTensor.from_tensor(
            tf.fill([tf.shape(empty)[0], 1], tf.constant(self.ids["[UNK]"], tf.int32))), pieces)
        counts = pieces.row_lengths()  # [N]
        per_word = sentences.with_flat_values(counts).to_tensor()  # [B, W] pieces per word (0 past the end)
        end = tf.math.cumsum(per_word, axis=1)  # [B, W] pieces up to and including each word
        first = 1 + end - per_word  # [B, W] each word's first piece, after [CLS]
        keep = end <= tf.cast(self.seq_length - 2, end.dtype)
        merged = sentences.with_flat_values(pieces).merge_dims(1, 2)  # [B, (P)]
        packed = self.preprocessor.bert_pack_inputs([merged], seq_length=tf.constant(self.seq_length))
        logits = self.model(packed, training=False)["logits"]  # [B, T, K]
        at_words = tf.gather(logits, tf.cast(tf.minimum(first, self.seq_length - 1), tf.int32), batch_dims=1)  # [B, W, K]
        tags = tf.gather(self.label_names, tf.argmax(at_words, -1))
        real = tf.sequence_mask(lengths, tf.shape(words)[1])
        tags = tf.where(keep, tags, self.fallback)
        return {"tags": tf.where(real, tags, ""), "probabilities": tf.nn.softmax(at_words)}


def export(task, backbone, model, labels, config, path: str, fallback_tag: str = "O") -> str | None:
    """Writes `path/1/` and returns it; None for tasks with no text-in form here."""
    if task == "squad" or (task == "tag" and backbone.kind != "bert"):
        return None
    root = TextTaskModel(task, backbone, model, labels, config, fallback_tag)
    version = os.path.join(path, "1")
    tf.saved_model.save(root, version, signatures={"serving_default": root.serve})
    return version
