"""QUAD prototype selection: eigen-approximate screening (Algorithms 1 and 2) and the exact reduced problem."""

from __future__ import annotations

import math

import numpy as np

from frpd_cli.selection.exact import solve_subset_qp
from frpd_cli.selection.geometry import Eigen

__all__ = [
    "quad_objective_values",
    "screen_best_response",
    "screen_dual_ascent",
    "screening_set",
    "lagrangian_bound",
    "membership_bounds",
    "swap_local_search",
    "swap_neighbours",
    "greedy_start",
    "improve_subset",
    "sorted_unique",
]


def quad_objective_values(directions: np.ndarray, distances: np.ndarray, indices: np.ndarray, theta: float) -> float:
    """``theta z^T S z + (1 - theta) d^T z`` for the index set ``indices`` (``z^T S z = ||sum a_i||^2``)."""
    # np.add.reduce is what ndarray.sum runs, without its Python layer (called several times per applicant)
    v = _sum(directions[indices], axis=0)
    return float(theta * (v @ v) + (1.0 - theta) * _sum(distances[indices]))


_sum = np.add.reduce


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a 1-D integer array: its distinct values, ascending, in a new array of its dtype.

    Without ``np.unique``'s Python layer, which costs more than the work on the few dozen rows of a screening
    set (several calls per applicant).
    """
    values = np.sort(values)
    if values.size > 1:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values


# Up to this k, the k smallest scores are found by k argmin passes (ties: lowest index): a few microseconds
# where np.argpartition takes about 30 at N = 5,000.
_FEW = 8


def _k_smallest(score: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the ``k`` smallest scores, ``O(N k)`` for ``k <= 8``, else ``O(N)`` (``np.argpartition``).

    ``score`` must be writable: the chosen entries are masked during the search and restored.
    """
    n = score.shape[0]
    if k >= n:
        return np.arange(n, dtype=np.int64)
    if k > _FEW:
        return np.sort(np.argpartition(score, k - 1)[:k]).astype(np.int64)
    picked, saved = [], []
    for _ in range(k):
        i = int(score.argmin())
        picked.append(i)
        saved.append(score[i])
        score[i] = np.inf
    for i, value in zip(picked, saved):     # k scalar stores: cheaper than one from lists
        score[i] = value
    picked.sort()
    return np.array(picked, dtype=np.int64)


def screening_set(iterates: list[np.ndarray], n_iter: int, tau: int, cycle_start: int | None) -> np.ndarray:
    """Union of the last ``tau + 1`` iterates ``z_{T-tau}, ..., z_T`` of a ``T = n_iter`` run.

    ``iterates[i]`` is ``z_{i+1}``. When the run stopped early because ``iterates[-1]`` repeats
    ``iterates[cycle_start]`` the sequence is periodic from there on (each ``z_{t+1}`` is a function of
    ``z_t``), so the iterates of the full run are known without computing them.
    """
    n_done = len(iterates)
    wanted = np.arange(max(n_iter - tau - 1, 0), n_iter)  # list positions of z_{T-tau} .. z_T
    if cycle_start is None:
        positions = wanted[wanted < n_done]
    else:
        period = n_done - 1 - cycle_start
        positions = np.where(wanted < n_done - 1, wanted, cycle_start + (wanted - cycle_start) % period)
    return sorted_unique(np.concatenate([iterates[i] for i in sorted_unique(positions)]))


