"""Order relations every training row keeps between two numeric features, and recourses that break them.

A part never exceeds its whole: in SBA's loans the guaranteed amount ``SBA_Appv`` is at most the gross amount
``GrAppv`` in every row (equal in 12% of them). frpd moves features one by one within their own bounds, so a
recourse may lower ``GrAppv`` below ``SBA_Appv`` (measured: 42 to 103 of the SBA recourses of four model
families), a combination no one can hold. The relations are found, not declared: ``low <= high`` in every
training row, with equality in at least :data:`MIN_EQUAL_SHARE` of them (so that two columns whose ranges merely
lie apart, a duration and an amount, are no relation).

A derived feature is a ratio of two others: SBA's ``Portion`` is ``SBA_Appv / GrAppv`` in every row (within a
relative 5.3e-08). A recourse that changes the guaranteed or the gross amount leaves ``Portion`` as it was, a
loan no one can have; frpd cannot recompute a feature the model reads. The ratio relations are found as products
``numerator = derived * denominator`` that every row keeps within :data:`RATIO_RTOL`, between features of at
least :data:`MIN_RATIO_DISTINCT` distinct values (numerator and denominator), so that a coincidence of a few
small values is no relation. Sums ``a = b + c`` were searched the same way in the five public datasets of the
paper and its benchmarks (German, SBA, Bank, Adult, COMPAS) and none was found, so none is looked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .numeric import more_than_two_values, numeric_columns

__all__ = ["MAX_RATIO_COLUMNS", "MIN_EQUAL_SHARE", "MIN_RATIO_DISTINCT", "RATIO_RTOL", "OrderRelation",
           "RatioRelation", "broken_ratio", "broken_relation", "find_order_relations", "find_ratio_relations",
           "ratio_holds", "relation_columns"]

#: The least share of training rows in which the two features are equal for ``low <= high`` to count.
MIN_EQUAL_SHARE = 0.01

#: Fewer training rows than this show no relation worth a warning.
_MIN_ROWS = 20

#: The largest relative difference ``|numerator - derived * denominator| / max(|numerator|, |derived *
#: denominator|)`` a row may show for a ratio relation (SBA's Portion, stored to 8 digits, shows 5.3e-08).
RATIO_RTOL = 1e-6

#: The least number of distinct values of a ratio's numerator and of its denominator.
MIN_RATIO_DISTINCT = 10

#: The ratio search looks at the first this many usable numeric features (schema order): the screen costs
#: O(m**3) vectorised comparisons of a few rows, m the number of features.
MAX_RATIO_COLUMNS = 40

#: Rows of the screen every candidate triple passes before its row-by-row check.
_SCREEN_ROWS = 64


@dataclass(frozen=True)
class OrderRelation:
    """``low <= high`` in all ``n_rows`` training rows, equal in ``equal_share`` of them."""

    low: str
    high: str
    n_rows: int
    equal_share: float


@dataclass(frozen=True)
class RatioRelation:
    """``derived = numerator / denominator`` in all ``n_rows`` training rows, the largest relative difference
    ``max_error``; ``derived`` is the factor of the product with the fewer distinct values."""

    derived: str
    numerator: str
    denominator: str
    n_rows: int
    max_error: float


def relation_columns(frame: pd.DataFrame, schema, columns=None) -> dict:
    """The numeric columns a relation may hold between: finite in every row, with more than two distinct values
    (a 0/1 flag is no quantity); ``columns`` as :func:`frpd_cli.numeric.numeric_columns` returns them."""
    if columns is None:
        columns = numeric_columns(frame, schema)
    return {name: v for name, v in columns.items() if np.isfinite(v).all() and more_than_two_values(v)}


def find_order_relations(frame: pd.DataFrame, schema, *, min_equal_share: float = MIN_EQUAL_SHARE,
                         columns=None) -> list:
    """The order relations between numeric features that every training row keeps.

    Parameters
    ----------
    frame : DataFrame of shape (n_rows, >= n_features)
        Raw training rows.
    schema : Schema
    min_equal_share : float
        The least share of rows with ``low == high``.
    columns : dict, optional
        The frame's numeric columns as :func:`frpd_cli.numeric.numeric_columns` returns them (given when another
        search converts them too); computed when not given.

    Returns
    -------
    list of OrderRelation
        In schema order of ``low``, then ``high``; none between two immutable features (no recourse moves
        them) or with a feature of at most two values (a 0/1 flag is no quantity).

    Notes
    -----
    Pairs are screened by their minima and maxima first, so that only pairs whose ranges allow the relation
    are compared row by row: O(n_rows) per surviving pair.

    Examples
    --------
    >>> from frpd_cli.schema import SchemaSpec, infer_schema
    >>> frame = pd.DataFrame({"part": [1, 2, 3, 4] * 5, "whole": [1, 3, 3, 6] * 5, "label": [0, 1] * 10})
    >>> [(r.low, r.high) for r in find_order_relations(frame, infer_schema(frame, SchemaSpec()))]
    [('part', 'whole')]
    """
    columns = relation_columns(frame, schema, columns)
    if not columns or len(frame) < _MIN_ROWS:
        return []
    mutable = _mutable(schema)
    bounds = {name: (v.min(), v.max()) for name, v in columns.items()}
    out = []
    for low, a in columns.items():
        for high, b in columns.items():
            if low == high or not (mutable[low] or mutable[high]):
                continue
            if bounds[low][0] > bounds[high][0] or bounds[low][1] > bounds[high][1]:
                continue
            if not np.all(a <= b):
                continue
            equal = float(np.mean(a == b))
            if equal >= min_equal_share:
                out.append(OrderRelation(low, high, len(a), equal))
    return out


def broken_relation(relation: OrderRelation, applicant: dict, features: dict) -> bool:
    """Whether a recourse (raw ``features``) puts ``relation.low`` above ``relation.high`` while the applicant's
    own values kept them in order (an applicant already out of order is not the recourse's doing)."""
    try:
        before = float(applicant[relation.low]) <= float(applicant[relation.high])
        after = float(features[relation.low]) <= float(features[relation.high])
    except (KeyError, TypeError, ValueError):
        return False
    return before and not after


def _mutable(schema) -> dict:
    return {f.name: f.mutability != "immutable" for f in schema.features}


def _close(numerator, product, rtol: float):
    """Elementwise: ``numerator`` and ``product`` agree within ``rtol`` of the larger magnitude."""
    return np.abs(numerator - product) <= rtol * np.maximum(np.abs(numerator), np.abs(product))


#: Rows compared at a time by the row-by-row check, which stops at the first block a triple fails in: a triple
#: that passed the screen by chance (columns of zeros in the screen's rows) costs about one block.
_BLOCK_ROWS = 1 << 16


def _holds_in_every_row(numerator, left, right, rtol: float) -> bool:
    for start in range(0, numerator.size, _BLOCK_ROWS):
        part = slice(start, start + _BLOCK_ROWS)
        if not _close(numerator[part], left[part] * right[part], rtol).all():
            return False
    return True


def find_ratio_relations(frame: pd.DataFrame, schema, *, rtol: float = RATIO_RTOL,
                         min_distinct: int = MIN_RATIO_DISTINCT, max_columns: int = MAX_RATIO_COLUMNS,
                         columns=None) -> list:
    """The ratio relations ``derived = numerator / denominator`` between numeric features that every training row
    keeps.

    Parameters
    ----------
    frame : DataFrame of shape (n_rows, >= n_features)
        Raw training rows.
    schema : Schema
    rtol : float
        The largest relative difference of a row (:data:`RATIO_RTOL`).
    min_distinct : int
        The least number of distinct values of the numerator and of the denominator.
    max_columns : int
        The search looks at the first ``max_columns`` usable numeric features only (:data:`MAX_RATIO_COLUMNS`).
    columns : dict, optional
        The frame's numeric columns as :func:`frpd_cli.numeric.numeric_columns` returns them.

    Returns
    -------
    list of RatioRelation
        One per product ``numerator = derived * denominator`` (a product holds once, whichever way it is read),
        ordered by the schema positions of numerator, derived and denominator; none among three immutable
        features (no recourse moves them), with a feature of at most two values, or with a denominator that is 0
        in some row.

    Notes
    -----
    Every ordered choice of a numerator and an unordered pair of factors is first screened on
    ``_SCREEN_ROWS`` rows spread over the frame, in one vectorised comparison per pair of factors: O(m**3) for m
    features (at most :data:`MAX_RATIO_COLUMNS`), independent of n_rows. Only the triples that pass are compared
    row by row, in blocks of ``_BLOCK_ROWS`` rows, stopping at the first block a triple fails in; a relation
    found costs O(n_rows), and two sorts to count the distinct values of its factors.

    Examples
    --------
    >>> from frpd_cli.schema import SchemaSpec, infer_schema
    >>> whole = np.arange(100, 130)
    >>> share = np.resize([0.5, 0.75, 0.8, 1.0], 30)
    >>> frame = pd.DataFrame({"whole": whole, "part": whole * share, "share": share, "label": [0, 1] * 15})
    >>> [(r.derived, r.numerator, r.denominator) for r in find_ratio_relations(frame, infer_schema(frame, SchemaSpec()))]
    [('share', 'part', 'whole')]
    """
    columns = relation_columns(frame, schema, columns)
    names = list(columns)[:max_columns]
    n_rows = len(frame)
    if len(names) < 3 or n_rows < _MIN_ROWS:
        return []
    mutable = _mutable(schema)
    X = [columns[name] for name in names]
    rows = np.unique(np.linspace(0, n_rows - 1, min(n_rows, _SCREEN_ROWS)).astype(np.int64))
    screen = np.column_stack([x[rows] for x in X])
    distinct: dict = {}

    def n_distinct(j: int) -> int:             # a sort: only for the few triples that every row keeps
        if j not in distinct:
            distinct[j] = len(np.unique(X[j]))
        return distinct[j]

    def enough(j: int) -> bool:                # the screen's rows often show enough distinct values already
        return len(np.unique(screen[:, j])) >= min_distinct or n_distinct(j) >= min_distinct

    found = []
    m = len(names)
    for b in range(m):
        for c in range(b + 1, m):
            product = screen[:, b] * screen[:, c]
            for a in np.flatnonzero(_close(screen, product[:, None], rtol).all(axis=0)):
                a = int(a)
                if a in (b, c) or not (mutable[names[a]] or mutable[names[b]] or mutable[names[c]]):
                    continue
                if not _holds_in_every_row(X[a], X[b], X[c], rtol):
                    continue
                full = X[b] * X[c]
                # the factor of fewer distinct values is the derived one; ties: the later in schema order
                derived, denominator = (b, c) if n_distinct(b) < n_distinct(c) else (c, b)
                if n_distinct(denominator) < min_distinct or not enough(a) or not np.all(X[denominator] != 0):
                    continue
                scale = np.maximum(np.abs(X[a]), np.abs(full))
                error = np.abs(X[a] - full)
                max_error = float(np.max(np.divide(error, scale, out=np.zeros_like(error), where=scale > 0)))
                found.append((a, derived, denominator,
                              RatioRelation(names[derived], names[a], names[denominator], n_rows, max_error)))
    return [relation for *_, relation in sorted(found, key=lambda item: item[:3])]


def ratio_holds(relation: RatioRelation, features: dict, *, rtol: float = RATIO_RTOL) -> bool | None:
    """Whether raw ``features`` keep ``relation`` (None when one of its values is missing or no number)."""
    try:
        numerator = float(features[relation.numerator])
        product = float(features[relation.derived]) * float(features[relation.denominator])
    except (KeyError, TypeError, ValueError):
        return None
    if not (np.isfinite(numerator) and np.isfinite(product)):
        return None
    return bool(_close(numerator, product, rtol))


def broken_ratio(relation: RatioRelation, applicant: dict, features: dict) -> bool:
    """Whether a recourse (raw ``features``) breaks ``relation`` that the applicant's own values keep (an
    applicant already off it is not the recourse's doing)."""
    return ratio_holds(relation, applicant) is True and ratio_holds(relation, features) is False
