"""Flags under the move bound: a numeric feature holding two whole values one apart (0 and 1) is a change of
state, not a scale, so ``--max-move`` (a share of the training range) does not keep it fixed; a recourse may flip
it, the run says so, and a flag that must not change is declared (``--immutable``, ``--increasing``)."""

from __future__ import annotations

import itertools
import json

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()
MARGIN = 0.05          # frpd's default margin at threshold 0.5: recourses reach probability 0.55


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _records(result):
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def _linear_model(frame: pd.DataFrame, features, weights, intercept):
    """A logistic model with the given weights on the raw features (a fitted pipeline whose coefficients are set,
    so the test knows the model exactly)."""
    pipe = Pipeline([("clf", LogisticRegression())]).fit(frame[features], frame["label"])
    pipe[-1].coef_ = np.asarray([weights], dtype=np.float64)
    pipe[-1].intercept_ = np.asarray([intercept], dtype=np.float64)
    return pipe


def _probability(model, rows: pd.DataFrame, features) -> np.ndarray:
    return model.predict_proba(rows[features])[:, 1]


def _oracle(model, frame: pd.DataFrame, features, x0: dict, *, bounded: dict, fixed=()):
    """Every favourable point (probability >= 0.5 + margin) of a grid and the least cost of one: each bounded
    numeric feature at 401 values within its bound of the applicant (and the applicant's), each flag at both values
    (a ``fixed`` one at the applicant's). Costs are distances in the default (effort) scale of the training rows.

    Returns ``(favourable grid points, least cost)`` (``inf`` when none is favourable)."""
    from frpd_cli.encoding import fit_encoder
    from frpd_cli.schema import infer_schema

    encoder = fit_encoder(infer_schema(frame), frame, scale="effort")
    axes = []
    for n in features:
        if n in bounded:
            low = max(float(frame[n].min()), x0[n] - bounded[n])
            high = min(float(frame[n].max()), x0[n] + bounded[n])
            axes.append(np.union1d(np.linspace(low, high, 401), [x0[n]]))
        else:
            axes.append([x0[n]] if n in fixed else [0, 1])
    grid = pd.DataFrame(list(itertools.product(*axes)), columns=features)
    ok = _probability(model, grid, features) >= 0.5 + MARGIN
    cost = np.linalg.norm(encoder.encode(grid) - encoder.encode(pd.DataFrame([x0])[features]), axis=1)
    return grid[ok], (float(cost[ok].min()) if ok.any() else np.inf)


# --------------------------------------------------------------------- a flip that is the only recourse


