"""The fewest changes a recourse needs under `frpd plan --robust 8`, by brute force, against the plans' own.

Run: python benchmarks/bench_robust_changes.py [--datasets adult,bank] [--n-applicants 200] [--work DIR]
     [--recipe mlp|linear]

bench_robust.py's protocol (today's model on half A of each data set, 8 ``mixed`` refits with ``--seed 0``, label
support ``auto``, ``--margin 0.05``). For every applicant the robust run plans, every recourse of one or two
changes is tried: each allowed level of every mutable categorical feature, each numeric feature on a grid (moves
of 2, 5, 10, 15 and 20 either way, and eight evenly spaced points of its training range; within that range, and
only the allowed way for a monotone feature), and each pair of such single changes. Each is judged as the plan
is (the model, every refit and label support, at the threshold plus the margin). Reported per data set: how many
applicants have a judged recourse of at most two changes, how many of those the plan gives one that short, how
many whose plan's sparsest recourse changes three or more features have one (the search missed it), and the
changed features of the plans' sparsest recourses and of all their recourses against plain frpd's (the same
applicants, ``--margin 0.05``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_robust as B  # noqa: E402

MOVES = np.array([-20, -15, -10, -5, -2, 2, 5, 10, 15, 20], dtype=float)


def _single_changes(x0: pd.DataFrame, frame: pd.DataFrame, features, immutable, increasing) -> list:
    """(feature, value) of every single change tried."""
    out = []
    for f in features:
        if f in immutable:
            continue
        v0 = x0.at[0, f]
        if not pd.api.types.is_numeric_dtype(frame[f]):
            out.extend((f, v) for v in sorted(frame[f].astype(str).unique().tolist()) if v != str(v0))
            continue
        lo, hi = float(frame[f].min()), float(frame[f].max())
        grid = np.unique(np.concatenate([v0 + MOVES, np.linspace(lo, hi, 8).round()]))
        grid = grid[(grid >= lo) & (grid <= hi) & (grid != v0)]
        if f in increasing:
            grid = grid[grid > v0]
        out.extend((f, v) for v in grid.tolist())
    return out


def fewest_changes(name: str, n_applicants: int, work: Path, recipe: str = "mlp") -> dict:
    from frpd_cli.cli._options import SchemaFlags, read_training
    from frpd_cli.cli._robust import RobustModels
    from frpd_cli.model import load_model
    from frpd_cli.planning import PlanSettings, plan_applicants
    from frpd_cli.refits import fit_refits, write_refits
    from frpd_cli.schema import SchemaSpec, infer_schema

    case = B._setup(name, work, n_applicants, recipe)
    # bench_robust.py's (16 refits there; the first 8 are --robust 8's)
    refits = work / (f"{name}_mixed" if recipe == "mlp" else f"{name}_{recipe}_mixed")
    frame = pd.read_csv(case["data"])
    if not (refits / "manifest.json").exists():
        schema = infer_schema(frame, SchemaSpec(target="label", favorable="1"))
        model = load_model(case["model"], favorable=schema.favorable, feature_names=schema.feature_names)
        write_refits(refits, fit_refits(model, frame, schema, n=16, seed=0, resample="mixed", n_jobs=2),
                     data=case["data"], model=case["model"], seed=0, resample="mixed", target="label")
    flags = SchemaFlags(target="label", favorable="1", immutable=case["immutable"], increasing=case["increasing"])
    others = RobustModels(robust=8, refits=refits, resample="mixed", seed=0, support="auto")
    training, judge, _ = read_training(case["data"], case["model"], flags, robust=others)
    applicants = case["applicants"]
    ids = [str(i) for i in range(len(applicants))]
    settings = PlanSettings(method="quad", k=3, margin=0.05).validate()
    robust = [p for chunk in plan_applicants(training, judge, applicants, ids, settings) for p in chunk]
    plain = B._plan(case, margin=0.05)[0]
    strict = dataclasses.replace(judge, threshold=judge.threshold + 0.05)
    features = list(training.schema.feature_names)
    counts = {"planned": 0, "with a judged recourse of <= 2 changes": 0, "of them, given one that short": 0,
              "sparsest >= 3 changes, a shorter one exists": 0}
    pairs = []
    for i, (p, q) in enumerate(zip(robust, plain)):
        if not p.recourses:
            continue
        counts["planned"] += 1
        x0 = applicants.iloc[[i]][features].reset_index(drop=True)
        singles = _single_changes(x0, frame, features, set(case["immutable"]), set(case["increasing"]))
        tried = [((f, v),) for f, v in singles]
        tried += [(a, b) for a, b in itertools.combinations(singles, 2) if a[0] != b[0]]
        rows = pd.DataFrame([x0.iloc[0].to_dict()] * len(tried))
        for j, changes in enumerate(tried):
            for f, v in changes:
                rows.at[j, f] = v
        accepted = strict.favorable_probability(rows) >= strict.threshold
        fewest = min((len(t) for t, ok in zip(tried, accepted) if ok), default=None)
        sparsest = min(r.n_changes for r in p.recourses)
        if fewest is not None:
            counts["with a judged recourse of <= 2 changes"] += 1
            counts["of them, given one that short"] += int(sparsest <= 2)
            counts["sparsest >= 3 changes, a shorter one exists"] += int(sparsest >= 3)
        if q.recourses:
            pairs.append((min(r.n_changes for r in q.recourses), sparsest,
                          np.mean([r.n_changes for r in q.recourses]), np.mean([r.n_changes for r in p.recourses])))
    a = np.array(pairs)
    return {"dataset": name, **counts, "paired applicants": len(a),
            "sparsest: plain": a[:, 0].mean(), "sparsest: robust": a[:, 1].mean(),
            "mean: plain": a[:, 2].mean(), "mean: robust": a[:, 3].mean()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="adult,bank")
    parser.add_argument("--n-applicants", type=int, default=200)
    parser.add_argument("--work", type=Path, default=None, help="keep the models and refits here for later runs")
    parser.add_argument("--recipe", choices=B.RECIPES, default="mlp", help="today's model (bench_robust.py --recipe)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch) if args.work is None else args.work
        work.mkdir(parents=True, exist_ok=True)
        for name in args.datasets.split(","):
            if not (B.DATASETS / B.SPECS[name][0]).exists():
                print(f"{B.SPECS[name][0]} not found; skipping {name}", file=sys.stderr)
                continue
            row = fewest_changes(name, args.n_applicants, work, args.recipe)
            print(" | ".join(f"{k}: {v:.2f}" if isinstance(v, float) else f"{k}: {v}" for k, v in row.items()),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
