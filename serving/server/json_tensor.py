"""TF Serving's REST JSON <-> tensors, after tensorflow_serving/util/json_tensor.cc (same rules, same messages).

Requests: `{"signature_name": ..., "instances": [...]}` (row format: one element per batch item, a value for a
single-input signature or an object of named inputs) or `{"inputs": ...}` (columnar: a value, or an object of
named inputs). Values are checked against the signature's input dtypes (an int is not a float32 beyond 2^24, a
float is never an int), every list is checked to be dense, and `{"b64": "..."}` carries binary strings.
Responses: `{"predictions": [...]}` (row; a list of values for a one-output signature, else a list of objects)
or `{"outputs": ...}` (columnar). Each value follows `json_values` (the one copy of TF Serving's value rules:
float32 with 6 significant digits, or 9 when 6 do not read back; NaN / Infinity tokens; `_bytes` as b64).
Classify / regress: `{"examples": [{feature: value or list}...], "context": {...}}` -> serialized tf.Examples.
Bounds (this server's, not TF Serving's): JSON nested deeper than `MAX_JSON_DEPTH`, and more batch items
than the caller's `max_batch`, are refused with INVALID_ARGUMENT before any tensor is built.
"""

import base64
import binascii
import json

import numpy as np
import tensorflow as tf

from serving.server import json_values
from serving.server.servable import ServingError, dtype_name

MAX_JSON_DEPTH = 64  # TensorFlow tensors of more dimensions than this are not served here

_INT_RANGES = {tf.int8: (-2 ** 7, 2 ** 7 - 1), tf.uint8: (0, 2 ** 8 - 1), tf.int16: (-2 ** 15, 2 ** 15 - 1),
               tf.int32: (-2 ** 31, 2 ** 31 - 1), tf.int64: (-2 ** 63, 2 ** 63 - 1), tf.uint32: (0, 2 ** 32 - 1),
               tf.uint64: (0, 2 ** 64 - 1)}
_LOSSLESS_INT = {tf.float32: 2 ** 24 - 1, tf.float64: 2 ** 53 - 1}


def invalid(message: str) -> ServingError:
    return ServingError("INVALID_ARGUMENT", message)


MAX_QUOTED = 300  # characters of a request value quoted in an error message


def _text(value) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= MAX_QUOTED else text[:MAX_QUOTED] + f"... ({len(text)} characters)"


def too_many(count: int, what: str, limit: int, flag: str) -> ServingError:
    return invalid(f"Request has {count} {what}; this server takes at most {limit} per request ({flag})")


def _check_batch(count: int, max_batch: int | None, what: str) -> None:
    if max_batch is not None and count > max_batch:
        raise too_many(count, what, max_batch, "--max_instances_per_request")


def _type_name(value) -> str:
    if value is None or isinstance(value, bool):
        return str(value) if value is not None else "Null"
    return {dict: "Object", list: "Array", str: "String"}.get(type(value), "Number")


