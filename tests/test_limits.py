"""The user's limits: --vary, --range, --weight (flags and schema file), each against a brute-force oracle."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.choice import PlanSettings, select_for_applicant
from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set
from frpd_cli.encoding import fit_encoder
from frpd_cli.exceptions import SchemaError
from frpd_cli.model import load_model
from frpd_cli.projection import candidate_mask
from frpd_cli.schema import DeclarationError, SchemaSpec, infer_schema, load_schema_file, merge_specs

runner = CliRunner()
FEATURES = ["income", "years", "sector", "debt"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_credit):
    """150 rows; the label rises with income and years, falls with debt; sector c helps a little."""
    return tiny_credit(tmp_path_factory.mktemp("limits"), seed=11, n=150, cut=55, below=0.3, n_applicants=5)


def _training(c, spec: SchemaSpec):
    schema = infer_schema(c["frame"], spec)
    model = load_model(c["model"], favorable=schema.favorable, feature_names=schema.feature_names)
    return build_training_set(c["frame"], schema, model), model


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _plan(c, *extra, fmt="jsonl"):
    return _run("plan", c["data"], "--model", c["model"], "--applicants", c["applicants"], "--format", fmt, *extra)


def _records(result):
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def _weighted_distance(frame: pd.DataFrame, a: dict, b: dict, weights: dict) -> float:
    """Brute force: min-max scaled numeric differences, one-hot categories (sqrt 2 apart), weights squared in."""
    total = 0.0
    for name in FEATURES:
        w = weights.get(name, 1.0)
        if name == "sector":
            total += w * (2.0 if a[name] != b[name] else 0.0)
        else:
            span = frame[name].max() - frame[name].min()
            total += w * ((float(a[name]) - float(b[name])) / span) ** 2
    return float(np.sqrt(total))


# ----------------------------------------------------------------------------------------------- schema


def test_vary_makes_every_other_feature_immutable(tiny):
    schema = infer_schema(tiny["frame"], SchemaSpec(vary=("income", "debt"), decreasing=("debt",)))
    assert {f.name: f.mutability for f in schema.features} == {
        "income": "free", "years": "immutable", "sector": "immutable", "debt": "decreasing"}


def test_vary_conflicts_are_refused(tiny):
    with pytest.raises(DeclarationError, match="both vary"):
        infer_schema(tiny["frame"], SchemaSpec(vary=("income",), immutable=("income",)))
    with pytest.raises(DeclarationError, match="not in the vary list"):
        infer_schema(tiny["frame"], SchemaSpec(vary=("income",), increasing=("years",)))
    with pytest.raises(SchemaError, match="is not in"):
        infer_schema(tiny["frame"], SchemaSpec(vary=("nope",)))
    with pytest.raises(SchemaError, match="not a feature"):
        infer_schema(tiny["frame"], SchemaSpec(vary=("income",), exclude=("income",)))


def test_flags_override_the_file_vary_and_immutable_column_by_column():
    file = SchemaSpec(vary=("income", "debt"), immutable=("years",))
    merged = merge_specs(file, SchemaSpec(immutable=("debt",)))
    assert merged.vary == ("income",) and merged.immutable == ("years", "debt")
    merged = merge_specs(file, SchemaSpec(vary=("years", "income")))
    assert merged.vary == ("years", "income") and merged.immutable == ()


def test_schema_file_reads_vary_range_and_weight(tmp_path, tiny):
    path = tmp_path / "schema.toml"
    path.write_text('vary = ["income", "sector"]\n[range]\nincome = "20:"\nsector = ["a", "c"]\ndebt = [0, 10]\n'
                    '[weight]\nincome = 4\n', encoding="utf-8")
    spec = load_schema_file(path)
    schema = infer_schema(tiny["frame"], spec)
    income, sector, debt = (schema.feature(n) for n in ("income", "sector", "debt"))
    assert (income.low, income.high, income.weight) == (20.0, None, 4.0)
    assert sector.allowed == ("a", "c") and (debt.low, debt.high) == (0.0, 10.0)
    assert schema.feature("years").mutability == "immutable"
    assert income.in_range([19.9, 20, 1e6]).tolist() == [False, True, True]
    assert sector.in_range(["a", "b", "c"]).tolist() == [True, False, True]
    # stored schemas (artifacts) carry the limits and read them back
    again = type(schema).from_dict(json.loads(json.dumps(schema.to_dict())))
    assert again == schema


@pytest.mark.parametrize("body, message", [
    ('[range]\nincome = "30:20"\n', "LO <= HI"),
    ('[range]\nincome = "x:2"\n', "finite numbers"),
    ('[range]\nsector = ["a", "z"]\n', "training"),
    ('[weight]\nincome = 0\n', "> 0"),
    ('[weight]\nincome = "2"\n', "numbers > 0"),
    ('vary = "income"\n', "list of column names"),
])
def test_schema_file_refuses_bad_limits(tmp_path, tiny, body, message):
    path = tmp_path / "schema.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(SchemaError, match=message):
        infer_schema(tiny["frame"], load_schema_file(path))


# ----------------------------------------------------------------------------------------------- weight


def test_weighted_encoding_gives_the_weighted_distance(tiny):
    weights = {"income": 4.0, "sector": 0.25, "debt": 9.0}
    frame = tiny["frame"]
    schema = infer_schema(frame, SchemaSpec(weights=weights))
    encoder = fit_encoder(schema, frame)
    Z = encoder.encode(frame[FEATURES].head(20))
    rows = frame[FEATURES].head(20).to_dict("records")
    for i in range(0, 20, 3):
        for j in range(1, 20, 4):
            assert np.linalg.norm(Z[i] - Z[j]) == pytest.approx(_weighted_distance(frame, rows[i], rows[j], weights))
    # decoding undoes the scaling: training rows round-trip
    back = encoder.decode(Z)
    pd.testing.assert_frame_equal(back, frame[FEATURES].head(20).reset_index(drop=True), check_dtype=False)


def test_nearest_prototypes_are_the_weighted_k_nearest(tiny):
    weights = {"years": 50.0}
    training, model = _training(tiny, SchemaSpec(weights=weights))
    settings = PlanSettings(method="nearest", k=3, theta=0.0, immutable_policy="filter")
    frame = tiny["frame"]
    for _, x0 in tiny["raw"].iterrows():
        x0_enc = training.encoder.encode(x0.to_frame().T)[0]
        codes0 = training.encoder.constraint_codes(x0.to_frame().T)
        out = select_for_applicant(training, x0_enc, codes0, x0, settings, model=model)[0]
        fav = np.flatnonzero(training.favorable)
        dist = np.array([_weighted_distance(frame, x0.to_dict(), frame.iloc[r].to_dict(), weights) for r in fav])
        expected = fav[np.argsort(dist, kind="stable")[:3]]
        assert sorted(out.rows.tolist()) == sorted(expected.tolist())


def test_plan_costs_are_weighted_distances(tiny):
    weights = {"income": 4.0, "debt": 0.5}
    records = _records(_plan(tiny, "--weight", "income=4", "--feature-weight", "debt=0.5", "--scale", "minmax"))
    raw = tiny["raw"].to_dict("records")
    assert any(rec["recourses"] for rec in records)
    for rec in records:
        x0 = raw[int(rec["applicant"])]
        for r in rec["recourses"]:
            assert r["cost"] == pytest.approx(_weighted_distance(tiny["frame"], x0, r["features"], weights),
                                              abs=2e-6)


def test_a_heavy_weight_steers_recourses_away_from_a_feature(tiny):
    plain = _records(_plan(tiny, "--method", "nearest"))
    heavy = _records(_plan(tiny, "--method", "nearest", "--weight", "income=1000"))
    raw = tiny["raw"].to_dict("records")

    def mean_income_move(records):
        moves = [abs(r["features"]["income"] - raw[int(rec["applicant"])]["income"])
                 for rec in records for r in rec["recourses"]]
        return np.mean(moves)

    assert mean_income_move(heavy) < mean_income_move(plain)


@pytest.mark.parametrize("value", ["income", "income=0", "income=-1", "income=x", "income=inf", "=2", "income=2e6"])
def test_bad_weight_is_a_usage_error(tiny, value):
    result = _plan(tiny, "--weight", value)
    assert result.exit_code == 2 and result.stdout == ""


def test_weight_on_a_column_that_is_not_a_feature_is_a_usage_error(tiny):
    result = _plan(tiny, "--weight", "label=2")
    assert result.exit_code == 2 and "target" in result.stderr


def test_graph_edges_use_the_weights_and_a_graph_built_without_them_is_refused(tiny, tmp_path):
    graph = tmp_path / "graph"
    built = _run("build-graph", tiny["data"], "--model", tiny["model"], "--feature-weight", "debt=9",
                 "--neighbors", "15", "--scale", "minmax", "--out", graph)
    assert built.exit_code == 0, built.stderr
    records = _records(_plan(tiny, "--graph", graph, "--weight", "debt=9", "--max-move", "none", "--scale",
                             "minmax"))
    frame = tiny["frame"]
    raw = tiny["raw"].to_dict("records")
    assert any(rec["recourses"] for rec in records)
    for rec in records:
        assert rec["method"] == "quad+graph"
        x0 = raw[int(rec["applicant"])]
        for r in rec["recourses"]:
            stops = [x0] + [frame.iloc[p][FEATURES].to_dict() for p in r["path"]]
            length = sum(_weighted_distance(frame, a, b, {"debt": 9.0}) for a, b in zip(stops, stops[1:]))
            assert r["cost"] == pytest.approx(length, abs=1e-5)
    refused = _plan(tiny, "--graph", graph, "--scale", "minmax")
    assert refused.exit_code == 1 and "weight" in refused.stderr


def test_a_pool_built_with_other_weights_is_refused(tiny, tmp_path):
    pool = tmp_path / "pool"
    assert _run("build-pool", tiny["data"], "--model", tiny["model"], "--weight", "income=2",
                "--out", pool).exit_code == 0
    same = _plan(tiny, "--pool", pool, "--weight", "income=2")
    assert same.stdout == _plan(tiny, "--weight", "income=2").stdout
    refused = _plan(tiny, "--pool", pool)
    assert refused.exit_code == 1 and "weight" in refused.stderr


# ----------------------------------------------------------------------------------------------- vary


def test_vary_is_the_complement_of_immutable(tiny):
    by_vary = _plan(tiny, "--vary", "income", "--vary", "debt")
    by_immutable = _plan(tiny, "--immutable", "years", "--immutable", "sector")
    assert by_vary.exit_code == 0, by_vary.stderr
    assert by_vary.stdout == by_immutable.stdout
    for rec in _records(by_vary):
        for r in rec["recourses"]:
            assert set(r["changes"]) <= {"income", "debt"}


def test_vary_with_immutable_of_the_same_column_is_a_usage_error(tiny):
    result = _plan(tiny, "--vary", "income", "--immutable", "income")
    assert result.exit_code == 2 and "vary" in result.stderr


# ----------------------------------------------------------------------------------------------- range


def test_range_candidates_match_brute_force(tiny):
    spec = SchemaSpec(ranges={"income": "40:70", "sector": "a,b"})
    training, _ = _training(tiny, spec)
    frame = tiny["frame"]
    pool = training.pool("predicted")
    for _, x0 in tiny["raw"].iterrows():
        x0_frame = x0.to_frame().T
        x0_enc = training.encoder.encode(x0_frame)[0]
        mask = candidate_mask(training, x0_enc, training.encoder.constraint_codes(x0_frame), pool)
        income_ok = frame["income"].between(40, 70) | (frame["income"] == x0["income"])
        sector_ok = frame["sector"].isin(["a", "b"]) | (frame["sector"] == x0["sector"])
        differs = (frame[FEATURES] != x0[FEATURES]).any(axis=1)
        expected = training.favorable & income_ok.to_numpy() & sector_ok.to_numpy() & differs.to_numpy()
        assert mask.tolist() == expected.tolist()


def test_recourses_stay_inside_the_ranges(tiny):
    records = _records(_plan(tiny, "--range", "income=:60", "--range", "debt=5:", "--range", "sector=a,b",
                             "--method", "dpp-greedy"))
    raw = tiny["raw"].to_dict("records")
    n = 0
    for rec in records:
        x0 = raw[int(rec["applicant"])]
        for r in rec["recourses"]:
            n += 1
            f = r["features"]
            assert f["income"] <= 60 or f["income"] == x0["income"]
            assert f["debt"] >= 5 or f["debt"] == x0["debt"]
            assert f["sector"] in ("a", "b") or f["sector"] == x0["sector"]
            assert tiny["estimator"].predict_proba(pd.DataFrame([f])[FEATURES])[0, 1] >= 0.5
    assert n > 0


def test_an_empty_range_explains_the_infeasibility(tiny):
    records = _records(_plan(tiny, "--range", "income=0:1", "--vary", "income"))
    assert {rec["status"] for rec in records} == {"infeasible"}
    assert all("outside the range of income (0:1)" in rec["reason"] for rec in records)


@pytest.mark.parametrize("value", ["income", "income=5:1", "income=a:b", "income=:", "income=1:2:3"])
def test_bad_range_syntax_is_a_usage_error(tiny, value):
    result = _plan(tiny, "--range", value)
    assert result.exit_code == 2 and result.stdout == ""


@pytest.mark.parametrize("value", ["sector=z", "income=1,2"])
def test_range_that_does_not_fit_the_feature_is_a_usage_error(tiny, value):
    result = _plan(tiny, "--range", value)
    assert result.exit_code == 2 and result.stdout == ""
    assert "range" in result.stderr


def test_select_and_interpolate_keep_the_ranges(tiny, tmp_path):
    sel = tmp_path / "sel"
    made = _run("select", tiny["data"], "--model", tiny["model"], "--applicants", tiny["applicants"], "--out", sel,
                "--range", "income=:60", "--theta", "0.5", "--format", "csv")
    assert made.exit_code == 0, made.stderr
    prototypes = pd.read_csv(sel / "prototypes.csv")
    ok = prototypes[prototypes["status"] == "ok"]
    raw = tiny["raw"]
    for _, p in ok.iterrows():
        assert p["income"] <= 60 or p["income"] == raw.loc[int(p["applicant"]), "income"]
    out = _run("interpolate", "--selection", sel, "--model", tiny["model"], "--out", tmp_path / "plans",
               "--format", "jsonl")
    records = _records(out)
    assert {rec["method"] for rec in records} == {"quad@0.5"}
    for rec in records:
        for r in rec["recourses"]:
            assert r["features"]["income"] <= 60 or "income" not in r["changes"]
    other = tmp_path / "other.toml"
    other.write_text('[weight]\nincome = 3\n[range]\nincome = ":50"\n', encoding="utf-8")
    refused = _run("interpolate", "--selection", sel, "--model", tiny["model"], "--out", tmp_path / "plans2",
                   "--schema", other)
    assert refused.exit_code == 1 and "weight of 'income' 3" in refused.stderr and "range of 'income'" in refused.stderr


def test_help_lists_the_new_options():
    for command in ("plan", "select", "build-pool", "evaluate"):
        text = _run(command, "--help").stdout
        assert "--vary" in text and "--range" in text and "--weight" in text
    assert "--feature-weight" in _run("build-graph", "--help").stdout


# ----------------------------------------------------------------------------------------------- auto policy


def test_auto_candidates_match_brute_force(tiny):
    """auto: same sector (categorical immutable) and debt not above (decreasing) are filtered; years (numeric
    immutable) is projected onto the applicant's value and the row re-predicted."""
    from frpd_cli.projection import candidate_set

    training, model = _training(tiny, SchemaSpec(immutable=("years", "sector"), decreasing=("debt",)))
    frame, est = tiny["frame"], tiny["estimator"]
    favourable = est.predict_proba(frame[FEATURES])[:, 1] >= 0.5
    pool = training.pool("predicted")
    n_projected = 0
    for _, x0 in tiny["raw"].iterrows():
        x0_frame = x0.to_frame().T
        x0_enc = training.encoder.encode(x0_frame)[0]
        codes0 = training.encoder.constraint_codes(x0_frame)
        cset = candidate_set(training, model, x0_enc, codes0, x0, pool, policy="auto")
        group = favourable & (frame["sector"] == x0["sector"]).to_numpy() & (frame["debt"] <= x0["debt"]).to_numpy()
        moved = frame.loc[group, FEATURES].assign(years=x0["years"])
        keep = est.predict_proba(moved)[:, 1] >= 0.5
        expected = {tuple(r) for r in moved[keep].itertuples(index=False)} - {tuple(x0[FEATURES])}
        got = {tuple(r) for r in cset.raw[FEATURES].itertuples(index=False)}
        assert got == expected and len(got) == len(cset)          # duplicates dropped, applicant excluded
        assert (cset.raw["years"] == x0["years"]).all() and (cset.raw["sector"] == x0["sector"]).all()
        original_years = frame["years"].to_numpy()[cset.rows]
        assert cset.projected.tolist() == (original_years != x0["years"]).tolist()
        n_projected += int(cset.projected.sum())
    assert n_projected > 0


