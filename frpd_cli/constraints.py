"""Actionability constraints expressed as numeric codes.

The one-hot encoding is the right space for distances but the wrong one for
constraints: "same personal status" or "savings do not go down" are statements
about raw values and declared orders. :class:`ConstraintCodes` keeps, for each
row, the raw value (numeric features) or level index/rank (categorical and
ordinal features) of every constrained feature, so that candidate filtering and
the actionability graph share one vectorised rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ConstraintCodes", "actionable_mask", "actionable_pairs"]


@dataclass(frozen=True)
class ConstraintCodes:
    """Codes of the constrained features of a set of rows.

    Parameters
    ----------
    immutable : ndarray of shape (n_rows, n_immutable)
        Raw value (numeric feature) or level index (categorical feature) of each
        immutable feature.
    monotone : ndarray of shape (n_rows, n_monotone)
        Raw value (numeric feature) or rank in the declared order (ordinal
        feature) of each feature that may move only one way.
    direction : ndarray of shape (n_monotone,)
        ``+1`` for increasing-only features, ``-1`` for decreasing-only ones.
    immutable_names, monotone_names : tuple of str
        Feature names of the columns of ``immutable`` and ``monotone``.
    """

    immutable: np.ndarray
    monotone: np.ndarray
    direction: np.ndarray
    immutable_names: tuple[str, ...] = ()
    monotone_names: tuple[str, ...] = ()

    @property
    def n_rows(self) -> int:
        return int(self.immutable.shape[0])

    def row(self, i: int) -> "ConstraintCodes":
        """The codes of row ``i`` as a one-row :class:`ConstraintCodes`."""
        return self._select(slice(i, i + 1))

    def take(self, indices) -> "ConstraintCodes":
        """The codes of the rows ``indices``."""
        return self._select(np.asarray(indices))

    def _select(self, rows) -> "ConstraintCodes":
        return ConstraintCodes(
            immutable=self.immutable[rows],
            monotone=self.monotone[rows],
            direction=self.direction,
            immutable_names=self.immutable_names,
            monotone_names=self.monotone_names,
        )


def actionable_mask(source: ConstraintCodes, targets: ConstraintCodes) -> np.ndarray:
    """Which moves from the single row ``source`` to each row of ``targets`` are actionable.

    A move is actionable when every immutable code is equal at both ends and
    every monotone code moves only in its allowed direction (staying put is
    allowed).

    Parameters
    ----------
    source : ConstraintCodes
        Codes of exactly one row (the start of the move).
    targets : ConstraintCodes
        Codes of the candidate end points, shape ``(n_targets, ...)``.

    Returns
    -------
    mask : ndarray of bool, shape (n_targets,)

    Examples
    --------
    >>> import numpy as np
    >>> codes = ConstraintCodes(immutable=np.array([[0.], [0.], [1.]]),
    ...                         monotone=np.array([[30.], [29.], [40.]]),
    ...                         direction=np.array([1], dtype=np.int8))
    >>> actionable_mask(codes.row(0), codes).tolist()
    [True, False, False]
    """
    if source.immutable.shape[0] != 1:
        raise ValueError(
            f"'source' must hold exactly one row. Got {source.immutable.shape[0]} rows instead."
        )
    mask = np.ones(targets.immutable.shape[0], dtype=bool)
    if targets.immutable.shape[1]:
        mask &= np.all(targets.immutable == source.immutable, axis=1)
    if targets.monotone.shape[1]:
        delta = (targets.monotone - source.monotone) * source.direction
        mask &= np.all(delta >= 0, axis=1)
    return mask


def actionable_pairs(codes: ConstraintCodes, src, dst) -> np.ndarray:
    """Which moves ``src[i] -> dst[i]`` between rows of ``codes`` are actionable.

    The pairwise form of :func:`actionable_mask` (same rule: equal immutable
    codes, monotone codes moving only in their allowed direction), for many
    moves at once, e.g. the edges of a graph or the steps of a path.

    Parameters
    ----------
    codes : ConstraintCodes
        Codes of every row the moves refer to.
    src, dst : array-like of int
        Row indices of the start and end of each move; they broadcast against
        each other.

    Returns
    -------
    mask : ndarray of bool, shape ``broadcast(src, dst)``

    Notes
    -----
    ``O(n_moves * (n_immutable + n_monotone))``, one column at a time.

    Examples
    --------
    >>> import numpy as np
    >>> codes = ConstraintCodes(immutable=np.array([[0.], [0.], [1.]]),
    ...                         monotone=np.array([[30.], [29.], [40.]]),
    ...                         direction=np.array([1], dtype=np.int8))
    >>> actionable_pairs(codes, [1, 0, 0], [0, 1, 2]).tolist()
    [True, False, False]
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    ok = np.ones(np.broadcast_shapes(src.shape, dst.shape), dtype=bool)
    for j in range(codes.immutable.shape[1]):
        ok &= codes.immutable[dst, j] == codes.immutable[src, j]
    for j in range(codes.monotone.shape[1]):
        ok &= (codes.monotone[dst, j] - codes.monotone[src, j]) * codes.direction[j] >= 0
    return ok
