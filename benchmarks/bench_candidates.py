"""The candidate stage on Adult: CPU per applicant of finding the candidates, and of a whole `frpd plan`.

Run: python benchmarks/bench_candidates.py [--n-applicants 300] [--repeats 3]
                                           [--data TRAIN.csv --model MODEL.pkl --applicants DENIED.csv]
     python benchmarks/bench_candidates.py --recourse [--datasets german,sba,adult] [--n-applicants 100]

Adult from ../shared/datasets (override with FRPD_DATASETS) as in bench_plan.py: 80/20 split (seed 42), MLP
(20, 50, 20), applicants = test rows the model predicts unfavourable (the first N, default 300); or the given
training file, model and applicants. Immutable marital_status and gender, age increasing-only.

In the library, for each case: CPU seconds (``time.process_time``, best of the repeats) of
``CandidateStage.find`` over the applicants, and of the bare filter (``candidate_mask``) on the same pool for
comparison (the stage adds the pool, the policy, the counts and the reason). Through the command line: CPU time
(user + system) of a fresh ``frpd plan`` process on the same applicants (best of the repeats). Results go to
docs/benchmarks.md (section bench_candidates).

``--recourse``: the CPU price of pricing every candidate by its recourse (``--proximity recourse``,
:mod:`frpd_cli.recourse_cost`) on the datasets of the paper tables (their protocol: ``paper_tables.prepare``),
with the paper's immutable features (what ``frpd plan`` does) and without constraints (the paper's Table 1):
``with_recourse_costs`` over the applicants as ``plan_chunk`` calls it, the model rows it scores, and whole
library plans (``plan_applicants``, quad, K = 3, theta = 0.9) with each proximity. Section bench_recourse.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402
from benchmarks.bench_plan import DATASETS, _frpd_plan, _load_line, _train_adult  # noqa: E402
from frpd_cli.candidates import CandidateStage, candidate_mask  # noqa: E402
from frpd_cli.choice import PlanSettings  # noqa: E402
from frpd_cli.dataset import build_training_set  # noqa: E402
from frpd_cli.model import load_model  # noqa: E402
from frpd_cli.schema import SchemaSpec, infer_schema  # noqa: E402

SPEC = dict(target="label", immutable=("marital_status", "gender"), increasing=("age",))
#: (case, schema additions, settings)
CASES = [
    ("filter (= auto on Adult)", {}, dict(immutable_policy="auto")),
    ("filter, --candidates labeled", {}, dict(immutable_policy="filter", candidates="labeled")),
    ("filter, --margin 0.1", {}, dict(immutable_policy="filter", margin=0.1)),
    ("filter, --range age=:60 --range hours_per_week=20:60", {"ranges": {"age": ":60", "hours_per_week": "20:60"}},
     dict(immutable_policy="filter")),
    ("project", {}, dict(immutable_policy="project")),
]


def _best_cpu(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _measure_library(train_path: Path, model_path: Path, applicants: pd.DataFrame, repeats: int) -> list[dict]:
    from threadpoolctl import threadpool_limits

    frame = pd.read_csv(train_path)
    rows = []
    for name, extra, fields in CASES:
        schema = infer_schema(frame, SchemaSpec(**SPEC, **extra))
        model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names)
        training = build_training_set(frame, schema, model)
        settings = PlanSettings(k=3, **fields)
        raw = applicants.loc[:, list(schema.feature_names)].reset_index(drop=True)
        X0 = training.encoder.encode(raw)
        codes0 = training.encoder.constraint_codes(raw)
        raw_rows = raw.to_dict("records")
        stage = CandidateStage(training, settings, model=model)
        found = []

        def run_stage(found=found, stage=stage, X0=X0, codes0=codes0, raw_rows=raw_rows):
            found[:] = [stage.find(X0[i], codes0.row(i), raw_rows[i]) for i in range(len(raw_rows))]

        def run_filter(stage=stage, training=training, X0=X0, codes0=codes0):
            for i in range(len(X0)):
                np.flatnonzero(candidate_mask(training, X0[i], codes0.row(i), stage.pool))

        with threadpool_limits(1):
            stage_s = _best_cpu(run_stage, repeats)
            filter_s = _best_cpu(run_filter, repeats)
        n = len(raw_rows)
        rows.append({"case": name, "applicants": n, "pool rows": int(stage.pool.sum()),
                     "stage ms/applicant": f"{1000 * stage_s / n:.3f}",
                     "bare filter ms/applicant": f"{1000 * filter_s / n:.3f}",
                     "mean candidates": f"{np.mean([len(f) for f in found]):.0f}",
                     "fewer than K": sum(f.reason is not None for f in found)})
    return rows


def _measure_recourse(names: list[str], n_applicants: int, repeats: int) -> list[dict]:
    """CPU per applicant of the recourse proximity on the paper tables' datasets (see the module docstring)."""
    from threadpoolctl import threadpool_limits

    import benchmarks.paper_tables as pt
    from frpd_cli.applicants import normalise_types
    from frpd_cli.planning import plan_applicants
    from frpd_cli.recourse_cost import with_recourse_costs

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in pt.SPECS:
            if spec.name.lower() not in names or not (pt.DATASETS / spec.file).exists():
                continue
            p = pt.prepare(spec, Path(tmp), n_applicants)
            for case, training in (("immutables", p.training), ("none", p.free)):
                settings = PlanSettings(k=3, theta=0.9)
                raw = normalise_types(training.encoder,
                                      p.applicants.loc[:, list(training.schema.feature_names)].reset_index(drop=True))
                X0 = training.encoder.encode(raw)
                codes0 = training.encoder.constraint_codes(raw)
                raw_rows = raw.to_dict("records")
                stage = CandidateStage(training, settings, model=p.model)
                found = [stage.find(X0[i], codes0.row(i), raw_rows[i]) for i in range(len(raw))]
                counted = _RowCounter(p.model)
                with_recourse_costs(training, counted, X0, raw, found)
                n = len(raw)
                ids = [str(i) for i in range(n)]

                def plan(proximity, training=training):
                    for _ in plan_applicants(training, p.model, p.applicants, ids,
                                             PlanSettings(k=3, theta=0.9, proximity=proximity)):
                        pass

                with threadpool_limits(1):
                    price = _best_cpu(lambda: with_recourse_costs(training, p.model, X0, raw, found), repeats)
                    by_distance = _best_cpu(lambda: plan("distance"), repeats)
                    by_recourse = _best_cpu(lambda: plan("recourse"), repeats)
                priced = [f for f in found if f.reason is None]
                distinct = sum(len(np.unique(training.X[f.rows] if f.X is None else f.X, axis=0)) for f in priced)
                rows.append({"dataset": spec.name, "constraints": case, "training rows": training.n_rows,
                             "applicants": n, "candidates / applicant": f"{np.mean([len(f) for f in priced]):.0f}",
                             "distinct": f"{distinct / max(1, len(priced)):.0f}",
                             "rows scored / distinct candidate": f"{counted.rows / max(1, distinct):.2f}",
                             "pricing ms / applicant": f"{1000 * price / n:.1f}",
                             "plan ms / applicant, distance": f"{1000 * by_distance / n:.1f}",
                             "plan ms / applicant, recourse": f"{1000 * by_recourse / n:.1f}"})
                print(rows[-1], file=sys.stderr, flush=True)
    return rows


