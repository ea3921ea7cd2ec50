"""Graph plans (sequential recourse) and FACE: paths are actionable edges, costs are path sums, oracles agree."""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from test_planning import _setup, check_invariants

from frpd_cli.constraints import ConstraintCodes, actionable_mask, actionable_pairs
from frpd_cli.dataset import build_training_set
from frpd_cli.exceptions import InputError
from frpd_cli.graph import build_graph, path_cost, to_networkx
from frpd_cli.interpolation import reach_from
from frpd_cli.planning import PlanSettings, graph_candidates, plan_applicants
from frpd_cli.schema import SchemaSpec, infer_schema

# ----------------------------------------------------------------------------- helpers


def _plans(training, model, applicants, settings, graph, **kw):
    ids = [str(i) for i in range(len(applicants))]
    return [p for chunk in plan_applicants(training, model, applicants, ids, settings, graph=graph, **kw)
            for p in chunk]


def _euclidean(training, applicants, plans):
    """The plans with cost replaced by the straight-line distance, so the linear invariant checker applies."""
    raw = applicants.reset_index(drop=True)
    out = []
    for i, plan in enumerate(plans):
        x0e = training.encoder.encode(raw.iloc[[i]])
        recs = tuple(dataclasses.replace(r, cost=float(np.linalg.norm(
            training.encoder.encode(pd.DataFrame([r.features])) - x0e))) for r in plan.recourses)
        out.append(dataclasses.replace(plan, recourses=recs))
    return out


def _move_ok_raw(schema, before: dict, after: dict) -> bool:
    """Actionability of one move checked on raw values (independent of the constraint codes)."""
    for f in schema.features:
        a, b = before[f.name], after[f.name]
        if f.mutability == "immutable" and not (a == b or (f.is_numeric and float(a) == float(b))):
            return False
        if f.mutability in ("increasing", "decreasing"):
            sign = 1 if f.mutability == "increasing" else -1
            delta = f.levels.index(b) - f.levels.index(a) if f.is_categorical else float(b) - float(a)
            if sign * delta < 0:
                return False
    return True


def check_paths(plans, training, graph, applicants, settings):
    """Every path: actionable moves (codes and raw values), edges of the graph, cost = sum of edge weights."""
    raw = applicants.reset_index(drop=True)
    names = list(training.schema.feature_names)
    X0 = training.encoder.encode(raw.loc[:, names])
    codes0 = training.encoder.constraint_codes(raw.loc[:, names])
    A = graph.adjacency
    n_paths = 0
    for i, plan in enumerate(plans):
        if plan.status != "ok":
            continue
        reach = reach_from(graph, training.X, training.codes, X0[i], codes0.row(i), max_cost=settings.max_cost)
        nbr, w = reach.neighbors, reach.weights
        x0 = raw.iloc[i].to_dict()
        for r in plan.recourses:
            n_paths += 1
            path = r.path
            assert path and len(r.steps) == len(path)
            # x0 -> path[0] and each node -> node move are actionable, by codes and on raw values
            assert actionable_mask(codes0.row(i), training.codes.take([path[0]]))[0]
            assert np.all(actionable_pairs(training.codes, path[:-1], path[1:]))
            rows = [x0] + [training.frame.iloc[p].to_dict() for p in path]
            assert all(_move_ok_raw(training.schema, a, b) for a, b in zip(rows[:-1], rows[1:]))
            # edges: the attach edge, then stored edges; cost is their sum
            first = np.flatnonzero(nbr == path[0])
            assert first.size == 1
            total = float(w[first[0]])
            for u, v in zip(path[:-1], path[1:]):
                row = A.indices[A.indptr[u]:A.indptr[u + 1]]
                j = np.flatnonzero(row == v)
                assert j.size == 1, (u, v)
                total += float(A.data[A.indptr[u] + j[0]])
            assert r.cost == pytest.approx(total, rel=1e-12, abs=1e-12)
            assert r.cost == pytest.approx(path_cost(graph, nbr, w, path), rel=1e-12, abs=1e-12)
            assert r.cost == pytest.approx(float(reach.dist[path[-1]]), rel=1e-12, abs=1e-12)
            # the end point is the last node's row; the steps replay to it
            end = training.frame.iloc[path[-1]]
            assert all(str(r.features[n]) == str(x0[n]) or r.features[n] == end[n] for n in names)
            replay = dict(x0)
            for step in r.steps:
                for name, (old, new) in step.items():
                    assert str(replay[name]) == str(old) or float(replay[name]) == float(old)
                    replay[name] = new
            assert all(str(replay[n]) == str(end[n]) for n in names)
            assert training.favorable[path[-1]]
            if settings.endpoint == "first-favorable":
                assert not training.favorable[path[:-1]].any()
            if settings.max_hops is not None:
                assert len(path) <= settings.max_hops
            if settings.max_cost is not None:
                assert r.cost <= settings.max_cost
        ends = [r.path[-1] for r in plan.recourses]
        assert len(set(ends)) == len(ends)
        assert [r.cost for r in plan.recourses] == sorted(r.cost for r in plan.recourses)
    return n_paths


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
    return training, model, applicants, graph, sample_paths


