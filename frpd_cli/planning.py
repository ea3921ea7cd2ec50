"""From applicants to recourse plans: candidates, prototype selection, interpolation.

The work is done chunk by chunk: every applicant of a chunk is encoded and
scored in one model call, prototypes are selected per applicant, and the
interpolation of all prototypes of the chunk shares each model call. Chunks can
run in a joblib process pool; results come back in input order and do not
depend on the number of workers.

Two schemes (:attr:`PlanSettings.scheme`): ``"linear"`` selects among every
actionable favourable training row and interpolates along segments;
``"graph"`` attaches the applicant to an actionability graph, selects among the
favourable rows it can reach, and follows shortest paths (sequential recourse).
The ``"face"`` method (graph only) takes the K reachable favourable rows with
the cheapest paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from .applicants import ApplicantChunk, normalise_types
from .backends import map_ordered
from .constraints import actionable_mask
from .dataset import TrainingSet
from .exceptions import InputError
from .interpolation import (
    ENDPOINTS,
    GraphReach,
    graph_path,
    interpolate_graph,
    interpolate_linear,
    reach_from,
    same_value,
)
from .plans import Plan, Recourse
from .projection import IMMUTABLE_POLICIES, candidate_mask, candidate_set
from .selection import METHODS, compute_geometry, eigen_decompose, select_prototypes
from .selection.baselines import rank_order

__all__ = [
    "PLAN_METHODS",
    "SCHEMES",
    "PlanSettings",
    "SelectionOutcome",
    "candidate_mask",
    "infeasibility_reason",
    "graph_infeasibility_reason",
    "select_for_applicant",
    "select_on_graph",
    "graph_candidates",
    "plan_chunk",
    "interpolate_plans",
    "graph_plans",
    "plan_applicants",
    "plan_stream",
    "SelectionTable",
    "select_applicants",
]

#: Selection methods of a plan: those of :data:`frpd_cli.selection.METHODS`, and
#: ``"face"`` (graph scheme only).
PLAN_METHODS = (*METHODS, "face")
SCHEMES = ("linear", "graph")



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
    immutable_policy : {"filter", "project"}
        Linear scheme: ``"filter"`` keeps only favourable rows that already
        share the applicant's immutable values (and monotone sides);
        ``"project"`` also moves the other favourable rows onto them (see
        :mod:`frpd_cli.projection`). Graph plans always keep the strict edge
        rules.
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
    immutable_policy: str = "filter"

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
    ends: np.ndarray | None = None        # encoded prototypes (rank order) when they are not training rows
    projected: np.ndarray | None = None   # per prototype: moved onto the applicant's immutable values
    candidates: np.ndarray | None = None  # candidate training rows (only when asked for, with ``eigen``)
    eigen: object = None                  # the eigendecomposition used (quad, quad-dp), when asked for


def infeasibility_reason(training: TrainingSet, codes0, pool: np.ndarray, n_found: int, k: int,
                         raw0: pd.Series) -> str:
    """Say which constraints emptied the candidate pool, with counts."""
    n_pool = int(pool.sum())
    if n_pool == 0:
        return "the model predicts no training row favourable"
    detail = "; ".join(_constraint_breakdown(training, codes0, pool, raw0)) or "they equal the applicant"
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
    if settings.immutable_policy == "project":
        if model is None:
            raise InputError("The 'project' immutable policy needs the model to re-predict projected rows.")
        cset = candidate_set(training, model, x0, codes0, raw0, pool, policy="project")
        if len(cset) < settings.k:
            reason = infeasibility_reason(training, codes0, pool, len(cset), settings.k, raw0)
            reason += "; even after projecting the others onto the applicant's immutable values"
            return [SelectionOutcome("infeasible", reason, np.zeros(0, dtype=np.int64), n_candidates=len(cset))
                    for _ in thetas]
        return _select_among(training, x0, cset.rows, settings, thetas, X=cset.X, projected=cset.projected,
                             eigen=eigen, keep=keep)
    mask = candidate_mask(training, x0, codes0, pool)
    cand = np.flatnonzero(mask)
    if cand.size < settings.k:
        reason = infeasibility_reason(training, codes0, pool, int(cand.size), settings.k, raw0)
        return [SelectionOutcome("infeasible", reason, np.zeros(0, dtype=np.int64), n_candidates=int(cand.size))
                for _ in thetas]
    return _select_among(training, x0, cand, settings, thetas, eigen=eigen, keep=keep)


def _select_among(training: TrainingSet, x0: np.ndarray, cand: np.ndarray, settings: PlanSettings,
                  thetas: list, *, X: np.ndarray | None = None, projected: np.ndarray | None = None,
                  eigen=None, keep: bool = False) -> list[SelectionOutcome]:
    """Run the selection method on the candidate rows ``cand``, once per theta.

    ``X`` holds the encoded candidates when they are not the training rows
    themselves (projected candidates); ``projected`` flags them. ``eigen``, when
    given, must be the eigendecomposition of exactly this candidate geometry.
    """
    Xc = training.X[cand] if X is None else X
    geometry = compute_geometry(Xc, x0)
    needs_eigen = settings.method in ("quad", "quad-dp")
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
            extra = {"ends": Xc[idx], "projected": np.zeros(idx.size, dtype=bool) if projected is None
                     else projected[idx]}
        if keep:
            extra.update(candidates=cand, eigen=eigen)
        outcomes.append(SelectionOutcome("ok", None, cand[idx], float(sel.objective), screening, int(cand.size),
                                         **extra))
    return outcomes


# --------------------------------------------------------------------------
# graph scheme: candidates, reasons, FACE, plans
# --------------------------------------------------------------------------


def _constraint_breakdown(training: TrainingSet, codes0, rows: np.ndarray, raw0) -> list[str]:
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
    parts.sort(key=lambda item: -item[0])
    return [text for _, text in parts]


def _graph_hint(graph) -> str:
    if graph.radius is not None:
        return f"rebuild the graph with a larger --radius (now {graph.radius:g})"
    return f"rebuild the graph with a larger --neighbors (now {graph.n_neighbors}) or a --radius"


def graph_infeasibility_reason(training: TrainingSet, graph, reach: GraphReach, x0: np.ndarray, codes0,
                               pool: np.ndarray, n_found: int, settings: PlanSettings, raw0) -> str:
    """Say why too few favourable rows are reachable on the graph, with counts and a remedy."""
    k = settings.k
    N = training.n_rows
    if reach.neighbors.size == 0:
        targets = actionable_mask(codes0, training.codes)
        if not targets.any():
            detail = "; ".join(_constraint_breakdown(training, codes0, np.ones(N, dtype=bool), raw0))
            return ("the applicant has no actionable neighbour on the graph: every training row differs in an "
                    f"immutable feature or lies on the wrong side of a monotone one ({detail})")
        nearest = float(np.sqrt(((training.X[targets] - x0) ** 2).sum(axis=1)).min())
        limits, options = [], []
        if graph.radius is not None and nearest > graph.radius:
            limits.append(f"the graph's radius {graph.radius:g}")
            options.append("--radius")
        if graph.max_step is not None and nearest > graph.max_step:
            limits.append(f"the graph's max step {graph.max_step:g}")
            options.append("--max-step")
        return (f"the applicant has no actionable neighbour on the graph: the nearest of its "
                f"{int(targets.sum())} actionable training rows is at distance {nearest:.4g}, beyond "
                f"{' and '.join(limits)}; rebuild the graph with a larger {' and '.join(options)}")
    n_linear = int(candidate_mask(training, x0, codes0, pool).sum())
    reached = np.isfinite(reach.dist)
    n_reached_fav = int((reached & pool).sum())
    text = (f"only {n_found} candidate row(s) reachable on the graph, need {k}: the applicant reaches "
            f"{reach.n_reached} of {N} training rows ({100.0 * reach.n_reached / N:.2g}%), {n_reached_fav} of them "
            f"favourable")
    limits = []
    if settings.max_cost is not None:
        text += f" within --max-cost {settings.max_cost:g}"
        limits.append("a larger --max-cost")
    if settings.max_hops is not None:
        beyond = int((reached & pool & (reach.hops > settings.max_hops)).sum())
        if beyond:
            text += f" ({beyond} of those more than --max-hops {settings.max_hops} moves away)"
            limits.append("a larger --max-hops")
    if n_linear < k:
        detail = "; ".join(_constraint_breakdown(training, codes0, pool, raw0)) or "they equal the applicant"
        return text + (f"; only {n_linear} favourable row(s) are actionable at all: of {int(pool.sum())} "
                       f"favourable training rows, {detail}")
    remedy = _graph_hint(graph)
    if limits:
        remedy = f"try {' or '.join(limits)}, or {remedy}"
    return text + f"; {n_linear} favourable rows are actionable but not reachable: {remedy}"


def _face_rows(training: TrainingSet, reach: GraphReach, cand: np.ndarray, k: int, endpoint: str) -> np.ndarray:
    """FACE: the ``k`` cheapest distinct end points among the candidates' paths.

    Candidates are taken by path cost (ties by row index). With
    ``endpoint="first-favorable"`` a candidate stands for the first favourable
    node of its path (which is never more expensive), so the result is the
    ``k`` cheapest nodes that are the first favourable node of their own path.
    Rows identical to one already taken are skipped.
    """
    order = rank_order(reach.dist, cand)
    chosen: list[int] = []
    for row in order:
        end = graph_path(reach, int(row), endpoint=endpoint, favorable=training.favorable)[-1]
        if any(end == c or np.array_equal(training.X[end], training.X[c]) for c in chosen):
            continue
        chosen.append(int(end))
        if len(chosen) == k:
            break
    return np.asarray(chosen, dtype=np.int64)


def graph_candidates(training: TrainingSet, reach: GraphReach, x0: np.ndarray, codes0, pool: np.ndarray,
                     settings: PlanSettings) -> np.ndarray:
    """Rows (ascending) of :func:`candidate_mask` that the applicant reaches within the graph limits."""
    mask = candidate_mask(training, x0, codes0, pool) & np.isfinite(reach.dist)
    if settings.max_hops is not None:
        mask &= reach.hops <= settings.max_hops
    return np.flatnonzero(mask)


def select_on_graph(training: TrainingSet, graph, x0: np.ndarray, codes0, raw0, settings: PlanSettings, *,
                    pool: np.ndarray | None = None, thetas=None, eigen=None,
                    keep: bool = False) -> tuple[list[SelectionOutcome], GraphReach]:
    """Select prototypes among the favourable rows the applicant can reach on the graph.

    Candidates are the rows of :func:`candidate_mask` (the linear scheme's
    filter) with a finite path cost from the applicant (within
    ``settings.max_cost``) and at most ``settings.max_hops`` moves on their
    shortest path. The selection methods run on them unchanged, in the encoded
    space; ``"face"`` takes the ``k`` cheapest paths (ties by row index,
    identical rows once).

    Returns
    -------
    outcomes : list of SelectionOutcome
        One per theta.
    reach : GraphReach
        The applicant's shortest paths (reused by :func:`graph_plans`).
    """
    pool = training.pool(settings.candidates) if pool is None else pool
    thetas = [settings.theta] if thetas is None else list(thetas)
    reach = reach_from(graph, training.X, training.codes, x0, codes0, max_cost=settings.max_cost)
    cand = graph_candidates(training, reach, x0, codes0, pool, settings)
    if cand.size < settings.k:
        reason = graph_infeasibility_reason(training, graph, reach, x0, codes0, pool, int(cand.size), settings,
                                            raw0)
        return [SelectionOutcome("infeasible", reason, np.zeros(0, dtype=np.int64), n_candidates=int(cand.size))
                for _ in thetas], reach
    if settings.method == "face":
        rows = _face_rows(training, reach, cand, settings.k, settings.endpoint)
        objective = float(reach.dist[rows].sum())
        return [SelectionOutcome("ok", None, rows, objective, None, int(cand.size)) for _ in thetas], reach
    return _select_among(training, x0, cand, settings, thetas, eigen=eigen, keep=keep), reach


def graph_plans(training: TrainingSet, graph, raw: pd.DataFrame, X0: np.ndarray, codes0, prob0: np.ndarray,
                ids: list[str], outcomes: list, *, method: str, settings: PlanSettings,
                reaches: list | None = None) -> list[Plan]:
    """Turn selections into sequential-recourse plans (shortest paths on the graph).

    Parameters
    ----------
    raw : DataFrame of shape (n_applicants, n_features)
        Raw applicants.
    X0 : ndarray of shape (n_applicants, n_features_out)
    codes0 : ConstraintCodes
        The applicants' codes.
    prob0 : ndarray of shape (n_applicants,)
    outcomes : list of SelectionOutcome or None
        None for applicants already favourable.
    settings : PlanSettings
        ``k``, ``endpoint`` and ``max_cost`` are used.
    reaches : list of GraphReach or None, optional
        Each applicant's shortest paths when already computed (None entries are
        recomputed).

    Notes
    -----
    Recourses are ranked by path cost (ties by end row). Each end point is
    kept once: when two prototypes lead to the same end row (or to identical
    rows), the later one is dropped and the plan's ``reason`` says so. A
    recourse's features are its end row's raw values, so its probability is
    the model's probability of that training row (scored once for the whole
    training set: the same whatever the chunking or the number of workers).
    """
    names = list(training.schema.feature_names)
    columns = {n: training.frame[n].tolist() for n in names}
    raw_rows = raw.to_dict("records")
    drafts = []
    for i, out in enumerate(outcomes):
        if out is None or out.status != "ok":
            drafts.append(None)
            continue
        reach = reaches[i] if reaches is not None and reaches[i] is not None else reach_from(
            graph, training.X, training.codes, X0[i], codes0.row(i), max_cost=settings.max_cost)
        found = interpolate_graph(reach, out.rows, columns, raw_rows[i], endpoint=settings.endpoint,
                                  favorable=training.favorable)
        found.sort(key=lambda g: (g.cost, g.path[-1]))
        kept, ends, seen = [], set(), set()
        for g in found:
            key = tuple(str(g.features[n]) for n in names)
            if g.path[-1] in ends or key in seen:
                continue
            ends.add(g.path[-1])
            seen.add(key)
            kept.append(g)
        drafts.append(kept)
    plans, k = [], settings.k
    for i, out in enumerate(outcomes):
        raw0 = raw_rows[i]
        if out is None or out.status != "ok":
            plans.append(_empty_plan(ids[i], out, prob0[i], method, raw0))
            continue
        recourses = []
        for rank, g in enumerate(drafts[i], start=1):
            recourses.append(Recourse(rank=rank, features=g.features, changes=g.changes, cost=g.cost,
                                      probability=float(training.probability[g.path[-1]]), prototype=g.prototype,
                                      path=list(g.path), steps=list(g.steps)))
        reason = None
        if len(recourses) < k:
            lost = len(out.rows) - len(recourses)
            why = ("their paths reach the same first favourable node as a cheaper one"
                   if settings.endpoint == "first-favorable" else "they end at the same row as a cheaper one")
            reason = f"{len(recourses)} distinct recourse(s) kept, need {k}"
            if lost > 0:
                reason += f": {lost} prototype(s) dropped because {why}"
            else:
                reason += ": fewer distinct reachable rows than asked for"
        plans.append(Plan(ids[i], "ok", reason, method, tuple(recourses), raw0))
    return plans


def _empty_plan(applicant: str, out: SelectionOutcome | None, prob: float, method: str, raw0: dict) -> Plan:
    """The plan of an applicant without recourses: already favourable (``out`` is None) or not selectable."""
    if out is None:
        return Plan(applicant, "already-favorable", f"the model already predicts favourable (probability {prob:.4f})",
                    method, (), raw0)
    return Plan(applicant, out.status, out.reason, method, (), raw0)


def _changes(raw0: dict, features: dict) -> dict:
    return {name: (raw0[name], value) for name, value in features.items() if not same_value(raw0[name], value)}


def plan_chunk(training: TrainingSet, model, applicants: pd.DataFrame, ids: list[str],
               settings: PlanSettings, graph=None) -> list[Plan]:
    """Plans for one chunk of applicants, in input order.

    Parameters
    ----------
    training : TrainingSet
    model : frpd_cli.model.Model
    applicants : DataFrame of shape (n_applicants, >= n_features)
        Raw applicant rows.
    ids : list of str
        The applicant identifiers written to the output.
    settings : PlanSettings
    graph : frpd_cli.graph.Graph or None
        The actionability graph of ``training`` (required for ``scheme="graph"``).
    """
    encoder = training.encoder
    raw = applicants.loc[:, list(training.schema.feature_names)].reset_index(drop=True)
    X0 = encoder.encode(raw, source="the applicants file")
    codes0 = encoder.constraint_codes(raw, source="the applicants file")
    prob0 = np.asarray(model.favorable_probability(raw), dtype=np.float64)
    pool = training.pool(settings.candidates)
    raw_rows = raw.to_dict("records")
    outcomes: list[SelectionOutcome | None] = []
    reaches: list[GraphReach | None] = []
    for i in range(len(raw)):
        if prob0[i] >= model.threshold:
            outcomes.append(None)
            reaches.append(None)
        elif settings.scheme == "graph":
            found, reach = select_on_graph(training, graph, X0[i], codes0.row(i), raw_rows[i], settings, pool=pool)
            outcomes.append(found[0])
            reaches.append(reach)
        else:
            outcomes.append(select_for_applicant(training, X0[i], codes0.row(i), raw_rows[i], settings,
                                                 pool=pool, model=model)[0])
    if settings.scheme == "graph":
        return graph_plans(training, graph, raw, X0, codes0, prob0, ids, outcomes, method=settings.method,
                           settings=settings, reaches=reaches)
    ends = [None if out is None else (training.X[out.rows] if out.ends is None else out.ends) for out in outcomes]
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

    Notes
    -----
    A prototype whose decoded row the model does not predict favourable (possible
    only for end points that are not training rows as scored) yields no
    recourse; the plan's reason says so.
    """
    seg_app, seg_rows, seg_X, seg_proj = [], [], [], []
    for i, out in enumerate(outcomes):
        if out is not None and out.status == "ok":
            seg_app.extend([i] * len(out.rows))
            seg_rows.extend(out.rows.tolist())
            seg_X.append(ends[i])
            seg_proj.extend([False] * len(out.rows) if out.projected is None else out.projected.tolist())
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
    raw_rows = raw.to_dict("records")
    for i, out in enumerate(outcomes):
        raw0 = raw_rows[i]
        if out is None or out.status != "ok":
            plans.append(_empty_plan(ids[i], out, prob0[i], method, raw0))
            continue
        recourses, seen, n_lost = [], set(), 0
        for j in range(len(out.rows)):
            s = cursor + j
            if not result.found[s]:
                n_lost += 1
                continue
            features = {n: records[s][n] for n in names}
            key = tuple(str(features[n]) for n in names)
            if key in seen:
                continue
            seen.add(key)
            recourses.append(Recourse(rank=len(recourses) + 1, features=features, changes=_changes(raw0, features),
                                      cost=float(costs[s]), probability=float(result.probability[s]),
                                      prototype=int(seg_rows[s]), projected=bool(seg_proj[s])))
        cursor += len(out.rows)
        notes = []
        n_same = len(out.rows) - n_lost - len(recourses)
        if n_same:
            notes.append(f"{n_same} prototype(s) led to the same recourse as a closer one")
        if n_lost:
            notes.append(f"{n_lost} prototype(s) are not predicted favourable once decoded")
        reason = None
        if notes:
            reason = "; ".join(notes) + f"; {len(recourses)} distinct recourse(s) kept"
        status = "ok" if recourses else "infeasible"
        plans.append(Plan(ids[i], status, reason, method, tuple(recourses), raw0))
    return plans


