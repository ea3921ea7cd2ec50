"""The price of robustness to a model update: validity under an updated model against cost and changes.

Run: python benchmarks/bench_robust.py [--datasets german,bank,adult] [--n-applicants 100] [--jobs 2]
     [--plot docs/robust_frontier.png] [--markdown FILE]

Protocol (per dataset, from ../shared/datasets): the paper's 80/20 split stratified on the label (seed 42). The
training split is cut in two disjoint halves A and B (stratified, seed 7). Today's model is the paper's recipe
(one-hot + min-max, MLP (20, 50, 20), random_state 0) fitted on half A, and half A (with its labels) is the
training file frpd is given. Simulated updates, each the same recipe retrained:

- ``half``:  on the disjoint half B (new labelled data of the same population);
- ``shift``: on a shifted subsample of the whole training split (rows drawn with weights exp(0.75 z), z the
  standardised sum of the numeric features: an older / larger-valued population);
- ``seed``:  on half A again with random_state 1 (the same data, another initialisation).

With ``--recipe linear`` today's model and these updates are a logistic regression on the same preprocessing
(``seed``: half A with ``C = 0.2`` instead of 1, another regularisation).

Besides, next releases of another model family, each fitted on the disjoint half B with the same one-hot and
min-max preprocessing (reported in their own columns, outside the mean): ``boosting`` (histogram gradient
boosting, random_state 0), ``forest`` (200 trees, at least 3 rows per leaf, random_state 0) and ``linear``
(logistic regression).

Applicants are the first N test rows today's model denies. Configurations: plain frpd (N = 0), --margin 0.1 and
0.2, --robust N (bootstrap) for N in {4, 8, 16} and --robust-level q in {1, 0.9}, --robust 8 and --robust 16
--robust-level 0.9 with --resample subsample, mixed and halves, --robust 8 with --resample shifted, with --margin
0.05 (bootstrap and mixed) and with --robust-spread 2, --margin 0.05 alone (plain ``frpd plan``), and
--robust-support auto alone and with 8 mixed refits (both at --margin 0.05; the latter is ``frpd plan --robust
8``, whose label support asks for a training row within the auto radius), and the latter with
--robust-support-level 0.6 and 0.7 and with --robust-support-radius none. Every other configuration runs with
--robust-support none, to measure each mechanism alone.
Each recourse is scored by each updated model (validity = share of recourses it accepts; plans = share of plans
with a recourse in which it accepts at least one). Cost and changed features are means over recourses; CPU is
the planning CPU time (refits loaded from an artifact built once; their fitting CPU is reported apart).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("FRPD_DATASETS", ROOT.parent / "shared" / "datasets"))

#: name -> (file, numeric features, immutable, increasing)
SPECS = {
    "german": ("german.csv", ["Duration", "Credit amount", "Age"], ["Personal status"], ["Age"]),
    # the paper's immutables (previous, campaign, poutcome) leave 2.5% of the denied Bank applicants a plan with
    # this half-data model: too few recourses to measure validity; here only age is constrained (increasing)
    "bank": ("bank.csv", ["age", "balance", "campaign", "previous"], [], ["age"]),
    "adult": ("adult.csv", ["age", "hours_per_week"], ["marital_status", "gender"], ["age"]),
}
UPDATES = ("half", "shift", "seed")
#: Next releases of another model family, fitted on half B (outside the mean).
FAMILIES = ("boosting", "forest", "linear")


#: Today's model family (``--recipe``): the paper's MLP, or a logistic regression (its ``seed`` update: the same
#: data with another regularisation, ``C = 0.2``; a logistic regression has no initialisation to vary).
RECIPES = ("mlp", "linear")


def _recipe(features, numeric, seed, kind="mlp"):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    categorical = [c for c in features if c not in numeric]
    if kind == "linear":
        last = ("lr", LogisticRegression(max_iter=2000, C=1.0 if seed == 0 else 0.2))
    else:
        last = ("mlp", MLPClassifier(hidden_layer_sizes=(20, 50, 20), random_state=seed, max_iter=200))
    return Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), categorical),
                                    ("num", MinMaxScaler(), numeric)])),
        last,
    ])


def _family(kind: str, features, numeric):
    """A next release of another model family (:data:`FAMILIES`), with the recipe's preprocessing."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    categorical = [c for c in features if c not in numeric]
    dense = kind == "boosting"                      # histogram boosting takes dense input only
    model = {"boosting": HistGradientBoostingClassifier(random_state=0),
             "forest": RandomForestClassifier(n_estimators=200, min_samples_leaf=3, random_state=0, n_jobs=1),
             "linear": LogisticRegression(max_iter=2000)}[kind]
    return Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=not dense),
                                     categorical), ("num", MinMaxScaler(), numeric)])),
        ("model", model),
    ])


