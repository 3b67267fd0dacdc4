"""Keras 3 models as TF2 reusable SavedModels: the TF-Hub contract that `hub.KerasLayer(trainable=True)`,
`hub.load` and Keras 3's `TFSMLayer` consume.

Keras 3 cannot write one (`model.export()` gives only a `serve` endpoint), so `ReusableModule` is the
checkpointable root: `__call__(inputs, training)` traced once with `training` as a boolean tensor (both
branches live in the graph, so dropout is on when a fine-tuning caller trains), plus `variables`,
`trainable_variables` and `regularization_losses`. The variables attached are the raw `tf.Variable`s
behind Keras 3's wrappers (`raw_variables`): with the wrappers `hub.load` works but `saved_model_cli` and
TF Serving cannot find the variables.

Example:
    module = ReusableModule.from_keras(encoder, {"input_word_ids": tf.TensorSpec([None, None], tf.int32), ...})
    tf.saved_model.save(module, path)
    layer = hub.KerasLayer(path, trainable=True)  # in a tf_keras model
"""

from typing import Callable

import tensorflow as tf


def raw_variables(variables) -> list[tf.Variable]:
    """The `tf.Variable`s behind Keras 3 variables (plain `tf.Variable`s pass through)."""
    return [v if isinstance(v, tf.Variable) else v.value for v in variables]


def training_switch(call: Callable, input_spec) -> tf.types.experimental.GenericFunction:
    """`call(inputs, training: bool) -> outputs` as one `tf.function(inputs, training)` whose boolean
    tensor argument picks the branch at run time."""

    @tf.function(input_signature=[input_spec, tf.TensorSpec([], tf.bool, name="training")])
    def switched(inputs, training=False):
        return tf.cond(training, lambda: call(inputs, True), lambda: call(inputs, False))

    return switched


class ReusableModule(tf.train.Checkpoint):
    """A reusable SavedModel root.

    Args:
      call: `call(inputs, training: bool) -> dict of tensors`, the module's computation.
      input_spec: the `inputs` structure's `tf.TensorSpec`s (a dict, or one spec).
      variables: every variable `call` reads (Keras 3 variables are unwrapped).
      trainable_variables: the ones a fine-tuning caller trains (default: all of `variables`).
      **children: further trackable attributes (sub-modules such as BERT's `mlm`, tokenizers, assets).
    """

    def __init__(self, call: Callable, input_spec, variables, trainable_variables=None, **children):
        super().__init__(**children)
        self.variables = raw_variables(variables)
        self.trainable_variables = raw_variables(variables if trainable_variables is None else trainable_variables)
        self.regularization_losses = []
        self.__call__ = training_switch(call, input_spec)

    @classmethod
    def from_keras(cls, model, input_spec, outputs: Callable | None = None, **children) -> "ReusableModule":
        """Wraps a Keras model taking `inputs`; `outputs` optionally maps its output dict to the module's
        (e.g. adding `default`) inside the traced function."""
        finish = outputs or (lambda out: out)
        return cls(lambda inputs, training: finish(model(inputs, training=training)), input_spec,
                   model.variables, model.trainable_variables, **children)
