"""Encoding and decoding: round trips, relaxed one-hot blocks, rounding and clipping."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frpd_cli.encoding import Encoder, fit_encoder
from frpd_cli.exceptions import InputError
from frpd_cli.schema import SchemaSpec, infer_schema


def _frame():
    return pd.DataFrame({
        "age": [20, 40, 30, 60],
        "amount": [100.25, 300.5, 1000.0, 250.75],
        "job": ["b", "a", "c", "b"],
        "savings": ["none", "rich", "little", "none"],
        "label": [0, 1, 1, 0],
    })


def _encoder(frame=None):
    frame = _frame() if frame is None else frame
    spec = SchemaSpec(ordinal={"savings": ("none", "little", "rich")}, increasing=("savings",), immutable=("job",))
    return fit_encoder(infer_schema(frame, spec), frame), frame


def test_layout_and_values():
    enc, frame = _encoder()
    assert enc.feature_names_out == ("age", "amount", "job=a", "job=b", "job=c", "savings=none",
                                     "savings=little", "savings=rich")
    Z = enc.encode(frame)
    # age: (x - 20) / 40 ; amount: (x - 100.25) / 899.75
    np.testing.assert_allclose(Z[:, 0], [0, 0.5, 0.25, 1])
    np.testing.assert_allclose(Z[:, 1], (frame["amount"] - 100.25) / 899.75)
    assert Z[0, 2:5].tolist() == [0, 1, 0] and Z[1, 5:8].tolist() == [0, 0, 1]


def test_round_trip_exact_on_training_rows():
    enc, frame = _encoder()
    back = enc.decode(enc.encode(frame))
    pd.testing.assert_frame_equal(back, frame.drop(columns="label"), check_dtype=False)
    assert back["age"].dtype == np.int64


def test_relaxed_blocks_integers_and_clipping():
    enc, _ = _encoder()
    Z = np.array([[0.26, 1.7, 0.2, 0.3, 0.5, 0.4, 0.35, 0.25],
                  [-0.5, -3.0, 0.6, 0.3, 0.1, 0.1, 0.2, 0.7]])
    out = enc.decode(Z)
    # 0.26 * 40 + 20 = 30.4 -> 30 ; amount clipped to max 1000.0 ; argmax job=c ; savings=none
    assert out.iloc[0].tolist() == [30, 1000.0, "c", "none"]
    # -0.5 -> 0 clipped to 20 ; amount clipped to min ; job=a ; savings=rich
    assert out.iloc[1].tolist() == [20, 100.25, "a", "rich"]


def test_unseen_category_named():
    enc, frame = _encoder()
    bad = frame.copy()
    bad.loc[2, "job"] = "pilot"
    with pytest.raises(InputError, match=r"'pilot' in data row 3 \(line 4\), a category never seen"):
        enc.encode(bad)


def test_text_in_numeric_column_named():
    enc, frame = _encoder()
    bad = frame.astype({"amount": object})
    bad.loc[1, "amount"] = "lots"
    with pytest.raises(InputError, match=r"must be numeric, but data row 2 \(line 3\) holds 'lots'"):
        enc.encode(bad)


def test_missing_column_named():
    enc, frame = _encoder()
    with pytest.raises(InputError, match="'age'"):
        enc.encode(frame.drop(columns="age"))


def test_constraint_codes():
    enc, frame = _encoder()
    codes = enc.constraint_codes(frame)
    assert codes.immutable_names == ("job",) and codes.monotone_names == ("savings",)
    assert codes.immutable[:, 0].tolist() == [1, 0, 2, 1]       # level index in sorted levels a, b, c
    assert codes.monotone[:, 0].tolist() == [0, 2, 1, 0]        # rank in declared order
    assert codes.direction.tolist() == [1]


def test_to_dict_round_trip():
    enc, frame = _encoder()
    again = Encoder.from_dict(enc.to_dict())
    np.testing.assert_array_equal(again.encode(frame), enc.encode(frame))
    pd.testing.assert_frame_equal(again.decode(enc.encode(frame)), enc.decode(enc.encode(frame)))


@settings(max_examples=60, deadline=None)
@given(
    ints=st.lists(st.integers(-10_000, 10_000), min_size=3, max_size=25),
    data=st.data(),
)
def test_round_trip_property(ints, data):
    n = len(ints)
    decimals = data.draw(st.integers(0, 4))
    floats = data.draw(st.lists(st.integers(-10**7, 10**7), min_size=n, max_size=n))
    cats = data.draw(st.lists(st.sampled_from(["x", "y", "z", "w"]), min_size=n, max_size=n))
    frame = pd.DataFrame({
        "i": ints,
        "f": [v / 10**decimals for v in floats],
        "c": cats,
        "label": [1] * n,
    })
    enc = fit_encoder(infer_schema(frame, SchemaSpec(continuous=("f",))), frame)
    back = enc.decode(enc.encode(frame))
    assert back["i"].tolist() == frame["i"].tolist()
    assert back["f"].tolist() == frame["f"].tolist()
    assert back["c"].tolist() == frame["c"].tolist()


# ------------------------------------------------------------------ values that cannot be encoded


@pytest.mark.parametrize("value, words", [
    (np.inf, "holds inf in data row 3 (line 4); expected a finite number"),
    (-np.inf, "holds -inf in data row 3 (line 4); expected a finite number"),
    (1e308, "holds 1e+308 in data row 3 (line 4); expected a number of magnitude at most 1e+150"),
])
def test_non_finite_and_huge_values_named(value, words):
    enc, frame = _encoder()
    bad = frame.astype({"amount": float})
    bad.loc[2, "amount"] = value
    with pytest.raises(InputError) as info:
        enc.encode(bad, source="the applicants file 'a.csv'")
    assert "Column 'amount' of the applicants file 'a.csv' " + words in str(info.value)
    with pytest.raises(InputError, match="'amount'.*line 4"):
        fit_encoder(enc.schema, bad)                # the same value in the training data


def test_fractional_value_in_integer_column():
    enc, frame = _encoder()
    bad = frame.astype({"age": float})
    bad.loc[1, "age"] = 35.7
    with pytest.raises(InputError, match=r"'age' of .* holds 35.7 in data row 2 \(line 3\); expected a whole number"):
        enc.encode(bad)
    ok = frame.astype({"age": float})               # whole numbers read as floats are fine
    np.testing.assert_array_equal(enc.encode(ok), enc.encode(frame))


def test_integer_beyond_exact_float_range_refused():
    enc, frame = _encoder()
    bad = frame.astype({"age": float})
    bad.loc[0, "age"] = 2.0**63
    with pytest.raises(InputError, match=r"'age'.*data row 1 .*whole number from -2\*\*63 to 2\*\*63 - 1"):
        enc.encode(bad)


def test_rows_named_by_the_frame_index():
    enc, frame = _encoder()
    bad = frame.astype({"amount": float}).set_axis([10, 11, 12, 13])
    bad.loc[12, "amount"] = np.inf
    with pytest.raises(InputError, match=r"data row 13 \(line 14\)"):
        enc.encode(bad)


def test_value_whose_distance_overflows_refused():
    # a training range of 1e-200 puts a (finite, small) applicant value 1e120 at 1e320 encoded: distances overflow
    frame = pd.DataFrame({"x": [0.0, 1e-200, 5e-201], "label": [0, 1, 1]})
    enc = fit_encoder(infer_schema(frame), frame)
    far = pd.DataFrame({"x": [1e-201, 1e120]})
    with pytest.raises(InputError, match=r"'x' .* 1e\+120 in data row 2 \(line 3\), so far outside the training "
                                         r"range .* that distances overflow"):
        enc.encode(far)
    near = pd.DataFrame({"x": [1e-201, 1e-150]})     # far outside too, but distances stay finite
    assert np.isfinite(enc.encode(near)).all()


def test_training_values_up_to_the_magnitude_limit_accepted():
    frame = pd.DataFrame({"x": [-1e150, 1e150, 0.0], "label": [0, 1, 1]})
    schema = infer_schema(frame, SchemaSpec(continuous=("x",)))
    assert np.isfinite(fit_encoder(schema, frame).encode(frame)).all()
    frame.loc[1, "x"] = 1.5e150
    with pytest.raises(InputError, match=r"holds 1.5e\+150 in data row 2 \(line 3\); expected a number of magnitude"):
        fit_encoder(schema, frame)


def test_decode_columns_are_the_columns_of_decode():
    frame = pd.DataFrame({
        "age": [20, 40, 30, 60], "amount": [100.25, 300.5, 1000.0, 250.75], "job": ["b", "a", "c", "b"],
        "grade": [1, 3, 2, 3], "rate": [0.5, 1.5, 0.5, 2.5], "label": [0, 1, 1, 0],
    })
    spec = SchemaSpec(categorical=("grade", "rate"))       # categories that are integers, and floats
    enc = fit_encoder(infer_schema(frame, spec), frame)
    Z = np.random.default_rng(3).uniform(-0.3, 1.3, (25, enc.n_features_out))
    columns = enc.decode_columns(Z)
    decoded = enc.decode(Z)
    assert list(columns) == list(decoded.columns) == ["age", "amount", "job", "grade", "rate"]
    expected_dtypes = {"age": np.int64, "amount": np.float64, "job": object, "grade": np.int64, "rate": np.float64}
    for name, values in columns.items():
        assert isinstance(values, np.ndarray) and values.dtype == expected_dtypes[name]
        assert decoded[name].dtype == values.dtype
        want = decoded[name].to_numpy()
        assert values.tolist() == want.tolist()
        assert [type(v) for v in values.tolist()] == [type(v) for v in want.tolist()]
    columns["job"][0] = "changed"                           # new arrays each call
    assert enc.decode_columns(Z)["job"][0] == decoded["job"][0]
