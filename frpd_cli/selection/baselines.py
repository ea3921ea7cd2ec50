"""Baselines: the K nearest candidates and the greedy heuristic on the QUAD objective."""

from __future__ import annotations

import numpy as np

__all__ = ["k_nearest", "rank_order", "quad_greedy"]


def rank_order(distances: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Sort ``indices`` by distance ascending, ties by index ascending.

    Parameters
    ----------
    distances : ndarray of shape (n_candidates,)
    indices : ndarray of shape (n_selected,)

    Returns
    -------
    ndarray of shape (n_selected,), int64
    """
    indices = np.asarray(indices, dtype=np.int64)
    return indices[np.lexsort((indices, distances[indices]))]


def k_nearest(distances: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` smallest distances, in rank order (ties by index).

    Parameters
    ----------
    distances : ndarray of shape (n_candidates,)
    k : int
        ``1 <= k <= n_candidates``.

    Returns
    -------
    ndarray of shape (k,), int64

    Notes
    -----
    ``O(N)`` with ``np.argpartition`` (no full sort); the boundary ties are resolved by index.
    """
    n = distances.shape[0]
    if k >= n:
        return rank_order(distances, np.arange(n))
    part = np.argpartition(distances, k - 1)[:k]
    kth = distances[part].max()
    strict = np.flatnonzero(distances < kth)
    ties = np.flatnonzero(distances == kth)[: k - strict.size]
    return rank_order(distances, np.concatenate([strict, ties]))


def quad_greedy(directions: np.ndarray, distances: np.ndarray, k: int, theta: float) -> np.ndarray:
    """Greedy heuristic for the QUAD problem: add the candidate with the smallest objective increase.

    Adding ``i`` to a set whose directions sum to ``v`` raises ``theta ||v||^2 + (1 - theta) sum d``
    by ``theta (2 a_i^T v + ||a_i||^2) + (1 - theta) d_i``.

    Parameters
    ----------
    directions : ndarray of shape (n_candidates, n_features)
    distances : ndarray of shape (n_candidates,)
    k : int
    theta : float

    Returns
    -------
    ndarray of shape (k,), int64, in the order the elements were added.

    Notes
    -----
    ``O(N p)`` per step, ``O(N p k)`` in all. Ties go to the smallest index.

    References
    ----------
    Paper Appendix "Comparisons of Prototype Selection Algorithms", greedy for eq. (cosine2).
    """
    squared_norms = np.einsum("ij,ij->i", directions, directions)
    base = theta * squared_norms + (1.0 - theta) * distances
    v = np.zeros(directions.shape[1])
    chosen = np.empty(k, dtype=np.int64)
    taken = np.zeros(distances.shape[0], dtype=bool)
    for step in range(k):
        increase = base + (2.0 * theta) * (directions @ v) if step else base.copy()
        increase[taken] = np.inf
        j = int(np.argmin(increase))
        chosen[step] = j
        taken[j] = True
        v += directions[j]
    return chosen
