"""The public entry point of prototype selection: :func:`select_prototypes` and the two objectives."""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from frpd_cli.exceptions import InputError, SolverError
from frpd_cli.selection.baselines import k_nearest, quad_greedy, rank_order
from frpd_cli.selection.dpp import DppKernel, dpp_greedy, dpp_local_search
from frpd_cli.selection.exact import MAX_ENUMERATION, solve_subset_qp
from frpd_cli.selection.geometry import Eigen, Geometry, compute_geometry, eigen_decompose  # noqa: F401 (doctest)
from frpd_cli.selection.quad import (
    _k_smallest,
    greedy_start,
    improve_subset,
    quad_objective_values,
    screen_best_response,
    screen_dual_ascent,
    screening_set,
    sorted_unique,
)

__all__ = [
    "METHODS",
    "EIGEN_METHODS",
    "EXACT_MAX_CANDIDATES",
    "FULL_ENUMERATION",
    "FULL_ENUMERATION_LARGE_K",
    "Selection",
    "select_prototypes",
    "quad_objective",
    "dpp_log_det",
]

METHODS = ("quad", "quad-dp", "quad-greedy", "dpp-greedy", "dpp-ls", "nearest", "exact", "quad-paper", "quad-dp-paper")

#: Methods that screen with the eigendecomposition of ``S`` (they use a precomputed ``eigen``).
EIGEN_METHODS = ("quad", "quad-dp", "quad-paper", "quad-dp-paper")

#: ``quad`` and ``quad-dp`` solve the full problem exactly (enumeration) when ``C(N, k)`` is at most this
#: (``k <= 3``; N <= 85 at k = 3). Measured (``benchmarks/bench_select.py`` notes): at k = 3 enumerating 82,160
#: subsets (N = 80) costs less CPU than the improved heuristic, and is exact.
FULL_ENUMERATION = 100_000
#: The same for ``k >= 4``, whose enumeration costs about 4x more per subset (N <= 33 at k = 4, 23 at k = 5).
FULL_ENUMERATION_LARGE_K = 30_000

# Strengthened QUAD: subsets scored in the enlarged reduced problem; dual-ascent iterations with lambda = 1;
# best-response iterations from the greedy start; nearest rows (times k) added to Z; swap partners per chosen
# row and rounds of the exact problem over them. Chosen for cost (benchmarks/bench_quad.py): on Adult, 5
# dual-ascent and 5 restart iterations, and 1,000 partners per row, changed the answer of 3 of 186
# (constrained) and 6 of 60 (5,048 candidates) applicants for about 1.25x the selection time (the dual-ascent
# iterates no longer helped once the swap partners are enumerated); rounds stop at the first that does not
# improve, so 3 rounds cost little more than 1.
_REDUCED_BUDGET = 6_000
_REDUCED_BUDGET_LARGE_K = 40_000  # k >= 4: C(m, k) grows fast; 40,000 subsets keep 32 rows at k = 4
_DUAL_ITER = 0
_RESTART_ITER = 2
_NEAREST_FACTOR = 2
_NEIGHBOURS = 10
_NEIGHBOURHOOD_ROUNDS = 3

#: Largest number of candidates for ``method="exact"`` when enumeration is too large
#: (``C(N, k) > max_enumeration``). Measured here with the OA-MILP, ``k = 3``: 63 candidates
#: (``p = 30``) take about 14 s, 200 candidates (``p = 10``) about 23 s; beyond a few hundred the
#: default 60 s limit mostly expires with a large gap.
EXACT_MAX_CANDIDATES = 300


