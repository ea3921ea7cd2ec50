"""Checks that nothing frpd writes or reads breaks the rules it promises.

Two kinds of checks live here:

- :func:`verify_plans`, the last gate before output. Every recourse, whatever produced it
  (linear interpolation, a projected prototype, a graph path, a selection artifact read back),
  is checked against its applicant and re-predicted by the model, in one batched model
  call per chunk. A violation is a bug (or a model that answers differently for the same
  row): :class:`RecourseVerificationError`, and the recourse is never written.
- :func:`check_selection` and :func:`check_eigen`, the checks run after a selection artifact
  is loaded: what the artifact claims (its prototypes obey the applicant's immutable and
  monotone rules, they are the training rows they name, its eigendecompositions are finite
  with consistent shapes) is re-checked against the inputs, so an edited artifact whose
  manifest hashes were recomputed is refused instead of producing output.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .encoding import Encoder, category_key
from .exceptions import ArtifactError, FrpdError
from .schema import Feature

__all__ = [
    "PROBABILITY_TOLERANCE",
    "RecourseVerificationError",
    "Violation",
    "recourse_violations",
    "verify_plans",
    "check_selection",
    "check_eigen",
]

#: Largest difference allowed between a recourse's reported probability and the model's
#: re-prediction, and how far below the threshold a re-prediction may fall: floating-point
#: noise of the same rows scored in batches of other sizes, nothing more.
PROBABILITY_TOLERANCE = 1e-9
_OK_STATUSES = ("ok",)
_SELECTION_STATUSES = ("ok", "already-favorable", "infeasible")


class RecourseVerificationError(FrpdError):
    """A recourse about to be written breaks a rule: an internal error of frpd, never user input."""


@dataclass(frozen=True)
class Violation:
    """One broken rule.

    Attributes
    ----------
    position : int
        Index of the offending item (a recourse in the batch, or a row of a table).
    rule : str
        The rule, in a few words (``"immutable feature 'age' unchanged"``).
    detail : str
        What was found instead.
    """

    position: int
    rule: str
    detail: str


# ---------------------------------------------------------------------------- feature rules


class _Levels:
    """Level index of a category value: the value itself when it is a level, else by category key."""

    def __init__(self, f: Feature):
        self._direct = {level: i for i, level in enumerate(f.levels) if not isinstance(level, (bool, np.bool_))}
        self._keyed = {category_key(level): i for i, level in enumerate(f.levels)}

    def get(self, value):
        if not isinstance(value, (bool, np.bool_)):
            try:
                found = self._direct.get(value)
            except TypeError:  # unhashable
                found = None
            if found is not None:  # equal values have equal category keys: the same answer, faster
                return found
        return self._keyed.get(category_key(value))


def _plain(value):
    """A numpy scalar as the Python value it holds (other values unchanged)."""
    return value.item() if isinstance(value, np.generic) else value


def _number(value) -> float | None:
    """``value`` as a float, or None when it is not a number."""
    if isinstance(value, (bool, np.bool_)) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _rule_violations(encoder: Encoder, rows: list[dict], origins: list[dict], *,
                     what: str = "recourse") -> list[Violation]:
    """Rows that break a feature rule with respect to their origin row (the applicant).

    Rules: every feature present; categories from the training vocabulary; numbers finite;
    integer features whole where they differ from the origin (an unchanged value is the
    applicant's own); immutable features equal to the origin's; increasing (decreasing)
    features not below (above) the origin's value or rank; an ordinal's level within its move bound.
    """
    found = []
    for f in encoder.schema.features:
        name = f.name
        levels = _Levels(f) if f.is_categorical else None
        for i in _suspects(f, rows, origins):
            row, origin = rows[i], origins[i]
            if name not in row:
                found.append(Violation(i, "every feature present", f"the {what} has no value for '{name}'"))
                continue
            value, start = _plain(row[name]), _plain(origin.get(name))     # messages show no numpy reprs
            if f.is_categorical:
                new, old = levels.get(value), levels.get(start)
                if new is None:
                    found.append(Violation(i, f"categories of '{name}' from the training vocabulary",
                                           f"the {what} has {value!r}"))
                    continue
                same = old is not None and new == old
            else:
                new, old = _number(value), _number(start)
                if new is None or not math.isfinite(new):
                    found.append(Violation(i, f"'{name}' a finite number", f"the {what} has {value!r}"))
                    continue
                same = old is not None and new == old
                if f.kind == "integer" and not same and not float(new).is_integer():
                    found.append(Violation(i, f"integer feature '{name}' whole", f"the {what} has {value!r}"))
                    continue
            if f.mutability == "immutable" and not same:
                found.append(Violation(i, f"immutable feature '{name}' unchanged",
                                       f"the applicant has {start!r}, the {what} {value!r}"))
            elif f.mutability in ("increasing", "decreasing") and not same:
                if old is None:
                    found.append(Violation(i, f"'{name}' comparable with the applicant's value",
                                           f"the applicant has {start!r}"))
                elif (new < old) if f.mutability == "increasing" else (new > old):
                    found.append(Violation(i, f"{f.mutability} feature '{name}' moves only its allowed way",
                                           f"the applicant has {start!r}, the {what} {value!r}"))
            if f.kind == "ordinal" and f.max_levels is not None and f.mutability != "immutable" and not same and (
                    old is None or f.levels_beyond(new, old)):
                found.append(Violation(i, f"a changed '{name}' inside its --max-move bound ({f.move_text})",
                                       f"the applicant has {start!r}, the {what} {value!r}"))
            if f.has_range and not same and (old is None if f.is_relative else False):
                found.append(Violation(i, f"'{name}' comparable with the applicant's value (its --range is "
                                       "relative to it)", f"the applicant has {start!r}"))
            elif f.has_range and not same and not f.in_range([value], old if f.is_relative else None)[0]:
                limits = ("--range" if f.max_move is None else "--max-move bound"
                          if f.low is None and f.high is None and f.rel_low is None and f.rel_high is None
                          else "--range and --max-move bound")
                found.append(Violation(i, f"a changed '{name}' inside its {limits}",
                                       f"the applicant has {start!r}, the {what} {value!r}"))
    return found


def _kept_level(value, start, texts: set) -> bool:
    """Whether ``value`` is the text ``start`` and a level of the feature (one of ``texts``)."""
    return type(value) is str and type(start) is str and value == start and value in texts


def _suspects(f: Feature, rows: list[dict], origins: list[dict]):
    """Rows that may break a rule of feature ``f``: numeric ones screened with numpy, categorical ones all but the
    rows that keep the applicant's level (every row otherwise).

    The screen only narrows down which rows the exact per-row rules look at, so it may flag too
    many but never too few (values it cannot convert send every row to the exact rules).
    """
    if f.is_categorical:
        # a category kept as it is (the same text, a level of the feature) breaks no rule: every rule but the
        # vocabulary's applies to changed values only
        name = f.name
        texts = {level for level in f.levels if type(level) is str}
        return [i for i, (row, origin) in enumerate(zip(rows, origins))
                if not _kept_level(row.get(name), origin.get(name), texts)]
    if not f.is_numeric:
        return range(len(rows))
    try:
        new = np.array([row[f.name] for row in rows], dtype=np.float64)
        old = np.array([origin[f.name] for origin in origins], dtype=np.float64)
    except (KeyError, TypeError, ValueError, OverflowError):
        return range(len(rows))
    if any(isinstance(row[f.name], (bool, np.bool_)) for row in (*rows, *origins)):  # numpy takes them as 0/1
        return range(len(rows))
    with np.errstate(invalid="ignore"):
        same = new == old
        bad = ~np.isfinite(new)
        if f.kind == "integer":
            bad |= ~same & (new != np.round(new))
        if f.mutability == "immutable":
            bad |= ~same
        if f.has_range:
            bad |= ~same & ~f.in_range(new, old if f.is_relative else None)
        if f.mutability == "increasing":
            bad |= ~same & ~(new >= old)
        elif f.mutability == "decreasing":
            bad |= ~same & ~(new <= old)
    return np.flatnonzero(bad).tolist()


# ---------------------------------------------------------------------------- recourses


def recourse_violations(encoder, model, plans, *, margin: float = 0.0) -> list[tuple[int, int, Violation]]:
    """Every rule broken by a recourse of ``plans``, as ``(plan index, rank, violation)``.

    See :func:`verify_plans` for the rules. One model call for all the recourses.
    """
    level = float(model.threshold) + float(margin)
    encoder = getattr(encoder, "encoder", encoder)
    where, rows, origins, reported, claims = [], [], [], [], []
    found = []
    for p, plan in enumerate(plans):
        if plan.recourses and plan.status not in _OK_STATUSES:
            found.append((p, 0, Violation(-1, "only 'ok' plans carry recourses",
                                          f"the plan has status {plan.status!r} and {len(plan.recourses)} recourse(s)")))
        for j, r in enumerate(plan.recourses):
            where.append((p, r.rank))
            rows.append(r.features)
            origins.append(plan.applicant_features)
            reported.append(r.probability)
            claims.append(getattr(r, "probabilities", None))
            if r.rank != j + 1:
                found.append((p, r.rank, Violation(-1, "ranks 1..K in order", f"rank {r.rank} at position {j + 1}")))
            cost = _number(r.cost)
            if cost is None or not math.isfinite(cost) or cost < 0:
                found.append((p, r.rank, Violation(-1, "cost finite and >= 0", f"the cost is {r.cost!r}")))
    if not rows:
        return found
    broken = set()
    for v in _rule_violations(encoder, rows, origins):
        found.append((*where[v.position], v))
        broken.add(v.position)
    names = list(encoder.schema.feature_names)
    scored = [i for i in range(len(rows)) if i not in broken]  # rows the model can be given
    if scored and hasattr(model, "probabilities"):     # several models: each one checked (frpd_cli.judge)
        from .judge import judge_violations

        frame = pd.DataFrame([{n: rows[i][n] for n in names} for i in scored], columns=names)
        judged = replace(model, threshold=float(model.threshold) + float(margin))
        for at, rule, detail in judge_violations(judged, frame, [claims[i] for i in scored], PROBABILITY_TOLERANCE):
            found.append((*where[scored[at]], Violation(scored[at], rule, detail)))
        model, margin, level = model.model, 0.0, float(model.model.threshold)   # the records' probability
    if scored:
        frame = pd.DataFrame([{n: rows[i][n] for n in names} for i in scored], columns=names)
        probability = np.asarray(model.favorable_probability(frame), dtype=np.float64)
        for i, prob in zip(scored, probability.tolist()):
            claimed = _number(reported[i])
            if not math.isfinite(prob) or not 0.0 <= prob <= 1.0:
                found.append((*where[i], Violation(i, "the model's probability finite in [0, 1]",
                                                   f"the model returned {prob!r}")))
            elif prob < level - PROBABILITY_TOLERANCE:
                rule = (f"re-predicted favourable (probability >= {model.threshold:g})" if not margin else
                        f"re-predicted favourable by the margin (probability >= {model.threshold:g} + {margin:g})")
                found.append((*where[i], Violation(i, rule, f"the model gives {prob:.6g}")))
            elif claimed is None or not math.isfinite(claimed) or abs(prob - claimed) > PROBABILITY_TOLERANCE:
                found.append((*where[i], Violation(i, "reported probability equal to the model's",
                                                   f"reported {_plain(reported[i])!r}, the model gives {prob!r}")))
    return found


def verify_plans(encoder, model, plans, *, margin: float = 0.0):
    """Check every recourse of ``plans`` before it is written; return ``plans`` unchanged.

    Parameters
    ----------
    encoder : Encoder or TrainingSet
        The fitted encoder (its schema's roles, levels and mutabilities are the rules); a
        training set stands for its encoder.
    model : frpd_cli.model.Model
        The model and threshold the plans were made with.
    plans : list of Plan
    margin : float, default=0.0
        Probability points above ``model.threshold`` every recourse must reach
        (``--margin``).

    Returns
    -------
    plans : list of Plan
        The same list, so that the call can wrap a return statement.

    Raises
    ------
    RecourseVerificationError
        A recourse lacks a feature; has a category outside the training vocabulary, a
        non-finite number, or a fractional value of an integer feature (where it differs
        from the applicant's); changes an immutable feature; moves an increasing
        (decreasing) feature down (up); has a negative or non-finite cost; or the model's
        re-prediction of its raw row is below the threshold (plus ``margin``) or differs from the reported
        probability by more than :data:`PROBABILITY_TOLERANCE`. Also a plan whose status is
        not ``ok`` but that carries recourses, or ranks out of order. The message names the
        applicant, the recourse and the rule.

    Notes
    -----
    One ``predict_proba`` call for all recourses of ``plans``, plus ``O(n_recourses *
    n_features)`` Python work. Call it once per chunk.
    """
    found = recourse_violations(encoder, model, plans, margin=margin)
    if not found:
        return plans
    p, rank, v = found[0]
    plan = plans[p]
    more = f" ({len(found) - 1} more violation(s) in this chunk)" if len(found) > 1 else ""
    which = f"recourse {rank} of applicant {plan.applicant!r}" if rank else f"the plan of applicant {plan.applicant!r}"
    raise RecourseVerificationError(
        f"internal error: {which} (method {plan.method}) breaks the rule \"{v.rule}\": {v.detail}{more}. "
        "It was not written. This is a bug of frpd (or a model that scores the same row differently from "
        "call to call); please report it with the command line."
    )


# ---------------------------------------------------------------------------- selection artifacts


def _artifact_error(artifact, file: str, row: int | None, problem: str, hint: str) -> ArtifactError:
    where = f"{file} data row {row + 1}" if row is not None else file
    return ArtifactError(
        f"The selection artifact '{artifact}' fails its load checks: {where} {problem}. The artifact was edited or "
        f"damaged after it was written (its manifest hashes match, so they were recomputed). Re-run: {hint}"
    )


def check_selection(encoder: Encoder, applicants: pd.DataFrame, prototypes: pd.DataFrame, status: pd.DataFrame, *,
                    thetas, k: int, artifact, hint: str, training: pd.DataFrame | None = None) -> None:
    """Re-check what a selection artifact claims against its applicants (and the training data).

    Parameters
    ----------
    encoder : Encoder
        The selection's encoder (``encoder.json``).
    applicants : DataFrame
        ``applicants.csv`` as read: ``applicant`` and every feature (types restored), a feature
        named as one of the files' own columns headed ``feature:<name>``
        (:func:`frpd_cli.plans.feature_header`).
    prototypes : DataFrame
        ``prototypes.csv`` as read (strings are fine: values are compared by category key
        or number; feature columns headed as in ``applicants``).
    status : DataFrame
        ``status.csv`` as read.
    thetas : list of float
    k : int
    artifact : path
        The artifact folder, named in messages.
    hint : str
        The command that rebuilds the artifact.
    training : DataFrame, optional
        The raw training rows (feature columns). When given, each prototype that is not
        projected must be the training row it names, value for value.

    Raises
    ------
    ArtifactError
        Naming the artifact, the file, the data row and the broken rule: duplicate or
        unknown applicants, a status missing or unknown, a rank outside 1..k, a row number
        that is not a training row, a value that is not the named training row's, a
        category outside the vocabulary, or a prototype that changes an immutable feature or
        moves a monotone feature the wrong way for its applicant.
    """
    from .plans import SELECTION_COLUMNS, feature_header

    names = list(encoder.schema.feature_names)
    header = {n: feature_header(n, reserved=SELECTION_COLUMNS) for n in names}    # feature:status for status
    ids = applicants["applicant"].astype(str).tolist()
    duplicated = pd.Series(ids).duplicated().to_numpy()
    if duplicated.any():
        r = int(np.flatnonzero(duplicated)[0])
        raise _artifact_error(artifact, "applicants.csv", r, f"repeats the applicant {ids[r]!r}", hint)
    origin_rows = applicants.loc[:, [header[n] for n in names]].set_axis(names, axis=1).to_dict("records")
    for v in _rule_violations(encoder, origin_rows, origin_rows, what="applicant"):
        raise _artifact_error(artifact, "applicants.csv", v.position, f"breaks the rule \"{v.rule}\": {v.detail}",
                              hint)
    known_thetas = {float(t) for t in thetas}
    seen, ok_keys, known_ids = set(), set(), set(ids)
    for r, rec in enumerate(status.to_dict("records")):
        a, theta = str(rec.get("applicant")), _number(rec.get("theta"))
        if a not in known_ids or theta not in known_thetas:
            raise _artifact_error(artifact, "status.csv", r, f"names applicant {a!r} at theta {rec.get('theta')!r}, "
                                  "not one of the selection's", hint)
        if rec.get("status") not in _SELECTION_STATUSES:
            raise _artifact_error(artifact, "status.csv", r, f"has the unknown status {rec.get('status')!r}", hint)
        if (a, theta) in seen:
            raise _artifact_error(artifact, "status.csv", r, f"repeats applicant {a!r} at theta {theta:g}", hint)
        seen.add((a, theta))
        if rec.get("status") == "ok":
            ok_keys.add((a, theta))
    missing = [(a, t) for a in ids for t in sorted(known_thetas) if (a, t) not in seen]
    if missing:
        raise _artifact_error(artifact, "status.csv", None, f"has no status for applicant {missing[0][0]!r} at theta "
                              f"{missing[0][1]:g}", hint)
    # every row interpolate would use (those of an applicant and theta status.csv marks ok), and every row that
    # claims to be a prototype
    used = [(str(a), _number(t)) in ok_keys for a, t in zip(prototypes["applicant"], prototypes["theta"])]
    ok = prototypes[np.asarray(used, dtype=bool) | (prototypes["status"].astype(str) == "ok").to_numpy()]
    position = {a: i for i, a in enumerate(ids)}
    rows, origins, lines, ranks = [], [], [], set()
    n_train = None if training is None else len(training)
    projected = (ok["projected"].astype(str).str.lower().eq("true").to_numpy() if "projected" in ok.columns
                 else np.zeros(len(ok), dtype=bool))
    for (line, rec), proj in zip(ok.iterrows(), projected):
        line = int(line)
        a = str(rec["applicant"])
        if a not in position:
            raise _artifact_error(artifact, "prototypes.csv", line, f"names the unknown applicant {a!r}", hint)
        if str(rec["status"]) != "ok" or (a, _number(rec["theta"])) not in ok_keys:
            raise _artifact_error(artifact, "prototypes.csv", line, f"has status {str(rec['status'])!r} for applicant "
                                  f"{a!r} at theta {_shown(rec['theta'])}, where status.csv says otherwise", hint)
        rank, row = _number(rec["rank"]), _number(rec["row"])
        if rank is None or not rank.is_integer() or not 1 <= rank <= k:
            raise _artifact_error(artifact, "prototypes.csv", line, f"has rank {_shown(rec['rank'])}, not in 1..{k}", hint)
        key = (a, _number(rec["theta"]), rank)
        if key[1] not in known_thetas or key in ranks:
            raise _artifact_error(artifact, "prototypes.csv", line, f"repeats rank {int(rank)} of applicant {a!r} or "
                                  f"has a theta ({_shown(rec['theta'])}) the selection was not made with", hint)
        ranks.add(key)
        if row is None or not row.is_integer() or row < 0 or (n_train is not None and row >= n_train):
            bound = f" [0, {n_train})" if n_train is not None else " >= 0"
            raise _artifact_error(artifact, "prototypes.csv", line, f"names the training row {_shown(rec['row'])}, not "
                                  f"a row number in{bound}", hint)
        if training is not None and not proj:
            stored = training.iloc[int(row)]
            for f in encoder.schema.features:
                if not _same(f, rec[header[f.name]], stored[f.name]):
                    raise _artifact_error(artifact, "prototypes.csv", line, f"claims training row {int(row)} but "
                                          f"its '{f.name}' is {_shown(rec[header[f.name]])} where the training data "
                                          f"has {_shown(stored[f.name])}", hint)
        rows.append({n: rec[header[n]] for n in names})
        origins.append(origin_rows[position[a]])
        lines.append(line)
    for v in _rule_violations(encoder, rows, origins, what="prototype"):
        line = lines[v.position]
        raise _artifact_error(artifact, "prototypes.csv", line, f"(applicant {str(ok.loc[line, 'applicant'])!r}) "
                              f"breaks the rule \"{v.rule}\": {v.detail}", hint)


def _shown(value) -> str:
    """A table cell as a message shows it: whole numbers without '.0', text quoted."""
    number = _number(value)
    if number is not None and math.isfinite(number):
        return str(int(number)) if number.is_integer() else repr(number)
    return repr(value)


def _same(f: Feature, a, b) -> bool:
    if f.is_categorical:
        return category_key(a) == category_key(b)
    x, y = _number(a), _number(b)
    return x is not None and y is not None and x == y


_EIGEN_KEY = re.compile(r"^(values|vectors|candidates)_(0|[1-9][0-9]*)$")


def check_eigen(arrays: dict, *, n_applicants: int, n_rows: int, artifact, hint: str) -> None:
    """Check stored eigendecompositions (``eigen.npz``) before they are reused.

    Parameters
    ----------
    arrays : dict of str to ndarray
        ``values_<i>`` (m,), ``vectors_<i>`` (n_candidates, m) and ``candidates_<i>``
        (n_candidates,) per applicant ``i``.
    n_applicants : int
        Applicants of the run (``i`` must be below it).
    n_rows : int
        Training rows (candidate indices must be below it).
    artifact : path
    hint : str

    Raises
    ------
    ArtifactError
        An unknown array name, an applicant index out of range, an incomplete triple,
        non-finite values, shapes that disagree, or candidate indices that are not
        training rows; the message names the artifact, ``eigen.npz``, the array and the
        applicant. Nothing is recomputed silently: a reused decomposition must be the one
        that was stored.
    """
    def fail(problem: str) -> ArtifactError:
        return ArtifactError(f"The selection artifact '{artifact}' fails its load checks: eigen.npz {problem}; "
                             f"refusing to reuse it. Re-run: {hint}")

    groups: dict[int, dict] = {}
    for key, value in arrays.items():
        match = _EIGEN_KEY.match(key)
        if match is None:
            raise fail(f"holds the unknown array {key!r}")
        i = int(match.group(2))
        if i >= n_applicants:
            raise fail(f"array {key!r} is for applicant index {i}, but there are {n_applicants} applicant(s)")
        groups.setdefault(i, {})[match.group(1)] = np.asarray(value)
    for i in sorted(groups):
        g = groups[i]
        absent = [part for part in ("values", "vectors", "candidates") if part not in g]
        if absent:
            raise fail(f"lacks {', '.join(f'{p}_{i}' for p in absent)} (applicant index {i})")
        values, vectors, candidates = g["values"], g["vectors"], g["candidates"]
        for part, a in (("values", values), ("vectors", vectors)):
            if a.dtype.kind != "f":
                raise fail(f"array '{part}_{i}' has dtype {a.dtype}, expected floats")
            bad = np.flatnonzero(~np.isfinite(a.reshape(-1)))
            if bad.size:
                raise fail(f"array '{part}_{i}' holds {float(a.reshape(-1)[bad[0]])!r} at flat position {int(bad[0])} "
                           f"(applicant index {i}): eigenpairs must be finite")
        if values.ndim != 1 or vectors.ndim != 2 or vectors.shape[1] != values.shape[0]:
            raise fail(f"arrays 'values_{i}' {values.shape} and 'vectors_{i}' {vectors.shape} do not have the shapes "
                       "(m,) and (n_candidates, m)")
        if candidates.ndim != 1 or candidates.dtype.kind not in "iu" or candidates.shape[0] != vectors.shape[0]:
            raise fail(f"array 'candidates_{i}' ({candidates.dtype} {candidates.shape}) must be {vectors.shape[0]} "
                       "integers, one per row of the eigenvectors")
        out = np.flatnonzero((candidates < 0) | (candidates >= n_rows))
        if out.size:
            raise fail(f"array 'candidates_{i}' holds {int(candidates[out[0]])} at position {int(out[0])}, not a "
                       f"training row in [0, {n_rows})")
