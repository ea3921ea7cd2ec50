"""The candidate stage: which training rows may be an applicant's prototypes, and why the others may not.

Both interpolation schemes take their candidate prototypes from this stage
and from nowhere else; selection (:mod:`frpd_cli.choice`,
:mod:`frpd_cli.selection`) and interpolation (:mod:`frpd_cli.planning`,
:mod:`frpd_cli.sequential`) never test a prototype's constraints or the graph's
reachability themselves (linear interpolation still clips a recourse's changed
values into the ranges and stops at threshold + margin). For one applicant
:meth:`CandidateStage.find` runs, in order:

1. **Pool** (:meth:`TrainingSet.pool`): the rows the model predicts favourable
   at ``threshold + margin`` (``--margin``), and labelled favourable too with
   ``--candidates labeled``. Computed once per run.
2. **Constraints**, under the immutable-feature policy (linear scheme):

   - ``filter``: a pool row is a candidate only if it already shares the
     applicant's immutable values, sits on the allowed side of every monotone
     feature, keeps every ranged feature (``--range``) inside its range or at
     the applicant's value, and differs from the applicant
     (:func:`candidate_mask`). ``--vary`` makes every other feature immutable,
     so it is the immutable rule. Of pool rows with the same values (large
     training sets repeat rows), the first is the candidate and its copies are
     not (:func:`first_copies`): two copies lead to the same recourse, so a plan
     of K prototypes must be K different rows, and the selection's work follows
     the distinct rows, not the repeats.
   - ``project``: the other pool rows also get the applicant's immutable
     values, their monotone features are clipped to the allowed side of the
     applicant's, and the projected row is decoded and re-predicted at the same
     threshold; those still favourable (and inside the ranges) become candidates
     too, flagged as projected (:func:`candidate_set`). Recourses built from them
     never change an immutable feature, but their prototypes are not real cases
     any more: they may sit off the data manifold.
   - ``auto`` (the default) filters on categorical immutable features
     (prototypes come from the applicant's own group) and projects on numeric
     ones (age); without numeric immutable features it is exactly ``filter``
     (:func:`effective_policy`).

   On data where few favourable rows share the applicant's exact immutable
   values (Bank: ``previous`` and ``campaign`` counts) the filter leaves nothing
   to plan with; projection is the remedy.
3. **Reachability** (graph scheme; the policy is always the strict filter, the
   graph's edges obey the same rule): the applicant is attached to the graph
   and Dijkstra runs from it (:func:`frpd_cli.interpolation.reach_from`, within
   ``--max-cost``); candidates are the filtered rows it reaches within
   ``--max-hops`` moves, with their path costs as the proximity term
   (:attr:`Candidates.proximity`), and the nodes a path may end at are the
   favourable rows inside the ranges (:attr:`Candidates.ends`).
4. **Counts and reasons**: when fewer than K candidates remain, how many pool
   rows each constraint rules out (:func:`exclusions`) and the sentence every
   output shows for the applicant (:attr:`Candidates.reason`: the ``reason``
   of plan records and of ``status.csv``; its ``n_candidates`` column is
   ``len(candidates)``). With none the applicant is ``infeasible``; with 1 to
   K - 1 the plan holds the recourses they lead to and is ``partial``. The
   counts the reason is written from travel with it (:class:`Shortfall`, on
   the selection outcome and the plan), so that what reports on a run reads
   them instead of parsing the reason's words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .constraints import ConstraintCodes, actionable_mask
from .dataset import TrainingSet
from .exceptions import InputError
from .interpolation import GraphReach, reach_from

__all__ = [
    "IMMUTABLE_POLICIES",
    "Candidates",
    "CandidateStage",
    "CandidateSet",
    "Exclusion",
    "Shortfall",
    "candidate_mask",
    "candidate_positions",
    "first_copies",
    "candidate_set",
    "moved_candidates",
    "moved_candidates_many",
    "favourable_edges",
    "has_move_bounds",
    "project_rows",
    "effective_policy",
    "may_project",
    "within_ranges",
    "outside_ranges",
    "relative_outside",
    "exclusions",
    "constraint_breakdown",
    "infeasibility_reason",
    "graph_candidates",
    "graph_infeasibility_reason",
    "nearest_rows",
]

IMMUTABLE_POLICIES = ("filter", "project", "auto")
#: Moved candidates (:func:`moved_candidates`): at most this many pool rows, the nearest to the applicant, are
#: moved into its bounds and re-predicted.
MOVED_NEAREST = 256


# ------------------------------------------------------------------------------------------------ the stage


@dataclass(frozen=True, eq=False)
class Candidates:
    """The candidate prototypes of one applicant, and why there are not more.

    Attributes
    ----------
    rows : ndarray of int64, shape (n_candidates,)
        Training row each candidate comes from: rows that satisfy the
        constraints as they are (ascending), then projected rows.
    X : ndarray of shape (n_candidates, n_features_out) or None
        The encoded candidates when the policy may project (projected ones
        after projection); None when they are the training rows ``rows`` as
        they are.
    projected : ndarray of bool, shape (n_candidates,) or None
        Whether each candidate was moved onto the applicant's immutable values
        (None with ``X``).
    proximity : ndarray of float64, shape (n_candidates,) or None
        Graph scheme: the shortest-path cost from the applicant to each
        candidate (the proximity term of every selection method).
    reach : GraphReach or None
        Graph scheme: the applicant's shortest paths.
    ends : ndarray of bool, shape (n_rows,) or None
        Graph scheme: the nodes a recourse may end at (favourable at the margin,
        inside every range or at the applicant's value).
    n_pool : int
        Rows in the pool before the applicant's constraints.
    reason : str or None
        Why there are fewer than K candidates (None when there are enough).
    shortfall : Shortfall or None
        With ``reason``: the counts it is written from (None otherwise).
    cut : tuple or None
        ``(n_found, nearest_left_out)`` when ``--max-candidates`` kept only the
        nearest of ``n_found`` candidates: the distance of the nearest one left
        out (every left-out candidate is at least that far).
    """

    rows: np.ndarray
    X: np.ndarray | None = None
    projected: np.ndarray | None = None
    proximity: np.ndarray | None = None
    reach: GraphReach | None = None
    ends: np.ndarray | None = None
    n_pool: int = 0
    reason: str | None = None
    shortfall: Shortfall | None = None
    cut: tuple | None = None

    def __len__(self) -> int:
        return int(self.rows.size)

    @property
    def exclusions(self) -> tuple:
        """With ``reason``: how many rows each constraint rules out, largest first (empty otherwise)."""
        return () if self.shortfall is None else self.shortfall.exclusions


class CandidateStage:
    """The candidate rule of one run: pool, immutable policy, ranges, margin and (graph scheme) reachability.

    Parameters
    ----------
    training : TrainingSet
    settings : frpd_cli.choice.PlanSettings
        ``k``, ``candidates``, ``immutable_policy``, ``margin``, ``max_hops``
        and ``max_cost`` are used.
    model : frpd_cli.model.Model, optional
        Its threshold (plus ``settings.margin``) defines favourable; it
        re-predicts projected rows. Needed by the ``project`` and ``auto``
        policies and by a margin.
    graph : frpd_cli.graph.Graph, optional
        The actionability graph: the graph scheme (candidates must be reachable;
        the policy is then the strict filter).
    pool : ndarray of bool, shape (n_rows,), optional
        Overrides the pool of ``settings.candidates`` (already at the margin).

    Notes
    -----
    Built once per run or chunk: the pool and its grouping by immutable values
    (:func:`candidate_mask`) are then shared by every applicant.
    """

    def __init__(self, training: TrainingSet, settings, *, model=None, graph=None, pool: np.ndarray | None = None):
        self.training = training
        self.settings = settings
        self.model = model
        self.graph = graph
        margin = float(getattr(settings, "margin", 0.0) or 0.0)
        if margin and model is None:
            raise InputError("A margin needs the model: favourable then means probability >= threshold + margin.")
        #: the threshold favourable rows reach (None: the model's, as the training set was scored)
        self.level = float(model.threshold) + margin if margin else None
        self.favorable = training.favorable if self.level is None else training.pool("predicted", threshold=self.level)
        self.pool = training.pool(settings.candidates, threshold=self.level) if pool is None else pool
        self.policy = "filter" if graph is not None else effective_policy(training.schema, settings.immutable_policy)
        if getattr(settings, "max_candidates", None) is not None and self.policy != "filter":
            raise InputError(f"--max-candidates needs the filter rule for immutable features (the '{self.policy}' "
                             "policy projects rows, so its candidates are not training rows to index). Pass "
                             "--immutable-policy filter, or leave out --max-candidates.")

    def prepare(self) -> None:
        """Compute now what every applicant's filter reads: the pool's compact rows, their grouping by immutable
        values, the first of each row's copies, the columns of relative limits and the ranges (remembered on the
        training set). Called before worker processes are forked, they share these pages instead of each
        gathering and grouping the pool again."""
        training = self.training
        if self.graph is None and self.policy == "filter":
            rows, _ = training.pool_rows(self.pool)
            _pool_index(training, self.pool, rows, distinct=True)
            training.encoded_rows(rows[:1])            # the table of each row's position in the compact rows
        elif self.graph is None:
            first_copies(training, self.pool)
        outside_ranges(training)
        for f in _relative_features(training):
            _float_column(training, f.name)

    def find(self, x0: np.ndarray, codes0: ConstraintCodes, raw0) -> Candidates:
        """The candidates of one applicant.

        Parameters
        ----------
        x0 : ndarray of shape (n_features_out,)
            The encoded applicant.
        codes0 : ConstraintCodes
            The applicant's constraint codes (one row).
        raw0 : dict or Series
            The applicant's raw values.

        Returns
        -------
        candidates : Candidates
        """
        return self.find_many(np.asarray(x0)[None, :], codes0, [raw0], [0])[0]

    def find_many(self, X0: np.ndarray, codes0: ConstraintCodes, raw_rows: list, applicants) -> dict:
        """The candidates of several applicants; those short of K share one model call for their moved
        candidates (:func:`moved_candidates_many`).

        Parameters
        ----------
        X0 : ndarray of shape (n_applicants, n_features_out)
            The encoded applicants.
        codes0 : ConstraintCodes
            Their constraint codes (one row per applicant).
        raw_rows : list of dict or Series
            Their raw values.
        applicants : iterable of int
            The applicants (rows of ``X0``) to find candidates for.

        Returns
        -------
        found : dict of int to Candidates
            Keyed by applicant; each the same as :meth:`find` of that applicant alone.
        """
        applicants = list(applicants)
        if self.graph is not None:
            return {i: self._on_graph(X0[i], codes0.row(i), raw_rows[i]) for i in applicants}
        k = self.settings.k
        found = {i: self._as_they_are(X0[i], codes0.row(i), raw_rows[i]) for i in applicants}
        short = [i for i in applicants if len(found[i]) < k] if (
            self.model is not None and has_move_bounds(self.training.schema)) else []
        if short:          # too few within the move bounds: the other rows moved into them, if still favourable
            raws = [raw_rows[i] for i in short]
            edges = favourable_edges(self.training.encoder, self.model, raws)
            moved = moved_candidates_many(self.training, self.model, X0[short], [codes0.row(i) for i in short], raws,
                                          self.pool, [found[i].rows for i in short], policy=self.policy,
                                          level=self.level, edges=edges)
            for i, extra in zip(short, moved):
                found[i] = _with_moved(self.training, found[i], extra)
            # still short: unless the rule is the strict filter, the favourable rows of the other groups too,
            # projected onto the applicant's immutable values (as --immutable-policy project does)
            wider = [a for a, i in enumerate(short) if len(found[i]) < k] if (
                self.settings.immutable_policy != "filter" and self.policy != "project") else []
            if wider:
                moved = moved_candidates_many(
                    self.training, self.model, X0[[short[a] for a in wider]], [codes0.row(short[a]) for a in wider],
                    [raws[a] for a in wider], self.pool, [found[short[a]].rows for a in wider], policy="project",
                    level=self.level, edges={name: e[wider] for name, e in edges.items()})
                for a, extra in zip(wider, moved):
                    found[short[a]] = _with_moved(self.training, found[short[a]], extra)
        short = set(short)
        return {i: found[i] if len(found[i]) >= k else self._explain(found[i], codes0.row(i), raw_rows[i],
                                                                     moved=i in short)
                for i in applicants}

    def _as_they_are(self, x0: np.ndarray, codes0: ConstraintCodes, raw0) -> Candidates:
        """Linear scheme: the candidates before any is moved into the move bounds."""
        training, pool = self.training, self.pool
        if self.policy == "filter":
            pool_rows, at = candidate_positions(training, x0, codes0, pool, raw0, distinct=True)
            limit = getattr(self.settings, "max_candidates", None)
            cut = None
            if limit is not None and at.size > limit:
                n_found = int(at.size)
                at, nearest_left_out = _nearest_positions(training, pool, at, x0, limit, left_out=True)
                cut = (n_found, nearest_left_out)
            return Candidates(rows=pool_rows[at], n_pool=int(pool_rows.size), cut=cut)
        if self.model is None:
            raise InputError(f"The '{self.policy}' immutable policy needs the model to re-predict projected rows.")
        cset = candidate_set(training, self.model, x0, codes0, raw0, pool, policy=self.policy, level=self.level)
        return Candidates(rows=cset.rows, X=cset.X, projected=cset.projected, n_pool=int(pool.sum()))

    def _explain(self, found: Candidates, codes0: ConstraintCodes, raw0, *, moved: bool) -> Candidates:
        """``found`` (fewer than K) with the reason and the counts of what ruled the other rows out."""
        parts = exclusions(self.training, codes0, self.pool, raw0, copies=_distinct_pool_rows(self.training, self.pool))
        copies = _copies_left_out(self.training, self.pool, found)
        if copies:
            parts.append(Exclusion(copies, "copy", "", f"{copies} repeat another candidate row"))
            parts.sort(key=lambda part: -part.count)
        reason = _shortfall(found.n_pool, len(found), self.settings.k, parts)
        if self.policy != "filter":
            reason += ("; even after projecting the others onto the applicant's immutable values"
                       if self.policy == "project"
                       else "; even after projecting the others onto the applicant's numeric immutable values")
        if moved:
            reason += "; even after moving the others within --max-move of the applicant and re-predicting them"
        return _short(found, self._with_margin(reason), Shortfall(tuple(parts), found.n_pool))

    def reach(self, x0: np.ndarray, codes0: ConstraintCodes) -> GraphReach:
        """Graph scheme: the applicant's shortest paths (within ``settings.max_cost``)."""
        training = self.training
        return reach_from(self.graph, training.X, training.codes, x0, codes0, max_cost=self.settings.max_cost)

    def ends(self, x0: np.ndarray, raw0=None) -> np.ndarray:
        """Graph scheme: nodes a recourse may end at: favourable (at the margin), and inside every ``--range``
        (or keeping the applicant's value there).

        Returns
        -------
        ends : ndarray of bool, shape (n_rows,)
        """
        training = self.training
        if training.schema is None or not any(f.has_range for f in training.schema.features):
            return self.favorable
        return self.favorable & within_ranges(training, x0, raw0)

    def _on_graph(self, x0: np.ndarray, codes0: ConstraintCodes, raw0) -> Candidates:
        training, settings, pool = self.training, self.settings, self.pool
        reach = self.reach(x0, codes0)
        actionable = candidate_mask(training, x0, codes0, pool, raw0)
        rows = _reachable(actionable, reach, settings.max_hops)
        found = Candidates(rows=rows, proximity=reach.dist[rows], reach=reach, ends=self.ends(x0, raw0),
                           n_pool=int(pool.sum()))
        if len(found) >= settings.k:
            return found
        reason, shortfall = _graph_shortfall(training, self.graph, reach, x0, codes0, pool, len(found), settings,
                                             raw0, n_actionable=int(actionable.sum()))
        return _short(found, self._with_margin(reason), shortfall)

    def _with_margin(self, reason: str) -> str:
        """``reason`` with one parenthesis saying what favourable means, when more than the model's threshold."""
        notes = []
        if hasattr(self.model, "describe"):     # several models to satisfy (frpd_cli.judge)
            notes.append(self.model.describe())
        if self.level is not None:
            margin = f"probability >= {self.level:g}: --threshold plus --margin"
            notes.append(f"with {margin}" if notes else f"favourable here means {margin}")
        return f"{reason} ({', '.join(notes)})" if notes else reason


