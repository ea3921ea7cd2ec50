"""The move bound (``--max-move``): no recourse moves a numeric feature by more than a share of its training range
from the applicant's value, in every stage; applicants it leaves without candidates are told so."""

from __future__ import annotations

import json
import math

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.exceptions import SchemaError
from frpd_cli.schema import DEFAULT_MAX_MOVE, Feature, SchemaSpec, infer_schema, load_schema_file, schema_to_toml

runner = CliRunner()
FEATURES = ["income", "years", "sector", "debt"]
NUMERIC = ["income", "years", "debt"]


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _records(result):
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_credit):
    """300 rows; the label rises with income and years, falls with debt; the denied applicants sit low."""
    return tiny_credit(tmp_path_factory.mktemp("max_move"), seed=5, n=300, cut=60, below=0.2, n_applicants=12)


def _plan(c, *extra):
    return _run("plan", c["data"], "--model", c["model"], "--applicants", c["applicants"], "--format", "jsonl",
                *extra)


def _largest_moves(frame: pd.DataFrame, raw: list, records: list, names) -> list[float]:
    """Per recourse: its largest move of a numeric feature, as a share of the feature's training range."""
    spans = {n: float(frame[n].max() - frame[n].min()) for n in names}
    out = []
    for rec in records:
        x0 = raw[int(rec["applicant"])] if isinstance(raw, list) else raw[str(rec["applicant"])]
        for r in rec["recourses"] or []:
            out.append(max(abs(float(r["features"][n]) - float(x0[n])) / spans[n] for n in names))
    return out


# ------------------------------------------------------------------------------------------------ the bound


@pytest.mark.parametrize("kind", ["continuous", "integer"])
@pytest.mark.parametrize("relative", [None, "+0:+12", "-20%:+10%"])
def test_bounds_are_the_tighter_of_the_move_bound_and_the_other_limits(kind, relative):
    from frpd_cli.schema import parse_range

    f = Feature("x", kind, low=-30.0, high=1500.0)
    if relative:
        f = parse_range(Feature("x", kind), relative)
    f = Feature(**{**f.__dict__, "max_move": 7.5, "max_move_share": 0.25})
    origins = np.array([0.0, 3.0, 37.0, -12.0, 250.0, 1346.0])
    low, high = f.bounds(origins)
    for o, lo, hi in zip(origins, low, high):
        rel_lo, rel_hi = -math.inf, math.inf
        if relative == "+0:+12":
            rel_lo, rel_hi = o, o + 12
        elif relative == "-20%:+10%":
            rel_lo, rel_hi = o - 0.2 * abs(o), o + 0.1 * abs(o)
        want_lo = max(rel_lo, o - 7.5, f.low if f.low is not None else -math.inf)
        want_hi = min(rel_hi, o + 7.5, f.high if f.high is not None else math.inf)
        if kind == "integer":
            want_lo, want_hi = math.ceil(want_lo - 1e-9), math.floor(want_hi + 1e-9)
        assert (lo, hi) == pytest.approx((want_lo, want_hi)), (o, relative)
        values = np.linspace(o - 20, o + 20, 161)
        assert f.in_range(values, o).tolist() == [bool(want_lo <= v <= want_hi) for v in values]


def test_the_bound_is_a_share_of_each_numeric_features_training_range(tiny):
    frame = tiny["frame"]
    schema = infer_schema(frame, SchemaSpec(max_move=0.2, max_moves={"debt": 0.5, "years": math.inf},
                                            immutable=("income",)))
    assert schema.feature("debt").max_move == pytest.approx(0.5 * (frame["debt"].max() - frame["debt"].min()))
    assert schema.feature("debt").max_move_share == 0.5
    assert schema.feature("years").max_move is None            # none for this feature
    assert schema.feature("income").max_move is None           # immutable: nothing to bound
    assert schema.feature("sector").max_move is None           # categorical
    plain = infer_schema(frame, SchemaSpec())                  # the library declares no bound unless asked
    assert all(f.max_move is None for f in plain.features)


