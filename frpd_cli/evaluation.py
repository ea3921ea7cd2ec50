"""Evaluate recourse plans: the paper's metrics, recomputed from the plans' raw values.

:func:`evaluate_plans` takes the plan records of ``frpd plan`` / ``frpd
interpolate`` (as read by :func:`frpd_cli.plans.read_plans`, possibly several
methods concatenated), the applicants' raw rows, the training set and the
model. It trusts nothing in the records but the recourses' raw feature values
and graph paths: every recourse is re-encoded with the training encoder and
re-predicted with the model, and every metric comes from
:mod:`frpd_cli.metrics`. :func:`summarize_by_method` turns the per-applicant
values into the "mean +- std" cells of the paper's tables, and
:func:`plot_tradeoff` draws the cost / diversity trade-off (one point per
method), the panels of the paper's Pareto figure.

The definitions, with formulas, are in ``docs/evaluation.md`` and
``docs/metrics.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from . import metrics as m
from .encoding import category_key
from .exceptions import InputError
from .population import population_of

__all__ = [
    "applicants_from_records",
    "METRICS",
    "PATH_METRICS",
    "MARGIN_METRICS",
    "SHIFT_METRICS",
    "ADVICE_METRICS",
    "NEAR_THRESHOLD",
    "MANIFOLDS",
    "evaluate_plans",
    "summarize_by_method",
    "summary_metrics",
    "plan_counts",
    "PLAN_COUNTS",
    "plot_tradeoff",
    "repeated_plans",
    "record_rows",
    "checked_applicants",
    "score_records",
    "ScoredRecords",
]

#: Per-applicant metric columns, in table order.
METRICS = ("cost", "validity", "anti-diversity", "dpp", "manifold", "sparsity", "violations", "full plans")
#: Extra columns when a plan has graph paths.
PATH_METRICS = ("path diversity", "path anti-diversity")
#: How close a recourse is to the model's boundary: the mean favourable probability of a plan's recourses, and
#: the share of them whose probability is below the threshold plus :data:`NEAR_THRESHOLD` (knife-edge recourses).
MARGIN_METRICS = ("probability", "near threshold")
NEAR_THRESHOLD = 0.01
#: How plausible a plan's moves are: the mean ``largest_shift`` of its recourses (the largest share of the
#: training population one change passes, :mod:`frpd_cli.population`, recomputed from the training data) and the
#: share of its recourses whose largest shift is above :data:`LARGE_SHIFT`.
SHIFT_METRICS = ("largest shift", "shift > 0.3")
LARGE_SHIFT = 0.3
#: Options no one would take: the share of a plan's recourses that another recourse of the same plan dominates
#: (makes only changes it makes too, each no larger: :func:`frpd_cli.directions.dominated`).
ADVICE_METRICS = ("dominated",)
#: Which training rows stand for the data manifold.
MANIFOLDS = ("favorable", "labeled", "all")

_ATOL = 1e-9
#: A method label with a theta (:func:`frpd_cli.choice.method_label`): method, theta, variant suffix.
_THETA_LABEL = re.compile(r"([^@]+)@([0-9.]+(?:e-?[0-9]+)?)(\+.*)?")


# --------------------------------------------------------------------------- raw values


def _coerce(frame: pd.DataFrame, schema) -> pd.DataFrame:
    """Raw rows with the training types: numbers as floats, categories as the training level they name.

    CSV plan files hold every value as text (a column with an empty cell is
    read as strings), JSON files hold typed values; after this step both give
    the same rows. Numbers that do not parse become NaN (a range violation);
    categories that match no training level keep their value (a vocabulary
    violation).
    """
    out = {}
    for f in schema.features:
        values = frame[f.name]
        if f.is_numeric:
            out[f.name] = pd.to_numeric(values.replace("", np.nan), errors="coerce").astype(np.float64)
        else:
            lookup = {category_key(level): level for level in f.levels}
            out[f.name] = pd.Series(_per_distinct(values.tolist(), lambda v, lookup=lookup: lookup.get(category_key(v), v)),
                                    index=values.index, dtype=object)
    return pd.DataFrame(out, index=frame.index)


def _per_distinct(values: list, function) -> list:
    """``[function(v) for v in values]``, computed once per distinct value (of the same type: 1, 1.0 and True
    are told apart): a column of a few categories repeated over many rows."""
    seen: dict = {}
    out = []
    for v in values:
        key = (type(v), v)
        try:
            out.append(seen[key])
        except KeyError:
            seen[key] = result = function(v)
            out.append(result)
        except TypeError:               # an unhashable value
            out.append(function(v))
    return out


def _encodable(R: pd.DataFrame, encoder) -> np.ndarray:
    """Rows whose every value can be encoded (finite numbers, whole numbers for integer features whose training
    values are all whole, known categories)."""
    ok = np.ones(len(R), dtype=bool)
    for j, f in enumerate(encoder.schema.features):
        values = R[f.name]
        if f.is_numeric:
            numbers = values.to_numpy(dtype=np.float64)
            ok &= np.isfinite(numbers)
            if f.kind == "integer" and not (encoder.fractional and encoder.fractional[j]):
                with np.errstate(invalid="ignore"):
                    ok &= numbers == np.round(numbers)
        else:
            levels = set(category_key(level) for level in f.levels)
            ok &= np.array(_per_distinct(values.tolist(),
                                         lambda v, levels=levels: v is not None and category_key(v) in levels),
                           dtype=bool)
    return ok


def _audit_rules(training) -> dict:
    """Keyword arguments of :func:`frpd_cli.metrics.constraint_violations` from the schema and training data."""
    schema, encoder = training.schema, training.encoder
    ranges, vocabularies, orders = {}, {}, {}
    for j, f in enumerate(schema.features):
        if f.is_numeric:       # the training range, narrowed by the user's --range (an unchanged value never counts)
            ranges[f.name] = (max(float(encoder.minimum[j]), -math.inf if f.low is None else f.low),
                              min(float(encoder.maximum[j]), math.inf if f.high is None else f.high))
        else:
            vocabularies[f.name] = list(f.levels)
            if f.kind == "ordinal":
                orders[f.name] = list(f.levels)
    return {
        "immutable": list(schema.names_with("immutable")),
        "increasing": list(schema.names_with("increasing")),
        "decreasing": list(schema.names_with("decreasing")),
        "ordinal_orders": orders,
        "ranges": ranges,
        "vocabularies": vocabularies,
    }


# --------------------------------------------------------------------------- records


def _check_records(records) -> list[dict]:
    if isinstance(records, Mapping) or not isinstance(records, Sequence):
        raise InputError(f"'records' must be a list of plan objects. Got {type(records).__name__} instead.")
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping) or "applicant" not in rec or "recourses" not in rec:
            raise InputError(f"Plan record {i + 1} is not a plan object (needs 'applicant' and 'recourses').")
        for r in rec["recourses"] or []:
            if not isinstance(r, Mapping) or not isinstance(r.get("features"), Mapping):
                raise InputError(f"A recourse of plan record {i + 1} (applicant {rec['applicant']!r}) has no "
                                 "'features' object.")
    return list(records)


def _method_of(rec) -> str:
    method = rec.get("method")
    return "unknown" if method is None or (isinstance(method, float) and math.isnan(method)) else str(method)


def repeated_plans(records) -> list[tuple[str, str, int]]:
    """(applicant, method, count) of every pair that has more than one plan, in order of first appearance.

    Plans are never merged: a repeated pair (two runs with the same method
    label concatenated) is evaluated once per plan, so it weighs twice in its
    method's means. The command line warns about it.
    """
    counts: dict = {}
    for rec in records:
        key = (str(rec["applicant"]), _method_of(rec))
        counts[key] = counts.get(key, 0) + 1
    return [(a, m, n) for (a, m), n in counts.items() if n > 1]


def _ks(records, k) -> dict:
    if k is not None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InputError(f"The 'k' option must be an int >= 1. Got {k!r} instead.")
        return {_method_of(rec): int(k) for rec in records}
    ks: dict = {}
    for rec in records:
        method = _method_of(rec)
        ranks = [int(r.get("rank") or 0) for r in rec["recourses"] or []]
        ks[method] = max([ks.get(method, 0), len(ranks), *ranks])
    return {method: max(value, 1) for method, value in ks.items()}


def _applicant_index(ids: Sequence[str], applicants: pd.DataFrame) -> dict:
    if len(ids) != len(applicants):
        raise InputError(f"'ids' has {len(ids)} entries but there are {len(applicants)} applicants. "
                         "Pass one id per applicant row.")
    index: dict = {}
    for row, key in enumerate(ids):
        index.setdefault(str(key), []).append(row)
    return index


# --------------------------------------------------------------------------- evaluation


def applicants_from_records(records, feature_names) -> tuple[pd.DataFrame, list, list]:
    """Rebuild the applicants' raw rows from jsonl/json plan records (no applicants file at hand).

    A recourse's ``changes`` hold the applicant's old value of every changed feature and its ``features``
    the unchanged ones, so any recourse gives back the whole applicant. Applicants whose records have no
    recourse cannot be rebuilt.

    Returns
    -------
    applicants : DataFrame of shape (n_rebuilt, n_features)
    ids : list of str
        Their ids, in order of first appearance.
    missing : list of str
        Ids of applicants that could not be rebuilt.

    Raises
    ------
    InputError
        The records carry no ``changes`` (csv plans): the applicants file is needed.
    """
    names = list(feature_names)
    rows, ids, missing, seen = [], [], [], set()
    has_changes = False
    for rec in records:
        key = str(rec["applicant"])
        if key in seen:
            continue
        recourses = rec.get("recourses") or []
        with_changes = [r for r in recourses if "changes" in r]
        has_changes = has_changes or bool(with_changes)
        if not with_changes:
            continue
        r = with_changes[0]
        row = {n: r["features"].get(n) for n in names}
        for n, (old, _new) in r["changes"].items():
            row[n] = old
        rows.append(row)
        ids.append(key)
        seen.add(key)
    if not has_changes and any(rec.get("recourses") for rec in records):
        raise InputError("These plans do not carry the applicants' values (csv plans have no 'changes'): pass "
                         "--applicants with the applicants file the plans were made for, or evaluate the jsonl "
                         "output instead.")
    missing = list(dict.fromkeys(str(rec["applicant"]) for rec in records if str(rec["applicant"]) not in seen))
    return pd.DataFrame(rows, columns=names), ids, missing


class ScoredRecords(NamedTuple):
    """The applicants and recourses of plan records, coerced, encoded and re-predicted (:func:`score_records`)."""

    raw0: pd.DataFrame
    """Applicants' raw rows coerced to the training types, shape (n_applicants, n_features)."""
    X0: np.ndarray
    """Encoded applicants, shape (n_applicants, n_features_out)."""
    prob0: np.ndarray
    """The model's favourable probability of each applicant, shape (n_applicants,)."""
    owner: np.ndarray
    """Record index of each recourse, int64 of shape (n_recourses,)."""
    R_raw: pd.DataFrame
    """Recourses' raw values coerced to the training types, shape (n_recourses, n_features)."""
    R_enc: np.ndarray
    """Encoded recourses (NaN rows where not encodable), shape (n_recourses, n_features_out)."""
    probability: np.ndarray
    """Favourable probability of each recourse (NaN where not encodable)."""
    encodable: np.ndarray
    """bool: the recourse holds only values the encoder reads."""
    favorable: np.ndarray
    """bool: encodable and predicted favourable at the model's threshold."""


