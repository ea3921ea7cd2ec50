"""From applicants to recourse plans: chunking, the linear scheme, streaming, selection tables.

The work is done chunk by chunk: every applicant of a chunk is encoded and
scored in one model call, prototypes are selected per applicant, and the
interpolation of all prototypes of the chunk shares each model call. The model
scores rows in fixed-shape blocks, so a plan does not depend on which other
applicants share its chunk. Chunks can be cut into tasks for a local process
pool or a Dask cluster; results come back in input order and do not depend on
the number of workers, the backend or the chunk size.

Two schemes (:attr:`PlanSettings.scheme`): ``"linear"`` selects among every
actionable favourable training row and interpolates along segments;
``"graph"`` attaches the applicant to an actionability graph, selects among the
favourable rows it can reach, and follows shortest paths (sequential recourse).
The ``"face"`` method (graph only) takes the K reachable favourable rows with
the cheapest paths. Both schemes take each applicant's candidates (and the
reason when there are too few) from one candidate stage
(:class:`frpd_cli.candidates.CandidateStage`, built once per chunk or
selection run); per-applicant choice lives in :mod:`frpd_cli.choice`, the graph
scheme in :mod:`frpd_cli.sequential`; this module re-exports both.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, is_dataclass, replace
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from ._frames import records
from .applicants import ApplicantChunk, normalise_types
from .candidates import Candidates, CandidateStage
from .choice import (
    PLAN_METHODS,
    SCHEMES,
    PlanSettings,
    SelectionOutcome,
    already_favorable_reason,
    changes,
    empty_plan,
    infeasibility_reason,
    select_candidates,
    select_for_applicant,
    short_plan_reason,
)
from .dataset import TrainingSet
from .directions import SAME_ADVICE
from .exceptions import InputError
from .interpolation import interpolate_linear
from .judge import annotate_plans, primary_model
from .plans import SELECTION_COLUMNS, Plan, Recourse, feature_header
from .population import population_of, with_largest_shifts
from .projection import candidate_mask, may_project
from .sequential import graph_candidates, graph_infeasibility_reason, graph_plans, select_on_graph
from .verification import verify_plans

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
    "raised_threshold",
    "short_plan_reason",
    "graph_plans",
    "plan_applicants",
    "plan_stream",
    "SelectionTable",
    "select_applicants",
]

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
    prob0 = np.asarray(primary_model(model).favorable_probability(raw), dtype=np.float64)
    # pool, constraints, margin and the graph's reachability: the candidate stage, shared by the chunk
    stage = CandidateStage(training, settings, model=model, graph=graph if settings.scheme == "graph" else None)
    raw_rows = records(raw)
    outcomes: list[SelectionOutcome | None] = []
    denied = stage.find_many(X0, codes0, raw_rows, [i for i in range(len(raw)) if prob0[i] < model.threshold])
    found: list[Candidates | None] = [denied.get(i) for i in range(len(raw))]
    if settings.proximity == "recourse":    # each candidate priced by its recourse, the chunk's segments batched
        from .recourse_cost import with_recourse_costs

        found = with_recourse_costs(training, raised_threshold(model, settings.margin), X0, raw, found)
    for i in range(len(raw)):
        outcomes.append(None if found[i] is None else select_candidates(training, X0[i], found[i], settings)[0])
    if settings.scheme == "graph":
        plans = graph_plans(training, graph, raw, X0, codes0, prob0, ids, outcomes, method=settings.label,
                            settings=settings, found=found, model=model)
    else:
        ends = [None if out is None else (training.X[out.rows] if out.ends is None else out.ends)
                for out in outcomes]
        plans = interpolate_plans(encoder, model, raw, X0, prob0, ids, outcomes, ends, method=settings.label,
                                  k=settings.k, tol=settings.tol, margin=settings.margin, sparsify=settings.sparsify,
                                  max_changes=settings.max_changes)
        plans = _direct_when_empty(training, model, plans, settings)
    return with_largest_shifts(plans, population_of(training))


#: The reason's note for an applicant left without a recourse under label support (no direct search then).
NO_DIRECT_WITH_SUPPORT = ("no direct search from the applicant: label support (--robust-support) asks for favourable "
                          "training rows around a recourse, and the candidate stage searched them all")


def _direct_when_empty(training: TrainingSet, model, plans: list[Plan], settings: PlanSettings) -> list[Plan]:
    """:func:`direct_when_empty` with a run's settings (nothing when ``settings.direct`` is off)."""
    if not settings.direct:
        return plans
    return direct_when_empty(training.encoder, model, plans, k=settings.k, margin=settings.margin,
                             max_changes=settings.max_changes)