def _run_chunk(training, model, applicants, ids, settings, graph, invalid=None):
    """Plan one chunk; rows listed in ``invalid`` (local row -> reason) get status ``invalid-input``."""
    if not invalid:
        return plan_chunk(training, model, normalise_types(training.encoder, applicants), ids, settings, graph)
    keep = [i for i in range(len(applicants)) if i not in invalid]
    planned = iter(plan_chunk(training, model,
                              normalise_types(training.encoder, applicants.iloc[keep].reset_index(drop=True)),
                              [ids[i] for i in keep], settings, graph) if keep else [])
    names = list(training.schema.feature_names)
    rows = applicants.loc[:, names].to_dict("records")
    return [Plan(ids[i], "invalid-input", invalid[i], settings.method, (), rows[i]) if i in invalid
            else next(planned) for i in range(len(applicants))]


def _check_graph(training: TrainingSet, settings: PlanSettings, graph) -> None:
    if settings.scheme == "graph":
        from .graph import Graph

        if not isinstance(graph, Graph):
            raise InputError("The graph scheme needs an actionability graph (frpd build-graph, then --graph DIR).")
        if graph.n_nodes != training.n_rows:
            raise InputError(f"The graph has {graph.n_nodes} nodes but the training data has {training.n_rows} rows; "
                             "it was built from other data. Rebuild it with frpd build-graph.")
    elif graph is not None:
        raise InputError("A graph was given but the scheme is 'linear'; use scheme='graph'.")