@pytest.fixture(scope="module")
def sample_per_change(sample):
    """The sample data with the default graph of build-graph: neighbours per number of changed categories."""
    from frpd_cli.cli.graph import category_blocks

    training, model, applicants, _, sample_paths = sample
    graph = build_graph(training.X, training.codes, n_neighbors=10, category_blocks=category_blocks(training.encoder))
    return training, model, applicants, graph, sample_paths


@pytest.fixture(scope="module")
def sample_hubs(sample):
    """The build-graph default: per change, plus each row's nearest favourable rows (hub edges)."""
    from frpd_cli.cli.graph import FAVORABLE_NEIGHBORS, category_blocks

    training, model, applicants, _, sample_paths = sample
    graph = build_graph(training.X, training.codes, n_neighbors=10, category_blocks=category_blocks(training.encoder),
                        hubs=training.favorable, hub_neighbors=FAVORABLE_NEIGHBORS)
    return training, model, applicants, graph, sample_paths


# ----------------------------------------------------------------------------- invariants


@pytest.mark.parametrize("endpoint", ["prototype", "first-favorable"])
@pytest.mark.parametrize("method", ["quad", "dpp-greedy", "nearest", "face"])
@pytest.mark.parametrize("graph_kind", ["sample", "sample_per_change", "sample_hubs"])
def test_graph_plans_hold_every_invariant(graph_kind, method, endpoint, request):
    training, model, applicants, graph, paths = request.getfixturevalue(graph_kind)
    settings = PlanSettings(method=method, k=3, scheme="graph", endpoint=endpoint)
    plans = _plans(training, model, applicants, settings, graph)
    assert [p.applicant for p in plans] == [str(i) for i in range(len(applicants))]
    n_ok = check_invariants(_euclidean(training, applicants, plans), training, paths["model"], applicants, 3)
    assert n_ok == len(applicants)
    assert check_paths(plans, training, graph, applicants, settings) >= 2 * len(applicants)


def test_max_hops_and_max_cost_limit_paths(sample):
    training, model, applicants, graph, _ = sample
    for settings in (PlanSettings(k=2, scheme="graph", max_hops=1), PlanSettings(k=2, scheme="graph", max_cost=1.6)):
        plans = _plans(training, model, applicants, settings, graph)
        assert check_paths(plans, training, graph, applicants, settings) > 0


