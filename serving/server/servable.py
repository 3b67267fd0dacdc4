"""One loaded model version and what runs on it: Predict, Classify, Regress and the warm-up replay.

`Servable.load(name, version, path)` loads a SavedModel the way TF Serving does, for the local server: TF-Text's
ops are registered first, the meta graph tagged "serve" is loaded into a session (`session.SessionModel`: TF1
graphs and TF2 SavedModels alike) and gives the `SignatureDef`s (for metadata and dtypes; the
`__saved_model_init_op` entry included, as TF Serving lists it), then `assets.extra/tf_serving_warmup_requests`
is replayed (a TFRecord file of `PredictionLog`s, at most 1000 records) and a failing record fails the load.
Inputs are fed by tensor name and not checked against the shapes the signature declares (TF Serving does not
either: the graph's ops decide). Errors carry gRPC status code
names (`ServingError.code`) and, where TF Serving has one, its message text (predict_util.cc, classifier.cc,
regressor.cc, saved_model_warmup_util.cc).

With `batching=True`, concurrent `predict` calls on one signature may be merged into one call (`Batcher`) when
every input has a leading batch dimension and the same trailing shape; outputs are split back along the first
dimension. As with TF Serving's batching, an output padded to the longest input of the call (token-level
outputs) comes back padded to the longest input of the merged batch.
"""

import importlib
import os
import threading

import numpy as np
import tensorflow as tf
from google.protobuf.message import DecodeError
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import prediction_log_pb2

from serving.server.session import SessionModel
from serving.server.warmup import WARMUP_FILE

PREDICT, CLASSIFY, REGRESS = ("tensorflow/serving/predict", "tensorflow/serving/classify",
                              "tensorflow/serving/regress")
DEFAULT_SIGNATURE = "serving_default"
MAX_WARMUP_RECORDS = 1000
MAX_BATCH_ROWS = 1024
importlib.import_module("tensorflow_text")  # registers the TF-Text ops that serving graphs use


class ServingError(Exception):
    """An error for the client: `code` is a gRPC status code name ("NOT_FOUND", "INVALID_ARGUMENT", ...)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def dtype_name(enum: int) -> str:
    """TF's `DataTypeString`: DT_FLOAT -> "float", DT_STRING -> "string"."""
    return types_pb2.DataType.Name(enum)[3:].lower()


def _serve_meta_graph(path: str):
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model = saved_model_pb2.SavedModel.FromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        if "serve" in meta_graph.meta_info_def.tags:
            return meta_graph
    raise ServingError("NOT_FOUND", f"Could not find meta graph def matching supplied tags: {{ serve }} in {path}")