def screen_best_response(
    eigen: Eigen, distances: np.ndarray, k: int, theta: float, n_iter: int, *, start: np.ndarray | None = None
) -> tuple[list[np.ndarray], int | None]:
    """Best-response iterations (Algorithm 1) on the top-``M`` eigen-approximation.

    ``gamma_{t+1} = -theta sigma (V^T z_t)`` and ``z_{t+1}`` = the ``k`` smallest entries of
    ``(1 - theta) d - 2 V gamma_{t+1} = (1 - theta) d + 2 theta V (sigma * V^T z_t)``. The paper starts
    from ``z_0 = 0``; ``start`` (sorted indices) starts elsewhere.

    Returns
    -------
    iterates : list of ndarray of shape (k,)
        ``z_1, z_2, ...`` as sorted index arrays, up to the first repeat.
    cycle_start : int or None
        Position in ``iterates`` of the earlier copy of the last iterate (``len - 2`` for a fixed
        point), or None if ``n_iter`` iterations ran without a repeat.

    Notes
    -----
    Each iteration costs ``O(N M)`` (one product with ``V``); ``z_{t+1}`` depends only on ``z_t``,
    so the iterations stop at the first repeated iterate.

    References
    ----------
    Paper eq. (z-opt), eq. (gamma-opt) and Algorithm 1.
    """
    sigma = eigen.values
    base = (1.0 - theta) * distances
    iterates: list[np.ndarray] = []
    seen: dict[bytes, int] = {}
    z = np.zeros(0, dtype=np.int64) if start is None else np.asarray(start, dtype=np.int64)
    for t in range(n_iter):
        if z.size:
            score = eigen.vectors_dot(sigma * eigen.vectors_sum(z))
            score *= 2.0 * theta
            score += base
        else:
            score = base
        z = _k_smallest(score, k)
        key = z.tobytes()
        iterates.append(z)
        if key in seen:
            return iterates, seen[key]
        seen[key] = t
    return iterates, None


def screen_dual_ascent(
    eigen: Eigen, distances: np.ndarray, k: int, theta: float, n_iter: int, step: float, *, bounds: list | None = None
) -> list[np.ndarray]:
    """Dual ascent iterations (Algorithm 2) with step size ``2 lambda / sqrt(t + 1)``.

    ``gamma_{t+1} = gamma_t - (2 lambda / sqrt(t + 1)) (gamma_t / (theta sigma) + V^T z_t)`` and
    ``z_{t+1}`` = the ``k`` smallest entries of ``(1 - theta) d - 2 V gamma_{t+1}``.

    bounds : list, optional
        When given, the Lagrangian value ``min_z L(z, gamma_{t+1})`` of every iterate is appended to it:
        each is a lower bound on the eigen-approximate problem, hence on the full problem
        (``S - S_M`` is positive semidefinite, so ``z^T S_M z <= z^T S z``).

    Returns
    -------
    list of ndarray of shape (k,)
        ``z_1, ..., z_T`` as sorted index arrays.

    Notes
    -----
    ``O(N M)`` per iteration, always ``n_iter`` iterations (a repeated ``z`` is no fixed point:
    ``gamma`` keeps moving). Exact pruning (not in the paper): a score moves by at most
    ``2 max_i ||v_i|| ||gamma - gamma'||`` (rows ``v_i`` of the eigenvectors; through the unit directions
    when the vectors are not formed), so after a full pass only the rows within twice that of the pass's
    ``k``-th smallest score are rescored, while they are at most ``N / 8``; same iterates, a fraction of the cost.
    Safeguard (not in the paper): in coordinates where the paper's step would overshoot the coordinate-wise
    maximiser ``-theta sigma_m v_m^T z_t`` of the concave dual function, i.e.
    ``2 lambda / sqrt(t+1) > theta sigma_m``, the step is capped at that maximiser. Without the cap the
    small-``sigma_m`` coordinates oscillate with a growing amplitude and overflow; with it they take the
    best-response value, and the large-``sigma`` coordinates follow the paper exactly.

    References
    ----------
    Paper eq. (dualprogram) and Algorithm 2.
    """
    sigma = eigen.values
    base = (1.0 - theta) * distances
    n = base.shape[0]
    rows, coefficients, radius = eigen.factors()
    gamma = np.zeros(sigma.shape[0])
    target_scale = theta * sigma
    iterates: list[np.ndarray] = []
    z = np.zeros(0, dtype=np.int64)
    full = u_full = kth_full = None
    for t in range(n_iter):
        vz = eigen.vectors_sum(z) if z.size else np.zeros(sigma.shape[0])
        alpha = np.minimum(2.0 * step / np.sqrt(t + 1.0) / target_scale, 1.0)
        gamma = gamma + alpha * (-target_scale * vz - gamma)
        u = gamma if coefficients is None else coefficients @ gamma  # V gamma = rows u
        active = None
        if full is not None and n >= _PRUNE_MIN_ROWS:
            # Every score moved by at most `drift` since the last full pass: only rows then within 2 drift of
            # that pass's k-th smallest score can be among the k smallest now (ties included).
            drift = 2.0 * radius * float(np.linalg.norm(u - u_full))
            limit = kth_full + 2.0 * drift + 1e-9 * (1.0 + abs(kth_full))
            active = np.flatnonzero(full <= limit)
            if active.size > n // _ACTIVE_SHARE:
                active = None
        if active is None:
            score = rows @ u
            score *= -2.0
            score += base
            z = _k_smallest(score, k)
            full, u_full, kth_full = score, u, float(score[z].max())
            chosen = score[z]
        else:
            score = rows[active] @ u
            score *= -2.0
            score += base[active]
            local = _k_smallest(score, k)
            z, chosen = active[local], score[local]
        iterates.append(z)
        if bounds is not None:
            bounds.append(float(chosen.sum() - np.sum(gamma * gamma / target_scale)))
    return iterates