def checked_applicants(applicants: pd.DataFrame, ids, feature_names) -> tuple[pd.DataFrame, list[str]]:
    """The applicants (index reset) and their ids as text (default: row numbers), after checking that every
    feature is a column.

    Raises
    ------
    InputError
        A feature column is missing.
    """
    missing = [n for n in feature_names if n not in applicants.columns]
    if missing:
        raise InputError(f"Column(s) {', '.join(repr(n) for n in missing)} missing from the applicants; "
                         "the model was trained with them.")
    applicants = applicants.reset_index(drop=True)
    return applicants, [str(i) for i in range(len(applicants))] if ids is None else [str(i) for i in ids]


def record_rows(records, ids: Sequence[str], n_applicants: int) -> list[int]:
    """The applicant row of each plan record, looked up by id.

    Raises
    ------
    InputError
        A record names an applicant that is not in the ids, or whose id is repeated there.
    """
    where = _applicant_index(ids, range(n_applicants))
    rows_of = []
    for rec in records:
        key = str(rec["applicant"])
        hits = where.get(key)
        if not hits:
            shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
            raise InputError(f"The plans name applicant {key!r}, which is not in the applicants (ids: {shown}). "
                             "Pass the applicants file the plans were made for, with the same --id-column.")
        if len(hits) > 1:
            raise InputError(f"Applicant id {key!r} appears {len(hits)} times in the applicants; ids must be "
                             "unique. Pass --id-column with a unique column.")
        rows_of.append(hits[0])
    return rows_of


