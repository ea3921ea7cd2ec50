"""Plan throughput under the effort scale relative to the paper's min-max scale, measured in one run.

Run: python benchmarks/bench_encoding.py [--n-applicants N] [--rounds R]

The workload of `bench_plan.py`'s library measurement (Adult from ../shared/datasets, 80/20 stratified split
with seed 42, MLP (20, 50, 20), quad, K = 3, linear, sparse recourses, immutable marital_status and gender, age
increasing; applicants = the first N test rows predicted unfavourable), planned with `--jobs 1` under
`--scale minmax` and `--scale effort` in alternating rounds (the two CPUs of the benchmark machine switch between
a fast and a slow state on their own: only runs next to each other compare). Reported: each scale's best
applicants per second, and the median over rounds of the ratio effort / minmax of adjacent runs; also the CPU
time of fitting the encoder and encoding the training rows (`build_training_set` without the model call).
Results go to docs/benchmarks.md (section bench_encoding).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, publish  # noqa: E402
from benchmarks.bench_plan import DATASETS, _train_adult  # noqa: E402
from frpd_cli.dataset import build_training_set  # noqa: E402
from frpd_cli.encoding import fit_encoder  # noqa: E402
from frpd_cli.model import load_model  # noqa: E402
from frpd_cli.planning import PlanSettings, plan_applicants  # noqa: E402
from frpd_cli.schema import infer_schema  # noqa: E402

SCALES = ("minmax", "effort")


def _plan_seconds(training, model, applicants, ids, settings) -> float:
    start = time.process_time()
    for _ in plan_applicants(training, model, applicants, ids, settings, n_jobs=1):
        pass
    return time.process_time() - start


def _encode_seconds(frame, schema, scale, repeats=5) -> float:
    best = float("inf")
    features = frame.loc[:, list(schema.feature_names)]
    for _ in range(repeats):
        start = time.process_time()
        encoder = fit_encoder(schema, frame, scale=scale)
        encoder.encode(features)
        best = min(best, time.process_time() - start)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-applicants", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not (DATASETS / "adult.csv").exists():
        print(f"adult.csv not found in {DATASETS}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        train_path, model_path, spec, denied = _train_adult(Path(tmp))
        frame = pd.read_csv(train_path)
        schema = infer_schema(frame, spec)
        model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names)
        applicants = denied.head(args.n_applicants)
        ids = [str(i) for i in range(len(applicants))]
        settings = PlanSettings(method="quad", k=3, theta=0.9)
        trainings = {scale: build_training_set(frame, schema, model, scale=scale) for scale in SCALES}
        seconds = {scale: [] for scale in SCALES}
        for r in range(args.rounds):
            order = SCALES if r % 2 == 0 else SCALES[::-1]
            for scale in order:
                seconds[scale].append(_plan_seconds(trainings[scale], model, applicants, ids, settings))
            print(f"round {r + 1}: " + ", ".join(f"{s} {seconds[s][-1]:.2f} s" for s in SCALES), file=sys.stderr)
        encode = {scale: _encode_seconds(frame, schema, scale) for scale in SCALES}
    n = len(applicants)
    ratios = [m / e for m, e in zip(seconds["minmax"], seconds["effort"])]
    lines = [
        "## Plan throughput by scale (`benchmarks/bench_encoding.py`)", "",
        f"Machine: {machine_line()}, single-threaded BLAS. Command: `python benchmarks/bench_encoding.py "
        f"--n-applicants {args.n_applicants} --rounds {args.rounds}`.", "",
        f"Adult ({len(frame)} training rows), the first {n} denied test applicants, quad, K = 3, linear, sparse, "
        "`--jobs 1`, library call; CPU time. Rounds alternate the order of the two scales.", "",
        "| scale | best applicants/s (CPU) | median applicants/s | fit + encode training rows, CPU ms |",
        "|---|---:|---:|---:|",
    ]
    for scale in SCALES:
        lines.append(f"| {scale} | {n / min(seconds[scale]):.1f} | {n / statistics.median(seconds[scale]):.1f} | "
                     f"{encode[scale] * 1000:.1f} |")
    lines += ["", f"Throughput effort / minmax, median over rounds of adjacent runs: {statistics.median(ratios):.2f} "
              f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)}; target: at least 0.80)."]
    publish("bench_encoding", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