def plan_stream(training: TrainingSet, model, chunks: Iterable[ApplicantChunk], settings: PlanSettings, *,
                graph=None, n_jobs: int = 1, backend: str = "loky", scheduler: str | None = None,
                ) -> Iterator[list[Plan]]:
    """Plan a stream of applicant chunks; yield each chunk's plans, in order.

    Parameters
    ----------
    training : TrainingSet
    model : frpd_cli.model.Model
    chunks : iterable of ApplicantChunk
        Consumed lazily: memory stays bounded by a few chunks.
    settings : PlanSettings
    graph : frpd_cli.graph.Graph or None
        The actionability graph built from ``training`` (``settings.scheme == "graph"``).
    n_jobs : int, default=1
        Worker processes (``loky``) or local Dask workers (``dask``).
    backend : {"loky", "dask"}
        See :func:`frpd_cli.backends.map_ordered`.
    scheduler : str, optional
        Address of an existing Dask scheduler.

    Notes
    -----
    A chunk's plans depend only on its rows, never on the worker that computed
    them, so the output is byte-identical for any ``n_jobs`` and backend (with
    the same chunk size).
    """
    settings.validate()
    _check_graph(training, settings, graph)
    if n_jobs == 1 and backend == "loky":
        for c in chunks:
            yield _run_chunk(training, model, c.frame, c.ids, settings, graph, c.invalid)
        return
    # Workers receive the training set with every task: send a few chunks per task to amortise it. Chunk
    # boundaries stay the same, so the plans do too.
    groups = _grouped(chunks, _CHUNKS_PER_TASK)
    tasks = ((training, model, [(c.frame, c.ids, c.invalid) for c in group], settings, graph) for group in groups)
    for results in map_ordered(_run_chunks, tasks, n_jobs=n_jobs, backend=backend, scheduler=scheduler,
                               scatter=(training, model) if graph is None else (training, model, graph)):
        yield from results