class Servable:
    """A loaded version: `signature_defs` (name -> SignatureDef proto) and the callable signatures."""

    def __init__(self, name: str, version: int, path: str, batching: bool = False, method_check: bool = False):
        self.name, self.version, self.path, self.method_check = name, version, path, method_check
        _serve_meta_graph(path)  # TF Serving's NOT_FOUND text when no meta graph is tagged "serve"
        self._model = SessionModel(path)
        self.signature_defs = dict(self._model.meta_graph.signature_def)
        self._batching = batching
        self._batchers: dict[str, Batcher] = {}

    def _function(self, key: str):
        """The runner of signature `key` (built on first use), wrapped in a Batcher when batching."""
        try:
            function = self._model.runner(self.signature_defs[key])
        except tf.errors.OpError as e:  # a signature whose outputs cannot be fetched (an op, not a tensor)
            raise ServingError(_OP_ERROR_CODES.get(type(e), "UNKNOWN"), e.message) from None
        if not self._batching:
            return function
        return self._batchers.setdefault(key, Batcher(function))

    @classmethod
    def load(cls, name: str, version: int, path: str, batching: bool = False,
             method_check: bool = False) -> "Servable":
        """Loads and warms up (see the module docstring); raises ServingError."""
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):
            raise ServingError("NOT_FOUND", f"Could not find SavedModel .pb at supplied export directory path: "
                                            f"{path}")
        try:
            servable = cls(name, version, path, batching, method_check)
        except ServingError:
            raise
        except Exception as e:  # a broken SavedModel: reported in the version's status
            raise ServingError("UNKNOWN", f"Failed to load SavedModel at {path}: {type(e).__name__}: {e}") from e
        servable.warm_up()
        return servable

    def signature(self, name: str, method: str | None = None):
        """-> (resolved name, SignatureDef). For Classify and Regress (`method`), the signature's inputs and
        outputs are checked as TF Serving's PreProcessClassification/Regression do; with `method_check`
        (TF Serving's --enable_signature_method_name_check, off by default there and here) its method_name
        instead. TF2 SavedModels always say "predict", so without that flag they classify and regress."""
        key = name or DEFAULT_SIGNATURE
        signature = self.signature_defs.get(key)
        if signature is None:
            if method:
                raise ServingError("INVALID_ARGUMENT", f"No signature was found with the name: {key}")
            raise ServingError("FAILED_PRECONDITION", f'Serving signature key "{key}" not found.')
        if method and self.method_check and signature.method_name != method:
            kind = "classification" if method == CLASSIFY else "regression"
            raise ServingError("INVALID_ARGUMENT", f"Expected {kind} signature method_name to be {method}. "
                                                   f"Was: {signature.method_name}")
        if method:
            check_examples_signature(signature, method)
        return key, signature

    def predict(self, signature_name: str, inputs: dict[str, np.ndarray],
                output_filter: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """Runs a signature on named numpy inputs (of the signature's dtypes) -> named numpy outputs."""
        key, signature = self.signature(signature_name)
        check_names(signature, inputs)
        for alias in output_filter:
            if alias not in signature.outputs:
                raise ServingError("INVALID_ARGUMENT", f"output tensor alias not found in signature: {alias} "
                                                       f"Outputs expected to be in the set "
                                                       f"{{{','.join(sorted(signature.outputs))}}}.")
        function = self._function(key)
        outputs = function.run(inputs) if isinstance(function, Batcher) else call(function, inputs)
        return {k: v for k, v in outputs.items() if not output_filter or k in output_filter}

    def classify(self, signature_name: str, examples: list[bytes]) -> list[list[tuple[str, float]]]:
        """Serialized tf.Examples -> per example its (label, score) pairs (label "" without a `classes`
        output, score 0.0 without a `scores` output), as TF Serving's ClassificationResult."""
        key, signature = self.signature(signature_name, CLASSIFY)
        outputs = self._run_examples(key, signature, examples, ("classes", "scores"))
        classes, scores = outputs.get("classes"), outputs.get("scores")
        for tensor in (classes, scores):
            if tensor is not None and (tensor.ndim != 2 or tensor.shape[0] != len(examples)):
                raise ServingError("INVALID_ARGUMENT", f"Expected Tensor shape: [batch_size num_classes] but got "
                                                       f"{list(tensor.shape)}")
        num_classes = (classes if classes is not None else scores).shape[1]
        return [[(classes[i, c].decode("utf-8", "replace") if classes is not None else "",
                  float(scores[i, c]) if scores is not None else 0.0) for c in range(num_classes)]
                for i in range(len(examples))]

    def regress(self, signature_name: str, examples: list[bytes]) -> list[float]:
        """Serialized tf.Examples -> one value each (output `outputs`, [batch] or [batch, 1])."""
        key, signature = self.signature(signature_name, REGRESS)
        values = self._run_examples(key, signature, examples, ("outputs",))["outputs"]
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        if values.ndim != 1 or values.shape[0] != len(examples):
            raise ServingError("INVALID_ARGUMENT", f"Expected output Tensor shape to be either [batch_size] or "
                                                   f"[batch_size, 1] but got {list(values.shape)}")
        return [float(v) for v in values]

    def _run_examples(self, key, signature, examples, wanted) -> dict[str, np.ndarray]:
        if not examples:
            raise ServingError("INVALID_ARGUMENT", "Input is empty.")
        outputs = call(self._model.runner(signature), {"inputs": np.array(examples, dtype=object)})
        return {name: outputs[name] for name in wanted if name in outputs}

    def warm_up(self) -> None:
        """Replays `assets.extra/tf_serving_warmup_requests`, as TF Serving does at load."""
        path = os.path.join(self.path, WARMUP_FILE)
        if not os.path.exists(path):
            return
        try:
            for count, record in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator(), 1):
                if count > MAX_WARMUP_RECORDS:
                    raise ServingError("INVALID_ARGUMENT", f"Number of warmup records exceeds the maximum "
                                                           f"({MAX_WARMUP_RECORDS}) at {path}")
                try:
                    log = prediction_log_pb2.PredictionLog.FromString(record)
                except DecodeError:
                    raise ServingError("INVALID_ARGUMENT", f"Failed to parse warmup record: {record[:64]!r} "
                                                           f"from {path}") from None
                self._replay(log, path)
        except tf.errors.DataLossError as e:
            raise ServingError("DATA_LOSS", f"{e.message}. Please verify your warmup data is in TFRecord "
                                            f"format.") from None

    def _replay(self, log, path: str) -> None:
        kind = log.WhichOneof("log_type")
        if kind == "predict_log":
            request = log.predict_log.request
            _, signature = self.signature(request.model_spec.signature_name)
            self.predict(request.model_spec.signature_name, inputs_from_protos(signature, request.inputs),
                         tuple(request.output_filter))
        elif kind in ("classify_log", "regress_log"):
            request = getattr(log, kind).request
            run = self.classify if kind == "classify_log" else self.regress
            run(request.model_spec.signature_name, serialized_examples(request.input))
        else:
            raise ServingError("UNIMPLEMENTED", f"Unsupported log_type for warmup: {kind} in {path}")


