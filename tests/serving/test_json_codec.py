"""The one REST JSON codec (serving/server/json_values.py, json_tensor.py): TF Serving's value rules (float32
with 6 significant digits, else 9; NaN / Infinity tokens; int64 exact; `_bytes` as b64), the vectorized path
equal to the per-value rule, and the client encoding numpy values as the server encodes tensors."""

import base64
import json

import numpy as np
import pytest
import tensorflow as tf

from serving.server import json_tensor, json_values

F32 = np.finfo(np.float32)
# float32 value -> the decimal TF Serving writes (util/json_tensor.cc WriteDecimal: "%g", else "%.9g").
TF_SERVING_DECIMALS = [
    (np.float32(1 / 3), "0.333333343"),  # the shortest round-trip text would be 0.33333334
    (np.float32(0.1), "0.1"),
    (np.float32(2 / 3), "0.666666687"),
    (np.float32(1.0), "1.0"),
    (np.float32(16777216.0), "16777216"),
    (np.float32(9e6), "9e+06"),
    (np.float32(1e-5), "1e-05"),
    (F32.max, "3.40282347e+38"),
    (F32.tiny, "1.17549435e-38"),  # smallest normal
    (np.float32(2.0 ** -149), "1.4013e-45"),  # smallest subnormal (the shortest text: 1e-45)
    (np.float32(-2.5), "-2.5"),
    (np.float32(0.3), "0.3"),
    (np.float32(123456.789), "123456.789"),
]


@pytest.mark.parametrize("value, decimal", TF_SERVING_DECIMALS)
def test_float32_is_written_as_tf_serving_writes_it(value, decimal):
    assert json_values.float32_value(value) == float(decimal)
    assert np.float32(float(decimal)) == value  # and it reads back as the same float32


def test_the_vectorized_path_equals_the_per_value_rule():
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    normal = rng.normal(0, 3, 20000).astype(np.float32)
    powers = np.float32(10.0) ** rng.integers(-44, 38, 2000).astype(np.float32)
    dyadic = (rng.integers(-2 ** 20, 2 ** 20, 5000) / 2.0 ** rng.integers(0, 12, 5000)).astype(np.float32)
    edges = np.array([F32.max, -F32.max, F32.tiny, 2.0 ** -149, 0.0, -0.0, np.nan, np.inf, -np.inf], np.float32)
    for values in (bits, normal, powers, dyadic, np.concatenate([edges, normal[:100]])):
        assert values.size > 64  # the vectorized path
        fast = json_values.float32_values(values)
        slow = np.array([json_values.float32_value(v) for v in values])
        assert np.array_equal(fast, slow, equal_nan=True)
    assert np.signbit(json_values.float32_values(np.full(100, -0.0, np.float32))).all()


def test_tokens_types_and_bytes_in_a_response():
    outputs = {"score": np.array([np.nan, np.inf, -np.inf, 1 / 3, 0.0], np.float32),
               "ids": np.array([2 ** 63 - 1, -2 ** 63, 0, 1, 2], np.int64),
               "flag": np.array([True, False, True, False, True]),
               "word": np.array([b"caf\xc3\xa9", b"", b"a", b"b", b"c"], object),
               "raw_bytes": np.array([b"\xff\x00", b"x", b"", b"y", b"z"], object)}
    body = json_tensor.predict_response(outputs, row=False)
    text = body.decode()
    assert '"score":[NaN,Infinity,-Infinity,0.333333343,0.0]' in text
    assert '"ids":[9223372036854775807,-9223372036854775808,0,1,2]' in text
    assert '"flag":[true,false,true,false,true]' in text
    assert '"word":["caf\\u00e9","","a","b","c"]' in text
    assert json.loads(body)["outputs"]["raw_bytes"][0] == {"b64": base64.b64encode(b"\xff\x00").decode()}
    rows = json.loads(json_tensor.predict_response(outputs, row=True))["predictions"]
    assert rows[0]["ids"] == 2 ** 63 - 1 and np.isnan(rows[0]["score"]) and rows[1]["score"] == float("inf")


def test_request_values_encode_as_the_server_decodes_them():
    """numpy values in a client request: float32 by the same rule, bytes as b64, ints exact; what the
    server builds from that JSON is the client's tensor again."""
    weights = np.array([1 / 3, np.nan, F32.max, 2.0 ** -149], np.float32)
    ids = np.array([[2 ** 62, -1, 0]], np.int64)
    body = json.loads(json_values.dumps({"inputs": {"w": weights, "ids": ids, "raw": [b"\xff", b"ok"],
                                                    "n": np.int32(3)}}))
    assert body["inputs"]["w"][0] == 0.333333343 and body["inputs"]["ids"] == [[2 ** 62, -1, 0]]
    assert body["inputs"]["raw"] == [{"b64": "/w=="}, {"b64": "b2s="}] and body["inputs"]["n"] == 3
    arrays, row = json_tensor.predict_inputs(body, {"w": tf.float32, "ids": tf.int64, "raw": tf.string,
                                                    "n": tf.int32})
    assert not row and np.array_equal(arrays["w"], weights, equal_nan=True)
    assert arrays["ids"].dtype == np.int64 and arrays["ids"].tolist() == ids.tolist()
    assert arrays["raw"].tolist() == [b"\xff", b"ok"] and arrays["n"] == 3
    with pytest.raises(TypeError, match="cannot be sent as JSON"):
        json_values.dumps({"inputs": object()})


def test_examples_follow_one_rule():
    feature = json_tensor.example({"x": [1, 2], "y": 0.5, "t": "a", "b": {"b64": "/w=="}}).features.feature
    assert feature["x"].int64_list.value == [1, 2] and feature["y"].float_list.value == [0.5]
    assert feature["t"].bytes_list.value == [b"a"] and feature["b"].bytes_list.value == [b"\xff"]
    for bad, message in (({"x": [1, 0.5]}, "Unexpected element type in feature: x"),
                         ({"x": 2 ** 63}, "uint64"), ({"x": -2 ** 63 - 1}, "below the int64 range"),
                         ({"x": "\ud800"}, "not valid UTF-8")):
        with pytest.raises(json_tensor.ServingError, match=message):
            json_tensor.example(bad)
