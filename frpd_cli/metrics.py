"""The evaluation metrics of the paper, as pure numpy/scipy functions.

All points are rows of the *encoded* space (min-max scaled numeric features,
one-hot categorical features) and every distance is Euclidean in that space,
except :func:`sparsity` and :func:`constraint_violations`, which look at raw
feature values. For one applicant ``x0`` of shape ``(p,)`` and its plan ``R`` of
shape ``(K, p)`` (one recourse per row):

==========================  =====================================================
function                    paper (section 5 "Numerical Experiments", appendix)
==========================  =====================================================
:func:`cost`                Cost eq. (``eq:cost``), Tables 1 and 2 "Cost"
:func:`path_plan_cost`      Table 2 "Shortest Path", Table 6 "Shortest Path Cost"
:func:`validity`            "Validity" (fraction of applicants with a valid plan)
:func:`anti_diversity`      "Anti-Diversity" (see the note on ordered pairs)
:func:`dpp_diversity`       "DPP", ``det Q`` with ``Q_kl = 1 / (1 + dist)``
:func:`manifold_distance`   "Distance to data manifold" (``eq:manifold_dist``)
:func:`path_diversity`      appendix "Sequential Recourse", Path-Diversity (Lev)
:func:`path_anti_diversity` appendix "Sequential Recourse", Path-Anti-Diversity
:func:`sparsity`            not in the paper: features changed per recourse
:func:`constraint_violations` not in the paper: actionability audit
:func:`summarize`           the "mean +- std" cells of the tables
==========================  =====================================================

The conventions that the paper leaves open (zero directions, the deletion cost
of a path's first node, edge direction in the Jaccard coefficient, the ``std``
estimator) are stated in each docstring and collected in ``docs/metrics.md``.
No function prints; malformed inputs raise :class:`~frpd_cli.exceptions.InputError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

# scipy.spatial is imported where it is used (start-up time of the CLI).
from frpd_cli.exceptions import InputError

__all__ = [
    "cost",
    "path_plan_cost",
    "validity",
    "anti_diversity",
    "dpp_diversity",
    "NearestRowIndex",
    "manifold_distance",
    "path_diversity",
    "path_anti_diversity",
    "Sparsity",
    "sparsity",
    "constraint_violations",
    "Summary",
    "summarize",
    "X0_NODE",
]

#: Node id that stands for the applicant ``x0`` in path edges (it is not a row of ``X_nodes``).
X0_NODE = -1


# --------------------------------------------------------------------------- validation helpers


def _as_point(x, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"'{name}' must be a numeric vector. Got {type(x).__name__}: {exc}") from exc
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise InputError(
            f"'{name}' must be a non-empty 1-d array of shape (p,). Got shape {arr.shape} instead."
        )
    if not np.all(np.isfinite(arr)):
        raise InputError(f"'{name}' contains NaN or infinite values; encode the row before computing metrics.")
    return arr


def _as_matrix(X, name: str, *, n_features: int | None = None, allow_empty: bool = False) -> np.ndarray:
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"'{name}' must be a numeric matrix. Got {type(X).__name__}: {exc}") from exc
    if arr.ndim != 2:
        raise InputError(
            f"'{name}' must be a 2-d array with one point per row. Got an array of shape {arr.shape} instead; "
            "wrap a single point as X[None, :]."
        )
    if arr.shape[0] == 0 and not allow_empty:
        raise InputError(
            f"'{name}' has no rows. A metric of an empty plan is undefined; record NaN for this applicant instead."
        )
    if n_features is not None and arr.shape[1] != n_features:
        raise InputError(
            f"'{name}' has {arr.shape[1]} columns but {n_features} were expected (the width of the other "
            "argument). Pass all points in the same encoded space."
        )
    if not np.all(np.isfinite(arr)):
        raise InputError(f"'{name}' contains NaN or infinite values; encode the rows before computing metrics.")
    return arr


def _plan(x0, R) -> tuple[np.ndarray, np.ndarray]:
    x0 = _as_point(x0, "x0")
    R = _as_matrix(R, "R", n_features=x0.shape[0])
    return x0, R


# --------------------------------------------------------------------------- cost and validity


def cost(x0, R) -> float:
    r"""Mean Euclidean distance from the applicant to each recourse of the plan.

    .. math:: \mathrm{Cost}(\{x^r_k\}, x_0) = \frac{1}{K}\sum_{k=1}^K \lVert x^r_k - x_0 \rVert_2

    Parameters
    ----------
    x0 : array-like of shape (p,)
        The applicant, encoded.
    R : array-like of shape (K, p)
        The plan, one encoded recourse per row, ``K >= 1``.

    Returns
    -------
    float

    Raises
    ------
    InputError
        If the shapes do not match, ``R`` is empty or a value is not finite.

    Notes
    -----
    O(K p). For plans built on the actionability graph the paper reports the
    shortest-path cost instead; see :func:`path_plan_cost`.

    References
    ----------
    Paper, section 5, equation ``eq:cost``.

    Examples
    --------
    >>> cost([0.0, 0.0], [[3.0, 4.0], [1.0, 0.0]])
    3.0
    """
    x0, R = _plan(x0, R)
    return float(np.mean(np.linalg.norm(R - x0, axis=1)))


def path_plan_cost(path_costs) -> float:
    """Mean of the shortest-path costs of a sequential plan.

    Parameters
    ----------
    path_costs : array-like of shape (K,)
        The length (sum of Euclidean edge weights) of the path from ``x0`` to
        each recourse, ``K >= 1``.

    Returns
    -------
    float

    Raises
    ------
    InputError
        If ``path_costs`` is empty, not 1-d, negative or not finite.

    References
    ----------
    Paper, Table ``tab:action`` column "Shortest Path" and Table
    ``tab:action_diverse_path`` column "Shortest Path Cost".

    Examples
    --------
    >>> path_plan_cost([1.0, 2.0, 4.5])
    2.5
    """
    costs = _as_point(path_costs, "path_costs")
    if np.any(costs < 0):
        raise InputError(f"'path_costs' must be >= 0 (sums of Euclidean edge lengths). Got {costs.tolist()} instead.")
    return float(np.mean(costs))


def validity(is_favorable, n_recourses: int, k: int) -> float:
    """Whether a plan is valid: ``k`` recourses, all predicted favourable.

    The paper's Validity is the fraction of applicants whose plan is valid; it
    is the mean of this per-applicant value (see :func:`summarize`). The model
    prediction itself is made by the caller.

    Parameters
    ----------
    is_favorable : array-like of bool, shape (n_recourses,)
        The model's decision on each recourse of the plan.
    n_recourses : int
        Number of recourses in the plan (may be less than ``k`` when the method
        found fewer).
    k : int
        Number of recourses asked for, ``k >= 1``.

    Returns
    -------
    float
        ``1.0`` if ``n_recourses == k`` and every recourse is favourable, else ``0.0``.

    Raises
    ------
    InputError
        If ``k < 1``, ``n_recourses < 0`` or ``len(is_favorable) != n_recourses``.

    Examples
    --------
    >>> validity([True, True, True], 3, 3), validity([True, True], 2, 3)
    (1.0, 0.0)
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"'k' must be an int >= 1. Got {k!r} instead.")
    if isinstance(n_recourses, bool) or not isinstance(n_recourses, (int, np.integer)) or n_recourses < 0:
        raise InputError(f"'n_recourses' must be an int >= 0. Got {n_recourses!r} instead.")
    flags = np.asarray(is_favorable)
    if flags.ndim != 1 or flags.shape[0] != n_recourses:
        raise InputError(
            f"'is_favorable' must hold one decision per recourse ({n_recourses}). Got shape {flags.shape} instead."
        )
    if flags.size and flags.dtype != np.bool_:
        raise InputError(f"'is_favorable' must be booleans. Got dtype {flags.dtype} instead.")
    return 1.0 if n_recourses == k and bool(np.all(flags)) else 0.0


