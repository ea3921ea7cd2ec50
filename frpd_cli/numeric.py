"""The numeric feature columns of training rows, converted once for every search over them
(:mod:`frpd_cli.relations`, :mod:`frpd_cli.sentinels`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["numeric_columns", "more_than_two_values"]


def numeric_columns(frame: pd.DataFrame, schema) -> dict:
    """Every numeric feature of ``schema`` that ``frame`` holds, as float64 (cells that are no number: NaN).

    Returns
    -------
    dict of str to ndarray of shape (n_rows,)
        In schema order.

    Examples
    --------
    >>> from frpd_cli.schema import SchemaSpec, infer_schema
    >>> frame = pd.DataFrame({"n": [1, 2, 3] * 7, "c": list("abc") * 7, "label": [0, 1, 1] * 7})
    >>> {k: v[:3].tolist() for k, v in numeric_columns(frame, infer_schema(frame, SchemaSpec())).items()}
    {'n': [1.0, 2.0, 3.0]}
    """
    return {f.name: pd.to_numeric(frame[f.name], errors="coerce").to_numpy(dtype=np.float64)
            for f in schema.features if f.is_numeric and f.name in frame.columns}


def more_than_two_values(values: np.ndarray) -> bool:
    """Whether ``values`` (finite) hold three distinct values or more, in O(n) without a sort.

    >>> more_than_two_values(np.array([0.0, 1.0, 1.0, 0.0])), more_than_two_values(np.array([0.0, 1.0, 2.0]))
    (False, True)
    """
    if values.size < 3:
        return False
    other = values[values != values[0]]
    return bool(other.size) and bool(np.any(other != other[0]))
