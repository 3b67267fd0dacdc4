"""What the checkpoint converters share: their error, finding a checkpoint's files, reading a JSON config, and
moving numpy arrays in and out of a Keras model by weight path.

A converter maps every weight by name into an array in this project's layout (`{keras weight path: array}`),
checks each shape against the model that the config describes, and only then assigns: a config that does not
match its weights fails naming the first tensor that disagrees, before anything is written.
"""

import json
import os

import numpy as np

from commands.user_errors import UserError


class ConversionError(UserError):
    """The checkpoint, its config or its vocabulary cannot be converted; the message says why."""


def unreadable(path: str, error: Exception, tensor: str | None = None) -> ConversionError:
    """The error for a checkpoint file that cannot be read (corrupt, truncated, another format)."""
    reason = " ".join(str(error).split())[:300] or type(error).__name__
    where = f" (reading {tensor})" if tensor else ""
    return ConversionError(f"cannot read the checkpoint file {path}{where}: {reason}; is it complete? "
                           f"download or copy it again")


def beside(path: str, name: str) -> str:
    """`name` in the folder of `path` (or in `path` itself when it is a folder)."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    return os.path.join(folder, name)


def require_file(path: str | None, what: str, flag: str) -> str:
    if not path or not os.path.exists(path):
        raise ConversionError(f"{what} not found: {path} (give it with {flag})")
    return path


def read_json(path: str, what: str, flag: str) -> dict:
    require_file(path, what, flag)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ConversionError(f"{what} {path} is not valid JSON: {e}") from None


def model_weights(model) -> dict:
    """`{path: keras variable}` of every weight of `model` (paths are stable: layers have fixed names)."""
    return {v.path: v for v in model.weights}


def check_shape(name: str, actual, expected, source: str) -> None:
    """Raises when the checkpoint tensor `name` (in the source's own names and layout) has another shape than the
    config gives."""
    if tuple(actual) != tuple(expected):
        raise ConversionError(f"the config does not match the weights: {name} in {source} has shape {list(actual)}, "
                              f"the config gives {list(expected)}")


def assign(model, arrays: dict) -> None:
    """Sets the weights named in `arrays` (`{keras path: array}`), each already shape-checked."""
    variables = model_weights(model)
    for path, array in arrays.items():
        variable = variables[path]
        if tuple(variable.shape) != array.shape:  # a converter bug, not a user error
            raise AssertionError(f"{path}: {array.shape} for a {tuple(variable.shape)} weight")
        variable.assign(np.asarray(array, dtype=variable.dtype))


def read_weights(model) -> dict:
    """`{keras path: numpy array}` of every weight of `model`."""
    return {path: np.asarray(v.numpy()) for path, v in model_weights(model).items()}
