"""DataFrame conversions made per chunk, faster than pandas' own and with the same result."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["records"]


def records(frame: pd.DataFrame) -> list[dict]:
    """``frame.to_dict("records")``: the same dicts, the same values of the same Python types; one dict per row,
    also for a frame without columns (where pandas 3 returns no dict at all).

    pandas builds the rows from ``itertuples`` and converts every value of an object or extension column with
    ``maybe_box_native``, one call per value; most of the time of a chunk's rows. Here a numeric numpy column is
    converted at once (``tolist`` gives the Python scalars ``itertuples`` gives), and a text column whose values
    are all ``str`` is taken as it is (``maybe_box_native`` returns a ``str`` unchanged); any other column goes
    through ``maybe_box_native`` as in pandas.
    """
    from pandas.api.extensions import ExtensionDtype
    from pandas.core.dtypes.cast import maybe_box_native

    names = frame.columns.tolist()
    if not names:
        return [{} for _ in range(len(frame))]
    columns = []
    for k in range(len(names)):
        series = frame.iloc[:, k]
        dtype = series.dtype
        if isinstance(dtype, np.dtype) and dtype.kind in "iufb":
            columns.append(series.to_numpy().tolist())
            continue
        if dtype == np.dtype(object) or isinstance(dtype, pd.StringDtype):
            values = series.to_numpy(dtype=object).tolist()     # the elements themselves, as iterating gives them
        else:
            values = list(series)               # what itertuples reads
        if dtype == np.dtype(object) or isinstance(dtype, ExtensionDtype):
            if not all(type(v) is str for v in values):
                values = list(map(maybe_box_native, values))
        columns.append(values)
    return [dict(zip(names, row)) for row in zip(*columns)]
