"""How a parallel run cuts its applicants into tasks and regroups the results into the input's chunks."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pandas as pd
import pytest

import frpd_cli.planning as planning
from frpd_cli.applicants import ApplicantChunk
from frpd_cli.planning import PlanSettings, _tail_sizes, _tasks, plan_stream


def _chunks(lengths, *, invalid_every=0):
    """Chunks of the given lengths over consecutive applicants ``A0, A1, ...``; some rows marked invalid."""
    chunks, offset = [], 0
    for n in lengths:
        ids = [f"A{offset + i}" for i in range(n)]
        frame = pd.DataFrame({"x": np.arange(offset, offset + n, dtype=np.int64)})
        invalid = ({i: f"bad {offset + i}" for i in range(n) if (offset + i) % invalid_every == 0}
                   if invalid_every else {})
        chunks.append(ApplicantChunk(offset=offset, frame=frame, ids=ids, invalid=invalid))
        offset += n
    return chunks


@pytest.fixture
def small_tasks(monkeypatch):
    monkeypatch.setattr(planning, "TASK_APPLICANTS", 5)
    monkeypatch.setattr(planning, "MIN_TASK_APPLICANTS", 2)


@pytest.mark.parametrize("n_workers", [1, 2, 3])
@pytest.mark.parametrize("lengths", [[1] * 40, [3, 0, 7, 1, 12, 0, 2, 9], [64], [4], [6, 6, 6, 6, 6, 6, 6], [0, 0]])
def test_tasks_cover_every_applicant_once_in_order(small_tasks, lengths, n_workers):
    sizes: deque = deque()
    tasks = list(_tasks(iter(_chunks(lengths, invalid_every=4)), n_workers, sizes))
    assert list(sizes) == lengths                       # every chunk's length, in order, empty ones included
    n = sum(lengths)
    ids = [i for _, task_ids, _ in tasks for i in task_ids]
    assert ids == [f"A{i}" for i in range(n)]
    for frame, task_ids, invalid in tasks:
        assert frame.index.tolist() == list(range(len(task_ids)))
        assert [f"A{x}" for x in frame["x"]] == task_ids  # the rows travel with their ids
        expected = {j: f"bad {a[1:]}" for j, a in enumerate(task_ids) if int(a[1:]) % 4 == 0}
        assert (invalid or {}) == expected              # invalid rows re-indexed into the task
    lengths_of_tasks = [len(t[1]) for t in tasks]
    assert all(0 < m <= 5 for m in lengths_of_tasks)
    # full tasks while the end is not in sight, then the tail: equal for one worker, never growing for several
    full = list(itertools.takewhile(lambda m: m == 5, lengths_of_tasks))
    tail = lengths_of_tasks[len(full):]
    if n_workers == 1:
        assert not tail or max(tail) - min(tail) <= 1
    else:
        assert all(b <= a + 1 for a, b in zip(tail, tail[1:]))
    if n >= n_workers * 2:                              # MIN_TASK_APPLICANTS = 2: every worker gets a task
        assert len(tasks) >= n_workers


def test_tasks_do_not_follow_the_chunks(small_tasks):
    # chunks of one applicant still make tasks of TASK_APPLICANTS applicants (a task pays fixed costs)
    tasks = list(_tasks(iter(_chunks([1] * 40)), 1, deque()))
    assert [len(t[1]) for t in tasks] == [5] * 8
    tasks = list(_tasks(iter(_chunks([1] * 40)), 2, deque()))
    # then, with the end in sight (15 left): large equal tasks, then one small task per worker
    assert [len(t[1]) for t in tasks] == [5] * 5 + [3, 3, 3, 2] + [2, 2]
    # a chunk larger than a task is cut into several
    tasks = list(_tasks(iter(_chunks([23])), 1, deque()))
    assert [len(t[1]) for t in tasks] == [5, 5, 5, 4, 4]


@pytest.mark.parametrize("n, n_workers, expected", [
    (1000, 1, [250] * 4),               # one worker: as few equal tasks as TASK_APPLICANTS allows
    (1001, 1, [251, 250, 250, 250]),
    (100, 1, [100]),
    # several workers: large equal tasks (a multiple of the workers), then one small task per worker holding
    # TAIL_SHARE of the applicants (at least MIN_TASK_APPLICANTS each)
    (2000, 2, [213] * 4 + [212] * 4 + [150, 150]),
    (976, 2, [180] * 4 + [128, 128]),
    (600, 2, [172, 172, 128, 128]),
    (513, 2, [129, 128, 128, 128]),
    # at most 2 * workers * MIN_TASK_APPLICANTS: equal tasks of at least the minimum
    (512, 2, [128] * 4),
    (300, 2, [150, 150]),
    (200, 2, [100, 100]),               # one per worker, even below MIN_TASK_APPLICANTS: no idle worker
    (400, 4, [100] * 4),
    (250, 4, [125, 125]),               # ... while each keeps at least half of it
    (100, 2, [100]),
    (1000, 4, [143] * 6 + [142]),
    (0, 2, []),
])
def test_tail_sizes(n, n_workers, expected, monkeypatch):
    monkeypatch.setattr(planning, "TASK_APPLICANTS", 256)
    monkeypatch.setattr(planning, "MIN_TASK_APPLICANTS", 128)
    assert _tail_sizes(n, n_workers) == expected


def test_tail_sizes_always_sum_to_the_applicants_left():
    task, least = planning.TASK_APPLICANTS, planning.MIN_TASK_APPLICANTS
    for n, n_workers in itertools.product(range(0, 9000, 37), range(1, 5)):
        sizes = _tail_sizes(n, n_workers)
        assert sum(sizes) == n and all(0 < s <= task for s in sizes)
        if n_workers == 1:
            assert len(sizes) == -(-n // task) and (not sizes or max(sizes) - min(sizes) <= 1)
            continue
        assert all(b <= a + 1 for a, b in zip(sizes, sizes[1:]))     # never larger towards the end
        assert n < least or min(sizes) >= least // 2                   # never a tiny task
        assert len(sizes) >= min(n_workers, -(-n // least))            # every worker busy when there is enough
        if n > 2 * n_workers * least:
            # one small task per worker at the end, TAIL_SHARE of the applicants between them (or the minimum)
            small = max(least, -(-int(n * planning.TAIL_SHARE) // n_workers))
            assert sizes[-n_workers:] == [sizes[-1]] * n_workers and least <= sizes[-1] <= small + 1
            assert len(set(sizes[:-n_workers])) <= 2 and len(sizes[:-n_workers]) % n_workers == 0


def test_parallel_results_come_back_in_the_input_chunks(sample_paths, monkeypatch):
    """A two-worker run yields one list per input chunk (empty chunks included) with the plans of its rows."""
    from frpd_cli.dataset import build_training_set
    from frpd_cli.model import load_model
    from frpd_cli.schema import infer_schema, load_schema_file

    monkeypatch.setattr(planning, "MIN_APPLICANTS_PER_WORKER", {"loky": 1, "dask": 1})
    monkeypatch.setattr(planning, "TASK_APPLICANTS", 4)
    monkeypatch.setattr(planning, "MIN_TASK_APPLICANTS", 1)
    frame = pd.read_csv(sample_paths["data"])
    schema = infer_schema(frame, load_schema_file(sample_paths["schema"]))
    model = load_model(sample_paths["model"], favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    names = list(schema.feature_names)
    applicants = pd.read_csv(sample_paths["applicants"]).loc[:, names]
    lengths = [3, 0, 7, 1, 2, 0, 5, 0]
    chunks, offset = [], 0
    for n in lengths:
        chunks.append(ApplicantChunk(offset=offset, frame=applicants.iloc[offset:offset + n].reset_index(drop=True),
                                     ids=[f"R{i}" for i in range(offset, offset + n)],
                                     invalid={0: "marked invalid"} if n == 7 else {}))
        offset += n
    settings = PlanSettings(k=2)
    serial = list(plan_stream(training, model, chunks, settings, n_jobs=1))
    pooled = list(plan_stream(training, model, chunks, settings, n_jobs=2))
    assert [len(c) for c in pooled] == lengths
    assert pooled == serial
    flat = [p for c in pooled for p in c]
    assert [p.applicant for p in flat] == [f"R{i}" for i in range(sum(lengths))]
    assert flat[3].status == "invalid-input" and flat[3].reason == "marked invalid"
