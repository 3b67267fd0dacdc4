"""Clients for TF Serving's REST and gRPC APIs; they work unchanged against real TF Serving and `serving.server`.

    .venv/bin/python -m serving.client --server http://127.0.0.1:8501 | --grpc 127.0.0.1:8500 --model NAME \\
        [--version N | --label L] [--signature NAME] [--text "a sentence" ...] [--input_name text] \\
        [--json FILE] [--method predict|classify|regress] [--metadata] [--status]

Prints the result as JSON: the REST response body as the server sent it; over gRPC, the same shape built from
the response protos (`predictions` / `outputs`, `results`, `model_version_status`, `model_spec` + `metadata`).
`--text` sends the texts as `instances` (one object `{input_name: text}` each with `--input_name`); `--json`
sends a request body as written (`{"instances": ...}`, `{"inputs": ...}` or `{"examples": ...}`).

Python API:
    RestClient("http://127.0.0.1:8501").predict("bert", instances=["a sentence"])  # {"predictions": [...]}
    GrpcClient("127.0.0.1:8500").predict("bert", instances=["a sentence"])          # the same
Errors from the server raise `ServerError` (`status`: the HTTP code, or the gRPC status code name; `message`:
the server's error text). The REST client needs numpy and the standard library (numpy arrays and `bytes` in a
request are encoded as the server encodes tensors: `serving.server.json_values`); the gRPC one needs grpcio and
tensorflow-serving-api (and so TensorFlow), imported when it is first used, and converts JSON values to tensors
and tensors to JSON values with the server's own codec (`serving.server.json_tensor`), so both transports give
the same answer, or the same INVALID_ARGUMENT message, for the same request.
"""

if __name__ == "__main__":  # `python -m`: TensorFlow quiet before the imports below load it (commands.tf_startup)
    from commands.tf_startup import quiet_tensorflow_startup
    quiet_tensorflow_startup()

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

from commands.tf_startup import quiet_command
from commands.user_errors import UserError, exit_status
from serving.server import json_values


class ServerError(Exception):
    """An error answer: `status` (HTTP code, or gRPC status code name) and the server's `message`."""

    def __init__(self, status, message: str):
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message


def _model_path(model: str, version: int | None, label: str | None) -> str:
    if version is not None and label is not None:
        raise ValueError("give a version or a label, not both")
    path = f"/v1/models/{urllib.parse.quote(model, safe='')}"
    if version is not None:
        path += f"/versions/{int(version)}"
    elif label is not None:
        path += f"/labels/{urllib.parse.quote(label, safe='')}"
    return path


