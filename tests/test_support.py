"""--robust-support: the k-nearest-neighbour vote of the training labels as one more model to satisfy.

Oracles: a brute-force count of favourable labels among the rows within the k-th smallest distance (ties
whole), on data with many exact ties; and a constructed model that accepts a half-plane in which only part of
the training rows are labelled favourable (every recourse must land where the labels agree).
"""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
import pytest
from scipy.spatial import cKDTree
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.support import auto_neighbors, distinct_rows, label_support

runner = CliRunner()


def _brute(X, labeled, Z, k):
    """Share of favourable labels among the k rows of X nearest to each row of Z, every row at the k-th distance
    counted."""
    out = []
    for z in Z:
        d = np.sqrt(((X - z) ** 2).sum(axis=1))
        kth = np.sort(d)[k - 1]
        inside = d <= kth * (1 + 1e-9)
        out.append(labeled[inside].mean())
    return np.array(out)


def _brute_support(X, labeled, Z, k):
    """The support: the mean share of the distinct training rows nearest to each row of Z."""
    distinct = np.unique(X, axis=0)
    out = []
    for z in Z:
        d = np.sqrt(((distinct - z) ** 2).sum(axis=1))
        nearest = distinct[d <= d.min() * (1 + 1e-9)]
        out.append(_brute(X, labeled, nearest, k).mean())
    return np.array(out)


def _shares(X, labeled, Z, k):
    """label_support over X given as distinct rows with multiplicities."""
    distinct, inverse, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    good = np.bincount(inverse.ravel(), weights=labeled.astype(float), minlength=len(distinct))
    return label_support(cKDTree(distinct), counts, good, Z, k)


@pytest.mark.parametrize("k", [1, 3, 7, 20])
def test_share_equals_a_brute_force_count_with_ties_whole(k):
    rng = np.random.default_rng(k)
    X = rng.integers(0, 4, size=(150, 3)).astype(float)          # a coarse grid: many rows at equal distances
    labeled = rng.random(150) < 0.4
    Z = np.vstack([X[:40], rng.integers(0, 4, size=(40, 3)) + rng.choice([0.0, 0.5], size=(40, 3))])
    got = _shares(X, labeled, Z, k)
    assert np.allclose(got, _brute(X, labeled, Z, k), atol=1e-12)
    # a row's share does not depend on the rows scored with it
    alone = np.array([_shares(X, labeled, Z[i:i + 1], k)[0] for i in range(len(Z))])
    assert np.array_equal(alone, got)


@pytest.mark.parametrize("k", [1, 2, 3, 9, 14])
def test_share_counts_repeated_rows_and_ties_beyond_the_rows_searched(k):
    # six rows at distance 1 from the origin, some repeated, then farther rows: for k = 2 the three distinct
    # rows searched first are all tied and the other three must be found by the radius search
    unit = np.vstack([np.eye(3), -np.eye(3)])
    X = np.vstack([unit, unit[:2], unit[:2], 2 * unit])
    labeled = np.zeros(len(X), dtype=bool)
    labeled[[0, 3, 6, 8, 14]] = True
    Z = np.vstack([[[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.0, 1.5]], X[:6]])
    assert np.allclose(_shares(X, labeled, Z, k), _brute(X, labeled, Z, k), atol=1e-12)


class _Identity:
    """An encoder that leaves numeric rows as they are."""

    n_features_out = 3

    def encode(self, frame):
        return frame.to_numpy(dtype=float)


