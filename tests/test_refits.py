"""--robust N: refits of the model (frpd_cli.refits), their artifact (build-refits, --refits) and the plans.

Oracle: the refits are read back from the artifact with skops/joblib and asked directly with scikit-learn.
"""

from __future__ import annotations

import json
import math
import os
import sys
from types import SimpleNamespace

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.exceptions import ModelError
from frpd_cli.refits import check_refittable, refit_seed

runner = CliRunner()
FEATURES = ["x1", "x2", "x3"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("robust")
    rng = np.random.default_rng(11)
    X = pd.DataFrame({c: rng.uniform(0, 10, 500).round(2) for c in FEATURES})
    # labels: the next release learns x1 + x2 >= 10 with noise; today's model only looks at x1
    y = ((X["x1"] + X["x2"] + rng.normal(0, 1.5, 500)) >= 10).astype(int)
    model = LogisticRegression(C=10.0, max_iter=2000).fit(X, (X["x1"] >= 5).astype(int))
    X.assign(y=y).to_csv(folder / "train.csv", index=False)
    joblib.dump(model, folder / "model.pkl")
    pd.DataFrame({"x1": [1.0, 2.0, 3.0, 0.5, 4.0], "x2": [1.0, 6.0, 2.0, 3.0, 0.5],
                  "x3": [5.0, 1.0, 9.0, 5.0, 2.0]}).to_csv(folder / "applicants.csv", index=False)
    return SimpleNamespace(folder=folder, data=folder / "train.csv", model=folder / "model.pkl",
                           applicants=folder / "applicants.csv", estimator=model)


def _run(args, code=0):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def _plan(s, *extra):
    # no --max-move bound: the refits' favourable region is far from some applicants by construction
    return _run(["plan", s.data, "--model", s.model, "--applicants", s.applicants, "--target", "y",
                 "--favorable", "1", "--format", "jsonl", "-k", "3", "--max-move", "none", *extra]).stdout


def _refits(s, out, *extra):
    _run(["build-refits", s.data, "--model", s.model, "--target", "y", "--robust", "4", "--out", out, *extra])
    manifest = json.loads((out / "manifest.json").read_text())
    refits = []
    for name in sorted(manifest["payloads"]):
        if name.endswith(".skops"):
            import skops.io as sio

            refits.append(sio.load(out / name, trusted=sio.get_untrusted_types(file=out / name)))
        else:
            refits.append(joblib.load(out / name))
    return manifest, refits


def test_refits_artifact_is_reused_and_plans_need_the_refits(setup, tmp_path):
    manifest, refits = _refits(setup, tmp_path / "refits")
    assert manifest["params"]["n"] == 4 and manifest["params"]["seed"] == 0 and len(refits) == 4
    assert {"data", "model"} <= set(manifest["inputs"])
    fitted_now = _plan(setup, "--robust", "4")
    reused = _plan(setup, "--refits", tmp_path / "refits")
    assert fitted_now == reused                        # the artifact is the refits a run would fit
    rows = [r for line in reused.splitlines() for r in json.loads(line)["recourses"]]
    assert rows
    frame = pd.DataFrame([r["features"] for r in rows], columns=FEATURES)
    assert (setup.estimator.predict_proba(frame)[:, 1] >= 0.5).all()
    for refit in refits:
        assert (refit.predict_proba(frame)[:, 1] >= 0.5).all()
    for r, p in zip(rows, refits[0].predict_proba(frame)[:, 1]):
        assert r["probabilities"]["refit-1"] == pytest.approx(p, abs=1e-6)
    # the plain plans are not all accepted by the refits: --robust is what moves them
    plain = [r["features"] for line in _plan(setup).splitlines() for r in json.loads(line)["recourses"]]
    plain = pd.DataFrame(plain, columns=FEATURES)
    assert min((refit.predict_proba(plain)[:, 1] >= 0.5).mean() for refit in refits) < 1.0


def test_robust_level_needs_a_share_of_the_refits(setup, tmp_path):
    _, refits = _refits(setup, tmp_path / "refits")
    out = _plan(setup, "--refits", tmp_path / "refits", "--robust-level", "0.7")
    rows = [r["features"] for line in out.splitlines() for r in json.loads(line)["recourses"]]
    frame = pd.DataFrame(rows, columns=FEATURES)
    votes = np.sum([refit.predict_proba(frame)[:, 1] >= 0.5 for refit in refits], axis=0)
    assert len(rows) and (votes >= math.ceil(0.7 * 4)).all()


def test_refits_refused_when_seed_data_or_model_differ(setup, tmp_path):
    _refits(setup, tmp_path / "refits")
    stale = _run(["plan", setup.data, "--model", setup.model, "--applicants", setup.applicants, "--target", "y",
                  "--refits", tmp_path / "refits", "--seed", "1"], code=1)
    assert "seed" in stale.stderr and "build-refits" in stale.stderr
    other_data = tmp_path / "other.csv"
    frame = pd.read_csv(setup.data)
    frame.loc[0, "x3"] = 9.99
    frame.to_csv(other_data, index=False)
    stale = _run(["plan", other_data, "--model", setup.model, "--applicants", setup.applicants, "--target", "y",
                  "--refits", tmp_path / "refits"], code=1)
    assert "stale" in stale.stderr and "'data'" in stale.stderr
    other_model = tmp_path / "other.pkl"
    joblib.dump(LogisticRegression(C=1.0).fit(frame[FEATURES], (frame["x1"] >= 5).astype(int)), other_model)
    stale = _run(["plan", setup.data, "--model", other_model, "--applicants", setup.applicants, "--target", "y",
                  "--refits", tmp_path / "refits"], code=1)
    assert "stale" in stale.stderr and "'model'" in stale.stderr
    wrong_n = _run(["plan", setup.data, "--model", setup.model, "--applicants", setup.applicants, "--target", "y",
                    "--refits", tmp_path / "refits", "--robust", "8"], code=1)
    assert "n 4" in wrong_n.stderr and "--robust 8" in wrong_n.stderr


def test_refits_do_not_depend_on_jobs(setup, tmp_path):
    _, one = _refits(setup, tmp_path / "one")
    _, two = _refits(setup, tmp_path / "two", "--jobs", "2")
    grid = pd.DataFrame(np.random.default_rng(0).uniform(0, 10, (200, 3)), columns=FEATURES)
    for a, b in zip(one, two):
        assert np.array_equal(a.predict_proba(grid), b.predict_proba(grid))
    assert not np.array_equal(one[0].predict_proba(grid), one[1].predict_proba(grid))   # resamples differ


def test_models_that_cannot_be_refitted_point_to_also_valid_for():
    with pytest.raises(ModelError, match="--also-valid-for"):
        check_refittable(SimpleNamespace(estimator=object(), path="m.pkl"))
    with pytest.raises(ModelError, match="ONNX.*--also-valid-for"):
        check_refittable(SimpleNamespace(estimator=LogisticRegression(), path="m.onnx"))


def test_refit_seeds_are_distinct_and_stable():
    seeds = [refit_seed(0, i) for i in range(16)]
    assert len(set(seeds)) == 16 and seeds == [refit_seed(0, i) for i in range(16)]
    assert refit_seed(1, 0) != refit_seed(0, 0)


def test_first_refits_of_a_larger_artifact_are_the_smaller_run(setup, tmp_path):
    _refits(setup, tmp_path / "refits")
    assert _plan(setup, "--refits", tmp_path / "refits", "--robust", "2") == _plan(setup, "--robust", "2")


def test_robust_plans_are_the_same_bytes_for_any_jobs_and_chunk_size(setup, tmp_path):
    rng = np.random.default_rng(5)
    many = tmp_path / "many.csv"
    pd.DataFrame({c: rng.uniform(0, 5, 240).round(2) for c in FEATURES}).to_csv(many, index=False)
    base = ["plan", setup.data, "--model", setup.model, "--applicants", many, "--target", "y", "--format", "csv",
            "--robust", "3", "--robust-level", "0.6"]
    one = _run([*base, "--jobs", "1"]).stdout
    assert one.count("\n") > 240 and "probability_refit-3" in one.splitlines()[0]
    assert _run([*base, "--jobs", "2"]).stdout == one
    assert _run([*base, "--chunk-size", "7"]).stdout == one


def test_robust_spread_holds_every_recourse_against_widened_refits(setup, tmp_path):
    _, refits = _refits(setup, tmp_path / "refits")
    rows = [r for line in _plan(setup, "--refits", tmp_path / "refits", "--robust-spread", "3").splitlines()
            for r in json.loads(line)["recourses"]]
    assert rows
    frame = pd.DataFrame([r["features"] for r in rows], columns=FEATURES)
    p0 = setup.estimator.predict_proba(frame)[:, 1]
    for refit in refits:                     # oracle: each refit's deviation from the model, tripled
        assert (p0 + 3 * (refit.predict_proba(frame)[:, 1] - p0) >= 0.5 - 1e-9).all()
    # with the refits as they are (spread 1), some recourse would not hold against the tripled deviations
    once = [r["features"] for line in _plan(setup, "--refits", tmp_path / "refits", "--robust-spread", "1")
            .splitlines() for r in json.loads(line)["recourses"]]
    once = pd.DataFrame(once, columns=FEATURES)
    q0 = setup.estimator.predict_proba(once)[:, 1]
    assert min((q0 + 3 * (refit.predict_proba(once)[:, 1] - q0) >= 0.5).mean() for refit in refits) < 1.0


def test_robust_spread_out_of_range_is_a_usage_error(setup):
    bad = _run(["plan", setup.data, "--model", setup.model, "--applicants", setup.applicants, "--target", "y",
                "--robust", "2", "--robust-spread", "0.5"], code=2)
    assert "--robust-spread" in bad.stderr


def test_subsample_refits_draw_half_the_rows_and_the_artifact_keeps_the_resample(setup, tmp_path):
    from frpd_cli.refits import _resample

    rows = _resample(np.random.default_rng(0), pd.read_csv(setup.data), [], "subsample")
    assert len(rows) == 250 and len(np.unique(rows)) == 250 and rows.max() < 500
    manifest, refits = _refits(setup, tmp_path / "half", "--resample", "subsample")
    assert manifest["params"]["resample"] == "subsample" and len(refits) == 4
    # the same refits as a run fitting them itself, and refused for a run asking for the default (mixed) refits
    assert _plan(setup, "--refits", tmp_path / "half", "--resample", "subsample") == \
        _plan(setup, "--robust", "4", "--resample", "subsample")
    stale = _run(["plan", setup.data, "--model", setup.model, "--applicants", setup.applicants, "--target", "y",
                  "--refits", tmp_path / "half"], code=1)
    assert "resample" in stale.stderr and "'subsample'" in stale.stderr and "build-refits" in stale.stderr


def test_robust_with_a_pool_is_the_same_bytes_as_without(setup, tmp_path):
    _run(["build-pool", setup.data, "--model", setup.model, "--target", "y", "--out", tmp_path / "pool"])
    without = _plan(setup, "--robust", "3")
    assert _plan(setup, "--robust", "3", "--pool", tmp_path / "pool") == without
    assert _plan(setup, "--pool", tmp_path / "pool") != without             # the pool alone is the model's verdict


def test_robust_graph_plans_end_where_every_refit_accepts(setup, tmp_path):
    _run(["build-graph", setup.data, "--model", setup.model, "--target", "y", "--out", tmp_path / "graph",
          "--neighbors", "12"])
    manifest, refits = _refits(setup, tmp_path / "refits")
    text = _plan(setup, "--graph", tmp_path / "graph", "--refits", tmp_path / "refits")
    rows = [r["features"] for line in text.splitlines() for r in json.loads(line)["recourses"]]
    assert rows
    frame = pd.DataFrame(rows, columns=FEATURES)
    assert (setup.estimator.predict_proba(frame)[:, 1] >= 0.5).all()
    for refit in refits:
        assert (refit.predict_proba(frame)[:, 1] >= 0.5).all()
    plain = [r["features"] for line in _plan(setup, "--graph", tmp_path / "graph").splitlines()
             for r in json.loads(line)["recourses"]]
    plain = pd.DataFrame(plain, columns=FEATURES)
    assert min((refit.predict_proba(plain)[:, 1] >= 0.5).mean() for refit in refits) < 1.0
    # the same bytes for any --jobs
    assert _plan(setup, "--graph", tmp_path / "graph", "--refits", tmp_path / "refits", "--jobs", "2") == text


def test_subsample_and_spread_plans_are_the_same_bytes_for_any_jobs_and_chunk_size(setup, tmp_path):
    rng = np.random.default_rng(6)
    many = tmp_path / "many.csv"
    pd.DataFrame({c: rng.uniform(0, 5, 120).round(2) for c in FEATURES}).to_csv(many, index=False)
    base = ["plan", setup.data, "--model", setup.model, "--applicants", many, "--target", "y", "--format", "csv",
            "--robust", "3", "--resample", "subsample", "--robust-spread", "1.5"]
    one = _run([*base, "--jobs", "1"]).stdout
    assert one.count("\n") > 120
    assert _run([*base, "--jobs", "2"]).stdout == one
    assert _run([*base, "--chunk-size", "7"]).stdout == one
    assert _run([*base[:-2], "--jobs", "2"]).stdout != one          # the spread changes plans


def test_halves_refits_come_in_pairs_fitted_on_complementary_halves(setup, tmp_path):
    from frpd_cli.refits import refit_rows

    frame = pd.read_csv(setup.data)
    X, y = frame[FEATURES], frame["y"].to_numpy()
    for j in (0, 2, 4):
        first, second = refit_rows(X, y, [], 0, j, "halves"), refit_rows(X, y, [], 0, j + 1, "halves")
        # oracle: two disjoint halves that together are every row, each row once
        assert len(first) == len(second) == 250
        assert np.array_equal(np.sort(np.concatenate([first, second])), np.arange(500))
        # the first of a pair is the subsample refit of the same number
        assert np.array_equal(first, refit_rows(X, y, [], 0, j, "subsample"))
    assert not np.array_equal(refit_rows(X, y, [], 0, 0, "halves"), refit_rows(X, y, [], 0, 2, "halves"))
    manifest, refits = _refits(setup, tmp_path / "halves", "--resample", "halves")
    assert manifest["params"]["resample"] == "halves"
    # each refit is the estimator fitted on those rows (and the refit's own random state): refit it here
    grid = pd.DataFrame(np.random.default_rng(1).uniform(0, 10, (100, 3)), columns=FEATURES)
    for i in (0, 1):
        rows = refit_rows(X, y, [], 0, i, "halves")
        again = LogisticRegression(C=10.0, max_iter=2000).fit(X.iloc[rows].reset_index(drop=True), y[rows])
        assert np.allclose(again.predict_proba(grid), refits[i].predict_proba(grid), atol=1e-6)


def test_refits_by_default_alternate_bootstrap_and_subsample_refits(setup, tmp_path):
    manifest, mixed = _refits(setup, tmp_path / "mixed")
    assert manifest["params"]["resample"] == "mixed"
    _, boot = _refits(setup, tmp_path / "boot", "--resample", "bootstrap")
    _, half = _refits(setup, tmp_path / "half", "--resample", "subsample")
    grid = pd.DataFrame(np.random.default_rng(2).uniform(0, 10, (100, 3)), columns=FEATURES)
    for i, refit in enumerate(mixed):
        same = (boot if i % 2 == 0 else half)[i]
        assert np.array_equal(refit.predict_proba(grid), same.predict_proba(grid))
    # --robust without --resample fits these refits; --resample mixed names them
    assert _plan(setup, "--robust", "4") == _plan(setup, "--refits", tmp_path / "mixed") == \
        _plan(setup, "--refits", tmp_path / "mixed", "--resample", "mixed")
    assert _plan(setup, "--robust", "4") != _plan(setup, "--refits", tmp_path / "boot", "--resample", "bootstrap")


def _sgd_pipeline(setup):
    """(frame, pipeline, Model, schema): an SGD classifier in a pipeline, fitted on the setup's data."""
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from frpd_cli.model import Model
    from frpd_cli.schema import SchemaSpec, infer_schema

    frame = pd.read_csv(setup.data)
    pipe = Pipeline([("scale", StandardScaler()), ("clf", SGDClassifier(loss="log_loss", random_state=0))])
    pipe.fit(frame[FEATURES], frame["y"])
    model = Model(estimator=pipe, path="pipe.pkl", favorable=1, threshold=0.5, feature_names=FEATURES, uses_proba=True)
    return frame, pipe, model, infer_schema(frame, SchemaSpec(target="y", favorable="1"))


def test_every_refit_has_its_own_random_state_down_a_pipeline(setup):
    from frpd_cli.refits import fit_refits

    frame, pipe, model, schema = _sgd_pipeline(setup)
    refits = fit_refits(model, frame, schema, n=3, seed=5)
    # the nested estimator's initialisation varies with the refit (an MLP's weights, an SGD's shuffling)
    assert [r.named_steps["clf"].random_state for r in refits] == [refit_seed(5, i) % (2**31 - 1) for i in range(3)]
    assert pipe.named_steps["clf"].random_state == 0              # the user's model is left alone


def test_parallel_refits_are_the_serial_ones_and_leave_no_worker_behind(setup):
    import multiprocessing
    import pickle

    from frpd_cli.refits import fit_refits

    frame, _, model, schema = _sgd_pipeline(setup)
    before = set(multiprocessing.active_children())
    told = {1: [], 2: []}
    parallel = fit_refits(model, frame, schema, n=3, seed=5, resample="mixed", n_jobs=2,
                          progress=lambda done, n: told[2].append((done, n)))
    # the workers are stopped when the refits are in: none is left for the exit to wait on
    assert set(multiprocessing.active_children()) <= before
    serial = fit_refits(model, frame, schema, n=3, seed=5, resample="mixed", n_jobs=1,
                        progress=lambda done, n: told[1].append((done, n)))
    assert told[1] == told[2] == [(1, 3), (2, 3), (3, 3)]      # progress after each refit, in order
    rows = frame[FEATURES]
    for a, b in zip(parallel, serial):
        assert np.array_equal(a.predict_proba(rows), b.predict_proba(rows))
    assert [pickle.dumps(r.named_steps["clf"].coef_) for r in parallel] == \
        [pickle.dumps(r.named_steps["clf"].coef_) for r in serial]


def test_a_target_without_the_favourable_class_is_refused_before_refitting(setup, tmp_path):
    # the target column writes the labels as words, the model's classes are 0 and 1: a refit would learn the
    # classes "no" and "yes" and have no class 1 to score (it ended in an internal error)
    frame = pd.read_csv(setup.data)
    frame["y"] = np.where(frame["y"] == 1, "yes", "no")
    frame.to_csv(tmp_path / "words.csv", index=False)
    args = ["plan", tmp_path / "words.csv", "--model", setup.model, "--applicants", setup.applicants, "--target",
            "y", "--favorable", "1", "--format", "jsonl", "--max-move", "none"]
    refused = _run([*args, "--robust", "2"], code=1)
    assert "never holds the favourable class 1 (its values: no, yes)" in refused.stderr
    assert "unexpected" not in refused.stderr
    _run(["build-refits", tmp_path / "words.csv", "--model", setup.model, "--target", "y", "--robust", "2",
          "--out", tmp_path / "refits"], code=1)
    assert not (tmp_path / "refits").exists()
    # a plain plan needs no labels: it runs, and says that the labels hold no favourable example
    plain = _run(args)
    assert "no row of" in plain.stderr and "favourable class 1 in its target column 'y'" in plain.stderr
    assert plain.stdout == _run(["plan", setup.data, "--model", setup.model, "--applicants", setup.applicants,
                                 "--target", "y", "--favorable", "1", "--format", "jsonl", "--max-move",
                                 "none"]).stdout
    assert "favourable class" not in _run(["plan", setup.data, "--model", setup.model, "--applicants",
                                           setup.applicants, "--target", "y", "--format", "jsonl", "--max-move",
                                           "none"]).stderr


def test_a_model_without_the_favourable_class_fails_with_a_model_error(setup):
    from frpd_cli.model import Model

    model = Model(estimator=setup.estimator, path="m.pkl", favorable="yes", feature_names=FEATURES, threshold=0.5,
                  uses_proba=True)
    with pytest.raises(ModelError, match=r"favourable class 'yes' is not one of the classes of the model 'm.pkl' "
                                         r"\(0, 1\)"):
        model.favorable_probability(pd.DataFrame({c: [1.0] for c in FEATURES}))


@pytest.fixture(scope="module")
def hgb_setup(tmp_path_factory):
    """A pickled pipeline whose fitted HistGradientBoostingClassifier (native categories) holds types outside
    skops' and frpd's trusted lists (functools.partial, sklearn.utils.validation.check_array)."""
    pytest.importorskip("skops", reason="refits are stored with skops only when skops is installed")
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OrdinalEncoder

    folder = tmp_path_factory.mktemp("robust_hgb")
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"x1": rng.uniform(0, 10, 300).round(2), "grade": rng.choice(["a", "b", "c"], 300)})
    y = ((X["x1"] + (X["grade"] == "c") * 3 + rng.normal(0, 1, 300)) >= 6).astype(int)
    pre = ColumnTransformer([("c", OrdinalEncoder(), ["grade"])], remainder="passthrough")
    pipe = Pipeline([("pre", pre), ("clf", HistGradientBoostingClassifier(categorical_features=[0], max_iter=15,
                                                                          random_state=0))]).fit(X, y)
    X.assign(y=y).to_csv(folder / "train.csv", index=False)
    joblib.dump(pipe, folder / "model.pkl")
    pd.DataFrame({"x1": [1.0, 2.5], "grade": ["a", "b"]}).to_csv(folder / "applicants.csv", index=False)
    return SimpleNamespace(folder=folder, data=folder / "train.csv", model=folder / "model.pkl",
                           applicants=folder / "applicants.csv")