# ----------------------------------------------------------------------------------- limits relative to the applicant


def _bounds_oracle(origin: float, text: str, integer: bool) -> tuple[float, float]:
    """Hand-computed bounds of ``--range COL=text`` for an applicant at ``origin`` (math, not numpy)."""
    import math

    lo_text, hi_text = text.split(":")
    percent = text.endswith("%") or lo_text.endswith("%")

    def side(part, default):
        if part in ("", "-inf", "+inf"):
            return default
        number = float(part.rstrip("%"))
        return origin + (abs(origin) * number / 100.0 if percent else number)

    low, high = side(lo_text, -math.inf), side(hi_text, math.inf)
    if integer:
        low = math.ceil(low - 1e-9) if math.isfinite(low) else low
        high = math.floor(high + 1e-9) if math.isfinite(high) else high
    return low, high


@pytest.mark.parametrize("text", ["+0:+12", "-5:+0", "-20%:+10%", "-3:+inf", "+2:+7", "-33.3%:"])
@pytest.mark.parametrize("kind", ["continuous", "integer"])
def test_relative_bounds_match_the_hand_computed_ones(text, kind):
    from frpd_cli.schema import Feature, parse_range

    f = parse_range(Feature("x", kind), text)
    assert f.is_relative and f.has_range and f.low is None and f.high is None
    origins = np.array([0.0, 1.0, 7.0, 37.0, -12.5, 250.0, 1346.25])
    low, high = f.bounds(origins)
    for o, lo, hi in zip(origins, low, high):
        assert (lo, hi) == pytest.approx(_bounds_oracle(float(o), text, kind == "integer"), abs=1e-9), (o, text)
    values = np.linspace(-40, 1700, 871)
    for o in origins:                              # in_range is the same rule, value by value
        lo, hi = _bounds_oracle(float(o), text, kind == "integer")
        assert f.in_range(values, o).tolist() == [bool(lo <= v <= hi) for v in values]


