"""Where chunks of applicants run: in this process, a joblib process pool, or a Dask cluster.

Every backend returns results in submission order, and a chunk's result does
not depend on the worker that computed it, so outputs are byte-identical
whatever the backend and the number of workers.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from .exceptions import FrpdError, InputError

__all__ = ["BACKENDS", "map_ordered", "dask_client"]

BACKENDS = ("loky", "dask")


@contextmanager
def dask_client(scheduler: str | None = None, *, n_workers: int = 2):
    """A dask.distributed client: connected to ``scheduler``, or to a new loopback LocalCluster.

    The local cluster binds to 127.0.0.1 only and puts its dashboard on a free
    loopback port, so nothing is exposed beyond this machine.
    """
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise FrpdError(
            "The dask backend needs dask.distributed. Install it with: pip install 'frpd-cli[dask]'."
        ) from None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise FrpdError(f"Cannot reach the Dask scheduler at '{scheduler}': {exc}.") from None
        try:
            yield client
        finally:
            client.close()
        return
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def map_ordered(func: Callable, tasks: Iterable[tuple], *, n_jobs: int = 1, backend: str = "loky",
                scheduler: str | None = None, scatter: tuple = ()) -> Iterator:
    """Apply ``func(*task)`` to every task; yield the results in task order.

    Parameters
    ----------
    func : callable
        Must be importable by worker processes (a module-level function).
    tasks : iterable of tuple
        Positional arguments of each call.
    n_jobs : int, default=1
        Worker processes for ``loky`` (1 runs in this process), workers of the
        local cluster for ``dask``.
    backend : {"loky", "dask"}
    scheduler : str, optional
        Address of an existing Dask scheduler (``tcp://host:port``); without
        it, ``dask`` starts a loopback LocalCluster.
    scatter : tuple
        Large objects passed to every task: the Dask backend ships them to the
        workers once instead of once per task.
    """
    if backend not in BACKENDS:
        raise InputError(f"The 'backend' option must be one of {', '.join(BACKENDS)}. Got {backend!r} instead.")
    if n_jobs < 1:
        raise InputError(f"The 'jobs' option must be an int >= 1. Got {n_jobs!r} instead.")
    if scheduler is not None and backend != "dask":
        raise InputError("The 'scheduler' option needs --backend dask.")
    if backend == "loky" and n_jobs == 1:
        for task in tasks:
            yield func(*task)
        return
    import joblib
    from joblib import Parallel, delayed

    if backend == "loky":
        yield from Parallel(n_jobs=n_jobs, backend="loky", return_as="generator")(delayed(func)(*t) for t in tasks)
        return
    with dask_client(scheduler, n_workers=n_jobs):
        with joblib.parallel_config(backend="dask", scatter=list(scatter) or None):
            yield from Parallel(return_as="generator")(delayed(func)(*t) for t in tasks)
