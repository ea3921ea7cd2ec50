"""Oracle tests for frpd_cli.selection: brute force on tiny instances with a dense S built here."""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from frpd_cli.exceptions import InputError, SolverError
from frpd_cli.selection import (
    EIGEN_METHODS,
    EXACT_MAX_CANDIDATES,
    METHODS,
    Eigen,
    Geometry,
    Selection,
    compute_geometry,
    dpp_log_det,
    eigen_decompose,
    quad_objective,
    select_prototypes,
)

SEEDS = range(40)


def _instance(seed: int, n: int | None = None, p: int | None = None):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 13)) if n is None else n
    p = int(rng.integers(2, 7)) if p is None else p
    X = rng.normal(size=(n, p)) + rng.normal(size=p) * 0.5
    x0 = rng.normal(size=p) * 0.3
    return compute_geometry(X, x0), int(rng.integers(1, 4)), float(rng.choice([0.3, 0.6, 0.9, 1.0]))


def _dense_S(g: Geometry) -> np.ndarray:
    return g.directions @ g.directions.T  # fine for tiny N, the library never does this


def _brute_quad(g: Geometry, k: int, theta: float) -> float:
    S, d = _dense_S(g), g.distances
    best = np.inf
    for subset in itertools.combinations(range(g.n_candidates), k):
        z = np.zeros(g.n_candidates)
        z[list(subset)] = 1.0
        best = min(best, theta * z @ S @ z + (1 - theta) * d @ z)
    return best


def _dense_L(g: Geometry, theta: float, h: float) -> np.ndarray:
    S = _dense_S(g)
    np.fill_diagonal(S, 1.0)  # ||a_i|| = 1 by definition; the library uses the exact value
    return theta * S + (1 - theta) * np.diag(np.exp(-(g.distances**2) / h**2))


def _logdet(L: np.ndarray, subset) -> float:
    sign, value = np.linalg.slogdet(L[np.ix_(subset, subset)])
    return value if sign > 0 else -np.inf


def _naive_dpp_greedy(L: np.ndarray, k: int) -> list[int]:
    chosen: list[int] = []
    for _ in range(k):
        gains = [(_logdet(L, chosen + [i]) if i not in chosen else -np.inf) for i in range(L.shape[0])]
        chosen.append(int(np.argmax(gains)))
    return chosen


# ---------------------------------------------------------------------------------------------- geometry


def test_geometry_directions_are_unit_and_distances_euclidean():
    rng = np.random.default_rng(0)
    X, x0 = rng.normal(size=(20, 4)), rng.normal(size=4)
    g = compute_geometry(X, x0)
    np.testing.assert_allclose(g.distances, np.linalg.norm(X - x0, axis=1))
    np.testing.assert_allclose(np.linalg.norm(g.directions, axis=1), 1.0)
    np.testing.assert_allclose(g.directions * g.distances[:, None] + x0, X)
    assert not g.directions.flags.writeable


def test_geometry_rejects_row_equal_to_x0():
    with pytest.raises(InputError, match="equal x0"):
        compute_geometry([[1.0, 2.0], [0.0, 0.0]], [0.0, 0.0])


