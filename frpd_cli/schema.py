"""Feature roles: which columns are features, of which kind, and how they may move.

A :class:`Schema` is inferred from the training CSV (numeric columns are
continuous, numeric columns whose values are whole in at least 99% of the rows
are integers (see :data:`WHOLE_SHARE`), everything else is categorical) and
refined by declarations from a TOML file and from command-line flags, flags
taking precedence over the file.

The TOML file format::

    target = "label"              # default: a column named "label"
    favorable = 1                 # default: 1
    id_column = "applicant_id"    # optional
    immutable = ["personal_status"]
    increasing = ["age", "savings"]
    decreasing = []
    categorical = ["housing"]     # force categorical (also for numeric codes)
    continuous = ["duration"]     # force continuous (real-valued)
    integer = ["age"]             # force integer-valued continuous
    exclude = ["notes"]           # columns that are not features
    vary = ["duration", "savings"]  # only these may change: every other feature is immutable

    [ordinal]                     # categoricals with a declared order (lowest first)
    savings = ["none", "little", "moderate", "rich"]

    [range]                       # the values a recourse may move a feature to
    duration = "6:48"             # numeric: "LO:HI", open ends "LO:" and ":HI", or [LO, HI]
    age = "+0:+5"                 # relative to the applicant: at most 5 more, never less
    credit_amount = "-20%:+10%"   # relative, in percent of the applicant's value
    housing = ["own", "rent"]     # categorical: the allowed levels (or "own,rent")

    [weight]                      # cost weight of a feature in every distance (> 0; default 1)
    duration = 2.0

    [max_move]                    # the most a recourse moves a numeric feature, either way, as a share of
    default = 0.25                # its training range (frpd's commands: 0.25 unless declared; "none": no bound)
    age = "none"                  # per feature, over the default
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .exceptions import SchemaError
from .names import did_you_mean

__all__ = [
    "looks_like_id_name",
    "extra_columns_remedy",
    "sensitive_like_features",
    "ages_without_horizon",
    "MANY_LEVELS",
    "LEVELS_SHOWN",
    "levels_list",
    "many_level_features",
    "missing_like_levels",
    "location_like_features",
    "unordered_scale_features",
    "past_record_features",
    "named_fact",
    "is_flag_column",
    "flag_features",
    "ranges_outside_training",
    "WHOLE_SHARE",
    "whole_share",
    "FEATURE_KINDS",
    "MUTABILITIES",
    "Feature",
    "Schema",
    "SchemaSpec",
    "load_schema_file",
    "merge_specs",
    "infer_schema",
    "parse_favorable",
    "schema_to_toml",
    "TOML_KEY_WRITERS",
    "TOML_TABLE_WRITERS",
    "column_decimals",
    "id_like_columns",
    "SchemaReport",
    "inspect_schema",
    "parse_range",
    "is_relative_range",
    "check_weight",
    "MAX_WEIGHT",
    "DEFAULT_MAX_MOVE",
    "parse_max_move",
    "DeclarationError",
]

FEATURE_KINDS = ("continuous", "integer", "categorical", "ordinal")
MUTABILITIES = ("free", "immutable", "increasing", "decreasing")
_KIND_KEYS = ("categorical", "continuous", "integer")
_MUTABILITY_KEYS = ("immutable", "increasing", "decreasing")
#: The command-line flag of each schema key that names columns and has one (integer and exclude are file keys)
_FLAG_OF = {key: f"--{key}" for key in (*_MUTABILITY_KEYS, "categorical", "continuous")}
_FILE_KEYS = {"target", "favorable", "id_column", "exclude", "ordinal", "vary", "range", "weight", "max_move",
              *_KIND_KEYS, *_MUTABILITY_KEYS}
#: Largest feature weight: encoded columns are scaled by sqrt(weight), and squared distances must stay finite.
MAX_WEIGHT = 1e6
#: The move bound of frpd's commands when neither a flag nor the schema file declares one (``--max-move``): a
#: recourse moves no numeric feature by more than this share of its training range from the applicant's value.
DEFAULT_MAX_MOVE = 0.25


class DeclarationError(SchemaError):
    """A declaration that names a column and does not fit the data: a column that is not there, or a
    ``vary``, ``range``, ``weight`` or move bound that does not fit the column.

    The same declaration may come from a command-line flag (a usage error) or from the schema file (an error
    naming the file); the command line tells which from ``option`` and ``column``.

    Attributes
    ----------
    option : str
        The command-line option of the declaration (``--range``).
    column : str
        The column it names.
    """

    def __init__(self, option: str, column: str, message: str):
        self.option = option
        self.column = column
        super().__init__(message)


@dataclass(frozen=True)
class Feature:
    """One feature column.

    Parameters
    ----------
    name : str
        Column name in the CSV files.
    kind : {"continuous", "integer", "categorical", "ordinal"}
        Integer features are continuous features whose values are rounded to
        whole numbers when decoded.
    levels : tuple
        Categorical: the training levels, sorted. Ordinal: the declared order,
        lowest first. Empty for numeric features.
    mutability : {"free", "immutable", "increasing", "decreasing"}
    weight : float
        Cost weight in every distance (default 1): the feature's encoded
        columns are scaled by ``sqrt(weight)``.
    low, high : float or None
        Numeric features: the values a recourse may move the feature to
        (``None``: no limit on that side).
    allowed : tuple
        Categorical features: the levels a recourse may move the feature to
        (empty: every level).
    rel_low, rel_high : float or None
        Numeric features: how far below and above the applicant's own value a
        recourse may move the feature (``--range COL=-5:+12``; ``None``: no
        limit on that side), in the feature's units, or in percent of the
        applicant's value (its absolute value) with ``rel_percent``. They add
        to ``low`` and ``high``: :meth:`bounds` gives both at once.
    rel_percent : bool
    max_move : float or None
        Numeric features: the most a recourse may move the feature away from
        the applicant's value, either way, in its units (``--max-move``: a
        share of the feature's training range; ``None``: no such bound). It
        adds to the other limits: :meth:`bounds` gives them all at once.
    max_move_share : float or None
        The share of the training range ``max_move`` (or ``max_levels``) was
        computed from (how messages and schema files state it); ``math.inf``
        when the bound was declared ``none``. A flag (:func:`is_flag_column`)
        keeps the share with no ``max_move``: the bound does not hold a flip.
    max_levels : int or None
        Ordinal features: the most levels a recourse may move the feature away
        from the applicant's level, either way (``--max-move``: the share of
        the steps between its lowest and highest level, rounded up, at least
        one; ``None``: no such bound, or one that allows every level).
    withheld : tuple
        Unordered categorical features: levels that record missing
        information (``Unknown``, ``Other/Unknown``: :func:`missing_like_levels`),
        which a recourse does not move the feature to (an applicant already
        there may stay): advice to withhold information is no recourse. Set by
        frpd's planning commands when the user declared no ``--range`` for the
        feature (:attr:`SchemaSpec.withhold_missing`).
    """

    name: str
    kind: str
    levels: tuple = ()
    mutability: str = "free"
    weight: float = 1.0
    low: float | None = None
    high: float | None = None
    allowed: tuple = ()
    rel_low: float | None = None
    rel_high: float | None = None
    rel_percent: bool = False
    max_move: float | None = None
    max_move_share: float | None = None
    max_levels: int | None = None
    withheld: tuple = ()

    @property
    def has_range(self) -> bool:
        """Whether the values a recourse may take are limited (``--range``, absolute or relative, ``--max-move``, or
        levels of missing information withheld)."""
        return self.has_declared_range or self.max_move is not None or bool(self.withheld)

    @property
    def has_declared_range(self) -> bool:
        """Whether the user limited the values with ``--range`` (absolute, relative or allowed levels): the move
        bound aside."""
        return self.low is not None or self.high is not None or bool(self.allowed) or self.rel_low is not None \
            or self.rel_high is not None

    @property
    def is_relative(self) -> bool:
        """Whether the limits depend on the applicant's value (``--range COL=+0:+12``, ``COL=-20%:+10%``,
        ``--max-move``)."""
        return self.rel_low is not None or self.rel_high is not None or self.max_move is not None

    def bounds(self, origin=None) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest values a recourse may move this numeric feature to, per applicant.

        The absolute range and the limits relative to the applicant's value
        ``origin``, whichever is tighter; an integer feature's bounds are
        rounded inwards to whole numbers. A value equal to the applicant's own
        is allowed whatever the bounds (the callers check that).

        Parameters
        ----------
        origin : array-like of shape (n,), optional
            The applicants' raw values (needed when :attr:`is_relative`).

        Returns
        -------
        low, high : ndarray of float64, shape (n,) (shape () without ``origin``)
            ``-inf`` / ``inf`` on an open side.

        Examples
        --------
        >>> f = Feature("age", "integer", low=18.0, rel_low=0.0, rel_high=5.0)
        >>> [b.tolist() for b in f.bounds([37, 16])]
        [[37.0, 18.0], [42.0, 21.0]]
        >>> g = Feature("amount", "continuous", rel_low=-20.0, rel_high=10.0, rel_percent=True)
        >>> [b.tolist() for b in g.bounds([1000.0])]
        [[800.0], [1100.0]]
        >>> h = Feature("months", "integer", rel_low=0.0, max_move=14.0, max_move_share=0.25)
        >>> [b.tolist() for b in h.bounds([24])]
        [[24.0], [38.0]]
        """
        if self.is_relative and origin is None:
            raise ValueError(f"The limits of '{self.name}' are relative to the applicant: pass 'origin'.")
        base = np.zeros(()) if origin is None else np.asarray(origin, dtype=np.float64)
        low = np.full(base.shape, -np.inf if self.low is None else float(self.low))
        high = np.full(base.shape, np.inf if self.high is None else float(self.high))
        unit = np.abs(base) / 100.0 if self.rel_percent else 1.0
        if self.rel_low is not None:
            low = np.maximum(low, base + self.rel_low * unit)
        if self.rel_high is not None:
            high = np.minimum(high, base + self.rel_high * unit)
        if self.max_move is not None:
            low, high = np.maximum(low, base - self.max_move), np.minimum(high, base + self.max_move)
        if self.kind == "integer":
            with np.errstate(invalid="ignore"):
                low, high = np.ceil(low - 1e-9), np.floor(high + 1e-9)
        return low, high

    def in_range(self, values, origin=None) -> np.ndarray:
        """Which of ``values`` (raw values of this feature) a recourse may move to.

        Parameters
        ----------
        values : array-like of shape (n,)
        origin : array-like of shape (n,) or scalar, optional
            The applicant's raw value for each of ``values`` (needed by limits
            relative to the applicant).

        Returns
        -------
        ok : ndarray of bool, shape (n,)
        """
        if self.is_categorical:
            if not self.allowed and not self.withheld:
                return np.ones(len(values), dtype=bool)
            from .encoding import category_key

            keys = {category_key(v) for v in self.allowed}
            withheld = {category_key(v) for v in self.withheld}
            return _keys_where(values, lambda key: (not keys or key in keys) and key not in withheld)
        array = np.asarray(values, dtype=np.float64)
        ok = np.ones(array.shape[0], dtype=bool)
        if self.low is not None:
            ok &= array >= self.low
        if self.high is not None:
            ok &= array <= self.high
        if self.is_relative:
            if origin is None:
                raise ValueError(f"The limits of '{self.name}' are relative to the applicant: pass 'origin'.")
            low, high = self.bounds(np.broadcast_to(np.asarray(origin, dtype=np.float64), array.shape))
            ok &= (array >= low) & (array <= high)
        return ok

    def levels_beyond(self, positions, origin) -> np.ndarray:
        """Which level positions ``positions`` lie more than ``max_levels`` levels from ``origin`` (the applicants'
        positions, broadcast): the moves the ordinal's move bound rules out (none without a bound).

        Examples
        --------
        >>> Feature("e", "ordinal", levels=("a", "b", "c", "d"), max_levels=1).levels_beyond([0, 1, 3], 1).tolist()
        [False, False, True]
        """
        positions = np.asarray(positions, dtype=np.int64)
        if self.max_levels is None:
            return np.zeros(np.broadcast(positions, np.asarray(origin)).shape, dtype=bool)
        return np.abs(positions - np.asarray(origin, dtype=np.int64)) > self.max_levels

    def level_window(self, origin) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest level positions (in :attr:`levels`) a recourse may move this ordinal feature to,
        from the applicants' level positions ``origin``: ``max_levels`` either way, inside the levels (every level
        without a bound).

        Examples
        --------
        >>> f = Feature("education", "ordinal", levels=("a", "b", "c", "d", "e"), max_levels=1)
        >>> [w.tolist() for w in f.level_window([0, 2, 4])]
        [[0, 1, 3], [1, 3, 4]]
        """
        origin = np.asarray(origin, dtype=np.int64)
        if self.max_levels is None:
            return np.zeros_like(origin), np.full_like(origin, max(len(self.levels) - 1, 0))
        return np.maximum(origin - self.max_levels, 0), np.minimum(origin + self.max_levels, len(self.levels) - 1)

    @property
    def is_categorical(self) -> bool:
        return self.kind in ("categorical", "ordinal")

    @property
    def is_numeric(self) -> bool:
        return self.kind in ("continuous", "integer")

    def to_dict(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "levels": list(self.levels), "mutability": self.mutability}
        # the user's limits only when set: artifacts made without them keep their exact form
        if self.weight != 1.0:
            out["weight"] = float(self.weight)
        if self.low is not None or self.high is not None:
            out["range"] = [self.low, self.high]
        if self.allowed:
            out["allowed"] = list(self.allowed)
        if self.withheld:
            out["withheld"] = list(self.withheld)
        if self.rel_low is not None or self.rel_high is not None:
            out["relative"] = [self.rel_low, self.rel_high, "%" if self.rel_percent else "+"]
        if self.max_move is not None:
            out["max_move"] = [float(self.max_move), self.max_move_share]
        if self.kind == "ordinal" and self.max_move_share is not None and math.isfinite(self.max_move_share):
            # the share even when nothing binds (declared none: nothing, as for a numeric feature)
            out["max_levels"] = [None if self.max_levels is None else int(self.max_levels), self.max_move_share]
        return out

    @property
    def relative_text(self) -> str:
        """The relative limits as the user writes them (``+0:+5``, ``-20%:+10%``); empty without them."""
        if self.rel_low is None and self.rel_high is None:
            return ""
        unit = "%" if self.rel_percent else ""
        return ":".join("" if b is None else f"{b:+g}{unit}" for b in (self.rel_low, self.rel_high))

    @property
    def move_limit(self) -> float | None:
        """The largest move ``max_move`` allows, as messages state it: whole for an integer feature (a bound of
        24.5 allows moves of at most 24), else ``max_move``."""
        if self.max_move is None or self.kind != "integer":
            return self.max_move
        return float(math.floor(self.max_move + 1e-9))

    @property
    def move_text(self) -> str:
        """The move bound as messages state it (``a move of at most 17 (--max-move 0.25 of its training
        range)``); empty without one."""
        if self.max_levels is not None:
            share = f" {self.max_move_share:g} of its levels" if self.max_move_share is not None else ""
            return f"a move of at most {levels_text(self.max_levels)} either way (--max-move{share})"
        if self.max_move is None:
            return ""
        share = f" {self.max_move_share:g} of its training range" if self.max_move_share is not None else ""
        return f"a move of at most {self.move_limit:g} either way (--max-move{share})"


@dataclass(frozen=True)
class Schema:
    """The features of a dataset, the target and the favourable class."""

    features: tuple[Feature, ...]
    target: str | None
    favorable: object
    id_column: str | None = None

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    def feature(self, name: str) -> Feature:
        for f in self.features:
            if f.name == name:
                return f
        raise SchemaError(f"'{name}' is not a feature. The features are: {', '.join(self.feature_names)}.")

    def names_with(self, mutability: str) -> tuple[str, ...]:
        return tuple(f.name for f in self.features if f.mutability == mutability)

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "favorable": _json_scalar(self.favorable),
            "id_column": self.id_column,
            "features": [f.to_dict() for f in self.features],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Schema":
        try:
            features = tuple(
                Feature(name=f["name"], kind=f["kind"], levels=tuple(f["levels"]), mutability=f["mutability"],
                        weight=float(f.get("weight", 1.0)), low=(f.get("range") or [None, None])[0],
                        high=(f.get("range") or [None, None])[1], allowed=tuple(f.get("allowed", ())),
                        rel_low=(f.get("relative") or [None, None, "+"])[0],
                        rel_high=(f.get("relative") or [None, None, "+"])[1],
                        rel_percent=(f.get("relative") or [None, None, "+"])[2] == "%",
                        max_move=(f.get("max_move") or [None, None])[0],
                        max_move_share=(f.get("max_move") or f.get("max_levels") or [None, None])[1],
                        max_levels=(f.get("max_levels") or [None, None])[0],
                        withheld=tuple(f.get("withheld", ())))
                for f in data["features"]
            )
            return cls(features=features, target=data["target"], favorable=data["favorable"],
                       id_column=data.get("id_column"))
        except (KeyError, TypeError) as exc:
            raise SchemaError(f"A stored schema is malformed (missing {exc}).") from None


@dataclass(frozen=True)
class SchemaSpec:
    """What the user declared, from a schema file or from flags. ``None`` means not declared."""

    target: str | None = None
    favorable: object = None
    id_column: str | None = None
    immutable: tuple[str, ...] = ()
    increasing: tuple[str, ...] = ()
    decreasing: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()
    continuous: tuple[str, ...] = ()
    integer: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    ordinal: dict = field(default_factory=dict)
    vary: tuple[str, ...] = ()
    ranges: dict = field(default_factory=dict)
    weights: dict = field(default_factory=dict)
    #: the move bound of every numeric feature, a share of its training range (``math.inf``: none; None: not
    #: declared, no bound)
    max_move: float | None = None
    #: per feature, over ``max_move`` (``math.inf``: none)
    max_moves: dict = field(default_factory=dict)
    #: whether an unordered categorical feature that may change and has no declared ``--range`` keeps recourses
    #: off its levels of missing information (``Feature.withheld``; frpd's planning commands)
    withhold_missing: bool = False

    def __post_init__(self):
        for key in (*_MUTABILITY_KEYS, *_KIND_KEYS, "vary"):
            _check_disjoint_within(self, key)
        for name, weight in self.weights.items():
            check_weight(name, weight)
        if self.max_move is not None:
            parse_max_move(self.max_move)
        for name, share in self.max_moves.items():
            parse_max_move(share, name)


#: What :func:`pandas.api.types.infer_dtype` says of values that are equal only when their category keys are
#: (strings; numbers, where 1 == 1.0 and both key as "1"; booleans): such values can be keyed once per distinct
#: value. Booleans among numbers are not (True == 1, but they key as "True" and "1").
_KEYED_BY_EQUALITY = ("string", "integer", "floating", "mixed-integer-float", "boolean")


def _keys_where(values, keep) -> np.ndarray:
    """``keep(category_key(v))`` for every value of ``values``, as a bool array of shape (n,).

    A training column of a million rows holds a few distinct levels: each distinct value is keyed once (missing
    values and columns of mixed types one by one, as :func:`frpd_cli.encoding.category_key` keys them).
    """
    from .encoding import category_key

    array = np.empty(len(values), dtype=object)
    array[:] = list(values) if not isinstance(values, np.ndarray) else values
    ok = np.empty(array.shape[0], dtype=bool)
    missing = pd.isna(array)
    present = ~missing
    rest = array[present]
    if rest.size and pd.api.types.infer_dtype(rest, skipna=False) in _KEYED_BY_EQUALITY:
        codes, uniques = pd.factorize(rest, use_na_sentinel=False)
        ok[present] = np.array([bool(keep(category_key(v))) for v in uniques], dtype=bool)[codes]
    else:
        ok[present] = [bool(keep(category_key(v))) for v in rest]
    ok[missing] = [bool(keep(category_key(v))) for v in array[missing]]
    return ok


def _check_disjoint_within(spec: SchemaSpec, key: str) -> None:
    values = getattr(spec, key)
    if len(set(values)) != len(values):
        seen, repeated = set(), []
        for v in values:
            if v in seen:
                repeated.append(v)
            seen.add(v)
        raise SchemaError(f"Column '{repeated[0]}' is listed twice as {key}.")


def _json_scalar(value):
    if isinstance(value, np.generic):
        return value.item()
    return value


def load_schema_file(path) -> SchemaSpec:
    """Read a schema TOML file.

    Raises
    ------
    SchemaError
        The file is missing, not TOML, has unknown keys or values of the wrong type.
    """
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"The schema file '{path}' does not exist.")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SchemaError(f"The schema file '{path}' is not valid TOML: {exc}.") from None
    unknown = sorted(set(data) - _FILE_KEYS)
    if unknown:
        raise SchemaError(
            f"The schema file '{path}' has unknown key(s) {', '.join(unknown)}. "
            f"Known keys: {', '.join(sorted(_FILE_KEYS))}."
        )
    kwargs: dict = {}
    for key in ("target", "id_column"):
        if key in data:
            if not isinstance(data[key], str):
                raise SchemaError(f"'{key}' in '{path}' must be a string. Got {data[key]!r} instead.")
            kwargs[key] = data[key]
    if "favorable" in data:
        kwargs["favorable"] = data["favorable"]
    for key in (*_MUTABILITY_KEYS, *_KIND_KEYS, "exclude", "vary"):
        if key in data:
            value = data[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise SchemaError(f"'{key}' in '{path}' must be a list of column names. Got {value!r} instead.")
            kwargs[key] = tuple(value)
    if "ordinal" in data:
        ordinal = data["ordinal"]
        if not isinstance(ordinal, dict) or not all(isinstance(v, list) and v for v in ordinal.values()):
            raise SchemaError(
                f"[ordinal] in '{path}' must map column names to non-empty lists of levels, lowest first."
            )
        kwargs["ordinal"] = {k: tuple(v) for k, v in ordinal.items()}
    if "range" in data:
        ranges = data["range"]
        if not isinstance(ranges, dict) or not all(
                (isinstance(v, str) and v) or (isinstance(v, list) and v) for v in ranges.values()):
            raise SchemaError(
                f"[range] in '{path}' must map column names to \"LO:HI\" (numeric; open ends \"LO:\" and "
                "\":HI\"), [LO, HI], or a non-empty list of allowed levels (categorical).")
        kwargs["ranges"] = {k: (v if isinstance(v, str) else tuple(v)) for k, v in ranges.items()}
    if "weight" in data:
        weights = data["weight"]
        if not isinstance(weights, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in weights.values()):
            raise SchemaError(f"[weight] in '{path}' must map column names to numbers > 0 (the cost weight of "
                              "each feature; default 1).")
        kwargs["weights"] = {k: float(v) for k, v in weights.items()}
    if "max_move" in data:
        value = data["max_move"]
        table = value if isinstance(value, dict) else {"default": value}
        try:
            shares = {k: parse_max_move(v, None if k == "default" else k) for k, v in table.items()}
        except SchemaError as exc:
            raise SchemaError(f"max_move in '{path}': {exc}") from None
        kwargs["max_move"] = shares.pop("default", None)
        kwargs["max_moves"] = shares
    return SchemaSpec(**kwargs)


def parse_max_move(value, name: str | None = None) -> float:
    """A move bound (``--max-move``): a share of the training range in (0, 1], or ``"none"`` (``math.inf``).

    Raises
    ------
    DeclarationError
        Naming the feature (if any) and the value received.

    Examples
    --------
    >>> parse_max_move("0.25"), parse_max_move("none")
    (0.25, inf)
    """
    if isinstance(value, str) and value.strip().lower() == "none":
        return math.inf
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = float("nan")
    if isinstance(value, bool) or not (math.isinf(share) and share > 0 or 0 < share <= 1):
        what = f"of '{name}' " if name else ""
        raise DeclarationError("--max-move", name or "",
                               f"The move bound {what}must be a share of the feature's training range in (0, 1] "
                               f"(0.25: a recourse moves it by at most a quarter of its range from the applicant's "
                               f"value) or none (no bound). Got {value!r} instead.")
    return share


def check_weight(name: str, weight) -> float:
    """A feature's cost weight: a finite number in (0, MAX_WEIGHT].

    Raises
    ------
    SchemaError
        Naming the feature and the value received.
    """
    try:
        value = float(weight)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(weight, bool) or not (math.isfinite(value) and 0 < value <= MAX_WEIGHT):
        raise DeclarationError("--weight", name,
                               f"The weight of '{name}' must be a finite number > 0 and at most {MAX_WEIGHT:g} (1 is the "
                               f"default; 2 makes a change of '{name}' cost twice as much). Got {weight!r} instead.")
    return value


def parse_range(feature: Feature, value) -> Feature:
    """``feature`` with the user's range: ``"LO:HI"`` or ``[LO, HI]`` (numeric), levels (categorical).

    Parameters
    ----------
    feature : Feature
    value : str or sequence
        Numeric features: ``"LO:HI"`` (``"LO:"`` and ``":HI"`` leave a side
        open) or a pair of numbers. Categorical features: ``"a,b,c"`` or a
        list of levels (from the training vocabulary).

    Raises
    ------
    SchemaError
        The value does not fit the feature's kind, a bound is not a number,
        ``LO > HI``, or a level is unknown.

    Examples
    --------
    >>> f = parse_range(Feature("age", "integer"), "18:")
    >>> (f.low, f.high)
    (18.0, None)
    """
    from dataclasses import replace

    name = feature.name
    if feature.is_categorical and isinstance(value, str) and is_relative_range(value):
        raise DeclarationError("--range", name,
            f"Limits relative to the applicant (+N, -N, N%) apply to numeric features; '{name}' is categorical. "
            f"List its allowed levels instead ({levels_list(feature.levels)}). Got {value!r}.")
    if feature.is_categorical:
        from .encoding import category_key

        items = [v.strip() for v in value.split(",")] if isinstance(value, str) else list(value)
        items = [v for v in items if not (isinstance(v, str) and v == "")]
        known = {category_key(level): level for level in feature.levels}
        unknown = [str(v) for v in items if category_key(v) not in known]
        if not items or unknown:
            raise DeclarationError("--range", name,
                f"The range of the categorical feature '{name}' must list allowed levels of its training "
                f"vocabulary ({levels_list(feature.levels)}). Got "
                f"{', '.join(unknown) if unknown else repr(value)} instead."
            )
        allowed = tuple(dict.fromkeys(known[category_key(v)] for v in items))
        return replace(feature, allowed=allowed)
    if isinstance(value, str) and is_relative_range(value):
        return _parse_relative(feature, value)
    usage = (f"The range of the numeric feature '{name}' must be LO:HI (open ends LO: and :HI allowed, e.g. "
             f"{name}=18:65) or a pair [LO, HI]")
    if isinstance(value, str):
        if value.count(":") != 1:
            raise DeclarationError("--range", name, f"{usage}. Got {value!r} instead.")
        parts = [p.strip() for p in value.split(":")]
    elif len(value) == 2:
        parts = list(value)
    else:
        raise DeclarationError("--range", name, f"{usage}. Got {list(value)!r} instead.")
    bounds = []
    for part in parts:
        if part == "" or part is None:
            bounds.append(None)
            continue
        try:
            number = float(part)
        except (TypeError, ValueError):
            number = float("nan")
        if isinstance(part, bool) or not math.isfinite(number):
            raise DeclarationError("--range", name, f"{usage}; the bounds must be finite numbers. Got {value!r} instead.")
        bounds.append(number)
    low, high = bounds
    if low is None and high is None:
        raise DeclarationError("--range", name, f"{usage}; at least one bound is needed. Got {value!r} instead.")
    if low is not None and high is not None and low > high:
        raise DeclarationError("--range", name, f"{usage}, with LO <= HI. Got {value!r} instead.")
    return replace(feature, low=low, high=high)


def is_relative_range(value) -> bool:
    """A ``--range`` value relative to the applicant: a side written with a leading ``+`` or a trailing ``%``."""
    if not isinstance(value, str):
        return False
    parts = [p.strip() for p in value.split(":")]
    return len(parts) == 2 and any(p.startswith("+") or p.endswith("%") for p in parts)


def _parse_relative(feature: Feature, value: str) -> Feature:
    """``feature`` with limits relative to the applicant's value: ``"-5:+12"`` (units), ``"-20%:+10%"``."""
    from dataclasses import replace

    name = feature.name
    usage = (f"A range relative to the applicant's value of '{name}' must be -DOWN:+UP in its units or in percent "
             f"of the applicant's value, every bound with its sign (e.g. {name}=+0:+12, at most 12 more and never "
             f"less; {name}=-20%:+10%; {name}=-5:+inf leaves the upper side open)")
    bounds = []
    units = set()
    for side, part in enumerate(p.strip() for p in value.split(":")):
        if part == "":
            bounds.append(None)
            continue
        percent = part.endswith("%")
        number_text = part[:-1].strip() if percent else part
        try:
            number = float(number_text)
        except ValueError:
            number = float("nan")
        if number_text[:1] not in ("+", "-") or math.isnan(number):
            raise DeclarationError("--range", name, f"{usage}. Got {value!r} instead.")
        if math.isinf(number):           # an open side, written -inf:... / ...:+inf
            if (number < 0) != (side == 0):
                raise DeclarationError("--range", name, f"{usage}. Got {value!r} instead.")
            bounds.append(None)
            continue
        units.add(percent)
        bounds.append(number)
    low, high = bounds
    if len(units) > 1:
        raise DeclarationError("--range", name, f"{usage}; both bounds in units or both in percent. "
                               f"Got {value!r} instead.")
    if low is None and high is None:
        raise DeclarationError("--range", name, f"{usage}; at least one bound is needed. Got {value!r} instead.")
    if low is not None and high is not None and low > high:
        raise DeclarationError("--range", name, f"{usage}, with DOWN <= UP. Got {value!r} instead.")
    if units == {True} and low is not None and low < -100:
        raise DeclarationError("--range", name, f"{usage}; a decrease of more than 100% changes the sign. "
                               f"Got {value!r} instead.")
    return replace(feature, low=None, high=None, rel_low=low, rel_high=high, rel_percent=units == {True})


