"""Interpolation schemes: from the applicant towards each prototype (paper section 4).

Linear: the first favourable point on the segment from the applicant to a
prototype. The segment is walked in the encoded space with one-hot blocks
relaxed; every point is judged by the model's own prediction on the *decoded*
raw row (argmax categories, integers rounded, values clipped to the training
range). The returned recourse is the decoded row that was checked, so it is
valid by construction.

Graph (sequential recourse, paper appendix "Sequential Recourse"): the
applicant is attached to the actionability graph (:mod:`frpd_cli.graph`),
Dijkstra gives the shortest path to every training row, and each recourse is
the shortest path to its prototype, optionally cut at the first node the model
predicts favourable. Every move of the path is an edge of the graph, so it is
actionable; the end point is a training row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .encoding import Encoder
from .exceptions import InputError
from .model import score_columns

__all__ = [
    "LinearResult",
    "interpolate_linear",
    "decode_from",
    "keep_rules",
    "ENDPOINTS",
    "GraphReach",
    "GraphRecourse",
    "reach_from",
    "graph_path",
    "interpolate_graph",
    "same_value",
]

#: Where a graph recourse ends: at the prototype, or at the first node of the
#: shortest path to it that the model predicts favourable.
ENDPOINTS = ("prototype", "first-favorable")


@dataclass(frozen=True)
class LinearResult:
    """Recourses found on a batch of segments.

    Attributes
    ----------
    rows : DataFrame of shape (n_segments, n_features)
        The decoded recourse of each segment (raw values).
    t : ndarray of shape (n_segments,)
        Position of the recourse on its segment (0 = applicant, 1 = prototype).
    probability : ndarray of shape (n_segments,)
        The model's favourable probability of each recourse.
    n_model_calls : int
        Number of batched model calls made (grid round plus bisection calls, two steps each).
    found : ndarray of bool, shape (n_segments,)
        False where not even the end point is favourable (its row is then the
        end point, not a recourse).
    """

    rows: pd.DataFrame
    t: np.ndarray
    probability: np.ndarray
    n_model_calls: int
    found: np.ndarray | None = None


def decode_from(encoder: Encoder, Z: np.ndarray, X0: np.ndarray, raw0: pd.DataFrame) -> pd.DataFrame:
    """Decode points of segments that start at applicants, keeping what did not move.

    A feature whose encoded block is still the applicant's keeps the
    applicant's raw value exactly (decoding would otherwise round or clip it to
    the training data's precision and range). Increasing features never decode
    below the applicant's value and decreasing ones never above it, and numeric
    features with a ``--range`` never outside it.

    Parameters
    ----------
    encoder : Encoder
    Z : ndarray of shape (n, n_features_out)
        Points to decode.
    X0 : ndarray of shape (n, n_features_out)
        Encoded applicant of each point's segment.
    raw0 : DataFrame of shape (n, n_features)
        Raw applicant of each point's segment.
    """
    names = encoder.schema.feature_names
    return pd.DataFrame(_decoded_columns(encoder, Z, X0, {name: raw0[name].to_numpy() for name in names}))


def _decoded_columns(encoder: Encoder, Z: np.ndarray, X0: np.ndarray, original: dict) -> dict:
    """:func:`decode_from` as one array per feature, the applicants' raw values given as arrays (``original``).

    The values and dtypes of ``decode_from``'s columns; interpolation keeps these arrays between model calls
    instead of indexing a frame per call.
    """
    decoded = encoder.decode_columns(Z)
    close = np.abs(Z - X0) <= 1e-12         # once for every column, then cut into the features' blocks
    columns = {}
    for j, f in enumerate(encoder.schema.features):
        start, stop = int(encoder.offsets[j]), int(encoder.offsets[j + 1])
        unchanged = np.logical_and.reduce(close[:, start:stop], axis=1)
        column = decoded[f.name]
        raw = original[f.name]
        if f.is_numeric:
            column = keep_rules(f, column, raw)
        if unchanged.any():
            column = column.astype(np.result_type(column.dtype, raw.dtype)) if f.is_numeric else column
            column[unchanged] = raw[unchanged]
        columns[f.name] = column
    return columns


def keep_rules(f, column: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Decoded values ``column`` of numeric feature ``f`` held to its rules against the applicants' ``raw`` values.

    An increasing feature never goes below the applicant's value and a decreasing one never above it; with a
    ``--range``, a value never leaves it (integer features: its whole numbers; limits relative to the applicant
    are taken from ``raw``).
    """
    if f.mutability in ("increasing", "decreasing"):
        column = column.astype(np.result_type(column.dtype, raw.dtype))
        column = np.maximum(column, raw) if f.mutability == "increasing" else np.minimum(column, raw)
    if f.has_range:
        low, high = f.bounds(np.asarray(raw, dtype=np.float64) if f.is_relative else None)
        low, high = np.broadcast_to(low, column.shape), np.broadcast_to(high, column.shape)
        empty = low > high          # no whole number inside: only the applicant's own value is allowed
        kind = np.result_type(column.dtype, np.asarray(raw).dtype)
        clipped = np.clip(column, np.where(empty, -np.inf, low), np.where(empty, np.inf, high)).astype(column.dtype)
        column = np.where(empty, np.asarray(raw, dtype=kind), clipped.astype(kind)) if empty.any() else clipped
    return column