@pytest.mark.parametrize(
    "X, x0, message",
    [
        ([1.0, 2.0], [0.0, 0.0], "2-D"),
        ([[1.0, 2.0]], [0.0], "one value per column"),
        ([[np.nan, 2.0]], [0.0, 0.0], "NaN"),
    ],
)
def test_geometry_validation(X, x0, message):
    with pytest.raises(InputError, match=message):
        compute_geometry(X, x0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("x0_scale", [1.0, 1e300])
def test_geometry_overwrite_names_the_same_row(bad, x0_scale):
    # X - x0 is checked instead of X when x0 is too small for a finite difference to overflow; a huge x0 checks X
    rng = np.random.default_rng(5)
    X = rng.random((6, 3))
    X[4, 1] = bad
    X[5, 0] = bad
    x0 = rng.random(3) * x0_scale
    with pytest.raises(InputError, match="Row 4 of X") as plain:
        compute_geometry(X, x0)
    with pytest.raises(InputError, match="Row 4 of X") as in_place:
        compute_geometry(X.copy(), x0, overwrite_X=True)
    assert str(plain.value) == str(in_place.value)


def test_geometry_overwrite_lets_a_finite_overflow_pass_as_before():
    # a finite X whose squared distance overflows is not refused, in place or not
    X = np.array([[1e200, 0.0], [1.0, 1.0]])
    x0 = np.zeros(2)
    plain = compute_geometry(X, x0)
    in_place = compute_geometry(X.copy(), x0, overwrite_X=True)
    assert np.array_equal(plain.distances, in_place.distances)
    assert np.array_equal(plain.directions, in_place.directions, equal_nan=True)


@pytest.mark.parametrize("solver", ["gram", "svd"])
@pytest.mark.parametrize("seed", range(10))
def test_eigenpairs_match_dense_eigh_and_reconstruct_S(seed, solver):
    rng = np.random.default_rng(seed)
    n, p = int(rng.integers(3, 13)), int(rng.integers(2, 8))
    g = compute_geometry(rng.normal(size=(n, p)), rng.normal(size=p))
    e = eigen_decompose(g, solver=solver)
    S = _dense_S(g)
    w, W = np.linalg.eigh(S)
    w, W = w[::-1], W[:, ::-1]
    M = e.n_components
    assert M == min(n, p)  # random directions: full rank, nothing below rtol
    assert np.all(np.diff(e.values) <= 0) and np.all(e.values > 0)
    np.testing.assert_allclose(e.values, w[:M], atol=1e-10, rtol=0)
    np.testing.assert_allclose(e.vectors.T @ e.vectors, np.eye(M), atol=1e-10)
    np.testing.assert_allclose(e.vectors @ np.diag(e.values) @ e.vectors.T, S, atol=1e-10)
    # Same subspace as eigh's top-M eigenvectors.
    P1, P2 = e.vectors @ e.vectors.T, W[:, :M] @ W[:, :M].T
    np.testing.assert_allclose(P1, P2, atol=1e-8)


@pytest.mark.parametrize("solver", ["gram", "svd"])
def test_eigen_products_equal_products_with_the_vectors(solver):
    """vectors_dot / vectors_sum (what screening uses, without the N x M array) agree with V itself."""
    rng = np.random.default_rng(5)
    g = compute_geometry(rng.normal(size=(40, 6)), rng.normal(size=6))
    e = eigen_decompose(g, solver=solver)
    assert e.n_candidates == 40
    x, rows = rng.normal(size=e.n_components), np.array([3, 7, 31])
    np.testing.assert_allclose(e.vectors_dot(x), e.vectors @ x, atol=1e-12)
    np.testing.assert_allclose(e.vectors_sum(rows), e.vectors[rows].sum(axis=0), atol=1e-12)
    stored = Eigen(values=e.values, vectors=np.array(e.vectors))  # as --reuse-eigen builds it
    np.testing.assert_allclose(stored.vectors_dot(x), e.vectors_dot(x), atol=1e-12)
    with pytest.raises(AttributeError):
        e.values = e.values
    import pickle

    for eigen in (e, stored):  # worker processes send them back
        copy = pickle.loads(pickle.dumps(eigen))
        np.testing.assert_array_equal(copy.vectors_dot(x), eigen.vectors_dot(x))
        np.testing.assert_array_equal(copy.values, eigen.values)
    with pytest.raises(InputError, match="vectors"):
        Eigen(values=e.values)


def test_eigen_truncates_rank_deficient_directions():
    # Directions in a 2-D subspace of R^5: only two eigenpairs survive.
    rng = np.random.default_rng(3)
    X = np.zeros((10, 5))
    X[:, :2] = rng.normal(size=(10, 2))
    e = eigen_decompose(compute_geometry(X, np.zeros(5)))
    assert e.n_components == 2
    np.testing.assert_allclose(e.values.sum(), 10.0)  # trace of S = N


def test_eigen_rtol_discards_small_squared_mass():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 3)) * np.array([1.0, 1.0, 1e-6])
    g = compute_geometry(X, np.zeros(3))
    assert eigen_decompose(g).n_components == 2
    assert eigen_decompose(g, rtol=0.0).n_components == 3


# ---------------------------------------------------------------------------------------------- QUAD