@dataclass(frozen=True, eq=False)
class Selection:
    """The prototypes chosen for one applicant.

    Attributes
    ----------
    indices : ndarray of shape (n_selected,), int64
        Rows of the candidate matrix, by distance ascending (ties by index): the rank order.
    objective : float
        QUAD objective ``theta z^T S z + (1 - theta) d^T z`` (lower is better) for ``quad``,
        ``quad-dp``, ``quad-greedy``, ``nearest`` and ``exact``; ``log det L_z`` (higher is better)
        for ``dpp-greedy`` and ``dpp-ls``.
    screening : ndarray of shape (n_screened,), int64, or None
        Screening set ``Z`` (sorted) for ``quad``, ``quad-dp`` (the enlarged set, or every candidate when
        the full problem was enumerated), ``quad-paper`` and ``quad-dp-paper``; None otherwise.
    method : str
    theta : float
    info : dict
        Method details: ``n_candidates`` always; ``iterations``, ``n_screened``, ``solver``, ``gap`` (of
        the exact solver on its own problem) for the QUAD family; ``objective_gap`` (objective minus a
        proven lower bound on the full problem, 0 when proven optimal; absent when no bound is known),
        ``lower_bound``, ``paper_objective`` for ``quad`` and ``quad-dp``; ``fallback`` and
        ``fallback_reason`` when ``exact`` ran ``quad`` instead; ``greedy_objective``, ``swaps``,
        ``converged`` for ``dpp-ls``.

    Notes
    -----
    ``eq=False``: instances compare by identity (arrays have no truth value).
    """

    indices: np.ndarray
    objective: float
    screening: np.ndarray | None
    method: str
    theta: float
    info: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# Validation at the boundary
# ----------------------------------------------------------------------------------------------


def _check_int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InputError(f"The '{name}' option must be an int >= {minimum}. Got {value!r} instead.")
    return int(value)


def _check_float(name: str, value, low: float, high: float, *, low_open: bool = False) -> float:
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value <= high
    if not ok:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}]" if math.isfinite(high) else f"> {low:g}"
        raise InputError(f"The '{name}' option must be a float in {interval}. Got {value!r} instead.")
    return float(value)


def _check_geometry(geometry) -> Geometry:
    if not isinstance(geometry, Geometry):
        raise InputError(f"geometry must be a Geometry from compute_geometry(). Got {type(geometry).__name__} instead.")
    return geometry


def _check_indices(geometry: Geometry, indices) -> np.ndarray:
    indices = np.asarray(indices)
    if indices.ndim != 1 or indices.size == 0 or not np.issubdtype(indices.dtype, np.integer):
        raise InputError(f"indices must be a non-empty 1-D array of ints. Got {indices!r} instead.")
    n = geometry.n_candidates
    if indices.min() < 0 or indices.max() >= n:
        raise InputError(f"indices must lie in [0, {n - 1}] (one per candidate row). Got {indices.tolist()} instead.")
    if np.unique(indices).size != indices.size:
        raise InputError(f"indices must be distinct. Got {indices.tolist()} instead.")
    return indices.astype(np.int64)


# ----------------------------------------------------------------------------------------------
# Objectives
# ----------------------------------------------------------------------------------------------


def quad_objective(geometry: Geometry, indices, *, theta: float) -> float:
    """QUAD objective ``theta z^T S z + (1 - theta) d^T z`` of the set ``indices`` (lower is better).

    Parameters
    ----------
    geometry : Geometry
    indices : array-like of shape (n_selected,)
        Distinct candidate rows.
    theta : float
        Weight of anti-diversity, in ``[0, 1]``.

    Returns
    -------
    float

    Notes
    -----
    ``z^T S z = ||sum_{i in z} a_i||^2`` (diagonal of ``S`` included): ``O(n_selected p)``.

    References
    ----------
    Paper eq. (cosine2).
    """
    geometry = _check_geometry(geometry)
    theta = _check_float("theta", theta, 0.0, 1.0)
    indices = _check_indices(geometry, indices)
    return quad_objective_values(geometry.directions, geometry.distances, indices, theta)