def _setup(name, tmp: Path, n_applicants: int, recipe: str = "mlp"):
    import joblib
    from sklearn.model_selection import train_test_split
    from threadpoolctl import threadpool_limits

    file, numeric, immutable, increasing = SPECS[name]
    frame = pd.read_csv(DATASETS / file)
    features = [c for c in frame.columns if c != "label"]
    train, test = train_test_split(frame, test_size=0.2, random_state=42, stratify=frame["label"])
    half_a, half_b = train_test_split(train, test_size=0.5, random_state=7, stratify=train["label"])
    z = train[numeric].to_numpy(dtype=float)
    z = ((z - z.mean(0)) / np.where(z.std(0) > 0, z.std(0), 1)).sum(1)
    z = (z - z.mean()) / (z.std() or 1)
    w = np.exp(0.75 * z)
    shifted = train.iloc[np.random.default_rng(3).choice(len(train), size=len(half_a), p=w / w.sum())]
    tag = name if recipe == "mlp" else f"{name}_{recipe}"       # the MLP's files keep their earlier names
    data, model, kept = tmp / f"{name}_train.csv", tmp / f"{tag}.pkl", tmp / f"{tag}_updates.joblib"
    if data.exists() and model.exists() and kept.exists():       # --work: fitted by an earlier run
        today, updates = joblib.load(model), joblib.load(kept)
    else:
        with threadpool_limits(1):
            today = _recipe(features, numeric, 0, recipe).fit(half_a[features], half_a["label"])
            updates = {"half": _recipe(features, numeric, 0, recipe).fit(half_b[features], half_b["label"]),
                       "shift": _recipe(features, numeric, 0, recipe).fit(shifted[features], shifted["label"]),
                       "seed": _recipe(features, numeric, 1, recipe).fit(half_a[features], half_a["label"])}
        half_a.to_csv(data, index=False)
        joblib.dump(today, model)
        joblib.dump(updates, kept)
    families_file = tmp / f"{name}_families.joblib"
    if families_file.exists():
        families = joblib.load(families_file)
    else:
        with threadpool_limits(1):
            families = {k: _family(k, features, numeric).fit(half_b[features], half_b["label"]) for k in FAMILIES}
        joblib.dump(families, families_file)
    denied = test[features][today.predict_proba(test[features])[:, 1] < 0.5].head(n_applicants)
    return {"data": data, "model": model, "updates": {**updates, **families}, "applicants": denied.reset_index(drop=True),
            "features": features, "immutable": immutable, "increasing": increasing}


def _plan(case, *, margin=0.0, robust=None, level=1.0, refits=None, resample="bootstrap", spread=1.0,
          policy="auto", support="none", support_level=None, support_radius=None):
    from frpd_cli.cli._options import SchemaFlags, read_training
    from frpd_cli.cli._robust import RobustModels
    from frpd_cli.planning import PlanSettings, plan_applicants

    flags = SchemaFlags(target="label", favorable="1", immutable=case["immutable"], increasing=case["increasing"])
    others = RobustModels(robust=robust, level=level, refits=refits, resample=resample, spread=spread,
                          support=support, support_level=support_level,
                          support_radius=support_radius) if robust or support else None
    t0 = time.process_time()
    training, model, _ = read_training(case["data"], case["model"], flags, robust=others)
    t1 = time.process_time()
    settings = PlanSettings(method="quad", k=3, margin=margin, immutable_policy=policy).validate()
    ids = [str(i) for i in range(len(case["applicants"]))]
    plans = [p for chunk in plan_applicants(training, model, case["applicants"], ids, settings) for p in chunk]
    t2 = time.process_time()
    return plans, t1 - t0, t2 - t1


def _score(case, plans) -> dict:
    rows = [r.features for p in plans for r in p.recourses]
    owner = np.array([i for i, p in enumerate(plans) for _ in p.recourses])
    needing = [p for p in plans if p.status != "already-favorable"]
    out = {"planned": sum(bool(p.recourses) for p in needing) / max(len(needing), 1),
           "recourses": len(rows),
           "cost": float(np.mean([r.cost for p in plans for r in p.recourses])) if rows else float("nan"),
           "changed": float(np.mean([r.n_changes for p in plans for r in p.recourses])) if rows else float("nan")}
    frame = pd.DataFrame(rows, columns=case["features"])
    for name, m in case["updates"].items():
        ok = m.predict_proba(frame)[:, 1] >= 0.5 if rows else np.zeros(0, dtype=bool)
        out[f"valid {name}"] = float(ok.mean()) if rows else float("nan")
        with_plan = np.unique(owner)
        out[f"plans {name}"] = float(np.mean([ok[owner == i].any() for i in with_plan])) if rows else float("nan")
    out["valid mean"] = float(np.mean([out[f"valid {u}"] for u in UPDATES]))
    return out


