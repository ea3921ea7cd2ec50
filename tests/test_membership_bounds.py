"""Per-candidate lower bounds (``membership_bounds``) against brute force over every k-subset.

Oracles, on random instances and on the nearest candidates of denied applicants of the sample data, German and
Adult (the real sets skipped when absent): the best objective of the k-sets holding each candidate
(itertools), the exact optimum over all candidates and over those the bound keeps, and the closed form at
``theta = 0`` (the objective is then the sum of distances, and the distance bound is exact).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from frpd_cli.selection import compute_geometry, select_prototypes
from frpd_cli.selection.quad import membership_bounds, quad_objective_values


def _instance(seed):
    rng = np.random.default_rng(seed)
    n, p = int(rng.integers(6, 16)), int(rng.integers(2, 6))
    X = rng.normal(size=(n, p)) * rng.uniform(0.2, 3.0, size=(n, 1)) + rng.normal(size=p)
    # duplicated rows: ties between candidates, as in resampled training sets
    X[-2:] = X[:2]
    x0 = rng.normal(size=p) * 0.3
    k = int(rng.integers(1, 5))
    theta = float(rng.choice([0.0, 0.2, 0.5, 0.9, 1.0]))
    return compute_geometry(X, x0), min(k, n), theta


def _best_holding(g, k, theta):
    """For every candidate, the least objective of a k-set that holds it (every subset enumerated)."""
    best = np.full(g.n_candidates, np.inf)
    for subset in itertools.combinations(range(g.n_candidates), k):
        value = quad_objective_values(g.directions, g.distances, np.array(subset), theta)
        for i in subset:
            best[i] = min(best[i], value)
    return best


def _points(g, rng, k, theta):
    v = g.directions[select_prototypes(g, k=k, method="quad", theta=theta).indices].sum(axis=0)
    return np.vstack([np.zeros(g.n_features), 0.5 * v, v, rng.normal(size=(3, g.n_features))])


@pytest.mark.parametrize("seed", range(40))
def test_bound_never_exceeds_the_best_set_holding_the_candidate(seed):
    g, k, theta = _instance(seed)
    rng = np.random.default_rng(seed)
    points = _points(g, rng, k, theta)
    bounds = membership_bounds(g.directions, g.distances, k, theta, points)
    best = _best_holding(g, k, theta)
    assert np.all(bounds <= best + 1e-9 * (1.0 + np.abs(best)))
    # each point on its own is a bound too, and the result is the best of them
    single = np.array([membership_bounds(g.directions, g.distances, k, theta, w) for w in points])
    assert np.all(single <= best + 1e-9 * (1.0 + np.abs(best)))
    assert np.array_equal(bounds, single.max(axis=0))


@pytest.mark.parametrize("seed", range(20))
def test_distance_bound_is_exact_without_diversity(seed):
    # theta = 0: a set's objective is its sum of distances, so the best set holding i is i and the k - 1 nearest
    # others, which is what the bound at w = 0 says
    g, k, _ = _instance(100 + seed)
    bounds = membership_bounds(g.directions, g.distances, k, 0.0, np.zeros((1, g.n_features)))
    np.testing.assert_allclose(bounds, _best_holding(g, k, 0.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_pruned_candidates_leave_the_optimum_unchanged(seed):
    # the incumbent is quad's answer; candidates whose bound exceeds it are left out, and the exact optimum over
    # the rest is the exact optimum over every candidate (same value; an optimal set holds no pruned candidate)
    g, k, theta = _instance(200 + seed)
    rng = np.random.default_rng(seed)
    incumbent = select_prototypes(g, k=k, method="quad", theta=theta).objective
    bounds = membership_bounds(g.directions, g.distances, k, theta, _points(g, rng, k, theta))
    out = bounds > incumbent + 1e-9 * (1.0 + abs(incumbent))
    best = _best_holding(g, k, theta)
    optimum = best.min()
    assert np.all(best[out] > optimum)
    kept = np.flatnonzero(~out)
    assert kept.size >= k
    sub = compute_geometry(g.directions[kept] * g.distances[kept, None], np.zeros(g.n_features))
    assert _best_holding(sub, k, theta).min() == pytest.approx(optimum, rel=1e-9, abs=1e-12)


def test_bound_prunes_far_candidates_at_small_theta():
    # five close candidates around the applicant and far ones: at theta = 0.2 the far ones are provably out
    rng = np.random.default_rng(0)
    near = rng.normal(size=(5, 3)) * 0.1
    far = rng.normal(size=(20, 3))
    far *= (5.0 / np.linalg.norm(far, axis=1))[:, None]
    g = compute_geometry(np.vstack([near, far]), np.zeros(3))
    incumbent = select_prototypes(g, k=3, method="quad", theta=0.2).objective
    bounds = membership_bounds(g.directions, g.distances, 3, 0.2, np.zeros((1, 3)))
    assert np.all(bounds[5:] > incumbent)
    assert np.all(bounds <= _best_holding(g, 3, 0.2) + 1e-12)


def _real_geometries(train_path, model_path, spec, denied, nearest=24):
    """The geometry of each denied applicant's ``nearest`` nearest candidates (one-hot and min-max encoded rows:
    duplicates, ties and directions of fixed sign, unlike the random instances)."""
    import pandas as pd

    from frpd_cli.candidates import CandidateStage
    from frpd_cli.choice import PlanSettings
    from frpd_cli.dataset import build_training_set
    from frpd_cli.model import load_model
    from frpd_cli.schema import infer_schema

    frame = pd.read_csv(train_path)
    schema = infer_schema(frame, spec)
    model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    raw = denied.loc[:, list(schema.feature_names)].reset_index(drop=True)
    X0, codes0 = training.encoder.encode(raw), training.encoder.constraint_codes(raw)
    stage = CandidateStage(training, PlanSettings(), model=model)
    out = []
    for i in range(len(raw)):
        found = stage.find(X0[i], codes0.row(i), raw.iloc[i])
        if len(found) >= 3:
            g = compute_geometry(training.X[found.rows], X0[i])
            near = np.sort(np.lexsort((np.arange(g.n_candidates), g.distances))[:nearest])
            out.append(compute_geometry(training.X[found.rows[near]], X0[i]))
    return out


def _check_real(geometries):
    rng = np.random.default_rng(0)
    n_out = 0
    for g in geometries:
        for theta in (0.9, 0.5, 0.2):
            k = 3
            points = _points(g, rng, k, theta)
            bounds = membership_bounds(g.directions, g.distances, k, theta, points)
            best = _best_holding(g, k, theta)
            assert np.all(bounds <= best + 1e-9 * (1.0 + np.abs(best)))
            incumbent = select_prototypes(g, k=k, method="quad", theta=theta).objective
            out = bounds > incumbent + 1e-9 * (1.0 + abs(incumbent))
            assert np.all(best[out] > best.min())
            n_out += int(out.sum())
    return n_out


def test_bounds_on_the_sample_data(sample_paths):
    import pandas as pd

    from frpd_cli.schema import load_schema_file

    spec = load_schema_file(sample_paths["schema"])
    geometries = _real_geometries(sample_paths["data"], sample_paths["model"], spec,
                                  pd.read_csv(sample_paths["applicants"]))
    assert len(geometries) >= 5
    assert _check_real(geometries) > 0


def test_bounds_on_german(german):
    from frpd_cli.schema import SchemaSpec

    spec = SchemaSpec(immutable=("Personal status",), increasing=("Age",))
    geometries = _real_geometries(german.train_path, german.model_path, spec, german.denied.head(15))
    assert len(geometries) >= 10
    assert _check_real(geometries) > 0


def test_bounds_on_adult(tmp_path):
    import joblib
    import pandas as pd
    from conftest import dataset_path
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    from frpd_cli.schema import SchemaSpec

    frame = pd.read_csv(dataset_path("adult.csv")).sample(n=4000, random_state=0).reset_index(drop=True)
    features = [c for c in frame.columns if c != "label"]
    numeric = ["age", "hours_per_week"]
    pipe = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"),
                                     [c for c in features if c not in numeric]),
                                    ("num", MinMaxScaler(), numeric)])),
        ("lr", LogisticRegression(max_iter=1000)),
    ]).fit(frame[features], frame["label"])
    model_path, train_path = tmp_path / "adult.pkl", tmp_path / "train.csv"
    joblib.dump(pipe, model_path)
    frame.to_csv(train_path, index=False)
    denied = frame[features][pipe.predict_proba(frame[features])[:, 1] < 0.5].head(40)
    spec = SchemaSpec(target="label", immutable=("marital_status", "gender", "race"), increasing=("age",))
    geometries = _real_geometries(train_path, model_path, spec, denied)
    assert len(geometries) >= 10
    assert _check_real(geometries) > 0
