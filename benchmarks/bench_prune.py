"""How much of an applicant's candidate set an exact bound can rule out, on Adult resampled to growing sizes.

Run: python benchmarks/bench_prune.py [--sizes 26048,1000000] [--work DIR] [--n-applicants 30]

The sets, the model and the pools of `bench_scale.py` (same work folder; generated and built when missing).
For each size and theta, each of the first denied applicants with more than 85 candidates (below that quad
enumerates every set): quad's answer (K = 3) is the incumbent, and `membership_bounds` (at w = 0, the distance
bound, and at w = s v for s in 0.5, 1, 1.5, v the answer's direction sum) bounds from below the objective of
every set holding each candidate; a candidate whose bound exceeds the incumbent is in no optimal set.

Reported: the share of the candidates so ruled out (mean over applicants), the applicants for whom at least
90% are, the radius beyond which the distance bound rules every candidate out against the farthest candidate,
and how far down the distance order quad's answer reaches (median over applicants of the farthest prototype's
rank, as a share of the candidates). For `--max-candidates 1024` (applicants with more than 1,024 candidates):
quad's answer over the 1,024 nearest, and whether the bound proves that no left-out candidate is in a better set
(else how much better than that answer a set holding one could be at most, as a share of it; median). At
theta = 0.9 only: for how many applicants quad's answer changes when
the farthest 10% of the candidates, none of them chosen, are left out (the heuristic's answer depends on rows
it does not choose, so no pruning can keep its plans byte-identical unless it keeps every row).

Results go to docs/benchmarks.md (section bench_prune).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402
from benchmarks.bench_plan import DATASETS  # noqa: E402
from benchmarks.bench_scale import IMMUTABLE, _schema_flags, generate, run_frpd  # noqa: E402

K = 3
LIMIT = 1024
THETAS = (0.9, 0.5, 0.2)


def _setup(n: int, paths: dict, work: Path):
    from frpd_cli.candidates import CandidateStage
    from frpd_cli.choice import PlanSettings
    from frpd_cli.dataset import read_training_frame
    from frpd_cli.model import load_model
    from frpd_cli.pool import load_pool
    from frpd_cli.schema import SchemaSpec, infer_schema

    data, pool = paths["sets"][n], work / f"pool_{n}"
    if not pool.exists():
        run_frpd(["build-pool", str(data), "--model", str(paths["model"]), *_schema_flags(), "--out", str(pool)],
                 work)
    frame = read_training_frame(data)
    schema = infer_schema(frame, SchemaSpec(target="label", immutable=IMMUTABLE, increasing=("age",)))
    model = load_model(paths["model"], favorable=schema.favorable, feature_names=schema.feature_names)
    training = load_pool(pool, frame, schema, data=data, model=paths["model"], threshold=0.5,
                         scale="effort")   # the scale `frpd build-pool` encodes in by default
    return training, model, CandidateStage(training, PlanSettings(), model=model)


def measure(n: int, paths: dict, work: Path, n_applicants: int) -> list[dict]:
    from frpd_cli.selection import Geometry, compute_geometry, select_prototypes
    from frpd_cli.selection.quad import membership_bounds

    training, model, stage = _setup(n, paths, work)
    names = list(training.schema.feature_names)
    raw = pd.read_csv(paths["applicants"]).head(n_applicants).loc[:, names]
    X0, codes0 = training.encoder.encode(raw), training.encoder.constraint_codes(raw)
    geometries = []
    for i in range(len(raw)):
        found = stage.find(X0[i], codes0.row(i), raw.iloc[i])
        if len(found) > 85:
            geometries.append(compute_geometry(training.X[found.rows], X0[i]))
    rows = []
    for theta in THETAS:
        shares, ranks, radii, changed, proofs, slack, limited = [], [], [], 0, 0, [], 0
        for g in geometries:
            d, A = g.distances, g.directions
            sel = select_prototypes(g, k=K, method="quad", theta=theta)
            v = A[sel.indices].sum(axis=0)
            points = np.vstack([np.zeros_like(v), 0.5 * v, v, 1.5 * v])
            bounds = membership_bounds(A, d, K, theta, points)
            shares.append(float(np.mean(bounds > sel.objective + 1e-9 * (1.0 + abs(sel.objective)))))
            order = np.lexsort((np.arange(d.size), d))
            rank = np.empty(d.size, dtype=np.int64)
            rank[order] = np.arange(d.size)
            ranks.append(float(rank[sel.indices].max() + 1) / d.size)
            radii.append((sel.objective / (1.0 - theta) - float(np.sort(d)[:K - 1].sum())) / float(d.max()))
            if d.size > LIMIT:  # --max-candidates LIMIT: the nearest, ties by position (row order)
                limited += 1
                near = np.sort(order[:LIMIT])
                pruned = select_prototypes(Geometry(directions=A[near], distances=d[near]), k=K, method="quad",
                                           theta=theta)
                u = A[near[pruned.indices]].sum(axis=0)
                low = membership_bounds(A, d, K, theta, np.vstack([np.zeros_like(u), 0.5 * u, u, 1.5 * u]))
                low[near] = np.inf
                proofs += bool(low.min() > pruned.objective + 1e-9 * (1.0 + abs(pruned.objective)))
                slack.append(max(pruned.objective - float(low.min()), 0.0) / pruned.objective)
            if theta == THETAS[0]:
                far = np.setdiff1d(order[-(d.size // 10):], sel.indices)
                kept = np.setdiff1d(np.arange(d.size), far)
                again = select_prototypes(Geometry(directions=A[kept], distances=d[kept]), k=K, method="quad",
                                          theta=theta)
                changed += not np.array_equal(np.sort(kept[again.indices]), np.sort(sel.indices))
        shares = np.array(shares)
        rows.append({
            "training rows": n, "theta": theta, "applicants": len(geometries),
            "candidates (mean)": f"{np.mean([g.n_candidates for g in geometries]):.0f}",
            "ruled out (mean share)": f"{100.0 * shares.mean():.1f}%",
            "applicants with >= 90% ruled out": int(np.sum(shares >= 0.9)),
            "distance-bound radius / farthest (median)": f"{np.median(radii):.2f}",
            "farthest prototype's rank (median share)": f"{100.0 * np.median(ranks):.0f}%",
            f"--max-candidates {LIMIT}: proven": f"{proofs}/{limited}",
            f"--max-candidates {LIMIT}: possible gain (median)": f"{100.0 * np.median(slack):.0f}%" if slack else "",
            "answer changed without the farthest 10% unchosen": f"{changed}" if theta == THETAS[0] else "",
        })
        print(rows[-1], file=sys.stderr)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="26048,1000000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/frpd-bench-scale"))
    parser.add_argument("--n-applicants", type=int, default=30)
    args = parser.parse_args(argv)
    if not (DATASETS / "adult.csv").exists():
        print(f"adult.csv not found in {DATASETS}", file=sys.stderr)
        return 1
    sizes = [int(s) for s in args.sizes.split(",") if s]
    paths = generate(args.work, sizes)
    rows = [row for n in sizes for row in measure(n, paths, args.work, args.n_applicants)]
    lines = [
        "## What an exact bound can prune (`benchmarks/bench_prune.py`)", "",
        f"Machine: {machine_line()}. Command: `python benchmarks/bench_prune.py --sizes {args.sizes} "
        f"--n-applicants {args.n_applicants}`.", "",
        "The sets of `bench_scale.py`; the first denied applicants with more than 85 candidates; quad, K = 3. "
        "Ruled out: candidates whose `membership_bounds` (w = 0 and w = s v, s in 0.5, 1, 1.5) exceeds quad's "
        "answer, so in no optimal set. Radius: how far the distance bound must reach before it rules anything "
        "out, over the farthest candidate's distance (above 1: nothing). Rank: how far down the distance order "
        f"quad's farthest prototype sits. --max-candidates {LIMIT}: applicants (of those with more candidates) "
        "for whom the bound proves that the optimum is among the nearest, and how much lower than quad's answer "
        "over them a set holding a left-out candidate could be at most. Last column (theta = 0.9): applicants "
        "whose quad answer changes when the farthest 10% of their candidates, none chosen, are left out.", "",
        *markdown_table(rows, list(rows[0])),
    ]
    publish("bench_prune", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