# Dual ascent rescores only the rows that can still be among the k smallest while they are at most 1/8 of all.
_ACTIVE_SHARE = 8
_PRUNE_MIN_ROWS = 1024  # below, a full pass costs about what the test does


def lagrangian_bound(
    directions: np.ndarray, distances: np.ndarray, k: int, theta: float, w: np.ndarray, *, aw: np.ndarray | None = None
) -> float:
    """A lower bound on the full QUAD problem from any point ``w`` of the encoded space.

    For every ``w``, ``||v||^2 >= 2 w^T v - ||w||^2``; with ``v = sum_{i in z} a_i`` the objective of every
    ``k``-set is at least ``sum_{i in z} c_i - theta ||w||^2`` with ``c_i = (1 - theta) d_i + 2 theta a_i^T w``,
    hence at least the sum of the ``k`` smallest ``c_i`` minus ``theta ||w||^2``.

    Parameters
    ----------
    directions : ndarray of shape (n_candidates, n_features)
    distances : ndarray of shape (n_candidates,)
    k : int
    theta : float
    w : ndarray of shape (n_features,)
    aw : ndarray of shape (n_candidates,), optional
        ``A w`` when already known.

    Returns
    -------
    float

    Notes
    -----
    ``O(N p)``. At ``w = v(z)`` the bound equals the objective of ``z`` exactly when ``z`` is its own
    best response (the ``k`` smallest ``c_i``): then ``z`` is proven optimal.
    """
    score = (1.0 - theta) * distances + (2.0 * theta) * (directions @ w if aw is None else aw)
    return float(score[_k_smallest(score, k)].sum() - theta * float(w @ w))


