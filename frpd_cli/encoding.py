"""Encoding raw rows into the space where distances are measured, and back.

How a numeric move is priced is the encoder's scale (``--scale``):

- ``effort`` (the default): a continuous or integer value maps to the share of
  the training population below it, counting half of the rows that hold it (the
  mid-distribution function F(x) = (#{x_i < x} + #{x_i = x} / 2) / n, linear
  between consecutive training values). A move from a to b then costs the share
  of training rows strictly between them plus half of those at a and at b: a
  step through a crowded stretch of the range costs much, one to an extreme
  that few rows reach costs what those few rows weigh. Interpolating in this
  space follows the data's density, and decoding is the map's inverse.
- ``minmax`` (the paper's): min-max scaled with the training minimum and
  maximum.

A constant column maps to 0 under either scale. Values outside the training
range extend the map linearly at the min-max rate (decoding clips them back).
Categorical and ordinal features are one-hot encoded (categorical levels
sorted, ordinal levels in their declared order) under either scale. Distances
are Euclidean in this space, as in the paper. A feature with
a cost weight W (``--weight COL=W``) has its encoded columns multiplied by
sqrt(W), so that every Euclidean distance in this space (selection,
interpolation, graph edges, reported costs) is the weighted one.

Decoding goes back to raw values: the argmax of each one-hot block (so relaxed,
non-binary blocks decode too), inverse scaling, integers rounded, values clipped
to the training range and rounded to the number of decimals the training column
uses, so that training rows round-trip exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .constraints import ConstraintCodes
from .exceptions import InputError, SchemaError
from .schema import Feature, Schema, levels_list

__all__ = ["Encoder", "fit_encoder", "category_key", "check_magnitude", "MAX_MAGNITUDE", "SCALES", "DEFAULT_SCALE"]

#: How numeric moves are priced: by the population share they cross, or min-max scaled as in the paper.
SCALES = ("effort", "minmax")
DEFAULT_SCALE = "minmax"

_MAX_DECIMALS = 10
#: Largest magnitude of a numeric feature value: its square (distances, model scalers) stays finite.
MAX_MAGNITUDE = 1e150
#: Encoded values up to this size cannot make a squared distance overflow (checked exactly above it).
_SAFE_ENCODED = 1e100
#: Integer features are decoded to int64: their values must lie in [-2**63, 2**63).
_MAX_INTEGER = float(2**63)


@dataclass(frozen=True)
class Encoder:
    """A fitted encoder. Build it with :func:`fit_encoder`.

    Attributes
    ----------
    schema : Schema
    minimum, maximum : ndarray of shape (n_features,)
        Training minimum and maximum of each numeric feature (NaN for categoricals).
    decimals : tuple of int or None
        Decimals used by each continuous training column (None: no rounding).
    offsets : ndarray of shape (n_features + 1,)
        Feature ``j`` occupies encoded columns ``offsets[j]:offsets[j + 1]``.
    scale : {"effort", "minmax"}
        How numeric features are scaled (see the module docstring).
    knots : tuple
        ``effort``: per feature, None or ``(values, shares)``: the distinct training values, increasing, and
        the mid-distribution function at each (both float64 arrays); the map is linear between them.
        Empty for ``minmax``.
    fractional : tuple of bool
        Per feature: an integer feature whose training column holds a few fractional values (imputed ones, say):
        fractional inputs are accepted and every decoded value is whole. Empty: none.
    """

    schema: Schema
    minimum: np.ndarray
    maximum: np.ndarray
    decimals: tuple
    offsets: np.ndarray
    scale: str = "minmax"
    knots: tuple = ()
    fractional: tuple = ()

    @property
    def n_features_out(self) -> int:
        return int(self.offsets[-1])

    @property
    def feature_names_out(self) -> tuple[str, ...]:
        names = []
        for f in self.schema.features:
            if f.is_categorical:
                names.extend(f"{f.name}={level}" for level in f.levels)
            else:
                names.append(f.name)
        return tuple(names)

    @property
    def column_scale(self) -> np.ndarray | None:
        """sqrt(weight) of each encoded column, or None when every feature has weight 1."""
        weights = [f.weight for f in self.schema.features]
        if all(w == 1.0 for w in weights):
            return None
        widths = np.diff(self.offsets)
        return np.repeat(np.sqrt(np.asarray(weights, dtype=np.float64)), widths)

    def block(self, name: str) -> slice:
        """The encoded columns of feature ``name``."""
        j = self.schema.feature_names.index(name)
        return slice(int(self.offsets[j]), int(self.offsets[j + 1]))

    # ------------------------------------------------------------------ encode
    def encode(self, frame: pd.DataFrame, *, source: str = "the input") -> np.ndarray:
        """Encode raw rows.

        Parameters
        ----------
        frame : DataFrame of shape (n_rows, >= n_features)
            Must hold every feature column; other columns are ignored.
        source : str
            How the rows are named in error messages.

        Returns
        -------
        Z : ndarray of shape (n_rows, n_features_out)

        Raises
        ------
        InputError
            A feature column is missing, a numeric column holds text, missing or
            non-finite values, an integer column a fractional value, a value is so
            far from the training range that its distances overflow, or a
            categorical value was never seen in training. Rows are named by the
            frame's integer index (0-based data rows: row 1 is line 2 of a file
            with a header) when it has one, by their position otherwise.
        """
        missing = [n for n in self.schema.feature_names if n not in frame.columns]
        if missing:
            raise InputError(
                f"Column(s) {', '.join(repr(m) for m in missing)} missing from {source}; "
                "the model and data were prepared with them."
            )
        n = len(frame)
        Z = np.zeros((n, self.n_features_out), dtype=np.float64)
        for j, f in enumerate(self.schema.features):
            start = int(self.offsets[j])
            values = frame[f.name]
            if f.is_categorical:
                codes = self._level_codes(f, values, source)
                Z[np.arange(n), start + codes] = 1.0
            else:
                array = _numeric(values, f.name, source)
                if f.kind == "integer" and not self._accepts_fractions(j):
                    _check_whole(array, values, f.name, source)
                Z[:, start] = self.encode_values(j, array)
        scale = self.column_scale
        if scale is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                Z *= scale
        self._check_distances(Z, frame, source)
        return Z

    def _accepts_fractions(self, j: int) -> bool:
        return bool(self.fractional) and bool(self.fractional[j])

    def encode_values(self, j: int, values) -> np.ndarray:
        """Encoded values of numeric feature ``j`` before its cost weight (no checks).

        Parameters
        ----------
        j : int
            Position of a numeric feature in the schema.
        values : array-like of float, shape (n,)
            Raw values.

        Returns
        -------
        z : ndarray of shape (n,)
            Under ``minmax`` ``(x - min) / (max - min)``; under ``effort`` the training population share below
            ``x`` (see the module docstring). Increasing in ``x`` under either scale.
        """
        x = np.asarray(values, dtype=np.float64)
        lo, hi = self.minimum[j], self.maximum[j]
        span = hi - lo
        with np.errstate(over="ignore", invalid="ignore"):
            if not span > 0:
                return x - lo
            if self.scale == "minmax" or not self.knots or self.knots[j] is None:
                return (x - lo) / span
            xs, qs = self.knots[j]
            z = np.interp(x, xs, qs)
            below, above = x < lo, x > hi
            if below.any() or above.any():
                z = np.where(below, qs[0] - (lo - x) / span, np.where(above, qs[-1] + (x - hi) / span, z))
            return z

    def decode_values(self, j: int, z) -> np.ndarray:
        """Raw values of numeric feature ``j`` from encoded values before its cost weight: the inverse of
        :meth:`encode_values`, with :meth:`decode`'s clipping to the training range and rounding."""
        return self._decode_numeric(j, self.schema.features[j], np.asarray(z, dtype=np.float64))

    def encoded_range(self, j: int) -> tuple[float, float]:
        """The encoded training minimum and maximum of numeric feature ``j`` (before its cost weight)."""
        z = self.encode_values(j, [self.minimum[j], self.maximum[j]])
        return float(z[0]), float(z[1])

    def _check_distances(self, Z: np.ndarray, frame: pd.DataFrame, source: str) -> None:
        """Refuse rows whose distance to a training row (encoded in [0, 1]) would not be a finite number."""
        if Z.size == 0:
            return
        with np.errstate(over="ignore", invalid="ignore"):
            # the usual case: two passes without a copy of Z (a NaN fails both comparisons)
            if Z.max() <= _SAFE_ENCODED and -Z.min() <= _SAFE_ENCODED:
                return
            reach = 1.0 if self.column_scale is None else self.column_scale     # training rows: in [0, sqrt(W)]
            bound = np.einsum("ij,ij->i", np.abs(Z) + reach, np.abs(Z) + reach)  # >= squared distance to any training row
        bad = np.flatnonzero(~np.isfinite(bound))
        if bad.size == 0:
            return
        r = int(bad[0])
        j = int(np.argmax(np.where(np.isfinite(Z[r]), np.abs(Z[r]), np.inf)))
        feature = next(f for k, f in enumerate(self.schema.features) if self.offsets[k] <= j < self.offsets[k + 1])
        k = self.schema.feature_names.index(feature.name)
        value = frame[feature.name].iloc[r]
        raise InputError(
            f"Column '{feature.name}' of {source} holds {_shown(value)} in {_where(frame.index, r)}, so far outside the "
            f"training range [{self.minimum[k]:g}, {self.maximum[k]:g}] that distances overflow. "
            "Check the value (a unit or typing error?) or remove the row."
        )

    def _level_codes(self, f: Feature, values: pd.Series, source: str) -> np.ndarray:
        index = {level: i for i, level in enumerate(f.levels)}
        codes = _text_level_codes(index, values)
        if codes is not None:
            return codes
        codes = values.map(index)
        unmatched = codes.isna().to_numpy()
        if unmatched.any():
            keyed = {category_key(level): i for level, i in index.items()}
            codes = codes.astype(object)
            codes[unmatched] = [keyed.get(category_key(v)) if not _missing(v) else None for v in values[unmatched]]
            unmatched = pd.isna(codes).to_numpy()
        if unmatched.any():
            r = int(np.flatnonzero(unmatched)[0])
            value = values.iloc[r]
            if _missing(value):
                raise InputError(f"Column '{f.name}' of {source} has a missing value in {_where(values.index, r)}.")
            shown = levels_list(f.levels)
            raise InputError(
                f"Column '{f.name}' of {source} holds {_shown(value)} in {_where(values.index, r)}, a category never seen "
                f"in training. Known categories: {shown}."
            )
        return codes.to_numpy(dtype=np.int64)

    # ------------------------------------------------------------------ decode
    def decode(self, Z: np.ndarray) -> pd.DataFrame:
        """Decode encoded (possibly relaxed) rows back to raw values.

        Parameters
        ----------
        Z : ndarray of shape (n_rows, n_features_out)

        Returns
        -------
        frame : DataFrame of shape (n_rows, n_features)
            Raw feature values: categories from the training vocabulary (argmax
            per block, first level on ties), integers as int64, every numeric
            value inside the training range.
        """
        return pd.DataFrame({name: pd.Series(values, dtype=values.dtype, copy=False)
                             for name, values in self.decode_columns(Z).items()})

    def decode_columns(self, Z: np.ndarray) -> dict:
        """:meth:`decode` as one new array per feature (name -> array of shape (n_rows,)), without the DataFrame.

        Categorical columns are object arrays of the levels (int64 or float64 when every level is such a
        number), numeric ones int64 (integer features) or float64: the columns of :meth:`decode`, whose
        ``to_numpy()`` they equal.
        """
        Z = np.atleast_2d(np.asarray(Z, dtype=np.float64))
        if Z.shape[1] != self.n_features_out:
            raise InputError(
                f"Encoded rows must have {self.n_features_out} columns. Got {Z.shape[1]} instead."
            )
        scale = self.column_scale
        if scale is not None:
            Z = Z / scale
        columns = {}
        for j, f in enumerate(self.schema.features):
            start, stop = int(self.offsets[j]), int(self.offsets[j + 1])
            if f.is_categorical:
                codes = np.argmax(Z[:, start:stop], axis=1)
                levels = np.empty(len(f.levels), dtype=object)
                levels[:] = list(f.levels)
                columns[f.name] = levels[codes].astype(_level_dtype(f.levels))
            else:
                columns[f.name] = self._decode_numeric(j, f, Z[:, start])
        return columns

    def _decode_numeric(self, j: int, f: Feature, z: np.ndarray) -> np.ndarray:
        lo, hi = self.minimum[j], self.maximum[j]
        span = hi - lo
        if not span > 0:
            raw = np.full_like(z, lo)
        elif self.scale == "minmax" or not self.knots or self.knots[j] is None:
            raw = z * span + lo
        else:
            xs, qs = self.knots[j]
            raw = np.interp(z, qs, xs)          # clipped to [lo, hi] outside the training shares
        raw = np.clip(raw, lo, hi)
        if f.kind == "integer":
            return _to_int64(np.clip(np.floor(raw + 0.5), lo, hi))
        if self.decimals[j] is not None:
            raw = np.clip(np.round(raw, self.decimals[j]), lo, hi)
        return raw

    def snap(self, Z: np.ndarray) -> np.ndarray:
        """Encode the decoded rows: the point of the encoded space a relaxed row stands for."""
        return self.encode(self.decode(Z))

    # ------------------------------------------------------------- constraints
    def constraint_codes(self, frame: pd.DataFrame, *, source: str = "the input") -> ConstraintCodes:
        """Codes of the immutable and monotone features of raw rows (see :mod:`frpd_cli.constraints`)."""
        immutable = [f for f in self.schema.features if f.mutability == "immutable"]
        monotone = [f for f in self.schema.features if f.mutability in ("increasing", "decreasing")]

        def code(f: Feature) -> np.ndarray:
            if f.is_categorical:
                return self._level_codes(f, frame[f.name], source).astype(np.float64)
            return _numeric(frame[f.name], f.name, source)

        n = len(frame)
        return ConstraintCodes(
            immutable=np.column_stack([code(f) for f in immutable]) if immutable else np.zeros((n, 0)),
            monotone=np.column_stack([code(f) for f in monotone]) if monotone else np.zeros((n, 0)),
            direction=np.array([1 if f.mutability == "increasing" else -1 for f in monotone], dtype=np.int8),
            immutable_names=tuple(f.name for f in immutable),
            monotone_names=tuple(f.name for f in monotone),
        )

    # ------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        out = {
            "schema": self.schema.to_dict(),
            "minimum": [None if np.isnan(v) else float(v) for v in self.minimum],
            "maximum": [None if np.isnan(v) else float(v) for v in self.maximum],
            "decimals": list(self.decimals),
            "scale": self.scale,
        }
        if self.knots:
            out["knots"] = [None if k is None else [k[0].tolist(), k[1].tolist()] for k in self.knots]
        if any(self.fractional):
            out["fractional"] = [bool(v) for v in self.fractional]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Encoder":
        """The encoder :meth:`to_dict` describes (a description without ``scale`` is a min-max encoder)."""
        schema = Schema.from_dict(data["schema"])
        minimum = np.array([np.nan if v is None else v for v in data["minimum"]], dtype=np.float64)
        maximum = np.array([np.nan if v is None else v for v in data["maximum"]], dtype=np.float64)
        knots = tuple(None if k is None else (np.asarray(k[0], dtype=np.float64), np.asarray(k[1], dtype=np.float64))
                      for k in data.get("knots", ()))
        return cls(schema=schema, minimum=minimum, maximum=maximum, decimals=tuple(data["decimals"]),
                   offsets=_offsets(schema), scale=data.get("scale", "minmax"), knots=knots,
                   fractional=tuple(data.get("fractional", ())))