@pytest.mark.parametrize("k", [1, 4, 15])
def test_support_is_the_mean_share_of_the_nearest_distinct_rows(k):
    from frpd_cli.support import LabelSupport

    rng = np.random.default_rng(100 + k)
    X = rng.integers(0, 3, size=(120, 3)).astype(float)          # duplicates, and many rows equally near a point
    labeled = rng.random(120) < 0.5
    Z = np.vstack([X[:30], rng.integers(0, 3, size=(30, 3)) + rng.choice([0.0, 0.5, 0.25], size=(30, 3))])
    support = LabelSupport(_Identity(), X, labeled, k, threshold=0.5, feature_names=("a", "b", "c"))
    frame = pd.DataFrame(Z, columns=["a", "b", "c"])
    got = support.favorable_probability(frame)
    assert np.allclose(got, _brute_support(X, labeled, Z, k), atol=1e-12)
    assert np.allclose(got[:30], _brute(X, labeled, Z[:30], k), atol=1e-12)     # a training row: its own share
    # the shares kept from earlier calls change nothing, and neither do the other rows of a call
    fresh = LabelSupport(_Identity(), X, labeled, k, threshold=0.5, feature_names=("a", "b", "c"))
    assert np.array_equal([fresh.favorable_probability(frame.iloc[[i]])[0] for i in range(len(Z))][::-1],
                          got[::-1])
    assert np.array_equal(support.favorable_probability(frame.iloc[::-1]), got[::-1])


def test_rows_scored_again_are_not_searched_again_and_get_the_same_support(monkeypatch):
    import frpd_cli.support as S

    rng = np.random.default_rng(7)
    X = rng.integers(0, 3, size=(150, 3)).astype(float)
    labeled = rng.random(150) < 0.4
    Z = rng.integers(0, 3, size=(40, 3)) + rng.choice([0.0, 0.5, 0.25], size=(40, 3))
    Z = np.vstack([Z, Z[::3], Z[:5]])                           # rows repeated within one call
    frame = pd.DataFrame(Z, columns=["a", "b", "c"])
    searched = []
    search = S.nearest_rows
    monkeypatch.setattr(S, "nearest_rows", lambda tree, rows: searched.append(len(rows)) or search(tree, rows))
    support = S.LabelSupport(_Identity(), X, labeled, 5, threshold=0.5, feature_names=("a", "b", "c"))
    got = support.favorable_probability(frame)
    assert np.allclose(got, _brute_support(X, labeled, Z, 5), atol=1e-12)
    training = {row.tobytes() for row in X}
    new = [row for row in np.unique(Z[:40], axis=0) if row.tobytes() not in training]   # a training row: no search
    assert sum(searched) == len(new) > 30                       # each distinct new row searched once
    assert np.array_equal(support.favorable_probability(frame.iloc[::-1]), got[::-1])
    assert sum(searched) == len(new)                            # nothing searched again
    # a memory smaller than the rows of a call starts afresh: the same values
    monkeypatch.setattr(S, "_KNOWN_ROWS", 7)
    small = S.LabelSupport(_Identity(), X, labeled, 5, threshold=0.5, feature_names=("a", "b", "c"))
    assert np.array_equal(small.favorable_probability(frame), got)
    assert np.array_equal(small.favorable_probability(frame.iloc[:9]), got[:9])


def test_share_without_favourable_rows_or_with_k_beyond_the_rows():
    X = np.arange(10, dtype=float).reshape(-1, 1)
    none = np.zeros(10, dtype=bool)
    assert (_shares(X, none, X, 3) == 0).all()
    some = np.arange(10) < 4
    assert np.allclose(_shares(X, some, X[:2], 10), 0.4)


@pytest.mark.parametrize("shape", [(200, 3), (50, 1), (1, 4), (0, 3)])
def test_distinct_rows_are_numpys_in_order_of_appearance(shape):
    rng = np.random.default_rng(shape[0])
    X = rng.integers(0, 3, size=shape).astype(float)
    if len(X) > 3:
        X[1], X[2] = -0.5, 7.0                           # a negative value, and a row seen once
    distinct, inverse, counts = distinct_rows(X)
    assert np.array_equal(distinct[inverse], X) and len(np.unique(distinct, axis=0)) == len(distinct)
    assert np.array_equal(counts, np.bincount(inverse, minlength=len(distinct)))
    # the same distinct rows and multiplicities as numpy's, each first seen where its first copy is
    d, c = np.unique(X, axis=0, return_counts=True)
    order = np.lexsort(distinct.T[::-1]) if len(distinct) else np.zeros(0, dtype=int)
    assert np.array_equal(distinct[order], d) and np.array_equal(counts[order], c)
    assert np.array_equal(np.sort(np.unique(inverse, return_index=True)[1]), np.unique(inverse, return_index=True)[1])


