"""Columns with a few outliers: the move bound is not stretched by them, and a recourse that crosses a gap between
the ordinary values and the outliers stops near the model's boundary, not at the far side of the gap."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from frpd_cli.encoding import fit_encoder
from frpd_cli.interpolation import interpolate_linear
from frpd_cli.schema import SchemaSpec, infer_schema, move_span
from frpd_cli.sparsify import sparsify_recourses

BOUNDARY = 250_000.0          # the toy model accepts an income from here on


class IncomeModel:
    """Favourable from an income of BOUNDARY on, steeply; nothing else counts."""

    threshold = 0.5

    def favorable_probability(self, rows):
        income = np.asarray(rows["income"], dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-(income - BOUNDARY) / 2_000.0))


def _skewed_frame(n=1_000, seed=0):
    """Incomes under 210,000 and five outliers in the millions: the effort scale has a gap from 210,000 on."""
    rng = np.random.default_rng(seed)
    income = np.round(rng.uniform(10_000, 209_000, n), 0)
    income[:5] = [2e6, 3.5e6, 5e6, 8e6, 1e7]
    return pd.DataFrame({"income": income, "age": rng.integers(20, 70, n), "label": rng.integers(0, 2, n)})


def test_move_span_is_the_training_range_for_spread_values():
    rng = np.random.default_rng(1)
    for values in (rng.normal(0, 1, 26_000), rng.uniform(-5, 5, 2_000), np.arange(100.0), [3.0, 7.0]):
        values = np.asarray(values, dtype=np.float64)
        assert move_span(values) == pytest.approx(values.max() - values.min(), rel=1e-12)


def test_move_span_leaves_outliers_out():
    frame = _skewed_frame()
    income = frame["income"].to_numpy()
    central = np.percentile(income, 99.5) - np.percentile(income, 0.5)
    assert income.max() - income.min() > 40 * central
    assert move_span(income) == pytest.approx(2 * central, rel=1e-12)
    # one or two values almost everywhere: no spread in the middle, the training range stays
    assert move_span(np.r_[np.zeros(995), [1.0, 2.0, 3.0, 4.0, 5.0]]) == 5.0
    assert move_span(np.r_[np.zeros(600), np.ones(395), [7.0, 8.0, 9.0, 10.0, 50.0]]) == 50.0
    # three values in the middle: a count with a long tail is bounded by its middle
    counts = np.r_[np.zeros(500), np.ones(300), np.full(195, 2.0), [9.0, 10.0, 20.0, 30.0, 40.0]]
    central = np.percentile(counts, 99.5) - np.percentile(counts, 0.5)
    assert move_span(counts) == pytest.approx(2 * central)


def _setup(scale="effort"):
    frame = _skewed_frame()
    schema = infer_schema(frame, SchemaSpec(target="label", integer=("age",)))
    encoder = fit_encoder(schema, frame, scale=scale)
    applicants = pd.DataFrame({"income": [50_000.0, 120_000.0, 15_000.0], "age": [30, 45, 60]})
    prototypes = pd.DataFrame({"income": [1e7, 5e6, 2e6], "age": [31, 40, 66]})
    return encoder, applicants, prototypes


@pytest.mark.parametrize("scale", ["effort", "minmax"])
def test_interpolation_stops_near_the_boundary_inside_a_gap(scale):
    encoder, applicants, prototypes = _setup(scale)
    tol = 1e-3
    result = interpolate_linear(encoder, IncomeModel(), encoder.encode(applicants), encoder.encode(prototypes),
                                applicants, tol=tol)
    assert result.found.all()
    income = result.rows["income"].to_numpy(dtype=np.float64)
    assert (IncomeModel().favorable_probability(result.rows) >= 0.5).all()
    # the bracket is at most 2 tol of the training range wide in income: the recourse is that close to the boundary
    span = encoder.maximum[0] - encoder.minimum[0]
    assert (income >= BOUNDARY).all() and (income <= BOUNDARY + 2 * tol * span + 1.0).all(), income


def test_sparse_recourse_stops_near_the_boundary_inside_a_gap():
    encoder, applicants, prototypes = _setup()
    model = IncomeModel()
    X0, XK = encoder.encode(applicants), encoder.encode(prototypes)
    line = interpolate_linear(encoder, model, X0, XK, applicants)
    sparse = sparsify_recourses(encoder, model, X0, XK, applicants, line.rows, line.probability, found=line.found)
    income = sparse.rows["income"].to_numpy(dtype=np.float64)
    span = encoder.maximum[0] - encoder.minimum[0]
    assert (income >= BOUNDARY).all() and (income <= BOUNDARY + 2 * 1e-3 * span + 1.0).all(), income


def test_plan_on_a_skewed_column_bounds_moves_without_the_outliers(tmp_path):
    """Through the command line: the default move bound is a quarter of twice the central range (the note says
    so), and with the bound lifted every one-change recourse stops near the boundary."""
    import joblib
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    frame = _skewed_frame(n=1_500, seed=3)
    frame["label"] = (frame["income"] >= 150_000).astype(int)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=100.0, max_iter=5_000))
    features = frame[["income", "age"]]
    model.fit(features, frame["label"])
    joblib.dump(model, tmp_path / "m.pkl")
    frame.to_csv(tmp_path / "d.csv", index=False)
    p = model.predict_proba(features)[:, 1]
    denied = features[(p < 0.3) & (features["income"] > 60_000)].head(6)
    assert len(denied) == 6
    denied.to_csv(tmp_path / "a.csv", index=False)
    base = [sys.executable, "-m", "frpd_cli", "plan", str(tmp_path / "d.csv"), "--model", str(tmp_path / "m.pkl"),
            "--target", "label", "--immutable", "age", "--applicants", str(tmp_path / "a.csv"),
            "--k", "1", "--format", "json"]
    bounded = subprocess.run(base, capture_output=True, text=True, check=True)
    assert "outlying values" in bounded.stderr and "'income'" in bounded.stderr
    limit = 0.25 * move_span(frame["income"])
    plans = json.loads(bounded.stdout)
    moves = [abs(r["features"]["income"] - a) for plan, a in zip(plans, denied["income"])
             for r in plan["recourses"]]
    assert moves and max(moves) <= limit + 1e-6

    free = subprocess.run(base + ["--max-move", "none"], capture_output=True, text=True, check=True)
    assert "outlying values" not in free.stderr
    span = frame["income"].max() - frame["income"].min()
    margin = 0.05
    checked = 0
    for plan in json.loads(free.stdout):
        for r in plan["recourses"]:
            income = r["features"]["income"]
            lower = pd.DataFrame({"income": [income - 2 * 1e-3 * span - 1.0], "age": [r["features"]["age"]]})
            # a little less income is not accepted at the margin: the recourse asks for no more than it needs
            assert model.predict_proba(lower)[0, 1] < 0.5 + margin
            checked += 1
    assert checked == 6


@pytest.mark.parametrize("scale", ["effort", "minmax"])
def test_sparse_recourse_drops_a_small_change_the_model_does_not_need(scale):
    """The plain recourse raises income and, on the way to its prototype, age by a year or two; the model needs
    only income, so the sparse recourse changes income alone (its one-feature point costs almost the plain
    recourse's whole budget: a tie that rounding must not break against it)."""
    rng = np.random.default_rng(5)
    n = 2_000
    frame = pd.DataFrame({"income": np.round(rng.uniform(10_000, 400_000, n), 0), "age": rng.integers(20, 70, n),
                          "label": rng.integers(0, 2, n)})
    schema = infer_schema(frame, SchemaSpec(target="label"))
    encoder = fit_encoder(schema, frame, scale=scale)
    m = 40
    applicants = pd.DataFrame({"income": np.round(rng.uniform(20_000, 200_000, m), 0),
                               "age": rng.integers(25, 60, m)})
    prototypes = pd.DataFrame({"income": np.round(rng.uniform(300_000, 400_000, m), 0),
                               "age": applicants["age"].to_numpy() + rng.integers(1, 3, m)})
    model = IncomeModel()
    X0, XK = encoder.encode(applicants), encoder.encode(prototypes)
    line = interpolate_linear(encoder, model, X0, XK, applicants)
    assert line.found.all()
    sparse = sparsify_recourses(encoder, model, X0, XK, applicants, line.rows, line.probability, found=line.found)
    assert (model.favorable_probability(sparse.rows) >= 0.5).all()
    moved_age = sparse.rows["age"].to_numpy() != applicants["age"].to_numpy()
    assert not moved_age.any(), sparse.rows[moved_age]