def run(names, n_applicants: int, jobs: int, *, work: Path | None = None, only=None, repeats: int = 1,
        shifted: bool = True, recipe: str = "mlp") -> pd.DataFrame:
    from frpd_cli.model import load_model
    from frpd_cli.refits import fit_refits, write_refits
    from frpd_cli.schema import SchemaSpec, infer_schema

    results = []
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch) if work is None else work
        tmp.mkdir(parents=True, exist_ok=True)
        for name in names:
            if not (DATASETS / SPECS[name][0]).exists():
                print(f"{SPECS[name][0]} not found; skipping {name}", file=sys.stderr)
                continue
            case = _setup(name, tmp, n_applicants, recipe)
            frame = pd.read_csv(case["data"])
            schema = infer_schema(frame, SchemaSpec(target="label", favorable="1"))
            model = load_model(case["model"], favorable=schema.favorable, feature_names=schema.feature_names)
            refit_dirs, fit_cpu = {}, {}
            kinds = ("bootstrap", "subsample", "mixed", "halves") + (("shifted",) if shifted else ())
            for how in kinds:
                where = tmp / (f"{name}_{how}" if recipe == "mlp" else f"{name}_{recipe}_{how}")
                if (where / "manifest.json").exists():       # --work: built by an earlier run
                    refit_dirs[how], fit_cpu[how] = where, (float("nan"), float("nan"))
                    continue
                t0 = time.process_time()
                start = time.perf_counter()
                fitted = fit_refits(model, frame, schema, n=8 if how == "shifted" else 16, seed=0, resample=how,
                                    n_jobs=jobs)
                fit_cpu[how] = (time.process_time() - t0, time.perf_counter() - start)
                refit_dirs[how] = write_refits(where, fitted, data=case["data"], model=case["model"],
                                               seed=0, resample=how, target="label")
            configs = [("plain", {}), ("margin 0.1", {"margin": 0.1}), ("margin 0.2", {"margin": 0.2})]
            for n in (4, 8, 16):
                for q in (1.0, 0.9):
                    configs.append((f"robust {n} q {q:g}",
                                    {"robust": n, "level": q, "refits": refit_dirs["bootstrap"]}))
            for how in ("subsample", "mixed", "halves"):
                for n, q in ((8, 1.0), (16, 0.9)):
                    configs.append((f"robust {n} {how}" + (f" q {q:g}" if q < 1 else ""),
                                    {"robust": n, "level": q, "refits": refit_dirs[how], "resample": how}))
            if shifted:
                configs.append(("robust 8 shifted", {"robust": 8, "refits": refit_dirs["shifted"],
                                                     "resample": "shifted"}))
            configs.append(("robust 8 margin 0.05", {"robust": 8, "refits": refit_dirs["bootstrap"], "margin": 0.05}))
            configs.append(("robust 8 mixed margin 0.05", {"robust": 8, "refits": refit_dirs["mixed"], "resample": "mixed",
                                                          "margin": 0.05}))
            configs.append(("margin 0.05", {"margin": 0.05}))
            configs.append(("robust 8 spread 2", {"robust": 8, "refits": refit_dirs["bootstrap"], "spread": 2.0}))
            configs.append(("support margin 0.05", {"support": "auto", "margin": 0.05}))
            configs.append(("robust 8 mixed support margin 0.05", {"robust": 8, "refits": refit_dirs["mixed"],
                                                                  "resample": "mixed", "support": "auto",
                                                                  "margin": 0.05}))
            for share in (0.6, 0.7):                      # --robust-support-level
                configs.append((f"robust 8 mixed support {share:g} margin 0.05",
                                {"robust": 8, "refits": refit_dirs["mixed"], "resample": "mixed", "support": "auto",
                                 "support_level": share, "margin": 0.05}))
            configs.append(("robust 8 mixed support no radius margin 0.05",    # --robust-support-radius none
                            {"robust": 8, "refits": refit_dirs["mixed"], "resample": "mixed", "support": "auto",
                             "support_radius": "none", "margin": 0.05}))
            for label, kwargs in configs:
                if only and label not in only:
                    continue
                runs = [_plan(case, **kwargs) for _ in range(repeats)]       # least CPU of the repeats
                plans = runs[0][0]
                load_cpu, plan_cpu = min(r[1] for r in runs), min(r[2] for r in runs)
                row = {"dataset": name, "config": label, "applicants": len(plans), **_score(case, plans),
                       "load cpu s": load_cpu, "plan cpu s": plan_cpu}
                results.append(row)
                print(f"{name:7s} {label:18s} " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                                                            for k, v in row.items() if k not in ("dataset", "config")),
                      file=sys.stderr, flush=True)
            for how, (cpu, wall) in fit_cpu.items():
                if np.isnan(cpu):                # read from --work
                    continue
                print(f"{name}: fitting the {how} refits took {cpu:.1f} s CPU, {wall:.1f} s wall (--jobs {jobs})",
                      file=sys.stderr, flush=True)
    return pd.DataFrame(results)