def test_auto_neighbours_is_the_square_root_of_the_favourable_rows():
    assert auto_neighbors(3136, 13024) == 56 and auto_neighbors(208, 1808) == 15
    assert auto_neighbors(4, 1000) == 5 and auto_neighbors(40, 3) == 3
    assert auto_neighbors(4096, 10**5) == 64 and auto_neighbors(194_384, 10**6) == 64      # at most 64


@pytest.fixture(scope="module")
def corner(tmp_path_factory):
    """The model favours x1 >= 5; the labels are favourable only where x1 >= 5 and x2 >= 5."""
    folder = tmp_path_factory.mktemp("corner")
    rng = np.random.default_rng(11)
    X = pd.DataFrame({"x1": rng.uniform(0, 10, 500).round(2), "x2": rng.uniform(0, 10, 500).round(2)})
    label = ((X["x1"] >= 5) & (X["x2"] >= 5)).astype(int)
    model = LogisticRegression(C=100.0, max_iter=2000).fit(X, (X["x1"] >= 5).astype(int))
    X.assign(y=label).to_csv(folder / "train.csv", index=False)
    joblib.dump(model, folder / "model.pkl")
    pd.DataFrame({"id": ["p", "q", "r"], "x1": [2.0, 3.0, 4.0], "x2": [2.0, 3.5, 6.0]}).to_csv(
        folder / "applicants.csv", index=False)
    return {"folder": folder, "X": X, "labeled": label.to_numpy() == 1, "model": model}