def merge_specs(base: SchemaSpec, override: SchemaSpec) -> SchemaSpec:
    """Combine two specs; ``override`` (the command-line flags) wins column by column.

    A column that ``override`` gives a kind (categorical, continuous, integer,
    ordinal) loses any kind ``base`` gave it; likewise for mutability
    (immutable, increasing, decreasing). ``vary`` given by ``override``
    replaces the file's, and the file's immutable, increasing and decreasing
    columns outside it give way (every feature outside ``vary`` is immutable);
    a column ``override`` declares immutable leaves the file's ``vary``.
    """
    kinds_over = set(override.categorical) | set(override.continuous) | set(override.integer) | set(override.ordinal)
    mut_over = set(override.immutable) | set(override.increasing) | set(override.decreasing)

    def merged(key, overridden):
        kept = tuple(c for c in getattr(base, key) if c not in overridden)
        return kept + tuple(c for c in getattr(override, key) if c not in kept)

    ordinal = {k: v for k, v in base.ordinal.items() if k not in kinds_over}
    ordinal.update(override.ordinal)
    # --vary and --immutable are two ways to say the same thing: a column the flags put in one leaves the other
    vary = override.vary or tuple(c for c in base.vary if c not in override.immutable)
    return SchemaSpec(
        target=override.target if override.target is not None else base.target,
        favorable=override.favorable if override.favorable is not None else base.favorable,
        id_column=override.id_column if override.id_column is not None else base.id_column,
        immutable=tuple(dict.fromkeys([*(c for c in base.immutable if c not in mut_over | set(override.vary)),
                                       *override.immutable])),
        increasing=_kept_by_vary(merged("increasing", mut_over), base.increasing, override.vary),
        decreasing=_kept_by_vary(merged("decreasing", mut_over), base.decreasing, override.vary),
        categorical=merged("categorical", kinds_over),
        continuous=merged("continuous", kinds_over),
        integer=merged("integer", kinds_over),
        exclude=tuple(dict.fromkeys(base.exclude + override.exclude)),
        ordinal=ordinal,
        vary=vary,
        ranges={**base.ranges, **override.ranges},
        weights={**base.weights, **override.weights},
        max_move=override.max_move if override.max_move is not None else base.max_move,
        max_moves={**base.max_moves, **override.max_moves},
    )


