"""`frpd select` per applicant through the command line, next to the selection itself in the library.

Run: python benchmarks/bench_select_cli.py [--n-applicants N] [--runs R] [--quick]

Adult with the paper's protocol (as in bench_plan.py), no constraints, `--method quad`, K = 3, theta = 0.9,
BLAS single-threaded (as bench_select.py). CLI: `frpd select ... --pool DIR` as a fresh process on N denied
applicants and on 1, R times each; per applicant = (median wall time on N - median on 1) / (N - 1), so start-up,
loading and scoring the training rows cancel and everything that grows with the applicants counts (reading
them, candidate filtering, the selection, building the tables, writing the artifact, printing the summary).
Library: the same applicants' candidates, timed over compute_geometry + eigen_decompose + select_prototypes
only (the work bench_select.py times). Overhead = CLI - library, as a share of the library time. Results go
to docs/benchmarks.md (section bench_select_cli).
"""

from __future__ import annotations

import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402
from frpd_cli.dataset import build_training_set, read_training_frame  # noqa: E402
from frpd_cli.model import load_model  # noqa: E402
from frpd_cli.projection import candidate_mask  # noqa: E402
from frpd_cli.schema import SchemaSpec, infer_schema  # noqa: E402
from frpd_cli.selection import compute_geometry, eigen_decompose, select_prototypes  # noqa: E402

DATASETS = Path(os.environ.get("FRPD_DATASETS", ROOT.parent / "shared" / "datasets"))


def _frpd() -> list[str]:
    script = Path(sys.executable).with_name("frpd")
    return [str(script)] if script.exists() else [sys.executable, "-m", "frpd_cli"]


def _wall(argv) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{done.stderr.decode(errors='replace')}")
    return seconds


def _library_ms(train_path: Path, model_path: Path, applicants) -> tuple[float, float, float]:
    frame = read_training_frame(train_path)
    schema = infer_schema(frame, SchemaSpec())
    model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    X0 = training.encoder.encode(applicants)
    codes0 = training.encoder.constraint_codes(applicants)
    pool = training.pool()
    cands = [np.flatnonzero(candidate_mask(training, X0[i], codes0.row(i), pool)) for i in range(len(applicants))]
    inputs = [(training.X[c], X0[i]) for i, c in enumerate(cands)]
    times = []
    for Xc, x0 in inputs:
        start = time.perf_counter()
        g = compute_geometry(Xc, x0)
        select_prototypes(g, k=3, method="quad", theta=0.9, eigen=eigen_decompose(g))
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.mean(times)), 1e3 * float(np.median(times)), float(np.mean([c.size for c in cands]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-applicants", type=int, default=500, help="denied Adult applicants (default 500)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--quick", action="store_true", help="100 applicants, 3 runs")
    args = parser.parse_args(argv)
    n, runs = (100, 3) if args.quick else (args.n_applicants, args.runs)
    if not (DATASETS / "adult.csv").exists():
        print("adult.csv not found; nothing to measure", file=sys.stderr)
        return 0
    from benchmarks.bench_plan import _train_adult

    frpd = _frpd()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train_path, model_path, _, denied = _train_adult(tmp)
        applicants = denied.head(n).reset_index(drop=True)
        n = len(applicants)
        applicants.to_csv(tmp / "many.csv", index=False)
        applicants.head(1).to_csv(tmp / "one.csv", index=False)
        common = [str(train_path), "--model", str(model_path)]
        subprocess.run([*frpd, "build-pool", *common, "--out", str(tmp / "pool")], check=True, capture_output=True)
        select = [*frpd, "select", *common, "--pool", str(tmp / "pool"), "--method", "quad", "--format", "csv"]
        many, one = [], []
        for run in range(runs + 1):
            t_many = _wall([*select, "--applicants", str(tmp / "many.csv"), "--out", str(tmp / "sel_many")])
            t_one = _wall([*select, "--applicants", str(tmp / "one.csv"), "--out", str(tmp / "sel_one")])
            if run:                       # the first round warms the file cache
                many.append(t_many)
                one.append(t_one)
        cli_ms = 1e3 * (statistics.median(many) - statistics.median(one)) / (n - 1)
        lib_mean, lib_median, n_cand = _library_ms(train_path, model_path, applicants)

    overhead = cli_ms - lib_mean
    rows = [{"applicants": n, "candidates (mean)": f"{n_cand:.0f}", "CLI ms/applicant": f"{cli_ms:.2f}",
             "library ms/applicant (mean)": f"{lib_mean:.2f}", "library median": f"{lib_median:.2f}",
             "overhead ms": f"{overhead:.2f}", "overhead / library": f"{100 * overhead / lib_mean:.0f}%"}]
    lines = ["## select through the CLI vs the library (Adult, quad, no constraints)", "",
             f"Machine: {machine_line()}. Command: `python benchmarks/bench_select_cli.py` (BLAS single-threaded; "
             f"{runs} runs of each command).", "",
             *markdown_table(rows, list(rows[0])), "",
             "CLI: (median wall time of `frpd select --pool` on N applicants - the same on 1) / (N - 1): "
             "everything that grows with the applicants. Library: compute_geometry + eigen_decompose + "
             "select_prototypes on the same candidate sets. Overhead: candidate filtering, the selection and "
             "status tables, the artifact (csv, npz) and the summary on stdout."]
    publish("bench_select_cli", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
