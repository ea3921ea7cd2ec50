"""QUAD prototype selection: eigen-approximate screening (Algorithms 1 and 2) and the exact reduced problem."""

from __future__ import annotations

import numpy as np

from frpd_cli.selection.geometry import Eigen

__all__ = ["quad_objective_values", "screen_best_response", "screen_dual_ascent", "screening_set"]


def quad_objective_values(directions: np.ndarray, distances: np.ndarray, indices: np.ndarray, theta: float) -> float:
    """``theta z^T S z + (1 - theta) d^T z`` for the index set ``indices`` (``z^T S z = ||sum a_i||^2``)."""
    v = directions[indices].sum(axis=0)
    return float(theta * (v @ v) + (1.0 - theta) * distances[indices].sum())


def _k_smallest(score: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the ``k`` smallest scores, ``O(N)`` (``np.argpartition``, no sort of ``N``)."""
    if k >= score.shape[0]:
        return np.arange(score.shape[0], dtype=np.int64)
    return np.sort(np.argpartition(score, k - 1)[:k]).astype(np.int64)


def screening_set(iterates: list[np.ndarray], n_iter: int, tau: int, cycle_start: int | None) -> np.ndarray:
    """Union of the last ``tau + 1`` iterates ``z_{T-tau}, ..., z_T`` of a ``T = n_iter`` run.

    ``iterates[i]`` is ``z_{i+1}``. When the run stopped early because ``iterates[-1]`` repeats
    ``iterates[cycle_start]`` the sequence is periodic from there on (each ``z_{t+1}`` is a function of
    ``z_t``), so the iterates of the full run are known without computing them.
    """
    n_done = len(iterates)
    wanted = np.arange(max(n_iter - tau - 1, 0), n_iter)  # list positions of z_{T-tau} .. z_T
    if cycle_start is None:
        positions = wanted[wanted < n_done]
    else:
        period = n_done - 1 - cycle_start
        positions = np.where(wanted < n_done - 1, wanted, cycle_start + (wanted - cycle_start) % period)
    return np.unique(np.concatenate([iterates[i] for i in np.unique(positions)]))


def screen_best_response(
    eigen: Eigen, distances: np.ndarray, k: int, theta: float, n_iter: int
) -> tuple[list[np.ndarray], int | None]:
    """Best-response iterations (Algorithm 1) on the top-``M`` eigen-approximation.

    ``gamma_{t+1} = -theta sigma (V^T z_t)`` and ``z_{t+1}`` = the ``k`` smallest entries of
    ``(1 - theta) d - 2 V gamma_{t+1} = (1 - theta) d + 2 theta V (sigma * V^T z_t)``.

    Returns
    -------
    iterates : list of ndarray of shape (k,)
        ``z_1, z_2, ...`` as sorted index arrays, up to the first repeat.
    cycle_start : int or None
        Position in ``iterates`` of the earlier copy of the last iterate (``len - 2`` for a fixed
        point), or None if ``n_iter`` iterations ran without a repeat.

    Notes
    -----
    Each iteration costs ``O(N M)`` (one product with ``V``); ``z_{t+1}`` depends only on ``z_t``,
    so the iterations stop at the first repeated iterate.

    References
    ----------
    Paper eq. (z-opt), eq. (gamma-opt) and Algorithm 1.
    """
    V, sigma = eigen.vectors, eigen.values
    base = (1.0 - theta) * distances
    iterates: list[np.ndarray] = []
    seen: dict[bytes, int] = {}
    z = np.zeros(0, dtype=np.int64)
    for t in range(n_iter):
        if z.size:
            score = base + (2.0 * theta) * (V @ (sigma * V[z].sum(axis=0)))
        else:
            score = base
        z = _k_smallest(score, k)
        key = z.tobytes()
        iterates.append(z)
        if key in seen:
            return iterates, seen[key]
        seen[key] = t
    return iterates, None


def screen_dual_ascent(
    eigen: Eigen, distances: np.ndarray, k: int, theta: float, n_iter: int, step: float
) -> list[np.ndarray]:
    """Dual ascent iterations (Algorithm 2) with step size ``2 lambda / sqrt(t + 1)``.

    ``gamma_{t+1} = gamma_t - (2 lambda / sqrt(t + 1)) (gamma_t / (theta sigma) + V^T z_t)`` and
    ``z_{t+1}`` = the ``k`` smallest entries of ``(1 - theta) d - 2 V gamma_{t+1}``.

    Returns
    -------
    list of ndarray of shape (k,)
        ``z_1, ..., z_T`` as sorted index arrays.

    Notes
    -----
    ``O(N M)`` per iteration, always ``n_iter`` iterations (a repeated ``z`` is no fixed point:
    ``gamma`` keeps moving). Safeguard (not in the paper): in coordinates where the paper's step
    would overshoot the coordinate-wise maximiser ``-theta sigma_m v_m^T z_t`` of the concave
    dual function, i.e. ``2 lambda / sqrt(t+1) > theta sigma_m``, the step is capped at that
    maximiser. Without the cap the small-``sigma_m`` coordinates oscillate with a growing
    amplitude and overflow; with it they take the best-response value, and the large-``sigma``
    coordinates follow the paper exactly.

    References
    ----------
    Paper eq. (dualprogram) and Algorithm 2.
    """
    V, sigma = eigen.vectors, eigen.values
    base = (1.0 - theta) * distances
    gamma = np.zeros(sigma.shape[0])
    target_scale = theta * sigma
    iterates: list[np.ndarray] = []
    z = np.zeros(0, dtype=np.int64)
    for t in range(n_iter):
        vz = V[z].sum(axis=0) if z.size else np.zeros(sigma.shape[0])
        alpha = np.minimum(2.0 * step / np.sqrt(t + 1.0) / target_scale, 1.0)
        gamma = gamma + alpha * (-target_scale * vz - gamma)
        z = _k_smallest(base - 2.0 * (V @ gamma), k)
        iterates.append(z)
    return iterates
