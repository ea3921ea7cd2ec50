"""Features that alone separate the training labels: likely records of the outcome, not causes of it.

SBA's ``ChgOffPrinGr`` (the principal charged off) is 0 for loans paid in full and positive for defaulted ones: by
one threshold it tells the labels apart in 99.6% of the cases (balanced accuracy), while no other feature of the
five shared data sets exceeds 0.89. A feature recorded after the outcome predicts it this well, and a recourse
that moves it ("lower the charged-off principal") is no advice to anyone; a model trained on it also says little
about the applicant's other features. Such features are found, not declared: a mutable feature whose best single
rule (one threshold of a number, or a class per level of a categorical) reaches :data:`MIN_BALANCED_ACCURACY`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["MIN_BALANCED_ACCURACY", "LabelLeak", "find_label_leaks", "balanced_accuracy_of_threshold",
           "balanced_accuracy_of_levels"]

#: The balanced accuracy from which one feature alone "separates" the labels.
MIN_BALANCED_ACCURACY = 0.98

#: The rows the search reads at most (every k-th row beyond): the estimate's standard error stays under 0.002.
MAX_ROWS = 50_000

#: Fewer rows of either label than this show no separation worth a warning.
_MIN_PER_LABEL = 20

#: Categoricals with more levels than this are not judged (a level per few rows separates anything; the
#: many-levels warning speaks of them).
_MAX_LEVELS = 50


@dataclass(frozen=True)
class LabelLeak:
    """``feature`` alone tells the labels apart with ``balanced_accuracy`` (in ``n_rows`` rows read)."""

    feature: str
    balanced_accuracy: float
    n_rows: int


def balanced_accuracy_of_threshold(values: np.ndarray, labels: np.ndarray) -> float:
    """The best balanced accuracy of one rule ``value <= t`` (either class below) over every threshold ``t``.

    Parameters
    ----------
    values : ndarray of float, shape (n,)
    labels : ndarray of bool, shape (n,)
        Both classes present.

    Examples
    --------
    >>> balanced_accuracy_of_threshold(np.array([1.0, 2, 3, 4]), np.array([False, False, True, True]))
    1.0
    >>> balanced_accuracy_of_threshold(np.array([1.0, 2, 3, 4]), np.array([False, True, False, True]))
    0.75
    """
    order = np.argsort(values, kind="stable")
    ordered, positive = values[order], labels[order]
    n1 = int(positive.sum())
    n0 = positive.size - n1
    ones = np.cumsum(positive)
    zeros = np.arange(1, positive.size + 1) - ones
    cut = np.r_[ordered[1:] != ordered[:-1], True]        # a threshold after the last of equal values
    # "value <= t is class 0": the true negative rate at t, and the true positive rate above it
    score = 0.5 * (zeros[cut] / n0 + (n1 - ones[cut]) / n1)
    return float(max(score.max(), (1.0 - score).max()))


def balanced_accuracy_of_levels(codes: np.ndarray, labels: np.ndarray) -> float:
    """The best balanced accuracy of a rule that gives each level one class: ``1/2 + 1/2 sum max(0, p1 - p0)``
    over the levels, ``p1``, ``p0`` the level's share of each class's rows (the closed form of the best
    assignment).

    Examples
    --------
    >>> balanced_accuracy_of_levels(np.array([0, 0, 1, 2]), np.array([False, False, True, True]))
    1.0
    """
    n1 = int(labels.sum())
    n0 = labels.size - n1
    n_levels = int(codes.max()) + 1 if codes.size else 0
    p1 = np.bincount(codes[labels], minlength=n_levels) / n1
    p0 = np.bincount(codes[~labels], minlength=n_levels) / n0
    return float(0.5 + 0.5 * np.maximum(p1 - p0, 0.0).sum())


def find_label_leaks(frame: pd.DataFrame, schema, labels: np.ndarray, *,
                     min_balanced_accuracy: float = MIN_BALANCED_ACCURACY, max_rows: int = MAX_ROWS) -> list:
    """The mutable features whose best single rule tells the training labels apart.

    Parameters
    ----------
    frame : DataFrame of shape (n_rows, >= n_features)
        Raw training rows.
    schema : Schema
    labels : ndarray of bool, shape (n_rows,)
        Rows labelled favourable.
    min_balanced_accuracy : float
    max_rows : int
        Rows read at most: every ``ceil(n_rows / max_rows)``-th row, from the first (deterministic).

    Returns
    -------
    list of LabelLeak
        In schema order; none for immutable features (no recourse moves them), categoricals of more than 50
        levels, or when either label has fewer than 20 rows read.

    Examples
    --------
    >>> from frpd_cli.schema import SchemaSpec, infer_schema
    >>> frame = pd.DataFrame({"charged_off": [0.0] * 30 + [5.0, 7.5, 9.0] * 10, "income": np.arange(60.0) % 7,
    ...                       "label": [1] * 30 + [0] * 30})
    >>> schema = infer_schema(frame, SchemaSpec())
    >>> find_label_leaks(frame, schema, (frame["label"] == 1).to_numpy())
    [LabelLeak(feature='charged_off', balanced_accuracy=1.0, n_rows=60)]
    """
    labels = np.asarray(labels, dtype=bool)
    step = max(1, -(-len(frame) // max_rows))
    rows = slice(None, None, step)
    picked = labels[rows]
    if min(int(picked.sum()), int(picked.size - picked.sum())) < _MIN_PER_LABEL:
        return []
    out = []
    for f in schema.features:
        if f.mutability == "immutable" or f.name not in frame.columns:
            continue
        column = frame[f.name].iloc[rows]
        if f.is_numeric:
            values = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
            finite = np.isfinite(values)
            if min(int(picked[finite].sum()), int((~picked[finite]).sum())) < _MIN_PER_LABEL:
                continue
            score = balanced_accuracy_of_threshold(values[finite], picked[finite])
        else:
            codes, levels = pd.factorize(column.astype(object), use_na_sentinel=False)
            if len(levels) > _MAX_LEVELS:
                continue
            score = balanced_accuracy_of_levels(codes, picked)
        if score >= min_balanced_accuracy:
            out.append(LabelLeak(f.name, round(score, 4), int(picked.size)))
    return out