def _kept_by_vary(merged: tuple, base: tuple, vary: tuple) -> tuple:
    """A --vary flag makes every column outside it immutable: the file's monotone columns outside it are dropped."""
    if not vary:
        return merged
    return tuple(c for c in merged if c in vary or c not in base)


def parse_favorable(value, target_values: pd.Series | None = None):
    """Turn a favourable-class declaration into a value of the target column's type.

    ``"1"`` from the command line matches an integer target column holding 1.
    """
    if target_values is None or not isinstance(value, str):
        return value
    if pd.api.types.is_numeric_dtype(target_values):
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() else number
    return value


def infer_schema(frame: pd.DataFrame, spec: SchemaSpec | None = None, *, source: str = "the data file") -> Schema:
    """Infer the feature schema of a training frame, honouring declarations.

    Parameters
    ----------
    frame : DataFrame of shape (n_rows, n_columns)
        The training data, target column included.
    spec : SchemaSpec, optional
        Declarations (file merged with flags).
    source : str
        How the data is named in error messages.

    Returns
    -------
    schema : Schema

    Raises
    ------
    SchemaError
        A declared column does not exist, a column has two kinds or two
        mutabilities, a monotone categorical has no declared order, an ordinal
        order misses observed levels, or a numeric declaration meets text.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [20, 30], "job": ["a", "b"], "label": [0, 1]})
    >>> s = infer_schema(df, SchemaSpec(increasing=("age",)))
    >>> [(f.name, f.kind, f.mutability) for f in s.features]
    [('age', 'integer', 'increasing'), ('job', 'categorical', 'free')]
    """
    spec = spec or SchemaSpec()
    columns = [str(c) for c in frame.columns]
    existing = ", ".join(columns)

    def check_exists(name, role, option=None):
        if name not in columns:
            message = (f"Column '{name}' (declared {role}) is not in {source}.{did_you_mean(name, columns)} The "
                       f"columns are: {existing}.")
            parts = [p.strip() for p in str(name).split(",")]
            if len(parts) > 1 and all(p in columns for p in parts):     # --immutable age,race: a list in one value
                listed = ", ".join(f'"{p}"' for p in parts)
                flags = f"{' '.join(f'{option} {p}' for p in parts)} on the command line, or " if option else ""
                message += f" To declare several columns, name each on its own: {flags}[{listed}] in the schema file."
            # a role a command-line flag declares: the command line tells a flag's column from the file's
            raise SchemaError(message) if option is None else DeclarationError(option, name, message)

    target = spec.target
    if target is None:
        if "label" not in columns:
            raise SchemaError(
                f"No target column given and {source} has no column named 'label'.{did_you_mean('label', columns)} "
                "Pass --target COLUMN or set target in the schema file."
            )
        target = "label"
    check_exists(target, "as the target", "--target")
    if spec.id_column is not None and spec.id_column in columns and spec.id_column == target:
        raise SchemaError(f"Column '{target}' cannot be both the target and the id column.")

    for key in (*_MUTABILITY_KEYS, *_KIND_KEYS, "exclude"):
        for name in getattr(spec, key):
            check_exists(name, key if key != "exclude" else "as excluded", _FLAG_OF.get(key))
            if name == target:
                message = f"Column '{name}' is the target; it cannot also be declared {key}."
                flag = _FLAG_OF.get(key)        # from a flag a usage error (exit 2), from the file an input error
                raise DeclarationError(flag, name, message) if flag else SchemaError(message)
    for name in spec.ordinal:
        check_exists(name, "ordinal")
    for key, option, names in (("vary", "--vary", spec.vary), ("with a range", "--range", spec.ranges),
                               ("with a weight", "--weight", spec.weights),
                               ("with a move bound", "--max-move", spec.max_moves)):
        for name in names:
            if name not in columns:
                raise DeclarationError(option, name, f"Column '{name}' (declared {key}) is not in {source}."
                                                     f"{did_you_mean(name, columns)} The columns are: {existing}.")
            if name == target:
                raise DeclarationError(option, name, f"Column '{name}' is the target; it cannot also be declared "
                                                     f"{key}.")
    for name in spec.vary:
        if name in spec.immutable:
            raise DeclarationError("--vary", name,
                                   f"Column '{name}' is declared both vary (it may change) and immutable; choose one "
                                   "(with --vary, every feature not listed is immutable).")

    _check_exclusive(spec, _MUTABILITY_KEYS, "mutabilities")
    kind_sets = {"categorical": spec.categorical, "continuous": spec.continuous, "integer": spec.integer,
                 "ordinal": tuple(spec.ordinal)}
    _check_exclusive_sets(kind_sets, "kinds")

    non_features = {target} | set(spec.exclude)
    if spec.id_column is not None:
        non_features.add(spec.id_column)
    feature_columns = [c for c in columns if c not in non_features]
    for key, option, names in (("vary", "--vary", spec.vary), ("with a range", "--range", spec.ranges),
                               ("with a weight", "--weight", spec.weights),
                               ("with a move bound", "--max-move", spec.max_moves)):
        for name in names:
            if name in non_features:
                raise DeclarationError(option, name, f"Column '{name}' is declared {key} but is not a feature (it "
                                                     "is excluded or the id column).")
    if not feature_columns:
        raise SchemaError(f"{source} has no feature columns besides the target '{target}'.")

    features = []
    for name in feature_columns:
        values = frame[name]
        if values.isna().any():
            rows = np.flatnonzero(values.isna().to_numpy())[:5]
            raise SchemaError(
                f"Column '{name}' of {source} has missing values (data rows {', '.join(str(r + 1) for r in rows)}). "
                "Fill or drop them before training and planning."
            )
        kind, levels = _infer_kind(name, values, spec, source)
        mutability = next((m for m in _MUTABILITY_KEYS if name in getattr(spec, m)), "free")
        if spec.vary and name not in spec.vary:
            if mutability in ("increasing", "decreasing"):
                raise DeclarationError(
                    "--vary", name,
                    f"Column '{name}' is declared {mutability} but is not in the vary list "
                    f"({', '.join(spec.vary)}): with --vary every feature not listed is immutable. Add --vary "
                    f"{name}, or drop --{mutability} {name}."
                )
            mutability = "immutable"
        if kind == "categorical" and mutability in ("increasing", "decreasing"):
            raise SchemaError(
                f"Column '{name}' is categorical without an order, so it cannot be {mutability}. "
                f"Declare its order under [ordinal] in the schema file (e.g. {name} = [lowest, ..., highest])."
            )
        feature = Feature(name=name, kind=kind, levels=levels, mutability=mutability,
                          weight=check_weight(name, spec.weights.get(name, 1.0)))
        if name in spec.ranges:
            feature = parse_range(feature, spec.ranges[name])
        elif spec.withhold_missing and kind == "categorical" and mutability != "immutable":
            feature = _withholding_missing(feature)
        if name in spec.max_moves:
            _check_own_max_move(feature, spec.max_moves[name])
        feature = _with_max_move(feature, values, spec.max_moves.get(name, spec.max_move), source,
                                 own=name in spec.max_moves)
        features.append(feature)

    favorable = spec.favorable if spec.favorable is not None else 1
    favorable = _json_scalar(parse_favorable(favorable, frame[target]))
    return Schema(features=tuple(features), target=target, favorable=favorable, id_column=spec.id_column)


