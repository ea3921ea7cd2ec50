"""Linear interpolation: the first favourable point on the segment from the applicant to a prototype.

Paper section 4 ("Interpolation Schemes"). The segment is walked in the encoded
space with one-hot blocks relaxed; every point is judged by the model's own
prediction on the *decoded* raw row (argmax categories, integers rounded,
values clipped to the training range). The returned recourse is the decoded row
that was checked, so it is valid by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .encoding import Encoder
from .exceptions import InputError

__all__ = ["LinearResult", "interpolate_linear", "decode_from"]


@dataclass(frozen=True)
class LinearResult:
    """Recourses found on a batch of segments.

    Attributes
    ----------
    rows : DataFrame of shape (n_segments, n_features)
        The decoded recourse of each segment (raw values).
    t : ndarray of shape (n_segments,)
        Position of the recourse on its segment (0 = applicant, 1 = prototype).
    probability : ndarray of shape (n_segments,)
        The model's favourable probability of each recourse.
    n_model_calls : int
        Number of batched model calls made (grid round plus bisection rounds).
    """

    rows: pd.DataFrame
    t: np.ndarray
    probability: np.ndarray
    n_model_calls: int


def decode_from(encoder: Encoder, Z: np.ndarray, X0: np.ndarray, raw0: pd.DataFrame) -> pd.DataFrame:
    """Decode points of segments that start at applicants, keeping what did not move.

    A feature whose encoded block is still the applicant's keeps the
    applicant's raw value exactly (decoding would otherwise round or clip it to
    the training data's precision and range). Increasing features never decode
    below the applicant's value and decreasing ones never above it.

    Parameters
    ----------
    encoder : Encoder
    Z : ndarray of shape (n, n_features_out)
        Points to decode.
    X0 : ndarray of shape (n, n_features_out)
        Encoded applicant of each point's segment.
    raw0 : DataFrame of shape (n, n_features)
        Raw applicant of each point's segment.
    """
    decoded = encoder.decode(Z)
    for j, f in enumerate(encoder.schema.features):
        start, stop = int(encoder.offsets[j]), int(encoder.offsets[j + 1])
        unchanged = np.all(np.abs(Z[:, start:stop] - X0[:, start:stop]) <= 1e-12, axis=1)
        column = decoded[f.name].to_numpy(copy=True)
        original = raw0[f.name].to_numpy()
        if f.is_numeric and f.mutability in ("increasing", "decreasing"):
            column = column.astype(np.result_type(column.dtype, original.dtype))
            column = np.maximum(column, original) if f.mutability == "increasing" else np.minimum(column, original)
        if unchanged.any():
            column = column.astype(np.result_type(column.dtype, original.dtype)) if f.is_numeric else column
            column[unchanged] = original[unchanged]
        decoded[f.name] = column
    return decoded


def interpolate_linear(
    encoder: Encoder,
    model,
    X0: np.ndarray,
    XK: np.ndarray,
    raw0: pd.DataFrame,
    *,
    tol: float = 1e-3,
    n_grid: int = 16,
) -> LinearResult:
    """Find the first favourable point on each segment ``X0[i] -> XK[i]``.

    Parameters
    ----------
    encoder : Encoder
    model : frpd_cli.model.Model
        Judges decoded rows with ``favorable_probability`` and ``threshold``.
    X0 : ndarray of shape (n_segments, n_features_out)
        Encoded applicant of each segment.
    XK : ndarray of shape (n_segments, n_features_out)
        Encoded prototype (end point) of each segment; must decode to a row the
        model predicts favourable.
    raw0 : DataFrame of shape (n_segments, n_features)
        Raw applicant of each segment.
    tol : float, default=1e-3
        Bisection stops when the bracket is shorter than ``tol`` (a fraction of
        the segment).
    n_grid : int, default=16
        Points of the coarse grid, which locates the first favourable grid
        point before bisection.

    Returns
    -------
    result : LinearResult

    Raises
    ------
    InputError
        A prototype is not favourable itself (then no valid point is guaranteed).

    Notes
    -----
    All segments share each model call: one call of ``n_segments * n_grid``
    rows, then ``ceil(log2(1 / (n_grid * tol)))`` calls of ``n_segments`` rows.
    A favourable stretch shorter than a grid step before the first favourable
    grid point can be missed; the point returned is then still favourable.

    References
    ----------
    Nguyen, Bui, Nguyen (2023), section 4, linear interpolation scheme.
    """
    if not 0 < tol < 1:
        raise InputError(f"The 'tol' option must be in (0, 1). Got {tol!r} instead.")
    if n_grid < 1:
        raise InputError(f"The 'n_grid' option must be an int >= 1. Got {n_grid!r} instead.")
    X0 = np.asarray(X0, dtype=np.float64)
    XK = np.asarray(XK, dtype=np.float64)
    n = X0.shape[0]
    raw0 = raw0.reset_index(drop=True)
    if n == 0:
        return LinearResult(rows=encoder.decode(np.zeros((0, encoder.n_features_out))), t=np.zeros(0),
                            probability=np.zeros(0), n_model_calls=0)
    direction = XK - X0

    # Coarse grid: t = 1/G, 2/G, ..., 1 for every segment in one call.
    grid = np.arange(1, n_grid + 1, dtype=np.float64) / n_grid
    Z = (X0[:, None, :] + grid[None, :, None] * direction[:, None, :]).reshape(n * n_grid, -1)
    rep = np.repeat(np.arange(n), n_grid)
    rows = decode_from(encoder, Z, X0[rep], raw0.iloc[rep].reset_index(drop=True))
    prob = np.asarray(model.favorable_probability(rows), dtype=np.float64).reshape(n, n_grid)
    good = prob >= model.threshold
    if not good[:, -1].all():
        bad = int(np.flatnonzero(~good[:, -1])[0])
        raise InputError(
            f"Prototype of segment {bad} is not predicted favourable by the model "
            f"(probability {prob[bad, -1]:.4f} < threshold {model.threshold}); linear interpolation needs "
            "favourable end points."
        )
    first = np.argmax(good, axis=1)
    hi = grid[first]
    lo = np.where(first > 0, grid[np.maximum(first - 1, 0)], 0.0)
    pick = np.arange(n) * n_grid + first
    best = {c: rows[c].to_numpy()[pick].copy() for c in rows.columns}
    best_prob = prob[np.arange(n), first]
    calls = 1

    # Bisection on every bracket longer than tol, all segments in one call per round.
    while True:
        active = np.flatnonzero(hi - lo > tol)
        if active.size == 0:
            break
        mid = 0.5 * (lo[active] + hi[active])
        Zm = X0[active] + mid[:, None] * direction[active]
        mrows = decode_from(encoder, Zm, X0[active], raw0.iloc[active].reset_index(drop=True))
        mprob = np.asarray(model.favorable_probability(mrows), dtype=np.float64)
        calls += 1
        ok = mprob >= model.threshold
        hi[active[ok]] = mid[ok]
        lo[active[~ok]] = mid[~ok]
        if ok.any():
            for c in best:
                best[c][active[ok]] = mrows[c].to_numpy()[ok]
            best_prob[active[ok]] = mprob[ok]
    best_rows = pd.DataFrame({c: pd.Series(v, dtype=rows[c].dtype) for c, v in best.items()})
    return LinearResult(rows=best_rows, t=hi, probability=best_prob, n_model_calls=calls)