def test_relative_range_is_written_and_read_back_in_toml(tiny, tmp_path):
    from frpd_cli.schema import schema_to_toml

    schema = infer_schema(tiny["frame"], SchemaSpec(ranges={"years": "+0:+12", "income": "-20%:+10%"}))
    path = tmp_path / "s.toml"
    path.write_text(schema_to_toml(schema))
    again = infer_schema(tiny["frame"], load_schema_file(path))
    assert again.feature("years") == schema.feature("years") and again.feature("income") == schema.feature("income")
    assert (again.feature("years").rel_low, again.feature("years").rel_high) == (0.0, 12.0)
    assert again.feature("income").rel_percent


def test_relative_range_candidates_match_brute_force(tiny):
    spec = SchemaSpec(ranges={"income": "-10%:+25%", "years": "+0:+6"})
    training, _ = _training(tiny, spec)
    frame = tiny["frame"]
    pool = training.pool("predicted")
    n_out = 0
    for _, x0 in tiny["raw"].iterrows():
        x0_frame = x0.to_frame().T
        x0_enc = training.encoder.encode(x0_frame)[0]
        mask = candidate_mask(training, x0_enc, training.encoder.constraint_codes(x0_frame), pool, x0)
        lo, hi = _bounds_oracle(float(x0["income"]), "-10%:+25%", False)
        income_ok = frame["income"].between(lo, hi) | (frame["income"] == x0["income"])
        ylo, yhi = _bounds_oracle(float(x0["years"]), "+0:+6", True)
        years_ok = frame["years"].between(ylo, yhi) | (frame["years"] == x0["years"])
        differs = (frame[FEATURES] != x0[FEATURES]).any(axis=1)
        expected = training.favorable & income_ok.to_numpy() & years_ok.to_numpy() & differs.to_numpy()
        assert mask.tolist() == expected.tolist()
        n_out += int((training.favorable & ~(income_ok & years_ok).to_numpy()).sum())
    assert n_out > 0                                  # the limits do rule rows out


