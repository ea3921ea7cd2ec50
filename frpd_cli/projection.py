"""Candidate prototypes and the immutable-feature policies (``filter``, ``project``, ``auto``).

With the default ``filter`` policy a training row is a candidate prototype only
if it already shares the applicant's immutable values and sits on the allowed
side of every monotone feature. On data where few favourable rows do (Bank:
exact ``previous`` and ``campaign`` counts), that leaves nothing to plan with.

The ``project`` policy also considers the other favourable rows: each one gets
the applicant's immutable values, its monotone features are clipped to the
allowed side of the applicant's, and the projected row is decoded and
re-predicted. Projected rows the model still predicts favourable become
candidates too, flagged as projected. Recourses built from them never change an
immutable feature, but their prototypes are not real cases any more: they may
sit off the data manifold (the manifold-distance metric shows by how much).

The ``auto`` policy (the default) filters on categorical immutable features
(prototypes come from the applicant's own group) and projects on numeric ones
(age): a favourable row that shares the applicant's categorical immutable values
and sits on the allowed side of every monotone feature, but differs in a
numeric immutable value, gets the applicant's value and is re-predicted. Without
numeric immutable features it is exactly ``filter``.

The user's ranges (``--range``) apply under every policy: a row whose value of a
ranged feature lies outside the range, and differs from the applicant's own
value, is not a candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .constraints import ConstraintCodes, actionable_mask
from .dataset import TrainingSet
from .exceptions import InputError

__all__ = ["IMMUTABLE_POLICIES", "CandidateSet", "candidate_mask", "project_rows", "candidate_set",
           "effective_policy", "may_project", "within_ranges", "outside_ranges"]

IMMUTABLE_POLICIES = ("filter", "project", "auto")


def _numeric_immutables(schema) -> list[str]:
    return [f.name for f in schema.features if f.mutability == "immutable" and f.is_numeric]


def effective_policy(schema, policy: str) -> str:
    """The policy that runs: ``auto`` without numeric immutable features is ``filter``."""
    if policy == "auto" and not _numeric_immutables(schema):
        return "filter"
    return policy


def may_project(schema, policy: str) -> bool:
    """Whether plans under ``policy`` can hold projected recourses (the csv output then has the column)."""
    return effective_policy(schema, policy) in ("project", "auto")


def outside_ranges(training: TrainingSet) -> list[tuple]:
    """Per feature with a ``--range``: ``(encoded columns, rows outside the range)``; remembered per training set.

    Returns
    -------
    outside : list of (slice, ndarray of bool of shape (n_rows,))
    """
    cached = training.__dict__.get("_outside_ranges")
    if cached is None and training.schema is None:     # bare encoded rows (no schema): no ranges
        return []
    if cached is None:
        cached = [(training.encoder.block(f.name), ~f.in_range(training.frame[f.name].to_numpy()))
                  for f in training.schema.features if f.has_range]
        object.__setattr__(training, "_outside_ranges", cached)
    return cached


def within_ranges(training: TrainingSet, x0: np.ndarray) -> np.ndarray:
    """Training rows whose every ranged feature is inside its range or equal to the applicant's value.

    Returns
    -------
    ok : ndarray of bool, shape (n_rows,)
    """
    ok = np.ones(training.n_rows, dtype=bool)
    for block, outside in outside_ranges(training):
        rows = np.flatnonzero(outside)
        same = np.all(training.X[rows, block] == x0[block], axis=1)
        ok[rows[~same]] = False
    return ok


@dataclass(frozen=True, eq=False)
class CandidateSet:
    """Candidate prototypes of one applicant.

    Attributes
    ----------
    rows : ndarray of int64, shape (n_candidates,)
        Training row each candidate comes from.
    X : ndarray of shape (n_candidates, n_features_out)
        Encoded candidates (projected ones after projection).
    projected : ndarray of bool, shape (n_candidates,)
        Whether the candidate was moved onto the applicant's immutable values.
    raw : DataFrame of shape (n_candidates, n_features)
        Raw candidates.
    """

    rows: np.ndarray
    X: np.ndarray
    projected: np.ndarray
    raw: pd.DataFrame

    def __len__(self) -> int:
        return int(self.rows.size)


def candidate_mask(training: TrainingSet, x0: np.ndarray, codes0, pool: np.ndarray) -> np.ndarray:
    """Training rows that may serve as prototypes for the applicant.

    Rows in the pool whose move from the applicant is actionable (same
    immutable values, monotone features on the allowed side) and that differ
    from the applicant in the encoded space.

    Notes
    -----
    The pool's rows are grouped once by their immutable values (remembered for
    the last pool, like :meth:`TrainingSet.pool_rows`), so an applicant's
    filter reads its own group only: the immutable test becomes one lookup and
    the monotone tests run on the group's rows. The result is the same rows as
    testing every constraint on every pool row.
    """
    rows, X_rows = training.pool_rows(pool)         # check the (usually much smaller) pool only
    index = _pool_index(training, pool, rows)
    at = index.group(codes0)
    for j, column in enumerate(index.monotone):
        at = at[(column[at] - codes0.monotone[0, j]) * index.direction[j] >= 0]
    x0 = np.asarray(x0)
    for block, outside in outside_ranges(training):
        out = outside[rows[at]]
        if out.any():
            out &= ~np.all(X_rows[at, block] == x0[block], axis=1)
            at = at[~out]
    same = _equal_rows(X_rows, at, x0)
    if same.size:
        at = np.setdiff1d(at, same, assume_unique=True)
    mask = np.zeros(pool.shape[0], dtype=bool)
    mask[rows[at]] = True
    return mask


class _PoolIndex:
    """The pool's positions grouped by immutable values, and its monotone codes as contiguous columns."""

    def __init__(self, codes, rows: np.ndarray):
        immutable = np.take(codes.immutable, rows, axis=0)
        self.monotone = [np.ascontiguousarray(codes.monotone[rows, j]) for j in range(codes.monotone.shape[1])]
        self.direction = codes.direction
        self.n_immutable = immutable.shape[1]
        self.groups: dict = {}
        if self.n_immutable == 0:
            self.everything = np.arange(rows.size)
            return
        usable = np.flatnonzero(~np.isnan(immutable).any(axis=1))   # NaN equals nothing: never a candidate
        if usable.size:
            keys, inverse = np.unique(immutable[usable], axis=0, return_inverse=True)
            order = np.argsort(inverse.reshape(-1), kind="stable")
            bounds = np.searchsorted(inverse.reshape(-1)[order], np.arange(keys.shape[0] + 1))
            for g, key in enumerate(keys.tolist()):
                members = usable[order[bounds[g]:bounds[g + 1]]]
                key = tuple(key)
                if key in self.groups:                # 0.0 and -0.0: equal values, one group (ascending rows)
                    members = np.sort(np.concatenate([self.groups[key], members]))
                self.groups[key] = members
        self.empty = np.zeros(0, dtype=np.int64)

    def group(self, codes0) -> np.ndarray:
        """Positions (ascending) of the pool rows with exactly the applicant's immutable values."""
        if self.n_immutable == 0:
            return self.everything
        key = tuple(codes0.immutable[0].tolist())
        if any(k != k for k in key):
            return self.empty
        return self.groups.get(key, self.empty)