@pytest.fixture(scope="module")
def owner(tmp_path_factory):
    """``income`` (0-100) and the flag ``owns``; the model accepts exactly the rows that own (income weighs
    nothing), so the only recourse of an applicant who does not own is to own."""
    folder = tmp_path_factory.mktemp("flags_owner")
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"income": np.round(rng.uniform(0, 100, 200), 1), "owns": rng.integers(0, 2, 200)})
    frame["label"] = frame["owns"]
    features = ["income", "owns"]
    model = _linear_model(frame, features, [0.0, 8.0], -4.0)
    applicants = frame.loc[frame["owns"] == 0, features].head(6).reset_index(drop=True)
    paths = {"data": folder / "train.csv", "model": folder / "model.pkl", "applicants": folder / "applicants.csv"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    applicants.to_csv(paths["applicants"], index=False)
    return {**paths, "frame": frame, "estimator": model, "raw": applicants, "features": features, "tmp": folder}


def _plan(c, *extra):
    return _run("plan", c["data"], "--model", c["model"], "--applicants", c["applicants"], "--format", "jsonl",
                *extra)


def test_the_only_recourse_flips_the_flag_and_costs_what_the_oracle_finds(owner):
    result = _plan(owner)
    records = _records(result)
    assert [r["status"] for r in records] == ["ok"] * len(owner["raw"])
    for rec in records:
        x0 = owner["raw"].iloc[int(rec["applicant"])].to_dict()
        favourable, best = _oracle(owner["estimator"], owner["frame"], owner["features"], x0,
                                   bounded={"income": 0.25 * float(np.ptp(owner["frame"]["income"]))})
        assert (favourable["owns"] == 1).all()             # no recourse keeps the flag
        # the flip alone, at the effort scale's price of any flip: half of the rows at each of the two values
        assert best == pytest.approx(0.5)
        for r in rec["recourses"]:
            assert r["features"]["owns"] == 1 and r["changes"]["owns"] == [0, 1]
        assert min(r["cost"] for r in rec["recourses"]) == pytest.approx(best, abs=1e-9)
        assert rec["recourses"][0]["changes"] == {"owns": [0, 1]}


def test_the_run_speaks_of_a_flag_and_never_of_a_move_by_a_share(owner):
    result = _plan(owner)
    assert result.exit_code == 0, result.stderr
    assert "Note: feature 'owns' (0/1) of" in result.stderr and "is a flag" in result.stderr
    assert "--immutable owns" in result.stderr
    assert "move owns by" not in result.stdout + result.stderr
    # declared immutable, the flag keeps its value: the plans are infeasible and the reason says why, as for any
    # immutable feature; the note has nothing left to say
    fixed = _plan(owner, "--immutable", "owns")
    records = _records(fixed)
    assert {r["status"] for r in records} == {"infeasible"}
    assert all("differ in owns" in r["reason"] and "move owns" not in r["reason"] for r in records)
    assert "is a flag" not in fixed.stderr
    # with every bound lifted there is no bound to say it does not hold
    assert "is a flag" not in _plan(owner, "--max-move", "none").stderr


def test_a_share_declared_for_the_flag_alone_still_holds_it(owner, tmp_path):
    # --max-move owns=0.5 (or [max_move] owns = 0.3) is the user's own bound for this feature: it keeps meaning
    # what it meant (a move of at most half of the range: no flip), so scripts that relied on it plan the same
    result = _plan(owner, "--max-move", "owns=0.5")
    assert {r["status"] for r in _records(result)} == {"infeasible"}
    schema = tmp_path / "schema.toml"
    schema.write_text("[max_move]\nowns = 0.3\n")
    assert {r["status"] for r in _records(_plan(owner, "--schema", schema))} == {"infeasible"}
    assert "is a flag" not in result.stderr               # declared: nothing to note
    # none, and a share of the whole range, let it flip as before
    for value in ("owns=none", "owns=1"):
        assert [r["status"] for r in _records(_plan(owner, "--max-move", value))] == ["ok"] * len(owner["raw"])


def test_frpd_schema_notes_a_flag_that_may_flip(owner, tmp_path):
    # labels that the flag alone does not give (one row in 8 the other way: else the note says it separates them)
    frame = owner["frame"].copy()
    frame.loc[::8, "label"] = 1 - frame.loc[::8, "label"]
    data = tmp_path / "train.csv"
    frame.to_csv(data, index=False)
    result = _run("schema", data, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = {r["column"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert rows["owns"]["note"].startswith("a 0/1 flag: a recourse may flip it")
    assert rows["income"]["note"] == ""
    fixed = _run("schema", data, "--immutable", "owns", "--format", "jsonl")
    assert {r["column"]: r for r in map(json.loads, fixed.stdout.splitlines())}["owns"]["note"] == ""


# -------------------------------------------- moved candidates: the other flags at their favourable level


@pytest.fixture(scope="module")
def estate(tmp_path_factory):
    """``amount`` (0-100), the flags ``sel`` and ``estate``; score amount/10 - 3 sel + 3 estate, accepted from
    8.5. Every training row above amount 30 has ``sel`` 1, so the favourable rows (sel 1, estate 1, amount >= 85)
    lie beyond the bound of an applicant at amount 50 (25): moved into it they are refused (sel 1 costs 3), and
    only with ``sel`` back at the applicant's 0 and ``estate`` flipped does the model accept them."""
    folder = tmp_path_factory.mktemp("flags_estate")
    rng = np.random.default_rng(11)
    amount = np.round(rng.uniform(0, 100, 400), 1)
    frame = pd.DataFrame({"amount": amount, "sel": np.where(amount > 30, 1, rng.integers(0, 2, 400)),
                          "estate": rng.integers(0, 2, 400)})
    score = frame["amount"] / 10 - 3 * frame["sel"] + 3 * frame["estate"]
    frame["label"] = (score >= 8.5).astype(int)
    features = ["amount", "sel", "estate"]
    model = _linear_model(frame, features, [0.4, -12.0, 12.0], -34.0)     # 4 * (score - 8.5)
    applicants = pd.DataFrame({"amount": [50.0, 45.0, 52.5], "sel": [0, 0, 0], "estate": [0, 0, 0]})
    paths = {"data": folder / "train.csv", "model": folder / "model.pkl", "applicants": folder / "applicants.csv"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    applicants.to_csv(paths["applicants"], index=False)
    return {**paths, "frame": frame, "estimator": model, "raw": applicants, "features": features}


def test_moved_rows_take_each_flag_at_its_favourable_level(estate):
    records = _records(_plan(estate, "-k", "1"))
    bound = 0.25 * float(np.ptp(estate["frame"]["amount"]))
    assert [r["status"] for r in records] == ["ok"] * len(estate["raw"])
    for rec in records:
        x0 = estate["raw"].iloc[int(rec["applicant"])].to_dict()
        (r,) = rec["recourses"]
        assert r["projected"] is True
        assert r["features"]["sel"] == 0 and r["features"]["estate"] == 1
        assert abs(r["features"]["amount"] - x0["amount"]) <= bound + 1e-9
        favourable, best = _oracle(estate["estimator"], estate["frame"], estate["features"], x0,
                                   bounded={"amount": bound})
        # within the bound the model accepts only sel at 0 and estate flipped, and no recourse costs less than
        # the cheapest such point (the linear segment flips estate half-way, with amount moved half-way too)
        assert len(favourable) and (favourable["sel"] == 0).all() and (favourable["estate"] == 1).all()
        assert best - 1e-9 <= r["cost"] <= best + 0.02


def test_favourable_edges_of_a_flag_are_its_more_favourable_level():
    from frpd_cli.candidates import favourable_edges, held_flags
    from frpd_cli.encoding import fit_encoder
    from frpd_cli.schema import SchemaSpec, infer_schema

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"amount": rng.uniform(0, 100, 50), "sel": rng.integers(0, 2, 50),
                          "estate": rng.integers(0, 2, 50), "label": rng.integers(0, 2, 50)})
    frame.loc[:1, ["sel", "estate"]] = [[0, 0], [1, 1]]
    encoder = fit_encoder(infer_schema(frame, SchemaSpec(max_move=0.25)), frame)
    assert [f.name for f in held_flags(encoder)] == ["sel", "estate"]

    class Linear:
        threshold = 0.5

        def favorable_probability(self, rows):
            z = rows["amount"].to_numpy(float) / 50 - 2 * rows["sel"].to_numpy(float) + rows["estate"].to_numpy(float)
            return 1 / (1 + np.exp(-z))

    raw0 = [{"amount": a, "sel": s, "estate": e} for a, s, e in itertools.product([10.0, 60.0], [0, 1], [0, 1])]
    edges = favourable_edges(encoder, Linear(), raw0)
    for i, row in enumerate(raw0):
        for name in ("sel", "estate"):
            levels = [dict(row, **{name: v}) for v in (row[name], 1 - row[name])]      # own level first: ties keep it
            p = Linear().favorable_probability(pd.DataFrame(levels))
            assert edges[name][i] == levels[int(np.argmax(p))][name]


# ------------------------------------------------------------------------------------------ invariants


@pytest.fixture(scope="module")
def business(tmp_path_factory):
    """Loans: ``amount``, ``years`` (integer 0-40) and three flags: ``new`` (a fact: declared immutable),
    ``estate`` (may only be acquired: increasing) and ``guarantee`` (free); all raise the score but ``new``."""
    folder = tmp_path_factory.mktemp("flags_business")
    rng = np.random.default_rng(7)
    n = 500
    frame = pd.DataFrame({"amount": np.round(rng.uniform(0, 100, n), 1), "years": rng.integers(0, 41, n),
                          "new": rng.integers(0, 2, n), "estate": rng.integers(0, 2, n),
                          "guarantee": rng.integers(0, 2, n)})
    score = frame["amount"] / 20 + frame["years"] / 10 - frame["new"] + 2 * frame["estate"] + 1.5 * frame["guarantee"]
    frame["label"] = (score > 6).astype(int)
    features = ["amount", "years", "new", "estate", "guarantee"]
    model = _linear_model(frame, features, [0.1, 0.2, -2.0, 4.0, 3.0], -12.0)       # 2 * (score - 6)
    proba = _probability(model, frame, features)
    applicants = frame.loc[proba < 0.3, features].head(30).reset_index(drop=True)
    paths = {"data": folder / "train.csv", "model": folder / "model.pkl", "applicants": folder / "applicants.csv"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    applicants.to_csv(paths["applicants"], index=False)
    return {**paths, "frame": frame, "estimator": model, "raw": applicants, "features": features}


def test_every_recourse_is_valid_keeps_the_declared_flags_and_may_flip_the_others(business):
    records = _records(_plan(business, "--immutable", "new", "--increasing", "estate"))
    frame, features = business["frame"], business["features"]
    bounds = {"amount": 0.25 * float(np.ptp(frame["amount"])), "years": np.floor(0.25 * float(np.ptp(frame["years"])))}
    flips = {"estate": 0, "guarantee": 0}
    n_recourses = 0
    for rec in records:
        x0 = business["raw"].iloc[int(rec["applicant"])]
        for r in rec["recourses"]:
            n_recourses += 1
            row = pd.DataFrame([r["features"]])
            assert _probability(business["estimator"], row, features)[0] >= 0.5 + MARGIN - 1e-12
            assert r["features"]["new"] == x0["new"]                       # immutable
            assert r["features"]["estate"] >= x0["estate"]                 # increasing
            for name in ("new", "estate", "guarantee"):
                assert r["features"][name] in (0, 1)
            for name, bound in bounds.items():                             # the scales keep their bound
                assert abs(r["features"][name] - x0[name]) <= bound + 1e-9
            for name in flips:
                flips[name] += r["features"][name] != x0[name]
    assert n_recourses > 0
    assert flips["estate"] > 0 and flips["guarantee"] > 0
