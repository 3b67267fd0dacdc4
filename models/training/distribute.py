"""The strategy factory: TPU, multi-worker, mirrored or the default strategy, and who is chief.

`auto` picks a TPU when `--tpu` is given (or `TPU_NAME` is set), multi-worker when `TF_CONFIG` names more
than one task, mirrored when several GPUs are visible, else the default strategy. Asking for a TPU where
there is none fails fast with a clear message: a dead `grpc://` address is probed with a socket first,
since connecting to it would hang for minutes.
"""

import json
import os
import socket
import urllib.parse

import tensorflow as tf


class StrategyError(RuntimeError):
    """The requested distribution strategy cannot be set up here."""


def make_strategy(name: str = "auto", tpu: str | None = None,
                  devices: list[str] | None = None) -> tf.distribute.Strategy:
    """name: auto | tpu | multi_worker | mirrored | default; devices: for mirrored (e.g. two logical CPUs)."""
    tpu = tpu or os.environ.get("TPU_NAME")
    if name == "auto":
        name = ("tpu" if tpu else "multi_worker" if _cluster_size() > 1
                else "mirrored" if len(tf.config.list_logical_devices("GPU")) > 1 else "default")
    if name == "tpu":
        return _tpu_strategy(tpu)
    if name == "multi_worker":
        if _cluster_size() < 1:
            raise StrategyError("--strategy multi_worker needs TF_CONFIG with a cluster spec and this task")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices)
    if name == "default":
        return tf.distribute.get_strategy()
    raise StrategyError(f"unknown strategy {name!r}: use auto, tpu, multi_worker, mirrored or default")


def _cluster_size() -> int:
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    return sum(len(tasks) for tasks in config.get("cluster", {}).values())


def _tpu_strategy(tpu: str | None) -> tf.distribute.TPUStrategy:
    if tpu and tpu.startswith("grpc://"):
        address = urllib.parse.urlparse(tpu)
        try:
            socket.create_connection((address.hostname, address.port), timeout=5).close()
        except OSError as e:
            raise StrategyError(f"no TPU answers at {tpu}: {e}") from None
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, OSError, tf.errors.OpError) as e:  # OSError: no GCE metadata server
        where = f"named {tpu!r}" if tpu else "attached to this machine (pass --tpu NAME or set TPU_NAME)"
        raise StrategyError(f"no TPU {where}: {e}") from None
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes checkpoints, summaries and the config."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0
                                                         and "chief" not in resolver.cluster_spec().as_dict())


def chief_task() -> bool:
    """`is_chief` before any strategy exists, from `TF_CONFIG` alone (no cluster, or one task: this is it)."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    cluster, task = config.get("cluster", {}), config.get("task", {})
    if sum(len(tasks) for tasks in cluster.values()) <= 1 or not task:
        return True
    kind, index = task.get("type"), int(task.get("index", 0))
    return kind == "chief" or (kind == "worker" and index == 0 and "chief" not in cluster)


def worker_id(strategy: tf.distribute.Strategy) -> int:
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 0
    return strategy.cluster_resolver.task_id or 0


def xla_supported(strategy: tf.distribute.Strategy) -> bool:
    """XLA on the replica step works on one device, on GPUs and on TPUs (always compiled there). It fails
    for mirrored replicas on CPU devices (`Trying to access resource ... located in device CPU:1`)."""
    if strategy.num_replicas_in_sync == 1 or isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    devices = getattr(strategy.extended, "worker_devices", ())
    return all("GPU" in d.upper() for d in devices)