def _pool_index(training: TrainingSet, pool: np.ndarray, rows: np.ndarray) -> _PoolIndex:
    cached = training.__dict__.get("_pool_index")
    if cached is not None and cached[0] is pool:
        return cached[1]
    index = _PoolIndex(training.codes, rows)
    object.__setattr__(training, "_pool_index", (pool, index))
    return index


def _equal_rows(X: np.ndarray, rows: np.ndarray, x0: np.ndarray) -> np.ndarray:  # rows: positions in X
    """The rows among ``rows`` equal to ``x0`` in every column (usually none: one or two columns rule out
    almost every row, so the check touches about one column of the candidates, not all of them)."""
    for j in range(X.shape[1]):
        if rows.size == 0:
            break
        rows = rows[X[rows, j] == x0[j]]
    return rows


def project_rows(training: TrainingSet, rows: np.ndarray, raw0: pd.Series) -> pd.DataFrame:
    """Raw training rows with the applicant's immutable values and monotone features clipped.

    Parameters
    ----------
    training : TrainingSet
    rows : ndarray of int
        Training rows to project.
    raw0 : Series
        The applicant's raw feature values.

    Returns
    -------
    projected : DataFrame of shape (len(rows), n_features)
    """
    out = training.frame.iloc[rows].reset_index(drop=True).copy()
    for f in training.schema.features:
        if f.mutability == "immutable":
            out[f.name] = pd.Series([raw0[f.name]] * len(out), dtype=out[f.name].dtype)
        elif f.mutability in ("increasing", "decreasing"):
            up = f.mutability == "increasing"
            if f.is_categorical:
                rank = {level: i for i, level in enumerate(f.levels)}
                r0 = rank[raw0[f.name]]
                ranks = out[f.name].map(rank).to_numpy()
                clipped = np.maximum(ranks, r0) if up else np.minimum(ranks, r0)
                out[f.name] = pd.Series([f.levels[i] for i in clipped], dtype=out[f.name].dtype)
            else:
                values = out[f.name].to_numpy()
                out[f.name] = np.maximum(values, raw0[f.name]) if up else np.minimum(values, raw0[f.name])
    return out


