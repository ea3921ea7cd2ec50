"""From applicants to recourse plans: candidates, prototype selection, interpolation.

The work is done chunk by chunk: every applicant of a chunk is encoded and
scored in one model call, prototypes are selected per applicant, and the
interpolation of all prototypes of the chunk shares each model call. Chunks can
run in a joblib process pool; results come back in input order and do not
depend on the number of workers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from .constraints import actionable_mask
from .dataset import TrainingSet
from .exceptions import InputError
from .interpolation import interpolate_linear
from .plans import Plan, Recourse
from .selection import METHODS, compute_geometry, eigen_decompose, select_prototypes

__all__ = [
    "PlanSettings",
    "SelectionOutcome",
    "candidate_mask",
    "infeasibility_reason",
    "select_for_applicant",
    "plan_chunk",
    "interpolate_plans",
    "plan_applicants",
]

_QUAD_FAMILY = ("quad", "quad-dp", "quad-greedy", "exact")


@dataclass(frozen=True)
class PlanSettings:
    """Everything that shapes a plan besides the data, the model and the applicants.

    Attributes
    ----------
    method : str
        Selection method (see :data:`frpd_cli.selection.METHODS`).
    k : int
        Recourses per plan.
    theta : float
        Diversity weight in [0, 1] (0: nearest prototypes).
    bandwidth : float
        DPP bandwidth h > 0.
    candidates : {"predicted", "labeled"}
        Candidate pool (see :meth:`TrainingSet.pool`).
    tol : float
        Bisection tolerance as a fraction of the segment.
    n_iter, tau, step : int, int, float
        QUAD iterations, screening window and dual-ascent step.
    """

    method: str = "quad"
    k: int = 3
    theta: float = 0.9
    bandwidth: float = 1.0
    candidates: str = "predicted"
    tol: float = 1e-3
    n_iter: int = 100
    tau: int = 20
    step: float = 0.1

    def validate(self) -> "PlanSettings":
        if self.method not in METHODS:
            raise InputError(f"The 'method' option must be one of {', '.join(METHODS)}. Got {self.method!r} instead.")
        if not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise InputError(f"The 'k' option must be an int >= 1. Got {self.k!r} instead.")
        if not 0.0 <= self.theta <= 1.0:
            raise InputError(f"The 'theta' option must be in [0, 1]. Got {self.theta!r} instead.")
        if not self.bandwidth > 0:
            raise InputError(f"The 'bandwidth' option must be > 0. Got {self.bandwidth!r} instead.")
        if not 0 < self.tol < 1:
            raise InputError(f"The 'tol' option must be in (0, 1). Got {self.tol!r} instead.")
        return self

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True)
class SelectionOutcome:
    """Prototype selection for one applicant."""

    status: str
    reason: str | None
    rows: np.ndarray                 # training row numbers, rank order
    objective: float = float("nan")
    screening: np.ndarray | None = None   # training row numbers of the screening set
    n_candidates: int = 0


def candidate_mask(training: TrainingSet, x0: np.ndarray, codes0, pool: np.ndarray) -> np.ndarray:
    """Training rows that may serve as prototypes for the applicant.

    Rows in the pool whose move from the applicant is actionable (same
    immutable values, monotone features on the allowed side) and that differ
    from the applicant in the encoded space.
    """
    mask = pool & actionable_mask(codes0, training.codes)
    if mask.any():
        idx = np.flatnonzero(mask)
        same = np.all(training.X[idx] == x0, axis=1)
        mask[idx[same]] = False
    return mask


def infeasibility_reason(training: TrainingSet, codes0, pool: np.ndarray, n_found: int, k: int,
                         raw0: pd.Series) -> str:
    """Say which constraints emptied the candidate pool, with counts."""
    n_pool = int(pool.sum())
    if n_pool == 0:
        return "the model predicts no training row favourable"
    parts = []
    codes = training.codes
    for j, name in enumerate(codes.immutable_names):
        removed = int(np.sum(pool & (codes.immutable[:, j] != codes0.immutable[0, j])))
        if removed:
            parts.append((removed, f"{removed} differ in {name} (applicant: {raw0[name]})"))
    for j, name in enumerate(codes.monotone_names):
        delta = (codes.monotone[:, j] - codes0.monotone[0, j]) * codes.direction[j]
        removed = int(np.sum(pool & (delta < 0)))
        if removed:
            word = "lower" if codes.direction[j] > 0 else "higher"
            parts.append((removed, f"{removed} have {word} {name} (applicant: {raw0[name]})"))
    parts.sort(key=lambda item: -item[0])
    detail = "; ".join(text for _, text in parts) if parts else "they equal the applicant"
    return f"only {n_found} candidate row(s), need {k}: of {n_pool} favourable training rows, {detail}"


def select_for_applicant(training: TrainingSet, x0: np.ndarray, codes0, raw0: pd.Series,
                         settings: PlanSettings, *, pool: np.ndarray | None = None,
                         thetas=None) -> list[SelectionOutcome]:
    """Select prototypes for one applicant, once per theta in ``thetas`` (default: settings.theta).

    The geometry and its eigendecomposition are computed once and shared by
    every theta.
    """
    pool = training.pool(settings.candidates) if pool is None else pool
    thetas = [settings.theta] if thetas is None else list(thetas)
    mask = candidate_mask(training, x0, codes0, pool)
    cand = np.flatnonzero(mask)
    if cand.size < settings.k:
        reason = infeasibility_reason(training, codes0, pool, int(cand.size), settings.k, raw0)
        return [SelectionOutcome("infeasible", reason, np.zeros(0, dtype=np.int64), n_candidates=int(cand.size))
                for _ in thetas]
    geometry = compute_geometry(training.X[cand], x0)
    needs_eigen = settings.method in ("quad", "quad-dp")
    eigen = eigen_decompose(geometry) if needs_eigen and any(t > 0 for t in thetas) else None
    outcomes = []
    for theta in thetas:
        sel = select_prototypes(geometry, k=settings.k, method=settings.method, theta=theta,
                                bandwidth=settings.bandwidth, eigen=eigen, n_iter=settings.n_iter,
                                tau=settings.tau, step=settings.step)
        screening = None if sel.screening is None else cand[np.asarray(sel.screening, dtype=np.int64)]
        outcomes.append(SelectionOutcome("ok", None, cand[np.asarray(sel.indices, dtype=np.int64)],
                                         float(sel.objective), screening, int(cand.size)))
    return outcomes


def _changes(raw0: dict, features: dict) -> dict:
    return {name: (raw0[name], value) for name, value in features.items() if not _same(raw0[name], value)}


def _same(a, b) -> bool:
    if isinstance(a, (int, float, np.integer, np.floating)) and isinstance(b, (int, float, np.integer, np.floating)):
        return float(a) == float(b)
    return a == b


def plan_chunk(training: TrainingSet, model, applicants: pd.DataFrame, ids: list[str],
               settings: PlanSettings) -> list[Plan]:
    """Plans for one chunk of applicants (linear interpolation), in input order.

    Parameters
    ----------
    training : TrainingSet
    model : frpd_cli.model.Model
    applicants : DataFrame of shape (n_applicants, >= n_features)
        Raw applicant rows.
    ids : list of str
        The applicant identifiers written to the output.
    settings : PlanSettings
    """
    encoder = training.encoder
    raw = applicants.loc[:, list(training.schema.feature_names)].reset_index(drop=True)
    X0 = encoder.encode(raw, source="the applicants file")
    codes0 = encoder.constraint_codes(raw, source="the applicants file")
    prob0 = np.asarray(model.favorable_probability(raw), dtype=np.float64)
    pool = training.pool(settings.candidates)
    outcomes: list[SelectionOutcome | None] = []
    for i in range(len(raw)):
        if prob0[i] >= model.threshold:
            outcomes.append(None)
        else:
            outcomes.append(select_for_applicant(training, X0[i], codes0.row(i), raw.iloc[i], settings,
                                                 pool=pool)[0])
    ends = [None if out is None else training.X[out.rows] for out in outcomes]
    return interpolate_plans(encoder, model, raw, X0, prob0, ids, outcomes, ends, method=settings.method,
                             k=settings.k, tol=settings.tol)


def interpolate_plans(encoder, model, raw: pd.DataFrame, X0: np.ndarray, prob0: np.ndarray, ids: list[str],
                      outcomes: list, ends: list, *, method: str, k: int, tol: float = 1e-3) -> list[Plan]:
    """Turn selections into plans by linear interpolation, all segments of the chunk batched together.

    Parameters
    ----------
    raw : DataFrame of shape (n_applicants, n_features)
        Raw applicants.
    X0 : ndarray of shape (n_applicants, n_features_out)
    prob0 : ndarray of shape (n_applicants,)
        The model's favourable probability of each applicant.
    outcomes : list of SelectionOutcome or None
        None for applicants already favourable.
    ends : list of ndarray of shape (n_prototypes, n_features_out) or None
        Encoded prototypes of each applicant, in rank order.
    """
    seg_app, seg_rows, seg_X = [], [], []
    for i, out in enumerate(outcomes):
        if out is not None and out.status == "ok":
            seg_app.extend([i] * len(out.rows))
            seg_rows.extend(out.rows.tolist())
            seg_X.append(ends[i])
    seg_app = np.asarray(seg_app, dtype=np.int64)
    XK = np.vstack(seg_X) if seg_X else np.zeros((0, X0.shape[1]))
    result = interpolate_linear(encoder, model, X0[seg_app], XK, raw.iloc[seg_app].reset_index(drop=True), tol=tol)
    if len(seg_app):
        Zr = encoder.encode(result.rows, source="the recourses")
        costs = np.linalg.norm(Zr - X0[seg_app], axis=1)
    else:
        costs = np.zeros(0)
    records = result.rows.to_dict("records")

    plans = []
    cursor = 0
    names = list(encoder.schema.feature_names)
    for i, out in enumerate(outcomes):
        raw0 = raw.iloc[i].to_dict()
        if out is None:
            plans.append(Plan(ids[i], "already-favorable",
                              f"the model already predicts favourable (probability {prob0[i]:.4f})", method,
                              (), raw0))
            continue
        if out.status != "ok":
            plans.append(Plan(ids[i], out.status, out.reason, method, (), raw0))
            continue
        recourses, seen = [], set()
        for j in range(len(out.rows)):
            s = cursor + j
            features = {n: records[s][n] for n in names}
            key = tuple(str(features[n]) for n in names)
            if key in seen:
                continue
            seen.add(key)
            recourses.append(Recourse(rank=len(recourses) + 1, features=features, changes=_changes(raw0, features),
                                      cost=float(costs[s]), probability=float(result.probability[s]),
                                      prototype=int(seg_rows[s])))
        cursor += len(out.rows)
        reason = None
        if len(recourses) < k:
            reason = (f"{k - len(recourses)} prototype(s) led to the same recourse as a closer one; "
                      f"{len(recourses)} distinct recourse(s) kept")
        plans.append(Plan(ids[i], "ok", reason, method, tuple(recourses), raw0))
    return plans


def _chunks(n: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(start + size, n)) for start in range(0, n, size)]


def _run_chunk(training, model, applicants, ids, settings):
    return plan_chunk(training, model, applicants, ids, settings)


def plan_applicants(training: TrainingSet, model, applicants: pd.DataFrame, ids: list[str],
                    settings: PlanSettings, *, n_jobs: int = 1, chunk_size: int = 64,
                    progress: Callable[[int, int], None] | None = None) -> Iterator[list[Plan]]:
    """Plan every applicant; yield the plans chunk by chunk in input order.

    Parameters
    ----------
    n_jobs : int, default=1
        Worker processes (joblib's process pool). Results do not depend on it.
    chunk_size : int, default=64
        Applicants per chunk (memory and model-call batch size).
    progress : callable, optional
        Called as ``progress(done, total)`` after each chunk.
    """
    settings.validate()
    if n_jobs < 1:
        raise InputError(f"The 'jobs' option must be an int >= 1. Got {n_jobs!r} instead.")
    if chunk_size < 1:
        raise InputError(f"The 'chunk_size' option must be an int >= 1. Got {chunk_size!r} instead.")
    n = len(applicants)
    bounds = _chunks(n, chunk_size)
    applicants = applicants.reset_index(drop=True)
    done = 0
    if n_jobs == 1 or len(bounds) == 1:
        for a, b in bounds:
            plans = _run_chunk(training, model, applicants.iloc[a:b], ids[a:b], settings)
            done += b - a
            if progress:
                progress(done, n)
            yield plans
        return
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=n_jobs, return_as="generator", backend="loky")
    tasks = (delayed(_run_chunk)(training, model, applicants.iloc[a:b], ids[a:b], settings) for a, b in bounds)
    for (a, b), plans in zip(bounds, parallel(tasks)):
        done += b - a
        if progress:
            progress(done, n)
        yield plans
