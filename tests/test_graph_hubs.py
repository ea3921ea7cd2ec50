"""Hub edges of the actionability graph (``build_graph(hubs=..., hub_neighbors=...)``, ``build-graph
--favorable-neighbors``): brute-force oracles of the edge rule, the straight-line floor FACE reaches, storage."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_graph import make_data, oracle_targets

from frpd_cli.constraints import actionable_mask
from frpd_cli.exceptions import ArtifactError, InputError
from frpd_cli.graph import (
    attach_source,
    build_graph,
    extract_path,
    graph_from_arrays,
    graph_to_arrays,
    path_cost,
    shortest_paths,
)


def oracle_hub_targets(X, codes, hubs, u, h, *, x0=None, codes0=None):
    """The hubs row u (or x0) links to, straight from the documented rule: every actionable hub at distance 0
    (not u itself) and the h nearest actionable hubs at positive distance, ties by row index."""
    source = codes.row(u) if x0 is None else codes0
    point = X[u] if x0 is None else x0
    mask = actionable_mask(source, codes) & hubs
    if x0 is None:
        mask[u] = False
    idx = np.flatnonzero(mask)
    length = np.linalg.norm(X[idx] - point, axis=1)
    pos = length > 0
    order = np.lexsort((idx[pos], length[pos]))
    return set(idx[~pos].tolist()) | set(idx[pos][order][:h].tolist())


def edge_set(graph):
    A = graph.adjacency.tocoo()
    return set(zip(A.row.tolist(), A.col.tolist()))


@pytest.mark.parametrize("directions", [(1,), ()], ids=["directed", "undirected"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hub_edges_are_the_nearest_actionable_hubs_added_to_the_graph(directions, seed):
    X, codes = make_data(n=90, p=3, n_groups=2, directions=directions, seed=seed, duplicates=6)
    hubs = np.random.default_rng(seed).random(90) < 0.3
    plain = build_graph(X, codes, n_neighbors=2, algorithm="brute")
    hubbed = build_graph(X, codes, n_neighbors=2, algorithm="brute", hubs=hubs, hub_neighbors=3)
    expected = edge_set(plain)
    for u in range(90):
        added = {(u, v) for v in oracle_hub_targets(X, codes, hubs, u, 3)}
        expected |= added if directions else added | {(v, w) for w, v in added}
    assert edge_set(hubbed) == expected
    # every edge keeps the immutable code and moves monotone codes only the allowed way; weight = length
    A = hubbed.adjacency.tocoo()
    for u, v, w in zip(A.row, A.col, A.data):
        assert actionable_mask(codes.row(int(u)), codes)[v]
        assert w == pytest.approx(max(np.linalg.norm(X[u] - X[v]), 0.0), abs=1e-12) or w == 1e-300
    assert hubbed.hub_neighbors == 3 and np.array_equal(hubbed.hubs, hubs)


def test_attached_applicant_gets_its_nearest_hubs_too():
    X, codes = make_data(n=70, p=3, n_groups=2, directions=(1,), seed=4)
    hubs = np.arange(70) % 4 == 0
    graph = build_graph(X, codes, n_neighbors=2, hubs=hubs, hub_neighbors=4)
    rng = np.random.default_rng(9)
    for _ in range(10):
        x0 = rng.random(3)
        codes0 = codes.row(int(rng.integers(70)))
        nbr, w = attach_source(graph, X, codes, x0, codes0)
        expected = (oracle_targets(X, codes, 0, n_neighbors=2, x0=x0, codes0=codes0)
                    | oracle_hub_targets(X, codes, hubs, 0, 4, x0=x0, codes0=codes0))
        assert set(nbr.tolist()) == expected and len(nbr) == len(expected)
        np.testing.assert_allclose(w, np.linalg.norm(X[nbr] - x0, axis=1))
        assert list(w) == sorted(w)


def test_hub_paths_cost_the_straight_line_to_the_nearest_hubs():
    # with hubs = the "favourable" rows, the shortest path to each of the h nearest reachable hubs is one straight
    # move: its cost equals the Euclidean distance, the floor of any graph
    X, codes = make_data(n=120, p=4, n_groups=1, directions=(), seed=3)
    hubs = np.random.default_rng(3).random(120) < 0.25
    graph = build_graph(X, codes, n_neighbors=3, hubs=hubs, hub_neighbors=3)
    x0 = np.full(4, 0.5)
    codes0 = codes.row(0)
    nbr, w = attach_source(graph, X, codes, x0, codes0)
    dist, pred = shortest_paths(graph, nbr, w)
    straight = np.linalg.norm(X - x0, axis=1)
    nearest = np.flatnonzero(hubs)[np.argsort(straight[hubs], kind="stable")[:3]]
    for t in nearest:
        assert dist[t] == pytest.approx(straight[t], rel=1e-12)
        path = extract_path(pred, int(t))
        assert path == [int(t)] and path_cost(graph, nbr, w, path) == pytest.approx(straight[t], rel=1e-12)
    # and no node is ever cheaper than its straight line (the floor holds on any graph)
    reached = np.isfinite(dist[:120])
    assert np.all(dist[:120][reached] >= straight[reached] * (1 - 1e-12))


def test_max_step_applies_to_hub_edges():
    X, codes = make_data(n=60, p=2, n_groups=1, directions=(), seed=5)
    hubs = np.arange(60) % 3 == 0
    graph = build_graph(X, codes, n_neighbors=2, hubs=hubs, hub_neighbors=5, max_step=0.2)
    A = graph.adjacency.tocoo()
    assert np.all(np.linalg.norm(X[A.row] - X[A.col], axis=1) <= 0.2)


def test_hub_graph_round_trips_and_old_files_load():
    X, codes = make_data(n=40, p=2, seed=6)
    hubs = np.arange(40) % 2 == 0
    graph = build_graph(X, codes, n_neighbors=2, hubs=hubs, hub_neighbors=2)
    arrays = graph_to_arrays(graph)
    back = graph_from_arrays(arrays)
    assert back.hub_neighbors == 2 and np.array_equal(back.hubs, hubs)
    assert (back.adjacency != graph.adjacency).nnz == 0
    plain = graph_from_arrays(graph_to_arrays(build_graph(X, codes, n_neighbors=2)))
    assert plain.hubs is None and plain.hub_neighbors is None
    with pytest.raises(ArtifactError, match="go together"):
        graph_from_arrays({k: v for k, v in arrays.items() if k != "hub_neighbors"})
    with pytest.raises(ArtifactError, match="'hubs' must be 40 booleans"):
        graph_from_arrays({**arrays, "hubs": hubs[:10]})


@pytest.mark.parametrize("kwargs, message", [
    ({"hubs": np.ones(30, bool)}, "go together"),
    ({"hub_neighbors": 2}, "go together"),
    ({"hubs": np.ones(29, bool), "hub_neighbors": 2}, "boolean mask of the 30 rows"),
    ({"hubs": np.ones(30), "hub_neighbors": 2}, "boolean mask"),
    ({"hubs": np.ones(30, bool), "hub_neighbors": 0}, "hub_neighbors"),
])
def test_hub_options_are_checked(kwargs, message):
    X, codes = make_data(n=30, p=2, seed=7)
    with pytest.raises(InputError, match=message):
        build_graph(X, codes, n_neighbors=2, **kwargs)


def test_build_graph_command_links_rows_to_favourable_rows(sample_paths, tmp_path):
    from typer.testing import CliRunner

    from frpd_cli.cli.app import app

    runner = CliRunner()
    common = ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
              str(sample_paths["schema"]), "--format", "csv"]
    default = runner.invoke(app, [*common, "--out", str(tmp_path / "d")])
    off = runner.invoke(app, [*common, "--out", str(tmp_path / "off"), "--favorable-neighbors", "0"])
    assert default.exit_code == 0 and off.exit_code == 0, default.stderr + off.stderr
    graphs = {}
    for name in ("d", "off"):
        with np.load(tmp_path / name / "graph.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        graphs[name] = (graph_from_arrays(arrays), arrays)
    g, arrays = graphs["d"]
    from frpd_cli.cli.graph import FAVORABLE_NEIGHBORS

    assert g.hub_neighbors == FAVORABLE_NEIGHBORS and np.array_equal(g.hubs, arrays["favorable"])
    assert graphs["off"][0].hubs is None and edge_set(graphs["off"][0]) < edge_set(g)
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["params"]["favorable_neighbors"] == FAVORABLE_NEIGHBORS
    bad = runner.invoke(app, [*common, "--out", str(tmp_path / "bad"), "--favorable-neighbors", "-1"])
    assert bad.exit_code == 2 and "--favorable-neighbors" in bad.stderr and not (tmp_path / "bad").exists()
