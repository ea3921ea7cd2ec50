"""A direct search from the applicant's own row, for applicants the training rows leave without a recourse.

frpd's recourses lead towards favourable training rows (the prototypes) that pass the applicant's rules. When no
such row exists (an age horizon of a few years and immutable features can rule out every one), the model may
still accept a point next to the applicant. :func:`direct_recourses` looks for it feature by feature:

1. Single changes. Every mutable feature on its own: each level of a categorical or ordinal feature the rules
   allow; a numeric feature on a grid of :data:`GRID` values on each allowed side of the applicant's value, out to
   the end of its bounds (the training range, ``--range``, ``--max-move`` and its monotone direction, whichever is
   tightest); the first grid value the judge accepts is then brought back towards the applicant by bisection, so
   the move is the least the judge accepts along that feature, within the grid's step where the judge's answer
   changes more than once inside it.
2. Pairs, only when no single change is accepted (and ``--max-changes`` allows two): every pair of mutable features,
   each on its allowed levels or on every second grid value, at most :data:`PAIR_CAP` rows per applicant; the
   first numeric part of an accepted pair is bisected back towards the applicant the same way.
3. More changes, only when no pair is accepted (and ``--max-changes`` allows three): a beam search adding one
   single change at a time to the :data:`BEAM` rows the judge scores highest, up to every mutable feature; in each
   accepted row the changes it does not need are undone and the numeric ones bisected back towards the applicant.
   Unlike the grids of the first two stages this is a heuristic: it may miss a change that exists.

Every row the search proposes passes the same feature rules as the final verification
(:func:`frpd_cli.verification.recourse_violations`) before it is scored, and is accepted only by the judge the
other stages ask (the model at its threshold plus ``--margin``, and every other model of ``--also-valid-for`` /
``--robust``). The search depends only on the applicant's own row, so a plan does not depend on the other
applicants of its chunk; the rows of a chunk's applicants are scored together, one model call per stage or
bisection round.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["GRID", "PAIR_CAP", "BEAM", "DIRECT_NOTE", "DirectSearch", "direct_recourses"]

#: Grid values on each side of a numeric feature's value (single changes; pairs use every second one).
GRID = 8
#: The most rows the pair search scores for one applicant.
PAIR_CAP = 20_000
#: Rows each step of the search for more than two changes carries on.
BEAM = 64
#: Bisection rounds at most (a round halves the bracket; integers and rounded values stop sooner).
_ROUNDS = 30
#: The note a recourse of the direct search carries in its plan's reason.
DIRECT_NOTE = "found by a direct search from the applicant: no training row within the rules led to a recourse"


@dataclass(frozen=True)
class DirectSearch:
    """What the direct search found for one applicant.

    Attributes
    ----------
    rows : list of dict
        Accepted rows (every feature's raw value), cheapest first, at most one per changed-value combination.
    costs : list of float
        Encoded distance of each row from the applicant.
    n_changes : int
        1 when single changes were accepted, 2 for pairs, 0 when nothing was.
    pairs_searched, pairs_total : int
        Feature pairs scored and feature pairs there were (the pair search stops at :data:`PAIR_CAP` rows).
    """

    rows: list
    costs: list
    n_changes: int
    pairs_searched: int = 0
    pairs_total: int = 0


def _allowed_levels(f, v0) -> list:
    """The levels other than the applicant's a recourse may move a categorical or ordinal feature to (the rules
    themselves are checked again on every row, :func:`_keep_lawful`)."""
    return [level for level in f.levels if level != v0 and not _same_text(level, v0)]


def _same_text(a, b) -> bool:
    return str(a) == str(b)


def _numeric_bounds(encoder, j: int, f, v0: float) -> tuple[float, float]:
    """The lowest and highest value a recourse may move numeric feature ``j`` to from ``v0``: the training range,
    the feature's bounds (``--range``, ``--max-move``) and its monotone direction."""
    lo, hi = float(encoder.minimum[j]), float(encoder.maximum[j])
    if f.has_range:
        b_lo, b_hi = f.bounds(np.asarray([v0], dtype=np.float64))
        lo, hi = max(lo, float(b_lo[0])), min(hi, float(b_hi[0]))
    if f.mutability == "increasing":
        lo = max(lo, v0)
    elif f.mutability == "decreasing":
        hi = min(hi, v0)
    if f.kind == "integer":
        lo, hi = math.ceil(lo), math.floor(hi)
    return lo, hi


def _rounded(encoder, j: int, f, value: float):
    """``value`` as a raw value of feature ``j``: a whole number for integers, the training decimals otherwise."""
    if f.kind == "integer":
        return int(round(value))
    d = encoder.decimals[j] if j < len(encoder.decimals) else None
    return float(round(value, d)) if d is not None else float(value)