# --------------------------------------------------------------------------- diversity of a plan


def anti_diversity(x0, R) -> float:
    r"""Sum over unordered pairs of the cosine similarity of the recourse directions.

    .. math::

        \mathrm{Anti\text{-}Diversity}(\{x^r_k\}, x_0)
        = \sum_{1 \le k < l \le K} \frac{(x^r_k - x_0)^\top (x^r_l - x_0)}
                                        {\lVert x^r_k - x_0\rVert_2 \, \lVert x^r_l - x_0\rVert_2}

    Lower is more diverse. For ``K = 3`` the value lies in ``[-1.5, 3]``; for
    ``K = 1`` it is 0 (empty sum).

    Parameters
    ----------
    x0 : array-like of shape (p,)
    R : array-like of shape (K, p)

    Returns
    -------
    float

    Raises
    ------
    InputError
        If the shapes do not match, ``R`` is empty or a value is not finite.

    Notes
    -----
    *Unordered pairs.* The paper prints the sum over ``k != k'`` (ordered
    pairs, i.e. twice this value), but its tables are consistent with the sum
    over ``k < l`` (a public evaluation script that appears to be the
    authors', repository unconfirmed, computes ``(sum(S) - K) / 2``). We follow
    the tables; multiply by 2 for the printed formula.

    *Zero directions.* When a recourse equals ``x0`` its direction is the zero
    vector and the cosine is undefined. We use the zero vector as its
    "normalised" direction, so every pair involving it contributes 0 and is
    still counted as a pair. Such a recourse cannot be valid (``x0`` is
    unfavourable), so this only matters for invalid plans.

    Cosines are clipped to ``[-1, 1]`` against rounding. O(K^2 p).

    References
    ----------
    Paper, section 5 "Anti-Diversity"; section 4 (``eq:direction``) for the
    normalised directions ``a_i``.

    Examples
    --------
    >>> anti_diversity([0.0, 0.0], [[1.0, 0.0], [0.0, 2.0]])
    0.0
    >>> anti_diversity([0.0, 0.0], [[1.0, 0.0], [-3.0, 0.0]])
    -1.0
    """
    x0, R = _plan(x0, R)
    D = R - x0
    norms = np.linalg.norm(D, axis=1)
    A = np.zeros_like(D)
    nonzero = norms > 0
    A[nonzero] = D[nonzero] / norms[nonzero, None]
    S = np.clip(A @ A.T, -1.0, 1.0)
    upper = np.triu_indices(R.shape[0], k=1)
    return float(np.sum(S[upper]))


