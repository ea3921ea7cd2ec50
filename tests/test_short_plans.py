"""Short plans: an applicant with 1 or 2 candidate prototypes at K = 3 gets the recourses that exist.

Oracle: the candidate rows worked out by brute force from the fitted model and the raw training rows (same
group, age not below the applicant's, predicted favourable, not the applicant itself), never through the
library's constraint codes. Every recourse is re-predicted with the estimator itself and checked against the
constraints; ``evaluate`` and the summary lines count the short plans as partial.
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
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()
FEATURES = ["group", "age", "income", "debt"]
LINEAR_METHODS = ["quad", "quad-dp", "quad-greedy", "dpp-greedy", "dpp-ls", "nearest", "exact"]


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    """Groups "solo" and "duo" hold 1 and 2 rows the model accepts that their applicants may move to."""
    tmp = tmp_path_factory.mktemp("short")
    rng = np.random.default_rng(11)
    n_big = 120
    big = pd.DataFrame({"group": "big", "age": rng.integers(20, 70, n_big),
                        "income": np.round(rng.uniform(0, 100, n_big), 1),
                        "debt": np.round(rng.uniform(0, 50, n_big), 1)})
    small = pd.DataFrame([
        # solo: one favourable row at or above age 30, one favourable but younger (ruled out by increasing age)
        ("solo", 40, 92.0, 10.0), ("solo", 22, 95.0, 12.0), ("solo", 35, 12.0, 30.0), ("solo", 50, 18.0, 25.0),
        # duo: two favourable rows at or above age 30, in different directions
        ("duo", 45, 90.0, 40.0), ("duo", 33, 97.0, 5.0), ("duo", 60, 15.0, 20.0), ("duo", 38, 10.0, 35.0),
        # none: no row the model accepts
        ("none", 40, 20.0, 10.0), ("none", 55, 25.0, 30.0),
    ], columns=FEATURES)
    frame = pd.concat([big, small], ignore_index=True)
    frame["label"] = (frame["income"] > 55).astype(int)
    model = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["group"]),
                                    ("num", MinMaxScaler(), ["age", "income", "debt"])])),
        ("clf", LogisticRegression(C=100.0, max_iter=5000)),
    ]).fit(frame[FEATURES], frame["label"])
    data = tmp / "train.csv"
    frame.to_csv(data, index=False)
    model_path = tmp / "model.pkl"
    joblib.dump(model, model_path)
    applicants = pd.DataFrame([("S1", "solo", 30, 14.0, 28.0), ("D2", "duo", 30, 12.0, 30.0),
                               ("N0", "none", 30, 10.0, 20.0), ("B3", "big", 30, 10.0, 20.0)],
                              columns=["id", *FEATURES])
    app_path = tmp / "applicants.csv"
    applicants.to_csv(app_path, index=False)
    favourable = model.predict_proba(frame[FEATURES])[:, 1] >= 0.5
    oracle = {}
    for _, a in applicants.iterrows():
        ok = favourable & (frame["group"] == a["group"]).to_numpy() & (frame["age"] >= a["age"]).to_numpy()
        ok &= ~(frame[FEATURES] == a[FEATURES]).all(axis=1).to_numpy()
        oracle[a["id"]] = set(np.flatnonzero(ok).tolist())
    # the crafted shape this file is about: 1, 2 and 0 candidates, and plenty for the big group
    assert [len(oracle[a]) for a in ("S1", "D2", "N0")] == [1, 2, 0] and len(oracle["B3"]) >= 10
    assert not model.predict_proba(applicants[FEATURES])[:, 1].max() >= 0.5
    return {"data": data, "model": model_path, "applicants": app_path, "frame": frame, "estimator": model,
            "raw": applicants.set_index("id"), "oracle": oracle, "tmp": tmp}


def _args(c, command="plan"):
    return [command, str(c["data"]), "--model", str(c["model"]), "--applicants", str(c["applicants"]),
            "--id-column", "id", "--target", "label", "--categorical", "group", "--immutable", "group",
            "--increasing", "age", "--max-move", "none"] + (["--no-direct-search"] if command == "plan" else [])


def _check_recourses(c, rec, *, exact_count=True):
    """Every recourse favourable for the estimator itself, group unchanged, age not lowered, distinct."""
    a = rec["applicant"]
    x0 = c["raw"].loc[a]
    rows = pd.DataFrame([r["features"] for r in rec["recourses"]])[FEATURES]
    assert (c["estimator"].predict_proba(rows)[:, 1] >= 0.5).all()
    assert (rows["group"] == x0["group"]).all() and (rows["age"] >= x0["age"]).all()
    assert len(rows.drop_duplicates()) == len(rows)
    if exact_count:
        assert len(rec["recourses"]) == len(c["oracle"][a])
    else:
        assert 1 <= len(rec["recourses"]) <= len(c["oracle"][a])


@pytest.mark.parametrize("method", LINEAR_METHODS)
def test_one_or_two_candidates_give_partial_plans_every_method(crafted, method):
    result = runner.invoke(app, [*_args(crafted), "--method", method, "--format", "jsonl", "--no-sparsify"])
    assert result.exit_code == 0, result.stderr
    records = {r["applicant"]: r for r in map(json.loads, result.stdout.splitlines())}
    for a, n in (("S1", 1), ("D2", 2)):
        rec = records[a]
        assert rec["status"] == "ok" and rec["partial"] is True, rec
        _check_recourses(crafted, rec)
        assert rec["reason"].startswith(f"{n} of K=3 recourses: only {n} candidate row(s): of ")
        assert "have lower age (applicant: 30)" in rec["reason"] and "differ in group (applicant: " in rec["reason"]
    assert records["N0"]["status"] == "infeasible" and records["N0"]["partial"] is False
    assert records["N0"]["recourses"] == [] and "only 0 candidate row(s), need 3" in records["N0"]["reason"]
    big = records["B3"]
    assert big["status"] == "ok" and big["partial"] is False and len(big["recourses"]) == 3
    _check_recourses(crafted, big, exact_count=False)
    assert "4 applicant(s): 3 planned (2 partial: fewer than K recourses); 1 infeasible" in result.stderr


def test_sparsified_short_plans_stay_valid(crafted):
    result = runner.invoke(app, [*_args(crafted), "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    records = {r["applicant"]: r for r in map(json.loads, result.stdout.splitlines())}
    for a in ("S1", "D2"):
        assert records[a]["status"] == "ok" and records[a]["partial"] is True
        _check_recourses(crafted, records[a], exact_count=False)


def test_csv_short_plan_rows_and_evaluate_counts(crafted):
    plans = crafted["tmp"] / "plans.csv"
    result = runner.invoke(app, [*_args(crafted), "--format", "csv", "--no-sparsify", "--output", str(plans)])
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(plans.read_text(encoding="utf-8"))))
    mine = {a: [r for r in rows if r["applicant"] == a] for a in ("S1", "D2", "N0", "B3")}
    assert [len(mine[a]) for a in ("S1", "D2", "N0", "B3")] == [1, 2, 1, 3]
    assert {r["partial"] for a in ("S1", "D2") for r in mine[a]} == {"true"}
    assert {r["status"] for a in ("S1", "D2") for r in mine[a]} == {"ok"}
    assert mine["N0"][0]["status"] == "infeasible" and mine["N0"][0]["partial"] == "false"
    args = _args(crafted, "evaluate")
    args[args.index("--applicants") + 1] = str(crafted["applicants"])
    ev = runner.invoke(app, [*args, "--plans", str(plans), "--k", "3", "--format", "csv"])
    assert ev.exit_code == 0, ev.stderr
    summary = list(csv.DictReader(io.StringIO(ev.stdout)))
    assert len(summary) == 1
    assert (summary[0]["n full plans"], summary[0]["n partial plans"], summary[0]["n without recourse"]) == \
        ("1", "2", "1")
    assert "4 need a recourse (1 full, 2 partial, 1 without recourse)" in ev.stderr


def test_select_and_interpolate_keep_short_plans(crafted):
    out = crafted["tmp"] / "sel"
    args = _args(crafted, "select")
    result = runner.invoke(app, [*args, "--out", str(out), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    protos = pd.read_csv(out / "prototypes.csv", dtype={"applicant": str}, keep_default_na=False)
    for a in ("S1", "D2"):
        chosen = protos[protos["applicant"] == a]
        assert set(chosen["status"]) == {"ok"}
        assert set(chosen["row"].astype(int)) == crafted["oracle"][a]       # every candidate, nothing else
    status = pd.read_csv(out / "status.csv", dtype={"applicant": str}, keep_default_na=False).set_index("applicant")
    assert status.loc["S1", "n_candidates"] == 1 and status.loc["D2", "n_candidates"] == 2
    assert status.loc["N0", "status"] == "infeasible"
    plan_dir = crafted["tmp"] / "interp"
    inter = runner.invoke(app, ["interpolate", "--selection", str(out), "--model", str(crafted["model"]),
                                "--out", str(plan_dir), "--format", "jsonl", "--no-sparsify", "--no-direct-search"])
    assert inter.exit_code == 0, inter.stderr
    records = {r["applicant"]: r for r in map(json.loads, inter.stdout.splitlines())}
    direct = runner.invoke(app, [*_args(crafted), "--format", "jsonl", "--no-sparsify"])
    same = {r["applicant"]: r for r in map(json.loads, direct.stdout.splitlines())}
    for a in ("S1", "D2"):
        assert records[a]["status"] == "ok" and records[a]["partial"] is True
        _check_recourses(crafted, records[a])
        assert records[a] == same[a]                # the two paths give the same plan
    assert "2 partial" in inter.stderr and "1 infeasible" in inter.stderr


def test_select_and_interpolate_search_from_the_applicant_as_plan_does(crafted):
    # N0 has no candidate: plan's direct search from its own row, and interpolate's on the selection, agree
    out = crafted["tmp"] / "sel-direct"
    assert runner.invoke(app, [*_args(crafted, "select"), "--out", str(out), "--format", "csv"]).exit_code == 0
    inter = runner.invoke(app, ["interpolate", "--selection", str(out), "--model", str(crafted["model"]),
                                "--out", str(crafted["tmp"] / "interp-direct"), "--format", "jsonl"])
    assert inter.exit_code == 0, inter.stderr
    plan_args = [a for a in _args(crafted) if a != "--no-direct-search"]
    planned = runner.invoke(app, [*plan_args, "--format", "jsonl"])
    assert planned.exit_code == 0, planned.stderr
    records = {r["applicant"]: r for r in map(json.loads, inter.stdout.splitlines())}
    same = {r["applicant"]: r for r in map(json.loads, planned.stdout.splitlines())}
    assert records == same
    n0 = records["N0"]                                    # no training row: the search from its own row found it
    assert n0["status"] == "ok" and "found by a direct search from the applicant" in n0["reason"]
    rows = pd.DataFrame([r["features"] for r in n0["recourses"]])[FEATURES]
    x0 = crafted["raw"].loc["N0"]
    assert (crafted["estimator"].predict_proba(rows)[:, 1] >= 0.5).all()
    assert (rows["group"] == x0["group"]).all() and (rows["age"] >= x0["age"]).all()


@pytest.mark.parametrize("method", ["quad", "face"])
def test_graph_short_plans(crafted, method):
    graph = crafted["tmp"] / f"graph-{method}"
    built = runner.invoke(app, ["build-graph", str(crafted["data"]), "--model", str(crafted["model"]),
                                "--target", "label", "--categorical", "group", "--immutable", "group",
                                "--increasing", "age", "--out", str(graph), "--neighbors", "40"])
    assert built.exit_code == 0, built.stderr
    result = runner.invoke(app, [*_args(crafted), "--graph", str(graph), "--method", method, "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    records = {r["applicant"]: r for r in map(json.loads, result.stdout.splitlines())}
    for a in ("S1", "D2"):
        rec = records[a]
        assert rec["status"] == "ok" and rec["partial"] is True, rec
        _check_recourses(crafted, rec)
        assert {r["path"][-1] for r in rec["recourses"]} == crafted["oracle"][a]
        assert rec["reason"].startswith(f"{len(crafted['oracle'][a])} of K=3 recourses: only ")


@pytest.fixture(scope="module")
def with_copies(crafted, tmp_path_factory):
    """The crafted data with copies of the solo and duo groups' favourable rows: 3 more of solo's (one of them
    before the original) and 2 more of one of duo's."""
    tmp = tmp_path_factory.mktemp("copies")
    frame = crafted["frame"]
    solo = frame.index[(frame["group"] == "solo") & (frame["age"] == 40)][0]
    duo = frame.index[(frame["group"] == "duo") & (frame["age"] == 33)][0]
    frame = pd.concat([frame.loc[[solo]], frame, frame.loc[[solo, solo, duo, duo]]], ignore_index=True)
    data = tmp / "train.csv"
    frame.to_csv(data, index=False)
    return {**crafted, "data": data, "frame": frame, "first": {"S1": {0}, "D2": {duo + 1, frame.index[
        (frame["group"] == "duo") & (frame["age"] == 45)][0]}}}


