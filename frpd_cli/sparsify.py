"""Sparse recourses: keep only the feature changes the model needs.

Linear interpolation (:func:`frpd_cli.interpolation.interpolate_linear`) moves
every feature in which the prototype differs from the applicant, so a recourse
often changes most features although a few would do. :func:`sparsify_recourses`
starts from those recourses and looks, for each, for the smallest set of whole
features (a categorical's one-hot block counts as one feature) that, moved
towards the same prototype while every other feature keeps the applicant's
value, still gives a row the model accepts: probability at least
``model.threshold`` (the threshold plus any margin).

**The cost bound.** A sparse recourse never costs more than the plain one
(the Euclidean distance in the encoded space, with the feature weights) and
never changes more features. The bound is a factor, :data:`COST_FACTOR` (1) by
default: ``cost_factor`` above 1 lets a recourse of fewer changes ask for
larger moves, up to that many times the plain recourse's cost (on the shared
datasets a factor of 1.5 gave no fewer changes than 1).

The search (all recourses of a batch share each model call; a recourse's result
depends on its own segment and on the earlier segments of its applicant only):

1. **Smallest supports first.** Supports of one changed feature are tried,
   then of two for the recourses no single feature serves, and so on (every
   subset of that size of the plain recourse's changed features, one model
   call per size for the whole batch). A support ``S`` is judged at its
   *budget point*: the farthest point ``x0 + D_cat + t * D_num`` (categoricals
   of ``S`` take the prototype's category, numeric ones move the fraction
   ``t`` of the way to the prototype's values) whose decoded row costs at
   most the bound. ``t`` may exceed 1 (``past_prototype``, the default): a
   numeric feature moves *past* the prototype's value, in the same direction,
   up to the nearer end of the training range and of the user's ``--range``
   (the first numeric feature of ``S`` to reach its end stops the direction);
   monotone rules hold because the direction is the prototype's, integers are
   rounded as in the interpolation.
   **Levels of its own.** Besides the prototype's category, a categorical
   feature may take any other level it is allowed to (mutable, within the
   user's allowed levels, an ordinal only the allowed way and within its move
   bound), alone (size 1), or with one other changed feature moved towards the prototype (size 2, for the
   recourses no single feature serves): a recourse of one change ("education:
   HS-grad -> Masters") need not wait for a prototype with that level
   (:data:`FREE_LEVELS`).
   The first size at which some support is accepted is the recourse's size;
   supports of one more feature (:data:`WIDER`) are tried too, for the choice
   in step 3; the plain recourse is kept where no smaller support is.
2. **First accepted point.** For every accepted support kept, a search on
   ``t`` (bisection, two levels per model call, down to ``tol``) finds the
   first accepted point of its direction, nearer the applicant; the decoded
   cost never decreases with ``t``, so it stays within the bound.
3. **Choice, with the applicant's other recourses in mind.** Recourses of one
   applicant choose in rank order. A recourse takes a support whose row no
   earlier recourse of the applicant took; then the lowest ``changes +
   DIVERSITY * (sum of the cosines between its direction and the earlier
   recourses' directions)``: the cosines are what it adds to the plan's
   anti-diversity, so one more change (:data:`DIVERSITY` = 2) buys a direction
   orthogonal to the others where the smallest supports all repeat an earlier
   recourse's direction; then the cheapest. On the shared datasets (German,
   SBA, Adult, COMPAS) this gives fewer changed features than DiCE random and
   a lower anti-diversity (docs/benchmarks.md, "Sparse recourses").
4. **Greedy beyond.** Where the subsets of one size outnumber
   ``_MAX_SUBSETS`` (recourses that change many features), a greedy search
   takes over: changed features are ranked by the probability they buy per
   unit of squared cost, smallest first; each is dropped in turn when the
   reduced support is accepted at its budget point; the first accepted point
   is then searched; a last pass reverts any feature the model does not need.

Reverting a feature to the applicant's value, or moving it towards (or, for
a numeric feature, past) a prototype that obeys the constraints, within the
training and user ranges, never breaks an immutable, monotone,
integer, ``--range`` or vocabulary rule (numeric values are decoded as the
interpolation decodes them: rounded, clipped to the training range and to the
user's range, never past the applicant's value against a monotone feature);
every returned row is the decoded row the model scored.

When two prototypes of one applicant still end at the same sparse recourse, the
caller (:func:`frpd_cli.planning.interpolate_plans`) looks for another one
that changes other features, or keeps the plain recourse, so plans stay full.

``max_changes``: a recourse still changing more than ``max_changes`` features
is searched again without the cost bound (numeric features may go up to the
prototype's values, so it may then cost more than the bound, never change more
features), stopping as soon as it is short enough; if it is still too long it
is flagged (``kept`` is False) for the caller to drop.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np
import pandas as pd

from ._frames import frame_of
from .encoding import Encoder, _level_dtype
from .exceptions import InputError
from .interpolation import RawRefinement, decode_from, keep_rules
from .model import score_columns

__all__ = ["SparseResult", "sparsify_recourses", "changed_features", "COST_FACTOR", "MinimalResult", "minimal_recourses"]

_EPS = 1e-12

#: A sparse recourse costs at most this many times its plain recourse (see the module docstring).
COST_FACTOR = 1.0

#: Weight of the cosines with the applicant's earlier recourses against one more changed feature, when a
#: recourse chooses among its accepted supports (see :meth:`_SmallSupports.pick`).
DIVERSITY = 2.0

#: Whether a one-feature support may set a categorical feature to a level other than the prototype's.
FREE_LEVELS = True

#: Supports of up to this many more features than the smallest accepted one compete in that choice.
WIDER = 1

#: Subsets of one size tried per recourse; beyond, the greedy search takes over.
_MAX_SUBSETS = 128

#: How much more than the budget over the decoded cost a budget point is shrunk by, try after try, when rounding
#: the decoded values put its cost over the budget: first by a hair (a tie with the plain recourse's cost, as when
#: the one feature the model needs carries almost all of it), last by 0.1% (an integer rounded up).
_SHRINKS = (1 - 1e-9, 1 - 1e-6, 1 - 1e-3)
#: Brackets per model call in the search for the first accepted point (4: the points of bisection, two
#: levels per call; a 1e-3 bracket in 5 calls).
_SPLITS = 4


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

    def put(self, where: np.ndarray, frame, take: np.ndarray | None = None) -> None:
        """Rows ``take`` of ``frame`` (a DataFrame or a dict of column arrays; all rows by default) become rows
        ``where``."""
        if len(where) == 0:
            return
        for c in self.names:
            new = frame[c]
            new = new if isinstance(new, np.ndarray) else new.to_numpy()
            new = new if take is None else new[take]
            if self.cols[c].dtype != new.dtype:
                kind = np.result_type(self.cols[c].dtype, new.dtype)
                self.cols[c] = self.cols[c].astype(kind)
            self.cols[c][where] = new

    def frame(self, where=None) -> pd.DataFrame:
        if where is None:
            return frame_of(self.cols)
        return frame_of({c: v[where] for c, v in self.cols.items()}, copy=False)

    def reverted(self, raw: dict, segs: np.ndarray, feats: np.ndarray, names: list) -> dict:
        """The columns of ``_reverted(self.frame(), raw0, segs, feats, names)`` as arrays, without the frames.

        ``raw`` holds the columns of ``raw0`` as arrays. Every column (of the same dtype as the frame's
        ``to_numpy()``) is a new array.
        """
        out = {c: v[segs] for c, v in self.cols.items()}          # new arrays: set back in place
        for j in np.unique(feats):
            out[names[j]] = _set_back(out[names[j]], raw[names[j]][segs], feats == j)
        return out

    def keys(self, names: list) -> list[tuple]:
        """``tuple(str(v) for v in row)`` of every row over the columns ``names``, as ``itertuples`` of
        :meth:`frame` gives the values (``tolist``: the same Python scalars)."""
        return _row_keys(self.cols, names)


def _row_keys(columns: dict, names: list) -> list[tuple]:
    """``tuple(str(v) for v in row)`` of each row of a dict of column arrays, over ``names``."""
    return list(zip(*[[str(v) for v in columns[c].tolist()] for c in names]))


def _reverted(rows: pd.DataFrame, raw0: pd.DataFrame, segs: np.ndarray, feats: np.ndarray,
              names: list) -> pd.DataFrame:
    """Rows ``rows[segs]`` with feature ``feats[i]`` set back to the applicant's value ``raw0[segs][...]``."""
    out = rows.iloc[segs].reset_index(drop=True)
    base = raw0.iloc[segs].reset_index(drop=True)
    for j in np.unique(feats):
        name = names[j]
        out[name] = _set_back(out[name].to_numpy(copy=True), base[name].to_numpy(), feats == j)
    return out