def direct_when_empty(encoder, model, plans: list[Plan], *, k: int, margin: float = 0.0,
                      max_changes: int | None = None) -> list[Plan]:
    """Plans left infeasible by the training rows get the changes a direct search from the applicant's own row
    finds (:func:`frpd_cli.direct.direct_recourses`); their reason says so. Other plans are returned as they are.

    Shared by ``plan`` and ``interpolate`` (linear scheme), so that a selection interpolated later gives the plans
    ``plan`` gives; it needs the encoder and the model only, not the training rows.
    """
    empty = [i for i, p in enumerate(plans) if p.status == "infeasible" and not p.recourses]
    if not empty:
        return plans
    if getattr(model, "support", ()):
        # label support asks for favourable training rows around a recourse, and the candidate stage searched
        # them all; a search from the applicant's own row lands where there are none (Adult, 8 refits with
        # support: nothing for 87 of 87 such applicants, at 3.7 s of CPU, three times the plans' own)
        out = list(plans)
        for i in empty:
            reason = plans[i].reason
            out[i] = replace(plans[i], reason=f"{reason}; {NO_DIRECT_WITH_SUPPORT}" if reason else
                             NO_DIRECT_WITH_SUPPORT)
        return out
    from .direct import DIRECT_NOTE, direct_recourses

    names = list(encoder.schema.feature_names)
    raw_rows = [plans[i].applicant_features for i in empty]
    found = direct_recourses(encoder, raised_threshold(model, margin), raw_rows, max_changes=max_changes)
    pending = [([(cost, 0, {n: row[n] for n in names}) for cost, row in zip(f.costs, f.rows)], 0, 0, 0, 0)
               for f in found]
    X0 = encoder.encode(pd.DataFrame(raw_rows, columns=names), source="the applicants file")
    # with the recourses of the other plans: no two of a plan that are the same advice or one asking less of all
    pending = _drop_same_advice(encoder, X0, _drop_dominated(encoder, X0, [(
        [(c, s, feats, 0.0) for c, s, feats in p[0]], *p[1:]) for p in pending]), None)
    chosen = [sorted(p[0], key=lambda d: d[0])[:k] for p in pending]
    frame = pd.DataFrame([d[2] for c in chosen for d in c], columns=names)
    probability = iter(np.asarray(primary_model(model).favorable_probability(frame), dtype=np.float64).tolist()
                       if len(frame) else [])
    out = list(plans)
    for i, search, drafts in zip(empty, found, chosen):
        plan = plans[i]
        raw0 = plan.applicant_features
        if not drafts:
            n_mutable = sum(f.mutability != "immutable" for f in encoder.schema.features)
            out[i] = replace(plan, reason=_still_infeasible(plan.reason, search, max_changes, n_mutable))
            continue
        recourses = tuple(Recourse(rank=rank, features=features, changes=changes(raw0, features), cost=float(cost),
                                   probability=next(probability), prototype=-1)
                          for rank, (cost, _, features, _) in enumerate(drafts, start=1))
        why = plan.reason or "no recourse from the training rows"
        reason = f"{DIRECT_NOTE} ({why})"
        if len(recourses) < k:
            reason = short_plan_reason(len(recourses), k, reason)
        out[i] = replace(plan, status="ok", reason=reason, recourses=recourses,
                         partial=len(recourses) < k)
    return out


def _still_infeasible(reason: str | None, search, max_changes: int | None, n_mutable: int) -> str:
    """The reason of a plan the direct search found nothing for either: what it searched."""
    from .direct import BEAM, GRID, PAIR_CAP

    what = (f"a direct search from the applicant found no change within the rules that is accepted: no single "
            f"change (every allowed level of each mutable feature, each numeric one on {GRID} values a side out to "
            "its bounds, which may miss a narrower accepted window between two of them)")
    if max_changes == 1:
        return f"{reason}; {what}; more changes were not searched (--max-changes 1)"
    if search.pairs_searched < search.pairs_total:
        what += (f", no pair of changes among the first {search.pairs_searched} of {search.pairs_total} pairs of "
                 f"features (every allowed level, {GRID // 2} numeric values a side; at most {PAIR_CAP} rows)")
    else:
        what += f", no pair of changes (every allowed level, {GRID // 2} numeric values a side)"
    depth = n_mutable if max_changes is None else min(max_changes, n_mutable)
    if depth >= 3:
        what += f", and a beam search of {BEAM} rows adding one change at a time up to {depth} found none"
    return what if not reason else f"{reason}; {what}"


def raised_threshold(model, margin: float):
    """``model`` judging rows at ``model.threshold + margin`` (the same object when ``margin`` is 0).

    Raises
    ------
    InputError
        ``threshold + margin`` is not below 1 (no probability could reach it).
    """
    if not margin:
        return model
    level = float(model.threshold) + float(margin)
    if not level < 1.0:
        raise InputError(f"The threshold plus the margin must be below 1 (no probability can reach it). Got "
                         f"threshold {model.threshold:g} + margin {margin:g} = {level:g}; choose a smaller "
                         "--margin.")
    if is_dataclass(model):
        return replace(model, threshold=level)
    return _RaisedThreshold(model, level)


class _RaisedThreshold:
    """A model-like object judged at another threshold (for models that are not :class:`Model` dataclasses)."""

    def __init__(self, model, threshold: float):
        self._model = model
        self.threshold = threshold

    def favorable_probability(self, rows) -> np.ndarray:
        return self._model.favorable_probability(rows)

    def is_favorable(self, rows) -> np.ndarray:
        return np.asarray(self._model.favorable_probability(rows)) >= self.threshold

    def __getattr__(self, name):
        return getattr(self._model, name)