def interpolate_linear(
    encoder: Encoder,
    model,
    X0: np.ndarray,
    XK: np.ndarray,
    raw0: pd.DataFrame,
    *,
    tol: float = 1e-3,
    n_grid: int = 16,
) -> LinearResult:
    """Find the first favourable point on each segment ``X0[i] -> XK[i]``.

    Parameters
    ----------
    encoder : Encoder
    model : frpd_cli.model.Model
        Judges decoded rows with ``favorable_probability`` and ``threshold``.
    X0 : ndarray of shape (n_segments, n_features_out)
        Encoded applicant of each segment.
    XK : ndarray of shape (n_segments, n_features_out)
        Encoded prototype (end point) of each segment; must decode to a row the
        model predicts favourable.
    raw0 : DataFrame of shape (n_segments, n_features)
        Raw applicant of each segment.
    tol : float, default=1e-3
        Bisection stops when the bracket is shorter than ``tol`` (a fraction of
        the segment).
    n_grid : int, default=16
        Points of the coarse grid, which locates the first favourable grid
        point before bisection.

    Returns
    -------
    result : LinearResult

    Raises
    ------
    InputError
        ``tol`` or ``n_grid`` out of range. A segment whose end point is not
        favourable is reported through ``found``, not raised.

    Notes
    -----
    All segments share each model call: one call of ``n_segments * n_grid``
    rows, then ``ceil(r / 2)`` calls of at most ``3 * n_segments`` rows for the
    ``r = ceil(log2(1 / (n_grid * tol)))`` bisection steps (each call scores
    two levels of the bisection tree; the steps taken are those of plain
    bisection).
    A favourable stretch shorter than a grid step before the first favourable
    grid point can be missed; the point returned is then still favourable.
    A closed bracket that still spans more than ``2 * tol`` of some numeric
    feature's training range in raw units (a gap in the effort scale's
    training values) is bisected further, at most :data:`RAW_ROUNDS` times
    (:func:`raw_excess`); those calls score only such brackets.

    References
    ----------
    Nguyen, Bui, Nguyen (2023), section 4, linear interpolation scheme.
    """
    if not 0 < tol < 1:
        raise InputError(f"The 'tol' option must be in (0, 1). Got {tol!r} instead.")
    if n_grid < 1:
        raise InputError(f"The 'n_grid' option must be an int >= 1. Got {n_grid!r} instead.")
    X0 = np.asarray(X0, dtype=np.float64)
    XK = np.asarray(XK, dtype=np.float64)
    n = X0.shape[0]
    raw0 = raw0.reset_index(drop=True)
    if n == 0:
        return LinearResult(rows=encoder.decode(np.zeros((0, encoder.n_features_out))), t=np.zeros(0),
                            probability=np.zeros(0), n_model_calls=0, found=np.zeros(0, dtype=bool))
    direction = XK - X0

    # Coarse grid: t = 1/G, 2/G, ..., 1 for every segment in one call.
    grid = np.arange(1, n_grid + 1, dtype=np.float64) / n_grid
    Z = (X0[:, None, :] + grid[None, :, None] * direction[:, None, :]).reshape(n * n_grid, -1)
    rep = np.repeat(np.arange(n), n_grid)
    original = {name: raw0[name].to_numpy() for name in encoder.schema.feature_names}
    rows = _decoded_columns(encoder, Z, X0[rep], {c: v[rep] for c, v in original.items()})
    prob = score_columns(model, rows).reshape(n, n_grid)
    good = prob >= model.threshold
    found = good.any(axis=1)
    first = np.where(found, np.argmax(good, axis=1), n_grid - 1)
    hi = grid[first]
    lo = np.where(first > 0, grid[np.maximum(first - 1, 0)], 0.0)
    lo[~found] = hi[~found]  # nothing to bisect where no grid point is favourable
    pick = np.arange(n) * n_grid + first
    best = {c: values[pick].copy() for c, values in rows.items()}
    best_prob = prob[np.arange(n), first]
    calls = 1

    # Bisection on every bracket longer than tol. Each model call scores the next two levels of every open
    # bracket's bisection tree (its midpoint, and the midpoints of both halves when the half would still be
    # longer than tol), then two bisection steps are replayed on those scores: the points tried and the
    # decisions are exactly those of one midpoint per call (a row's probability does not depend on its batch),
    # with half the calls.
    def score(seg, t):
        Z = X0[seg] + t[:, None] * direction[seg]
        scored = _decoded_columns(encoder, Z, X0[seg], {c: v[seg] for c, v in original.items()})
        return scored, score_columns(model, scored)

    def step(seg, mid, at, scored, sprob):
        ok = sprob[at] >= model.threshold
        hi[seg[ok]] = mid[ok]
        lo[seg[~ok]] = mid[~ok]
        if ok.any():
            for c in best:
                best[c][seg[ok]] = scored[c][at[ok]]
            best_prob[seg[ok]] = sprob[at[ok]]
        return ok

    def bisect_twice(active):
        lo_a, hi_a, tol_a = lo[active], hi[active], tols[active]
        mid = 0.5 * (lo_a + hi_a)
        left = mid - lo_a > tol_a          # the bracket after a favourable midpoint is [lo, mid]
        right = hi_a - mid > tol_a         # after an unfavourable one, [mid, hi]
        mid_left = 0.5 * (lo_a + mid)
        mid_right = 0.5 * (mid + hi_a)
        n_left, n_right = int(left.sum()), int(right.sum())
        seg = np.concatenate([active, active[left], active[right]])
        scored, sprob = score(seg, np.concatenate([mid, mid_left[left], mid_right[right]]))
        at_left = np.full(active.size, -1, dtype=np.int64)
        at_left[left] = active.size + np.arange(n_left)
        at_right = np.full(active.size, -1, dtype=np.int64)
        at_right[right] = active.size + n_left + np.arange(n_right)
        ok = step(active, mid, np.arange(active.size), scored, sprob)
        # second step where the new bracket is still longer than tol: its midpoint was scored above
        second = np.where(ok, left, right)
        if second.any():
            chosen = np.where(ok, mid_left, mid_right)[second]
            step(active[second], chosen, np.where(ok, at_left, at_right)[second], scored, sprob)

    def ends(rows):
        below = _decoded_columns(encoder, X0[rows] + lo[rows, None] * direction[rows], X0[rows],
                                 {c: v[rows] for c, v in original.items()})
        return below, {c: v[rows] for c, v in best.items()}

    # A bracket shorter than tol can still span a wide stretch of a feature's raw values where the training
    # values are sparse (the effort scale's gaps: a bracket between the last ordinary income and a few outliers),
    # so closed brackets are checked in raw units and bisected further where they are too wide (tols).
    refine = RawRefinement(encoder, tol, n, ends, np.flatnonzero(found))
    tols = refine.tols
    while True:
        active = np.flatnonzero(hi - lo > tols)
        if active.size == 0:
            if refine.again(lo, hi):
                continue
            break
        bisect_twice(active)
        calls += 1
    # Each column holds values of one type (its feature's levels or numbers, and the applicants' own values), so
    # pandas gives the chosen rows the dtype it would give the whole grid.
    best_rows = pd.DataFrame(best)
    return LinearResult(rows=best_rows, t=hi, probability=best_prob, n_model_calls=calls, found=found)