def _hgb_plan(s, refits, *extra, code=0):
    return _run(["plan", s.data, "--model", s.model, "--applicants", s.applicants, "--target", "y",
                 "--favorable", "1", "--format", "jsonl", "-k", "2", "--refits", refits, *extra], code=code)


def test_refits_frpd_wrote_load_without_trusting_their_types_by_hand(hgb_setup, tmp_path):
    from frpd_cli.model import DEFAULT_TRUSTED_TYPES

    out = tmp_path / "refits"
    _run(["build-refits", hgb_setup.data, "--model", hgb_setup.model, "--target", "y", "--robust", "2",
          "--out", out])
    manifest = json.loads((out / "manifest.json").read_text())
    recorded = manifest["params"]["skops_types"]
    assert sorted(recorded) == ["refit-001.skops", "refit-002.skops"]
    beyond = set(recorded["refit-001.skops"]) - DEFAULT_TRUSTED_TYPES
    assert {"functools.partial", "sklearn.utils.validation.check_array"} <= beyond   # what the refits need
    plans = _hgb_plan(hgb_setup, out).stdout
    assert len(plans.splitlines()) == 2
    assert plans == _run(["plan", hgb_setup.data, "--model", hgb_setup.model, "--applicants", hgb_setup.applicants,
                          "--target", "y", "--favorable", "1", "--format", "jsonl", "-k", "2",
                          "--robust", "2"]).stdout                  # the refits a run would fit


