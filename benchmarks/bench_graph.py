"""Benchmark of the actionability graph: build time, peak memory, attach + Dijkstra and graph plan per applicant.

Usage: ``python benchmarks/bench_graph.py [--quick]``. Writes the ``bench_graph``
section of docs/benchmarks.md. Adult is read from ``../shared/datasets/adult.csv``
when present (never copied); its row is skipped otherwise.

Peak memory is the process's peak resident set (``ru_maxrss``) measured in a
fresh subprocess per case, so cases do not inherit each other's peak.

The graph plan time is what ``frpd plan --graph`` spends per applicant besides
the model: attach + Dijkstra (:func:`frpd_cli.interpolation.reach_from`), the
candidate filter (favourable, actionable, reachable), QUAD selection of K=3
prototypes and the shortest paths to them. It is model-free: "favourable" is
the label (Adult) or a fixed rule (synthetic rows).
"""

from __future__ import annotations

import argparse
import json
import os
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
from frpd_cli.graph import attach_source, build_graph, extract_path, graph_statistics, shortest_paths  # noqa: E402
from frpd_cli.interpolation import reach_from  # noqa: E402
from frpd_cli.selection import compute_geometry, eigen_decompose, select_prototypes  # noqa: E402

ADULT = ROOT.parent / "shared" / "datasets" / "adult.csv"
EDUCATION_ORDER = ["School", "HS-grad", "Some-college", "Assoc", "Bachelors", "Masters", "Prof-school", "Doctorate"]


def adult_data():
    """Adult min-max/one-hot encoded here with pandas; age and education only go up; label 1 is favourable."""
    import pandas as pd

    df = pd.read_csv(ADULT)
    favorable = df["label"].to_numpy() == 1
    df = df.drop(columns="label")
    num = df[["age", "hours_per_week"]].astype(float)
    num = (num - num.min()) / (num.max() - num.min())
    cats = ["workclass", "education", "marital_status", "occupation", "race", "gender"]
    onehot = pd.get_dummies(df[cats].astype(str), dtype=float)
    X = np.hstack([num.to_numpy(), onehot.to_numpy()])
    immutable = np.column_stack([pd.factorize(df[c], sort=True)[0] for c in ("marital_status", "gender")]).astype(float)
    edu_rank = df["education"].map({v: i for i, v in enumerate(EDUCATION_ORDER)}).to_numpy(float)
    monotone = np.column_stack([df["age"].to_numpy(float), edu_rank])
    codes = ConstraintCodes(immutable, monotone, np.array([1, 1], dtype=np.int8))
    return X, codes, favorable


def synthetic_data(n, p=4, seed=0):
    """Low intrinsic dimension: p uniform features, 2 immutable groups, first feature increasing-only.

    Favourable: the sum of the last two features above 1.
    """
    rng = np.random.default_rng(seed)
    X = rng.random((n, p))
    immutable = rng.integers(0, 2, size=(n, 1)).astype(float)
    monotone = np.round(X[:, :1] * 50)  # an integer "age"-like code tied to feature 0
    return X, ConstraintCodes(immutable, monotone, np.array([1], dtype=np.int8)), X[:, -2:].sum(axis=1) > 1.0


def plan_one(graph, X, codes, favorable, x0, codes0, k=3):
    """Model-free graph plan for one applicant: attach + Dijkstra, candidates, QUAD selection, paths.

    Returns the number of recourses (0 when fewer than k candidates are reachable).
    """
    reach = reach_from(graph, X, codes, x0, codes0)
    cand = np.flatnonzero(favorable & np.isfinite(reach.dist) & np.any(X != x0, axis=1))
    if cand.size < k:
        return 0
    geometry = compute_geometry(X[cand], x0)
    sel = select_prototypes(geometry, k=k, method="quad", theta=0.9, eigen=eigen_decompose(geometry))
    paths = [extract_path(reach.predecessor, int(cand[i])) for i in sel.indices]
    return len(paths)