def _plan(corner, *extra, fmt="jsonl", scale="minmax"):
    f = corner["folder"]
    args = ["plan", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--applicants", str(f / "applicants.csv"),
            "--target", "y", "--favorable", "1", "--id-column", "id", "--format", fmt, "-k", "3",
            "--max-move", "none", "--scale", scale, *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _share(corner, rows, k):
    X = corner["X"].to_numpy(dtype=float)
    lo, hi = X.min(axis=0), X.max(axis=0)
    Z = (np.array([[r["x1"], r["x2"]] for r in rows], dtype=float) - lo) / (hi - lo)
    return _brute_support((X - lo) / (hi - lo), corner["labeled"], Z, k)


def test_every_recourse_has_the_labels_of_its_neighbours(corner):
    plans = [json.loads(line) for line in _plan(corner, "--robust-support", "10").splitlines()]
    rows = [r["features"] for p in plans for r in p["recourses"]]
    assert len(rows) >= 6
    share = _share(corner, rows, 10)
    assert (share >= 0.5).all()
    assert np.allclose([r["probabilities"]["support"] for p in plans for r in p["recourses"]], share, atol=1e-9)
    assert (corner["model"].predict_proba(pd.DataFrame(rows))[:, 1] >= 0.5).all()
    # without the option the model's half-plane is enough: some recourses land where the labels disagree
    plain = [r["features"] for line in _plan(corner).splitlines() for r in json.loads(line)["recourses"]]
    assert (_share(corner, plain, 10) < 0.5).any()


def test_margin_raises_the_share_asked(corner):
    plans = [json.loads(line) for line in _plan(corner, "--robust-support", "10", "--margin", "0.3").splitlines()]
    rows = [r["features"] for p in plans for r in p["recourses"]]
    assert rows and (_share(corner, rows, 10) >= 0.8 - 1e-9).all()


def test_support_level_sets_the_share_asked(corner, tmp_path):
    asked = [r["features"] for line in _plan(corner, "--robust-support", "10", "--robust-support-level", "0.8")
             .splitlines() for r in json.loads(line)["recourses"]]
    assert asked and (_share(corner, asked, 10) >= 0.8 - 1e-9).all()
    # by default the threshold is asked, and some recourses stop short of 0.8: the option changes the plans
    default = [r["features"] for line in _plan(corner, "--robust-support", "10").splitlines()
               for r in json.loads(line)["recourses"]]
    assert (_share(corner, default, 10) < 0.8 - 1e-9).any()
    # --margin adds to it, as to the threshold
    raised = [r["features"] for line in _plan(corner, "--robust-support", "10", "--robust-support-level", "0.6",
                                              "--margin", "0.3").splitlines() for r in json.loads(line)["recourses"]]
    assert raised and (_share(corner, raised, 10) >= 0.9 - 1e-9).all()
    record = tmp_path / "prov.json"
    _plan(corner, "--robust-support", "10", "--robust-support-level", "0.8", "--provenance", str(record))
    assert json.loads(record.read_text(encoding="utf-8"))["settings"]["robust_support_level"] == 0.8
    # an infeasible applicant's reason names the share asked
    reasons = [json.loads(line).get("reason") or "" for line in
               _plan(corner, "--robust-support", "10", "--robust-support-level", "0.8", "--immutable", "x2")
               .splitlines()]
    assert any("share 0.8 of the 10 training rows" in r for r in reasons)


def test_hints_say_what_to_relax_and_when_no_row_has_the_share_asked(corner):
    f = corner["folder"]

    def stderr(*extra):
        result = runner.invoke(app, ["plan", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--applicants",
                                     str(f / "applicants.csv"), "--target", "y", "--id-column", "id", "--format",
                                     "jsonl", "--max-move", "none", "--scale", "minmax", *extra])
        assert result.exit_code == 0, result.output
        return result.stderr

    # with 200 neighbours no row's share is near 1 (a quarter of the square is favourable-labelled)
    X = corner["X"].to_numpy(dtype=float)
    Xn = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    highest = _brute_support(Xn, corner["labeled"], Xn, 200).max()
    assert 0.5 < highest < 0.9
    told = stderr("--robust-support", "200", "--robust-support-level", f"{highest - 0.005:.6f}", "--margin", "0.01")
    assert f"No training row has a share of favourable labels of {highest + 0.005:.6g}" in told
    assert f"among its 200 nearest (the highest is {highest:.4g})" in told
    assert "No training row" not in stderr("--robust-support", "200", "--robust-support-level",
                                           f"{highest - 0.02:.6f}", "--margin", "0.01")
    # a share some rows have: no such sentence, but what to relax, beside the constraints' own hint
    told = stderr("--robust-support", "10", "--immutable", "x2")
    assert "--robust-support-level or --robust-support none" in told and "No training row" not in told
    assert "declare fewer immutable" in told or "--immutable-policy project" in told


@pytest.mark.parametrize("option, extra", [
    ("--robust-support-level", ["--robust-support-level", "0.7"]),
    ("--robust-support-level", ["--robust", "2", "--robust-support", "none", "--robust-support-level", "0.7"]),
    ("--robust-support-level", ["--robust-support", "10", "--robust-support-level", "0"]),
    ("--robust-support-level", ["--robust-support", "10", "--robust-support-level", "1.5"]),
    ("--robust-support-radius", ["--robust-support-radius", "auto"]),
    ("--robust-support-radius", ["--robust", "2", "--robust-support", "none", "--robust-support-radius", "0.1"]),
    ("--robust-support-radius", ["--robust-support", "10", "--robust-support-radius", "0"]),
    ("--robust-support-radius", ["--robust-support", "10", "--robust-support-radius", "-1"]),
    ("--robust-support-radius", ["--robust-support", "10", "--robust-support-radius", "inf"]),
    ("--robust-support-radius", ["--robust-support", "10", "--robust-support-radius", "near"]),
])
def test_support_level_and_radius_need_support_and_a_valid_value(corner, option, extra):
    f = corner["folder"]
    result = runner.invoke(app, ["plan", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--applicants",
                                 str(f / "applicants.csv"), "--target", "y", *extra])
    assert result.exit_code == 2 and option in result.output, result.output


def test_unreachable_support_is_infeasible_with_a_reason(corner):
    plans = {json.loads(line)["applicant"]: json.loads(line)
             for line in _plan(corner, "--robust-support", "10", "--immutable", "x2").splitlines()}
    for a in ("p", "q"):                        # x2 below 5 may not change: no labelled-favourable neighbourhood
        assert plans[a]["status"] == "infeasible" and "--robust-support" in plans[a]["reason"]
    assert plans["r"]["status"] == "ok"
    # with a margin too, the reason says once what favourable means, and the table shortens it to its first clause
    from frpd_cli.cli._output import reason_line

    margin = {json.loads(line)["applicant"]: json.loads(line)["reason"]
              for line in _plan(corner, "--robust-support", "10", "--immutable", "x2", "--margin", "0.1").splitlines()}
    for a in ("p", "q"):
        assert margin[a].count("favourable here means") == 1 and "--margin" in margin[a]
        assert "favourable here means" not in reason_line(margin[a]) and "--robust-support" in margin[a]


def test_same_bytes_for_any_chunk_size_and_jobs(corner):
    first = _plan(corner, "--robust-support", "auto", "--chunk-size", "1")
    assert first == _plan(corner, "--robust-support", "auto", "--chunk-size", "64", "--jobs", "2")
    assert "probability_support" in _plan(corner, "--robust-support", "auto", fmt="csv").splitlines()[0]


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_support_needs_a_count_or_auto(corner, value):
    f = corner["folder"]
    result = runner.invoke(app, ["plan", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--applicants",
                                 str(f / "applicants.csv"), "--target", "y", "--robust-support", value])
    assert result.exit_code == 2 and "--robust-support" in result.output


def test_provenance_and_artifacts_record_the_support_asked(corner, tmp_path):
    f = corner["folder"]
    record = tmp_path / "prov.json"
    _plan(corner, "--robust-support", "10", "--provenance", str(record))
    assert json.loads(record.read_text(encoding="utf-8"))["settings"]["robust_support"] == "10"
    # interpolate without the training file cannot count labels: refused before anything is written
    sel = tmp_path / "sel"
    result = runner.invoke(app, ["select", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--applicants",
                                 str(f / "applicants.csv"), "--target", "y", "--id-column", "id", "--out", str(sel),
                                 "--max-move", "none"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(f / "model.pkl"),
                                 "--robust-support", "10", "--target", "y", "--out", str(tmp_path / "p")])
    assert result.exit_code == 2 and "--robust-support needs --data" in result.output
    assert not (tmp_path / "p").exists()


def test_select_then_interpolate_with_support_matches_plan(corner, tmp_path):
    f = corner["folder"]
    # the effort scale, the commands' default (the library's is min-max): interpolate must compare rows in it too
    common = ["--target", "y", "--favorable", "1", "--max-move", "none", "--scale", "effort", "--robust-support", "10"]
    sel = tmp_path / "sel"
    result = runner.invoke(app, ["select", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--applicants",
                                 str(f / "applicants.csv"), "-k", "3", "--out", str(sel), "--id-column", "id", *common])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(f / "model.pkl"), "--data",
                                 str(f / "train.csv"), "--out", str(tmp_path / "p"), "--format", "jsonl",
                                 "--robust-support", "10"])
    assert result.exit_code == 0, result.output
    assert result.stdout == _plan(corner, "--robust-support", "10", scale="effort")