@pytest.mark.parametrize("seed", SEEDS)
def test_exact_equals_brute_force(seed):
    g, k, theta = _instance(seed)
    sel = select_prototypes(g, k=k, method="exact", theta=theta)
    assert sel.objective == pytest.approx(_brute_quad(g, k, theta), abs=1e-12)
    assert sel.objective == pytest.approx(quad_objective(g, sel.indices, theta=theta), abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_oa_milp_path_equals_enumeration(seed):
    g, _, theta = _instance(seed)
    k = 2 + seed % 2
    enum = select_prototypes(g, k=k, method="exact", theta=theta)
    milp = select_prototypes(g, k=k, method="exact", theta=theta, max_enumeration=1)
    assert milp.info["solver"] == "highs-oa"
    assert milp.info["gap"] <= 1e-9
    assert milp.objective == pytest.approx(enum.objective, abs=1e-9)


@pytest.mark.parametrize("method", ["quad-paper", "quad-dp-paper"])
def test_quad_milp_reduced_problem_equals_enumeration(method):
    g, _, _ = _instance(7, n=12, p=4)
    enum = select_prototypes(g, k=3, method=method, theta=0.9)
    milp = select_prototypes(g, k=3, method=method, theta=0.9, max_enumeration=1)
    if enum.screening.size > 3:
        assert milp.info["solver"] == "highs-oa"
    np.testing.assert_array_equal(milp.screening, enum.screening)
    assert milp.objective == pytest.approx(enum.objective, abs=1e-9)


@pytest.mark.parametrize("method", ["quad-paper", "quad-dp-paper"])
def test_paper_quad_reaches_optimum_in_most_instances_and_never_below(method):
    hits = 0
    for seed in SEEDS:
        g, k, theta = _instance(seed)
        optimum = _brute_quad(g, k, theta)
        sel = select_prototypes(g, k=k, method=method, theta=theta)
        assert sel.objective >= optimum - 1e-12
        assert sel.objective == pytest.approx(quad_objective(g, sel.indices, theta=theta), abs=1e-12)
        if k > 1:  # k = 1 is solved in closed form (nearest), without screening
            assert set(sel.indices.tolist()) <= set(sel.screening.tolist())
        hits += sel.objective <= optimum + 1e-12
    assert hits >= 0.8 * len(SEEDS), f"{method} optimal in only {hits}/{len(SEEDS)} instances"


@pytest.mark.parametrize("seed", range(10))
def test_quad_greedy_objective_consistent_and_not_below_optimum(seed):
    g, k, theta = _instance(seed)
    sel = select_prototypes(g, k=k, method="quad-greedy", theta=theta)
    assert sel.objective >= _brute_quad(g, k, theta) - 1e-12
    assert sel.objective == pytest.approx(quad_objective(g, sel.indices, theta=theta), abs=1e-12)


def test_quad_screening_is_union_of_last_iterates():
    g, _, _ = _instance(11, n=12, p=3)
    short = select_prototypes(g, k=3, method="quad-dp-paper", n_iter=30, tau=0)
    # tau = 0: Z is the last iterate alone.
    assert short.screening.size == 3
    np.testing.assert_array_equal(np.sort(short.indices), short.screening)


# ---------------------------------------------------------------------------------------------- DPP


@pytest.mark.parametrize("seed", SEEDS)
def test_dpp_greedy_equals_naive_greedy(seed):
    g, k, theta = _instance(seed)
    theta = min(theta, 0.9) if seed % 2 else theta
    h = [0.5, 1.0, 3.0][seed % 3]
    L = _dense_L(g, theta, h)
    naive = _naive_dpp_greedy(L, k)
    sel = select_prototypes(g, k=k, method="dpp-greedy", theta=theta, bandwidth=h)
    assert sorted(sel.indices.tolist()) == sorted(naive)
    assert sel.objective == pytest.approx(_logdet(L, naive), abs=1e-9)
    assert sel.objective == pytest.approx(dpp_log_det(g, sel.indices, theta=theta, bandwidth=h), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_dpp_local_search_improves_greedy_and_is_swap_optimal(seed):
    g, k, theta = _instance(seed, n=None, p=None)
    k = max(k, 2)
    h = [0.5, 1.0, 3.0][seed % 3]
    L = _dense_L(g, theta, h)
    greedy = select_prototypes(g, k=k, method="dpp-greedy", theta=theta, bandwidth=h)
    ls = select_prototypes(g, k=k, method="dpp-ls", theta=theta, bandwidth=h)
    assert ls.objective >= greedy.objective - 1e-12
    assert ls.info["converged"]
    assert ls.info["greedy_objective"] == pytest.approx(greedy.objective, abs=1e-12)
    chosen = ls.indices.tolist()
    assert ls.objective == pytest.approx(_logdet(L, chosen), abs=1e-9)
    for out in chosen:
        for add in range(g.n_candidates):
            if add in chosen:
                continue
            swapped = [add if i == out else i for i in chosen]
            assert _logdet(L, swapped) <= ls.objective + 1e-9 * max(1.0, abs(ls.objective))


def test_dpp_local_search_strictly_improves_somewhere():
    improved = 0
    for seed in range(60):
        g, _, theta = _instance(seed, n=12, p=4)
        greedy = select_prototypes(g, k=3, method="dpp-greedy", theta=theta)
        ls = select_prototypes(g, k=3, method="dpp-ls", theta=theta)
        improved += ls.objective > greedy.objective + 1e-9
    assert improved >= 1  # the local search is not a no-op on this family


def test_dpp_log_det_matches_dense_and_theta_zero_in_log_space():
    g, _, _ = _instance(5)
    L = _dense_L(g, 0.7, 2.0)
    assert dpp_log_det(g, [0, 2, 3], theta=0.7, bandwidth=2.0) == pytest.approx(_logdet(L, [0, 2, 3]), abs=1e-12)
    far = compute_geometry([[100.0, 0.0], [0.0, 200.0]], [0.0, 0.0])
    assert dpp_log_det(far, [0, 1], theta=0.0, bandwidth=1.0) == pytest.approx(-(100.0**2) - 200.0**2)


# ---------------------------------------------------------------------------------------------- theta = 0, ranks


@pytest.mark.parametrize("method", METHODS)
def test_theta_zero_gives_k_nearest(method):
    rng = np.random.default_rng(8)
    g = compute_geometry(rng.normal(size=(30, 4)), np.zeros(4))
    sel = select_prototypes(g, k=4, method=method, theta=0.0, bandwidth=0.05)
    np.testing.assert_array_equal(sel.indices, np.argsort(g.distances)[:4])


@pytest.mark.parametrize("method", ["dpp-greedy", "dpp-ls"])
def test_small_theta_dpp_prefers_nearest(method):
    # With h large and theta tiny, proximity dominates the kernel: still the k nearest.
    rng = np.random.default_rng(9)
    g = compute_geometry(rng.normal(size=(30, 4)), np.zeros(4))
    sel = select_prototypes(g, k=3, method=method, theta=1e-9, bandwidth=0.5)
    np.testing.assert_array_equal(sel.indices, np.argsort(g.distances)[:3])


@pytest.mark.parametrize("method", METHODS)
def test_indices_in_rank_order_and_types(method):
    g, _, _ = _instance(2, n=12, p=3)
    sel = select_prototypes(g, k=3, method=method)
    assert isinstance(sel, Selection) and sel.method == method and sel.theta == 0.9
    assert sel.indices.dtype == np.int64 and sel.indices.shape == (3,)
    assert np.all(np.diff(g.distances[sel.indices]) >= 0)
    assert len(set(sel.indices.tolist())) == 3
    assert sel.info["n_candidates"] == 12
    if method in EIGEN_METHODS:
        assert sel.screening.dtype == np.int64
        assert sel.info["n_screened"] == sel.screening.size
    else:
        assert sel.screening is None


def test_rank_order_ties_broken_by_index():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [3.0, 0.0]])
    g = compute_geometry(X, np.zeros(2))
    sel = select_prototypes(g, k=3, method="nearest")
    assert sel.indices.tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k": 0}, "The 'k' option must be an int >= 1. Got 0 instead."),
        ({"k": 2.0}, "The 'k' option must be an int >= 1. Got 2.0 instead."),
        ({"k": True}, "The 'k' option must be an int >= 1"),
        ({"method": "magic"}, "The 'method' option must be one of quad, quad-dp"),
        ({"theta": 1.5}, r"The 'theta' option must be a float in \[0, 1\]. Got 1.5 instead."),
        ({"theta": float("nan")}, "The 'theta' option"),
        ({"bandwidth": 0.0}, "The 'bandwidth' option must be a float in > 0"),
        ({"n_iter": 0}, "The 'n_iter' option must be an int >= 1"),
        ({"tau": -1}, "The 'tau' option must be an int >= 0"),
        ({"step": -0.1}, "The 'step' option"),
        ({"max_swaps": -1}, "The 'max_swaps' option"),
        ({"time_limit": 0}, "The 'time_limit' option"),
        ({"max_enumeration": 0}, "The 'max_enumeration' option"),
    ],
)
def test_argument_validation(kwargs, message):
    g, _, _ = _instance(0, n=8)
    with pytest.raises(InputError, match=message):
        select_prototypes(g, **kwargs)