def run_case(name, n_applicants, weight):
    if name == "adult":
        X, codes, favorable = adult_data()
    else:
        X, codes, favorable = synthetic_data(int(name))
    t0 = time.perf_counter()
    g = build_graph(X, codes, n_neighbors=10, weight=weight)
    build_s = time.perf_counter() - t0
    stats = graph_statistics(g)
    rng = np.random.default_rng(1)
    rows = rng.choice(np.flatnonzero(~favorable), size=n_applicants, replace=False)  # denied applicants
    times, plan_times = [], []
    reached, planned = [], []
    for r in rows:
        x0 = np.clip(X[r] + rng.normal(0, 0.01, X.shape[1]), 0, 1)
        t1 = time.perf_counter()
        nbr, w = attach_source(g, X, codes, x0, codes.row(int(r)))
        dist, _ = shortest_paths(g, nbr, w)
        times.append(time.perf_counter() - t1)
        reached.append(np.isfinite(dist).mean())
        t2 = time.perf_counter()
        planned.append(plan_one(g, X, codes, favorable, x0, codes.row(int(r))) > 0)
        plan_times.append(time.perf_counter() - t2)
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
        "plan_ms_median": 1000 * float(np.median(plan_times)),
        "plan_ms_p95": 1000 * float(np.percentile(plan_times, 95)),
        "planned_fraction": float(np.mean(planned)),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _endpoint_rows(name, training, model, applicants, graph, k=3):
    """Graph plans with both end points: recourses kept, cost, moves and diversity (means over applicants)."""
    from frpd_cli.metrics import anti_diversity, dpp_diversity
    from frpd_cli.planning import PlanSettings, plan_applicants

    names = list(training.schema.feature_names)
    ids = [str(i) for i in range(len(applicants))]
    X0 = training.encoder.encode(applicants.loc[:, names].reset_index(drop=True))
    rows = []
    for method in ("quad", "dpp-greedy"):
        for endpoint in ("prototype", "first-favorable"):
            settings = PlanSettings(method=method, k=k, scheme="graph", endpoint=endpoint)
            plans = [p for c in plan_applicants(training, model, applicants, ids, settings, graph=graph) for p in c]
            ok = [(i, p) for i, p in enumerate(plans) if p.status == "ok"]
            kept = [len(p.recourses) for _, p in ok]
            costs = [np.mean([r.cost for r in p.recourses]) for _, p in ok]
            moves = [np.mean([len(r.path) for r in p.recourses]) for _, p in ok]
            anti, dpp = [], []
            for i, p in ok:
                R = training.X[[r.path[-1] for r in p.recourses]]
                anti.append(anti_diversity(X0[i], R) if len(R) == k else np.nan)
                dpp.append(dpp_diversity(R) if len(R) == k else np.nan)
            rows.append({
                "data": name, "method": method, "endpoint": endpoint, "planned": len(ok), "applicants": len(plans),
                "full": float(np.mean([n == k for n in kept])), "kept": float(np.mean(kept)),
                "cost": float(np.mean(costs)), "moves": float(np.mean(moves)),
                "anti": float(np.nanmean(anti)), "dpp": float(np.nanmean(dpp)),
            })
    return rows