def test_support_averages_every_equally_near_row_beyond_the_first_search():
    from frpd_cli.support import LabelSupport

    rng = np.random.default_rng(5)
    X = np.vstack([np.eye(10), -np.eye(10), 3 + rng.integers(0, 3, size=(40, 10))]).astype(float)
    labeled = rng.random(len(X)) < 0.5
    labeled[:10], labeled[10:20] = True, False            # the 20 rows at distance 1 from the origin disagree

    class Identity(_Identity):
        n_features_out = 10

    names = tuple(f"f{i}" for i in range(10))
    support = LabelSupport(Identity(), X, labeled, 3, threshold=0.5, feature_names=names)
    got = support.favorable_probability(pd.DataFrame(np.zeros((1, 10)), columns=list(names)))
    assert got == pytest.approx(_brute_support(X, labeled, np.zeros((1, 10)), 3), abs=1e-12)


def test_refits_bring_support_unless_turned_off(corner, tmp_path):
    with_refits = [json.loads(line) for line in _plan(corner, "--robust", "2").splitlines()]
    rows = [r for p in with_refits for r in p["recourses"]]
    assert rows and all(set(r["probabilities"]) == {"model", "refit-1", "refit-2", "support"} for r in rows)
    k = auto_neighbors(int(corner["labeled"].sum()), len(corner["labeled"]))
    assert (_share(corner, [r["features"] for r in rows], k) >= 0.5).all()
    off = [json.loads(line) for line in _plan(corner, "--robust", "2", "--robust-support", "none").splitlines()]
    assert all(set(r["probabilities"]) == {"model", "refit-1", "refit-2"} for p in off for r in p["recourses"])
    record = tmp_path / "prov.json"
    _plan(corner, "--robust", "2", "--robust-support", "none", "--provenance", str(record))
    assert "robust_support" not in json.loads(record.read_text(encoding="utf-8"))["settings"]
    # with --also-valid-for alone the other model is the whole rule
    assert "support" not in _plan(corner, "--also-valid-for", str(corner["folder"] / "model.pkl"), fmt="csv")


