"""Recourse plans and their records (the output contract of ``frpd plan``).

A :class:`Plan` holds one applicant's outcome; :func:`plan_record` turns it into
the JSON object of the ``json``/``jsonl`` formats and :func:`plan_rows` into the
rows of the ``csv`` format, exactly as the command-line contract specifies.
:func:`read_plans` reads either format back.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .data import EXACT_FLOATS
from .exceptions import InputError

if TYPE_CHECKING:
    from .candidates import Shortfall

__all__ = [
    "STATUSES",
    "Recourse",
    "Plan",
    "plan_record",
    "plan_rows",
    "plan_csv_rows",
    "csv_columns",
    "read_plans",
    "python_value",
    "escape_csv_text",
    "unescape_csv_text",
    "TRAILING_COLUMNS",
    "SHIFT_COLUMN",
    "FEATURE_PREFIX",
    "PLAN_COLUMNS",
    "SELECTION_COLUMNS",
    "feature_header",
    "feature_of_header",
    "renamed_features",
    "check_unique_header",
]

STATUSES = ("ok", "already-favorable", "infeasible", "invalid-input")
_DIGITS = 6
#: First characters that make a spreadsheet read a cell as a formula (or that it strips).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def escape_csv_text(value):
    """A text cell made safe for spreadsheets: prefix a single quote to formula-like text.

    Strings that start with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (a
    spreadsheet would evaluate them as a formula) get a leading ``'``, as
    spreadsheet-safe CSV writers do; so do strings that already start with ``'``, so
    that :func:`unescape_csv_text` restores every value exactly. Numbers, and strings
    that are plain numbers (``-3.5``, ``+1e3``), are returned unchanged.

    Examples
    --------
    >>> [escape_csv_text(v) for v in ["=1+2", "@SUM(A1)", "-3.5", -3.5, "own", "'quoted"]]
    ["'=1+2", "'@SUM(A1)", '-3.5', -3.5, 'own', "''quoted"]
    """
    if not isinstance(value, str) or not value:
        return value
    if value[0] == "'" or (value.startswith(_FORMULA_STARTS) and not _NUMBER.fullmatch(value)):
        return "'" + value
    return value


def unescape_csv_text(value):
    """Undo :func:`escape_csv_text` on a cell read back from a csv plan file."""
    if isinstance(value, str) and value.startswith("'"):
        return value[1:]
    return value


@dataclass(frozen=True)
class Recourse:
    """One recourse of a plan.

    Attributes
    ----------
    rank : int
        1..K, cheapest recourse first (ties keep the prototypes' order).
    features : dict
        Raw value of every feature.
    changes : dict
        ``{feature: (old, new)}`` for the features that change.
    cost : float
        Euclidean distance from the applicant in the encoded space (graph
        plans: the path cost).
    probability : float
        The model's favourable probability of ``features``.
    prototype : int
        0-based training row number of the prototype the recourse leads to.
    path, steps : list or None
        Graph plans only: training rows visited after leaving the applicant,
        and the feature changes of each move.
    projected : bool
        The prototype was a favourable row moved onto the applicant's immutable
        values (``--immutable-policy project``); written only when true.
    probabilities : dict or None
        With other models to satisfy (``--also-valid-for``, ``--robust``): each
        model's favourable probability, ``{"model": .., "also-1": .., "refit-1": ..}``.
    largest_shift : float or None
        The largest share of the training population one of its changes passes
        (:mod:`frpd_cli.population`); None when the training data is unknown.
    """

    rank: int
    features: dict
    changes: dict
    cost: float
    probability: float
    prototype: int
    path: list | None = None
    steps: list | None = None
    projected: bool = False
    probabilities: dict | None = None
    largest_shift: float | None = None

    @property
    def n_changes(self) -> int:
        """How many features the recourse changes."""
        return len(self.changes)


@dataclass(frozen=True)
class Plan:
    """One applicant's plan (possibly empty, with the reason).

    ``partial`` is true for an ``ok`` plan with fewer than K distinct
    recourses (the reason says why); the status stays ``ok``. ``pruning``:
    set when ``--max-candidates`` cut the applicant's candidates
    (:func:`frpd_cli.choice.pruning_bound`). ``shortfall``: set when the
    applicant had fewer than K candidates, the counts (a
    :class:`frpd_cli.candidates.Shortfall`) its reason quotes; no output
    record holds it. ``at_threshold``: an ``already-favorable`` applicant whose
    probability is exactly the threshold (a tie the model's own ``predict``
    may break the other way); no output record holds it.
    """

    applicant: str
    status: str
    reason: str | None
    method: str
    recourses: tuple = ()
    applicant_features: dict = field(default_factory=dict)
    partial: bool = False
    pruning: dict | None = None
    shortfall: Shortfall | None = None
    at_threshold: bool = False


def python_value(value):
    """A JSON-friendly Python scalar for a numpy/pandas value."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return value
    return value


def _rounded(x: float) -> float:
    return float(round(float(x), _DIGITS))


def plan_record(plan: Plan) -> dict:
    """The ``jsonl`` object of a plan."""
    recourses = []
    for r in plan.recourses:
        item = {
            "rank": r.rank,
            "features": {k: python_value(v) for k, v in r.features.items()},
            "changes": {k: [python_value(a), python_value(b)] for k, (a, b) in r.changes.items()},
            "cost": _rounded(r.cost),
            "probability": _rounded(r.probability),
        }
        if r.path is not None:
            item["path"] = [int(p) for p in r.path]
            item["steps"] = [
                {k: [python_value(a), python_value(b)] for k, (a, b) in step.items()} for step in r.steps or []
            ]
        if r.projected:
            item["projected"] = True
        item["n_changes"] = r.n_changes
        if r.probabilities is not None:
            item["probabilities"] = {k: _rounded(v) for k, v in r.probabilities.items()}
        item["largest_shift"] = None if r.largest_shift is None else _rounded(r.largest_shift)
        recourses.append(item)
    return {
        "applicant": plan.applicant,
        "status": plan.status,
        "reason": plan.reason,
        "method": plan.method,
        "recourses": recourses,
        "partial": bool(plan.partial),
        **({} if plan.pruning is None else {"pruning": {
            key: _rounded(value) if isinstance(value, float) else value for key, value in plan.pruning.items()}}),
    }


#: Columns of the ``csv`` format after the features, cost and probability (and ``projected``), in order.
TRAILING_COLUMNS = ("n_changes", "partial")
#: The column after :data:`TRAILING_COLUMNS` (before any other model's probability, which come last).
SHIFT_COLUMN = "largest_shift"


#: The plan csv's own columns (every one that any run may write, whether or not this run writes it).
PLAN_COLUMNS = ("applicant", "status", "reason", "rank", "method", "cost", "probability", "projected",
                *TRAILING_COLUMNS, SHIFT_COLUMN)
#: The selection artifact's own csv columns (``prototypes.csv``, ``applicants.csv`` of ``frpd select --out``): a
#: feature of one of these names is headed ``feature:<name>`` in both files.
SELECTION_COLUMNS = ("applicant", "status", "method", "theta", "rank", "row", "objective", "projected",
                     "objective_gap")
#: Put before the header of a feature column whose name is one of the csv's own column names.
FEATURE_PREFIX = "feature:"
_MODEL_PROBABILITY = "probability_"


def feature_header(name: str, *, models=(), reserved=PLAN_COLUMNS) -> str:
    """The csv header of a feature column: the feature's name, or ``feature:<name>`` when the name is one of
    the csv's own columns (``reserved``: :data:`PLAN_COLUMNS` for plans), a ``probability_<model>`` column of
    this run (``models``), or itself starts with ``feature:`` (so that :func:`feature_of_header` maps every
    header back to its one feature).

    Examples
    --------
    >>> [feature_header(n) for n in ("Age", "status", "cost", "feature:x")]
    ['Age', 'feature:status', 'feature:cost', 'feature:feature:x']
    >>> feature_header("probability_also-1", models=("also-1",)), feature_header("probability_also-1")
    ('feature:probability_also-1', 'probability_also-1')
    """
    if (name in reserved or name.startswith(FEATURE_PREFIX)
            or any(name == _MODEL_PROBABILITY + m for m in models)):
        return FEATURE_PREFIX + name
    return name


def feature_of_header(header: str, *, reserved=PLAN_COLUMNS) -> str:
    """The feature a csv feature column's header names: the inverse of :func:`feature_header` (a header that
    :func:`feature_header` never writes, such as ``feature:Age``, names the feature of that very name).

    Examples
    --------
    >>> [feature_of_header(h) for h in ("Age", "feature:status", "feature:feature:x", "feature:Age")]
    ['Age', 'status', 'feature:x', 'feature:Age']
    """
    if header.startswith(FEATURE_PREFIX):
        name = header[len(FEATURE_PREFIX):]
        if name in reserved or name.startswith((FEATURE_PREFIX, _MODEL_PROBABILITY)):
            return name
    return header


def renamed_features(feature_names, *, models=(), reserved=PLAN_COLUMNS) -> list[str]:
    """The features whose csv column is headed ``feature:<name>`` (:func:`feature_header`), in order."""
    return [n for n in feature_names if feature_header(n, models=models, reserved=reserved) != n]


def check_unique_header(header, source: str, *,
                        remedy: str = "Write the plans again with this version, which heads such a feature's column "
                                      f"'{FEATURE_PREFIX}<name>', or with --format jsonl.",
                        error=InputError) -> None:
    """Refuse a csv whose header repeats a column name: its columns cannot be told apart by name.

    Raises
    ------
    InputError (or ``error``)
        Naming the repeated names and the ``remedy``; a plan csv of an earlier frpd version repeats a fixed
        column's name when a feature has that name (``status``, ``cost``).
    """
    seen: dict = {}
    for name in header:
        seen[name] = seen.get(name, 0) + 1
    repeated = [name for name, n in seen.items() if n > 1]
    if repeated:
        shown = ", ".join(f"'{name}'" for name in repeated)
        raise error(
            f"{source} repeats the column name(s) {shown}, so those columns cannot be told apart (earlier frpd "
            f"versions wrote a feature named like one of their own columns under its bare name). {remedy}")


def csv_columns(feature_names, *, projected: bool = False, models=()) -> list[str]:
    """Column order of the ``csv`` format (``projected`` adds the column of that name before the trailing ones;
    ``models``, the names of the other models to satisfy, add ``probability_<name>`` columns at the end).

    A feature whose name is one of the csv's own columns is headed ``feature:<name>`` (:func:`feature_header`).
    """
    extra = ["projected"] if projected else []
    features = [feature_header(n, models=models) for n in feature_names]
    return ["applicant", "status", "reason", "rank", "method", *features, "cost", "probability", *extra,
            *TRAILING_COLUMNS, SHIFT_COLUMN, *(f"probability_{m}" for m in models)]


def plan_rows(plan: Plan, feature_names) -> list[dict]:
    """The ``csv`` rows of a plan: one per recourse, or one row with empty features when there is none.

    Rows carry a ``projected`` entry (true/false, empty without recourse); the
    writer keeps it only when the column is asked for. Keys are the csv headers
    (:func:`csv_columns`: ``feature:status`` for a feature named ``status``). Text cells (the applicant id,
    categories) are escaped with :func:`escape_csv_text`; numbers never are.
    """
    columns = csv_columns(feature_names, projected=True)
    return [dict(zip(columns, row)) for row in plan_csv_rows(plan, feature_names, projected=True)]


def _csv_cell(value):
    """``escape_csv_text(python_value(value))``, with the usual Python types decided first."""
    kind = type(value)
    if kind is int:
        return value
    if kind is float:
        return None if value != value else value        # NaN: an empty cell
    if kind is str:
        return escape_csv_text(value)
    return escape_csv_text(python_value(value))


def plan_csv_rows(plan: Plan, feature_names, *, projected: bool = False, models=()) -> list[list]:
    """The ``csv`` rows of a plan as lists of cells, in the order of
    ``csv_columns(feature_names, projected=..., models=...)``.

    What the ``csv`` writer writes (:func:`plan_rows` gives the same rows as dicts). Built as lists, not dicts
    for a ``csv.DictWriter``: writing 2,000 Adult plans (5,800 rows) takes 100 ms of CPU instead of 150 ms.
    """
    applicant = escape_csv_text(plan.applicant)
    head = [applicant, plan.status, plan.reason or ""]
    partial = "true" if plan.partial else "false"
    if not plan.recourses:
        return [[*head, "", plan.method, *[""] * len(feature_names), "", "", *([""] if projected else []), "",
                 partial, "", *[""] * len(models)]]
    rows = []
    for r in plan.recourses:
        features = r.features
        row = [*head, r.rank, plan.method, *[_csv_cell(features[name]) for name in feature_names],
               _rounded(r.cost), _rounded(r.probability)]
        if projected:
            row.append("true" if r.projected else "false")
        row += [r.n_changes, partial, "" if r.largest_shift is None else _rounded(r.largest_shift)]
        if models:
            row += [_rounded(r.probabilities[m]) for m in models]
        rows.append(row)
    return rows


def read_plans(path, *, feature_names=None) -> list[dict]:
    """Read plans written by ``frpd plan`` or ``frpd interpolate`` (csv or jsonl/json).

    Returns
    -------
    records : list of dict
        One ``jsonl``-style object per plan, in file order. CSV input is
        regrouped into the same objects (without ``changes``): consecutive rows
        of one (method, applicant) pair make one plan, and a pair that comes
        back later, or restarts at rank 1, is another plan (never merged).
        A csv feature column headed ``feature:<name>`` (:func:`feature_header`)
        is the feature ``<name>``.

    Raises
    ------
    InputError
        The file is missing, empty, not a plans file, or a csv whose header
        repeats a column name (:func:`check_unique_header`).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"The plans file '{path}' does not exist.")
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"The plans file '{path}' is empty.")
    if stripped[0] in "{[":
        return _read_json_plans(path, stripped)
    header = next(csv.reader(io.StringIO(text)), [])
    check_unique_header([unescape_csv_text(c) for c in header], f"The plans file '{path}'")
    frame = pd.read_csv(path, dtype={"applicant": str}, keep_default_na=False, **EXACT_FLOATS)
    frame.columns = [unescape_csv_text(c) for c in frame.columns]     # header cells are escaped as text cells
    required = {"applicant", "status", "reason", "rank", "method", "cost", "probability"}
    missing = sorted(required - set(frame.columns))
    if missing:
        raise InputError(f"The plans file '{path}' lacks the column(s) {', '.join(missing)}; expected output of frpd plan.")
    others = [c for c in frame.columns[list(frame.columns).index("probability") + 1:] if c.startswith("probability_")]
    features = ([c for c in frame.columns
                 if c not in required and c not in ("projected", *TRAILING_COLUMNS, SHIFT_COLUMN) and c not in others]
                if feature_names is None else
                [feature_header(n, models=[c[len(_MODEL_PROBABILITY):] for c in others]) for n in feature_names])
    names = {c: feature_of_header(c) for c in features}     # feature:status -> status
    for column in ["applicant", *features]:        # text cells were escaped for spreadsheets when written
        if column in frame.columns and not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].map(unescape_csv_text)
    records: list = []
    last = None
    for _, row in frame.iterrows():
        key = (row["method"], row["applicant"])
        if key != last or str(row["rank"]) in ("", "1"):
            records.append({"applicant": row["applicant"], "status": row["status"],
                            "reason": row["reason"] or None, "method": row["method"], "recourses": []})
            last = key
        rec = records[-1]
        if str(row["rank"]) != "":
            rec["recourses"].append({
                "rank": int(row["rank"]),
                "features": {names[c]: row[c] for c in features},
                "cost": float(row["cost"]),
                "probability": float(row["probability"]),
            })
            if others:
                rec["recourses"][-1]["probabilities"] = {c[len("probability_"):]: float(row[c]) for c in others}
            if "largest_shift" in frame.columns and str(row["largest_shift"]) != "":
                rec["recourses"][-1]["largest_shift"] = float(row["largest_shift"])
    return records


def _read_json_plans(path: Path, text: str) -> list[dict]:
    try:
        if text[0] == "[":
            records = json.loads(text)
        else:
            # JSON lines end at "\n" only: a text value may hold U+2028 or U+0085 unescaped (str.splitlines
            # would cut the record there)
            records = [json.loads(line) for line in text.split("\n") if line.strip()]
    except json.JSONDecodeError as exc:
        raise InputError(f"The plans file '{path}' is not valid JSON/JSON lines: {exc}.") from None
    for i, rec in enumerate(records):
        if not isinstance(rec, dict) or "applicant" not in rec or "recourses" not in rec:
            raise InputError(f"Record {i + 1} of '{path}' is not a plan object (needs 'applicant' and 'recourses').")
    return records