@pytest.mark.parametrize("margin", ["0", "0.05"])
def test_recourses_stay_inside_relative_limits(tiny, margin):
    records = _records(_plan(tiny, "--range", "income=+0:+45", "--range", "years=-3:+20", "--range",
                             "debt=-90%:+0%", "--margin", margin))
    raw = tiny["raw"].to_dict("records")
    n = 0
    for rec in records:
        x0 = raw[int(rec["applicant"])]
        for r in rec["recourses"]:
            n += 1
            f = r["features"]
            assert x0["income"] <= f["income"] <= x0["income"] + 45 + 1e-9
            assert x0["years"] - 3 <= f["years"] <= x0["years"] + 20
            assert 0.1 * x0["debt"] - 1e-9 <= f["debt"] <= x0["debt"] + 1e-9
            assert tiny["estimator"].predict_proba(pd.DataFrame([f])[FEATURES])[0, 1] >= 0.5 + float(margin)
    assert n >= 6


def test_a_relative_limit_no_prototype_meets_is_named_in_the_reason(tiny):
    # at most 0.05 more income and nothing else may change: every favourable row is outside the limit
    records = _records(_plan(tiny, "--range", "income=+0:+0.05", "--vary", "income"))
    assert {rec["status"] for rec in records} == {"infeasible"}
    raw = tiny["raw"].to_dict("records")
    for rec in records:
        x0 = raw[int(rec["applicant"])]["income"]
        assert f"outside the range of income (+0:+0.05 of the applicant's {x0}: {x0:g}:{x0 + 0.05:g})" in rec["reason"]