def _text_level_codes(index: dict, values: pd.Series) -> np.ndarray | None:
    """Level positions of text values by one dict lookup each, or None to leave the values to ``Series.map``.

    Taken only when every level is a ``str`` and every value a text the levels hold exactly (the usual
    case: categories read from a CSV): then a lookup finds what ``values.map(index)`` finds, at a fraction
    of its fixed cost on the few rows of an applicant or a recourse. Anything else (a missing value, an
    unknown or differently written category, numbers) returns None.
    """
    if not all(type(level) is str for level in index):
        return None
    array = values.to_numpy()
    if array.dtype.kind != "O":
        return None
    try:
        return np.fromiter(map(index.__getitem__, array), dtype=np.int64, count=len(array))
    except (KeyError, TypeError):
        return None


def fit_encoder(schema: Schema, frame: pd.DataFrame, *, source: str = "the training data",
                scale: str = DEFAULT_SCALE) -> Encoder:
    """Fit the numeric scaling and one-hot layouts on the training rows.

    Parameters
    ----------
    schema : Schema
    frame : DataFrame of shape (n_rows, n_columns)
    source : str
        How the rows are named in messages.
    scale : {"effort", "minmax"}
        How numeric features are scaled (see the module docstring); default :data:`DEFAULT_SCALE`.

    Returns
    -------
    encoder : Encoder

    Examples
    --------
    >>> import pandas as pd
    >>> from frpd_cli.schema import infer_schema
    >>> df = pd.DataFrame({"age": [20, 40, 30], "job": ["b", "a", "b"], "label": [0, 1, 1]})
    >>> enc = fit_encoder(infer_schema(df), df, scale="minmax")
    >>> enc.encode(df).tolist()
    [[0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.5, 0.0, 1.0]]
    >>> print(enc.decode([[0.26, 0.4, 0.6]]).to_string(index=False))
     age job
      25   b
    >>> effort = fit_encoder(infer_schema(df), df, scale="effort")
    >>> effort.encode(df)[:, 0].round(4).tolist()        # a third of the rows per value, half of its own
    [0.1667, 0.8333, 0.5]
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    n = len(schema.features)
    minimum = np.full(n, np.nan)
    maximum = np.full(n, np.nan)
    decimals = []
    knots, fractional = [], []
    for j, f in enumerate(schema.features):
        if f.name not in frame.columns:
            raise SchemaError(f"Column '{f.name}' is missing from {source}.")
        knots.append(None)
        fractional.append(False)
        if f.is_numeric:
            values = _numeric(frame[f.name], f.name, source)
            if f.kind == "integer":
                fractional[j] = bool(np.any(values != np.round(values)))
                if not fractional[j]:
                    _check_whole(values, frame[f.name], f.name, source)
            minimum[j], maximum[j] = float(values.min()), float(values.max())
            if not np.isfinite(maximum[j] - minimum[j]):
                lo, hi = int(np.argmin(values)), int(np.argmax(values))
                raise InputError(
                    f"Column '{f.name}' of {source} spans [{minimum[j]:g}, {maximum[j]:g}] ({_where(frame.index, lo)} "
                    f"and {_where(frame.index, hi)}): the range is too wide for floating point, so every scaled value "
                    "and distance would overflow. Check those values (a unit or typing error?)."
                )
            decimals.append(_decimals(values) if f.kind == "continuous" else 0)
            if scale == "effort" and maximum[j] > minimum[j]:
                knots[j] = population_shares(values)
        else:
            decimals.append(None)
    return Encoder(schema=schema, minimum=minimum, maximum=maximum, decimals=tuple(decimals),
                   offsets=_offsets(schema), scale=scale, knots=tuple(knots) if scale == "effort" else (),
                   fractional=tuple(fractional) if any(fractional) else ())


def population_shares(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of a column and the mid-distribution function at each.

    Parameters
    ----------
    values : ndarray of float, shape (n,), n >= 1

    Returns
    -------
    distinct : ndarray of shape (m,)
        The distinct values, increasing.
    shares : ndarray of shape (m,)
        ``(#{values < v} + #{values == v} / 2) / n`` for each distinct ``v``: strictly increasing, in (0, 1).

    Examples
    --------
    >>> v, q = population_shares(np.array([1.0, 2.0, 2.0, 5.0]))
    >>> v.tolist(), q.tolist()
    ([1.0, 2.0, 5.0], [0.125, 0.5, 0.875])
    """
    distinct, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    below = np.cumsum(counts) - counts
    return distinct, (below + counts / 2.0) / float(counts.sum())