def test_refits_without_recorded_types_need_trust_type_and_tampered_refits_are_refused(hgb_setup, tmp_path):
    out = tmp_path / "refits"
    _run(["build-refits", hgb_setup.data, "--model", hgb_setup.model, "--target", "y", "--robust", "2",
          "--out", out])
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    # an artifact that records no types (as frpd wrote them before): refused, --trust-type lets it in
    bare = json.loads(json.dumps(manifest))
    del bare["params"]["skops_types"]
    manifest_path.write_text(json.dumps(bare))
    refused = _hgb_plan(hgb_setup, out, code=1)
    assert "functools.partial" in refused.stderr and "--trust-type" in refused.stderr
    _hgb_plan(hgb_setup, out, "--trust-type", "functools.partial", "--trust-type",
              "sklearn.utils.validation.check_array")
    # a refit file changed after frpd wrote it: refused, naming it, whatever types the manifest records
    manifest_path.write_text(json.dumps(manifest))
    refit = out / "refit-002.skops"
    tampered = bytearray(refit.read_bytes())
    tampered[-30] ^= 0xFF
    refit.write_bytes(bytes(tampered))
    refused = _hgb_plan(hgb_setup, out, code=1)
    assert "refit-002.skops" in refused.stderr and "sha256" in refused.stderr
    assert "build-refits" in refused.stderr


