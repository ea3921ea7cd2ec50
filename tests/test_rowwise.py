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
        ("num", MinMaxScaler(), ["income", "age"])], sparse_threshold=1.0),     # CSR output, whatever its density
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


def prefix_columns(pipe):
    return {c for _, step, columns in pipe.steps[0][1].transformers_ if step != "drop" for c in columns}


def _columns(frame):
    """A frame as frpd's interpolation holds rows between model calls: one array per column, text as objects."""
    return {c: frame[c].to_numpy(dtype=object if frame[c].dtype.kind not in "iuf" else None) for c in frame.columns}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("prefix", ["onehot + minmax (sparse)", "dense output"])
def test_column_dicts_score_as_their_dataframe_bit_for_bit(prefix, monkeypatch):
    """``favorable_probability`` of a dict of column arrays: the probabilities of ``pd.DataFrame(dict)``."""
    from frpd_cli.model import score_columns

    train = _frame(600, 0)
    pipe = Pipeline([("pre", PREFIXES[prefix]()), ("clf", MLPClassifier(hidden_layer_sizes=(8,), max_iter=300,
                                                                         random_state=0))])
    model = _model(pipe.fit(train, _labels(train)))
    rows = pd.concat([_frame(700, 5), _frame(3, 6)], ignore_index=True)
    unknown = rows.iloc[:10].copy()
    unknown.loc[7, "region"] = "elsewhere"                     # the compiled form leaves this batch: the frame way
    reordered = rows.iloc[:50][FEATURES[::-1]]                 # column order does not matter
    taken = []
    original = type(model)._compiled_columns

    def spy(self, columns):
        out = original(self, columns)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(type(model), "_compiled_columns", spy)
    assert model.favorable_probability(_columns(rows.iloc[:10])).shape == (10,)   # not checked yet: frame way
    for batch in (rows.iloc[:700], rows.iloc[700:], unknown, reordered, rows.iloc[:1]):
        want = model.favorable_probability(batch.reset_index(drop=True))
        got = model.favorable_probability(_columns(batch))
        assert got.tobytes() == want.tobytes()
        assert score_columns(model, _columns(batch)).tobytes() == want.tobytes()
    # two dict calls per batch; the unknown region goes the frame way where the model reads that column
    reads_region = "region" in prefix_columns(pipe)
    assert taken == [False] + [True] * 4 + [not reads_region] * 2 + [True] * 4
    # a model-like object that is not a Model gets the DataFrame
    seen = []

    class Plain:
        def favorable_probability(self, rows):
            seen.append(type(rows))
            return np.zeros(len(rows))

    score_columns(Plain(), _columns(rows.iloc[:4]))
    assert seen == [pd.DataFrame]
    # a missing column is the DataFrame way's error
    from frpd_cli.exceptions import InputError

    partial = _columns(rows.iloc[:4])
    del partial["region"]
    with pytest.raises(InputError, match="region"):
        model.favorable_probability(partial)


def test_a_first_batch_with_unknown_categories_defers_the_check():
    train = _frame(300, 0)
    ct = PREFIXES["onehot + minmax (sparse)"]().fit(train)
    unknown = _frame(5, 1)
    unknown.loc[2, "region"] = "elsewhere"
    assert compile_prefix(ct, unknown) is None
    assert _rowwise.compiled_prefix(ct) is None                 # not decided: the next batch is checked
    assert isinstance(compile_prefix(ct, train), CompiledPrefix)


# ---------------------------------------------------------------------------- the compiled final estimator