def test_fewer_candidates_than_k():
    g, _, _ = _instance(0, n=5)
    with pytest.raises(InputError, match="Only 5 candidate"):
        select_prototypes(g, k=6)


def test_wrong_geometry_and_eigen():
    g, _, _ = _instance(0, n=8)
    other, _, _ = _instance(1, n=9)
    with pytest.raises(InputError, match="Geometry"):
        select_prototypes(np.zeros((3, 2)))
    with pytest.raises(InputError, match="eigen must be"):
        select_prototypes(g, eigen=eigen_decompose(other))
    with pytest.raises(InputError, match="distinct"):
        quad_objective(g, [1, 1], theta=0.5)
    with pytest.raises(InputError, match=r"lie in \[0, 7\]"):
        dpp_log_det(g, [8], theta=0.5, bandwidth=1.0)


def test_exact_on_large_problems_falls_back_to_quad_or_refuses():
    rng = np.random.default_rng(0)
    n = EXACT_MAX_CANDIDATES + 1
    g = compute_geometry(rng.normal(size=(n, 3)), np.zeros(3))
    with pytest.raises(SolverError, match="limited to"):
        select_prototypes(g, k=3, method="exact", exact_fallback=False)
    sel = select_prototypes(g, k=3, method="exact")
    quad = select_prototypes(g, k=3, method="quad")
    assert sel.info["fallback"] == "quad" and "limited to 300 candidates" in sel.info["fallback_reason"]
    assert sel.indices.tolist() == quad.indices.tolist() and sel.objective == quad.objective
    assert sel.method == "exact" and sel.screening is None
    # k = 1 is solved in closed form whatever N.
    assert select_prototypes(g, k=1, method="exact").indices.tolist() == [int(np.argmin(g.distances))]


