"""Recourses that offer different moves, not one move in three sizes.

Sparsification returns every feature the model does not need to the applicant's value. When the model leans on
one feature, K prototypes that differ as rows can all become the same recourse in different amounts
(``ChgOffPrinGr: 0 -> 71,969``, ``-> 72,258``, ``-> 73,583``): three options on paper, one for the person.

:func:`other_directions` finds, among an applicant's recourses (cheapest first), each one whose move points
nearly where a cheaper one's does (cosine of the two moves in the encoded space at least
:data:`SAME_DIRECTION`). It then looks for recourses along other features: each mutable feature is taken to
where the model's probability rises most when it moves alone (a numeric feature with a move bound to the end
of the applicant's bounds inside the training range, :func:`frpd_cli.candidates.favourable_edges`; a
categorical one to its best allowed level, :func:`favourable_levels`), one feature at a time, then pairs and
triples of the :data:`COMBINED` most promising moves; the segment from the applicant to each such point the
model accepts is interpolated, sparsified and made 1-minimal like a prototype's, at the same threshold and
margin. A repeat is replaced by the recourse pointing least like the ones kept (cosines to one decimal), then
the cheapest, if it points elsewhere than every one of them, costs at most the repeat's plain recourse, and the
applicant's replacements together add at most :data:`EXTRA_CHANGES` changed features; a repeat with none stays.

A recourse that another of its plan *dominates* (:func:`dominated`: the other makes only changes it makes too,
each no larger) is a repeat as well: whatever it asks, the other asks less. Its replacement, and that of a
recourse equal to another of its plan, may cost up to :data:`DOMINATED_COST_FACTOR` times its plain recourse when
none within the plain recourse's cost points elsewhere, since without one
:func:`frpd_cli.planning.interpolate_plans` drops it from the plan (a dominated option is no option).
The replacement keeps the prototype number of the recourse it replaces.

Two recourses of a plan may also be *the same advice* (:func:`same_advice`): they change the same features, move
every categorical one to the same level and every numeric one to targets less than :data:`SAME_ADVICE` of the
feature's move span apart (``Term: 240 -> 173`` beside ``240 -> 174``). The dearer one is a repeat too, replaced
like a dominated one, and :func:`frpd_cli.planning.interpolate_plans` drops it when nothing replaces it.

Everything depends only on each applicant's own segments, so plans do not depend on chunking or workers, and
``frpd interpolate`` finds what ``frpd plan`` finds.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from .sparsify import _EPS, changed_features

__all__ = ["SAME_DIRECTION", "DOMINATED_COST_FACTOR", "SAME_ADVICE", "same_direction_repeats", "dominated",
           "advice_spans", "same_advice", "favourable_levels", "other_directions"]

#: Two recourses of an applicant repeat one another when the cosine of their moves (encoded space) is at least this.
SAME_DIRECTION = 0.9
#: The most features a replacement moves (pushed together to their ends; sparsification may return some).
MAX_MOVED = 3
#: Combinations of two or three moves are made of the applicant's this many most promising single moves.
COMBINED = 6
#: An applicant's replacements together change at most this many features more than the recourses they replace.
EXTRA_CHANGES = 2
#: The most features a trade (moves made together and not sparsified, for a recourse that would leave the plan)
#: moves: pairs only (triples added 1-2 recourses per 100 applicants on the shared datasets, for a model call more).
MAX_TRADED = 2
#: The replacement of a recourse another one dominates (:func:`dominated`) may cost up to this many times its plain
#: recourse: without one the dominated recourse leaves the plan.
DOMINATED_COST_FACTOR = 2.0
#: Two recourses of a plan that change the same features, categorical ones to the same levels, are the same advice
#: when every numeric target differs by less than this share of the feature's move span (:func:`advice_spans`):
#: 3 months of SBA's Term (span 306), 9,936 of its ChgOffPrinGr (span 993,600), half a year of German's age.
SAME_ADVICE = 0.01


def _unit(D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    norms = np.linalg.norm(D, axis=1)
    return D / np.where(norms > 0, norms, 1.0)[:, None], norms


def _same_row(Z: np.ndarray, groups: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Which usable segments hold the same encoded row as an earlier usable segment of their group."""
    out = np.zeros(len(Z), dtype=bool)
    seen: dict = {}
    for s in np.flatnonzero(usable):
        key = (int(groups[s]), Z[s].tobytes())
        out[s] = key in seen
        seen[key] = True
    return out


