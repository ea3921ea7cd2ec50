"""Gradient-boosted trees (LightGBM, XGBoost scikit-learn classifiers) in a Pipeline, as pickles and .skops files."""

from __future__ import annotations

import csv
import io
import json

import joblib
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.exceptions import ModelError
from frpd_cli.model import load_model

runner = CliRunner()
FEATURES = ["age", "personal_status", "duration", "credit_amount", "housing", "job", "savings"]
CATEGORICAL = ["personal_status", "housing", "job", "savings"]

#: The types a .skops file of each pipeline holds beyond frpd's built-in list: what the user passes with --trust-type.
TRUST = {
    "lightgbm": ["lightgbm.sklearn.LGBMClassifier", "lightgbm.basic.Booster", "collections.OrderedDict"],
    "xgboost": ["xgboost.sklearn.XGBClassifier", "xgboost.core.Booster"],
}


def _classifier(library: str):
    if library == "lightgbm":
        lightgbm = pytest.importorskip("lightgbm", reason="lightgbm is not installed (dev extra)")
        return lightgbm.LGBMClassifier(n_estimators=40, num_leaves=15, n_jobs=1, random_state=0, verbose=-1)
    xgboost = pytest.importorskip("xgboost", reason="xgboost is not installed (dev extra: xgboost-cpu)")
    return xgboost.XGBClassifier(n_estimators=40, max_depth=4, n_jobs=1, random_state=0)


@pytest.fixture(scope="module", params=["lightgbm", "xgboost"])
def boosted(request, sample_paths, tmp_path_factory):
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    library = request.param
    classifier = _classifier(library)
    credit = pd.read_csv(sample_paths["data"])
    pipeline = Pipeline([("pre", ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), CATEGORICAL)],
                                                   remainder="passthrough")),
                         ("gbt", classifier)]).fit(credit[FEATURES], credit["label"])
    folder = tmp_path_factory.mktemp(library)
    joblib.dump(pipeline, folder / "model.pkl")
    skops_path = None
    try:
        import skops.io as sio
    except ImportError:
        pass
    else:
        skops_path = folder / "model.skops"
        sio.dump(pipeline, skops_path)
    return {"library": library, "pipeline": pipeline, "pkl": folder / "model.pkl", "skops": skops_path,
            "frame": credit[FEATURES]}


def _plan(paths, model, *extra):
    return runner.invoke(app, ["plan", str(paths["data"]), "--model", str(model), "--schema", str(paths["schema"]),
                               "--applicants", str(paths["applicants"]), "--format", "csv", *extra])


def test_pickled_boosted_pipeline_plans_valid_recourses(sample_paths, boosted):
    result = _plan(sample_paths, boosted["pkl"])
    assert result.exit_code == 0, result.stderr
    rows = [r for r in csv.DictReader(io.StringIO(result.stdout)) if r["status"] == "ok"]
    assert rows, "the sample applicants should get plans"
    recourses = pd.DataFrame([{c: r[c] for c in FEATURES} for r in rows])
    for column in ("age", "duration"):
        recourses[column] = recourses[column].astype(np.int64)
    recourses["credit_amount"] = recourses["credit_amount"].astype(float)
    # oracle: the pipeline itself, called directly, accepts every recourse with the reported probability
    proba = boosted["pipeline"].predict_proba(recourses)[:, list(boosted["pipeline"].classes_).index(1)]
    assert np.all(proba >= 0.5)
    assert np.allclose(proba, [float(r["probability"]) for r in rows], atol=1e-6)


def test_boosted_scores_do_not_depend_on_the_batch(boosted):
    model = load_model(boosted["pkl"], favorable=1, feature_names=FEATURES)
    frame = boosted["frame"]
    whole = model.favorable_probability(frame)
    order = np.random.default_rng(1).permutation(len(frame))
    assert np.array_equal(model.favorable_probability(frame.iloc[order]), whole[order])
    assert model.favorable_probability(frame.iloc[[5]])[0] == whole[5]


