"""The local TF Serving-compatible server: REST routes and formats, errors, versions, warm-up, concurrency,
limits, gRPC and the CLIs, on small SavedModels (tests/fixtures/serving.py)."""

import base64
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from serving.client import GrpcClient, RestClient, ServerError
from serving.server.servable import Batcher, ServingError
from serving.server.model_config import ModelEntry, write_model_config_list
from serving.server.http import ModelServer, ServerOptions
from tests.conftest import ROOT
from tests.fixtures.serving import http, predict_request, save_classifier, save_text_model, write_warmup

WAIT_S = 120  # waits for a condition and deadlines of calls: bound a hang only
START_S = 600  # a `python -m` process importing TensorFlow, on a loaded machine: bounds a hang only


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Pristine exports to copy from: text model versions (scale 1 and 2) and the TF1 classifier."""
    root = tmp_path_factory.mktemp("exports")
    return {"text1": save_text_model(str(root / "text1"), 1.0), "text2": save_text_model(str(root / "text2"), 2.0),
            "classifier": save_classifier(str(root / "classifier"))}


@pytest.fixture(scope="module")
def server(exported, tmp_path_factory):
    base = tmp_path_factory.mktemp("models")
    shutil.copytree(exported["text1"], base / "text" / "1")
    shutil.copytree(exported["classifier"], base / "cls" / "7")
    models = [ModelEntry("text", str(base / "text"), version_labels=(("stable", 1), ("missing", 9))),
              ModelEntry("cls", str(base / "cls"))]
    with ModelServer(models, ServerOptions(rest_api_port=0, grpc_port=0)) as running:
        yield running


def test_status_routes(server):
    ok = {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    for path in ("/v1/models/text", "/v1/models/text/versions/1", "/v1/models/text/labels/stable",
                 "/V1/Models/text"):
        assert http(server, "GET", path) == (200, {"model_version_status": [ok]})
    assert http(server, "GET", "/v1/models/text/versions/3") == (
        404, {"error": "Could not find version 3 of model text"})
    assert http(server, "GET", "/v1/models/nope") == (404, {"error": "Could not find any versions of model nope"})
    assert http(server, "GET", "/v1/models/text/labels/beta") == (
        400, {"error": "Unrecognized servable version label: beta"})


def test_metadata(server):
    status, body = http(server, "GET", "/v1/models/text/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": "text", "signature_name": "", "version": "1"}
    signatures = body["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "length", "score", "calls", "__saved_model_init_op"} <= set(signatures)
    default = signatures["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    assert default["inputs"]["text"]["dtype"] == "DT_STRING"
    assert default["inputs"]["text"]["tensor_shape"] == {"dim": [{"size": "-1", "name": ""}], "unknown_rank": False}
    assert default["outputs"]["embedding"]["tensor_shape"]["dim"][1]["size"] == "4"
    assert http(server, "GET", "/v1/models/cls/versions/7/metadata")[1]["metadata"]["signature_def"][
        "signature_def"]["classify_x"]["method_name"] == "tensorflow/serving/classify"


def test_predict_row_and_columnar(server):
    rows = http(server, "POST", "/v1/models/text:predict", {"instances": ["hello world", "a b c"]})
    assert rows == (200, {"predictions": [
        {"embedding": [2.0, 3.0, 4.0, 5.0], "length": 2, "first_token": "hello",
         "text_bytes": {"b64": base64.b64encode(b"hello world").decode()}},
        {"embedding": [3.0, 4.0, 5.0, 6.0], "length": 3, "first_token": "a",
         "text_bytes": {"b64": base64.b64encode(b"a b c").decode()}}]})
    columns = http(server, "POST", "/v1/models/text/versions/1:predict", {"inputs": ["hello world", "a b c"]})
    assert columns[1]["outputs"]["length"] == [2, 3] and columns[1]["outputs"]["first_token"] == ["hello", "a"]
    single = {"signature_name": "length", "instances": [{"b64": base64.b64encode("né x".encode()).decode()}, "y"]}
    assert http(server, "POST", "/v1/models/text/labels/stable:predict", single) == (200, {"predictions": [2, 1]})
    assert http(server, "POST", "/v1/models/text:predict", {"signature_name": "length", "inputs": {"text": ["a"]}}) \
        == (200, {"outputs": [1]})


def test_predict_multi_input(server):
    named = [{"ids": [1, 2, 3], "weight": 0.5}, {"ids": [0, 0, 4], "weight": 0.1}]
    status, body = http(server, "POST", "/v1/models/text:predict", {"signature_name": "score", "instances": named})
    assert (status, body) == (200, {"predictions": [3.0, 0.4]})  # 0.4: the shortest text of float32(0.4)
    columnar = {"signature_name": "score", "inputs": {"ids": [[1, 1, 1]], "weight": [2], "extra": 1}}
    assert http(server, "POST", "/v1/models/text:predict", columnar) == (200, {"outputs": [6.0]})


PREDICT_ERRORS = [
    (b"", "JSON Parse error: The document is empty"),
    (b"instances = [1, 2]", "JSON Parse error"),
    (b"[1]", "Is not object"),
    ({"signature_name": 3, "instances": ["a"]}, "'signature_name' key must be a string value."),
    ({"instances": ["a"], "inputs": ["a"]}, "expecting only one of 'inputs' or 'instances' keys to exist"),
    ({"data": ["a"]}, "Missing 'inputs' or 'instances' key"),
    ({"instances": "a"}, "Excepting 'instances' to be an list/array"),
    ({"instances": []}, "No values in 'instances' array"),
    ({"instances": [1]}, "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON Value: 1 "
                         "Type: Number is not of expected type: string"),
    ({"inputs": [["a", "b"], ["c"]]}, "Encountered list at unexpected size: 1 at level: 1 expected size: 2"),
    ({"inputs": [["a"], "b"]}, "JSON Value: \"b\" found at incorrect level: 2 in the JSON DOM. Expected at level: 2"),
    ({"instances": ["a", ["b"]]}, "Expecting shape [] but got: [1]"),
    ({"inputs": [{"b64": "%%%"}]}, "Unable to base64 decode"),
    ({"inputs": {"txt": ["a"]}}, "Missing named input: text in 'inputs' object."),
    ({"instances": [{"txt": "a"}]}, "does not have named input: txt"),
    ({"signature_name": "nope", "instances": ["a"]}, 'Serving signature name: "nope" not found in signature def'),
    ({"signature_name": "score", "instances": [[1, 2, 3]]}, "instances is a plain list, but expecting list of objects"),
    ({"signature_name": "score", "inputs": [[1, 2, 3]]}, "inputs is a plain value/list, but expecting an object"),
    ({"signature_name": "score", "instances": [{"ids": [1, 2, 3]}]}, "must only have keys: ids,weight"),
    ({"signature_name": "score", "instances": [{"ids": [1, 2.5, 3], "weight": 1}]}, "is not of expected type: int32"),
    ({"signature_name": "score", "instances": [{"ids": [1, 2, 3], "weight": 16777217}]},
     "Cannot convert JSON value: 16777217 to float without loss of precision."),
    ({"signature_name": "score", "inputs": {"ids": [1, 2, 3], "weight": [1.0]}},  # the graph refuses rank 1
     "Invalid reduction dimension"),
]


@pytest.mark.parametrize("body, message", PREDICT_ERRORS)
def test_predict_errors(server, body, message):
    status, answer = http(server, "POST", "/v1/models/text:predict", body)
    assert status == 400 and message in answer["error"], answer


def test_shapes_are_the_graphs_business_as_in_tf_serving(server):
    """TF Serving feeds tensors without checking them against the signature's shapes: ids [1, 2] where the
    signature says [-1, 3] runs, since reduce_sum does not mind."""
    body = {"signature_name": "score", "inputs": {"ids": [[1, 2]], "weight": [1.0]}}
    assert http(server, "POST", "/v1/models/text:predict", body) == (200, {"outputs": [3.0]})


def test_not_found_and_routes(server):
    body = {"instances": ["a"]}
    assert http(server, "POST", "/v1/models/nope:predict", body) == (
        404, {"error": "Servable not found for request: Latest(nope)"})
    assert http(server, "POST", "/v1/models/text/versions/5:predict", body) == (
        404, {"error": "Servable not found for request: Specific(text, 5)"})
    assert http(server, "POST", "/v1/models/text/labels/missing:predict", body) == (
        404, {"error": "Servable not found for request: Specific(text, 9)"})
    assert http(server, "POST", f"/v1/models/text/versions/{2 ** 64}:predict", body) == (
        400, {"error": f"Failed to convert version: {2 ** 64} to numeric."})
    for method, path in (("GET", "/v1/foo"), ("POST", "/v1/models"), ("GET", "/v1/models/text:predict"),
                         ("PUT", "/v1/models/text"), ("DELETE", "/v1/models/text"),
                         ("POST", "/v1/models/text/version/1:predict")):
        assert http(server, method, path) == (400, {"error": f"Malformed request: {method} {path}"})
    assert http(server, "GET", "/v1/models") == (400, {"error": "Missing model name in request."})
    assert http(server, "GET", "/index.html")[0] == 404


def test_classify_and_regress(server):
    body = {"signature_name": "classify_x", "examples": [{"x": 0.25}, {"x": [0.5]}]}
    assert http(server, "POST", "/v1/models/cls:classify", body) == (
        200, {"results": [[["pos", 0.25], ["neg", 0.75]], [["pos", 0.5], ["neg", 0.5]]]})
    with_context = {"signature_name": "regress_x", "context": {"x": 1.0}, "examples": [{}, {"x": 0.25}]}
    assert http(server, "POST", "/v1/models/cls/versions/7:regress", with_context) == (200, {"results": [2.0, 0.5]})
    status, answer = http(server, "POST", "/v1/models/cls:classify", {"examples": [{"x": 0.25}]})
    assert status == 400 and answer["error"].startswith("No classification inputs found in SignatureDef: ")
    assert http(server, "POST", "/v1/models/cls:regress", {"signature_name": "classify_x",
                                                           "examples": [{"x": 1.0}]})[0] == 400
    assert http(server, "POST", "/v1/models/cls:classify", {"signature_name": "nope", "examples": [{"x": 1.0}]}) \
        == (400, {"error": "No signature was found with the name: nope"})
    assert "'examples' value is an empty array" in http(server, "POST", "/v1/models/cls:classify",
                                                        {"examples": []})[1]["error"]
    assert http(server, "POST", "/v1/models/cls:predict", {"inputs": {"x": [1.5]}}) == (200, {"outputs": [3.0]})


def test_rest_client(server):
    client = RestClient(server.url)
    assert client.predict("text", instances=["a b"], signature_name="length") == {"predictions": [2]}
    assert client.predict("text", inputs=["a b"], signature_name="length", version=1) == {"outputs": [2]}
    assert client.status("text", label="stable")["model_version_status"][0]["state"] == "AVAILABLE"
    assert "serving_default" in client.metadata("text")["metadata"]["signature_def"]["signature_def"]
    assert client.classify("cls", [{"x": 0.5}], signature_name="classify_x") == {
        "results": [[["pos", 0.5], ["neg", 0.5]]]}
    with pytest.raises(ServerError) as error:
        client.predict("nope", instances=["a"])
    assert (error.value.status, error.value.message) == (404, "Servable not found for request: Latest(nope)")


def test_grpc(server):
    client = GrpcClient(f"127.0.0.1:{server.grpc_port}")
    rest = RestClient(server.url)
    for kwargs in ({"instances": ["hello world", "a"]}, {"inputs": ["x y z"]},
                   {"instances": [{"ids": [1, 2, 3], "weight": 0.1}], "signature_name": "score"}):
        assert client.predict("text", **kwargs) == rest.predict("text", **kwargs)
    assert client.status("text") == rest.status("text")
    assert client.metadata("text", version=1) == rest.metadata("text", version=1)
    assert client.classify("cls", [{"x": 0.25}], signature_name="classify_x") == \
        rest.classify("cls", [{"x": 0.25}], signature_name="classify_x")
    assert client.regress("cls", [{"x": 0.25}], signature_name="regress_x") == {"results": [0.5]}
    for call, code, message in [
            (lambda: client.predict("nope", inputs=["a"]), "NOT_FOUND", "Servable not found for request: Latest(nope)"),
            (lambda: client.status("text", version=4), "NOT_FOUND", "Could not find version 4 of model text"),
            (lambda: client.classify("cls", [{"x": 1.0}]), "INVALID_ARGUMENT",
             "No classification inputs found in SignatureDef"),
            (lambda: client.predict("text", inputs={"ids": [[1, 2, 3]]}, signature_name="score"), "INVALID_ARGUMENT",
             "Missing named input: weight in 'inputs' object."),  # the REST codec's message, as over REST
            (lambda: client.predict("text", instances=[1]), "INVALID_ARGUMENT",
             "Type: Number is not of expected type: string")]:
        with pytest.raises(ServerError) as error:
            call()
        assert error.value.status == code and message in error.value.message
    raw = predict_pb2.PredictRequest(inputs={"text": predict_request({"text": np.float32([1.0])}).inputs["text"]})
    raw.model_spec.name = "text"
    with pytest.raises(Exception) as error:
        client._predictions.Predict(raw, timeout=WAIT_S)
    assert "Expects arg[0] to be string but float is provided" in error.value.details()
    client.close()


def test_grpc_and_rest_clients_encode_tensors_alike(server):
    """The same request over gRPC (tensor protos, encoded by the client) and REST (encoded by the server):
    float32 edge values, NaN and infinities, int32, strings and `_bytes` (b64) come back identical."""
    grpc_client, rest = GrpcClient(f"127.0.0.1:{server.grpc_port}"), RestClient(server.url)
    f32 = np.finfo(np.float32)
    # (no subnormals: TF's CPU kernels flush them to zero; tests/serving/test_json_codec.py covers them)
    weights = np.array([1 / 3, 0.1, f32.max, f32.tiny, -0.0, np.nan, np.inf, -np.inf], np.float32)
    for inputs in ({"ids": [[1, 0, 0]] * len(weights), "weight": weights},  # numpy values, sent by the codec
                   {"ids": np.ones((70, 3), np.int32), "weight": np.linspace(-1e6, 1e6, 70, dtype=np.float32)}):
        over_rest = rest.predict("text", inputs=inputs, signature_name="score")
        over_grpc = grpc_client.predict("text", inputs=inputs, signature_name="score")
        assert json.dumps(over_rest) == json.dumps(over_grpc)  # NaN too (NaN != NaN as values)
    first = rest.predict("text", inputs={"ids": [[1, 0, 0]] * 8, "weight": weights}, signature_name="score")
    assert json.dumps(first["outputs"]) == "[0.333333343, 0.1, 3.40282347e+38, 1.17549435e-38, -0.0, " \
                                          "NaN, Infinity, -Infinity]"
    texts = [{"b64": base64.b64encode(b"caf\xc3\xa9 \xff").decode()}, "a b", ""]
    assert grpc_client.predict("text", instances=texts) == rest.predict("text", instances=texts)
    assert rest.predict("text", instances=[b"\xff x"])["predictions"][0]["text_bytes"] == {
        "b64": base64.b64encode(b"\xff x").decode()}  # bytes are sent as b64 and come back as b64
    grpc_client.close()


def test_new_version_is_picked_up_and_old_unloaded(exported, tmp_path):
    base = tmp_path / "text"
    shutil.copytree(exported["text1"], base / "1")
    options = ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0.1)
    with ModelServer([ModelEntry("text", str(base))], options) as server:
        client = RestClient(server.url)
        assert client.predict("text", instances=["a"])["predictions"][0]["embedding"] == [1.0, 2.0, 3.0, 4.0]
        shutil.copytree(exported["text2"], base / "2.partial")
        os.rename(base / "2.partial", base / "2")  # atomic, as exporters should do
        states = wait_for(lambda: client.status("text")["model_version_status"],
                          lambda s: [(v["version"], v["state"]) for v in s] == [("1", "END"), ("2", "AVAILABLE")])
        assert states[0]["status"]["error_code"] == "OK"
        assert client.predict("text", instances=["a"])["predictions"][0]["embedding"] == [2.0, 4.0, 6.0, 8.0]
        shutil.rmtree(base / "2")  # rolled back: version 1 is the latest again and is reloaded
        wait_for(lambda: client.status("text")["model_version_status"],
                 lambda s: [(v["version"], v["state"]) for v in s] == [("1", "AVAILABLE"), ("2", "END")])
        assert client.predict("text", instances=["a"])["predictions"][0]["length"] == 1


def wait_for(read, done, seconds=WAIT_S):
    deadline = time.monotonic() + seconds
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            assert done(value), value
            return value
        time.sleep(0.05)


def test_warmup_replayed_and_failing_warmup_fails_the_load(exported, tmp_path):
    base = tmp_path / "text"
    for version in (1, 2, 3):
        shutil.copytree(exported["text1"], base / str(version))
    good = [predict_request({"text": np.array([b"a b"], dtype=object)})] * 3
    write_warmup(str(base / "1"), good)
    write_warmup(str(base / "2"), good + [predict_request({"txt": np.array([b"a"], dtype=object)})])
    write_warmup(str(base / "3"), [], raw_records=(b"\x01\x02not a proto",))
    entry = ModelEntry("text", str(base), version_policy="all")
    with ModelServer([entry], ServerOptions(rest_api_port=0, file_system_poll_wait_seconds=0)) as server:
        states = RestClient(server.url).status("text")["model_version_status"]
        assert states[0] == {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        assert states[1]["state"] == "END" and states[1]["status"]["error_code"] == "INVALID_ARGUMENT"
        assert states[1]["status"]["error_message"].startswith("input tensor alias not found in signature: txt")
        assert states[2]["state"] == "END" and "Failed to parse warmup record" in states[2]["status"]["error_message"]
        assert server.manager.servable("text", 1).predict("calls", {})["calls"].tolist() == [3]
        assert RestClient(server.url).predict("text", instances=["a"])["predictions"][0]["length"] == 1  # latest: 1


@pytest.mark.slow
def test_concurrent_requests(exported, tmp_path):
    shutil.copytree(exported["text1"], tmp_path / "text" / "1")
    for batching in (False, True):
        options = ServerOptions(rest_api_port=0, enable_batching=batching)
        with ModelServer([ModelEntry("text", str(tmp_path / "text"))], options) as server:
            errors, wrong = [], []

            def worker(thread):
                client = RestClient(server.url)
                for i in range(50):
                    words = " ".join(["w"] * (1 + (thread + i) % 7))
                    try:
                        got = client.predict("text", instances=[words, "x"], signature_name="length")
                    except Exception as e:  # noqa: BLE001  (counted and reported)
                        errors.append(repr(e))
                        continue
                    if got != {"predictions": [1 + (thread + i) % 7, 1]}:
                        wrong.append(got)
            threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert (errors, wrong) == ([], []), f"batching={batching}"


def test_request_size_limit_and_default_host(exported, tmp_path):
    shutil.copytree(exported["text1"], tmp_path / "text" / "1")
    options = ServerOptions(rest_api_port=0, max_request_bytes=1000)
    assert ServerOptions().rest_api_host == "127.0.0.1"
    with ModelServer([ModelEntry("text", str(tmp_path / "text"))], options) as server:
        assert server._http.server_address[0] == "127.0.0.1"
        status, body = http(server, "POST", "/v1/models/text:predict", {"instances": ["x" * 2000]})
        assert status == 413 and "exceeds the limit of 1000 bytes" in body["error"]
        assert http(server, "POST", "/v1/models/text:predict", {"instances": ["x" * 900]})[0] == 200


@pytest.mark.slow
def test_cli_server_and_client(exported, tmp_path):
    shutil.copytree(exported["text1"], tmp_path / "models" / "text" / "1")
    config = str(tmp_path / "models.config")
    write_model_config_list(config, [("text", str(tmp_path / "models" / "text"))])
    env = dict(os.environ, PYTHONPATH=ROOT)
    server = subprocess.Popen([sys.executable, "-m", "serving.server", "--model_config_file", config,
                               "--rest_api_port", "0", "--port", "0"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = read_line(server, timeout=START_S)
        assert line.startswith("Serving {'text': [1]} on REST http://127.0.0.1:"), line
        url = line.split("REST ")[1].split()[0]
        result = subprocess.run([sys.executable, "-m", "serving.client", "--server", url, "--model", "text",
                                 "--signature", "length", "--text", "a b c", "--text", "d"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=START_S)
        assert result.returncode == 0 and json.loads(result.stdout) == {"predictions": [3, 1]}, result.stderr
        missing = subprocess.run([sys.executable, "-m", "serving.client", "--server", url, "--model", "nope",
                                  "--status"], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=START_S)
        assert missing.returncode == 1 and "404: Could not find any versions of model nope" in missing.stderr
        server.terminate()
        assert server.wait(timeout=WAIT_S) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def read_line(process, timeout: float) -> str:
    """The process's first stdout line, or a failure after `timeout` seconds."""
    lines = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert lines and lines[0], f"no start-up line within {timeout} s"
    return lines[0].strip()


