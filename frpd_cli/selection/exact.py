"""Exact solution of the cardinality-constrained binary QP ``min theta ||A_z^T z||^2 + (1 - theta) d^T z``.

Two exact engines, chosen by size:

* vectorised enumeration of all ``K``-subsets when ``C(n, K)`` is at most ``max_enumeration``;
* an outer-approximation (OA) MILP on HiGHS otherwise. HiGHS cannot solve MIQPs, so the convex
  term ``z^T S z = ||v||^2`` with ``v = sum_i z_i a_i`` is replaced by an epigraph variable
  ``t >= ||v||^2`` described by tangent cuts ``t >= 2 v_hat^T v - ||v_hat||^2``; a cut is added at
  every new incumbent and the MILP is re-solved until the lower bound meets the best true objective.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
import time

import numpy as np

from frpd_cli.exceptions import SolverError

__all__ = ["MAX_ENUMERATION", "GAP_RTOL", "combinations_array", "solve_subset_qp"]

#: Default largest number of ``K``-subsets scored by enumeration before switching to the OA-MILP.
MAX_ENUMERATION = 1_000_000
#: Relative gap at which the OA loop stops.
GAP_RTOL = 1e-9
# Largest n for which the n x n Gram matrix of the (small) enumeration problem is formed (8 MB).
_GRAM_MAX = 1024

_HIGHS_LOCK = threading.Lock()
_HIGHS_BANNER_DONE = False


def combinations_array(n: int, k: int) -> np.ndarray:
    """All ``k``-subsets of ``range(n)`` in lexicographic order, built with numpy.

    Parameters
    ----------
    n, k : int

    Returns
    -------
    ndarray of shape (C(n, k), k), int64
        Read-only when ``C(n, k) <= 8192`` (small tables are cached and shared).

    Examples
    --------
    >>> combinations_array(4, 2).tolist()
    [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    """
    if k == 0:
        return np.zeros((1, 0), dtype=np.int64)
    if k > n:
        return np.zeros((0, k), dtype=np.int64)
    if math.comb(n, k) <= _CACHED_COMBINATIONS:
        return _small_combinations(n, k)
    return _build_combinations(n, k)


# The exact reduced problems ask for the same small subset tables for every applicant: keep the small ones
# (read-only, at most 64 tables of at most 8,192 rows: 12 MB at k = 3).
_CACHED_COMBINATIONS = 8192


@functools.lru_cache(maxsize=64)
def _small_combinations(n: int, k: int) -> np.ndarray:
    combos = _build_combinations(n, k)
    combos.setflags(write=False)
    return combos


def _build_combinations(n: int, k: int) -> np.ndarray:
    combos = np.arange(n - k + 1, dtype=np.int64)[:, None]
    for j in range(1, k):
        last = combos[:, -1]
        counts = (n - k + j) - last  # next element runs over last+1 .. n-k+j
        rows = np.repeat(np.arange(combos.shape[0]), counts)
        offsets = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
        combos = np.column_stack([combos[rows], last[rows] + 1 + offsets])
    return combos


def _objective(directions: np.ndarray, distances: np.ndarray, subset: np.ndarray, theta: float) -> float:
    v = directions[subset].sum(axis=0)
    return float(theta * (v @ v) + (1.0 - theta) * distances[subset].sum())


def _pair_weights(directions: np.ndarray, distances: np.ndarray, k: int, theta: float) -> np.ndarray:
    """``W`` with ``theta ||sum_{i in z} a_i||^2 + (1 - theta) sum_{i in z} d_i = sum_{a < b in z} W_ab`` for ``|z| = k``.

    ``W_ab = 2 theta a_a^T a_b + (u_a + u_b) / (k - 1)`` with ``u_i = theta ||a_i||^2 + (1 - theta) d_i``: each row of a
    ``k``-set lies in ``k - 1`` of its pairs. Exactly symmetric (the Gram matrix comes from one ``A A^T`` product).
    """
    gram = directions @ directions.T
    unary = (theta * np.diagonal(gram) + (1.0 - theta) * distances) / (k - 1)
    weights = (2.0 * theta) * gram
    weights += unary[:, None] + unary[None, :]  # u_a + u_b == u_b + u_a: W stays exactly symmetric
    return weights


def _strict_upper(weights: np.ndarray) -> np.ndarray:
    """``weights`` with ``inf`` on and below the diagonal (only ``a < b`` pairs left)."""
    n = weights.shape[0]
    return np.where(np.arange(n)[None, :] > np.arange(n)[:, None], weights, np.inf)


# Largest number of values scored in one vectorised block (2 MB of float64).
_BLOCK = 1 << 18


def _enumerate_pairs(directions: np.ndarray, distances: np.ndarray, k: int, theta: float) -> np.ndarray:
    """Best ``k``-subset (``k >= 2``) from the pair weights; ties: lexicographic first.

    ``k = 2``: the smallest strict-upper entry of ``W``. ``k = 3``: the table ``U_ij + U_il + W_jl``
    over ``i`` and the later rows ``j, l`` (``U`` = strict upper part, so only ``i < j, i < l`` is finite; both
    orders of ``j, l`` give the same value and the first minimum has ``j < l``), by blocks of ``i``, over the rows
    ``i`` whose lower bound can reach an actual set's value (:func:`_rows_that_may_win`). ``k >= 4``: every
    ``(k - 1)``-subset ``h`` (lexicographic) against every later last row ``l`` in one table
    ``sum_{a < b in h} W_ab + sum_{a in h} W_al``, by blocks of ``h``. Flat table order is lexicographic
    order of the ``k``-sets, so the first minimum is the lexicographically first optimal set. For ``k = 3`` and
    ``C(n, 3) <= 8192`` (the reduced problems) each set is scored once instead (:func:`_enumerate_triples`: the
    same values, the same first minimum, without the table's other half).
    """
    n = distances.shape[0]
    weights = _pair_weights(directions, distances, k, theta)
    if k == 3 and math.comb(n, 3) <= _CACHED_COMBINATIONS:
        return _enumerate_triples(weights)
    upper = _strict_upper(weights)
    if k == 2:
        return np.array(divmod(int(np.argmin(upper)), n), dtype=np.int64)
    if k == 3:
        return _triples_table(weights, upper)
    best_value, best = np.inf, None
    heads = combinations_array(n, k - 1)
    heads = heads[heads[:, -1] < n - 1]
    block = max(1, _BLOCK // n)
    for start in range(0, heads.shape[0], block):
        part = heads[start : start + block]
        table = np.take(upper, part[:, -1], axis=0)
        inner = np.zeros(part.shape[0])
        for a in range(k - 1):
            col = part[:, a]
            if a < k - 2:
                table += np.take(weights, col, axis=0)
            for b in range(a + 1, k - 1):
                inner += weights[col, part[:, b]]
        table += inner[:, None]
        flat = int(np.argmin(table))
        if table.flat[flat] < best_value:
            h, last = divmod(flat, n)
            best_value, best = float(table.flat[flat]), np.append(part[h], last).astype(np.int64)
    return best


def _triples_table(weights: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Best 3-subset from the table ``U_ij + U_il + W_jl`` by blocks of ``i`` (see :func:`_enumerate_pairs`).

    ``weights`` is overwritten (its diagonal becomes ``inf``).
    """
    n = weights.shape[0]
    np.fill_diagonal(weights, np.inf)  # j == l
    first = _rows_that_may_win(weights, upper)
    best_value, best = np.inf, None
    block = max(1, _BLOCK // (n * n))
    for start in range(0, first.size, block):
        heads = first[start : start + block]
        # rows i of this block, later rows j, l in (heads[0], n): for the other i the entries U_ij are inf
        low = int(heads[0]) + 1
        rows = upper[heads, low:]
        table = rows[:, :, None] + rows[:, None, :]
        table += weights[None, low:, low:]
        flat = int(np.argmin(table))
        if table.flat[flat] < best_value:
            i, j, l = np.unravel_index(flat, table.shape)
            best_value = float(table.flat[flat])
            best = np.array([heads[i], low + j, low + l], dtype=np.int64)
    return np.sort(best)


def _rows_that_may_win(weights: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The first rows ``i`` (ascending) whose table entries can reach the best 3-subset's value.

    A bound per ``i``: ``(s1 + s2) + w``, with ``s1 <= s2`` the two smallest ``U_ij`` of the row and ``w`` the
    smallest ``W_jl`` over ``i < j < l``, is at most every entry ``(U_ij + U_il) + W_jl`` of the row (rounded
    addition is monotone). The value of one actual set per row (``i`` and its two smallest ``U_ij``) gives an
    upper bound of the optimum; rows whose bound exceeds it hold neither an optimal set nor a tie, so leaving
    them out changes neither the minimum nor which set comes first.
    """
    n = weights.shape[0]
    heads = np.arange(n - 2)
    pair = np.argpartition(upper[: n - 2], 1, axis=1)[:, :2]
    s = upper[heads[:, None], pair]
    row_min = upper.min(axis=1)
    later = np.minimum.accumulate(row_min[::-1])[::-1]        # later[m] = min of row_min[m:]
    bound = (s[:, 0] + s[:, 1]) + later[heads + 1]
    actual = (s[:, 0] + s[:, 1]) + weights[pair[:, 0], pair[:, 1]]
    return np.flatnonzero(bound <= actual.min())


@functools.lru_cache(maxsize=64)
def _triple_positions(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat positions in an ``n x n`` matrix of ``(i, j)``, ``(i, l)`` and ``(j, l)`` for every ``i < j < l``, lexicographic."""
    combos = _small_combinations(n, 3)
    i, j, l = combos[:, 0], combos[:, 1], combos[:, 2]
    positions = (i * n + j, i * n + l, j * n + l)
    for array in positions:
        array.setflags(write=False)
    return positions


def _enumerate_triples(weights: np.ndarray) -> np.ndarray:
    """Best 3-subset from the pair weights over the ``C(n, 3)`` sets listed once (small ``n``).

    Scores ``(W_ij + W_il) + W_jl`` for every ``i < j < l`` in lexicographic order: the same additions, in the
    same order, as the ``U_ij + U_il + W_jl`` table of :func:`_enumerate_pairs` (whose first minimum always has
    ``j < l``), without the ``j >= l`` half and the ``inf`` entries, so the same first minimum.
    """
    n = weights.shape[0]
    ij, il, jl = _triple_positions(n)
    flat = weights.reshape(-1)
    values = flat.take(ij)
    values += flat.take(il)
    values += flat.take(jl)
    best = int(values.argmin())
    return _small_combinations(n, 3)[best].copy()


def _enumerate(directions: np.ndarray, distances: np.ndarray, k: int, theta: float) -> np.ndarray:
    """Best ``k``-subset by scoring all of them; ties: lexicographic first (up to rounding)."""
    n = distances.shape[0]
    if k == 1:
        values = theta * np.einsum("ij,ij->i", directions, directions) + (1.0 - theta) * distances
        return np.array([int(np.argmin(values))], dtype=np.int64)
    if n <= _GRAM_MAX:
        return _enumerate_pairs(directions, distances, k, theta)
    best_value, best = np.inf, None
    for first in range(n - k + 1):
        rest = first + 1 + combinations_array(n - first - 1, k - 1)
        v = directions[first] + directions[rest].sum(axis=1)
        quad = np.einsum("ij,ij->i", v, v)
        values = theta * quad + (1.0 - theta) * (distances[first] + distances[rest].sum(axis=1))
        i = int(np.argmin(values))
        if values[i] < best_value:
            best_value, best = float(values[i]), np.concatenate([[first], rest[i]])
    return best.astype(np.int64)


def _lawler_bounds(directions: np.ndarray, k: int, *, chunk: int = 512) -> np.ndarray:
    """``q_i = ||a_i||^2 + sum of the k-1 smallest a_i^T a_j (j != i)``, by row blocks of the Gram matrix."""
    n = directions.shape[0]
    q = np.einsum("ij,ij->i", directions, directions)
    if k == 1:
        return q
    for start in range(0, n, chunk):
        block = directions[start : start + chunk] @ directions.T
        rows = np.arange(block.shape[0])
        block[rows, start + rows] = np.inf
        q[start : start + chunk] += np.partition(block, k - 2, axis=1)[:, : k - 1].sum(axis=1)
    return q


def _new_highs():
    """A silent single-threaded HiGHS instance.

    The first ``highspy.Highs()`` of a process writes a banner to file descriptor 1, which
    ``contextlib.redirect_stdout`` cannot catch: fd 1 is pointed at ``/dev/null`` around it.
    """
    global _HIGHS_BANNER_DONE
    try:
        import highspy
    except ImportError as exc:  # pragma: no cover - highspy is a hard dependency
        raise SolverError("The exact QUAD solver needs the 'highspy' package; install it with `pip install highspy`.") from exc
    with _HIGHS_LOCK:
        if _HIGHS_BANNER_DONE:
            highs = highspy.Highs()
        else:
            sys.stdout.flush()
            saved = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
                highs = highspy.Highs()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(devnull)
            _HIGHS_BANNER_DONE = True
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", 1)
    return highs, highspy


def _oa_milp(
    directions: np.ndarray,
    distances: np.ndarray,
    k: int,
    theta: float,
    *,
    time_limit: float,
    initial_sets: list[np.ndarray],
) -> tuple[np.ndarray, dict]:
    """Outer-approximation MILP; returns the best subset found and solver information."""
    start = time.perf_counter()
    n, p = directions.shape
    highs, highspy = _new_highs()
    highs.setOptionValue("mip_rel_gap", GAP_RTOL / 10.0)
    highs.setOptionValue("mip_abs_gap", 1e-12)
    # Cut violations allowed by the default 1e-6/1e-7 tolerances would show up as a ~1e-6 gap.
    highs.setOptionValue("mip_feasibility_tolerance", 1e-10)
    highs.setOptionValue("primal_feasibility_tolerance", 1e-10)
    inf = highspy.kHighsInf
    # Columns: z (n binaries), v (p free), t (p, t_j >= v_j^2 through cuts).
    n_cols = n + 2 * p
    v_cols = n + np.arange(p, dtype=np.int32)
    t_cols = n + p + np.arange(p, dtype=np.int32)
    costs = np.concatenate([(1.0 - theta) * distances, np.zeros(p), np.full(p, theta)])
    lower = np.concatenate([np.zeros(n), np.full(p, -inf), np.zeros(p)])
    upper = np.concatenate([np.ones(n), np.full(p, inf), np.full(p, inf)])
    highs.addVars(n_cols, lower, upper)
    highs.changeColsCost(n_cols, np.arange(n_cols, dtype=np.int32), costs)
    highs.changeColsIntegrality(
        n, np.arange(n, dtype=np.int32), np.full(n, int(highspy.HighsVarType.kInteger), dtype=np.uint8)
    )
    # sum z = k
    highs.addRow(float(k), float(k), n, np.arange(n, dtype=np.int32), np.ones(n))
    # v_j - sum_i a_ij z_i = 0, one row per feature (row-wise CSR).
    starts = np.arange(p, dtype=np.int32) * (n + 1)
    indices = np.empty((p, n + 1), dtype=np.int32)
    indices[:, :n] = np.arange(n, dtype=np.int32)
    indices[:, n] = v_cols
    values = np.empty((p, n + 1))
    values[:, :n] = -directions.T
    values[:, n] = 1.0
    highs.addRows(p, np.zeros(p), np.zeros(p), p * (n + 1), starts, indices.ravel(), values.ravel())

    # Tangent cuts of t_j >= v_j^2 at c: t_j - 2 c v_j >= -c^2. Summed over j they are the tangent
    # cut of t >= ||v||^2 at v_hat = c; kept per coordinate they are stronger (disaggregated OA).
    cut_starts = np.arange(p, dtype=np.int32) * 2
    cut_indices = np.column_stack([v_cols, t_cols]).ravel()
    cut_keys: set[bytes] = set()

    def add_cuts(points: np.ndarray) -> None:
        highs.addRows(
            p, -points**2, np.full(p, inf), 2 * p, cut_starts, cut_indices,
            np.column_stack([-2.0 * points, np.ones(p)]).ravel(),
        )

    def add_cut(subset: np.ndarray) -> bool:
        key = np.sort(subset).tobytes()
        if key in cut_keys:
            return False
        cut_keys.add(key)
        add_cuts(directions[subset].sum(axis=0))
        return True

    # Valid inequality sum_j t_j >= sum_i q_i z_i with q_i = S_ii + (sum of the k-1 smallest S_ij, j != i):
    # for binary z, z^T S z = sum_{i in z} (S z)_i >= sum_{i in z} q_i. It keeps the LP relaxation from
    # spreading z fractionally to make v vanish (Gilmore-Lawler style bound).
    q = _lawler_bounds(directions, k)
    highs.addRow(
        0.0, inf, n + p, np.concatenate([np.arange(n, dtype=np.int32), t_cols]), np.concatenate([-q, np.ones(p)])
    )

    # A fixed grid over the range of v_j (|v_j| <= k) so that the first relaxation is bounded sensibly.
    for c in np.linspace(-float(k), float(k), 2 * k + 1):
        add_cuts(np.full(p, c))

    best, best_value = None, np.inf
    for subset in initial_sets:
        subset = np.asarray(subset, dtype=np.int64)
        add_cut(subset)
        value = _objective(directions, distances, subset, theta)
        if value < best_value:
            best, best_value = subset, value

    lower_bound, rounds, status_name = -np.inf, 0, "not run"
    while True:
        remaining = time_limit - (time.perf_counter() - start)
        if remaining <= 0:
            status_name = "time limit"
            break
        highs.setOptionValue("time_limit", float(remaining))
        if best is not None:
            x = np.zeros(n_cols)
            x[best] = 1.0
            v = directions[best].sum(axis=0)
            x[n : n + p] = v
            x[n + p :] = v**2
            highs.setSolution(n_cols, np.arange(n_cols, dtype=np.int32), x)
        highs.run()
        rounds += 1
        status = highs.getModelStatus()
        status_name = highs.modelStatusToString(status)
        info = highs.getInfo()
        if status == highspy.HighsModelStatus.kOptimal or status == highspy.HighsModelStatus.kTimeLimit:
            bound = info.mip_dual_bound
            if np.isfinite(bound):
                lower_bound = max(lower_bound, float(bound))
        else:
            raise SolverError(
                f"HiGHS stopped with status '{status_name}' on the exact QUAD problem ({n} candidates, k={k}); "
                "report this with the input that triggered it."
            )
        solution = np.asarray(highs.getSolution().col_value)
        new = None
        if solution.size == n_cols and int(info.primal_solution_status) == 2:  # feasible
            new = np.flatnonzero(solution[:n] > 0.5)
            if new.size == k:
                value = _objective(directions, distances, new, theta)
                if value < best_value:
                    best, best_value = new, value
            else:
                new = None
        gap = (best_value - lower_bound) / max(abs(best_value), 1e-12)
        if gap <= GAP_RTOL or status != highspy.HighsModelStatus.kOptimal:
            break
        if new is None or not add_cut(new):
            break  # no new cut can tighten the model: the gap left is HiGHS's own tolerance
    gap = max((best_value - lower_bound) / max(abs(best_value), 1e-12), 0.0)
    info_out = {
        "solver": "highs-oa",
        "gap": float(gap),
        "oa_rounds": rounds,
        "n_cuts": len(cut_keys),
        "status": status_name,
        "optimal": bool(gap <= GAP_RTOL),
        "solve_seconds": time.perf_counter() - start,
    }
    if best is None:
        raise SolverError(
            f"HiGHS found no feasible subset within {time_limit:g} s ({n} candidates, k={k}); raise 'time_limit'."
        )
    return np.sort(best), info_out


def solve_subset_qp(
    directions: np.ndarray,
    distances: np.ndarray,
    k: int,
    theta: float,
    *,
    max_enumeration: int = MAX_ENUMERATION,
    time_limit: float = 60.0,
    initial_sets: list[np.ndarray] | None = None,
) -> tuple[np.ndarray, dict]:
    """Solve ``min theta ||sum_{i in z} a_i||^2 + (1 - theta) sum_{i in z} d_i`` over ``|z| = k`` exactly.

    Parameters
    ----------
    directions : ndarray of shape (n, n_features)
        The rows that may be chosen (the screening set ``Z`` or all candidates).
    distances : ndarray of shape (n,)
    k : int
        ``1 <= k <= n``.
    theta : float
        In ``[0, 1]``.
    max_enumeration : int, default=1_000_000
        Enumerate when ``C(n, k) <= max_enumeration``; otherwise use the OA-MILP.
    time_limit : float, default=60.0
        Seconds for the OA-MILP loop; on expiry the incumbent is returned with its gap.
    initial_sets : list of ndarray, optional
        Known feasible subsets (local indices): the best is the first incumbent and each gives a cut.

    Returns
    -------
    subset : ndarray of shape (k,), int64, sorted ascending (local indices)
    info : dict
        ``solver`` ("enumeration" or "highs-oa"), ``gap`` (0 for enumeration), and for the MILP
        ``oa_rounds``, ``n_cuts``, ``status``, ``optimal``.

    Raises
    ------
    SolverError
        If HiGHS fails or finds no feasible subset in time.

    Notes
    -----
    Enumeration scores the ``k``-sets from ``n x n`` pair weights when ``n <= 1024``: about ``2 C(n, 3)``
    table entries for ``k = 3`` and ``k C(n, k)`` for ``k >= 4``, ``k - 1`` additions each, in blocks of at
    most 262,144 entries (``O(C(n, k) k p)`` otherwise). Each OA round is one MILP with ``n`` binaries, ``p + 1``
    continuous variables and ``p + 1`` rows plus one cut per round.

    References
    ----------
    Paper eq. (cosine2) and eq. (cosine-final); ``z^T S z = ||sum_i z_i a_i||^2``.
    """
    n = distances.shape[0]
    if k == n:
        return np.arange(n, dtype=np.int64), {"solver": "trivial", "gap": 0.0}
    if math.comb(n, k) <= max_enumeration:
        return _enumerate(directions, distances, k, theta), {"solver": "enumeration", "gap": 0.0}
    return _oa_milp(directions, distances, k, theta, time_limit=time_limit, initial_sets=list(initial_sets or []))