def score_records(records, training, model, applicants: pd.DataFrame) -> ScoredRecords:
    """Coerce, encode and re-predict the applicants and every recourse of the records (one model call each).

    Nothing of a recourse but its ``features`` is used; ``applicants`` must hold every feature column (row
    order kept). Used by :func:`evaluate_plans` and :func:`frpd_cli.audit.audit_plans`.
    """
    schema, encoder = training.schema, training.encoder
    names = list(schema.feature_names)
    raw0 = _coerce(applicants.loc[:, names], schema)
    if len(raw0):
        X0 = encoder.encode(raw0, source="the applicants")
        prob0 = np.asarray(model.favorable_probability(raw0), dtype=np.float64)
    else:                   # every plan's applicant is without values (plans without recourse only)
        X0, prob0 = np.zeros((0, encoder.n_features_out)), np.zeros(0)
    owner, rec_rows = [], []
    for i, rec in enumerate(records):
        for r in rec["recourses"] or []:
            owner.append(i)
            rec_rows.append({n: r["features"].get(n) for n in names})
    owner = np.asarray(owner, dtype=np.int64)
    R_raw = _coerce(pd.DataFrame(rec_rows, columns=names), schema) if rec_rows else pd.DataFrame(columns=names)
    encodable = _encodable(R_raw, encoder) if rec_rows else np.zeros(0, dtype=bool)
    R_enc = np.full((len(rec_rows), encoder.n_features_out), np.nan)
    probability = np.full(len(rec_rows), np.nan)
    if encodable.any():
        ok_rows = R_raw.loc[encodable]
        R_enc[encodable] = encoder.encode(ok_rows, source="the recourses")
        probability[encodable] = np.asarray(model.favorable_probability(ok_rows), dtype=np.float64)
    favorable = np.where(np.isnan(probability), False, probability >= model.threshold)
    return ScoredRecords(raw0, X0, prob0, owner, R_raw, R_enc, probability, encodable, favorable)