def candidate_set(training: TrainingSet, model, x0: np.ndarray, codes0, raw0: pd.Series, pool: np.ndarray, *,
                  policy: str = "filter") -> CandidateSet:
    """The candidate prototypes of one applicant under an immutable-feature policy.

    Parameters
    ----------
    training : TrainingSet
    model : frpd_cli.model.Model
        Re-predicts projected rows (``project`` policy only).
    x0 : ndarray of shape (n_features_out,)
        The encoded applicant.
    codes0 : ConstraintCodes
        The applicant's constraint codes (one row).
    raw0 : Series
        The applicant's raw values.
    pool : ndarray of bool, shape (n_rows,)
        Training rows eligible before per-applicant constraints.
    policy : {"filter", "project", "auto"}
        ``auto``: rows that share the applicant's categorical immutable values
        and monotone sides are projected onto its numeric immutable values.

    Returns
    -------
    candidates : CandidateSet
        Rows that already satisfy the constraints come first (in row order),
        then projected rows that stay favourable (in row order, duplicates of
        earlier candidates dropped). Candidates equal to the applicant are
        excluded.

    Notes
    -----
    ``project`` costs one model call over the projected rows per applicant.
    """
    if policy not in IMMUTABLE_POLICIES:
        raise InputError(
            f"The 'immutable_policy' option must be one of {', '.join(IMMUTABLE_POLICIES)}. Got {policy!r} instead."
        )
    strict = np.flatnonzero(candidate_mask(training, x0, codes0, pool))
    rows = [strict]
    X = [training.X[strict]]
    raw = [training.frame.iloc[strict].reset_index(drop=True)]
    flags = [np.zeros(strict.size, dtype=bool)]
    policy = effective_policy(training.schema, policy)
    if policy in ("project", "auto"):
        eligible = pool & ~actionable_mask(codes0, training.codes)
        if policy == "auto":       # categorical immutables and monotone sides are filtered, not projected
            codes = training.codes
            keep_cols = [j for j, name in enumerate(codes.immutable_names)
                         if training.schema.feature(name).is_categorical]
            kept = ConstraintCodes(immutable=codes.immutable[:, keep_cols], monotone=codes.monotone,
                                   direction=codes.direction)
            eligible &= actionable_mask(ConstraintCodes(immutable=codes0.immutable[:, keep_cols],
                                                        monotone=codes0.monotone, direction=codes0.direction), kept)
        others = np.flatnonzero(eligible)
        if others.size:
            projected = project_rows(training, others, raw0)
            in_range = np.ones(len(projected), dtype=bool)
            for f in training.schema.features:
                if f.has_range:
                    values = projected[f.name]
                    in_range &= f.in_range(values.to_numpy()) | (values == raw0[f.name]).to_numpy()
            projected, others = projected[in_range].reset_index(drop=True), others[in_range]
            if others.size:
                Xp = training.encoder.encode(projected, source="the projected candidates")
                keep = np.asarray(model.favorable_probability(projected), dtype=np.float64) >= model.threshold
                keep &= ~np.all(Xp == x0, axis=1)
                # Drop projected rows equal to an earlier candidate (strict or projected).
                seen = {row.tobytes() for row in X[0]}
                for j in np.flatnonzero(keep):
                    key = Xp[j].tobytes()
                    if key in seen:
                        keep[j] = False
                    else:
                        seen.add(key)
                rows.append(others[keep])
                X.append(Xp[keep])
                raw.append(projected[keep].reset_index(drop=True))
                flags.append(np.ones(int(keep.sum()), dtype=bool))
    return CandidateSet(rows=np.concatenate(rows).astype(np.int64), X=np.vstack(X),
                        projected=np.concatenate(flags), raw=pd.concat(raw, ignore_index=True))