def test_batcher_merges_queued_calls_and_isolates_errors():
    calls, started, release = [], threading.Event(), threading.Event()

    def double(inputs):  # blocks on its first call, so the others queue behind it
        x = inputs["x"]
        calls.append(int(x.shape[0]))
        if len(calls) == 1:
            started.set()
            release.wait(WAIT_S)  # set once the others are queued (or the test failed)
        if int(tf.reduce_min(x)) < 0:
            raise ValueError("negative input")
        return {"y": x * 2}

    batcher, results = Batcher(double), {}

    def run(key, rows):
        try:
            results[key] = batcher.run({"x": np.array(rows, np.int32)})["y"].tolist()
        except ServingError as e:
            results[key] = e.code
    first = threading.Thread(target=run, args=("first", [1]))
    threads = [threading.Thread(target=run, args=item)
               for item in {"a": [2, 3], "b": [4], "bad": [-1], "wide": [[5, 6]]}.items()]
    try:
        first.start()
        assert started.wait(WAIT_S)
        for thread in threads:
            thread.start()
        wait_for(lambda: len(batcher._queue), lambda n: n == 4)  # queued behind the running call
    finally:
        release.set()
    for thread in [first] + threads:
        thread.join(WAIT_S)
        assert not thread.is_alive()
    assert results == {"first": [2], "a": [4, 6], "b": [8], "bad": "INVALID_ARGUMENT", "wide": [[10, 12]]}
    # the first alone; a, b, bad merged (4 rows) and failing, then re-run one by one; wide (other shape) alone
    assert calls[:2] == [1, 4] and sorted(calls[2:]) == [1, 1, 1, 2]
