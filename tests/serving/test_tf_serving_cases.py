"""TF Serving's own test cases against the local server (issue 24): the REST and gRPC cases of
`tensorflow_serving/model_servers/tensorflow_model_server_test.py` and `http_rest_api_handler_test.cc`, on
TF Serving's example models rebuilt by `tests/fixtures/tf_serving_models.py` (a TF1 graph half_plus_two with
predict/classify/regress signature defs over [-1, 1] inputs, its TF2 twin, and the `tf.saved_model.save`
models of the model-server test). The expected answers are those TF Serving's tests assert; where they only
assert a substring of an error, so do these.
"""


import grpc
import pytest
from tensorflow.core.framework import types_pb2
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                     inference_pb2, model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)

from serving.server.http import ModelServer, ServerOptions
from serving.server.servable import CLASSIFY, Servable, ServingError
from serving.server.model_config import ModelEntry
from tests.fixtures import tf_serving_models as models
from tests.fixtures.serving import http as rest

VERSION = models.VERSION
RPC_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tf_serving_models")
    entries = [
        ModelEntry("default", models.save_half_plus_two_tf1(str(root / "half_plus_two")),
                   version_labels=(("stable", VERSION),)),
        ModelEntry("half_plus_three", models.save_half_plus_two_tf1(str(root / "half_plus_three"), b=3.0)),
        ModelEntry("tf2", models.save_half_plus_two_tf2(str(root / "tf2"))),
        ModelEntry("product", models.save_product_model(str(root / "product"))),
        ModelEntry("two_signatures", models.save_two_signature_model(str(root / "two_signatures")))]
    with ModelServer(entries, ServerOptions(rest_api_port=0, grpc_port=0)) as running:
        yield running


