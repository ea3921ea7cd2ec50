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

__all__ = ["BACKENDS", "JobsCappedWarning", "Workers", "available_cpus", "cap_jobs", "cluster_threads", "map_ordered",
           "dask_client", "forks_workers", "one_thread", "open_workers"]

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
    import dask

    environ = {k: v for k, v in dask.config.get(PRE_SPAWN_KEY, {}).items() if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({**QUIET_SETTINGS, PRE_SPAWN_KEY: environ}):
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


_NOTHING = object()

#: The Dask setting that turns the worker profiler off (``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False`` in a
#: worker's environment).
WORKER_PROFILE_KEY = "distributed.worker.profile.enabled"

#: Settings of the local cluster frpd starts (docs/batch.md gives them as a configuration file for your own cluster).
#: Every process of a cluster runs timers for the dashboard and its own health: the worker profiler samples the
#: running task's stack every 10 ms, each process measures its event loop every 20 ms ("tick"), and system and
#: memory monitors run every 0.5 s and 0.1 s. A loopback cluster of 2 workers (scheduler, workers, nannies) idles
#: at 15-20% of one CPU with Dask's defaults and at 2% with these (``docs/benchmarks.md``); on a small machine that
#: CPU is taken from the workers' tasks. Memory is still checked every 2 s (frpd's tasks hold little memory).
QUIET_SETTINGS = {
    WORKER_PROFILE_KEY: False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "2s",
}

#: The environment Dask's nannies give the workers they start. Dask's default sets ``MALLOC_TRIM_THRESHOLD_=65536``
#: (glibc then hands freed memory back to the system at once, and stops adapting its mmap threshold): every numpy
#: array of more than 128 KiB is then mapped and unmapped again, and a worker took about 230,000 page faults
#: planning 2,000 Adult applicants instead of about 2,700, for 15-20% more CPU. The local cluster frpd starts
#: leaves glibc's defaults (the rest of Dask's list, one BLAS/OpenMP thread, is kept).
PRE_SPAWN_KEY = "distributed.nanny.pre-spawn-environ"


class Workers:
    """Open workers of one backend: how many there are, and an ordered map over them.

    Obtained from :func:`open_workers`. ``n_workers`` is known before any task is
    cut, so callers can size their tasks for it (with ``--scheduler``, it is the
    number of worker threads the cluster has, not ``--jobs``).
    """

    def __init__(self, n_workers: int, submit: Callable, wait_any: Callable | None, has_shared: bool, *,
                 in_flight: int | None = None):
        self.n_workers = n_workers
        self._submit = submit
        self._wait_any = wait_any
        self.has_shared = has_shared
        self.in_flight = in_flight if in_flight is not None else 2 * n_workers

    def map(self, func: Callable, tasks: Iterable[tuple], *, in_flight: int | None = None,
            buffered: int | None = None) -> Iterator:
        """Apply ``func`` to every task on the workers; yield the results in task order.

        At most ``in_flight`` tasks (default: the backend's, :attr:`in_flight`) are submitted and not yet
        finished: a worker that finishes a task before the one ahead of it in the order gets the next task
        at once instead of waiting for the slower one (no head-of-line blocking), and a finished task is
        replaced before its result is handed on. Finished results wait for their turn, at most ``buffered``
        of them (default ``4 * in_flight``), which bounds memory.

        The local pool keeps ``2 * n_workers`` tasks in flight: its workers take them from a queue one at a
        time, whichever is free first. A Dask scheduler instead gives each submitted task to a worker at
        once (two per one-thread worker with its default ``worker-saturation``), so a worker slowed down
        would keep its second task while the other one idles: on Dask, tasks are submitted one per worker
        thread, each when a task finishes.
        """
        if self._wait_any is None:      # in this process: each task when its result is asked for
            return (self._submit(func, task).result() for task in tasks)
        in_flight = max(1, in_flight if in_flight is not None else self.in_flight)
        buffered = max(in_flight, buffered if buffered is not None else 4 * in_flight)
        return _ordered(self._submit, self._wait_any, func, tasks, in_flight=in_flight, buffered=buffered)


def _ordered(submit, wait_any, func, tasks, *, in_flight: int, buffered: int) -> Iterator:
    tasks = iter(tasks)
    pending: deque = deque()
    exhausted = False
    try:
        while True:
            # refill before handing a finished result on: the caller may take a while with it (writing it),
            # and a worker without a task waits for that
            while not exhausted and len(pending) < buffered and sum(not f.done() for f in pending) < in_flight:
                task = next(tasks, _NOTHING)
                if task is _NOTHING:
                    exhausted = True
                else:
                    pending.append(submit(func, task))
            if not pending:
                return
            if pending[0].done():
                yield pending.popleft().result()
                continue
            if exhausted or len(pending) >= buffered:
                yield pending.popleft().result()      # nothing more to submit: wait for the head itself
                continue
            wait_any([f for f in pending if not f.done()])
    finally:
        for future in pending:
            future.cancel()


@contextmanager
def open_workers(n_jobs: int = 1, backend: str = "loky", *, scheduler: str | None = None, shared=_NOTHING,
                 scatter: tuple = ()) -> Iterator[Workers]:
    """Start (or connect to) the workers of ``backend``; yield a :class:`Workers`; shut them down at exit.

    Parameters are those of :func:`map_ordered`. ``loky`` with ``n_jobs=1`` runs tasks in this process.
    """
    if backend not in BACKENDS:
        raise InputError(f"The 'backend' option must be one of {', '.join(BACKENDS)}. Got {backend!r} instead.")
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InputError(f"The 'jobs' option must be an int >= 1. Got {n_jobs!r} instead.")
    if scheduler is not None and backend != "dask":
        raise InputError("The 'scheduler' option needs --backend dask.")
    has_shared = shared is not _NOTHING
    if backend == "loky" and n_jobs == 1:
        yield Workers(1, lambda func, task: _Done(func(*task) if not has_shared else func(shared, *task)),
                      None, has_shared)
        return
    if backend == "loky":
        with _local_pool(n_jobs, shared) as workers:
            yield workers
        return
    with _dask_workers(n_jobs, scheduler, shared, scatter) as workers:
        yield workers


class _Done:
    """A finished future (tasks run in this process)."""

    def __init__(self, value):
        self._value = value

    def done(self) -> bool:
        return True

    def result(self):
        return self._value

    def cancel(self) -> bool:
        return False


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
        Tasks submitted and not yet finished (default ``2 * n_workers`` locally, one per worker thread on
        Dask); see :meth:`Workers.map`.
    """
    with open_workers(n_jobs, backend, scheduler=scheduler, shared=shared, scatter=scatter) as workers:
        yield from workers.map(func, tasks, in_flight=in_flight)


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


def forks_workers() -> bool:
    """Whether local worker processes (``loky``) are forked, and so share this process's memory."""
    return _start_method() == "fork"


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


@contextmanager
def _local_pool(n_jobs: int, shared) -> Iterator[Workers]:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    context = multiprocessing.get_context(_start_method())
    # Forked workers share the parent's memory copy-on-write; the cyclic garbage collector would touch (and so
    # copy) every page holding a parent object. Freezing moves them out of its reach in the workers.
    gc.freeze()
    pool = ProcessPoolExecutor(max_workers=n_jobs, mp_context=context, initializer=_init_worker,
                               initargs=(shared, os.getpid()))
    try:
        yield Workers(n_jobs, lambda func, task: pool.submit(_call_local, func, task),
                      lambda futures: wait(futures, return_when=FIRST_COMPLETED), shared is not _NOTHING)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        gc.unfreeze()


# ---------------------------------------------------------------------------- dask


def _call_dask(func, has_shared: bool, shared, task):
    with one_thread():
        return func(shared, *task) if has_shared else func(*task)


def cluster_threads(client) -> int:
    """Worker threads of the cluster ``client`` is connected to (at least 1): the tasks it runs at once."""
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:           # a scheduler without workers yet, or an older client
        return 1


@contextmanager
def _dask_workers(n_jobs: int, scheduler: str | None, shared, scatter: tuple) -> Iterator[Workers]:
    with dask_client(scheduler, n_workers=n_jobs) as client:
        from dask.distributed import wait

        has_shared = shared is not _NOTHING
        shared_ref = client.scatter(shared, broadcast=True, hash=False) if has_shared else None
        scattered = [(obj, client.scatter(obj, broadcast=True, hash=False)) for obj in scatter]

        def swap(arg):
            return next((ref for obj, ref in scattered if arg is obj), arg)

        def submit(func, task):
            return client.submit(_call_dask, func, has_shared, shared_ref, tuple(swap(a) for a in task), pure=False)

        n_workers = n_jobs if scheduler is None else cluster_threads(client)
        yield Workers(n_workers, submit, lambda futures: wait(futures, return_when="FIRST_COMPLETED"), has_shared,
                      in_flight=n_workers)