def test_the_bound_is_written_and_read_back_in_toml(tiny, tmp_path):
    frame = tiny["frame"]
    schema = infer_schema(frame, SchemaSpec(max_move=0.2, max_moves={"debt": 0.5, "years": math.inf}))
    text = schema_to_toml(schema)
    assert "[max_move]\ndefault = 0.2\nyears = \"none\"\ndebt = 0.5\n" in text
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert infer_schema(frame, load_schema_file(path)) == schema
    path.write_text('max_move = 0.3\n')                        # a bare number is the default
    spec = load_schema_file(path)
    assert (spec.max_move, spec.max_moves) == (0.3, {})
    path.write_text('[max_move]\ndefault = "none"\nincome = 0.1\n')
    spec = load_schema_file(path)
    assert (spec.max_move, spec.max_moves) == (math.inf, {"income": 0.1})


@pytest.mark.parametrize("body", ['max_move = 0', 'max_move = 1.5', 'max_move = "some"', 'max_move = true',
                                  '[max_move]\nincome = -0.1'])
def test_a_bad_bound_in_the_schema_file_is_refused(tmp_path, body):
    path = tmp_path / "s.toml"
    path.write_text(body + "\n")
    with pytest.raises(SchemaError, match="max_move in .*share of the feature's training range"):
        load_schema_file(path)


@pytest.mark.parametrize("value", ["0", "1.5", "abc", "-0.2", "income=0", "income=x"])
def test_a_bad_max_move_is_a_usage_error(tiny, value):
    result = _plan(tiny, "--max-move", value)
    assert result.exit_code == 2 and result.stdout == ""
    assert "share of the feature's training range" in result.stderr


def test_two_defaults_are_a_usage_error(tiny):
    result = _plan(tiny, "--max-move", "0.2", "--max-move", "0.3")
    assert result.exit_code == 2 and "two --max-move" in result.stderr


def test_max_move_on_a_column_that_is_not_a_feature_is_a_usage_error(tiny):
    result = _plan(tiny, "--max-move", "nosuch=0.2")
    assert result.exit_code == 2 and "nosuch" in result.stderr


def test_a_bound_on_an_unordered_categorical_is_refused_not_ignored(tiny, tmp_path):
    """A share declared for a categorical feature without an order would bound nothing: a usage error on the
    command line, an error from the schema file, naming the column and what to declare instead; ``none`` (no
    bound, what such a feature has) passes, and so does the default share, which applies to numeric features."""
    result = _plan(tiny, "--max-move", "sector=0.3")
    assert result.exit_code == 2 and result.stdout == ""
    assert "'sector' has a move bound (0.3)" in result.stderr and "[ordinal]" in result.stderr
    frame = pd.read_csv(tiny["data"])
    with pytest.raises(SchemaError, match="'sector' has a move bound"):
        infer_schema(frame, SchemaSpec(max_moves={"sector": 0.3}))
    spec_file = tmp_path / "s.toml"
    spec_file.write_text('[max_move]\nsector = 0.3\n')
    result = _plan(tiny, "--schema", spec_file)
    assert result.exit_code != 0 and "'sector' has a move bound (0.3)" in result.stderr
    assert infer_schema(frame, SchemaSpec(max_moves={"sector": math.inf})).feature("sector").max_move is None
    assert _plan(tiny, "--max-move", "sector=none", "--max-move", "0.2").exit_code == 0


# ------------------------------------------------------------------------------------------------ plans


@pytest.mark.parametrize("extra", [(), ("--max-move", "0.15"), ("--max-move", "0.1", "--max-move", "debt=none"),
                                   ("--margin", "0"), ("--no-sparsify",)])
def test_every_recourse_stays_within_the_bound(tiny, extra):
    records = _records(_plan(tiny, *extra))
    raw = tiny["raw"].to_dict("records")
    share = float(extra[1]) if extra[:1] == ("--max-move",) else DEFAULT_MAX_MOVE
    bounded = [n for n in NUMERIC if not ("debt=none" in extra and n == "debt")]
    moves = _largest_moves(tiny["frame"], raw, records, bounded)
    assert len(moves) >= 12 and max(moves) <= share + 1e-9
    margin = 0.0 if "--margin" in extra else 0.05
    for rec in records:
        for r in rec["recourses"] or []:
            assert tiny["estimator"].predict_proba(pd.DataFrame([r["features"]])[FEATURES])[0, 1] >= 0.5 + margin


def test_without_the_bound_the_same_applicants_get_far_moves(tiny):
    """The bound is what keeps the recourses near: without it some move by more than the default share."""
    records = _records(_plan(tiny, "--max-move", "none"))
    moves = _largest_moves(tiny["frame"], tiny["raw"].to_dict("records"), records, NUMERIC)
    assert max(moves) > DEFAULT_MAX_MOVE