def evaluate_plans(records, training, model, applicants: pd.DataFrame, ids: Sequence[str] | None = None, *,
                   k: int | None = None, graph=None, manifold: str = "favorable",
                   progress=None, also_models=None, without_values=()) -> pd.DataFrame:
    """The paper's metrics for every plan, recomputed from the recourses' raw values.

    Parameters
    ----------
    records : list of dict
        Plan objects as returned by :func:`frpd_cli.plans.read_plans`: keys
        ``applicant``, ``method``, ``status``, ``recourses`` (each recourse with
        ``rank``, ``features`` and, for graph plans, ``path``). Only
        ``applicant``, ``method``, the recourses' ``features`` and ``path`` are
        used; costs, probabilities and statuses in the records are ignored
        (but for the plans of ``without_values``).
        An optional per-plan ``seconds`` is passed through.
    training : frpd_cli.dataset.TrainingSet
        The training set the plans were made with (schema, encoder, encoded
        rows; path node ids are its row numbers).
    model : frpd_cli.model.Model
        Anything with ``favorable_probability(rows)`` and ``threshold``.
    applicants : DataFrame of shape (n_applicants, >= n_features)
        The applicants' raw rows.
    ids : sequence of str, optional
        The id of each applicant row, as written in the plans' ``applicant``
        field. Default: the 0-based row numbers.
    k : int, optional
        Recourses a full plan has. Default: per method, the largest rank (or
        number of recourses) seen for that method.
    graph : frpd_cli.graph.Graph, optional
        The actionability graph of graph plans. When given, a path's cost is
        the sum of its edge weights on the graph and a step that is not an
        edge is reported; otherwise the cost is the sum of the Euclidean step
        lengths ``x0 -> path[0] -> ... -> path[-1]``.
    manifold : {"favorable", "labeled", "all"}, default="favorable"
        Training rows that stand for the data manifold: rows the model predicts
        favourable, rows labelled favourable, or every row.
    progress : callable, optional
        Called as ``progress(done, total)`` after each record is evaluated.
    also_models : dict of str to model, optional
        Other models to check the recourses with (the next release, a challenger): for each name, the
        columns ``recourses accepted by <name>`` (the share of the plan's recourses that model predicts
        favourable at its own threshold) and ``plans accepted by <name>`` (1.0 when it accepts at least one
        recourse of the plan, else 0.0); both NaN for plans without recourse and already favourable
        applicants. One call per model for all recourses.
    without_values : collection of str, optional
        Ids of applicants whose raw values are not at hand and not in ``applicants``: the ``missing`` of
        :func:`applicants_from_records` (plans read without the applicants file). Their plans must hold no
        recourse, and the record's ``status`` stands in for the model's prediction on the applicant:
        ``already-favorable`` is already favourable, ``infeasible`` needs a recourse and has none (validity and
        full plans 0, every other metric NaN). That is what the applicant's values give when the plans were
        made with this model and threshold, so the result is the same as with the applicants' rows.

    Returns
    -------
    DataFrame
        One row per plan record, in record order, with columns ``method``,
        ``applicant``, ``status`` (``"needs-recourse"`` or
        ``"already-favorable"``, from the model's prediction on the applicant,
        not from the record), ``k``, ``n_recourses``, ``n_favorable``, then
        :data:`METRICS`, ``path cost`` and :data:`PATH_METRICS` (NaN for
        plans without paths), ``seconds`` (NaN unless the record has it),
        ``problems`` (text, empty when none) and :data:`MARGIN_METRICS`.
        Metrics are NaN when undefined (no recourse; already favourable
        applicants).

    Raises
    ------
    InputError
        A record names an applicant that is not in ``applicants`` (or whose id
        is repeated there), a record is malformed, or an option is invalid; a
        plan of an applicant in ``without_values`` holds a recourse or a status
        other than ``infeasible`` and ``already-favorable``.

    Notes
    -----
    The applicants and every recourse are scored in one model call each. The
    manifold distance uses one k-d tree over the manifold rows, built once.
    Cost O(total recourses x (p + K)) besides the model calls and tree queries.
    """
    records = _check_records(records)
    if manifold not in MANIFOLDS:
        raise InputError(f"The 'manifold' option must be one of {', '.join(MANIFOLDS)}. Got {manifold!r} instead.")
    schema = training.schema
    names = list(schema.feature_names)
    applicants, ids = checked_applicants(applicants, ids, names)
    ks = _ks(records, k)
    assumed = _statuses_without_values(records, without_values, ids)
    rows_of: list = [None] * len(records)
    known = [i for i in range(len(records)) if i not in assumed]
    for i, row in zip(known, record_rows([records[i] for i in known], ids, len(applicants))):
        rows_of[i] = row
    scored = score_records(records, training, model, applicants)
    raw0, X0, prob0 = scored.raw0, scored.X0, scored.prob0
    owner, R_raw, R_enc = scored.owner, scored.R_raw, scored.R_enc
    probability, encodable, favorable = scored.probability, scored.encodable, scored.favorable
    minmax = _minmax_costs(training, raw0, R_raw, encodable, owner, rows_of, len(records))
    accepted = {}           # each other model's verdict on every recourse (False where not encodable)
    for name, other in (also_models or {}).items():
        verdict = np.zeros(len(R_raw), dtype=bool)
        if encodable.any():
            verdict[encodable] = np.asarray(other.favorable_probability(R_raw.loc[encodable]),
                                            dtype=np.float64) >= other.threshold
        accepted[name] = verdict

    pool = {"favorable": training.favorable, "labeled": training.labeled,
            "all": np.ones(training.n_rows, dtype=bool)}[manifold]
    if not pool.any():
        raise InputError(f"No training row is in the '{manifold}' manifold; choose another --manifold.")
    index = m.NearestRowIndex(training.X[pool])
    rules = _audit_rules(training)
    attach = _graph_attacher(graph, training)

    population = population_of(training)
    out = []
    for i, rec in enumerate(records):
        a = rows_of[i]
        mine = np.flatnonzero(owner == i)
        if a is None:       # no values and no recourse: every metric but validity and full plans is NaN
            raw_a, x_a, already = None, None, assumed[i]
        else:
            raw_a, x_a, already = raw0.iloc[a], X0[a], bool(prob0[a] >= model.threshold)
        row = _evaluate_one(rec, ks[_method_of(rec)], raw_a, x_a, already, R_raw.iloc[mine], R_enc[mine],
                            favorable[mine], encodable[mine], training, index, rules, attach)
        row.update(_margin_metrics(probability[mine], model.threshold, already=already))
        row.update(_shift_metrics(population, raw_a, R_raw.iloc[mine], encodable[mine], already=already))
        row.update(_advice_metrics(training.encoder, x_a, R_enc[mine], encodable[mine], already=already))
        if minmax is not None:
            row["minmax cost"] = minmax[i] if row["status"] == "needs-recourse" else float("nan")
        for name, verdict in accepted.items():
            row.update(_acceptance(verdict[mine], name, already=already))
        out.append(row)
        if progress is not None:
            progress(i + 1, len(records))
    columns = ["method", "applicant", "status", "k", "n_recourses", "n_favorable", *METRICS, "path cost",
               *PATH_METRICS, "seconds", "problems", *MARGIN_METRICS, *SHIFT_METRICS, *ADVICE_METRICS,
               *(f"{kind} accepted by {name}" for name in accepted for kind in ("recourses", "plans"))]
    if minmax is not None:
        columns.insert(columns.index("cost") + 1, "minmax cost")
    return pd.DataFrame(out, columns=columns)