#: Words of a categorical level that say the value was not recorded (``Unknown``, ``Other/Unknown``).
_MISSING_WORDS = frozenset({"unknown", "unknowns", "missing", "unspecified", "undisclosed", "unrecorded",
                            "undeclared", "unreported", "unstated", "unk"})
#: Whole levels, in words, that say so (``n/a``, ``Not stated``, ``prefer not to say``).
_MISSING_PHRASES = frozenset({"?", "n/a", "n a", "na", "not available", "not applicable", "not stated", "not known",
                              "not given", "not reported", "not specified", "not recorded", "not declared",
                              "no answer", "no response", "none given", "prefer not to say", "declined",
                              "declined to answer", "refused"})


def missing_like_levels(levels) -> tuple:
    """The levels that record missing information rather than a value: a word such as ``unknown``, ``missing`` or
    ``unspecified`` (``Other/Unknown``, ``UNKNOWN``), or a whole level such as ``?``, ``n/a``, ``Not stated`` or
    ``prefer not to say``.

    Examples
    --------
    >>> missing_like_levels(["Private", "Other/Unknown", "Self-Employed"])
    ('Other/Unknown',)
    >>> missing_like_levels(["primary", "secondary", "unknown", "?", "Not stated", "none", "known"])
    ('unknown', '?', 'Not stated')
    """
    out = []
    for level in levels:
        text = " ".join(str(level).split()).lower()
        words = _name_words(text)
        if text in _MISSING_PHRASES or " ".join(words) in _MISSING_PHRASES or _MISSING_WORDS.intersection(words):
            out.append(level)
    return tuple(out)


def _withholding_missing(feature: Feature) -> Feature:
    """``feature`` with its levels of missing information withheld from recourses, when it has any and another
    level besides."""
    from dataclasses import replace

    withheld = missing_like_levels(feature.levels)
    if not withheld or len(withheld) == len(feature.levels):
        return feature
    return replace(feature, withheld=withheld)


def _check_own_max_move(feature: Feature, share: float) -> None:
    """Refuse a move bound declared for an unordered categorical feature (``--max-move COL=SHARE`` or
    ``[max_move] COL = SHARE``): it has no distance between levels to bound, and a bound that does nothing
    would look like one that holds. ``none`` (no bound) is what such a feature has anyway and passes."""
    if feature.kind == "categorical" and not math.isinf(share):
        raise DeclarationError(
            "--max-move", feature.name,
            f"Column '{feature.name}' has a move bound ({share:g}) but is a categorical feature without an order: "
            "there is no range to move it a share of; the bound applies to numeric and ordinal features. "
            f"Declare its order under [ordinal] in the schema file ({feature.name} = [lowest, ..., highest]) to bound "
            f"its move in levels, or limit the levels a recourse may choose with --range "
            f"{feature.name}=LEVEL,LEVEL.")


def _with_max_move(feature: Feature, values: pd.Series, share, source: str, *, own: bool = False) -> Feature:
    """``feature`` with its move bound: ``share`` of its training range, in its units (numeric features that
    may change), or of its levels (ordinal features); other features pass (a share declared for an unordered
    categorical one was refused before, :func:`_check_own_max_move`). A flag (:func:`is_flag_column`) is held
    only by a share declared for it alone (``own``: ``--max-move COL=SHARE``, ``[max_move]``), as before flags
    were told apart; the bound of every feature does not hold it."""
    from dataclasses import replace

    if share is not None and feature.kind == "ordinal" and feature.mutability != "immutable":
        return _with_max_levels(feature, share)
    if share is None or not feature.is_numeric or feature.mutability == "immutable":
        return feature
    if math.isinf(share):                          # declared none: no bound (schema files say so)
        return replace(feature, max_move_share=math.inf)
    if feature.kind == "integer" and not own and is_flag_column(values):
        # a flag (0/1) has two levels, and a bound of at least one level reaches both, as for a two-level
        # ordinal: the share is kept (schema files state it) and no flip is ruled out
        return replace(feature, max_move_share=float(share))
    span = move_span(values)
    if not math.isfinite(span) or span <= 0:
        return feature
    return replace(feature, max_move=share * span, max_move_share=float(share))