def dpp_diversity(R) -> float:
    r"""Determinant of the inverse-distance kernel of the plan (DiCE's DPP diversity).

    .. math::

        \mathrm{DPP}(\{x^r_k\}) = \det Q, \qquad
        Q_{kl} = \frac{1}{1 + \lVert x^r_k - x^r_l \rVert_2}

    Higher is more diverse; ``Q_kk = 1`` so the value is 1 for ``K = 1`` and 0
    when two recourses coincide.

    Parameters
    ----------
    R : array-like of shape (K, p)

    Returns
    -------
    float

    Raises
    ------
    InputError
        If ``R`` is empty or not finite.

    Notes
    -----
    No jitter is added to the diagonal (DiCE and the evaluation script
    mentioned in :func:`anti_diversity` add ``1e-4``; the difference is below the tables' two decimals for
    diverse plans but turns 0 into about ``1e-4`` for duplicated recourses).
    O(K^2 p + K^3).

    References
    ----------
    Paper, section 5 "DPP"; Mothilal et al. (2020), DiCE.

    Examples
    --------
    >>> round(dpp_diversity([[0.0, 0.0], [3.0, 4.0]]), 6)   # 1 - (1/6)**2
    0.972222
    """
    R = _as_matrix(R, "R")
    from scipy.spatial.distance import cdist

    Q = 1.0 / (1.0 + cdist(R, R))
    return float(np.linalg.det(Q))


class NearestRowIndex:
    """A reusable nearest-row index over the training rows (a :class:`scipy.spatial.cKDTree`).

    Build it once per data set and pass it to :func:`manifold_distance` for
    every applicant.

    Parameters
    ----------
    X_train : array-like of shape (N, p)
        The rows that stand for the data manifold (the paper uses the
        favourably predicted training rows), encoded, ``N >= 1``.

    Attributes
    ----------
    n_rows, n_features : int

    Notes
    -----
    Building costs O(N log N) time and O(N p) memory; a query of K points costs
    roughly O(K log N) in low dimension and degrades towards O(K N p) in high
    dimension, but never materialises an N x N (or K x N) array.

    Examples
    --------
    >>> index = NearestRowIndex([[0.0, 0.0], [1.0, 1.0]])
    >>> index.distance([[0.0, 2.0], [1.0, 1.0]]).tolist()
    [1.4142135623730951, 0.0]
    """

    def __init__(self, X_train):
        X = _as_matrix(X_train, "X_train")
        self.n_rows, self.n_features = (int(s) for s in X.shape)
        from scipy.spatial import cKDTree

        self._tree = cKDTree(X)

    def distance(self, R) -> np.ndarray:
        """Euclidean distance from each row of ``R`` to its nearest training row.

        Parameters
        ----------
        R : array-like of shape (K, p)

        Returns
        -------
        ndarray of shape (K,)
        """
        R = _as_matrix(R, "R", n_features=self.n_features)
        dist, _ = self._tree.query(R, k=1)
        return np.asarray(dist, dtype=np.float64).reshape(R.shape[0])

    def __repr__(self) -> str:
        return f"NearestRowIndex(n_rows={self.n_rows}, n_features={self.n_features})"


