"""Simulated wall time of a parallel run's last applicants under two ways of cutting them into tasks.

Run: python benchmarks/sim_tasks.py

Each task costs a fixed TASK_SECONDS plus PER_APPLICANT seconds per applicant (measured on Adult: about 60 ms and
1.84 ms of CPU). Each of two workers runs at a speed that has a persistent part (drawn once per run) and a part
drawn again every 0.25 s, as this machine's vCPUs do; a free worker takes the next task. Compared: guided scheduling
(each task 1 / (2 * workers) of what is left, the cut frpd used before) and frpd's `planning._tail_sizes`. Prints
the mean simulated time of each, relative to guided scheduling, for a few run lengths and amounts of variation.
"""

from __future__ import annotations

import heapq
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frpd_cli.planning import MIN_TASK_APPLICANTS, TASK_APPLICANTS, _tail_sizes  # noqa: E402

PER_APPLICANT, TASK_SECONDS, STEP = 1.84e-3, 0.060, 0.25


def guided(n: int, workers: int) -> list[int]:
    sizes = []
    while n > 2 * workers * MIN_TASK_APPLICANTS:
        size = min(TASK_APPLICANTS, -(-n // (2 * workers)))
        sizes.append(size)
        n -= size
    count = max(1, min(2 * workers, n // MIN_TASK_APPLICANTS), min(workers, -(-n // MIN_TASK_APPLICANTS)))
    base, extra = divmod(n, count)
    return sizes + [base + (i < extra) for i in range(count)]


def _finish(work: float, start: float, speed: np.ndarray) -> float:
    t = start
    while True:
        i = min(int(t / STEP), speed.size - 1)
        end = (i + 1) * STEP
        if (end - t) * speed[i] >= work:
            return t + work / speed[i]
        work -= (end - t) * speed[i]
        t = end


def simulate(sizes: list[int], workers: int, rng, persistent: float, varying: float) -> float:
    speeds = [np.clip(np.clip(1 + persistent * rng.standard_normal(), 0.6, 1.4)
                      * (1 + varying * rng.standard_normal(200)), 0.4, 1.8) for _ in range(workers)]
    free = [(0.0, k) for k in range(workers)]
    last = 0.0
    for size in sizes:
        t, k = heapq.heappop(free)
        t = _finish(size * PER_APPLICANT + TASK_SECONDS, t, speeds[k])
        last = max(last, t)
        heapq.heappush(free, (t, k))
    return last


def main() -> int:
    rng = np.random.default_rng(0)
    workers = 2
    for persistent in (0.05, 0.1, 0.2):
        for n in (600, 1000, 2000, 4096):
            times = {name: np.mean([simulate(cut(n, workers), workers, rng, persistent, 0.25) for _ in range(1500)])
                     for name, cut in (("guided", guided), ("frpd", _tail_sizes))}
            print(f"persistent speed sd {persistent:.2f}, {n:5d} applicants: guided {len(guided(n, workers))} tasks "
                  f"{times['guided']:.3f} s, frpd {len(_tail_sizes(n, workers))} tasks {times['frpd']:.3f} s "
                  f"({times['frpd'] / times['guided']:.3f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