#: Rounds of further bisection on brackets too wide in raw units (each shrinks them to the width asked for where
#: the decoded values are linear in t, as they are inside one gap of the effort scale's knots).
RAW_ROUNDS = 4
#: The shortest bracket the raw refinement asks for (a fraction of the segment).
_TOL_FLOOR = 1e-12


def raw_excess(encoder: Encoder, low: dict, high: dict, tol: float) -> np.ndarray:
    """How many times too wide, in raw units, each bracket between the decoded rows ``low`` and ``high`` is.

    A bracket of a search on a segment is closed when it is shorter than ``tol`` (a fraction of the segment);
    under the minmax scale that bounds every numeric feature's raw width by ``tol`` times its training range
    (max minus min). Under the effort scale a stretch of the range holding few training values (a gap between
    the last ordinary incomes and a few outliers) is short in the encoded space and long in raw units: a bracket
    closed there may still span a million. This is the largest, over the numeric features, of the raw width over
    twice ``tol`` times the training range (1 and above: the bracket is bisected further; the factor two keeps
    the minmax scale's brackets, and the effort scale's over evenly spread values, as they were).

    Parameters
    ----------
    encoder : Encoder
    low, high : dict of str to ndarray, or DataFrame
        Decoded rows at both ends of each bracket (:func:`_decoded_columns`), by feature.
    tol : float

    Returns
    -------
    ratio : ndarray of float64, shape (n_brackets,)
    """
    ratio = np.zeros(len(low[encoder.schema.feature_names[0]]))
    for j, f in enumerate(encoder.schema.features):
        if not f.is_numeric:
            continue
        span = float(encoder.maximum[j] - encoder.minimum[j])
        if not span > 0:
            continue
        width = np.abs(np.asarray(high[f.name], dtype=np.float64) - np.asarray(low[f.name], dtype=np.float64))
        if f.kind == "integer":
            width = np.where(width <= 1.0, 0.0, width)     # neighbouring whole numbers: as fine as it gets
        ratio = np.maximum(ratio, width / (2.0 * tol * span))
    return ratio