def is_flag_column(values) -> bool:
    """Whether a numeric column holds exactly two whole values one apart (0 and 1; 1 and 2): a flag.

    A flip of a flag is a change of state, not a move along a scale: the move bound (``--max-move``), a share of
    a feature's range, does not apply to an integer flag, as a bound of at least one level reaches both levels
    of a two-level ordinal (a quarter of the range of a 0/1 column, rounded inwards, would keep it fixed).

    Examples
    --------
    >>> is_flag_column([0, 1, 1, 0]), is_flag_column([1.0, 2.0]), is_flag_column([0, 1, 2]), is_flag_column([0, 5])
    (True, True, False, False)
    >>> is_flag_column([1, 1]), is_flag_column([0.0, 0.5, 1.0])
    (False, False)
    """
    numbers = pd.to_numeric(values if isinstance(values, pd.Series) else pd.Series(values), errors="coerce")
    numbers = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    if numbers.size == 0 or not np.all(np.isfinite(numbers)):
        return False
    low, high = float(numbers.min()), float(numbers.max())
    if high - low != 1.0 or not low.is_integer():
        return False
    return bool(np.all((numbers == low) | (numbers == high)))


def _flag_values(values) -> tuple[int, int]:
    """The two values of a flag column (:func:`is_flag_column`), as whole numbers."""
    numbers = pd.to_numeric(values if isinstance(values, pd.Series) else pd.Series(values), errors="coerce")
    return int(numbers.min()), int(numbers.max())


def _shell_quoted(name) -> str:
    import shlex

    return shlex.quote(str(name))


def flag_features(schema: Schema, frame: pd.DataFrame, *, vary=()) -> list[tuple[str, int, int]]:
    """Integer features free to change that are flags (:func:`is_flag_column`): a recourse may flip them.

    The move bound does not hold a flag (a flip is a change of state), so one that records a fact the applicant
    cannot change (a new business, a past event) needs a declaration: as :func:`sensitive_like_features`, a
    feature is reported when nothing was declared about it (mutability ``free``, no ``--range``, not listed in
    ``vary``). ``frame``: the training rows the schema was inferred from.

    Returns
    -------
    flags : list of (str, int, int)
        Each flag's name and its two values, lowest first.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"New": [0, 1, 0], "RealEstate": [1, 0, 1], "Term": [84, 120, 60], "label": [0, 1, 1]})
    >>> flag_features(infer_schema(df), df)
    [('New', 0, 1), ('RealEstate', 0, 1)]
    >>> flag_features(infer_schema(df, SchemaSpec(immutable=("New",), increasing=("RealEstate",))), df)
    []
    """
    declared = set(vary)
    return [(f.name, *_flag_values(frame[f.name])) for f in schema.features
            if f.kind == "integer" and f.mutability == "free" and not f.has_declared_range and f.max_move is None
            and f.name not in declared and f.name in frame.columns and is_flag_column(frame[f.name])]


#: The move bound's range is at most this many times the range of the central values (:data:`CENTRAL_SHARE`).
OUTLIER_FACTOR = 2.0
#: The share of a column's training values, in its middle, whose range caps the move bound's range.
CENTRAL_SHARE = 0.99


def move_span(values) -> float:
    """The range a move bound (``--max-move SHARE``) is a share of: the training range (max minus min), at most
    :data:`OUTLIER_FACTOR` times the range of the central :data:`CENTRAL_SHARE` of the values.

    A few outliers (incomes in the millions among values under 210,000) stretch the training range fifty times
    and with it every bound: a quarter of it would allow a move of three million. The range of the central 99%
    (the 0.5th to the 99.5th percentile) ignores them; twice it is more than the whole range of evenly spread or
    normal values up to millions of rows (about 1.55 times at 26,000 normal values, 1.9 at a million), so only
    columns with outliers or a long tail get a narrower bound. A column whose central values take fewer than
    three distinct values (a count that is almost always 0) keeps its training range: its middle has no spread.

    Examples
    --------
    >>> move_span([0.0, 1.0, 2.0, 3.0, 4.0])
    4.0
    >>> move_span(list(range(1000)) + [1e6])       # one outlier: twice the central range, not a million
    1980.0
    """
    numbers = pd.to_numeric(values if isinstance(values, pd.Series) else pd.Series(values), errors="coerce")
    numbers = numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    numbers = numbers[np.isfinite(numbers)]
    if numbers.size == 0:
        return math.nan
    least, most = float(numbers.min()), float(numbers.max())
    span = most - least
    tail = (1.0 - CENTRAL_SHARE) / 2.0
    low, high = np.quantile(numbers, [tail, 1.0 - tail])
    if high - low >= span / OUTLIER_FACTOR:
        return span     # the cap does not bind (spread values): no need to look closer
    inside = numbers[(numbers >= low) & (numbers <= high)]
    first, last = inside.min(), inside.max()
    if not (first < last and np.any((inside > first) & (inside < last))):
        return span     # one or two values hold the middle (a flag, a count that is almost always 0): no spread
    return OUTLIER_FACTOR * float(high - low)


def _with_max_levels(feature: Feature, share: float) -> Feature:
    """An ordinal ``feature`` with its move bound: ``share`` of the steps between its lowest and highest level,
    rounded up to whole levels (at least one); none when that reaches every level."""
    from dataclasses import replace

    steps = len(feature.levels) - 1
    if math.isinf(share) or steps < 1:
        return replace(feature, max_move_share=float(share))
    levels = max(1, math.ceil(share * steps - 1e-9))
    return replace(feature, max_move_share=float(share), max_levels=levels if levels < steps else None)


#: How many levels a message lists before it says how many more there are.
LEVELS_SHOWN = 10


def levels_list(levels, *, limit: int = LEVELS_SHOWN) -> str:
    """The levels for a message, the first ``limit`` of them and how many more: ``a, b, c ... and 297 more``.

    Examples
    --------
    >>> levels_list(["a", "b", "c"]), levels_list([f"z{i}" for i in range(300)], limit=3)
    ('a, b, c', 'z0, z1, z2 ... and 297 more')
    """
    levels = [str(level) for level in levels]
    shown = ", ".join(levels[:limit])
    return shown if len(levels) <= limit else f"{shown} ... and {len(levels) - limit} more"


def levels_text(n: int) -> str:
    """``1 level``, ``2 levels``."""
    return f"{n} level" if n == 1 else f"{n} levels"


def _check_exclusive(spec: SchemaSpec, keys, what: str) -> None:
    _check_exclusive_sets({k: getattr(spec, k) for k in keys}, what)


def _check_exclusive_sets(sets: dict, what: str) -> None:
    owner: dict[str, str] = {}
    for key, names in sets.items():
        for name in names:
            if name in owner:
                raise SchemaError(
                    f"Column '{name}' is declared both {owner[name]} and {key}; choose one of the {what}."
                )
            owner[name] = key


def _infer_kind(name: str, values: pd.Series, spec: SchemaSpec, source: str):
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if name in spec.ordinal:
        declared = spec.ordinal[name]
        levels = _coerce_levels(declared, values)
        observed = set(_python_values(values.unique()))
        missing = sorted(str(v) for v in observed - set(levels))
        if missing and _is_boolean_column(values):
            raise SchemaError(
                f"Column '{name}' of {source} holds booleans (True/False) but its declared order "
                f"({', '.join(str(v) for v in declared)}) names other levels. Declare it as [ordinal] "
                f"{name} = [false, true] (or [\"False\", \"True\"]), lowest first."
            )
        if missing:
            raise SchemaError(
                f"Column '{name}' of {source} has value(s) {', '.join(missing)} that are not in its declared "
                f"order ({', '.join(str(v) for v in declared)}). Add them to [ordinal] {name}."
            )
        if len(set(levels)) != len(levels):
            raise SchemaError(f"The declared order of '{name}' repeats a level.")
        return "ordinal", tuple(levels)
    if name in spec.categorical or not numeric:
        if not numeric and (name in spec.continuous or name in spec.integer):
            bad = _first_non_numeric(values)
            value = values.iloc[bad]
            number = _number(value)
            what = (f"the number {number!r}, too large for a 64-bit integer" if isinstance(number, int)
                    else f"the text {value!r}")
            raise SchemaError(
                f"Column '{name}' is declared {'continuous' if name in spec.continuous else 'integer'} but data "
                f"row {bad + 1} of {source} holds {what}."
            )
        levels = tuple(sorted(_python_values(values.unique()), key=_sort_key))
        return "categorical", levels
    # numeric
    if name in spec.continuous:
        return "continuous", ()
    array = values.to_numpy(dtype=float)
    if not np.all(np.isfinite(array)):
        raise SchemaError(f"Column '{name}' of {source} has infinite values.")
    if name in spec.integer:
        if whole_share(array) < WHOLE_SHARE:      # a few fractions (imputed values) are a count's, as inferred
            bad = np.flatnonzero(array != np.round(array))[0]
            raise SchemaError(
                f"Column '{name}' is declared integer but data row {bad + 1} of {source} holds {float(array[bad])!r} "
                f"({_percent(whole_share(array))} of its values are whole; an integer column needs at least "
                f"{WHOLE_SHARE:.0%})."
            )
        return "integer", ()
    if whole_share(array) >= WHOLE_SHARE:
        return "integer", ()
    return "continuous", ()


#: A numeric column is inferred integer when at least this share of its values is whole: counts whose few
#: missing cells were imputed with a mean or a model (7, 3, 0.0273) are still counts, and a recourse should not
#: propose a fraction of one. One fraction in a hundred rows at most: a column with more fractions than that
#: is taken for a measurement (amounts, rates), whose fractions mean something.
WHOLE_SHARE = 0.99


def whole_share(values) -> float:
    """The share of ``values`` (finite numbers) that are whole; 1.0 for no values."""
    array = np.asarray(values, dtype=np.float64)
    return float(np.mean(array == np.round(array))) if array.size else 1.0


#: Texts of a declared level that mean a boolean column's values (compared without case).
_BOOL_TEXTS = {"true": True, "false": False}


def _is_boolean_column(values: pd.Series) -> bool:
    """A column of booleans: bool dtype, or objects that are all booleans but for missing cells (pandas reads a
    ``True``/``False`` column with empty cells so)."""
    if pd.api.types.is_bool_dtype(values):
        return True
    if not pd.api.types.is_object_dtype(values):
        return False
    present = values.dropna()
    return len(present) > 0 and all(isinstance(v, (bool, np.bool_)) for v in present.unique())


def _coerce_levels(declared, values: pd.Series) -> list:
    """Declared levels (strings or numbers from TOML) in the column's own type.

    A boolean column's levels are booleans: TOML ``false``/``true``, or their text in any case (``"False"``,
    ``"true"``); other declared levels are kept as they are (and reported as not in the column's values).
    """
    if _is_boolean_column(values):
        return [bool(level) if isinstance(level, bool)
                else _BOOL_TEXTS.get(level.strip().lower(), level) if isinstance(level, str) else level
                for level in declared]
    if pd.api.types.is_numeric_dtype(values):
        out = []
        for level in declared:
            try:
                number = float(level)
            except (TypeError, ValueError):
                out.append(level)
                continue
            out.append(int(number) if number.is_integer() and pd.api.types.is_integer_dtype(values) else number)
        return out
    return [str(level) for level in declared]