#: What a plan without recourse says of an applicant whose values are not at hand: already favourable or not.
_STATUS_ALREADY = {"already-favorable": True, "infeasible": False}


def _statuses_without_values(records, without_values, ids) -> dict:
    """Record index -> already favourable, for the plans of applicants in ``without_values`` (from the record's
    ``status``; every other plan is re-predicted from the applicant's values)."""
    unknown = {str(a) for a in without_values}
    if not unknown:
        return {}
    both = unknown.intersection(ids)
    if both:
        raise InputError(f"Applicant {sorted(both)[0]!r} is both among the applicants and among those without "
                         "values; pass each applicant once.")
    assumed = {}
    for i, rec in enumerate(records):
        key = str(rec["applicant"])
        if key not in unknown:
            continue
        status = rec.get("status")
        if rec["recourses"]:
            raise InputError(f"The plan of applicant {key!r} holds recourses, but the applicant's values are not "
                             "at hand; pass --applicants with the applicants file the plans were made for.")
        if not isinstance(status, str) or status not in _STATUS_ALREADY:
            raise InputError(f"The plan of applicant {key!r} has no recourse and status {status!r}; without the "
                             "applicant's values only 'infeasible' and 'already-favorable' say whether it needed "
                             "one. Pass --applicants with the applicants file the plans were made for.")
        assumed[i] = _STATUS_ALREADY[status]
    return assumed


def _minmax_costs(training, raw0: pd.DataFrame, R_raw: pd.DataFrame, encodable: np.ndarray, owner: np.ndarray,
                  rows_of: list, n_records: int) -> np.ndarray | None:
    """Each plan's cost in the paper's min-max scale when the plans are priced in another one (else None).

    The cost of a linear plan as :func:`frpd_cli.metrics.cost` measures it, with the encoder refitted on the
    training rows with ``scale="minmax"``: the number the paper's tables report, beside the effort-priced
    ``cost``. NaN where a recourse cannot be encoded or the plan has none.
    """
    if training.encoder.scale == "minmax":
        return None
    from .encoding import fit_encoder

    paper = fit_encoder(training.schema, training.frame, source="the training rows", scale="minmax")
    X0 = paper.encode(raw0, source="the applicants")
    R = np.full((len(R_raw), paper.n_features_out), np.nan)
    if encodable.any():
        R[encodable] = paper.encode(R_raw.loc[encodable], source="the recourses")
    out = np.full(n_records, np.nan)
    for i in range(n_records):
        mine = np.flatnonzero(owner == i)
        if mine.size and encodable[mine].all():
            out[i] = m.cost(X0[rows_of[i]], R[mine])
    return out