class RawRefinement:
    """The tolerance of each bracket of a search on segments, narrowed where a closed bracket is too wide in raw
    units (:func:`raw_excess`), round after round (at most :data:`RAW_ROUNDS`).

    ``tols`` starts at ``tol`` for each of ``n`` brackets; when a search has closed every bracket (``hi - lo <=
    tols``), :meth:`again` narrows the ``tols`` of those still too wide, to the width that makes them fine where
    the decoded values are linear in t, and says whether the search must go on. Each round checks only the
    brackets narrowed in the round before. ``ends(rows)`` gives the decoded rows at ``lo`` and ``hi`` of the
    brackets ``rows``.
    """

    def __init__(self, encoder: Encoder, tol: float, n: int, ends, rows: np.ndarray | None = None):
        self.encoder, self.tol, self.ends = encoder, tol, ends
        self.tols = np.full(n, tol)
        self._check = np.arange(n) if rows is None else rows
        self._rounds = 0

    def again(self, lo: np.ndarray, hi: np.ndarray) -> bool:
        if self._rounds == RAW_ROUNDS:
            return False
        self._rounds += 1
        rows = self._check[hi[self._check] > lo[self._check]]
        if rows.size:
            ratio = raw_excess(self.encoder, *self.ends(rows), self.tol)
            rows, ratio = rows[ratio > 1], ratio[ratio > 1]
            self.tols[rows] = np.maximum((hi[rows] - lo[rows]) / (2.0 * ratio), _TOL_FLOOR)
        self._check = rows
        return rows.size > 0


