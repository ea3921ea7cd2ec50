"""The approximate neighbour search of build_graph (faiss HNSW candidates, exact rule): oracle and invariants."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import frpd_cli.graph as graph_module
from frpd_cli.cli.app import app
from frpd_cli.constraints import ConstraintCodes, actionable_pairs
from frpd_cli.exceptions import InputError
from frpd_cli.graph import ZERO_LENGTH_WEIGHT, approximate_search_available, build_graph

needs_faiss = pytest.mark.skipif(not approximate_search_available(),
                                 reason="faiss-cpu is not installed (pip install 'frpd-cli[ann]')")
runner = CliRunner()


def make_onehot_data(n=1500, *, seed=0, duplicates=300):
    """Two numeric columns, three one-hot features (3, 4 and 2 levels), two immutable groups, one monotone code."""
    rng = np.random.default_rng(seed)
    numeric = rng.integers(0, 12, size=(n, 2)) / 11.0  # coarse: many ties and duplicates
    levels = (3, 4, 2)
    parts, blocks, col = [numeric], [], 2
    for m in levels:
        parts.append(np.eye(m)[rng.integers(0, m, size=n)])
        blocks.append((col, col + m))
        col += m
    X = np.hstack(parts)
    src = rng.integers(0, n, size=duplicates)
    X[rng.choice(n, size=duplicates, replace=False)] = X[src]
    group = (X[:, 2] > 0).astype(float)[:, None]  # the first level of the first categorical feature is immutable
    codes = ConstraintCodes(immutable=group, monotone=np.round(X[:, :1] * 11), direction=np.array([1], np.int8))
    return X, codes, blocks


def _edges(graph):
    A = graph.adjacency
    return np.repeat(np.arange(A.shape[0]), np.diff(A.indptr)), A.indices, A.data


def _build(X, codes, blocks, search, **options):
    hubs = np.zeros(X.shape[0], bool)
    hubs[::5] = True
    return build_graph(X, codes, n_neighbors=6, category_blocks=blocks, hubs=hubs, hub_neighbors=3,
                       search=search, **options)


@needs_faiss
def test_every_candidate_gives_the_exact_graph():
    # candidates covering every distinct point: the approximate path must reproduce the exact graph bit for bit
    # (duplicate classes, multiplicities, shells, monotone filter, hubs and ties by row index all included)
    X, codes, blocks = make_onehot_data()
    exact = _build(X, codes, blocks, "exact")
    approx = _build(X, codes, blocks, "approximate", candidates=X.shape[0])
    for a, b in zip((exact.adjacency.indptr, exact.adjacency.indices, exact.adjacency.data),
                    (approx.adjacency.indptr, approx.adjacency.indices, approx.adjacency.data)):
        np.testing.assert_array_equal(a, b)


@needs_faiss
def test_identical_rows_with_other_monotone_codes_keep_the_exact_rule():
    # rows with the same encoded values but other monotone codes: zero-length edges only the allowed way
    X, codes, blocks = make_onehot_data(n=800, duplicates=200, seed=1)
    rng = np.random.default_rng(1)
    codes = ConstraintCodes(immutable=codes.immutable, monotone=rng.integers(0, 3, size=(X.shape[0], 1)).astype(float),
                            direction=codes.direction)
    exact = _build(X, codes, blocks, "exact")
    approx = _build(X, codes, blocks, "approximate", candidates=X.shape[0])
    assert (exact.adjacency != approx.adjacency).nnz == 0
    assert np.array_equal(exact.adjacency.indices, approx.adjacency.indices)
    src, dst, w = _edges(approx)
    zero = w == ZERO_LENGTH_WEIGHT
    assert np.all(codes.monotone[dst[zero], 0] >= codes.monotone[src[zero], 0])
    assert np.any(codes.monotone[dst[zero], 0] > codes.monotone[src[zero], 0])  # the case is really there


@needs_faiss
@pytest.mark.parametrize("candidates", [8, 24])
def test_approximate_edges_obey_the_rule_and_recall_the_exact_graph(candidates):
    X, codes, blocks = make_onehot_data()
    exact = _build(X, codes, blocks, "exact")
    approx = _build(X, codes, blocks, "approximate", candidates=candidates)
    src, dst, w = _edges(approx)
    # invariants: within the immutable group, monotone moves the allowed way, exact Euclidean lengths
    assert np.all(codes.immutable[src, 0] == codes.immutable[dst, 0])
    assert np.all(actionable_pairs(codes, src, dst)) and np.all(src != dst)
    length = np.sqrt(((X[src] - X[dst]) ** 2).sum(axis=1))
    np.testing.assert_allclose(w, np.maximum(length, ZERO_LENGTH_WEIGHT), rtol=1e-12, atol=0)
    # every duplicate edge of the exact graph is there (they are found exactly)
    e_src, e_dst, e_w = _edges(exact)
    exact_set = set(zip(e_src.tolist(), e_dst.tolist()))
    approx_set = set(zip(src.tolist(), dst.tolist()))
    zero = {(a, b) for a, b, x in zip(e_src.tolist(), e_dst.tolist(), e_w.tolist()) if x == ZERO_LENGTH_WEIGHT}
    assert zero and zero <= approx_set
    # no source gets more positive-length edges than the exact rule allows: n per shell plus hubs
    positive = np.bincount(src[w > ZERO_LENGTH_WEIGHT], minlength=X.shape[0])
    assert positive.max() <= 6 * (len(blocks) + 1) + 3
    recall = len(exact_set & approx_set) / len(exact_set)
    assert recall >= (0.85 if candidates == 24 else 0.5), recall  # 0.92 and 0.63 with faiss 1.15
    assert recall < 1.0 or candidates == 24  # 8 candidates cannot find every neighbour: the index is really used


@needs_faiss
def test_same_seed_same_graph_other_seed_same_rule():
    X, codes, blocks = make_onehot_data(seed=3)
    a = _build(X, codes, blocks, "approximate", candidates=8, seed=5)
    b = _build(X, codes, blocks, "approximate", candidates=8, seed=5)
    assert (a.adjacency != b.adjacency).nnz == 0
    c = _build(X, codes, blocks, "approximate", candidates=8, seed=6)
    assert np.all(actionable_pairs(codes, *_edges(c)[:2]))


@needs_faiss
def test_auto_is_approximate_from_the_threshold(monkeypatch):
    X, codes, blocks = make_onehot_data(n=600, duplicates=50)
    exact = _build(X, codes, blocks, "exact")
    assert (_build(X, codes, blocks, "auto", candidates=8).adjacency != exact.adjacency).nnz == 0
    monkeypatch.setattr(graph_module, "APPROXIMATE_MIN_ROWS", 600)
    auto = _build(X, codes, blocks, "auto", candidates=8)
    assert (auto.adjacency != _build(X, codes, blocks, "approximate", candidates=8).adjacency).nnz == 0
    assert (auto.adjacency != exact.adjacency).nnz > 0


def test_search_option_checked(monkeypatch):
    X, codes, blocks = make_onehot_data(n=50, duplicates=0)
    with pytest.raises(InputError, match="'search' option"):
        build_graph(X, codes, search="fast")
    with pytest.raises(InputError, match="radius"):
        build_graph(X, codes, radius=0.5, search="approximate")
    monkeypatch.setattr(graph_module, "approximate_search_available", lambda: False)
    with pytest.raises(InputError, match="faiss"):
        build_graph(X, codes, search="approximate")
    build_graph(X, codes, search="auto")  # auto falls back to the exact search


def _cli_build(paths, out, *extra):
    return runner.invoke(app, ["build-graph", str(paths["data"]), "--model", str(paths["model"]), "--schema",
                               str(paths["schema"]), "--out", str(out), "--format", "csv", *extra])


@needs_faiss
def test_cli_approximate_graph_is_byte_identical_and_recorded(sample_paths, tmp_path):
    for name in ("a", "b"):
        result = _cli_build(sample_paths, tmp_path / name, "--neighbor-search", "approximate",
                            "--search-candidates", "8", "--seed", "3")
        assert result.exit_code == 0, result.stderr
    assert (tmp_path / "a" / "graph.npz").read_bytes() == (tmp_path / "b" / "graph.npz").read_bytes()
    params = json.loads((tmp_path / "a" / "manifest.json").read_text())["params"]
    assert params["neighbor_search"] == "approximate" and params["search_candidates"] == 8
    assert _cli_build(sample_paths, tmp_path / "e", "--neighbor-search", "exact").exit_code == 0
    exact = json.loads((tmp_path / "e" / "manifest.json").read_text())["params"]
    assert exact["neighbor_search"] == "exact" and exact["search_candidates"] is None
    assert (tmp_path / "a" / "graph.npz").read_bytes() != (tmp_path / "e" / "graph.npz").read_bytes()
    # plans run on the approximate graph: the artifact passes its load checks
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants",
                                 str(sample_paths["applicants"]), "--graph", str(tmp_path / "a"), "--format", "csv"])
    assert result.exit_code == 0, result.stderr


def test_cli_refusals(sample_paths, tmp_path, monkeypatch):
    result = _cli_build(sample_paths, tmp_path / "r", "--neighbor-search", "approximate", "--radius", "0.3")
    assert result.exit_code == 2 and "--radius" in result.stderr and not (tmp_path / "r").exists()
    result = _cli_build(sample_paths, tmp_path / "x", "--neighbor-search", "fastest")
    assert result.exit_code == 2 and "auto, exact, approximate" in result.stderr
    import frpd_cli.cli.graph as cli_graph

    monkeypatch.setattr(cli_graph, "approximate_search_available", lambda: False)
    result = _cli_build(sample_paths, tmp_path / "y", "--neighbor-search", "approximate")
    assert result.exit_code == 2 and "faiss" in result.stderr and not (tmp_path / "y").exists()
