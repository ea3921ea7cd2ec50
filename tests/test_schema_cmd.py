"""``frpd schema``: the inferred schema as a table or records, the TOML file it writes read back into the same
schema, the model's favourable class and acceptance count; hints where the inputs look like a mistake."""

from __future__ import annotations

import csv
import io
import json
import tomllib

import joblib
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.schema import (
    SchemaSpec,
    id_like_columns,
    infer_schema,
    inspect_schema,
    load_schema_file,
    schema_to_toml,
)

runner = CliRunner()


def _schema_args(paths, *extra):
    return ["schema", str(paths["data"]), "--schema", str(paths["schema"]), *extra]


def test_round_trip_through_the_command_and_the_schema_option(sample_paths, tmp_path):
    written = tmp_path / "schema.toml"
    result = runner.invoke(app, _schema_args(sample_paths, "--write", str(written), "--format", "csv",
                                             "--immutable", "housing"))
    assert result.exit_code == 0, result.stderr
    frame = pd.read_csv(sample_paths["data"])
    original = infer_schema(frame, _spec_of(sample_paths["schema"], immutable_extra=("housing",)))
    again = infer_schema(frame, load_schema_file(written))
    assert again == original
    # the file is what --schema takes: plan with it gives the same records as with the original flags
    plan = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--applicants",
            str(sample_paths["applicants"]), "--format", "jsonl"]
    with_file = runner.invoke(app, [*plan, "--schema", str(written)])
    with_flags = runner.invoke(app, [*plan, "--schema", str(sample_paths["schema"]), "--immutable", "housing"])
    assert with_file.exit_code == 0 and with_file.stdout == with_flags.stdout
    # the records on stdout describe the same schema
    rows = {r["column"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert rows["savings"]["kind"] == "ordinal"
    assert json.loads(rows["savings"]["levels"]) == ["none", "little", "moderate", "rich"]
    assert rows["housing"]["mutability"] == "immutable" and rows["age"]["mutability"] == "increasing"
    assert (int(rows["age"]["min"]), int(rows["age"]["max"])) == (frame["age"].min(), frame["age"].max())
    assert rows["label"]["role"] == "target"


def test_round_trip_keeps_the_users_ranges_and_weights(sample_paths, tmp_path):
    written = tmp_path / "schema.toml"
    limits = ("--range", "credit_amount=500.5:", "--range", "duration=:36", "--range", "housing=own,rent",
              "--weight", "age=4", "--weight", "savings=0.25")
    result = runner.invoke(app, _schema_args(sample_paths, "--write", str(written), "--format", "csv", *limits))
    assert result.exit_code == 0, result.stderr
    frame = pd.read_csv(sample_paths["data"])
    spec = SchemaSpec(ranges={"credit_amount": "500.5:", "duration": ":36", "housing": "own,rent"},
                      weights={"age": 4.0, "savings": 0.25})
    from frpd_cli.schema import merge_specs

    original = infer_schema(frame, merge_specs(load_schema_file(sample_paths["schema"]), spec))
    again = infer_schema(frame, load_schema_file(written))
    assert again == original
    by_name = {f.name: f for f in again.features}
    assert (by_name["credit_amount"].low, by_name["credit_amount"].high) == (500.5, None)
    assert (by_name["duration"].low, by_name["duration"].high) == (None, 36.0)
    assert by_name["housing"].allowed == ("own", "rent") and by_name["age"].weight == 4.0
    assert by_name["job"].weight == 1.0 and not by_name["job"].allowed


def _spec_of(path, immutable_extra=()):
    from frpd_cli.schema import merge_specs

    return merge_specs(load_schema_file(path), SchemaSpec(immutable=immutable_extra))


column_names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def frames(draw):
    n = draw(st.integers(3, 12))
    names = draw(st.lists(column_names.filter(lambda s: s != "label"), min_size=1, max_size=5, unique=True))
    data, spec = {}, {"immutable": [], "increasing": [], "ordinal": {}, "exclude": [], "continuous": []}
    for name in names:
        kind = draw(st.sampled_from(["int", "float", "text", "ordinal", "coded"]))
        if kind == "int":
            data[name] = draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n))
        elif kind == "float":
            data[name] = draw(st.lists(st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False), min_size=n,
                                       max_size=n))
            if draw(st.booleans()):
                spec["continuous"].append(name)
        else:
            levels = draw(st.lists(st.text(alphabet="abcxyz\"'\\ =[]#", min_size=1, max_size=4), min_size=1,
                                   max_size=4, unique=True)) if kind != "coded" else [1, 2, 3]
            data[name] = draw(st.lists(st.sampled_from(levels), min_size=n, max_size=n))
            if kind == "ordinal":
                spec["ordinal"][name] = tuple(levels)
                if draw(st.booleans()):
                    spec["increasing"].append(name)
        mutability = draw(st.sampled_from(["free", "immutable", "exclude"]))
        if mutability == "immutable" and name not in spec["increasing"]:
            spec["immutable"].append(name)
        elif mutability == "exclude" and name not in spec["increasing"] and name not in spec["ordinal"] \
                and name not in spec["continuous"] and len(spec["exclude"]) < len(names) - 1:
            spec["exclude"].append(name)
    data["label"] = draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n))
    favorable = draw(st.sampled_from([0, 1]))
    return pd.DataFrame(data), SchemaSpec(favorable=favorable, **{k: tuple(v) if isinstance(v, list) else v
                                                                  for k, v in spec.items()})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=frames())