_CHUNKS_PER_TASK = 4


def _grouped(items: Iterable, size: int) -> Iterator[list]:
    group = []
    for item in items:
        group.append(item)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def _run_chunks(training, model, chunks: list, settings, graph) -> list[list[Plan]]:
    return [_run_chunk(training, model, frame, ids, settings, graph, invalid) for frame, ids, invalid in chunks]


def plan_applicants(training: TrainingSet, model, applicants: pd.DataFrame, ids: list[str],
                    settings: PlanSettings, *, graph=None, n_jobs: int = 1, chunk_size: int = 256,
                    backend: str = "loky", scheduler: str | None = None,
                    progress: Callable[[int, int], None] | None = None) -> Iterator[list[Plan]]:
    """Plan every applicant of a DataFrame; yield the plans chunk by chunk in input order.

    Parameters
    ----------
    graph : frpd_cli.graph.Graph or None
        The actionability graph built from ``training`` (``settings.scheme == "graph"``).
    n_jobs : int, default=1
        Worker processes. Results do not depend on it.
    chunk_size : int, default=256
        Applicants per chunk (memory and model-call batch size).
    backend, scheduler :
        See :func:`plan_stream`.
    progress : callable, optional
        Called as ``progress(done, total)`` after each chunk.
    """
    if chunk_size < 1:
        raise InputError(f"The 'chunk_size' option must be an int >= 1. Got {chunk_size!r} instead.")
    applicants = applicants.reset_index(drop=True)
    n = len(applicants)
    names = list(training.schema.feature_names)
    chunks = (ApplicantChunk(offset=a, frame=applicants.iloc[a:a + chunk_size].loc[:, names].reset_index(drop=True),
                             ids=list(ids[a:a + chunk_size])) for a in range(0, n, chunk_size))
    done = 0
    for plans in plan_stream(training, model, chunks, settings, graph=graph, n_jobs=n_jobs, backend=backend,
                             scheduler=scheduler):
        done += len(plans)
        if progress:
            progress(done, n)
        yield plans


