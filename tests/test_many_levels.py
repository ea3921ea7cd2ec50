"""Features whose moves make poor advice: categoricals with hundreds of levels, and names of a place of residence."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.schema import MANY_LEVELS, SchemaSpec, infer_schema, location_like_features, many_level_features

runner = CliRunner()

FEATURES = ["income", "zip", "job"]


@pytest.fixture(scope="module")
def zips(tmp_path_factory):
    """900 rows: income, zip (300 levels, the last digit above 6 raises the score) and job (5 levels); a logistic
    pipeline; three applicants it turns down."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    rng = np.random.default_rng(0)
    n = 900
    frame = pd.DataFrame({"income": np.round(rng.uniform(10, 90, n), 1),
                          "zip": [f"z{i % 300:03d}" for i in range(n)],
                          "job": rng.choice(list("abcde"), n)})
    frame["label"] = ((frame["income"] + 30 * (frame["zip"].str[-1].astype(int) > 6)) > 60).astype(int)
    model = Pipeline([("prep", ColumnTransformer([("text", OneHotEncoder(handle_unknown="ignore"), ["zip", "job"]),
                                                  ("numbers", MinMaxScaler(), ["income"])])),
                      ("clf", LogisticRegression(max_iter=1000))]).fit(frame[FEATURES], frame["label"])
    folder = tmp_path_factory.mktemp("zips")
    data, model_path, applicants = folder / "train.csv", folder / "model.pkl", folder / "applicants.csv"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    denied = frame[FEATURES][model.predict_proba(frame[FEATURES])[:, 1] < 0.5].head(3)
    denied.to_csv(applicants, index=False)
    return {"data": data, "model": model_path, "applicants": applicants, "folder": folder}