def manifold_distance(R, X_train=None, *, index: NearestRowIndex | None = None) -> float:
    r"""Largest distance from a recourse of the plan to its nearest training row.

    .. math::

        \mathrm{Manifold\text{-}Distance}(\{x^r_k\})
        = \max_{k} \min_{i} \lVert x^r_k - \hat x_i \rVert_2

    Parameters
    ----------
    R : array-like of shape (K, p)
    X_train : array-like of shape (N, p), optional
        The manifold rows (favourably predicted training rows in the paper).
        Needed unless ``index`` is given.
    index : NearestRowIndex, optional
        A prebuilt index over the same rows, to reuse across applicants. When
        given, ``X_train`` is ignored and may be None.

    Returns
    -------
    float

    Raises
    ------
    InputError
        If neither ``X_train`` nor ``index`` is given, or widths differ.

    Notes
    -----
    Building the index is the expensive part; build one
    :class:`NearestRowIndex` per data set rather than passing ``X_train`` for
    every applicant.

    References
    ----------
    Paper, section 5, equation ``eq:manifold_dist``.

    Examples
    --------
    >>> manifold_distance([[0.0, 2.0], [1.0, 1.0]], [[0.0, 0.0], [1.0, 1.0]])
    1.4142135623730951
    """
    if index is None:
        if X_train is None:
            raise InputError("manifold_distance needs 'X_train' or a prebuilt 'index'. Got neither.")
        index = NearestRowIndex(X_train)
    elif not isinstance(index, NearestRowIndex):
        raise InputError(f"'index' must be a NearestRowIndex. Got {type(index).__name__} instead.")
    return float(np.max(index.distance(R)))


# --------------------------------------------------------------------------- diversity of sequential plans


def _as_paths(paths, n_nodes: int) -> list[np.ndarray]:
    if isinstance(paths, np.ndarray) and paths.ndim == 1 and paths.dtype != object:
        raise InputError("'paths' must be a sequence of paths (each a sequence of node ids). Got a single 1-d array.")
    out = []
    for number, path in enumerate(paths):
        arr = np.asarray(path)
        if arr.ndim != 1 or arr.shape[0] == 0:
            raise InputError(
                f"Path {number} must be a non-empty 1-d sequence of node ids. Got shape {arr.shape} instead."
            )
        if not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"Path {number} must hold integer node ids. Got dtype {arr.dtype} instead.")
        if arr.min() < 0 or arr.max() >= n_nodes:
            raise InputError(
                f"Path {number} refers to node ids outside [0, {n_nodes}) (the rows of 'X_nodes'): "
                f"{arr.tolist()}. Do not include the applicant as a node; pass it as 'x0=' instead."
            )
        out.append(arr.astype(np.intp))
    return out


def _path_inputs(paths, X_nodes, x0):
    X_nodes = _as_matrix(X_nodes, "X_nodes")
    paths = _as_paths(paths, X_nodes.shape[0])
    if x0 is not None:
        x0 = _as_point(x0, "x0")
        if x0.shape[0] != X_nodes.shape[1]:
            raise InputError(
                f"'x0' has {x0.shape[0]} features but 'X_nodes' has {X_nodes.shape[1]}. "
                "Pass both in the same encoded space."
            )
    return paths, X_nodes, x0


def _step_lengths(path: np.ndarray, X_nodes: np.ndarray, x0: np.ndarray | None) -> np.ndarray:
    """Length of the step that reaches each node of ``path`` (the first from ``x0``, or 0)."""
    points = X_nodes[path]
    steps = np.empty(path.shape[0])
    steps[0] = 0.0 if x0 is None else float(np.linalg.norm(points[0] - x0))
    steps[1:] = np.linalg.norm(np.diff(points, axis=0), axis=1)
    return steps


def _levenshtein(del_p: np.ndarray, del_q: np.ndarray, sub: np.ndarray) -> float:
    """Edit distance with position-dependent deletion costs and a substitution cost matrix."""
    n_p, n_q = sub.shape
    prev = np.concatenate(([0.0], np.cumsum(del_q)))  # Lev(empty, Q[:j])
    for i in range(1, n_p + 1):
        cur = np.empty(n_q + 1)
        cur[0] = prev[0] + del_p[i - 1]  # Lev(P[:i], empty)
        for j in range(1, n_q + 1):
            cur[j] = min(
                cur[j - 1] + del_q[j - 1],  # drop v_{j-1} from Q
                prev[j] + del_p[i - 1],  # drop u_{i-1} from P
                prev[j - 1] + sub[i - 1, j - 1],  # match u_{i-1} with v_{j-1}
            )
        prev = cur
    return float(prev[n_q])