def test_load_model_loads_the_bytes_it_checked(hgb_setup, tmp_path):
    import hashlib

    from frpd_cli.model import load_model

    path = tmp_path / "model.pkl"
    path.write_bytes(hgb_setup.model.read_bytes())
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    model = load_model(path, favorable=1, feature_names=["x1", "grade"], sha256=digest)
    assert model.favorable_probability(pd.DataFrame({"x1": [9.0], "grade": ["c"]})).shape == (1,)
    with pytest.raises(ModelError, match="sha256"):
        load_model(path, favorable=1, feature_names=["x1", "grade"], sha256="0" * 64)


def test_build_refits_leaves_the_id_column_out_and_plans_as_robust_does(setup, tmp_path):
    # the same rows with an identifier column, in the data and the applicants: --id-column keeps it out of the
    # features the refits are fitted on, and the saved refits plan as refitting in the run does
    ids = SimpleNamespace(**vars(setup))
    ids.data, ids.applicants = tmp_path / "train.csv", tmp_path / "applicants.csv"
    for source, target, names in ((setup.data, ids.data, "R"), (setup.applicants, ids.applicants, "A")):
        frame = pd.read_csv(source)
        frame.insert(0, "applicant_id", [f"{names}{i}" for i in range(len(frame))])
        frame.to_csv(target, index=False)
    _, refits = _refits(ids, tmp_path / "refits", "--id-column", "applicant_id")
    assert [list(r.feature_names_in_) for r in refits] == [FEATURES] * 4
    saved = _plan(ids, "--id-column", "applicant_id", "--refits", tmp_path / "refits")
    assert saved == _plan(ids, "--id-column", "applicant_id", "--robust", "4")
    # and they are the plans of the data without the column, named by it
    records = [json.loads(line) for line in saved.splitlines()]
    plain = [json.loads(line) for line in _plan(setup, "--robust", "4").splitlines()]
    assert [r.pop("applicant") for r in records] == [f"A{i}" for i in range(5)]
    assert [r.pop("applicant") for r in plain] == [str(i) for i in range(5)] and records == plain


