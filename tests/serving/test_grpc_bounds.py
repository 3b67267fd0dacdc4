"""Bounds on one request over gRPC, and the server's and client's other faults of issue 38: a TensorProto whose
values do not match its declared shape is refused INVALID_ARGUMENT before any array is made (serious case 1:
`tf.make_ndarray` repeats a short list's last value up to the shape, so 35 bytes became 20,000,000 rows);
the elements of one Predict are capped (`--max_elements_per_request`); a REST request framed two ways
(Content-Length and chunked) is refused and its connection closed; an export dir as `--model_base_path` is
named as one, and so is its `serving/` folder (issue 46), each with the base path to give; the client says
in one line that its `--json` file or its server is not there."""

import json
import socket

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving import client
from serving.server import http as server_cli
from serving.server.http import ModelServer, ServerOptions
from serving.server.model_config import ModelEntry
from tests.fixtures.serving import save_text_model

MAX_ELEMENTS = 3000
WAIT_S = 120


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    save_text_model(str(root / "text" / "1"))
    options = ServerOptions(rest_api_port=0, grpc_port=0, file_system_poll_wait_seconds=0,
                            max_elements_per_request=MAX_ELEMENTS)
    with ModelServer([ModelEntry("text", str(root / "text"))], options) as running:
        yield running


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield prediction_service_pb2_grpc.PredictionServiceStub(channel)


def tensor(dtype, dims, **values) -> tensor_pb2.TensorProto:
    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in dims])
    return tensor_pb2.TensorProto(dtype=dtype, tensor_shape=shape, **values)


def predict(stub, signature: str, **inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = "text", signature
    for name, proto in inputs.items():
        request.inputs[name].CopyFrom(proto)
    return stub.Predict(request, timeout=WAIT_S)


def refused(stub, signature: str, **inputs) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        predict(stub, signature, **inputs)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    return caught.value.details()


def test_a_tensor_whose_values_do_not_match_its_shape_is_refused(stub):
    # 1,000,000 strings declared, 2 sent: the server took 16 GB expanding it
    text = tensor(types_pb2.DT_STRING, [1_000_000], string_val=[b"a b", b"c"])
    assert refused(stub, "", text=text) == ("tensor parsing error: text: its shape [1000000] declares 1000000 "
                                            "elements, its string_val holds 2 (a tensor's values must match its shape)")
    # a 35-byte request declaring 20,000,000 rows of 3 ids
    ids = tensor(types_pb2.DT_INT32, [20_000_000, 3], int_val=[1])
    weight = tensor(types_pb2.DT_FLOAT, [20_000_000], float_val=[1.0])
    assert len(ids.SerializeToString()) + len(weight.SerializeToString()) < 40
    assert "tensor parsing error: ids: its shape [20000000, 3] declares 60000000 elements" in \
        refused(stub, "score", ids=ids, weight=weight)
    # tensor_content of the wrong length, more values than the shape, a negative dimension, no values at all
    short = tensor(types_pb2.DT_INT32, [2, 3], tensor_content=np.arange(5, dtype=np.int32).tobytes())
    one = tensor(types_pb2.DT_FLOAT, [2], float_val=[1.0, 2.0])
    assert "its content holds 20 bytes of tensor_content (4 per element)" in refused(stub, "score", ids=short,
                                                                                      weight=one)
    long = tensor(types_pb2.DT_INT32, [1, 3], int_val=[1, 2, 3, 4])
    assert "declares 3 elements, its int_val holds 4" in refused(stub, "score", ids=long, weight=one)
    negative = tensor(types_pb2.DT_STRING, [-1], string_val=[b"a"])
    assert "is not a valid tensor shape" in refused(stub, "", text=negative)
    empty = tensor(types_pb2.DT_STRING, [5])
    assert "declares 5 elements, its string_val holds 0" in refused(stub, "", text=empty)
    # the same tensors written whole are served
    ids = tf.make_tensor_proto(np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    response = predict(stub, "score", ids=ids, weight=tf.make_tensor_proto(np.array([1.0, 0.5], np.float32)))
    assert tf.make_ndarray(response.outputs["score"]).tolist() == [6.0, 7.5]


def test_the_elements_of_one_request_are_capped(stub):
    fits = tf.make_tensor_proto(np.array([b"a b"] * MAX_ELEMENTS, dtype=object))
    assert tf.make_ndarray(predict(stub, "length", text=fits).outputs["length"]).shape == (MAX_ELEMENTS,)
    over = tf.make_tensor_proto(np.array([b"a"] * (MAX_ELEMENTS + 1), dtype=object))
    assert refused(stub, "length", text=over) == (f"Request has {MAX_ELEMENTS + 1} input elements; this server "
                                                  f"takes at most {MAX_ELEMENTS} per request "
                                                  f"(--max_elements_per_request)")


def test_content_length_with_chunked_is_refused_and_the_connection_closed(server):
    body = b'{"instances": ["a b"]}'
    smuggled = b"GET /v1/models/text HTTP/1.1\r\nHost: x\r\n\r\n"
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    request = (b"POST /v1/models/text:predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" % len(chunked)) + chunked + smuggled
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=WAIT_S) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):  # the server closes the connection after its one answer
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400 ") and reply.count(b"HTTP/1.1 ") == 1, reply
    assert b"both Transfer-Encoding and Content-Length" in reply


