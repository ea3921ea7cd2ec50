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


# ------------------------------------------------------------------ the lean search and the --proximity option


def test_default_search_brackets_the_crossing_within_its_tolerance():
    from frpd_cli.recourse_cost import TOLERANCE

    training, model = _setup(4, n=80)
    raw0 = pd.DataFrame({"x": [0.5], "y": [1.0]})
    x0 = training.encoder.encode(raw0)[0]
    fav = np.flatnonzero(training.favorable)
    costs = recourse_costs(training.encoder, model, x0, raw0, training.X[fav])
    expected = _analytic(raw0.to_numpy()[0], training.frame[["x", "y"]].to_numpy()[fav])
    reach = np.linalg.norm(training.X[fav] - x0, axis=1)
    # a linear boundary is crossed once: the coarse grid never misses it, bisection stops within TOLERANCE
    assert np.all(costs >= expected - 1e-9)
    assert np.all(costs <= expected + TOLERANCE * reach + 1e-9)


def test_a_category_switch_costs_the_whole_one_hot_step():
    """Step model on a category: the relaxed one-hot block flips past t = 1/2 and the recourse pays sqrt(2) for it."""
    frame = pd.DataFrame({"c": ["a", "b", "a", "b"], "x": [0.0, 10.0, 5.0, 2.0], "label": [0, 1, 0, 1]})
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, categorical=("c",), continuous=("x",)))

    class OnB:
        threshold = 0.5

        def favorable_probability(self, rows):
            return (np.asarray(rows["c"]) == "b").astype(float)

    training = build_training_set(frame, schema, OnB())
    raw0 = frame.loc[[0], ["c", "x"]].reset_index(drop=True)
    x0 = training.encoder.encode(raw0)[0]
    X = training.X[[1, 3]]
    tol = 1e-6
    costs = recourse_costs(training.encoder, OnB(), x0, raw0, X, tol=tol)
    # argmax ties go to the first level ('a'), so the first favourable t is just above 1/2: x moves t * dx
    dx = np.array([1.0, 0.2])
    assert np.all(costs >= np.sqrt(2.0 + (0.5 * dx) ** 2) - 1e-12)
    assert np.all(costs <= np.sqrt(2.0 + ((0.5 + tol) * dx) ** 2) + 1e-12)


def test_identical_candidates_and_batched_applicants_get_the_costs_they_get_alone():
    from frpd_cli.candidates import CandidateStage
    from frpd_cli.recourse_cost import with_recourse_costs

    training, model = _setup(5, n=80)
    raw = pd.DataFrame({"x": [0.5, 1.0, 3.0, 2.0], "y": [0.5, 2.0, 0.2, 1.0]})
    X0 = training.encoder.encode(raw)
    codes0 = training.encoder.constraint_codes(raw)
    stage = CandidateStage(training, PlanSettings(k=3))
    found = [stage.find(X0[i], codes0.row(i), raw.iloc[i].to_dict()) for i in range(len(raw))]
    found[2] = None                                     # an applicant without candidates is passed through
    priced = with_recourse_costs(training, model, X0, raw, found)
    assert priced[2] is None
    for i in (0, 1, 3):
        X = training.X[found[i].rows]
        alone = recourse_costs(training.encoder, model, X0[i], raw.iloc[[i]], X)
        np.testing.assert_array_equal(priced[i].proximity, alone)       # bit for bit: no dependence on the batch
        np.testing.assert_array_equal(priced[i].rows, found[i].rows)
        doubled = recourse_costs(training.encoder, model, X0[i], raw.iloc[[i]], np.vstack([X[::-1], X]))
        np.testing.assert_array_equal(doubled, np.concatenate([alone[::-1], alone]))


def _brute_force(directions, costs, k, theta):
    from itertools import combinations

    best = None
    for subset in combinations(range(len(costs)), k):
        s = list(subset)
        v = directions[s].sum(axis=0)
        value = theta * float(v @ v) + (1 - theta) * float(costs[s].sum())
        if best is None or value < best[0] - 1e-15:
            best = (value, s)
    return best