# ---------------------------------------------------------------------------------------------- determinism, output


@pytest.mark.parametrize("method", METHODS)
def test_determinism(method):
    g1, _, _ = _instance(21, n=12, p=5)
    g2, _, _ = _instance(21, n=12, p=5)
    a = select_prototypes(g1, k=3, method=method)
    b = select_prototypes(g2, k=3, method=method)
    assert a.indices.tobytes() == b.indices.tobytes()
    assert a.objective == b.objective


def test_precomputed_eigen_gives_same_result():
    g, _, _ = _instance(13, n=12, p=5)
    e = eigen_decompose(g)
    assert isinstance(e, Eigen)
    a = select_prototypes(g, k=3, method="quad", eigen=e)
    b = select_prototypes(g, k=3, method="quad")
    assert a.indices.tolist() == b.indices.tolist()


def test_milp_path_prints_nothing_to_stdout():
    code = (
        "import numpy as np\n"
        "from frpd_cli.selection import compute_geometry, select_prototypes\n"
        "g = compute_geometry(np.random.default_rng(0).normal(size=(9, 3)), np.zeros(3))\n"
        "s = select_prototypes(g, k=3, method='exact', max_enumeration=1)\n"
        "assert s.info['solver'] == 'highs-oa'\n"
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout == ""


# ---------------------------------------------------------------------------------------------- screening internals


def _naive_best_response_Z(g: Geometry, k: int, theta: float, n_iter: int, tau: int) -> np.ndarray:
    """Algorithm 1 for all n_iter iterations with a dense S_M and full sorts (no early stop)."""
    S = _dense_S(g)
    w, V = np.linalg.eigh(S)
    keep = w > 1e-9 * w.max()
    SM = (V[:, keep] * w[keep]) @ V[:, keep].T
    z = np.zeros(g.n_candidates)
    iterates = []
    for _ in range(n_iter):
        score = (1 - theta) * g.distances + 2 * theta * SM @ z
        z = np.zeros(g.n_candidates)
        z[np.argsort(score, kind="stable")[:k]] = 1.0
        iterates.append(z)
    return np.flatnonzero(np.max(iterates[-(tau + 1) :], axis=0))


@pytest.mark.parametrize("seed", range(30))
def test_best_response_screening_equals_full_run(seed):
    # Early stop at a repeated iterate must give the Z of the full T-iteration run.
    g, _, theta = _instance(seed, n=12)
    k, tau, n_iter = 3, [0, 1, 3, 20][seed % 4], [5, 6, 100][seed % 3]
    sel = select_prototypes(g, k=k, method="quad-paper", theta=theta, n_iter=n_iter, tau=tau)
    np.testing.assert_array_equal(sel.screening, _naive_best_response_Z(g, k, theta, n_iter, tau))


def test_dual_ascent_stays_finite_with_tiny_eigenvalues():
    # sigma_M tiny: the paper's step 2 lambda / (theta sigma) >> 2 would make gamma explode; the cap keeps it finite.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3)) * np.array([1.0, 1.0, 1e-3])
    g = compute_geometry(X, np.zeros(3))
    e = eigen_decompose(g, rtol=0.0)
    assert e.values[-1] < 1e-2  # uncapped factor 2 * step / (theta * sigma) would be > 200
    with np.errstate(all="raise"):
        sel = select_prototypes(g, k=3, method="quad-dp", eigen=e, step=1.0)
    assert np.isfinite(sel.objective)


def test_dpp_rank_deficient_kernel_returns_k_items_with_minus_inf():
    # theta = 1 and all directions in a plane: rank(L) = 2 < k = 3, every 3-set has det 0.
    rng = np.random.default_rng(6)
    X = np.zeros((10, 4))
    X[:, :2] = rng.normal(size=(10, 2))
    g = compute_geometry(X, np.zeros(4))
    for method in ("dpp-greedy", "dpp-ls"):
        sel = select_prototypes(g, k=3, method=method, theta=1.0)
        assert sel.indices.size == 3 and np.unique(sel.indices).size == 3
        assert sel.objective == -np.inf
        assert sel.info["full_rank"] is False


def test_dpp_ls_max_swaps_zero_keeps_greedy():
    for seed in range(60):
        g, _, theta = _instance(seed, n=12, p=4)
        greedy = select_prototypes(g, k=3, method="dpp-greedy", theta=theta)
        ls = select_prototypes(g, k=3, method="dpp-ls", theta=theta, max_swaps=0)
        assert sorted(ls.indices.tolist()) == sorted(greedy.indices.tolist())
        assert ls.info["swaps"] == 0
        if not ls.info["converged"]:
            return  # found an instance where a move was available but capped
    pytest.fail("no instance with an improving move among 60 seeds")


def test_compute_geometry_overwrite_gives_the_same_bits():
    rng = np.random.default_rng(3)
    X = rng.random((300, 7))
    x0 = rng.random(7)
    kept = X.copy()
    plain = compute_geometry(X, x0)
    assert np.array_equal(X, kept)                       # not asked to: X untouched
    scratch = X.copy()
    reused = compute_geometry(scratch, x0, overwrite_X=True)
    assert np.array_equal(plain.directions, reused.directions)
    assert np.array_equal(plain.distances, reused.distances)
    assert np.shares_memory(reused.directions, scratch)  # the scratch array became the directions


@pytest.mark.parametrize("n, k", [(0, 0), (3, 5), (6, 3), (12, 4), (30, 3), (40, 4)])
def test_combinations_array_matches_itertools(n, k):
    from frpd_cli.selection.exact import combinations_array

    table = combinations_array(n, k)
    assert table.shape == (math.comb(n, k), k)
    assert [tuple(row) for row in table.tolist()] == list(itertools.combinations(range(n), k))
    if 0 < k <= n and math.comb(n, k) <= 4096:                # cached tables are shared: never writable
        assert combinations_array(n, k) is table and not table.flags.writeable