def dpp_log_det(geometry: Geometry, indices, *, theta: float, bandwidth: float) -> float:
    """``log det L_z`` with ``L = theta S + (1 - theta) diag(exp(-d^2 / h^2))`` (higher is better).

    Parameters
    ----------
    geometry : Geometry
    indices : array-like of shape (n_selected,)
        Distinct candidate rows.
    theta : float
        In ``[0, 1]``.
    bandwidth : float
        ``h > 0``.

    Returns
    -------
    float
        ``-inf`` if ``L_z`` is singular. For ``theta = 0`` the value ``-sum d_i^2 / h^2`` is computed in
        log space (no underflow of ``exp``).

    Notes
    -----
    ``O(n_selected^2 p + n_selected^3)``.

    References
    ----------
    Paper Section 2, definition of ``L^theta`` and eq. (det).
    """
    geometry = _check_geometry(geometry)
    theta = _check_float("theta", theta, 0.0, 1.0)
    bandwidth = _check_float("bandwidth", bandwidth, 0.0, math.inf, low_open=True)
    indices = _check_indices(geometry, indices)
    if theta == 0.0:
        return float(-np.sum((geometry.distances[indices] / bandwidth) ** 2))
    kernel = DppKernel(geometry.directions, geometry.distances, theta, bandwidth)
    sign, value = np.linalg.slogdet(kernel.submatrix(indices))
    return float(value) if sign > 0 else -np.inf


# ----------------------------------------------------------------------------------------------
# Methods
# ----------------------------------------------------------------------------------------------


def _select_quad_paper(geometry, k, method, theta, eigen, n_iter, tau, step, time_limit, max_enumeration,
                       bounds=None):
    """The paper's procedure: screening (Algorithm 1 or 2), then the exact reduced problem over ``Z``."""
    distances, directions = geometry.distances, geometry.directions
    if eigen is None:
        eigen = eigen_decompose(geometry)
    if method in ("quad", "quad-paper"):
        iterates, cycle_start = screen_best_response(eigen, distances, k, theta, n_iter)
    else:
        iterates = screen_dual_ascent(eigen, distances, k, theta, n_iter, step, bounds=bounds)
        cycle_start = None
    screening = screening_set(iterates, n_iter, tau, cycle_start)
    starts = {}
    if math.comb(screening.size, k) > max_enumeration:
        # Distinct iterates inside Z are feasible starts for the OA-MILP (incumbent and cuts).
        position = np.full(distances.shape[0], -1, dtype=np.int64)
        position[screening] = np.arange(screening.size)
        starts = {z.tobytes(): position[z] for z in iterates if np.all(position[z] >= 0)}
    local, info = solve_subset_qp(
        directions[screening],
        distances[screening],
        k,
        theta,
        max_enumeration=max_enumeration,
        time_limit=time_limit,
        initial_sets=list(starts.values()),
    )
    info = {
        "iterations": len(iterates),
        "fixed_point": bool(cycle_start is not None and cycle_start == len(iterates) - 2),
        "cycle_detected": cycle_start is not None,
        "n_screened": int(screening.size),
        "n_components": eigen.n_components,
        **info,
    }
    return screening[local], screening, info, eigen


@functools.lru_cache(maxsize=64)
def _largest_enumerable(k: int, budget: int) -> int:
    """Largest ``m`` with ``C(m, k) <= budget`` (at least ``k``); remembered (two calls per applicant, each
    dozens of binomials)."""
    m = k
    while math.comb(m + 1, k) <= budget:
        m += 1
    return m


def _ordered_union(parts, limit: int) -> np.ndarray:
    """Rows of ``parts`` in order of first appearance, at most ``limit`` of them."""
    rows = np.concatenate([np.asarray(part, dtype=np.int64) for part in parts])
    return np.array(list(dict.fromkeys(rows.tolist()))[:limit], dtype=np.int64)


def _enumerate_over(directions, distances, rows, k, theta):
    """The best ``k``-subset of ``rows`` (enumeration) as candidate indices, sorted."""
    rows = np.sort(np.asarray(rows, dtype=np.int64))
    local, _ = solve_subset_qp(directions[rows], distances[rows], k, theta, max_enumeration=math.comb(rows.size, k))
    return np.sort(rows[local])


def _restart_from_greedy(directions, distances, k, theta, eigen, greedy, known):
    """Best-response iterates from the greedy set (``_RESTART_ITER`` of them).

    The first is taken on the full objective, ``(1 - theta) d + 2 theta A v`` with ``v`` the greedy rows' direction
    sum: ``A v`` is the sum of the greedy rows' cosines, of which only the last row's is new (kept in ``known`` for
    the local search). The following ones on the eigen-approximation, as :func:`screen_best_response`.
    """
    for j in greedy.tolist():
        if j not in known:
            known[j] = directions @ directions[j]
    score = sum(known[j] for j in greedy.tolist())
    score *= 2.0 * theta
    score += (1.0 - theta) * distances
    first = _k_smallest(score, k)
    if _RESTART_ITER == 1 or np.array_equal(first, greedy):  # a fixed point: the next iterates repeat it
        return [first]
    return [first] + screen_best_response(eigen, distances, k, theta, _RESTART_ITER - 1, start=first)[0]


