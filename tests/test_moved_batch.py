"""Moved candidates (``--max-move``) of a chunk's short applicants share one model call, and each applicant's
candidates and plan are the same whichever applicants it is batched with (chunk sizes, --jobs)."""

from __future__ import annotations

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder
from typer.testing import CliRunner

from frpd_cli.candidates import CandidateStage
from frpd_cli.choice import PlanSettings
from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set
from frpd_cli.schema import SchemaSpec, infer_schema

LEVELS = ("low", "mid", "high")
FEATURES = ["group", "age", "level", "income", "debt"]


def _score(frame: pd.DataFrame) -> np.ndarray:
    """Favourable with high income and low debt; the level helps a little."""
    level = frame["level"].map({v: i for i, v in enumerate(LEVELS)}).to_numpy(dtype=float)
    z = (frame["income"].to_numpy(dtype=float) + 3.0 * (10.0 - frame["debt"].to_numpy(dtype=float))
         + 4.0 * level - 60.0) / 5.0
    return 1.0 / (1.0 + np.exp(-z))


class RuleModel:
    """:func:`_score` as a model; counts its calls."""

    threshold = 0.5

    def __init__(self):
        self.calls = 0

    def favorable_probability(self, rows):
        self.calls += 1
        return _score(pd.DataFrame(rows))


def _frame(seed: int = 3, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "group": rng.choice(["a", "b"], n),
        "age": rng.integers(20, 24, n),
        "level": rng.choice(list(LEVELS), n),
        "income": np.round(rng.uniform(0, 100, n), 1),
        "debt": rng.integers(0, 21, n),
    })
    frame["label"] = (_score(frame) >= 0.5).astype(int)
    return frame


