"""Order relations every training row keeps between two numeric features, and recourses that break them.

A part never exceeds its whole: in SBA's loans the guaranteed amount ``SBA_Appv`` is at most the gross amount
``GrAppv`` in every row (equal in 12% of them). frpd moves features one by one within their own bounds, so a
recourse may lower ``GrAppv`` below ``SBA_Appv`` (measured: 42 to 103 of the SBA recourses of four model
families), a combination no one can hold. The relations are found, not declared: ``low <= high`` in every
training row, with equality in at least :data:`MIN_EQUAL_SHARE` of them (so that two columns whose ranges merely
lie apart, a duration and an amount, are no relation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["MIN_EQUAL_SHARE", "OrderRelation", "find_order_relations", "broken_relation"]

#: The least share of training rows in which the two features are equal for ``low <= high`` to count.
MIN_EQUAL_SHARE = 0.01

#: Fewer training rows than this show no relation worth a warning.
_MIN_ROWS = 20


@dataclass(frozen=True)
class OrderRelation:
    """``low <= high`` in all ``n_rows`` training rows, equal in ``equal_share`` of them."""

    low: str
    high: str
    n_rows: int
    equal_share: float


def find_order_relations(frame: pd.DataFrame, schema, *, min_equal_share: float = MIN_EQUAL_SHARE) -> list:
    """The order relations between numeric features that every training row keeps.

    Parameters
    ----------
    frame : DataFrame of shape (n_rows, >= n_features)
        Raw training rows.
    schema : Schema
    min_equal_share : float
        The least share of rows with ``low == high``.

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
    features = [f for f in schema.features if f.is_numeric and f.name in frame.columns]
    columns = {}
    for f in features:
        values = pd.to_numeric(frame[f.name], errors="coerce").to_numpy(dtype=np.float64)
        if np.isfinite(values).all() and len(np.unique(values)) > 2:
            columns[f.name] = values
    if not columns or len(frame) < _MIN_ROWS:
        return []
    mutable = {f.name: f.mutability != "immutable" for f in features}
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
