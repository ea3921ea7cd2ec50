"""Tests of frpd_cli.graph: brute-force oracles and invariants."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frpd_cli.constraints import ConstraintCodes, actionable_mask
from frpd_cli.exceptions import ArtifactError, InputError
from frpd_cli.graph import (
    ZERO_LENGTH_WEIGHT,
    Graph,
    attach_source,
    build_graph,
    extract_path,
    graph_from_arrays,
    graph_statistics,
    graph_to_arrays,
    path_cost,
    shortest_paths,
    to_networkx,
)

ALGORITHMS = ("kd_tree", "brute")


# --------------------------------------------------------------------------
# fixtures and oracles
# --------------------------------------------------------------------------


def make_data(n=80, p=3, *, n_groups=2, directions=(1,), seed=0, duplicates=0, grid=None):
    """Random encoded rows and codes: one immutable column, monotone integer codes."""
    rng = np.random.default_rng(seed)
    if grid is None:
        X = rng.random((n, p))
    else:  # coarse values: many distance ties
        X = rng.integers(0, grid, size=(n, p)) / grid
    if duplicates:
        src = rng.integers(0, n, size=duplicates)
        dst = rng.choice(n, size=duplicates, replace=False)
        X[dst] = X[src]
    immutable = rng.integers(0, n_groups, size=(n, 1)).astype(float)
    monotone = rng.integers(0, 4, size=(n, len(directions))).astype(float)
    if duplicates:
        immutable[dst], monotone[dst] = immutable[src], monotone[src]
    codes = ConstraintCodes(
        immutable=immutable, monotone=monotone, direction=np.array(directions, dtype=np.int8)
    )
    return X, codes


def oracle_targets(X, codes, u, *, n_neighbors=None, radius=None, max_step=None, x0=None, codes0=None):
    """Out-neighbours of row u (or of x0) by brute force, straight from the documented rule."""
    source = codes.row(u) if x0 is None else codes0
    point = X[u] if x0 is None else x0
    mask = actionable_mask(source, codes)
    if x0 is None:
        mask[u] = False
    idx = np.flatnonzero(mask)
    length = np.linalg.norm(X[idx] - point, axis=1)
    if radius is not None:
        chosen = idx[length <= radius]
    else:
        zero = idx[length == 0]
        pos = length > 0
        order = np.lexsort((idx[pos], length[pos]))
        chosen = np.concatenate([zero, idx[pos][order][:n_neighbors]])
    if max_step is not None:
        chosen = chosen[np.linalg.norm(X[chosen] - point, axis=1) <= max_step]
    return set(chosen.tolist())


def out_edges(graph, u):
    A = graph.adjacency
    sl = slice(A.indptr[u], A.indptr[u + 1])
    return A.indices[sl], A.data[sl]


def edge_list(graph):
    A = graph.adjacency
    src = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    return src, A.indices, A.data


def assert_same_graph(a, b):
    A, B = a.adjacency, b.adjacency
    assert A.shape == B.shape
    np.testing.assert_array_equal(A.indptr, B.indptr)
    np.testing.assert_array_equal(A.indices, B.indices)
    np.testing.assert_array_equal(A.data, B.data)
    assert (a.n_neighbors, a.radius, a.max_step, a.weight, a.directed, a.bandwidth) == (
        b.n_neighbors, b.radius, b.max_step, b.weight, b.directed, b.bandwidth
    )


def nx_with_source(graph, neighbors, weights):
    G = to_networkx(graph)
    G.add_node("x0")
    G.add_weighted_edges_from(("x0", int(v), float(w)) for v, w in zip(neighbors, weights))
    return G


# --------------------------------------------------------------------------
# edge rule
# --------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("directions", [(1,), (-1,), (1, -1)])
def test_out_edges_are_the_n_nearest_actionable_targets(algorithm, directions):
    X, codes = make_data(n=90, directions=directions, seed=len(directions))
    g = build_graph(X, codes, n_neighbors=4, algorithm=algorithm, chunk_size=50)
    assert g.directed
    for u in range(X.shape[0]):
        dst, w = out_edges(g, u)
        assert set(dst.tolist()) == oracle_targets(X, codes, u, n_neighbors=4)
        np.testing.assert_allclose(w, np.linalg.norm(X[dst] - X[u], axis=1), rtol=1e-12)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_edge_is_actionable(algorithm):
    X, codes = make_data(n=150, p=4, n_groups=3, directions=(1, -1), seed=3)
    g = build_graph(X, codes, n_neighbors=6, algorithm=algorithm)
    src, dst, _ = edge_list(g)
    assert src.size > 0
    for u in np.unique(src):
        ok = actionable_mask(codes.row(u), codes.take(dst[src == u]))
        assert ok.all()
    # raw codes, all edges at once
    assert np.all(codes.immutable[src] == codes.immutable[dst])
    assert np.all((codes.monotone[dst] - codes.monotone[src]) * codes.direction >= 0)
    assert np.all(src != dst)


def test_increasing_feature_never_goes_down_and_graph_is_directed():
    X, codes = make_data(n=120, directions=(1,), seed=5)
    g = build_graph(X, codes, n_neighbors=5)
    src, dst, _ = edge_list(g)
    assert g.directed
    assert np.all(codes.monotone[dst, 0] >= codes.monotone[src, 0])
    # some edge goes strictly up and its reverse is absent
    up = np.flatnonzero(codes.monotone[dst, 0] > codes.monotone[src, 0])
    assert up.size
    A = g.adjacency.tocsr()
    assert all(A[dst[i], src[i]] == 0 for i in up)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_without_monotone_features_graph_is_symmetric_union(algorithm):
    X, codes = make_data(n=70, directions=(), seed=7)
    g = build_graph(X, codes, n_neighbors=3, algorithm=algorithm)
    assert not g.directed
    A = g.adjacency
    assert (A != A.T).nnz == 0
    chosen = {u: oracle_targets(X, codes, u, n_neighbors=3) for u in range(70)}
    for u in range(70):
        expected = chosen[u] | {v for v in range(70) if u in chosen[v]}
        assert set(out_edges(g, u)[0].tolist()) == expected


def test_groups_never_connect():
    X, codes = make_data(n=100, n_groups=4, seed=11)
    g = build_graph(X, codes, n_neighbors=8)
    src, dst, _ = edge_list(g)
    assert np.all(codes.immutable[src, 0] == codes.immutable[dst, 0])
    comps = graph_statistics(g)["weak_components"]
    assert comps >= 4


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_radius_semantics(algorithm):
    X, codes = make_data(n=80, directions=(1,), seed=13)
    g = build_graph(X, codes, radius=0.3, algorithm=algorithm, n_neighbors=1)
    assert g.radius == 0.3 and g.n_neighbors is None
    for u in range(80):
        dst, _ = out_edges(g, u)
        assert set(dst.tolist()) == oracle_targets(X, codes, u, radius=0.3)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_max_step_caps_edges(algorithm):
    X, codes = make_data(n=80, directions=(-1,), seed=17)
    g = build_graph(X, codes, n_neighbors=6, max_step=0.25, algorithm=algorithm)
    _, _, w = edge_list(g)
    assert np.all(w <= 0.25)
    for u in range(80):
        dst, _ = out_edges(g, u)
        assert set(dst.tolist()) == oracle_targets(X, codes, u, n_neighbors=6, max_step=0.25)


def test_grow_k_when_monotone_filter_discards_most_neighbours():
    # u's 30 nearest rows are all lower on an increasing-only code
    rng = np.random.default_rng(0)
    X = np.vstack([[0.5, 0.5], 0.5 + 0.01 * rng.standard_normal((30, 2)), rng.random((40, 2))])
    mono = np.r_[5.0, np.zeros(30), np.full(40, 9.0)][:, None]
    codes = ConstraintCodes(np.zeros((71, 0)), mono, np.array([1], np.int8))
    for algorithm in ALGORITHMS:
        g = build_graph(X, codes, n_neighbors=3, algorithm=algorithm)
        assert set(out_edges(g, 0)[0].tolist()) == oracle_targets(X, codes, 0, n_neighbors=3)
        assert len(out_edges(g, 0)[0]) == 3


def test_no_actionable_target_gives_no_out_edge():
    X = np.array([[0.0], [0.5], [1.0]])
    codes = ConstraintCodes(np.zeros((3, 0)), np.array([[0.0], [1.0], [2.0]]), np.array([1], np.int8))
    g = build_graph(X, codes, n_neighbors=5)
    assert out_edges(g, 2)[0].size == 0
    assert graph_statistics(g)["sinks"] == 1


# --------------------------------------------------------------------------
# duplicates (zero-length edges)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_duplicates_keep_zero_length_edges_and_do_not_count(algorithm):
    rng = np.random.default_rng(1)
    base = rng.random((20, 2))
    X = np.vstack([np.repeat(base[:1], 8, axis=0), base[1:]])  # rows 0..7 identical
    codes = ConstraintCodes(np.zeros((27, 1)), np.zeros((27, 1)), np.array([1], np.int8))
    g = build_graph(X, codes, n_neighbors=2, algorithm=algorithm)
    for u in range(8):
        dst, w = out_edges(g, u)
        dups = [v for v in range(8) if v != u]
        assert set(dups) <= set(dst.tolist())
        assert np.all(w[np.isin(dst, dups)] == ZERO_LENGTH_WEIGHT)
        # and still two edges leaving the block of duplicates
        assert np.sum(~np.isin(dst, range(8))) == 2
        assert set(dst.tolist()) == oracle_targets(X, codes, u, n_neighbors=2)
    assert np.all(g.adjacency.data > 0)
    # a path through duplicates costs (almost) nothing and exists
    nbr, w = attach_source(g, X, codes, X[0], codes.row(0))
    assert set(range(8)) <= set(nbr.tolist())
    dist, pred = shortest_paths(g, nbr, w)
    assert np.all(dist[:8] <= 1e-299)
    assert np.isfinite(dist[8:]).sum() >= 2  # the block of duplicates is not a dead end


def test_duplicates_survive_arrays_and_csgraph():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    codes = ConstraintCodes(np.zeros((3, 0)), np.zeros((3, 0)), np.zeros(0, np.int8))
    g = build_graph(X, codes, n_neighbors=1)
    g2 = graph_from_arrays(graph_to_arrays(g))
    assert g2.adjacency[0, 1] == ZERO_LENGTH_WEIGHT
    assert graph_statistics(g2)["weak_components"] == 1


# --------------------------------------------------------------------------
# kd-tree vs brute force, determinism
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n=300, p=3, directions=(1,), seed=21),
        dict(n=300, p=2, directions=(1, -1), seed=22, grid=5),  # many ties
        dict(n=250, p=3, directions=(), seed=23, duplicates=60),
        dict(n=250, p=4, directions=(-1,), seed=24, grid=3, duplicates=40),
    ],
)
@pytest.mark.parametrize("mode", [dict(n_neighbors=5), dict(n_neighbors=1, max_step=0.3), dict(radius=0.25)])
def test_kd_tree_and_brute_force_give_identical_graphs(kwargs, mode):
    X, codes = make_data(**kwargs)
    a = build_graph(X, codes, algorithm="kd_tree", chunk_size=97, **mode)
    b = build_graph(X, codes, algorithm="brute", chunk_size=1000, **mode)
    c = build_graph(X, codes, algorithm="auto", **mode)
    assert_same_graph(a, b)
    assert_same_graph(a, c)


@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 60),
    k=st.integers(1, 6),
    grid=st.sampled_from([None, 2, 4]),
    directions=st.sampled_from([(), (1,), (-1, 1)]),
)
@settings(max_examples=40, deadline=None)
def test_property_oracle_and_algorithms_agree(seed, n, k, grid, directions):
    X, codes = make_data(n=n, p=2, directions=directions, seed=seed, grid=grid)
    a = build_graph(X, codes, n_neighbors=k, algorithm="kd_tree", chunk_size=7)
    b = build_graph(X, codes, n_neighbors=k, algorithm="brute", chunk_size=13)
    assert_same_graph(a, b)
    if directions:
        for u in range(n):
            assert set(out_edges(a, u)[0].tolist()) == oracle_targets(X, codes, u, n_neighbors=k)


def test_determinism():
    X, codes = make_data(n=200, directions=(1,), seed=31, duplicates=20)
    for mode in (dict(), dict(weight="density")):
        a = build_graph(X, codes, **mode)
        b = build_graph(X.copy(), codes, **mode)
        assert_same_graph(a, b)
        fa, fb = graph_to_arrays(a), graph_to_arrays(b)
        assert all(fa[k].tobytes() == fb[k].tobytes() for k in fa)


def test_progress_reports_every_row():
    X, codes = make_data(n=120, n_groups=3, seed=37)
    calls = []
    build_graph(X, codes, n_neighbors=3, chunk_size=40, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (120, 120)
    assert all(total == 120 for _, total in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


# --------------------------------------------------------------------------
# weights
# --------------------------------------------------------------------------


def test_density_weights_follow_the_documented_formula():
    X, codes = make_data(n=40, p=2, directions=(1,), seed=41)
    h = 1.0  # cutoff 4h covers the unit square: the KDE is exact here
    g = build_graph(X, codes, n_neighbors=3, weight="density", bandwidth=h)
    assert g.bandwidth == h
    src, dst, w = edge_list(g)
    mid = 0.5 * (X[src] + X[dst])
    f = np.exp(-0.5 * ((mid[:, None, :] - X[None]) ** 2).sum(-1) / h**2).mean(axis=1)
    np.testing.assert_allclose(w, np.linalg.norm(X[src] - X[dst], axis=1) / f, rtol=1e-10)
    assert np.all(w >= np.linalg.norm(X[src] - X[dst], axis=1))


def test_density_default_bandwidth_is_median_edge_length():
    X, codes = make_data(n=60, seed=43)
    e = build_graph(X, codes, n_neighbors=4)
    d = build_graph(X, codes, n_neighbors=4, weight="density")
    assert d.bandwidth == pytest.approx(np.median(e.adjacency.data))
    np.testing.assert_array_equal(d.adjacency.indices, e.adjacency.indices)


# --------------------------------------------------------------------------
# attach and shortest paths
# --------------------------------------------------------------------------


@pytest.mark.parametrize("weight", ["euclidean", "density"])
def test_attaching_a_training_row_reproduces_its_edges(weight):
    X, codes = make_data(n=100, directions=(1,), seed=47)
    g = build_graph(X, codes, n_neighbors=4, weight=weight)
    for u in (0, 17, 55):
        nbr, w = attach_source(g, X, codes, X[u], codes.row(u))
        dst, gw = out_edges(g, u)
        assert set(nbr.tolist()) == set(dst.tolist()) | {u}
        assert w[nbr == u][0] == ZERO_LENGTH_WEIGHT
        lookup = dict(zip(nbr.tolist(), w.tolist()))
        np.testing.assert_allclose([lookup[v] for v in dst], gw, rtol=1e-9)


def test_attach_follows_the_oracle_and_does_not_modify_the_graph():
    X, codes = make_data(n=100, directions=(1, -1), seed=53)
    g = build_graph(X, codes, n_neighbors=5)
    before = graph_to_arrays(g)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x0 = rng.random(3)
        c0 = codes.row(int(rng.integers(100)))
        nbr, w = attach_source(g, X, codes, x0, c0)
        assert set(nbr.tolist()) == oracle_targets(X, codes, None, n_neighbors=5, x0=x0, codes0=c0)
        np.testing.assert_allclose(w, np.linalg.norm(X[nbr] - x0, axis=1), rtol=1e-12)
        assert np.all(np.diff(np.linalg.norm(X[nbr] - x0, axis=1)) >= -1e-15)  # nearest first
        shortest_paths(g, nbr, w)
    after = graph_to_arrays(g)
    assert all(before[k].tobytes() == after[k].tobytes() for k in before)


@pytest.mark.parametrize("seed", range(6))
def test_dijkstra_matches_networkx(seed):
    directions = [(), (1,), (1, -1)][seed % 3]
    X, codes = make_data(n=120, p=3, directions=directions, seed=100 + seed)
    g = build_graph(X, codes, n_neighbors=4, weight="density" if seed >= 3 else "euclidean")
    rng = np.random.default_rng(seed)
    x0, c0 = rng.random(3), codes.row(int(rng.integers(120)))
    nbr, w = attach_source(g, X, codes, x0, c0)
    dist, pred = shortest_paths(g, nbr, w)
    G = nx_with_source(g, nbr, w)
    lengths, paths = nx.single_source_dijkstra(G, "x0")
    reach = np.isfinite(dist)
    assert set(np.flatnonzero(reach).tolist()) == {v for v in lengths if v != "x0"}
    for v in np.flatnonzero(reach):
        assert dist[v] == pytest.approx(lengths[v], rel=1e-12)
        path = extract_path(pred, int(v))
        assert path == paths[v][1:]  # continuous random data: shortest paths are unique
        assert path_cost(g, nbr, w, path) == pytest.approx(dist[v], rel=1e-12)
    assert np.all(pred[~reach] == -1)
    # predecessor -1 with a finite distance means "directly from x0"
    direct = np.flatnonzero(reach & (pred == -1))
    assert set(direct.tolist()) <= set(nbr.tolist())


def test_path_cost_is_sum_of_edge_weights():
    X, codes = make_data(n=60, directions=(), seed=61)
    g = build_graph(X, codes, n_neighbors=3)
    nbr, w = attach_source(g, X, codes, X[0] + 0.01, codes.row(0))
    dist, pred = shortest_paths(g, nbr, w)
    target = int(np.nanargmax(np.where(np.isfinite(dist), dist, np.nan)))
    path = extract_path(pred, target)
    A = g.adjacency
    manual = w[list(nbr).index(path[0])] + sum(A[u, v] for u, v in zip(path[:-1], path[1:]))
    assert path_cost(g, nbr, w, path) == pytest.approx(manual, rel=1e-14)
    assert path_cost(g, nbr, w, []) == 0.0
    with pytest.raises(InputError, match="not an edge"):
        bad = [path[0], path[0]]
        path_cost(g, nbr, w, bad)


def test_unreachable_nodes_have_infinite_distance():
    X, codes = make_data(n=80, n_groups=2, directions=(1,), seed=67)
    g = build_graph(X, codes, n_neighbors=5)
    c0 = ConstraintCodes(np.array([[0.0]]), np.array([[0.0]]), codes.direction)
    nbr, w = attach_source(g, X, codes, np.full(3, 0.5), c0)
    dist, pred = shortest_paths(g, nbr, w)
    other = codes.immutable[:, 0] != 0
    assert np.all(np.isinf(dist[other])) and np.all(pred[other] == -1)
    # an applicant above every monotone code has no actionable target at all
    c_top = ConstraintCodes(np.array([[0.0]]), np.array([[99.0]]), codes.direction)
    nbr, w = attach_source(g, X, codes, np.full(3, 0.5), c_top)
    assert nbr.size == 0 and w.size == 0
    dist, pred = shortest_paths(g, nbr, w)
    assert np.all(np.isinf(dist)) and np.all(pred == -1)
    # an immutable value no training row has
    c_new = ConstraintCodes(np.array([[7.0]]), np.array([[0.0]]), codes.direction)
    assert attach_source(g, X, codes, np.full(3, 0.5), c_new)[0].size == 0


def test_limit_cuts_far_nodes():
    X, codes = make_data(n=100, directions=(), seed=71)
    g = build_graph(X, codes, n_neighbors=4)
    nbr, w = attach_source(g, X, codes, X[3], codes.row(3))
    full, _ = shortest_paths(g, nbr, w)
    cut, _ = shortest_paths(g, nbr, w, limit=0.2)
    near = full <= 0.2
    np.testing.assert_array_equal(cut[near], full[near])
    assert np.all(np.isinf(cut[~near]))


# --------------------------------------------------------------------------
# arrays, statistics, networkx
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode", [dict(), dict(radius=0.3), dict(max_step=0.2, weight="density"), dict(directions=())]
)
def test_arrays_round_trip_through_npz(tmp_path, mode):
    mode = dict(mode)
    X, codes = make_data(n=90, directions=mode.pop("directions", (1,)), seed=73)
    g = build_graph(X, codes, **mode)
    np.savez(tmp_path / "g.npz", **graph_to_arrays(g))
    with np.load(tmp_path / "g.npz", allow_pickle=False) as f:
        g2 = graph_from_arrays(f)
    assert isinstance(g2, Graph)
    assert_same_graph(g, g2)


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda a: a.pop("indptr"), "lack indptr"),
        (lambda a: a.update(indptr=a["indptr"][:-1]), "indptr"),
        (lambda a: a.update(data=-a["data"]), "positive"),
        (lambda a: a.update(indices=a["indices"] + 1000), "outside"),
        (lambda a: a.update(indices=a["indices"][::-1].copy()), "increasing"),
        (lambda a: a.update(weight=np.array("cosine")), "weight"),
        (lambda a: a.update(graph_format_version=np.array(99)), "version"),
        (lambda a: a.update(n_neighbors=np.array(-1)), "n_neighbors"),
        (lambda a: a.update(data=a["data"].astype(object)), "floats"),
    ],
)
def test_graph_from_arrays_rejects_nonsense(corrupt, message):
    X, codes = make_data(n=30, seed=79)
    arrays = graph_to_arrays(build_graph(X, codes, n_neighbors=3))
    corrupt(arrays)
    with pytest.raises(ArtifactError, match=message):
        graph_from_arrays(arrays)


def test_graph_to_arrays_has_no_object_arrays():
    X, codes = make_data(n=30, seed=83)
    arrays = graph_to_arrays(build_graph(X, codes, weight="density"))
    assert all(v.dtype != object for v in arrays.values())


def test_statistics_on_a_known_graph():
    X = np.array([[0.0], [0.1], [0.2], [5.0], [9.0]])
    codes = ConstraintCodes(np.array([[0.0], [0.0], [0.0], [0.0], [1.0]]), np.zeros((5, 0)), np.zeros(0, np.int8))
    g = build_graph(X, codes, n_neighbors=1, max_step=1.0)
    stats = graph_statistics(g)
    assert stats == {
        "nodes": 5,
        "edges": 4,  # 0<->1, 1<->2
        "directed": False,
        "weak_components": 3,
        "largest_component": 3,
        "median_out_degree": 1.0,
        "sinks": 2,
        "isolated_nodes": 2,
    }


def test_to_networkx_has_the_same_edges():
    X, codes = make_data(n=50, directions=(1,), seed=89)
    g = build_graph(X, codes, n_neighbors=3)
    G = to_networkx(g)
    src, dst, w = edge_list(g)
    assert G.number_of_nodes() == 50 and G.number_of_edges() == g.n_edges
    assert all(G[u][v]["weight"] == x for u, v, x in zip(src.tolist(), dst.tolist(), w.tolist()))
    assert G.graph["n_neighbors"] == 3 and "radius" not in G.graph


# --------------------------------------------------------------------------
# input errors
# --------------------------------------------------------------------------


def test_input_errors_say_what_was_expected_and_received():
    X, codes = make_data(n=20, seed=97)
    with pytest.raises(InputError, match=r"The 'n_neighbors' option must be an int >= 1\. Got 0 instead\."):
        build_graph(X, codes, n_neighbors=0)
    with pytest.raises(InputError, match="n_neighbors.*Got True"):
        build_graph(X, codes, n_neighbors=True)
    with pytest.raises(InputError, match="'weight' option must be one of euclidean, density. Got 'cosine'"):
        build_graph(X, codes, weight="cosine")
    with pytest.raises(InputError, match="radius.*Got -1"):
        build_graph(X, codes, radius=-1)
    with pytest.raises(InputError, match="bandwidth.*only applies"):
        build_graph(X, codes, bandwidth=0.5)
    with pytest.raises(InputError, match=r"codes.immutable.*\(19, n_immutable\)"):
        build_graph(X[:19], codes)
    with pytest.raises(InputError, match="NaN"):
        build_graph(np.where(X > 0.9, np.nan, X), codes)
    with pytest.raises(InputError, match="ConstraintCodes"):
        build_graph(X, None)
    g = build_graph(X, codes, n_neighbors=2)
    with pytest.raises(InputError, match="'x0' must be one finite encoded row of 3 values"):
        attach_source(g, X, codes, np.zeros(4), codes.row(0))
    with pytest.raises(InputError, match="graph's 20 rows"):
        attach_source(g, X[:10], codes.take(range(10)), np.zeros(3), codes.row(0))
    with pytest.raises(InputError, match="neighbors"):
        shortest_paths(g, np.array([25]), np.array([1.0]))
    with pytest.raises(InputError, match="weights"):
        shortest_paths(g, np.array([1]), np.array([0.0]))
    with pytest.raises(InputError, match="limit"):
        shortest_paths(g, np.array([1]), np.array([1.0]), limit=-1)
    with pytest.raises(InputError, match="target"):
        extract_path(np.full(20, -1), 20)


def test_kd_tree_growth_inside_a_large_group():
    # 3000 rows, increasing-only code tied to a feature: many rows need k to grow,
    # the top rows fall back to brute force; the result must equal brute force.
    rng = np.random.default_rng(5)
    X = rng.random((3000, 2))
    mono = np.floor(X[:, :1] * 30)
    X[:200] = X[200:400]  # duplicates
    mono[:200] = mono[200:400]
    codes = ConstraintCodes(np.zeros((3000, 0)), mono, np.array([1], np.int8))
    a = build_graph(X, codes, n_neighbors=7, algorithm="kd_tree", chunk_size=5000)
    b = build_graph(X, codes, n_neighbors=7, algorithm="brute")
    assert_same_graph(a, b)
    for u in rng.choice(3000, 40, replace=False):
        assert set(out_edges(a, u)[0].tolist()) == oracle_targets(X, codes, u, n_neighbors=7)


# --------------------------------------------------------------------------
# neighbours per number of changed categories (category_blocks)
# --------------------------------------------------------------------------


def make_onehot_data(n=90, *, levels=(3, 2, 4), n_cont=2, n_groups=2, directions=(1,), seed=0, duplicates=0):
    """Rows of ``n_cont`` continuous columns then one one-hot block per categorical feature."""
    rng = np.random.default_rng(seed)
    cont = rng.random((n, n_cont))
    blocks, parts, start = [], [cont], n_cont
    for m in levels:
        onehot = np.zeros((n, m))
        onehot[np.arange(n), rng.integers(0, m, size=n)] = 1.0
        parts.append(onehot)
        blocks.append((start, start + m))
        start += m
    X = np.hstack(parts)
    if duplicates:
        src = rng.integers(0, n, size=duplicates)
        dst = rng.choice(n, size=duplicates, replace=False)
        X[dst] = X[src]
    immutable = rng.integers(0, n_groups, size=(n, 1)).astype(float)
    monotone = rng.integers(0, 4, size=(n, len(directions))).astype(float)
    if duplicates:
        immutable[dst], monotone[dst] = immutable[src], monotone[src]
    codes = ConstraintCodes(immutable=immutable, monotone=monotone, direction=np.array(directions, dtype=np.int8))
    return X, codes, blocks


def changed_categories(X, blocks, point):
    """How many categorical features each row of X changes from ``point`` (argmax per block)."""
    return sum((X[:, a:b].argmax(axis=1) != np.argmax(point[a:b])).astype(int) for a, b in blocks)


def oracle_per_change(X, codes, blocks, u, n_neighbors, *, x0=None, codes0=None):
    """Out-neighbours straight from the documented rule: per number of changed categories, every duplicate
    plus the n_neighbors nearest positive-length actionable targets (ties by row index)."""
    source = codes.row(u) if x0 is None else codes0
    point = X[u] if x0 is None else x0
    mask = actionable_mask(source, codes)
    if x0 is None:
        mask[u] = False
    idx = np.flatnonzero(mask)
    length = np.linalg.norm(X[idx] - point, axis=1)
    change = changed_categories(X[idx], blocks, point)
    chosen = set(idx[length == 0].tolist())
    for c in np.unique(change):
        sel = (change == c) & (length > 0)
        order = np.lexsort((idx[sel], length[sel]))
        chosen |= set(idx[sel][order][:n_neighbors].tolist())
    return chosen


def test_per_change_rule_on_a_hand_made_case():
    # one continuous column, then features A (2 levels) and B (2 levels), one-hot
    X = np.array([
        [0.0, 1, 0, 1, 0],  # 0: u
        [0.1, 1, 0, 1, 0],  # 1: no change, length 0.1
        [0.5, 1, 0, 1, 0],  # 2: no change, length 0.5
        [0.0, 0, 1, 1, 0],  # 3: changes A, length sqrt(2)
        [0.3, 1, 0, 0, 1],  # 4: changes B, length sqrt(2.09)
        [0.9, 0, 1, 0, 1],  # 5: changes A and B, length sqrt(4.81)
    ], dtype=float)
    # a constant monotone code: every move allowed, but the graph is directed (out-edges = selections)
    codes = ConstraintCodes(np.zeros((6, 0)), np.zeros((6, 1)), np.ones(1, np.int8))
    blocks = [(1, 3), (3, 5)]
    plain = build_graph(X, codes, n_neighbors=1)
    per = build_graph(X, codes, n_neighbors=1, category_blocks=blocks)
    assert set(out_edges(plain, 0)[0].tolist()) == {1}  # plain nearest neighbour never changes a category
    dst, w = out_edges(per, 0)
    # the nearest target per number of changes: 1 (none), 3 (one: nearer than 4), 5 (two)
    assert dst.tolist() == [1, 3, 5]
    np.testing.assert_allclose(w, [0.1, np.sqrt(2.0), np.sqrt(4.81)], rtol=1e-14)
    # row 4 has no target without changes; among those changing one category, 1 and 2 tie (sqrt(2.04)) and the
    # lower index wins; 3 is its only target changing two
    assert out_edges(per, 4)[0].tolist() == [1, 3]
    np.testing.assert_array_equal(per.category_blocks, np.array(blocks))
    # a path 0 -> 5 pays one move, not one move per category
    nbr, wt = attach_source(per, X, codes, X[0], codes.row(0))
    dist, _ = shortest_paths(per, nbr, wt)
    assert dist[5] == pytest.approx(np.sqrt(4.81), rel=1e-14)
    dist_plain, _ = shortest_paths(plain, *attach_source(plain, X, codes, X[0], codes.row(0)))
    assert dist_plain[5] > dist[5] + 0.1


@pytest.mark.parametrize("directions", [(1,), (1, -1)])
@pytest.mark.parametrize("seed", range(3))
def test_per_change_out_edges_follow_the_oracle(directions, seed):
    X, codes, blocks = make_onehot_data(n=110, directions=directions, seed=200 + seed, duplicates=6)
    g = build_graph(X, codes, n_neighbors=3, category_blocks=blocks, chunk_size=300 + 97 * seed)
    assert g.directed
    for u in range(X.shape[0]):
        dst, w = out_edges(g, u)
        assert set(dst.tolist()) == oracle_per_change(X, codes, blocks, u, 3)
        np.testing.assert_allclose(np.maximum(w, ZERO_LENGTH_WEIGHT),
                                   np.maximum(np.linalg.norm(X[dst] - X[u], axis=1), ZERO_LENGTH_WEIGHT),
                                   rtol=1e-12)
    src, dst, _ = edge_list(g)
    assert np.all(actionable_pairs_ok(codes, src, dst))


def actionable_pairs_ok(codes, src, dst):
    imm = np.all(codes.immutable[src] == codes.immutable[dst], axis=1)
    mono = np.all(codes.direction * (codes.monotone[dst] - codes.monotone[src]) >= 0, axis=1)
    return imm & mono


def test_per_change_undirected_graph_is_the_symmetric_union():
    X, codes, blocks = make_onehot_data(n=80, directions=(), seed=211)
    g = build_graph(X, codes, n_neighbors=2, category_blocks=blocks)
    assert not g.directed
    A = g.adjacency
    assert (A != A.T).nnz == 0
    selected = {(u, v) for u in range(80) for v in oracle_per_change(X, codes, blocks, u, 2)}
    src, dst, _ = edge_list(g)
    assert set(zip(src.tolist(), dst.tolist())) == selected | {(v, u) for u, v in selected}


def test_per_change_graph_changes_several_categories_per_move_and_has_more_edges():
    X, codes, blocks = make_onehot_data(n=150, levels=(4, 4, 4), n_cont=1, directions=(), seed=223)
    plain = build_graph(X, codes, n_neighbors=4)
    per = build_graph(X, codes, n_neighbors=4, category_blocks=blocks)
    src, dst, _ = edge_list(per)
    changes = np.array([changed_categories(X[[v]], blocks, X[u])[0] for u, v in zip(src, dst)])
    assert set(np.unique(changes).tolist()) == {0, 1, 2, 3}
    # a per-change graph holds every plain-kNN edge of positive length (shell 0 or the nearest of its shell)
    ps, pd_, _ = edge_list(plain)
    assert set(zip(ps.tolist(), pd_.tolist())) - set(zip(src.tolist(), dst.tolist())) == set()


@pytest.mark.parametrize("directions", [(1,), ()])
def test_per_change_attach_follows_the_oracle_and_reproduces_training_rows(directions):
    X, codes, blocks = make_onehot_data(n=100, directions=directions, seed=227)
    g = build_graph(X, codes, n_neighbors=3, category_blocks=blocks)
    rng = np.random.default_rng(1)
    for u in (0, 31, 77):
        nbr, w = attach_source(g, X, codes, X[u], codes.row(u))
        assert set(nbr.tolist()) == oracle_per_change(X, codes, blocks, None, 3, x0=X[u], codes0=codes.row(u))
        if directions:
            assert set(nbr.tolist()) == set(out_edges(g, u)[0].tolist()) | {u}
        assert np.all(np.diff(np.linalg.norm(X[nbr] - X[u], axis=1)) >= -1e-15)  # nearest first
    for _ in range(4):  # an applicant who is no training row: new continuous values, existing categories
        x0 = X[int(rng.integers(100))].copy()
        x0[:2] = rng.random(2)
        c0 = codes.row(int(rng.integers(100)))
        nbr, w = attach_source(g, X, codes, x0, c0)
        assert set(nbr.tolist()) == oracle_per_change(X, codes, blocks, None, 3, x0=x0, codes0=c0)
        np.testing.assert_allclose(w, np.linalg.norm(X[nbr] - x0, axis=1), rtol=1e-12)


def test_per_change_dijkstra_and_path_costs_match_networkx():
    X, codes, blocks = make_onehot_data(n=120, directions=(1,), seed=229)
    g = build_graph(X, codes, n_neighbors=2, category_blocks=blocks)
    x0, c0 = X[5].copy(), codes.row(5)
    x0[0] += 0.01
    nbr, w = attach_source(g, X, codes, x0, c0)
    dist, pred = shortest_paths(g, nbr, w)
    lengths, paths = nx.single_source_dijkstra(nx_with_source(g, nbr, w), "x0")
    reach = np.flatnonzero(np.isfinite(dist))
    assert set(reach.tolist()) == {v for v in lengths if v != "x0"}
    G = to_networkx(g)
    for v in reach:
        assert dist[v] == pytest.approx(lengths[v], rel=1e-12)
        path = extract_path(pred, int(v))
        # the cost is the sum of the edge lengths along the path, each an actionable Euclidean move
        first = float(w[list(nbr).index(path[0])])
        manual = first + sum(G[a][b]["weight"] for a, b in zip(path[:-1], path[1:]))
        assert path_cost(g, nbr, w, path) == pytest.approx(manual, rel=1e-12)
        assert manual == pytest.approx(dist[v], rel=1e-12)
        assert np.all(actionable_pairs_ok(codes, np.array(path[:-1], dtype=int), np.array(path[1:], dtype=int)))


@pytest.mark.parametrize("directions", [(1,), ()])
def test_per_change_graph_round_trips_and_old_arrays_load(tmp_path, directions):
    X, codes, blocks = make_onehot_data(n=60, directions=directions, seed=233)
    g = build_graph(X, codes, n_neighbors=2, category_blocks=blocks)
    np.savez(tmp_path / "g.npz", **graph_to_arrays(g))
    with np.load(tmp_path / "g.npz", allow_pickle=False) as f:
        g2 = graph_from_arrays(f)
    assert_same_graph(g, g2)
    np.testing.assert_array_equal(g2.category_blocks, g.category_blocks)
    x0 = X[3]
    for a, b in zip(attach_source(g, X, codes, x0, codes.row(3)), attach_source(g2, X, codes, x0, codes.row(3))):
        np.testing.assert_array_equal(a, b)
    # arrays saved before the rule existed (no per_change key) load as a plain nearest-neighbour graph
    plain = graph_to_arrays(build_graph(X, codes, n_neighbors=2))
    plain.pop("per_change")
    plain.pop("category_blocks")
    assert graph_from_arrays(plain).category_blocks is None


def test_per_change_input_errors():
    X, codes, blocks = make_onehot_data(n=30, seed=239)
    with pytest.raises(InputError, match=r"Columns 2:5 of 'X' are declared a one-hot block, but row 0"):
        build_graph(np.where(np.arange(X.shape[1]) == 2, 0.5, X), codes, category_blocks=blocks)
    with pytest.raises(InputError, match="must not overlap"):
        build_graph(X, codes, category_blocks=[(2, 5), (4, 7)])
    with pytest.raises(InputError, match=r"ranges must lie in \[0, 11\]"):
        build_graph(X, codes, category_blocks=[(2, 50)])
    arrays = graph_to_arrays(build_graph(X, codes, n_neighbors=2, category_blocks=blocks))
    arrays["category_blocks"] = np.array([[3, 1]])
    with pytest.raises(ArtifactError, match="category_blocks"):
        graph_from_arrays(arrays)
