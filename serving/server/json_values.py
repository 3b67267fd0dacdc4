"""The JSON value rules of TF Serving's REST API for tensor values, written once: the server's responses
(`serving.server.json_tensor`) and the clients (`serving.client`: the gRPC client's REST-shaped answers, numpy
values in REST requests) call these. numpy and the standard library only (no TensorFlow).

Rules (TF Serving's `util/json_tensor.cc`, `WriteDecimal`, and its REST API page, "JSON mapping"):
  - float32: the number printed with 6 significant digits (`%g`) if that reads back as the same float32,
    else with 9 (`%.9g`, float32's max_digits10). So float32(1/3) is 0.333333343, not the shortest
    0.33333334; float32(0.1) is 0.1. Python's json writes the float64 nearest that decimal, which any reader
    parses to the same number (the text may differ: 9000000.0 where TF Serving writes 9e+06).
  - float64: `%g`, else `%.17g`: the same float64 after parsing, so Python's shortest repr is value-equal.
  - NaN, Infinity, -Infinity: those bare tokens (not standard JSON; TF Serving and Python's json read them).
  - integers and bools: exact; strings: UTF-8 text, except tensors whose name ends in `_bytes`:
    `{"b64": base64}`; in requests, Python `bytes` are sent as `{"b64": ...}`.
"""

import base64
import json

import numpy as np

BYTES_SUFFIX = "_bytes"
_FAST_MIN = 65  # below this many values, per-value formatting is cheaper than the vectorized passes
# 10**k is exact in float64 for |k| <= 22: inside this decimal-exponent range the vectorized rounding is exact.
_EXACT_EXPONENTS = (-14, 27)


def _decimal(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


def float32_value(value) -> float:
    """One float32 -> the float64 of the decimal TF Serving writes for it."""
    value = np.float32(value)
    if not np.isfinite(value):
        return float(value)
    six = _decimal(float(value), 6)
    return six if np.float32(six) == value else _decimal(float(value), 9)


def _round_significant(exact: np.ndarray, exponent: np.ndarray, digits: int):
    """-> (the nearest float64 to each value rounded to `digits` significant digits, near-tie mask)."""
    power = digits - 1 - exponent
    scale = 10.0 ** np.abs(power)  # exact: |power| <= 22 where used
    scaled = np.where(power >= 0, exact * scale, exact / scale)
    integer = np.rint(scaled)
    rounded = np.where(power >= 0, integer / scale, integer * scale)  # one correctly rounded operation
    near_tie = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5) < 1e-6  # the product's error could flip it
    return rounded, near_tie


def float32_values(array: np.ndarray) -> np.ndarray:
    """float32 values -> float64s of the decimals TF Serving writes (see `float32_value`), same shape."""
    values = np.asarray(array, np.float32)
    if values.size < _FAST_MIN:
        return np.array([float32_value(v) for v in values.ravel()], np.float64).reshape(values.shape)
    with np.errstate(all="ignore"):
        exact = values.astype(np.float64).ravel()
        out = exact.copy()  # zeros, NaN and infinities stay as they are
        magnitude = np.abs(exact)
        todo = np.isfinite(exact) & (exact != 0)
        exponent = np.floor(np.log10(np.where(todo, magnitude, 1.0)))
        exponent -= 10.0 ** exponent > magnitude  # log10 can be one off next to powers of ten
        exponent += 10.0 ** (exponent + 1) <= magnitude
        fast = todo & (exponent >= _EXACT_EXPONENTS[0]) & (exponent <= _EXACT_EXPONENTS[1])
        six, tie6 = _round_significant(exact, exponent, 6)
        nine, tie9 = _round_significant(exact, exponent, 9)
        use_six = six.astype(np.float32) == values.ravel()
        out[fast] = np.where(use_six, six, nine)[fast]
        slow = todo & (~fast | (tie6 & use_six) | (tie9 & ~use_six))
    out[slow] = [float32_value(v) for v in values.ravel()[slow]]
    return out.reshape(values.shape)


def tensor_values(array: np.ndarray, as_b64: bool):
    """A numpy array (a tensor) -> nested lists (or a scalar) for json.dumps; `as_b64`: a `_bytes` tensor."""
    array = np.asarray(array)
    if array.dtype == object or array.dtype.kind == "S":
        flat = [{"b64": base64.b64encode(v).decode("ascii")} if as_b64 else v.decode("utf-8", "replace")
                for v in array.ravel()]
        return np.array(flat, dtype=object).reshape(array.shape).tolist()
    if array.dtype == np.float32:
        return float32_values(array).tolist()
    return array.tolist()


def is_bytes_tensor(name: str, array: np.ndarray) -> bool:
    return name.endswith(BYTES_SUFFIX) and (array.dtype == object or array.dtype.kind == "S")


def _request_default(value):
    """json.dumps' hook for values in a request body: numpy arrays and scalars, and bytes (as b64)."""
    if isinstance(value, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.ndarray):
        if value.dtype == object or value.dtype.kind == "S":
            return value.tolist()  # bytes leaves come back through this hook
        return tensor_values(value, as_b64=False)
    if isinstance(value, np.generic):
        return tensor_values(np.asarray(value), as_b64=False)
    raise TypeError(f"a value of type {type(value).__name__} cannot be sent as JSON")


def dumps(obj) -> bytes:
    """Compact JSON (NaN and Infinity as bare tokens, as TF Serving writes them); numpy values and bytes
    are encoded with the rules above."""
    return json.dumps(obj, separators=(",", ":"), default=_request_default).encode("utf-8")