def test_select_and_interpolate_keep_the_bound(tiny, tmp_path):
    selection = tmp_path / "sel"
    result = _run("select", tiny["data"], "--model", tiny["model"], "--applicants", tiny["applicants"],
                  "--out", selection, "--max-move", "0.15")
    assert result.exit_code == 0, result.stderr
    result = _run("interpolate", "--selection", selection, "--model", tiny["model"], "--out", tmp_path / "plans",
                  "--format", "jsonl")
    records = _records(result)
    moves = _largest_moves(tiny["frame"], tiny["raw"].to_dict("records"), records, NUMERIC)
    assert moves and max(moves) <= 0.15 + 1e-9
    other = tmp_path / "other.toml"
    other.write_text("max_move = 0.3\n", encoding="utf-8")
    refused = _run("interpolate", "--selection", selection, "--model", tiny["model"], "--out", tmp_path / "plans2",
                   "--schema", other)
    assert refused.exit_code == 1 and "max_move of 'income' 0.3 (selection: 0.15)" in refused.stderr


@pytest.fixture(scope="module")
def gap(tmp_path_factory):
    """One feature x in 0..100 with no training rows between 20 and 60; favourable above about 40."""
    tmp = tmp_path_factory.mktemp("gap")
    x = np.concatenate([np.linspace(0, 20, 60), np.linspace(60, 100, 60)])
    frame = pd.DataFrame({"x": np.round(x, 2), "label": (x > 40).astype(int)})
    model = Pipeline([("prep", MinMaxScaler()), ("clf", LogisticRegression(C=1000.0, max_iter=5000))])
    model.fit(frame[["x"]], frame["label"])
    data, model_path, app_path = tmp / "train.csv", tmp / "model.pkl", tmp / "applicants.csv"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    pd.DataFrame({"x": [10.0, 12.0]}).to_csv(app_path, index=False)
    return {"data": data, "model": model_path, "applicants": app_path, "estimator": model}


def _gap_plan(g, *extra):
    return _records(_run("plan", g["data"], "--model", g["model"], "--applicants", g["applicants"], "--format",
                         "jsonl", "--k", "1", *extra))


def test_an_applicant_whose_favourable_rows_are_all_beyond_the_bound_is_told_so(gap):
    """Every favourable row lies at 60 or more; within 0.25 of the range (25) no point is favourable either."""
    assert gap["estimator"].predict_proba(pd.DataFrame({"x": [40.0]}))[0, 1] < 0.5
    for rec in _gap_plan(gap):
        assert rec["status"] == "infeasible"
        assert "--max-move 0.25 of its training range" in rec["reason"]
        assert "even after moving the others within --max-move" in rec["reason"]
    assert all(rec["recourses"] for rec in _gap_plan(gap, "--max-move", "none"))



def test_a_tighter_range_is_named_and_the_move_bound_it_covers_is_not(gap):
    """With --range x=+0:+5 every favourable row is out of range: the bound of 25 rules out nothing more, and a
    reason that also said 'move x by more than 25' would send the user to --max-move, which cannot help
    (measured on COMPAS with --range age=+0:+5: 63 of the 150 MLP plans' reasons named both)."""
    for rec in _gap_plan(gap, "--range", "x=+0:+5"):
        assert rec["status"] == "infeasible"
        assert "are outside the range of x" in rec["reason"]
        assert "move x by more than" not in rec["reason"]
    # a range wider than the bound leaves the bound in the reason
    for rec in _gap_plan(gap, "--range", "x=+0:+80"):
        assert rec["status"] == "infeasible" and "move x by more than 25" in rec["reason"]

def test_favourable_rows_moved_into_the_bound_become_prototypes(gap):
    """With a bound of 0.45 (45) no favourable training row is within it (the nearest is 60), but rows moved to
    55 / 57 at most are still favourable: the plan holds a recourse, flagged projected, inside the bound."""
    for rec, x0 in zip(_gap_plan(gap, "--max-move", "0.45"), (10.0, 12.0)):
        assert rec["status"] == "ok", rec["reason"]
        (r,) = rec["recourses"]
        assert r["projected"] is True
        assert abs(r["features"]["x"] - x0) <= 45 + 1e-9
        assert gap["estimator"].predict_proba(pd.DataFrame({"x": [r["features"]["x"]]}))[0, 1] >= 0.55