def test_infer_write_read_gives_the_same_schema(case, tmp_path_factory):
    frame, spec = case
    schema = infer_schema(frame, spec)
    text = schema_to_toml(schema, columns=list(frame.columns), source="'weird \"file\".csv'")
    tomllib.loads(text)                                           # valid TOML whatever the names hold
    path = tmp_path_factory.mktemp("toml") / "schema.toml"
    path.write_text(text, encoding="utf-8")
    assert infer_schema(frame, load_schema_file(path)) == schema


def test_written_keys_are_the_ones_the_reader_knows():
    frame = pd.DataFrame({"age": [20, 30, 40], "job": ["a", "b", "a"], "notes": ["x", "y", "z"],
                          "savings": ["none", "rich", "none"], "label": [0, 1, 1]})
    spec = SchemaSpec(increasing=("savings",), ordinal={"savings": ("none", "rich")}, exclude=("notes",))
    data = tomllib.loads(schema_to_toml(infer_schema(frame, spec), columns=frame.columns))
    assert data == {"target": "label", "favorable": 1, "exclude": ["notes"], "increasing": ["savings"],
                    "categorical": ["job"], "integer": ["age"], "ordinal": {"savings": ["none", "rich"]}}


def test_table_and_model_summary(sample_paths):
    result = runner.invoke(app, _schema_args(sample_paths, "--model", str(sample_paths["model"]), "--format",
                                             "table"), env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "credit_amount" in out and "none < little < moderate < rich" in out and "19 – 75" in out
    assert "(favourable: 1)" in out
    # the acceptance count is the model's own
    model = joblib.load(sample_paths["model"])
    frame = pd.read_csv(sample_paths["data"])
    accepted = int((model.predict_proba(frame.drop(columns="label"))[:, 1] >= 0.5).sum())
    assert f"accepts {accepted} of {len(frame)} training rows" in " ".join(out.split())
    assert "favourable class 1 of the model's classes 0, 1" in " ".join(out.split())


def test_machine_formats_put_the_model_summary_on_stderr(sample_paths, tmp_path):
    result = runner.invoke(app, _schema_args(sample_paths, "--model", str(sample_paths["model"]), "--format",
                                             "jsonl"))
    assert result.exit_code == 0
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["column"] for r in records] == list(pd.read_csv(sample_paths["data"], nrows=0).columns)
    assert "accepts" in result.stderr and "accepts" not in result.stdout
    # one sentence with one full stop, also when the schema file's name follows
    assert result.stderr.rstrip("\n").endswith("labelled favourable).") and ".." not in result.stderr
    written = runner.invoke(app, _schema_args(sample_paths, "--model", str(sample_paths["model"]), "--format",
                                              "jsonl", "--write", str(tmp_path / "w.toml")))
    assert written.exit_code == 0 and "labelled favourable); schema written to" in written.stderr
    quiet = runner.invoke(app, _schema_args(sample_paths, "--format", "jsonl", "--quiet"))
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == "".join(
        line + "\n" for line in runner.invoke(app, _schema_args(sample_paths, "--format", "jsonl")).stdout.splitlines())