def _short(found: Candidates, reason: str, shortfall: Shortfall) -> Candidates:
    return Candidates(rows=found.rows, X=found.X, projected=found.projected, proximity=found.proximity,
                      reach=found.reach, ends=found.ends, n_pool=found.n_pool, reason=reason, shortfall=shortfall)


def _reachable(actionable: np.ndarray, reach: GraphReach, max_hops: int | None) -> np.ndarray:
    mask = actionable & np.isfinite(reach.dist)
    if max_hops is not None:
        mask &= reach.hops <= max_hops
    return np.flatnonzero(mask)


def _with_moved(training: TrainingSet, found: Candidates, moved: "CandidateSet") -> Candidates:
    """``found`` and, after them, the candidates moved into the move bounds (flagged projected)."""
    if not len(moved):
        return found
    X = training.X[found.rows] if found.X is None else found.X
    fresh = _first_of_each(moved.X, np.ones(len(moved), dtype=bool), {row.tobytes() for row in X})
    moved = CandidateSet(rows=moved.rows[fresh], X=moved.X[fresh], projected=moved.projected[fresh],
                         raw=moved.raw.iloc[fresh].reset_index(drop=True))
    projected = np.zeros(len(found), dtype=bool) if found.projected is None else found.projected
    return Candidates(rows=np.concatenate([found.rows, moved.rows]), X=np.vstack([X, moved.X]),
                      projected=np.concatenate([projected, moved.projected]), n_pool=found.n_pool)