def _beaten(encoder, kept: dict, owners: list, D: np.ndarray, X0: np.ndarray) -> np.ndarray:
    """Whether one of the moves ``kept[owners[i]]`` (encoded moves from the applicant ``X0[i]``) dominates the
    move ``D[i]``, for every ``i``."""
    rows, starts = [], []                         # the kept moves, each with the probe it is compared with
    for i, owner in enumerate(owners):
        for move in kept[owner]:
            rows.append(move)
            starts.append(i)
    out = np.zeros(len(D), dtype=bool)
    if not rows:
        return out
    starts = np.asarray(starts, dtype=np.int64)
    Z = np.vstack([X0[starts] + np.asarray(rows), X0 + D])
    X = np.vstack([X0[starts], X0])
    hit = _dominates(encoder, Z, X, np.arange(len(rows)), len(rows) + starts)
    out[starts[hit]] = True
    return out


def _within(alts: list, cost: np.ndarray, limit: float) -> list:
    """The replacements of ``alts`` whose cost is at most ``limit`` (up to rounding)."""
    return [b for b in alts if cost[b] <= limit * (1 + 1e-12) + 1e-12]


def _similarity(kept: list, direction: np.ndarray) -> float:
    """The largest cosine between a unit ``direction`` and the unit directions ``kept`` (-1 without any)."""
    return max(float(d @ direction) for d in kept) if kept else -1.0


def _members(groups: np.ndarray) -> dict:
    """The positions of each value of ``groups`` (ascending), from one stable sort instead of one pass over
    ``groups`` per value."""
    groups = np.asarray(groups)
    if groups.size == 0:
        return {}
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    bounds = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    return dict(zip(ordered[np.r_[0, bounds]].tolist(), np.split(order, bounds)))


def same_direction_repeats(D: np.ndarray, groups: np.ndarray, usable: np.ndarray) -> list[int]:
    """Segments whose move points within :data:`SAME_DIRECTION` of a cheaper usable segment of the same group.

    Parameters
    ----------
    D : ndarray of shape (n_segments, n_features_out)
        Each segment's move (recourse minus applicant, encoded).
    groups : ndarray of int, shape (n_segments,)
        The applicant of each segment.
    usable : ndarray of bool, shape (n_segments,)
        Segments with a recourse.

    Returns
    -------
    list of int
        Ascending. Within a group the segments are visited cheapest first (ties: lower segment first); a segment
        is a repeat when its cosine with an earlier non-repeat is at least :data:`SAME_DIRECTION`.

    Examples
    --------
    >>> D = np.array([[1.0, 0.0], [2.0, 0.1], [0.0, 1.0], [3.0, 0.0]])
    >>> same_direction_repeats(D, np.array([0, 0, 0, 1]), np.ones(4, dtype=bool))
    [1]
    """
    A, norms = _unit(np.asarray(D, dtype=np.float64))
    groups = np.asarray(groups)
    ok = usable & (norms > 0)
    members = _members(groups)
    out = []
    for g in dict.fromkeys(groups.tolist()):
        segs = members[g]
        segs = segs[ok[segs]]
        segs = segs[np.lexsort((segs, norms[segs]))]
        kept: list[int] = []
        for s in segs:
            if kept and float(np.max(A[kept] @ A[s])) >= SAME_DIRECTION:
                out.append(int(s))
            else:
                kept.append(int(s))
    return sorted(out)


