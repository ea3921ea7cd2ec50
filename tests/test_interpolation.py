"""Linear interpolation: two bisection steps per model call take exactly the steps of one midpoint per call."""

import numpy as np
import pandas as pd
import pytest

from frpd_cli.encoding import fit_encoder
from frpd_cli.interpolation import decode_from, interpolate_linear
from frpd_cli.schema import SchemaSpec, infer_schema


class WavyModel:
    """Favourable where a wave over the raw features is high: many switches along a segment."""

    threshold = 0.5

    def __init__(self):
        self.calls = []

    def favorable_probability(self, rows):
        self.calls.append(len(rows))
        wave = np.sin(rows["income"].to_numpy() / 7.0 + rows["age"].to_numpy() / 3.0)
        bonus = np.where(rows["housing"].to_numpy() == "own", 0.3, 0.0)
        return 1.0 / (1.0 + np.exp(-4.0 * (wave + bonus)))


def _one_midpoint_per_call(encoder, model, X0, XK, raw0, *, tol, n_grid):
    """Oracle: the grid, then plain bisection with one midpoint per model call (the textbook loop)."""
    n = X0.shape[0]
    direction = XK - X0
    grid = np.arange(1, n_grid + 1, dtype=np.float64) / n_grid
    Z = (X0[:, None, :] + grid[None, :, None] * direction[:, None, :]).reshape(n * n_grid, -1)
    rep = np.repeat(np.arange(n), n_grid)
    rows = decode_from(encoder, Z, X0[rep], raw0.iloc[rep].reset_index(drop=True))
    prob = model.favorable_probability(rows).reshape(n, n_grid)
    good = prob >= model.threshold
    found = good.any(axis=1)
    first = np.where(found, np.argmax(good, axis=1), n_grid - 1)
    hi = grid[first]
    lo = np.where(first > 0, grid[np.maximum(first - 1, 0)], 0.0)
    lo[~found] = hi[~found]
    pick = np.arange(n) * n_grid + first
    best = rows.iloc[pick].reset_index(drop=True).copy()
    best_prob = prob[np.arange(n), first]
    tried = [[] for _ in range(n)]
    while True:
        active = np.flatnonzero(hi - lo > tol)
        if active.size == 0:
            break
        mid = 0.5 * (lo[active] + hi[active])
        mrows = decode_from(encoder, X0[active] + mid[:, None] * direction[active], X0[active],
                            raw0.iloc[active].reset_index(drop=True))
        mprob = model.favorable_probability(mrows)
        for i, t in zip(active, mid):
            tried[i].append(t)
        ok = mprob >= model.threshold
        hi[active[ok]] = mid[ok]
        lo[active[~ok]] = mid[~ok]
        for j in np.flatnonzero(ok):
            best.iloc[active[j]] = mrows.iloc[j]
            best_prob[active[j]] = mprob[j]
    return best, hi, best_prob, found, tried


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({
        "income": rng.uniform(0, 100, n).round(2),
        "age": rng.integers(18, 80, n),
        "housing": rng.choice(["own", "rent", "free"], n),
        "label": rng.integers(0, 2, n),
    })
    schema = infer_schema(frame, SchemaSpec(target="label"))
    encoder = fit_encoder(schema, frame)
    return frame, encoder


@pytest.mark.parametrize("tol,n_grid", [(1e-3, 16), (1e-3, 10), (0.03, 7), (0.2, 3), (1e-4, 1)])
def test_two_steps_per_call_take_the_steps_of_plain_bisection(setup, tol, n_grid):
    frame, encoder = setup
    features = list(encoder.schema.feature_names)
    rng = np.random.default_rng(int(tol * 1e4) + n_grid)
    a = rng.choice(len(frame), 60)
    b = rng.choice(len(frame), 60)
    raw0 = frame.loc[a, features].reset_index(drop=True)
    X0 = encoder.encode(raw0)
    XK = encoder.encode(frame.loc[b, features].reset_index(drop=True))
    model = WavyModel()
    got = interpolate_linear(encoder, model, X0, XK, raw0, tol=tol, n_grid=n_grid)
    oracle = WavyModel()
    rows, t, prob, found, tried = _one_midpoint_per_call(encoder, oracle, X0, XK, raw0, tol=tol, n_grid=n_grid)
    np.testing.assert_array_equal(got.found, found)
    assert got.t.tobytes() == t.tobytes() and got.probability.tobytes() == prob.tobytes()
    pd.testing.assert_frame_equal(got.rows, rows, check_exact=True)
    steps = max(len(x) for x in tried)
    assert steps >= 1
    # half the bisection calls (rounded up), at most three points per open bracket per call
    assert got.n_model_calls == 1 + -(-steps // 2) == len(model.calls)
    assert max(model.calls[1:]) <= 3 * len(a)
    # both outcomes occur: segments with and without a favourable point, steps towards either side
    assert 0 < np.mean(found) < 1
