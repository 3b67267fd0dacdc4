"""The fine-tuned model as a text-in SavedModel for TF Serving (`output_dir/serving/1/`).

The graph builds its inputs with the very TF functions training-input building calls
(`downstream/finetune/inputs.py`: `pair_sequences`, `pack_sequence`, `bert_first_pieces`), so served inputs
are training inputs. `TextTaskModel` offers one signature per input form and each task (`tasks.py`) picks its
own (`FinetuneTask.serving`):
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
      task: a `tasks.FinetuneTask`; it picks the signature (`task.serving(self)`).
      backbone, model, labels, config: the `ExportedModule`, the trained tf_keras model, the label names and
        the `FinetuneConfig` of the run.
      fallback_tag: the tag for words the length limit cut off (tagging).
    """

    def __init__(self, task, backbone, model, labels, config, fallback_tag="O"):
        super().__init__()
        self.model = model
        self.exported = backbone
        self.module = backbone.module
        self.preprocessor = backbone.preprocessor
        self.kind, self.seq_length = backbone.kind, config.max_seq_length
        self.gpt_pair = config.gpt_pair
        self.label_names = tf.constant(labels)
        self.fallback = fallback_tag
        self.serve = task.serving(self)

    # The signatures, one per input form.

    def text_signature(self):
        return tf.function(lambda text: self.predict([[text]]),
                           input_signature=[tf.TensorSpec([None], tf.string, name="text")])

    def pair_signature(self):
        return tf.function(lambda text_a, text_b: self.predict(self.pair(text_a, text_b)),
                           input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                            tf.TensorSpec([None], tf.string, name="text_b")])

    def choice_signature(self):
        return tf.function(self.choose, input_signature=[tf.TensorSpec([None], tf.string, name="context"),
                                                         tf.TensorSpec([None, None], tf.string, name="choices")])

    def words_signature(self):
        return tf.function(self.tag, input_signature=[tf.TensorSpec([None, None], tf.string, name="words"),
                                                      tf.TensorSpec([None], tf.int32, name="lengths")])

    # The graphs behind them.

    def pair(self, a, b):
        """Two `[B]` texts -> the sequences the family reads them as (`inputs.pair_sequences`)."""
        return inputs_lib.pair_sequences(self.kind, self.gpt_pair, a, b)

    def sequence(self, parts):
        """One sequence (list of [N] string tensors) -> the family's inputs `[N, T]` (or `[N]` text)."""
        return inputs_lib.pack_sequence(self.exported, parts, self.seq_length)

    def inputs(self, sequences):
        """Sequences (each a list of parts) -> the model's inputs `[N, S, ...]`."""
        per = [self.sequence(parts) for parts in sequences]
        return {k: tf.stack([p[k] for p in per], axis=1) for k in per[0]}

    def predict(self, sequences):
        logits = self.model(self.inputs(sequences), training=False)["logits"]  # [B, K]
        return {"probabilities": tf.nn.softmax(logits), "label": tf.gather(self.label_names, tf.argmax(logits, -1))}

    def choose(self, context, choices):
        count = tf.shape(choices)[1]
        flat_context = tf.reshape(tf.repeat(context[:, None], count, axis=1), [-1])  # [B * C]
        x = self.sequence([flat_context, tf.reshape(choices, [-1])])
        x = {k: tf.reshape(v, tf.concat([[-1, count], tf.shape(v)[1:]], 0)) for k, v in x.items()}
        logits = self.model(x, training=False)["logits"]  # [B, C]
        return {"probabilities": tf.nn.softmax(logits), "label": tf.strings.as_string(tf.argmax(logits, -1))}

    def tag(self, words, lengths):
        sentences = tf.RaggedTensor.from_tensor(words, lengths=lengths)  # [B, (W)]
        packed, first, keep = inputs_lib.bert_first_pieces(self.exported, sentences, self.seq_length,
                                                           width=tf.shape(words)[1])  # [B, T], [B, W], [B, W]
        logits = self.model(packed, training=False)["logits"]  # [B, T, K]
        at_words = tf.gather(logits, tf.minimum(first, self.seq_length - 1), batch_dims=1)  # [B, W, K]
        tags = tf.gather(self.label_names, tf.argmax(at_words, -1))
        real = tf.sequence_mask(lengths, tf.shape(words)[1])
        tags = tf.where(keep, tags, self.fallback)
        return {"tags": tf.where(real, tags, ""), "probabilities": tf.nn.softmax(at_words)}


def export(task, backbone, model, labels, config, path: str, fallback_tag: str = "O") -> str | None:
    """Writes `path/1/` and returns it; None when the task has no text-in form for this module
    (`task.exports(backbone)`)."""
    if not task.exports(backbone):
        return None
    root = TextTaskModel(task, backbone, model, labels, config, fallback_tag)
    version = os.path.join(path, "1")
    tf.saved_model.save(root, version, signatures={"serving_default": root.serve})
    return version