def _pair_mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def path_diversity(paths, X_nodes, *, x0=None, weighted: bool = True) -> float:
    r"""Mean Levenshtein distance between the node sequences of a sequential plan.

    .. math::

        \mathrm{Path\text{-}Diversity}(P_1, \dots, P_K)
        = \binom{K}{2}^{-1} \sum_{i < j} \mathrm{Lev}(P_i, P_j)

    For ``P = (u_0, ..., u_l)`` and ``Q = (v_0, ..., v_h)``, with ``d`` the
    Euclidean distance between node features and ``Lev(∅, ∅) = 0``,

    .. math::

        \mathrm{Lev}(P, Q) = \min \begin{cases}
            d(v_h, v_{h-1}) + \mathrm{Lev}(P, Q \setminus v_h) \\
            d(u_l, u_{l-1}) + \mathrm{Lev}(P \setminus u_l, Q) \\
            d(u_l, v_h) + \mathrm{Lev}(P \setminus u_l, Q \setminus v_h)
        \end{cases}

    where a branch that would drop a node from an empty sequence is skipped.
    Dropping ``u_l`` costs the length of the step that reached it; matching two
    nodes costs their distance (0 for the same node). Higher is more diverse.

    Parameters
    ----------
    paths : sequence of K sequences of int
        Each path as node ids, i.e. row indices into ``X_nodes``, from the first
        node after the applicant to the recourse. The applicant itself is not
        a node; give it as ``x0``.
    X_nodes : array-like of shape (n_nodes, p)
        Encoded features of the graph nodes.
    x0 : array-like of shape (p,), optional
        The applicant. It plays the role of ``u_{-1}`` and ``v_{-1}``: dropping
        the first node of a path costs ``d(u_0, x0)``. Without ``x0`` that cost
        is 0 (the paper's recursion leaves ``d(u_0, u_{-1})`` undefined).
    weighted : bool, default=True
        ``False`` gives the classic unit-cost Levenshtein distance on node ids
        (insertion and deletion cost 1, substitution 0 for the same id and 1
        otherwise), which is what the evaluation script mentioned in
        :func:`anti_diversity` computes for Table ``tab:action_diverse_path``
        (``Levenshtein.distance`` on node lists); ``x0`` is then irrelevant.

    Returns
    -------
    float
        NaN when ``K < 2`` (no pair).

    Raises
    ------
    InputError
        If a path is empty, holds ids outside ``[0, n_nodes)`` or ``x0`` has the
        wrong width.

    Notes
    -----
    Exact dynamic programme over prefixes (the recursion only ever drops the
    last node, so the deletion cost of a node is fixed by its position): O(l h)
    per pair plus O(l h p) for the substitution costs, O(K^2) pairs. The value
    is symmetric in ``P`` and ``Q`` and 0 for identical paths.

    References
    ----------
    Paper, appendix "Sequential Recourse", Path-Diversity; Navarro (2001).

    Examples
    --------
    >>> X = [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]
    >>> path_diversity([[0, 1], [0, 2]], X)          # substitute 1 by 2: sqrt(2)
    1.4142135623730951
    >>> path_diversity([[0, 1], [0, 2]], X, weighted=False)
    1.0
    """
    from scipy.spatial.distance import cdist

    paths, X_nodes, x0 = _path_inputs(paths, X_nodes, x0)
    if weighted:
        steps = [_step_lengths(path, X_nodes, x0) for path in paths]
    values = []
    for i in range(len(paths)):
        for j in range(i + 1, len(paths)):
            p, q = paths[i], paths[j]
            if weighted:
                sub = cdist(X_nodes[p], X_nodes[q])
                values.append(_levenshtein(steps[i], steps[j], sub))
            else:
                sub = (p[:, None] != q[None, :]).astype(np.float64)
                values.append(_levenshtein(np.ones(p.shape[0]), np.ones(q.shape[0]), sub))
    return _pair_mean(values)


def _edges(path: np.ndarray, X_nodes: np.ndarray, x0: np.ndarray | None) -> dict[tuple[int, int], float]:
    nodes = path.tolist()
    weights = _step_lengths(path, X_nodes, x0)
    edges = {}
    if x0 is not None:
        edges[(X0_NODE, nodes[0])] = float(weights[0])
    for a, b, w in zip(nodes[:-1], nodes[1:], weights[1:]):
        edges[(a, b)] = float(w)
    return edges


def _weighted_jaccard(e1: dict, e2: dict) -> float:
    union = e1.keys() | e2.keys()
    if not union:
        return 1.0
    shared = e1.keys() & e2.keys()
    weight = {**e1, **e2}
    total = sum(weight[e] for e in union)
    if total == 0.0:
        return len(shared) / len(union)
    return sum(weight[e] for e in shared) / total


