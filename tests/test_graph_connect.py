"""build_graph(connect=True): every immutable group becomes one component, joined by its shortest bridges."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

from frpd_cli.constraints import ConstraintCodes
from frpd_cli.exceptions import InputError
from frpd_cli.graph import build_graph


def _codes(immutable):
    immutable = np.asarray(immutable, dtype=np.float64).reshape(-1, 1)
    return ConstraintCodes(immutable, np.zeros((immutable.shape[0], 0)), np.zeros(0, np.int8))


def _clusters(seed, n_clusters=5, per=8):
    """Tight clusters far apart: a 3-nearest-neighbour graph has one island per cluster."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10, size=(n_clusters, 3))
    return np.vstack([c + rng.normal(0, 0.05, size=(per, 3)) for c in centres])


@pytest.mark.parametrize("seed", range(5))
def test_connect_joins_each_group_with_its_minimum_spanning_bridges(seed):
    X = _clusters(seed)
    group = np.zeros(len(X))
    plain = build_graph(X, _codes(group), n_neighbors=3)
    joined = build_graph(X, _codes(group), n_neighbors=3, connect=True)
    assert connected_components(plain.adjacency, directed=False)[0] == 5
    assert connected_components(joined.adjacency, directed=False)[0] == 1
    # every plain edge is kept with its weight; the added ones are as short as joining the islands can be:
    # their total equals the minimum spanning tree of the islands (oracle: MST of the full distance matrix
    # restricted to edges between islands, on the graph of islands)
    P, J = plain.adjacency.toarray(), joined.adjacency.toarray()
    assert np.array_equal(J[P > 0], P[P > 0])
    added = (J > 0) & (P == 0)
    _, label = connected_components(plain.adjacency, directed=False)
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    between = np.full((5, 5), np.inf)
    for a in range(5):
        for b in range(5):
            if a != b:
                between[a, b] = D[np.ix_(label == a, label == b)].min()
    mst = minimum_spanning_tree(np.where(np.isfinite(between), between, 0)).sum()
    assert np.triu(np.where(added, J, 0)).sum() == pytest.approx(mst, rel=1e-9)
    assert np.allclose(J, J.T)  # undirected: each bridge both ways


def test_connect_never_crosses_immutable_groups():
    X = _clusters(7, n_clusters=4)
    group = np.repeat([0, 1], len(X) // 2)   # clusters 0-1 in group 0, 2-3 in group 1
    g = build_graph(X, _codes(group), n_neighbors=3, connect=True)
    src, dst = g.adjacency.nonzero()
    assert np.all(group[src] == group[dst])
    n, label = connected_components(g.adjacency, directed=False)
    assert n == 2 and len(set(label[group == 0])) == 1 and len(set(label[group == 1])) == 1


def test_connect_is_a_no_op_on_a_connected_graph():
    X = np.random.default_rng(3).uniform(size=(40, 2))
    a = build_graph(X, _codes(np.zeros(40)), n_neighbors=10)
    b = build_graph(X, _codes(np.zeros(40)), n_neighbors=10, connect=True)
    assert connected_components(a.adjacency, directed=False)[0] == 1
    assert (a.adjacency != b.adjacency).nnz == 0


def test_connect_refuses_monotone_columns():
    X = _clusters(1)
    codes = ConstraintCodes(np.zeros((len(X), 0)), X[:, :1].copy(), np.array([1], np.int8))
    with pytest.raises(InputError, match="monotone"):
        build_graph(X, codes, n_neighbors=3, connect=True)