def membership_bounds(
    directions: np.ndarray, distances: np.ndarray, k: int, theta: float, points: np.ndarray
) -> np.ndarray:
    """For every candidate ``i``, a lower bound on the objective of every ``k``-set that contains ``i``.

    The bound of :func:`lagrangian_bound` restricted to the sets holding ``i``: with
    ``c_j = (1 - theta) d_j + 2 theta a_j^T w``, every such set has objective at least
    ``c_i + (the sum of the k - 1 smallest c_j, j != i) - theta ||w||^2``; the best over the given points ``w``
    is returned. ``w = 0`` gives the distance bound ``(1 - theta) (d_i + d_(1) + ... + d_(k-1))`` (the ``k - 1``
    nearest other candidates). A candidate whose bound exceeds the objective of a known ``k``-set (an
    incumbent) is in no better set, hence not in any optimal one: pruning it before an exact search over the
    rest cannot change the optimum.

    Parameters
    ----------
    directions : ndarray of shape (n_candidates, n_features)
        Unit rows.
    distances : ndarray of shape (n_candidates,)
    k : int
        ``1 <= k <= n_candidates``.
    theta : float
    points : ndarray of shape (n_points, n_features)
        The points ``w`` (a row of zeros for the distance bound).

    Returns
    -------
    ndarray of shape (n_candidates,)

    Notes
    -----
    ``O(N p)`` per point. The ``k - 1`` smallest of the others: when ``c_i`` is at most the ``k``-th smallest
    value, the ``k`` smallest values less ``c_i``; otherwise the ``k - 1`` smallest (ties need no care).
    Exact arithmetic; in floating point compare with a relative margin (the objective is a sum of ``O(k^2)``
    terms).
    """
    points = np.atleast_2d(np.asarray(points, dtype=np.float64))
    best = np.full(distances.shape[0], -np.inf)
    base = (1.0 - theta) * distances
    for w in points:
        c = base + (2.0 * theta) * (directions @ w)
        smallest = np.sort(np.partition(c, k - 1)[:k])
        low_k, low_rest = float(smallest.sum()), float(smallest[:k - 1].sum())
        bound = np.where(c <= smallest[k - 1], low_k, c + low_rest) - theta * float(w @ w)
        np.maximum(best, bound, out=best)
    return best


def _swap_table(rows: np.ndarray, distances: np.ndarray, subset: np.ndarray, theta: float) -> np.ndarray:
    """Objective after swapping position ``j`` of ``subset`` for row ``i``, for every ``(j, i)``: shape (k, N).

    ``rows[j] = A a_{subset[j]}`` (the cosines of every candidate with chosen row ``j``). With
    ``v = sum_j a_j`` and unit directions, swapping ``j`` for ``i`` gives
    ``theta (||v - a_j||^2 + 2 a_i^T v - 2 a_i^T a_j + 1) + (1 - theta) (D - d_j + d_i)``: one row
    ``c_i = theta + (1 - theta) d_i + 2 theta a_i^T v`` shared by all ``j``, minus ``2 theta rows[j]``, plus a
    constant per ``j``. Chosen rows get ``inf``.
    """
    av = rows.sum(axis=0)                                      # A v
    at_chosen = av[subset]
    vv = float(at_chosen.sum())                                # ||v||^2
    rest = theta * (vv - 2.0 * at_chosen + 1.0) + (1.0 - theta) * (distances[subset].sum() - distances[subset])
    shared = (theta + (1.0 - theta) * distances) + (2.0 * theta) * av
    values = rows * (-2.0 * theta)
    values += shared
    values += rest[:, None]
    values[:, subset] = np.inf
    return values


def _product_rows(directions: np.ndarray, subset: np.ndarray, known: dict | None = None) -> np.ndarray:
    """``A a_j`` for every ``j`` of ``subset`` as the rows of a (k, N) array; rows found in ``known`` are reused."""
    out = np.empty((subset.size, directions.shape[0]))
    for r, j in enumerate(subset.tolist()):
        if known is not None and j in known:
            out[r] = known[j]
        else:
            np.dot(directions, directions[j], out=out[r])
    return out


def _as_rows(products: np.ndarray) -> np.ndarray:
    """The (k, N) row layout of an (N, k) ``products`` array (free for the arrays this module returns)."""
    return np.ascontiguousarray(np.asarray(products, dtype=np.float64).T)


def _local_search(directions, distances, subset, theta, rows, owned, max_moves):
    """:func:`swap_local_search` on the (k, N) layout; also returns the swap table of the answer."""
    current = quad_objective_values(directions, distances, subset, theta)
    n_moves = 0
    while True:
        values = _swap_table(rows, distances, subset, theta)
        if n_moves >= max_moves:
            break
        j, i = divmod(int(np.argmin(values)), values.shape[1])
        tol = 1e-12 * max(1.0, abs(current))
        if not values[j, i] < current - tol:
            break
        candidate = subset.copy()
        candidate[j] = i
        value = quad_objective_values(directions, distances, candidate, theta)
        if not value < current - tol:
            break
        if not owned:
            rows, owned = rows.copy(), True
        np.dot(directions, directions[i], out=rows[j])
        order = np.argsort(candidate)
        subset, rows, current = candidate[order], rows[order], value
        n_moves += 1
    return subset, current, n_moves, rows, values


