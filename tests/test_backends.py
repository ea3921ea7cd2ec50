"""Backends return results in order and identical to a serial run; worker processes are capped and die with their parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from frpd_cli.backends import QUIET_SETTINGS, WORKER_PROFILE_KEY, dask_client, map_ordered
from frpd_cli.exceptions import InputError


def _work(big, i, scale):
    return float(big[i].sum() * scale), i


def _tasks(big):
    return [(big, i, 0.5) for i in range(12)]


def test_serial_and_loky_agree():
    big = np.arange(12 * 50, dtype=np.float64).reshape(12, 50)
    serial = list(map_ordered(_work, _tasks(big)))
    pooled = list(map_ordered(_work, _tasks(big), n_jobs=2))
    assert serial == pooled and [i for _, i in serial] == list(range(12))


def test_dask_local_cluster_agrees():
    pytest.importorskip("dask.distributed")
    big = np.arange(12 * 50, dtype=np.float64).reshape(12, 50)
    serial = list(map_ordered(_work, _tasks(big)))
    on_dask = list(map_ordered(_work, _tasks(big), n_jobs=2, backend="dask", scatter=(big,)))
    assert serial == on_dask


def _quiet_settings():
    import dask

    return {key: dask.config.get(key) for key in QUIET_SETTINGS}


def _malloc_and_blas():
    return os.environ.get("MALLOC_TRIM_THRESHOLD_"), os.environ.get("OPENBLAS_NUM_THREADS")


def _scheduler_timers(dask_scheduler):
    return {name: dask_scheduler.periodic_callbacks[name].callback_time for name in ("tick", "monitor")}


def test_dask_local_cluster_runs_with_the_quiet_settings():
    pytest.importorskip("dask.distributed")
    import dask

    assert QUIET_SETTINGS[WORKER_PROFILE_KEY] is False
    here = _quiet_settings()
    with dask_client(n_workers=1) as client:
        assert list(client.run(_quiet_settings).values()) == [QUIET_SETTINGS]          # the workers' settings
        # glibc's own memory trimming in the workers and one BLAS thread (unless this process's environment says
        # otherwise: the workers inherit it)
        assert list(client.run(_malloc_and_blas).values()) == [(os.environ.get("MALLOC_TRIM_THRESHOLD_"),
                                                                os.environ.get("OPENBLAS_NUM_THREADS", "1"))]
        # the scheduler runs in this process: its timers were made with the settings
        assert client.run_on_scheduler(_scheduler_timers) == {"tick": 1000, "monitor": 2000}
        assert dask.config.get(WORKER_PROFILE_KEY) == here[WORKER_PROFILE_KEY]
    assert _quiet_settings() == here                            # this process's settings left alone


def test_bad_options():
    with pytest.raises(InputError, match="loky, dask"):
        list(map_ordered(_work, [], backend="spark"))
    with pytest.raises(InputError, match="--backend dask"):
        list(map_ordered(_work, [], scheduler="tcp://127.0.0.1:1"))
    with pytest.raises(InputError, match=">= 1"):
        list(map_ordered(_work, [], n_jobs=0))


def test_jobs_capped_at_the_cpus_with_one_warning(monkeypatch):
    import warnings

    import frpd_cli.backends as backends

    monkeypatch.setattr(backends, "available_cpus", lambda: 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert backends.cap_jobs(2) == 2 and backends.cap_jobs(3) == 3
        assert not caught
        assert backends.cap_jobs(1000) == 3
    assert len(caught) == 1 and issubclass(caught[0].category, backends.JobsCappedWarning)
    assert "--jobs 1000" in str(caught[0].message) and "running 3" in str(caught[0].message)


def test_available_cpus_respects_the_affinity_mask():
    import os

    from frpd_cli.backends import available_cpus

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert available_cpus() == expected


def test_shared_data_reaches_every_local_worker_once():
    big = np.arange(12 * 50, dtype=np.float64).reshape(12, 50)
    results = list(map_ordered(_with_shared, [(i,) for i in range(12)], n_jobs=2, shared=big))
    assert [r for r, _ in results] == [float(big[i].sum()) for i in range(12)]
    pids = {pid for _, pid in results}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def _with_shared(shared, i):
    return float(shared[i].sum()), os.getpid()


def _children(pid: int) -> set[int]:
    """Live (non-zombie) descendants of ``pid``, read from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.add(pid)
        except OSError:
            pass
    return alive


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads processes from /proc")
def test_workers_exit_when_the_parent_is_killed(gated, tmp_path):
    # the model holds the run at applicant 2,000 (a worker waits there for a release that never comes): the run
    # cannot end before it is killed, however fast the machine
    from frpd_cli.backends import available_cpus

    if available_cpus() < 2:            # --jobs 2 is capped to one process there: no worker to outlive its parent
        pytest.skip("needs 2 CPUs frpd may use (--jobs is capped at them)")
    applicants = gated.applicants(tmp_path, n_copies=500, marker_at=2000)
    command = [sys.executable, "-m", "frpd_cli", "plan", str(gated.paths["data"]), "--model",
               str(gated.paths["model"]), "--schema", str(gated.paths["schema"]), "--applicants", str(applicants),
               "--format", "csv", "--jobs", "2"]
    parent = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=gated.env)
    workers: set[int] = set()
    try:
        gated.wait_held(parent)                              # a worker holds the run: both are up
        workers = _children(parent.pid)
        assert len(workers) >= 2, "no worker processes were started"
        parent.stdout.read(1)                       # the workers produced plans before the held one
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        gated.wait_exits(workers, timeout=120)      # each worker checks for its parent every 0.25 s
        assert not _alive(workers), f"worker(s) {sorted(_alive(workers))} outlived their parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in _alive(workers):                 # never leave our own strays behind
            os.kill(pid, signal.SIGKILL)
        parent.stdout.close()