def interpolate_plans(encoder, model, raw: pd.DataFrame, X0: np.ndarray, prob0: np.ndarray, ids: list[str],
                      outcomes: list, ends: list, *, method: str, k: int, tol: float = 1e-3, margin: float = 0.0,
                      sparsify: bool = True, max_changes: int | None = None) -> list[Plan]:
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
    margin : float, default=0.0
        Recourses stop only where the probability is ``>= model.threshold + margin``.
    sparsify : bool, default=True
        Return the features the model does not need to the applicant's values
        (:func:`frpd_cli.sparsify.sparsify_recourses`).
    max_changes : int, optional
        Recourses changing more features are sparsified further or dropped.

    Notes
    -----
    A prototype whose decoded row the model does not predict favourable (possible
    only for end points that are not training rows as scored, or below the
    margin) yields no recourse; the plan's reason says so. Recourses that
    sparsification makes identical are kept once; with ``sparsify`` a recourse
    another one of its plan dominates (:func:`frpd_cli.directions.dominated`)
    and that nothing replaced is left out; then a recourse that is the same
    advice as a cheaper one of its plan (:func:`frpd_cli.directions.same_advice`)
    falls back on its plain recourse when that is other advice, else it is left
    out (the reason says how many of each).
    """
    judge = raised_threshold(model, margin)
    seg_app, seg_rows, seg_X, seg_proj = [], [], [], []
    for i, out in enumerate(outcomes):
        if out is not None and out.status == "ok":
            seg_app.extend([i] * len(out.rows))
            seg_rows.extend(out.rows.tolist())
            seg_X.append(ends[i])
            seg_proj.extend([False] * len(out.rows) if out.projected is None else out.projected.tolist())
    seg_app = np.asarray(seg_app, dtype=np.int64)
    XK = np.vstack(seg_X) if seg_X else np.zeros((0, X0.shape[1]))
    seg_raw = raw.iloc[seg_app].reset_index(drop=True)
    result = interpolate_linear(encoder, judge, X0[seg_app], XK, seg_raw, tol=tol)
    kept = result.found
    plain = None
    if len(seg_app) and (sparsify or max_changes is not None):
        from .sparsify import sparsify_recourses

        sparse = sparsify_recourses(encoder, judge, X0[seg_app], XK, seg_raw, result.rows, result.probability,
                                    found=result.found, max_changes=max_changes, tol=tol, groups=seg_app)
        plain = _Fallback(encoder, result, X0[seg_app], max_changes)
        sparse = _other_when_repeated(encoder, judge, X0[seg_app], XK, seg_raw, seg_app, sparse, plain,
                                      max_changes=max_changes, tol=tol)
        result = replace(result, rows=sparse.rows, probability=sparse.probability)
        kept = sparse.kept
        if sparsify:
            result = _minimal(encoder, judge, X0[seg_app], seg_raw, seg_app, result, kept, plain)
            from .directions import other_directions
            from .sparsify import COST_FACTOR

            result = other_directions(encoder, judge, X0[seg_app], seg_raw, seg_app, result, result.found & kept,
                                      tol=tol, max_changes=max_changes, cost_limit=COST_FACTOR * plain.costs)
    if len(seg_app):
        Zr = encoder.encode(result.rows, source="the recourses")
        costs = np.linalg.norm(Zr - X0[seg_app], axis=1)
    else:
        costs = np.zeros(0)
    recourse_rows = records(result.rows)

    cursor = 0
    names = list(encoder.schema.feature_names)
    raw_rows = records(raw)
    pending = []                                   # per applicant: None (no plan to make) or its drafts and notes
    for out in outcomes:
        if out is None or out.status != "ok":
            pending.append(None)
            continue
        drafts, seen, n_lost, n_long = [], set(), 0, 0
        for j in range(len(out.rows)):
            s = cursor + j
            if not result.found[s]:
                n_lost += 1
                continue
            if not kept[s]:
                n_long += 1
                continue
            features = {n: recourse_rows[s][n] for n in names}
            key = tuple(str(features[n]) for n in names)
            cost, probability = float(costs[s]), float(result.probability[s])
            if key in seen and plain is not None and plain.usable[s]:
                # sparsification led two prototypes to one recourse: this one keeps its plain recourse if distinct
                features, cost, probability = plain.recourse(s, names)
                key = tuple(str(features[n]) for n in names)
            if key in seen:
                continue
            seen.add(key)
            drafts.append((cost, s, features, probability))
        cursor += len(out.rows)
        pending.append((drafts, n_lost, n_long, 0, 0))
    if sparsify:
        pending = _drop_dominated(encoder, X0, pending)
    pending = _drop_same_advice(encoder, X0, pending, plain)

    plans = []
    for i, out in enumerate(outcomes):
        raw0 = raw_rows[i]
        if pending[i] is None:
            plans.append(empty_plan(ids[i], out, prob0[i], method, raw0,
                                    threshold=model.threshold))
            continue
        drafts, n_lost, n_long, n_dominated, n_alike = pending[i]
        notes = [out.reason] if out.reason else []  # a selection note (e.g. exact ran quad instead)
        drafts.sort(key=lambda d: d[0])        # rank 1 the cheapest; ties keep the prototypes' order (stable)
        recourses = [Recourse(rank=rank, features=features, changes=changes(raw0, features), cost=cost,
                              probability=probability, prototype=int(seg_rows[s]), projected=bool(seg_proj[s]))
                     for rank, (cost, s, features, probability) in enumerate(drafts, start=1)]
        n_same = len(out.rows) - n_lost - n_long - n_dominated - n_alike - len(recourses)
        if n_same:
            notes.append(f"{n_same} prototype(s) led to the same recourse as another one")
        if n_alike:
            notes.append(f"{n_alike} recourse(s) dropped: the same advice as a cheaper recourse of the plan "
                         f"(the same changes, numeric targets less than {SAME_ADVICE:.0%} of the feature's span apart)")
        if n_dominated:
            notes.append(f"{n_dominated} recourse(s) dropped: another recourse of the plan asks less of every "
                         "feature it changes")
        if n_lost:
            at = f" at probability >= {judge.threshold:g} (--threshold plus --margin)" if margin else ""
            notes.append(f"{n_lost} prototype(s) are not predicted favourable{at} once decoded")
        if n_long:
            notes.append(f"{n_long} recourse(s) dropped: they change more than {max_changes} feature(s) even "
                         "after sparsification (--max-changes)")
        reason = "; ".join(notes) or None
        if len(notes) > bool(out.reason):
            reason += f"; {len(recourses)} distinct recourse(s) kept"
        if len(out.rows) < k:                  # fewer candidates than K: the selection took every one
            reason = short_plan_reason(len(recourses), k, reason)
        status = "ok" if recourses else "infeasible"
        plans.append(Plan(ids[i], status, reason, method, tuple(recourses), raw0,
                          partial=bool(recourses) and len(recourses) < k, pruning=out.pruning,
                          shortfall=out.shortfall))
    return plans


def _drop_dominated(encoder, X0: np.ndarray, pending: list) -> list:
    """Each applicant's drafts without those another draft dominates (:func:`frpd_cli.directions.dominated`),
    their number in the last place of ``(drafts, n_lost, n_long, n_dropped)``. One encoding for the batch."""
    from .directions import dominated

    owner = [i for i, p in enumerate(pending) if p is not None for _ in p[0]]
    if not owner:
        return pending
    names = list(encoder.schema.feature_names)
    frame = pd.DataFrame([d[2] for p in pending if p is not None for d in p[0]])[names]
    owner = np.asarray(owner, dtype=np.int64)
    Z = encoder.encode(frame, source="the recourses")
    drop = dominated(encoder, Z, X0[owner], owner, np.ones(len(owner), dtype=bool))
    out, at = [], 0
    for p in pending:
        if p is None:
            out.append(None)
            continue
        drafts, n_lost, n_long, _, n_alike = p
        mine = drop[at:at + len(drafts)]
        at += len(drafts)
        out.append(([d for d, gone in zip(drafts, mine) if not gone], n_lost, n_long, int(mine.sum()), n_alike))
    return out


def _drop_same_advice(encoder, X0: np.ndarray, pending: list, plain) -> list:
    """Each applicant's drafts without two that are the same advice (:func:`frpd_cli.directions.same_advice`).

    Drafts are taken cheapest first (ties: the prototypes' order); one that is the same advice as a draft already
    taken is replaced by its segment's plain recourse (``plain``, when usable), which then waits its turn at its
    own cost and is taken if it is other advice than, and not dominated by, every draft taken; else it is left
    out. So no two drafts kept are alike, and of alike ones the cheapest stays. Their number goes
    in the last place of ``(drafts, n_lost, n_long, n_dominated, n_alike)``. Two encodings for the batch.
    """
    import heapq

    from .directions import _alike, _dominates

    owner = [i for i, p in enumerate(pending) if p is not None for _ in p[0]]
    if not owner:
        return pending
    names = list(encoder.schema.feature_names)
    drafts = [d for p in pending if p is not None for d in p[0]]
    first = {}                                    # applicant -> position of its first draft
    for at, i in enumerate(owner):
        first.setdefault(i, at)
    owner = np.asarray(owner, dtype=np.int64)
    frame = pd.DataFrame([d[2] for d in drafts])[names]
    Z = encoder.encode(frame, source="the recourses")
    numeric = [j for j, f in enumerate(encoder.schema.features) if not f.is_categorical]

    def values_of(frame):
        return {j: pd.to_numeric(frame[names[j]], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                for j in numeric}

    values = values_of(frame)
    # which drafts are alike to another draft of theirs: only those applicants need the careful pass
    a, b = [], []
    for i in dict.fromkeys(owner.tolist()):
        n = len(pending[i][0])
        for x, y in itertools.combinations(range(first[i], first[i] + n), 2):
            a.append(x)
            b.append(y)
    if not a:
        return pending
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    hit = _alike(encoder, Z, X0[owner], values, a, b, share=SAME_ADVICE)
    if not hit.any():
        return pending
    affected = sorted(set(owner[a[hit]].tolist()))
    # the plain recourses the drafts of those applicants may fall back on (those that differ from the draft)
    spare = {}
    if plain is not None:
        for i in affected:
            for at in range(first[i], first[i] + len(pending[i][0])):
                s = drafts[at][1]
                if plain.usable[s]:
                    features, cost, probability = plain.recourse(s, names)
                    if any(str(features[n]) != str(drafts[at][2][n]) for n in names):
                        spare[at] = (cost, s, features, probability)
    pool = list(drafts) + [spare[at] for at in sorted(spare)]
    spare_at = {at: len(drafts) + k for k, at in enumerate(sorted(spare))}
    if spare:
        extra = pd.DataFrame([spare[at][2] for at in sorted(spare)])[names]
        Z = np.vstack([Z, encoder.encode(extra, source="the recourses")])
        more = values_of(extra)
        values = {j: np.concatenate([values[j], more[j]]) for j in numeric}
        owner = np.concatenate([owner, owner[sorted(spare)]])
    out = list(pending)
    for i in affected:
        drafts_i, n_lost, n_long, n_dominated, _ = pending[i]
        heap = [(float(d[0]), at - first[i], at) for at, d in enumerate(drafts[first[i]:first[i] + len(drafts_i)],
                                                                        start=first[i])]
        heapq.heapify(heap)
        kept: list[int] = []
        n_alike, order = 0, len(drafts_i)
        while heap:
            _, _, at = heapq.heappop(heap)
            if kept:
                ks = np.asarray(kept, dtype=np.int64)
                same = _alike(encoder, Z, X0[owner], values, ks, np.full(ks.size, at, dtype=np.int64),
                              share=SAME_ADVICE).any()
            else:
                same = False
            if not same and at >= len(drafts) and kept:  # a plain recourse another one kept dominates is no option
                same = _dominates(encoder, Z, X0[owner], ks, np.full(ks.size, at, dtype=np.int64)).any()
            if not same:
                kept.append(at)
            elif at in spare_at:                  # a draft: its plain recourse waits its turn
                heapq.heappush(heap, (float(pool[spare_at[at]][0]), order, spare_at[at]))
                order += 1
            else:
                n_alike += 1
        out[i] = ([pool[at] for at in kept], n_lost, n_long, n_dominated, n_alike)
    return out


def _other_when_repeated(encoder, judge, X0, XK, raw0, seg_app, sparse, plain, *, max_changes, tol):
    """Replace a sparse recourse that repeats an earlier one of its applicant by one that changes other features.

    The repeated segment is interpolated again towards its prototype with the features of the repeated
    recourse held at the applicant's values, and sparsified; the result is used when it is accepted, changes
    no more features than the segment's plain recourse and costs at most ``COST_FACTOR`` times as much
    (the bound of :mod:`frpd_cli.sparsify`). Otherwise the caller
    falls back to the plain recourse, or merges the repeat. Depends only on each applicant's own segments.
    """
    from .sparsify import COST_FACTOR, changed_features, sparsify_recourses

    names = list(encoder.schema.feature_names)
    keys = [tuple(str(v) for v in row) for row in sparse.rows.loc[:, names].itertuples(index=False, name=None)]
    repeated, seen = [], {}
    for s in range(len(seg_app)):
        if not sparse.kept[s]:
            continue
        mine = seen.setdefault(int(seg_app[s]), set())
        if keys[s] in mine:
            repeated.append(s)
        mine.add(keys[s])
    if not repeated:
        return sparse
    rep = np.asarray(repeated, dtype=np.int64)
    Zs = encoder.encode(sparse.rows.iloc[rep], source="the recourses")
    held = changed_features(encoder, Zs, X0[rep])
    columns = np.zeros((len(rep), encoder.n_features_out), dtype=bool)
    for j in range(len(names)):
        columns[:, int(encoder.offsets[j]):int(encoder.offsets[j + 1])] = held[:, [j]]
    XK2 = np.where(columns, X0[rep], XK[rep])
    raw2 = raw0.iloc[rep].reset_index(drop=True)
    moved = np.abs(XK2 - X0[rep]).sum(axis=1) > 0
    other = interpolate_linear(encoder, judge, X0[rep], XK2, raw2, tol=tol)
    found = other.found & moved
    alt = sparsify_recourses(encoder, judge, X0[rep], XK2, raw2, other.rows, other.probability, found=found,
                             max_changes=max_changes, tol=tol)
    Za = encoder.encode(alt.rows, source="the recourses")
    cost = np.linalg.norm(Za - X0[rep], axis=1)
    n_plain = changed_features(encoder, np.where(plain.usable[rep][:, None], encoder.encode(
        pd.DataFrame([plain.records[s] for s in rep])[names], source="the recourses"), X0[rep]), X0[rep]).sum(axis=1)
    better = alt.kept & found & (cost <= COST_FACTOR * plain.costs[rep] + 1e-12) & \
        (alt.n_changes <= np.maximum(n_plain, 1))
    if max_changes is not None:
        better &= alt.n_changes <= max_changes
    if not better.any():
        return sparse
    rows = sparse.rows.copy()
    probability = sparse.probability.copy()
    n_changes = sparse.n_changes.copy()
    take = rep[better]
    for c in names:
        values = alt.rows[c].to_numpy()[better]
        if rows[c].dtype != values.dtype:
            rows[c] = rows[c].astype(object) if rows[c].dtype.kind not in "iuf" or values.dtype.kind not in "iuf" \
                else rows[c].astype(np.result_type(rows[c].dtype, values.dtype))
        rows.loc[take, c] = values
    probability[take] = alt.probability[better]
    n_changes[take] = alt.n_changes[better]
    return replace(sparse, rows=rows, probability=probability, n_changes=n_changes)


def _minimal(encoder, judge, X0, raw0, seg_app, result, kept, plain):
    """Every recourse 1-minimal (:func:`frpd_cli.sparsify.minimal_recourses`), and so is the plain recourse a
    segment falls back on when its minimal recourse repeats an earlier one of its applicant."""
    from .sparsify import minimal_recourses

    minimal = minimal_recourses(encoder, judge, X0, raw0, result.rows, result.probability, found=result.found & kept,
                                groups=seg_app)
    names = list(encoder.schema.feature_names)
    keys = [tuple(str(v) for v in row) for row in minimal.rows.loc[:, names].itertuples(index=False, name=None)]
    repeated, seen = [], {}
    for s in np.flatnonzero(result.found & kept):
        mine = seen.setdefault(int(seg_app[s]), set())
        if keys[s] in mine and plain.usable[s]:
            repeated.append(s)
        mine.add(keys[s])
    if repeated:
        rep = np.asarray(repeated, dtype=np.int64)
        frame = pd.DataFrame([plain.records[s] for s in rep])[names]
        again = minimal_recourses(encoder, judge, X0[rep], raw0.iloc[rep], frame, plain.probability[rep])
        plain.replace(encoder, rep, again.rows, again.probability, X0[rep])
    return replace(result, rows=minimal.rows, probability=minimal.probability)


class _Fallback:
    """The plain (unsparsified) recourses of a batch, for prototypes whose sparse recourse repeats another's."""

    def __init__(self, encoder, result, X0: np.ndarray, max_changes: int | None):
        from .sparsify import changed_features

        self.records = records(result.rows)
        Z = encoder.encode(result.rows.loc[result.found], source="the recourses") if result.found.any() else X0[:0]
        Zp = X0.copy()
        Zp[result.found] = Z
        self.costs = np.linalg.norm(Zp - X0, axis=1)
        self.probability = result.probability
        self.usable = result.found.copy()
        if max_changes is not None:
            self.usable &= changed_features(encoder, Zp, X0).sum(axis=1) <= max_changes

    def replace(self, encoder, segs: np.ndarray, rows: pd.DataFrame, probability: np.ndarray,
                X0: np.ndarray) -> None:
        """Segments ``segs`` fall back on ``rows`` (with ``probability``) instead of their plain recourses."""
        self.probability = np.asarray(self.probability, dtype=np.float64).copy()
        self.costs = self.costs.copy()
        for s, row in zip(segs.tolist(), records(rows)):
            self.records[s] = row
        self.probability[segs] = probability
        self.costs[segs] = np.linalg.norm(encoder.encode(rows, source="the recourses") - X0, axis=1)

    def recourse(self, s: int, names: list) -> tuple[dict, float, float]:
        """Features, cost and probability of segment ``s``'s plain recourse (see ``usable``)."""
        return {n: self.records[s][n] for n in names}, float(self.costs[s]), float(self.probability[s])


def _run_chunk(training, model, applicants, ids, settings, graph, invalid=None):
    """Plan one chunk and verify every recourse before it leaves (rows in ``invalid``: ``invalid-input``)."""
    plans = _chunk_plans(training, model, applicants, ids, settings, graph, invalid)
    plans = annotate_plans(model, plans, training.schema.feature_names)   # each model's probability
    return verify_plans(training.encoder, model, plans, margin=settings.margin)


def _chunk_plans(training, model, applicants, ids, settings, graph, invalid):
    """Plan one chunk; rows listed in ``invalid`` (local row -> reason) get status ``invalid-input``."""
    if not invalid:
        return plan_chunk(training, model, normalise_types(training.encoder, applicants), ids, settings, graph)
    keep = [i for i in range(len(applicants)) if i not in invalid]
    planned = iter(plan_chunk(training, model,
                              normalise_types(training.encoder, applicants.iloc[keep].reset_index(drop=True)),
                              [ids[i] for i in keep], settings, graph) if keep else [])
    names = list(training.schema.feature_names)
    rows = records(applicants.loc[:, names])
    return [Plan(ids[i], "invalid-input", invalid[i], settings.label, (), rows[i]) if i in invalid
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
                task_applicants: int | None = None) -> Iterator[list[Plan]]:
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
        Worker processes (``loky``) or local Dask workers (``dask``); capped at
        the CPUs this process may use (:func:`frpd_cli.backends.cap_jobs`, one
        warning).
    backend : {"loky", "dask"}
        See :func:`frpd_cli.backends.map_ordered`.
    scheduler : str, optional
        Address of an existing Dask scheduler: work always goes to it.
    task_applicants : int, optional
        Applicants per task [default: :data:`TASK_APPLICANTS`]: smaller tasks let the caller report progress
        sooner (a chunk is yielded once its tasks are done) at the price of more fixed costs; plans do not
        depend on it.

    Notes
    -----
    A plan depends only on its applicant and the inputs, never on the other
    applicants of its chunk or on the worker that computed it (the model scores
    rows in fixed-shape blocks, :meth:`frpd_cli.model.Model.favorable_probability`),
    so the output is identical for any ``n_jobs``, backend and chunk size.

    How many workers run: a local pool (``loky``, or a Dask cluster started
    here) costs time to start, so it is used only when the run is long enough
    to gain from it: ``min(n_jobs, n_applicants // MIN_APPLICANTS_PER_WORKER)``
    workers (at least 1, which plans in this process, without a pool). The
    stream is read ahead until that is known (``n_jobs`` is first capped at the
    CPU count). With ``scheduler``, the cluster's worker threads count as the
    workers. Tasks sent to workers are cut from the stream independently of
    its chunks (:func:`_tasks`): :data:`TASK_APPLICANTS` applicants each, and
    the end of the stream is cut so that the workers finish together (large
    tasks, then a small one per worker: :func:`_tail_sizes`); each worker
    receives the training set, model, graph and settings once, not with every
    task. Without a pool, this process plans the same tasks (a small
    ``--chunk-size`` does not multiply the fixed costs of a batch); results
    are regrouped into the input's chunks either way. BLAS and OpenMP run on
    one thread in every process, this one included.
    """
    from .backends import BACKENDS, cap_jobs, forks_workers, one_thread, open_workers

    if backend not in BACKENDS:
        raise InputError(f"The 'backend' option must be one of {', '.join(BACKENDS)}. Got {backend!r} instead.")
    settings.validate()
    raised_threshold(model, settings.margin)     # threshold + margin must be reachable
    _check_graph(training, settings, graph)
    n_jobs = cap_jobs(n_jobs)
    chunks = iter(chunks)
    ahead: list[ApplicantChunk] = []
    if scheduler is None:
        need = n_jobs * MIN_APPLICANTS_PER_WORKER[backend] if n_jobs > 1 else 0
        seen = 0
        while seen < need:
            chunk = next(chunks, None)
            if chunk is None:
                n_jobs = max(1, min(n_jobs, seen // MIN_APPLICANTS_PER_WORKER[backend]))
                break
            ahead.append(chunk)
            seen += len(chunk.ids)
    stream = itertools.chain(ahead, chunks)
    shared = (training, model, settings, graph)
    sizes: deque = deque()          # applicants of every chunk read, in order: results are regrouped by them
    if n_jobs == 1 and scheduler is None:
        with one_thread():
            results = (_run_task(shared, *task) for task in _tasks(stream, 1, sizes, task_applicants))
            yield from _regrouped(results, sizes)
        return
    if backend == "loky" and scheduler is None and forks_workers():
        # forked workers inherit the pool's compact rows and grouping: one copy shared by all, computed once
        CandidateStage(training, settings, model=model, graph=graph if settings.scheme == "graph" else None).prepare()
    with open_workers(n_jobs, backend, scheduler=scheduler, shared=shared) as workers:
        results = workers.map(_run_task, _tasks(stream, workers.n_workers, sizes, task_applicants))
        yield from _regrouped(results, sizes)


def _regrouped(results: Iterator[list], sizes: deque) -> Iterator[list]:
    """The plans of ``results`` (one list per task, in order) regrouped into the input's chunks (``sizes``)."""
    done: list[Plan] = []
    for plans in results:
        done.extend(plans)
        while sizes and len(done) >= sizes[0]:
            n = sizes.popleft()
            yield done[:n]
            del done[:n]
    while sizes:                    # empty chunks at the end of the stream
        yield done[:sizes.popleft()]


def _tasks(stream: Iterator[ApplicantChunk], n_workers: int, sizes: deque,
           size: int | None = None) -> Iterator[tuple]:
    """Cut a stream of chunks into tasks ``(frame, ids, invalid)``; append each chunk's length to ``sizes``.

    Tasks do not follow the chunks: consecutive applicants are gathered into
    tasks of :data:`TASK_APPLICANTS` (a task can span chunks, and a chunk
    several tasks), so that small ``--chunk-size`` values do not make small
    tasks (each task pays fixed costs: a few model calls and sparsification
    rounds whatever its size). The stream is read ahead by ``2 * n_workers``
    tasks; once its end is in sight, the applicants left are cut as
    :func:`_tail_sizes` says: equal tasks for one worker; for several, large
    tasks and then a small one per worker, so that the workers finish together.
    ``size`` replaces :data:`TASK_APPLICANTS`.
    """
    size = size or TASK_APPLICANTS
    ahead: deque = deque()          # chunks read and not yet fully cut
    first = 0                       # applicants of ahead[0] already in tasks
    n_ahead, exhausted = 0, False   # applicants read and not yet in tasks
    tail: deque = deque()           # sizes of the last tasks, once the end is known

    def take(n: int) -> tuple:
        nonlocal first, n_ahead
        frames, ids, invalid, got = [], [], {}, 0
        while got < n:
            c = ahead[0]
            m = min(n - got, len(c.ids) - first)
            frames.append(c.frame.iloc[first:first + m])
            ids.extend(c.ids[first:first + m])
            for i, reason in (c.invalid or {}).items():
                if first <= i < first + m:
                    invalid[got + i - first] = reason
            got += m
            first += m
            if first == len(c.ids):
                ahead.popleft()
                first = 0
        n_ahead -= n
        frame = frames[0] if len(frames) == 1 else pd.concat(frames)
        return frame.reset_index(drop=True), ids, invalid or None

    while True:
        while not exhausted and n_ahead < 2 * n_workers * size:
            chunk = next(stream, None)
            if chunk is None:
                exhausted = True
                tail.extend(_tail_sizes(n_ahead, n_workers, size))
            else:
                sizes.append(len(chunk.ids))
                if len(chunk.ids):
                    ahead.append(chunk)
                    n_ahead += len(chunk.ids)
        if not n_ahead:
            return
        yield take(tail.popleft() if exhausted else size)


def _tail_sizes(n: int, n_workers: int, size: int | None = None) -> list[int]:
    """Sizes of the tasks for the last ``n`` applicants of a stream planned on ``n_workers``.

    One worker: as few tasks as :data:`TASK_APPLICANTS` allows, of equal size (sizes differ by at most one,
    larger first). Several workers: large equal tasks, as many as :data:`TASK_APPLICANTS` needs rounded up to a
    multiple of the workers, then one small task per worker holding :data:`TAIL_SHARE` of the applicants between
    them (at least :data:`MIN_TASK_APPLICANTS` each). The workers start the large tasks together; whichever
    finishes first takes a small one, so the small tasks absorb the difference in the workers' speeds, and the
    parent writes a small task's results after the last worker is done. Each task costs a few model calls
    whatever its size (about 60 ms of CPU on Adult, ``docs/benchmarks.md``), so there are few of them. A run of
    at most ``2 * n_workers * MIN_TASK_APPLICANTS`` applicants is cut into equal tasks of at least that minimum,
    at most two per worker (and one per worker when that leaves each at least half the minimum). ``size``
    replaces :data:`TASK_APPLICANTS` (and caps the minimum).
    """
    size = size or TASK_APPLICANTS
    if n <= 0:
        return []
    if n_workers <= 1:
        count = -(-n // size)
        base, extra = divmod(n, count)
        return [base + (i < extra) for i in range(count)]
    least = min(MIN_TASK_APPLICANTS, size)
    if n <= 2 * n_workers * least:
        # 200 applicants on two workers: two tasks of 100, not one of 200 and an idle worker
        count = max(1, min(2 * n_workers, n // least), min(n_workers, -(-n // least)))
        base, extra = divmod(n, count)
        return [base + (i < extra) for i in range(count)]
    small = min(size, max(least, math.ceil(n * TAIL_SHARE / n_workers)))
    head = n - n_workers * small
    count = -(-head // size)
    count = -(-count // n_workers) * n_workers
    base, extra = divmod(head, count)
    return [base + (i < extra) for i in range(count)] + [small] * n_workers


#: Applicants planned together (a task, in this process or sent to a worker), whatever the input's chunks:
#: enough that the fixed costs of a task (model calls, sparsification rounds: about 60 ms of CPU on Adult, as
#: much as 30 applicants) are shared by many rows (on Adult, 2,000 applicants in 16 tasks of 125 cost 0.9 s more
#: CPU than in 2 tasks of 1,000). The last tasks of a run may be smaller, down to MIN_TASK_APPLICANTS (see
#: _tail_sizes).
TASK_APPLICANTS = 1024
MIN_TASK_APPLICANTS = 128

#: The share of a parallel run's last applicants left to the small tasks that end it, one per worker (see
#: _tail_sizes): on two workers, 2,000 applicants are tasks of 850, 850, 150 and 150. Guided scheduling (each task
#: a fraction of what is left: 500, 375, 282, 211 and four of 158) balanced the workers as well but paid the fixed
#: cost of four more tasks: 4-6% more wall time at 1,000-2,000 applicants in a simulation with this machine's
#: per-task cost and speed variations (benchmarks/sim_tasks.py).
TAIL_SHARE = 0.15

#: A pool is started only for runs of at least this many applicants per worker (see plan_stream).
MIN_APPLICANTS_PER_WORKER = {"loky": 96, "dask": 1000}


def _run_task(shared, frame, ids, invalid) -> list[Plan]:
    training, model, settings, graph = shared
    return _run_chunk(training, model, frame, ids, settings, graph, invalid)


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
        row, objective``, every feature's raw value (headed as
        :func:`frpd_cli.plans.feature_header` with ``SELECTION_COLUMNS``
        heads it: ``feature:status`` for a feature named ``status``), ``projected`` when the
        immutable policy can project (``project``; ``auto`` with a numeric
        immutable feature), and ``objective_gap``.
    status : DataFrame
        ``applicant, theta, status, reason, n_candidates, objective_gap`` per
        applicant and theta; ``objective_gap`` is the objective minus a proven
        lower bound (0: proven optimal), empty when no bound is known.
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
    prob0 = np.asarray(primary_model(model).favorable_probability(raw), dtype=np.float64)
    stage = CandidateStage(training, settings, model=model, graph=graph)
    raw_rows = records(raw)
    projected_column = may_project(training.schema, settings.immutable_policy) and graph is None
    headers = {n: feature_header(n, reserved=SELECTION_COLUMNS) for n in names}
    renamed = any(h != n for n, h in headers.items())
    proto_rows, status_rows, screening, eigen_arrays = [], [], [], {}
    pending = []  # positions in proto_rows of prototypes that are training rows
    n_reused = 0
    keep = save_eigen or reuse_eigen is not None
    # candidates found ahead, 256 applicants at a time (their moved candidates share a model call); with
    # --proximity recourse also priced (the graph scheme's, each holding its shortest paths, one at a time)
    ahead, ahead_to = {}, 0
    for i in range(len(raw)):
        if graph is not None and settings.proximity != "recourse":
            ahead = {} if prob0[i] >= model.threshold else {i: stage.find(X0[i], codes0.row(i), raw_rows[i])}
        elif i >= ahead_to:
            ahead_to = min(i + 256, len(raw))
            denied = [j for j in range(i, ahead_to) if prob0[j] < model.threshold]
            if settings.proximity == "recourse":
                from .recourse_cost import find_priced

                ahead = find_priced(stage, raised_threshold(model, settings.margin), X0, codes0, raw, raw_rows,
                                    denied)
            else:
                ahead = stage.find_many(X0, codes0, raw_rows, denied)
        stored = None
        if reuse_eigen is not None and f"values_{i}" in reuse_eigen:
            stored = Eigen(values=reuse_eigen[f"values_{i}"].astype(np.float64),
                           vectors=reuse_eigen[f"vectors_{i}"].astype(np.float64))
        if prob0[i] >= model.threshold:
            outcomes = [SelectionOutcome("already-favorable", already_favorable_reason(prob0[i], model.threshold),
                                         np.zeros(0, dtype=np.int64)) for _ in thetas]
        else:
            found = ahead[i]
            outcomes = select_candidates(training, X0[i], found, settings, thetas=thetas, eigen=stored, keep=keep)
            if stored is not None and outcomes[0].candidates is not None:
                if np.array_equal(outcomes[0].candidates, reuse_eigen[f"candidates_{i}"]):
                    n_reused += 1
                else:  # other candidates than when stored: the decomposition does not apply
                    outcomes = select_candidates(training, X0[i], found, settings, thetas=thetas, keep=keep)
        first = outcomes[0]
        if save_eigen and first.status == "ok" and first.eigen is not None:
            eigen_arrays[f"values_{i}"] = np.asarray(first.eigen.values, dtype=np.float32)
            eigen_arrays[f"vectors_{i}"] = np.asarray(first.eigen.vectors, dtype=np.float32)
            eigen_arrays[f"candidates_{i}"] = np.asarray(first.candidates, dtype=np.int64)
        for theta, sel in zip(thetas, outcomes):
            gap = "" if sel.objective_gap is None else sel.objective_gap
            status_rows.append({"applicant": ids[i], "theta": theta, "status": sel.status,
                                "reason": sel.reason or "", "n_candidates": sel.n_candidates, "objective_gap": gap})
            if sel.screening is not None:
                screening.append((i, theta, sel.screening))
            if sel.status != "ok":
                row = {"applicant": ids[i], "status": sel.status, "method": settings.method, "theta": theta,
                       "rank": "", "row": "", "objective": "", **{headers[n]: "" for n in names}}
                if projected_column:
                    row["projected"] = ""
                row["objective_gap"] = ""
                proto_rows.append(row)
                continue
            if sel.ends is not None:
                rep = np.full(len(sel.rows), i)
                values = decode_from(encoder, sel.ends, X0[rep], raw.iloc[rep].reset_index(drop=True))
                values = records(values.rename(columns=headers) if renamed else values)
            else:  # training rows: their raw values are looked up once for all applicants, below
                values = [None] * len(sel.rows)
            for rank, (r, feats) in enumerate(zip(sel.rows, values), start=1):
                row = {"applicant": ids[i], "status": sel.status, "method": settings.method, "theta": theta,
                       "rank": rank, "row": int(r), "objective": sel.objective, **(feats or {})}
                if feats is None:
                    pending.append(len(proto_rows))
                if projected_column:
                    row["projected"] = bool(sel.projected[rank - 1]) if sel.projected is not None else False
                row["objective_gap"] = gap
                proto_rows.append(row)
        if progress:
            progress(i + 1, len(raw))
    if pending:
        wanted = np.unique([proto_rows[p]["row"] for p in pending])
        found = training.frame.iloc[wanted]
        found = dict(zip(wanted.tolist(), records(found.rename(columns=headers) if renamed else found)))
        for p in pending:
            proto_rows[p].update(found[proto_rows[p]["row"]])
    columns = ["applicant", "status", "method", "theta", "rank", "row", "objective", *headers.values()]
    if projected_column:
        columns.append("projected")
    columns.append("objective_gap")
    return SelectionTable(
        prototypes=pd.DataFrame(proto_rows, columns=columns),
        status=pd.DataFrame(status_rows, columns=["applicant", "theta", "status", "reason", "n_candidates",
                                                  "objective_gap"]),
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