def path_anti_diversity(paths, X_nodes, *, x0=None) -> float:
    r"""Mean weighted Jaccard coefficient of the edge sets of a sequential plan.

    .. math::

        \mathrm{Path\text{-}Anti\text{-}Diversity}(P_1, \dots, P_K)
        = \binom{K}{2}^{-1} \sum_{i < j} \mathrm{Jac}(P_i, P_j), \qquad
        \mathrm{Jac}(P, Q) = \frac{\sum_{e \in P \cap Q} d(e)}{\sum_{e \in P \cup Q} d(e)}

    with ``d(e)`` the Euclidean length of edge ``e``. 1 for identical paths, 0
    for paths without a common edge; lower is more diverse.

    Parameters
    ----------
    paths : sequence of K sequences of int
        Node ids (rows of ``X_nodes``), applicant excluded, as in :func:`path_diversity`.
    X_nodes : array-like of shape (n_nodes, p)
    x0 : array-like of shape (p,), optional
        The applicant. When given, each path also has the edge
        ``(X0_NODE, u_0)`` (``X0_NODE = -1``) of length ``d(x0, u_0)``, so two
        paths that leave ``x0`` through the same first node share that edge.

    Returns
    -------
    float
        NaN when ``K < 2`` (no pair).

    Raises
    ------
    InputError
        As :func:`path_diversity`.

    Notes
    -----
    *Edges are directed* ``(u, v)`` pairs in the order of travel, because an
    actionable move ``u -> v`` is not the same action as ``v -> u``; two paths
    that cross the same edge in opposite directions do not share it.
    Each path's edges form a set (an edge travelled twice counts once).

    *Degenerate pairs.* If neither path has an edge (single-node paths without
    ``x0``) the coefficient is 1 (the paths are equal as edge sets, both
    empty). If every edge of the union has length 0 (duplicated rows) the
    unweighted coefficient ``|P ∩ Q| / |P ∪ Q|`` is used.

    O(l + h) per pair after O(l p) edge lengths per path.

    References
    ----------
    Paper, appendix "Sequential Recourse", Path-Anti-Diversity; Chondrogiannis et al. (2018).

    Examples
    --------
    >>> X = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [2.0, 0.0]]
    >>> path_anti_diversity([[0, 1, 2], [0, 1, 3]], X)   # shared 0->1 (1) over 1 + 1 + 1
    0.3333333333333333
    """
    paths, X_nodes, x0 = _path_inputs(paths, X_nodes, x0)
    edge_sets = [_edges(path, X_nodes, x0) for path in paths]
    values = [
        _weighted_jaccard(edge_sets[i], edge_sets[j])
        for i in range(len(edge_sets))
        for j in range(i + 1, len(edge_sets))
    ]
    return _pair_mean(values)


# --------------------------------------------------------------------------- raw-value checks


def _raw_inputs(raw_x0, raw_R) -> tuple[pd.Series, pd.DataFrame]:
    if isinstance(raw_x0, pd.DataFrame):
        if raw_x0.shape[0] != 1:
            raise InputError(f"'raw_x0' must be a single row. Got a DataFrame with {raw_x0.shape[0]} rows instead.")
        raw_x0 = raw_x0.iloc[0]
    if not isinstance(raw_x0, pd.Series):
        raise InputError(f"'raw_x0' must be a pandas Series (one row). Got {type(raw_x0).__name__} instead.")
    if isinstance(raw_R, pd.Series):
        raw_R = raw_R.to_frame().T
    if not isinstance(raw_R, pd.DataFrame):
        raise InputError(f"'raw_R' must be a pandas DataFrame (one recourse per row). Got {type(raw_R).__name__} instead.")
    if raw_R.shape[0] == 0:
        raise InputError("'raw_R' has no rows. A metric of an empty plan is undefined; record NaN for this applicant.")
    expected, got = list(raw_x0.index), list(raw_R.columns)
    if set(expected) != set(got) or len(expected) != len(got):
        missing = [c for c in expected if c not in got]
        extra = [c for c in got if c not in expected]
        raise InputError(
            "The columns of 'raw_R' must be the features of 'raw_x0'. "
            f"Missing from raw_R: {missing}; not in raw_x0: {extra}. Decode both with the same encoder."
        )
    return raw_x0, raw_R[expected]


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _changed(before, after: pd.Series, atol: float) -> np.ndarray:
    """Per row: does ``after`` differ from the scalar ``before``? Missing == missing."""
    out = np.empty(after.shape[0], dtype=bool)
    for i, value in enumerate(after.tolist()):
        if pd.isna(before) and pd.isna(value):
            out[i] = False
        elif pd.isna(before) or pd.isna(value):
            out[i] = True
        elif _is_number(before) and _is_number(value):
            out[i] = abs(float(value) - float(before)) > atol
        else:
            out[i] = value != before
    return out


class Sparsity(NamedTuple):
    """Result of :func:`sparsity`."""

    per_recourse: np.ndarray
    """int ndarray of shape (K,): number of features changed by each recourse."""
    mean: float
    """Mean of ``per_recourse``."""