def _acceptance(verdict: np.ndarray, name: str, *, already: bool) -> dict:
    """Share of a plan's recourses another model accepts, and whether it accepts at least one."""
    if already or verdict.size == 0:
        return {f"recourses accepted by {name}": float("nan"), f"plans accepted by {name}": float("nan")}
    return {f"recourses accepted by {name}": float(verdict.mean()),
            f"plans accepted by {name}": float(verdict.any())}


def _shift_metrics(population, raw0: pd.Series, R_raw: pd.DataFrame, encodable: np.ndarray, *,
                   already: bool) -> dict:
    """Mean largest shift of a plan's recourses (values frpd can read) and the share above LARGE_SHIFT."""
    if already or not encodable.any():
        return {name: float("nan") for name in SHIFT_METRICS}
    applicant = raw0.to_dict()
    shifts = np.array([population.largest_shift(applicant, row)
                       for row in R_raw.loc[encodable].to_dict("records")], dtype=np.float64)
    return {"largest shift": float(shifts.mean()), "shift > 0.3": float(np.mean(shifts > LARGE_SHIFT))}


def _advice_metrics(encoder, x0: np.ndarray, R_enc: np.ndarray, encodable: np.ndarray, *, already: bool) -> dict:
    """Share of a plan's recourses another recourse of the plan dominates (every recourse encodable; else NaN)."""
    if already or len(R_enc) == 0 or not encodable.all():
        return {"dominated": float("nan")}
    from .directions import dominated

    n = len(R_enc)
    beaten = dominated(encoder, R_enc, np.broadcast_to(x0, R_enc.shape), np.zeros(n, dtype=np.int64),
                       np.ones(n, dtype=bool))
    return {"dominated": float(beaten.mean())}


def _margin_metrics(probability: np.ndarray, threshold: float, *, already: bool) -> dict:
    """Mean probability of a plan's scored recourses and the share of them below threshold + NEAR_THRESHOLD."""
    scored = probability[~np.isnan(probability)]
    if already or scored.size == 0:
        return {name: float("nan") for name in MARGIN_METRICS}
    return {"probability": float(scored.mean()),
            "near threshold": float(np.mean(scored < threshold + NEAR_THRESHOLD))}


def _graph_attacher(graph, training):
    """A function ``(x0, raw0) -> (neighbors, weights)`` for graph path costs, or None without a graph."""
    if graph is None:
        return None
    from .graph import attach_source

    if graph.n_nodes != training.n_rows:
        raise InputError(f"The graph has {graph.n_nodes} nodes but the training data has {training.n_rows} rows; "
                         "pass the graph built from this training file (frpd build-graph).")

    def attach(x0, raw0):
        codes0 = training.encoder.constraint_codes(raw0.to_frame().T, source="the applicants")
        return attach_source(graph, training.X, training.codes, x0, codes0)

    attach.graph = graph
    return attach


def _evaluate_one(rec, k, raw0, x0, already, R_raw, R_enc, favorable, encodable, training, index, rules,
                  attach) -> dict:
    nan = float("nan")
    n = len(R_raw)
    row = {"method": _method_of(rec), "applicant": str(rec["applicant"]),
           "status": "already-favorable" if already else "needs-recourse", "k": k, "n_recourses": n,
           "n_favorable": int(favorable.sum()), **{c: nan for c in (*METRICS, "path cost", *PATH_METRICS)},
           "seconds": _seconds(rec), "problems": ""}
    problems = []
    if already:
        if n:
            problems.append("the applicant is already predicted favourable")
        row["problems"] = "; ".join(problems)
        return row
    row["validity"] = m.validity(favorable, n, k)
    row["full plans"] = 1.0 if n == k else 0.0
    if n > k:
        problems.append(f"{n} recourses, more than k = {k}")
    if n == 0:
        row["problems"] = "; ".join(problems or ["no recourse"])
        return row

    if not favorable.all():
        bad = [str(int(r)) for r, f in zip(_ranks(rec), favorable) if not f]
        problems.append(f"recourse(s) {', '.join(bad)} not predicted favourable")
    if not encodable.all():
        bad = [str(int(r)) for r, e in zip(_ranks(rec), encodable) if not e]
        problems.append(f"recourse(s) {', '.join(bad)} hold values outside the training vocabulary, non-numbers or "
                        "fractions of integer features")

    audit = m.constraint_violations(raw0, R_raw.reset_index(drop=True), atol=_ATOL,
                                    **{**rules, "ranges": _ranges_for(rules["ranges"], raw0, training.schema)})
    far = _levels_beyond_bound(training.schema, raw0, R_raw)
    audit = {**audit, "range": audit["range"] + far, "total": audit["total"] + far}
    row["violations"] = float(audit["total"])
    if audit["total"]:
        kinds = [f"{audit[kind]} {kind}" for kind in ("immutable", "monotone", "range", "vocabulary") if audit[kind]]
        problems.append(f"constraint violations: {', '.join(kinds)}")
    row["sparsity"] = m.sparsity(raw0, R_raw.reset_index(drop=True), atol=_ATOL).mean

    if encodable.all():
        row["cost"] = m.cost(x0, R_enc)
        row["anti-diversity"] = m.anti_diversity(x0, R_enc)
        row["dpp"] = m.dpp_diversity(R_enc)
        row["manifold"] = m.manifold_distance(R_enc, index=index)

    paths = [r.get("path") for r in rec["recourses"]]
    if any(p is not None for p in paths):
        _path_metrics(row, problems, paths, x0, raw0, training, attach)
    row["problems"] = "; ".join(problems)
    return row


