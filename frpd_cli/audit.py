"""Audit a batch of recourse plans: who bears the cost of recourse, and which actions help the most people.

:func:`audit_plans` reads the plan records of ``frpd plan`` / ``frpd interpolate`` the way
:func:`frpd_cli.evaluation.evaluate_plans` does (the applicants and every recourse coerced, encoded and
re-predicted with the model; nothing in the records is trusted but the recourses' raw values) and answers two
questions about the whole batch:

* **groups**: per group of a column (``--by``) and per method, how many denied applicants got a full plan, a
  partial one or none, what their cheapest valid recourse costs (mean, median and a seeded bootstrap 95%
  interval of the mean, in the scale the plans were made in), how many features it changes and how sure the
  model is of it, the gap between the group's mean cost and the rest's, with its interval, and the gap between
  the group's share of denied applicants left without any recourse and the rest's, with its interval;
* **actions**: every single change the plans make (a categorical move ``from -> to``, a numeric move by
  direction and size in the encoded scale), how many plans hold it, what it costs, and its *coverage*: the share
  of all denied applicants the model accepts after applying that action alone, where the action does not break
  the applicant's immutable, monotone or range rules.

The definitions are in ``docs/audit.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from .evaluation import (
    _audit_rules,
    _check_records,
    _ks,
    _method_of,
    _statuses_without_values,
    checked_applicants,
    record_rows,
    score_records,
)
from .exceptions import InputError

__all__ = [
    "Audit",
    "audit_plans",
    "group_labels",
    "plot_audit",
    "broken_rules",
    "MIN_GROUP",
    "UNKNOWN_GROUP",
    "N_BOOTSTRAP",
    "SIZE_EDGES",
    "TOP_COVERAGE",
    "PAIR_POOL",
    "GROUP_COLUMNS",
    "ACTION_COLUMNS",
    "PAIR_COLUMNS",
    "SUMMARY_COLUMNS",
]

#: Groups with fewer denied applicants holding a valid recourse get no cost interval and no cost gap interval;
#: groups (or rests) with fewer denied applicants get no interval of the gap in the share without a recourse.
MIN_GROUP = 20
#: Bootstrap resamples of each group's costs.
N_BOOTSTRAP = 1000
#: Edges of the size bins of a numeric action: the absolute change of the feature's encoded value (before its
#: cost weight), i.e. the share of the min-max range (``--scale minmax``) or of the population (``effort``).
SIZE_EDGES = (0.0, 0.05, 0.1, 0.25, 0.5, math.inf)
#: The summary's coverage of the top-n actions (at least one of them applies and flips the decision).
TOP_COVERAGE = (1, 3, 10)
#: Pairs are searched among this many actions of highest coverage.
PAIR_POOL = 10
MISSING_GROUP = "(missing)"
#: The group of denied applicants whose values the plans do not hold (plans without recourse, read without the
#: applicants file): counted, but in no group of their values.
UNKNOWN_GROUP = "(values unknown)"

GROUP_COLUMNS = ("method", "by", "group", "denied", "full", "partial", "none", "with recourse", "cost mean",
                 "cost median", "cost low", "cost high", "changed", "probability", "gap", "gap low", "gap high",
                 "gap excludes 0", "note", "none gap", "none gap low", "none gap high", "none gap excludes 0")
ACTION_COLUMNS = ("method", "rank", "action", "feature", "from", "to", "direction", "size", "step",
                  "median change", "plans", "cost", "covered", "coverage", "cumulative coverage")
PAIR_COLUMNS = ("method", "by", "group", "denied", "first", "second", "coverage", "best single",
                "single coverage")
SUMMARY_COLUMNS = ("method", "plans", "denied", "already favorable", "recourses not counted", "actions",
                   *(f"top {n} coverage" for n in TOP_COVERAGE), "values unknown")

_ATOL = 1e-9
_CHUNK = 65536          # rows per model call
_DRAWS = 4_000_000      # bootstrap indices drawn at a time


@dataclass(frozen=True)
class Audit:
    """The result of :func:`audit_plans`: one DataFrame per table (empty when not asked for)."""

    groups: pd.DataFrame
    """One row per (method, ``by`` column, group), columns :data:`GROUP_COLUMNS`."""
    actions: pd.DataFrame
    """One row per (method, action), by decreasing coverage, columns :data:`ACTION_COLUMNS`."""
    pairs: pd.DataFrame
    """One row per (method, ``by`` column, group): the pair of actions covering most of the group."""
    summary: pd.DataFrame
    """One row per method, columns :data:`SUMMARY_COLUMNS`."""


# --------------------------------------------------------------------------- groups


def group_labels(values, *, bins: int = 4, numeric: bool | None = None) -> tuple[list[str], list[str]]:
    """The group of each value: numbers cut into ``bins`` quantile bins, anything else by its value.

    Parameters
    ----------
    values : array-like of shape (n,)
        One value per applicant (text as read from a file, or numbers).
    bins : int, default=4
        Quantile bins of a numeric column (fewer when quantiles coincide).
    numeric : bool, optional
        Whether the column is numeric. Default: every non-missing value parses as a number and there are more
        distinct values than ``bins`` (a 0/1 column stays two groups).

    Returns
    -------
    labels : list of str
        The group of each value; a missing value is in the group ``"(missing)"``.
    order : list of str
        The groups in report order: bins from low to high, categories sorted, ``"(missing)"`` last.

    Examples
    --------
    >>> labels, order = group_labels([20, 30, 40, 50, 60, 70, 80, 90], bins=2)
    >>> order
    ['[20, 55]', '(55, 90]']
    >>> group_labels(["b", "a", None, "b"])
    (['b', 'a', '(missing)', 'b'], ['a', 'b', '(missing)'])
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise InputError(f"The 'bins' option must be an int >= 1. Got {bins!r} instead.")
    series = pd.Series(list(values), dtype=object)
    missing = series.isna() | series.map(lambda v: isinstance(v, str) and v.strip() == "")
    numbers = pd.to_numeric(series.where(~missing), errors="coerce")
    if numeric is None:
        present = ~missing
        numeric = bool(present.any()) and bool(numbers[present].notna().all()) and \
            numbers[present].nunique() > bins
    labels = np.empty(len(series), dtype=object)
    labels[missing.to_numpy()] = MISSING_GROUP
    if numeric:
        ok = (~missing & numbers.notna()).to_numpy()
        labels[(~missing).to_numpy() & ~ok] = MISSING_GROUP
        codes, edges = pd.qcut(numbers[ok], q=int(bins), retbins=True, labels=False, duplicates="drop")
        names = [("[" if i == 0 else "(") + f"{edges[i]:g}, {edges[i + 1]:g}]" for i in range(len(edges) - 1)]
        labels[ok] = [names[int(c)] for c in codes]
        order = [n for n in names if n in set(labels[ok])]
    else:
        labels[(~missing).to_numpy()] = [str(v) for v in series[~missing]]
        order = sorted(set(labels[(~missing).to_numpy()].tolist()))
    if missing.any() or MISSING_GROUP in set(labels.tolist()):
        order.append(MISSING_GROUP)
    return labels.tolist(), order


