"""The graph scheme (sequential recourse): selection on the graph, shortest-path plans.

Paper section 4 and the appendix "Sequential Recourse". The candidate stage
(:class:`frpd_cli.candidates.CandidateStage` with a graph) attaches the
applicant to the actionability graph (never modified), runs Dijkstra from it
and keeps the favourable rows it reaches; prototypes are chosen among them
(:func:`frpd_cli.choice.select_candidates`; ``face`` takes the K reachable
favourable rows with the cheapest paths, Poyiadzi et al. 2020), and each
recourse is the shortest path to its prototype. ``graph_candidates`` and
``graph_infeasibility_reason`` are re-exported from :mod:`frpd_cli.candidates`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._frames import records
from .candidates import CandidateStage, graph_candidates, graph_infeasibility_reason
from .choice import (
    PlanSettings,
    SelectionOutcome,
    empty_plan,
    select_candidates,
    short_plan_reason,
)
from .dataset import TrainingSet
from .interpolation import GraphReach, interpolate_graph
from .plans import Plan, Recourse

__all__ = ["graph_infeasibility_reason", "graph_candidates", "select_on_graph", "graph_plans"]


def select_on_graph(training: TrainingSet, graph, x0: np.ndarray, codes0, raw0, settings: PlanSettings, *,
                    pool: np.ndarray | None = None, thetas=None, eigen=None, keep: bool = False,
                    model=None) -> tuple[list[SelectionOutcome], GraphReach]:
    """Select prototypes among the favourable rows the applicant can reach on the graph.

    The candidate stage with the graph (:class:`frpd_cli.candidates.CandidateStage`:
    the rows of :func:`frpd_cli.candidates.candidate_mask` with a finite path
    cost from the applicant within ``settings.max_cost`` and at most
    ``settings.max_hops`` moves on their shortest path), then
    :func:`frpd_cli.choice.select_candidates`: every selection method takes the
    shortest-path cost from the applicant as its proximity term, in place of the
    Euclidean distance (paper Section 5.2: "we choose the distance function as
    the shortest path on the actionability graph"); diversity still compares the
    Euclidean directions from the applicant to the candidates. ``"face"`` takes
    the ``k`` cheapest paths (ties by row index, identical rows once).
    ``model`` is needed only with a margin.

    Returns
    -------
    outcomes : list of SelectionOutcome
        One per theta.
    reach : GraphReach
        The applicant's shortest paths.
    """
    found = CandidateStage(training, settings, model=model, graph=graph, pool=pool).find(x0, codes0, raw0)
    return select_candidates(training, x0, found, settings, thetas=thetas, eigen=eigen, keep=keep), found.reach


def graph_plans(training: TrainingSet, graph, raw: pd.DataFrame, X0: np.ndarray, codes0, prob0: np.ndarray,
                ids: list[str], outcomes: list, *, method: str, settings: PlanSettings,
                found: list | None = None, model=None) -> list[Plan]:
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
        ``k``, ``endpoint``, ``max_cost`` and ``margin`` are used.
    found : list of Candidates or None, optional
        Each applicant's graph candidates (:meth:`frpd_cli.candidates.CandidateStage.find`):
        their shortest paths and the nodes a recourse may end at. Missing ones
        (None entries, or no list) are asked of the candidate stage again.
    model : frpd_cli.model.Model, optional
        Needed only to recompute end nodes with a margin.

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
    raw_rows = records(raw)
    drafts = []
    stage = None
    for i, out in enumerate(outcomes):
        if out is None or out.status != "ok":
            drafts.append(None)
            continue
        if found is not None and found[i] is not None:
            reach, end_nodes = found[i].reach, found[i].ends
        else:
            stage = stage or CandidateStage(training, settings, model=model, graph=graph)
            reach, end_nodes = stage.reach(X0[i], codes0.row(i)), stage.ends(X0[i], raw_rows[i])
        paths = interpolate_graph(reach, out.rows, columns, raw_rows[i], endpoint=settings.endpoint,
                                  favorable=end_nodes)
        paths.sort(key=lambda g: (g.cost, g.path[-1]))
        kept, ends, seen = [], set(), set()
        for g in paths:
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
            plans.append(empty_plan(ids[i], out, prob0[i], method, raw0,
                                         threshold=model.threshold))
            continue
        recourses = []
        for rank, g in enumerate(drafts[i], start=1):
            recourses.append(Recourse(rank=rank, features=g.features, changes=g.changes, cost=g.cost,
                                      probability=float(training.probability[g.path[-1]]), prototype=g.prototype,
                                      path=list(g.path), steps=list(g.steps)))
        reason = out.reason  # a selection note (e.g. exact ran quad instead), or why there were few candidates
        if len(out.rows) < k:                   # fewer candidates than K: the selection took every one
            lost = len(out.rows) - len(recourses)
            if lost > 0:
                why = ("their paths reach the same first favourable node as a cheaper one"
                       if settings.endpoint == "first-favorable" else "they end at the same row as a cheaper one")
                reason = f"{reason}; {lost} prototype(s) dropped because {why}"
            reason = short_plan_reason(len(recourses), k, reason)
        elif len(recourses) < k:
            lost = len(out.rows) - len(recourses)
            why = ("their paths reach the same first favourable node as a cheaper one"
                   if settings.endpoint == "first-favorable" else "they end at the same row as a cheaper one")
            note = f"{len(recourses)} distinct recourse(s) kept, need {k}"
            if lost > 0:
                note += f": {lost} prototype(s) dropped because {why}"
            else:
                note += ": fewer distinct reachable rows than asked for"
            reason = note if reason is None else f"{reason}; {note}"
        plans.append(Plan(ids[i], "ok" if recourses else "infeasible", reason, method, tuple(recourses), raw0,
                          partial=bool(recourses) and len(recourses) < k, shortfall=out.shortfall))
    return plans