def _ranges_for(ranges: dict, raw0: pd.Series, schema=None) -> dict:
    """The training ranges, narrowed by the limits relative to the applicant (``--range COL=+0:+12``) and
    widened to the applicant's own value: keeping a value is never a violation."""
    out = {}
    for name, (lo, hi) in ranges.items():
        value = raw0[name]
        number = isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(float(value))
        f = None if schema is None else schema.feature(name)
        if number and f is not None and f.is_relative:
            low, high = f.bounds(float(value))
            lo, hi = max(lo, float(low)), min(hi, float(high))
        if number:
            lo, hi = min(lo, float(value)), max(hi, float(value))
        out[name] = (lo, hi)
    return out


def _levels_beyond_bound(schema, raw0: pd.Series, R_raw: pd.DataFrame) -> int:
    """Changed ordinal values more levels away from the applicant's than a declared move bound allows (counted
    with the range violations; a value that is no level is the vocabulary's to count)."""
    from .candidates import level_bounded, level_positions

    count = 0
    for f in level_bounded(schema):
        if f.name not in R_raw.columns:
            continue
        mine = int(level_positions(f, [raw0[f.name]])[0])
        theirs = level_positions(f, R_raw[f.name].tolist())
        if mine >= 0:
            count += int(np.count_nonzero((theirs >= 0) & f.levels_beyond(theirs, mine)))
    return count


def _ranks(rec) -> list:
    return [r.get("rank") or j + 1 for j, r in enumerate(rec["recourses"])]


def _seconds(rec) -> float:
    value = rec.get("seconds")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return value if math.isfinite(value) and value >= 0 else float("nan")


def _path_metrics(row, problems, paths, x0, raw0, training, attach) -> None:
    if any(p is None or len(p) == 0 for p in paths):
        problems.append("some recourses of a graph plan have no path")
        return
    try:
        nodes = [np.asarray([int(v) for v in p], dtype=np.int64) for p in paths]
    except (TypeError, ValueError):
        problems.append("a path holds a node that is not an integer")
        return
    X = training.X
    if any(p.min() < 0 or p.max() >= X.shape[0] for p in nodes):
        problems.append(f"a path names a node outside the training rows 0..{X.shape[0] - 1}")
        return
    if attach is None:
        lengths = [float(np.linalg.norm(X[p[0]] - x0) + np.sum(np.linalg.norm(np.diff(X[p], axis=0), axis=1)))
                   for p in nodes]
    else:
        from .graph import path_cost

        neighbors, weights = attach(x0, raw0)
        lengths = []
        for j, p in enumerate(nodes):
            try:
                lengths.append(path_cost(attach.graph, neighbors, weights, p))
            except InputError as exc:
                problems.append(f"path {j + 1} leaves the graph ({exc})")
                return
    row["path cost"] = m.path_plan_cost(lengths)
    row["cost"] = row["path cost"]
    if len(nodes) >= 2:
        row["path diversity"] = m.path_diversity(nodes, X, x0=x0, weighted=False)
        row["path anti-diversity"] = m.path_anti_diversity(nodes, X, x0=x0)


# --------------------------------------------------------------------------- aggregation


def summarize_by_method(per_applicant: pd.DataFrame) -> pd.DataFrame:
    """The table of the paper: one row per method, mean and std of every metric.

    Parameters
    ----------
    per_applicant : DataFrame
        The result of :func:`evaluate_plans` (other rows may be appended, e.g.
        of another run, as long as the columns are the same).

    Returns
    -------
    DataFrame
        One row per method, in order of first appearance, with ``method``,
        ``applicants`` (plans evaluated), ``needing recourse`` (applicants the
        model predicts unfavourable), ``k``, then ``<metric> mean`` and
        ``<metric> std`` for each of :data:`METRICS` (and :data:`PATH_METRICS`
        when any plan has paths, ``seconds`` when any plan has timings, then
        :data:`MARGIN_METRICS`), then the counts :data:`PLAN_COUNTS` (:func:`plan_counts`). The
        means and (population) standard deviations come from
        :func:`frpd_cli.metrics.summarize` over the applicants that need a
        recourse; undefined values (NaN) are left out.
    """
    if not isinstance(per_applicant, pd.DataFrame) or "method" not in per_applicant.columns:
        raise InputError("'per_applicant' must be the DataFrame returned by evaluate_plans.")
    metrics = list(METRICS)
    if "minmax cost" in per_applicant.columns:
        metrics.insert(metrics.index("cost") + 1, "minmax cost")
    if "path diversity" in per_applicant.columns and per_applicant["path cost"].notna().any():
        metrics += list(PATH_METRICS)
    if "seconds" in per_applicant.columns and per_applicant["seconds"].notna().any():
        metrics.append("seconds")
    metrics += [name for name in MARGIN_METRICS if name in per_applicant.columns]
    metrics += [name for name in SHIFT_METRICS if name in per_applicant.columns]
    metrics += [name for name in ADVICE_METRICS if name in per_applicant.columns]
    metrics += [c for c in per_applicant.columns if c.startswith(("recourses accepted by ", "plans accepted by "))]
    rows = []
    for method in dict.fromkeys(per_applicant["method"].tolist()):
        group = per_applicant[per_applicant["method"] == method]
        needing = group[group["status"] == "needs-recourse"]
        row = {"method": method, "applicants": int(len(group)), "needing recourse": int(len(needing)),
               "k": int(group["k"].max())}
        for name in metrics:
            s = m.summarize(needing[name].to_numpy(dtype=np.float64))
            row[f"{name} mean"] = s.mean
            row[f"{name} std"] = s.std
        row.update(plan_counts(needing))
        rows.append(row)
    columns = ["method", "applicants", "needing recourse", "k"]
    for name in metrics:
        columns += [f"{name} mean", f"{name} std"]
    columns += list(PLAN_COUNTS)
    return pd.DataFrame(rows, columns=columns)


