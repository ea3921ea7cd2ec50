"""The pool's kept scorer: a run with a pool scores without scikit-learn, and every probability is the model's.

Oracles: the loaded model itself (scikit-learn's ``predict_proba`` behind frpd's blocks) on rows the pool never
saw, bit for bit; plans of the same inputs without the pool, byte for byte. Invariants: a kept scorer that does
not reproduce the pool's probabilities, or was written under other library versions, is not used.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import subprocess
import sys

import joblib
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.artifacts import read_artifact
from frpd_cli.cli.app import app
from frpd_cli.exceptions import ModelError
from frpd_cli.model import load_model
from frpd_cli.pool import POOL_KIND
from frpd_cli.snapshot import SCORER_PAYLOAD, SnapshotPipeline, pool_model, scorer_state

runner = CliRunner()


def _common(paths, *extra):
    return [str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]), *extra]


@pytest.fixture(scope="module")
def pool_dir(sample_paths, tmp_path_factory):
    out = tmp_path_factory.mktemp("snapshot") / "pool"
    result = runner.invoke(app, ["build-pool", *_common(sample_paths, "--out", str(out))])
    assert result.exit_code == 0, result.stderr
    assert "It keeps the model's scorer" in result.stderr
    return out


def _plan(paths, *extra):
    result = runner.invoke(app, ["plan", *_common(paths, "--applicants", str(paths["applicants"]), "--format",
                                                  "jsonl", "-k", "2", *extra)])
    assert result.exit_code == 0, result.stderr
    return result.stdout


# ---------------------------------------------------------------------------- the scorer against the model


def _frame(rng, n):
    return pd.DataFrame({
        "income": rng.uniform(-1.0, 12.0, n).round(rng.integers(0, 6)),
        "years": rng.integers(0, 40, n),
        "sector": rng.choice(["retail", "tech", "farm", "public"], n),
        "region": rng.choice(["north", "south", "east"], n),
    })


def _pipeline(final, *, sparse: bool, scaler: str):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, StandardScaler

    pre = ColumnTransformer([("cat", OneHotEncoder(sparse_output=sparse), ["sector", "region"]),
                             ("num", MinMaxScaler() if scaler == "minmax" else StandardScaler(), ["income", "years"])])
    return Pipeline([("pre", pre), ("clf", final)])


def _final(kind):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    if kind == "logistic-regression":
        return LogisticRegression(max_iter=500)
    return MLPClassifier(hidden_layer_sizes=(7, 5), activation=kind, max_iter=300, random_state=0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind,sparse,scaler", [("relu", True, "minmax"), ("tanh", False, "standard"),
                                                ("logistic", True, "standard"), ("identity", False, "minmax"),
                                                ("logistic-regression", True, "minmax"),
                                                ("logistic-regression", False, "standard")])
def test_the_kept_scorer_gives_the_models_probabilities_on_rows_it_never_saw(kind, sparse, scaler, tmp_path):
    rng = np.random.default_rng(3)
    train = _frame(rng, 400)
    y = ((train["income"] + 3 * (train["sector"] == "tech") - 0.1 * train["years"]) > 4).astype(int)
    path = tmp_path / "model.pkl"
    joblib.dump(_pipeline(_final(kind), sparse=sparse, scaler=scaler).fit(train, y), path)
    names = tuple(train.columns)
    model = load_model(path, favorable=1, feature_names=names)
    probability = model.favorable_probability(train)
    state = scorer_state(model, train, probability)
    assert state is not None
    state = json.loads(json.dumps(state))                           # as the pool holds it
    kept = _model_of(state, model)
    assert isinstance(kept.estimator, SnapshotPipeline)
    # rows the scorer was not checked on: other values, other batch sizes, a dict of columns or a frame
    fresh = _frame(np.random.default_rng(11), 1300)
    expected = model.favorable_probability(fresh)
    assert kept.favorable_probability(fresh).tobytes() == expected.tobytes()
    columns = {c: fresh[c].to_numpy() for c in names}
    assert kept.favorable_probability(columns).tobytes() == expected.tobytes()
    one = fresh.iloc[[5]]
    assert kept.favorable_probability(one).tobytes() == expected[[5]].tobytes()
    assert kept.estimator._real is None                             # scikit-learn never needed
    # and scikit-learn's own call agrees (frpd's fixed-size blocks may round the last bit differently)
    np.testing.assert_allclose(expected, model.estimator.predict_proba(fresh)[:, 1], rtol=0, atol=1e-12)


def _logistic_model(tmp_path, kind: str, seed: int):
    """A model with a logistic output (an MLP of logistic units, or a logistic regression) on 300 rows."""
    train = _frame(np.random.default_rng(seed), 300)
    y = ((train["income"] - 0.2 * train["years"] + 2 * (train["region"] == "east")) > 3).astype(int)
    path = tmp_path / "model.pkl"
    joblib.dump(_pipeline(_final(kind), sparse=True, scaler="minmax").fit(train, y), path)
    return train, load_model(path, favorable=1, feature_names=tuple(train.columns))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("arithmetic", ["numpy", "libm", "scipy"])
def test_every_arithmetic_gives_the_models_probabilities(arithmetic, tmp_path):
    train, model = _logistic_model(tmp_path, "logistic", 5)
    state = scorer_state(model, train, model.favorable_probability(train))
    order = ("numpy", "libm", "scipy")
    if order.index(state["arithmetic"]) > order.index(arithmetic):
        pytest.skip(f"{arithmetic}'s exp differs from scipy's on this machine: the kept scorer uses "
                    f"{state['arithmetic']}")
    state = dict(state, arithmetic=arithmetic)
    fresh = _frame(np.random.default_rng(8), 700)
    kept = _model_of(json.loads(json.dumps(state)), model)
    assert kept.favorable_probability(fresh).tobytes() == model.favorable_probability(fresh).tobytes()


def test_the_c_librarys_logistic_function_is_scipys_bit_for_bit():
    """``_libm_expit`` against ``scipy.special.expit`` on values across the doubles: tiny, around 0, where the
    result rounds to 0 or 1, where ``exp`` overflows (Python's ``math.exp`` raises there, the C library gives inf),
    infinities and NaN; in place, any shape."""
    from scipy.special import expit

    from frpd_cli._rowwise import _libm_expit

    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(0, 3, 20_000), rng.normal(0, 40, 20_000), rng.uniform(-800, 800, 5_000),
                             np.logspace(-300, 2.9, 2_000), -np.logspace(-300, 2.9, 2_000),
                             [0.0, -0.0, 709.78, -709.78, 709.79, -709.79, 745.2, -745.2, 1e308, -1e308,
                              np.inf, -np.inf, np.nan, 5e-324, -5e-324]])
    for shape in ((values.size,), (values.size // 5, 5)):
        mine = values[: int(np.prod(shape))].reshape(shape).copy()
        _libm_expit(mine)
        theirs = expit(values[: int(np.prod(shape))].reshape(shape))
        same = (mine == theirs) | (np.isnan(mine) & np.isnan(theirs))
        assert same.all() and np.array_equal(np.signbit(mine), np.signbit(theirs)), values[~same.reshape(-1)][:5]


def test_the_first_arithmetic_that_reproduces_the_model_is_kept(tmp_path, monkeypatch):
    """scorer_state tries numpy, then the C library's exp, then scipy: when numpy's and then the C library's
    logistic function are made to differ in the last bit, the kept scorer falls to the next one, and each kept
    scorer gives the model's probabilities."""
    from frpd_cli import _rowwise

    train, model = _logistic_model(tmp_path, "logistic-regression", 6)
    probability = model.favorable_probability(train)

    def off_by_one_ulp(original):
        def expit(X):
            original(X)
            X[...] = np.nextafter(X, 2.0)
        return expit

    real_numpy, real_libm = _rowwise._numpy_expit, _rowwise._libm_expit
    monkeypatch.setattr(_rowwise, "_numpy_expit", off_by_one_ulp(real_numpy))
    state = scorer_state(model, train, probability)
    assert state is not None and state["arithmetic"] in ("libm", "scipy")
    monkeypatch.setattr(_rowwise, "_libm_expit", off_by_one_ulp(real_libm))
    assert scorer_state(model, train, probability)["arithmetic"] == "scipy"
    monkeypatch.undo()
    fresh = _frame(np.random.default_rng(9), 500)
    kept = _model_of(json.loads(json.dumps(state)), model)
    assert kept.favorable_probability(fresh).tobytes() == model.favorable_probability(fresh).tobytes()


@pytest.mark.parametrize("seed", range(4))
def test_csr_rows_multiply_as_scipy_does(seed):
    from scipy import sparse

    from frpd_cli._rowwise import CSRRows

    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 60)), int(rng.integers(1, 30))
    dense = rng.normal(size=(n, m)) * (rng.random((n, m)) < 0.3)
    dense[: n // 4] = 0.0                                            # empty rows too
    oracle = sparse.csr_matrix(dense)
    rows = CSRRows((oracle.data, oracle.indices, oracle.indptr), oracle.shape)
    weights = rng.normal(size=(m, 7)) * 10.0 ** rng.integers(-3, 4, size=(m, 7))
    assert (rows @ weights).tobytes() == (oracle @ weights).tobytes()
    if n > 3:
        part = rows[1:n - 2]
        assert (part @ weights).tobytes() == (oracle[1:n - 2] @ weights).tobytes()
        assert (part.to_scipy() != oracle[1:n - 2]).nnz == 0


def _model_of(state, model):
    from frpd_cli.snapshot import _snapshot_model

    return _snapshot_model(state, model)


def test_rows_the_kept_scorer_does_not_handle_go_to_the_model_itself(sample_paths, pool_dir):
    artifact = read_artifact(pool_dir, kind=POOL_KIND, command_hint="")
    frame = pd.read_csv(sample_paths["data"])
    real = load_model(sample_paths["model"], favorable=1, feature_names=[c for c in frame.columns if c != "label"])
    kept = _kept(artifact, sample_paths, real, frame)
    assert kept is not None and kept.estimator._real is None
    rows = frame[list(real.feature_names)].iloc[:40].copy()
    rows.loc[3, "housing"] = "houseboat"            # a category the model never saw (its encoder ignores it)
    assert kept.favorable_probability(rows).tobytes() == real.favorable_probability(rows).tobytes()
    assert kept.estimator._real is not None          # loaded for that batch
    # a worker receives the stand-in without the loaded model, and scores the same
    copy = pickle.loads(pickle.dumps(kept))
    assert copy.estimator._real is None
    assert copy.favorable_probability(rows.iloc[:3]).tobytes() == real.favorable_probability(rows.iloc[:3]).tobytes()


def _kept(artifact, paths, real, frame, **overrides):
    arguments = {"path": paths["model"], "favorable": real.favorable, "feature_names": real.feature_names,
                 "threshold": real.threshold, "features": frame, **overrides}
    return pool_model(artifact, **arguments)


def test_the_kept_scorer_checks_the_favourable_class_and_features_as_loading_does(sample_paths, pool_dir):
    artifact = read_artifact(pool_dir, kind=POOL_KIND, command_hint="")
    frame = pd.read_csv(sample_paths["data"])
    names = [c for c in frame.columns if c != "label"]
    real = load_model(sample_paths["model"], favorable=1, feature_names=names)
    for favorable, features in (("yes", names), (1, names[:-1])):
        with pytest.raises(ModelError) as loading:
            load_model(sample_paths["model"], favorable=favorable, feature_names=features)
        with pytest.raises(ModelError) as kept:
            _kept(artifact, sample_paths, real, frame, favorable=favorable, feature_names=features)
        assert str(kept.value) == str(loading.value)
    assert _kept(artifact, sample_paths, real, frame, favorable="1").favorable == 1


# ---------------------------------------------------------------------------- when it is not used


def _rewritten_pool(pool_dir, tmp_path, edit):
    """A copy of the pool whose scorer.json is ``edit``-ed, its manifest updated (a consistent pool)."""
    out = tmp_path / "pool"
    shutil.copytree(pool_dir, out)
    state = json.loads((out / SCORER_PAYLOAD).read_text(encoding="utf-8"))
    edit(state)
    data = (json.dumps(state, indent=2) + "\n").encode("utf-8")
    (out / SCORER_PAYLOAD).write_bytes(data)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    manifest["payloads"][SCORER_PAYLOAD] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return out


def _nudged(state):
    weights = state["final"]["layers"][0]["weights"]["values"]
    weights[0] *= 1.001                             # one weight, a thousandth off


def _older(state):
    state["versions"]["numpy"] = "1.0.0"


@pytest.mark.parametrize("edit", [_nudged, _older], ids=["a-weight-off", "other-numpy"])
def test_a_kept_scorer_that_does_not_reproduce_the_pool_or_is_of_other_versions_is_not_used(
        sample_paths, pool_dir, tmp_path, edit):
    changed = _rewritten_pool(pool_dir, tmp_path, edit)
    artifact = read_artifact(changed, kind=POOL_KIND, command_hint="")
    frame = pd.read_csv(sample_paths["data"])
    real = load_model(sample_paths["model"], favorable=1, feature_names=[c for c in frame.columns if c != "label"])
    assert _kept(artifact, sample_paths, real, frame) is None
    assert _kept(read_artifact(pool_dir, kind=POOL_KIND, command_hint=""), sample_paths, real, frame) is not None
    assert _plan(sample_paths, "--pool", str(changed)) == _plan(sample_paths)


def test_no_scorer_is_kept_for_a_model_saved_by_another_scikit_learn(sample_paths, tmp_path, monkeypatch):
    import frpd_cli.model as model_module

    monkeypatch.setattr(model_module, "_pickled_sklearn_version", lambda path: "0.1")
    frame = pd.read_csv(sample_paths["data"])
    real = load_model(sample_paths["model"], favorable=1, feature_names=[c for c in frame.columns if c != "label"])
    features = frame[list(real.feature_names)]
    assert scorer_state(real, features, real.favorable_probability(features)) is None
    monkeypatch.undo()
    assert scorer_state(real, features, real.favorable_probability(features)) is not None


# ---------------------------------------------------------------------------- the command line

_PROBE = """
import atexit, json, sys
sys.argv = ["frpd", *json.loads(sys.argv[1])]
atexit.register(lambda: print(json.dumps({"modules": sorted(sys.modules)}), file=sys.stderr))
import frpd_cli.cli.app as cli
cli.main()
"""


def test_a_plan_with_the_pool_imports_no_scikit_learn_and_writes_the_same_plans(sample_paths, pool_dir):
    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), "--format", "jsonl",
                             "-k", "2")]
    with_pool = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args + ["--pool", str(pool_dir)])],
                               capture_output=True, text=True, check=True)
    modules = json.loads(with_pool.stderr.strip().splitlines()[-1])["modules"]
    assert not any(m == "sklearn" or m.startswith("sklearn.") for m in modules)
    arithmetic = json.loads((pool_dir / SCORER_PAYLOAD).read_text(encoding="utf-8"))["arithmetic"]
    assert ("scipy" in modules) == (arithmetic == "scipy")   # numpy's arithmetic and libm's need no scipy at all
    without = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args)], capture_output=True, text=True,
                             check=True)
    assert "sklearn" in json.loads(without.stderr.strip().splitlines()[-1])["modules"]
    assert with_pool.stdout == without.stdout and with_pool.stdout.count("\n") > 10


