"""Where tasks run: in this process, a local process pool, or a Dask cluster.

Every backend returns results in submission order, and a task's result does not
depend on the worker that computed it, so outputs are byte-identical whatever
the backend and the number of workers.

Large read-only inputs (the training set, the model, the graph) are passed as
``shared``: each worker receives them once, not once per task. The local pool
(``loky`` backend) forks its workers where the platform allows it, so they
inherit ``shared`` without copying or re-importing anything; elsewhere they are
spawned and receive it pickled once, in their initializer. On Dask, ``shared``
is scattered to every worker once.

Every worker process limits BLAS and OpenMP to one thread (threadpoolctl):
parallelism comes from processes, and small per-applicant matrices gain nothing
from threads. A local worker exits within a second when its parent process dies,
even when the parent was killed with SIGKILL.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from .exceptions import FrpdError, InputError

__all__ = ["BACKENDS", "JobsCappedWarning", "available_cpus", "cap_jobs", "map_ordered", "dask_client",
           "one_thread"]

BACKENDS = ("loky", "dask")

#: Seconds between two checks, in a local worker, that its parent process is alive.
_WATCHDOG_PERIOD = 0.25


class JobsCappedWarning(UserWarning):
    """More worker processes were asked for than there are CPUs to run them."""


def available_cpus() -> int:
    """CPUs this process may run on: its affinity set where the platform has one, else ``os.cpu_count()``."""
    if hasattr(os, "sched_getaffinity"):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)


def cap_jobs(n_jobs: int) -> int:
    """``n_jobs`` capped at :func:`available_cpus`, with one :class:`JobsCappedWarning` when it was above.

    More processes than CPUs only share the same CPUs, and each one holds a copy
    of the working data.
    """
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InputError(f"The 'jobs' option must be an int >= 1. Got {n_jobs!r} instead.")
    cpus = available_cpus()
    if n_jobs > cpus:
        warnings.warn(f"--jobs {n_jobs} asks for more worker processes than the {cpus} CPU(s) this process may "
                      f"use; running {cpus}.", JobsCappedWarning, stacklevel=2)
        return cpus
    return n_jobs


_CONTROLLER = None


def thread_controller():
    """The process's threadpoolctl controller (built once: it inspects every loaded library)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def one_thread():
    """A context in which BLAS and OpenMP libraries use one thread (the controller is built once)."""
    return thread_controller().limit(limits=1)


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


_NOTHING = object()


def map_ordered(func: Callable, tasks: Iterable[tuple], *, n_jobs: int = 1, backend: str = "loky",
                scheduler: str | None = None, shared=_NOTHING, scatter: tuple = (),
                in_flight: int | None = None) -> Iterator:
    """Apply ``func(*task)`` (or ``func(shared, *task)``) to every task; yield the results in task order.

    Parameters
    ----------
    func : callable
        Must be importable by worker processes (a module-level function).
    tasks : iterable of tuple
        Positional arguments of each call; consumed lazily.
    n_jobs : int, default=1
        Local worker processes for ``loky`` (1 runs in this process), workers of
        the local cluster for ``dask``. Not capped here: see :func:`cap_jobs`.
    backend : {"loky", "dask"}
    scheduler : str, optional
        Address of an existing Dask scheduler (``tcp://host:port``); without
        it, ``dask`` starts a loopback LocalCluster of ``n_jobs`` workers.
    shared : object, optional
        Read-only data every call needs, passed as the first argument: each
        worker receives it once.
    scatter : tuple
        Objects that appear (by identity) among the tasks' arguments: the Dask
        backend ships them to the workers once instead of once per task.
    in_flight : int, optional
        Tasks submitted ahead of the one being yielded (default ``4 * n_jobs``):
        bounds memory on long task streams.
    """
    if backend not in BACKENDS:
        raise InputError(f"The 'backend' option must be one of {', '.join(BACKENDS)}. Got {backend!r} instead.")
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InputError(f"The 'jobs' option must be an int >= 1. Got {n_jobs!r} instead.")
    if scheduler is not None and backend != "dask":
        raise InputError("The 'scheduler' option needs --backend dask.")
    window = max(1, in_flight if in_flight is not None else 4 * n_jobs)
    if backend == "loky" and n_jobs == 1:
        for task in tasks:
            yield func(*task) if shared is _NOTHING else func(shared, *task)
        return
    if backend == "loky":
        yield from _map_local(func, tasks, n_jobs=n_jobs, shared=shared, window=window)
        return
    yield from _map_dask(func, tasks, n_jobs=n_jobs, scheduler=scheduler, shared=shared, scatter=scatter,
                         window=window)


# ---------------------------------------------------------------------------- local process pool

_WORKER_SHARED = _NOTHING


def _start_method() -> str:
    """``fork`` where it is available and safe enough (Linux), else ``spawn``.

    A forked worker inherits the parent's loaded modules and ``shared`` data
    copy-on-write: it starts in milliseconds instead of re-importing numpy,
    pandas and scikit-learn. macOS offers fork but system libraries there are
    not fork-safe, so it spawns.
    """
    import multiprocessing

    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def _init_worker(shared, parent_pid: int) -> None:
    """Worker initializer: keep ``shared``, one BLAS/OpenMP thread, ignore Ctrl-C, die with the parent."""
    global _WORKER_SHARED
    _WORKER_SHARED = shared
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the parent handles Ctrl-C and shuts the pool down
    thread_controller().limit(limits=1)               # for the worker's life (a forked worker reuses the controller)
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="frpd-parent-watchdog", daemon=True).start()


def _watch_parent(parent_pid: int) -> None:
    """Exit this worker as soon as its parent is gone (re-parented: the parent died, maybe by SIGKILL)."""
    while True:
        time.sleep(_WATCHDOG_PERIOD)
        if os.getppid() != parent_pid:
            os._exit(1)


def _call_local(func, task):
    return func(*task) if _WORKER_SHARED is _NOTHING else func(_WORKER_SHARED, *task)


def _map_local(func, tasks, *, n_jobs: int, shared, window: int) -> Iterator:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context(_start_method())
    # Forked workers share the parent's memory copy-on-write; the cyclic garbage collector would touch (and so
    # copy) every page holding a parent object. Freezing moves them out of its reach in the workers.
    gc.freeze()
    pool = ProcessPoolExecutor(max_workers=n_jobs, mp_context=context, initializer=_init_worker,
                               initargs=(shared, os.getpid()))
    pending: deque = deque()
    try:
        for task in tasks:
            pending.append(pool.submit(_call_local, func, task))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        gc.unfreeze()


# ---------------------------------------------------------------------------- dask


def _call_dask(func, has_shared: bool, shared, task):
    with one_thread():
        return func(shared, *task) if has_shared else func(*task)


def _map_dask(func, tasks, *, n_jobs: int, scheduler: str | None, shared, scatter: tuple, window: int) -> Iterator:
    with dask_client(scheduler, n_workers=n_jobs) as client:
        has_shared = shared is not _NOTHING
        shared_ref = client.scatter(shared, broadcast=True, hash=False) if has_shared else None
        scattered = [(obj, client.scatter(obj, broadcast=True, hash=False)) for obj in scatter]

        def swap(arg):
            return next((ref for obj, ref in scattered if arg is obj), arg)

        pending: deque = deque()
        try:
            for task in tasks:
                pending.append(client.submit(_call_dask, func, has_shared, shared_ref, tuple(swap(a) for a in task), pure=False))
                if len(pending) >= window:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