# --------------------------------------------------------------------------
# graph scheme
# --------------------------------------------------------------------------


def same_value(a, b) -> bool:
    """Whether two raw feature values are the same (numbers by value: ``34 == 34.0``)."""
    if isinstance(a, (int, float, np.integer, np.floating)) and isinstance(b, (int, float, np.integer, np.floating)):
        return float(a) == float(b)
    return a == b


@dataclass(frozen=True, eq=False)
class GraphReach:
    """Shortest paths from one applicant over the actionability graph.

    Attributes
    ----------
    neighbors, weights : ndarray of shape (n_out,)
        The applicant's out-edges (:func:`frpd_cli.graph.attach_source`).
    dist : ndarray of float64, shape (n_nodes,)
        Shortest path cost from the applicant (``inf``: unreachable, or beyond
        ``max_cost``).
    predecessor : ndarray of int64, shape (n_nodes,)
        As returned by :func:`frpd_cli.graph.shortest_paths` (``-1``: reached
        straight from the applicant when ``dist`` is finite).
    hops : ndarray of int64, shape (n_nodes,)
        Moves on the shortest path to each node (``-1`` when unreachable).
    """

    neighbors: np.ndarray
    weights: np.ndarray
    dist: np.ndarray
    predecessor: np.ndarray
    hops: np.ndarray

    @property
    def n_reached(self) -> int:
        """Number of training rows with a finite path cost."""
        return int(np.isfinite(self.dist).sum())


def _hop_counts(dist: np.ndarray, predecessor: np.ndarray) -> np.ndarray:
    """Edges on each node's shortest path, by pointer doubling over the predecessor tree.

    ``O(N log depth)``: after round ``r`` every node knows its ancestor ``2^r``
    moves up and the number of moves to it.
    """
    reached = np.isfinite(dist)
    hops = np.where(reached, 1, -1).astype(np.int64)
    up = np.where(reached, predecessor, -1).astype(np.int64)
    active = np.flatnonzero(up >= 0)
    while active.size:
        parent = up[active]
        hops[active] = hops[active] + hops[parent]
        up[active] = up[parent]
        active = active[up[active] >= 0]
    return hops


def reach_from(graph, X: np.ndarray, codes, x0: np.ndarray, codes0, *, max_cost: float | None = None) -> GraphReach:
    """Attach an applicant to the graph and run Dijkstra from it.

    Parameters
    ----------
    graph : frpd_cli.graph.Graph
        Built from ``X`` and ``codes``; not modified.
    X : ndarray of shape (n_nodes, n_features_out)
        Encoded training rows.
    codes : ConstraintCodes
        Their constraint codes.
    x0 : ndarray of shape (n_features_out,)
        The encoded applicant.
    codes0 : ConstraintCodes
        The applicant's codes (one row).
    max_cost : float or None
        Stop Dijkstra beyond this path cost.

    Returns
    -------
    reach : GraphReach

    Notes
    -----
    ``O(N p)`` to attach (brute force over the rows) plus ``O((N + E) log N)``
    for Dijkstra; the hop counts add ``O(N log depth)``.
    """
    from .graph import attach_source, shortest_paths  # the graph module only where a graph is used

    neighbors, weights = attach_source(graph, X, codes, x0, codes0)
    limit = np.inf if max_cost is None else float(max_cost)
    dist, predecessor = shortest_paths(graph, neighbors, weights, limit=limit)
    return GraphReach(neighbors, weights, dist, predecessor, _hop_counts(dist, predecessor))


