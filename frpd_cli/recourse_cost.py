"""What each candidate prototype's recourse would cost, as a proximity term for prototype selection.

The linear scheme turns a prototype ``x`` into the first favourable point of the segment ``x0 -> x``, so the cost
the user pays is the distance from ``x0`` to that point, not the distance to ``x``. The paper's selection
(Section 3, proximity ``dist(x, x0)``) ranks prototypes by the second: a far prototype whose segment crosses the
decision boundary early is cheap for the user but looks expensive to the selection, and the reverse. Passing the
recourse costs computed here as the selection's ``proximity`` (the hook the graph scheme uses for path costs,
:func:`frpd_cli.choice.select_among`) makes the selection trade diversity against what the plan will cost.
Diversity is unchanged: a recourse lies on its prototype's direction from ``x0``, so the directions, and with them
the anti-diversity of the plan, are those of the prototypes.

Cost: one batched interpolation over every candidate (``n_candidates * n_grid`` rows in the first model call, then a
few calls of at most ``3 * n_candidates`` rows), see :func:`frpd_cli.interpolation.interpolate_linear`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .encoding import Encoder
from .exceptions import InputError
from .interpolation import interpolate_linear

__all__ = ["recourse_costs"]

#: Smallest proximity returned: the selection needs positive values.
MIN_COST = 1e-12


def recourse_costs(encoder: Encoder, model, x0: np.ndarray, raw0: pd.DataFrame | pd.Series | dict, X: np.ndarray, *,
                   tol: float = 1e-2, n_grid: int = 16) -> np.ndarray:
    """Euclidean cost of the linear recourse towards each candidate ``X[j]``.

    Parameters
    ----------
    encoder : Encoder
        The training set's encoder (the space where costs are measured).
    model : frpd_cli.model.Model
        Judges rows with ``favorable_probability`` and ``threshold`` (pass a
        raised-threshold model for a margin).
    x0 : ndarray of shape (n_features_out,)
        The encoded applicant.
    raw0 : DataFrame of one row, Series or dict
        The applicant's raw values.
    X : ndarray of shape (n_candidates, n_features_out)
        Encoded candidate prototypes.
    tol : float, default=1e-2
        Bisection tolerance as a fraction of each segment (the plan's own
        interpolation then refines the chosen prototypes' recourses).
    n_grid : int, default=16
        Coarse grid points per segment.

    Returns
    -------
    costs : ndarray of float64, shape (n_candidates,)
        ``||encode(recourse_j) - x0||``, at least :data:`MIN_COST`. A candidate
        whose end point the model does not predict favourable keeps the
        distance to the end point.

    Raises
    ------
    InputError
        Shapes disagree, or ``tol`` / ``n_grid`` are out of range.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from frpd_cli.schema import infer_schema
    >>> from frpd_cli.encoding import fit_encoder
    >>> df = pd.DataFrame({"x": [0.0, 1.0, 2.0, 4.0], "label": [0, 0, 1, 1]})
    >>> enc = fit_encoder(infer_schema(df), df)
    >>> class Step:   # favourable from x >= 2
    ...     threshold = 0.5
    ...     def favorable_probability(self, rows):
    ...         return (np.asarray(rows["x"], dtype=float) >= 2).astype(float)
    >>> c = recourse_costs(enc, Step(), enc.encode(df.iloc[[0]])[0], df.iloc[[0]], enc.encode(df.iloc[[2, 3]]))
    >>> np.round(c, 2).tolist()   # both recourses stop at x = 2, half the range: the far prototype costs no more
    [0.5, 0.5]
    """
    x0 = np.asarray(x0, dtype=np.float64).ravel()
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if X.shape[1] != x0.size:
        raise InputError(f"The candidates must have {x0.size} encoded columns, like the applicant. "
                         f"Got {X.shape[1]} instead.")
    n = X.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    if isinstance(raw0, pd.Series):
        raw0 = raw0.to_frame().T
    elif isinstance(raw0, dict):
        raw0 = pd.DataFrame([raw0])
    raw = raw0.iloc[np.zeros(n, dtype=np.int64)].reset_index(drop=True)
    X0 = np.broadcast_to(x0, X.shape)
    result = interpolate_linear(encoder, model, np.ascontiguousarray(X0), X, raw, tol=tol, n_grid=n_grid)
    points = encoder.encode(result.rows.loc[:, list(encoder.schema.feature_names)], source="the recourses")
    costs = np.linalg.norm(points - x0, axis=1)
    found = np.ones(n, dtype=bool) if result.found is None else np.asarray(result.found, dtype=bool)
    costs = np.where(found, costs, np.linalg.norm(X - x0, axis=1))
    return np.maximum(costs, MIN_COST)
