"""Fast paths of the default plan against the computations they replace: equal results, bit for bit."""

import itertools

import numpy as np
import pandas as pd
import pytest

from frpd_cli.encoding import fit_encoder
from frpd_cli.interpolation import _decoded_columns, decode_from
from frpd_cli.schema import SchemaSpec, infer_schema
from frpd_cli.selection import exact
from frpd_cli.selection.geometry import compute_geometry


def _instance(rng, n, p, *, repeats=0):
    X = rng.normal(size=(n, p))
    if repeats:  # identical rows: exact ties between sets, decided by the lexicographic rule
        X[rng.choice(n, repeats, replace=False)] = X[rng.choice(n, repeats)]
        X = np.round(X, 1)
    x0 = np.full(p, 10.0)
    g = compute_geometry(X, x0)
    return g.directions, g.distances


def _brute_force(directions, distances, theta):
    """Every 3-set scored as the pair-weight sum (W_ij + W_il) + W_jl; the lexicographically first minimum."""
    weights = exact._pair_weights(directions, distances, 3, theta)
    best, best_value = None, np.inf
    for i, j, l in itertools.combinations(range(distances.shape[0]), 3):
        value = (weights[i, j] + weights[i, l]) + weights[j, l]
        if value < best_value:
            best, best_value = (i, j, l), value
    return np.array(best)


@pytest.mark.parametrize("seed", range(12))
def test_triples_equal_the_table_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 38))
    theta = float(rng.choice([0.1, 0.5, 0.9, 1.0]))
    directions, distances = _instance(rng, n, int(rng.integers(2, 12)), repeats=n // 3 if seed % 2 else 0)
    weights = exact._pair_weights(directions, distances, 3, theta)
    fast = exact._enumerate_triples(weights.copy())
    table = exact._triples_table(weights.copy(), exact._strict_upper(weights))
    assert fast.tolist() == table.tolist() == _brute_force(directions, distances, theta).tolist()
    assert exact._enumerate_pairs(directions, distances, 3, theta).tolist() == fast.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_pruned_table_equals_brute_force_on_larger_sets(seed):
    # C(n, 3) > 8192: the table over the rows whose bound can reach the incumbent (rows with ties included)
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(38, 60))
    theta = float(rng.choice([0.5, 0.9]))
    directions, distances = _instance(rng, n, int(rng.integers(2, 8)), repeats=n // 2 if seed % 2 else 0)
    expected = _brute_force(directions, distances, theta).tolist()
    assert exact._enumerate_pairs(directions, distances, 3, theta).tolist() == expected
    weights = exact._pair_weights(directions, distances, 3, theta)
    assert exact._triples_table(weights.copy(), exact._strict_upper(weights)).tolist() == expected


def test_ties_take_the_lexicographically_first_set():
    # four copies of one direction at one distance: every 3-set of them has the same value
    directions = np.tile([[1.0, 0.0]], (6, 1))
    directions[4:] = [[0.0, 1.0]]
    distances = np.ones(6)
    weights = exact._pair_weights(directions, distances, 3, 0.0)
    assert exact._enumerate_triples(weights).tolist() == [0, 1, 2]
    assert exact._triples_table(weights.copy(), exact._strict_upper(weights)).tolist() == [0, 1, 2]


def _decode_from_by_assignment(encoder, Z, X0, raw0):
    """Oracle: decode, then overwrite each feature's column of the frame (the previous implementation)."""
    decoded = encoder.decode(Z)
    for j, f in enumerate(encoder.schema.features):
        start, stop = int(encoder.offsets[j]), int(encoder.offsets[j + 1])
        unchanged = np.all(np.abs(Z[:, start:stop] - X0[:, start:stop]) <= 1e-12, axis=1)
        column = decoded[f.name].to_numpy(copy=True)
        original = raw0[f.name].to_numpy()
        if f.is_numeric and f.mutability in ("increasing", "decreasing"):
            column = column.astype(np.result_type(column.dtype, original.dtype))
            column = np.maximum(column, original) if f.mutability == "increasing" else np.minimum(column, original)
        if f.is_numeric and f.has_range:
            low = -np.inf if f.low is None else (np.ceil(f.low) if f.kind == "integer" else f.low)
            high = np.inf if f.high is None else (np.floor(f.high) if f.kind == "integer" else f.high)
            column = np.clip(column, low, high).astype(column.dtype) if low <= high else column
        if unchanged.any():
            column = column.astype(np.result_type(column.dtype, original.dtype)) if f.is_numeric else column
            column[unchanged] = original[unchanged]
        decoded[f.name] = column
    return decoded


@pytest.mark.parametrize("seed", range(4))
def test_decoded_columns_equal_the_frame_assignment(seed):
    rng = np.random.default_rng(seed)
    n = 200
    frame = pd.DataFrame({
        "income": rng.uniform(0, 100, n).round(2),
        "age": rng.integers(18, 80, n),
        "years": rng.integers(0, 30, n),
        "housing": rng.choice(["own", "rent", "free"], n),
        "grade": rng.choice([1, 2, 3], n),
        "label": rng.integers(0, 2, n),
    })
    spec = SchemaSpec(target="label", increasing=("age",), decreasing=("years",), ranges={"income": "10:90"})
    encoder = fit_encoder(infer_schema(frame, spec), frame)
    raw0 = frame.drop(columns="label").iloc[rng.integers(0, n, 60)].reset_index(drop=True)
    X0 = encoder.encode(raw0)
    XK = encoder.encode(frame.drop(columns="label").iloc[rng.integers(0, n, 60)])
    t = rng.choice([0.0, 0.3, 0.5, 0.51, 1.0], 60)[:, None]
    Z = X0 + t * (XK - X0)
    expected = _decode_from_by_assignment(encoder, Z, X0, raw0)
    got = decode_from(encoder, Z, X0, raw0)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    columns = _decoded_columns(encoder, Z, X0, {c: raw0[c].to_numpy() for c in raw0.columns})
    for name, values in columns.items():
        np.testing.assert_array_equal(values, expected[name].to_numpy())