def check_examples_signature(signature, method: str) -> None:
    """TF Serving's PreProcessClassification / PreProcessRegression checks, with their texts."""
    fail = lambda message: ServingError("INVALID_ARGUMENT", message)  # noqa: E731
    kind = "classification" if method == CLASSIFY else "regression"
    if len(signature.inputs) != 1:
        raise fail("Expected one input Tensor.")
    if method == CLASSIFY and len(signature.outputs) not in (1, 2):
        raise fail(f"Expected one or two output Tensors, found {len(signature.outputs)}")
    if method == REGRESS and len(signature.outputs) != 1:
        raise fail("Expected one output Tensor.")
    if "inputs" not in signature.inputs:
        raise fail(f"No {kind} inputs found in SignatureDef: {signature}")
    if method == CLASSIFY and not {"classes", "scores"} & set(signature.outputs):
        raise fail(f'Expected classification signature outputs to contain at least one of "classes" or '
                   f'"scores". Signature was: {signature}')
    if method == REGRESS and "outputs" not in signature.outputs:
        raise fail(f"No regression outputs found in SignatureDef: {signature}")


def check_names(signature, inputs) -> None:
    """TF Serving's `VerifyRequestInputsSize` and alias check."""
    sent, expected = sorted(inputs), sorted(signature.inputs)
    if len(sent) != len(expected):
        raise ServingError("INVALID_ARGUMENT", (
            f"input size does not match signature: {len(sent)}!={len(expected)} len({{{','.join(sent)}}}) != "
            f"len({{{','.join(expected)}}}). Sent extra: {{{','.join(sorted(set(sent) - set(expected)))}}}. "
            f"Missing but required: {{{','.join(sorted(set(expected) - set(sent)))}}}."))
    for alias in sent:
        if alias not in signature.inputs:
            raise ServingError("INVALID_ARGUMENT", f"input tensor alias not found in signature: {alias}. Inputs "
                                                   f"expected to be in the set {{{','.join(expected)}}}.")