def _set_back(column: np.ndarray, original: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``column`` (an array the caller owns) with its rows ``mask`` set to ``original``'s, in a dtype that holds
    both (numbers and booleans: their common type; else object)."""
    if column.dtype != original.dtype:
        column = column.astype(np.result_type(column.dtype, original.dtype)) if (
            column.dtype.kind in "iufb" and original.dtype.kind in "iufb") else column.astype(object)
    column[mask] = original[mask]
    return column


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
    groups: np.ndarray | None = None,
    cost_factor: float | None = None,
    past_prototype: bool = True,
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
    groups : ndarray of int, shape (n_segments,), optional
        The applicant of each segment (segments of one applicant, in rank
        order): among equally short supports, a segment prefers features its
        applicant's earlier segments do not change. By default every segment
        is its own group.
    cost_factor : float, optional
        A sparse recourse costs at most ``cost_factor`` times the plain one
        (default :data:`COST_FACTOR`).
    past_prototype : bool, default=True
        A numeric feature of a small support may move past the prototype's
        value, in the same direction, up to the training range and the
        user's range (False: at most up to the prototype's value).

    Returns
    -------
    result : SparseResult

    Raises
    ------
    InputError
        ``max_changes`` is not an int >= 1, or ``cost_factor`` is below 1.

    Notes
    -----
    Model calls: per support size, one for the prototype's supports (and, at
    sizes 1 and 2, one for the supports with a level of their own: the
    one-feature ones once per applicant), one per bisection step (two levels per call, every kept
    candidate of the batch together), and those of the greedy search for the
    recourses whose subsets are too many. Python work is ``O(n_segments)``
    per call; no model call scores a segment that is already decided.
    """
    if max_changes is not None and (isinstance(max_changes, bool) or int(max_changes) != max_changes
                                    or max_changes < 1):
        raise InputError(f"The 'max_changes' option must be an int >= 1. Got {max_changes!r} instead.")
    cost_factor = COST_FACTOR if cost_factor is None else cost_factor
    if not (isinstance(cost_factor, (int, float)) and np.isfinite(cost_factor) and cost_factor >= 1):
        raise InputError(f"The 'cost_factor' option must be a number >= 1. Got {cost_factor!r} instead.")
    X0 = np.asarray(X0, dtype=np.float64)
    XK = np.asarray(XK, dtype=np.float64)
    n = X0.shape[0]
    raw0 = raw0.reset_index(drop=True)
    rows = rows.reset_index(drop=True)
    probability = np.asarray(probability, dtype=np.float64).copy()
    found = np.ones(n, dtype=bool) if found is None else np.asarray(found, dtype=bool)
    groups = np.arange(n) if groups is None else np.asarray(groups, dtype=np.int64)
    best = _Rows(rows)
    calls = 0
    # the plain recourses: their supports and costs
    Zp = X0.copy()
    if n and found.any():
        Zp[found] = encoder.encode(rows.loc[found], source="the recourses")
    sq = _block_sq(encoder, Zp - X0)
    support = sq > _EPS * _EPS
    plain_cost = np.sqrt(sq.sum(axis=1))
    budget = cost_factor * plain_cost
    n_changes = support.sum(axis=1).astype(np.int64)
    if n:
        small = _SmallSupports(encoder, model, X0, XK, raw0, tol, past_prototype, WIDER, FREE_LEVELS)
        chosen, too_many = small.search(found & (n_changes >= 2), support, budget, groups)
        calls += small.calls
        # the greedy search where the subsets to try are too many
        rest = np.flatnonzero(too_many)
        if rest.size:
            greedy = _Search(encoder, model, X0[rest], XK[rest], raw0.iloc[rest].reset_index(drop=True),
                             rows.iloc[rest].reset_index(drop=True), probability[rest], np.ones(rest.size, bool),
                             tol, budget=budget[rest])
            greedy.run(None)
            calls += greedy.calls
            best.put(rest, greedy.best.frame())
            probability[rest] = greedy.prob
            support[rest] = greedy.support
            n_changes[rest] = greedy.n_changes
        deltas = np.zeros_like(X0)
        others = np.flatnonzero(found & (chosen < 0))
        if others.size:
            deltas[others] = encoder.encode(best.frame(others), source="the recourses") - X0[others]
        picks = small.pick(chosen, groups, support, deltas)
        if picks.size:
            segs = small.cand_seg[picks]
            frame = pd.DataFrame(small.columns(segs, small.cand_sup[picks], small.cand_t[picks],
                                              small.cand_lfeat[picks], small.cand_level[picks])[0])
            best.put(segs, frame)
            probability[segs] = small.cand_p[picks]
            support[segs] = small.cand_act[picks]
            n_changes[segs] = support[segs].sum(axis=1)
    if max_changes is not None and n:
        long = np.flatnonzero(found & (n_changes > max_changes))
        if long.size:
            again = _Search(encoder, model, X0[long], XK[long], raw0.iloc[long].reset_index(drop=True),
                            best.frame(long), probability[long], np.ones(long.size, bool), tol)
            again.run(max_changes)
            calls += again.calls
            best.put(long, again.best.frame())
            probability[long] = again.prob
            n_changes[long] = again.n_changes
    kept = found.copy()
    if max_changes is not None:
        kept &= n_changes <= max_changes
    return SparseResult(rows=best.frame(), probability=probability, n_changes=n_changes, kept=kept,
                        n_model_calls=calls)


class _SmallSupports:
    """Recourses that change one or two of the plain recourse's features (see :func:`sparsify_recourses`).

    Works on numpy columns: the decoded row of a candidate is the applicant's raw row with the features of
    its support moved towards the prototype (numeric ones the fraction ``t`` of the way, decoded as
    :func:`frpd_cli.interpolation.decode_from` decodes them; categorical ones to the prototype's category).
    """

    def __init__(self, encoder: Encoder, model, X0: np.ndarray, XK: np.ndarray, raw0: pd.DataFrame, tol: float,
                 past_prototype: bool = False, wider: int = 1, free_levels: bool = False):
        self.encoder, self.model, self.tol = encoder, model, tol
        self.features = list(encoder.schema.features)
        self.names = [f.name for f in self.features]
        self.X0, self.D = X0, XK - X0
        self.col = encoder.offsets[:-1].astype(np.int64)
        scale = encoder.column_scale
        self.scale = np.ones(encoder.n_features_out) if scale is None else scale
        self.is_cat = np.array([f.is_categorical for f in self.features], dtype=bool)
        self.raw = {name: raw0[name].to_numpy() for name in self.names}
        n, n_feat = X0.shape[0], len(self.features)
        # squared encoded move of each whole feature at the prototype (categoricals: the prototype's category)
        self.sq_end = np.zeros((n, n_feat))
        self.proto = {}
        cats = [j for j in range(n_feat) if self.is_cat[j]]
        decoded = encoder.decode(XK) if cats else None
        for j in range(n_feat):
            start, stop = int(encoder.offsets[j]), int(encoder.offsets[j + 1])
            if self.is_cat[j]:
                differ = np.argmax(X0[:, start:stop], axis=1) != np.argmax(XK[:, start:stop], axis=1)
                self.sq_end[:, j] = np.where(differ, 2.0 * self.scale[start] ** 2, 0.0)
                self.proto[j] = decoded[self.names[j]].to_numpy()
            else:
                self.sq_end[:, j] = self.D[:, start] ** 2
        self.t_end = self._reach() if past_prototype else np.ones((n, n_feat))
        self.wider = wider
        self.free_levels = free_levels
        self.levels = {j: pd.Series(list(f.levels), dtype=_level_dtype(f.levels)).to_numpy()
                       for j, f in enumerate(self.features) if self.is_cat[j]}
        self.calls = 0
        self.cand_seg = np.zeros(0, dtype=np.int64)

    def _reach(self) -> np.ndarray:
        """The farthest ``t`` (at least 1) of each segment's numeric features: shape (n, n_features).

        Past the prototype (``t > 1``) a numeric feature keeps its direction up to the nearer bound of the
        training range and the user's ``--range``; categoricals and unmoved features stay at ``t = 1``.
        """
        n, n_feat = self.X0.shape[0], len(self.features)
        reach = np.ones((n, n_feat))
        enc = self.encoder
        for j, f in enumerate(self.features):
            if self.is_cat[j]:
                continue
            c = int(self.col[j])
            if not enc.maximum[j] > enc.minimum[j]:
                continue
            low, high = enc.encoded_range(j)               # the training range, encoded before the scale
            if f.has_range:                                # the user's, per applicant when relative to it
                bounds = f.bounds(self.raw[f.name].astype(np.float64) if f.is_relative else None)
                low, high = (np.full(n, low), np.full(n, high))
                for side, (raw_bound, pick) in enumerate(zip(bounds, (np.maximum, np.minimum))):
                    raw_bound = np.broadcast_to(raw_bound, (n,))
                    finite = np.isfinite(raw_bound)
                    if finite.any():
                        target = low if side == 0 else high
                        target[finite] = pick(target[finite], enc.encode_values(j, raw_bound[finite]))
            x0, d = self.X0[:, c] / self.scale[c], self.D[:, c] / self.scale[c]
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(d > 0, (high - x0) / d, np.where(d < 0, (low - x0) / d, 1.0))
            reach[:, j] = np.where(np.isfinite(t), np.maximum(t, 1.0), 1.0)
        return reach

    # ------------------------------------------------------------------ rows
    def _numeric(self, j: int, segs: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw values of numeric feature ``j`` moved the fraction ``t`` of the way, and their squared encoded move."""
        f, c, enc = self.features[j], self.col[j], self.encoder
        x0 = self.X0[segs, c]
        z = x0 + t * self.D[segs, c]
        column = enc._decode_numeric(j, f, z / self.scale[c])
        original = self.raw[f.name][segs]
        column = keep_rules(f, column, original)
        unchanged = np.abs(z - x0) <= 1e-12
        column = column.astype(np.result_type(column.dtype, original.dtype))
        column[unchanged] = original[unchanged]
        with np.errstate(over="ignore", invalid="ignore"):
            e = enc.encode_values(j, column.astype(np.float64)) * self.scale[c]
        return column, (e - x0) ** 2

    def columns(self, segs: np.ndarray, sup: np.ndarray, t: np.ndarray, lfeat: np.ndarray | None = None,
                level: np.ndarray | None = None) -> tuple[dict, np.ndarray]:
        """Raw columns of the candidate rows, and each feature's squared encoded move, shape (n, n_features).

        ``lfeat``, ``level``: a candidate may set one categorical feature (``lfeat``; -1: none) to a level of
        its own choice (index ``level``) instead of the prototype's category (see :meth:`_try_levels`).
        """
        out, sq = {}, np.zeros(sup.shape)
        for j, name in enumerate(self.names):
            base = self.raw[name][segs]
            mask = sup[:, j]
            if not mask.any():
                out[name] = base
                continue
            where = np.flatnonzero(mask)
            if self.is_cat[j]:
                values = self.proto[j][segs[where]]
                sq[where, j] = self.sq_end[segs[where], j]
                own = lfeat[where] == j if lfeat is not None else np.zeros(where.size, dtype=bool)
                if own.any():
                    kinds = (values.dtype.kind, self.levels[j].dtype.kind)
                    values = values.astype(np.result_type(values.dtype, self.levels[j].dtype)
                                           if all(k in "iuf" for k in kinds) else object)
                    values[own] = self.levels[j][level[where][own]]
                    sq[where[own], j] = 2.0 * self.scale[int(self.encoder.offsets[j])] ** 2
            else:
                values, sq[where, j] = self._numeric(j, segs[where], t[where])
            if base.dtype != values.dtype:
                both_numbers = base.dtype.kind in "iufb" and values.dtype.kind in "iufb"
                base = base.astype(np.result_type(base.dtype, values.dtype) if both_numbers else object)
            else:
                base = base.copy()
            base[where] = values
            out[name] = base
        return out, sq

    def _score(self, columns: dict) -> np.ndarray:
        self.calls += 1
        return score_columns(self.model, columns)

    # ------------------------------------------------------------------ search
    def _try(self, segs: np.ndarray, sup: np.ndarray, budget: np.ndarray, lfeat: np.ndarray | None = None,
             level: np.ndarray | None = None) -> None:
        """Judge candidate supports at their budget points; append them to the candidates."""
        if segs.size == 0:
            return
        lfeat = np.full(segs.size, -1, dtype=np.int64) if lfeat is None else lfeat
        level = np.full(segs.size, -1, dtype=np.int64) if level is None else level
        num = sup & ~self.is_cat
        end = self.sq_end[segs]
        own = np.flatnonzero(lfeat >= 0)
        if own.size:
            end = end.copy()
            end[own, lfeat[own]] = 2.0 * self.scale[self.col[lfeat[own]]] ** 2
        cat_sq = np.where(sup & self.is_cat, end, 0.0).sum(axis=1)
        num_sq = np.where(num, end, 0.0).sum(axis=1)
        room = budget[segs] ** 2 - cat_sq
        fits = room >= -_EPS
        segs, sup, room, num_sq, num = segs[fits], sup[fits], room[fits], num_sq[fits], num[fits]
        lfeat, level = lfeat[fits], level[fits]
        if segs.size == 0:
            return
        reach = np.where(num, self.t_end[segs], np.inf).min(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(num_sq > 0, np.sqrt(np.maximum(room, 0.0) / num_sq), 1.0)
        t = np.minimum(t, np.where(np.isfinite(reach), reach, 1.0))
        limit = budget[segs] * (1 + 1e-12) + _EPS
        for shrink in _SHRINKS + (None,):     # rounding can push the decoded cost past the budget: shrink t
            columns, sq = self.columns(segs, sup, t, lfeat, level)
            cost = np.sqrt(sq.sum(axis=1))
            over = cost > limit
            if shrink is None or not over.any():
                break
            t = np.where(over, t * np.minimum(budget[segs] / np.maximum(cost, _EPS), 1.0) * shrink, t)
        p = self._score(columns)
        ok = (cost <= limit) & (p >= self.model.threshold)
        self._append(seg=segs, sup=sup, t=t, p=p, cost=cost, ok=ok, act=sq > _EPS * _EPS, lfeat=lfeat, level=level)

    def _append(self, **arrays) -> None:
        """Append candidates: one array per ``cand_*`` attribute, the same rows in each."""
        for name, value in arrays.items():
            setattr(self, "cand_" + name, np.concatenate([getattr(self, "cand_" + name), value]))

    def _free_levels(self, segs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (segment, categorical feature, level) triples of the levels a segment's feature may move to.

        Every level the feature may take (mutable; within the user's allowed levels; ordinals only the allowed
        way and within their move bound) other than the applicant's.
        """
        parts = []
        for j, f in enumerate(self.features):
            if not self.is_cat[j] or f.mutability == "immutable" or segs.size == 0:
                continue
            start, stop = int(self.encoder.offsets[j]), int(self.encoder.offsets[j + 1])
            mine = np.argmax(self.X0[segs, start:stop], axis=1)
            levels = np.arange(stop - start)
            allowed = f.in_range(self.levels[j]) if f.allowed or f.withheld else np.ones(levels.size, dtype=bool)
            ok = (levels[None, :] != mine[:, None]) & allowed[None, :]
            if f.mutability == "increasing":
                ok &= levels[None, :] > mine[:, None]
            elif f.mutability == "decreasing":
                ok &= levels[None, :] < mine[:, None]
            if f.kind == "ordinal":                                  # --max-move: at most that many levels away
                ok &= ~f.levels_beyond(levels[None, :], mine[:, None])
            where, level = np.nonzero(ok)
            parts.append((segs[where], np.full(where.size, j, dtype=np.int64), level.astype(np.int64)))
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        seg, feat, level = (np.concatenate([q[i] for q in parts]) for i in range(3))
        order = np.lexsort((level, feat, seg))
        return seg[order], feat[order], level[order]

    def _try_level_alone(self, segs: np.ndarray, budget: np.ndarray, groups: np.ndarray) -> None:
        """Judge the supports of one categorical feature at a level of its own choice, alone.

        These rows depend on the applicant only, so they are scored once per applicant (its first segment in
        ``segs``) and shared by its other segments, each with its own budget.
        """
        if segs.size == 0:
            return
        first = np.unique(groups[segs], return_index=True)[1]
        seg, feat, level = self._free_levels(segs[first])
        if seg.size == 0:
            return
        sup = np.zeros((seg.size, len(self.features)), dtype=bool)
        sup[np.arange(seg.size), feat] = True
        columns, sq = self.columns(seg, sup, np.ones(seg.size), feat, level)
        p = self._score(columns)
        cost = np.sqrt(sq.sum(axis=1))
        # every segment of the applicant gets the rows of its first segment
        order = np.argsort(groups[segs], kind="stable")
        by_group = groups[segs][order]
        lo = np.searchsorted(by_group, groups[seg], side="left")
        hi = np.searchsorted(by_group, groups[seg], side="right")
        rep = np.repeat(np.arange(seg.size), hi - lo)
        start = np.repeat(lo - np.concatenate([[0], np.cumsum(hi - lo)[:-1]]), hi - lo)
        target = segs[order[start + np.arange(rep.size)]]
        ok = (p[rep] >= self.model.threshold) & (cost[rep] <= budget[target] * (1 + 1e-12) + _EPS)
        self._append(seg=target, sup=sup[rep], t=np.ones(rep.size), p=p[rep], cost=cost[rep], ok=ok, act=sup[rep],
                     lfeat=feat[rep], level=level[rep])

    def _try_levels(self, segs: np.ndarray, budget: np.ndarray, support: np.ndarray) -> None:
        """Judge the supports of a categorical feature at a level of its own choice together with one other
        feature of the segment's plain recourse, moved in the prototype's direction."""
        seg, feat, level = self._free_levels(segs)
        other = support[seg].copy()
        other[np.arange(seg.size), feat] = False
        rows, partner = np.nonzero(other)
        seg, feat, level = seg[rows], feat[rows], level[rows]
        sup = np.zeros((seg.size, len(self.features)), dtype=bool)
        sup[np.arange(seg.size), feat] = True
        sup[np.arange(seg.size), partner] = True
        self._try(seg, sup, budget, feat, level)

    def search(self, active: np.ndarray, support: np.ndarray, budget: np.ndarray,
               groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Find the accepted supports of the fewest features, trying sizes 1, 2, ... in turn.

        Returns ``chosen`` (the first accepted candidate of each segment, -1 where none was accepted; a
        segment's candidates are contiguous) and ``too_many`` (segments whose subsets of some size
        outnumber :data:`_MAX_SUBSETS` before one was accepted: the greedy search takes them on).
        """
        n, n_feat = support.shape
        self.cand_seg = np.zeros(0, dtype=np.int64)
        self.cand_sup = np.zeros((0, n_feat), dtype=bool)
        self.cand_t = self.cand_p = self.cand_cost = np.zeros(0)
        self.cand_ok = np.zeros(0, dtype=bool)
        self.cand_act = np.zeros((0, n_feat), dtype=bool)
        self.cand_lfeat = np.zeros(0, dtype=np.int64)
        self.cand_level = np.zeros(0, dtype=np.int64)
        m = support.sum(axis=1)
        served = np.zeros(n, dtype=bool)
        too_many = np.zeros(n, dtype=bool)
        open_ = active.copy()
        least = np.full(n, n_feat + 1, dtype=np.int64)   # the size that first served each segment
        size = 1
        while True:
            # a served segment tries one more size (the choice then weighs changes against diversity)
            open_ &= ~too_many & (m > size) & (~served | (size <= least + self.wider))
            if not open_.any():
                break
            seg_parts, sup_parts = [], []
            for width in np.unique(m[open_]):
                segs = np.flatnonzero(open_ & (m == width))
                if comb(int(width), size) > _MAX_SUBSETS:
                    too_many[segs] = True
                    continue
                changed = np.nonzero(support[segs])[1].reshape(segs.size, int(width))
                subsets = np.array(list(combinations(range(int(width)), size)), dtype=np.int64)
                feats = changed[:, subsets]                          # (segments, subsets, size)
                sup = np.zeros((segs.size, subsets.shape[0], n_feat), dtype=bool)
                np.put_along_axis(sup, feats, True, axis=2)
                seg_parts.append(np.repeat(segs, subsets.shape[0]))
                sup_parts.append(sup.reshape(-1, n_feat))
            if seg_parts:
                self._try(np.concatenate(seg_parts), np.vstack(sup_parts), budget)
            if self.free_levels and size == 1:
                self._try_level_alone(np.flatnonzero(open_), budget, groups)
            elif self.free_levels and size == 2:
                self._try_levels(np.flatnonzero(open_ & ~served), budget, support)
            if self.cand_seg.size:
                now = np.unique(self.cand_seg[self.cand_ok])
                now = now[~served[now]]
                least[now] = size
                served[now] = True
            size += 1
        # keep the accepted candidates of the smallest size of each segment; then the first accepted point
        keep = self._smallest()
        self._bisect(keep)
        order = np.argsort(self.cand_seg, kind="stable")
        for name in ("cand_seg", "cand_sup", "cand_t", "cand_p", "cand_cost", "cand_ok", "cand_act", "cand_lfeat",
                     "cand_level"):
            setattr(self, name, getattr(self, name)[order])
        chosen = np.full(n, -1, dtype=np.int64)
        where = np.flatnonzero(self.cand_ok)
        first = np.unique(self.cand_seg[where], return_index=True)
        chosen[first[0]] = where[first[1]]
        return chosen, too_many & ~served

    def _smallest(self) -> np.ndarray:
        """Mark as accepted only the candidates of at most :attr:`wider` more actual changes than the fewest of
        their segment."""
        size = np.where(self.cand_ok, self.cand_act.sum(axis=1), np.iinfo(np.int64).max)
        least = np.full(self.X0.shape[0], np.iinfo(np.int64).max)
        np.minimum.at(least, self.cand_seg, size)
        self.cand_ok &= size <= least[self.cand_seg] + self.wider
        return np.flatnonzero(self.cand_ok & (self.cand_sup & ~self.is_cat).any(axis=1))

    def _bisect(self, idx: np.ndarray) -> None:
        """The first accepted point of each accepted candidate's direction, at or before its budget point.

        A search with :data:`_SPLITS` brackets per model call (``_SPLITS - 1`` points of every open bracket
        scored together) down to a bracket shorter than ``tol``.
        """
        lo = np.zeros(idx.size)
        hi = self.cand_t[idx].copy()
        steps = np.arange(1, _SPLITS, dtype=np.float64) / _SPLITS

        def ends(rows):
            c = idx[rows]
            return [self.columns(self.cand_seg[c], self.cand_sup[c], t, self.cand_lfeat[c], self.cand_level[c])[0]
                    for t in (lo[rows], hi[rows])]

        refine = RawRefinement(self.encoder, self.tol, idx.size, ends)    # brackets wide in raw units go on
        tols = refine.tols
        while True:
            open_ = np.flatnonzero(hi - lo > tols)
            if open_.size == 0:
                if refine.again(lo, hi):
                    continue
                break
            c = idx[open_]
            width = hi[open_] - lo[open_]
            t = (lo[open_, None] + width[:, None] * steps[None, :]).reshape(-1)
            rep = np.repeat(c, steps.size)
            columns, sq = self.columns(self.cand_seg[rep], self.cand_sup[rep], t, self.cand_lfeat[rep],
                                       self.cand_level[rep])
            p = self._score(columns).reshape(-1, steps.size)
            t = t.reshape(-1, steps.size)
            good = p >= self.model.threshold
            hit = good.any(axis=1)
            first = np.argmax(good, axis=1)
            below = np.where(first > 0, t[np.arange(first.size), np.maximum(first - 1, 0)], lo[open_])
            lo[open_] = np.where(hit, below, t[:, -1])
            hi[open_[hit]] = t[hit, first[hit]]
            win, at = c[hit], np.flatnonzero(hit) * steps.size + first[hit]
            self.cand_t[win] = t.reshape(-1)[at]
            self.cand_p[win] = p.reshape(-1)[at]
            self.cand_cost[win] = np.sqrt(sq[at].sum(axis=1))
            self.cand_act[win] = sq[at] > _EPS * _EPS

    def pick(self, chosen: np.ndarray, groups: np.ndarray, support: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        """One accepted candidate per served segment, segment after segment in rank order.

        First not a row an earlier segment of its group already took; then the lowest score ``changes +
        DIVERSITY * sum of the cosines`` between the candidate's direction and the directions of the earlier
        segments of its group (a recourse that repeats an earlier one's direction adds its cosine to the
        plan's anti-diversity: one more change buys a direction orthogonal to them); then the cheapest (then
        the first).

        ``support`` holds the supports of the segments without a candidate (updated in place for the others);
        ``deltas`` the encoded moves of their recourses.
        """
        ok = np.flatnonzero(self.cand_ok)
        size = self.cand_act.sum(axis=1)
        columns = self.columns(self.cand_seg[ok], self.cand_sup[ok], self.cand_t[ok], self.cand_lfeat[ok],
                               self.cand_level[ok])[0] if ok.size else {}
        at = np.full(self.cand_seg.size, -1, dtype=np.int64)
        at[ok] = np.arange(ok.size)
        unit = _unit(self._moves(ok)) if ok.size else np.zeros((0, self.X0.shape[1]))
        # One number per distinct recourse row (the changed features and their values): candidates with the same
        # number are the same row.
        rows = np.zeros((ok.size, len(self.names)), dtype=np.int64)
        for j, name in enumerate(self.names):
            rows[:, j] = pd.factorize(columns[name])[0] if ok.size else 0
        rows[~self.cand_act[ok]] = -1
        same_row = np.unique(rows, axis=0, return_inverse=True)[1].ravel() if ok.size else rows[:, 0]

        if self.X0.shape[1] > 1:
            return self._pick_by_rank(chosen, groups, support, deltas, size, at, unit, same_row)
        return self._pick_in_order(chosen, groups, support, deltas, size, at, unit, same_row)

    def _pick_by_rank(self, chosen, groups, support, deltas, size, at, unit, same_row) -> np.ndarray:
        """:meth:`pick` for every group's first segments at once, then every group's second ones, and so on.

        The segments of one rank belong to different groups, so they do not depend on each other; each group's
        running sum of earlier directions (``0.0 + u1 + u2 + ...``), the rows it took, the scores and the order
        of the candidates are computed as :meth:`_pick_in_order` computes them, value for value (the same
        elementwise operations and row sums), for all of them together.
        """
        n_seg = support.shape[0]
        picks = np.full(n_seg, -1, dtype=np.int64)
        if n_seg == 0:
            return picks[:0]
        _, group = np.unique(groups, return_inverse=True)
        group = group.ravel()
        order = np.argsort(group, kind="stable")
        first = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1]
        rank = np.empty(n_seg, dtype=np.int64)
        rank[order] = np.arange(n_seg) - np.repeat(first, np.diff(np.r_[first, n_seg]))
        total = np.zeros((int(group.max()) + 1, self.X0.shape[1]))   # each group's earlier directions, summed
        n_rows = int(same_row.max()) + 2 if same_row.size else 1
        taken = np.zeros(0, dtype=np.int64)     # group * n_rows + row: the rows each group's segments took
        seg = self.cand_seg
        # the accepted candidates of every served segment (its chosen one and the accepted ones after it)
        served = chosen[seg] >= 0 if seg.size else np.zeros(0, dtype=bool)
        accepted = np.flatnonzero(self.cand_ok & served & (np.arange(seg.size) >= np.where(served, chosen[seg], 0)))
        for r in range(int(rank.max()) + 1):
            cands = accepted[rank[seg[accepted]] == r]
            owner = seg[cands]
            score = size[cands].astype(np.float64)
            if r:
                score = score + DIVERSITY * (unit[at[cands]] * total[group[owner]]).sum(axis=1)
                repeat = np.isin(group[owner] * n_rows + same_row[at[cands]], taken)
            else:
                repeat = np.zeros(cands.size, dtype=bool)
            best = np.lexsort((cands, self.cand_cost[cands], np.round(score, 9), repeat, owner))
            leads = best[np.r_[True, owner[best][1:] != owner[best][:-1]]] if best.size else best
            mine, c = owner[leads], cands[leads]
            picks[mine] = c
            support[mine] = self.cand_act[c]
            taken = np.concatenate([taken, group[mine] * n_rows + same_row[at[c]]])
            level = np.flatnonzero(rank == r)           # this rank's segments, mine among them
            direction = np.zeros((level.size, self.X0.shape[1]))
            direction[np.searchsorted(level, mine)] = unit[at[c]]
            for i in np.flatnonzero(chosen[level] < 0):
                direction[i] = _unit(deltas[level[i]:level[i] + 1])[0]
            total[group[level]] = total[group[level]] + direction
        return picks[picks >= 0]

    def _pick_in_order(self, chosen, groups, support, deltas, size, at, unit, same_row) -> np.ndarray:
        """:meth:`pick` segment after segment, summing each group's earlier directions with ``np.sum`` (the
        reference for :meth:`_pick_by_rank`, which gives the same bits with more than one encoded column: ``np.sum``
        of the list adds its rows in order from 0.0; with one column it adds pairwise, so this is used there)."""
        picks = []
        seen: dict = {}
        taken: dict = {}

        def key(c):
            return int(same_row[at[c]])

        for s in range(support.shape[0]):
            group = int(groups[s])
            earlier = seen.setdefault(group, [])
            c0 = chosen[s]
            if c0 >= 0:
                stop = c0
                while stop < self.cand_seg.size and self.cand_seg[stop] == s:
                    stop += 1
                idx = c0 + np.flatnonzero(self.cand_ok[c0:stop])
                c = idx[0]
                if idx.size > 1:
                    score = size[idx].astype(np.float64)
                    if earlier:     # row by row (no matrix product: a row's sum never depends on the others)
                        score = score + DIVERSITY * (unit[at[idx]] * np.sum(earlier, axis=0)).sum(axis=1)
                    mine = taken.setdefault(group, set())
                    repeat = (np.fromiter((r in mine for r in same_row[at[idx]].tolist()), dtype=bool, count=idx.size)
                              if mine else np.zeros(idx.size, dtype=bool))
                    c = idx[np.lexsort((idx, self.cand_cost[idx], np.round(score, 9), repeat))[0]]
                taken.setdefault(group, set()).add(key(c))
                picks.append(c)
                support[s] = self.cand_act[c]
                direction = unit[at[c]]
            else:
                direction = _unit(deltas[s:s + 1])[0]
            earlier.append(direction)
        return np.asarray(picks, dtype=np.int64)

    def _moves(self, idx: np.ndarray) -> np.ndarray:
        """Encoded moves of candidates ``idx`` (before decoding: a numeric feature moves ``t`` of the way)."""
        segs, sup = self.cand_seg[idx], self.cand_sup[idx]
        widths = np.diff(self.encoder.offsets).astype(np.int64)
        cat = np.repeat(sup & self.is_cat, widths, axis=1)
        num = np.repeat(sup & ~self.is_cat, widths, axis=1)
        moves = self.D[segs] * (cat + self.cand_t[idx][:, None] * num)
        own = np.flatnonzero(self.cand_lfeat[idx] >= 0)       # a level of its own: leave the applicant's, take it
        if own.size:
            feat = self.cand_lfeat[idx][own]
            block = np.repeat(np.eye(len(self.features), dtype=bool)[feat], widths, axis=1)
            moves[own] = np.where(block, -self.X0[segs[own]], moves[own])
            moves[own, self.col[feat] + self.cand_level[idx][own]] += self.scale[self.col[feat]]
        return moves


def _unit(moves: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(moves, axis=1)
    return np.where(norms[:, None] > 0, moves / np.where(norms > 0, norms, 1.0)[:, None], 0.0)


class _Search:
    """The greedy search of one batch: step 4 of the module docstring, and the ``max_changes`` search."""

    def __init__(self, encoder, model, X0, XK, raw0, rows, probability, found, tol, budget=None):
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
        self.cost = np.sqrt(sq.sum(axis=1))
        self.budget = self.cost.copy() if budget is None else np.asarray(budget, dtype=np.float64)  # never exceeded
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
                for shrink in _SHRINKS:     # rounding can push the decoded cost past the budget: shrink t
                    over = cost > self.budget[segs] * (1 + 1e-12) + _EPS
                    if not over.any():
                        break
                    t = np.where(over, t * np.minimum(self.budget[segs] / np.maximum(cost, _EPS), 1.0) * shrink, t)
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
        def ends(rows):
            s = segs[rows]
            return self._decode(s, self._point(s, support[rows], lo[rows]))[0], self.best.frame(s)

        refine = RawRefinement(self.encoder, self.tol, segs.size, ends)    # brackets wide in raw units go on
        tols = refine.tols
        # t = 0: the categorical changes alone (rows without categorical changes are the applicant: skip)
        first = (support & self.is_cat).any(axis=1)
        candidates = [(np.flatnonzero(first), np.zeros(int(first.sum())))]
        while True:
            where, t = candidates.pop() if candidates else (None, None)
            if where is None:
                where = np.flatnonzero(hi - lo > tols)
                if where.size == 0:
                    if refine.again(lo, hi):
                        continue
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


@dataclass(frozen=True)
class MinimalResult:
    """1-minimal recourses of a batch of segments (see :func:`minimal_recourses`).

    Attributes
    ----------
    rows : DataFrame of shape (n_segments, n_features)
    probability : ndarray of shape (n_segments,)
    n_undone : ndarray of int, shape (n_segments,)
        Changes each recourse gave back.
    n_model_calls : int
    """

    rows: pd.DataFrame
    probability: np.ndarray
    n_undone: np.ndarray
    n_model_calls: int


def minimal_recourses(encoder: Encoder, model, X0: np.ndarray, raw0: pd.DataFrame, rows: pd.DataFrame,
                      probability: np.ndarray, *, found: np.ndarray | None = None,
                      groups: np.ndarray | None = None) -> MinimalResult:
    """Give back every change a recourse does not need: 1-minimal recourses.

    A recourse is 1-minimal when restoring any single one of its changed features to the applicant's value
    (a categorical's whole one-hot block) makes the model reject it (probability below ``model.threshold``,
    the threshold plus any margin). Each round scores, in one model call, every single-undo variant of every
    recourse still changing two features or more; a recourse with accepted variants takes the one that undoes
    its costliest change (the largest squared encoded move, ties to the first feature of the schema), preferring
    a variant that does not repeat another recourse of its group (applicant), and the rounds go on until no
    recourse has an accepted variant.

    Each ordinal change is then brought back to the level nearest the applicant's that the model still accepts,
    every other value kept (the levels between the applicant's and the recourse's, on the allowed side of a
    monotone ordinal and inside the user's allowed levels; an ordinal's levels all cost the same in the
    one-hot encoding, so the prototype's level is often more than the model needs). A recourse whose level came
    down goes through the undo rounds again, since the lower level may leave a change unneeded; so no undo and
    no lower level of any ordinal change is accepted when this returns.

    Parameters
    ----------
    encoder : Encoder
    model : frpd_cli.model.Model
        Judges rows with ``favorable_probability`` at ``model.threshold``.
    X0 : ndarray of shape (n_segments, n_features_out)
        Encoded applicant of each segment.
    raw0 : DataFrame of shape (n_segments, n_features)
        Raw applicant of each segment.
    rows : DataFrame of shape (n_segments, n_features)
        The recourses (raw, accepted by the model).
    probability : ndarray of shape (n_segments,)
        The model's probability of each recourse.
    found : ndarray of bool, shape (n_segments,), optional
        Segments that have a recourse (the others are returned as they are).
    groups : ndarray of int, shape (n_segments,), optional
        The applicant of each segment: a recourse prefers undoing a change that does not make it equal to
        another recourse of its applicant (only the order of the undos changes; the result is still 1-minimal).

    Returns
    -------
    result : MinimalResult

    Notes
    -----
    At most ``max changes - 1`` rounds, one model call each over ``sum of changes`` rows of the recourses
    still being reduced, and one call per mutable ordinal feature over the levels between (again after a
    round of undos that a lowered level started). Undoing a change only removes a feature's move, so a recourse never costs more nor
    changes more features than before, and every rule (immutable, monotone, ranges, integers) it kept still
    holds: the restored values are the applicant's own. The result of a segment depends on that segment only.
    """
    n = len(rows)
    X0 = np.asarray(X0, dtype=np.float64)
    raw0 = raw0.reset_index(drop=True)
    best = _Rows(rows.reset_index(drop=True))
    probability = np.asarray(probability, dtype=np.float64).copy()
    active = np.ones(n, dtype=bool) if found is None else np.asarray(found, dtype=bool).copy()
    n_undone = np.zeros(n, dtype=np.int64)
    names = [f.name for f in encoder.schema.features]
    raw = {c: raw0[c].to_numpy() for c in names}
    calls = 0
    reduce = active.copy()
    while reduce.any():
        calls += _undo_changes(encoder, model, X0, best, raw, names, probability, reduce.copy(), n_undone, groups)
        lowered, n_calls = _lower_levels(encoder, model, best, raw, probability, reduce)
        calls += n_calls
        reduce = lowered
    return MinimalResult(rows=best.frame(), probability=probability, n_undone=n_undone, n_model_calls=calls)


def _undo_changes(encoder, model, X0, best, raw, names, probability, active, n_undone, groups) -> int:
    """The undo rounds of :func:`minimal_recourses` on the segments ``active`` (updated in place: ``best``,
    ``probability``, ``n_undone``); returns the model calls made."""
    calls = 0
    while active.any():
        idx = np.flatnonzero(active)
        sq = _block_sq(encoder, encoder.encode(best.frame(idx), source="the recourses") - X0[idx])
        changed = sq > _EPS * _EPS
        several = changed.sum(axis=1) >= 2
        active[idx[~several]] = False
        idx, sq, changed = idx[several], sq[several], changed[several]
        if idx.size == 0:
            break
        local, feats = np.nonzero(changed)
        variants = best.reverted(raw, idx[local], feats, names)
        calls += 1
        p = score_columns(model, {c: variants[c] for c in names})
        ok = p >= model.threshold
        repeats = _repeats(best, variants, idx[local], groups, names) if groups is not None else np.zeros(ok.size)
        # per recourse, its accepted variants: not repeating another recourse of its group first, then by
        # decreasing cost of the undone change, then schema order
        order = np.lexsort((feats, -sq[local, feats], repeats, local))
        order = order[ok[order]]
        first = order[np.r_[True, local[order][1:] != local[order][:-1]]] if order.size else order
        taken = np.zeros(idx.size, dtype=bool)
        taken[local[first]] = True
        active[idx[~taken]] = False
        if first.size:
            segs = idx[local[first]]
            best.put(segs, variants, take=first)
            probability[segs] = p[first]
            n_undone[segs] += 1
    return calls


def _lower_levels(encoder, model, best, raw, probability, active) -> tuple[np.ndarray, int]:
    """Move each ordinal change of the segments ``active`` back to the level nearest the applicant's that the
    model still accepts (the other features as they are), one model call per ordinal feature.

    A level between the applicant's and the recourse's is on the allowed side of a monotone ordinal; a level
    outside the user's allowed levels (``--range COL=a,b``) is not tried. Updates ``best`` and ``probability``
    in place; returns which segments changed and the model calls made."""
    from .encoding import category_key

    lowered = np.zeros(len(active), dtype=bool)
    calls = 0
    idx = np.flatnonzero(active)
    for f in encoder.schema.features:
        if f.kind != "ordinal" or f.mutability == "immutable" or len(f.levels) < 3 or idx.size == 0:
            continue
        keys = [category_key(v) for v in f.levels]
        position = dict(zip(keys, range(len(keys))))
        allowed = f.in_range(list(f.levels))
        own = [position.get(category_key(v)) for v in raw[f.name][idx].tolist()]
        now = [position.get(category_key(v)) for v in best.cols[f.name][idx].tolist()]
        segs, levels = [], []                         # each segment's levels between, nearest the applicant first
        for s, a, b in zip(idx.tolist(), own, now):
            if a is None or b is None or abs(b - a) < 2:
                continue
            step = 1 if b > a else -1
            for k in range(a + step, b, step):
                if allowed[k]:
                    segs.append(s)
                    levels.append(k)
        if not segs:
            continue
        segs = np.asarray(segs, dtype=np.int64)
        columns = {c: v[segs] for c, v in best.cols.items()}
        column = columns[f.name]
        values = [f.levels[k] for k in levels]
        if column.dtype == object or not all(isinstance(v, (int, float, np.number)) for v in values):
            column = column.astype(object)
        for i, value in enumerate(values):
            column[i] = value
        columns[f.name] = column
        calls += 1
        p = score_columns(model, columns)
        ok = np.flatnonzero(p >= model.threshold)
        # the first accepted variant of each segment is its nearest level
        first = ok[np.r_[True, segs[ok][1:] != segs[ok][:-1]]] if ok.size else ok
        if first.size:
            best.put(segs[first], columns, take=first)
            probability[segs[first]] = p[first]
            lowered[segs[first]] = True
    return lowered, calls


def _repeats(best: _Rows, variants: dict, segs: np.ndarray, groups: np.ndarray, names: list) -> np.ndarray:
    """Whether each variant (of segment ``segs[i]``; ``variants`` a dict of column arrays) equals the current row
    of another segment of its group."""
    by_group: dict = {}
    for s, key in enumerate(best.keys(names)):
        by_group.setdefault(int(groups[s]), {}).setdefault(key, set()).add(s)
    out = np.zeros(len(segs), dtype=np.int64)
    for i, key in enumerate(_row_keys(variants, names)):
        owners = by_group.get(int(groups[segs[i]]), {}).get(key, set())
        out[i] = bool(owners - {int(segs[i])})
    return out
