"""Label support: do the labelled training rows around a recourse agree with the model?

A model trained on other rows of the same population (the next release) learns the same thing where the
training labels are plentiful and agree, and something else in thin or mixed regions: there today's model
extrapolates, often with confidence, from a handful of rows. :class:`LabelSupport` is a k-nearest-neighbour
vote of the training labels, used as one more model a recourse must satisfy (``--robust-support K``,
:class:`frpd_cli.judge.Judge`). Distances are frpd's encoding of the features (the ``--scale`` in effect).

- The *share* of a training row is the share of favourable-labelled rows among the ``k`` training rows nearest
  to it (itself included).
- The support of any row is the share of the training row nearest to it: the closest real example stands for
  it, so a recourse is supported when the labelled neighbourhood of that example is favourable. When several
  distinct training rows are nearest, their shares are averaged.
- A row is supported when its support reaches the model's threshold (plus any ``--margin``).
- With a *radius* (``--robust-support-radius``), a row farther than it from every training row has support 0:
  no labelled example stands near it, and a model trained on other rows is free to learn anything there. ``auto``
  takes the :data:`RADIUS_QUANTILE` quantile of the distances from the distinct training rows to their nearest
  other distinct row, so nine in ten training rows have a neighbour that close: the radius follows how densely
  the data fill their space, in the encoding's units.

For a training row this is exactly its k-nearest-neighbour share; for other rows it costs one nearest-row search
(the shares of the training rows are computed once, when first needed, and kept), about five times less than a
k-nearest search for every row, with the same effect on plans (measured in docs/robust.md).

Ties are counted whole at both steps: every row at the k-th smallest distance counts, and every distinct row at
the smallest distance is averaged, so the support is a function of the row and the training set only (not of
the order rows are searched in), and a row's support never depends on the other rows scored with it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["LabelSupport", "auto_neighbors", "auto_radius", "distinct_rows", "label_support", "nearest_rows",
           "RADIUS_QUANTILE"]

#: Fewest neighbours ``auto`` chooses.
MIN_NEIGHBORS = 5
#: Most neighbours ``auto`` chooses: the square root grows with the data (441 at 194,000 favourable rows, where
#: computing every favourable training row's share took ten minutes on a million rows), while validity under
#: retrained models stopped rising beyond about 60 (docs/robust.md).
MAX_NEIGHBORS = 64


def auto_neighbors(n_labeled: int, n_rows: int) -> int:
    """``--robust-support auto``: the square root of the number of favourable-labelled rows (rounded up), between
    :data:`MIN_NEIGHBORS` and :data:`MAX_NEIGHBORS`, and at most the number of rows."""
    root = math.ceil(math.sqrt(max(n_labeled, 0)))
    return int(max(1, min(n_rows, max(MIN_NEIGHBORS, min(MAX_NEIGHBORS, root)))))


#: ``--robust-support-radius auto``: this quantile of the distances from the distinct training rows to their
#: nearest other distinct row (docs/robust.md: 0.75 bought more validity on Bank and as much on Adult, at more
#: changed features).
RADIUS_QUANTILE = 0.9
#: At most this many distinct rows (evenly spaced in their order of appearance) give ``auto`` its quantile; each is
#: searched among all of them.
_RADIUS_SAMPLE = 20_000


def auto_radius(tree, distinct: np.ndarray) -> float:
    """``--robust-support-radius auto``: the :data:`RADIUS_QUANTILE` quantile of the distance from each distinct
    training row to its nearest other distinct row (inf when there is one distinct row: nothing to compare).

    Above :data:`_RADIUS_SAMPLE` distinct rows, that many of them, evenly spaced, are searched (among all): the
    same rows for the same training file, so the same radius.
    """
    n = len(distinct)
    if n < 2:
        return math.inf
    at = np.arange(n) if n <= _RADIUS_SAMPLE else np.unique(np.linspace(0, n - 1, _RADIUS_SAMPLE).astype(np.int64))
    d, _ = tree.query(distinct[at], k=2)
    return float(np.quantile(np.asarray(d)[:, 1], RADIUS_QUANTILE))


def label_support(tree, counts: np.ndarray, good: np.ndarray, Z: np.ndarray, k: int) -> np.ndarray:
    """Share of favourable-labelled rows among the ``k`` training rows nearest to each row of ``Z``, every row
    at the k-th distance included.

    The training rows are given as their distinct values with multiplicities, so a row repeated m times costs
    one point of the search, not m (large training sets repeat rows: a million resampled Adult rows hold 88,268
    distinct ones).

    Parameters
    ----------
    tree : scipy.spatial.cKDTree
        Over the distinct encoded training rows.
    counts : ndarray of int, shape (n_distinct,)
        Training rows equal to each distinct row.
    good : ndarray, shape (n_distinct,)
        Favourable-labelled training rows equal to each distinct row.
    Z : ndarray of shape (n, n_features_out)
    k : int
    """
    counts = np.asarray(counts)
    good = np.asarray(good, dtype=np.float64)
    n_rows, n_distinct = int(counts.sum()), int(counts.size)
    if len(Z) == 0:
        return np.zeros(0)
    if k >= n_rows:                                   # every row is a neighbour
        return np.full(len(Z), float(good.sum() / n_rows))
    # k distinct rows hold at least k rows; one more tells whether the k-th row's distance is tied beyond them
    m = min(k + 1, n_distinct)
    d, i = tree.query(Z, k=m)
    d, i = d.reshape(len(Z), m), i.reshape(len(Z), m)
    reach = np.argmax(np.cumsum(counts[i], axis=1) >= k, axis=1)
    # the k-th row's distance, safe from rounding (equal distances summed in another order may differ in the
    # last bit)
    kth = d[np.arange(len(Z)), reach] * (1.0 + 1e-9)
    inside = d <= kth[:, None]
    total = np.where(inside, counts[i], 0).sum(axis=1).astype(np.float64)
    favourable = np.where(inside, good[i], 0.0).sum(axis=1)
    crowded = np.flatnonzero(inside[:, -1]) if m < n_distinct else np.zeros(0, dtype=int)
    for j, found in zip(crowded, tree.query_ball_point(Z[crowded], kth[crowded]) if crowded.size else ()):
        found = np.asarray(found, dtype=np.int64)     # tied beyond the rows asked for: all of them
        total[j], favourable[j] = counts[found].sum(), good[found].sum()
    return favourable / total


def distinct_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct rows of ``X`` in the order they first appear, the position of each row among them and their
    multiplicities: ``distinct[inverse]`` is ``X``.

    Rows are grouped by hashing (pandas), never sorted: numpy's ``unique(axis=0)`` sorts every row (19 s for a
    million rows of 29 columns, under 1 s this way). NaN equals NaN here, and 0.0 equals -0.0.
    """
    X = np.asarray(X)
    if X.ndim != 2 or not len(X) or not X.shape[1]:
        distinct, inverse, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
        return distinct, inverse.ravel(), counts
    inverse = pd.DataFrame(X).groupby(list(range(X.shape[1])), sort=False, dropna=False).ngroup().to_numpy()
    first = np.unique(inverse, return_index=True)[1]          # groups are numbered in order of appearance
    return X[first], inverse.astype(np.int64), np.bincount(inverse, minlength=first.size)