class RestClient:
    """TF Serving's REST API over urllib. Every method returns the decoded JSON response.

    Args:
      url: e.g. "http://127.0.0.1:8501".
      timeout: seconds per request.
    """

    def __init__(self, url: str, timeout: float = 60.0):
        self.url, self.timeout = url.rstrip("/"), timeout

    def _request(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json_values.dumps(body)
        request = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                message = text
            raise ServerError(e.code, message) from None
        except (urllib.error.URLError, OSError) as e:  # down, refused, unresolvable, timed out: as gRPC says it
            reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
            code = "DEADLINE_EXCEEDED" if isinstance(reason, TimeoutError) or "timed out" in str(reason) \
                else "UNAVAILABLE"
            raise ServerError(code, f"cannot reach {self.url}: {reason}") from None

    def predict(self, model: str, instances: list | None = None, inputs=None, signature_name: str | None = None,
                version: int | None = None, label: str | None = None) -> dict:
        """Row format (`instances`) -> {"predictions": ...}; columnar (`inputs`) -> {"outputs": ...}."""
        if (instances is None) == (inputs is None):
            raise ValueError("give instances or inputs")
        body = {"instances": instances} if instances is not None else {"inputs": inputs}
        if signature_name:
            body["signature_name"] = signature_name
        return self._request(_model_path(model, version, label) + ":predict", body)

    def classify(self, model: str, examples: list[dict], context: dict | None = None,
                 signature_name: str | None = None, version: int | None = None, label: str | None = None) -> dict:
        return self._examples("classify", model, examples, context, signature_name, version, label)

    def regress(self, model: str, examples: list[dict], context: dict | None = None,
                signature_name: str | None = None, version: int | None = None, label: str | None = None) -> dict:
        return self._examples("regress", model, examples, context, signature_name, version, label)

    def _examples(self, method, model, examples, context, signature_name, version, label) -> dict:
        body = {"examples": examples}
        if context is not None:
            body["context"] = context
        if signature_name:
            body["signature_name"] = signature_name
        return self._request(f"{_model_path(model, version, label)}:{method}", body)

    def metadata(self, model: str, version: int | None = None, label: str | None = None) -> dict:
        return self._request(_model_path(model, version, label) + "/metadata")

    def status(self, model: str, version: int | None = None, label: str | None = None) -> dict:
        return self._request(_model_path(model, version, label))

    def send(self, model: str, body: dict, method: str = "predict", version: int | None = None,
             label: str | None = None) -> dict:
        """Posts a request body as written (the CLI's --json)."""
        return self._request(f"{_model_path(model, version, label)}:{method}", body)


class GrpcClient:
    """TF Serving's gRPC PredictionService and ModelService, returning the REST API's JSON shapes.

    Input dtypes come from the signature (one GetModelMetadata call per model version and signature, cached),
    so plain Python lists work as they do over REST.

    Args:
      target: "host:port".
      timeout: seconds per call.
    """

    def __init__(self, target: str, timeout: float = 60.0):
        import grpc
        from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc
        self._grpc, self.timeout = grpc, timeout
        options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        self._channel = grpc.insecure_channel(target, options=options)
        self._predictions = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._models = model_service_pb2_grpc.ModelServiceStub(self._channel)
        self._dtypes: dict = {}

    def close(self) -> None:
        self._channel.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout)
        except self._grpc.RpcError as e:
            raise ServerError(e.code().name, e.details()) from None

    @staticmethod
    def _spec(spec, model, version, label, signature_name=None) -> None:
        if version is not None and label is not None:
            raise ValueError("give a version or a label, not both")
        spec.name = model
        if version is not None:
            spec.version.value = int(version)
        if label is not None:
            spec.version_label = label
        if signature_name:
            spec.signature_name = signature_name

    def _metadata_proto(self, model, version, label):
        from tensorflow_serving.apis import get_model_metadata_pb2
        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        self._spec(request.model_spec, model, version, label)
        response = self._call(self._predictions.GetModelMetadata, request)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signatures)
        return response, signatures

    def metadata(self, model: str, version: int | None = None, label: str | None = None) -> dict:
        from google.protobuf import json_format
        response, signatures = self._metadata_proto(model, version, label)
        options = dict(preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
        return {"model_spec": json_format.MessageToDict(response.model_spec, **options),
                "metadata": {"signature_def": json_format.MessageToDict(signatures, **options)}}

    def status(self, model: str, version: int | None = None, label: str | None = None) -> dict:
        from google.protobuf import json_format
        from tensorflow_serving.apis import get_model_status_pb2
        request = get_model_status_pb2.GetModelStatusRequest()
        self._spec(request.model_spec, model, version, label)
        return json_format.MessageToDict(self._call(self._models.GetModelStatus, request),
                                         preserving_proto_field_name=True, always_print_fields_with_no_presence=True)

    def _input_dtypes(self, model, version, label, signature_name) -> dict:
        import tensorflow as tf
        key = (model, version, label, signature_name or "serving_default")
        if key not in self._dtypes:
            _, signatures = self._metadata_proto(model, version, label)
            if key[3] not in signatures.signature_def:
                raise ServerError("FAILED_PRECONDITION", f'Serving signature key "{key[3]}" not found.')
            self._dtypes[key] = {name: tf.dtypes.as_dtype(info.dtype)
                                 for name, info in signatures.signature_def[key[3]].inputs.items()}
        return self._dtypes[key]

    def predict(self, model: str, instances: list | None = None, inputs=None, signature_name: str | None = None,
                version: int | None = None, label: str | None = None) -> dict:
        """As RestClient.predict: {"predictions": ...} for `instances`, {"outputs": ...} for `inputs`."""
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2
        if (instances is None) == (inputs is None):
            raise ValueError("give instances or inputs")
        from serving.server import json_tensor
        from serving.server.servable import ServingError
        dtypes = self._input_dtypes(model, version, label, signature_name)
        body = {"instances": instances} if instances is not None else {"inputs": inputs}
        try:  # the REST server's own conversion: same dtype checks, same messages
            arrays, _ = json_tensor.predict_inputs(json.loads(json_values.dumps(body)), dtypes)
        except ServingError as e:
            raise ServerError(e.code, e.message) from None
        request = predict_pb2.PredictRequest()
        self._spec(request.model_spec, model, version, label, signature_name)
        for name, array in arrays.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(array, dtype=dtypes[name]))
        response = self._call(self._predictions.Predict, request)
        outputs = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
        try:  # the REST server's own response encoding
            return json.loads(json_tensor.predict_response(outputs, row=instances is not None))
        except ServingError as e:
            raise ServerError(e.code, e.message) from None

    def _input(self, examples, context):
        from tensorflow_serving.apis import input_pb2
        from serving.server import json_tensor
        from serving.server.servable import ServingError

        def to_example(value):  # the REST server's tf.Example rules and messages
            try:
                return json_tensor.example(json.loads(json_values.dumps(value)))
            except ServingError as e:
                raise ServerError(e.code, e.message) from None
        if context is None:
            return input_pb2.Input(example_list=input_pb2.ExampleList(examples=[to_example(e) for e in examples]))
        return input_pb2.Input(example_list_with_context=input_pb2.ExampleListWithContext(
            examples=[to_example(e) for e in examples], context=to_example(context)))

    def classify(self, model: str, examples: list[dict], context: dict | None = None,
                 signature_name: str | None = None, version: int | None = None, label: str | None = None) -> dict:
        from tensorflow_serving.apis import classification_pb2
        request = classification_pb2.ClassificationRequest(input=self._input(examples, context))
        self._spec(request.model_spec, model, version, label, signature_name)
        result = self._call(self._predictions.Classify, request).result
        return {"results": [[[c.label, json_values.float32_value(c.score)] for c in row.classes]
                            for row in result.classifications]}

    def regress(self, model: str, examples: list[dict], context: dict | None = None,
                signature_name: str | None = None, version: int | None = None, label: str | None = None) -> dict:
        from tensorflow_serving.apis import regression_pb2
        request = regression_pb2.RegressionRequest(input=self._input(examples, context))
        self._spec(request.model_spec, model, version, label, signature_name)
        result = self._call(self._predictions.Regress, request).result
        return {"results": [json_values.float32_value(r.value) for r in result.regressions]}

    def send(self, model: str, body: dict, method: str = "predict", version: int | None = None,
             label: str | None = None) -> dict:
        """A REST request body, sent over gRPC (the CLI's --json)."""
        signature_name = body.get("signature_name")
        if method == "predict":
            return self.predict(model, body.get("instances"), body.get("inputs"), signature_name, version, label)
        run = self.classify if method == "classify" else self.regress
        return run(model, body["examples"], body.get("context"), signature_name, version, label)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="REST base URL, e.g. http://127.0.0.1:8501")
    where.add_argument("--grpc", help="gRPC host:port, e.g. 127.0.0.1:8500")
    parser.add_argument("--model", required=True)
    parser.add_argument("--version", type=int)
    parser.add_argument("--label")
    parser.add_argument("--signature", help="signature name (default: serving_default)")
    parser.add_argument("--text", action="append", help="a text to send as one instance (repeatable)")
    parser.add_argument("--input_name", help="send each text as {input_name: text}")
    parser.add_argument("--json", help="a file holding a request body to send as written")
    parser.add_argument("--method", choices=("predict", "classify", "regress"), default="predict")
    parser.add_argument("--metadata", action="store_true", help="print the model's signatures")
    parser.add_argument("--status", action="store_true", help="print the model's version status")
    parser.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args(argv)