def test_evaluate_audits_only_a_declared_bound(tiny, tmp_path):
    records = _records(_plan(tiny, "--max-move", "none"))
    plans = tmp_path / "plans.jsonl"
    plans.write_text("".join(json.dumps(r) + "\n" for r in records))
    args = ("evaluate", tiny["data"], "--model", tiny["model"], "--plans", plans, "--applicants",
            tiny["applicants"], "--format", "json", "--per-applicant")
    plain = json.loads(_run(*args).stdout)
    assert sum(row["violations"] or 0 for row in plain) == 0
    raw = tiny["raw"].to_dict("records")
    far = sum(m > 0.25 + 1e-9 for n in NUMERIC for m in _largest_moves(tiny["frame"], raw, records, [n]))
    declared = json.loads(_run(*args, "--max-move", "0.25").stdout)
    assert sum(row["violations"] or 0 for row in declared) == far > 0       # one per feature moved too far


# ------------------------------------------------------------------------------------------------ real data


def test_sample_plans_stay_within_the_default_bound(sample_paths):
    records = _records(_run("plan", sample_paths["data"], "--model", sample_paths["model"], "--schema",
                            sample_paths["schema"], "--applicants", sample_paths["applicants"], "--format", "jsonl"))
    frame = pd.read_csv(sample_paths["data"])
    raw = {str(r["applicant_id"]): r for r in pd.read_csv(sample_paths["applicants"]).to_dict("records")}
    moves = _largest_moves(frame, raw, records, ["age", "duration", "credit_amount"])
    assert len(moves) >= 40 and max(moves) <= DEFAULT_MAX_MOVE + 1e-9


def test_graph_plans_stay_within_the_default_bound(sample_paths, tmp_path):
    graph = tmp_path / "graph"
    common = ["--model", sample_paths["model"], "--schema", sample_paths["schema"]]
    built = _run("build-graph", sample_paths["data"], *common, "--out", graph)
    assert built.exit_code == 0, built.stderr
    frame = pd.read_csv(sample_paths["data"])
    raw = {str(r["applicant_id"]): r for r in pd.read_csv(sample_paths["applicants"]).to_dict("records")}
    names = ["age", "duration", "credit_amount"]
    for extra, bounded in (((), True), (("--max-move", "none"), False)):
        records = _records(_run("plan", sample_paths["data"], *common, "--applicants", sample_paths["applicants"],
                                "--graph", graph, "--format", "jsonl", *extra))
        moves = _largest_moves(frame, raw, records, names)
        assert len(moves) >= 20
        assert (max(moves) <= DEFAULT_MAX_MOVE + 1e-9) == bounded     # without the bound some end farther


def test_german_plans_stay_within_the_default_bound(german, tmp_path):
    applicants = tmp_path / "applicants.csv"
    german.denied.to_csv(applicants, index=False)
    records = _records(_run("plan", german.train_path, "--model", german.model_path, "--applicants", applicants,
                            "--immutable", "Personal status", "--format", "jsonl"))
    frame = pd.read_csv(german.train_path)
    moves = _largest_moves(frame, german.denied.to_dict("records"), records, ["Duration", "Credit amount", "Age"])
    # measured 54 recourses (68 before a recourse another one of its plan dominates left the plan)
    assert len(moves) >= 45 and max(moves) <= DEFAULT_MAX_MOVE + 1e-9
    assert sum(bool(rec["recourses"]) for rec in records) >= 0.7 * len(records)


def test_an_integer_features_bound_is_stated_in_whole_units():
    # hours_per_week (1-99): a quarter of its range is 24.5, and the moves it allows are of at most 24 hours
    from frpd_cli.schema import Feature

    hours = Feature("hours_per_week", "integer", max_move=24.5, max_move_share=0.25)
    assert hours.move_limit == 24.0
    assert hours.move_text == "a move of at most 24 either way (--max-move 0.25 of its training range)"
    assert hours.bounds(np.array([40.0]))[1][0] == 64.0           # the same limit the stages hold
    amount = Feature("amount", "continuous", max_move=24.5, max_move_share=0.25)
    assert amount.move_limit == 24.5 and "at most 24.5 either way" in amount.move_text
    exact = Feature("n", "integer", max_move=3.0, max_move_share=0.25)
    assert exact.move_limit == 3.0