def swap_local_search(
    directions: np.ndarray,
    distances: np.ndarray,
    subset: np.ndarray,
    theta: float,
    *,
    max_moves: int = 100,
    products: np.ndarray | None = None,
) -> tuple[np.ndarray, float, int, np.ndarray]:
    """Best-improvement swap local search on the full QUAD objective.

    A move replaces one chosen row by one unchosen row; the best of the ``k (N - k)`` moves is taken while it
    lowers the objective by more than ``1e-12 max(1, |objective|)`` (recomputed exactly for the new set).

    Parameters
    ----------
    directions : ndarray of shape (n_candidates, n_features)
        Unit rows.
    distances : ndarray of shape (n_candidates,)
    subset : ndarray of shape (k,)
        The start; the result is never worse.
    theta : float
    max_moves : int, default=100
    products : ndarray of shape (n_candidates, k), optional
        ``A a_j`` for the rows of ``np.sort(subset)``, when already known.

    Returns
    -------
    subset : ndarray of shape (k,), int64, sorted
    objective : float
    n_moves : int
    products : ndarray of shape (n_candidates, k)
        ``A a_j`` for the returned rows (for :func:`swap_neighbours` and :func:`lagrangian_bound`); a
        transposed view of a C-ordered (k, N) array.

    Notes
    -----
    The cosines of every candidate with each chosen row are kept as ``k`` contiguous rows: a pass scores all
    ``k (N - k)`` moves at once from one shared vector ``(1 - theta) d + 2 theta A v`` minus
    ``2 theta A a_j`` (``O(N k)``, a handful of vector operations), and a move costs one matrix-vector
    product ``O(N p)``; no ``N x N`` matrix.
    """
    subset = np.sort(np.asarray(subset, dtype=np.int64))
    if products is None:
        rows, owned = _product_rows(directions, subset), True
    else:
        rows, owned = _as_rows(products), False
    subset, current, n_moves, rows, _ = _local_search(directions, distances, subset, theta, rows, owned, max_moves)
    return subset, current, n_moves, rows.T


def _neighbours_from_table(values: np.ndarray, per_position: int) -> np.ndarray:
    """The ``per_position`` best entries of each row of a swap table (sorted, unique)."""
    m = min(per_position, values.shape[1] - values.shape[0])
    if m <= 0:
        return np.zeros(0, dtype=np.int64)
    picks = np.argpartition(values, m - 1, axis=1)[:, :m]
    return sorted_unique(picks.reshape(-1)).astype(np.int64)


def swap_neighbours(
    products: np.ndarray, distances: np.ndarray, subset: np.ndarray, theta: float, per_position: int
) -> np.ndarray:
    """For each chosen row, the ``per_position`` unchosen rows that would replace it best (sorted, unique).

    The rows a good two- or three-row exchange would bring in: the exact problem over them and ``subset``
    explores moves a single swap cannot make. ``products`` as returned by :func:`swap_local_search`;
    ``O(N k)``.
    """
    subset = np.asarray(subset, dtype=np.int64)
    return _neighbours_from_table(_swap_table(_as_rows(products), distances, subset, theta), per_position)