def test_a_skops_model_gets_a_kept_scorer_too(sample_paths, tmp_path):
    sio = pytest.importorskip("skops.io")
    import sklearn

    from frpd_cli.snapshot import _saved_sklearn_versions

    model = tmp_path / "model.skops"
    sio.dump(joblib.load(sample_paths["model"]), model)
    assert _saved_sklearn_versions(model) == {sklearn.__version__}       # read from the file, not loaded
    paths = dict(sample_paths, model=model)
    pool = tmp_path / "pool"
    result = runner.invoke(app, ["build-pool", *_common(paths, "--out", str(pool))])
    assert result.exit_code == 0, result.stderr
    assert (pool / SCORER_PAYLOAD).is_file()
    args = ["plan", *_common(paths, "--applicants", str(paths["applicants"]), "--format", "jsonl", "-k", "2")]
    with_pool = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args + ["--pool", str(pool)])],
                               capture_output=True, text=True, check=True)
    modules = json.loads(with_pool.stderr.strip().splitlines()[-1])["modules"]
    assert not any(m == "sklearn" or m.startswith("sklearn.") or m.startswith("skops") for m in modules)
    assert with_pool.stdout == _plan(paths)
    # a row the kept scorer leaves to the model: the .skops file is loaded then, with its trusted types
    frame = pd.read_csv(sample_paths["data"])
    real = load_model(model, favorable=1, feature_names=[c for c in frame.columns if c != "label"])
    kept = _kept(read_artifact(pool, kind=POOL_KIND, command_hint=""), paths, real, frame)
    rows = frame[list(real.feature_names)].iloc[:5].copy()
    rows.loc[2, "job"] = "astronaut"
    assert kept.favorable_probability(rows).tobytes() == real.favorable_probability(rows).tobytes()
    assert kept.estimator._real is not None