def _offsets(schema: Schema) -> np.ndarray:
    widths = [len(f.levels) if f.is_categorical else 1 for f in schema.features]
    return np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)


def _numeric(values: pd.Series, name: str, source: str) -> np.ndarray:
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        converted = pd.to_numeric(values, errors="coerce")
        bad = np.flatnonzero(converted.isna().to_numpy() & values.notna().to_numpy())
        if bad.size:
            r = int(bad[0])
            raise InputError(
                f"Column '{name}' of {source} must be numeric, but {_where(values.index, r)} holds "
                f"{values.iloc[r]!r}."
            )
        values = converted
    array = values.to_numpy(dtype=np.float64)
    nan = np.flatnonzero(np.isnan(array))
    if nan.size:
        rows = ", ".join(str(_data_row(values.index, r)) for r in nan[:5])
        more = f" and {nan.size - 5} more" if nan.size > 5 else ""
        raise InputError(f"Column '{name}' of {source} has missing values (data row{'s' if nan.size > 1 else ''} "
                         f"{rows}{more}; line = data row + 1).")
    check_magnitude(array, values, name, source)
    return array


def check_magnitude(array: np.ndarray, values: pd.Series, name: str, source: str) -> None:
    """Refuse infinite values and values too large to square (NaN, a missing value, is checked elsewhere).

    Parameters
    ----------
    array : ndarray of shape (n_rows,), float64
        The column's values.
    values : Series
        The same values as read (shown in the message; its integer index names the data rows).
    name, source : str
        The column and where it comes from, for the message.

    Raises
    ------
    InputError
        Naming the first bad value's data row and line.
    """
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(np.abs(array) > MAX_MAGNITUDE)
    if bad.size:
        r = int(bad[0])
        more = f" ({bad.size} such values in the column)" if bad.size > 1 else ""
        expected = ("a finite number" if np.isinf(array[r])
                    else f"a number of magnitude at most {MAX_MAGNITUDE:g} (larger values overflow when squared, "
                         "in distances and in most models)")
        raise InputError(
            f"Column '{name}' of {source} holds {_shown(values.iloc[r])} in {_where(values.index, r)}{more}; "
            f"expected {expected}. Replace it with the actual value (a unit or typing error?), or remove the row."
        )