def test_verification_refuses_a_recourse_without_support(corner):
    from frpd_cli.cli._robust import label_support_of
    from frpd_cli.dataset import build_training_set
    from frpd_cli.judge import annotate_plans, make_judge
    from frpd_cli.model import load_model
    from frpd_cli.plans import Plan, Recourse
    from frpd_cli.schema import SchemaSpec, infer_schema
    from frpd_cli.verification import RecourseVerificationError, verify_plans

    frame = pd.read_csv(corner["folder"] / "train.csv")
    schema = infer_schema(frame, SchemaSpec(target="y", favorable="1"))
    model = load_model(corner["folder"] / "model.pkl", favorable=schema.favorable, feature_names=schema.feature_names)
    judge = make_judge(model, support=label_support_of(model, "10", schema, frame, scale="minmax"))
    training = build_training_set(frame, schema, judge, scale="minmax")

    def plan(features):
        rec = Recourse(rank=1, features=features, changes={}, cost=1.0, probability=0.0, prototype=0)
        return Plan("a", "ok", None, "quad", (rec,), {"x1": 2.0, "x2": 2.0})

    inside = annotate_plans(judge, [plan({"x1": 8.0, "x2": 8.0})], schema.feature_names)
    assert verify_plans(training, judge, inside) is inside
    outside = annotate_plans(judge, [plan({"x1": 8.0, "x2": 1.0})], schema.feature_names)
    assert corner["model"].predict_proba(pd.DataFrame([{"x1": 8.0, "x2": 1.0}]))[0, 1] >= 0.5   # the model accepts
    with pytest.raises(RecourseVerificationError, match="supported by the labels"):
        verify_plans(training, judge, outside)


def _nearest_distance(X, Z):
    return np.array([np.sqrt(((X - z) ** 2).sum(axis=1)).min() for z in Z])