def _grid(encoder, j: int, f, v0: float) -> list[list]:
    """Per allowed side of ``v0`` (up, then down): the grid values from next to ``v0`` out to the bound."""
    if not math.isfinite(v0):
        return []
    lo, hi = _numeric_bounds(encoder, j, f, v0)
    sides = []
    ends = [end for end, usable in ((hi, hi > v0), (lo, lo < v0)) if usable and math.isfinite(end) and lo <= hi]
    for end in ends:
        values = []
        for i in range(1, GRID + 1):
            v = _rounded(encoder, j, f, v0 + (end - v0) * i / GRID)
            if float(v) != v0 and (not values or values[-1] != v) and lo <= float(v) <= hi:
                values.append(v)
        if values:
            sides.append(values)
    return sides


def _keep_lawful(encoder, rows: list, origins: list) -> np.ndarray:
    """Which rows pass every feature rule with respect to their origin (the final verification's rules)."""
    from .verification import _rule_violations

    bad = {v.position for v in _rule_violations(encoder, rows, origins)}
    return np.asarray([i not in bad for i in range(len(rows))], dtype=bool)


def _accepted(judge, names: list, rows: list) -> np.ndarray:
    if not rows:
        return np.zeros(0, dtype=bool)
    frame = pd.DataFrame(rows, columns=names)
    score = np.asarray(judge.favorable_probability(frame), dtype=np.float64)
    return score >= float(judge.threshold)


def _with(raw0: dict, **values) -> dict:
    row = dict(raw0)
    row.update(values)
    return row


def _bisect(encoder, judge, names: list, brackets: list) -> list:
    """Bring each accepted value back towards the applicant: ``brackets`` holds ``(row, j, f, rejected, accepted)``
    (the row with feature ``j`` at ``accepted``); returns the rows with the least value found accepted. One model
    call per round for every bracket still open."""
    span = {j: float(encoder.maximum[j] - encoder.minimum[j]) for _, j, _, _, _ in brackets}
    state = [[row, j, f, float(bad), good] for row, j, f, bad, good in brackets]
    for _ in range(_ROUNDS):
        open_, asks = [], []
        for s in state:
            row, j, f, bad, good = s
            mid = _rounded(encoder, j, f, (bad + float(good)) / 2)
            if float(mid) in (bad, float(good)) or abs(float(good) - bad) <= 1e-6 * max(span[j], 1e-12):
                continue
            open_.append((s, mid))
            asks.append(_with(row, **{f.name: mid}))
        if not open_:
            break
        ok = _accepted(judge, names, asks)
        for (s, mid), yes in zip(open_, ok.tolist()):
            if yes:
                s[4] = mid
            else:
                s[3] = float(mid)
    return [_with(row, **{f.name: good}) for row, j, f, _, good in state]


def _singles(encoder, raw0: dict, mutable: list) -> tuple[list, list]:
    """Rows of single changes and, per row, ``(feature index, side, position on the side's grid)`` (side -1 and
    position -1 for a level of a categorical feature)."""
    rows, where = [], []
    for j, f in mutable:
        v0 = raw0[f.name]
        if f.is_categorical:
            for level in _allowed_levels(f, v0):
                rows.append(_with(raw0, **{f.name: level}))
                where.append((j, -1, -1))
        else:
            for side, values in enumerate(_grid(encoder, j, f, float(v0))):
                for i, v in enumerate(values):
                    rows.append(_with(raw0, **{f.name: v}))
                    where.append((j, side, i))
    return rows, where


def _pair_values(encoder, j: int, f, v0) -> list:
    if f.is_categorical:
        return _allowed_levels(f, v0)
    return [v for values in _grid(encoder, j, f, float(v0)) for v in values[1::2] or values]