# A TensorProto's value field per dtype, and how many of its values make one element (complex: 2).
_VALUE_FIELDS = {types_pb2.DT_FLOAT: ("float_val", 1), types_pb2.DT_DOUBLE: ("double_val", 1),
                 types_pb2.DT_INT64: ("int64_val", 1), types_pb2.DT_UINT32: ("uint32_val", 1),
                 types_pb2.DT_UINT64: ("uint64_val", 1), types_pb2.DT_BOOL: ("bool_val", 1),
                 types_pb2.DT_STRING: ("string_val", 1), types_pb2.DT_HALF: ("half_val", 1),
                 types_pb2.DT_BFLOAT16: ("half_val", 1), types_pb2.DT_COMPLEX64: ("scomplex_val", 2),
                 types_pb2.DT_COMPLEX128: ("dcomplex_val", 2),
                 **{dtype: ("int_val", 1) for dtype in (types_pb2.DT_INT32, types_pb2.DT_INT16, types_pb2.DT_INT8,
                                                        types_pb2.DT_UINT8, types_pb2.DT_UINT16, types_pb2.DT_QINT8,
                                                        types_pb2.DT_QUINT8, types_pb2.DT_QINT16,
                                                        types_pb2.DT_QUINT16, types_pb2.DT_QINT32)}}


def declared_elements(alias: str, proto) -> int:
    """The elements `proto`'s shape declares, once its content is checked to hold exactly that many; raises
    INVALID_ARGUMENT ("tensor parsing error: ALIAS", TF Serving's text, and why) otherwise. Checked before any
    array is made: `tf.make_ndarray` (and TF's own `Tensor::FromProto`) fills a short value list up to the
    shape by repeating its last value, so 35 bytes could declare 20,000,000 rows."""
    fail = lambda why: ServingError("INVALID_ARGUMENT", f"tensor parsing error: {alias}: {why}")  # noqa: E731
    shape = proto.tensor_shape
    if shape.unknown_rank or any(d.size < 0 for d in shape.dim):
        raise fail(f"its shape {[d.size for d in shape.dim]} is not a valid tensor shape")
    elements = 1
    for d in shape.dim:
        elements *= d.size
    if proto.dtype not in _VALUE_FIELDS:
        raise fail(f"dtype {dtype_name(proto.dtype)} is not supported in a request")
    field, per_element = _VALUE_FIELDS[proto.dtype]
    if proto.tensor_content:
        if proto.dtype == types_pb2.DT_STRING:
            raise fail("a string tensor cannot use tensor_content (use string_val)")
        itemsize = tf.dtypes.as_dtype(proto.dtype).size
        held, unit = len(proto.tensor_content), f"bytes of tensor_content ({itemsize} per element)"
        if held != elements * itemsize:
            raise fail(f"its shape {[d.size for d in shape.dim]} declares {elements} elements, its content holds "
                       f"{held} {unit}")
        return elements
    held = len(getattr(proto, field))
    if held != elements * per_element:
        raise fail(f"its shape {[d.size for d in shape.dim]} declares {elements} elements, its {field} holds "
                   f"{held // per_element} (a tensor's values must match its shape)")
    return elements


def inputs_from_protos(signature, tensors, max_elements: int | None = None) -> dict[str, np.ndarray]:
    """A PredictRequest's `inputs` (alias -> TensorProto) -> numpy arrays, names and dtypes checked, each
    tensor's content checked against its shape (`declared_elements`), and the elements of all inputs together
    at most `max_elements` (the server's `--max_elements_per_request`), before any array is made."""
    check_names(signature, tensors)
    total = 0
    for index, (alias, proto) in enumerate(sorted(tensors.items())):
        want = signature.inputs[alias].dtype
        if proto.dtype != want:
            raise ServingError("INVALID_ARGUMENT", f"Expects arg[{index}] to be {dtype_name(want)} but "
                                                   f"{dtype_name(proto.dtype)} is provided")
        total += declared_elements(alias, proto)
    if max_elements is not None and total > max_elements:
        raise ServingError("INVALID_ARGUMENT", f"Request has {total} input elements; this server takes at most "
                                               f"{max_elements} per request (--max_elements_per_request)")
    arrays = {}
    for alias, proto in sorted(tensors.items()):
        try:
            arrays[alias] = tf.make_ndarray(proto)
        except (TypeError, ValueError):
            raise ServingError("INVALID_ARGUMENT", f"tensor parsing error: {alias}") from None
    return arrays


