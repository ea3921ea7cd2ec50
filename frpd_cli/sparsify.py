"""Sparse recourses: keep only the feature changes the model needs.

Linear interpolation (:func:`frpd_cli.interpolation.interpolate_linear`) moves
every feature in which the prototype differs from the applicant, so a recourse
often changes most features although a few would do. :func:`sparsify_recourses`
starts from those recourses and returns whole features (a categorical's one-hot
block together) to the applicant's own value, keeping a recourse only where the
model still gives it a probability of at least ``model.threshold`` (the
threshold plus any margin), without raising its cost.

The search, for each recourse (all recourses of a batch share each model call,
one call per round; a recourse's result depends on it alone):

1. **Order.** Each changed feature ``j`` of the plain recourse ``r`` is ranked
   by ``(p(r) - p(r with j reverted)) / c_j**2``: the probability it buys per
   unit of squared cost ``c_j**2`` (its share of ``||r - x0||**2`` in the
   encoded space), smallest first, ties by feature order. For a score that is
   locally linear, dropping a feature and stretching the others along their
   own directions keeps the cost within the plain recourse's exactly when this
   ratio is small against the rest, so the features most likely to be dropped
   are tried first. One model call scores every single revert.
2. **Greedy removal.** Features are tried in that order, one per round: the
   candidate support ``S - {j}`` is judged at its *budget point*, the farthest
   point ``x0 + D_cat + t * D_num`` (categoricals in the support take the
   prototype's category, numeric ones move the fraction ``t <= 1`` of the way
   to the prototype) whose decoded row costs no more than the plain recourse.
   The removal is kept when the model accepts that point.
3. **Closest point.** Where a feature was removed, bisection on ``t`` finds
   the first accepted point of the reduced direction (the decoded cost never
   decreases with ``t``, so it stays within the budget).
4. **Revert pass.** Every feature still changed is reverted alone, in the same
   order, when the model still accepts the row without it.

Reverting a feature to the applicant's value, or moving it towards a
prototype that obeys the constraints, never breaks an immutable, monotone,
integer or vocabulary rule; every returned row is the decoded row the model
scored. A sparse recourse never costs more and never changes more features
than the plain one: where the search cannot do better, the plain recourse is
returned unchanged.

When two prototypes of one applicant end at the same sparse recourse, the
caller (:func:`frpd_cli.planning.interpolate_plans`) looks for another one
that changes other features, or keeps the plain recourse, so plans stay full.

``max_changes``: a recourse still changing more than ``max_changes`` features
is searched again without the cost budget (numeric features may go up to the
prototype's values, so it may then cost more than the plain recourse, never
change more features), stopping as soon as it is short enough; if it is still
too long it is flagged (``kept`` is False) for the caller to drop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .encoding import Encoder
from .exceptions import InputError
from .interpolation import decode_from

__all__ = ["SparseResult", "sparsify_recourses", "changed_features"]

_EPS = 1e-12


@dataclass(frozen=True)
class SparseResult:
    """Sparse recourses of a batch of segments.

    Attributes
    ----------
    rows : DataFrame of shape (n_segments, n_features)
        The raw recourse of each segment (the plain one where it was kept).
    probability : ndarray of shape (n_segments,)
        The model's favourable probability of each row.
    n_changes : ndarray of int, shape (n_segments,)
        Features each row changes.
    kept : ndarray of bool, shape (n_segments,)
        False where ``max_changes`` could not be met (or the segment had no
        recourse to begin with).
    n_model_calls : int
        Batched model calls made.
    """

    rows: pd.DataFrame
    probability: np.ndarray
    n_changes: np.ndarray
    kept: np.ndarray
    n_model_calls: int


def changed_features(encoder: Encoder, Z: np.ndarray, X0: np.ndarray) -> np.ndarray:
    """Which whole features of encoded rows ``Z`` differ from their applicants ``X0``.

    Returns
    -------
    changed : ndarray of bool, shape (n_rows, n_features)
    """
    return _block_sq(encoder, Z - X0) > _EPS * _EPS


def _block_sq(encoder: Encoder, diff: np.ndarray) -> np.ndarray:
    """Squared norm of each feature block of ``diff``: shape (n_rows, n_features)."""
    if diff.shape[0] == 0:
        return np.zeros((0, len(encoder.offsets) - 1))
    return np.add.reduceat(diff * diff, encoder.offsets[:-1].astype(np.int64), axis=1)


class _Rows:
    """Column arrays of raw rows, updated in place segment by segment."""

    def __init__(self, frame: pd.DataFrame):
        self.names = list(frame.columns)
        self.dtypes = {c: frame[c].dtype for c in self.names}
        self.cols = {c: frame[c].to_numpy(copy=True) for c in self.names}

    def put(self, where: np.ndarray, frame: pd.DataFrame, take: np.ndarray | None = None) -> None:
        """Rows ``take`` of ``frame`` (all of them by default) become rows ``where``."""
        if len(where) == 0:
            return
        for c in self.names:
            new = frame[c].to_numpy()
            new = new if take is None else new[take]
            if self.cols[c].dtype != new.dtype:
                kind = np.result_type(self.cols[c].dtype, new.dtype)
                self.cols[c] = self.cols[c].astype(kind)
            self.cols[c][where] = new

    def frame(self, where=None) -> pd.DataFrame:
        if where is None:
            return pd.DataFrame({c: pd.Series(v, dtype=v.dtype) for c, v in self.cols.items()})
        return pd.DataFrame({c: pd.Series(v[where], dtype=v.dtype) for c, v in self.cols.items()})


def _reverted(rows: pd.DataFrame, raw0: pd.DataFrame, segs: np.ndarray, feats: np.ndarray,
              names: list) -> pd.DataFrame:
    """Rows ``rows[segs]`` with feature ``feats[i]`` set back to the applicant's value ``raw0[segs][...]``."""
    out = rows.iloc[segs].reset_index(drop=True)
    base = raw0.iloc[segs].reset_index(drop=True)
    for j in np.unique(feats):
        name = names[j]
        mask = feats == j
        column = out[name].to_numpy(copy=True)
        original = base[name].to_numpy()
        if column.dtype != original.dtype:
            column = column.astype(np.result_type(column.dtype, original.dtype)) if (
                column.dtype.kind in "iufb" and original.dtype.kind in "iufb") else column.astype(object)
        column[mask] = original[mask]
        out[name] = column
    return out