#: Counts of :func:`plan_counts`, the last columns of :func:`summarize_by_method`.
PLAN_COUNTS = ("n full plans", "n partial plans", "n without recourse")


def plan_counts(needing: pd.DataFrame) -> dict:
    """How many plans of applicants needing a recourse hold K recourses, 1 to K - 1, or none.

    Parameters
    ----------
    needing : DataFrame
        Rows of :func:`evaluate_plans` whose ``status`` is ``"needs-recourse"``.

    Returns
    -------
    dict
        ``{"n full plans": int, "n partial plans": int, "n without recourse": int}``, counted from
        ``n_recourses`` and ``k`` (the records' own status and ``partial`` field are not trusted).
    """
    n = needing["n_recourses"].to_numpy(dtype=np.int64)
    k = needing["k"].to_numpy(dtype=np.int64)
    return {"n full plans": int(np.sum(n >= k)), "n partial plans": int(np.sum((n >= 1) & (n < k))),
            "n without recourse": int(np.sum(n == 0))}


def summary_metrics(summary: pd.DataFrame) -> list[str]:
    """The metric names present in a :func:`summarize_by_method` table, in column order."""
    return [c[: -len(" mean")] for c in summary.columns if c.endswith(" mean")]


# --------------------------------------------------------------------------- plot


def plot_tradeoff(summary: pd.DataFrame, path, *, label_column: str = "method", title: str | None = None) -> Path:
    """Draw cost vs anti-diversity and cost vs DPP, one point per row of ``summary``.

    Parameters
    ----------
    summary : DataFrame
        A :func:`summarize_by_method` table (or any table with ``cost mean``,
        ``anti-diversity mean`` and ``dpp mean`` columns and a label column).
        Rows whose label names a theta (``quad@0.5``, ``quad@0.5+graph``; see
        :func:`frpd_cli.choice.method_label`) are joined by a line per method
        and variant, in theta order: a Pareto sweep.
    path : str or Path
        The PNG file to write.
    label_column : str, default="method"
    title : str, optional

    Returns
    -------
    Path

    Raises
    ------
    InputError
        matplotlib is not installed (the ``plot`` extra), or a column is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("Plotting needs matplotlib: install the plot extra with "
                         "`pip install 'frpd-cli[plot]'`.") from None
    needed = [label_column, "cost mean", "anti-diversity mean", "dpp mean"]
    missing = [c for c in needed if c not in summary.columns]
    if missing:
        raise InputError(f"The summary lacks the column(s) {', '.join(missing)}; pass a summarize_by_method table.")
    path = Path(path)
    series: dict = {}
    for _, r in summary.iterrows():
        label = str(r[label_column])
        swept = _THETA_LABEL.fullmatch(label)      # METHOD@THETA[+graph[:endpoint]]: one series per method
        key, order = (swept.group(1) + (swept.group(3) or ""), float(swept.group(2))) if swept else (label, 0.0)
        series.setdefault(key, []).append((order, r["cost mean"], r["anti-diversity mean"], r["dpp mean"]))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for key, points in series.items():
        points.sort()
        cost = [p[1] for p in points]
        style = "o-" if len(points) > 1 else "o"
        axes[0].plot(cost, [p[2] for p in points], style, label=key, markersize=4)
        axes[1].plot(cost, [p[3] for p in points], style, label=key, markersize=4)
    axes[0].set_xlabel("cost")
    axes[0].set_ylabel("anti-diversity (lower is more diverse)")
    axes[1].set_xlabel("cost")
    axes[1].set_ylabel("DPP (higher is more diverse)")
    axes[1].legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if not path.parent.is_dir():
        plt.close(fig)
        raise InputError(f"Cannot write '{path}': the folder '{path.parent}' does not exist.")
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
