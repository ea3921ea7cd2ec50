"""How far a recourse moves an applicant, as a share of the training population.

A move from ``old`` to ``new`` on a numeric feature passes ``|G(new) - G(old)|`` of
the population, ``G`` the training data's mid-distribution function (the share of rows
below a value plus half the share at it, :func:`frpd_cli.encoding.population_shares`,
linear between training values and flat beyond them): the percentile shift of Ustun
et al. (2019). It is computed from the training rows, whatever scale the encoder
prices moves with (under ``--scale effort`` it equals that feature's encoded move). An
ordinal feature is measured the same way on its declared order. A nominal categorical
has no order: a move between two levels is measured as if they were adjacent levels of
an ordinal, half the share of rows at the old level plus half the share at the new one
(so ``rent -> own`` with 19% and 71% of rows at those levels passes 0.45).
:class:`PopulationShares` holds what is needed, fitted once on the training data.

A recourse's ``largest_shift`` is the largest of these over its changed features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .encoding import population_shares

__all__ = ["PopulationShares", "fit_population", "population_of", "with_largest_shifts"]


@dataclass(frozen=True)
class PopulationShares:
    """The training population of every feature, for population shares of moves.

    Attributes
    ----------
    numeric : dict of str to (ndarray, ndarray)
        Per numeric feature: its distinct training values (ascending) and the
        mid-distribution function at each.
    levels : dict of str to dict
        Per categorical feature: the share of rows at each level (key
        ``"share"``, by the level's text), and for ordinals the
        mid-distribution function in the declared order (key ``"cumulative"``).
    """

    numeric: dict
    levels: dict

    def shift(self, name: str, old, new) -> float:
        """The share of the population a move of feature ``name`` from ``old`` to ``new`` passes (0 if unchanged)."""
        if name in self.numeric:
            values, shares = self.numeric[name]
            try:
                a, b = float(old), float(new)
            except (TypeError, ValueError):
                return float("nan")
            if a == b or values.size == 0:
                return 0.0
            ga, gb = np.interp([a, b], values, shares)
            return float(abs(gb - ga))
        table = self.levels[name]
        if str(old) == str(new):
            return 0.0
        if "cumulative" in table:
            cumulative = table["cumulative"]
            if str(old) not in cumulative or str(new) not in cumulative:
                return float("nan")
            return float(abs(cumulative[str(new)] - cumulative[str(old)]))
        return float(table["share"].get(str(old), 0.0) + table["share"].get(str(new), 0.0)) / 2.0

    def largest_shift(self, applicant: dict, features: dict) -> float:
        """The largest :meth:`shift` over the features ``features`` changes from ``applicant`` (0 if none)."""
        shifts = [self.shift(name, applicant[name], value) for name, value in features.items()
                  if name in applicant and _differs(applicant[name], value)]
        shifts = [s for s in shifts if s == s]
        return max(shifts) if shifts else 0.0

    def to_dict(self) -> dict:
        return {"numeric": {k: [v.tolist(), s.tolist()] for k, (v, s) in self.numeric.items()},
                "levels": self.levels}

    @classmethod
    def from_dict(cls, data: dict) -> "PopulationShares":
        numeric = {k: (np.asarray(v, dtype=np.float64), np.asarray(s, dtype=np.float64))
                   for k, (v, s) in data["numeric"].items()}
        return cls(numeric=numeric, levels=dict(data["levels"]))


def _differs(a, b) -> bool:
    if type(a) is str and a == b and type(b) is str:
        # the usual case, an unchanged category: float() of text that is no number raises, which costs more than
        # the rest of the test; the answer for one text is always the same (only a NaN text differs from itself)
        known = _SAME_TEXT_DIFFERS.get(a)
        if known is None:
            known = _differs_by_value(a, b)
            if len(_SAME_TEXT_DIFFERS) < 4096:
                _SAME_TEXT_DIFFERS[a] = known
        return known
    return _differs_by_value(a, b)


def _differs_by_value(a, b) -> bool:
    try:
        return float(a) != float(b)
    except (TypeError, ValueError):
        return str(a) != str(b)


#: ``_differs(text, text)`` of the texts seen (bounded: categories are few).
_SAME_TEXT_DIFFERS: dict = {}


def fit_population(frame: pd.DataFrame, schema) -> PopulationShares:
    """:class:`PopulationShares` of the training rows ``frame`` for the features of ``schema``.

    Notes
    -----
    ``O(n_rows log n_rows)`` per numeric feature (one sort).
    """
    numeric, levels = {}, {}
    for f in schema.features:
        column = frame[f.name]
        if f.is_numeric:
            data = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
            data = data[~np.isnan(data)]
            numeric[f.name] = population_shares(data) if data.size else (np.zeros(0), np.zeros(0))
            continue
        counts = column.dropna().astype(str).value_counts()
        total = max(int(counts.sum()), 1)
        share = {str(level): float(counts.get(str(level), 0)) / total for level in f.levels}
        table = {"share": share}
        if f.kind == "ordinal":              # the mid-distribution function on the declared order
            running, cumulative = 0.0, {}
            for level in f.levels:
                cumulative[str(level)] = running + share[str(level)] / 2.0
                running += share[str(level)]
            table["cumulative"] = cumulative
        levels[f.name] = table
    return PopulationShares(numeric=numeric, levels=levels)


def population_of(training) -> PopulationShares:
    """:func:`fit_population` of a training set's rows, remembered on the training set."""
    cached = training.__dict__.get("_population")
    if cached is None:
        cached = fit_population(training.frame, training.schema)
        object.__setattr__(training, "_population", cached)
    return cached


def with_largest_shifts(plans: list, population: PopulationShares | None) -> list:
    """``plans`` with every recourse's ``largest_shift`` set (left None without ``population``)."""
    if population is None:
        return plans
    from dataclasses import replace

    out = []
    for plan in plans:
        if not plan.recourses:
            out.append(plan)
            continue
        recourses = tuple(replace(r, largest_shift=population.largest_shift(plan.applicant_features, r.features))
                          for r in plan.recourses)
        out.append(replace(plan, recourses=recourses))
    return out