@pytest.mark.parametrize("radius", [0.3, 0.45, 0.65])          # no distance here equals one
def test_a_row_farther_than_the_radius_from_every_training_row_has_no_support(radius):
    from frpd_cli.support import LabelSupport

    rng = np.random.default_rng(21)
    X = rng.integers(0, 3, size=(100, 3)).astype(float)
    labeled = rng.random(100) < 0.6
    Z = np.vstack([X[:20], rng.integers(0, 3, size=(40, 3)) + rng.choice([0.0, 0.25, 0.5], size=(40, 3))])
    frame = pd.DataFrame(Z, columns=["a", "b", "c"])
    support = LabelSupport(_Identity(), X, labeled, 5, threshold=0.5, feature_names=("a", "b", "c"), radius=radius)
    far = _nearest_distance(X, Z) > radius
    assert far.any() and (~far).any()
    got = support.favorable_probability(frame)
    assert np.allclose(got, np.where(far, 0.0, _brute_support(X, labeled, Z, 5)), atol=1e-12)
    assert support.radius == radius
    # without a radius the far rows keep their nearest row's share
    plain = LabelSupport(_Identity(), X, labeled, 5, threshold=0.5, feature_names=("a", "b", "c"))
    assert plain.radius is None and (plain.favorable_probability(frame)[far] > 0).any()


def _brute_auto_radius(X):
    distinct = np.unique(X, axis=0)
    d = np.sqrt(((distinct[:, None, :] - distinct[None, :, :]) ** 2).sum(axis=2))
    np.fill_diagonal(d, np.inf)
    return np.quantile(d.min(axis=1), 0.9)


def test_auto_radius_is_the_quantile_of_the_distances_to_the_nearest_other_row(monkeypatch):
    import frpd_cli.support as S

    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(size=(200, 4)), rng.normal(size=(50, 4))[:10].repeat(3, axis=0)])  # some repeats
    labeled = rng.random(len(X)) < 0.5
    names = ("a", "b", "c", "d")
    support = S.LabelSupport(_Identity(), X, labeled, 5, threshold=0.5, feature_names=names, radius="auto")
    assert S.RADIUS_QUANTILE == 0.9
    assert support.radius == pytest.approx(_brute_auto_radius(X), rel=1e-12)
    # above the sample size, evenly spaced distinct rows (in order of appearance) are searched among all of them
    monkeypatch.setattr(S, "_RADIUS_SAMPLE", 40)
    sampled = S.LabelSupport(_Identity(), X, labeled, 5, threshold=0.5, feature_names=names, radius="auto")
    distinct = S.distinct_rows(X)[0]
    at = np.unique(np.linspace(0, len(distinct) - 1, 40).astype(np.int64))
    d = np.sqrt(((distinct[at][:, None, :] - distinct[None, :, :]) ** 2).sum(axis=2))
    d[np.arange(len(at)), at] = np.inf
    assert sampled.radius == pytest.approx(np.quantile(d.min(axis=1), 0.9), rel=1e-12)
    # one distinct row: nothing to compare, no radius binds
    one = S.LabelSupport(_Identity(), np.ones((4, 3)), np.ones(4, bool), 2, threshold=0.5,
                         feature_names=("a", "b", "c"), radius="auto")
    assert one.radius == np.inf


def test_every_recourse_has_a_training_row_within_the_radius(corner, tmp_path):
    X = corner["X"].to_numpy(dtype=float)
    lo, hi = X.min(axis=0), X.max(axis=0)

    def nearest(rows):
        Z = (np.array([[r["x1"], r["x2"]] for r in rows], dtype=float) - lo) / (hi - lo)
        return _nearest_distance((X - lo) / (hi - lo), Z)

    plain = [r["features"] for line in _plan(corner, "--robust-support", "10").splitlines()
             for r in json.loads(line)["recourses"]]
    assert (nearest(plain) > 0.01).any()            # the radius below binds
    record = tmp_path / "prov.json"
    plans = [json.loads(line) for line in _plan(corner, "--robust-support", "10", "--robust-support-radius", "0.01",
                                                "--provenance", str(record)).splitlines()]
    rows = [r["features"] for p in plans for r in p["recourses"]]
    assert len(rows) >= 6 and (nearest(rows) <= 0.01).all()
    assert (_share(corner, rows, 10) >= 0.5).all()
    assert (corner["model"].predict_proba(pd.DataFrame(rows))[:, 1] >= 0.5).all()
    assert json.loads(record.read_text(encoding="utf-8"))["settings"]["robust_support_radius"] == 0.01
    # auto is recorded as asked, and plans are the same bytes for any chunk size and jobs
    auto = _plan(corner, "--robust-support", "10", "--robust-support-radius", "auto", "--chunk-size", "1")
    assert auto == _plan(corner, "--robust-support", "10", "--robust-support-radius", "auto", "--jobs", "2")
    # an infeasible applicant's reason names the radius
    reasons = [json.loads(line).get("reason") or "" for line in
               _plan(corner, "--robust-support", "10", "--robust-support-radius", "0.01", "--immutable", "x2")
               .splitlines()]
    assert any("within distance 0.01 of it by --robust-support-radius" in r for r in reasons)
    f = corner["folder"]
    result = runner.invoke(app, ["plan", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--applicants",
                                 str(f / "applicants.csv"), "--target", "y", "--id-column", "id", "--format", "jsonl",
                                 "--max-move", "none", "--scale", "minmax", "--robust-support", "10",
                                 "--robust-support-radius", "0.01", "--immutable", "x2"])
    assert result.exit_code == 0 and "--robust-support-radius none" in result.stderr, result.output