#: ``frpd plan --robust 8`` with every default (8 mixed refits, label support within the auto radius, margin 0.05)
DEFAULT_CONFIG = "robust 8 mixed support margin 0.05"
#: The configurations the plot names (circles: refits; squares: margins; diamond: the default)
LABELS = {"plain": "plain", "margin 0.05": "frpd plan", "margin 0.2": "margin 0.2", "robust 8 q 1": "R8 bootstrap",
          "robust 16 q 1": "R16 bootstrap", "robust 8 mixed": "R8 mixed", "support margin 0.05": "support alone",
          DEFAULT_CONFIG: "--robust 8", "robust 8 mixed support 0.7 margin 0.05": "--robust 8, support 0.7"}


def frontier(table: pd.DataFrame, path: Path) -> None:
    """Validity under the updates (mean of the three) against cost relative to plain, one panel per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(table["dataset"]))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        t = table[table["dataset"] == name]
        base = float(t.loc[t["config"] == "plain", "cost"].iloc[0])
        for _, r in t.iterrows():
            if not np.isfinite(r["cost"]):
                continue                                  # nobody planned: no point to draw
            kind = "o" if r["config"].startswith("robust") else ("s" if r["config"].startswith("margin") else "*")
            default = r["config"] == DEFAULT_CONFIG
            ax.plot(r["cost"] / base, r["valid mean"], "D" if default else kind,
                    color="C3" if default else "C0" if kind == "o" else "C1" if kind == "s" else "C2",
                    markersize=9 if default else 6)
            label = LABELS.get(r["config"])
            if label:                                     # the others unlabelled: they crowd the same corner
                ax.annotate(label, (r["cost"] / base, r["valid mean"]), fontsize=7, xytext=(4, 3),
                            textcoords="offset points", fontweight="bold" if default else "normal")
        ax.axhline(0.95, color="grey", lw=0.8, ls="--")
        ax.axvline(2.0, color="grey", lw=0.8, ls=":")
        ax.set_title(name)
        ax.set_xlabel("mean cost / plain frpd's")
        ax.set_ylabel("validity under the updated models")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="german,bank,adult")
    parser.add_argument("--n-applicants", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2, help="processes fitting refits")
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--csv", type=Path, default=None)
    parser.add_argument("--from-csv", type=Path, default=None, help="re-draw the table and plot from a saved run")
    parser.add_argument("--work", type=Path, default=None, help="keep the refits here and reuse them in later runs")
    parser.add_argument("--configs", default=None, help="comma-separated configurations to run (default: all)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per configuration; the least CPU is kept")
    parser.add_argument("--no-shifted", action="store_true", help="skip the refits on shifted resamples")
    parser.add_argument("--recipe", choices=RECIPES, default="mlp",
                        help="today's model and its same-recipe updates: the paper's MLP or a logistic regression")
    args = parser.parse_args(argv)
    only = None if args.configs is None else set(args.configs.split(","))
    table = pd.read_csv(args.from_csv) if args.from_csv else run(args.datasets.split(","), args.n_applicants,
                                                                 args.jobs, work=args.work, only=only,
                                                                 repeats=args.repeats, shifted=not args.no_shifted,
                                                                 recipe=args.recipe)
    if args.csv:
        table.to_csv(args.csv, index=False)
    if args.plot is not None and len(table):
        frontier(table, args.plot)
    cols = ["dataset", "config", "planned", "cost", "changed", *(f"valid {u}" for u in UPDATES), "valid mean",
            "plans half", *(f"valid {u}" for u in FAMILIES if f"valid {u}" in table), "plan cpu s"]
    print(markdown(table[cols]) if len(table) else "no dataset found")
    return 0


def markdown(table: pd.DataFrame) -> str:
    """A Markdown table, floats with three decimals."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


if __name__ == "__main__":
    sys.exit(main())