def test_a_model_without_compiled_forms_keeps_no_scorer_and_plans_as_before(sample_paths, tmp_path):
    from sklearn.ensemble import RandomForestClassifier

    pipeline = joblib.load(sample_paths["model"])
    frame = pd.read_csv(sample_paths["data"])
    features = [c for c in frame.columns if c != "label"]
    pipeline.steps[-1] = ("forest", RandomForestClassifier(n_estimators=20, random_state=0))
    model = tmp_path / "forest.pkl"
    joblib.dump(pipeline.fit(frame[features], frame["label"]), model)
    paths = dict(sample_paths, model=model)
    pool = tmp_path / "pool"
    result = runner.invoke(app, ["build-pool", *_common(paths, "--out", str(pool))])
    assert result.exit_code == 0, result.stderr
    assert not (pool / SCORER_PAYLOAD).exists() and "scorer" not in result.stderr
    assert _plan(paths, "--pool", str(pool)) == _plan(paths)


def test_a_model_file_changed_during_the_run_is_not_loaded_for_the_rows_left_to_it(sample_paths, pool_dir, tmp_path):
    model = tmp_path / "model.pkl"
    shutil.copyfile(sample_paths["model"], model)
    paths = dict(sample_paths, model=model)
    pool = tmp_path / "pool"
    assert runner.invoke(app, ["build-pool", *_common(paths, "--out", str(pool))]).exit_code == 0
    frame = pd.read_csv(sample_paths["data"])
    real = load_model(model, favorable=1, feature_names=[c for c in frame.columns if c != "label"])
    kept = _kept(read_artifact(pool, kind=POOL_KIND, command_hint=""), paths, real, frame)
    rows = frame[list(real.feature_names)].iloc[:4].copy()
    rows.loc[1, "housing"] = "houseboat"            # left to the model itself
    joblib.dump(joblib.load(model), model, compress=3)          # the same model, other bytes
    with pytest.raises(ModelError, match="changed while frpd was running"):
        kept.favorable_probability(rows)


def test_a_scorer_of_other_library_versions_gets_a_hint_and_the_same_plans(sample_paths, pool_dir, tmp_path):
    changed = _rewritten_pool(pool_dir, tmp_path, _older)
    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), "--format", "jsonl")]
    hinted = runner.invoke(app, args + ["--pool", str(changed)])
    assert hinted.exit_code == 0, hinted.stderr
    assert "keeps the model's scorer for other library versions (numpy 1.0.0 (installed: " in hinted.stderr
    same = runner.invoke(app, args + ["--pool", str(pool_dir)])
    assert "Hint" not in same.stderr and "library versions" not in same.stderr
    assert hinted.stdout == same.stdout == runner.invoke(app, args).stdout
