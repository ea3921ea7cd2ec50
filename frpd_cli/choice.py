"""Prototype choice for one applicant: plan settings, selection among the candidates, outcomes, method labels.

Shared by both interpolation schemes (:mod:`frpd_cli.planning` for the linear
scheme and the batch machinery, :mod:`frpd_cli.sequential` for the graph
scheme). The candidates, and the reason when there are too few, come from the
candidate stage (:mod:`frpd_cli.candidates`); :func:`select_candidates` runs
the selection method on them and never looks at constraints or at the graph's
reachability (only FACE follows the candidates' shortest paths, to their end
nodes). ``infeasibility_reason`` and ``constraint_breakdown`` are re-exported
from :mod:`frpd_cli.candidates`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .candidates import IMMUTABLE_POLICIES, Candidates, CandidateStage, Shortfall, constraint_breakdown, infeasibility_reason
from .dataset import TrainingSet
from .exceptions import InputError
from .interpolation import ENDPOINTS, graph_path, same_value
from .plans import Plan
from .selection import EIGEN_METHODS, METHODS, compute_geometry, eigen_decompose, select_prototypes
from .selection.baselines import rank_order

__all__ = [
    "PLAN_METHODS",
    "SCHEMES",
    "PlanSettings",
    "SelectionOutcome",
    "infeasibility_reason",
    "select_for_applicant",
    "select_candidates",
    "select_among",
    "face_rows",
    "constraint_breakdown",
    "empty_plan",
    "short_plan_reason",
    "changes",
    "method_label",
    "DEFAULT_THETA",
    "DEFAULT_MARGIN",
    "default_margin",
]

#: Selection methods of a plan: those of :data:`frpd_cli.selection.METHODS`, and
#: ``"face"`` (graph scheme only).
PLAN_METHODS = (*METHODS, "face")
SCHEMES = ("linear", "graph")
#: The default diversity weight; a plan's method label names theta only when it is another one.
DEFAULT_THETA = 0.9
#: The command line's default ``--margin``: probability points above the threshold every recourse must reach, so
#: that no recourse sits on the model's boundary (a probability of 0.50 reads as a coin flip). ``PlanSettings``
#: keeps the paper's 0 (the first accepted point).
DEFAULT_MARGIN = 0.05
#: Methods whose result depends on theta.
_THETA_METHODS = ("quad", "quad-dp", "quad-greedy", "dpp-greedy", "dpp-ls", "exact")


def default_margin(threshold: float) -> float:
    """The margin used when ``--margin`` is not given: :data:`DEFAULT_MARGIN`, or half the room left above a
    threshold too high for it (``threshold + DEFAULT_MARGIN >= 1``), so a default never makes a run impossible.

    Examples
    --------
    >>> default_margin(0.5)
    0.05
    >>> default_margin(0.98)
    0.01
    """
    threshold = float(threshold)
    if threshold + DEFAULT_MARGIN < 1.0:
        return DEFAULT_MARGIN
    return round((1.0 - threshold) / 2.0, 12)


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
        projects on numeric ones (see :mod:`frpd_cli.candidates`). Graph plans
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
    proximity : {"distance", "recourse"}
        Linear scheme: the selection's proximity term is the distance to each
        candidate (``"distance"``, the paper's) or the cost of the recourse the
        candidate leads to, the distance to where its segment first turns
        favourable (``"recourse"``, :mod:`frpd_cli.recourse_cost`). Graph plans
        always use the path cost.
    max_candidates : int or None
        Linear scheme, ``filter`` policy: search only this many candidates per
        applicant, the nearest ones (:func:`frpd_cli.candidates.nearest_rows`);
        None searches them all. Applicants with at most this many candidates
        get the same plans either way.
    direct : bool
        Linear scheme: an applicant left without a recourse by the training
        rows gets the changes a direct search from its own row finds
        (:mod:`frpd_cli.direct`); ``False`` leaves it infeasible.
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
    proximity: str = "distance"
    max_candidates: int | None = None
    direct: bool = True

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
        self._validate_proximity()
        if self.max_candidates is not None:
            if isinstance(self.max_candidates, bool) or not isinstance(self.max_candidates, (int, np.integer)) \
                    or self.max_candidates < self.k:
                raise InputError(f"The 'max_candidates' option must be an int >= k ({self.k}). "
                                 f"Got {self.max_candidates!r} instead.")
            if self.scheme == "graph":
                raise InputError("The 'max_candidates' option applies to linear recourses; graph candidates are "
                                 "the rows the applicant reaches. Leave out --graph, or --max-candidates.")
        return self

    def _validate_proximity(self) -> None:
        from .recourse_cost import PROXIMITIES

        if self.proximity not in PROXIMITIES:
            raise InputError(f"The 'proximity' option must be one of {', '.join(PROXIMITIES)}. "
                             f"Got {self.proximity!r} instead.")
        if self.proximity == "recourse" and self.scheme == "graph":
            raise InputError("The 'recourse' proximity applies to linear recourses; graph plans price each "
                             "prototype by its path cost already. Leave out --graph, or --proximity recourse.")

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
    pruning: dict | None = None           # --max-candidates cut the candidates: what the rest could add
    shortfall: Shortfall | None = None    # fewer than K candidates: what ``reason`` is written from


def select_for_applicant(training: TrainingSet, x0: np.ndarray, codes0, raw0: pd.Series,
                         settings: PlanSettings, *, pool: np.ndarray | None = None,
                         thetas=None, model=None, eigen=None, keep=False) -> list[SelectionOutcome]:
    """Select prototypes for one applicant (linear scheme), once per theta in ``thetas`` (default: settings.theta).

    The candidate stage (:class:`frpd_cli.candidates.CandidateStage`) then
    :func:`select_candidates`. ``model`` is needed by the ``project`` and
    ``auto`` immutable policies (it re-predicts projected rows) and by a margin.
    """
    found = CandidateStage(training, settings, model=model, pool=pool).find(x0, codes0, raw0)
    return select_candidates(training, x0, found, settings, thetas=thetas, eigen=eigen, keep=keep)


def select_candidates(training: TrainingSet, x0: np.ndarray, found: Candidates, settings: PlanSettings, *,
                      thetas=None, eigen=None, keep: bool = False) -> list[SelectionOutcome]:
    """Run the selection method on one applicant's candidates, once per theta (default: settings.theta).

    Parameters
    ----------
    training : TrainingSet
    x0 : ndarray of shape (n_features_out,)
        The encoded applicant.
    found : Candidates
        From :meth:`frpd_cli.candidates.CandidateStage.find`. Without any
        candidate every outcome is ``infeasible`` with the stage's reason; with
        1 to ``settings.k - 1`` candidates every outcome is ``ok`` with all of
        them as prototypes (a short plan) and the stage's reason.
    settings : PlanSettings
    thetas : list of float, optional
    eigen : Eigen, optional
        A stored eigendecomposition of this applicant's candidate geometry
        (``select --reuse-eigen``): used when its size matches the candidates.
    keep : bool
        Outcomes carry the candidate rows and the eigendecomposition.

    Notes
    -----
    The geometry and its eigendecomposition are computed once and shared by
    every theta. Graph candidates carry their path costs, which replace the
    Euclidean distance as the proximity term (:func:`select_among`); ``"face"``
    takes the ``k`` cheapest paths (:func:`face_rows`).
    """
    thetas = [settings.theta] if thetas is None else list(thetas)
    if found.reason is not None and len(found) == 0:
        return [SelectionOutcome("infeasible", found.reason, np.zeros(0, dtype=np.int64), n_candidates=len(found),
                                 shortfall=found.shortfall) for _ in thetas]
    if found.reason is not None:            # 1 <= candidates < K: a short plan of every candidate that exists
        settings = replace(settings, k=len(found))
    if settings.method == "face":
        rows = face_rows(training, found, settings.k, settings.endpoint)
        objective = float(found.reach.dist[rows].sum())
        return [SelectionOutcome("ok", found.reason, rows, objective, None, len(found), shortfall=found.shortfall)
                for _ in thetas]
    outcomes = select_among(training, x0, found.rows, settings, thetas, X=found.X, projected=found.projected,
                            eigen=eigen, keep=keep, proximity=found.proximity, cut=found.cut)
    if found.reason is not None:
        outcomes = [replace(out, reason=found.reason, shortfall=found.shortfall) for out in outcomes]
    return outcomes


#: Methods whose objective is QUAD's (the pruning bound of :func:`pruning_bound` speaks of it).
QUAD_OBJECTIVE_METHODS = ("quad", "quad-dp", "quad-greedy", "quad-paper", "quad-dp-paper", "exact", "nearest")


def pruning_bound(geometry, chosen: np.ndarray, theta: float, k: int, cut: tuple) -> dict:
    """What the candidates ``--max-candidates`` left out could add to the selection, as a proof or a bound.

    ``cut`` is ``(n_found, d)``: ``n_found`` candidates were found and only the nearest ``geometry.n_candidates``
    kept; every one left out is at distance ``d`` or more. A set of ``k`` candidates holding a left-out one has
    QUAD objective ``theta ||sum of directions||^2 + (1 - theta) (sum of distances)`` of at least ``bound = (1 -
    theta) (d + the k - 1 smallest kept distances)``: the first term is never negative, and its other members
    are at least as far as the nearest kept ones. ``objective`` is the chosen set's QUAD objective; ``proven``
    says that no set holding a left-out candidate is better (``bound >= objective``); otherwise such a set could
    be better by at most ``objective - bound``.

    Examples
    --------
    >>> from frpd_cli.selection.geometry import compute_geometry
    >>> g = compute_geometry([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0])
    >>> pruning_bound(g, np.array([0, 1]), 0.5, 2, (3, 4.0))
    {'candidates': 3, 'searched': 2, 'objective': 2.0, 'bound': 2.5, 'proven': True}
    """
    from .selection.prototypes import quad_objective

    n_found, nearest_left_out = cut
    objective = float(quad_objective(geometry, chosen, theta=theta))
    nearest = np.sort(np.asarray(geometry.distances, dtype=np.float64))[:max(k - 1, 0)]
    bound = (1.0 - theta) * (nearest_left_out + float(nearest.sum()))
    # the left-out distance came from another arithmetic than the geometry's: a relative slack keeps the proof one
    return {"candidates": int(n_found), "searched": int(geometry.n_candidates), "objective": objective,
            "bound": float(bound), "proven": bool(bound * (1.0 - 1e-12) >= objective)}


def face_rows(training: TrainingSet, found: Candidates, k: int, endpoint: str) -> np.ndarray:
    """FACE: the ``k`` cheapest distinct end points among the candidates' shortest paths (graph candidates).

    Candidates are taken by path cost (ties by row index). With
    ``endpoint="first-favorable"`` a candidate stands for the first node of
    its path that may end a recourse (:attr:`Candidates.ends`; never more
    expensive), so the result is the ``k`` cheapest nodes that are the first
    such node of their own path. Rows identical to one already taken are
    skipped (Poyiadzi et al. 2020).
    """
    reach = found.reach
    order = rank_order(reach.dist, found.rows)
    chosen: list[int] = []
    for row in order:
        end = graph_path(reach, int(row), endpoint=endpoint, favorable=found.ends)[-1]
        if any(end == c or np.array_equal(training.X[end], training.X[c]) for c in chosen):
            continue
        chosen.append(int(end))
        if len(chosen) == k:
            break
    return np.asarray(chosen, dtype=np.int64)


def select_among(training: TrainingSet, x0: np.ndarray, cand: np.ndarray, settings: PlanSettings,
                  thetas: list, *, X: np.ndarray | None = None, projected: np.ndarray | None = None,
                  eigen=None, keep: bool = False, proximity: np.ndarray | None = None,
                  cut: tuple | None = None) -> list[SelectionOutcome]:
    """Run the selection method on the candidate rows ``cand``, once per theta.

    ``X`` holds the encoded candidates when they are not the training rows
    themselves (projected candidates); ``projected`` flags them. ``eigen``, when
    given, must be the eigendecomposition of exactly this candidate geometry.
    ``proximity`` (one positive value per candidate) replaces the Euclidean
    distance as every method's proximity term (the graph scheme passes the
    shortest-path costs, paper Section 5.2); the directions stay Euclidean. ``cut``
    (:attr:`frpd_cli.candidates.Candidates.cut`): the candidates are the nearest of more; each outcome then
    carries :func:`pruning_bound` (QUAD-objective methods with the distance as proximity).
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
    # Computed here when it is stored or shared by several thetas; otherwise the method computes it if it needs
    # it (quad solves small candidate sets exactly, without eigenpairs)
    if eigen is None and needs_eigen and any(t > 0 for t in thetas) and (keep or len(thetas) > 1):
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
        if cut is not None and proximity is None and settings.method in QUAD_OBJECTIVE_METHODS \
                and settings.proximity == "distance":
            extra["pruning"] = pruning_bound(geometry, idx, theta, settings.k, cut)
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