def _python_values(values) -> list:
    return [v.item() if isinstance(v, np.generic) else v for v in values]


def _sort_key(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, math.inf, str(value))


def _first_non_numeric(values: pd.Series) -> int:
    """Position of the first value that keeps a column from being numeric: text, or an integer beyond 64 bits."""
    numbers = [_number(value) for value in values.tolist()]
    for i, number in enumerate(numbers):
        if number is None:
            return i
    # every value is a number: pandas left the column as objects because an integer does not fit in 64 bits (as
    # Python ints, or with pandas 2 as the file's text)
    for i, number in enumerate(numbers):
        if isinstance(number, int) and not -(2 ** 63) <= number < 2 ** 64:
            return i
    return 0


def _number(value):
    """``value`` as a Python int or float when it is a number or the text of one; None otherwise (text, missing)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return None
        return None if math.isnan(number) else number
    return None


# --- Inspecting a schema: the schema file writer, column descriptions, identifier-like columns, precision ---

def schema_to_toml(schema: Schema, *, columns=None, source: str | None = None) -> str:
    """The schema as a TOML file that ``--schema`` reads back into the same schema.

    Every feature's kind is written out (``categorical``, ``continuous``, ``integer`` lists and the
    ``[ordinal]`` table with each order), and so are the target, the favourable class, the id column,
    the mutabilities and, when ``columns`` (all the data file's columns) is given, the columns that are
    not features (``exclude``). Inferring with the written file on the same data gives the same
    :class:`Schema`.

    Parameters
    ----------
    schema : Schema
    columns : sequence of str, optional
        The data file's columns, to write the excluded ones.
    source : str, optional
        Named in the file's first comment line.

    Returns
    -------
    text : str

    Notes
    -----
    The file is assembled from one function per part (:data:`TOML_KEY_WRITERS` for top-level keys,
    :data:`TOML_TABLE_WRITERS` for tables such as ``[ordinal]``), in that order: TOML needs every
    top-level key before the first table.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [20, 30], "job": ["a", "b"], "label": [0, 1]})
    >>> print(schema_to_toml(infer_schema(df, SchemaSpec(immutable=("job",)))), end="")
    target = "label"
    favorable = 1
    immutable = ["job"]
    categorical = ["job"]
    integer = ["age"]
    """
    context = {"columns": None if columns is None else [str(c) for c in columns]}
    lines = [] if source is None else [f"# frpd schema of {source}"]
    for write in TOML_KEY_WRITERS:
        lines.extend(write(schema, context))
    for write in TOML_TABLE_WRITERS:
        table = write(schema, context)
        if table:
            lines.append("")
            lines.extend(table)
    return "\n".join(lines) + "\n"


def _toml_identity(schema: Schema, context: dict) -> list[str]:
    lines = [f"target = {_toml_value(schema.target)}", f"favorable = {_toml_value(schema.favorable)}"]
    if schema.id_column is not None:
        lines.append(f"id_column = {_toml_value(schema.id_column)}")
    return lines


def _toml_exclude(schema: Schema, context: dict) -> list[str]:
    if context.get("columns") is None:
        return []
    used = set(schema.feature_names) | {schema.target, schema.id_column}
    excluded = [c for c in context["columns"] if c not in used]
    return [f"exclude = {_toml_array(excluded)}"] if excluded else []


def _toml_mutability(schema: Schema, context: dict) -> list[str]:
    return [f"{m} = {_toml_array(schema.names_with(m))}" for m in _MUTABILITY_KEYS if schema.names_with(m)]


def _toml_kinds(schema: Schema, context: dict) -> list[str]:
    lines = []
    for kind in _KIND_KEYS:
        names = [f.name for f in schema.features if f.kind == kind]
        if names:
            lines.append(f"{kind} = {_toml_array(names)}")
    return lines


def _toml_ordinal(schema: Schema, context: dict) -> list[str]:
    ordinal = [f for f in schema.features if f.kind == "ordinal"]
    if not ordinal:
        return []
    return ["[ordinal]"] + [f"{_toml_key(f.name)} = {_toml_array(f.levels)}" for f in ordinal]


def _toml_range(schema: Schema, context: dict) -> list[str]:
    lines = []
    for f in schema.features:
        if f.allowed:
            lines.append(f"{_toml_key(f.name)} = {_toml_array(f.allowed)}")
        elif f.relative_text:
            lines.append(f"{_toml_key(f.name)} = {_toml_string(f.relative_text)}")
        elif f.low is not None or f.high is not None:
            bounds = ":".join("" if b is None else repr(float(b)) for b in (f.low, f.high))
            lines.append(f"{_toml_key(f.name)} = {_toml_string(bounds)}")
    return ["[range]", *lines] if lines else []


def _toml_weight(schema: Schema, context: dict) -> list[str]:
    lines = [f"{_toml_key(f.name)} = {float(f.weight)!r}" for f in schema.features if f.weight != 1.0]
    return ["[weight]", *lines] if lines else []


def _toml_max_move(schema: Schema, context: dict) -> list[str]:
    # ordinals with a share only: one declared for them alone (the default applies to them as to numbers)
    movable = [f for f in schema.features if f.mutability != "immutable" and (
        f.is_numeric or (f.kind == "ordinal" and f.max_move_share is not None))]
    if not movable:
        return []
    if all(f.max_move_share is None for f in movable):       # nothing declared
        return []
    shares = [f.max_move_share if f.max_move_share is not None else math.inf for f in movable]
    default = max(dict.fromkeys(shares), key=shares.count)    # the most common, the first on a tie

    def text(share):
        return '"none"' if math.isinf(share) else repr(float(share))

    return ["[max_move]", f"default = {text(default)}",
            *(f"{_toml_key(f.name)} = {text(share)}" for f, share in zip(movable, shares) if share != default)]


#: Writers of the schema file's top-level keys, in file order: ``(schema, context) -> lines``.
TOML_KEY_WRITERS = (_toml_identity, _toml_exclude, _toml_mutability, _toml_kinds)
#: Writers of the schema file's tables (after every key): ``(schema, context) -> lines`` with the header.
TOML_TABLE_WRITERS = (_toml_ordinal, _toml_range, _toml_weight, _toml_max_move)

_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_key(name: str) -> str:
    if name and all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in name):
        return name
    return _toml_string(name)


def _toml_value(value) -> str:
    value = _json_scalar(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if value is None:
        raise SchemaError("A schema value is missing (None); TOML has no null.")
    return _toml_string(str(value))


def _toml_array(values) -> str:
    return "[" + ", ".join(_toml_value(v) for v in values) + "]"


def column_decimals(frame: pd.DataFrame, schema: Schema, *, max_decimals: int = 10) -> dict:
    """The number of decimals each numeric feature is written with in the training data.

    Integer features get 0; a continuous feature gets the fewest decimals (at most ``max_decimals``)
    that represent every training value (``1929.22`` -> 2). Categorical features are left out.

    Parameters
    ----------
    frame : DataFrame
        The training rows (raw feature columns).
    schema : Schema

    Returns
    -------
    decimals : dict of str to int

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1.5, 2.25], "b": [1, 2], "label": [0, 1]})
    >>> column_decimals(df, infer_schema(df))
    {'a': 2, 'b': 0}
    """
    out = {}
    for f in schema.features:
        if f.kind == "integer":
            out[f.name] = 0
        elif f.kind == "continuous":
            out[f.name] = _decimals(frame[f.name].to_numpy(dtype=float), max_decimals)
    return out


def _decimals(values: np.ndarray, max_decimals: int) -> int:
    # the encoder's rule (values equal to themselves rounded), so that a column shows as the decoder writes it
    values = values[np.isfinite(values)]
    with np.errstate(over="ignore", invalid="ignore"):
        for d in range(max_decimals + 1):
            if np.all(np.round(values, d) == values):
                return d
    return max_decimals


# the camel-case ending (customerId, loanID) is matched case-sensitively: ignoring case there made ``paid``,
# ``valid`` or ``humid`` identifiers
_ID_NAME = re.compile(r"(?:^|[^A-Za-z])(?:id|ids|uuid|guid|key)$|^(?:id|uuid|guid)(?:[^A-Za-z]|$)|(?-i:(?<=[a-z])I[Dd]$)|"
                      r"identifier", re.IGNORECASE)


def looks_like_id_name(name: str) -> bool:
    """Whether a column's name reads like an identifier's (``id``, ``applicant_id``, ``customerID``, ``uuid``).

    Examples
    --------
    >>> [looks_like_id_name(n) for n in ("applicant_id", "ID", "customerId", "loanID", "paid", "valid", "age")]
    [True, True, True, True, False, False, False]
    """
    return bool(_ID_NAME.search(str(name)))


def extra_columns_remedy(names) -> str:
    """What to do about columns of the data that the model was not trained with, as a sentence for an error.

    An identifier is named with ``--id-column`` (the first of ``names`` named like one, :func:`looks_like_id_name`),
    other columns that are not features with ``exclude`` in the schema file.

    Examples
    --------
    >>> extra_columns_remedy(["applicant_id"]).split(" (or ")[0]
    "'applicant_id' looks like an identifier: pass --id-column applicant_id"
    >>> extra_columns_remedy(["notes"]).split("schema file ")[1]
    '(exclude = ["notes"]).'
    """
    import shlex

    names = [str(n) for n in names]
    named = [n for n in names if looks_like_id_name(n)]
    if not named:
        return ("Pass --id-column COL if one of them is an identifier, or list the columns that are not features "
                f"under exclude in the schema file (exclude = {_toml_array(names)}).")
    name, others = named[0], [n for n in names if n != named[0]]
    remedy = (f"'{name}' looks like an identifier: pass --id-column {shlex.quote(name)} (or id_column = "
              f"{_toml_value(name)} in the schema file) to leave it out of the features.")
    if others:
        remedy += f" List the other columns that are not features under exclude (exclude = {_toml_array(others)})."
    return remedy


#: Words of a column name that name a characteristic a person cannot or must not be asked to change: the grounds
#: fair-lending and equal-treatment rules protect (race, colour, religion, national origin, sex, marital status,
#: disability), matched as whole words (``race`` and ``applicant_race``, not ``trace``).
_SENSITIVE_WORDS = frozenset({
    "race", "races", "racial", "ethnicity", "ethnic", "ethnicities", "sex", "gender", "male", "female", "religion",
    "religious", "nationality", "citizenship", "marital", "marriage", "married", "disability", "disabled",
    "pregnancy", "pregnant", "caste",
    # the same in German, French, Spanish, Italian and Portuguese column names (accents are dropped first)
    "geschlecht", "familienstand", "staatsangehorigkeit", "nationalitat", "religionszugehorigkeit", "sexe",
    "ethnie", "nationalite", "sexo", "genero", "raza", "etnia", "nacionalidad", "religione", "sesso", "razza",
    "nazionalita", "raca", "nacionalidade", "religiao"})
_SENSITIVE_PAIRS = (("national", "origin"), ("native", "country"), ("country", "birth"), ("birth", "country"),
                    ("sexual", "orientation"), ("personal", "status"), ("skin", "color"), ("skin", "colour"),
                    ("estado", "civil"), ("etat", "civil"), ("situation", "familiale"), ("stato", "civile"))
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _name_words(name: str) -> list[str]:
    """The words of a column name, lower case, accents dropped: ``applicantRace``, ``applicant_race`` ->
    ``applicant``, ``race``; ``Staatsangehörigkeit`` -> ``staatsangehorigkeit``."""
    import unicodedata

    plain = "".join(c for c in unicodedata.normalize("NFKD", str(name)) if not unicodedata.combining(c))
    return [w.lower() for w in _WORD.findall(plain)]


def sensitive_like_features(schema: Schema, *, vary=()) -> tuple[list[str], list[str]]:
    """Features that may change freely although their names say a person cannot change them.

    A feature is reported when nothing was declared about it (mutability ``free``, no ``--range``, not listed in
    ``vary``): a recourse may then move it whichever way the model rewards. The built-in move bound is no
    declaration.

    Returns
    -------
    sensitive : list of str
        Named like a protected characteristic (race, sex or gender, religion, national origin, marital status,
        disability): recourses must not ask anyone to change these; they belong among the immutable features.
    ages : list of str
        Named like an age (the word ``age``): it only grows, so a recourse must not ask for a lower one.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [30, 41], "applicantRace": ["a", "b"], "trace": [1.0, 2.0], "label": [0, 1]})
    >>> sensitive_like_features(infer_schema(df))
    (['applicantRace'], ['age'])
    >>> sensitive_like_features(infer_schema(df, SchemaSpec(increasing=("age",), immutable=("applicantRace",))))
    ([], [])
    """
    sensitive, ages = [], []
    declared = set(vary)
    for f in schema.features:
        if f.mutability != "free" or f.has_declared_range or f.name in declared:
            continue
        if _names_sensitive(f.name):
            sensitive.append(f.name)
        elif "age" in _name_words(f.name):
            ages.append(f.name)
    return sensitive, ages


def _names_sensitive(name: str) -> bool:
    words = _name_words(name)
    joined = [w for w in words if w not in ("of", "at", "in", "the")]      # country_of_birth: country birth
    return bool(_SENSITIVE_WORDS.intersection(words) or set(zip(joined, joined[1:])).intersection(_SENSITIVE_PAIRS))


def named_fact(name: str) -> str | None:
    """What a feature's name says no one can change, whatever was declared about it: ``"a protected
    characteristic"``, ``"an age"`` (it only grows), ``"a record of the past"``, or None (the name tests of
    :func:`sensitive_like_features` and :func:`past_record_features`).

    Examples
    --------
    >>> [named_fact(n) for n in ("race", "age", "priors_count", "income")]
    ['a protected characteristic', 'an age', 'a record of the past', None]
    """
    if _names_sensitive(name):
        return "a protected characteristic"
    if "age" in _name_words(name):
        return "an age"
    return "a record of the past" if _names_past(name) else None


#: An unordered categorical feature free to take more levels than this draws a warning: a recourse may move it to
#: any of them, and with hundreds of levels (zip codes, branch offices) the move to one becomes the main advice.
MANY_LEVELS = 50

#: Words of a column name that name where a person lives: a recourse that changes one asks the applicant to move.
_LOCATION_WORDS = frozenset({"zip", "zipcode", "postcode", "postcodes", "postal", "city", "county", "state",
                             "region", "address"})


def many_level_features(schema: Schema, *, max_levels: int = MANY_LEVELS) -> list[tuple[str, int]]:
    """Unordered categorical features a recourse may move to more than ``max_levels`` levels.

    Each as ``(name, n_levels)``: the levels a recourse may choose (the allowed levels of ``--range COL=a,b``, or
    every training level). Immutable features and ordinals (their moves are bounded in levels) are not reported.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"zip": [f"z{i}" for i in range(60)], "job": ["a", "b"] * 30, "label": [0, 1] * 30})
    >>> many_level_features(infer_schema(df))
    [('zip', 60)]
    >>> many_level_features(infer_schema(df, SchemaSpec(immutable=("zip",))))
    []
    """
    out = []
    for f in schema.features:
        if f.kind != "categorical" or f.mutability == "immutable":
            continue
        n_levels = len(f.allowed) if f.allowed else len(f.levels) - len(f.withheld)
        if n_levels > max_levels:
            out.append((f.name, n_levels))
    return out


#: Words of a column name that name a scale of attainment: its levels have an order (a degree is above a school
#: certificate), which an unordered categorical feature does not know.
#: (Not ``degree``: ``c_charge_degree`` is no attainment.)
_SCALE_WORDS = frozenset({"education", "educational", "qualification", "qualifications", "schooling", "diploma",
                          "bildung", "bildungsabschluss", "ausbildung", "formation", "diplome", "educacion",
                          "escolaridad", "istruzione", "escolaridade"})
#: Words of a column name that name a record of the past (``priors_count``, ``previous``, ``credit_history``,
#: ``num_delinquencies``, ``two_year_recid``): no one can undo it, so a recourse must not ask for less of it.
_PAST_WORDS = frozenset({"prior", "priors", "previous", "previously", "past", "history", "historical", "delinquency",
                         "delinquencies", "delinq", "delinquent", "bankruptcy", "bankruptcies", "arrest", "arrests",
                         "arrested", "conviction", "convictions", "convicted", "recid", "recidivism", "recidivist",
                         "chargeoff", "chargeoffs", "chgoff", "foreclosure", "foreclosures", "vorstrafen",
                         "antecedentes", "offense", "offenses", "offence", "offences", "felony", "felonies",
                         "misdemeanor", "misdemeanors", "misdemeanour", "misdemeanours", "criminal",
                         # time already served, and the lender's own past contacts (Bank's campaign: the calls made
                         # to the client in this campaign; pdays, poutcome: of the previous one)
                         "jail", "custody", "incarceration", "incarcerated", "campaign", "pdays", "poutcome"})
#: Two words that name a record of the past together: a charge-off written ``charge_off``, ``ChargedOff`` or SBA's
#: ``ChgOffPrinGr`` (the principal charged off, known only once the loan failed).
_PAST_PAIRS = frozenset({("charge", "off"), ("charged", "off"), ("chg", "off"), ("charge", "offs"),
                         # the charge of an offence (COMPAS's c_charge_degree: felony or misdemeanour)
                         ("charge", "degree"), ("charge", "desc"), ("charge", "description"),
                         # COMPAS's length_of_stay: the days already spent in jail
                         ("of", "stay"), ("length", "stay")})


def _names_past(name: str) -> bool:
    words = _name_words(name)
    return bool(_PAST_WORDS.intersection(words)) or any(pair in _PAST_PAIRS for pair in zip(words, words[1:]))


def past_record_features(schema: Schema, *, vary=()) -> list[str]:
    """Features free to change whose names say they record the past (``prior``, ``previous``, ``history``,
    ``delinquencies``, ``bankruptcies``, ``arrests``, ``convictions``, ``recid``, as whole words of the name): no
    one can undo the past, so a recourse that lowers a count of prior convictions or changes a credit history
    is no advice to a person; likewise a charge-off (``charge_off``, ``ChgOffPrinGr``: two words together), an
    offence (``offense``, ``felony``, ``misdemeanor``, ``criminal``) and the charge of one (COMPAS's
    ``c_charge_degree``, felony or misdemeanour: ``charge degree`` together; not ``monthly_charges``).

    A feature is reported when it may change (free, or monotone: ``--increasing priors_count`` lets a recourse
    ask for more prior convictions), has no ``--range`` and is not listed in ``vary``.

    Examples
    --------
    >>> import pandas as pd
    >>> names = ["priors_count", "previous", "credit_history", "numDelinquencies", "two_year_recid", "income",
    ...          "history_of_art_degree", "priority", "ChgOffPrinGr", "payoff", "label"]
    >>> df = pd.DataFrame({n: [0, 1, 0, 1] for n in names})
    >>> past_record_features(infer_schema(df, SchemaSpec(immutable=("history_of_art_degree",))))
    ['priors_count', 'previous', 'credit_history', 'numDelinquencies', 'two_year_recid', 'ChgOffPrinGr']
    """
    declared = set(vary)
    return [f.name for f in schema.features
            if f.mutability != "immutable" and not f.has_declared_range and f.name not in declared
            and _names_past(f.name)]


def unordered_scale_features(schema: Schema, *, vary=()) -> list[str]:
    """Unordered categorical features free to change whose names say their levels have an order (``education``,
    ``qualification``, ``schooling``, ``diploma``, as whole words of the name): a recourse may move them down a level (Bachelors to
    HS-grad), and every move costs the same (HS-grad to Doctorate as much as HS-grad to Some-college).

    As :func:`sensitive_like_features`, a feature is reported when nothing was declared about it (mutability
    ``free``, no ``--range``, not listed in ``vary``); an ordinal (``[ordinal]`` in the schema file) is not.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"education": ["a", "b"], "qualification": ["x", "y"], "c_charge_degree": ["F", "M"],
    ...                    "educated_guess": ["u", "v"], "label": [0, 1]})
    >>> unordered_scale_features(infer_schema(df))
    ['education', 'qualification']
    >>> unordered_scale_features(infer_schema(df, SchemaSpec(ordinal={"education": ["a", "b"]})))
    ['qualification']
    """
    declared = set(vary)
    return [f.name for f in schema.features
            if f.kind == "categorical" and f.mutability == "free" and not f.has_declared_range
            and f.name not in declared and _SCALE_WORDS.intersection(_name_words(f.name))]


def location_like_features(schema: Schema, *, vary=()) -> list[str]:
    """Features free to change whose names say where a person lives (``zip``, ``postcode``, ``postal``, ``city``,
    ``county``, ``state``, ``region``, ``address``, as whole words of the name): a recourse that changes one asks
    the applicant to move.

    As :func:`sensitive_like_features`, a feature is reported when nothing was declared about it (mutability
    ``free``, no ``--range``, not listed in ``vary``).

    Examples
    --------
    >>> import pandas as pd
    >>> names = ["zip_code", "homeCity", "Postal Code", "statement", "estate", "status", "label"]
    >>> df = pd.DataFrame({n: [0, 1, 0, 1] for n in names})
    >>> location_like_features(infer_schema(df))
    ['zip_code', 'homeCity', 'Postal Code']
    >>> location_like_features(infer_schema(df, SchemaSpec(immutable=("zip_code",))), vary=())
    ['homeCity', 'Postal Code']
    """
    declared = set(vary)
    return [f.name for f in schema.features
            if f.mutability == "free" and not f.has_declared_range and f.name not in declared
            and _LOCATION_WORDS.intersection(_name_words(f.name))]


def ranges_outside_training(schema: Schema, frame: pd.DataFrame) -> list[tuple[str, float | None, float | None,
                                                                           float, float]]:
    """Numeric features whose absolute range (``--range COL=LO:HI``, ``[range]``) holds no training value: it lies
    wholly below the training minimum or above the maximum.

    Each as ``(name, low, high, minimum, maximum)`` (``low`` or ``high`` None for an open end). Relative limits
    and the move bound are not ranges of values and are not checked.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"income": [1e4, 2e5], "age": [20, 60], "label": [0, 1]})
    >>> spec = SchemaSpec(ranges={"income": "5e6:6e6", "age": "18:30"})
    >>> ranges_outside_training(infer_schema(df, spec), df)
    [('income', 5000000.0, 6000000.0, 10000.0, 200000.0)]
    """
    out = []
    for f in schema.features:
        if not f.is_numeric or (f.low is None and f.high is None) or f.name not in frame.columns:
            continue
        values = pd.to_numeric(frame[f.name], errors="coerce")
        low, high = values.min(), values.max()
        if pd.isna(low):
            continue
        if (f.high is not None and float(f.high) < float(low)) or (f.low is not None and float(f.low) > float(high)):
            out.append((f.name, f.low, f.high, float(low), float(high)))
    return out


def ages_without_horizon(schema: Schema, spec: "SchemaSpec") -> list[tuple[str, float | None]]:
    """Features named like an age that may only increase, with no limit on how far but the built-in move bound.

    Each as ``(name, bound)``: the most a recourse may raise it, the built-in ``--max-move`` in the feature's units
    (a float, rounded down for an integer feature) or, for an ordinal (age groups), in levels (an int), or None
    when the bound does not limit it (an ordinal whose every level is within it). Only with the built-in bound in
    effect (``spec.max_move`` is :data:`DEFAULT_MAX_MOVE`: frpd's planning commands; not ``evaluate``, which audits
    declared bounds only). A range with an upper end (``--range
    age=+0:+5``, ``age=18:70``), allowed levels, or a move bound of the flags or the schema file (``spec.max_moves``
    for the feature, or another share, ``none`` included) is a horizon.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [20, 40, 60, 80, 30], "label": [0, 1, 0, 1, 1]})
    >>> ages_without_horizon(infer_schema(df, SchemaSpec(increasing=("age",), max_move=0.25)),
    ...                      SchemaSpec(increasing=("age",), max_move=0.25))
    [('age', 15.0)]
    >>> spec = SchemaSpec(increasing=("age",), ranges={"age": "+0:+5"})
    >>> ages_without_horizon(infer_schema(df, spec), spec)
    []
    """
    out = []
    for f in schema.features:
        if f.mutability != "increasing" or "age" not in _name_words(f.name):
            continue
        if f.high is not None or f.rel_high is not None or f.allowed or f.name in spec.max_moves \
                or spec.max_move != DEFAULT_MAX_MOVE:
            continue
        if f.kind == "ordinal":
            out.append((f.name, f.max_levels))
            continue
        bound = None if f.max_move is None or not math.isfinite(f.max_move) else float(f.max_move)
        if bound is not None and f.kind == "integer":
            bound = float(math.floor(bound))
        out.append((f.name, bound))
    return out


def id_like_columns(frame: pd.DataFrame, schema: Schema, *, min_rows: int = 10) -> list[str]:
    """Features that look like row identifiers: a different value in every training row.

    A categorical feature with as many levels as rows, or an integer feature whose values are all
    distinct and either a run of consecutive numbers (0..n-1, 1001..1000+n) or in a column named like an
    identifier (``id``, ``customer_id``, ``uuid``). Continuous features are never reported (measured
    values are often distinct).

    Parameters
    ----------
    frame : DataFrame
        The training rows.
    schema : Schema
    min_rows : int, default=10
        Fewer rows than this report nothing (every column of a tiny file is unique).

    Returns
    -------
    names : list of str

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"row": range(12), "age": [30, 31] * 6, "label": [0, 1] * 6})
    >>> id_like_columns(df, infer_schema(df))
    ['row']
    """
    n = len(frame)
    if n < min_rows:
        return []
    names = []
    for f in schema.features:
        if f.kind not in ("categorical", "integer"):
            continue
        values = frame[f.name]
        if values.nunique(dropna=False) != n:
            continue
        if f.kind == "categorical":
            names.append(f.name)
            continue
        numbers = values.to_numpy(dtype=float)
        if float(numbers.max() - numbers.min()) == n - 1 or _ID_NAME.search(f.name):
            names.append(f.name)
    return names


@dataclass(frozen=True)
class SchemaReport:
    """What :func:`inspect_schema` found in a data file.

    Attributes
    ----------
    schema : Schema
        The schema inferred from the rows without missing values.
    columns : list of dict
        One entry per column of the file, in file order: ``column``, ``role`` (feature, target, id or
        excluded), ``kind``, ``mutability``, ``min``, ``max`` (numeric features), ``levels`` (categorical
        and ordinal features; the target's classes), ``missing`` (empty cells), ``note``.
    n_rows : int
        Rows in the file.
    n_incomplete : int
        Rows with a missing feature value (left out of the inference; planning refuses them).
    id_like : list of str
        Features that look like row identifiers (:func:`id_like_columns`).
    sensitive, ages : list of str
        Free features named like a protected characteristic or an age (:func:`sensitive_like_features`).
    many_levels : list of (str, int)
        Unordered categorical features a recourse may move to many levels (:func:`many_level_features`).
    locations : list of str
        Free features named like a place of residence (:func:`location_like_features`).
    decimals : dict of str to int
        Decimals of each numeric feature (:func:`column_decimals`).
    leaks : list of LabelLeak
        Mutable features that alone separate the labels (:func:`frpd_cli.leaks.find_label_leaks`).
    """

    schema: Schema
    columns: list
    n_rows: int
    n_incomplete: int
    id_like: list
    decimals: dict = field(default_factory=dict)
    sensitive: list = field(default_factory=list)
    ages: list = field(default_factory=list)
    many_levels: list = field(default_factory=list)
    locations: list = field(default_factory=list)
    leaks: list = field(default_factory=list)


def inspect_schema(frame: pd.DataFrame, spec: SchemaSpec | None = None, *,
                   source: str = "the data file") -> SchemaReport:
    """Infer the schema of a data file and describe every column, as ``frpd schema`` shows them.

    Unlike :func:`infer_schema`, missing feature values are not an error: the schema is inferred from
    the complete rows and the missing cells are counted per column.

    Parameters
    ----------
    frame : DataFrame of shape (n_rows, n_columns)
    spec : SchemaSpec, optional
    source : str
        How the data is named in error messages.

    Returns
    -------
    report : SchemaReport

    Raises
    ------
    SchemaError
        As :func:`infer_schema`, or no row is complete.
    """
    spec = spec or SchemaSpec()
    columns = [str(c) for c in frame.columns]
    target = spec.target if spec.target is not None else "label"
    ignored = {target, spec.id_column, *spec.exclude}
    candidates = [c for c in columns if c not in ignored]
    incomplete = frame.loc[:, candidates].isna().any(axis=1).to_numpy() if candidates else np.zeros(len(frame), bool)
    complete = frame.loc[~incomplete]
    if len(frame) and not len(complete):
        raise SchemaError(f"Every row of {source} has a missing feature value; fill or drop them first.")
    schema = infer_schema(complete, spec, source=source)
    id_like = id_like_columns(complete, schema)
    sensitive, ages = sensitive_like_features(schema, vary=spec.vary)
    decimals = column_decimals(complete, schema)
    scales = set(unordered_scale_features(schema, vary=spec.vary))
    past = set(past_record_features(schema, vary=spec.vary))
    leaks = _label_leaks(complete, schema)
    separating = {leak.feature: leak.balanced_accuracy for leak in leaks}
    flags = {name: (low, high) for name, low, high in flag_features(schema, complete, vary=spec.vary)}
    rows = []
    for name in columns:
        values = frame[name]
        row = {"column": name, "role": "excluded", "kind": "", "mutability": "", "min": None, "max": None,
               "levels": None, "missing": int(values.isna().sum()), "note": ""}
        if name in schema.feature_names:
            f = schema.feature(name)
            row.update(role="feature", kind=f.kind, mutability=f.mutability)
            if f.is_numeric:
                present = complete[name].to_numpy(dtype=float)
                low, high = float(present.min()), float(present.max())
                row["min"], row["max"] = (int(low), int(high)) if f.kind == "integer" else (
                    round(low, decimals[name]), round(high, decimals[name]))
            else:
                row["levels"] = list(f.levels)
            if f.kind == "integer" and name not in spec.integer:
                share = whole_share(complete[name].to_numpy(dtype=float))
                if share < 1.0:
                    row["note"] = (f"integer: {_percent(share)} of values are whole (at least {WHOLE_SHARE:.0%} "
                                   "makes a count; recourses propose whole numbers)")
            if name in id_like:
                row["note"] = "a different value in every row: looks like an identifier"
            elif name in separating:
                row["note"] = (f"separates the labels alone (balanced accuracy {separating[name]:.3f}): a record of "
                               "the outcome? drop it from the model or declare it immutable")
            elif name in sensitive:
                row["note"] = "protected characteristic? declare it immutable"
            elif name in ages:
                row["note"] = "an age? declare it increasing"
            elif name in past:
                row["note"] = "a record of the past? declare it immutable"
            elif name in scales:
                row["note"] = "a scale? declare its order ([ordinal]) and increasing"
            elif f.withheld:
                row["note"] = (f"no recourse moves it to {', '.join(map(str, f.withheld))} (missing information; "
                               "a --range listing it allows it)")
            elif name in flags:
                row["note"] = ("a {}/{} flag: a recourse may flip it (--max-move does not hold a flag); declare it "
                               "immutable if it records a fact".format(*flags[name]))
        elif name == schema.target:
            classes = sorted(_python_values(values.dropna().unique()), key=_sort_key)
            row.update(role="target", levels=classes,
                       note=f"favourable class {_plain_text(schema.favorable)}")
        elif name == schema.id_column:
            row["role"] = "id"
        rows.append(row)
    return SchemaReport(schema=schema, columns=rows, n_rows=len(frame), n_incomplete=int(incomplete.sum()),
                        id_like=id_like, decimals=decimals, sensitive=sensitive, ages=ages,
                        many_levels=many_level_features(schema),
                        locations=location_like_features(schema, vary=spec.vary), leaks=leaks)


def _label_leaks(frame: pd.DataFrame, schema: Schema) -> list:
    """:func:`frpd_cli.leaks.find_label_leaks` of the rows, labelled as the commands label them; none without
    the target column or a row of each class."""
    from .dataset import labeled_rows
    from .leaks import find_label_leaks

    if schema.target not in frame.columns or not len(frame):
        return []
    labels = labeled_rows(frame, schema)
    return find_label_leaks(frame, schema, labels) if labels.any() and not labels.all() else []


def _percent(share: float) -> str:
    """A share as a percentage with one decimal, never rounded up to 100% (99.96% shows as 99.9%)."""
    return f"{np.floor(share * 1000.0) / 10.0:.1f}%"


def _plain_text(value) -> str:
    """A value as a person writes it: ``7`` for 7.0 of an integer column, never a numpy repr."""
    value = _json_scalar(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)
