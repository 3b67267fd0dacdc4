"""A SavedModel run as TF Serving runs it: loaded into a TF1 `Session`, its signatures fed and fetched by
tensor name.

TF Serving loads every SavedModel (TF1 graphs with signature defs and TF2 `tf.saved_model.save` exports alike)
into a session and runs a request with `Session::Run(feeds, fetches)`. A fed tensor replaces the graph's
tensor whatever its static shape, so a TF1 signature that declares `x` as `[-1, 1]` answers a request whose
`x` is `[3]`, as long as the ops downstream accept it (`half_plus_two` with `{"instances": [2.0, 3.0, 4.0]}`).
Python's `Session.run` would refuse that ("Cannot feed value of shape (3,)"), so a signature runs through a
C++ callable (`Session::MakeCallable`, the same feed path TF Serving takes): no shape check, and a dtype
mismatch is the graph's own INVALID_ARGUMENT.

`SessionModel(path)` loads the meta graph tagged "serve" (restoring the variables and running the main/init
op, as TF Serving's loader does); `model.runner(signature_def)` -> a function from named numpy inputs to
named numpy outputs. Runners are built on first use and cached; they are safe to call from many threads.
"""

import threading

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2


class SessionModel:
    """One SavedModel in its own graph and session.

    Args:
      path: the version folder (holding `saved_model.pb`).
      tags: the meta graph to load.

    Example:
        model = SessionModel("/models/half_plus_two/123")
        run = model.runner(model.meta_graph.signature_def["serving_default"])
        run({"x": np.array([2.0, 3.0], np.float32)})   # {"y": array([3. , 3.5], dtype=float32)}
    """

    def __init__(self, path: str, tags: tuple[str, ...] = ("serve",)):
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            self.meta_graph = tf.compat.v1.saved_model.loader.load(self.session, list(tags), path)
        self._runners: dict[tuple, object] = {}
        self._lock = threading.Lock()

    def runner(self, signature):
        """A SignatureDef -> `run(inputs: dict[alias, ndarray]) -> dict[alias, ndarray]` (every output)."""
        inputs = tuple(sorted(signature.inputs))
        outputs = tuple(sorted(signature.outputs))
        key = (tuple(signature.inputs[a].name for a in inputs), tuple(signature.outputs[a].name for a in outputs))
        with self._lock:
            callable_ = self._runners.get(key)
            if callable_ is None:
                options = config_pb2.CallableOptions(feed=list(key[0]), fetch=list(key[1]))
                callable_ = self.session._make_callable_from_options(options)  # noqa: SLF001 (see module doc)
                self._runners[key] = callable_

        def run(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            results = callable_(*[values[alias] for alias in inputs])
            return dict(zip(outputs, results))
        return run

    def close(self) -> None:
        self.session.close()
