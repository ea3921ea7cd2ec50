"""A lone negative code below a column of amounts (COMPAS's length_of_stay of -1): found in the training rows,
and the plan warning for recourses that move an applicant onto it."""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.schema import SchemaSpec, infer_schema
from frpd_cli.sentinels import find_sentinels

runner = CliRunner()


def _stays(n=400, seed=0):
    """``stay`` is -1 in 5% of the rows (the code), 0..60 days elsewhere; ``balance`` is negative in many rows
    (an amount, no code); a record is favourable with a high score or, in the data's quirk, at stay -1."""
    rng = np.random.default_rng(seed)
    stay = rng.integers(0, 61, size=n)
    stay[: n // 20] = -1
    score = rng.integers(0, 100, size=n)
    balance = rng.integers(-500, 500, size=n)
    label = ((score > 70) | (stay == -1)).astype(int)
    return pd.DataFrame({"stay": stay, "score": score, "balance": balance, "label": label})


def test_a_lone_negative_code_is_found_and_a_negative_amount_is_not():
    frame = _stays()
    (sentinel,) = find_sentinels(frame, infer_schema(frame, SchemaSpec()))
    assert (sentinel.feature, sentinel.value, sentinel.n_at, sentinel.n_rows) == ("stay", -1.0, 20, 400)
    assert find_sentinels(frame, infer_schema(frame, SchemaSpec(immutable=("stay",)))) == []
    frame.loc[0, "stay"] = -2                     # two negative values: an amount that goes below zero
    assert find_sentinels(frame, infer_schema(frame, SchemaSpec())) == []


def test_plan_warns_of_recourses_moved_onto_the_code_and_the_range_it_names_keeps_them_off(tmp_path):
    frame = _stays()
    data = tmp_path / "stays.csv"
    frame.to_csv(data, index=False)
    features = ["stay", "score", "balance"]
    tree = DecisionTreeClassifier(random_state=0).fit(frame[features], frame["label"])
    joblib.dump(tree, tmp_path / "model.joblib")
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"stay": [3, 2, 5], "score": [40, 50, 30], "balance": [0, 10, -20]}).to_csv(applicants,
                                                                                            index=False)
    base = ["plan", str(data), "--model", str(tmp_path / "model.joblib"), "--applicants", str(applicants),
            "--format", "jsonl", "--max-move", "none"]
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    onto = [(rec["applicant"], r) for rec in records for r in rec["recourses"]
            if r["changes"].get("stay", [None, None])[1] == -1]
    assert onto                                   # the tree accepts stay -1: plans use it
    lines = [line for line in result.stderr.splitlines() if "move 'stay' to -1" in line]
    assert len(lines) == 1
    assert lines[0].startswith(f"Warning: {len(onto)} recourse(s) of {len({a for a, _ in onto})} applicant(s)")
    assert "held by 20 of its 400 training rows" in lines[0] and "--range stay=0:" in lines[0]
    off = runner.invoke(app, [*base, "--range", "stay=0:"])
    assert off.exit_code == 0, off.stderr
    kept = [r for line in off.stdout.splitlines() for r in json.loads(line)["recourses"]]
    assert kept and all(r["features"]["stay"] >= 0 for r in kept)
    assert "move 'stay'" not in off.stderr


def test_interpolate_and_evaluate_warn_of_recourses_moved_onto_the_code_as_plan_does(tmp_path):
    frame = _stays()
    data = tmp_path / "stays.csv"
    frame.to_csv(data, index=False)
    tree = DecisionTreeClassifier(random_state=0).fit(frame[["stay", "score", "balance"]], frame["label"])
    joblib.dump(tree, tmp_path / "model.joblib")
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"stay": [3, 2, 5], "score": [40, 50, 30], "balance": [0, 10, -20]}).to_csv(applicants,
                                                                                            index=False)
    common = ["--model", str(tmp_path / "model.joblib")]
    plan = runner.invoke(app, ["plan", str(data), "--applicants", str(applicants), *common, "--format", "jsonl",
                               "--max-move", "none"])
    assert plan.exit_code == 0, plan.stderr
    (line,) = [x for x in plan.stderr.splitlines() if "move 'stay' to -1" in x]
    select = runner.invoke(app, ["select", str(data), "--applicants", str(applicants), *common, "--out",
                                 str(tmp_path / "sel"), "--max-move", "none"])
    assert select.exit_code == 0, select.stderr
    interpolate = runner.invoke(app, ["interpolate", "--selection", str(tmp_path / "sel"), *common, "--out",
                                      str(tmp_path / "plans"), "--data", str(data), "--format", "jsonl"])
    assert interpolate.exit_code == 0, interpolate.stderr
    assert [x for x in interpolate.stderr.splitlines() if "move 'stay'" in x] == [line]
    # without the training rows (the linear scheme without --data) there is nothing to search: no warning
    bare = runner.invoke(app, ["interpolate", "--selection", str(tmp_path / "sel"), *common, "--out",
                               str(tmp_path / "plans2"), "--format", "jsonl"])
    assert bare.exit_code == 0, bare.stderr
    assert bare.stdout == interpolate.stdout and "move 'stay'" not in bare.stderr
    plans = tmp_path / "plans.jsonl"
    plans.write_text(plan.stdout, encoding="utf-8")      # jsonl plans: the applicants' values from the records
    evaluate = runner.invoke(app, ["evaluate", str(data), *common, "--plans", str(plans), "--format", "csv"])
    assert evaluate.exit_code == 0, evaluate.stderr
    assert [x for x in evaluate.stderr.splitlines() if "move 'stay'" in x] == [line]