def parse(body: bytes) -> dict:
    """The request body -> its top-level JSON object."""
    if not body:
        raise invalid("JSON Parse error: The document is empty")
    if _depth(body) > MAX_JSON_DEPTH:
        raise invalid(f"JSON Parse error: the document is nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        text = body.decode("utf-8")
        start = len(text) - len(text.lstrip(" \t\n\r"))
        doc, _ = _DECODER.raw_decode(text, start)  # text after the document is ignored, as RapidJSON's
    except json.JSONDecodeError as e:                # kParseStopWhenDoneFlag ignores it in TF Serving
        raise invalid(f"JSON Parse error: {_rapidjson_text(e.msg)} at offset: {e.pos}") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise invalid(f"JSON Parse error: {e}") from None
    if not isinstance(doc, dict):
        raise invalid(f"JSON Value: {_text(doc)[:200]} Is not object")
    return doc


_DECODER = json.JSONDecoder()
# Python's json messages -> RapidJSON's (GetParseError_En), which TF Serving's errors quote.
_RAPIDJSON_TEXTS = {"Expecting value": "Invalid value.",
                    "Expecting property name enclosed in double quotes": "Missing a name for object member.",
                    "Expecting ':' delimiter": "Missing a colon after a name of object member.",
                    "Expecting ',' delimiter": "Missing a comma or '}' after an object member.",
                    "Unterminated string starting at": "Missing a closing quotation mark in string.",
                    "Invalid \\escape": "Invalid escape character in string.",
                    "Invalid \\uXXXX escape": "Incorrect hex digit after \\u escape in string."}


def _rapidjson_text(message: str) -> str:
    return _RAPIDJSON_TEXTS.get(message, message)


def _depth(body: bytes, chunk: int = 1 << 20) -> int:
    """The deepest nesting of [ and { in `body` (brackets inside strings counted too: an upper bound),
    found without parsing and in 1 MB pieces (a few MB of scratch memory whatever the body's size)."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return 0
    deepest = level = 0
    for start in range(0, len(body), chunk):
        piece = np.frombuffer(body, np.uint8, count=min(chunk, len(body) - start), offset=start)
        step = (piece == ord("[")).astype(np.int32) + (piece == ord("{"))
        step -= (piece == ord("]")).astype(np.int32) + (piece == ord("}"))
        running = np.cumsum(step) + level
        deepest, level = max(deepest, int(running.max())), int(running[-1])
    return deepest


def signature_name(doc: dict) -> str:
    name = doc.get("signature_name", "")
    if not isinstance(name, str):
        raise invalid(f"JSON Value: {_text(doc)} not formatted correctly. 'signature_name' key must be a string "
                      f"value.")
    return name


def _is_b64(value) -> bool:
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get("b64"), str)


def _b64decode(value) -> bytes:
    if not _is_b64(value):
        raise invalid(f"JSON Value: {_text(value)} not formatted correctly for base64 data")
    text = value["b64"]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise invalid("Unable to base64 decode") from None


def _scalar(value, dtype: tf.DType):
    """One JSON leaf -> a Python value of `dtype` (TF Serving's AddValueToTensor)."""
    def type_error():
        return invalid(f"JSON Value: {_text(value)} Type: {_type_name(value)} is not of expected type: "
                       f"{dtype_name(dtype.as_datatype_enum)}")
    if dtype == tf.string:
        if isinstance(value, dict):
            return _b64decode(value)
        if not isinstance(value, str):
            raise type_error()
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape such as "\\ud800"
            raise invalid(f"JSON Value: {_text(value)[:200]} is not valid UTF-8 text") from None
    if isinstance(value, dict) or isinstance(value, list) or value is None:
        raise type_error()
    if dtype == tf.bool:
        if not isinstance(value, bool):
            raise type_error()
        return value
    if isinstance(value, bool) or isinstance(value, str):
        raise type_error()
    if dtype in _LOSSLESS_INT:
        limit = _LOSSLESS_INT[dtype]
        lossy = abs(value) > limit if isinstance(value, int) else \
            np.isfinite(value) and abs(value) > np.finfo(dtype.as_numpy_dtype).max
        if lossy:
            raise invalid(f"Cannot convert JSON value: {_text(value)} to {dtype_name(dtype.as_datatype_enum)} "
                          f"without loss of precision.")
        return value
    if dtype in _INT_RANGES:
        low, high = _INT_RANGES[dtype]
        if not isinstance(value, int) or not low <= value <= high:
            raise type_error()
        return value
    raise ServingError("UNIMPLEMENTED", f"Conversion of JSON Value: {_text(value)} to type: "
                                        f"{dtype_name(dtype.as_datatype_enum)}")


def _dense_shape(value) -> list[int]:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _fill(value, level: int, shape: list[int], dtype: tf.DType, out: list) -> None:
    """TF Serving's FillTensorProto: every leaf at depth len(shape), every list of the expected size."""
    if not isinstance(value, list):
        if level != len(shape):
            raise invalid(f"JSON Value: {_text(value)} found at incorrect level: {level + 1} in the JSON DOM. "
                          f"Expected at level: {len(shape)}")
        out.append(_scalar(value, dtype))
        return
    if level >= len(shape):
        raise invalid(f"Encountered list at unexpected level: {level} expected < {len(shape)}")
    if len(value) != shape[level]:
        raise invalid(f"Encountered list at unexpected size: {len(value)} at level: {level} expected size: "
                      f"{shape[level]}")
    for item in value:
        _fill(item, level + 1, shape, dtype, out)


def to_array(value, dtype: tf.DType) -> np.ndarray:
    """A dense JSON value (nested lists) -> a numpy array of `dtype` (object of bytes for strings)."""
    shape, flat = _dense_shape(value), []
    _fill(value, 0, shape, dtype, flat)
    numpy_dtype = object if dtype == tf.string else dtype.as_numpy_dtype
    array = np.empty(len(flat), dtype=numpy_dtype)
    array[:] = flat
    return array.reshape(shape)


def _instances(items: list, dtypes: dict[str, tf.DType]) -> dict[str, np.ndarray]:
    """The row format (TF Serving's FillTensorMapFromInstancesList)."""
    if not (isinstance(items[0], dict) and not _is_b64(items[0])) and len(dtypes) > 1:
        raise invalid("instances is a plain list, but expecting list of objects as multiple input tensors "
                      "required as per tensorinfo_map")
    objects = isinstance(items[0], dict) and not _is_b64(items[0])
    columns: dict[str, list] = {name: [] for name in dtypes}
    for index, item in enumerate(items):
        if objects != (isinstance(item, dict) and not _is_b64(item)):
            raise invalid(f"Expecting object but got list at item {index} of input list" if objects else
                          f"Expecting value/list but got object at item {index} of input list")
        named = item if objects else {next(iter(dtypes)): item}
        for name, value in named.items():
            if name not in dtypes:
                raise invalid(f"Failed to process element: {index} key: {name} of 'instances' list. Error: "
                              f"INVALID_ARGUMENT: JSON object: does not have named input: {name}")
            try:
                columns[name].append(to_array(value, dtypes[name]))
            except ServingError as e:
                where = f"{index} key: {name}" if objects else f"{index}"
                raise invalid(f"Failed to process element: {where} of 'instances' list. Error: {e.code}: "
                              f"{e.message}") from None
            first = columns[name][0]
            if columns[name][-1].shape != first.shape:
                raise invalid(f"Expecting tensor size: {first.size} but got: {columns[name][-1].size}"
                              if columns[name][-1].size != first.size else
                              f"Expecting shape {list(first.shape)} but got: {list(columns[name][-1].shape)}")
        if set(named) != set(dtypes):
            raise invalid(f"Failed to process element: {index} of 'instances' list. JSON object: {_text(item)} "
                          f"must only have keys: {','.join(sorted(dtypes))}")
    return {name: np.stack(arrays) for name, arrays in columns.items()}


def _columnar(value, dtypes: dict[str, tf.DType], max_batch: int | None) -> dict[str, np.ndarray]:
    """The columnar format (TF Serving's FillTensorMapFromInputsMap); extra names are ignored, as there.
    The leading dimension of each input counts as its batch size."""
    if not isinstance(value, dict) or _is_b64(value):
        if len(dtypes) > 1:
            raise invalid("inputs is a plain value/list, but expecting an object as multiple input tensors "
                          "required as per tensorinfo_map")
        name = next(iter(dtypes))
        _check_batch(len(value) if isinstance(value, list) else 1, max_batch, "inputs (leading dimension)")
        return {name: to_array(value, dtypes[name])}
    for name in dtypes:
        if name not in value:
            raise invalid(f"Missing named input: {name} in 'inputs' object.")
        _check_batch(len(value[name]) if isinstance(value[name], list) else 1, max_batch,
                     f"rows of input '{name}' (leading dimension)")
    return {name: to_array(value[name], dtype) for name, dtype in dtypes.items()}


def predict_inputs(doc: dict, dtypes: dict[str, tf.DType],
                   max_batch: int | None = None) -> tuple[dict[str, np.ndarray], bool]:
    """A parsed predict request -> (named input arrays, row format?). `dtypes`: the signature's inputs;
    `max_batch`: the most instances (or leading-dimension rows of any columnar input) accepted."""
    if not dtypes:
        raise invalid(f"Failed to get input map for signature: {doc.get('signature_name') or 'DEFAULT'}")
    if "instances" in doc and "inputs" in doc:
        raise invalid(f"JSON Value: {_text(doc)} Not formatted correctly expecting only one of 'inputs' or "
                      f"'instances' keys to exist ")
    if "instances" in doc:
        if not isinstance(doc["instances"], list):
            raise invalid(f"JSON Value: {_text(doc)} Excepting 'instances' to be an list/array")
        if not doc["instances"]:
            raise invalid(f"JSON Value: {_text(doc)} No values in 'instances' array")
        _check_batch(len(doc["instances"]), max_batch, "instances")
        return _instances(doc["instances"], dtypes), True
    if "inputs" in doc:
        return _columnar(doc["inputs"], dtypes, max_batch), False
    raise invalid("Missing 'inputs' or 'instances' key")


def predict_response(outputs: dict[str, np.ndarray], row: bool) -> bytes:
    """Named output arrays -> the response body, `{"predictions": ...}` or `{"outputs": ...}`."""
    if not outputs:
        raise invalid("Cannot convert empty tensor map to JSON")
    values = {}
    for name, array in sorted(outputs.items()):
        if row and array.ndim == 0:
            raise invalid(f"Tensor name: {name} has no shape information ")
        values[name] = json_values.tensor_values(array, json_values.is_bytes_tensor(name, array))
    if not row:
        return dumps({"outputs": values if len(values) > 1 else next(iter(values.values()))})
    sizes = {name: len(v) for name, v in values.items()}
    batch = next(iter(sizes.values()))
    for name, size in sizes.items():
        if size < 1:
            raise invalid(f"Tensor name: {name} has invalid batch size: {size}")
        if size != batch:
            raise invalid(f"Tensor name: {name} has inconsistent batch size: {size} expecting: {batch}")
    if len(values) == 1:
        return dumps({"predictions": next(iter(values.values()))})
    return dumps({"predictions": [{name: values[name][i] for name in values} for i in range(batch)]})


dumps = json_values.dumps


def feature(name: str, values) -> tf.train.Feature:
    """One JSON feature value or list -> a Feature (TF Serving's AddValueToFeature rules)."""
    kind = None
    items = values if isinstance(values, list) else [values]
    converted = []
    for value in items:
        if isinstance(value, bool):
            this, value = "int64", int(value)
        elif isinstance(value, int):
            this = "int64"
            if value >= 2 ** 63:
                raise invalid(f"Feature: {name} has uint64 element. Only int64 is supported.")
            if value < -2 ** 63:
                raise invalid(f"Feature: {name} has element {value} below the int64 range.")
        elif isinstance(value, float):
            this = "float"
        elif isinstance(value, str):
            this, value = "bytes", _scalar(value, tf.string)
        elif _is_b64(value):
            this, value = "bytes", _b64decode(value)
        else:
            raise invalid(f"Feature: {name} has element with unexpected JSON type: {_type_name(value)}")
        if kind not in (None, this):
            raise invalid(f"Unexpected element type in feature: {name} expecting type: {kind}")
        kind = this
        converted.append(value)
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=converted))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=converted))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=converted))


