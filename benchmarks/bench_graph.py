"""Benchmark of the actionability graph: build time, peak memory, attach + Dijkstra per applicant.

Usage: ``python benchmarks/bench_graph.py [--quick]``. Writes the ``bench_graph``
section of docs/benchmarks.md. Adult is read from ``../shared/datasets/adult.csv``
when present (never copied); its row is skipped otherwise.

Peak memory is the process's peak resident set (``ru_maxrss``) measured in a
fresh subprocess per case, so cases do not inherit each other's peak.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, write_section  # noqa: E402
from frpd_cli.constraints import ConstraintCodes  # noqa: E402
from frpd_cli.graph import attach_source, build_graph, graph_statistics, shortest_paths  # noqa: E402

ADULT = ROOT.parent / "shared" / "datasets" / "adult.csv"
EDUCATION_ORDER = ["School", "HS-grad", "Some-college", "Assoc", "Bachelors", "Masters", "Prof-school", "Doctorate"]


def adult_data():
    """Adult min-max/one-hot encoded here with pandas; age and education only go up."""
    import pandas as pd

    df = pd.read_csv(ADULT).drop(columns="label")
    num = df[["age", "hours_per_week"]].astype(float)
    num = (num - num.min()) / (num.max() - num.min())
    cats = ["workclass", "education", "marital_status", "occupation", "race", "gender"]
    onehot = pd.get_dummies(df[cats].astype(str), dtype=float)
    X = np.hstack([num.to_numpy(), onehot.to_numpy()])
    immutable = np.column_stack([pd.factorize(df[c], sort=True)[0] for c in ("marital_status", "gender")]).astype(float)
    edu_rank = df["education"].map({v: i for i, v in enumerate(EDUCATION_ORDER)}).to_numpy(float)
    monotone = np.column_stack([df["age"].to_numpy(float), edu_rank])
    codes = ConstraintCodes(immutable, monotone, np.array([1, 1], dtype=np.int8))
    return X, codes


def synthetic_data(n, p=4, seed=0):
    """Low intrinsic dimension: p uniform features, 2 immutable groups, first feature increasing-only."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, p))
    immutable = rng.integers(0, 2, size=(n, 1)).astype(float)
    monotone = np.round(X[:, :1] * 50)  # an integer "age"-like code tied to feature 0
    return X, ConstraintCodes(immutable, monotone, np.array([1], dtype=np.int8))


def run_case(name, n_applicants, weight):
    if name == "adult":
        X, codes = adult_data()
    else:
        X, codes = synthetic_data(int(name))
    t0 = time.perf_counter()
    g = build_graph(X, codes, n_neighbors=10, weight=weight)
    build_s = time.perf_counter() - t0
    stats = graph_statistics(g)
    rng = np.random.default_rng(1)
    rows = rng.choice(X.shape[0], size=n_applicants, replace=False)
    times = []
    reached = []
    for r in rows:
        x0 = np.clip(X[r] + rng.normal(0, 0.01, X.shape[1]), 0, 1)
        t1 = time.perf_counter()
        nbr, w = attach_source(g, X, codes, x0, codes.row(int(r)))
        dist, _ = shortest_paths(g, nbr, w)
        times.append(time.perf_counter() - t1)
        reached.append(np.isfinite(dist).mean())
    return {
        "case": name,
        "rows": X.shape[0],
        "width": X.shape[1],
        "weight": weight,
        "build_s": build_s,
        "edges": stats["edges"],
        "components": stats["weak_components"],
        "sinks": stats["sinks"],
        "attach_dijkstra_ms_median": 1000 * float(np.median(times)),
        "attach_dijkstra_ms_p95": 1000 * float(np.percentile(times, 95)),
        "reached_fraction": float(np.mean(reached)),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="26k and 100k rows only, fewer applicants")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    parser.add_argument("--weight", default="euclidean", help=argparse.SUPPRESS)
    parser.add_argument("--applicants", type=int, default=50, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.case, args.applicants, args.weight)))
        return

    n_app = 20 if args.quick else 50
    cases = []
    if ADULT.exists():
        cases += [("adult", "euclidean"), ("adult", "density")]
    else:
        print(f"skipping Adult: {ADULT} not found", file=sys.stderr)
    cases += [("26000", "euclidean"), ("100000", "euclidean")]
    if not args.quick:
        cases += [("1000000", "euclidean")]
    results = []
    for name, weight in cases:
        print(f"running {name} ({weight}) ...", file=sys.stderr, flush=True)
        proc = subprocess.run(
            [sys.executable, __file__, "--case", name, "--weight", weight, "--applicants", str(n_app)],
            capture_output=True, text=True, check=True,
        )
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr)

    lines = [
        "## Actionability graph (`benchmarks/bench_graph.py`)",
        "",
        f"Machine: {machine_line()}. `build_graph(n_neighbors=10)`, `algorithm='auto'`; "
        f"per-applicant time is `attach_source` + `shortest_paths` (Dijkstra over the whole graph) "
        f"for {n_app} applicants (training rows plus noise). Peak RSS of a fresh process per case. "
        "Synthetic rows: p=4 uniform features, 2 immutable groups, one increasing-only code. "
        "Adult: the 32,561 rows of `adult.csv`, 29 encoded columns, immutable marital status and gender, "
        "age and education increasing-only. 'reached' is the mean share of nodes with a finite distance "
        "from the applicant; 'sinks' are nodes without out-edges.",
        "",
        "| data | rows | width | weight | build (s) | edges | weak comps | sinks | attach+Dijkstra median (ms) | p95 (ms) | reached | peak RSS (MB) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['case']} | {r['rows']:,} | {r['width']} | {r['weight']} | {r['build_s']:.2f} | {r['edges']:,} | "
            f"{r['components']} | {r['sinks']} | {r['attach_dijkstra_ms_median']:.1f} | "
            f"{r['attach_dijkstra_ms_p95']:.1f} | {100 * r['reached_fraction']:.1f}% | {r['peak_rss_mb']:.0f} |"
        )
    write_section("bench_graph", "\n".join(lines))


if __name__ == "__main__":
    main()