def already_favorable_reason(prob: float, threshold: float | None) -> str:
    """Why an applicant needs no recourse; a probability exactly at the threshold says so, and what to pass.

    A probability equal to the threshold counts as favourable (``>= threshold``), but a classifier's own
    ``predict`` breaks such a tie by its class order: scikit-learn's takes the first class at 0.5, so a forest
    with an even number of trees denies an applicant whose trees split evenly, whom frpd would call favourable.
    """
    if threshold is not None and float(prob) == float(threshold):
        return (f"the model's probability {prob:.4f} is exactly the threshold {threshold:g}, which counts as favourable "
                "(>= threshold), but the model's own predict() may break the tie the other way and deny it; a "
                f"--threshold a little above {threshold:g} (e.g. {threshold + 1e-6:g}) plans a recourse for it")
    return f"the model already predicts favourable (probability {prob:.4f})"


def empty_plan(applicant: str, out: SelectionOutcome | None, prob: float, method: str, raw0: dict, *,
               threshold: float | None = None) -> Plan:
    """The plan of an applicant without recourses: already favourable (``out`` is None) or not selectable.

    ``threshold``: the model's; an already favourable applicant exactly at it is marked ``at_threshold``.
    """
    if out is None:
        tie = threshold is not None and float(prob) == float(threshold)
        return Plan(applicant, "already-favorable", already_favorable_reason(prob, threshold), method, (), raw0,
                    at_threshold=tie)
    return Plan(applicant, out.status, out.reason, method, (), raw0, shortfall=out.shortfall)


def short_plan_reason(n_recourses: int, k: int, reason: str | None) -> str:
    """The reason of a plan whose applicant had fewer than K candidates: how many recourses, then why.

    Examples
    --------
    >>> short_plan_reason(2, 3, "only 2 candidate row(s): of 9 favourable training rows, 7 differ in group (applicant: a)")
    '2 of K=3 recourses: only 2 candidate row(s): of 9 favourable training rows, 7 differ in group (applicant: a)'
    """
    head = f"{n_recourses} of K={k} recourses"
    return head if not reason else f"{head}: {reason}"


def changes(raw0: dict, features: dict) -> dict:
    return {name: (raw0[name], value) for name, value in features.items() if not same_value(raw0[name], value)}