def sparsify_recourses(
    encoder: Encoder,
    model,
    X0: np.ndarray,
    XK: np.ndarray,
    raw0: pd.DataFrame,
    rows: pd.DataFrame,
    probability: np.ndarray,
    *,
    found: np.ndarray | None = None,
    max_changes: int | None = None,
    tol: float = 1e-3,
) -> SparseResult:
    """Sparsify the recourses found on segments ``X0[i] -> XK[i]``.

    Parameters
    ----------
    encoder : Encoder
    model : frpd_cli.model.Model
        Judges rows with ``favorable_probability``; a row is accepted when its
        probability is ``>= model.threshold`` (pass a model whose threshold
        includes the margin).
    X0 : ndarray of shape (n_segments, n_features_out)
        Encoded applicant of each segment.
    XK : ndarray of shape (n_segments, n_features_out)
        Encoded prototype of each segment.
    raw0 : DataFrame of shape (n_segments, n_features)
        Raw applicant of each segment.
    rows : DataFrame of shape (n_segments, n_features)
        The plain recourse of each segment (decoded, accepted by the model).
    probability : ndarray of shape (n_segments,)
        The model's probability of each plain recourse.
    found : ndarray of bool, shape (n_segments,), optional
        Segments that have a recourse; the others are returned as they are,
        with ``kept`` False.
    max_changes : int, optional
        Recourses changing more features are searched again without the cost
        budget and flagged when they still do.
    tol : float, default=1e-3
        Bisection tolerance, as a fraction of the segment.

    Returns
    -------
    result : SparseResult

    Notes
    -----
    Model calls: one for the orders, one per greedy round (the largest number
    of changed features), about ``log2(1 / tol)`` for the bisection and one per
    revert round; each call scores at most one row per segment (the order call:
    one per changed feature). Python work is ``O(n_segments)`` per round.
    """
    if max_changes is not None and (isinstance(max_changes, bool) or int(max_changes) != max_changes
                                    or max_changes < 1):
        raise InputError(f"The 'max_changes' option must be an int >= 1. Got {max_changes!r} instead.")
    X0 = np.asarray(X0, dtype=np.float64)
    XK = np.asarray(XK, dtype=np.float64)
    n = X0.shape[0]
    raw0 = raw0.reset_index(drop=True)
    rows = rows.reset_index(drop=True)
    probability = np.asarray(probability, dtype=np.float64).copy()
    found = np.ones(n, dtype=bool) if found is None else np.asarray(found, dtype=bool)
    search = _Search(encoder, model, X0, XK, raw0, rows, probability, found, tol)
    if n:
        search.run(max_changes)
    kept = found.copy()
    if max_changes is not None:
        kept &= search.n_changes <= max_changes
    return SparseResult(rows=search.best.frame(), probability=search.prob, n_changes=search.n_changes,
                        kept=kept, n_model_calls=search.calls)


