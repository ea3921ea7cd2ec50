"""Numeric codes that stand for a missing or wrong value: a lone negative value below a column of amounts.

COMPAS's ``length_of_stay`` (days in jail) is -1 in 149 of its 4937 training rows and 0 or more in all others:
the -1 marks a release dated before the arrest, no stay anyone can have. frpd treats it as the column's lowest
amount, so a recourse may move a stay of 3 days to -1 (measured: 5 to 8 recourses of the COMPAS plans of tree
models). Such a value is found, not declared: the column's minimum is negative, it is the only negative value,
and at most :data:`MAX_SENTINEL_SHARE` of the rows hold it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .numeric import more_than_two_values, numeric_columns

__all__ = ["MAX_SENTINEL_SHARE", "Sentinel", "find_sentinels"]

#: The largest share of training rows at the value for it to count as a code rather than an amount.
MAX_SENTINEL_SHARE = 0.1


@dataclass(frozen=True)
class Sentinel:
    """``feature`` holds ``value`` (negative) in ``n_at`` of ``n_rows`` training rows, and only values >= 0 in
    the others."""

    feature: str
    value: float
    n_at: int
    n_rows: int


def find_sentinels(frame: pd.DataFrame, schema, *, max_share: float = MAX_SENTINEL_SHARE, columns=None) -> list:
    """Mutable numeric features whose one negative value, held by few rows, lies below a column of amounts >= 0.

    Parameters
    ----------
    frame : DataFrame of shape (n_rows, >= n_features)
        Raw training rows.
    schema : Schema
    max_share : float
        The largest share of rows at the value.
    columns : dict, optional
        The frame's numeric columns as :func:`frpd_cli.numeric.numeric_columns` returns them (given when another
        search converts them too); computed when not given.

    Returns
    -------
    list of Sentinel
        In schema order; none for immutable features (no recourse moves them) or columns of at most two values.

    Examples
    --------
    >>> from frpd_cli.schema import SchemaSpec, infer_schema
    >>> frame = pd.DataFrame({"stay": [-1] + list(range(19)), "balance": range(-10, 10), "label": [0, 1] * 10})
    >>> find_sentinels(frame, infer_schema(frame, SchemaSpec()))
    [Sentinel(feature='stay', value=-1.0, n_at=1, n_rows=20)]
    """
    if columns is None:
        columns = numeric_columns(frame, schema)
    out = []
    for f in schema.features:
        if f.mutability == "immutable" or f.name not in columns:
            continue
        values = columns[f.name]
        values = values[np.isfinite(values)]
        if values.size == 0 or float(values.min()) >= 0:
            continue            # (the common case, decided first)
        if not more_than_two_values(values):
            continue
        low = float(values.min())
        negative = values < 0
        at = int(np.sum(values == low))
        if np.all(values[negative] == low) and at <= max_share * values.size:
            out.append(Sentinel(f.name, low, at, int(values.size)))
    return out
