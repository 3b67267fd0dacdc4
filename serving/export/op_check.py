"""Checks that a SavedModel uses only ops that stock TF Serving (2.20 or newer) links: core TensorFlow's and
TF-Text's.

Owns `ops_of` (every op a SavedModel's graphs and functions name) and `check_serving_ops` (fails with the
offending op names). An op outside that set (a custom kernel, an op from a library loaded with
`tf.load_op_library`, an op that only exists in a newer TensorFlow) would make TF Serving refuse to load
the model at start-up, on the serving machine; the export finds it first.

Core ops are the ones `tf.raw_ops` exposes; TF-Text's are the ops its shared libraries register (their
`OpList`, read through the same C API `tf.load_op_library` uses).
"""

import functools
import glob
import os

from tensorflow.core.protobuf import saved_model_pb2


class UnsupportedOpsError(RuntimeError):
    """A serving graph uses ops that TF Serving does not link."""


def ops_of(saved_model_dir: str) -> set[str]:
    """Every op type in the SavedModel's graphs and function library (function calls excluded)."""
    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    ops = set()
    for meta_graph in saved.meta_graphs:
        library = meta_graph.graph_def.library
        functions = {fn.signature.name for fn in library.function}
        ops.update(node.op for node in meta_graph.graph_def.node)
        for fn in library.function:
            ops.update(node.op for node in fn.node_def)
        ops -= functions
    return ops


@functools.cache
def core_ops() -> frozenset[str]:
    import tensorflow as tf

    return frozenset(name for name in dir(tf.raw_ops) if not name.startswith("_"))


@functools.cache
def tf_text_ops() -> frozenset[str]:
    import tensorflow_text
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    names = set()
    for library in glob.glob(os.path.join(os.path.dirname(tensorflow_text.__file__), "python", "ops", "*.so")):
        handle = pywrap_tf_session.TF_LoadLibrary(library)  # already loaded by the import: just its handle
        op_list = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetOpList(handle))
        names.update(op.name for op in op_list.op)  # e.g. "TFText>FastWordpieceDetokenize"
    return frozenset(names)


def check_serving_ops(saved_model_dir: str, allowed: frozenset[str] | None = None) -> set[str]:
    """Returns the SavedModel's ops; raises `UnsupportedOpsError` naming those outside `allowed` (default:
    core TensorFlow + TF-Text)."""
    allowed = (core_ops() | tf_text_ops()) if allowed is None else allowed
    ops = ops_of(saved_model_dir)
    unsupported = sorted(ops - allowed)
    if unsupported:
        raise UnsupportedOpsError(
            f"{saved_model_dir} uses op(s) that stock TF Serving does not link: {', '.join(unsupported)} "
            f"(only core TensorFlow and TF-Text ops can be served)")
    return ops