def direct_recourses(encoder, judge, raw_rows: list, *, max_changes: int | None = None) -> list[DirectSearch]:
    """Search the changes within the rules that the judge accepts, from each applicant's own row.

    Parameters
    ----------
    encoder : frpd_cli.encoding.Encoder
        Its schema holds the rules; its encoding prices the moves.
    judge : object with ``favorable_probability`` and ``threshold``
        What counts as favourable (the model at threshold plus margin, every other required model too).
    raw_rows : list of dict
        The applicants' raw rows.
    max_changes : int, optional
        The most features a recourse may change (``--max-changes``): 1 searches single changes only, 2 pairs too;
        more (or None) also the greedy search.

    Returns
    -------
    list of DirectSearch
        One per applicant, in order.

    Notes
    -----
    Single changes cost ``O(n_features * GRID + n_levels)`` rows per applicant plus ``_ROUNDS`` bisection rounds;
    pairs at most :data:`PAIR_CAP` rows per applicant. Rows of all applicants share each model call.
    """
    schema = encoder.schema
    names = list(schema.feature_names)
    mutable = [(j, f) for j, f in enumerate(schema.features) if f.mutability != "immutable"]
    n = len(raw_rows)
    pairs = max_changes is None or max_changes >= 2
    # 1. single changes
    rows, owner, where = [], [], []
    for a, raw0 in enumerate(raw_rows):
        r, w = _singles(encoder, raw0, mutable)
        rows += r
        where += w
        owner += [a] * len(r)
    lawful = _keep_lawful(encoder, rows, [raw_rows[a] for a in owner]) if rows else np.zeros(0, dtype=bool)
    ok = np.zeros(len(rows), dtype=bool)
    at = np.flatnonzero(lawful)
    ok[at] = _accepted(judge, names, [rows[i] for i in at])
    found: list[list] = [[] for _ in range(n)]
    moves: list[list] = [[] for _ in range(n)]      # per applicant: the lawful single changes, (feature, value)
    for i in at.tolist():
        j = where[i][0]
        moves[owner[i]].append((j, rows[i][schema.features[j].name]))
    brackets, bracket_owner = [], []
    first = {}
    for i in np.flatnonzero(ok).tolist():
        j, side, pos = where[i]
        a = owner[i]
        if side < 0:
            found[a].append(rows[i])
        elif (a, j, side) not in first:
            first[(a, j, side)] = i
    for (a, j, _side), i in first.items():
        f = schema.features[j]
        pos = where[i][2]
        previous = float(raw_rows[a][f.name]) if pos == 0 else float(rows[i - 1][f.name])
        brackets.append((raw_rows[a], j, f, previous, rows[i][f.name]))
        bracket_owner.append(a)
    for a, row in zip(bracket_owner, _bisect(encoder, judge, names, brackets) if brackets else []):
        found[a].append(row)
    n_changes = [1 if found[a] else 0 for a in range(n)]
    # 2. pairs, for applicants no single change helps
    searched, total = [0] * n, [0] * n
    if pairs:
        rows, owner, which = [], [], []
        for a, raw0 in enumerate(raw_rows):
            if found[a]:
                continue
            values = [(j, f, _pair_values(encoder, j, f, raw0[f.name])) for j, f in mutable]
            combos = list(itertools.combinations([v for v in values if v[2]], 2))
            total[a] = len(combos)
            budget = PAIR_CAP
            for (j1, f1, v1), (j2, f2, v2) in combos:
                if len(v1) * len(v2) > budget:
                    break
                budget -= len(v1) * len(v2)
                searched[a] += 1
                for x, y in itertools.product(v1, v2):
                    rows.append(_with(raw0, **{f1.name: x, f2.name: y}))
                    owner.append(a)
                    which.append((j1, j2))
        if rows:
            lawful = _keep_lawful(encoder, rows, [raw_rows[a] for a in owner])
            ok = np.zeros(len(rows), dtype=bool)
            at = np.flatnonzero(lawful)
            ok[at] = _accepted(judge, names, [rows[i] for i in at])
            hits = np.flatnonzero(ok).tolist()
            brackets, bracket_owner, plain = [], [], []
            for i in hits:
                a = owner[i]
                numeric = [j for j in which[i] if not schema.features[j].is_categorical]
                if not numeric:
                    plain.append((a, rows[i]))
                    continue
                j = numeric[0]                   # the first numeric part comes back towards the applicant
                f = schema.features[j]
                brackets.append((rows[i], j, f, float(raw_rows[a][f.name]), rows[i][f.name]))
                bracket_owner.append(a)
            for a, row in plain:
                found[a].append(row)
            for a, row in zip(bracket_owner, _bisect(encoder, judge, names, brackets) if brackets else []):
                found[a].append(row)
            for a in set(owner):
                if found[a]:
                    n_changes[a] = 2
    # 3. more changes, greedily, for applicants no pair helps either
    depth = len(mutable) if max_changes is None else min(max_changes, len(mutable))
    if pairs and depth >= 3:
        rest = [a for a in range(n) if not found[a]]
        for a, rows in _greedy(encoder, judge, names, mutable, raw_rows, {a: moves[a] for a in rest}, depth).items():
            found[a] += rows
            n_changes[a] = max(sum(not _same_raw(row[c], raw_rows[a][c]) for c in names) for row in rows)
    return [_ranked(encoder, raw_rows[a], found[a], n_changes[a], searched[a], total[a]) for a in range(n)]