def serialized_examples(input_proto) -> list[bytes]:
    """An `Input` (example_list, or example_list_with_context: each example merged over the context, as
    protobuf merges concatenated messages) -> serialized tf.Examples."""
    kind = input_proto.WhichOneof("kind")
    if kind == "example_list":
        return [e.SerializeToString() for e in input_proto.example_list.examples]
    if kind == "example_list_with_context":
        listed = input_proto.example_list_with_context
        context = listed.context.SerializeToString()
        return [context + e.SerializeToString() for e in listed.examples]
    raise ServingError("INVALID_ARGUMENT", "Input is empty.")


_OP_ERROR_CODES = {tf.errors.InvalidArgumentError: "INVALID_ARGUMENT", tf.errors.NotFoundError: "NOT_FOUND",
                   tf.errors.OutOfRangeError: "OUT_OF_RANGE", tf.errors.UnimplementedError: "UNIMPLEMENTED",
                   tf.errors.FailedPreconditionError: "FAILED_PRECONDITION",
                   tf.errors.ResourceExhaustedError: "RESOURCE_EXHAUSTED", tf.errors.InternalError: "INTERNAL"}


def call(function, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Calls a signature runner on numpy inputs; TF's errors from the graph keep their status code."""
    try:
        return function(inputs)
    except tf.errors.OpError as e:
        raise ServingError(_OP_ERROR_CODES.get(type(e), "UNKNOWN"), e.message) from None
    except (TypeError, ValueError) as e:
        raise ServingError("INVALID_ARGUMENT", str(e)) from None


class _Job:
    def __init__(self, inputs: dict[str, np.ndarray]):
        self.inputs, self.outputs, self.error, self.finished = inputs, None, None, False
        self.event = threading.Event()  # set once: when finished, or when promoted to run the next batch
        self.rows = next(iter(inputs.values())).shape[0]
        self.key = tuple(sorted((k, v.shape[1:], v.dtype.str) for k, v in inputs.items()))


class Batcher:
    """Merges concurrent calls of one signature function. While a call runs, arriving jobs queue; when it
    ends, the first queued job's own thread runs every queued job of the same trailing shapes as one call. A
    merged call that fails, or whose outputs lack the batch dimension, is re-run job by job, so each caller
    gets its own result or error."""

    def __init__(self, function):
        self._function, self._lock, self._queue, self._busy = function, threading.Lock(), [], False

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if any(v.ndim == 0 for v in inputs.values()) or len({v.shape[0] for v in inputs.values()}) != 1:
            return call(self._function, inputs)
        job = _Job(inputs)
        with self._lock:
            self._queue.append(job)
            leads = not self._busy
            self._busy = True
        if not leads:
            job.event.wait()
        if not job.finished:  # the first job, or promoted: it is at the head of the queue
            self._run_batch()
        if job.error:
            raise job.error
        return job.outputs

    def _run_batch(self) -> None:
        with self._lock:
            key, batch, rest, rows = self._queue[0].key, [], [], 0
            for job in self._queue:
                if job.key == key and (not batch or rows + job.rows <= MAX_BATCH_ROWS):
                    batch.append(job)
                    rows += job.rows
                else:
                    rest.append(job)
            self._queue = rest
        self._execute(batch)
        for job in batch:
            job.finished = True
            job.event.set()
        with self._lock:
            if self._queue:
                self._queue[0].event.set()
            else:
                self._busy = False

    def _execute(self, batch: list[_Job]) -> None:
        if len(batch) > 1:
            merged = {k: np.concatenate([job.inputs[k] for job in batch]) for k in batch[0].inputs}
            total = sum(job.rows for job in batch)
            try:
                outputs = call(self._function, merged)
            except ServingError:
                outputs = {}
            if outputs and all(v.ndim and v.shape[0] == total for v in outputs.values()):
                bounds = np.cumsum([job.rows for job in batch])[:-1]
                parts = {k: np.split(v, bounds) for k, v in outputs.items()}
                for i, job in enumerate(batch):
                    job.outputs = {k: parts[k][i] for k in outputs}
                return
        for job in batch:
            try:
                job.outputs = call(self._function, job.inputs)
            except ServingError as e:
                job.error = e