def read_body(path: str) -> dict:
    """The request body in `--json FILE`: a JSON object; ValueError naming the file otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"--json {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"--json {path} is a folder; give a file holding a request body") from None
    except OSError as e:
        raise ValueError(f"--json {path} cannot be read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"--json {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"--json {path} is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(body, dict):
        raise ValueError(f"--json {path} holds a JSON {type(body).__name__}, not an object such as "
                         f'{{"instances": [...]}}, {{"inputs": ...}} or {{"examples": [...]}}')
    return body


@quiet_command
def main(argv=None) -> int:
    """`python -m serving.client`: the answer as JSON; an error answer is `error: STATUS: message` and exit
    status 1, a bad request of the user's (flags, `--json`) one line and exit status 2."""
    args = parse_args(argv)
    try:
        result = _call(args)
    except ServerError as e:  # the server refused: not a usage error
        return exit_status(UserError(f"{e.status}: {e.message}", status=1))
    except Exception as e:  # noqa: BLE001 - user errors become one line, others keep their traceback
        return exit_status(e)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def _call(args) -> dict:
    """The request the flags describe, sent; the server's answer. `UserError` for a bad `--json` body or no
    request at all; `ServerError` for an error answer."""
    try:
        body = read_body(args.json) if args.json and not (args.status or args.metadata) else None
    except ValueError as e:
        raise UserError(str(e)) from None
    if args.version is not None and args.label is not None:
        raise UserError("give --version or --label, not both")
    client = RestClient(args.server, args.timeout) if args.server else GrpcClient(args.grpc, args.timeout)
    where = dict(version=args.version, label=args.label)
    if args.status:
        return client.status(args.model, **where)
    if args.metadata:
        return client.metadata(args.model, **where)
    if args.text and not args.json:
        instances = [{args.input_name: t} for t in args.text] if args.input_name else list(args.text)
        return client.predict(args.model, instances=instances, signature_name=args.signature, **where)
    if not args.json:
        raise UserError("give --text, --json, --metadata or --status")
    if args.signature:
        body["signature_name"] = args.signature
    try:
        return client.send(args.model, body, args.method, **where)
    except (KeyError, TypeError, ValueError) as e:  # a body of the wrong shape for --method (no "examples", ...)
        raise UserError(f"--json {args.json}: not a {args.method} request body ({type(e).__name__}: {e})") from e


if __name__ == "__main__":
    sys.exit(main())