@pytest.fixture(scope="module")
def stubs(server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
    yield (prediction_service_pb2_grpc.PredictionServiceStub(channel),
           model_service_pb2_grpc.ModelServiceStub(channel))
    channel.close()


# --- REST: tensorflow_model_server_test.py (testPredictREST, testPredictColumnarREST, ...) -------------------

@pytest.mark.parametrize("model", ["default", "tf2"])
def test_predict_rest_row_and_columnar(server, model):
    assert rest(server, "POST", f"/v1/models/{model}:predict", {"instances": [2.0, 3.0, 4.0]}) == (
        200, {"predictions": [3.0, 3.5, 4.0]})
    assert rest(server, "POST", f"/v1/models/{model}:predict", {"inputs": [2.0, 3.0, 4.0]}) == (
        200, {"outputs": [3.0, 3.5, 4.0]})


def test_classify_and_regress_rest(server):
    body = {"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]}
    assert rest(server, "POST", "/v1/models/default:classify", body) == (200, {"results": [[["", 3.0]]]})
    body = {"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]}
    assert rest(server, "POST", "/v1/models/default:regress", body) == (200, {"results": [3.0]})


def test_status_rest(server):
    assert rest(server, "GET", "/v1/models/default") == (200, {"model_version_status": [
        {"version": str(VERSION), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]})


def test_metadata_rest(server):
    status, answer = rest(server, "GET", "/v1/models/default/metadata")
    assert status == 200
    assert answer["model_spec"] == {"name": "default", "signature_name": "", "version": str(VERSION)}
    signatures = answer["metadata"]["signature_def"]["signature_def"]
    assert set(signatures) == {"serving_default", "regress_x_to_y", "regress_x_to_y2", "regress_x2_to_y3",
                               "classify_x_to_y"}
    x = signatures["serving_default"]["inputs"]["x"]
    assert x == {"dtype": "DT_FLOAT", "name": "x:0", "tensor_shape": {
        "dim": [{"size": "-1", "name": ""}, {"size": "1", "name": ""}], "unknown_rank": False}}
    assert signatures["regress_x2_to_y3"]["method_name"] == "tensorflow/serving/regress"
    assert signatures["classify_x_to_y"]["outputs"]["scores"]["name"] == "y:0"


# --- REST: http_rest_api_handler_test.cc ---------------------------------------------------------------------

def test_handler_predict(server):
    assert rest(server, "POST", "/v1/models/default:predict", {"instances": [[1.0, 2.0], [3.0, 4.0]]}) == (
        200, {"predictions": [[2.5, 3.0], [3.5, 4.0]]})
    for path in (f"/v1/models/default/versions/{VERSION}:predict", "/v1/models/default/labels/stable:predict"):
        assert rest(server, "POST", path, {"instances": [1.0, 2.0]}) == (200, {"predictions": [2.5, 3.0]})
    path = f"/v1/models/default/versions/{VERSION}:predict"
    assert rest(server, "POST", path, {"signature_name": "serving_default", "instances": [3.0, 4.0]}) == (
        200, {"predictions": [3.5, 4.0]})
    assert rest(server, "POST", path, {"signature_name": "serving_default", "inputs": [3.0, 4.0]}) == (
        200, {"outputs": [3.5, 4.0]})


def test_handler_regress_and_classify(server):
    body = {"signature_name": "regress_x_to_y", "examples": [{"x": 80.0}]}
    for path in ("/v1/models/default:regress", f"/v1/models/default/versions/{VERSION}:regress",
                 "/v1/models/default/labels/stable:regress"):
        assert rest(server, "POST", path, body) == (200, {"results": [42.0]})
    body = {"signature_name": "classify_x_to_y", "examples": [{"x": 20.0}]}
    assert rest(server, "POST", "/v1/models/default:classify", body) == (200, {"results": [[["", 12.0]]]})
    body = {"signature_name": "classify_x_to_y", "examples": [{"x": 10.0}]}
    assert rest(server, "POST", "/v1/models/default/labels/stable:classify", body) == (
        200, {"results": [[["", 7.0]]]})


def test_handler_status_by_version_and_label(server):
    expected = {"model_version_status": [
        {"version": str(VERSION), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    for path in (f"/v1/models/default/versions/{VERSION}", "/v1/models/default/labels/stable"):
        assert rest(server, "GET", path) == (200, expected)


UNSUPPORTED = [("GET", "/v1/foo"), ("POST", "/v1/foo"), ("GET", "/v1/models/debug/model_name"),
               ("POST", "/v1/models"), ("GET", "/v1/models/foo:predict"), ("GET", "/v1/models/foo/version/50:predict"),
               ("POST", "/v1/models/foo/version/50:regress"), ("POST", "/v1/models/foo/versions/HELLO:regress"),
               ("POST", "/v1/models/foo/metadata"), ("POST", "/v1/models/foo/label/some_label:regress"),
               ("POST", "/v1/models/foo/versions/50/labels/some_label:regress"),
               ("POST", "/v1/models/foo/versions/some_label:regress")]


@pytest.mark.parametrize("method, path", UNSUPPORTED)
def test_handler_unsupported_api_calls(server, method, path):
    status, answer = rest(server, method, path, b"" if method == "POST" else None)
    assert status == 400 and "Malformed request" in answer["error"]


def test_handler_missing_name_and_version_overflow(server):
    status, answer = rest(server, "GET", "/v1/models")
    assert status == 400 and "Missing model name" in answer["error"]
    status, answer = rest(server, "POST", f"/v1/models/foo/versions/{2 ** 64 - 1}:regress", b"")
    assert status == 400 and "Failed to convert version" in answer["error"]


def test_handler_model_name_and_version_errors(server):
    for path in ("/v1/models/foo:predict", "/v1/models/foo/versions/50:predict", "/v1/models/default99:predict"):
        assert rest(server, "POST", path, {"instances": [1]})[0] == 404


@pytest.mark.parametrize("body, message", [
    (b"", "JSON Parse error: The document is empty"),
    (b"instances = [1, 2]", "JSON Parse error: Invalid value"),
    ({"instances": ["x", "y"]}, "not of expected type: float"),
    ({"signature_name": 100}, "'signature_name' key must be a string value."),
])
def test_handler_predict_request_errors(server, body, message):
    status, answer = rest(server, "POST", "/v1/models/default:predict", body)
    assert status == 400 and message in answer["error"]


def test_handler_unknown_label(server):
    status, answer = rest(server, "POST", "/v1/models/default/labels/nope:predict", {"instances": ["x", "y"]})
    assert status == 400 and "Unrecognized servable version label" in answer["error"]


# --- gRPC: tensorflow_model_server_test.py -------------------------------------------------------------------

def predict_request(model: str, signature_name: str = "serving_default", output_filter: bool = True,
                    batch_input: bool = False) -> predict_pb2.PredictRequest:
    """The model-server test's VerifyPredictRequest: x = [2.0] (or [[2.0]]), float."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = model, signature_name
    request.inputs["x"].dtype = types_pb2.DT_FLOAT
    request.inputs["x"].float_val.append(2.0)
    request.inputs["x"].tensor_shape.dim.add().size = 1
    if batch_input:
        request.inputs["x"].tensor_shape.dim.add().size = 1
    if output_filter:
        request.output_filter.append("y")
    return request


def _served_spec(result) -> tuple:
    """The (model, signature, version) a response says it came from."""
    return result.model_spec.name, result.model_spec.signature_name, result.model_spec.version.value


def _one_example(request, model: str | None = None, signature_name: str | None = None):
    """`request` (Classify, Regress or MultiInference) with one example, x = 2.0 (half plus two: 3.0), for
    `model`'s `signature_name` when given."""
    if model is not None:
        request.model_spec.name, request.model_spec.signature_name = model, signature_name
    request.input.example_list.examples.add().features.feature["x"].float_list.value.extend([2.0])
    return request


def check_predict(stubs, request, expected: float) -> None:
    result = stubs[0].Predict(request, RPC_TIMEOUT)
    assert "y" in result.outputs
    assert result.outputs["y"].dtype == types_pb2.DT_FLOAT
    assert list(result.outputs["y"].float_val) == [expected]
    assert _served_spec(result) == (request.model_spec.name, request.model_spec.signature_name, VERSION)


def test_grpc_status_and_metadata(stubs):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = "default"
    result = stubs[1].GetModelStatus(request, RPC_TIMEOUT)
    assert len(result.model_version_status) == 1
    assert result.model_version_status[0].version == VERSION
    assert result.model_version_status[0].status.error_code == 0
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = "default"
    request.metadata_field.append("signature_def")
    result = stubs[0].GetModelMetadata(request, RPC_TIMEOUT)
    assert result.model_spec.name == "default" and result.model_spec.version.value == VERSION
    assert list(result.metadata) == ["signature_def"]


@pytest.mark.parametrize("model", ["default", "tf2"])
def test_grpc_predict(stubs, model):
    check_predict(stubs, predict_request(model), 3.0)


def test_grpc_good_model_config(stubs):
    check_predict(stubs, predict_request("default"), 3.0)
    check_predict(stubs, predict_request("default", output_filter=False), 3.0)
    check_predict(stubs, predict_request("half_plus_three"), 4.0)
    check_predict(stubs, predict_request("half_plus_three", output_filter=False), 4.0)


def test_grpc_tf_saved_model_save(stubs):
    check_predict(stubs, predict_request("product", output_filter=False), 12.0)
    check_predict(stubs, predict_request("two_signatures", signature_name="custom_signature_key"), 2.0)
    check_predict(stubs, predict_request("two_signatures"), 1.0)


@pytest.mark.parametrize("model", ["default", "tf2"])
def test_grpc_classify(stubs, model):
    request = _one_example(classification_pb2.ClassificationRequest(), model, "classify_x_to_y")
    result = stubs[0].Classify(request, RPC_TIMEOUT)
    assert len(result.result.classifications) == 1
    assert len(result.result.classifications[0].classes) == 1
    assert result.result.classifications[0].classes[0].score == 3.0
    assert _served_spec(result) == (model, "classify_x_to_y", VERSION)


@pytest.mark.parametrize("model", ["default", "tf2"])
def test_grpc_regress(stubs, model):
    request = _one_example(regression_pb2.RegressionRequest(), model, "regress_x_to_y")
    result = stubs[0].Regress(request, RPC_TIMEOUT)
    assert [r.value for r in result.result.regressions] == [3.0]
    assert _served_spec(result) == (model, "regress_x_to_y", VERSION)


@pytest.mark.parametrize("model", ["default", "tf2"])
def test_grpc_multi_inference(stubs, model):
    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (("regress_x_to_y", "tensorflow/serving/regress"),
                              ("classify_x_to_y", "tensorflow/serving/classify")):
        task = request.tasks.add()
        task.model_spec.name, task.model_spec.signature_name, task.method_name = model, signature, method
    _one_example(request)
    result = stubs[0].MultiInference(request, RPC_TIMEOUT)
    assert len(result.results) == 2
    assert result.results[0].regression_result.regressions[0].value == 3.0
    assert result.results[1].classification_result.classifications[0].classes[0].score == 3.0
    for i in range(2):
        spec = result.results[i].model_spec
        assert (spec.name, spec.signature_name, spec.version.value) == (
            model, request.tasks[i].model_spec.signature_name, VERSION)


def test_grpc_multi_inference_refusals(stubs):
    request = inference_pb2.MultiInferenceRequest()
    for model in ("default", "tf2"):
        task = request.tasks.add()
        task.model_spec.name, task.model_spec.signature_name = model, "regress_x_to_y"
        task.method_name = "tensorflow/serving/regress"
    _one_example(request)
    with pytest.raises(grpc.RpcError) as error:
        stubs[0].MultiInference(request, RPC_TIMEOUT)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must access the same model name" in error.value.details()
    request.tasks[1].model_spec.name = "default"
    with pytest.raises(grpc.RpcError) as error:
        stubs[0].MultiInference(request, RPC_TIMEOUT)
    assert error.value.details() == "Duplicate evaluation of signature: regress_x_to_y"


def test_grpc_wrong_dtype_is_refused_by_the_graph_as_in_tf_serving(stubs):
    request = predict_request("default")
    request.inputs["x"].dtype = types_pb2.DT_STRING
    request.inputs["x"].ClearField("float_val")
    request.inputs["x"].string_val.append(b"2")
    with pytest.raises(grpc.RpcError) as error:
        stubs[0].Predict(request, RPC_TIMEOUT)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Expects arg[0] to be float but string is provided" in error.value.details()


def test_method_name_check_is_off_by_default_and_on_with_the_flag(server):
    """TF Serving's --enable_signature_method_name_check (default off): TF2 signatures all say "predict", so
    with the check on they cannot classify; off, their inputs and outputs decide."""
    path = server.manager.servable("tf2").path
    assert Servable.load("tf2", VERSION, path).signature("classify_x_to_y", CLASSIFY)[0] == "classify_x_to_y"
    with pytest.raises(ServingError) as error:
        Servable.load("tf2", VERSION, path, method_check=True).signature("classify_x_to_y", CLASSIFY)
    assert error.value.message == ("Expected classification signature method_name to be tensorflow/serving/classify."
                                   " Was: tensorflow/serving/predict")