def endpoint_comparison():
    """``--endpoint prototype`` vs ``first-favorable`` on the sample data and German (if present)."""
    import pandas as pd

    from frpd_cli.dataset import build_training_set
    from frpd_cli.model import load_model
    from frpd_cli.schema import SchemaSpec, infer_schema, load_schema_file

    out = []
    sample = ROOT / "sample_data"
    if (sample / "model.pkl").exists():
        frame = pd.read_csv(sample / "credit.csv")
        schema = infer_schema(frame, load_schema_file(sample / "schema.toml"))
        model = load_model(sample / "model.pkl", favorable=schema.favorable, feature_names=schema.feature_names)
        training = build_training_set(frame, schema, model)
        graph = build_graph(training.X, training.codes, n_neighbors=10)
        out += _endpoint_rows("sample credit", training, model, pd.read_csv(sample / "applicants.csv"), graph)
    german = ROOT.parent / "shared" / "datasets" / "german.csv"
    if german.exists():
        import tempfile

        import joblib
        from sklearn.compose import ColumnTransformer
        from sklearn.model_selection import train_test_split
        from sklearn.neural_network import MLPClassifier
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

        frame = pd.read_csv(german)
        train, test = train_test_split(frame, test_size=0.2, random_state=42, stratify=frame["label"])
        features = [c for c in frame.columns if c != "label"]
        pipe = Pipeline([
            ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["Personal status"]),
                                        ("num", MinMaxScaler(), ["Duration", "Credit amount", "Age"])])),
            ("mlp", MLPClassifier(hidden_layer_sizes=(20, 50, 20), random_state=0, max_iter=500)),
        ]).fit(train[features], train["label"])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "german.pkl"
            joblib.dump(pipe, path)
            schema = infer_schema(train.reset_index(drop=True),
                                  SchemaSpec(immutable=("Personal status",), increasing=("Age",)))
            model = load_model(path, favorable=schema.favorable, feature_names=schema.feature_names)
            training = build_training_set(train.reset_index(drop=True), schema, model)
            graph = build_graph(training.X, training.codes, n_neighbors=10)
            denied = test[features][pipe.predict_proba(test[features])[:, 1] < 0.5].reset_index(drop=True)
            out += _endpoint_rows("german", training, model, denied, graph)
    lines = [
        "## Graph recourse end point (`benchmarks/bench_graph.py --endpoints`)",
        "",
        "`frpd plan --graph` with `build_graph(n_neighbors=10)`, K=3, theta=0.9, for the sample applicants and "
        "German's denied test rows (MLP as in the tests; Personal status immutable, Age increasing-only). Means "
        "over planned applicants: 'full' is the share of plans with K distinct recourses, 'kept' the recourses "
        "per plan, 'cost' the mean path cost, 'moves' the mean path length, 'anti-div' the paper's "
        "Anti-Diversity of the end points (lower is more diverse) and 'DPP' the DPP diversity (higher is more "
        "diverse), both over the plans with K recourses.",
        "",
        "| data | method | endpoint | planned | full | kept | cost | moves | anti-div | DPP |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in out:
        lines.append(f"| {r['data']} | {r['method']} | {r['endpoint']} | {r['planned']}/{r['applicants']} | "
                     f"{100 * r['full']:.0f}% | {r['kept']:.2f} | {r['cost']:.3f} | {r['moves']:.2f} | "
                     f"{r['anti']:.3f} | {r['dpp']:.3f} |")
    write_section("bench_graph_endpoint", "\n".join(lines))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="26k and 100k rows only, fewer applicants")
    parser.add_argument("--endpoints", action="store_true",
                        help="only compare --endpoint prototype and first-favorable (sample data, German)")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case in this process
    parser.add_argument("--weight", default="euclidean", help=argparse.SUPPRESS)
    parser.add_argument("--applicants", type=int, default=50, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.case, args.applicants, args.weight)))
        return
    if args.endpoints:
        endpoint_comparison()
        return

    n_app = 20 if args.quick else 50
    load = os.getloadavg()[0]
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
        f"Machine: {machine_line()}; 1-minute load average {load:.2f} when the run started (timings grow with "
        "other work on the machine). `build_graph(n_neighbors=10)`, `algorithm='auto'`; "
        f"per-applicant time is `attach_source` + `shortest_paths` (Dijkstra over the whole graph) "
        f"for {n_app} denied applicants (unfavourable training rows plus noise); 'graph plan' adds the candidate "
        "filter, QUAD selection of K=3 prototypes among the reachable favourable rows and the paths to them "
        "(model-free: favourable = label 1 on Adult, a fixed rule on synthetic rows), and 'planned' is the share "
        "of applicants that reach at least 3 favourable rows. Peak RSS of a fresh process per case. "
        "Synthetic rows: p=4 uniform features, 2 immutable groups, one increasing-only code. "
        "Adult: the 32,561 rows of `adult.csv`, 29 encoded columns, immutable marital status and gender, "
        "age and education increasing-only. 'reached' is the mean share of nodes with a finite distance "
        "from the applicant; 'sinks' are nodes without out-edges.",
        "",
        "| data | rows | width | weight | build (s) | edges | weak comps | sinks | attach+Dijkstra median (ms) | p95 (ms) "
        "| graph plan median (ms) | p95 (ms) | reached | planned | peak RSS (MB) |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['case']} | {r['rows']:,} | {r['width']} | {r['weight']} | {r['build_s']:.2f} | {r['edges']:,} | "
            f"{r['components']} | {r['sinks']} | {r['attach_dijkstra_ms_median']:.1f} | "
            f"{r['attach_dijkstra_ms_p95']:.1f} | {r['plan_ms_median']:.1f} | {r['plan_ms_p95']:.1f} | "
            f"{100 * r['reached_fraction']:.1f}% | {100 * r['planned_fraction']:.0f}% | {r['peak_rss_mb']:.0f} |"
        )
    write_section("bench_graph", "\n".join(lines))
    endpoint_comparison()


if __name__ == "__main__":
    main()
