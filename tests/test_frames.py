"""frpd_cli._frames.records is pandas' to_dict("records"): the same values, of the same Python types, one record
per row; frame_of is the frame of a dict of Series."""

import numpy as np
import pandas as pd
import pytest

from frpd_cli._frames import records


def _signature(rows):
    # repr tells 1 from 1.0 and True, and nan from None; the type name tells numpy scalars from Python ones
    return [[(key, type(value).__name__, repr(value)) for key, value in row.items()] for row in rows]


COLUMNS = {
    "int64": lambda n, r: r.integers(-5, 5, n),
    "uint8": lambda n, r: r.integers(0, 9, n).astype(np.uint8),
    "float64": lambda n, r: np.where(r.random(n) < 0.2, np.nan, r.normal(size=n)),
    "float32": lambda n, r: r.normal(size=n).astype(np.float32),
    "bool": lambda n, r: r.random(n) < 0.5,
    "object str": lambda n, r: np.array([f"s{v}" for v in r.integers(0, 3, n)], dtype=object),
    "object with None": lambda n, r: np.array([None if v == 0 else f"s{v}" for v in r.integers(0, 3, n)], dtype=object),
    "object mixed": lambda n, r: np.array([[1, "a", np.int64(3), 2.5, np.nan, True, np.float64(0.5)][v]
                                           for v in r.integers(0, 7, n)], dtype=object),
    "pandas str": lambda n, r: pd.Series([None if v == 0 else f"t{v}" for v in r.integers(0, 3, n)], dtype="str"),
    "pandas string": lambda n, r: pd.Series([None if v == 0 else f"t{v}" for v in r.integers(0, 3, n)],
                                            dtype="string"),
    "category": lambda n, r: pd.Series([f"c{v}" for v in r.integers(0, 3, n)], dtype="category"),
    "Int64": lambda n, r: pd.array([None if v == 0 else int(v) for v in r.integers(0, 3, n)], dtype="Int64"),
    "datetime": lambda n, r: pd.to_datetime(r.integers(0, 10**9, n), unit="s"),
}


@pytest.mark.parametrize("name", list(COLUMNS))
def test_each_kind_of_column_alone_and_with_others(name):
    rng = np.random.default_rng(0)
    alone = pd.DataFrame({name: COLUMNS[name](7, rng)})
    assert _signature(records(alone)) == _signature(alone.to_dict("records"))
    mixed = pd.DataFrame({"n": np.arange(7), name: COLUMNS[name](7, rng), "s": ["x"] * 7})
    assert _signature(records(mixed)) == _signature(mixed.to_dict("records"))


def test_random_frames_and_edge_shapes():
    rng = np.random.default_rng(1)
    kinds = list(COLUMNS)
    for _ in range(40):
        n = int(rng.integers(0, 6))
        chosen = rng.choice(kinds, size=int(rng.integers(1, 5)), replace=True)
        frame = pd.DataFrame({f"{kind}#{j}": COLUMNS[kind](n, rng) for j, kind in enumerate(chosen)})
        frame.index = rng.permutation(n) + 10       # the index is not part of the records
        assert _signature(records(frame)) == _signature(frame.to_dict("records"))
    # one record per row, also without columns (pandas 2 gives [{}, {}, {}] here, pandas 3 gives [])
    assert records(pd.DataFrame(index=range(3))) == [{}, {}, {}]
    assert records(pd.DataFrame(index=range(0))) == []
    # a real applicants file read as frpd reads it (pandas' text type)
    frame = pd.read_csv(__import__("io").StringIO("age,job,income\n30,clerk,1.5\n41,,2\n"))
    assert _signature(records(frame)) == _signature(frame.to_dict("records"))


def _columns():
    return {"age": np.array([30, 41, 52], dtype=np.int64), "hours": np.array([40.0, 37.5, np.nan]),
            "job": np.array(["clerk", "nurse", None], dtype=object), "owner": np.array([True, False, True])}


@pytest.mark.parametrize("private", [True, False])
def test_frame_of_is_the_frame_of_series(monkeypatch, private):
    import frpd_cli._frames as frames

    if private:                      # every supported pandas has it
        assert frames._FROM_ARRAYS is not None
    else:                            # a pandas without the private constructor: the public way, the same frame
        monkeypatch.setattr(frames, "_FROM_ARRAYS", None)
    columns = _columns()
    expected = pd.DataFrame({c: pd.Series(v, dtype=v.dtype) for c, v in columns.items()})
    got = frames.frame_of(columns)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert list(got.dtypes) == [np.dtype(np.int64), np.dtype(np.float64), np.dtype(object), np.dtype(bool)]
    assert isinstance(got.index, pd.RangeIndex)
    columns["age"][0], columns["job"][0] = 99, "pilot"            # copied: the frame keeps its values
    assert got["age"].iloc[0] == 30 and got["job"].iloc[0] == "clerk"
    # columns of other lengths go the public way (pandas aligns them on the index)
    uneven = {"a": np.arange(2), "b": np.arange(3)}
    pd.testing.assert_frame_equal(frames.frame_of(uneven), pd.DataFrame({c: pd.Series(v) for c, v in uneven.items()}))
