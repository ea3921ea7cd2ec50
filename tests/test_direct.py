"""The direct search from the applicant's own row, for applicants no training row within the rules helps.

Constructed data: the favourable training rows all belong to group "big"; the applicants belong to group "lone"
(immutable), so no training row passes their rules, while the model (which ignores the group) accepts a nearby
point. Oracle: the least income the fitted estimator accepts, by brute force over every value with the training
data's one decimal; invariants: every recourse re-predicted favourable by the estimator itself, immutables and
monotone features kept, ranges kept, the reason marks the search, plans identical across --jobs.
"""

from __future__ import annotations

import csv
import io
import json

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()
FEATURES = ["group", "age", "income", "hours"]
LEVEL = 0.55          # the default threshold 0.5 plus the default margin 0.05
NOTE = "found by a direct search from the applicant: no training row within the rules led to a recourse"


@pytest.fixture(scope="module")
def lone(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("direct")
    rng = np.random.default_rng(5)
    n = 300
    big = pd.DataFrame({"group": "big", "age": rng.integers(20, 70, n),
                        "income": np.round(rng.uniform(0, 100, n), 1), "hours": np.round(rng.uniform(0, 100, n), 1)})
    few = pd.DataFrame({"group": "lone", "age": [30, 41, 52, 60], "income": [10.0, 15.5, 20.0, 5.0],
                        "hours": [10.0, 12.0, 8.0, 20.0]})
    frame = pd.concat([big, few], ignore_index=True)
    # income alone: accepted above 55; income and hours together: above 120 (needs both for the second applicant)
    frame["label"] = (frame["income"] > 55).astype(int)
    frame["label2"] = (frame["income"] + frame["hours"] > 120).astype(int)
    paths = {}
    for name, target, columns in (("one", "label", ["income"]), ("two", "label2", ["income", "hours"])):
        model = Pipeline([("prep", ColumnTransformer([("num", "passthrough", columns)], remainder="drop")),
                          ("clf", LogisticRegression(C=1000.0, max_iter=10000))])
        model.fit(frame[FEATURES], frame[target])
        joblib.dump(model, tmp / f"{name}.pkl")
        data = tmp / f"{name}.csv"
        frame.drop(columns=[c for c in ("label", "label2") if c != target]).rename(
            columns={target: "label"}).to_csv(data, index=False)
        paths[name] = (data, tmp / f"{name}.pkl", model)
    applicants = tmp / "applicants.csv"
    pd.DataFrame([("L1", "lone", 30, 35.0, 50.0), ("L2", "lone", 45, 40.0, 60.0)],
                 columns=["id", *FEATURES]).to_csv(applicants, index=False)
    return paths, applicants


def _plan(data, model, applicants, *extra):
    args = ["plan", str(data), "--model", str(model), "--applicants", str(applicants), "--id-column", "id",
            "--target", "label", "--favorable", "1", "--immutable", "group", "--increasing", "age",
            "--range", "age=+0:+5", "--immutable-policy", "filter", "--format", "jsonl", *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()], result.stdout


def _least_income(model, row: dict, low: float, high: float) -> float:
    """Brute force: the least income (one decimal) the estimator accepts, everything else as in ``row``."""
    values = np.round(np.arange(round(low * 10), round(high * 10) + 1) / 10, 1)
    grid = pd.DataFrame([{**row, "income": v} for v in values])[FEATURES]
    ok = model.predict_proba(grid)[:, 1] >= LEVEL
    assert ok.any()
    return float(values[np.argmax(ok)])


def test_no_training_row_within_the_rules_but_a_single_change(lone):
    paths, applicants = lone
    data, model_path, model = paths["one"]
    plans, _ = _plan(data, model_path, applicants)
    first = plans[0]
    assert first["status"] == "ok"                 # was "infeasible": no "lone" row is favourable
    assert first["reason"].startswith("1 of K=3 recourses: " + NOTE)
    assert "only 0 candidate row(s)" in first["reason"]    # the candidate stage's own reason is kept
    r = first["recourses"][0]
    assert set(r["changes"]) == {"income"}
    # the least income along the feature, to the data's one decimal (the oracle is exhaustive)
    least = _least_income(model, {"group": "lone", "age": 30, "income": 35.0, "hours": 50.0}, 35.0, 60.0)
    assert abs(r["features"]["income"] - least) <= 0.1 + 1e-9
    # invariants: the estimator accepts it and reports the same probability; the rules hold
    row = pd.DataFrame([r["features"]])[FEATURES]
    p = float(model.predict_proba(row)[0, 1])
    assert p >= LEVEL and abs(p - r["probability"]) < 1e-6
    assert r["features"]["group"] == "lone" and r["features"]["age"] == 30


def test_a_pair_when_no_single_change_is_accepted(lone):
    paths, applicants = lone
    data, model_path, model = paths["two"]
    plans, _ = _plan(data, model_path, applicants)
    first = plans[0]
    assert first["status"] == "ok" and NOTE in first["reason"], first["reason"]
    assert all(set(r["changes"]) == {"income", "hours"} for r in first["recourses"])   # no single one reaches 120
    for plan, age in zip(plans, [30, 45]):
        for r in plan["recourses"]:
            f = r["features"]
            assert f["group"] == "lone" and f["age"] == age
            assert float(model.predict_proba(pd.DataFrame([f])[FEATURES])[0, 1]) >= LEVEL
        costs = [r["cost"] for r in plan["recourses"]]
        assert costs == sorted(costs)
    # --max-changes 1: only single changes, none of which helps; the reason says what was searched
    plans, _ = _plan(data, model_path, applicants, "--max-changes", "1")
    for plan in plans[:1]:
        assert plan["status"] == "infeasible" and not plan["recourses"]
        assert "a direct search from the applicant found no change within the rules that is accepted" in plan["reason"]
        assert "more changes were not searched (--max-changes 1)" in plan["reason"]


def test_still_infeasible_says_what_the_search_covered(lone):
    paths, applicants = lone
    data, model_path, _ = paths["two"]
    # income may rise by at most 5 and hours by at most 5: nothing within the rules reaches 120
    plans, _ = _plan(data, model_path, applicants, "--range", "income=+0:+5", "--range", "hours=+0:+5")
    for plan in plans[:1]:
        assert plan["status"] == "infeasible" and not plan["recourses"]
        assert "no single change" in plan["reason"] and "no pair of changes" in plan["reason"]


def test_direct_plans_do_not_depend_on_jobs_and_keep_the_csv_contract(lone):
    paths, applicants = lone
    data, model_path, _ = paths["two"]
    _, one = _plan(data, model_path, applicants, "--jobs", "1")
    _, two = _plan(data, model_path, applicants, "--jobs", "2")
    assert one == two
    args = ["plan", str(data), "--model", str(model_path), "--applicants", str(applicants), "--id-column", "id",
            "--target", "label", "--favorable", "1", "--immutable", "group", "--increasing", "age",
            "--range", "age=+0:+5", "--immutable-policy", "filter", "--format", "csv"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    mine = [r for r in rows if r["applicant"] == "L1"]
    assert mine and all(r["status"] == "ok" and NOTE in r["reason"] for r in mine)
    assert [r["rank"] for r in rows if r["applicant"] == "L1"] == [str(i + 1) for i in range(
        sum(r["applicant"] == "L1" for r in rows))]


def test_no_direct_search_leaves_the_plan_as_the_training_rows_made_it(lone):
    paths, applicants = lone
    data, model_path, _ = paths["one"]
    with_search, _ = _plan(data, model_path, applicants)
    without, _ = _plan(data, model_path, applicants, "--no-direct-search")
    assert without[0]["status"] == "infeasible" and not without[0]["recourses"]
    assert "direct search" not in without[0]["reason"]
    # the note keeps the candidate stage's reason whole, in parentheses
    assert with_search[0]["reason"].endswith(f"{NOTE} ({without[0]['reason']})")


def test_label_support_runs_no_direct_search_and_says_so(lone):
    # label support asks for favourable training rows around a recourse: none of them passes the lone group's
    # rules, and a search from the applicant's own row lands where there are none; the reason says why
    from frpd_cli.planning import NO_DIRECT_WITH_SUPPORT

    paths, applicants = lone
    data, model, _ = paths["one"]
    plain, _ = _plan(data, model, applicants)
    assert all(NOTE in r["reason"] for r in plain)          # the search finds them a recourse without support
    supported, _ = _plan(data, model, applicants, "--robust-support", "auto")
    assert [r["status"] for r in supported] == ["infeasible"] * len(supported)
    for r in supported:
        assert r["reason"].endswith("; " + NO_DIRECT_WITH_SUPPORT) and NOTE not in r["reason"]