def dominated(encoder, Z: np.ndarray, X0: np.ndarray, groups: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Which recourses ask more than another recourse of their applicant in every change that one makes.

    Recourse ``a`` *dominates* recourse ``b`` of the same applicant when they differ and every feature ``a``
    changes, ``b`` changes too and at least as much: a numeric feature the same way and at least as far, a
    categorical one to the same level, an ordinal one the same way and at least as many levels. Whatever ``b``
    asks of a person, ``a`` asks less, so ``b`` is no option beside it.

    Parameters
    ----------
    encoder : Encoder
    Z : ndarray of shape (n_segments, n_features_out)
        Encoded recourses (decoded rows encoded again: categorical blocks are one-hot).
    X0 : ndarray of shape (n_segments, n_features_out)
        Encoded applicant of each segment.
    groups : ndarray of int, shape (n_segments,)
        The applicant of each segment.
    usable : ndarray of bool, shape (n_segments,)
        Segments with a recourse (the others neither dominate nor are dominated).

    Returns
    -------
    ndarray of bool, shape (n_segments,)

    Examples
    --------
    A numeric feature ``x`` and a categorical one: the second recourse moves ``x`` farther and changes the
    category too, the third moves ``x`` the other way.

    >>> from frpd_cli.encoding import fit_encoder
    >>> from frpd_cli.schema import Feature, Schema
    >>> schema = Schema(features=(Feature("x", "continuous"), Feature("c", "categorical", levels=("a", "b"))),
    ...                 target="y", favorable=1)
    >>> enc = fit_encoder(schema, pd.DataFrame({"x": [0.0, 10.0], "c": ["a", "b"]}), scale="minmax")
    >>> now = enc.encode(pd.DataFrame({"x": [5.0] * 3, "c": ["a"] * 3}))
    >>> Z = enc.encode(pd.DataFrame({"x": [6.0, 8.0, 4.0], "c": ["a", "b", "a"]}))
    >>> dominated(enc, Z, now, np.zeros(3, dtype=int), np.ones(3, dtype=bool)).tolist()
    [False, True, False]
    """
    Z = np.asarray(Z, dtype=np.float64)
    X0 = np.asarray(X0, dtype=np.float64)
    out = np.zeros(len(Z), dtype=bool)
    pairs = [(a, b) for segs in _members(np.asarray(groups)).values() if len(segs) > 1
             for a in segs if usable[a] for b in segs if usable[b] and a != b]
    if not pairs:
        return out
    a, b = np.asarray(pairs, dtype=np.int64).T
    out[b[_dominates(encoder, Z, X0, a, b)]] = True
    return out


def _dominates(encoder, Z: np.ndarray, X0: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether row ``a[i]`` of ``Z`` dominates row ``b[i]`` (see :func:`dominated`); both moves start from the same
    applicant (rows ``a[i]`` and ``b[i]`` of ``X0`` are equal)."""
    ok = np.ones(len(a), dtype=bool)
    differ = np.zeros(len(a), dtype=bool)
    changed_all = changed_features(encoder, Z, X0)
    for j, f in enumerate(encoder.schema.features):
        lo, hi = int(encoder.offsets[j]), int(encoder.offsets[j + 1])
        changed = changed_all[:, j]
        if f.is_categorical:
            level = np.argmax(Z[:, lo:hi], axis=1)
            if f.kind == "ordinal":
                moves = level - np.argmax(X0[:, lo:hi], axis=1)
                same = moves[a] == moves[b]
                at_least = (moves[a] * moves[b] > 0) & (np.abs(moves[a]) <= np.abs(moves[b]))
            else:
                same = at_least = level[a] == level[b]
        else:
            d = Z[:, lo] - X0[:, lo]
            same = np.abs(d[a] - d[b]) <= _EPS
            at_least = (d[a] * d[b] > 0) & (np.abs(d[a]) <= np.abs(d[b]) + _EPS)
        ok &= ~changed[a] | (changed[b] & at_least)
        differ |= (changed[a] != changed[b]) | (changed[a] & ~same)
    return ok & differ


def advice_spans(encoder) -> np.ndarray:
    """Per feature, the raw span numeric targets are compared against (:func:`same_advice`); NaN for categoricals.

    The span of the move bound (``--max-move``, :func:`frpd_cli.schema.move_span`: the training range, capped at
    twice that of the central 99% of the values when outliers stretch it) where the feature has one, else the
    training range (max minus min). Neither depends on ``--scale`` or ``--weight``: whether two targets are the
    same advice is a matter of raw values, not of how a move is priced.

    Examples
    --------
    >>> from frpd_cli.encoding import fit_encoder
    >>> from frpd_cli.schema import Feature, Schema
    >>> schema = Schema(features=(Feature("x", "continuous"), Feature("n", "integer", max_move=25.0,
    ...                           max_move_share=0.25), Feature("c", "categorical", levels=("a", "b"))),
    ...                 target="y", favorable=1)
    >>> enc = fit_encoder(schema, pd.DataFrame({"x": [0.0, 10.0], "n": [0, 500], "c": ["a", "b"]}), scale="minmax")
    >>> advice_spans(enc).tolist()
    [10.0, 100.0, nan]
    """
    out = np.full(len(encoder.schema.features), np.nan)
    for j, f in enumerate(encoder.schema.features):
        if f.is_categorical:
            continue
        share = f.max_move_share
        if f.max_move is not None and share is not None and math.isfinite(share) and share > 0:
            out[j] = float(f.max_move) / float(share)
        else:
            out[j] = float(encoder.maximum[j]) - float(encoder.minimum[j])
    return out


def _alike(encoder, Z: np.ndarray, X0: np.ndarray, values: dict, a: np.ndarray, b: np.ndarray, *,
           share: float) -> np.ndarray:
    """Whether recourses ``a[i]`` and ``b[i]`` (rows of ``Z``, moves from the same applicant) are the same advice:
    the same changed features, categorical ones at the same level, numeric targets (``values``: feature index ->
    raw values of every row) less than ``share`` of the feature's span (:func:`advice_spans`) apart."""
    changed = changed_features(encoder, Z, X0)
    ok = np.all(changed[a] == changed[b], axis=1)
    spans = advice_spans(encoder)
    for j, f in enumerate(encoder.schema.features):
        both = ok & changed[a, j]
        if not both.any():
            continue
        if f.is_categorical:
            lo, hi = int(encoder.offsets[j]), int(encoder.offsets[j + 1])
            level = np.argmax(Z[:, lo:hi], axis=1)
            ok &= ~both | (level[a] == level[b])
        else:
            v = values[j]
            with np.errstate(invalid="ignore"):
                near = np.abs(v[a] - v[b]) < share * spans[j]
            ok &= ~both | near
    return ok


def same_advice(encoder, rows: pd.DataFrame, Z: np.ndarray, X0: np.ndarray, groups: np.ndarray,
                usable: np.ndarray, *, share: float = SAME_ADVICE) -> np.ndarray:
    """Which recourses give the same advice as a cheaper recourse of their applicant.

    Two recourses of one applicant are the same advice when they change the same set of features, move every
    categorical feature they change to the same level (an ordinal one too), and every numeric target they set
    differs by less than ``share`` of the feature's span (:func:`advice_spans`): ``Term: 240 -> 173`` and
    ``Term: 240 -> 174`` (span 306) are one option, not two, and so are two recourses equal but for such
    differences. Equal recourses are the same advice too.

    Parameters
    ----------
    encoder : Encoder
    rows : DataFrame of shape (n_segments, n_features)
        Raw recourses (their numeric values are compared).
    Z : ndarray of shape (n_segments, n_features_out)
        The same recourses encoded (which features they change, at which levels).
    X0 : ndarray of shape (n_segments, n_features_out)
        Encoded applicant of each segment.
    groups : ndarray of int, shape (n_segments,)
        The applicant of each segment.
    usable : ndarray of bool, shape (n_segments,)
        Segments with a recourse (the others are never compared).
    share : float, default=SAME_ADVICE

    Returns
    -------
    ndarray of bool, shape (n_segments,)
        Within a group the recourses are visited cheapest first (Euclidean cost in the encoded space; ties: lower
        segment first); one is flagged when it is the same advice as an earlier one not flagged, so that of each
        set of alike recourses the cheapest stays.

    Examples
    --------
    >>> from frpd_cli.encoding import fit_encoder
    >>> from frpd_cli.schema import Feature, Schema
    >>> schema = Schema(features=(Feature("term", "integer"), Feature("c", "categorical", levels=("a", "b"))),
    ...                 target="y", favorable=1)
    >>> enc = fit_encoder(schema, pd.DataFrame({"term": [0, 300], "c": ["a", "b"]}), scale="minmax")
    >>> rows = pd.DataFrame({"term": [173, 174, 150, 173], "c": ["a", "a", "a", "b"]})
    >>> now = enc.encode(pd.DataFrame({"term": [240] * 4, "c": ["a"] * 4}))
    >>> same_advice(enc, rows, enc.encode(rows), now, np.zeros(4, dtype=int), np.ones(4, dtype=bool)).tolist()
    [True, False, False, False]
    """
    Z = np.asarray(Z, dtype=np.float64)
    X0 = np.asarray(X0, dtype=np.float64)
    out = np.zeros(len(Z), dtype=bool)
    usable = np.asarray(usable, dtype=bool)
    cost = np.linalg.norm(Z - X0, axis=1) if len(Z) else np.zeros(0)
    ordered = {}
    for g, segs in _members(np.asarray(groups)).items():
        segs = segs[usable[segs]]
        if len(segs) > 1:
            ordered[g] = segs[np.lexsort((segs, cost[segs]))]
    pairs = [(int(x), int(y)) for segs in ordered.values() for i, x in enumerate(segs) for y in segs[i + 1:]]
    if not pairs:
        return out
    a, b = np.asarray(pairs, dtype=np.int64).T
    values = {j: pd.to_numeric(rows[f.name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
              for j, f in enumerate(encoder.schema.features) if not f.is_categorical}
    hit = _alike(encoder, Z, X0, values, a, b, share=share)
    alike = set(zip(a[hit].tolist(), b[hit].tolist()))
    for segs in ordered.values():
        kept: list[int] = []
        for s in segs.tolist():
            if any((k, s) in alike for k in kept):
                out[s] = True
            else:
                kept.append(s)
    return out


def moved_rows(schema, base: pd.DataFrame, owner, changes) -> pd.DataFrame:
    """Rows ``base.iloc[owner]`` with the values of ``changes`` (one dict of feature -> value per row) set.

    Numeric columns stay float; a text column keeps its object dtype.
    """
    frame = base.iloc[list(owner)].reset_index(drop=True)
    for name in dict.fromkeys(name for change in changes for name in change):
        numeric = schema.feature(name).is_numeric
        values = frame[name].to_numpy(dtype=np.float64).copy() if numeric else frame[name].tolist()
        for j, change in enumerate(changes):
            if name in change:
                values[j] = change[name]
        frame[name] = values if numeric or frame[name].dtype != object else pd.Series(values, dtype=object)
    return frame


def favourable_levels(schema, model, base: pd.DataFrame) -> dict:
    """Per mutable categorical or ordinal feature, per applicant: the level the feature may take (inside its
    allowed levels, the allowed side of a monotone ordinal, within an ordinal's move bound) where the model's
    probability is highest when that feature alone moves there, if higher than the applicant's own; None where no
    level raises it.

    One model call for all the applicants, features and levels.

    Parameters
    ----------
    schema : frpd_cli.schema.Schema
    model : frpd_cli.model.Model
    base : DataFrame of shape (n_applicants, n_features)
        The applicants' raw values.

    Returns
    -------
    dict of str to list
    """
    from .encoding import category_key

    features = [f for f in schema.features if f.is_categorical and f.mutability != "immutable" and len(f.levels) > 1]
    n = len(base)
    out = {f.name: [None] * n for f in features}
    at = []                                       # (feature, applicant, level) of each probe row after the first n
    for f in features:
        keys = [category_key(v) for v in f.levels]
        allowed = f.in_range(list(f.levels))
        for a, value in enumerate(base[f.name].tolist()):
            own = category_key(value)
            pos = keys.index(own) if own in keys else None
            for j, level in enumerate(f.levels):
                if keys[j] == own or not allowed[j]:
                    continue
                if f.kind == "ordinal" and pos is not None and (
                        (f.mutability == "increasing" and j < pos) or (f.mutability == "decreasing" and j > pos)
                        or f.levels_beyond(j, pos)):
                    continue
                at.append((f.name, a, level))
    if not at:
        return out
    frame = moved_rows(schema, base, list(range(n)) + [a for _, a, _ in at],
                       [{}] * n + [{name: level} for name, _, level in at])
    prob = np.asarray(model.favorable_probability(frame), dtype=np.float64)
    best = {name: prob[:n].copy() for name in out}
    for j, (name, a, level) in enumerate(at, start=n):
        if prob[j] > best[name][a]:
            best[name][a] = prob[j]
            out[name][a] = level
    return out


def _moves(encoder, judge, base: pd.DataFrame) -> list:
    """Per applicant: the single-feature moves that raise its probability, as (feature, value): numeric features
    with a move bound to the end of their bounds, categorical ones to their best level."""
    from .candidates import favourable_edges

    schema = encoder.schema
    names = list(schema.feature_names)
    edges = favourable_edges(encoder, judge, [dict(zip(names, r)) for r in base.itertuples(index=False, name=None)])
    levels = favourable_levels(schema, judge, base)
    out = []
    for a in range(len(base)):
        mine = [(name, float(at[a])) for name, at in edges.items() if not np.isnan(at[a])]
        mine += [(name, at[a]) for name, at in levels.items() if at[a] is not None]
        out.append(sorted(mine, key=lambda m: names.index(m[0])))
    # each applicant's moves, the one that raises the probability most first (one model call)
    owner = [a for a in range(len(base)) for _ in out[a]]
    if owner:
        frame = moved_rows(schema, base, owner, [{name: value} for a in range(len(base)) for name, value in out[a]])
        prob = np.asarray(judge.favorable_probability(frame), dtype=np.float64)
        at = 0
        for a in range(len(base)):
            order = sorted(range(len(out[a])), key=lambda j: (-prob[at + j], j))
            out[a] = [out[a][j] for j in order]
            at += len(order)
    return out


def _probe_recourses(encoder, judge, X0, raw0, owners, moves, size, *, tol, max_changes, sparse=True):
    """Per owner (a segment standing for its applicant): the recourses towards each combination of ``size`` of its
    ``moves`` made together (the other features at the applicant's values), sparsified (``sparse``) and 1-minimal.
    Returns (position in ``owners`` of each, rows, probability, usable)."""
    from .interpolation import interpolate_linear
    from .sparsify import minimal_recourses, sparsify_recourses

    base = raw0.iloc[owners].reset_index(drop=True)
    probes = [(a, dict(combo)) for a in range(len(base)) for combo in itertools.combinations(moves[a], size)]
    if not probes:
        return np.zeros(0, dtype=np.int64), base.iloc[:0], np.zeros(0), np.zeros(0, dtype=bool)
    owner = np.asarray([a for a, _ in probes], dtype=np.int64)
    frame = moved_rows(encoder.schema, base, owner, [combo for _, combo in probes])
    # only the points the model accepts at the margin can end a recourse: the others are not interpolated
    ends_ok = np.asarray(judge.favorable_probability(frame), dtype=np.float64) >= judge.threshold
    if not ends_ok.any():
        return np.zeros(0, dtype=np.int64), base.iloc[:0], np.zeros(0), np.zeros(0, dtype=bool)
    owner, frame = owner[ends_ok], frame[ends_ok].reset_index(drop=True)
    XK = encoder.encode(frame, source="the moves along other features")
    Xs = X0[owners][owner]
    rs = base.iloc[owner].reset_index(drop=True)
    line = interpolate_linear(encoder, judge, Xs, XK, rs, tol=tol)
    rows, probability, ok = line.rows, line.probability, line.found.copy()
    if sparse:
        reduced = sparsify_recourses(encoder, judge, Xs, XK, rs, line.rows, line.probability, found=line.found,
                                     max_changes=max_changes, tol=tol, groups=owner)
        rows, probability, ok = reduced.rows, reduced.probability, ok & reduced.kept
    elif max_changes is not None and ok.any():
        Z = encoder.encode(rows.loc[ok], source="the moves along other features")
        ok[np.flatnonzero(ok)] = changed_features(encoder, Z, Xs[ok]).sum(axis=1) <= max_changes
    minimal = minimal_recourses(encoder, judge, Xs, rs, rows, probability, found=ok, groups=owner)
    return owner, minimal.rows, minimal.probability, ok


def other_directions(encoder, judge, X0: np.ndarray, raw0: pd.DataFrame, seg_app: np.ndarray, result, usable, *,
                     tol: float = 1e-3, max_changes: int | None = None, cost_limit: np.ndarray | None = None):
    """Replace recourses that repeat a cheaper one's direction by one-feature recourses that point elsewhere.

    Parameters
    ----------
    encoder : Encoder
    judge : frpd_cli.model.Model
        Accepts rows at the threshold plus the margin.
    X0 : ndarray of shape (n_segments, n_features_out)
        Encoded applicant of each segment.
    raw0 : DataFrame of shape (n_segments, n_features)
        Raw applicant of each segment.
    seg_app : ndarray of int, shape (n_segments,)
        The applicant of each segment.
    result : frpd_cli.interpolation.LinearResult
        The segments' recourses (``rows``, ``probability``).
    usable : ndarray of bool, shape (n_segments,)
        Segments with a recourse.
    cost_limit : ndarray of shape (n_segments,), optional
        The most a replacement of each segment's recourse may cost (the bound of :mod:`frpd_cli.sparsify`: the
        cost of the segment's plain recourse).

    Returns
    -------
    LinearResult
        ``result`` with the replaced segments' rows and probabilities.
    """
    from .sparsify import changed_features

    names = list(encoder.schema.feature_names)
    if not len(seg_app):
        return result
    Z = encoder.encode(result.rows, source="the recourses")
    repeats = same_direction_repeats(Z - X0, seg_app, usable)
    worse = dominated(encoder, Z, X0, seg_app, usable) | _same_row(Z, seg_app, usable) | \
        same_advice(encoder, result.rows, Z, X0, seg_app, usable)
    repeats = sorted(set(repeats) | set(np.flatnonzero(worse).tolist()))
    if not repeats:
        return result
    A, cost_a = _unit(Z - X0)
    n_seg = changed_features(encoder, Z, X0).sum(axis=1)
    is_repeat = np.zeros(len(seg_app), dtype=bool)
    is_repeat[repeats] = True
    # per applicant: the directions kept so far and its repeats not yet replaced (cheapest first)
    kept, kept_moves, todo, extra = {}, {}, {}, {}
    of_app = _members(seg_app)
    movable = usable & (cost_a > 0)
    for a in dict.fromkeys(int(seg_app[s]) for s in repeats):
        segs = of_app[a]
        segs = segs[movable[segs]]
        segs = segs[np.lexsort((segs, cost_a[segs]))]
        kept[a] = [A[s] for s in segs if not is_repeat[s]]
        kept_moves[a] = [Z[s] - X0[s] for s in segs if not is_repeat[s]]
        todo[a] = [int(s) for s in segs if is_repeat[s]]
        extra[a] = EXTRA_CHANGES
    taken = []                                    # (segment, rows, position in rows, probability)
    everyone = list(todo)
    first_of = {a: int(of_app[a][0]) for a in everyone}
    moves = dict(zip(everyone, _moves(encoder, judge, raw0.iloc[[first_of[a] for a in everyone]]
                                      .reset_index(drop=True))))
    # fewer moved features first; then, for the recourses that would leave the plan (dominated or equal to
    # another), moves made together and not sparsified: a trade between features that no single one beats
    passes = [(size, True) for size in range(1, MAX_MOVED + 1)] + [(size, False) for size in range(2, MAX_TRADED + 1)]
    for size, sparse in passes:
        if not sparse:
            todo = {a: [s for s in todo[a] if worse[s]] for a in todo}
        apps = [a for a in everyone if todo[a]]
        if not apps:                              # todo only shrinks: no later pass has work either
            break
        first = [first_of[a] for a in apps]
        tried = [moves[a] if size == 1 else moves[a][:COMBINED] for a in apps]
        owner, rows, probability, ok = _probe_recourses(encoder, judge, X0, raw0, first, tried, size, tol=tol,
                                                        max_changes=max_changes, sparse=sparse)
        if not ok.any():
            continue
        Zb = encoder.encode(rows, source="the recourses along other features")
        Xb = X0[first][owner]
        Db = Zb - Xb
        B, cost_b = _unit(Db)
        if not sparse:                            # a trade another recourse of the plan beats is no replacement
            ok &= ~_beaten(encoder, kept_moves, [apps[k] for k in owner], Db, Xb)
        n_changes = changed_features(encoder, Zb, Xb).sum(axis=1)
        of_owner = _members(owner)
        movable_b = ok & (cost_b > 0)
        for k, a in enumerate(apps):
            alts = of_owner.get(k, owner[:0])
            alts = alts[movable_b[alts]]
            alts = list(alts[np.lexsort((alts, cost_b[alts]))])
            while todo[a] and alts:
                s0 = todo[a][0]
                short = [b for b in alts if n_changes[b] <= n_seg[s0] + extra[a]]
                fits = short if cost_limit is None else _within(short, cost_b, cost_limit[s0])
                if cost_limit is None or not worse[s0]:
                    alts = pool = fits
                else:
                    # a dominated recourse leaves the plan if it is not replaced: when no replacement within the
                    # cost limit points elsewhere, a dearer one (up to DOMINATED_COST_FACTOR) beats none
                    pool = [b for b in fits if _similarity(kept[a], B[b]) < SAME_DIRECTION] or _within(
                        short, cost_b, DOMINATED_COST_FACTOR * cost_limit[s0])
                if not pool:
                    break
                # the least similar to the directions kept (cosines to 2 decimals), then the cheapest
                sim = [_similarity(kept[a], B[b]) for b in pool]
                j = min(range(len(pool)), key=lambda j: (round(sim[j], 1), j))
                b = pool[j]
                alts.remove(b)
                if sim[j] >= SAME_DIRECTION:
                    break
                kept[a].append(B[b])
                kept_moves[a].append(Db[b])
                extra[a] -= max(0, int(n_changes[b]) - int(n_seg[s0]))
                taken.append((todo[a].pop(0), rows, int(b), float(probability[b])))
    if not taken:
        return result
    new_rows = result.rows.copy()
    new_prob = np.asarray(result.probability, dtype=np.float64).copy()
    segs = np.asarray([s for s, *_ in taken], dtype=np.int64)
    new_prob[segs] = [p for *_, p in taken]
    for c in names:
        values = [rows[c].iloc[b] for _, rows, b, _ in taken]
        column = new_rows[c]
        if column.dtype.kind in "iuf" and not all(isinstance(v, (int, float, np.number)) for v in values):
            column = column.astype(object)
        elif column.dtype.kind in "iu" and any(float(v) != int(v) for v in values):
            column = column.astype(np.float64)
        array = column.to_numpy(copy=True)
        array[segs] = values
        new_rows[c] = array
    return replace(result, rows=new_rows, probability=new_prob)
