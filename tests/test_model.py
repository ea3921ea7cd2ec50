"""Tests of frpd_cli.model: loading trusted models and the favourable probability."""

import os
import pickle
import sys
import warnings
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import InconsistentVersionWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder
from sklearn.tree import DecisionTreeClassifier

from frpd_cli.exceptions import InputError, ModelError, ModelOutputError
from frpd_cli.model import Model, ModelVersionWarning, load_model, model_output_to_stderr

FEATURES = ["income", "age", "housing"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 120
    frame = pd.DataFrame(
        {
            "income": rng.normal(50, 15, n),
            "age": rng.integers(20, 70, n),
            "housing": rng.choice(["own", "rent", "free"], n),
        }
    )
    y = ((frame["income"] + 10 * (frame["housing"] == "own")) > 55).astype(int).to_numpy()
    return frame, y


def _pipeline(classifier=None):
    pre = ColumnTransformer(
        [("num", MinMaxScaler(), ["income", "age"]), ("cat", OneHotEncoder(handle_unknown="ignore"), ["housing"])]
    )
    return Pipeline([("pre", pre), ("clf", classifier or LogisticRegression())])


@pytest.fixture(scope="module")
def fitted(data):
    frame, y = data
    return _pipeline().fit(frame, y)


@pytest.fixture
def model_file(tmp_path, fitted):
    path = tmp_path / "model.joblib"
    joblib.dump(fitted, path)
    return path


class PredictOnly:
    """A model with predict and classes_ but no predict_proba (like a rule)."""

    classes_ = np.array(["no", "yes"])

    def predict(self, X):
        return np.where(np.asarray(X["income"], dtype=float) > 55, "yes", "no")


class PredictOnlyNoClasses:
    """A rule without classes_: frpd cannot know what its outputs mean."""

    def predict(self, X):
        return np.where(np.asarray(X["income"], dtype=float) > 55, "yes", "no")


class FixedProba:
    """A classifier double whose predict_proba returns a fixed table (rows cycled to the call's length)."""

    classes_ = np.array([0, 1])

    def __init__(self, table, noise=None):
        self.table = np.asarray(table, dtype=float)
        self.noise = noise

    def predict_proba(self, X):
        if self.noise == "print":
            print("model says hello")
        elif self.noise == "fd":
            os.write(1, b"model writes to fd 1\n")
        elif self.noise == "cstdio":       # buffered by the C library, written when it is flushed
            import ctypes

            ctypes.CDLL(None).printf(b"model printf\n")
        rows = np.arange(len(X)) % len(self.table)
        return self.table[rows]


class NotAModel:
    def transform(self, X):
        return X


class Clip(BaseEstimator, TransformerMixin):
    """A custom transformer: skops must not trust it by default."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return X


# ------------------------------------------------------------------ probabilities


def test_probability_equals_predict_proba_column(model_file, fitted, data):
    frame, _ = data
    model = load_model(model_file, favorable=1, feature_names=FEATURES)
    expected = fitted.predict_proba(frame)[:, list(fitted.classes_).index(1)]
    got = model.favorable_probability(frame)
    assert got.dtype == np.float64 and got.shape == (len(frame),)
    # scored in fixed-shape blocks, not in one call: equal up to the last bits of the matrix products
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(model.is_favorable(frame), expected >= 0.5)
    assert model.uses_proba and model.path == str(model_file)


def test_columns_reordered_to_the_model_order(model_file, fitted, data):
    frame, _ = data
    model = load_model(model_file, favorable=1, feature_names=["housing", "age", "income"])
    shuffled = frame[["housing", "income", "age"]].assign(extra=1.0)
    np.testing.assert_allclose(model.favorable_probability(shuffled), fitted.predict_proba(frame)[:, 1],
                               rtol=0, atol=1e-12)


def test_threshold_is_inclusive(model_file, data):
    frame, _ = data
    model = load_model(model_file, favorable=1, feature_names=FEATURES)
    p = model.favorable_probability(frame.iloc[:5])
    exact = Model(model.estimator, model.path, model.favorable, float(p[0]), model.feature_names, True)
    assert exact.is_favorable(frame.iloc[:1]).tolist() == [True]


def test_one_predict_proba_call_per_block(model_file, data, monkeypatch):
    from frpd_cli.model import SCORE_BLOCK_ROWS

    frame, _ = data
    model = load_model(model_file, favorable=1, feature_names=FEATURES)
    from frpd_cli._rowwise import CompiledFinal

    final = model.estimator.steps[-1][1]          # row-wise preprocessing runs once, the classifier per block
    sklearn_calls, firsts, blocks = [], [], []
    original = type(final).predict_proba
    monkeypatch.setattr(type(final), "predict_proba",
                        lambda self, X: sklearn_calls.append(X.shape[0]) or original(self, X))
    # the compiled classifier (checked against scikit-learn on the process's first block) runs its first layer
    # once on all rows of a sparse matrix, and the layers after it per block
    first, after = CompiledFinal.first_layer, CompiledFinal.after_first
    monkeypatch.setattr(CompiledFinal, "first_layer", lambda self, X: firsts.append(X.shape[0]) or first(self, X))
    monkeypatch.setattr(CompiledFinal, "after_first", lambda self, A: blocks.append(A.shape[0]) or after(self, A))
    rows = pd.concat([frame] * (SCORE_BLOCK_ROWS // len(frame) + 1), ignore_index=True)
    model.favorable_probability(rows)
    n_blocks = -(-len(rows) // SCORE_BLOCK_ROWS)
    assert n_blocks == 2
    # the first block: compiled and scikit-learn, compared; its scikit-learn result is used
    assert sklearn_calls == [SCORE_BLOCK_ROWS]
    sparse = hasattr(model.estimator.steps[0][1].transform(frame), "indptr")
    # the check's block, then every row of a sparse matrix once (a dense one: the second block)
    assert firsts == [SCORE_BLOCK_ROWS, len(rows) if sparse else SCORE_BLOCK_ROWS]
    assert blocks == [SCORE_BLOCK_ROWS] * n_blocks          # the check's block, then the second block
    # a later call: no check; every block whole
    sklearn_calls.clear(), firsts.clear(), blocks.clear()
    model.favorable_probability(rows.iloc[:SCORE_BLOCK_ROWS + 3])
    assert sklearn_calls == [] and blocks == [SCORE_BLOCK_ROWS] * 2
    assert firsts == ([SCORE_BLOCK_ROWS + 3] if sparse else [SCORE_BLOCK_ROWS] * 2)


def test_missing_row_column_is_named(model_file, data):
    frame, _ = data
    model = load_model(model_file, favorable=1, feature_names=FEATURES)
    with pytest.raises(InputError, match="'age'"):
        model.favorable_probability(frame.drop(columns="age"))


# ------------------------------------------------------------------ favourable class


@pytest.mark.parametrize("given, stored", [("1", 1), (1, 1), (np.int64(1), 1), ("1.0", 1)])
def test_favorable_matches_int_classes(model_file, given, stored):
    model = load_model(model_file, favorable=given, feature_names=FEATURES)
    assert model.favorable == stored and type(model.favorable) is int


def test_favorable_int_matches_string_classes(tmp_path, data):
    frame, y = data
    labels = np.where(y == 1, "1", "0")
    path = tmp_path / "m.pkl"
    joblib.dump(_pipeline().fit(frame, labels), path)
    model = load_model(path, favorable=1, feature_names=FEATURES)
    assert model.favorable == "1"
    assert model.favorable_probability(frame).shape == (len(frame),)


def test_wrong_favorable_class_lists_classes(model_file):
    with pytest.raises(ModelError) as info:
        load_model(model_file, favorable="approved", feature_names=FEATURES)
    message = str(info.value)
    assert "'approved'" in message and "0, 1" in message and "--favorable" in message


def test_bool_is_not_int_class(model_file):
    with pytest.raises(ModelError, match="not one of the model's classes"):
        load_model(model_file, favorable=True, feature_names=FEATURES)


# ------------------------------------------------------------------ features


def test_missing_feature_is_named(model_file):
    with pytest.raises(ModelError) as info:
        load_model(model_file, favorable=1, feature_names=["income", "housing"])
    assert "missing from the data: 'age'" in str(info.value)


def test_extra_feature_is_named(model_file):
    with pytest.raises(ModelError) as info:
        load_model(model_file, favorable=1, feature_names=FEATURES + ["zip_code"])
    message = str(info.value)
    assert "unknown to the model: 'zip_code'" in message and "missing from the data" not in message


def test_feature_count_checked_without_names(tmp_path, data):
    frame, y = data
    path = tmp_path / "m.pkl"
    joblib.dump(LogisticRegression().fit(frame[["income", "age"]].to_numpy(), y), path)
    with pytest.raises(ModelError, match="expects 2 features; the data has 3"):
        load_model(path, favorable=1, feature_names=FEATURES)
    model = load_model(path, favorable=1, feature_names=["income", "age"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = model.favorable_probability(frame)
    # no "X has feature names" warning: an array is passed (other libraries' deprecations are not frpd's concern)
    assert not [str(w.message) for w in caught if "feature names" in str(w.message)]
    np.testing.assert_allclose(p, model.estimator.predict_proba(frame[["income", "age"]].to_numpy())[:, 1],
                               rtol=0, atol=1e-12)


# ------------------------------------------------------------------ kinds of models and files


def test_predict_only_model(tmp_path, data):
    frame, _ = data
    path = tmp_path / "rule.pkl"
    joblib.dump(PredictOnly(), path)
    model = load_model(path, favorable="yes", feature_names=FEATURES)
    assert not model.uses_proba
    p = model.favorable_probability(frame)
    np.testing.assert_array_equal(p, (frame["income"] > 55).astype(float).to_numpy())
    assert set(np.unique(p)) <= {0.0, 1.0}


def test_predict_only_model_without_classes_refused(tmp_path):
    path = tmp_path / "rule.pkl"
    joblib.dump(PredictOnlyNoClasses(), path)
    with pytest.raises(ModelError, match="no classes_"):
        load_model(path, favorable="yes", feature_names=FEATURES)


def test_regressor_refused(tmp_path, data):
    from sklearn.linear_model import LinearRegression

    frame, y = data
    for name, estimator in [("lr.pkl", LinearRegression()), ("pipe.pkl", _pipeline(LinearRegression()))]:
        path = tmp_path / name
        joblib.dump(estimator.fit(frame[["income", "age"]] if name == "lr.pkl" else frame, y), path)
        names = ["income", "age"] if name == "lr.pkl" else FEATURES
        with pytest.raises(ModelError, match="regressor") as info:
            load_model(path, favorable=1, feature_names=names)
        message = str(info.value)
        assert name in message and ("LinearRegression" in message or "Pipeline" in message)


def test_predict_only_sklearn_model_with_classes(tmp_path, data):
    from sklearn.svm import LinearSVC

    frame, y = data
    path = tmp_path / "svm.pkl"
    fitted = _pipeline(LinearSVC()).fit(frame, y)
    joblib.dump(fitted, path)
    model = load_model(path, favorable="1", feature_names=FEATURES)
    assert not model.uses_proba
    np.testing.assert_array_equal(model.favorable_probability(frame), (fitted.predict(frame) == 1).astype(float))


def test_not_a_model_refused(tmp_path):
    path = tmp_path / "m.pkl"
    joblib.dump(NotAModel(), path)
    with pytest.raises(ModelError, match="neither predict_proba nor predict"):
        load_model(path, favorable=1, feature_names=FEATURES)


def test_missing_file(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        load_model(tmp_path / "nope.pkl", favorable=1, feature_names=FEATURES)


def test_unknown_extension(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"x")
    with pytest.raises(ModelError, match=r"extension '\.bin'"):
        load_model(path, favorable=1, feature_names=FEATURES)


@pytest.mark.parametrize("threshold", [0, 1, -0.1, 1.5, float("nan"), True, "0.5"])
def test_threshold_must_be_in_open_unit_interval(model_file, threshold):
    with pytest.raises(InputError, match="threshold"):
        load_model(model_file, favorable=1, feature_names=FEATURES, threshold=threshold)


def test_garbage_pickle(tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(b"this is not a pickle at all\n" * 3)
    with pytest.raises(ModelError, match="cannot be unpickled"):
        load_model(path, favorable=1, feature_names=FEATURES)


def test_truncated_pickle(tmp_path, fitted):
    data = pickle.dumps(fitted)
    path = tmp_path / "model.pkl"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="cannot be unpickled"):
        load_model(path, favorable=1, feature_names=FEATURES)


def test_pickle_of_missing_module_names_it(tmp_path, monkeypatch):
    module_dir = tmp_path / "mods"
    module_dir.mkdir()
    (module_dir / "frpd_vanished_mod.py").write_text(
        "class Rule:\n    def predict(self, X):\n        return [1] * len(X)\n"
    )
    monkeypatch.syspath_prepend(str(module_dir))
    import frpd_vanished_mod

    path = tmp_path / "model.pkl"
    joblib.dump(frpd_vanished_mod.Rule(), path)
    monkeypatch.delitem(sys.modules, "frpd_vanished_mod")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(module_dir)])
    with pytest.raises(ModelError) as info:
        load_model(path, favorable=1, feature_names=FEATURES)
    assert "'frpd_vanished_mod'" in str(info.value) and "not installed" in str(info.value)


def test_version_warning_reissued(tmp_path, data, monkeypatch):
    import sklearn
    from sklearn.base import BaseEstimator

    frame, y = data
    clf = DecisionTreeClassifier(max_depth=2).fit(frame[["income", "age"]], y)
    original = BaseEstimator.__getstate__
    monkeypatch.setattr(BaseEstimator, "__getstate__", lambda self: {**original(self), "_sklearn_version": "1.5.2"})
    path = tmp_path / "old.pkl"
    joblib.dump(clf, path)
    monkeypatch.undo()

    # scikit-learn itself warns on such a file ...
    with pytest.warns(InconsistentVersionWarning):
        joblib.load(path)
    # ... and load_model re-issues one clear warning instead
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_model(path, favorable=1, feature_names=["income", "age"])
    categories = [w.category for w in caught]
    assert InconsistentVersionWarning not in categories
    ours = [w for w in caught if issubclass(w.category, ModelVersionWarning)]
    assert len(ours) == 1
    message = str(ours[0].message)
    assert "old.pkl was saved with scikit-learn 1.5.2" in message
    assert f"this environment has {sklearn.__version__}" in message
    assert "scikit-learn==1.5.2" in message
    assert model.favorable_probability(frame).shape == (len(frame),)


# ------------------------------------------------------------------ skops


def test_skops_round_trip(tmp_path, data):
    sio = pytest.importorskip("skops.io")
    frame, y = data
    fitted = _pipeline(DecisionTreeClassifier(max_depth=3, random_state=0)).fit(frame, y)
    path = tmp_path / "model.skops"
    sio.dump(fitted, path)
    assert sio.get_untrusted_types(file=path)  # the tree needs the default allow-list
    model = load_model(path, favorable="1", feature_names=FEATURES)
    np.testing.assert_array_equal(model.favorable_probability(frame), fitted.predict_proba(frame)[:, 1])


def test_skops_untrusted_custom_type_refused(tmp_path, data):
    sio = pytest.importorskip("skops.io")
    frame, y = data
    fitted = Pipeline([("clip", Clip()), ("clf", _pipeline())]).fit(frame, y)
    path = tmp_path / "model.skops"
    sio.dump(fitted, path)
    name = f"{Clip.__module__}.Clip"
    with pytest.raises(ModelError) as info:
        load_model(path, favorable=1, feature_names=FEATURES)
    assert name in str(info.value) and "does not trust" in str(info.value)
    model = load_model(path, favorable=1, feature_names=FEATURES, trusted_types=[name])
    np.testing.assert_array_equal(model.favorable_probability(frame), fitted.predict_proba(frame)[:, 1])


def test_skops_corrupt_file(tmp_path):
    pytest.importorskip("skops.io")
    path = tmp_path / "model.skops"
    path.write_bytes(b"PK\x03\x04 broken")
    with pytest.raises(ModelError, match="cannot be read"):
        load_model(path, favorable=1, feature_names=FEATURES)


def test_skops_missing_gives_install_hint(tmp_path, monkeypatch):
    path = tmp_path / "model.skops"
    path.write_bytes(b"x")
    monkeypatch.setitem(sys.modules, "skops", None)
    monkeypatch.setitem(sys.modules, "skops.io", None)
    with pytest.raises(ModelError, match=r"pip install 'frpd-cli\[safe\]'"):
        load_model(path, favorable=1, feature_names=FEATURES)


# ------------------------------------------------------------------ checked outputs


def _fixed(tmp_path, table, noise=None):
    path = tmp_path / "fixed.pkl"
    joblib.dump(FixedProba(table, noise), path)
    return load_model(path, favorable=1, feature_names=FEATURES)


@pytest.mark.parametrize("table, bad_row, words", [
    ([[0.5, 0.5], [np.nan, np.nan]], 2, "non-finite"),
    ([[0.2, 0.8], [0.3, 0.7], [np.inf, 0.0]], 3, "non-finite"),
    ([[0.2, 0.8], [-0.89, 1.89]], 2, "outside [0, 1]"),
    ([[0.6, 0.6]], 1, "sum to 1.2"),
    ([[0.3, 0.7], [0.3, 0.7 + 2e-6]], 2, "sum to"),
])
def test_bad_probabilities_name_the_first_bad_row(tmp_path, data, table, bad_row, words):
    frame, _ = data
    model = _fixed(tmp_path, table)
    with pytest.raises(ModelOutputError) as info:
        model.favorable_probability(frame.iloc[:7])
    message = str(info.value)
    assert info.value.row == bad_row - 1 and info.value.n_rows == 7
    assert f"row {bad_row} of the 7 row(s)" in message and words in message and "fixed.pkl" in message


def test_probabilities_within_tolerance_accepted(tmp_path, data):
    frame, _ = data
    model = _fixed(tmp_path, [[0.0, 1.0], [1.0, 0.0], [0.3, 0.7 + 5e-7], [1e-300, 1.0]])
    np.testing.assert_array_equal(model.favorable_probability(frame.iloc[:4]), [1.0, 0.0, 0.7 + 5e-7, 1.0])


def test_wrong_number_of_columns_refused(tmp_path, data):
    frame, _ = data
    model = _fixed(tmp_path, [[0.2, 0.3, 0.5]])
    with pytest.raises(ModelError, match=r"shape \(3, 3\).*expected \(3, 2\)"):
        model.favorable_probability(frame.iloc[:3])


def test_located_error_names_the_file_row():
    error = ModelOutputError(model="m.pkl", row=4, n_rows=10, n_bad=1, problem="returned nonsense: [nan]")
    moved = error.located("data row 5 (line 6) of 'train.csv'")
    assert "data row 5 (line 6) of 'train.csv'" in str(moved) and moved.row == 4 and "m.pkl" in str(moved)


def test_model_prints_go_to_stderr(tmp_path, data, capfd):
    frame, _ = data
    for noise in ("print", "fd", "cstdio"):
        model = _fixed(tmp_path, [[0.4, 0.6]], noise=noise)
        model.favorable_probability(frame.iloc[:2])
    sys.stdout.write("data line\n")
    sys.stdout.flush()
    out, err = capfd.readouterr()
    assert out == "data line\n"
    assert "model says hello" in err and "model writes to fd 1" in err and "model printf" in err


def test_stdout_restored_after_a_failing_model_call(capfd):
    before = sys.stdout
    with pytest.raises(RuntimeError):
        with model_output_to_stderr():
            with model_output_to_stderr():     # nested: one redirection
                os.write(1, b"inner\n")
            raise RuntimeError("boom")
    assert sys.stdout is before
    os.write(1, b"after\n")
    out, err = capfd.readouterr()
    assert out == "after\n" and err == "inner\n"


# ------------------------------------------------------------------ models saved under another scikit-learn

#: A scikit-learn version outside frpd's supported range, so never the installed one.
OTHER_VERSION = "1.3.2"


def _dump_as_saved_by(estimator, path, version, monkeypatch, **dump_kwargs):
    """Pickle ``estimator`` as scikit-learn ``version`` would: every estimator's state records that version.

    scikit-learn writes its version into each estimator's pickled state (``BaseEstimator.__getstate__``) and
    compares it when loading; this records another one, the file's only difference from a file of that version.
    """
    from sklearn.base import BaseEstimator

    original = BaseEstimator.__getstate__
    with monkeypatch.context() as patch:
        patch.setattr(BaseEstimator, "__getstate__", lambda self: {**original(self), "_sklearn_version": version})
        joblib.dump(estimator, path, **dump_kwargs)
    return path


def _rename_in_pickle(path, old: str, new: str):
    """Rename a module in a pickle's bytes (same length), as if the class had moved in the saving version."""
    data = path.read_bytes()
    assert len(old) == len(new) and data.count(old.encode()) >= 1
    path.write_bytes(data.replace(old.encode(), new.encode()))


def _frpd(*args):
    import subprocess

    return subprocess.run([sys.executable, "-m", "frpd_cli", *map(str, args)], capture_output=True, text=True)


def _cli_args(tmp_path, data, model_path):
    frame, y = data
    train = frame.assign(label=y)
    train.to_csv(tmp_path / "train.csv", index=False)
    (tmp_path / "schema.toml").write_text(
        'target = "label"\nfavorable = 1\ncategorical = ["housing"]\ninteger = ["age"]\n')
    return ["schema", tmp_path / "train.csv", "--schema", tmp_path / "schema.toml", "--model", model_path]


def test_a_pipeline_saved_under_another_version_gives_one_warning_line(tmp_path, data, monkeypatch, fitted):
    import sklearn

    path = _dump_as_saved_by(fitted, tmp_path / "old.pkl", OTHER_VERSION, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        joblib.load(path)
    raised = [w for w in caught if issubclass(w.category, InconsistentVersionWarning)]
    assert len(raised) >= 4          # scikit-learn warns per estimator: pipeline, column transformer, steps
    done = _frpd(*_cli_args(tmp_path, data, path))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    versions = [line for line in lines if OTHER_VERSION in line]
    assert versions == [f"Warning: old.pkl was saved with scikit-learn {OTHER_VERSION}; this environment has "
                        f"{sklearn.__version__}; predictions may differ — re-train the model or pin "
                        f"scikit-learn=={OTHER_VERSION}."]
    assert not [line for line in lines if "Inconsistent" in line or "Trying to unpickle" in line]


def test_a_model_that_cannot_be_loaded_names_both_versions_and_what_to_do(tmp_path, data, monkeypatch, fitted):
    import sklearn

    path = _dump_as_saved_by(fitted, tmp_path / "old.pkl", OTHER_VERSION, monkeypatch)
    # the saving version kept LogisticRegression in a module the installed one does not have
    _rename_in_pickle(path, "sklearn.linear_model._logistic", "sklearn.linear_model._logistiq")
    with pytest.raises(ModelError) as info:
        load_model(path, favorable=1, feature_names=FEATURES)
    message = str(info.value)
    assert f"saved with scikit-learn {OTHER_VERSION}" in message
    assert f"this environment has scikit-learn {sklearn.__version__}" in message
    assert "sklearn.linear_model._logistiq" in message
    assert "skops" in message and "ONNX" in message and f"scikit-learn=={OTHER_VERSION}" in message
    done = _frpd(*_cli_args(tmp_path, data, path))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"Error: {message}"]


@pytest.mark.parametrize("compress", [0, 3, "gzip", "bz2", "xz", "lzma"])
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_the_saving_version_is_read_from_the_file_when_loading_stops_before_any_warning(
        tmp_path, data, monkeypatch, compress, protocol):
    import sklearn

    from frpd_cli.model import _pickled_sklearn_version

    frame, y = data
    clf = LogisticRegression().fit(frame[["income", "age"]], y)
    path = _dump_as_saved_by(clf, tmp_path / "old.pkl", OTHER_VERSION, monkeypatch, compress=compress,
                             protocol=protocol)
    assert _pickled_sklearn_version(path) == OTHER_VERSION
    current = joblib.dump(clf, tmp_path / "current.pkl", compress=compress, protocol=protocol)[0]
    assert _pickled_sklearn_version(Path(current)) == sklearn.__version__
    joblib.dump({"not": "an estimator"}, tmp_path / "plain.pkl", compress=compress, protocol=protocol)
    assert _pickled_sklearn_version(tmp_path / "plain.pkl") is None
    if compress == 0:
        # the estimator's class is the first thing the file needs: nothing warns before the failure
        _rename_in_pickle(path, "sklearn.linear_model._logistic", "sklearn.linear_model._logistiq")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ModelError, match=f"saved with scikit-learn {OTHER_VERSION} and this environment has "
                                                 f"scikit-learn {sklearn.__version__}"):
                load_model(path, favorable=1, feature_names=["income", "age"])
        assert not caught


def test_a_module_missing_from_an_installed_package_is_a_version_difference(tmp_path):
    # numpy 1.x pickles arrays with numpy.core.multiarray._reconstruct, numpy 2.x with numpy._core....: a file
    # from the other major version names a numpy module this one lacks
    path = tmp_path / "arrays.pkl"
    path.write_bytes(pickle.dumps(np.arange(3.0), protocol=2))
    _rename_in_pickle(path, "multiarray", "multiarrax")
    with pytest.raises(ModelError) as info:
        load_model(path, favorable=1, feature_names=FEATURES)
    message = str(info.value)
    assert f"which numpy {np.__version__} (installed here) does not have" in message
    assert "saved with another version of numpy" in message and "not installed" not in message