# ------------------------------------------------------------------------------------------------ policies


def _numeric_immutables(schema) -> list[str]:
    return [f.name for f in schema.features if f.mutability == "immutable" and f.is_numeric]


def effective_policy(schema, policy: str) -> str:
    """The policy that runs: ``auto`` without numeric immutable features is ``filter``."""
    if policy == "auto" and not _numeric_immutables(schema):
        return "filter"
    return policy


def may_project(schema, policy: str) -> bool:
    """Whether plans under ``policy`` can hold projected recourses (the csv output then has the column): the
    ``project`` and ``auto`` policies, and move bounds (``--max-move``: :func:`moved_candidates`)."""
    return effective_policy(schema, policy) in ("project", "auto") or has_move_bounds(schema)


# ------------------------------------------------------------------------------------------------ ranges


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
        # the absolute part of each range (limits relative to the applicant: :func:`relative_outside`)
        coded = training.__dict__.get("_level_codes", {})
        cached = [(training.encoder.block(f.name), ~_in_absolute_range(f, training.frame[f.name], coded.get(f.name)))
                  for f in training.schema.features if f.has_range]
        object.__setattr__(training, "_outside_ranges", cached)
    return cached


def _in_absolute_range(f, column, coded=None) -> np.ndarray:
    """``_absolute(f).in_range`` of a training column; with the column's level codes (``(codes, levels)``, from a
    pool: :func:`frpd_cli.pool.pool_level_codes`) each level is judged once and the rows take their level's
    verdict (the same values: the column is ``levels[codes]``, code -1 a missing value)."""
    absolute = _absolute(f)
    if coded is None or not f.is_categorical:
        return absolute.in_range(column.to_numpy())
    codes, levels = coded
    values = np.empty(len(levels) + 1, dtype=object)
    values[:-1] = levels
    values[-1] = np.nan
    return absolute.in_range(values)[np.asarray(codes)]


def _absolute(f):
    from dataclasses import replace

    return replace(f, rel_low=None, rel_high=None, max_move=None) if f.is_relative else f


def _relative_features(training: TrainingSet) -> list:
    return [] if training.schema is None else [f for f in training.schema.features if f.is_relative]


def relative_outside(training: TrainingSet, raw0, rows: np.ndarray | None = None, *,
                     features: list | None = None) -> list[tuple]:
    """Per feature with limits relative to the applicant (``--range COL=+0:+12``): ``(encoded columns, rows
    outside the applicant's bounds)``, the per-applicant part of :func:`outside_ranges`.

    Parameters
    ----------
    raw0 : dict or Series
        The applicant's raw values.
    rows : ndarray of int, optional
        Only these training rows (default: every row).
    features : list of Feature, optional
        Only these features (default: every feature with relative limits).

    Returns
    -------
    outside : list of (slice, ndarray of bool of shape (n_rows,) or (len(rows),))
    """
    found = []
    for f in _relative_features(training) if features is None else features:
        if raw0 is None:
            raise ValueError(f"The limits of '{f.name}' are relative to the applicant: pass the applicant's raw row.")
        values = _float_column(training, f.name)
        values = values if rows is None else values[rows]
        low, high = f.bounds(float(raw0[f.name]))
        found.append((training.encoder.block(f.name), ~((values >= low) & (values <= high))))
    return found


def _float_column(training: TrainingSet, name: str) -> np.ndarray:
    """The training rows' values of a numeric feature as float64, remembered per training set (every applicant's
    relative limits read them)."""
    cached = training.__dict__.get("_float_columns")
    if cached is None:
        cached = {}
        object.__setattr__(training, "_float_columns", cached)
    if name not in cached:
        cached[name] = np.asarray(training.frame[name].to_numpy(), dtype=np.float64)
    return cached[name]


def level_bounded(schema) -> list:
    """The ordinal features with a move bound (``--max-move``: at most ``max_levels`` levels either way)."""
    return [] if schema is None else [f for f in schema.features
                                      if f.kind == "ordinal" and f.max_levels is not None and f.mutability != "immutable"]


def level_positions(f, values) -> np.ndarray:
    """The position of each raw value of ordinal feature ``f`` in its declared order (-1: not a level)."""
    from .encoding import category_key

    rank = {category_key(level): i for i, level in enumerate(f.levels)}
    return np.fromiter((rank.get(category_key(v), -1) for v in values), dtype=np.int64, count=len(values))


def _level_column(training: TrainingSet, f) -> np.ndarray:
    """The training rows' level positions of ordinal feature ``f`` (:func:`level_positions`), remembered per
    training set (every applicant's move bound reads them)."""
    cached = training.__dict__.get("_level_columns")
    if cached is None:
        cached = {}
        object.__setattr__(training, "_level_columns", cached)
    if f.name not in cached:
        codes, uniques = pd.factorize(training.frame[f.name], use_na_sentinel=True)
        found = np.append(level_positions(f, list(uniques)), -1)          # a missing value (code -1): no level
        cached[f.name] = found[codes]
    return cached[f.name]


def _applicant_level(training: TrainingSet, f, x0: np.ndarray) -> int:
    """The applicant's level position of ordinal feature ``f``, read from its encoded row (one-hot block)."""
    return int(np.argmax(np.asarray(x0)[training.encoder.block(f.name)]))


def levels_outside(training: TrainingSet, x0: np.ndarray, rows: np.ndarray | None = None) -> list[tuple]:
    """Per ordinal feature with a move bound: ``(feature, rows moving it by more than its max_levels)``, over
    ``rows`` (training row numbers; default every row)."""
    found = []
    for f in level_bounded(training.schema):
        column = _level_column(training, f)
        column = column if rows is None else column[rows]
        found.append((f, f.levels_beyond(column, _applicant_level(training, f, x0))))
    return found


def within_ranges(training: TrainingSet, x0: np.ndarray, raw0=None) -> np.ndarray:
    """Training rows whose every ranged feature is inside its range or equal to the applicant's value.

    Parameters
    ----------
    raw0 : dict or Series, optional
        The applicant's raw values (needed by limits relative to the applicant).

    Returns
    -------
    ok : ndarray of bool, shape (n_rows,)
    """
    ok = np.ones(training.n_rows, dtype=bool)
    for block, outside in [*outside_ranges(training), *relative_outside(training, raw0)]:
        rows = np.flatnonzero(outside)
        same = np.all(training.X[rows, block] == x0[block], axis=1)
        ok[rows[~same]] = False
    for _, far in levels_outside(training, x0):      # a level farther than the bound is never the applicant's
        ok &= ~far
    return ok


# ------------------------------------------------------------------------------------------------ the filter


def candidate_mask(training: TrainingSet, x0: np.ndarray, codes0, pool: np.ndarray, raw0=None) -> np.ndarray:
    """Training rows that may serve as prototypes for the applicant as they are (the ``filter`` rule).

    Rows in the pool whose move from the applicant is actionable (same
    immutable values, monotone features on the allowed side), whose ranged
    features are inside their ranges or at the applicant's value, and that
    differ from the applicant in the encoded space.

    Returns
    -------
    mask : ndarray of bool, shape (n_rows,)

    Notes
    -----
    The pool's rows are grouped once by their immutable values (remembered for
    the last pool, like :meth:`TrainingSet.pool_rows`), so an applicant's
    filter reads its own group only: the immutable test becomes one lookup and
    the monotone tests run on the group's rows. The result is the same rows as
    testing every constraint on every pool row.
    """
    rows, at = candidate_positions(training, x0, codes0, pool, raw0)
    mask = np.zeros(pool.shape[0], dtype=bool)
    mask[rows[at]] = True
    return mask