@pytest.mark.parametrize("seed", [0, 1])
def test_plans_by_recourse_cost_select_the_optimum_of_the_exact_crossing_costs(seed):
    """Brute force over every K-subset with the closed-form crossing distances as proximity; `exact` through the
    product path (the selection of plan_applicants with proximity='recourse', as ``frpd select`` makes it)
    reaches that optimum, and the plan's recourses cost their segments' crossings."""
    from frpd_cli.planning import plan_applicants, select_applicants
    from frpd_cli.recourse_cost import TOLERANCE

    training, model = _setup(10 + seed, n=36)
    applicants = pd.DataFrame({"x": [0.5, 2.0, 1.0], "y": [0.5, 1.0, 2.5]})
    ids = ["a", "b", "c"]
    settings = PlanSettings(method="exact", k=3, theta=0.5, sparsify=False, proximity="recourse")
    plans = [p for chunk in plan_applicants(training, model, applicants, ids, settings) for p in chunk]
    table = select_applicants(training, model, applicants, ids, settings)
    selected = table.prototypes.groupby("applicant")["row"].apply(lambda r: [int(v) for v in r]).to_dict()
    fav = np.flatnonzero(training.favorable)
    for i, plan in enumerate(plans):
        # two end points a hair apart are one piece of advice, and the plan keeps one of them
        assert plan.status == "ok" and 2 <= len(plan.recourses) <= 3
        assert {r.prototype for r in plan.recourses} <= set(selected[plan.applicant])
        x0 = training.encoder.encode(applicants.iloc[[i]])[0]
        exact = _analytic(applicants.to_numpy()[i], training.frame[["x", "y"]].to_numpy()[fav])
        reach = np.linalg.norm(training.X[fav] - x0, axis=1)
        directions = (training.X[fav] - x0) / reach[:, None]
        optimum, _ = _brute_force(directions, exact, 3, 0.5)
        chosen = [int(np.flatnonzero(fav == row)[0]) for row in selected[plan.applicant]]
        assert len(chosen) == 3
        v = directions[chosen].sum(axis=0)
        value = 0.5 * float(v @ v) + 0.5 * float(exact[chosen].sum())
        # our costs are the crossings to within TOLERANCE of each segment: the objective within that error
        slack = 2 * 0.5 * 3 * TOLERANCE * reach.max()
        assert optimum - 1e-12 <= value <= optimum + slack
        # and each recourse's own cost is its segment's crossing (the plan interpolates to --tol 1e-3)
        for r in plan.recourses:
            j = int(np.flatnonzero(fav == r.prototype)[0])
            assert exact[j] - 1e-9 <= r.cost <= exact[j] + 1e-3 * reach[j] + 1e-9


def test_tiny_tolerance_gives_the_selection_of_the_exact_crossing_costs():
    from frpd_cli.candidates import CandidateStage
    from frpd_cli.choice import select_candidates
    from frpd_cli.recourse_cost import with_recourse_costs

    training, model = _setup(6, n=50)
    raw = pd.DataFrame({"x": [0.5, 1.5], "y": [1.0, 0.5]})
    X0 = training.encoder.encode(raw)
    codes0 = training.encoder.constraint_codes(raw)
    for method in ("quad", "dpp-ls", "nearest", "exact"):
        settings = PlanSettings(method=method, k=3, theta=0.9)
        stage = CandidateStage(training, settings)
        found = [stage.find(X0[i], codes0.row(i), raw.iloc[i].to_dict()) for i in range(len(raw))]
        priced = with_recourse_costs(training, model, X0, raw, found, tol=1e-9)
        for i in range(len(raw)):
            exact = _analytic(raw.to_numpy()[i], training.frame[["x", "y"]].to_numpy()[found[i].rows])
            np.testing.assert_allclose(priced[i].proximity, exact, rtol=0, atol=1e-8)
            ours = select_candidates(training, X0[i], priced[i], settings)[0]
            oracle = select_among(training, X0[i], found[i].rows, settings, [0.9], proximity=exact)[0]
            assert ours.rows.tolist() == oracle.rows.tolist(), method


def test_the_option_is_validated():
    from frpd_cli.cli import _options
    from frpd_cli.recourse_cost import PROXIMITIES

    assert _options.PROXIMITIES == PROXIMITIES
    assert PlanSettings(proximity="recourse").validate().proximity == "recourse"
    with pytest.raises(InputError, match="'proximity' option must be one of distance, recourse"):
        PlanSettings(proximity="path").validate()
    with pytest.raises(InputError, match="graph plans price each prototype by its path cost"):
        PlanSettings(proximity="recourse", scheme="graph").validate()


def test_command_line_option(sample_paths, tmp_path):
    from typer.testing import CliRunner

    from frpd_cli.cli.app import app

    runner = CliRunner()
    base = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]), "--format", "csv", "-q"]
    help_text = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200"}).output
    assert "--proximity" in help_text and "recourse" in help_text
    assert "--proximity" in runner.invoke(app, ["select", "--help"], env={"COLUMNS": "200"}).output
    graph = tmp_path / "graph"
    graph.mkdir()
    bad = runner.invoke(app, [*base, "--proximity", "recourse", "--graph", str(graph)])
    assert bad.exit_code == 2 and "--proximity recourse prices linear recourses" in bad.output
    assert runner.invoke(app, [*base, "--proximity", "nearby"]).exit_code == 2
    default = runner.invoke(app, base)
    distance = runner.invoke(app, [*base, "--proximity", "distance"])
    recourse = runner.invoke(app, [*base, "--proximity", "recourse"])
    assert default.exit_code == distance.exit_code == recourse.exit_code == 0
    assert default.stdout == distance.stdout
    plans = pd.read_csv(__import__("io").StringIO(recourse.stdout))
    assert (plans["probability"] >= 0.5).all() and len(plans) >= 3
    out = tmp_path / "sel"
    selected = runner.invoke(app, ["select", *base[1:8], "--out", str(out), "--proximity", "recourse", "-q"])
    assert selected.exit_code == 0, selected.output
    assert json_params(out)["proximity"] == "recourse"


def json_params(folder):
    import json

    return json.loads((folder / "manifest.json").read_text())["params"]