@dataclass(frozen=True, eq=False)
class SelectionTable:
    """Prototype selections of many applicants, as the selection artifact stores them.

    Attributes
    ----------
    prototypes : DataFrame
        One row per chosen prototype (one row without prototype for an
        applicant that has none): ``applicant, status, method, theta, rank,
        row, objective``, every feature's raw value, and ``projected`` when the
        immutable policy is ``project``.
    status : DataFrame
        ``applicant, theta, status, reason, n_candidates`` per applicant and theta.
    screening : dict of ndarray
        Screening sets of quad-family methods (flattened, with offsets).
    eigen : dict of ndarray
        Per applicant ``values_<i>``, ``vectors_<i>`` (float32) and
        ``candidates_<i>`` when eigendecompositions are kept.
    n_reused : int
        Applicants whose stored eigendecomposition was reused.
    """

    prototypes: pd.DataFrame
    status: pd.DataFrame
    screening: dict
    eigen: dict
    n_reused: int = 0


def select_applicants(training: TrainingSet, model, raw: pd.DataFrame, ids: list[str], settings: PlanSettings, *,
                      thetas=None, graph=None, save_eigen: bool = False, reuse_eigen: dict | None = None,
                      progress: Callable[[int, int], None] | None = None) -> SelectionTable:
    """Select prototypes for every applicant and every theta (the work of ``frpd select``).

    Parameters
    ----------
    raw : DataFrame of shape (n_applicants, n_features)
        Raw applicants.
    thetas : list of float, optional
        Diversity weights; each applicant's geometry and eigendecomposition are
        computed once for all of them. Default: ``[settings.theta]``.
    graph : frpd_cli.graph.Graph, optional
        Choose among the favourable rows each applicant reaches on it.
    save_eigen : bool
        Keep each applicant's eigendecomposition (float32) in the result.
    reuse_eigen : dict of ndarray, optional
        The ``eigen`` arrays of an earlier selection on the same inputs: an
        applicant whose candidate rows are unchanged reuses its decomposition.
    progress : callable, optional
        Called as ``progress(done, total)`` after each applicant.
    """
    from .interpolation import decode_from
    from .selection import Eigen

    settings.validate()
    _check_graph(training, settings, graph)
    thetas = [settings.theta] if thetas is None else list(thetas)
    encoder = training.encoder
    names = list(training.schema.feature_names)
    raw = normalise_types(encoder, raw.loc[:, names].reset_index(drop=True))
    X0 = encoder.encode(raw, source="the applicants")
    codes0 = encoder.constraint_codes(raw, source="the applicants")
    prob0 = np.asarray(model.favorable_probability(raw), dtype=np.float64)
    pool = training.pool(settings.candidates)
    raw_rows = raw.to_dict("records")
    projected_column = settings.immutable_policy == "project" and graph is None
    proto_rows, status_rows, screening, eigen_arrays = [], [], [], {}
    n_reused = 0
    keep = save_eigen or reuse_eigen is not None
    for i in range(len(raw)):
        stored = None
        if reuse_eigen is not None and f"values_{i}" in reuse_eigen:
            stored = Eigen(values=reuse_eigen[f"values_{i}"].astype(np.float64),
                           vectors=reuse_eigen[f"vectors_{i}"].astype(np.float64))
        if prob0[i] >= model.threshold:
            outcomes = [SelectionOutcome("already-favorable",
                                         f"the model already predicts favourable (probability {prob0[i]:.4f})",
                                         np.zeros(0, dtype=np.int64)) for _ in thetas]
        else:
            def run(eigen, i=i):
                if graph is not None:
                    return select_on_graph(training, graph, X0[i], codes0.row(i), raw_rows[i], settings,
                                           pool=pool, thetas=thetas, eigen=eigen, keep=keep)[0]
                return select_for_applicant(training, X0[i], codes0.row(i), raw_rows[i], settings, pool=pool,
                                            thetas=thetas, model=model, eigen=eigen, keep=keep)

            outcomes = run(stored)
            if stored is not None and outcomes[0].candidates is not None:
                if np.array_equal(outcomes[0].candidates, reuse_eigen[f"candidates_{i}"]):
                    n_reused += 1
                else:  # other candidates than when stored: the decomposition does not apply
                    outcomes = run(None)
        first = outcomes[0]
        if save_eigen and first.status == "ok" and first.eigen is not None:
            eigen_arrays[f"values_{i}"] = np.asarray(first.eigen.values, dtype=np.float32)
            eigen_arrays[f"vectors_{i}"] = np.asarray(first.eigen.vectors, dtype=np.float32)
            eigen_arrays[f"candidates_{i}"] = np.asarray(first.candidates, dtype=np.int64)
        for theta, sel in zip(thetas, outcomes):
            status_rows.append({"applicant": ids[i], "theta": theta, "status": sel.status,
                                "reason": sel.reason or "", "n_candidates": sel.n_candidates})
            if sel.screening is not None:
                screening.append((i, theta, sel.screening))
            if sel.status != "ok":
                row = {"applicant": ids[i], "status": sel.status, "method": settings.method, "theta": theta,
                       "rank": "", "row": "", "objective": "", **{n: "" for n in names}}
                if projected_column:
                    row["projected"] = ""
                proto_rows.append(row)
                continue
            if sel.ends is not None:
                rep = np.full(len(sel.rows), i)
                values = decode_from(encoder, sel.ends, X0[rep], raw.iloc[rep].reset_index(drop=True))
                values = values.to_dict("records")
            else:
                values = training.frame.iloc[sel.rows].to_dict("records")
            for rank, (r, feats) in enumerate(zip(sel.rows, values), start=1):
                row = {"applicant": ids[i], "status": sel.status, "method": settings.method, "theta": theta,
                       "rank": rank, "row": int(r), "objective": sel.objective, **feats}
                if projected_column:
                    row["projected"] = bool(sel.projected[rank - 1]) if sel.projected is not None else False
                proto_rows.append(row)
        if progress:
            progress(i + 1, len(raw))
    columns = ["applicant", "status", "method", "theta", "rank", "row", "objective", *names]
    if projected_column:
        columns.append("projected")
    return SelectionTable(
        prototypes=pd.DataFrame(proto_rows, columns=columns),
        status=pd.DataFrame(status_rows, columns=["applicant", "theta", "status", "reason", "n_candidates"]),
        screening=_screening_arrays(screening),
        eigen=eigen_arrays,
        n_reused=n_reused,
    )


def _screening_arrays(screening) -> dict:
    if not screening:
        return {"applicant_index": np.zeros(0, dtype=np.int64), "theta": np.zeros(0),
                "offsets": np.zeros(1, dtype=np.int64), "rows": np.zeros(0, dtype=np.int64)}
    lengths = [len(s) for _, _, s in screening]
    return {
        "applicant_index": np.array([i for i, _, _ in screening], dtype=np.int64),
        "theta": np.array([t for _, t, _ in screening], dtype=np.float64),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "rows": np.concatenate([np.asarray(s, dtype=np.int64) for _, _, s in screening]),
    }
