"""A one-worker `distributed.LocalCluster` for the benchmarks that measure a Beam job's memory per worker on
the Dask runner (`benchmarks.serving.embed`, `benchmarks.data.dedup`), and the worker's own peak RSS.

The job runs in a subprocess given `dask_args(address)`; the worker is a process of its own, so its VmHWM
(the kernel's peak RSS of that process) read through `client.run` after the job is the job's peak memory on
that worker, start-up included (`worker_peak_kb` before the job gives the idle figure). `on_fresh_worker`
does the three in order.
"""

import contextlib
from typing import Callable, TypeVar

T = TypeVar("T")

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


@contextlib.contextmanager
def dask_worker(threads: int):
    """Yields `(scheduler address, client)` of a fresh LocalCluster of one worker process with `threads`."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=threads, processes=True, dashboard_address=None,
                           silence_logs=40)
    client = Client(cluster)
    try:
        yield cluster.scheduler_address, client
    finally:
        client.close()
        cluster.close(timeout=30)


def worker_peak_kb() -> int:
    """Run on a worker (`client.run`): its VmHWM in kB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def dask_args(address: str, partitions: int = 4) -> list[str]:
    """The job's runner flags for the cluster at `address`."""
    return ["--runner", DASK_RUNNER, "--dask_client_address", address, "--dask_npartitions", str(partitions)]


def on_fresh_worker(threads: int, job: Callable[[list[str]], T]) -> tuple[T, int, int]:
    """Runs `job(runner flags)` on a fresh one-worker cluster; returns its result and the worker's peak RSS
    in kB before (idle) and after it."""
    with dask_worker(threads) as (address, client):
        idle = max(client.run(worker_peak_kb).values())
        result = job(dask_args(address))
        peak = max(client.run(worker_peak_kb).values())
    return result, idle, peak