# --------------------------------------------------------------------------- constraint checks


def _changed_matrix(before: pd.DataFrame, after: pd.DataFrame, schema) -> np.ndarray:
    """bool (n, n_features): does each feature of ``after`` differ from ``before`` (rows aligned)?"""
    out = np.zeros((len(after), len(schema.features)), dtype=bool)
    for j, f in enumerate(schema.features):
        out[:, j] = _differs(f, before[f.name].to_numpy(), after[f.name].to_numpy())
    return out


def _differs(f, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if f.is_numeric:
        a, b = a.astype(np.float64), b.astype(np.float64)
        na, nb = np.isnan(a), np.isnan(b)
        with np.errstate(invalid="ignore"):
            return np.where(na | nb, na != nb, np.abs(b - a) > _ATOL)
    a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    return (a != b) & ~(pd.isna(a) & pd.isna(b))


def _feature_broken(f, rules: dict, before: np.ndarray, after: np.ndarray, changed: np.ndarray) -> np.ndarray:
    """bool (n,): does moving feature ``f`` from ``before`` to ``after`` break an immutable, monotone, range or
    vocabulary rule? The rules are those of :func:`frpd_cli.metrics.constraint_violations` as ``evaluate``
    applies them (a kept value never breaks a range)."""
    n = len(after)
    if f.name in rules["immutable"]:
        return changed.copy()
    out = np.zeros(n, dtype=bool)
    direction = 1 if f.name in rules["increasing"] else -1 if f.name in rules["decreasing"] else 0
    if f.is_numeric:
        a, b = before.astype(np.float64), after.astype(np.float64)
        with np.errstate(invalid="ignore"):
            if direction:
                out |= np.isnan(b) | (direction * (b - a) < -_ATOL)
            lo, hi = rules["ranges"][f.name]
            if f.is_relative:
                low, high = f.bounds(a)
                lo, hi = np.maximum(lo, low), np.minimum(hi, high)
            lo, hi = np.minimum(lo, a), np.maximum(hi, a)          # keeping the applicant's value is allowed
            out |= changed & (np.isnan(b) | (b < lo - _ATOL) | (b > hi + _ATOL))
        return out
    levels = rules["vocabularies"][f.name]
    known = set(levels)
    out |= np.array([v not in known for v in after], dtype=bool)
    if direction and f.name in rules["ordinal_orders"]:
        rank = {level: r for r, level in enumerate(rules["ordinal_orders"][f.name])}
        start = np.array([rank.get(v, -1) for v in before])
        end = np.array([rank.get(v, -1) for v in after])
        out |= (end < 0) | ((start >= 0) & (direction * (end - start) < 0))
    return out


def broken_rules(before: pd.DataFrame, after: pd.DataFrame, training, *, features=None) -> np.ndarray:
    """Which rows of ``after`` break a rule of the applicant in the same row of ``before``.

    The checks of :func:`frpd_cli.metrics.constraint_violations` with the rules ``evaluate`` derives from the
    schema and training data (immutable, monotone, the training range narrowed by ``--range`` and widened to
    the applicant's own value, the training vocabulary), vectorised over rows that each have their own
    applicant, for hundreds of thousands of recourses at once.

    Parameters
    ----------
    before, after : DataFrame of shape (n, n_features)
        Applicants and the rows they would become, raw values coerced to the training types.
    training : frpd_cli.dataset.TrainingSet
    features : iterable of str, optional
        Check only these features (the others are known to be unchanged). Default: all.

    Returns
    -------
    ndarray of bool, shape (n,)
    """
    schema = training.schema
    rules = _audit_rules(training)
    wanted = None if features is None else set(features)
    out = np.zeros(len(after), dtype=bool)
    for f in schema.features:
        if wanted is not None and f.name not in wanted:
            continue
        a, b = before[f.name].to_numpy(), after[f.name].to_numpy()
        out |= _feature_broken(f, rules, a, b, _differs(f, a, b))
    return out


# --------------------------------------------------------------------------- the audit


@dataclass
class _Batch:
    """Per-record and per-recourse facts shared by the group and action tables."""

    method: np.ndarray          # (n_records,) str
    row: np.ndarray             # (n_records,) applicant row
    denied: np.ndarray          # (n_records,) bool
    k: np.ndarray               # (n_records,) plan size
    n_valid: np.ndarray         # (n_records,) valid recourses
    cost: np.ndarray            # (n_records,) cost of the cheapest valid recourse (NaN if none)
    changed: np.ndarray         # (n_records,) features it changes
    probability: np.ndarray     # (n_records,) its favourable probability
    valid: np.ndarray           # (n_recourses,) bool
    owner: np.ndarray           # (n_recourses,) record index


def audit_plans(records, training, model, applicants: pd.DataFrame, ids=None, *, groups: Mapping | None = None,
                k: int | None = None, actions: bool = False, pairs: bool = False, min_group: int = MIN_GROUP,
                n_bootstrap: int = N_BOOTSTRAP, seed: int = 0, n_jobs: int = 1, without_values=()) -> Audit:
    """Audit plan records by group and by action.

    Parameters
    ----------
    records : list of dict
        Plan objects as returned by :func:`frpd_cli.plans.read_plans` (several methods may be concatenated).
    training : frpd_cli.dataset.TrainingSet
        The training set the plans were made with; its encoder's scale prices every cost.
    model : frpd_cli.model.Model
        Anything with ``favorable_probability(rows)`` and ``threshold``.
    applicants : DataFrame of shape (n_applicants, >= n_features)
        The applicants' raw rows.
    ids : sequence of str, optional
        The id of each applicant row as the plans name it. Default: the 0-based row numbers.
    groups : mapping of str to (labels, order), optional
        For each ``by`` column, the group of every applicant row and the groups in report order
        (:func:`group_labels`).
    k : int, optional
        Recourses in a full plan. Default: per method, the largest rank in the records.
    actions : bool, default=False
        Build the actions table (coverage of every action).
    pairs : bool, default=False
        Build the pairs table (needs ``groups``): for each group, the pair among the :data:`PAIR_POOL` actions
        of highest coverage that covers most of the group.
    min_group : int, default=20
        Groups with fewer denied applicants holding a valid recourse are reported with a note and no cost
        interval; the gap in the share without a recourse ("none gap") is over all denied applicants, and has no
        interval when the group or the rest has fewer than ``min_group`` of them.
    n_bootstrap : int, default=1000
        Bootstrap resamples for the intervals.
    seed : int, default=0
        Seeds the bootstrap: each (method, column, group) draws from its own streams (one for the costs, one for
        the none shares), so results depend on the seed only.
    n_jobs : int, default=1
        Threads for the coverage predictions; results do not depend on it.
    without_values : collection of str, optional
        Ids of applicants whose raw values are not in ``applicants`` (plans read without the applicants file,
        :func:`frpd_cli.evaluation.applicants_from_records`); their plans hold no recourse and their ``status``
        says whether they were denied (``infeasible``) or already favourable, as in
        :func:`frpd_cli.evaluation.evaluate_plans`. A denied one counts among the method's denied applicants, in
        the group :data:`UNKNOWN_GROUP` of every ``by`` column (no plan, no cost) and in the denominator of
        every coverage, covered by no action (no action can be tried without its values).

    Returns
    -------
    Audit

    Raises
    ------
    InputError
        A record is malformed or names an unknown applicant, an option is invalid, or ``pairs`` without groups.

    Notes
    -----
    A recourse counts when it can be encoded, the model predicts it favourable and it breaks none of the
    applicant's rules (:func:`broken_rules`); a plan is full with K such recourses, partial with 1 to K - 1.
    An applicant's cost is the distance (the plans' scale) to the cheapest such recourse. The applicants and
    recourses take one model call each; coverage takes one call per action on the distinct denied rows
    (identical rows are scored once), in chunks of 65,536 rows. The bootstrap of a column draws
    ``n_bootstrap x n_denied`` indices per method for the none shares, and at most as many for the costs.
    """
    records = _check_records(records)
    methods = list(dict.fromkeys(_method_of(rec) for rec in records))
    for name, value, low in (("min_group", min_group, 1), ("n_bootstrap", n_bootstrap, 1), ("n_jobs", n_jobs, 1),
                             ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise InputError(f"The '{name}' option must be an int >= {low}. Got {value!r} instead.")
    groups = dict(groups or {})
    if pairs and not groups:
        raise InputError("Pairs of actions are found per group: pass at least one group column (--by).")
    applicants, ids = checked_applicants(applicants, ids, training.schema.feature_names)
    for column, (labels, _order) in groups.items():
        if len(labels) != len(applicants):
            raise InputError(f"The group column {column!r} has {len(labels)} values for {len(applicants)} "
                             "applicants; pass one value per applicant row.")
    assumed = _statuses_without_values(records, without_values, ids)     # record index -> already favourable
    unknown = [(_method_of(records[i]), str(records[i]["applicant"]), already) for i, already in assumed.items()]
    ks = _ks(records, k)
    records = [rec for i, rec in enumerate(records) if i not in assumed]
    rows_of = np.asarray(record_rows(records, ids, len(applicants)), dtype=np.int64)
    scored = score_records(records, training, model, applicants)
    batch = _batch(records, rows_of, scored, training, model, ks)

    group_rows, action_rows, pair_rows, summary_rows = [], [], [], []
    for mi, method in enumerate(methods):
        mine = batch.method == method
        n_unknown = len({a for m, a, already in unknown if m == method and not already})
        for ci, (column, (labels, order)) in enumerate(groups.items()):
            group_rows += _group_table(batch, mine, method, column, np.asarray(labels, dtype=object), order,
                                       min_group=min_group, n_bootstrap=n_bootstrap, seed=(seed, mi, ci))
            if n_unknown:
                group_rows.append(_unknown_group_row(method, column, n_unknown))
        summary = {"method": method, "plans": int(mine.sum()) + sum(m == method for m, _, _ in unknown),
                   "denied": _n_denied(batch, mine) + n_unknown,
                   "already favorable": int((mine & ~batch.denied).sum()) + sum(
                       m == method and already for m, _, already in unknown),
                   "recourses not counted": int(np.sum(~batch.valid & mine[batch.owner] & batch.denied[batch.owner])),
                   "actions": None, **{f"top {n} coverage": None for n in TOP_COVERAGE}, "values unknown": n_unknown}
        if actions or pairs:
            table, covered, denied_rows, inverse, weights, base = _action_table(batch, mine, scored, training,
                                                                                model, n_jobs=n_jobs,
                                                                                n_unknown=n_unknown)
            n_denied = max(len(denied_rows) + n_unknown, 1)
            for rank, row in enumerate(table, start=1):
                row.update({"method": method, "rank": rank})
            union = np.zeros(len(weights), dtype=bool)
            for row, hits in zip(table, covered):
                union |= hits
                row["cumulative coverage"] = float(weights[union].sum() / n_denied)
            summary["actions"] = len(table)
            for n in TOP_COVERAGE:
                summary[f"top {n} coverage"] = table[min(n, len(table)) - 1]["cumulative coverage"] if table else 0.0
            if actions:
                action_rows += table
            if pairs:
                for column, (labels, order) in groups.items():
                    pair_rows += _pair_table(table, covered, base, training, model, denied_rows, inverse,
                                             np.asarray(labels, dtype=object), order, method, column, n_jobs=n_jobs)
                    if n_unknown:
                        pair_rows.append({**dict.fromkeys(PAIR_COLUMNS), "method": method, "by": column,
                                          "group": UNKNOWN_GROUP, "denied": n_unknown})
        summary_rows.append(summary)
    return Audit(groups=pd.DataFrame(group_rows, columns=list(GROUP_COLUMNS)),
                 actions=pd.DataFrame(action_rows, columns=list(ACTION_COLUMNS)),
                 pairs=pd.DataFrame(pair_rows, columns=list(PAIR_COLUMNS)),
                 summary=pd.DataFrame(summary_rows, columns=list(SUMMARY_COLUMNS)))


def _unknown_group_row(method, column, n_unknown: int) -> dict:
    """The groups-table row of the denied applicants whose values the plans do not hold: no plan, no cost."""
    return {**dict.fromkeys(GROUP_COLUMNS), "method": method, "by": column, "group": UNKNOWN_GROUP,
            "denied": n_unknown, "full": 0.0, "partial": 0.0, "none": 1.0, "with recourse": 0,
            "note": "plans without recourse and without the applicants' values: pass --applicants to group them"}


def _n_denied(batch: _Batch, mine: np.ndarray) -> int:
    return int(np.unique(batch.row[mine & batch.denied]).size)


def _batch(records, rows_of, scored, training, model, ks) -> _Batch:
    n = len(records)
    owner = scored.owner
    before = scored.raw0.iloc[rows_of[owner]].reset_index(drop=True)
    changed = _changed_matrix(before, scored.R_raw.reset_index(drop=True), training.schema) if len(owner) else \
        np.zeros((0, len(training.schema.features)), dtype=bool)
    valid = scored.favorable.copy()
    if valid.any():
        valid[valid] = ~broken_rules(before.loc[valid].reset_index(drop=True),
                                     scored.R_raw.loc[valid].reset_index(drop=True), training)
    with np.errstate(invalid="ignore"):
        cost = np.linalg.norm(scored.R_enc - scored.X0[rows_of[owner]], axis=1) if len(owner) else np.zeros(0)
    ranked = np.where(valid, cost, np.inf)
    order = np.lexsort((np.arange(len(owner)), ranked, owner))         # per record, cheapest valid first
    first = order[np.r_[True, owner[order][1:] != owner[order][:-1]]] if len(owner) else order
    best_cost = np.full(n, np.nan)
    best_changed = np.full(n, np.nan)
    best_probability = np.full(n, np.nan)
    good = first[np.isfinite(ranked[first])]
    best_cost[owner[good]] = cost[good]
    best_changed[owner[good]] = changed[good].sum(axis=1)
    best_probability[owner[good]] = scored.probability[good]
    methods = np.array([_method_of(rec) for rec in records], dtype=object)
    return _Batch(method=methods, row=rows_of, denied=scored.prob0[rows_of] < model.threshold,
                  k=np.array([ks[m] for m in methods], dtype=np.int64),
                  n_valid=np.bincount(owner[valid], minlength=n), cost=best_cost, changed=best_changed,
                  probability=best_probability, valid=valid, owner=owner)


def _group_table(batch: _Batch, mine, method, column, labels, order, *, min_group, n_bootstrap, seed) -> list:
    """The rows of one (method, column): statistics per group and the stratified bootstrap of the gaps."""
    denied = mine & batch.denied
    label = labels[batch.row]
    with_cost = denied & ~np.isnan(batch.cost)
    costs = {g: batch.cost[with_cost & (label == g)] for g in order}
    sums = {}       # bootstrap sums of each group's costs (stratified: each group resampled on its own)
    for gi, g in enumerate(order):
        if costs[g].size:
            sums[g] = _bootstrap_sums(costs[g], n_bootstrap, np.random.SeedSequence([*seed, gi]))
    total = sum(sums.values()) if sums else None
    n_all = int(with_cost.sum())
    nones, none_sums, none_total = _none_bootstrap(batch, denied, label, order, n_bootstrap, seed)
    n_denied = sum(v.size for v in nones.values())            # the rest: the other groups of ``order``
    n_none = float(sum(v.sum() for v in nones.values()))
    rows = []
    for g in order:
        in_g = denied & (label == g)
        n_g = int(in_g.sum())
        c = costs[g]
        rest = batch.cost[with_cost & (label != g)]
        row = {"method": method, "by": column, "group": g, "denied": n_g}
        full = batch.n_valid[in_g] >= batch.k[in_g]
        some = batch.n_valid[in_g] >= 1
        row.update({"full": _share(full), "partial": _share(some & ~full), "none": _share(~some),
                    "with recourse": int(c.size)})
        row.update({"cost mean": _mean(c), "cost median": float(np.median(c)) if c.size else None,
                    "cost low": None, "cost high": None,
                    "changed": _mean(batch.changed[with_cost & (label == g)]),
                    "probability": _mean(batch.probability[with_cost & (label == g)]),
                    "gap": _mean(c) - _mean(rest) if c.size and rest.size else None,
                    "gap low": None, "gap high": None, "gap excludes 0": None, "note": "",
                    "none gap": None, "none gap low": None, "none gap high": None, "none gap excludes 0": None})
        if n_g == 0:
            row["note"] = "no denied applicant"
            rows.append(row)
            continue
        notes = []
        if n_g < min_group:                                     # then c.size <= n_g is tiny too
            notes.append(f"tiny group ({n_g} < {min_group} denied): no interval")
        elif c.size < min_group:
            notes.append(f"tiny group ({c.size} < {min_group}): no cost interval")
        else:
            means = sums[g] / c.size
            row["cost low"], row["cost high"] = _interval(means)
            if rest.size >= min_group:
                gap = means - (total - sums[g]) / (n_all - c.size)
                low, high = _interval(gap)
                row.update({"gap low": low, "gap high": high, "gap excludes 0": bool(low > 0 or high < 0)})
            else:
                notes.append(f"small rest ({rest.size} < {min_group}): no cost gap interval")
        n_rest = n_denied - n_g
        if n_rest:
            row["none gap"] = float(nones[g].mean()) - (n_none - float(nones[g].sum())) / n_rest
        if n_g < min_group:
            pass
        elif n_rest < min_group:
            notes.append(f"small rest ({n_rest} < {min_group} denied): no none gap interval")
        else:
            gap = none_sums[g] / n_g - (none_total - none_sums[g]) / n_rest
            low, high = _interval(gap)
            row.update({"none gap low": low, "none gap high": high, "none gap excludes 0": bool(low > 0 or high < 0)})
        row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


def _none_bootstrap(batch: _Batch, denied, label, order, n_bootstrap: int, seed):
    """Each group's 0/1 indicators of the denied applicants without a counting recourse, the bootstrap sums of
    each (stratified, like the costs; each group from its own stream, apart from its cost stream) and their total
    over the groups."""
    nones = {g: (batch.n_valid[denied & (label == g)] < 1).astype(np.float64) for g in order}
    sums = {}
    for gi, g in enumerate(order):
        if nones[g].size:
            sums[g] = _bootstrap_sums(nones[g], n_bootstrap, np.random.SeedSequence([*seed, gi, 1]))
    total = sum(sums.values()) if sums else None
    return nones, sums, total


def _share(mask: np.ndarray):
    return float(mask.mean()) if mask.size else None


def _mean(values: np.ndarray):
    return float(values.mean()) if values.size else None


def _interval(values: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(values, [0.025, 0.975])
    return float(low), float(high)


def _bootstrap_sums(values: np.ndarray, n_bootstrap: int, seed: np.random.SeedSequence) -> np.ndarray:
    """Sums of ``n_bootstrap`` resamples (with replacement, same size) of ``values``: (n_bootstrap,).

    The indices are drawn in blocks of whole resamples whose size depends on ``len(values)`` only, so the
    result depends on the seed alone."""
    rng = np.random.default_rng(seed)
    n = values.size
    out = np.empty(n_bootstrap)
    step = max(1, _DRAWS // n)
    index = np.int32 if n < 2**31 else np.int64        # half the memory traffic of int64 indices
    for start in range(0, n_bootstrap, step):
        stop = min(start + step, n_bootstrap)
        out[start:stop] = values[rng.integers(0, n, size=(stop - start, n), dtype=index)].sum(axis=1)
    return out


# --------------------------------------------------------------------------- actions


def _size_label(b: int) -> str:
    lo, hi = SIZE_EDGES[b], SIZE_EDGES[b + 1]
    return f"> {lo:g}" if math.isinf(hi) else f"{lo:g}–{hi:g}"


def _action_table(batch: _Batch, mine, scored, training, model, *, n_jobs: int, n_unknown: int = 0):
    """Every action of the method's valid recourses (of denied applicants) with its coverage (over the denied
    applicants and ``n_unknown`` more, whose values are not known: covered by no action).

    Returns the rows (by decreasing coverage), the covered mask of each over the distinct denied rows, the
    denied applicant rows, the map from them to the distinct rows, each distinct row's multiplicity and the
    distinct rows' raw values.
    """
    schema, encoder = training.schema, training.encoder
    denied_rows = np.unique(batch.row[mine & batch.denied])
    distinct, first, inverse, weights = _distinct_rows(scored.X0[denied_rows])
    base = scored.raw0.iloc[denied_rows[first]].reset_index(drop=True)

    use = np.flatnonzero(batch.valid & mine[batch.owner] & batch.denied[batch.owner])
    owner = batch.owner[use]
    before = scored.raw0.iloc[batch.row[owner]].reset_index(drop=True)
    after = scored.R_raw.iloc[use].reset_index(drop=True)
    changed = _changed_matrix(before, after, schema) if len(use) else np.zeros((0, len(schema.features)), bool)
    delta = scored.R_enc[use] - scored.X0[batch.row[owner]]
    found = []
    for j, f in enumerate(schema.features):
        hit = np.flatnonzero(changed[:, j])
        if not hit.size:
            continue
        block = encoder.block(f.name)
        cost = np.linalg.norm(delta[hit, block], axis=1)
        a, b = before[f.name].to_numpy()[hit], after[f.name].to_numpy()[hit]
        if f.is_numeric:
            a, b = a.astype(np.float64), b.astype(np.float64)
            dz = encoder.encode_values(j, b) - encoder.encode_values(j, a)
            bins = np.clip(np.searchsorted(SIZE_EDGES, np.abs(dz), side="left") - 1, 0, len(SIZE_EDGES) - 2)
            frame = pd.DataFrame({"up": dz > 0, "bin": bins, "dz": np.abs(dz), "raw": b - a, "cost": cost,
                                  "plan": owner[hit]})
            for (up, bn), part in frame.groupby(["up", "bin"], sort=True):
                size = _size_label(int(bn))
                found.append({"action": f"{f.name} {'↑' if up else '↓'} {size}", "feature": f.name, "from": "",
                              "to": "", "direction": "up" if up else "down", "size": size,
                              "step": float(part["dz"].mean()), "median change": float(part["raw"].median()),
                              "plans": int(part["plan"].nunique()), "cost": float(part["cost"].mean()),
                              "_apply": (j, (1.0 if up else -1.0) * float(part["dz"].mean()))})
        else:
            frame = pd.DataFrame({"from": [str(v) for v in a], "to": [str(v) for v in b], "cost": cost,
                                  "plan": owner[hit], "a": list(a), "b": list(b)})
            for (fr, to), part in frame.groupby(["from", "to"], sort=True):
                found.append({"action": f"{f.name}: {fr} → {to}", "feature": f.name, "from": fr, "to": to,
                              "direction": "", "size": "", "step": None, "median change": None,
                              "plans": int(part["plan"].nunique()), "cost": float(part["cost"].mean()),
                              "_apply": (j, part["a"].iloc[0], part["b"].iloc[0])})
    covered = _coverage([a["_apply"] for a in found], base, training, model, n_jobs=n_jobs)
    n_denied = max(len(denied_rows) + n_unknown, 1)
    for a, hits in zip(found, covered):
        a["covered"] = int(weights[hits].sum())
        a["coverage"] = a["covered"] / n_denied
    order = sorted(range(len(found)), key=lambda i: (-found[i]["covered"], -found[i]["plans"], found[i]["action"]))
    rows = []
    for i in order:
        row = {c: found[i].get(c) for c in ACTION_COLUMNS}
        row["_apply"] = found[i]["_apply"]
        rows.append(row)
    return rows, [covered[i] for i in order], denied_rows, inverse, weights, base


def _distinct_rows(X: np.ndarray):
    """Distinct rows of X: (distinct, index of each one's first row, inverse, multiplicity)."""
    if not len(X):
        return X, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    distinct, first, inverse, counts = np.unique(X, axis=0, return_index=True, return_inverse=True,
                                                 return_counts=True)
    return distinct, first, inverse.reshape(-1), counts


def _applied(move, base: pd.DataFrame, training) -> tuple[np.ndarray, pd.DataFrame]:
    """Apply one action to the base rows: the rows it applies to (bool) and their new raw values."""
    j, *params = move
    f = training.schema.features[j]
    values = base[f.name].to_numpy()
    if f.is_numeric:
        (step,) = params
        z = training.encoder.encode_values(j, values.astype(np.float64))
        new = training.encoder.decode_values(j, z + step).astype(np.float64)
        applies = np.ones(len(base), dtype=bool)
    else:
        old, new_level = params
        applies = np.array([v is old or v == old for v in values], dtype=bool)
        new = np.empty(int(applies.sum()), dtype=object)
        new[:] = [new_level] * len(new)
    moved = base.loc[applies].copy()
    moved[f.name] = new[applies] if f.is_numeric else new
    return applies, moved


def _accepted(before: pd.DataFrame, after: pd.DataFrame, training, model, moved: set) -> np.ndarray:
    """bool per row: a real change of the ``moved`` features, no rule broken, and the model accepts the row."""
    if not len(after):
        return np.zeros(0, dtype=bool)
    real = np.zeros(len(after), dtype=bool)
    for f in training.schema.features:
        if f.name in moved:
            real |= _differs(f, before[f.name].to_numpy(), after[f.name].to_numpy())
    real &= ~broken_rules(before, after, training, features=moved)
    out = np.zeros(len(after), dtype=bool)
    idx = np.flatnonzero(real)
    for start in range(0, idx.size, _CHUNK):
        part = idx[start:start + _CHUNK]
        p = np.asarray(model.favorable_probability(after.iloc[part].reset_index(drop=True)), dtype=np.float64)
        out[part] = p >= model.threshold
    return out


def _covered_by(moves, base, training, model) -> np.ndarray:
    """bool (n_base,): the base rows the model accepts after every move of ``moves`` (applied together)."""
    applies = np.ones(len(base), dtype=bool)
    current = base
    for move in moves:
        hit, moved = _applied(move, current, training)
        idx = np.flatnonzero(applies)
        applies[idx[~hit]] = False
        current = moved
    out = np.zeros(len(base), dtype=bool)
    moved = {training.schema.features[move[0]].name for move in moves}
    out[applies] = _accepted(base.loc[applies].reset_index(drop=True), current.reset_index(drop=True), training,
                             model, moved)
    return out


def _coverage(moves, base, training, model, *, n_jobs: int, combined: bool = False) -> list[np.ndarray]:
    """The covered mask of each action (or each tuple of actions with ``combined``) over the base rows."""
    tasks = [m if combined else (m,) for m in moves]
    if n_jobs > 1 and len(tasks) > 1:
        from joblib import Parallel, delayed

        return list(Parallel(n_jobs=n_jobs, prefer="threads")(delayed(_covered_by)(t, base, training, model)
                                                              for t in tasks))
    return [_covered_by(t, base, training, model) for t in tasks]


def _pair_table(table, covered, base, training, model, denied_rows, inverse, labels, order, method, column, *,
                n_jobs: int) -> list:
    """For each group: the pair of actions (different features) covering most of its denied applicants."""
    pool = list(range(min(PAIR_POOL, len(table))))
    pairs = [(a, b) for a, b in combinations(pool, 2) if table[a]["feature"] != table[b]["feature"]]
    pair_covered = _coverage([(table[a]["_apply"], table[b]["_apply"]) for a, b in pairs], base, training,
                             model, n_jobs=n_jobs, combined=True)
    group_of = labels[denied_rows]
    rows = []
    for g in order:
        members = inverse[group_of == g]
        row = {"method": method, "by": column, "group": g, "denied": int(members.size), "first": None,
               "second": None, "coverage": None, "best single": None, "single coverage": None}
        if members.size and pairs:
            scores = [int(hits[members].sum()) for hits in pair_covered]
            best = int(np.argmax(scores))
            a, b = pairs[best]
            row.update({"first": table[a]["action"], "second": table[b]["action"],
                        "coverage": scores[best] / members.size})
        if members.size and table:
            singles = [int(hits[members].sum()) for hits in covered]
            best = int(np.argmax(singles))
            row.update({"best single": table[best]["action"], "single coverage": singles[best] / members.size})
        rows.append(row)
    return rows


# --------------------------------------------------------------------------- plot


def plot_audit(audit: Audit, path) -> Path:
    """Bar charts: each group's mean cost with its 95% interval (a panel per method and column) and the
    coverage of the top actions (a panel per method), to a PNG.

    Raises
    ------
    InputError
        matplotlib is not installed (the ``plot`` extra), or there is nothing to draw.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("Plotting needs matplotlib: install the plot extra with "
                         "`pip install 'frpd-cli[plot]'`.") from None
    path = Path(path)
    panels = []
    for (method, column), part in audit.groups.groupby(["method", "by"], sort=False):
        panels.append(("groups", f"{method}: cost by {column}", part))
    for method, part in audit.actions.groupby("method", sort=False):
        panels.append(("actions", f"{method}: top actions", part.head(10)))
    if not panels:
        raise InputError("Nothing to plot: pass --by or --actions.")
    if not path.parent.is_dir():
        raise InputError(f"Cannot write '{path}': the folder '{path.parent}' does not exist.")
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.6 * len(panels)), squeeze=False)
    for ax, (kind, title, part) in zip(axes[:, 0], panels):
        if kind == "groups":
            mean = part["cost mean"].astype(float).to_numpy()
            low = part["cost low"].astype(float).to_numpy()
            high = part["cost high"].astype(float).to_numpy()
            err = np.vstack([np.nan_to_num(mean - low), np.nan_to_num(high - mean)])
            y = np.arange(len(part))
            ax.barh(y, np.nan_to_num(mean), xerr=err, color="#4c72b0", capsize=3)
            ax.set_yticks(y, [f"{g} (n={n})" for g, n in zip(part["group"], part["denied"])], fontsize=7)
            ax.set_xlabel("cost of the cheapest recourse (mean, 95% interval)")
        else:
            y = np.arange(len(part))
            ax.barh(y, part["coverage"].astype(float).to_numpy(), color="#55a868")
            ax.set_yticks(y, part["action"].tolist(), fontsize=7)
            ax.set_xlabel("coverage (share of denied applicants one action flips)")
            ax.set_xlim(0, 1)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
