"""The recourse cost of each candidate (frpd_cli.recourse_cost) against the analytic boundary crossing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frpd_cli.choice import PlanSettings, select_among
from frpd_cli.dataset import build_training_set
from frpd_cli.exceptions import InputError
from frpd_cli.recourse_cost import recourse_costs
from frpd_cli.schema import SchemaSpec, infer_schema


class _HalfPlane:
    """Favourable when x + 2 y >= 8 (raw values), a linear boundary with a known crossing on every segment."""

    threshold = 0.5

    def favorable_probability(self, rows):
        x = np.asarray(rows["x"], dtype=float)
        y = np.asarray(rows["y"], dtype=float)
        return (x + 2.0 * y >= 8.0).astype(float)


def _setup(seed=0, n=60):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x": rng.uniform(0, 10, n), "y": rng.uniform(0, 10, n)})
    frame.loc[0, ["x", "y"]] = [0.0, 0.0]   # fixes the scale: both features span [0, 10]
    frame.loc[1, ["x", "y"]] = [10.0, 10.0]
    frame["label"] = (frame["x"] + 2 * frame["y"] >= 8).astype(int)
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, continuous=("x", "y")))
    model = _HalfPlane()
    return build_training_set(frame, schema, model), model


def _analytic(raw0, rows):
    """Distance (scaled space, both features / 10) from raw0 to where each segment crosses x + 2y = 8."""
    s0 = raw0[0] + 2 * raw0[1]
    s = rows[:, 0] + 2 * rows[:, 1]
    t = (8.0 - s0) / (s - s0)
    return t * np.linalg.norm(rows - raw0, axis=1) / 10.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_costs_match_the_boundary_crossing(seed):
    training, model = _setup(seed)
    raw0 = pd.DataFrame({"x": [1.0 + seed], "y": [0.5]})
    x0 = training.encoder.encode(raw0)[0]
    fav = np.flatnonzero(training.favorable)
    costs = recourse_costs(training.encoder, model, x0, raw0, training.X[fav], tol=1e-4)
    expected = _analytic(raw0.to_numpy()[0], training.frame[["x", "y"]].to_numpy()[fav])
    # a recourse is the first favourable point found, at most tol (a fraction of the segment) beyond the boundary
    reach = np.linalg.norm(training.X[fav] - x0, axis=1)
    assert np.all(costs >= expected - 1e-9)
    assert np.all(costs <= expected + 1e-4 * reach + 1e-9)
    # never more than the prototype itself, and strictly less for prototypes beyond the boundary
    assert np.all(costs <= reach + 1e-12)


def test_theta_zero_takes_the_cheapest_recourses_not_the_nearest_prototypes():
    training, model = _setup(3, n=80)
    raw0 = pd.DataFrame({"x": [0.5], "y": [0.5]})
    x0 = training.encoder.encode(raw0)[0]
    fav = np.flatnonzero(training.favorable)
    costs = recourse_costs(training.encoder, model, x0, raw0, training.X[fav], tol=1e-4)
    settings = PlanSettings(method="quad", k=3, theta=0.0)
    by_cost = select_among(training, x0, fav, settings, [0.0], proximity=costs)[0]
    by_distance = select_among(training, x0, fav, settings, [0.0])[0]
    # brute-force oracles: theta = 0 is the K smallest proximity values
    assert sorted(by_cost.rows.tolist()) == sorted(fav[np.argsort(costs, kind="stable")[:3]].tolist())
    dist = np.linalg.norm(training.X[fav] - x0, axis=1)
    assert sorted(by_distance.rows.tolist()) == sorted(fav[np.argsort(dist, kind="stable")[:3]].tolist())
    # the plans' mean recourse cost: never worse when choosing by recourse cost
    lookup = dict(zip(fav.tolist(), costs))
    assert np.mean([lookup[r] for r in by_cost.rows]) <= np.mean([lookup[r] for r in by_distance.rows]) + 1e-12


def test_shapes_are_checked():
    training, model = _setup()
    raw0 = pd.DataFrame({"x": [1.0], "y": [0.5]})
    x0 = training.encoder.encode(raw0)[0]
    with pytest.raises(InputError, match="encoded columns"):
        recourse_costs(training.encoder, model, x0, raw0, np.zeros((2, 3)))
    assert recourse_costs(training.encoder, model, x0, raw0, np.zeros((0, 2))).shape == (0,)