def test_an_export_dir_as_model_base_path_is_named(tmp_path, capsys):
    export = tmp_path / "export"
    (export / "hub" / "encoder").mkdir(parents=True)
    (export / "serving" / "bert" / "1").mkdir(parents=True)
    (export / "serving" / "models.config").write_text("model_config_list {}\n")
    assert server_cli.main(["--model_base_path", str(export), "--rest_api_port", "0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: --model_base_path {export} is an export dir of serving.export, not a model's base path "
                   f"(no version folders in it): give --model_base_path {export / 'serving' / 'bert'} or "
                   f"--model_config_file {export / 'serving' / 'models.config'}\n")


def test_the_serving_folder_of_an_export_as_model_base_path_is_named(tmp_path, capsys):
    """`<export>/serving` holds model folders, not version folders: the hint names the model's base path."""
    serving = tmp_path / "export" / "serving"
    (serving / "bert" / "1").mkdir(parents=True)
    (serving / "bert" / ".1.incomplete").mkdir()
    (serving / "notes").mkdir()
    for config in (False, True):
        if config:
            (serving / "models.config").write_text("model_config_list {}\n")
        assert server_cli.main(["--model_base_path", str(serving), "--rest_api_port", "0", "--port", "0"]) == 2
        assert capsys.readouterr().err == (
            f"error: --model_base_path {serving} is a folder of models' base paths, not a model's base path (no "
            f"version folders in it): give --model_base_path {serving / 'bert'}"
            + (f" or --model_config_file {serving / 'models.config'}" if config else "") + "\n")


def test_the_client_says_in_one_line_what_is_missing(tmp_path, capsys):
    broken, listed = tmp_path / "broken.json", tmp_path / "list.json"
    broken.write_text('{"instances": [')
    listed.write_text('["a"]')
    for path, said in ((tmp_path / "nope.json", "no such file"), (tmp_path, "is a folder"),
                       (broken, "is not JSON: Expecting value at line 1 column 16"),
                       (listed, "holds a JSON list, not an object")):
        assert client.main(["--server", "http://127.0.0.1:9", "--model", "m", "--json", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --json {path}") and said in err and len(err.splitlines()) == 1, err
    with socket.socket() as free:  # a port where nothing listens
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert client.main(["--server", f"http://127.0.0.1:{port}", "--model", "m", "--text", "a"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: UNAVAILABLE: cannot reach http://127.0.0.1:{port}") and len(err.splitlines()) == 1
    assert json.loads(listed.read_text()) == ["a"]