#: Supports remembered per process (rows scored again are not searched again); beyond, the memory starts afresh.
_KNOWN_ROWS = 1 << 18

#: Nearest distinct training rows asked for at once; more than this many at the same distance are found with a
#: radius search.
_NEAREST = 4


def nearest_rows(tree, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict, np.ndarray]:
    """The rows of ``tree`` at the smallest distance from each row of ``Z``, ties whole.

    Returns
    -------
    positions : ndarray of int, shape (n, m)
        The ``m`` nearest rows of each row of ``Z``.
    nearest : ndarray of bool, shape (n, m)
        Which of them are at the smallest distance.
    more : dict
        Rows of ``Z`` with more than ``m`` rows at the smallest distance: position in ``Z`` -> all of them.
    distance : ndarray of shape (n,)
        The smallest distance.
    """
    n = int(tree.n)
    m = min(_NEAREST, n)
    d, i = tree.query(Z, k=m)
    d, i = d.reshape(len(Z), m), i.reshape(len(Z), m)
    r = d[:, 0] * (1.0 + 1e-9)                    # the smallest distance, safe from rounding
    tied = d <= r[:, None]
    more = {}
    crowded = np.flatnonzero(tied[:, -1]) if m < n else np.zeros(0, dtype=int)
    if crowded.size:                              # as many ties as asked for: there may be more
        for j, found in zip(crowded, tree.query_ball_point(Z[crowded], r[crowded])):
            more[int(j)] = np.sort(np.asarray(found, dtype=np.int64))
    return i, tied, more, d[:, 0]