def greedy_start(directions: np.ndarray, distances: np.ndarray, k: int, theta: float) -> tuple[np.ndarray, dict]:
    """Greedy on the QUAD objective for unit directions, with the cosines it computed along the way.

    Step ``t`` adds the row of least objective increase ``theta + (1 - theta) d_i + 2 theta a_i^T v_t``
    (``v_t`` the sum of the rows chosen so far; ties: lowest index).

    Returns
    -------
    subset : ndarray of shape (k,), int64, sorted
    products : dict
        ``A a_j`` for the first ``k - 1`` chosen rows ``j`` (reused by :func:`improve_subset`).

    Notes
    -----
    ``k - 1`` matrix-vector products ``O(N p)`` and ``k`` passes ``O(N)``.
    """
    increase = theta + (1.0 - theta) * distances
    chosen: list[int] = []
    products: dict = {}
    aw = np.zeros(distances.shape[0])
    for step in range(k):
        score = (2.0 * theta) * aw
        score += increase
        score[chosen] = np.inf
        best = int(score.argmin())
        chosen.append(best)
        if step < k - 1:
            products[best] = directions @ directions[best]
            aw += products[best]
    return np.sort(np.array(chosen, dtype=np.int64)), products


def improve_subset(
    directions: np.ndarray,
    distances: np.ndarray,
    subset: np.ndarray,
    theta: float,
    *,
    per_position: int,
    max_rounds: int,
    max_moves: int = 100,
    products: dict | None = None,
) -> tuple[np.ndarray, float, int, int, float]:
    """Swap local search from ``subset``, then exact solves over the answer and its best swap partners.

    Each round enumerates every ``k``-subset of the answer and its ``per_position`` best swap partners per
    chosen row (two- and three-row exchanges a single swap cannot make); when that improves, local search
    runs again from the new answer. The single best swap of every position is among the partners, so a round
    that finds nothing better also certifies the answer swap-optimal.

    Parameters
    ----------
    directions : ndarray of shape (n_candidates, n_features)
        Unit rows.
    distances : ndarray of shape (n_candidates,)
    subset : ndarray of shape (k,)
        The start; the result is never worse.
    theta : float
    per_position : int
        Swap partners per chosen row in a round (0: no rounds).
    max_rounds : int
    max_moves : int, default=100
        Cap on the moves of each local search.
    products : dict, optional
        ``A a_j`` already computed for some rows ``j`` (from :func:`greedy_start`).

    Returns
    -------
    subset : ndarray of shape (k,), int64, sorted
    objective : float
    n_moves : int
    n_rounds : int
    lower_bound : float
        The best :func:`lagrangian_bound` at ``w = s v`` for ``s`` in 0, 1/2, 1 and ``v`` the answer's direction
        sum (``A w`` from the kept cosines: no further product).

    Notes
    -----
    A pass of local search is ``O(N k)``, a move one product ``O(N p)``; a round ``O(N k)`` plus the
    enumeration of ``C(k (per_position + 1), k)`` subsets and the products of the rows that changed.
    """
    subset = np.sort(np.asarray(subset, dtype=np.int64))
    k = subset.size
    rows = _product_rows(directions, subset, products)
    subset, value, n_moves, rows, table = _local_search(directions, distances, subset, theta, rows, True, max_moves)
    n_rounds = 0
    while per_position >= 1 and n_rounds < max_rounds:
        pool = sorted_unique(np.concatenate((subset, _neighbours_from_table(table, per_position))))
        local, _ = solve_subset_qp(directions[pool], distances[pool], k, theta, max_enumeration=math.comb(pool.size, k))
        found = pool[local]
        found_value = quad_objective_values(directions, distances, found, theta)
        n_rounds += 1
        if not found_value < value - 1e-12 * max(1.0, abs(value)):
            break
        known = dict(zip(subset.tolist(), rows))
        subset, value, moves, rows, table = _local_search(
            directions, distances, found, theta, _product_rows(directions, found, known), True, max_moves
        )
        n_moves += moves
    # lagrangian_bound at w = s v for s = 0, 1/2, 1, sharing (1 - theta) d and A v = sum of the kept rows.
    vv, av, base = float(np.sum(directions[subset].sum(axis=0) ** 2)), rows.sum(axis=0), (1.0 - theta) * distances
    lower = float(base[_k_smallest(base, k)].sum())
    for s in (0.5, 1.0):
        score = av * (2.0 * theta * s)
        score += base
        lower = max(lower, float(score[_k_smallest(score, k)].sum() - theta * s * s * vv))
    return subset, value, n_moves, n_rounds, lower
