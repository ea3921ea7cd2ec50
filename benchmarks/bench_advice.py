"""Plans as the applicant reads them: options another option beats, and ordinal levels higher than needed.

Run: python benchmarks/bench_advice.py [--datasets sample,german,sba,bank,adult,compas] [--n-applicants 100]
     [--markdown FILE]

A plan's recourse is *dominated* when another recourse of the same plan makes only changes it makes too, each no
larger (a numeric feature moved the same way and no farther, a category changed to the same level, an ordinal
moved the same way and no more levels): whatever it asks, the other asks less, so it is no option beside it. An
ordinal change is *higher than needed* when a level between the applicant's and the recourse's, every other
value kept, is accepted at the threshold plus the margin. An ordinal change is *far* when it moves more levels
than a quarter of the steps between the lowest and the highest level, rounded up (``FAR_SHARE``; 2 of Adult's
7 steps of ``education``, 1 of the sample's 3 of ``savings``): across most of the scale for one change. All
three are counted here by brute force over the plans' raw values and the model, independently of frpd's own
rules, so the script measures any version of frpd (run it with another checkout first on ``PYTHONPATH``, and
``FRPD_DATASETS`` pointing to the shared datasets, for the numbers of before).

Protocol: the paper's 80/20 split stratified on the label (seed 42) and its MLP (``paper_tables._pipeline``);
applicants are the first N test rows the model denies; ``frpd plan``'s defaults (effort scale, ``--margin
0.05``, ``--max-move 0.25``, sparse and 1-minimal recourses, quad, K = 3). Constraints: the datasets README's
immutable features (Bank without them, as in ``bench_robust.py``: they leave almost nobody a plan), ages
increasing, and on Adult ``education`` declared an ordinal that may only increase (School < HS-grad <
Some-college < Assoc < Bachelors < Masters < Prof-school < Doctorate). ``sample`` is the committed sample data
with its schema file (``savings`` an increasing ordinal) and model. CPU: the planning's process time per
applicant (one thread; the model fitted before), to compare versions in alternating runs of one session.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("FRPD_DATASETS", ROOT.parent / "shared" / "datasets"))

EDUCATION = ["School", "HS-grad", "Some-college", "Assoc", "Bachelors", "Masters", "Prof-school", "Doctorate"]
#: name -> (file, target, categorical, immutable, increasing, ordinal)
SPECS = {
    "german": ("german.csv", "label", ["Personal status"], ["Personal status"], ["Age"], {}),
    "sba": ("sba.csv", "label", ["UrbanRural"], ["Recession", "UrbanRural"], [], {}),
    "bank": ("bank.csv", "label", ["education", "housing", "loan", "poutcome"], [], ["age"], {}),
    "adult": ("adult.csv", "label", ["workclass", "education", "marital_status", "occupation", "race", "gender"],
              ["marital_status", "gender", "race"], ["age", "education"], {"education": EDUCATION}),
    "compas": ("compas.csv", "score", ["c_charge_degree", "race", "sex"], ["age", "race", "sex"], [], {}),
}
MARGIN = 0.05


def _case(name: str, n_applicants: int):
    """(training set, model, applicants, ordinal levels) of a dataset."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import train_test_split
    from threadpoolctl import threadpool_limits

    from frpd_cli.dataset import build_training_set
    from frpd_cli.model import load_model
    from frpd_cli.schema import DEFAULT_MAX_MOVE, SchemaSpec, infer_schema, load_schema_file

    if name == "sample":
        import joblib

        sample = ROOT / "sample_data"
        frame = pd.read_csv(sample / "credit.csv")
        spec = load_schema_file(sample / "schema.toml")
        from dataclasses import replace

        spec = replace(spec, max_move=spec.max_move if spec.max_move is not None else DEFAULT_MAX_MOVE)
        schema = infer_schema(frame, spec)
        estimator = joblib.load(sample / "model.pkl")
        applicants = pd.read_csv(sample / "applicants.csv")[list(schema.feature_names)]
    else:
        sys.path.insert(0, str(ROOT))
        from benchmarks.paper_tables import _pipeline

        file, target, categorical, immutable, increasing, ordinal = SPECS[name]
        frame = pd.read_csv(DATASETS / file)
        features = [c for c in frame.columns if c != target]
        train, test = train_test_split(frame, test_size=0.2, random_state=42, stratify=frame[target])
        frame = train.reset_index(drop=True)
        numeric = [c for c in features if c not in categorical]
        estimator = _pipeline(numeric, categorical, 42, len(frame))
        with threadpool_limits(1), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            estimator.fit(frame[features], frame[target])
        spec = SchemaSpec(target=target, favorable=1, categorical=tuple(c for c in categorical if c not in ordinal),
                          ordinal=ordinal, immutable=tuple(immutable), increasing=tuple(increasing),
                          max_move=DEFAULT_MAX_MOVE)
        schema = infer_schema(frame, spec)
        denied = estimator.predict_proba(test[features])[:, 1] < 0.5
        applicants = test[features][denied].reset_index(drop=True)
    import tempfile

    import joblib

    with tempfile.TemporaryDirectory() as tmp:
        joblib.dump(estimator, Path(tmp) / "model.pkl")
        model = load_model(Path(tmp) / "model.pkl", favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model, scale="effort")
    orders = {f.name: list(f.levels) for f in schema.features if f.kind == "ordinal" and f.mutability != "immutable"}
    return training, model, applicants.head(n_applicants), orders


