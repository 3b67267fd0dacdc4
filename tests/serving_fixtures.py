"""Small SavedModels for the serving tests and benchmark, written in TF Serving's folder layout.

- `save_text_model(path, scale)`: a TF2 `tf.Module` using a TF-Text op (`WhitespaceTokenizer`), signatures
  `serving_default` (text [None] string -> embedding [None, 4] float32 = scale * (tokens, 1, 2, 3), length
  [None] int32, first_token string, text_bytes string: the input bytes; counts its calls), `length` (text ->
  length only), `score` (ids [None, 3] int32, weight [None] float32 -> score [None] float32 = sum(ids) *
  weight) and `calls` (no input -> calls [1] int64: how many times serving_default ran, e.g. warm-up).
- `save_classifier(path)`: a TF1 graph (`tf.compat.v1.saved_model.Builder`) with `classify_x`
  (classification_signature_def: tf.Example feature x [1] float -> classes ["pos", "neg"], scores [x, 1 - x]),
  `regress_x` (regression_signature_def: 2x) and a predict signature `serving_default` (x -> doubled).
- `write_warmup(version_dir, requests)`: `assets.extra/tf_serving_warmup_requests` from PredictRequests.
"""

import os

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

EMBEDDING_DIM = 4


class TextModel(tf.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = tf.Variable(scale, dtype=tf.float32, trainable=False)
        self.calls = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.tokenizer = tf_text.WhitespaceTokenizer()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(self, text):
        self.calls.assign_add(1)
        tokens = self.tokenizer.tokenize(text)  # (B, None) ragged
        length = tf.cast(tokens.row_lengths(), tf.int32)  # (B,)
        counts = tf.cast(length, tf.float32)[:, None] + tf.constant([[0.0, 1.0, 2.0, 3.0]])
        first = tokens.to_tensor(default_value="", shape=[None, 1])[:, 0]
        return {"embedding": self.scale * counts, "length": length, "first_token": first, "text_bytes": text}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def length(self, text):
        return {"length": tf.cast(self.tokenizer.tokenize(text).row_lengths(), tf.int32)}

    @tf.function(input_signature=[])
    def count(self):
        return {"calls": tf.reshape(self.calls.read_value(), [1])}

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.int32, name="ids"),
                                  tf.TensorSpec([None], tf.float32, name="weight")])
    def score(self, ids, weight):
        return {"score": tf.cast(tf.reduce_sum(ids, axis=1), tf.float32) * weight}


def save_text_model(path: str, scale: float = 1.0) -> str:
    module = TextModel(scale)
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve, "length": module.length,
                                                  "score": module.score,
                                                  "calls": module.count})
    return path


def save_classifier(path: str) -> str:
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as session:
        serialized = v1.placeholder(tf.string, [None], name="tf_example")
        x = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})["x"]  # (B, 1)
        classes = tf.tile(tf.constant([["pos", "neg"]]), [tf.shape(x)[0], 1])
        scores = tf.concat([x, 1.0 - x], axis=1)
        plain = v1.placeholder(tf.float32, [None], name="x")
        signatures = {
            "classify_x": v1.saved_model.classification_signature_def(serialized, classes, scores),
            "regress_x": v1.saved_model.regression_signature_def(serialized, 2.0 * x),
            "serving_default": v1.saved_model.predict_signature_def({"x": plain}, {"y": 2.0 * plain}),
        }
        builder = v1.saved_model.Builder(path)
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map=signatures)
        builder.save()
    return path


def predict_request(inputs: dict, signature_name: str = "") -> predict_pb2.PredictRequest:
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return request


def write_warmup(version_dir: str, requests: list, raw_records: tuple[bytes, ...] = ()) -> str:
    """Writes PredictRequests as PredictionLogs (plus any raw records) to the version's warm-up file."""
    folder = os.path.join(version_dir, "assets.extra")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tf_serving_warmup_requests")
    with tf.io.TFRecordWriter(path) as writer:
        for request in requests:
            writer.write(prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)).SerializeToString())
        for record in raw_records:
            writer.write(record)
    return path