def candidate_positions(training: TrainingSet, x0: np.ndarray, codes0, pool: np.ndarray,
                        raw0=None, *, distinct: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The rows of :func:`candidate_mask` as positions in the pool's compact arrays, without a mask over the rows;
    with ``distinct``, the first of each row's copies only (:func:`first_copies`), found without reading the
    copies.

    Returns
    -------
    pool_rows : ndarray of int64, shape (n_pool,)
        The pool's row numbers (:meth:`TrainingSet.pool_rows`).
    at : ndarray of int64
        Ascending positions in ``pool_rows``: the candidates are ``pool_rows[at]``.

    Notes
    -----
    Costs the applicant's immutable group, not the training set: no array of ``n_rows`` is made.
    """
    rows, X_rows = training.pool_rows(pool)         # check the (usually much smaller) pool only
    index = _pool_index(training, pool, rows, distinct=distinct)
    at = index.group(codes0)
    for j, column in enumerate(index.monotone):
        at = at[(column[at] - codes0.monotone[0, j]) * index.direction[j] >= 0]
    x0 = np.asarray(x0)
    for block, outside in outside_ranges(training):
        out = outside[rows[at]]
        if out.any():
            out &= ~np.all(X_rows[at, block] == x0[block], axis=1)
            at = at[~out]
    for f in _relative_features(training):
        ((block, out),) = relative_outside(training, raw0, rows[at], features=[f])
        if out.any():
            out &= ~np.all(X_rows[at, block] == x0[block], axis=1)
            at = at[~out]
    for _, far in levels_outside(training, x0, rows[at]):
        if far.any():
            at = at[~far]
    same = _equal_rows(X_rows, at, x0, first=_first_column(training, pool, X_rows))
    if same.size:
        at = np.setdiff1d(at, same, assume_unique=True)
    return rows, np.asarray(at, dtype=np.int64)


def nearest_rows(training: TrainingSet, pool: np.ndarray, rows: np.ndarray, x0: np.ndarray, m: int) -> np.ndarray:
    """The ``m`` candidates of ``rows`` nearest to the applicant (``--max-candidates``), ascending.

    Nearest by Euclidean distance in the encoded space, ties by row number. The distances are computed from
    the pool's compact copy of its rows (:meth:`TrainingSet.pool_rows`), each row's on its own (the same value
    whatever the other rows), and only the rows at or below the ``m``-th smallest distance are sorted.

    Parameters
    ----------
    pool : ndarray of bool, shape (n_rows,)
        The pool ``rows`` come from.
    rows : ndarray of int
        The applicant's candidates (training rows of :func:`candidate_mask`, ascending, all in ``pool``).
    x0 : ndarray of shape (n_features_out,)
    m : int
        How many to keep (``1 <= m < len(rows)``).

    Returns
    -------
    rows : ndarray of int64, shape (m,)

    Notes
    -----
    ``O(n_candidates p)``: one pass over the candidates' encoded rows, instead of the selection's several.
    """
    pool_rows = training.pool_rows(pool)[0]
    at = _nearest_positions(training, pool, np.searchsorted(pool_rows, rows), x0, m)
    return pool_rows[at].astype(np.int64)


def _nearest_positions(training: TrainingSet, pool: np.ndarray, at: np.ndarray, x0: np.ndarray,
                       m: int, *, left_out: bool = False):
    """:func:`nearest_rows` on ascending positions in the pool's compact arrays (positions, ascending); with
    ``left_out``, also the smallest distance among the positions not kept (``m < len(at)``)."""
    X_rows = training.pool_rows(pool)[1]
    diff = np.take(X_rows, at, axis=0)
    diff -= np.asarray(x0, dtype=np.float64)
    distance = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    kth = np.partition(distance, m - 1)[m - 1]
    near = np.flatnonzero(distance <= kth)                   # the m nearest and every row tied with the m-th
    order = np.lexsort((at[near], distance[near]))[:m]       # positions ascend with the rows: ties by row
    kept = near[order]
    positions = np.sort(at[kept]).astype(np.int64)
    if not left_out:
        return positions
    others = np.ones(at.size, dtype=bool)
    others[kept] = False
    return positions, float(distance[others].min())


#: The pool grouping's combined codes stay below this (renumbered when one more column would pass it).
_CODE_LIMIT = 2 ** 62


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
            # one integer key per row from the columns' value codes (mixed radix): a 1-D sort instead of a sort of
            # rows (np.unique(axis=0) takes about 1 s on the 200,000 favourable rows of a million); 0.0 and -0.0
            # are one value of a column, as the lookup by tuple treats them
            values = immutable[usable]
            code = np.zeros(usable.size, dtype=np.int64)
            span = 1                                    # the codes so far are below span
            for j in range(values.shape[1]):
                levels, inverse = np.unique(values[:, j], return_inverse=True)
                if span * levels.size >= _CODE_LIMIT:
                    # renumbered: codes stay below the row count, whatever the columns
                    code = np.unique(code, return_inverse=True)[1].reshape(-1)
                    span = int(code.max()) + 1
                code = code * levels.size + inverse.reshape(-1)
                span *= levels.size
            # one stable sort: each group's positions ascending, its first position first
            order = np.argsort(code, kind="stable")
            ordered = code[order]
            bounds = np.concatenate(([0], np.flatnonzero(ordered[1:] != ordered[:-1]) + 1, [ordered.size]))
            for g in range(bounds.size - 1):
                at = order[bounds[g]:bounds[g + 1]]
                key = tuple(float(v) for v in values[at[0]].tolist())
                self.groups[key] = usable[at]
        self.empty = np.zeros(0, dtype=np.int64)

    def first_only(self, first: np.ndarray) -> "_PoolIndex":
        """The same grouping of the positions flagged in ``first`` only (the first of each row's copies)."""
        out = object.__new__(_PoolIndex)
        out.monotone, out.direction, out.n_immutable = self.monotone, self.direction, self.n_immutable
        out.empty = np.zeros(0, dtype=np.int64)
        if self.n_immutable == 0:
            out.everything = np.flatnonzero(first)
        else:
            out.groups = {key: at[first[at]] for key, at in self.groups.items()}
        return out

    def group(self, codes0) -> np.ndarray:
        """Positions (ascending) of the pool rows with exactly the applicant's immutable values."""
        if self.n_immutable == 0:
            return self.everything
        key = tuple(codes0.immutable[0].tolist())
        if any(k != k for k in key):
            return self.empty
        return self.groups.get(key, self.empty)


def _pool_index(training: TrainingSet, pool: np.ndarray, rows: np.ndarray, *, columns=None,
                distinct: bool = False) -> _PoolIndex:
    """The :class:`_PoolIndex` of ``pool`` (grouped by every immutable column, or by ``columns`` of them; with
    ``distinct``, of the first of each row's copies only), remembered for the last pool asked about."""
    key = None if columns is None else tuple(columns)
    cached = _pool_cache(training, pool)
    if distinct:
        if ("distinct", key) not in cached:
            cached[("distinct", key)] = _pool_index(training, pool, rows, columns=columns).first_only(
                first_copies(training, pool)[0])
        return cached[("distinct", key)]
    if key not in cached:
        codes = training.codes
        if key is not None:
            codes = ConstraintCodes(immutable=codes.immutable[:, list(key)], monotone=codes.monotone,
                                    direction=codes.direction)
        cached[key] = _PoolIndex(codes, rows)
    return cached[key]


def _pool_cache(training: TrainingSet, pool: np.ndarray) -> dict:
    """What the candidate filter keeps about the last pool asked about (by identity), on the training set."""
    cached = training.__dict__.get("_pool_index")
    if cached is None or cached[0] is not pool:
        cached = (pool, {})
        object.__setattr__(training, "_pool_index", cached)
    return cached[1]


def _equal_rows(X: np.ndarray, rows: np.ndarray, x0: np.ndarray, *, first: np.ndarray | None = None) -> np.ndarray:
    """The rows among ``rows`` (positions in ``X``) equal to ``x0`` in every column (usually none: one or two
    columns rule out almost every row, so the check touches about one column of the candidates, not all of them).

    ``first``: ``X[:, 0]`` as a contiguous array, read instead of the column of ``X`` (one value per row of a
    compact array instead of one cache line per row of ``X``).
    """
    start = 0
    if first is not None and X.shape[1] and rows.size:
        rows = rows[first[rows] == x0[0]]
        start = 1
    for j in range(start, X.shape[1]):
        if rows.size == 0:
            break
        rows = rows[X[rows, j] == x0[j]]
    return rows


def _first_column(training: TrainingSet, pool: np.ndarray, X_rows: np.ndarray) -> np.ndarray | None:
    """The first column of the pool's compact rows ``X_rows`` (:meth:`TrainingSet.pool_rows` of ``pool``) as a
    contiguous array, remembered with the pool."""
    if X_rows.shape[1] == 0:
        return None
    cached = _pool_cache(training, pool)
    if "first_column" not in cached:
        cached["first_column"] = np.ascontiguousarray(X_rows[:, 0])
    return cached["first_column"]


def first_copies(training: TrainingSet, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which rows of the pool's compact arrays (:meth:`TrainingSet.pool_rows`) are the first pool row with their
    values, and how many pool rows have the values of each. Remembered with the pool's grouping.

    Rows are compared by their raw feature values, which fix everything a constraint reads (encoded row, codes,
    ranges): the copies of a row are candidates for the same applicants as the row itself, so keeping the first
    (the lowest row number) of each candidate's copies is keeping the first of the pool's.

    Returns
    -------
    first : ndarray of bool, shape (n_pool,)
    copies : ndarray of int64, shape (n_pool,)
        At a first row, the pool rows with its values (itself included); 0 elsewhere.
    """
    cached = _pool_cache(training, pool)
    if "copies" not in cached:
        rows, _ = training.pool_rows(pool)
        first = np.zeros(rows.size, dtype=bool)
        copies = np.zeros(rows.size, dtype=np.int64)
        if rows.size:
            known = training.__dict__.get("_copy_of")         # a pool's (copy_of over every row)
            names = list(training.schema.feature_names)
            group = np.take(known, rows) if known is not None else copy_of(training.frame[names].iloc[rows])
            # whatever the numbering of the groups: the first row of each and its size
            _, at, size = np.unique(group, return_index=True, return_counts=True)
            first[at] = True
            copies[at] = size
        cached["copies"] = (first, copies)
    return cached["copies"]


def copy_of(features: pd.DataFrame) -> np.ndarray:
    """Each row's first copy: the lowest row number with the same values in every column of ``features`` (a row
    that repeats no earlier row is its own; a missing value equals a missing value). A pool keeps it
    (:mod:`frpd_cli.pool`), so that runs find the copies among the favourable rows (:func:`first_copies`) without
    grouping text columns again (about 0.9 s for the 1.7 million favourable rows of ten million).

    Returns
    -------
    first : ndarray of int32 (int64 from 2**31 rows), shape (n_rows,)
    """
    n_rows = len(features)
    dtype = np.int32 if n_rows < np.iinfo(np.int32).max else np.int64
    if n_rows == 0 or features.shape[1] == 0:            # no columns: every row is a copy of the first
        return np.zeros(n_rows, dtype=dtype)
    names = list(features.columns)
    group = features.groupby(names, sort=False, dropna=False, observed=True).ngroup().to_numpy()
    _, first, inverse = np.unique(group, return_index=True, return_inverse=True)
    return first.astype(dtype)[inverse.reshape(-1)]


def _copies_left_out(training: TrainingSet, pool: np.ndarray, found: Candidates) -> int:
    """How many pool rows are copies of the applicant's candidates that are pool rows as they are (not projected
    or moved; :func:`first_copies`)."""
    rows = found.rows if found.projected is None else found.rows[~found.projected]
    pool_rows, _ = training.pool_rows(pool)
    return int(first_copies(training, pool)[1][np.searchsorted(pool_rows, rows)].sum() - rows.size)


# ------------------------------------------------------------------------------------------------ projection


@dataclass(frozen=True, eq=False)
class CandidateSet:
    """Candidate prototypes of one applicant under a projecting policy.

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
    return _into_level_windows(training, out, np.zeros(len(out), dtype=np.int64), [raw0])


def _into_level_windows(training: TrainingSet, out: pd.DataFrame, owner: np.ndarray, raw0: list) -> pd.DataFrame:
    """``out`` with every ordinal feature that has a move bound moved to the nearest level inside applicant
    ``owner[j]``'s window (:meth:`frpd_cli.schema.Feature.level_window`), in place."""
    for f in level_bounded(training.schema):
        mine = level_positions(f, [raw0[a][f.name] for a in range(len(raw0))])[owner]
        values = out[f.name].tolist()
        ranks = level_positions(f, values)
        low, high = f.level_window(mine)
        clipped = np.where(ranks >= 0, np.clip(ranks, low, high), ranks)      # a missing value stays missing
        if np.any(clipped != ranks):
            out[f.name] = pd.Series([f.levels[c] if c >= 0 else v for c, v in zip(clipped.tolist(), values)],
                                    dtype=out[f.name].dtype)
    return out


def has_move_bounds(schema) -> bool:
    """Whether some feature has a move bound (``--max-move``)."""
    return schema is not None and any(f.max_move is not None or f.max_levels is not None for f in schema.features)


def moved_candidates(training: TrainingSet, model, x0: np.ndarray, codes0, raw0: pd.Series, pool: np.ndarray,
                     taken: np.ndarray, *, policy: str = "filter", level: float | None = None) -> CandidateSet:
    """Pool rows moved into the applicant's move bounds (``--max-move``) that stay favourable.

    The rows of ``pool`` that are not candidates yet (``taken``) and that the
    policy may use (``filter``: the applicant's immutable values and the
    allowed side of every monotone feature; ``auto``: its categorical immutable
    values; ``project``: any) are projected (:func:`project_rows`), every
    feature with a move bound is clipped into the applicant's bounds (the
    other limits too), and the rows the model still predicts favourable at
    ``level``, inside every range and different from the applicant and from
    each other, are returned, flagged projected. Only the :data:`MOVED_NEAREST`
    eligible rows nearest to the applicant (encoded distance, before the
    move) are moved and re-predicted.
    The candidate stage calls it (through :func:`moved_candidates_many`) for
    the applicants with fewer than K candidates.

    Returns
    -------
    candidates : CandidateSet
        Empty when no row qualifies.
    """
    return moved_candidates_many(training, model, np.asarray(x0)[None, :], [codes0], [raw0], pool, [taken],
                                 policy=policy, level=level)[0]


def moved_candidates_many(training: TrainingSet, model, X0: np.ndarray, codes0: list, raw0: list, pool: np.ndarray,
                          taken: list, *, policy: str = "filter", level: float | None = None,
                          edges: dict | None = None) -> list[CandidateSet]:
    """:func:`moved_candidates` of several applicants, with one model call for all of their moved rows.

    Parameters
    ----------
    X0 : ndarray of shape (n_applicants, n_features_out)
        The encoded applicants.
    codes0 : list of ConstraintCodes
        Each applicant's constraint codes (one row).
    raw0 : list of dict or Series
        Each applicant's raw values.
    pool : ndarray of bool, shape (n_rows,)
    taken : list of ndarray of int
        Each applicant's candidates already found (not moved again).
    edges : dict, optional
        :func:`favourable_edges` of these applicants (computed when not given).

    Returns
    -------
    candidates : list of CandidateSet
        One per applicant, each the same as for that applicant alone (a row's probability does not depend on the
        other rows of the call: :meth:`frpd_cli.model.Model.favorable_probability`).
    """
    rows = [_movable_rows(training, x0, c0, pool, t, policy) for x0, c0, t in zip(X0, codes0, taken)]
    empty = CandidateSet(rows=np.zeros(0, dtype=np.int64), X=np.zeros((0, training.X.shape[1])),
                         projected=np.zeros(0, dtype=bool), raw=training.frame.iloc[:0])
    owner = np.concatenate([np.full(r.size, a, dtype=np.int64) for a, r in enumerate(rows)]) if rows else \
        np.zeros(0, dtype=np.int64)
    if owner.size == 0:
        return [empty for _ in rows]
    every = np.concatenate(rows)
    moved = _project_many(training, every, owner, raw0)
    bounded = [f for f in training.schema.features
               if f.is_numeric and f.max_move is not None and f.mutability != "immutable"]
    origins = {f.name: np.asarray([raw0[a][f.name] for a in range(len(raw0))], dtype=np.float64)
               for f in bounded}
    for f in bounded:
        low, high = f.bounds(origins[f.name][owner])
        values = moved[f.name].to_numpy(dtype=np.float64)
        moved[f.name] = np.clip(values, low, high).astype(moved[f.name].dtype, copy=False)
    # each moved row also pushed to the edge of the applicant's bounds, feature by feature, on the side where the
    # model's probability rises (a feature the row does not move the right way may still help)
    edges = favourable_edges(training.encoder, model, raw0) if edges is None else edges
    pushed = moved.copy()
    changed = np.zeros(len(moved), dtype=bool)
    for f in [*bounded, *held_flags(training.encoder)]:
        edge = edges[f.name][owner]
        values = pushed[f.name].to_numpy(dtype=np.float64).copy()
        at = ~np.isnan(edge) & (values != edge)
        values[at] = edge[at]
        changed |= at
        pushed[f.name] = values.astype(pushed[f.name].dtype, copy=False)
    partner = np.full(len(moved), -1, dtype=np.int64)        # the pushed row of each moved row (-1: none)
    partner[changed] = len(moved) + np.arange(int(changed.sum()))
    both = pd.concat([moved, pushed[changed]], ignore_index=True)
    owner2 = np.concatenate([owner, owner[changed]])
    inside = _inside_limits(training, both, owner2, raw0)
    X = training.encoder.encode(both, source="the candidates moved into the move bounds")
    ok = np.zeros(len(both), dtype=bool)
    if inside.any():
        ok[inside] = np.asarray(model.favorable_probability(both[inside]), dtype=np.float64) >= (
            model.threshold if level is None else level)
    ok &= ~np.all(X == X0[owner2], axis=1)
    # per moved row: itself when favourable, else its pushed row when that is
    pick = np.where(ok[:len(moved)], np.arange(len(moved)), np.where((partner >= 0) & ok[np.maximum(partner, 0)],
                                                                    partner, -1))
    source = every[np.concatenate([np.arange(len(moved)), np.flatnonzero(changed)])]    # the row of each of both
    out = []
    for a in range(len(rows)):
        mine = pick[(owner == a) & (pick >= 0)]
        mine = mine[_first_of_each(X[mine], np.ones(mine.size, dtype=bool))]
        out.append(CandidateSet(rows=source[mine].astype(np.int64), X=X[mine],
                                projected=np.ones(mine.size, dtype=bool), raw=both.iloc[mine].reset_index(drop=True)))
    return out


def _inside_limits(training: TrainingSet, frame: pd.DataFrame, owner: np.ndarray, raw0: list) -> np.ndarray:
    """Rows of ``frame`` whose every ranged feature is inside its limits for applicant ``owner[j]`` (relative ones
    and move bounds included) or at that applicant's value."""
    inside = np.ones(len(frame), dtype=bool)
    for f in training.schema.features:
        if not f.has_range:
            continue
        own = [raw0[a][f.name] for a in range(len(raw0))]
        values = frame[f.name].to_numpy()
        if f.is_numeric:
            origin = np.asarray(own, dtype=np.float64)[owner]
            inside &= f.in_range(values, origin if f.is_relative else None) | (values == origin)
        else:
            inside &= f.in_range(values) | np.array([v == own[a] for v, a in zip(values.tolist(), owner)], dtype=bool)
    for f in level_bounded(training.schema):
        low, high = f.level_window(level_positions(f, [raw0[a][f.name] for a in range(len(raw0))])[owner])
        ranks = level_positions(f, frame[f.name].tolist())
        inside &= (ranks >= low) & (ranks <= high)
    return inside


def held_flags(encoder) -> list:
    """The flags a move bound in effect would hold were they scales (:func:`frpd_cli.schema.is_flag_column`: an
    integer feature whose training values are two whole numbers one apart; a share of ``--max-move`` that is not
    ``none``), which the bound leaves free to flip: the moved candidates set each to its favourable level."""
    out = []
    for j, f in enumerate(encoder.schema.features):
        if f.kind != "integer" or f.mutability == "immutable" or f.max_move is not None \
                or f.max_move_share is None or math.isinf(f.max_move_share):
            continue
        if encoder.fractional and encoder.fractional[j]:
            continue
        if encoder.maximum[j] - encoder.minimum[j] == 1.0:
            out.append(f)
    return out


def favourable_edges(encoder, model, raw0: list) -> dict:
    """Per feature with a move bound, per applicant: the end of the applicant's bounds (the allowed side of a
    monotone feature, inside the training range unless the applicant is outside it) where the model's probability
    is highest when that feature alone moves there, if higher than the applicant's own; NaN where neither end
    raises it.

    A flag the move bound leaves free (:func:`held_flags`) is a feature with two levels: its edge is the level
    where the probability is highest, the applicant's own where the other level does not raise it (a moved row
    keeping a prototype's flag that lowers the probability is pushed back to the applicant's level, as the
    bound's clipping did when it held flags).

    One model call for all the applicants and features (each applicant, and each feature alone at each end).

    Parameters
    ----------
    encoder : frpd_cli.encoding.Encoder
        Its schema, and the training minimum and maximum of each feature.
    model : frpd_cli.model.Model
    raw0 : list of dict or Series
        The applicants' raw values.

    Returns
    -------
    edges : dict of str to ndarray of shape (len(raw0),)
    """
    schema = encoder.schema
    flags = held_flags(encoder)
    bounded = [f for f in schema.features
               if f.is_numeric and f.max_move is not None and f.mutability != "immutable"] + flags
    n = len(raw0)
    edges = {f.name: np.full(n, np.nan) for f in bounded}
    if not bounded or n == 0:
        return edges
    names = list(schema.feature_names)
    base = pd.DataFrame([{name: r[name] for name in names} for r in raw0], columns=names)
    probes, at = [np.arange(n)], []       # applicants of each probe row; (feature, applicant, edge) per probe row
    for f in bounded:
        origin = base[f.name].to_numpy(dtype=np.float64)
        low, high = f.bounds(origin)
        j = schema.feature_names.index(f.name)
        low = np.maximum(low, np.minimum(origin, encoder.minimum[j]))       # not past the training range
        high = np.minimum(high, np.maximum(origin, encoder.maximum[j]))
        if f.mutability == "increasing":
            low = np.maximum(low, origin)
        elif f.mutability == "decreasing":
            high = np.minimum(high, origin)
        for edge in (low, high):
            moves = np.flatnonzero(np.isfinite(edge) & (edge != origin))
            probes.append(moves)
            at.extend((f.name, a, float(edge[a])) for a in moves)
    index = np.concatenate(probes)
    if index.size == n:
        return _own_flag_levels(edges, flags, base)
    frame = base.iloc[index].reset_index(drop=True)
    for name in dict.fromkeys(name for name, _, _ in at):
        values = frame[name].to_numpy(dtype=np.float64).copy()
        for j, (feature, _, edge) in enumerate(at, start=n):
            if feature == name:
                values[j] = edge
        frame[name] = values
    prob = np.asarray(model.favorable_probability(frame), dtype=np.float64)
    for name in edges:
        best_f = prob[:n].copy()
        for j, (feature, a, edge) in enumerate(at, start=n):
            if feature == name and prob[j] > best_f[a]:
                best_f[a] = prob[j]
                edges[name][a] = edge
    return _own_flag_levels(edges, flags, base)


def _own_flag_levels(edges: dict, flags: list, base: pd.DataFrame) -> dict:
    """``edges`` with each flag's missing edge set to the applicant's own level (:func:`favourable_edges`)."""
    for f in flags:
        own = base[f.name].to_numpy(dtype=np.float64)
        edges[f.name] = np.where(np.isnan(edges[f.name]), own, edges[f.name])
    return edges


def _movable_rows(training: TrainingSet, x0: np.ndarray, codes0, pool: np.ndarray, taken: np.ndarray,
                  policy: str) -> np.ndarray:
    """The pool rows (ascending) :func:`moved_candidates` moves for one applicant: not ``taken``, allowed by the
    policy, the :data:`MOVED_NEAREST` nearest to the applicant, the first of each row's copies only
    (:func:`first_copies`: copies would move to the same row).

    Read from the pool's compact rows and its grouping by immutable values (as :func:`candidate_positions`): the
    cost follows the applicant's group, not the training set.
    """
    rows, X_rows = training.pool_rows(pool)
    policy = effective_policy(training.schema, policy)
    codes = training.codes
    if policy in ("filter", "auto"):
        if policy == "filter":
            index, key = _pool_index(training, pool, rows, distinct=True), codes0
        else:                          # the categorical immutable features only
            keep = [j for j, name in enumerate(codes.immutable_names) if training.schema.feature(name).is_categorical]
            index = _pool_index(training, pool, rows, columns=keep, distinct=True)
            key = ConstraintCodes(immutable=codes0.immutable[:, keep], monotone=codes0.monotone,
                                  direction=codes0.direction)
        at = index.group(key)
        for j, column in enumerate(index.monotone):
            at = at[(column[at] - codes0.monotone[0, j]) * index.direction[j] >= 0]
    else:
        at = np.flatnonzero(first_copies(training, pool)[0])
    if len(taken):
        at = at[~np.isin(rows[at], taken)]
    if at.size > MOVED_NEAREST:          # the rows nearest to the applicant only: a bounded model call
        distance = np.sum((X_rows[at] - x0) ** 2, axis=1)
        kth = np.partition(distance, MOVED_NEAREST - 1)[MOVED_NEAREST - 1]
        near = np.flatnonzero(distance <= kth)          # the nearest and every row tied with the last of them
        at = np.sort(at[near[np.lexsort((at[near], distance[near]))[:MOVED_NEAREST]]])    # ties by row
    return rows[at].astype(np.int64)


def _project_many(training: TrainingSet, rows: np.ndarray, owner: np.ndarray, raw0: list) -> pd.DataFrame:
    """:func:`project_rows` of several applicants at once: row ``j`` projected onto applicant ``owner[j]``."""
    out = training.frame.iloc[rows].reset_index(drop=True).copy()
    for f in training.schema.features:
        if f.mutability == "immutable":
            out[f.name] = pd.Series([raw0[a][f.name] for a in owner], dtype=out[f.name].dtype)
        elif f.mutability in ("increasing", "decreasing"):
            up = f.mutability == "increasing"
            if f.is_categorical:
                rank = {level: i for i, level in enumerate(f.levels)}
                r0 = np.array([rank[raw0[a][f.name]] for a in range(len(raw0))])[owner]
                ranks = out[f.name].map(rank).to_numpy()
                clipped = np.maximum(ranks, r0) if up else np.minimum(ranks, r0)
                out[f.name] = pd.Series([f.levels[i] for i in clipped], dtype=out[f.name].dtype)
            else:
                values = out[f.name].to_numpy()
                base = np.array([raw0[a][f.name] for a in range(len(raw0))])[owner]
                out[f.name] = np.maximum(values, base) if up else np.minimum(values, base)
    return _into_level_windows(training, out, owner, raw0)


def _first_of_each(X: np.ndarray, keep: np.ndarray, seen: set | None = None) -> np.ndarray:
    """Positions of the rows of ``X`` flagged in ``keep`` whose encoded row is not in ``seen`` and not equal to an
    earlier such row (``seen`` grows by them)."""
    seen = set() if seen is None else seen
    first = []
    for j in np.flatnonzero(keep):
        key = X[j].tobytes()
        if key not in seen:
            seen.add(key)
            first.append(j)
    return np.asarray(first, dtype=np.int64)


def candidate_set(training: TrainingSet, model, x0: np.ndarray, codes0, raw0: pd.Series, pool: np.ndarray, *,
                  policy: str = "filter", level: float | None = None) -> CandidateSet:
    """The candidate prototypes of one applicant under an immutable-feature policy.

    Parameters
    ----------
    training : TrainingSet
    model : frpd_cli.model.Model
        Re-predicts projected rows (``project`` and ``auto`` policies only).
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
    level : float, optional
        The probability a projected row must reach (default: the model's
        threshold; the stage passes threshold + margin).

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
    pool_rows, at = candidate_positions(training, x0, codes0, pool, raw0, distinct=True)
    strict = pool_rows[at].astype(np.int64)
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
                    in_range &= f.in_range(values.to_numpy(), raw0[f.name] if f.is_relative else None) | (
                        values == raw0[f.name]).to_numpy()
            projected, others = projected[in_range].reset_index(drop=True), others[in_range]
            if others.size:
                Xp = training.encoder.encode(projected, source="the projected candidates")
                threshold = model.threshold if level is None else level
                keep = np.asarray(model.favorable_probability(projected), dtype=np.float64) >= threshold
                keep &= ~np.all(Xp == x0, axis=1)
                # Drop projected rows equal to an earlier candidate (strict or projected).
                first = _first_of_each(Xp, keep, {row.tobytes() for row in X[0]})
                rows.append(others[first])
                X.append(Xp[first])
                raw.append(projected.iloc[first].reset_index(drop=True))
                flags.append(np.ones(first.size, dtype=bool))
    return CandidateSet(rows=np.concatenate(rows).astype(np.int64), X=np.vstack(X),
                        projected=np.concatenate(flags), raw=pd.concat(raw, ignore_index=True))


# ------------------------------------------------------------------------------------------------ counts and reasons


@dataclass(frozen=True)
class Exclusion:
    """How many rows of a set one constraint rules out.

    Attributes
    ----------
    count : int
        Rows of the set that break the constraint (a row breaking several is
        counted under each).
    constraint : {"immutable", "increasing", "decreasing", "range", "max-move", "copy"}
        ``copy``: rows left out as copies of another candidate (:func:`first_copies`; ``feature`` is empty).
    feature : str
    text : str
        The constraint's part of a reason, e.g. ``"12 differ in gender (applicant: Male)"``.
    detail : str
        ``range``: the range as ``text`` writes it in parentheses, e.g. ``"0:50"`` (empty for the others).
    """

    count: int
    constraint: str
    feature: str
    text: str
    detail: str = ""


@dataclass(frozen=True)
class Shortfall:
    """What the reason of an applicant with fewer than K candidates is written from.

    Carried from the candidate stage to the selection outcome
    (:class:`frpd_cli.choice.SelectionOutcome`) and the plan
    (:class:`frpd_cli.plans.Plan`), across worker processes (plain picklable
    values), for what reports on a run (the summary and hints of ``frpd
    plan``): they read these fields, never the reason's words.

    Attributes
    ----------
    exclusions : tuple of Exclusion
        How many rows each constraint rules out, largest first: the order in
        which the reason lists them.
    n_pool : int or None
        The favourable training rows they are counted of (the reason's "of N
        favourable training rows"); None when they are counted of every
        training row (graph scheme: the applicant has no actionable neighbour)
        or when there are none.
    """

    exclusions: tuple = ()
    n_pool: int | None = None


def _distinct_pool_rows(training: TrainingSet, pool: np.ndarray) -> tuple:
    """The pool's distinct rows for :func:`exclusions`: their row numbers, how many pool rows share the values of
    each, and their immutable and monotone codes gathered once (contiguous; remembered with the pool's grouping,
    so that every applicant explained reads them instead of gathering the same rows of the memory-mapped codes:
    about 9 ms per applicant at a million rows)."""
    cached = _pool_cache(training, pool)
    if "distinct" not in cached:
        rows, _ = training.pool_rows(pool)
        first, n_copies = first_copies(training, pool)
        at = rows[first]
        codes = training.codes
        cached["distinct"] = (at, n_copies[first], np.take(codes.immutable, at, axis=0),
                              np.take(codes.monotone, at, axis=0))
    return cached["distinct"]


def exclusions(training: TrainingSet, codes0, rows: np.ndarray, raw0, *,
               copies: tuple | None = None) -> list[Exclusion]:
    """For the rows selected by ``rows`` (bool mask), how many each constraint rules out, largest first.

    Immutable features first, then monotone ones, then ranges, each in schema
    order; the sort by count is stable. A constraint that rules out no row is
    left out. A row keeping the applicant's value of a ranged feature is never
    outside its range.

    Parameters
    ----------
    copies : (ndarray of int, ndarray of int[, ndarray, ndarray]), optional
        The rows of ``rows`` with distinct values and how many rows of ``rows`` have the values of each
        (:func:`first_copies`): the same counts, reading the distinct rows only; optionally their immutable and
        monotone codes, already gathered (:func:`_distinct_pool_rows`).

    Returns
    -------
    parts : list of Exclusion
    """
    parts = []
    codes = training.codes
    immutable = monotone = None
    if copies is None:
        at = np.flatnonzero(rows)             # the rows counted (the pool): columns are read at them only
        weight = None
    elif len(copies) == 4:
        at, weight, immutable, monotone = copies
    else:
        at, weight = copies

    def count(ruled_out: np.ndarray) -> int:
        return int(np.count_nonzero(ruled_out) if weight is None else weight[ruled_out].sum())

    def column(codes_of, gathered, j: int) -> np.ndarray:
        return gathered[:, j] if gathered is not None else np.take(codes_of[:, j], at)

    for j, name in enumerate(codes.immutable_names):
        removed = count(column(codes.immutable, immutable, j) != codes0.immutable[0, j])
        if removed:
            parts.append(Exclusion(removed, "immutable", name, f"{removed} differ in {name} (applicant: {raw0[name]})"))
    for j, name in enumerate(codes.monotone_names):
        delta = (column(codes.monotone, monotone, j) - codes0.monotone[0, j]) * codes.direction[j]
        removed = count(delta < 0)
        if removed:
            up = codes.direction[j] > 0
            parts.append(Exclusion(removed, "increasing" if up else "decreasing", name,
                                   f"{removed} have {'lower' if up else 'higher'} {name} (applicant: {raw0[name]})"))
    parts.extend(_range_exclusions(training, at, raw0, count))
    parts.sort(key=lambda part: -part.count)
    return parts


def _range_exclusions(training: TrainingSet, at: np.ndarray, raw0, count) -> list[Exclusion]:
    """How many of the rows ``at`` (row numbers) each ``--range`` rules out (a row keeping the applicant's value
    is never out), and each move bound (``--max-move``), counted apart (``count`` of a bool array over ``at``)."""
    from dataclasses import replace

    parts = []
    if training.schema is None:
        return parts
    for f in training.schema.features:
        if not f.has_range:
            continue
        column = training.frame[f.name].iloc[at]
        differs = (column != raw0[f.name]).to_numpy()
        limit = replace(f, max_move=None)
        outside = None
        if limit.has_range:
            outside = ~limit.in_range(column.to_numpy(), float(raw0[f.name]) if limit.is_relative else None)
            removed = count(outside & differs)
            if removed:
                shown = _range_text(limit, raw0)
                parts.append(Exclusion(removed, "range", f.name, f"{removed} are outside the range of {f.name} ({shown})",
                                       detail=shown))
        if f.max_move is not None:
            far = np.abs(column.to_numpy(dtype=np.float64) - float(raw0[f.name])) > f.max_move
            removed = count(far & differs)
            if removed and outside is not None and not count(far & differs & ~outside):
                removed = 0                 # a tighter --range already rules out every row: the bound adds nothing
            if removed:
                share = "" if f.max_move_share is None else f", --max-move {f.max_move_share:g} of its training range"
                parts.append(Exclusion(removed, "max-move", f.name,
                                       f"{removed} move {f.name} by more than {f.move_limit:g}{share} (applicant: "
                                       f"{raw0[f.name]})"))
    from .schema import levels_text

    for f in level_bounded(training.schema):
        mine = int(level_positions(f, [raw0[f.name]])[0])
        removed = count(f.levels_beyond(_level_column(training, f)[at], mine))
        if removed:
            share = "" if f.max_move_share is None else f", --max-move {f.max_move_share:g} of its levels"
            parts.append(Exclusion(removed, "max-move", f.name,
                                   f"{removed} move {f.name} by more than {levels_text(f.max_levels)}{share} "
                                   f"(applicant: {raw0[f.name]})"))
    return parts


def _range_text(f, raw0) -> str:
    if f.is_categorical:
        if not f.allowed:               # only levels of missing information withheld
            return "any level but " + " or ".join(str(v) for v in f.withheld) + ", which records missing information"
        return ", ".join(str(v) for v in f.allowed)
    if f.is_relative:
        low, high = f.bounds(float(raw0[f.name]))
        return (f"{f.relative_text} of the applicant's {raw0[f.name]}: "
                f"{'' if np.isinf(low) else f'{low:g}'}:{'' if np.isinf(high) else f'{high:g}'}")
    return f"{'' if f.low is None else f'{f.low:g}'}:{'' if f.high is None else f'{f.high:g}'}"


def constraint_breakdown(training: TrainingSet, codes0, rows: np.ndarray, raw0) -> list[str]:
    """The texts of :func:`exclusions`: for the rows of ``rows``, how many each constraint rules out."""
    return [part.text for part in exclusions(training, codes0, rows, raw0)]


def _shortfall(n_pool: int, n_found: int, k: int, parts: list[Exclusion]) -> str:
    if n_pool == 0:
        return "the model predicts no training row favourable"
    detail = "; ".join(part.text for part in parts) or "they equal the applicant"
    need = f", need {k}" if n_found == 0 else ""      # with some, the plan holds them (a short plan)
    return f"only {n_found} candidate row(s){need}: of {n_pool} favourable training rows, {detail}"


def infeasibility_reason(training: TrainingSet, codes0, pool: np.ndarray, n_found: int, k: int,
                         raw0) -> str:
    """Say which constraints emptied the candidate pool, with counts (linear scheme, before any policy note)."""
    parts = exclusions(training, codes0, pool, raw0) if pool.any() else []
    return _shortfall(int(pool.sum()), n_found, k, parts)


# ------------------------------------------------------------------------------------------------ the graph


def graph_candidates(training: TrainingSet, reach: GraphReach, x0: np.ndarray, codes0, pool: np.ndarray,
                     settings, raw0=None) -> np.ndarray:
    """Rows (ascending) of :func:`candidate_mask` that the applicant reaches within the graph limits."""
    return _reachable(candidate_mask(training, x0, codes0, pool, raw0), reach, settings.max_hops)


def _graph_hint(graph) -> str:
    if graph.radius is not None:
        return f"rebuild the graph with a larger --radius (now {graph.radius:g})"
    return f"rebuild the graph with a larger --neighbors (now {graph.n_neighbors}) or a --radius"


def graph_infeasibility_reason(training: TrainingSet, graph, reach: GraphReach, x0: np.ndarray, codes0,
                               pool: np.ndarray, n_found: int, settings, raw0) -> str:
    """Say why too few favourable rows are reachable on the graph, with counts and a remedy."""
    return _graph_shortfall(training, graph, reach, x0, codes0, pool, n_found, settings, raw0)[0]


def _graph_shortfall(training: TrainingSet, graph, reach: GraphReach, x0: np.ndarray, codes0, pool: np.ndarray,
                     n_found: int, settings, raw0, *, n_actionable: int | None = None) -> tuple[str, Shortfall]:
    """The graph scheme's reason for too few candidates, and the exclusion counts it quotes."""
    k = settings.k
    N = training.n_rows
    if reach.neighbors.size == 0:
        targets = actionable_mask(codes0, training.codes)
        if not targets.any():
            parts = exclusions(training, codes0, np.ones(N, dtype=bool), raw0)
            detail = "; ".join(part.text for part in parts)
            return ("the applicant has no actionable neighbour on the graph: every training row differs in an "
                    f"immutable feature or lies on the wrong side of a monotone one ({detail})"), Shortfall(tuple(parts))
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
                f"{' and '.join(limits)}; rebuild the graph with a larger {' and '.join(options)}"), Shortfall()
    if n_actionable is None:
        n_actionable = int(candidate_mask(training, x0, codes0, pool, raw0).sum())
    reached = np.isfinite(reach.dist)
    n_reached_fav = int((reached & pool).sum())
    need = f", need {k}" if n_found == 0 else ""      # with some, the plan holds them (a short plan)
    text = (f"only {n_found} candidate row(s) reachable on the graph{need}: the applicant reaches "
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
    if n_actionable < k:
        parts = exclusions(training, codes0, pool, raw0)
        detail = "; ".join(part.text for part in parts) or "they equal the applicant"
        return text + (f"; only {n_actionable} favourable row(s) are actionable at all: of {int(pool.sum())} "
                       f"favourable training rows, {detail}"), Shortfall(tuple(parts), int(pool.sum()))
    remedy = _graph_hint(graph)
    if limits:
        remedy = f"try {' or '.join(limits)}, or {remedy}"
    return text + f"; {n_actionable} favourable rows are actionable but not reachable: {remedy}", Shortfall()