class LabelSupport:
    """The k-nearest-neighbour vote of the training labels, with the model's interface (``favorable_probability``,
    ``threshold``).

    Parameters
    ----------
    encoder : frpd_cli.encoding.Encoder
        The training set's encoder (rows are compared in its space).
    X : ndarray of shape (n_rows, n_features_out)
        The encoded training rows.
    labeled : ndarray of bool, shape (n_rows,)
        Rows whose target is the favourable class.
    k : int
        Neighbours (``--robust-support``).
    threshold : float
        The model's threshold: a row is supported when its share reaches it.
    feature_names : tuple of str
        The features, in the order of array rows.
    radius : float, "auto" or None
        A row farther than this from every training row has support 0 (``auto``: :func:`auto_radius`, computed
        when first needed); None: no radius.
    """

    def __init__(self, encoder, X: np.ndarray, labeled: np.ndarray, k: int, *, threshold: float, feature_names,
                 radius=None):
        if k < 1:
            raise ValueError(f"k must be at least 1; got {k}")
        if not (radius is None or radius == "auto" or (isinstance(radius, (int, float)) and radius > 0)):
            raise ValueError(f"radius must be a positive number, 'auto' or None; got {radius!r}")
        self.radius_asked = radius
        self.encoder = encoder
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.labeled = np.asarray(labeled, dtype=bool)
        self.k = int(k)
        self.threshold = float(threshold)
        self.feature_names = tuple(feature_names)
        self.path = f"label support ({self.k} nearest training rows)"
        self._trees = None

    @property
    def radius(self) -> float | None:
        """The radius in effect (``auto`` resolved on the training rows), or None."""
        if self.radius_asked != "auto":
            return None if self.radius_asked is None else float(self.radius_asked)
        if "_radius" not in self.__dict__:
            tree, distinct = self._search()[:2]
            self.__dict__["_radius"] = auto_radius(tree, distinct)
        return self.__dict__["_radius"]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_trees"] = None                        # rebuilt where used (workers), shares computed again
        state.pop("_known", None)
        return state

    def _search(self):
        """The tree of the distinct rows, the distinct rows, their multiplicities and favourable-labelled
        multiplicities, their shares so far and the position of each distinct row by its bytes."""
        if self._trees is None:
            from scipy.spatial import cKDTree

            distinct, inverse, counts = distinct_rows(self.X)
            good = np.bincount(inverse, weights=self.labeled.astype(np.float64), minlength=len(distinct))
            self._trees = (cKDTree(distinct), distinct, counts, good, np.full(len(distinct), np.nan),
                           {row.tobytes(): i for i, row in enumerate(distinct)})
        return self._trees

    def favorable_probability(self, rows) -> np.ndarray:
        """The support of each row: the mean share of its nearest distinct training rows (see the module)."""
        if isinstance(rows, dict):
            frame = pd.DataFrame(rows)
        elif isinstance(rows, pd.DataFrame):
            frame = rows
        else:
            frame = pd.DataFrame(np.asarray(rows, dtype=object), columns=list(self.feature_names))
        if not len(frame):
            return np.zeros(0)
        Z = np.asarray(self.encoder.encode(frame.loc[:, list(self.feature_names)].reset_index(drop=True)),
                       dtype=np.float64)
        # a row's support depends on the row alone, and the stages of a plan score the same rows again
        # (interpolation, sparsification, the minimal step): each distinct row is searched once per process
        known = self.__dict__.setdefault("_known", {})
        out = np.empty(len(Z))
        todo: dict = {}                               # new rows: bytes -> their positions in Z
        for j, z in enumerate(Z):
            key = z.tobytes()
            value = known.get(key)
            if value is None:
                todo.setdefault(key, []).append(j)
            else:
                out[j] = value
        if todo:
            if len(known) + len(todo) > _KNOWN_ROWS:
                known.clear()
            for (key, at), value in zip(todo.items(), self._supports(Z[[at[0] for at in todo.values()]]).tolist()):
                out[at] = known[key] = value
        return out

    def _supports(self, Z: np.ndarray) -> np.ndarray:
        """The support of each encoded row of ``Z`` (:meth:`favorable_probability` without the rows known)."""
        tree_distinct, distinct, _, _, share, where = self._search()
        # a training row is its own nearest row (no other distinct row is at distance 0): no search
        found = np.array([where.get(z.tobytes(), -1) for z in Z], dtype=np.int64)
        positions = np.zeros((len(Z), min(_NEAREST, len(distinct))), dtype=np.int64)
        nearest = np.zeros(positions.shape, dtype=bool)
        positions[:, 0], nearest[:, 0] = found, True
        unknown = np.flatnonzero(found < 0)
        more = {}
        distance = np.zeros(len(Z))                   # a training row is at distance 0 from itself
        if unknown.size:
            positions[unknown], nearest[unknown], far, distance[unknown] = nearest_rows(tree_distinct, Z[unknown])
            more = {int(unknown[j]): at for j, at in far.items()}
        self._shares(np.unique(np.concatenate([positions[nearest], *more.values()])))
        out = np.where(nearest, share[positions], 0.0).sum(axis=1) / nearest.sum(axis=1)
        for j, at in more.items():
            out[j] = share[at].mean()
        radius = self.radius
        if radius is not None:
            out[distance > radius] = 0.0              # no labelled example near it
        return out

    def highest_share(self) -> float:
        """The highest share of any training row: a support above it is reached by no row (each training row's
        share is computed, once, as a recourse's search would)."""
        share = self._shares(np.arange(len(self._search()[1])))
        return float(share.max()) if share.size else 0.0

    def _shares(self, at: np.ndarray) -> np.ndarray:
        """The shares of the distinct training rows ``at``, each computed when first asked and kept."""
        tree_distinct, distinct, counts, good, share, _ = self._search()
        missing = at[np.isnan(share[at])]
        if missing.size:
            share[missing] = label_support(tree_distinct, counts, good, distinct[missing], self.k)
        return share[at]

    def is_favorable(self, rows) -> np.ndarray:
        return self.favorable_probability(rows) >= self.threshold