def graph_path(reach: GraphReach, row: int, *, endpoint: str = "prototype", favorable=None) -> list[int]:
    """Nodes of the recourse path towards the prototype ``row`` (after the applicant).

    Parameters
    ----------
    reach : GraphReach
    row : int
        A node with a finite path cost.
    endpoint : {"prototype", "first-favorable"}
        ``"first-favorable"`` cuts the path at its first node in ``favorable``.
    favorable : ndarray of bool, shape (n_nodes,)
        Nodes the model predicts favourable (needed for ``"first-favorable"``).

    Returns
    -------
    path : list of int
    """
    if endpoint not in ENDPOINTS:
        raise InputError(f"The 'endpoint' option must be one of {', '.join(ENDPOINTS)}. Got {endpoint!r} instead.")
    if not np.isfinite(reach.dist[row]):
        raise InputError(f"Training row {row} is not reachable from the applicant; it cannot end a path.")
    from .graph import extract_path

    path = extract_path(reach.predecessor, int(row))
    if endpoint == "first-favorable":
        if favorable is None:
            raise InputError("endpoint='first-favorable' needs the 'favorable' flags of the nodes.")
        for j, node in enumerate(path):
            if favorable[node]:
                return path[: j + 1]
    return path


@dataclass(frozen=True)
class GraphRecourse:
    """One sequential recourse: the path, its cost and the raw values along it.

    Attributes
    ----------
    prototype : int
        Training row the path was aimed at.
    path : list of int
        Training rows visited after leaving the applicant; ``path[-1]`` is the end point.
    cost : float
        Path cost: the sum of the edge weights from the applicant.
    features : dict
        Raw values of the end point (the applicant's own value where it is the same).
    changes : dict
        ``{feature: (applicant's value, end value)}`` for the features that differ.
    steps : list of dict
        Per move, ``{feature: (old, new)}`` for the features the move changes
        (empty for a move between identical rows).
    """

    prototype: int
    path: list
    cost: float
    features: dict
    changes: dict
    steps: list


def interpolate_graph(reach: GraphReach, rows, columns: dict, raw0: dict, *, endpoint: str = "prototype",
                      favorable=None) -> list[GraphRecourse]:
    """Sequential recourses from one applicant to each prototype in ``rows``.

    Parameters
    ----------
    reach : GraphReach
        Shortest paths from the applicant (:func:`reach_from`).
    rows : sequence of int
        Prototype rows (reachable).
    columns : dict of str to list
        Raw training values per feature (``frame[name].tolist()``), in schema order.
    raw0 : dict
        The applicant's raw values.
    endpoint : {"prototype", "first-favorable"}
    favorable : ndarray of bool, shape (n_nodes,)
        Nodes the model predicts favourable.

    Returns
    -------
    recourses : list of GraphRecourse
        One per prototype, in the order of ``rows`` (end points may repeat).

    References
    ----------
    Nguyen, Bui, Nguyen (2023), section 4 (graph interpolation) and the
    appendix "Sequential Recourse".
    """
    names = list(columns)
    out = []
    for row in rows:
        path = graph_path(reach, int(row), endpoint=endpoint, favorable=favorable)
        steps, previous = [], raw0
        for node in path:
            current = {n: columns[n][node] for n in names}
            steps.append({n: (previous[n], current[n]) for n in names if not same_value(previous[n], current[n])})
            previous = current
        end = path[-1]
        features = {n: raw0[n] if same_value(raw0[n], columns[n][end]) else columns[n][end] for n in names}
        changes = {n: (raw0[n], features[n]) for n in names if not same_value(raw0[n], features[n])}
        out.append(GraphRecourse(int(row), path, float(reach.dist[end]), features, changes, steps))
    return out
