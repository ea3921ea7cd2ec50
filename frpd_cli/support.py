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

__all__ = ["LabelSupport", "auto_neighbors", "label_support", "nearest_rows"]

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


def label_support(tree, labeled_tree, labeled: np.ndarray, Z: np.ndarray, k: int) -> np.ndarray:
    """Share of favourable-labelled rows among the ``k`` rows of ``tree`` nearest to each row of ``Z``, every
    row at the k-th distance included.

    Parameters
    ----------
    tree : scipy.spatial.cKDTree
        Over all encoded training rows.
    labeled_tree : scipy.spatial.cKDTree or None
        Over the favourable-labelled rows only (None when there are none).
    labeled : ndarray of bool, shape (n_rows,)
        Favourable-labelled rows, in ``tree``'s order.
    Z : ndarray of shape (n, n_features_out)
    k : int
    """
    n_rows = int(labeled.size)
    if len(Z) == 0:
        return np.zeros(0)
    if k >= n_rows:                                   # every row is a neighbour
        return np.full(len(Z), float(labeled.mean()))
    d, i = tree.query(Z, k=k + 1)                     # one beyond the k-th tells whether the k-th is tied
    share = labeled[i[:, :k]].mean(axis=1)
    # the k-th distance, safe from rounding (equal distances summed in another order may differ in the last bit)
    kth = d[:, k - 1] * (1.0 + 1e-9)
    tied = np.flatnonzero(d[:, k] <= kth)
    if tied.size:
        r = kth[tied]
        total = np.asarray(tree.query_ball_point(Z[tied], r, return_length=True), dtype=np.float64)
        good = np.zeros(tied.size) if labeled_tree is None else \
            np.asarray(labeled_tree.query_ball_point(Z[tied], r, return_length=True), dtype=np.float64)
        share[tied] = good / total
    return share


#: Nearest distinct training rows asked for at once; more than this many at the same distance are found with a
#: radius search.
_NEAREST = 4


def nearest_rows(tree, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """The rows of ``tree`` at the smallest distance from each row of ``Z``, ties whole.

    Returns
    -------
    positions : ndarray of int, shape (n, m)
        The ``m`` nearest rows of each row of ``Z``.
    nearest : ndarray of bool, shape (n, m)
        Which of them are at the smallest distance.
    more : dict
        Rows of ``Z`` with more than ``m`` rows at the smallest distance: position in ``Z`` -> all of them.
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
    return i, tied, more


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
    """

    def __init__(self, encoder, X: np.ndarray, labeled: np.ndarray, k: int, *, threshold: float, feature_names):
        if k < 1:
            raise ValueError(f"k must be at least 1; got {k}")
        self.encoder = encoder
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.labeled = np.asarray(labeled, dtype=bool)
        self.k = int(k)
        self.threshold = float(threshold)
        self.feature_names = tuple(feature_names)
        self.path = f"label support ({self.k} nearest training rows)"
        self._trees = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_trees"] = None                        # rebuilt where used (workers), shares computed again
        return state

    def _search(self):
        """(all rows, favourable-labelled rows, distinct rows) trees, the distinct rows, their shares so far and
        the position of each distinct row by its bytes."""
        if self._trees is None:
            from scipy.spatial import cKDTree

            good = self.X[self.labeled]
            distinct = np.unique(self.X, axis=0)
            self._trees = (cKDTree(self.X), cKDTree(good) if len(good) else None, cKDTree(distinct), distinct,
                           np.full(len(distinct), np.nan), {row.tobytes(): i for i, row in enumerate(distinct)})
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
        tree, good, tree_distinct, distinct, share, where = self._search()
        # a training row is its own nearest row (no other distinct row is at distance 0): no search
        found = np.array([where.get(z.tobytes(), -1) for z in Z], dtype=np.int64)
        positions = np.zeros((len(Z), min(_NEAREST, len(distinct))), dtype=np.int64)
        nearest = np.zeros(positions.shape, dtype=bool)
        positions[:, 0], nearest[:, 0] = found, True
        unknown = np.flatnonzero(found < 0)
        more = {}
        if unknown.size:
            positions[unknown], nearest[unknown], far = nearest_rows(tree_distinct, Z[unknown])
            more = {int(unknown[j]): at for j, at in far.items()}
        used = np.unique(np.concatenate([positions[nearest], *more.values()]))
        missing = used[np.isnan(share[used])]
        if missing.size:
            share[missing] = label_support(tree, good, self.labeled, distinct[missing], self.k)
        out = np.where(nearest, share[positions], 0.0).sum(axis=1) / nearest.sum(axis=1)
        for j, at in more.items():
            out[j] = share[at].mean()
        return out

    def is_favorable(self, rows) -> np.ndarray:
        return self.favorable_probability(rows) >= self.threshold