def _applicants(seed: int = 4, n: int = 23) -> pd.DataFrame:
    """Low incomes (most applicants have no favourable row within a move of 30 in income), a few middling."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "group": rng.choice(["a", "b"], n),
        "age": rng.integers(20, 24, n),
        "level": rng.choice(list(LEVELS[:2]), n),
        "income": np.round(np.where(np.arange(n) % 5 == 0, rng.uniform(35, 45, n), rng.uniform(5, 25, n)), 1),
        "debt": rng.integers(8, 16, n),
    })


def _spec(**extra) -> SchemaSpec:
    return SchemaSpec(target="label", favorable=1, categorical=("group",), ordinal={"level": LEVELS},
                      increasing=("level",), decreasing=("debt",), max_move=0.3, **extra)


@pytest.mark.parametrize("policy, immutable", [("filter", ("group",)), ("auto", ("group", "age")),
                                               ("project", ("group", "age"))])
def test_the_short_applicants_moved_candidates_share_one_model_call(policy, immutable):
    frame = _frame()
    training = build_training_set(frame, infer_schema(frame, _spec(immutable=immutable)), RuleModel())
    raw = _applicants()
    X0 = training.encoder.encode(raw)
    codes0 = training.encoder.constraint_codes(raw)
    rows = raw.to_dict("records")
    settings = PlanSettings(k=3, margin=0.05, immutable_policy=policy)
    model = RuleModel()
    stage = CandidateStage(training, settings, model=model)
    model.calls = 0
    every = stage.find_many(X0, codes0, rows, range(len(raw)))
    n_moved = sum(bool(c.projected is not None and c.projected.any()) for c in every.values())
    assert n_moved >= 10            # most applicants need moved candidates, so the batching is exercised
    if policy == "filter":          # and some have enough as they are
        assert any(c.projected is None and len(c) >= 3 for c in every.values())
    # for all the short applicants together: one call for which end of each bound raises the probability, one
    # for their own group's moved rows, and (auto: some are still short) one for the other groups' rows; besides
    # the calls of the candidates as they are (auto and project re-predict each applicant's projected rows)
    calls, model.calls = model.calls, 0
    for i in range(len(raw)):
        stage._as_they_are(X0[i], codes0.row(i), rows[i])
    assert calls == model.calls + (3 if policy == "auto" else 2)
    for i in range(len(raw)):       # each the same as found alone
        alone = stage.find(X0[i], codes0.row(i), rows[i])
        got = every[i]
        assert np.array_equal(got.rows, alone.rows)
        assert got.reason == alone.reason
        for a, b in ((got.X, alone.X), (got.projected, alone.projected)):
            assert (a is None and b is None) or np.array_equal(a, b)
    # the moved candidates obey the bounds (30 of income's range, 6 of debt's; debt and level only the allowed
    # way; immutable values kept) and are favourable at threshold + margin
    for i, c in every.items():
        if c.projected is None or not c.projected.any():
            continue
        moved = training.encoder.decode(c.X[c.projected])      # rounded to the data's one decimal of income
        spans = {n: frame[n].max() - frame[n].min() for n in ("income", "debt")}
        for n, rounding in (("income", 0.05), ("debt", 0.0)):
            assert np.all(np.abs(moved[n].to_numpy(dtype=float) - rows[i][n]) <= 0.3 * spans[n] + rounding + 1e-9)
        assert np.all(moved["debt"].to_numpy() <= rows[i]["debt"])
        rank = {v: j for j, v in enumerate(LEVELS)}
        assert np.all(moved["level"].map(rank).to_numpy() >= rank[rows[i]["level"]])
        for n in immutable:
            assert (moved[n] == rows[i][n]).all()
        assert np.all(_score(moved) >= 0.55)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moved_batch")
    frame = _frame()
    model = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["group", "level"]),
                                    ("num", MinMaxScaler(), ["age", "income", "debt"])])),
        ("clf", LogisticRegression(C=100.0, max_iter=5000)),
    ]).fit(frame[FEATURES], frame["label"])
    paths = {"data": tmp / "train.csv", "model": tmp / "model.pkl", "applicants": tmp / "applicants.csv",
             "schema": tmp / "schema.toml"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    _applicants().to_csv(paths["applicants"], index=False)
    paths["schema"].write_text('target = "label"\nfavorable = 1\nimmutable = ["group"]\ndecreasing = ["debt"]\n'
                               'max_move = 0.3\n')
    return paths


def test_plans_do_not_depend_on_the_chunk_size_or_the_jobs(files):
    runner = CliRunner()
    args = ["plan", str(files["data"]), "--model", str(files["model"]), "--applicants", str(files["applicants"]),
            "--schema", str(files["schema"]), "--format", "jsonl"]
    outputs = {}
    for chunk, jobs in ((1, 1), (7, 1), (23, 1), (7, 2), (1, 2)):
        result = runner.invoke(app, [*args, "--chunk-size", str(chunk), "--jobs", str(jobs)])
        assert result.exit_code == 0, result.stderr
        outputs[chunk, jobs] = result.stdout
    first = outputs[1, 1]
    assert '"projected": true' in first            # moved candidates made some of the recourses
    assert all(out == first for out in outputs.values())


# ------------------------------------------------------------------------------------------------ pushed to the edge


@pytest.fixture(scope="module")
def corner(tmp_path_factory):
    """Two features x, y in 0..100, favourable when x + y > 120 (a logistic regression learns it). The favourable
    training rows all lie far out along one axis (x >= 95 with y <= 35, or the mirror image), the unfavourable
    ones below the line. An applicant at (40, 40) has no favourable row within a move of 25 (a quarter of the
    range), and every favourable row moved into its box [15, 65] x [15, 65] stays unfavourable (x + y <= 100);
    only the corner region near (65, 65), which moves the feature the row does not raise, is favourable."""
    tmp = tmp_path_factory.mktemp("corner")
    rng = np.random.default_rng(11)
    far = np.column_stack([rng.uniform(95, 100, 40), rng.uniform(28, 35, 40)])
    low = rng.uniform(0, 100, (400, 2))
    low = low[low.sum(axis=1) < 110]
    xy = np.vstack([far, far[:, ::-1], low])
    frame = pd.DataFrame({"x": np.round(xy[:, 0], 1), "y": np.round(xy[:, 1], 1)})
    frame["label"] = (frame["x"] + frame["y"] > 120).astype(int)
    model = Pipeline([("prep", MinMaxScaler()), ("clf", LogisticRegression(C=1000.0, max_iter=5000))])
    model.fit(frame[["x", "y"]], frame["label"])
    paths = {"data": tmp / "train.csv", "model": tmp / "model.pkl", "applicants": tmp / "applicants.csv"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    applicants = pd.DataFrame({"x": [40.0, 42.5, 38.0], "y": [40.0, 39.0, 44.0]})
    applicants.to_csv(paths["applicants"], index=False)
    return {**paths, "frame": frame, "estimator": model, "raw": applicants}


def test_rows_pushed_to_the_favourable_edge_of_the_bounds_give_recourses(corner):
    est, frame = corner["estimator"], corner["frame"]
    prob = est.predict_proba(frame[["x", "y"]])[:, 1]
    assert np.all((frame["x"] >= 95) | (frame["y"] >= 95) | (prob < 0.5))     # favourable rows only far out
    assert est.predict_proba(pd.DataFrame({"x": [65.0], "y": [65.0]}))[0, 1] >= 0.6
    span = {n: float(frame[n].max() - frame[n].min()) for n in ("x", "y")}
    runner = CliRunner()
    result = runner.invoke(app, ["plan", str(corner["data"]), "--model", str(corner["model"]), "--applicants",
                                 str(corner["applicants"]), "--format", "jsonl", "--k", "1"])
    assert result.exit_code == 0, result.stderr
    import json

    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 3
    for rec, (_, x0) in zip(records, corner["raw"].iterrows()):
        assert rec["status"] == "ok", rec["reason"]
        (r,) = rec["recourses"]
        assert r["projected"] is True
        point = pd.DataFrame({n: [float(r["features"][n])] for n in ("x", "y")})
        assert est.predict_proba(point)[0, 1] >= 0.55                      # valid at threshold + margin
        for n in ("x", "y"):
            assert abs(float(r["features"][n]) - x0[n]) <= 0.25 * span[n] + 1e-9


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    """x in 0..100 and an immutable group; favourable when x > 55 (the model does not read the group). Every
    row of group a has x <= 50, so no favourable row shares the applicants' group a; group b's rows (x >= 60)
    moved onto group a and into the bound (x at most 65 for an applicant at 40) are favourable."""
    tmp = tmp_path_factory.mktemp("groups")
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"group": ["a"] * 150 + ["b"] * 150,
                          "x": np.round(np.concatenate([rng.uniform(0, 50, 150), rng.uniform(60, 100, 150)]), 1)})
    frame.loc[frame.index[:20], "group"] = "b"          # a few unfavourable rows of group b too
    frame["label"] = (frame["x"] > 55).astype(int)
    model = Pipeline([("prep", ColumnTransformer([("num", MinMaxScaler(), ["x"])], remainder="drop")),
                      ("clf", LogisticRegression(C=1000.0, max_iter=5000))]).fit(frame[["group", "x"]], frame["label"])
    paths = {"data": tmp / "train.csv", "model": tmp / "model.pkl", "applicants": tmp / "applicants.csv",
             "schema": tmp / "schema.toml"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    pd.DataFrame({"group": ["a", "a"], "x": [40.0, 44.0]}).to_csv(paths["applicants"], index=False)
    paths["schema"].write_text('target = "label"\nfavorable = 1\nimmutable = ["group"]\n')
    return {**paths, "frame": frame, "estimator": model}


def _group_plans(g, *extra):
    import json

    result = CliRunner().invoke(app, ["plan", str(g["data"]), "--model", str(g["model"]), "--applicants",
                                      str(g["applicants"]), "--schema", str(g["schema"]), "--format", "jsonl",
                                      "--k", "1", *extra])
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_other_groups_rows_projected_onto_the_applicant_serve_when_its_own_group_has_none(groups):
    frame, est = groups["frame"], groups["estimator"]
    own = frame[frame["group"] == "a"]
    assert np.all(est.predict_proba(own[["group", "x"]])[:, 1] < 0.5)        # no favourable row of group a
    span = float(frame["x"].max() - frame["x"].min())
    for rec, x0 in zip(_group_plans(groups), (40.0, 44.0)):
        assert rec["status"] == "ok", rec["reason"]
        (r,) = rec["recourses"]
        assert r["projected"] is True
        assert r["features"]["group"] == "a"                                   # the immutable value kept
        assert abs(float(r["features"]["x"]) - x0) <= 0.25 * span + 1e-9
        point = pd.DataFrame({"group": ["a"], "x": [float(r["features"]["x"])]})
        assert est.predict_proba(point)[0, 1] >= 0.55
    for rec in _group_plans(groups, "--immutable-policy", "filter", "--no-direct-search"):   # own group only
        assert rec["status"] == "infeasible"
        assert "even after moving the others within --max-move" in rec["reason"]
