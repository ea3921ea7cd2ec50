"""Features a person cannot be asked to change, left free: the names frpd recognises, and the warning it prints."""

from __future__ import annotations

import io
import json
import re
import shlex

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.schema import SchemaSpec, ages_without_horizon, infer_schema, sensitive_like_features

runner = CliRunner()

# Every name with the answer a reader gives: protected characteristic, age, or neither (whole words only).
NAMES = {
    "race": "sensitive", "applicant_race": "sensitive", "applicantRace": "sensitive", "RACE": "sensitive",
    "ethnicity": "sensitive", "sex": "sensitive", "Sex": "sensitive", "gender": "sensitive", "is_male": "sensitive",
    "religion": "sensitive", "native-country": "sensitive", "national origin": "sensitive",
    "marital_status": "sensitive", "Personal status": "sensitive", "disability": "sensitive",
    "country_of_birth": "sensitive", "sexual_orientation": "sensitive", "MARRIAGE": "sensitive",
    "is_married": "sensitive", "skin_colour": "sensitive",
    # other languages, accents or not
    "Geschlecht": "sensitive", "Familienstand": "sensitive", "Staatsangehörigkeit": "sensitive",
    "sexe": "sensitive", "état_civil": "sensitive", "Nationalité": "sensitive", "estado civil": "sensitive",
    "raza": "sensitive", "género": "sensitive", "stato_civile": "sensitive", "raça": "sensitive",
    "age": "age", "Age": "age", "age_years": "age", "applicantAge": "age",
    "trace": None, "racetrack": None, "percentage": None, "mileage": None, "page_views": None, "status": None,
    "country": None, "personal_loans": None, "sextant": None, "income": None, "Credit amount": None,
    "civil_servant": None, "colour": None, "Einkommen": None, "situation": None,
}


def _frame(names) -> pd.DataFrame:
    columns = {name: [1.0 + i, 2.0 + i, 3.0 + i, 4.0 + i] for i, name in enumerate(names)}
    return pd.DataFrame({**columns, "label": [0, 1, 0, 1]})


def test_names_are_read_as_a_reader_reads_them():
    schema = infer_schema(_frame(NAMES))
    sensitive, ages = sensitive_like_features(schema)
    assert sensitive == [n for n, kind in NAMES.items() if kind == "sensitive"]
    assert ages == [n for n, kind in NAMES.items() if kind == "age"]


@pytest.mark.parametrize("spec, quiet", [
    (SchemaSpec(immutable=("race", "age")), {"race", "age"}),
    (SchemaSpec(increasing=("age",), decreasing=("race",)), {"race", "age"}),
    (SchemaSpec(ranges={"age": "+0:+5"}), {"age"}),
    (SchemaSpec(vary=("race", "income")), {"race", "age"}),     # the others immutable, race free on purpose
    (SchemaSpec(max_move=0.25), set()),                           # the built-in move bound is no declaration
])
def test_a_declaration_about_a_feature_silences_it(spec, quiet):
    schema = infer_schema(_frame(["race", "age", "income"]), spec)
    sensitive, ages = sensitive_like_features(schema, vary=spec.vary)
    assert set(sensitive) == {"race"} - quiet and set(ages) == {"age"} - quiet


