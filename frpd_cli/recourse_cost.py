"""What each candidate prototype's recourse would cost, as a proximity term for prototype selection.

The linear scheme turns a prototype ``x`` into the first favourable point of the segment ``x0 -> x``, so the cost
the user pays is the distance from ``x0`` to that point, not the distance to ``x``. The paper's selection
(Section 3, proximity ``dist(x, x0)``) ranks prototypes by the second: a far prototype whose segment crosses the
decision boundary early is cheap for the user but looks expensive to the selection, and the reverse. Passing the
recourse costs computed here as the selection's ``proximity`` (the hook the graph scheme uses for path costs,
:func:`frpd_cli.choice.select_among`) makes the selection trade diversity against what the plan will cost
(``frpd plan --proximity recourse``, :attr:`frpd_cli.choice.PlanSettings.proximity`). Diversity is unchanged: a
recourse lies on its prototype's direction from ``x0``, so the directions, and with them the anti-diversity of the
plan, are those of the prototypes.

The search (:func:`segment_costs`) is the plan's own linear interpolation made lean, since it runs on every
candidate instead of K prototypes: a coarse grid of :data:`COARSE_GRID` points per segment (``t = 1/8, ...,
7/8``), scored in order, one grid point per model call, and only for the segments none of whose earlier points
was favourable (the end point is not scored: a segment with no favourable grid point costs the distance to its end
point, which is also the cost when the end point itself is not favourable), then bisection of the first
favourable bracket, down to :data:`TOLERANCE` of the segment (one level). The grid step
matters more than the bisection: a grid of 4 points misses early crossings that a grid of 16 finds (on SBA without
constraints, plans cost 0.34 instead of 0.31), a grid of 8 with one level finds the plans of a grid of 16 with
bisection to 1/128 (docs/benchmarks.md, *Where we differ from the paper*). Segments of many applicants share every model
call, and identical candidates of one applicant are searched once. A candidate's cost depends only on its own
segment (the model scores rows in fixed-shape blocks, so a row's probability does not depend on the rows it is
scored with): results do not depend on how applicants are grouped into chunks, tasks or workers.

Cost: at most ``COARSE_GRID - 1 + ceil(log2(1 / (COARSE_GRID * TOLERANCE)))`` = 8 scored rows per distinct
candidate (the grid points up to the first favourable one, then one bisection point), in at most 8 model calls per
group of applicants, plus one decode and encode of the recourses.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from .encoding import Encoder
from .exceptions import InputError
from .interpolation import decode_from

__all__ = [
    "PROXIMITIES",
    "COARSE_GRID",
    "TOLERANCE",
    "recourse_costs",
    "segment_costs",
    "with_recourse_costs",
    "find_priced",
]

#: Proximity terms of the selection: ``distance`` (the paper's: Euclidean distance to the prototype) or
#: ``recourse`` (the cost of the recourse the prototype leads to, this module).
PROXIMITIES = ("distance", "recourse")
#: Smallest proximity returned: the selection needs positive values.
MIN_COST = 1e-12
#: Coarse grid points per segment (``t = 1/G, ..., 1``; the end point ``t = 1`` is not scored).
COARSE_GRID = 8
#: Bisection stops when the bracket is at most this fraction of the segment (1/16: one level after the grid).
TOLERANCE = 1.0 / 16
#: At most this many segments are searched together, so at most this many rows per model call (bounds memory when
#: many applicants' candidates are priced together).
MAX_CALL_ROWS = 1 << 15


def segment_costs(encoder: Encoder, model, X0: np.ndarray, XK: np.ndarray, raw0: pd.DataFrame, owner=None, *,
                  tol: float = TOLERANCE, n_grid: int = COARSE_GRID) -> np.ndarray:
    """Euclidean cost of the first favourable point found on each segment ``X0[owner[s]] -> XK[s]``.

    Parameters
    ----------
    encoder : Encoder
        The training set's encoder (the space where costs are measured).
    model : frpd_cli.model.Model
        Judges decoded rows with ``favorable_probability`` and ``threshold``
        (pass a raised-threshold model for a margin).
    X0 : ndarray of shape (n_applicants, n_features_out)
        Encoded applicants.
    XK : ndarray of shape (n_segments, n_features_out)
        Encoded end point (candidate prototype) of each segment.
    raw0 : DataFrame of shape (n_applicants, n_features)
        Raw applicants.
    owner : ndarray of int of shape (n_segments,), optional
        The applicant of each segment (row of ``X0``); default: segment ``s``
        starts at ``X0[s]``.
    tol : float, default=TOLERANCE
        Bisection stops when the bracket is at most this fraction of the segment.
    n_grid : int, default=COARSE_GRID
        Coarse grid points per segment, the end point included (it is not
        scored).

    Returns
    -------
    costs : ndarray of float64, shape (n_segments,)
        ``||encode(recourse_s) - X0[owner[s]]||`` for the favourable point
        found, at least :data:`MIN_COST`; the distance to the end point when
        no point before it is favourable.

    Raises
    ------
    InputError
        Shapes disagree, or ``tol`` / ``n_grid`` are out of range.

    Notes
    -----
    One model call per grid point ``t = g / n_grid`` (``g < n_grid``) with
    one row per segment whose earlier grid points were all unfavourable, then
    one call per bisection level ``ceil(log2(1 / (n_grid * tol)))`` with one
    row per open bracket: at most ``n_grid - 1`` plus that many rows per
    segment. Segments are processed in groups of at most
    :data:`MAX_CALL_ROWS`. A segment's result depends on its own rows only.
    A favourable stretch shorter than a grid step before the first
    favourable grid point can be missed (the cost is then that of a later
    favourable point, still a recourse the plan could make).
    """
    if not 0 < tol < 1:
        raise InputError(f"The 'tol' option must be in (0, 1). Got {tol!r} instead.")
    if isinstance(n_grid, bool) or not isinstance(n_grid, (int, np.integer)) or n_grid < 1:
        raise InputError(f"The 'n_grid' option must be an int >= 1. Got {n_grid!r} instead.")
    X0 = np.atleast_2d(np.asarray(X0, dtype=np.float64))
    XK = np.atleast_2d(np.asarray(XK, dtype=np.float64))
    owner = np.arange(XK.shape[0]) if owner is None else np.asarray(owner, dtype=np.int64)
    if XK.shape[1] != X0.shape[1] or XK.shape[1] != encoder.n_features_out:
        raise InputError(f"The candidates must have {encoder.n_features_out} encoded columns, like the applicants. "
                         f"Got {XK.shape[1]} (candidates) and {X0.shape[1]} (applicants) instead.")
    if owner.shape != (XK.shape[0],) or (owner.size and (owner.min() < 0 or owner.max() >= X0.shape[0])):
        raise InputError(f"Each of the {XK.shape[0]} segments needs the row of its applicant among the "
                         f"{X0.shape[0]} applicants.")
    names = list(encoder.schema.feature_names)
    originals = {name: raw0[name].to_numpy() for name in names}
    costs = np.empty(XK.shape[0], dtype=np.float64)
    step = MAX_CALL_ROWS
    for start in range(0, XK.shape[0], step):
        part = slice(start, start + step)
        costs[part] = _search(encoder, model, X0, XK[part], originals, owner[part], tol, n_grid)
    return costs


def _search(encoder, model, X0, XK, originals, owner, tol, n_grid) -> np.ndarray:
    """:func:`segment_costs` on one group of segments."""
    n = XK.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    start = X0[owner]
    direction = XK - start
    threshold = model.threshold

    def favourable(seg, t):
        rows = _decoded(encoder, start[seg] + t[:, None] * direction[seg], start[seg], originals, owner[seg])
        return np.asarray(model.favorable_probability(rows), dtype=np.float64) >= threshold

    # coarse grid t = 1/G, 2/G, ..., (G-1)/G, one grid point per call and only for the segments whose earlier
    # points were all unfavourable: the first favourable grid point is found without scoring the points after it
    lo, hi = np.zeros(n), np.ones(n)        # hi = 1 stays unverified: the end point is not scored
    verified = np.zeros(n, dtype=bool)
    scanning = np.arange(n)
    for g in range(1, n_grid):
        if scanning.size == 0:
            break
        t = g / n_grid
        ok = favourable(scanning, np.full(scanning.size, t))
        hi[scanning[ok]] = t
        verified[scanning[ok]] = True
        lo[scanning[~ok]] = t
        scanning = scanning[~ok]
    # bisection of the first favourable bracket, one level per call
    for _ in range(max(0, math.ceil(math.log2(1.0 / (n_grid * tol)) - 1e-9)) + 1):
        active = np.flatnonzero(hi - lo > tol)
        if active.size == 0:
            break
        mid = 0.5 * (lo[active] + hi[active])
        ok = favourable(active, mid)
        hi[active[ok]] = mid[ok]
        verified[active[ok]] = True
        lo[active[~ok]] = mid[~ok]
    costs = np.linalg.norm(direction, axis=1)
    at = np.flatnonzero(verified)
    if at.size:
        points = start[at] + hi[at, None] * direction[at]
        recourses = _decoded(encoder, points, start[at], originals, owner[at])
        snapped = encoder.encode(recourses, source="the recourses")
        costs[at] = np.linalg.norm(snapped - start[at], axis=1)
    return np.maximum(costs, MIN_COST)


def _decoded(encoder, Z, X0, originals, owner) -> pd.DataFrame:
    """Raw rows of the points ``Z`` of segments starting at applicants ``owner`` (:func:`decode_from`)."""
    raw = pd.DataFrame({name: values[owner] for name, values in originals.items()})
    return decode_from(encoder, Z, X0, raw)


def recourse_costs(encoder: Encoder, model, x0: np.ndarray, raw0: pd.DataFrame | pd.Series | dict, X: np.ndarray, *,
                   tol: float = TOLERANCE, n_grid: int = COARSE_GRID) -> np.ndarray:
    """Euclidean cost of the linear recourse towards each candidate ``X[j]`` of one applicant.

    Parameters
    ----------
    encoder, model, tol, n_grid :
        As in :func:`segment_costs` (the plan's own interpolation then refines
        the chosen prototypes' recourses).
    x0 : ndarray of shape (n_features_out,)
        The encoded applicant.
    raw0 : DataFrame of one row, Series or dict
        The applicant's raw values.
    X : ndarray of shape (n_candidates, n_features_out)
        Encoded candidate prototypes.

    Returns
    -------
    costs : ndarray of float64, shape (n_candidates,)
        ``||encode(recourse_j) - x0||``, at least :data:`MIN_COST`. A candidate
        whose segment has no favourable point before its end point costs the
        distance to the end point.

    Raises
    ------
    InputError
        Shapes disagree, or ``tol`` / ``n_grid`` are out of range.

    Notes
    -----
    Identical candidates are searched once (:func:`segment_costs`).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from frpd_cli.schema import infer_schema
    >>> from frpd_cli.encoding import fit_encoder
    >>> df = pd.DataFrame({"x": [0.0, 1.0, 2.0, 4.0], "label": [0, 0, 1, 1]})
    >>> enc = fit_encoder(infer_schema(df), df)
    >>> class Step:   # favourable from x >= 2
    ...     threshold = 0.5
    ...     def favorable_probability(self, rows):
    ...         return (np.asarray(rows["x"], dtype=float) >= 2).astype(float)
    >>> c = recourse_costs(enc, Step(), enc.encode(df.iloc[[0]])[0], df.iloc[[0]], enc.encode(df.iloc[[2, 3]]))
    >>> np.round(c, 2).tolist()   # both recourses stop at x = 2, half the range: the far prototype costs no more
    [0.5, 0.5]
    """
    x0 = np.asarray(x0, dtype=np.float64).ravel()
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if X.shape[1] != x0.size:
        raise InputError(f"The candidates must have {x0.size} encoded columns, like the applicant. "
                         f"Got {X.shape[1]} instead.")
    if X.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if isinstance(raw0, pd.Series):
        raw0 = raw0.to_frame().T
    elif isinstance(raw0, dict):
        raw0 = pd.DataFrame([raw0])
    unique, inverse = _distinct(X)
    costs = segment_costs(encoder, model, x0[None, :], unique, raw0.reset_index(drop=True),
                          np.zeros(unique.shape[0], dtype=np.int64), tol=tol, n_grid=n_grid)
    return costs[inverse]


def with_recourse_costs(training, model, X0: np.ndarray, raw0: pd.DataFrame, found: list, *,
                        tol: float = TOLERANCE, n_grid: int = COARSE_GRID) -> list:
    """Candidates of many applicants with their recourse costs as the proximity term.

    Parameters
    ----------
    training : TrainingSet
    model : frpd_cli.model.Model
        Judges at the threshold recourses must reach (a raised-threshold model
        for a margin).
    X0 : ndarray of shape (n_applicants, n_features_out)
        Encoded applicants.
    raw0 : DataFrame of shape (n_applicants, n_features)
        Raw applicants.
    found : list of frpd_cli.candidates.Candidates or None
        Each applicant's candidates (:meth:`CandidateStage.find`); None for
        applicants without (already favourable).

    Returns
    -------
    found : list of Candidates or None
        The same, each applicant with enough candidates carrying
        ``proximity`` = the cost of the linear recourse towards each candidate
        (:func:`segment_costs`); the others unchanged.

    Notes
    -----
    The segments of consecutive applicants share each model call (groups of
    applicants whose grid holds about :data:`MAX_CALL_ROWS` rows, which bounds
    memory); identical candidates of one applicant are searched once. An
    applicant's costs do not depend on the others.
    """
    out = list(found)
    raw0 = raw0.reset_index(drop=True)
    budget = MAX_CALL_ROWS
    group, size = [], 0
    for i, f in enumerate(found):
        if f is None or f.reason is not None or not len(f):
            continue
        unique, inverse = _distinct(training.X[f.rows] if f.X is None else f.X)
        group.append((i, unique, inverse))
        size += unique.shape[0]
        if size >= budget:
            _price(training.encoder, model, X0, raw0, group, out, tol, n_grid)
            group, size = [], 0
    _price(training.encoder, model, X0, raw0, group, out, tol, n_grid)
    return out


def find_priced(stage, model, X0: np.ndarray, codes0, raw0: pd.DataFrame, raw_rows: list, applicants) -> dict:
    """The candidates of some applicants (:meth:`CandidateStage.find`) priced by :func:`with_recourse_costs`.

    Parameters
    ----------
    stage : frpd_cli.candidates.CandidateStage
    model : frpd_cli.model.Model
        Judges at the threshold recourses must reach.
    X0 : ndarray of shape (n_applicants, n_features_out)
        Encoded applicants.
    codes0 : ConstraintCodes
        Their constraint codes.
    raw0 : DataFrame of shape (n_applicants, n_features)
        Raw applicants.
    raw_rows : list of dict
        The same, one dict per applicant.
    applicants : list of int
        The applicants (rows of ``X0``) to find and price.

    Returns
    -------
    found : dict of int to Candidates
        Keyed by applicant.
    """
    found = [None] * len(raw_rows)
    for i, candidates in stage.find_many(X0, codes0, raw_rows, applicants).items():
        found[i] = candidates
    priced = with_recourse_costs(stage.training, model, X0, raw0, found)
    return {i: priced[i] for i in applicants}


def _price(encoder, model, X0, raw0, group, out, tol, n_grid) -> None:
    """Set ``out[i]``'s proximity for the applicants ``(i, distinct candidates, inverse)`` of ``group``."""
    if not group:
        return
    owner = np.concatenate([np.full(unique.shape[0], i, dtype=np.int64) for i, unique, _ in group])
    costs = segment_costs(encoder, model, X0, np.vstack([unique for _, unique, _ in group]), raw0, owner, tol=tol,
                          n_grid=n_grid)
    offset = 0
    for i, unique, inverse in group:
        out[i] = replace(out[i], proximity=costs[offset:offset + unique.shape[0]][inverse])
        offset += unique.shape[0]


def _distinct(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``X`` (by their bytes, in order of first appearance) and each row's position among them."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    keys = X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return X[first[order]], rank[inverse.ravel()]
