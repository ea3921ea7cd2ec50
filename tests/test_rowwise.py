"""The compiled model preprocessing reproduces scikit-learn's ColumnTransformer bit for bit, or steps aside."""

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, OrdinalEncoder, StandardScaler

from frpd_cli import _rowwise
from frpd_cli._rowwise import CompiledPrefix, compile_prefix
from frpd_cli.model import load_model

FEATURES = ["income", "age", "housing", "region", "grade"]


def _frame(n, seed):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "income": rng.normal(50, 15, n),
        "age": rng.integers(20, 70, n),
        "housing": rng.choice(["own", "rent", "free"], n),
        "region": rng.choice(["north", "south", "east", "west", "=odd", "ünï"], n),
        "grade": rng.integers(1, 6, n),                  # a numeric category
    })


def _labels(frame):
    return ((frame["income"] + 10 * (frame["housing"] == "own") - frame["grade"]) > 55).astype(int).to_numpy()


def _identical(a, b):
    assert type(a) is type(b) and a.shape == b.shape and a.dtype == b.dtype
    if isinstance(a, np.ndarray):
        assert a.tobytes() == b.tobytes()
    else:
        assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
        assert a.data.tobytes() == b.data.tobytes()


PREFIXES = {
    "onehot + minmax (sparse)": lambda: ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["housing", "region", "grade"]),
        ("num", MinMaxScaler(), ["income", "age"])]),
    "minmax first, clipped": lambda: ColumnTransformer([
        ("num", MinMaxScaler(clip=True, feature_range=(-1, 2)), ["age", "income"]),
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["region"])]),
    "dense output": lambda: ColumnTransformer([
        ("cat", OneHotEncoder(sparse_output=False), ["housing", "grade"]),
        ("num", StandardScaler(), ["income", "age"])]),
    "sparse threshold 0 (dense)": lambda: ColumnTransformer([
        ("cat", OneHotEncoder(), ["region"]),
        ("num", StandardScaler(with_mean=False), ["income"])], sparse_threshold=0),
    "dropped remainder": lambda: ColumnTransformer([
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["housing"])], remainder="drop"),
}


@pytest.mark.parametrize("name", list(PREFIXES))
def test_compiled_transform_is_scikit_learns_bit_for_bit(name):
    train = _frame(400, 0)
    ct = PREFIXES[name]().fit(train)
    compiled = compile_prefix(ct, train.iloc[:50])
    assert isinstance(compiled, CompiledPrefix)              # the fast path is really taken
    for seed, n in ((1, 1), (2, 3), (3, 700)):
        rows = _frame(n, seed)
        # scaled values outside the fitted range (clip, negative) and exact minima (zeros dropped from sparse)
        rows.loc[0, "income"] = -1000.0
        if n > 1:
            rows.loc[1, "income"] = float(train["income"].min())
            rows.loc[1, "age"] = int(train["age"].min())
        _identical(compiled.transform(rows), ct.transform(rows))


def test_unknown_categories_and_missing_values_are_left_to_scikit_learn():
    train = _frame(300, 0)
    ct = PREFIXES["onehot + minmax (sparse)"]().fit(train)
    compiled = compile_prefix(ct, train)
    unknown = _frame(5, 1)
    unknown.loc[2, "region"] = "elsewhere"
    assert compiled.transform(unknown) is None
    missing = _frame(5, 1)
    missing.loc[3, "income"] = np.nan
    assert compiled.transform(missing) is None
    other_type = _frame(5, 1).astype({"grade": "float64"})
    other_type.loc[0, "grade"] = 2.5                          # not a known numeric category
    assert compiled.transform(other_type) is None


def test_unsupported_steps_are_not_compiled():
    train = _frame(300, 0)
    ordinal = ColumnTransformer([("cat", OrdinalEncoder(), ["housing"]), ("num", MinMaxScaler(), ["age"])]).fit(train)
    assert compile_prefix(ordinal, train) is None
    dropping = ColumnTransformer([("cat", OneHotEncoder(drop="first"), ["housing"])]).fit(train)
    assert compile_prefix(dropping, train) is None
    passthrough = ColumnTransformer([("cat", OneHotEncoder(), ["housing"])], remainder="passthrough").fit(
        train[["housing", "age"]])
    assert compile_prefix(passthrough, train[["housing", "age"]]) is None
    pandas_out = ColumnTransformer([("num", MinMaxScaler(), ["age"])]).set_output(transform="pandas").fit(train)
    assert compile_prefix(pandas_out, train) is None


def test_a_compiled_form_that_disagrees_is_never_used(monkeypatch):
    train = _frame(300, 0)
    ct = PREFIXES["onehot + minmax (sparse)"]().fit(train)
    original = _rowwise._Scaler.values

    def off_by_one_bit(self, frame):
        out = original(self, frame)
        return None if out is None else np.nextafter(out, np.inf)

    monkeypatch.setattr(_rowwise._Scaler, "values", off_by_one_bit)
    assert compile_prefix(ct, train) is None


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("classifier", [LogisticRegression(), MLPClassifier(hidden_layer_sizes=(8,), max_iter=300,
                                                                            random_state=0)])
def test_model_probabilities_do_not_change_with_the_compiled_path(tmp_path, classifier, monkeypatch):
    train = _frame(600, 0)
    pipe = Pipeline([("pre", PREFIXES["onehot + minmax (sparse)"]()), ("clf", classifier)]).fit(train, _labels(train))
    path = tmp_path / "m.joblib"
    joblib.dump(pipe, path)
    rows = pd.concat([_frame(900, 5), _frame(3, 6)], ignore_index=True)
    unknown = rows.iloc[:10].copy()
    unknown.loc[7, "region"] = "elsewhere"                     # this batch is left to scikit-learn
    batches = [rows.iloc[:900], rows.iloc[900:], unknown, rows.iloc[:10]]
    fast = load_model(path, favorable=1, feature_names=FEATURES)
    handled = []
    original = CompiledPrefix.transform

    def spy(self, frame):
        out = original(self, frame)
        handled.append(out is not None)
        return out

    monkeypatch.setattr(CompiledPrefix, "transform", spy)
    got = [fast.favorable_probability(b) for b in batches]
    assert handled == [True, True, False, True]      # the first batch: scikit-learn's output, the check on it
    monkeypatch.setattr(_rowwise, "compile_prefix", lambda transformer, frame, reference=None: None)
    slow = load_model(path, favorable=1, feature_names=FEATURES)
    want = [slow.favorable_probability(b) for b in batches]
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_a_first_batch_with_unknown_categories_defers_the_check():
    train = _frame(300, 0)
    ct = PREFIXES["onehot + minmax (sparse)"]().fit(train)
    unknown = _frame(5, 1)
    unknown.loc[2, "region"] = "elsewhere"
    assert compile_prefix(ct, unknown) is None
    assert _rowwise.compiled_prefix(ct) is None                 # not decided: the next batch is checked
    assert isinstance(compile_prefix(ct, train), CompiledPrefix)