def _select_quad(geometry, k, method, theta, eigen, n_iter, tau, step, time_limit, max_enumeration,
                 full_enumeration):
    """The strengthened QUAD: the full problem exactly when it is small, else the paper's procedure improved.

    Steps when ``C(N, k) > full_enumeration``: (1) the paper's procedure (``quad``: best response;
    ``quad-dp``: dual ascent with ``step``), whose screening set ``Z`` is kept whole; (2) more screening
    rows: best-response iterates from the greedy solution, the nearest rows (dual-ascent iterates with the
    authors' ``lambda = 1`` when ``_DUAL_ITER > 0``); (3) the exact problem over this union (enumeration,
    at most ``_REDUCED_BUDGET`` subsets); (4) best-improvement swap local search on the full objective from that
    answer; (5) the exact problem over the answer and its 10 best swap partners per chosen row, then
    local search again, while it improves (at most 3 rounds; :func:`~frpd_cli.selection.quad.improve_subset`).
    Each step starts from the previous answer: never worse than the paper's. A lower bound
    (:func:`lagrangian_bound` at multiples of the answer's direction sum)
    gives ``objective_gap``; 0 means proven optimal.
    """
    distances, directions = geometry.distances, geometry.directions
    n = distances.shape[0]
    if math.comb(n, k) <= full_enumeration:
        local, info = solve_subset_qp(directions, distances, k, theta, max_enumeration=full_enumeration)
        return local, np.arange(n, dtype=np.int64), {"n_screened": n, **info, "objective_gap": 0.0,
                                                      "lower_bound": quad_objective_values(directions, distances,
                                                                                           local, theta),
                                                      "stage": "full"}
    paper_method = "quad-paper" if method == "quad" else "quad-dp-paper"
    paper, paper_z, info, eigen = _select_quad_paper(geometry, k, paper_method, theta, eigen, n_iter, tau, step,
                                                     time_limit, max_enumeration)
    paper = np.sort(paper)
    paper_value = quad_objective_values(directions, distances, paper, theta)
    greedy, known = greedy_start(directions, distances, k, theta)
    extra = []
    if method == "quad-dp":
        extra.append(screen_best_response(eigen, distances, k, theta, n_iter)[0][::-1])
    if _DUAL_ITER and (method == "quad" or step != 1.0):
        extra.append(screen_dual_ascent(eigen, distances, k, theta, _DUAL_ITER, 1.0)[::-1])
    if _RESTART_ITER:
        extra.append(_restart_from_greedy(directions, distances, k, theta, eigen, greedy, known)[::-1])
    budget = _REDUCED_BUDGET if k <= 3 else _REDUCED_BUDGET_LARGE_K
    limit = max(_largest_enumerable(k, budget), paper_z.size)
    parts = [paper_z, paper, greedy, rank_order(distances, _k_smallest(distances.copy(), min(n, _NEAREST_FACTOR * k)))]
    for iterates in extra:
        parts.extend(iterates)
    screening = np.sort(_ordered_union(parts, limit))
    best = paper
    if screening.size > paper_z.size:  # C(|Z|, k) <= _REDUCED_BUDGET by construction
        best = _enumerate_over(directions, distances, screening, k, theta)
    if quad_objective_values(directions, distances, best, theta) > paper_value:
        best = paper  # cannot happen (Z is a superset of the paper's), kept as a guard
    per_position = min(_NEIGHBOURS, (_largest_enumerable(k, budget) - k) // k)
    best, best_value, moves, rounds, lower = improve_subset(
        directions, distances, best, theta, per_position=per_position, max_rounds=_NEIGHBOURHOOD_ROUNDS,
        products=known,
    )
    # The bound uses only quantities of the encoded space, not the eigenpairs: a stored float32 decomposition
    # (select --reuse-eigen) gives the same bound, hence the same objective_gap.
    gap = max(best_value - lower, 0.0)
    if gap <= 1e-9 * max(1.0, abs(best_value)):
        gap = 0.0
    info = {**info, "paper_objective": paper_value, "n_screened": int(screening.size), "swaps": moves,
            "neighbourhood_rounds": rounds, "lower_bound": lower, "objective_gap": gap, "stage": "improved"}
    return best, sorted_unique(np.concatenate((screening, best))), info


def _exact_too_large(n: int, k: int, max_enumeration: int) -> str | None:
    """Why the full problem is out of reach of ``method="exact"``, or None."""
    if math.comb(n, k) > max_enumeration and n > EXACT_MAX_CANDIDATES:
        return (f"the 'exact' method solves the full binary QP and is limited to {EXACT_MAX_CANDIDATES} candidates "
                f"when C(N, k) exceeds max_enumeration={max_enumeration}; got N={n}, k={k}")
    return None


def _select_exact(geometry, k, theta, time_limit, max_enumeration):
    starts = [k_nearest(geometry.distances, k), quad_greedy(geometry.directions, geometry.distances, k, theta)]
    local, info = solve_subset_qp(
        geometry.directions,
        geometry.distances,
        k,
        theta,
        max_enumeration=max_enumeration,
        time_limit=time_limit,
        initial_sets=starts,
    )
    value = quad_objective_values(geometry.directions, geometry.distances, local, theta)
    info["objective_gap"] = float(info.get("gap", 0.0)) * abs(value)
    return local, info


def select_prototypes(
    geometry: Geometry,
    *,
    k: int = 3,
    method: str = "quad",
    theta: float = 0.9,
    bandwidth: float = 1.0,
    eigen: Eigen | None = None,
    n_iter: int = 100,
    tau: int = 20,
    step: float = 0.1,
    max_swaps: int = 100,
    time_limit: float = 60.0,
    max_enumeration: int = MAX_ENUMERATION,
    full_enumeration: int | None = None,
    exact_fallback: bool = True,
) -> Selection:
    """Select ``k`` diverse prototypes among the candidates of one applicant.

    Parameters
    ----------
    geometry : Geometry
        Directions and distances from :func:`compute_geometry`, shapes (N, p) and (N,).
    k : int, default=3
        Number of prototypes, ``1 <= k <= N``.
    method : str, default="quad"
        One of :data:`METHODS`. ``quad-paper``: the paper's procedure, best-response screening
        (Algorithm 1) then the exact reduced problem over ``Z``; ``quad-dp-paper``: the same with dual
        ascent screening (Algorithm 2). ``quad`` and ``quad-dp``: the full problem exactly when
        ``C(N, k) <= full_enumeration``; otherwise the paper's procedure (best response, resp. dual
        ascent) with a larger screening set, then swap local search on the full objective and exact
        solves over the best swap partners, never worse than the paper's answer (see Notes).
        ``quad-greedy``: greedy on the QUAD objective; ``dpp-greedy``: greedy MAP of the DPP;
        ``dpp-ls``: greedy then swap local search; ``nearest``: the ``k`` closest; ``exact``: the full
        QUAD problem solved exactly.
    theta : float, default=0.9
        Diversity weight in ``[0, 1]`` (``vartheta`` of the QUAD problem, ``theta`` of the DPP kernel).
        ``theta = 0`` returns the ``k`` nearest candidates for every method.
    bandwidth : float, default=1.0
        ``h > 0`` of the DPP quality ``exp(-d^2 / h^2)``; used by ``dpp-*`` only.
    eigen : Eigen, optional
        Precomputed :func:`eigen_decompose` of ``geometry`` (QUAD screening); computed if None.
    n_iter : int, default=100
        Iterations ``T`` of the screening (``quad`` stops at the first repeated iterate).
    tau : int, default=20
        The screening set is the union of the last ``tau + 1`` iterates.
    step : float, default=0.1
        ``lambda`` of the dual ascent step ``2 lambda / sqrt(t + 1)`` (``quad-dp``).
    max_swaps : int, default=100
        Cap on accepted local search moves (``dpp-ls``); ``info["converged"]`` tells if it was hit.
    time_limit : float, default=60.0
        Seconds for the OA-MILP of the exact (reduced) problem; on expiry the incumbent is returned
        and ``info["gap"]`` is positive.
    max_enumeration : int, default=1_000_000
        The exact (reduced) problem is solved by enumeration when ``C(n, k)`` is at most this, and by
        the OA-MILP on HiGHS otherwise.
    full_enumeration : int, optional
        ``quad`` and ``quad-dp`` enumerate the full problem when ``C(N, k)`` is at most this
        (0: never; the improved heuristic runs whatever ``N``). Default: :data:`FULL_ENUMERATION` (100,000)
        for ``k <= 3``, :data:`FULL_ENUMERATION_LARGE_K` (30,000) for larger ``k``.
    exact_fallback : bool, default=True
        ``method="exact"`` above :data:`EXACT_MAX_CANDIDATES` candidates (with ``C(N, k) >
        max_enumeration``): True runs ``quad`` instead and says so in ``info["fallback"]``; False raises.

    Returns
    -------
    Selection

    Raises
    ------
    InputError
        If an argument is invalid or there are fewer than ``k`` candidates.
    SolverError
        For ``method="exact"`` above :data:`EXACT_MAX_CANDIDATES` candidates with
        ``exact_fallback=False``, or if HiGHS fails.

    Notes
    -----
    Costs (``N`` candidates, ``p`` features, ``M <= p`` eigenpairs): geometry ``O(N p)``; eigenpairs
    ``O(N p^2)``; ``quad-paper`` ``O(N M)`` per iteration plus the reduced problem (``|Z| <= (tau + 1)
    k``); ``quad-dp-paper`` ``O(N M n_iter)``; ``quad`` and ``quad-dp`` add a greedy start (``k - 1``
    products ``O(N p)``), up to 2 best-response iterations ``O(N M)``, an enumeration of at most 6,000 subsets
    (40,000 for ``k >= 4``) of the enlarged ``Z``, ``O(N p)`` per local-search move and ``O(N k)`` plus an
    enumeration of ``C(11 k, k)`` subsets per round over swap partners. ``info`` then
    holds ``paper_objective`` (the paper procedure's value, never below the result), ``lower_bound``
    and ``objective_gap`` (objective minus the best lower bound:
    :func:`~frpd_cli.selection.quad.lagrangian_bound` at ``w = s v`` for ``s`` in 0, 1/2, 1 and ``v`` the
    answer's direction sum; 0 means proven optimal, always so after a full enumeration). These
    relaxation bounds are often loose: a positive gap does not mean the answer is not optimal.
    ``dpp-greedy`` ``O(N k (p + k))``; ``dpp-ls`` ``O(N k^2 + N p)`` per
    move; ``quad-greedy`` ``O(N p k)``; ``nearest`` ``O(N)``. No ``N x N`` matrix is formed. The
    result is deterministic (no randomness is used).

    References
    ----------
    Paper eq. (det) and Appendix "Local Search for the MAP Inference" (DPP); eq. (cosine2),
    Lemma 1, eq. (z-opt), eq. (gamma-opt), Algorithms 1 and 2, eq. (cosine-final) (QUAD).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [-1.0, 0.0], [2.0, 0.0]])
    >>> g = compute_geometry(X, np.zeros(2))
    >>> select_prototypes(g, k=2, method="nearest").indices.tolist()
    [0, 2]
    >>> s = select_prototypes(g, k=2, method="quad", theta=0.9)
    >>> s.indices.tolist()  # opposite directions cancel: the most diverse pair
    [0, 3]
    >>> round(s.objective, 6) == round(quad_objective(g, s.indices, theta=0.9), 6)
    True
    """
    geometry = _check_geometry(geometry)
    k = _check_int("k", k, 1)
    if method not in METHODS:
        raise InputError(f"The 'method' option must be one of {', '.join(METHODS)}. Got {method!r} instead.")
    theta = _check_float("theta", theta, 0.0, 1.0)
    bandwidth = _check_float("bandwidth", bandwidth, 0.0, math.inf, low_open=True)
    n_iter = _check_int("n_iter", n_iter, 1)
    tau = _check_int("tau", tau, 0)
    step = _check_float("step", step, 0.0, math.inf, low_open=True)
    max_swaps = _check_int("max_swaps", max_swaps, 0)
    time_limit = _check_float("time_limit", time_limit, 0.0, math.inf, low_open=True)
    max_enumeration = _check_int("max_enumeration", max_enumeration, 1)
    if full_enumeration is None:
        full_enumeration = FULL_ENUMERATION if k <= 3 else FULL_ENUMERATION_LARGE_K
    full_enumeration = _check_int("full_enumeration", full_enumeration, 0)
    n = geometry.n_candidates
    if eigen is not None and (not isinstance(eigen, Eigen) or eigen.n_candidates != n):
        raise InputError(
            f"eigen must be the Eigen of this geometry (vectors with {n} rows). "
            f"Got {type(eigen).__name__} instead; pass eigen=None to compute it."
        )
    if n < k:
        raise InputError(
            f"Only {n} candidate(s) are available and k={k} prototypes were requested; lower 'k' or widen the candidate set."
        )

    distances, directions = geometry.distances, geometry.directions
    info: dict = {"n_candidates": n}
    screening = None
    if method == "nearest" or theta == 0.0 or (k == 1 and method != "dpp-greedy" and method != "dpp-ls"):
        # theta = 0: every objective reduces to proximity. k = 1: z^T S z = ||a_i||^2 = 1 for every i,
        # so the QUAD objectives are minimised by the nearest candidate.
        chosen = k_nearest(distances, k)
        if method != "nearest":
            info["shortcut"] = "theta=0: k nearest" if theta == 0.0 else "k=1: nearest"
            if not method.startswith("dpp"):
                info["objective_gap"] = 0.0  # proven: the k nearest minimise the objective
    elif method in ("quad", "quad-dp") or (method == "exact" and _exact_too_large(n, k, max_enumeration)):
        if method == "exact":
            why = _exact_too_large(n, k, max_enumeration)
            if not exact_fallback:
                raise SolverError(f"{why[0].upper()}{why[1:]}. Use method='quad' (screening, exact reduced problem "
                                  "and local search) for large candidate sets.")
            info["fallback"] = "quad"
            info["fallback_reason"] = f"exact method not run ({why}): prototypes from quad instead"
        chosen, screening, extra = _select_quad(
            geometry, k, "quad" if method == "exact" else method, theta, eigen, n_iter, tau, step, time_limit,
            max_enumeration, full_enumeration,
        )
        info.update(extra)
        if method == "exact":
            screening = None
    elif method in ("quad-paper", "quad-dp-paper"):
        chosen, screening, extra, _ = _select_quad_paper(
            geometry, k, method, theta, eigen, n_iter, tau, step, time_limit, max_enumeration
        )
        info.update(extra)
    elif method == "quad-greedy":
        chosen = quad_greedy(directions, distances, k, theta)
    elif method == "exact":
        chosen, extra = _select_exact(geometry, k, theta, time_limit, max_enumeration)
        info.update(extra)
    else:
        kernel = DppKernel(directions, distances, theta, bandwidth)
        chosen, _, full_rank = dpp_greedy(kernel, k, lambda: k_nearest(distances, n))
        info["full_rank"] = full_rank
        if method == "dpp-ls":
            greedy_value = dpp_log_det(geometry, chosen, theta=theta, bandwidth=bandwidth)
            info["greedy_objective"] = greedy_value
            if full_rank:
                chosen, _, n_swaps, converged = dpp_local_search(kernel, chosen, max_swaps=max_swaps)
            else:
                n_swaps, converged = 0, True  # rank(L) < k: every k-set has determinant 0
            info["swaps"], info["converged"] = n_swaps, converged

    chosen = rank_order(distances, chosen)
    if method.startswith("dpp"):
        objective = dpp_log_det(geometry, chosen, theta=theta, bandwidth=bandwidth)
    else:
        objective = quad_objective_values(directions, distances, chosen, theta)
    chosen.setflags(write=False)
    if screening is not None:
        screening.setflags(write=False)
    return Selection(indices=chosen, objective=objective, screening=screening, method=method, theta=theta, info=info)