def test_cost_equals_networkx_shortest_path_length(sample):
    training, model, applicants, graph, _ = sample
    plans = _plans(training, model, applicants, PlanSettings(k=3, scheme="graph"), graph)
    names = list(training.schema.feature_names)
    X0 = training.encoder.encode(applicants.loc[:, names])
    codes0 = training.encoder.constraint_codes(applicants.loc[:, names])
    base = to_networkx(graph)
    for i, plan in enumerate(plans[:8]):
        reach = reach_from(graph, training.X, training.codes, X0[i], codes0.row(i))
        G = base.copy()
        G.add_weighted_edges_from(("x0", int(v), float(w)) for v, w in zip(reach.neighbors, reach.weights))
        lengths = nx.single_source_dijkstra_path_length(G, "x0")
        for r in plan.recourses:
            assert r.cost == pytest.approx(lengths[r.path[-1]], rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_reach_matches_networkx_on_small_random_graphs(seed):
    rng = np.random.default_rng(seed)
    n = 40
    X = rng.random((n, 3))
    codes = ConstraintCodes(immutable=rng.integers(0, 2, (n, 1)).astype(float),
                            monotone=np.round(X[:, :1] * 5), direction=np.array([1], dtype=np.int8))
    graph = build_graph(X, codes, n_neighbors=3)
    x0 = rng.random(3)
    codes0 = ConstraintCodes(np.array([[0.0]]), np.round(x0[None, :1] * 5), codes.direction)
    limit = 0.8 if seed % 2 else None
    reach = reach_from(graph, X, codes, x0, codes0, max_cost=limit)
    G = to_networkx(graph)
    G.add_weighted_edges_from(("x0", int(v), float(w)) for v, w in zip(reach.neighbors, reach.weights))
    lengths = nx.single_source_dijkstra_path_length(G, "x0")
    for v in range(n):
        expected = lengths.get(v, np.inf)
        if limit is not None and expected > limit:
            expected = np.inf
        assert reach.dist[v] == pytest.approx(expected, rel=1e-12) if np.isfinite(expected) else reach.dist[v] == np.inf
        if np.isfinite(reach.dist[v]):
            from frpd_cli.graph import extract_path

            assert reach.hops[v] == len(extract_path(reach.predecessor, v))
        else:
            assert reach.hops[v] == -1


def test_directed_graph_never_lowers_an_increasing_feature(sample):
    training, _, _, graph, _ = sample
    assert graph.directed
    A = graph.adjacency.tocoo()
    assert np.all(actionable_pairs(training.codes, A.row, A.col))
    age = training.frame["age"].to_numpy()
    assert np.all(age[A.col] >= age[A.row])
    rank = training.frame["savings"].map({v: i for i, v in enumerate(["none", "little", "moderate", "rich"])})
    assert np.all(rank.to_numpy()[A.col] >= rank.to_numpy()[A.row])


# ----------------------------------------------------------------------------- FACE


def test_face_takes_the_k_cheapest_reachable_candidates(sample):
    training, model, applicants, graph, _ = sample
    settings = PlanSettings(method="face", k=3, scheme="graph")
    plans = _plans(training, model, applicants, settings, graph)
    names = list(training.schema.feature_names)
    X0 = training.encoder.encode(applicants.loc[:, names])
    codes0 = training.encoder.constraint_codes(applicants.loc[:, names])
    pool = training.pool("predicted")
    for i, plan in enumerate(plans):
        reach = reach_from(graph, training.X, training.codes, X0[i], codes0.row(i))
        eligible = graph_candidates(training, reach, X0[i], codes0.row(i), pool, settings)
        oracle = sorted(eligible.tolist(), key=lambda r: (reach.dist[r], r))
        distinct = []
        for r in oracle:  # identical rows count once
            if not any(np.array_equal(training.X[r], training.X[c]) for c in distinct):
                distinct.append(r)
        assert [rec.path[-1] for rec in plan.recourses] == distinct[:3]
        assert [rec.cost for rec in plan.recourses] == pytest.approx([reach.dist[r] for r in distinct[:3]])


def test_face_needs_the_graph():
    with pytest.raises(InputError, match="The 'face' method needs --graph"):
        PlanSettings(method="face").validate()
    with pytest.raises(InputError, match="max_hops"):
        PlanSettings(max_hops=2).validate()


def test_face_ignores_the_global_rng(sample):
    training, model, applicants, graph, _ = sample
    settings = PlanSettings(method="face", k=3, scheme="graph")
    np.random.seed(1)
    a = _plans(training, model, applicants.head(5), settings, graph)
    np.random.seed(2)
    b = _plans(training, model, applicants.head(5), settings, graph)
    assert a == b


# ----------------------------------------------------------------------------- infeasible


class _RuleModel:
    """A stand-in classifier: favourable when x >= 5."""

    threshold = 0.5

    def favorable_probability(self, rows):
        return (np.asarray(rows["x"], dtype=float) >= 5).astype(float)


def _tiny(rows, categorical=("group",)):
    frame = pd.DataFrame(rows, columns=["x", "group", "label"])
    schema = infer_schema(frame, SchemaSpec(immutable=("group",), categorical=categorical))
    model = _RuleModel()
    training = build_training_set(frame, schema, model)
    return training, model


def test_disconnected_favourable_rows_give_infeasible_with_a_remedy():
    # two clusters in one group; with one neighbour per row they never connect
    rows = [(0.0, "a", 0), (0.1, "a", 0), (0.2, "a", 0), (5.0, "a", 1), (5.1, "a", 1), (5.2, "a", 1)]
    training, model = _tiny(rows)
    graph = build_graph(training.X, training.codes, n_neighbors=1)
    applicant = pd.DataFrame({"x": [0.05], "group": ["a"]})
    plan = _plans(training, model, applicant, PlanSettings(k=2, scheme="graph"), graph)[0]
    assert plan.status == "infeasible" and plan.recourses == ()
    assert plan.reason.startswith("only 0 candidate row(s) reachable on the graph, need 2")
    assert "3 favourable rows are actionable but not reachable" in plan.reason
    assert "larger --neighbors (now 1)" in plan.reason
    linear = _plans(training, model, applicant, PlanSettings(k=2), None)[0]
    assert linear.status == "ok"


def test_no_actionable_neighbour_names_the_immutable_feature():
    rows = [(0.0, 1, 0), (5.0, 1, 1), (6.0, 1, 1), (5.5, 2, 1)]
    training, model = _tiny(rows, categorical=())
    graph = build_graph(training.X, training.codes, n_neighbors=2)
    applicant = pd.DataFrame({"x": [1.0], "group": [3]})
    plan = _plans(training, model, applicant, PlanSettings(k=1, scheme="graph"), graph)[0]
    assert plan.status == "infeasible"
    assert plan.reason.startswith("the applicant has no actionable neighbour on the graph: every training row "
                                  "differs in an immutable feature")
    assert "4 differ in group (applicant: 3" in plan.reason


def test_max_step_beyond_every_neighbour_is_explained():
    rows = [(0.0, "a", 0), (5.0, "a", 1), (6.0, "a", 1)]
    training, model = _tiny(rows)
    graph = build_graph(training.X, training.codes, n_neighbors=2, max_step=0.1)
    applicant = pd.DataFrame({"x": [2], "group": ["a"]})     # x is an integer feature: a whole value
    plan = _plans(training, model, applicant, PlanSettings(k=1, scheme="graph"), graph)[0]
    assert plan.status == "infeasible" and "beyond the graph's max step 0.1" in plan.reason


# ----------------------------------------------------------------------------- determinism


def test_results_identical_for_any_jobs_and_chunking(sample):
    training, model, applicants, graph, _ = sample
    settings = PlanSettings(k=3, scheme="graph")
    one = _plans(training, model, applicants, settings, graph, n_jobs=1, chunk_size=64)
    two = _plans(training, model, applicants, settings, graph, n_jobs=2, chunk_size=3)
    assert one == two


def test_graph_of_other_data_is_refused(sample):
    training, model, applicants, _, _ = sample
    small = build_graph(training.X[:10], training.codes.take(np.arange(10)), n_neighbors=2)
    with pytest.raises(InputError, match="built from other data"):
        _plans(training, model, applicants, PlanSettings(scheme="graph"), small)


# ----------------------------------------------------------------------------- German (real data, optional)


@pytest.mark.parametrize("hubs", [False, True], ids=["per-change", "hubs"])
@pytest.mark.parametrize("method", ["quad", "face"])
def test_german_graph_plans_hold_every_invariant(german, method, hubs):
    from frpd_cli.cli.graph import category_blocks
    from frpd_cli.graph import default_neighbors

    model_path = german.model_path
    training, model = _setup(german.train_path, model_path,
                             SchemaSpec(immutable=("Personal status",), increasing=("Age",)))
    extra = {"hubs": training.favorable, "hub_neighbors": 10} if hubs else {}
    graph = build_graph(training.X, training.codes, n_neighbors=default_neighbors(training.n_rows),
                        category_blocks=category_blocks(training.encoder), **extra)
    denied = german.denied.head(30)
    settings = PlanSettings(method=method, k=3, scheme="graph")
    plans = _plans(training, model, denied, settings, graph)
    n_ok = check_invariants(_euclidean(training, denied, plans), training, model_path, denied, 3)
    assert n_ok >= 0.8 * len(denied)
    assert check_paths(plans, training, graph, denied, settings) >= 2 * n_ok


@pytest.mark.parametrize("method", ["quad", "face"])
def test_graph_plans_keep_limits_relative_to_the_applicant(sample_paths, method):
    """The sample schema's age = "+0:+5": every graph recourse ages the applicant by 0 to 5 years, and an applicant
    left without a recourse is told why."""
    from frpd_cli.schema import load_schema_file

    spec = load_schema_file(sample_paths["schema"])
    assert spec.ranges.get("age") == "+0:+5"
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"])
    graph = build_graph(training.X, training.codes, n_neighbors=10)
    plans = _plans(training, model, applicants, PlanSettings(method=method, k=3, scheme="graph"), graph)
    n_recourses = 0
    for plan, age0 in zip(plans, applicants["age"]):
        if plan.status != "ok":
            assert plan.reason
            continue
        for r in plan.recourses:
            n_recourses += 1
            assert 0 <= int(r.features["age"]) - int(age0) <= 5, (plan.applicant, age0, r.features["age"])
    assert n_recourses > 0