#: An ordinal change moving more than this share of its scale's steps (rounded up) is counted far.
FAR_SHARE = 0.25


def _move(name, old, new, orders):
    if name in orders:
        return "ordinal", orders[name].index(new) - orders[name].index(old)
    if isinstance(old, (int, float, np.number)) and isinstance(new, (int, float, np.number)):
        return "numeric", float(new) - float(old)
    return "category", new


def _dominates(a: dict, b: dict, orders) -> bool:
    """Recourse ``a`` (its changes: feature -> (old, new)) dominates ``b``."""
    if a == b:
        return False
    for name, (old, new) in a.items():
        if name not in b:
            return False
        kind, da = _move(name, old, new, orders)
        _, db = _move(name, *b[name], orders)
        if kind == "category":
            if da != db:
                return False
        elif da * db <= 0 or abs(da) > abs(db):
            return False
    return True


def measure(name: str, n_applicants: int) -> dict:
    from threadpoolctl import threadpool_limits

    from frpd_cli.planning import PlanSettings, plan_applicants

    training, model, applicants, orders = _case(name, n_applicants)
    settings = PlanSettings(method="quad", k=3, margin=MARGIN).validate()
    ids = [str(i) for i in range(len(applicants))]
    with threadpool_limits(1):
        start = time.process_time()
        plans = [p for chunk in plan_applicants(training, model, applicants, ids, settings) for p in chunk]
        cpu = time.process_time() - start
    needing = [p for p in plans if p.status != "already-favorable"]
    with_plan = [p for p in needing if p.recourses]
    changes = [[{f: tuple(v) for f, v in r.changes.items()} for r in p.recourses] for p in with_plan]
    n_dominated = sum(any(_dominates(a, b, orders) for a in rs) for rs in changes for b in rs)
    # ordinal changes a level between would do (every other value kept), by re-predicting each level between
    probe, owner = [], []
    n_ordinal = steps = far = 0
    for p in with_plan:
        for r in p.recourses:
            for f in orders:
                if f not in r.changes:
                    continue
                old, new = r.changes[f]
                a, b = orders[f].index(old), orders[f].index(new)
                n_ordinal += 1
                steps += abs(b - a)
                far += abs(b - a) > math.ceil(FAR_SHARE * (len(orders[f]) - 1) - 1e-9)
                step = 1 if b > a else -1
                for k in range(a + step, b, step):
                    probe.append({**r.features, f: orders[f][k]})
                    owner.append((p.applicant, r.rank, f))
    higher = set()
    if probe:
        prob = model.favorable_probability(pd.DataFrame(probe)[list(training.schema.feature_names)])
        higher = {owner[i] for i in np.flatnonzero(prob >= model.threshold + MARGIN)}
    recourses = [r for p in with_plan for r in p.recourses]
    return {"dataset": name, "applicants": len(needing), "planned": len(with_plan), "recourses": len(recourses),
            "full plans": sum(len(p.recourses) == 3 for p in needing) / max(len(needing), 1),
            "dominated": n_dominated, "dominated share": n_dominated / max(len(recourses), 1),
            "ordinal changes": n_ordinal, "higher than needed": len(higher), "far ordinal changes": far,
            "levels per ordinal change": steps / n_ordinal if n_ordinal else float("nan"),
            "changed features": float(np.mean([r.n_changes for r in recourses])) if recourses else float("nan"),
            "cost": float(np.mean([r.cost for r in recourses])) if recourses else float("nan"),
            "CPU ms / applicant": 1000 * cpu / max(len(applicants), 1)}


COLUMNS = ["dataset", "applicants", "planned", "recourses", "full plans", "dominated", "dominated share",
           "ordinal changes", "higher than needed", "far ordinal changes", "levels per ordinal change", "changed features", "cost",
           "CPU ms / applicant"]


def markdown(rows: list[dict]) -> str:
    def cell(v):
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(r[c]) for c in COLUMNS) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="sample,german,sba,bank,adult,compas")
    parser.add_argument("--n-applicants", type=int, default=100)
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    import frpd_cli

    print(f"frpd_cli from {Path(frpd_cli.__file__).parent}", file=sys.stderr)
    rows = []
    for name in args.datasets.split(","):
        if name != "sample" and not (DATASETS / SPECS[name][0]).exists():
            print(f"{SPECS[name][0]} not found in {DATASETS}; skipping {name}", file=sys.stderr)
            continue
        rows.append(measure(name, args.n_applicants))
        print(f"{name}: done", file=sys.stderr)
    table = markdown(rows)
    sys.stdout.write(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
