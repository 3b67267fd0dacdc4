"""A Keras 3 model as a TF2 reusable SavedModel: the TF-Hub contract that `hub.KerasLayer(trainable=True)`,
`hub.load` and Keras 3's `TFSMLayer` consume.

Keras 3 cannot write one (`model.export()` gives only a `serve` endpoint), so `ReusableModule` is the
checkpointable root: `__call__(inputs, training)` traced once with `training` as a boolean tensor (both
branches live in the graph, so dropout is on when a fine-tuning caller trains), plus `variables`,
`trainable_variables` and `regularization_losses`. The variables attached are the raw `tf.Variable`s
behind Keras 3's wrappers: with the wrappers `hub.load` works but `saved_model_cli` and TF Serving cannot
find the variables.

Example:
    module = ReusableModule(encoder, {"input_word_ids": tf.TensorSpec([None, None], tf.int32), ...})
    tf.saved_model.save(module, path)
    layer = hub.KerasLayer(path, trainable=True)  # in a tf_keras model
"""

import tensorflow as tf


class ReusableModule(tf.train.Checkpoint):
    """Wraps `model` (inputs: a dict of tensors) for `tf.saved_model.save`.

    Args:
      model: a built Keras 3 model taking a dict of tensors.
      input_spec: the dict's `tf.TensorSpec`s (static shapes where the model needs them).
      outputs: optional function from the model's output dict to the module's (e.g. renaming or adding
        `default`); it runs inside the traced function.
    """

    def __init__(self, model, input_spec: dict[str, tf.TensorSpec], outputs=None):
        super().__init__()
        self._model = model
        self.variables = [v.value for v in model.variables]
        self.trainable_variables = [v.value for v in model.trainable_variables]
        self.regularization_losses = []
        finish = outputs or (lambda out: out)

        @tf.function(input_signature=[input_spec, tf.TensorSpec([], tf.bool, name="training")])
        def call(inputs, training):
            return tf.cond(training, lambda: finish(model(inputs, training=True)),
                           lambda: finish(model(inputs, training=False)))

        self.__call__ = call