def test_skops_refuses_boosted_types_until_trusted(sample_paths, boosted):
    if boosted["skops"] is None:
        pytest.skip("skops is not installed (extra 'safe')")
    with pytest.raises(ModelError, match="types frpd does not trust") as refused:
        load_model(boosted["skops"], favorable=1, feature_names=FEATURES)
    for name in TRUST[boosted["library"]]:
        assert name in str(refused.value)
    trusted = load_model(boosted["skops"], favorable=1, feature_names=FEATURES, trusted_types=TRUST[boosted["library"]])
    pickled = load_model(boosted["pkl"], favorable=1, feature_names=FEATURES)
    frame = boosted["frame"]
    assert np.array_equal(trusted.favorable_probability(frame), pickled.favorable_probability(frame))
    # and at the command line, with --trust-type: the same plans as the pickle
    flags = [arg for name in TRUST[boosted["library"]] for arg in ("--trust-type", name)]
    from_skops = _plan(sample_paths, boosted["skops"], *flags)
    assert from_skops.exit_code == 0, from_skops.stderr
    assert from_skops.stdout == _plan(sample_paths, boosted["pkl"]).stdout


def _category_frame(frame):
    typed = frame.copy()
    for column in CATEGORICAL:
        typed[column] = typed[column].astype("category")
    return typed


def _lightgbm_on_categories(sample_paths, tmp_path, **fit):
    lightgbm = pytest.importorskip("lightgbm", reason="lightgbm is not installed (dev extra)")
    credit = pd.read_csv(sample_paths["data"])
    typed = _category_frame(credit[FEATURES])
    classifier = lightgbm.LGBMClassifier(n_estimators=40, num_leaves=15, n_jobs=1, random_state=0, verbose=-1)
    classifier.fit(typed, credit["label"], **fit)
    path = tmp_path / "lgbm-categories.pkl"
    joblib.dump(classifier, path)
    return classifier, path, credit[FEATURES]


def test_lightgbm_trained_on_category_columns_scores_text_columns_as_its_categories(sample_paths, tmp_path):
    classifier, path, raw = _lightgbm_on_categories(sample_paths, tmp_path)
    with pytest.raises(ValueError):
        classifier.predict_proba(raw)           # LightGBM itself refuses the text columns frpd reads
    model = load_model(path, favorable=1, feature_names=FEATURES)
    # oracle: the model's own probabilities on the frame typed as it was trained
    expected = classifier.predict_proba(_category_frame(raw))[:, list(classifier.classes_).index(1)]
    got = model.favorable_probability(raw)
    assert np.array_equal(got, expected)
    # a subset of rows in another order, whose columns hold fewer levels: the codes are still the model's
    subset = raw.iloc[[7, 3, 1999]].reset_index(drop=True)
    assert np.array_equal(model.favorable_probability(subset), expected[[7, 3, 1999]])
    assert np.array_equal(model.favorable_probability(_category_frame(raw)), expected)
    result = _plan(sample_paths, path)
    assert result.exit_code == 0, result.stderr
    rows = [r for r in csv.DictReader(io.StringIO(result.stdout)) if r["status"] == "ok"]
    assert rows
    recourses = pd.DataFrame([{c: r[c] for c in FEATURES} for r in rows]).astype(
        {"age": np.int64, "duration": np.int64, "credit_amount": float})
    proba = classifier.predict_proba(_category_frame(recourses))      # LightGBM maps them to its categories
    assert np.all(proba[:, 1] >= 0.5)
    assert np.allclose(proba[:, 1], [float(r["probability"]) for r in rows], atol=1e-6)


def test_lightgbm_whose_category_columns_cannot_be_told_apart_names_the_cause(sample_paths, tmp_path):
    # duration is an integer-coded categorical feature as well: four category columns, five categorical features
    _, path, raw = _lightgbm_on_categories(sample_paths, tmp_path, categorical_feature=[*CATEGORICAL, "duration"])
    model = load_model(path, favorable=1, feature_names=FEATURES)
    with pytest.raises(ModelError, match=r"trained on pandas 'category' columns.*OrdinalEncoder"):
        model.favorable_probability(raw.head(3))


def _lightgbm_categories_model(kind: str, frame: pd.DataFrame, y):
    """A LightGBM classifier fitted on pandas 'category' columns: bare, or as the last step of a Pipeline whose
    ColumnTransformer passes every column through (renaming it 'keep__<column>') with pandas output."""
    lightgbm = pytest.importorskip("lightgbm", reason="lightgbm is not installed (dev extra)")
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline

    classifier = lightgbm.LGBMClassifier(n_estimators=40, num_leaves=15, n_jobs=1, random_state=0, verbose=-1)
    if kind == "bare":
        return classifier.fit(_category_frame(frame), y)
    keep = ColumnTransformer([("keep", "passthrough", FEATURES)]).set_output(transform="pandas")
    return Pipeline([("keep", keep), ("gbt", classifier)]).fit(_category_frame(frame), y)