def test_label_support_asks_for_a_training_row_within_the_auto_radius_by_default(corner, tmp_path):
    record = tmp_path / "default.json"
    default = _plan(corner, "--robust-support", "10", "--provenance", str(record))
    assert default == _plan(corner, "--robust-support", "10", "--robust-support-radius", "auto")
    assert json.loads(record.read_text(encoding="utf-8"))["settings"]["robust_support_radius"] == "auto"
    off = tmp_path / "off.json"
    _plan(corner, "--robust-support", "10", "--robust-support-radius", "none", "--provenance", str(off))
    assert json.loads(off.read_text(encoding="utf-8"))["settings"]["robust_support_radius"] == "none"
    # the auto radius of the corner's rows, in the run's min-max encoding: every recourse has a training row that near
    from frpd_cli.support import LabelSupport

    X = corner["X"].to_numpy(dtype=float)
    Xn = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    radius = LabelSupport(_Identity(), Xn, corner["labeled"], 10, threshold=0.5, feature_names=("a", "b"),
                          radius="auto").radius
    assert radius == pytest.approx(_brute_auto_radius(Xn), rel=1e-12)
    rows = [r["features"] for line in default.splitlines() for r in json.loads(line)["recourses"]]
    Z = (np.array([[r["x1"], r["x2"]] for r in rows]) - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0))
    assert rows and (_nearest_distance(Xn, Z) <= radius * (1 + 1e-9)).all()


@pytest.mark.parametrize("with_pool", [False, True])
def test_scoring_the_training_rows_with_support_tells_the_status_line_what_and_how_far(corner, tmp_path, with_pool):
    # label support finds the labels around every training row while the rows are scored (most of a minute on a
    # million rows): the status line names the models and counts the rows, from 0 to all of them, with or
    # without a pool (whose rows the judge scores again)
    from frpd_cli.cli._options import SchemaFlags, read_training
    from frpd_cli.cli._robust import RobustModels

    f = corner["folder"]
    flags = SchemaFlags(target="y", favorable="1", max_moves=("none",))
    pool = None
    if with_pool:
        pool = tmp_path / "pool"
        built = runner.invoke(app, ["build-pool", str(f / "train.csv"), "--model", str(f / "model.pkl"), "--target",
                                    "y", "--favorable", "1", "--max-move", "none", "--out", str(pool)])
        assert built.exit_code == 0, built.output
    told = []
    training, _, _ = read_training(f / "train.csv", f / "model.pkl", flags, pool=pool, status=told.append,
                                   robust=RobustModels(support="auto"))
    counts = [line for line in told if line.startswith("scoring the training rows with the model and label support")]
    assert counts and counts[0].endswith(": 0 of 500 rows") and counts[-1].endswith(": 500 of 500 rows"), told
    # the rows judged favourable are those the model and the labels around them both accept
    assert training.n_rows == 500 and 0 < training.favorable.sum() < (corner["model"].predict(corner["X"]) == 1).sum()