def sparsity(raw_x0, raw_R, *, atol: float = 1e-9) -> Sparsity:
    """Number of raw features each recourse changes, and its mean over the plan.

    Parameters
    ----------
    raw_x0 : pandas.Series or one-row DataFrame
        The applicant in raw feature values, indexed by feature name.
    raw_R : pandas.DataFrame of shape (K, n_features)
        The plan decoded to raw values, columns = the features of ``raw_x0``.
    atol : float, default=1e-9
        Numeric values closer than ``atol`` count as unchanged (decoding
        round-off). Other values are compared with ``==``; two missing values
        are equal.

    Returns
    -------
    Sparsity
        ``(per_recourse, mean)``.

    Raises
    ------
    InputError
        If the columns differ or ``raw_R`` is empty.

    Notes
    -----
    Not one of the paper's metrics; a common recourse metric (fewer changes are
    easier to act on). O(K n_features).

    Examples
    --------
    >>> import pandas as pd
    >>> x0 = pd.Series({"age": 30, "job": "a"})
    >>> R = pd.DataFrame({"age": [30, 31], "job": ["b", "b"]})
    >>> result = sparsity(x0, R)
    >>> result.per_recourse.tolist(), result.mean
    ([1, 2], 1.5)
    """
    if not np.isfinite(atol) or atol < 0:
        raise InputError(f"'atol' must be a finite float >= 0. Got {atol!r} instead.")
    raw_x0, raw_R = _raw_inputs(raw_x0, raw_R)
    counts = np.zeros(raw_R.shape[0], dtype=np.int64)
    for name in raw_R.columns:
        counts += _changed(raw_x0[name], raw_R[name], atol)
    return Sparsity(per_recourse=counts, mean=float(np.mean(counts)))


def _check_names(names, columns, option: str) -> list:
    if isinstance(names, str):
        raise InputError(f"'{option}' must be a collection of feature names. Got the string {names!r}; wrap it in a list.")
    names = list(names)
    unknown = [n for n in names if n not in columns]
    if unknown:
        raise InputError(f"'{option}' names features that are not columns of the plan: {unknown}. Known: {list(columns)}.")
    return names


def constraint_violations(
    raw_x0,
    raw_R,
    *,
    immutable: Iterable[str] = (),
    increasing: Iterable[str] = (),
    decreasing: Iterable[str] = (),
    ordinal_orders: Mapping[str, Sequence] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    vocabularies: Mapping[str, Iterable] | None = None,
    atol: float = 1e-9,
) -> dict:
    """Count the actionability and plausibility violations of a plan, per kind.

    Four kinds, each counted as the number of (recourse, feature) pairs that
    violate it:

    ``"immutable"``
        an immutable feature differs from ``raw_x0`` (numbers within ``atol``
        are equal).
    ``"monotone"``
        an increasing feature went down or a decreasing one went up. Numeric
        features compare raw values; features listed in ``ordinal_orders``
        compare their rank in the declared order. A recourse value missing
        from the declared order cannot be checked and counts as a violation.
    ``"range"``
        a numeric value lies outside ``[lo, hi]`` of ``ranges`` (the training
        range); a non-numeric or missing value there counts too.
    ``"vocabulary"``
        a value is not a level of ``vocabularies`` (compared as given, no type
        coercion: ``1`` and ``"1"`` differ).

    Parameters
    ----------
    raw_x0 : pandas.Series or one-row DataFrame
    raw_R : pandas.DataFrame of shape (K, n_features)
    immutable, increasing, decreasing : iterable of str
        Feature names. A feature cannot be both increasing and decreasing.
    ordinal_orders : mapping of str to sequence, optional
        Declared level order (lowest first) of ordinal features.
    ranges : mapping of str to (lo, hi), optional
    vocabularies : mapping of str to iterable, optional
    atol : float, default=1e-9
        Tolerance for numeric equality and comparisons.

    Returns
    -------
    dict
        ``{"immutable": int, "monotone": int, "range": int, "vocabulary": int,
        "total": int, "violated": ndarray of bool, shape (K,)}`` where
        ``violated[k]`` says whether recourse ``k`` breaks any rule.

    Raises
    ------
    InputError
        If a name is not a column, a feature is both increasing and
        decreasing, a range has ``lo > hi``, or the applicant's own value of an
        ordinal monotone feature is not in its declared order.

    Examples
    --------
    >>> import pandas as pd
    >>> x0 = pd.Series({"age": 30, "sex": "f"})
    >>> R = pd.DataFrame({"age": [29, 31], "sex": ["f", "m"]})
    >>> out = constraint_violations(x0, R, immutable=["sex"], increasing=["age"])
    >>> out["immutable"], out["monotone"], out["violated"].tolist()
    (1, 1, [True, True])
    """
    if not np.isfinite(atol) or atol < 0:
        raise InputError(f"'atol' must be a finite float >= 0. Got {atol!r} instead.")
    raw_x0, raw_R = _raw_inputs(raw_x0, raw_R)
    columns = list(raw_R.columns)
    immutable = _check_names(immutable, columns, "immutable")
    increasing = _check_names(increasing, columns, "increasing")
    decreasing = _check_names(decreasing, columns, "decreasing")
    both = sorted(set(increasing) & set(decreasing))
    if both:
        raise InputError(f"Features cannot be both increasing and decreasing: {both}. Declare one direction.")
    ordinal_orders = dict(ordinal_orders or {})
    ranges = dict(ranges or {})
    vocabularies = dict(vocabularies or {})
    _check_names(ordinal_orders, columns, "ordinal_orders")
    _check_names(ranges, columns, "ranges")
    _check_names(vocabularies, columns, "vocabularies")

    n = raw_R.shape[0]
    kinds = {kind: np.zeros(n, dtype=np.int64) for kind in ("immutable", "monotone", "range", "vocabulary")}

    for name in immutable:
        kinds["immutable"] += _changed(raw_x0[name], raw_R[name], atol)

    for name, direction in [(f, 1) for f in increasing] + [(f, -1) for f in decreasing]:
        kinds["monotone"] += _monotone_violated(name, raw_x0[name], raw_R[name], direction, ordinal_orders, atol)

    for name, bounds in ranges.items():
        try:
            lo, hi = (float(b) for b in bounds)
        except (TypeError, ValueError) as exc:
            raise InputError(f"ranges[{name!r}] must be a pair (lo, hi) of numbers. Got {bounds!r}.") from exc
        if not lo <= hi:
            raise InputError(f"ranges[{name!r}] must satisfy lo <= hi. Got ({lo}, {hi}).")
        for i, value in enumerate(raw_R[name].tolist()):
            ok = _is_number(value) and not pd.isna(value) and lo - atol <= float(value) <= hi + atol
            kinds["range"][i] += not ok

    for name, levels in vocabularies.items():
        allowed = set(levels)
        for i, value in enumerate(raw_R[name].tolist()):
            kinds["vocabulary"][i] += value not in allowed

    per_row = sum(kinds.values())
    result = {kind: int(counts.sum()) for kind, counts in kinds.items()}
    result["total"] = int(per_row.sum())
    result["violated"] = per_row > 0
    return result