def _recourse_frame(rows) -> pd.DataFrame:
    return pd.DataFrame([{c: r[c] for c in FEATURES} for r in rows]).astype(
        {"age": np.int64, "duration": np.int64, "credit_amount": float})


def _accepted(estimator, recourses: pd.DataFrame) -> np.ndarray:
    """The estimator's own favourable probabilities of rows typed as it was trained (category columns)."""
    return estimator.predict_proba(_category_frame(recourses))[:, list(estimator.classes_).index(1)]


def test_lightgbm_pipeline_on_category_columns_plans_recourses_it_accepts(sample_paths, tmp_path):
    credit = pd.read_csv(sample_paths["data"])
    pipeline = _lightgbm_categories_model("pipeline", credit[FEATURES], credit["label"])
    path = tmp_path / "pipeline.pkl"
    joblib.dump(pipeline, path)
    raw = credit[FEATURES]
    with pytest.raises(ValueError):
        pipeline.predict_proba(raw)          # the text columns frpd reads reach the classifier as text
    model = load_model(path, favorable=1, feature_names=FEATURES)
    expected = _accepted(pipeline, raw)
    assert np.array_equal(model.favorable_probability(raw), expected)
    assert np.array_equal(model.favorable_probability(raw.iloc[[9, 4, 1500]].reset_index(drop=True)),
                          expected[[9, 4, 1500]])
    result = _plan(sample_paths, path)
    assert result.exit_code == 0, result.stderr
    rows = [r for r in csv.DictReader(io.StringIO(result.stdout)) if r["status"] == "ok"]
    assert rows
    proba = _accepted(joblib.load(path), _recourse_frame(rows))     # the model loaded on its own
    assert np.all(proba >= 0.5)
    assert np.allclose(proba, [float(r["probability"]) for r in rows], atol=1e-6)


@pytest.mark.parametrize("kind", ["bare", "pipeline"])
def test_robust_refits_of_lightgbm_on_category_columns_accept_every_recourse(sample_paths, tmp_path, kind):
    credit = pd.read_csv(sample_paths["data"])
    estimator = _lightgbm_categories_model(kind, credit[FEATURES], credit["label"])
    path = tmp_path / "model.pkl"
    joblib.dump(estimator, path)
    out = tmp_path / "refits"
    built = runner.invoke(app, ["build-refits", str(sample_paths["data"]), "--model", str(path), "--schema",
                                str(sample_paths["schema"]), "--robust", "2", "--out", str(out)])
    assert built.exit_code == 0, built.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    refits = []
    for name in sorted(p for p in manifest["payloads"] if p.startswith("refit-")):
        if name.endswith(".skops"):
            import skops.io as sio

            refits.append(sio.load(out / name, trusted=sio.get_untrusted_types(file=out / name)))
        else:
            refits.append(joblib.load(out / name))
    assert len(refits) == 2
    for refit in refits:        # each refit's classifier was fitted on the original's categories
        final = refit if kind == "bare" else refit.steps[-1][1]
        assert final.booster_.pandas_categorical == (estimator if kind == "bare" else estimator[-1]
                                                     ).booster_.pandas_categorical
    result = _plan(sample_paths, path, "--refits", str(out), "--robust", "2")
    assert result.exit_code == 0, result.stderr
    rows = [r for r in csv.DictReader(io.StringIO(result.stdout)) if r["status"] == "ok"]
    assert rows
    recourses = _recourse_frame(rows)
    assert np.all(_accepted(joblib.load(path), recourses) >= 0.5)
    for refit in refits:
        assert np.all(_accepted(refit, recourses) >= 0.5)
    # refitted in the run itself: the same plans as with the artifact
    again = _plan(sample_paths, path, "--robust", "2")
    assert again.exit_code == 0, again.stderr
    assert again.stdout == result.stdout


def test_lightgbm_pipeline_whose_steps_hide_the_columns_names_the_cause(sample_paths, tmp_path):
    credit = pd.read_csv(sample_paths["data"])
    pipeline = _lightgbm_categories_model("pipeline", credit[FEATURES], credit["label"])
    pipeline[0].set_output(transform="default")     # the step now gives the classifier an array
    path = tmp_path / "arrays.pkl"
    joblib.dump(pipeline, path)
    model = load_model(path, favorable=1, feature_names=FEATURES)
    with pytest.raises(ModelError, match=r"LightGBM step of the Pipeline .* trained on pandas 'category' columns"
                                         r".*not a DataFrame.*set_output"):
        model.favorable_probability(credit[FEATURES].head(3))