@pytest.mark.parametrize("method", LINEAR_METHODS)
def test_copies_of_a_row_are_one_candidate(with_copies, method):
    # the model is the crafted one: copies change nothing it predicts. Solo has 4 copies of one favourable row
    # (was 1 candidate), duo 3 of one of its two: the plans are the crafted ones, never one row twice, the
    # prototype the first copy, and the reason counts the copies left out
    c = with_copies
    result = runner.invoke(app, [*_args(c), "--method", method, "--format", "jsonl", "--no-sparsify"])
    assert result.exit_code == 0, result.stderr
    records = {r["applicant"]: r for r in map(json.loads, result.stdout.splitlines())}
    for a, n, copies in (("S1", 1, 3), ("D2", 2, 2)):
        rec = records[a]
        assert rec["status"] == "ok" and rec["partial"] is True, rec
        _check_recourses(c, rec)
        assert rec["reason"].startswith(f"{n} of K=3 recourses: only {n} candidate row(s): of ")
        assert f"{copies} repeat another candidate row" in rec["reason"]
        assert "led to the same recourse" not in rec["reason"]


def test_select_takes_the_first_copy(with_copies):
    c = with_copies
    out = c["tmp"] / "sel_copies"
    result = runner.invoke(app, [*_args(c, "select"), "--out", str(out), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    protos = pd.read_csv(out / "prototypes.csv", dtype={"applicant": str}, keep_default_na=False)
    for a in ("S1", "D2"):
        assert set(protos.loc[protos["applicant"] == a, "row"].astype(int)) == c["first"][a]
    status = pd.read_csv(out / "status.csv", dtype={"applicant": str}, keep_default_na=False).set_index("applicant")
    assert status.loc["S1", "n_candidates"] == 1 and status.loc["D2", "n_candidates"] == 2