def _monotone_violated(name, before, after: pd.Series, direction: int, ordinal_orders, atol: float) -> np.ndarray:
    values = after.tolist()
    if name in ordinal_orders:
        rank = {level: r for r, level in enumerate(ordinal_orders[name])}
        if before not in rank:
            raise InputError(
                f"The applicant's value {before!r} of ordinal feature {name!r} is not in its declared order "
                f"{list(ordinal_orders[name])}. Fix the applicant row or the declared order."
            )
        start = rank[before]
        return np.array([v not in rank or direction * (rank[v] - start) < 0 for v in values], dtype=bool)
    if not _is_number(before) or pd.isna(before):
        raise InputError(
            f"Monotone feature {name!r} has the non-numeric applicant value {before!r}. "
            "Declare its level order in 'ordinal_orders'."
        )
    return np.array(
        [not _is_number(v) or pd.isna(v) or direction * (float(v) - float(before)) < -atol for v in values],
        dtype=bool,
    )


# --------------------------------------------------------------------------- aggregation


class Summary(NamedTuple):
    """Result of :func:`summarize`."""

    mean: float
    """Mean of the non-NaN values (NaN if there are none)."""
    std: float
    """Population standard deviation (ddof=0) of the non-NaN values (NaN if none)."""
    count: int
    """Number of non-NaN values used."""
    n_missing: int
    """Number of NaN values ignored."""


def summarize(values) -> Summary:
    r"""Mean and standard deviation of per-applicant values, ignoring NaN.

    .. math::

        \bar v = \frac{1}{n}\sum_i v_i, \qquad
        s = \sqrt{\frac{1}{n}\sum_i (v_i - \bar v)^2}

    over the ``n`` non-NaN values: the population standard deviation
    (``ddof=0``, numpy's default; it is 0 for a single value). The paper does
    not say which estimator its "mean +- std" cells use.

    Parameters
    ----------
    values : array-like of shape (n_applicants,)
        One value per applicant (NaN where the metric is undefined, e.g. a
        method returned no plan).

    Returns
    -------
    Summary
        ``(mean, std, count, n_missing)``; mean and std are NaN when every
        value is NaN or ``values`` is empty.

    Raises
    ------
    InputError
        If ``values`` is not 1-d numeric or holds infinities.

    Examples
    --------
    >>> summarize([1.0, float("nan"), 3.0])
    Summary(mean=2.0, std=1.0, count=2, n_missing=1)
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"'values' must be numbers. Got {type(values).__name__}: {exc}") from exc
    if arr.ndim != 1:
        raise InputError(f"'values' must be 1-d (one value per applicant). Got shape {arr.shape} instead.")
    if np.any(np.isinf(arr)):
        raise InputError("'values' holds infinite values; use NaN for undefined values.")
    kept = arr[~np.isnan(arr)]
    n_missing = int(arr.shape[0] - kept.shape[0])
    if kept.shape[0] == 0:
        return Summary(mean=float("nan"), std=float("nan"), count=0, n_missing=n_missing)
    return Summary(mean=float(np.mean(kept)), std=float(np.std(kept)), count=int(kept.shape[0]), n_missing=n_missing)