class _RowCounter:
    """A model that counts the rows it is asked to score."""

    def __init__(self, model):
        self.model, self.threshold, self.rows = model, model.threshold, 0

    def favorable_probability(self, rows):
        self.rows += len(rows)
        return self.model.favorable_probability(rows)


def _recourse_main(args) -> int:
    names = [d.strip().lower() for d in args.datasets.split(",") if d.strip()]
    rows = _measure_recourse(names, args.n_applicants, args.repeats)
    from frpd_cli.recourse_cost import COARSE_GRID, TOLERANCE

    lines = ["## Recourse proximity (`benchmarks/bench_candidates.py --recourse`)", "",
             f"Machine: {machine_line()}; {_load_line()}. Command: `python benchmarks/bench_candidates.py --recourse "
             f"--datasets {args.datasets} --n-applicants {args.n_applicants} --repeats {args.repeats}`. The paper "
             "tables' protocol (80/20 split, seed 42, MLP (20, 50, 20) with the authors' recipe, applicants = the "
             "first denied test rows), K = 3, θ = 0.9; CPU time (`time.process_time`), one thread, best of the "
             "repeats, divided by the applicants.", "",
             *markdown_table(rows, ["dataset", "constraints", "training rows", "applicants", "candidates / applicant",
                                    "distinct", "rows scored / distinct candidate", "pricing ms / applicant",
                                    "plan ms / applicant, distance", "plan ms / applicant, recourse"]),
             "", "constraints: `immutables` = the paper's immutable features (`frpd plan`'s candidates); `none` = "
             "every favourable training row (the paper's Table 1). pricing: `with_recourse_costs` over all the "
             "applicants' candidates at once, as `plan_chunk` calls it (distinct candidates of an applicant are "
             f"searched once; a grid of {COARSE_GRID} points per segment scored in order, one point per model call, "
             f"up to the first favourable one, the end point not scored, then bisection of the first favourable "
             f"bracket to {TOLERANCE:g} of the segment). rows scored: the model rows of the pricing per distinct "
             "candidate (at most 8). plan: "
             "`plan_applicants` (quad, sparse recourses, the default), `--proximity distance` against "
             "`--proximity recourse`; the difference is the option's price."]
    publish("bench_recourse", lines)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-applicants", type=int, default=300, help="Adult applicants (default 300)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each measurement (best kept)")
    parser.add_argument("--data", type=Path, help="training CSV (with --model and --applicants: no training here)")
    parser.add_argument("--model", type=Path)
    parser.add_argument("--applicants", type=Path)
    parser.add_argument("--no-cli", action="store_true", help="only the library measurements")
    parser.add_argument("--recourse", action="store_true",
                        help="measure --proximity recourse on the paper tables' datasets instead (section bench_recourse)")
    parser.add_argument("--datasets", default="german,sba,adult", help="with --recourse: datasets to measure")
    args = parser.parse_args(argv)
    if args.recourse:
        return _recourse_main(args)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.data is not None:
            if args.model is None or args.applicants is None:
                parser.error("--data needs --model and --applicants")
            train_path, model_path, denied = args.data, args.model, pd.read_csv(args.applicants)
        elif (DATASETS / "adult.csv").exists():
            train_path, model_path, _, denied = _train_adult(tmp)
        else:
            print(f"adult.csv not found in {DATASETS}; skipping the candidate-stage benchmark", file=sys.stderr)
            return 0
        applicants = denied.head(args.n_applicants).reset_index(drop=True)
        library = _measure_library(train_path, model_path, applicants, args.repeats)
        cli = None
        if not args.no_cli:
            applicants_path = tmp / "applicants.csv"
            applicants.to_csv(applicants_path, index=False)
            best = min(_frpd_plan(train_path, model_path, applicants_path, tmp / "plans.csv")[1]
                       for _ in range(args.repeats))
            cli = {"applicants": len(applicants), "CPU s": f"{best:.2f}",
                   "CPU ms/applicant": f"{1000 * best / len(applicants):.1f}"}

    lines = ["## Candidate stage (`benchmarks/bench_candidates.py`)", "",
             f"Machine: {machine_line()}; {_load_line()}. Command: `python benchmarks/bench_candidates.py "
             f"--n-applicants {args.n_applicants} --repeats {args.repeats}`. Adult (paper protocol, MLP), immutable "
             "marital_status and gender, age increasing-only, K = 3; CPU time, best of the repeats.", "",
             "### `CandidateStage.find` per applicant (library, one thread)", "",
             *markdown_table(library, ["case", "applicants", "pool rows", "stage ms/applicant",
                                       "bare filter ms/applicant", "mean candidates", "fewer than K"]),
             "", "bare filter: `candidate_mask` alone on the same pool (the pool's rows grouped once by their "
             "immutable values, the applicant's group looked up, its monotone codes and ranges tested); the stage "
             "adds the policy (projection costs a model call per applicant), the exclusion counts and the reason "
             "for the applicants with fewer than K candidates."]
    if cli is not None:
        lines += ["", "### `frpd plan` (quad, csv output, one process)", "",
                  *markdown_table([cli], ["applicants", "CPU s", "CPU ms/applicant"]),
                  "", "The whole command (start-up, reading and scoring the training set, selection, interpolation, "
                  "verification, writing), user + system CPU of the process."]
    publish("bench_candidates", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