def _levels_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning:") and " levels (more than " in line]


def _location_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning:") and "like a location" in line]


def test_many_levels_and_locations_are_found_by_whole_words():
    frame = pd.DataFrame({"zip": [f"z{i}" for i in range(MANY_LEVELS + 1)] * 2,
                          "few": [f"f{i}" for i in range(MANY_LEVELS)] * 2 + ["f0", "f1"],
                          "income": np.arange(2 * MANY_LEVELS + 2, dtype=float), "label": [0, 1] * (MANY_LEVELS + 1)})
    schema = infer_schema(frame)
    assert many_level_features(schema) == [("zip", MANY_LEVELS + 1)]           # a threshold of levels, not rows
    allowed = infer_schema(frame, SchemaSpec(ranges={"zip": "z1,z2"}))
    assert many_level_features(allowed) == []                                  # the levels a recourse may choose
    names = {"zip": True, "zip_code": True, "ZipCode": True, "postcode": True, "Postal Code": True,
             "home_city": True, "homeCity": True, "county": True, "state": True, "us-state": True, "region": True,
             "address": True, "statement": False, "estate": False, "status": False, "capacity": False,
             "regional_sales": False, "zipper": False, "income": False}
    frame = pd.DataFrame({n: [0, 1, 2, 3] for n in names} | {"label": [0, 1, 0, 1]})
    assert location_like_features(infer_schema(frame)) == [n for n, located in names.items() if located]
    declared = SchemaSpec(immutable=("zip",), increasing=("county",), ranges={"state": "0:2"})
    quiet = location_like_features(infer_schema(frame, declared), vary=declared.vary)
    assert not {"zip", "county", "state"} & set(quiet) and {"region", "address"} <= set(quiet)
    varied = SchemaSpec(vary=("region", "income"))           # region free on purpose, the others immutable
    assert location_like_features(infer_schema(frame, varied), vary=varied.vary) == []


def test_schema_warns_and_its_records_are_unchanged(zips):
    result = runner.invoke(app, ["schema", str(zips["data"]), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    (levels,) = _levels_warnings(result.stderr)
    assert "'zip'" in levels and "300 levels" in levels and "--immutable zip" in levels
    assert "--range zip=LEVEL,LEVEL" in levels
    (location,) = _location_warnings(result.stderr)
    assert "'zip'" in location and "recourse would ask the applicant to move" in location
    assert "job" not in levels + location                                      # 5 levels, not a place
    rows = {row["column"]: row for row in json.loads(result.stdout)}
    assert len(rows["zip"]["levels"]) == 300 and len(rows["job"]["levels"]) == 5
    assert "Warning" not in result.stdout
    silenced = runner.invoke(app, ["schema", str(zips["data"]), "--format", "json", "--immutable", "zip"])
    assert silenced.exit_code == 0, silenced.stderr
    assert _levels_warnings(silenced.stderr) == [] and _location_warnings(silenced.stderr) == []
    assert {r["column"]: r["mutability"] for r in json.loads(silenced.stdout)}["zip"] == "immutable"


def _plan(zips, *flags):
    return runner.invoke(app, ["plan", str(zips["data"]), "--model", str(zips["model"]), "--applicants",
                               str(zips["applicants"]), "--format", "csv", *flags])


def test_plan_warns_once_on_stderr_and_immutable_silences_it(zips):
    free = _plan(zips)
    assert free.exit_code == 0, free.stderr
    assert len(_levels_warnings(free.stderr)) == 1 and len(_location_warnings(free.stderr)) == 1
    plans = pd.read_csv(io.StringIO(free.stdout), dtype={"zip": str})
    assert list(plans.columns[:8]) == ["applicant", "status", "reason", "rank", "method", *FEATURES]
    assert sorted(plans["applicant"].unique()) == [0, 1, 2]
    declared = _plan(zips, "--immutable", "zip")
    assert declared.exit_code == 0, declared.stderr
    assert _levels_warnings(declared.stderr) == [] and _location_warnings(declared.stderr) == []
    kept = pd.read_csv(io.StringIO(declared.stdout), dtype={"zip": str})
    ok = kept[kept["status"] == "ok"]
    own = pd.read_csv(zips["applicants"])["zip"]
    assert (ok["zip"].to_numpy() == own.loc[ok["applicant"]].to_numpy()).all()


def test_select_and_interpolate_warn_once_each(zips):
    out = zips["folder"] / "selection"
    selected = runner.invoke(app, ["select", str(zips["data"]), "--model", str(zips["model"]), "--applicants",
                                   str(zips["applicants"]), "--out", str(out)])
    assert selected.exit_code == 0, selected.stderr
    assert len(_levels_warnings(selected.stderr)) == 1 and len(_location_warnings(selected.stderr)) == 1
    interpolated = runner.invoke(app, ["interpolate", "--selection", str(out), "--model", str(zips["model"]),
                                       "--out", str(zips["folder"] / "plans"), "--format", "csv"])
    assert interpolated.exit_code == 0, interpolated.stderr
    assert len(_levels_warnings(interpolated.stderr)) == 1 and len(_location_warnings(interpolated.stderr)) == 1
    assert "Warning" not in interpolated.stdout
    assert len(pd.read_csv(io.StringIO(interpolated.stdout))) >= 3



def test_an_unseen_category_names_the_value_and_ten_of_the_levels(zips):
    applicants = zips["folder"] / "unseen.csv"
    pd.DataFrame({"income": [20.0, 30.0], "zip": ["z001", "zz-unseen"], "job": ["a", "b"]}).to_csv(applicants,
                                                                                                 index=False)
    result = runner.invoke(app, ["plan", str(zips["data"]), "--model", str(zips["model"]), "--applicants",
                                 str(applicants), "--format", "csv", "--immutable", "zip"])
    assert result.exit_code == 1 and result.stdout == ""
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    first = ", ".join(f"z{i:03d}" for i in range(10))
    assert error == (f"Error: Column 'zip' of the applicants file '{applicants}' holds 'zz-unseen' in data row 2 "
                     f"(line 3), a category never seen in training. Known categories: {first} ... and 290 more.")
    # a column with few levels still lists every one
    pd.DataFrame({"income": [20.0], "zip": ["z001"], "job": ["f"]}).to_csv(applicants, index=False)
    few = runner.invoke(app, ["plan", str(zips["data"]), "--model", str(zips["model"]), "--applicants",
                              str(applicants), "--format", "csv", "--immutable", "zip"])
    assert few.exit_code == 1
    assert few.stderr.strip().splitlines()[-1].endswith("'f' in data row 1 (line 2), a category never seen in "
                                                         "training. Known categories: a, b, c, d, e.")


def test_a_range_of_unknown_levels_lists_ten_of_them(zips):
    result = _plan(zips, "--range", "zip=nowhere")
    assert result.exit_code == 2 and result.stdout == ""
    first = ", ".join(f"z{i:03d}" for i in range(10))
    assert f"vocabulary ({first} ... and 290 more). Got nowhere instead." in " ".join(result.stderr.split())


def test_an_identifier_gets_the_identifier_warning_only(zips, tmp_path):
    # a text column with a different value in every row is reported as an identifier, not once more for its levels
    frame = pd.read_csv(zips["data"])
    frame.insert(0, "ref", [f"r{i:04d}" for i in range(len(frame))])
    data = tmp_path / "with_ref.csv"
    frame.to_csv(data, index=False)
    result = runner.invoke(app, ["schema", str(data), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "'ref'" in line and "like an identifier" in line]
    levels = _levels_warnings(result.stderr)
    assert len(levels) == 1 and "'zip'" in levels[0] and "'ref'" not in levels[0]


def test_a_scale_without_an_order_is_named(tmp_path):
    from frpd_cli.schema import unordered_scale_features

    names = {"education": True, "Highest Qualification": True, "qualifications": True, "education_num": False,
             "educated": False, "c_charge_degree": False, "job": False}
    frame = pd.DataFrame({n: ["a", "b", "c", "a"] for n in names} | {"label": [0, 1, 0, 1]})
    frame["education_num"] = [1, 2, 3, 1]
    assert unordered_scale_features(infer_schema(frame)) == ["education", "Highest Qualification", "qualifications"]
    declared = SchemaSpec(ordinal={"education": ["a", "b", "c"]}, immutable=("qualifications",),
                          ranges={"Highest Qualification": "a,b"})
    assert unordered_scale_features(infer_schema(frame, declared)) == []
    # through the command line: schema warns and notes it; a schema file with the order silences it
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    result = runner.invoke(app, ["schema", str(data), "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "scale of attainment" in line]
    assert len(warned) == 1 and "'education', 'Highest Qualification', 'qualifications'" in warned[0]
    notes = {r["column"]: r["note"] for r in map(json.loads, result.stdout.splitlines())}
    assert notes["education"].startswith("a scale?") and notes["job"] == ""
    schema = tmp_path / "s.toml"
    schema.write_text('immutable = ["qualifications", "Highest Qualification", "c_charge_degree"]\n'
                      '[ordinal]\neducation = ["a", "b", "c"]\n')
    quiet = runner.invoke(app, ["schema", str(data), "--schema", str(schema), "--format", "jsonl"])
    assert quiet.exit_code == 0 and "scale of attainment" not in quiet.stderr


def test_a_record_of_the_past_is_named(tmp_path):
    # COMPAS-like columns: a recourse lowering priors_count asks for what no one can undo
    from frpd_cli.schema import past_record_features

    rng = np.random.default_rng(1)
    n = 400
    frame = pd.DataFrame({"priors_count": rng.integers(0, 12, n), "income": np.round(rng.uniform(10, 90, n), 1),
                          "credit_history": rng.choice(["good", "poor", "none"], n),
                          "priority": rng.integers(0, 3, n)})
    frame["label"] = ((frame["income"] - 4 * frame["priors_count"]) > 30).astype(int)
    assert past_record_features(infer_schema(frame)) == ["priors_count", "credit_history"]
    declared = SchemaSpec(immutable=("credit_history",), increasing=("priors_count",))
    # increasing still lets a recourse ask for more prior convictions: only immutable silences it
    assert past_record_features(infer_schema(frame, declared)) == ["priors_count"]
    assert past_record_features(infer_schema(frame, SchemaSpec(immutable=("credit_history", "priors_count")))) == []
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    result = runner.invoke(app, ["schema", str(data), "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "record of the past" in line]
    assert len(warned) == 1 and "--immutable priors_count --immutable credit_history" in warned[0]
    notes = {r["column"]: r["note"] for r in map(json.loads, result.stdout.splitlines())}
    assert notes["priors_count"] == "a record of the past? declare it immutable" and notes["priority"] == ""
    assert "--increasing" not in warned[0].split("Declare")[1]     # the remedy is immutable, never increasing
    quiet = runner.invoke(app, ["schema", str(data), "--format", "jsonl", "--immutable", "credit_history",
                                "--immutable", "priors_count"])
    assert quiet.exit_code == 0 and "record of the past" not in quiet.stderr


def test_a_charge_off_is_a_record_of_the_past(tmp_path):
    # SBA's ChgOffPrinGr (the principal charged off once the loan failed): every plan on SBA moved it (289 of the
    # 290 MLP plans), asking the business for a charge-off it cannot have or undo; 'payoff' and 'offset' are none
    from frpd_cli.schema import past_record_features

    rng = np.random.default_rng(2)
    n = 300
    frame = pd.DataFrame({"ChgOffPrinGr": rng.integers(0, 5000, n), "charged_off": rng.integers(0, 2, n),
                          "Charge-Offs": rng.integers(0, 3, n), "payoff": rng.integers(0, 9, n),
                          "offset": rng.integers(0, 9, n), "Term": rng.integers(6, 300, n)})
    frame["label"] = (frame["Term"] > 100).astype(int)
    assert past_record_features(infer_schema(frame)) == ["ChgOffPrinGr", "charged_off", "Charge-Offs"]
    data = tmp_path / "sba.csv"
    frame.to_csv(data, index=False)
    result = runner.invoke(app, ["schema", str(data), "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "record of the past" in line]
    assert len(warned) == 1 and "--immutable ChgOffPrinGr" in warned[0] and "charge-off" in warned[0]
    notes = {r["column"]: r["note"] for r in map(json.loads, result.stdout.splitlines())}
    assert notes["ChgOffPrinGr"] == "a record of the past? declare it immutable" and notes["payoff"] == ""


def test_an_offence_and_its_charge_are_records_of_the_past():
    # COMPAS's c_charge_degree (F or M: the degree of the charge of the current offence): plans moved it F -> M
    from frpd_cli.schema import past_record_features

    frame = pd.DataFrame({"c_charge_degree": ["F", "M"] * 10, "prior_offenses": range(20), "felony_count": range(20),
                          "MonthlyCharges": np.linspace(10, 90, 20), "charge_amount": range(20),
                          "degree": ["BA", "MA"] * 10, "Criminal Record": ["y", "n"] * 10, "label": [0, 1] * 10})
    assert past_record_features(infer_schema(frame)) == ["c_charge_degree", "prior_offenses", "felony_count",
                                                         "Criminal Record"]
    # COMPAS's days in jail, Bank's contacts of this campaign and the previous one's outcome; not a stay-at-home
    # count or a campaign_budget's neighbour "budget"
    frame = pd.DataFrame({"length_of_stay": range(20), "campaign": range(20), "pdays": range(20),
                          "poutcome": ["success", "failure"] * 10, "days_in_jail": range(20), "stay_home": range(20),
                          "budget": range(20), "label": [0, 1] * 10})
    assert past_record_features(infer_schema(frame)) == ["length_of_stay", "campaign", "pdays", "poutcome",
                                                         "days_in_jail"]