def test_build_refits_ignores_an_id_column_the_data_does_not_have(setup, tmp_path):
    result = _run(["build-refits", setup.data, "--model", setup.model, "--target", "y", "--robust", "2",
                   "--id-column", "x4", "--out", tmp_path / "refits"])
    assert "--id-column" not in result.stderr           # the training data need not hold the applicants' ids
    # the option left nothing out: the refits are those built without it
    _, with_option = _refits(setup, tmp_path / "again", "--id-column", "x4")
    _, plain = _refits(setup, tmp_path / "plain")
    assert [list(r.feature_names_in_) for r in with_option] == [FEATURES] * 4
    assert all(np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
               for a, b in zip(with_option, plain))


_REFIT_OPENS: dict = {}


def _count_refit_opens(event, args):
    if event == "open" and args and isinstance(args[0], (str, os.PathLike)) and os.fspath(args[0]) in _REFIT_OPENS:
        _REFIT_OPENS[os.fspath(args[0])] += 1


sys.addaudithook(_count_refit_opens)


def test_each_refit_file_is_read_once_and_checked(setup, tmp_path):
    from frpd_cli.exceptions import ArtifactError
    from frpd_cli.refits import load_refits

    out = tmp_path / "refits"
    manifest, saved = _refits(setup, out)
    files = sorted(out / name for name in manifest["payloads"])
    schema = SimpleNamespace(target="y", favorable=1, feature_names=FEATURES)

    def load():
        return load_refits(out, data=setup.data, model=setup.model, seed=0, n=3, schema=schema, threshold=0.5)

    _REFIT_OPENS.update({str(path): 0 for path in files})
    try:
        refits = load()
        opens = {path.name: _REFIT_OPENS[str(path)] for path in files}
    finally:
        for path in files:
            _REFIT_OPENS.pop(str(path))
    assert opens == {path.name: 1 for path in files}          # the three loaded and the fourth, checked
    X = pd.read_csv(setup.applicants)
    for refit, expected in zip(refits, saved[:3], strict=True):
        assert np.array_equal(refit.favorable_probability(X), expected.predict_proba(X)[:, 1])
    # a refit this run does not use is refused all the same when its bytes changed, and so is a used one
    for changed in (files[3], files[1]):
        original = changed.read_bytes()
        changed.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        with pytest.raises(ArtifactError, match=rf"'{changed.name}' .* is corrupted \(its sha256 differs"):
            load()
        changed.write_bytes(original)
