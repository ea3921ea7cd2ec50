"""Levels that record missing information (``Unknown``, ``Other/Unknown``): no recourse moves a feature to one
(advice to withhold information is no recourse), an applicant already there may stay, and a --range listing the
level allows it again."""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.schema import SchemaSpec, infer_schema, missing_like_levels

runner = CliRunner()

FEATURES = ["income", "occupation", "sector"]
OCCUPATIONS = ["clerk", "driver", "nurse", "Other/Unknown"]
SECTORS = ["retail", "health", "public", "unknown"]


@pytest.fixture(scope="module")
def unknowns(tmp_path_factory):
    """1,200 rows where the label rewards the levels of missing information most (occupation Other/Unknown,
    sector unknown), then income; a logistic pipeline; applicants it turns down, some of them already at
    Other/Unknown."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    rng = np.random.default_rng(3)
    n = 1200
    frame = pd.DataFrame({"income": np.round(rng.uniform(10, 90, n), 1),
                          "occupation": rng.choice(OCCUPATIONS, n), "sector": rng.choice(SECTORS, n)})
    score = (frame["income"] + 35 * (frame["occupation"] == "Other/Unknown") + 30 * (frame["sector"] == "unknown")
             + 10 * (frame["occupation"] == "nurse") + 8 * (frame["sector"] == "public"))
    frame["label"] = (score > 75).astype(int)
    model = Pipeline([("prep", ColumnTransformer([("text", OneHotEncoder(handle_unknown="ignore"),
                                                   ["occupation", "sector"]),
                                                  ("numbers", MinMaxScaler(), ["income"])])),
                      ("clf", LogisticRegression(C=10.0, max_iter=2000))]).fit(frame[FEATURES], frame["label"])
    folder = tmp_path_factory.mktemp("unknowns")
    data, model_path, applicants = folder / "train.csv", folder / "model.pkl", folder / "applicants.csv"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    denied = frame[FEATURES][model.predict_proba(frame[FEATURES])[:, 1] < 0.5]
    denied = pd.concat([denied[denied["occupation"] != "Other/Unknown"].head(12),
                        denied[denied["occupation"] == "Other/Unknown"].head(4)])
    denied.to_csv(applicants, index=False)
    return {"data": data, "model": model_path, "applicants": applicants, "model_obj": model, "denied": denied}


def _plan(u, *extra):
    result = runner.invoke(app, ["plan", str(u["data"]), "--model", str(u["model"]), "--applicants",
                                 str(u["applicants"]), "--format", "jsonl", *extra])
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()], result.stderr


def _moves_to(records, feature, level):
    return [(r["applicant"], c["rank"]) for r in records for c in r.get("recourses", [])
            if c["changes"].get(feature, [None, None])[1] == level]


def test_missing_like_levels_are_words_or_whole_phrases():
    levels = ["Other/Unknown", "UNKNOWN", "unknown_status", "missing", "Unspecified", "?", "n/a", "N/A",
              "Not stated", "not_stated", "prefer not to say", "none", "known", "Other", "unknowingly", "nan-free",
              "Never-married"]
    assert missing_like_levels(levels) == ("Other/Unknown", "UNKNOWN", "unknown_status", "missing", "Unspecified",
                                           "?", "n/a", "N/A", "Not stated", "not_stated", "prefer not to say")


def test_withheld_only_where_planning_asks_and_nothing_is_declared():
    frame = pd.DataFrame({"job": ["a", "b", "unknown", "a"], "edu": ["x", "y", "x", "unknown"],
                          "state": ["unknown", "unknown", "unknown", "unknown"], "label": [0, 1, 0, 1]})
    assert all(not f.withheld for f in infer_schema(frame).features)        # the library's default: as declared
    spec = SchemaSpec(withhold_missing=True, immutable=("edu",), ranges={})
    schema = infer_schema(frame, spec)
    assert schema.feature("job").withheld == ("unknown",)
    assert schema.feature("edu").withheld == ()                             # immutable: never moves anyway
    assert schema.feature("state").withheld == ()                           # no other level to move to
    listed = infer_schema(frame, SchemaSpec(withhold_missing=True, ranges={"job": "a,b,unknown"}))
    assert listed.feature("job").withheld == () and listed.feature("job").allowed == ("a", "b", "unknown")
    job = schema.feature("job")
    assert job.in_range(["a", "b", "unknown"]).tolist() == [True, True, False]
    # stored and read back with the artifacts' schema
    from frpd_cli.schema import Schema

    assert Schema.from_dict(schema.to_dict()).feature("job").withheld == ("unknown",)


def test_levels_of_a_large_column_are_keyed_once_each(monkeypatch):
    # a training column of a million rows holds a few levels: the range check keys each distinct level once (it
    # keyed every row, seconds at a million rows), with the same answer as keying every value on its own,
    # whatever the values' types (1, 1.0 and "1" are one level; True is not 1; missing values key by kind)
    import frpd_cli.encoding as encoding
    from frpd_cli.encoding import category_key
    from frpd_cli.schema import Feature

    rng = np.random.default_rng(0)
    mixes = [["a", "b", "Other/Unknown", np.nan, None], [1, 1.0, "1", True, 2, 0, False, np.nan],
             [1.5, 2.0, np.float32(1.5), np.int64(2)], [True, False, np.True_], ["1", "1.0", "2", pd.NA]]
    features = [Feature("c", "categorical", levels=("a", "b", "Other/Unknown"), withheld=("Other/Unknown",)),
                Feature("c", "categorical", levels=("a", "b"), allowed=("a",)),
                Feature("c", "categorical", levels=(1, 2), allowed=("1.0",), withheld=("True", "nan")),
                Feature("c", "categorical", levels=(1, 2), withheld=(2, "None", "<NA>"))]
    for mix in mixes:
        for _ in range(20):
            values = [mix[i] for i in rng.integers(0, len(mix), size=rng.integers(0, 12))]
            for f in features:
                keys, withheld = {category_key(v) for v in f.allowed}, {category_key(v) for v in f.withheld}
                want = [(not keys or category_key(v) in keys) and category_key(v) not in withheld for v in values]
                for form in (values, np.array(values, dtype=object), pd.Series(values, dtype=object)):
                    assert f.in_range(form).tolist() == want, (values, f)
    calls = []
    monkeypatch.setattr(encoding, "category_key", lambda v: calls.append(v) or category_key(v))
    column = pd.Series(["Private", "Other/Unknown", None, "Government"] * 50_000, dtype="str").to_numpy()
    job = Feature("job", "categorical", levels=("Government", "Other/Unknown", "Private"), withheld=("Other/Unknown",))
    ok = job.in_range(column)
    assert ok.tolist() == [True, False, True, True] * 50_000
    assert len(calls) <= 4 + 50_000          # the withheld level, the distinct levels, each missing value
    present = pd.Series(["Private", "Other/Unknown", "Government"] * 50_000, dtype="str").to_numpy()
    calls.clear()
    assert job.in_range(present).tolist() == [True, False, True] * 50_000 and len(calls) <= 4


def test_no_recourse_moves_to_missing_information(unknowns):
    # the levels the model rewards most are the levels of missing information: without the rule the plans ask
    # for them (checked below with them allowed), with it no recourse does
    records, stderr = _plan(unknowns)
    assert not _moves_to(records, "occupation", "Other/Unknown")
    assert not _moves_to(records, "sector", "unknown")
    planned = [r for r in records if r["status"] == "ok"]
    assert len(planned) >= len(unknowns["denied"]) // 2
    assert "Note: no recourse moves 'occupation' (Other/Unknown), 'sector' (unknown)" in " ".join(stderr.split())
    # every recourse re-predicted favourable by the model itself; an applicant already at Other/Unknown may stay
    model, stayed = unknowns["model_obj"], 0
    denied = unknowns["denied"].reset_index(drop=True)
    for r in planned:
        was = denied.loc[int(r["applicant"]), "occupation"]
        for c in r["recourses"]:
            row = pd.DataFrame([c["features"]])[FEATURES]
            assert model.predict_proba(row)[0, 1] >= 0.5
            stayed += was == "Other/Unknown" and c["features"]["occupation"] == "Other/Unknown"
    assert stayed > 0


def test_a_range_listing_the_level_allows_it(unknowns):
    records, stderr = _plan(unknowns, "--range", "occupation=" + ",".join(OCCUPATIONS),
                            "--range", "sector=" + ",".join(SECTORS))
    assert _moves_to(records, "occupation", "Other/Unknown") and _moves_to(records, "sector", "unknown")
    assert "missing information" not in stderr


def test_schema_shows_what_plan_leaves_out(unknowns, tmp_path):
    result = runner.invoke(app, ["schema", str(unknowns["data"]), "--format", "jsonl",
                                 "--write", str(tmp_path / "s.toml")])
    assert result.exit_code == 0, result.stderr
    notes = {r["column"]: r["note"] for r in map(json.loads, result.stdout.splitlines())}
    assert notes["occupation"].startswith("no recourse moves it to Other/Unknown")
    assert notes["sector"].startswith("no recourse moves it to unknown") and notes["income"] == ""
    # not written as a range: plan leaves the levels out again from the file, and the file lists no range
    assert "[range]" not in (tmp_path / "s.toml").read_text()
    records, _ = _plan(unknowns, "--schema", str(tmp_path / "s.toml"))
    assert not _moves_to(records, "occupation", "Other/Unknown")


def test_evaluate_checks_declared_limits_only(unknowns, tmp_path):
    # a plan that moves to a level of missing information is no range violation for evaluate, which audits what
    # was declared (as it does with the built-in move bound)
    records, _ = _plan(unknowns, "--range", "occupation=" + ",".join(OCCUPATIONS),
                       "--range", "sector=" + ",".join(SECTORS))
    plans = tmp_path / "plans.jsonl"
    plans.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = runner.invoke(app, ["evaluate", str(unknowns["data"]), "--model", str(unknowns["model"]),
                                 "--plans", str(plans), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    rows = summary if isinstance(summary, list) else summary.get("methods", [summary])
    assert all(row["violations mean"] == 0 for row in rows)
