"""--immutable-policy through the command line on a crafted dataset where strict filtering leaves nothing."""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    """Calls (immutable, integer) almost never repeat among favourable rows; income decides the label."""
    tmp = tmp_path_factory.mktemp("policy")
    rng = np.random.default_rng(5)
    n = 400
    frame = pd.DataFrame({
        "calls": rng.integers(0, 40, n),
        "region": rng.choice(["north", "south"], n),
        "age": rng.integers(20, 60, n),
        "income": np.round(rng.uniform(0, 100, n), 1),
    })
    frame["label"] = (frame["income"] + 0.2 * frame["age"] > 60).astype(int)
    features = ["calls", "region", "age", "income"]
    model = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["region"]),
                                    ("num", MinMaxScaler(), ["calls", "age", "income"])])),
        ("clf", LogisticRegression(C=100.0, max_iter=2000)),
    ]).fit(frame[features], frame["label"])
    data = tmp / "train.csv"
    frame.to_csv(data, index=False)
    model_path = tmp / "model.pkl"
    joblib.dump(model, model_path)
    proba = model.predict_proba(frame[features])[:, 1]
    applicants = frame[features][proba < 0.3].head(6).reset_index(drop=True)
    applicants["calls"] = [41, 42, 43, 44, 45, 46][: len(applicants)]       # values no training row has
    app_path = tmp / "applicants.csv"
    applicants.to_csv(app_path, index=False)
    return {"data": data, "model": model_path, "applicants": app_path, "frame": frame, "estimator": model,
            "raw_applicants": applicants}


def _plan(c, *extra):
    return runner.invoke(app, ["plan", str(c["data"]), "--model", str(c["model"]), "--applicants",
                               str(c["applicants"]), "--immutable", "calls", "--immutable", "region",
                               "--increasing", "age", "--format", "jsonl", "--max-move", "none", *extra])


def test_filter_reports_exact_counts(crafted):
    result = _plan(crafted, "--immutable-policy", "filter", "--no-direct-search")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    frame, est = crafted["frame"], crafted["estimator"]
    # favourable at the default margin: probability >= 0.5 + 0.05
    favourable = est.predict_proba(frame.drop(columns="label"))[:, 1] >= 0.55
    for rec, (_, x0) in zip(records, crafted["raw_applicants"].iterrows()):
        assert rec["status"] == "infeasible"
        differ_calls = int((favourable & (frame["calls"] != x0["calls"])).sum())
        differ_region = int((favourable & (frame["region"] != x0["region"])).sum())
        younger = int((favourable & (frame["age"] < x0["age"])).sum())
        assert rec["reason"].startswith(f"only 0 candidate row(s), need 3: of {int(favourable.sum())} favourable")
        assert f"{differ_calls} differ in calls" in rec["reason"]
        assert f"{differ_region} differ in region" in rec["reason"]
        if younger:
            assert f"{younger} have lower age" in rec["reason"]
    assert "infeasible (6 most limited by calls, which may not change)" in result.stderr
    assert "--immutable-policy project" in result.stderr


def test_project_gives_valid_plans_keeping_immutables(crafted):
    result = _plan(crafted, "--immutable-policy", "project")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    est = crafted["estimator"]
    # only age and income may change here, so several prototypes can lead to the same recourse
    assert all(len(rec["recourses"]) >= 2 for rec in records)
    for rec, (_, x0) in zip(records, crafted["raw_applicants"].iterrows()):
        assert rec["status"] == "ok" and 1 <= len(rec["recourses"]) <= 3      # equal recourses are merged
        rows = pd.DataFrame([r["features"] for r in rec["recourses"]])
        assert (est.predict_proba(rows[["calls", "region", "age", "income"]])[:, 1] >= 0.5).all()
        assert (rows["calls"] == x0["calls"]).all() and (rows["region"] == x0["region"]).all()
        assert (rows["age"] >= x0["age"]).all()
        assert all(r.get("projected") is True for r in rec["recourses"])   # no real row shares calls
    csv_out = _plan(crafted, "--immutable-policy", "project", "--format", "csv")
    header = csv_out.stdout.splitlines()[0].split(",")
    assert header[-4:] == ["projected", "n_changes", "partial", "largest_shift"]
    assert header[-6:-4] == ["cost", "probability"]
    table = _plan(crafted, "--immutable-policy", "project", "--format", "table")
    assert "* prototype projected onto the applicant's" in table.stdout


def test_graph_plans_keep_strict_rules_whatever_the_policy(crafted, tmp_path):
    graph = tmp_path / "graph"
    built = runner.invoke(app, ["build-graph", str(crafted["data"]), "--model", str(crafted["model"]),
                                "--immutable", "calls", "--immutable", "region", "--increasing", "age",
                                "--out", str(graph)])
    assert built.exit_code == 0, built.stderr
    result = _plan(crafted, "--immutable-policy", "project", "--graph", str(graph))
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert {r["status"] for r in records} == {"infeasible"}


def test_filter_output_has_no_projected_column(crafted):
    result = _plan(crafted, "--format", "csv", "--immutable-policy", "filter")
    assert "projected" not in result.stdout.splitlines()[0]


def test_auto_is_the_default_and_projects_only_numeric_immutables(crafted):
    """auto: calls (numeric) is projected, region (categorical) and age (increasing) are filtered."""
    result = _plan(crafted)
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    est = crafted["estimator"]
    for rec, (_, x0) in zip(records, crafted["raw_applicants"].iterrows()):
        assert rec["status"] == "ok"
        rows = pd.DataFrame([r["features"] for r in rec["recourses"]])
        assert (est.predict_proba(rows[["calls", "region", "age", "income"]])[:, 1] >= 0.5).all()
        assert (rows["calls"] == x0["calls"]).all() and (rows["region"] == x0["region"]).all()
        assert (rows["age"] >= x0["age"]).all()
        assert all(r.get("projected") is True for r in rec["recourses"])
        # every prototype came from the applicant's own region, never from the other one
        assert rec["method"] == "quad"
    header = _plan(crafted, "--format", "csv").stdout.splitlines()[0].split(",")
    assert header[-4:] == ["projected", "n_changes", "partial", "largest_shift"]
