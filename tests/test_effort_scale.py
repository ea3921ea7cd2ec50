"""The effort scale: a move costs the share of the training population it crosses.

Oracles: the mid-distribution function computed by counting rows, the training median, min-max arithmetic.
"""

import itertools

import numpy as np
import pandas as pd
import pytest

from frpd_cli.encoding import Encoder, fit_encoder
from frpd_cli.schema import SchemaSpec, infer_schema

# ties on purpose: 2 three times, 7 twice
VALUES = [1.0, 2.0, 2.0, 2.0, 5.0, 7.0, 7.0, 10.0]


def _share(value, values=VALUES) -> float:
    """Brute force: rows strictly below ``value`` plus half of those equal to it, over the row count."""
    return (sum(v < value for v in values) + sum(v == value for v in values) / 2.0) / len(values)


def _fit(frame, scale="effort", **spec):
    return fit_encoder(infer_schema(frame, SchemaSpec(**spec)), frame, scale=scale)


def _frame(values=VALUES):
    return pd.DataFrame({"x": values, "label": [i % 2 for i in range(len(values))]})


def test_a_move_costs_the_population_share_it_crosses():
    frame = _frame()
    enc = _fit(frame, continuous=("x",))
    assert enc.scale == "effort"
    distinct = sorted(set(VALUES))
    z = enc.encode(pd.DataFrame({"x": distinct}))[:, 0]
    for (a, za), (b, zb) in itertools.combinations(zip(distinct, z), 2):
        # the rows strictly between a and b, and half of the rows at a and at b
        crossed = (sum(a < v < b for v in VALUES) + (VALUES.count(a) + VALUES.count(b)) / 2.0) / len(VALUES)
        assert zb - za == pytest.approx(crossed, abs=1e-12)
        assert zb - za == pytest.approx(_share(b) - _share(a), abs=1e-12)


def test_between_training_values_the_share_is_linear():
    enc = _fit(_frame(), continuous=("x",))
    z = enc.encode(pd.DataFrame({"x": [3.5, 2.0, 5.0, 8.5]}))[:, 0]
    assert z[0] == pytest.approx(_share(2.0) + 0.5 * (_share(5.0) - _share(2.0)))
    assert z[3] == pytest.approx(_share(7.0) + 0.5 * (_share(10.0) - _share(7.0)))


def test_weight_scales_the_share():
    frame = _frame()
    enc = fit_encoder(infer_schema(frame, SchemaSpec(continuous=("x",), weights={"x": 4.0})), frame, scale="effort")
    z = enc.encode(pd.DataFrame({"x": [2.0, 7.0]}))[:, 0]
    assert z[1] - z[0] == pytest.approx(2.0 * (_share(7.0) - _share(2.0)))


def test_round_trip_on_training_rows_and_relaxed_values_inside_the_range():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "amount": np.round(rng.lognormal(7, 1, 200), 2),
        "count": rng.poisson(2, 200),
        "job": rng.choice(["a", "b", "c"], 200),
        "label": rng.integers(0, 2, 200),
    })
    enc = _fit(frame)
    back = enc.decode(enc.encode(frame))
    pd.testing.assert_frame_equal(back, frame.drop(columns="label"), check_dtype=False)
    # any encoded value decodes inside the training range, and re-encoding a decoded value is idempotent
    Z = enc.encode(frame)
    Z[:, 0] = np.linspace(-0.5, 1.5, 200)
    decoded = enc.decode(Z)
    assert decoded["amount"].between(frame["amount"].min(), frame["amount"].max()).all()
    again = enc.decode(enc.encode(decoded))
    pd.testing.assert_frame_equal(again, decoded)
    assert decoded["count"].dtype == np.int64


def test_interpolation_midpoint_follows_the_quantiles():
    # squares 1, 4, ..., 99**2: the data is dense at the bottom of its range
    values = [float(k * k) for k in range(1, 100)]
    frame = _frame(values)
    effort, minmax = _fit(frame, continuous=("x",)), _fit(frame, "minmax", continuous=("x",))
    ends = pd.DataFrame({"x": [values[0], values[-1]]})
    for enc, expected in ((effort, float(np.median(values))), (minmax, (values[0] + values[-1]) / 2.0)):
        z = enc.encode(ends)
        mid = enc.decode((z[0] + z[1]) / 2.0)["x"].iloc[0]
        assert mid == pytest.approx(expected)
    # the effort midpoint is the training median 2500; min-max's 4901 is the 70th row of 99
    assert effort.decode(effort.encode(ends).mean(axis=0))["x"].iloc[0] == 2500.0


def test_constant_column_and_values_outside_the_training_range():
    frame = pd.DataFrame({"c": [3.0, 3.0, 3.0], "x": [0.0, 1.0, 4.0], "label": [0, 1, 0]})
    enc = _fit(frame, continuous=("c", "x"))
    Z = enc.encode(pd.DataFrame({"c": [3.0, 5.0], "x": [-2.0, 8.0]}))
    assert Z[:, 0].tolist() == [0.0, 2.0]                            # a constant column: x - 3, as under min-max
    low, high = enc.encoded_range(1)
    assert (low, high) == (pytest.approx(1 / 6), pytest.approx(5 / 6))
    # outside the range the map goes on at the min-max rate (1 / 4 per unit), and decoding clips
    assert Z[:, 1].tolist() == [pytest.approx(1 / 6 - 2 / 4), pytest.approx(5 / 6 + 4 / 4)]
    assert enc.decode(Z)["x"].tolist() == [0.0, 4.0]


def test_encoding_is_increasing():
    rng = np.random.default_rng(0)
    values = np.round(rng.exponential(10, 300), 1)
    enc = _fit(_frame(values), continuous=("x",))
    grid = np.linspace(values.min() - 5, values.max() + 5, 2001)
    z = enc.encode_values(0, grid)
    assert np.all(np.diff(z) > 0)


def test_persisted_encoder_is_the_same_map():
    frame = _frame()
    enc = _fit(frame, continuous=("x",))
    back = Encoder.from_dict(enc.to_dict())
    probe = pd.DataFrame({"x": [-1.0, 1.0, 2.5, 7.0, 12.0]})
    assert back.scale == "effort"
    np.testing.assert_array_equal(back.encode(probe), enc.encode(probe))
    # a description without a scale (artifacts made before --scale) is a min-max encoder
    legacy = {k: v for k, v in _fit(frame, "minmax", continuous=("x",)).to_dict().items() if k != "scale"}
    assert Encoder.from_dict(legacy).scale == "minmax"
    np.testing.assert_array_equal(Encoder.from_dict(legacy).encode(probe)[:, 0], (probe["x"] - 1.0) / 9.0)


def test_unknown_scale_refused():
    with pytest.raises(ValueError, match="scale"):
        _fit(_frame(), "quantile")