def test_write_to_stdout_and_refusals(sample_paths, tmp_path):
    result = runner.invoke(app, _schema_args(sample_paths, "--write", "-"))
    assert result.exit_code == 0
    assert tomllib.loads(result.stdout)["ordinal"] == {"savings": ["none", "little", "moderate", "rich"]}
    clobber = runner.invoke(app, _schema_args(sample_paths, "--write", str(sample_paths["schema"])))
    assert clobber.exit_code == 1 and clobber.stderr.startswith("Error:")
    folder = runner.invoke(app, _schema_args(sample_paths, "--write", str(tmp_path)))
    assert folder.exit_code == 1 and "Error:" in folder.stderr


def test_missing_values_are_counted_not_fatal(tmp_path):
    frame = pd.DataFrame({"age": [20, None, 40, 35], "job": ["a", "b", None, "a"], "label": [0, 1, 1, 0]})
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    result = runner.invoke(app, ["schema", str(path), "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    rows = {r["column"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["age"]["missing"] == 1 and rows["job"]["missing"] == 1
    assert "2 of 4 rows" in result.stderr and "missing" in result.stderr


# --- hints ---------------------------------------------------------------------------------------------------

def _plan_args(paths, *extra):
    return ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(paths["applicants"]), "--format", "csv", *extra]


def test_most_applicants_already_favourable_names_the_other_class(sample_paths, tmp_path):
    # the applicants the model denies are favourable for class 0: --favorable 0 is the wrong way round
    result = runner.invoke(app, _plan_args(sample_paths, "--favorable", "0"))
    assert result.exit_code == 0
    assert "Hint:" in result.stderr and "--favorable 1" in result.stderr
    right = runner.invoke(app, _plan_args(sample_paths))
    assert "Hint:" not in right.stderr


def test_no_favourable_training_row_names_threshold_and_class(sample_paths):
    model = joblib.load(sample_paths["model"])
    frame = pd.read_csv(sample_paths["data"])
    highest = float(model.predict_proba(frame.drop(columns="label"))[:, 1].max())
    threshold = min(0.999999, (highest + 1) / 2)
    result = runner.invoke(app, _plan_args(sample_paths, "--threshold", f"{threshold:.6f}"))
    assert result.exit_code == 0
    assert "Hint: the model accepts none of the 2000 training rows as class 1" in result.stderr
    assert "--threshold" in result.stderr and "--favorable" in result.stderr


def test_identifier_column_used_as_a_feature_is_warned_about(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["data"])
    frame.insert(0, "customer_no", np.arange(1001, 1001 + len(frame)))
    data = tmp_path / "with_id.csv"
    frame.to_csv(data, index=False)
    result = runner.invoke(app, ["schema", str(data), "--format", "csv"])
    assert result.exit_code == 0
    assert "Warning: column 'customer_no'" in result.stderr and "identifier" in result.stderr
    rows = {r["column"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert "identifier" in rows["customer_no"]["note"]
    excluded = runner.invoke(app, ["schema", str(data), "--format", "csv", "--id-column", "customer_no"])
    # (the unconstrained-schema warning stays, and the one on personal_status and age, which name the file: its
    # folder's name holds the test's)
    assert "like an identifier" not in excluded.stderr


def test_id_like_rule():
    n = 30
    frame = pd.DataFrame({
        "row": np.arange(n),                                      # consecutive: an id
        "customer_id": np.random.default_rng(0).permutation(10**6)[:n],   # named like an id
        "income": np.random.default_rng(1).permutation(10**6)[:n],        # distinct integers, not an id
        "amount": np.random.default_rng(2).random(n),             # continuous: never reported
        "code": [f"c{i}" for i in range(n)],                      # text unique per row
        "job": ["a", "b", "c"] * 10,
        "label": [0, 1] * 15,
    })
    schema = infer_schema(frame)
    assert id_like_columns(frame, schema) == ["row", "customer_id", "code"]
    assert id_like_columns(frame.head(5), infer_schema(frame.head(5))) == []     # tiny files say nothing


def test_inspect_schema_reports_every_column(sample_paths):
    frame = pd.read_csv(sample_paths["data"])
    report = inspect_schema(frame, load_schema_file(sample_paths["schema"]))
    assert [r["column"] for r in report.columns] == list(frame.columns)
    amount = next(r for r in report.columns if r["column"] == "credit_amount")
    assert (amount["min"], amount["max"]) == (frame["credit_amount"].min(), frame["credit_amount"].max())
    assert report.decimals["credit_amount"] == 2 and report.decimals["age"] == 0


def test_schema_warns_when_every_feature_may_move_either_way(sample_paths):
    bare = runner.invoke(app, ["schema", str(sample_paths["data"]), "--format", "csv"])
    declared = runner.invoke(app, ["schema", str(sample_paths["data"]), "--schema", str(sample_paths["schema"]),
                                   "--format", "csv"])
    limited = runner.invoke(app, ["schema", str(sample_paths["data"]), "--range", "age=+0:+5", "--format", "csv"])
    assert bare.exit_code == declared.exit_code == limited.exit_code == 0
    assert "every feature may change in either direction" in bare.stderr and "--range age=+0:+12" in bare.stderr
    assert "either direction" not in declared.stderr and "either direction" not in limited.stderr
    assert "Warning" not in bare.stdout and bare.stdout.splitlines()[0] == declared.stdout.splitlines()[0]


def _boolean_credit(folder):
    """Income and a True/False column the model rewards; applicants are refused rows with flag False."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"income": np.round(rng.uniform(10, 90, 240), 1), "flag": rng.random(240) < 0.5})
    frame["label"] = (frame["income"] + 30 * frame["flag"] > 70).astype(int)
    model = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["flag"]),
                                    ("num", MinMaxScaler(), ["income"])])),
        ("clf", LogisticRegression(C=50.0, max_iter=2000)),
    ]).fit(frame[["income", "flag"]], frame["label"])
    proba = model.predict_proba(frame[["income", "flag"]])[:, 1]
    applicants = frame[["income", "flag"]][(proba < 0.3) & ~frame["flag"]].head(5)
    paths = {"data": folder / "bool.csv", "model": folder / "bool.pkl", "applicants": folder / "bool-apps.csv",
             "schema": folder / "bool.toml"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    applicants.to_csv(paths["applicants"], index=False)
    return paths, model


def test_a_boolean_column_declared_ordinal_plans_and_round_trips(tmp_path):
    paths, model = _boolean_credit(tmp_path)
    for declared in ('[false, true]', '["False", "True"]'):
        paths["schema"].write_text(f'increasing = ["flag"]\n\n[ordinal]\nflag = {declared}\n', encoding="utf-8")
        written = tmp_path / "written.toml"
        result = runner.invoke(app, _schema_args(paths, "--write", str(written), "--format", "csv"))
        assert result.exit_code == 0, result.stderr
        row = next(r for r in csv.DictReader(io.StringIO(result.stdout)) if r["column"] == "flag")
        assert (row["kind"], row["mutability"]) == ("ordinal", "increasing")
        assert tomllib.loads(written.read_text(encoding="utf-8"))["ordinal"]["flag"] == [False, True]
        result = runner.invoke(app, ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema",
                                     str(written), "--applicants", str(paths["applicants"]), "--format", "jsonl"])
        assert result.exit_code == 0, result.stderr
        records = [json.loads(line) for line in result.stdout.splitlines()]
        recourses = [r for rec in records for r in rec["recourses"]]
        assert len(records) == 5 and recourses
        for r in recourses:
            assert type(r["features"]["flag"]) is bool        # a level of the column, not its text or a number
            row = pd.DataFrame([r["features"]])
            assert model.predict_proba(row)[0, 1] == pytest.approx(r["probability"], abs=1e-6)
            assert r["probability"] >= 0.5
        # flag only goes up (False to True): some recourses take that step
        assert any(r["features"]["flag"] for r in recourses)


def test_the_range_example_of_the_either_way_warning_is_no_0_1_flag(tmp_path):
    # SBA's first numeric column is the 0/1 flag Selected: '--range Selected=+0:+12' is no move of a flag
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"Selected": rng.integers(0, 2, 50), "New": rng.integers(0, 2, 50),
                          "Term": rng.integers(6, 300, 50), "label": rng.integers(0, 2, 50)})
    data = tmp_path / "loans.csv"
    frame.to_csv(data, index=False)
    result = runner.invoke(app, ["schema", str(data), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    assert "--range Term=+0:+12" in result.stderr and "--range Selected" not in result.stderr