def test_interpolation_clips_into_a_relative_limit_the_prototype_is_beyond(tiny):
    """The limit is declared in the schema (candidates filtered) yet a projected prototype's segment, decoded, is
    clipped: decode_from holds every value inside the applicant's bounds."""
    from frpd_cli.interpolation import decode_from

    training, _ = _training(tiny, SchemaSpec(ranges={"income": "+0:+5"}))
    x0 = tiny["raw"].iloc[[0]].reset_index(drop=True)
    X0 = training.encoder.encode(x0)
    far = x0.copy()
    far["income"] = x0["income"] + 40
    XK = training.encoder.encode(far)
    t = np.linspace(0, 1, 11)[:, None]
    Z = X0 + t * (XK - X0)
    rows = decode_from(training.encoder, Z, np.repeat(X0, 11, axis=0), x0.loc[[0] * 11].reset_index(drop=True))
    assert (rows["income"] <= x0["income"][0] + 5 + 1e-9).all() and (rows["income"] >= x0["income"][0]).all()
    assert rows["income"].iloc[-1] == pytest.approx(x0["income"][0] + 5)


@pytest.mark.parametrize("value", ["income=+5:-5", "income=+a:+2", "income=-10%:+5", "income=+:+3",
                                   "sector=+0:+1", "income=-150%:+0%", "income=+inf:+2"])
def test_bad_relative_range_is_a_usage_error(tiny, value):
    result = _plan(tiny, "--range", value)
    assert result.exit_code == 2 and result.stdout == ""
    assert "range" in result.stderr and "applicant" in result.stderr


def test_evaluate_counts_a_recourse_outside_its_relative_limit(tiny, tmp_path):
    records = _records(_plan(tiny, "--range", "income=+0:+15", "--margin", "0"))
    rec = next(r for r in records if r["recourses"])
    x0 = tiny["raw"].to_dict("records")[int(rec["applicant"])]
    bad = json.loads(json.dumps(rec))
    bad["recourses"][0]["features"]["income"] = x0["income"] + 16      # one past the limit, inside the data range
    plans = tmp_path / "plans.jsonl"
    plans.write_text(json.dumps(rec) + "\n" + json.dumps({**bad, "applicant": rec["applicant"]}) + "\n")
    result = _run("evaluate", tiny["data"], "--model", tiny["model"], "--plans", plans, "--applicants",
                  tiny["applicants"], "--range", "income=+0:+15", "--format", "json", "--per-applicant")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["violations"] for row in rows][:2] == [0.0, 1.0]