def _same_raw(a, b) -> bool:
    from .interpolation import same_value

    return same_value(a, b)


def _score(judge, names: list, rows: list) -> np.ndarray:
    frame = pd.DataFrame(rows, columns=names)
    return np.asarray(judge.favorable_probability(frame), dtype=np.float64)


def _greedy(encoder, judge, names: list, mutable: list, raw_rows: list, todo: dict, depth: int) -> dict:
    """Applicant -> accepted rows, for the applicants of ``todo`` a beam search reaches: from the applicant, each of
    the :data:`BEAM` rows scored highest so far takes one more single change (every allowed level, every grid value of
    a feature it has not changed), the :data:`BEAM` highest-scoring rows go on, for at most ``depth`` features; the
    first step with accepted rows ends it. In each accepted row every change it does not need is undone (in feature
    order) and every numeric one brought back towards the applicant by bisection. One model call per step for all
    applicants."""
    beams = {a: [dict(raw_rows[a])] for a, moves in todo.items() if moves}
    done: dict = {}
    level = float(judge.threshold)
    features = encoder.schema.features
    for _ in range(depth):
        rows, owner = [], []
        for a, beam in beams.items():
            seen = set()
            for state in beam:
                for j, value in todo[a]:
                    name = features[j].name
                    if not _same_raw(state[name], raw_rows[a][name]):
                        continue                  # one change per feature
                    new = _with(state, **{name: value})
                    key = tuple(str(new[c]) for c in names)
                    if key not in seen:
                        seen.add(key)
                        rows.append(new)
                        owner.append(a)
        if not rows:
            break
        at = np.arange(len(rows))               # single changes that keep the rules keep them together
        score = np.full(len(rows), -np.inf)
        if at.size:
            score[at] = _score(judge, names, [rows[i] for i in at])
        mine: dict = {}
        for i in at.tolist():
            mine.setdefault(owner[i], []).append(i)
        beams = {}
        for a, idx in mine.items():
            hit = [rows[i] for i in idx if score[i] >= level]
            if hit:
                done[a] = hit[:BEAM]
                continue
            order = sorted(idx, key=lambda i: -score[i])          # stable: ties keep the search's order
            beams[a] = [rows[i] for i in order[:BEAM]]
        if not beams:
            break
    flat = [(a, row) for a, hits in done.items() for row in hits]
    for _j, f in mutable:                        # undo what is not needed
        asks = [(k, _with(row, **{f.name: raw_rows[a][f.name]})) for k, (a, row) in enumerate(flat)
                if not _same_raw(row[f.name], raw_rows[a][f.name])]
        if asks:
            for (k, row), yes in zip(asks, _accepted(judge, names, [r for _, r in asks]).tolist()):
                if yes:
                    flat[k] = (flat[k][0], row)
    for j, f in mutable:                        # numeric moves back towards the applicant
        if f.is_categorical:
            continue
        which = [k for k, (a, row) in enumerate(flat) if not _same_raw(row[f.name], raw_rows[a][f.name])]
        brackets = [(flat[k][1], j, f, float(raw_rows[flat[k][0]][f.name]), flat[k][1][f.name]) for k in which]
        if brackets:
            for k, row in zip(which, _bisect(encoder, judge, names, brackets)):
                flat[k] = (flat[k][0], row)
    out: dict = {}
    for a, row in flat:
        out.setdefault(a, []).append(row)
    return out


def _ranked(encoder, raw0: dict, rows: list, n_changes: int, searched: int, total: int) -> DirectSearch:
    """The rows cheapest first (ties: the search's order), one per distinct row, every rule checked again."""
    rows = [row for row, ok in zip(rows, _keep_lawful(encoder, rows, [raw0] * len(rows))) if ok] if rows else []
    if not rows:
        return DirectSearch([], [], 0, searched, total)
    names = list(encoder.schema.feature_names)
    Z = encoder.encode(pd.DataFrame(rows, columns=names), source="the direct search")
    z0 = encoder.encode(pd.DataFrame([raw0], columns=names), source="the applicants file")[0]
    costs = np.linalg.norm(Z - z0, axis=1)
    out_rows, out_costs, seen = [], [], set()
    for i in np.argsort(costs, kind="stable").tolist():
        key = tuple(str(rows[i][c]) for c in names)
        if key in seen:
            continue
        seen.add(key)
        out_rows.append(rows[i])
        out_costs.append(float(costs[i]))
    return DirectSearch(out_rows, out_costs, n_changes, searched, total)