class _Search:
    """The state of one sparsification batch (see :func:`sparsify_recourses`)."""

    def __init__(self, encoder, model, X0, XK, raw0, rows, probability, found, tol):
        self.encoder, self.model, self.tol = encoder, model, tol
        self.X0, self.raw0 = X0, raw0
        self.D = XK - X0
        self.names = list(encoder.schema.feature_names)
        n_feat = len(self.names)
        offsets = encoder.offsets.astype(np.int64)
        self.F = np.zeros((n_feat, encoder.n_features_out), dtype=bool)
        for j in range(n_feat):
            self.F[j, offsets[j]:offsets[j + 1]] = True
        self.is_cat = np.array([f.is_categorical for f in encoder.schema.features], dtype=bool)
        self.best = _Rows(rows)
        self.prob = probability
        self.found = found
        self.calls = 0
        n = X0.shape[0]
        if n and found.any():
            Zp = np.zeros_like(X0)
            Zp[found] = encoder.encode(rows.loc[found], source="the recourses")
            Zp[~found] = X0[~found]
        else:
            Zp = X0.copy()
        sq = _block_sq(encoder, Zp - X0)
        self.support = sq > _EPS * _EPS                      # features the current recourse changes
        self.budget = np.sqrt(sq.sum(axis=1))                # the plain recourse's cost: never exceeded
        self.cost = self.budget.copy()
        self.n_changes = self.support.sum(axis=1).astype(np.int64)
        self.plain_sq = sq
        self.order: list = [np.zeros(0, dtype=np.int64)] * n
        self.t_hi = np.ones(n)

    # ------------------------------------------------------------------ model
    def _score(self, frame: pd.DataFrame) -> np.ndarray:
        if len(frame) == 0:
            return np.zeros(0)
        self.calls += 1
        return np.asarray(self.model.favorable_probability(frame), dtype=np.float64)

    # ------------------------------------------------------------------ steps
    def run(self, max_changes) -> None:
        active = np.flatnonzero(self.found & (self.n_changes >= 1))
        self._orders(active)
        reduced = self._greedy(active, budget=True)
        self._bisect(reduced)
        self._revert(active)
        if max_changes is not None:
            long = active[self.n_changes[active] > max_changes]
            if long.size:
                reduced = self._greedy(long, budget=False, stop_at=max_changes)
                self._bisect(reduced)
                self._revert(long)

    def _orders(self, active: np.ndarray) -> None:
        """Rank each recourse's changed features: probability bought per unit of squared cost, smallest first."""
        segs = np.repeat(active, self.n_changes[active])
        feats = np.concatenate([np.flatnonzero(self.support[s]) for s in active]) if active.size else \
            np.zeros(0, dtype=np.int64)
        if segs.size == 0:
            return
        current = self.best.frame()
        p = self._score(_reverted(current, self.raw0, segs, feats, self.names))
        key = (self.prob[segs] - p) / np.maximum(self.plain_sq[segs, feats], _EPS)
        sort = np.lexsort((feats, key, segs))
        segs, feats = segs[sort], feats[sort]
        bounds = np.flatnonzero(np.diff(segs)) + 1
        for s, group in zip(segs[np.r_[0, bounds]], np.split(feats, bounds)):
            self.order[s] = group

    def _point(self, segs: np.ndarray, support: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Encoded points ``x0 + D_cat + t * D_num`` over each segment's ``support``."""
        cat_cols = (support & self.is_cat) @ self.F
        num_cols = (support & ~self.is_cat) @ self.F
        D = self.D[segs]
        return self.X0[segs] + D * cat_cols + t[:, None] * D * num_cols

    def _decode(self, segs: np.ndarray, Z: np.ndarray):
        rows = decode_from(self.encoder, Z, self.X0[segs], self.raw0.iloc[segs].reset_index(drop=True))
        enc = self.encoder.encode(rows, source="the recourses")
        cost = np.sqrt(_block_sq(self.encoder, enc - self.X0[segs]).sum(axis=1))
        return rows, cost

    def _budget_t(self, segs: np.ndarray, support: np.ndarray, budget: bool) -> tuple[np.ndarray, np.ndarray]:
        """The farthest ``t`` whose undecoded cost fits the budget; and whether the categoricals alone fit it."""
        sq = _block_sq(self.encoder, self.D[segs])
        cat_sq = np.where(support & self.is_cat, sq, 0.0).sum(axis=1)
        num_sq = np.where(support & ~self.is_cat, sq, 0.0).sum(axis=1)
        if not budget:
            return np.ones(len(segs)), np.ones(len(segs), dtype=bool)
        room = self.budget[segs] ** 2 - cat_sq
        fits = room >= -_EPS
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(num_sq > 0, np.sqrt(np.maximum(room, 0.0) / num_sq), 1.0)
        return np.minimum(t, 1.0), fits

    def _greedy(self, active: np.ndarray, *, budget: bool, stop_at: int | None = None) -> np.ndarray:
        """Try removing each feature in order; return the segments whose support shrank."""
        reduced = np.zeros(self.X0.shape[0], dtype=bool)
        lengths = np.array([len(self.order[s]) for s in active], dtype=np.int64)
        for r in range(int(lengths.max()) if lengths.size else 0):
            segs = active[(lengths > r)]
            if stop_at is not None:
                segs = segs[self.support[segs].sum(axis=1) > stop_at]
            j = np.array([self.order[s][r] for s in segs], dtype=np.int64)
            if segs.size:
                keep = self.support[segs, j] & (self.support[segs].sum(axis=1) >= 2)
                segs, j = segs[keep], j[keep]
            if segs.size == 0:
                continue
            support = self.support[segs].copy()
            support[np.arange(segs.size), j] = False
            t, fits = self._budget_t(segs, support, budget)
            segs, j, support, t = segs[fits], j[fits], support[fits], t[fits]
            if segs.size == 0:
                continue
            rows, cost = self._decode(segs, self._point(segs, support, t))
            if budget:
                for _ in range(3):      # integer rounding can push the decoded cost past the budget: shrink t
                    over = cost > self.budget[segs] * (1 + 1e-12) + _EPS
                    if not over.any():
                        break
                    t = np.where(over, t * np.minimum(self.budget[segs] / np.maximum(cost, _EPS), 1.0) * 0.999, t)
                    rows, cost = self._decode(segs, self._point(segs, support, t))
                ok_cost = cost <= self.budget[segs] * (1 + 1e-12) + _EPS
            else:
                ok_cost = np.ones(segs.size, dtype=bool)
            p = self._score(rows)
            accept = ok_cost & (p >= self.model.threshold)
            if not accept.any():
                continue
            win = segs[accept]
            self.support[win] = support[accept]
            self.t_hi[win] = t[accept]
            self.best.put(win, rows, np.flatnonzero(accept))
            self.prob[win] = p[accept]
            self.cost[win] = cost[accept]
            self.n_changes[win] = self.support[win].sum(axis=1)
            reduced[win] = True
        return np.flatnonzero(reduced)

    def _bisect(self, segs: np.ndarray) -> None:
        """The first accepted point of each reduced direction, at or before its budget point."""
        if segs.size == 0:
            return
        support = self.support[segs]
        has_num = (support & ~self.is_cat).any(axis=1)
        segs, support = segs[has_num], support[has_num]
        if segs.size == 0:
            return
        lo = np.zeros(segs.size)
        hi = self.t_hi[segs].copy()
        # t = 0: the categorical changes alone (rows without categorical changes are the applicant: skip)
        first = (support & self.is_cat).any(axis=1)
        candidates = [(np.flatnonzero(first), np.zeros(int(first.sum())))]
        while True:
            where, t = candidates.pop() if candidates else (None, None)
            if where is None:
                where = np.flatnonzero(hi - lo > self.tol)
                if where.size == 0:
                    break
                t = 0.5 * (lo[where] + hi[where])
            if where.size == 0:
                continue
            s = segs[where]
            rows, cost = self._decode(s, self._point(s, support[where], t))
            p = self._score(rows)
            ok = p >= self.model.threshold
            hi[where[ok]] = t[ok]
            lo[where[~ok]] = np.maximum(lo[where[~ok]], t[~ok])
            if ok.any():
                win = s[ok]
                self.best.put(win, rows, np.flatnonzero(ok))
                self.prob[win] = p[ok]
                self.cost[win] = cost[ok]
                self.t_hi[win] = t[ok]
        self._recount(segs)

    def _recount(self, segs: np.ndarray) -> None:
        """Support, number of changes and cost of the current rows of ``segs``."""
        if segs.size == 0:
            return
        enc = self.encoder.encode(self.best.frame(segs), source="the recourses")
        sq = _block_sq(self.encoder, enc - self.X0[segs])
        self.support[segs] = sq > _EPS * _EPS
        self.n_changes[segs] = self.support[segs].sum(axis=1)
        self.cost[segs] = np.sqrt(sq.sum(axis=1))

    def _revert(self, active: np.ndarray) -> None:
        """Revert each still-changed feature alone, in order, when the model still accepts the row."""
        lengths = np.array([len(self.order[s]) for s in active], dtype=np.int64)
        for r in range(int(lengths.max()) if lengths.size else 0):
            segs = active[lengths > r]
            j = np.array([self.order[s][r] for s in segs], dtype=np.int64)
            if segs.size:
                keep = self.support[segs, j] & (self.n_changes[segs] >= 2)
                segs, j = segs[keep], j[keep]
            if segs.size == 0:
                continue
            current = self.best.frame()
            rows = _reverted(current, self.raw0, segs, j, self.names)
            p = self._score(rows)
            ok = p >= self.model.threshold
            if ok.any():
                win = segs[ok]
                self.best.put(win, rows, np.flatnonzero(ok))
                self.prob[win] = p[ok]
                self._recount(win)
