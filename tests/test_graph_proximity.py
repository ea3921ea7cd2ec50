"""With --graph, every selection method's proximity term is the shortest-path cost from the applicant.

Paper Section 5.2: "we choose the distance function as the shortest path on the actionability graph".
"""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from test_planning import _setup

from frpd_cli.dataset import build_training_set
from frpd_cli.graph import build_graph, to_networkx
from frpd_cli.planning import PlanSettings, graph_candidates, plan_applicants, select_on_graph
from frpd_cli.schema import SchemaSpec, infer_schema


class _CornerModel:
    """Favourable in two corners: x >= 5 with y < 1, or y >= 6 with x < 1."""

    threshold = 0.5

    def favorable_probability(self, rows):
        x = np.asarray(rows["x"], dtype=float)
        y = np.asarray(rows["y"], dtype=float)
        return (((x >= 5) & (y < 1)) | ((y >= 6) & (x < 1))).astype(float)


def _tiny():
    # min-max scaling divides both features by 10. Radius 0.35 (scaled): the applicant (0, 0) reaches
    # A = (5.5, 0) only through D = (2.75, 1.5) (path 0.626, straight line 0.55) and B = (0, 6) through
    # C = (0, 3) in a straight line (path 0.6 = straight line).
    frame = pd.DataFrame({"x": [0.0, 2.75, 5.5, 0.0, 10.0], "y": [3.0, 1.5, 0.0, 6.0, 10.0], "label": [0, 0, 1, 1, 0]})
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, continuous=("x", "y")))
    model = _CornerModel()
    training = build_training_set(frame, schema, model)
    graph = build_graph(training.X, training.codes, radius=0.35)
    return training, model, graph


def _plan(training, model, settings, graph=None):
    applicant = pd.DataFrame({"x": [0.0], "y": [0.0]})
    return next(iter(plan_applicants(training, model, applicant, ["a"], settings, graph=graph)))[0]


@pytest.mark.parametrize("method", ["nearest", "quad", "quad-dp", "quad-greedy", "dpp-greedy", "dpp-ls", "exact"])
def test_every_method_prefers_the_cheaper_path_over_the_nearer_row(method):
    training, model, graph = _tiny()
    assert training.favorable.tolist() == [False, False, True, True, False]
    plan = _plan(training, model, PlanSettings(method=method, k=1, scheme="graph"), graph)
    assert plan.status == "ok"
    (rec,) = plan.recourses
    assert rec.path == [0, 3]                      # through C to B
    assert rec.cost == pytest.approx(0.6, rel=1e-12)
    # the straight line prefers A, the Euclidean-nearest favourable row
    linear = _plan(training, model, PlanSettings(method=method, k=1))
    assert linear.status == "ok" and linear.recourses[0].features["x"] >= 5


def test_with_both_prototypes_the_path_costs_are_the_proximity_term():
    training, model, graph = _tiny()
    x0 = training.encoder.encode(pd.DataFrame({"x": [0.0], "y": [0.0]}))[0]
    codes0 = training.encoder.constraint_codes(pd.DataFrame({"x": [0.0], "y": [0.0]}))
    for theta in (0.0, 0.5, 0.9):
        settings = PlanSettings(method="quad", k=2, theta=theta, scheme="graph")
        (out,), reach = select_on_graph(training, graph, x0, codes0, {"x": 0.0, "y": 0.0}, settings)
        assert sorted(out.rows.tolist()) == [2, 3]
        a = training.X[[2, 3]] - x0
        a /= np.linalg.norm(a, axis=1)[:, None]
        path = reach.dist[[2, 3]]
        assert path == pytest.approx([2 * np.hypot(0.275, 0.15), 0.6], rel=1e-12)
        expected = theta * float(np.sum(a.sum(axis=0) ** 2)) + (1 - theta) * float(path.sum())
        assert out.objective == pytest.approx(expected, rel=1e-12)


@pytest.fixture(scope="module")
def sample(sample_paths):
    from frpd_cli.schema import load_schema_file

    # graph mechanics on the sample's constraints without its limit relative to the applicant (age +0:+5), so
    # the oracles below see every reachable candidate; test_graph_plans_keep_limits_relative_to_the_applicant
    # covers the limit itself
    spec = dataclasses.replace(load_schema_file(sample_paths["schema"]), ranges={})
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"])
    graph = build_graph(training.X, training.codes, n_neighbors=10)
    return training, model, applicants, graph


def test_nearest_on_the_sample_graph_takes_the_networkx_cheapest_paths(sample):
    training, model, applicants, graph = sample
    names = list(training.schema.feature_names)
    X0 = training.encoder.encode(applicants.loc[:, names])
    codes0 = training.encoder.constraint_codes(applicants.loc[:, names])
    pool = training.pool("predicted")
    settings = PlanSettings(method="nearest", k=3, scheme="graph")
    base = to_networkx(graph)
    differs = 0
    raw = applicants.loc[:, names].to_dict("records")
    for i in range(len(applicants)):
        (out,), reach = select_on_graph(training, graph, X0[i], codes0.row(i), raw[i], settings)
        if out.status != "ok":
            continue
        G = base.copy()
        G.add_weighted_edges_from(("x0", int(v), float(w)) for v, w in zip(reach.neighbors, reach.weights))
        lengths = nx.single_source_dijkstra_path_length(G, "x0")
        cand = graph_candidates(training, reach, X0[i], codes0.row(i), pool, settings)
        by_path = sorted(cand.tolist(), key=lambda r: (lengths[r], r))[:3]
        assert out.rows.tolist() == by_path
        euclid = np.linalg.norm(training.X[cand] - X0[i], axis=1)
        by_line = cand[np.lexsort((cand, euclid))][:3].tolist()
        differs += by_line != by_path
    assert differs > 0  # the proximity term matters on this graph