def _shown(value) -> str:
    """A value as the user wrote it (plain Python, not numpy's repr)."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def _to_int64(whole: np.ndarray) -> np.ndarray:
    """Whole float64 values as int64; 2**63 (the float64 form of 2**63 - 1, the largest training value it can
    stand for) becomes 2**63 - 1 instead of overflowing."""
    top = whole >= _MAX_INTEGER
    if not top.any():
        return whole.astype(np.int64)
    out = np.where(top, 0.0, whole).astype(np.int64)
    out[top] = np.iinfo(np.int64).max
    return out


def _beyond_int64(array: np.ndarray, values: pd.Series) -> np.ndarray:
    """Which values do not fit in int64, judged on the values as read when they are integers (2**63 - 1 fits,
    although its float64 form is 2**63)."""
    if pd.api.types.is_signed_integer_dtype(values.dtype) and len(values) == len(array):
        return np.zeros(len(array), dtype=bool)
    if pd.api.types.is_unsigned_integer_dtype(values.dtype) and len(values) == len(array):
        return values.to_numpy() > np.iinfo(np.int64).max
    return (array >= _MAX_INTEGER) | (array < -_MAX_INTEGER)


def _check_whole(array: np.ndarray, values: pd.Series, name: str, source: str) -> None:
    """An integer feature holds whole numbers that fit in int64 (-2**63 to 2**63 - 1)."""
    bad = np.flatnonzero((array != np.round(array)) | _beyond_int64(array, values))
    if bad.size:
        r = int(bad[0])
        what = "a whole number" if array[r] == np.round(array[r]) else None
        problem = ("a whole number from -2**63 to 2**63 - 1 (it becomes a 64-bit integer)" if what
                   else "a whole number (the column is an integer feature)")
        raise InputError(
            f"Column '{name}' of {source} holds {_shown(values.iloc[r])} in {_where(values.index, r)}; expected {problem}. "
            "Fix the value, or declare the column continuous (--continuous or the schema's continuous list)."
        )


def _data_row(index: pd.Index, position: int) -> int:
    """The 1-based data row of a frame position: its integer label + 1, else its position + 1."""
    if pd.api.types.is_integer_dtype(index.dtype):
        return int(index[position]) + 1
    return position + 1


def _where(index: pd.Index, position: int) -> str:
    """``data row N (line N + 1)``: how a row is named in messages (line counts the header row)."""
    row = _data_row(index, position)
    return f"data row {row} (line {row + 1})"


def _decimals(values: np.ndarray) -> int | None:
    with np.errstate(over="ignore", invalid="ignore"):   # huge values overflow when scaled by 10**d: not equal
        for d in range(_MAX_DECIMALS + 1):
            if np.all(np.round(values, d) == values):
                return d
    return None


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA


def category_key(value) -> str:
    """A type-insensitive key: 1, 1.0 and "1" are the same category (NaN keys as "nan")."""
    if isinstance(value, (bool, np.bool_)):
        return str(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
        if np.isnan(number):
            return "nan"
        return str(int(number)) if number.is_integer() else repr(number)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        if np.isnan(number):
            return value
        return str(int(number)) if number.is_integer() else repr(number)
    return str(value)


def _level_dtype(levels: tuple):
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in levels):
        return np.int64
    if all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in levels):
        return np.float64
    return object
