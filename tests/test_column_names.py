"""Features named like one of frpd's own csv columns (``status``, ``cost``, ``theta``...): every csv frpd writes
heads such a feature's column ``feature:<name>``, every frpd reader maps it back, and a csv whose header repeats
a name (an earlier version's) is refused instead of misread."""

from __future__ import annotations

import csv
import io
import json

import joblib
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.plans import STATUSES, read_plans

runner = CliRunner()

#: The tiny credit problem's features renamed after columns of the plan csv (cost, status) and of the selection's
#: csv files (status, theta); ``years`` keeps its name.
RENAMED = {"income": "cost", "sector": "status", "debt": "theta"}


@pytest.fixture(scope="module")
def named(tmp_path_factory, tiny_credit):
    """Training data, model and applicants whose feature names are frpd column names."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    folder = tmp_path_factory.mktemp("named")
    base = tiny_credit(folder, seed=3, n=300, cut=70.0, below=0.5, n_applicants=8)
    frame = base["frame"].rename(columns=RENAMED)
    features = [RENAMED.get(c, c) for c in ("income", "years", "sector", "debt")]
    model = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["status"]),
                                    ("num", MinMaxScaler(), ["cost", "years", "theta"])])),
        ("clf", LogisticRegression(C=50.0, max_iter=2000)),
    ]).fit(frame[features], frame["label"])
    data, model_path, applicants = folder / "named.csv", folder / "named.pkl", folder / "named_applicants.csv"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    proba = model.predict_proba(frame[features])[:, 1]
    frame[features][proba < 0.5].head(8).to_csv(applicants, index=False)
    return {"data": data, "model": model_path, "applicants": applicants, "features": features}


def _number_or_text(value):
    try:
        return float(value)
    except ValueError:
        return value


def _plan(named, fmt, out=None):
    args = ["plan", str(named["data"]), "--model", str(named["model"]), "--applicants", str(named["applicants"]),
            "--immutable", "status", "--format", fmt]
    return runner.invoke(app, args + ([] if out is None else ["--output", str(out)]))


def _review(command, named, plans, *extra):
    return runner.invoke(app, [command, str(named["data"]), "--model", str(named["model"]), "--plans", str(plans),
                               "--applicants", str(named["applicants"]), "--immutable", "status", "--format", "csv",
                               *extra])


@pytest.mark.parametrize("name", ["Age", "status", "cost", "probability_model", "feature:status", "feature:Age",
                                  "'=x", "=x", "probability", "projected", "largest_shift", "applicant"])
@pytest.mark.parametrize("csv_file", ["plans", "selection"])
def test_each_feature_header_names_its_one_feature(name, csv_file):
    from frpd_cli.plans import PLAN_COLUMNS, SELECTION_COLUMNS, feature_header, feature_of_header

    reserved = PLAN_COLUMNS if csv_file == "plans" else SELECTION_COLUMNS
    header = feature_header(name, models=("model",), reserved=reserved)
    assert feature_of_header(header, reserved=reserved) == name
    assert header not in reserved and header != "probability_model"      # never a fixed column's name
    if name in reserved or name.startswith("feature:"):
        assert header == "feature:" + name
    elif name != "probability_model":
        assert header == name


def test_plan_csv_heads_colliding_features_and_evaluate_reads_them_back(named, tmp_path):
    csv_out, jsonl_out = tmp_path / "plans.csv", tmp_path / "plans.jsonl"
    made = _plan(named, "csv", csv_out)
    assert made.exit_code == 0, made.output
    assert "'cost', 'status'" in made.stderr and "'feature:cost', 'feature:status'" in made.stderr
    assert "--format jsonl" in made.stderr
    assert _plan(named, "jsonl", jsonl_out).exit_code == 0
    header = next(csv.reader(io.StringIO(csv_out.read_text())))
    assert len(header) == len(set(header))
    assert header[:5] == ["applicant", "status", "reason", "rank", "method"]
    assert header[5:9] == ["feature:cost", "years", "feature:status", "theta"]     # theta is no plan column
    # a script reading the csv by column name gets the plan's status and the recourse's cost
    rows = list(csv.DictReader(io.StringIO(csv_out.read_text())))
    records = [json.loads(line) for line in jsonl_out.read_text().splitlines()]
    recourses = [(rec["status"], r) for rec in records for r in rec["recourses"]]
    assert [row["status"] for row in rows if row["rank"]] == [s for s, _ in recourses]
    assert {row["status"] for row in rows} <= set(STATUSES)
    assert [float(row["cost"]) for row in rows if row["rank"]] == [r["cost"] for _, r in recourses]
    assert [row["feature:status"] for row in rows if row["rank"]] == [r["features"]["status"] for _, r in recourses]
    # frpd reads the csv back as the features: the same recourses as the jsonl, the same metrics
    def values(plans):      # csv cells are read as text in a column with empty cells (plans without recourse)
        return [[{k: _number_or_text(v) for k, v in r["features"].items()} for r in rec["recourses"]]
                for rec in plans]

    assert values(read_plans(csv_out)) == values(records)
    by_csv, by_jsonl = _review("evaluate", named, csv_out), _review("evaluate", named, jsonl_out)
    assert by_csv.exit_code == 0 and by_jsonl.exit_code == 0, by_csv.output + by_jsonl.output
    assert by_csv.stdout == by_jsonl.stdout
    summary = pd.read_csv(io.StringIO(by_csv.stdout))
    assert (summary["validity mean"] > 0).all() and (summary["violations mean"] == 0).all()
    for extra in (["--actions"], ["--by", "status"]):     # grouped by the feature status, not the plans' status
        audited = [_review("audit", named, p, *extra) for p in (csv_out, jsonl_out)]
        assert audited[0].exit_code == 0 and audited[0].stdout == audited[1].stdout, audited[0].output
    assert set(pd.read_csv(io.StringIO(audited[0].stdout))["group"]) <= {"a", "b", "c"}


def test_a_plan_csv_repeating_a_column_name_is_refused(named, tmp_path):
    """An earlier version wrote the feature ``status`` under the header ``status``: refused, not misread."""
    new = tmp_path / "plans.csv"
    assert _plan(named, "csv", new).exit_code == 0
    old = tmp_path / "old.csv"
    old.write_text(new.read_text().replace("feature:", "", 2))
    assert next(csv.reader(io.StringIO(old.read_text()))).count("status") == 2
    for command in ("evaluate", "audit"):
        result = _review(command, named, old, *(["--actions"] if command == "audit" else []))
        assert result.exit_code == 1, result.output
        assert "Error:" in result.stderr and "repeats the column name(s) 'status', 'cost'" in result.stderr
        assert "--format jsonl" in result.stderr and result.stdout == ""


def _select(named, out):
    return runner.invoke(app, ["select", str(named["data"]), "--model", str(named["model"]), "--applicants",
                               str(named["applicants"]), "--immutable", "status", "--out", str(out),
                               "--format", "csv"])


def _interpolate(named, selection, out):
    return runner.invoke(app, ["interpolate", "--selection", str(selection), "--model", str(named["model"]),
                               "--data", str(named["data"]), "--out", str(out), "--format", "jsonl"])


def test_selection_heads_colliding_features_and_interpolate_reads_them_back(named, tmp_path):
    made = _select(named, tmp_path / "sel")
    assert made.exit_code == 0, made.output
    assert "'feature:status', 'feature:theta'" in made.stderr
    prototypes = pd.read_csv(tmp_path / "sel" / "prototypes.csv", keep_default_na=False)
    assert list(prototypes.columns[:11]) == ["applicant", "status", "method", "theta", "rank", "row", "objective",
                                             "cost", "years", "feature:status", "feature:theta"]
    assert set(prototypes["status"]) <= set(STATUSES) and "ok" in set(prototypes["status"])
    applicants = pd.read_csv(tmp_path / "sel" / "applicants.csv")
    assert list(applicants.columns) == ["applicant", "cost", "years", "feature:status", "feature:theta"]
    raw = pd.read_csv(named["applicants"])
    assert np.array_equal(applicants["feature:theta"].to_numpy(), raw["theta"].to_numpy())
    result = _interpolate(named, tmp_path / "sel", tmp_path / "plans")
    assert result.exit_code == 0, result.output
    planned = _plan(named, "jsonl")
    assert planned.exit_code == 0
    assert (tmp_path / "plans" / "plans.jsonl").read_text() == planned.stdout     # select + interpolate = plan


def test_a_selection_repeating_a_column_name_is_refused(named, tmp_path):
    import hashlib

    from frpd_cli.artifacts import MANIFEST_NAME

    assert _select(named, tmp_path / "sel").exit_code == 0
    payload = tmp_path / "sel" / "prototypes.csv"
    payload.write_text(payload.read_text().replace("feature:status", "status", 1))
    manifest = json.loads((tmp_path / "sel" / MANIFEST_NAME).read_text())     # as an earlier version wrote it
    data = payload.read_bytes()
    manifest["payloads"]["prototypes.csv"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (tmp_path / "sel" / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
    result = _interpolate(named, tmp_path / "sel", tmp_path / "plans")
    assert result.exit_code == 1, result.output
    assert "'prototypes.csv'" in result.stderr and "repeats the column name(s) 'status'" in result.stderr
    assert "frpd select again" in result.stderr and not (tmp_path / "plans").exists()


def test_sample_plan_csv_header_is_unchanged(sample_paths):
    """Features whose names are not frpd's columns keep their names: the header of the sample plans as before."""
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants",
                                 str(sample_paths["applicants"]), "--format", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.split("\n", 1)[0] == (
        "applicant,status,reason,rank,method,age,personal_status,duration,credit_amount,housing,job,savings,cost,"
        "probability,projected,n_changes,partial,largest_shift")
    assert "Warning" not in result.stderr
