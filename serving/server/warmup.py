"""TF Serving warm-up records: `assets.extra/tf_serving_warmup_requests`, a TFRecord file of
`PredictionLog` protos (tensorflow-serving-api) whose requests TF Serving replays when it loads a version,
so the first real request does not pay for graph initialisation.

Owns `warmup_records` (requests -> serialized records) and `read_warmup_requests` (parse them back).
"""

import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"


def _tensor_proto(value, dtype: tf.DType):
    if dtype == tf.string:
        array = np.array(value, dtype=object)
        array = np.vectorize(lambda s: s.encode("utf-8") if isinstance(s, str) else s, otypes=[object])(array) \
            if array.size else array
        return tf.make_tensor_proto(array, dtype=tf.string, shape=array.shape)
    return tf.make_tensor_proto(np.asarray(value, dtype=dtype.as_numpy_dtype), dtype=dtype)


def warmup_records(model_name: str, requests: list[tuple[str, dict]], signatures: dict) -> list[bytes]:
    """Serialized `PredictionLog`s, one per `(signature_name, {input: value})`, typed from `signatures`
    (name -> traced function whose input signature gives each input's dtype)."""
    records = []
    for signature_name, inputs in requests:
        specs = {spec.name: spec for spec in signatures[signature_name].input_signature}
        unknown = set(inputs) - set(specs)
        if unknown or len(inputs) != len(specs):
            raise ValueError(f"warm-up request for {signature_name!r} has inputs {sorted(inputs)}; the signature "
                             f"takes {sorted(specs)}")
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name))
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(_tensor_proto(value, specs[name].dtype))
        log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
        records.append(log.SerializeToString())
    return records


def tfrecord_bytes(records: list[bytes]) -> bytes:
    """The records framed as a TFRecord file's contents."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "records")
        with tf.io.TFRecordWriter(path) as writer:
            for record in records:
                writer.write(record)
        with open(path, "rb") as f:
            return f.read()


def read_warmup_requests(path: str) -> list[predict_pb2.PredictRequest]:
    """The predict requests of a warm-up file (as TF Serving reads it)."""
    requests = []
    for raw in tf.data.TFRecordDataset(path):
        log = prediction_log_pb2.PredictionLog.FromString(raw.numpy())
        if log.WhichOneof("log_type") != "predict_log":
            raise ValueError(f"{path}: warm-up record of type {log.WhichOneof('log_type')}, expected predict_log")
        requests.append(log.predict_log.request)
    return requests
