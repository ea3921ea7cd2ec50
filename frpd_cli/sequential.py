"""The graph scheme (sequential recourse): candidates the applicant reaches, FACE, shortest-path plans.

Paper section 4 and the appendix "Sequential Recourse". The applicant is
attached to the actionability graph (never modified), Dijkstra runs from it,
prototypes are chosen among the favourable rows it reaches, and each recourse is
the shortest path to its prototype. ``face`` takes the K reachable favourable
rows with the cheapest paths (Poyiadzi et al. 2020).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .choice import (
    PlanSettings,
    SelectionOutcome,
    constraint_breakdown,
    empty_plan,
    select_among,
)
from .constraints import actionable_mask
from .dataset import TrainingSet
from .interpolation import GraphReach, graph_path, interpolate_graph, reach_from
from .plans import Plan, Recourse
from .projection import candidate_mask, within_ranges
from .selection.baselines import rank_order

__all__ = ["graph_infeasibility_reason", "graph_candidates", "select_on_graph", "graph_plans"]


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
            detail = "; ".join(constraint_breakdown(training, codes0, np.ones(N, dtype=bool), raw0))
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
        detail = "; ".join(constraint_breakdown(training, codes0, pool, raw0)) or "they equal the applicant"
        return text + (f"; only {n_linear} favourable row(s) are actionable at all: of {int(pool.sum())} "
                       f"favourable training rows, {detail}")
    remedy = _graph_hint(graph)
    if limits:
        remedy = f"try {' or '.join(limits)}, or {remedy}"
    return text + f"; {n_linear} favourable rows are actionable but not reachable: {remedy}"


def _ends(training: TrainingSet, x0: np.ndarray) -> np.ndarray:
    """Nodes a graph recourse may end at: favourable, and inside every ``--range`` (or keeping the applicant's
    value there)."""
    if not any(f.has_range for f in training.schema.features):
        return training.favorable
    return training.favorable & within_ranges(training, x0)


def _face_rows(training: TrainingSet, reach: GraphReach, cand: np.ndarray, k: int, endpoint: str,
               x0: np.ndarray | None = None) -> np.ndarray:
    """FACE: the ``k`` cheapest distinct end points among the candidates' paths.

    Candidates are taken by path cost (ties by row index). With
    ``endpoint="first-favorable"`` a candidate stands for the first favourable
    node of its path (which is never more expensive), so the result is the
    ``k`` cheapest nodes that are the first favourable node of their own path.
    Rows identical to one already taken are skipped.
    """
    order = rank_order(reach.dist, cand)
    favorable = training.favorable if x0 is None else _ends(training, x0)
    chosen: list[int] = []
    for row in order:
        end = graph_path(reach, int(row), endpoint=endpoint, favorable=favorable)[-1]
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
    shortest path. Every selection method takes the shortest-path cost from the
    applicant as its proximity term, in place of the Euclidean distance (paper
    Section 5.2: "we choose the distance function as the shortest path on the
    actionability graph"); diversity still compares the Euclidean directions
    from the applicant to the candidates. ``"face"`` takes the ``k`` cheapest
    paths (ties by row index, identical rows once).

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
        rows = _face_rows(training, reach, cand, settings.k, settings.endpoint, x0)
        objective = float(reach.dist[rows].sum())
        return [SelectionOutcome("ok", None, rows, objective, None, int(cand.size)) for _ in thetas], reach
    return select_among(training, x0, cand, settings, thetas, eigen=eigen, keep=keep,
                        proximity=reach.dist[cand]), reach


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
                                  favorable=_ends(training, X0[i]))
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
            plans.append(empty_plan(ids[i], out, prob0[i], method, raw0))
            continue
        recourses = []
        for rank, g in enumerate(drafts[i], start=1):
            recourses.append(Recourse(rank=rank, features=g.features, changes=g.changes, cost=g.cost,
                                      probability=float(training.probability[g.path[-1]]), prototype=g.prototype,
                                      path=list(g.path), steps=list(g.steps)))
        reason = out.reason  # a selection note (e.g. exact ran quad instead)
        if len(recourses) < k:
            lost = len(out.rows) - len(recourses)
            why = ("their paths reach the same first favourable node as a cheaper one"
                   if settings.endpoint == "first-favorable" else "they end at the same row as a cheaper one")
            note = f"{len(recourses)} distinct recourse(s) kept, need {k}"
            if lost > 0:
                note += f": {lost} prototype(s) dropped because {why}"
            else:
                note += ": fewer distinct reachable rows than asked for"
            reason = note if reason is None else f"{reason}; {note}"
        plans.append(Plan(ids[i], "ok", reason, method, tuple(recourses), raw0, partial=len(recourses) < k))
    return plans
