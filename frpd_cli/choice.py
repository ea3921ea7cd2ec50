"""Prototype choice for one applicant: plan settings, candidates, selection outcomes, infeasibility reasons.

Shared by both interpolation schemes (:mod:`frpd_cli.planning` for the linear
scheme and the batch machinery, :mod:`frpd_cli.sequential` for the graph
scheme).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .dataset import TrainingSet
from .exceptions import InputError
from .interpolation import ENDPOINTS, same_value
from .plans import Plan
from .projection import IMMUTABLE_POLICIES, candidate_mask, candidate_set, effective_policy, outside_ranges
from .selection import EIGEN_METHODS, METHODS, compute_geometry, eigen_decompose, select_prototypes

__all__ = [
    "PLAN_METHODS",
    "SCHEMES",
    "PlanSettings",
    "SelectionOutcome",
    "infeasibility_reason",
    "select_for_applicant",
    "select_among",
    "constraint_breakdown",
    "empty_plan",
    "changes",
    "method_label",
    "DEFAULT_THETA",
]

#: Selection methods of a plan: those of :data:`frpd_cli.selection.METHODS`, and
#: ``"face"`` (graph scheme only).
PLAN_METHODS = (*METHODS, "face")
SCHEMES = ("linear", "graph")
#: The default diversity weight; a plan's method label names theta only when it is another one.
DEFAULT_THETA = 0.9
#: Methods whose result depends on theta.
_THETA_METHODS = ("quad", "quad-dp", "quad-greedy", "dpp-greedy", "dpp-ls", "exact")


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
    scheme : {"linear", "graph"}
        Interpolation scheme; ``"graph"`` needs an actionability graph.
    endpoint : {"prototype", "first-favorable"}
        Graph scheme: a recourse ends at its prototype (default), or at the
        first node of the shortest path to it that the model predicts
        favourable.
    max_hops : int or None
        Graph scheme: only prototypes whose shortest path has at most this many moves.
    max_cost : float or None
        Graph scheme: only prototypes whose shortest path costs at most this much.
    immutable_policy : {"auto", "filter", "project"}
        Linear scheme: ``"filter"`` keeps only favourable rows that already
        share the applicant's immutable values (and monotone sides);
        ``"project"`` also moves the other favourable rows onto them;
        ``"auto"`` (default) filters on categorical immutable features and
        projects on numeric ones (see :mod:`frpd_cli.projection`). Graph plans
        always keep the strict edge rules.
    margin : float
        Probability points above the model's threshold a recourse must reach
        (0: the paper's first accepted point). Prototypes, interpolation and
        sparsification all stop only where the probability is at least
        ``threshold + margin``.
    sparsify : bool
        Linear scheme: return the features the model does not need to the
        applicant's values (:mod:`frpd_cli.sparsify`). Graph recourses keep
        their paths.
    max_changes : int or None
        Linear scheme: a recourse changing more features is sparsified further
        (without the cost bound) or dropped.
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
    scheme: str = "linear"
    endpoint: str = "prototype"
    max_hops: int | None = None
    max_cost: float | None = None
    immutable_policy: str = "auto"
    margin: float = 0.0
    sparsify: bool = True
    max_changes: int | None = None

    def validate(self) -> "PlanSettings":
        if self.method not in PLAN_METHODS:
            raise InputError(
                f"The 'method' option must be one of {', '.join(PLAN_METHODS)}. Got {self.method!r} instead."
            )
        if self.scheme not in SCHEMES:
            raise InputError(f"The 'scheme' option must be one of {', '.join(SCHEMES)}. Got {self.scheme!r} instead.")
        if self.method == "face" and self.scheme != "graph":
            raise InputError("The 'face' method needs --graph: it picks the favourable training rows with the "
                             "cheapest paths on an actionability graph (build one with frpd build-graph).")
        if self.endpoint not in ENDPOINTS:
            raise InputError(
                f"The 'endpoint' option must be one of {', '.join(ENDPOINTS)}. Got {self.endpoint!r} instead."
            )
        if self.max_hops is not None and (isinstance(self.max_hops, bool)
                                          or not isinstance(self.max_hops, (int, np.integer)) or self.max_hops < 1):
            raise InputError(f"The 'max_hops' option must be an int >= 1. Got {self.max_hops!r} instead.")
        if self.max_cost is not None and not (np.isfinite(self.max_cost) and self.max_cost > 0):
            raise InputError(f"The 'max_cost' option must be a number > 0. Got {self.max_cost!r} instead.")
        if self.scheme != "graph":
            for name in ("max_hops", "max_cost"):
                if getattr(self, name) is not None:
                    raise InputError(f"The '{name}' option needs --graph (it limits paths on the graph).")
            if self.endpoint != "prototype":
                raise InputError("The 'endpoint' option needs --graph (linear recourses always stop at the first "
                                 "favourable point of their segment).")
        if not isinstance(self.k, (int, np.integer)) or self.k < 1:
            raise InputError(f"The 'k' option must be an int >= 1. Got {self.k!r} instead.")
        if not 0.0 <= self.theta <= 1.0:
            raise InputError(f"The 'theta' option must be in [0, 1]. Got {self.theta!r} instead.")
        if not self.bandwidth > 0:
            raise InputError(f"The 'bandwidth' option must be > 0. Got {self.bandwidth!r} instead.")
        if not 0 < self.tol < 1:
            raise InputError(f"The 'tol' option must be in (0, 1). Got {self.tol!r} instead.")
        if self.immutable_policy not in IMMUTABLE_POLICIES:
            raise InputError(f"The 'immutable-policy' option must be one of {', '.join(IMMUTABLE_POLICIES)}. "
                             f"Got {self.immutable_policy!r} instead.")
        self._validate_sparsity()
        return self

    def _validate_sparsity(self) -> None:
        if isinstance(self.margin, bool) or not isinstance(self.margin, (int, float, np.integer, np.floating)) \
                or not (np.isfinite(self.margin) and 0.0 <= self.margin < 1.0):
            raise InputError(f"The 'margin' option must be a number in [0, 1) (probability points above the "
                             f"threshold). Got {self.margin!r} instead.")
        if self.max_changes is not None and (isinstance(self.max_changes, bool)
                                             or not isinstance(self.max_changes, (int, np.integer))
                                             or self.max_changes < 1):
            raise InputError(f"The 'max_changes' option must be an int >= 1. Got {self.max_changes!r} instead.")
        if self.max_changes is not None and self.scheme == "graph":
            raise InputError("The 'max_changes' option applies to linear recourses; graph recourses keep their "
                             "paths. Leave out --graph, or --max-changes.")

    def to_dict(self) -> dict:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @property
    def label(self) -> str:
        """The method label of this variant in plan records (see :func:`method_label`)."""
        return method_label(self.method, theta=self.theta, scheme=self.scheme, endpoint=self.endpoint)


def method_label(method: str, *, theta: float = DEFAULT_THETA, scheme: str = "linear",
                 endpoint: str = "prototype", show_theta: bool = False) -> str:
    """The ``method`` field of a plan record: the selection method and the variant that made the plan.

    Grammar: ``METHOD ["@" THETA] ["+graph" [":first-favorable"]]``. ``@THETA``
    (shortest form, ``%g``) appears when theta is not the default 0.9, or with
    ``show_theta`` (a selection made with several thetas), and only for methods
    that use theta (not ``nearest`` nor ``face``); ``+graph`` marks sequential
    recourse on the actionability graph, ``:first-favorable`` its endpoint
    when it is not the prototype.

    Examples
    --------
    >>> method_label("quad")
    'quad'
    >>> method_label("quad", theta=0.5, scheme="graph", endpoint="first-favorable")
    'quad@0.5+graph:first-favorable'
    >>> method_label("nearest", theta=0.1)
    'nearest'
    """
    label = method
    if method in _THETA_METHODS and (show_theta or float(theta) != DEFAULT_THETA):
        label += f"@{float(theta):g}"
    if scheme == "graph":
        label += "+graph"
        if endpoint != "prototype":
            label += f":{endpoint}"
    return label


@dataclass(frozen=True)
class SelectionOutcome:
    """Prototype selection for one applicant."""

    status: str
    reason: str | None
    rows: np.ndarray                 # training row numbers, rank order
    objective: float = float("nan")
    screening: np.ndarray | None = None   # training row numbers of the screening set
    n_candidates: int = 0
    ends: np.ndarray | None = None        # encoded prototypes (rank order) when they are not training rows
    projected: np.ndarray | None = None   # per prototype: moved onto the applicant's immutable values
    candidates: np.ndarray | None = None  # candidate training rows (only when asked for, with ``eigen``)
    eigen: object = None                  # the eigendecomposition used (quad, quad-dp), when asked for
    objective_gap: float | None = None    # objective minus a proven lower bound (0: optimal), when known


def infeasibility_reason(training: TrainingSet, codes0, pool: np.ndarray, n_found: int, k: int,
                         raw0: pd.Series) -> str:
    """Say which constraints emptied the candidate pool, with counts."""
    n_pool = int(pool.sum())
    if n_pool == 0:
        return "the model predicts no training row favourable"
    detail = "; ".join(constraint_breakdown(training, codes0, pool, raw0)) or "they equal the applicant"
    return f"only {n_found} candidate row(s), need {k}: of {n_pool} favourable training rows, {detail}"


def select_for_applicant(training: TrainingSet, x0: np.ndarray, codes0, raw0: pd.Series,
                         settings: PlanSettings, *, pool: np.ndarray | None = None,
                         thetas=None, model=None, eigen=None, keep=False) -> list[SelectionOutcome]:
    """Select prototypes for one applicant, once per theta in ``thetas`` (default: settings.theta).

    The geometry and its eigendecomposition are computed once and shared by
    every theta. ``model`` is needed by the ``project`` immutable policy (it
    re-predicts projected rows). ``eigen`` is a stored eigendecomposition of
    this applicant's candidate geometry (``select --reuse-eigen``): it is used
    when its candidate rows are exactly this applicant's candidates. With
    ``keep``, outcomes carry the candidate rows and the eigendecomposition.
    """
    pool = training.pool(settings.candidates) if pool is None else pool
    thetas = [settings.theta] if thetas is None else list(thetas)
    policy = effective_policy(training.schema, settings.immutable_policy)
    if policy in ("project", "auto"):
        if model is None:
            raise InputError(f"The '{policy}' immutable policy needs the model to re-predict projected rows.")
        cset = candidate_set(training, model, x0, codes0, raw0, pool, policy=policy)
        if len(cset) < settings.k:
            reason = infeasibility_reason(training, codes0, pool, len(cset), settings.k, raw0)
            reason += ("; even after projecting the others onto the applicant's immutable values" if policy == "project"
                       else "; even after projecting the others onto the applicant's numeric immutable values")
            return [SelectionOutcome("infeasible", reason, np.zeros(0, dtype=np.int64), n_candidates=len(cset))
                    for _ in thetas]
        return select_among(training, x0, cset.rows, settings, thetas, X=cset.X, projected=cset.projected,
                             eigen=eigen, keep=keep)
    mask = candidate_mask(training, x0, codes0, pool)
    cand = np.flatnonzero(mask)
    if cand.size < settings.k:
        reason = infeasibility_reason(training, codes0, pool, int(cand.size), settings.k, raw0)
        return [SelectionOutcome("infeasible", reason, np.zeros(0, dtype=np.int64), n_candidates=int(cand.size))
                for _ in thetas]
    return select_among(training, x0, cand, settings, thetas, eigen=eigen, keep=keep)


def select_among(training: TrainingSet, x0: np.ndarray, cand: np.ndarray, settings: PlanSettings,
                  thetas: list, *, X: np.ndarray | None = None, projected: np.ndarray | None = None,
                  eigen=None, keep: bool = False, proximity: np.ndarray | None = None) -> list[SelectionOutcome]:
    """Run the selection method on the candidate rows ``cand``, once per theta.

    ``X`` holds the encoded candidates when they are not the training rows
    themselves (projected candidates); ``projected`` flags them. ``eigen``, when
    given, must be the eigendecomposition of exactly this candidate geometry.
    ``proximity`` (one positive value per candidate) replaces the Euclidean
    distance as every method's proximity term (the graph scheme passes the
    shortest-path costs, paper Section 5.2); the directions stay Euclidean.
    """
    if X is None:
        geometry = _geometry_of_rows(training, cand, x0)
    else:
        geometry = compute_geometry(X, x0)
    if proximity is not None:
        geometry = _with_proximity(geometry, proximity)
    needs_eigen = settings.method in EIGEN_METHODS
    if eigen is not None and eigen.vectors.shape[0] != cand.size:
        eigen = None
    if eigen is None and needs_eigen and any(t > 0 for t in thetas):
        eigen = eigen_decompose(geometry)
    outcomes = []
    for theta in thetas:
        sel = select_prototypes(geometry, k=settings.k, method=settings.method, theta=theta,
                                bandwidth=settings.bandwidth, eigen=eigen, n_iter=settings.n_iter,
                                tau=settings.tau, step=settings.step)
        idx = np.asarray(sel.indices, dtype=np.int64)
        screening = None if sel.screening is None else cand[np.asarray(sel.screening, dtype=np.int64)]
        extra = {}
        if X is not None:
            extra = {"ends": X[idx], "projected": np.zeros(idx.size, dtype=bool) if projected is None
                     else projected[idx]}
        if keep:
            extra.update(candidates=cand, eigen=eigen)
        extra["objective_gap"] = sel.info.get("objective_gap")
        outcomes.append(SelectionOutcome("ok", sel.info.get("fallback_reason"), cand[idx], float(sel.objective),
                                         screening, int(cand.size), **extra))
    return outcomes


def _with_proximity(geometry, proximity: np.ndarray):
    """``geometry`` with ``proximity`` as its distances (one finite value > 0 per candidate)."""
    from dataclasses import replace

    proximity = np.array(proximity, dtype=np.float64)
    if proximity.shape != (geometry.n_candidates,) or not np.all(np.isfinite(proximity) & (proximity > 0)):
        raise InputError(f"The proximity term must hold one finite value > 0 per candidate ({geometry.n_candidates}). "
                         f"Got shape {proximity.shape} with values in [{proximity.min(initial=np.inf):.3g}, "
                         f"{proximity.max(initial=-np.inf):.3g}] instead.")
    proximity.setflags(write=False)
    return replace(geometry, distances=proximity)


def _geometry_of_rows(training: TrainingSet, cand: np.ndarray, x0: np.ndarray):
    """The geometry of training rows ``cand``; a fresh gather of them becomes the directions."""
    Xc, fresh = training.encoded_rows(cand)
    return compute_geometry(Xc, x0, overwrite_X=fresh)


def constraint_breakdown(training: TrainingSet, codes0, rows: np.ndarray, raw0) -> list[str]:
    """For the rows selected by ``rows`` (bool mask), how many each constraint rules out, largest first."""
    parts = []
    codes = training.codes
    for j, name in enumerate(codes.immutable_names):
        removed = int(np.sum(rows & (codes.immutable[:, j] != codes0.immutable[0, j])))
        if removed:
            parts.append((removed, f"{removed} differ in {name} (applicant: {raw0[name]})"))
    for j, name in enumerate(codes.monotone_names):
        delta = (codes.monotone[:, j] - codes0.monotone[0, j]) * codes.direction[j]
        removed = int(np.sum(rows & (delta < 0)))
        if removed:
            word = "lower" if codes.direction[j] > 0 else "higher"
            parts.append((removed, f"{removed} have {word} {name} (applicant: {raw0[name]})"))
    parts.extend(_range_parts(training, rows, raw0))
    parts.sort(key=lambda item: -item[0])
    return [text for _, text in parts]


def _range_parts(training: TrainingSet, rows: np.ndarray, raw0) -> list[tuple[int, str]]:
    """How many of ``rows`` each ``--range`` rules out (a row keeping the applicant's value is never out)."""
    parts = []
    ranged = [f for f in training.schema.features if f.has_range]
    for f, (_, outside) in zip(ranged, outside_ranges(training)):
        differs = (training.frame[f.name] != raw0[f.name]).to_numpy()
        removed = int(np.sum(rows & outside & differs))
        if removed:
            if f.is_categorical:
                shown = ", ".join(str(v) for v in f.allowed)
            else:
                shown = f"{'' if f.low is None else f'{f.low:g}'}:{'' if f.high is None else f'{f.high:g}'}"
            parts.append((removed, f"{removed} are outside the range of {f.name} ({shown})"))
    return parts


def empty_plan(applicant: str, out: SelectionOutcome | None, prob: float, method: str, raw0: dict) -> Plan:
    """The plan of an applicant without recourses: already favourable (``out`` is None) or not selectable."""
    if out is None:
        return Plan(applicant, "already-favorable", f"the model already predicts favourable (probability {prob:.4f})",
                    method, (), raw0)
    return Plan(applicant, out.status, out.reason, method, (), raw0)


def changes(raw0: dict, features: dict) -> dict:
    return {name: (raw0[name], value) for name, value in features.items() if not same_value(raw0[name], value)}