FINALS = {
    "mlp relu": lambda: MLPClassifier(hidden_layer_sizes=(8, 5), max_iter=300, random_state=0),
    "mlp tanh": lambda: MLPClassifier(hidden_layer_sizes=(6,), activation="tanh", max_iter=300, random_state=1),
    "mlp logistic": lambda: MLPClassifier(hidden_layer_sizes=(4,), activation="logistic", max_iter=300,
                                          random_state=2),
    "logistic regression": lambda: LogisticRegression(C=0.5, max_iter=500),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("prefix", ["onehot + minmax (sparse)", "dense output"])
@pytest.mark.parametrize("final", list(FINALS))
def test_compiled_final_is_predict_proba_bit_for_bit(prefix, final):
    train = _frame(400, 0)
    pipe = Pipeline([("prep", PREFIXES[prefix]()), ("clf", FINALS[final]())]).fit(train, _labels(train))
    ct, clf = pipe.steps[0][1], pipe.steps[-1][1]
    scorer, _ = _rowwise.final_scorer(clf, ct.transform(_frame(512, 5)))
    assert isinstance(scorer, _rowwise.CompiledFinal)        # the fast path is really taken
    for seed, n in ((1, 1), (2, 7), (3, 512), (4, 1300)):
        X = ct.transform(_frame(n, seed))
        got, expected = scorer(X), clf.predict_proba(X)
        assert got.dtype == expected.dtype and got.shape == expected.shape == (n, 2)
        assert got.tobytes() == expected.tobytes()
    # frpd's own path (compiled preprocessing + compiled final, in blocks of 512; with a sparse prefix, the first
    # layer of all rows at once) gives scikit-learn's bits on the same padded blocks
    from frpd_cli.model import SCORE_BLOCK_ROWS

    model = _model(pipe)
    for seed, n in ((9, 700), (10, 1), (11, 512), (12, 1100)):
        rows = _frame(n, seed)
        X = ct.transform(rows)
        blocks = [np.minimum(np.arange(start, start + SCORE_BLOCK_ROWS), n - 1) for start in range(0, n, SCORE_BLOCK_ROWS)]
        expected = np.concatenate([clf.predict_proba(X[b])[:, 1] for b in blocks])[:n]
        assert model.favorable_probability(rows).tobytes() == expected.tobytes()
    assert isinstance(_rowwise._final.get(model.estimator.steps[-1][1]), _rowwise.CompiledFinal)
    # on a sparse matrix, the first layer of all rows is computed once: the same rows, whatever the call
    firsts = []
    original = _rowwise.CompiledFinal.first_layer
    try:
        _rowwise.CompiledFinal.first_layer = lambda self, X: firsts.append(X.shape[0]) or original(self, X)
        model.favorable_probability(_frame(1100, 13))
    finally:
        _rowwise.CompiledFinal.first_layer = original
    assert firsts == ([1100] if prefix.endswith("(sparse)") else [SCORE_BLOCK_ROWS] * 3)


def _model(pipe):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.pkl"
        joblib.dump(pipe, path)
        return load_model(path, feature_names=FEATURES, favorable=1)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_compiled_final_steps_aside_when_it_differs_or_does_not_apply(monkeypatch):
    train = _frame(512, 0)
    y = _labels(train)
    X = PREFIXES["dense output"]().fit(train).transform(train)
    # a compiled form one bit off is refused: scikit-learn keeps the job
    mlp = MLPClassifier(hidden_layer_sizes=(5,), max_iter=200, random_state=0).fit(X, y[:512])
    original = _rowwise.CompiledFinal.__call__

    def off_by_one_bit(self, block):
        out = original(self, block)
        out[0, 1] = np.nextafter(out[0, 1], 2.0)
        return out

    monkeypatch.setattr(_rowwise.CompiledFinal, "__call__", off_by_one_bit)
    assert _rowwise.final_scorer(mlp, X)[0] is None
    assert _rowwise.final_scorer(mlp, X) == (None, None)         # remembered: not re-checked
    monkeypatch.setattr(_rowwise.CompiledFinal, "__call__", original)
    # models it does not implement: three classes, another estimator, other dtypes or widths
    three = LogisticRegression(max_iter=300).fit(X, (np.arange(512) % 3))
    assert _rowwise.final_scorer(three, X)[0] is None
    from sklearn.tree import DecisionTreeClassifier

    assert _rowwise.final_scorer(DecisionTreeClassifier(random_state=0).fit(X, y[:512]), X)[0] is None
    fresh = LogisticRegression(max_iter=300).fit(X, y[:512])
    assert _rowwise.CompiledFinal(fresh)(X.astype(np.float32)) is None
    assert _rowwise.CompiledFinal(fresh)(X[:, :-1]) is None


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("prefix", ["onehot + minmax (sparse)", "dense output"])
def test_a_failed_self_check_gives_scikit_learns_bits(prefix, monkeypatch):
    # both compiled forms made one bit off, as a scikit-learn version computing otherwise would make them: the
    # checks refuse them and the model's probabilities are scikit-learn's own, on the same padded blocks
    from frpd_cli.model import SCORE_BLOCK_ROWS

    train = _frame(400, 0)
    pipe = Pipeline([("prep", PREFIXES[prefix]()), ("clf", FINALS["mlp relu"]())]).fit(train, _labels(train))
    scaler_values, final_call = _rowwise._Scaler.values, _rowwise.CompiledFinal.__call__

    def scaler_one_bit_off(self, frame):
        out = scaler_values(self, frame)
        return None if out is None else np.nextafter(out, np.inf)

    def final_one_bit_off(self, X):
        out = final_call(self, X)
        if out is not None:
            out[0, 1] = np.nextafter(out[0, 1], 2.0)
        return out

    monkeypatch.setattr(_rowwise._Scaler, "values", scaler_one_bit_off)
    monkeypatch.setattr(_rowwise.CompiledFinal, "__call__", final_one_bit_off)
    model = _model(pipe)
    for seed, n in ((9, 700), (10, 1), (11, 512)):
        rows = _frame(n, seed)
        blocks = [np.minimum(np.arange(start, start + SCORE_BLOCK_ROWS), n - 1) for start in range(0, n, SCORE_BLOCK_ROWS)]
        expected = np.concatenate([pipe.predict_proba(rows.iloc[b])[:, 1] for b in blocks])[:n]
        assert model.favorable_probability(rows).tobytes() == expected.tobytes()
    ct, clf = model.estimator.steps[0][1], model.estimator.steps[-1][1]
    assert _rowwise.compiled_prefix(ct) is False and _rowwise.checked_final(clf) is False