def example(value) -> tf.train.Example:
    """One JSON example object -> a tf.train.Example (TF Serving's rules)."""
    if not isinstance(value, dict):
        raise invalid(f"Example must be JSON object but got JSON {_type_name(value)}")
    return tf.train.Example(features=tf.train.Features(
        feature={name: feature(name, content) for name, content in value.items()}))


def examples(doc: dict, method: str, max_batch: int | None = None) -> list[bytes]:
    """A parsed classify/regress request -> serialized tf.Examples (each merged over `context`, if any);
    at most `max_batch` examples."""
    context = example(doc["context"]).SerializeToString() if "context" in doc else b""
    if "examples" not in doc:
        raise invalid(f"JSON Value: {_text(doc)} When method is {method}, key 'examples' is expected and was "
                      f"not found")
    listed = doc["examples"]
    if not isinstance(listed, list):
        raise invalid(f"JSON Value: {_text(doc)} Expecting 'examples' value to be an list/array")
    if not listed:
        raise invalid(f"JSON Value: {_text(doc)} 'examples' value is an empty array")
    _check_batch(len(listed), max_batch, "examples")
    return [context + example(item).SerializeToString() for item in listed]


def classify_response(results: list[list[tuple[str, float]]]) -> bytes:
    return dumps({"results": [[[label, json_values.float32_value(score)] for label, score in row]
                               for row in results]})


def regress_response(values: list[float]) -> bytes:
    return dumps({"results": json_values.float32_values(np.array(values, np.float32)).tolist()})