def _blas_threads(i):
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"], os.getpid()


def test_local_workers_run_blas_on_one_thread():
    results = list(map_ordered(_blas_threads, [(i,) for i in range(6)], n_jobs=2))
    assert all(threads and set(threads) == {1} for threads, _ in results)
    assert os.getpid() not in {pid for _, pid in results}


def _wait_for(path, i, seconds):
    """Task ``i``: task 0 waits (up to ``seconds``) for the file that task 5 creates; returns whether it saw it."""
    import pathlib

    flag = pathlib.Path(path)
    if i == 5:
        flag.write_text("task 5 ran")
    if i != 0:
        return i, True
    deadline = time.monotonic() + seconds
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return i, flag.exists()


def test_a_slow_first_task_does_not_stop_the_other_workers(tmp_path):
    """With 2 tasks in flight, task 5 can only run while task 0 runs if finished results do not block submission."""
    flag = tmp_path / "flag"
    results = list(map_ordered(_wait_for, [(str(flag), i, 120.0) for i in range(8)], n_jobs=2, in_flight=2))
    assert results == [(0, True)] + [(i, True) for i in range(1, 8)]


class _Scripted:
    """A future of :func:`_scripted_workers`: its tasks finish oldest first, when the caller waits for them."""

    def __init__(self, i, running, log):
        self.i, self.finished, self.running, self.log = i, False, running, log

    def done(self):
        return self.finished

    def result(self):
        while not self.finished:            # waiting for it: the workers finish what they hold, oldest first
            _finish_oldest(self.running, self.log)
        return self.i

    def cancel(self):
        return False


def _finish_oldest(running, log):
    oldest = running.pop(0)
    oldest.finished = True
    log.append(("finished", oldest.i))


def _scripted_workers(n_workers, log, **kwargs):
    from frpd_cli.backends import Workers

    running = []

    def submit(func, task):
        log.append(("submit", task[0]))
        running.append(_Scripted(task[0], running, log))
        return running[-1]

    return Workers(n_workers, submit, lambda futures: _finish_oldest(running, log), False, **kwargs)


def test_a_finished_task_is_replaced_before_its_result_is_handed_on():
    """The caller may hold a result a long time (writing it): the worker that finished it gets its next task first."""
    log = []
    workers = _scripted_workers(2, log, in_flight=2)
    for result in workers.map(None, [(i,) for i in range(5)]):
        log.append(("got", result))
    assert log == [("submit", 0), ("submit", 1),
                   ("finished", 0), ("submit", 2), ("got", 0),
                   ("finished", 1), ("submit", 3), ("got", 1),
                   ("finished", 2), ("submit", 4), ("got", 2),
                   ("finished", 3), ("got", 3),
                   ("finished", 4), ("got", 4)]


def test_in_flight_defaults_to_the_backend():
    """Two per worker locally (a queue the workers take from); one per worker thread on Dask (see Workers.map)."""
    log = []
    list(_scripted_workers(3, log).map(None, [(i,) for i in range(8)]))
    assert log[:6] == [("submit", i) for i in range(6)] and log[6] == ("finished", 0)
    log.clear()
    list(_scripted_workers(3, log, in_flight=3).map(None, [(i,) for i in range(8)]))
    assert log[:4] == [("submit", 0), ("submit", 1), ("submit", 2), ("finished", 0)]


def test_the_local_pool_keeps_two_tasks_per_worker_in_flight():
    from frpd_cli.backends import open_workers

    with open_workers(2) as workers:
        assert workers.in_flight == 4
        assert list(workers.map(_work, _tasks(np.ones((12, 3))))) == [(1.5, i) for i in range(12)]


def test_in_process_tasks_run_when_their_results_are_asked_for():
    from frpd_cli.backends import open_workers

    ran = []
    with open_workers(1) as workers:
        results = workers.map(lambda i: ran.append(i) or i * i, ((i,) for i in range(5)))
        assert next(results) == 0 and ran == [0]
        assert next(results) == 1 and ran == [0, 1]
        assert list(results) == [4, 9, 16] and ran == list(range(5))


def test_open_workers_counts_the_threads_of_a_cluster_it_joins():
    pytest.importorskip("dask.distributed")
    from dask.distributed import LocalCluster

    from frpd_cli.backends import open_workers

    big = np.arange(12 * 50, dtype=np.float64).reshape(12, 50)
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address=None) as cluster:
        # --jobs says 1, the cluster has 3 worker threads: tasks are cut for 3
        with open_workers(1, "dask", scheduler=cluster.scheduler_address, shared=big) as workers:
            assert workers.n_workers == 3
            assert workers.in_flight == 3           # one task per worker thread: the scheduler assigns at submission
            results = list(workers.map(_with_shared, [(i,) for i in range(12)]))
    assert [r for r, _ in results] == [float(big[i].sum()) for i in range(12)]