def _fitted(frame: pd.DataFrame, folder) -> str:
    """A logistic pipeline on ``frame``'s features (one-hot text, min-max numbers), saved in ``folder``."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    X = frame.drop(columns="label")
    text = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
    numbers = [c for c in X.columns if c not in text]
    model = Pipeline([("prep", ColumnTransformer([("text", OneHotEncoder(handle_unknown="ignore"), text),
                                                  ("numbers", MinMaxScaler(), numbers)])),
                      ("clf", LogisticRegression(max_iter=1000))]).fit(X, frame["label"])
    path = folder / "model.pkl"
    joblib.dump(model, path)
    return str(path)


def _plan(sample_paths, data, *flags):
    return runner.invoke(app, ["plan", str(data), "--model", str(sample_paths["model"]), "--target", "label",
                               "--id-column", "applicant_id", "--applicants", str(sample_paths["applicants"]),
                               "--format", "csv", *flags])


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "named like" in line]


def test_plan_warns_once_and_the_flags_it_suggests_silence_it(sample_paths, tmp_path):
    # the sample's personal_status (sex and marital status) renamed as the German data names it: the suggested
    # flag is quoted for a shell, and passing it as suggested is what silences the warning
    frame = pd.read_csv(sample_paths["data"]).rename(columns={"personal_status": "Personal status"})
    data = tmp_path / "credit.csv"
    frame.to_csv(data, index=False)
    applicants = pd.read_csv(sample_paths["applicants"]).rename(columns={"personal_status": "Personal status"})
    applicants.to_csv(tmp_path / "applicants.csv", index=False)
    paths = {**sample_paths, "applicants": tmp_path / "applicants.csv", "model": _fitted(frame, tmp_path)}
    free = _plan(paths, data)
    assert free.exit_code == 0, free.stderr
    sensitive, age = _warnings(free.stderr)
    assert "'Personal status'" in sensitive and "protected characteristic" in sensitive
    assert "'age'" in age and "younger" in age
    suggested = shlex.split(re.search(r"\((--immutable .*?), or immutable", sensitive).group(1))
    suggested += shlex.split(re.search(r"Declare (--increasing \S+) \(", age).group(1))
    assert suggested == ["--immutable", "Personal status", "--increasing", "age"]
    declared = _plan(paths, data, *suggested)
    assert declared.exit_code == 0, declared.stderr
    assert _warnings(declared.stderr) == []
    # the recourses of the free run may change what the declared run keeps; the declared run never does
    out = pd.read_csv(io.StringIO(declared.stdout))
    ok = out[out["status"] == "ok"]
    assert len(ok) and (ok["Personal status"] == applicants.set_index("applicant_id").loc[
        ok["applicant"], "Personal status"].to_numpy()).all()


def test_the_schema_file_and_vary_silence_it(sample_paths):
    with_schema = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                      "--schema", str(sample_paths["schema"]),
                                      "--applicants", str(sample_paths["applicants"]), "--format", "csv"])
    assert with_schema.exit_code == 0, with_schema.stderr
    assert _warnings(with_schema.stderr) == []
    varied = _plan(sample_paths, sample_paths["data"], "--vary", "duration", "--vary", "credit_amount",
                   "--vary", "savings")
    assert varied.exit_code == 0, varied.stderr
    assert _warnings(varied.stderr) == []


def test_schema_notes_the_features(sample_paths):
    result = runner.invoke(app, ["schema", str(sample_paths["data"]), "--target", "label", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    notes = {row["column"]: row["note"] for row in json.loads(result.stdout)}
    assert "protected characteristic" in notes["personal_status"] and "age" in notes["age"]
    assert notes["duration"] == "" and notes["housing"] == ""
    assert len(_warnings(result.stderr)) == 2
    declared = runner.invoke(app, ["schema", str(sample_paths["data"]), "--target", "label", "--format", "json",
                                   "--immutable", "personal_status", "--increasing", "age"])
    assert declared.exit_code == 0 and _warnings(declared.stderr) == []
    assert not any(row["note"] for row in json.loads(declared.stdout) if row["role"] == "feature")


def test_the_examples_of_the_docstrings_hold():
    import doctest

    import frpd_cli.schema as schema_module

    for function in (sensitive_like_features, ages_without_horizon):
        finder = doctest.DocTestFinder()
        runner_ = doctest.DocTestRunner()
        for test in finder.find(function, globs=vars(schema_module)):
            assert test.examples and runner_.run(test).failed == 0


def _hints(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "has no horizon" in line]


@pytest.mark.parametrize("flags, bound", [
    (("--increasing", "age"), "builtin"),
    (("--increasing", "age", "--max-move", "none"), "quiet"),             # no bound, on purpose
    (("--increasing", "age", "--max-move", "duration=0.1"), "builtin"),    # another feature's bound
    (("--increasing", "age", "--range", "age=+0:+5"), "quiet"),
    (("--increasing", "age", "--range", "age=18:70"), "quiet"),
    (("--increasing", "age", "--max-move", "age=0.1"), "quiet"),
    (("--increasing", "age", "--max-move", "0.1"), "quiet"),
    (("--immutable", "age"), "quiet"),
])
def test_an_age_that_only_grows_without_a_horizon_draws_a_hint(sample_paths, flags, bound):
    result = _plan(sample_paths, sample_paths["data"], "--immutable", "personal_status", *flags)
    assert result.exit_code == 0, result.stderr
    hints = _hints(result.stderr)
    if bound == "quiet":
        assert hints == []
        return
    assert len(hints) == 1 and hints[0].startswith("Hint: 'age' of ")
    ages = pd.read_csv(sample_paths["data"])["age"]
    years = float(np.floor(0.25 * (ages.max() - ages.min())))   # a quarter of the range, whole (an integer)
    assert f"by up to {years:g} (--max-move 0.25 of its training range" in hints[0]
    # and the longest wait a recourse asks stays within what the hint says
    out = pd.read_csv(io.StringIO(result.stdout))
    ok = out[out["status"] == "ok"]
    assert len(ok)
    start = pd.read_csv(sample_paths["applicants"]).set_index("applicant_id").loc[ok["applicant"], "age"]
    waits = ok["age"].to_numpy() - start.to_numpy()
    assert (waits >= 0).all()
    assert waits.max() <= years


def test_an_ordinal_age_and_the_contexts_without_the_built_in_bound():
    from frpd_cli.cli._hints import age_horizon_hint

    frame = pd.DataFrame({"age_group": ["18-25", "26-35", "36-50", "26-35"], "income": [1.0, 2.0, 3.0, 4.0],
                          "label": [0, 1, 0, 1]})
    spec = SchemaSpec(ordinal={"age_group": ("18-25", "26-35", "36-50")}, increasing=("age_group",), max_move=0.25)
    ages = ages_without_horizon(infer_schema(frame, spec), spec)
    assert ages == [("age_group", 1)]                    # the move bound limits an ordinal in levels: 1 of 2 steps
    assert "may raise it by up to 1 level (--max-move 0.25 of its levels" in age_horizon_hint(ages, "'x.csv'")
    two = pd.DataFrame({"age_group": ["young", "old", "young", "old"], "income": [1.0, 2.0, 3.0, 4.0],
                        "label": [0, 1, 0, 1]})
    spec2 = SchemaSpec(ordinal={"age_group": ("young", "old")}, increasing=("age_group",), max_move=0.25)
    ages2 = ages_without_horizon(infer_schema(two, spec2), spec2)
    assert ages2 == [("age_group", None)]                # one step: the bound reaches every level
    assert "by any number of levels" in age_horizon_hint(ages2, "'x.csv'")
    limited = SchemaSpec(ordinal=spec.ordinal, increasing=("age_group",), max_move=0.25,
                         ranges={"age_group": "18-25,26-35"})
    assert ages_without_horizon(infer_schema(frame, limited), limited) == []
    # evaluate audits declared bounds only (no built-in bound in its spec): no hint there
    declared = SchemaSpec(ordinal=spec.ordinal, increasing=("age_group",))
    assert ages_without_horizon(infer_schema(frame, declared), declared) == []
