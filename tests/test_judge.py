"""Recourses that must satisfy several models: the judge (frpd_cli.judge) and --also-valid-for.

Oracle: two logistic regressions whose favourable half-planes overlap only partly (model A favours x1 >= 5,
model B favours x2 >= 5); every recourse is re-predicted by each model directly with scikit-learn.
"""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.judge import Judge, make_judge
from frpd_cli.planning import raised_threshold

runner = CliRunner()


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Training data on [0, 10]^2, two models with partly overlapping favourable regions, applicants."""
    folder = tmp_path_factory.mktemp("pair")
    rng = np.random.default_rng(7)
    X = pd.DataFrame({"x1": rng.uniform(0, 10, 600).round(2), "x2": rng.uniform(0, 10, 600).round(2),
                      "x3": rng.uniform(0, 10, 600).round(2)})
    label = ((X["x1"] >= 5) & (X["x2"] >= 5)).astype(int)
    a = LogisticRegression(C=100.0, max_iter=2000).fit(X, (X["x1"] >= 5).astype(int))
    b = LogisticRegression(C=100.0, max_iter=2000).fit(X, (X["x2"] >= 5).astype(int))
    data = X.assign(y=label)
    data.to_csv(folder / "train.csv", index=False)
    joblib.dump(a, folder / "a.pkl")
    joblib.dump(b, folder / "b.pkl")
    applicants = pd.DataFrame({"id": ["p", "q", "r", "s"], "x1": [2.0, 3.5, 1.0, 4.0], "x2": [2.0, 1.5, 8.0, 3.0],
                               "x3": [5.0, 5.0, 5.0, 5.0]})
    applicants.to_csv(folder / "applicants.csv", index=False)
    return {"folder": folder, "data": folder / "train.csv", "a": a, "b": b, "X": X,
            "applicants": folder / "applicants.csv", "model": folder / "a.pkl", "other": folder / "b.pkl"}


def _plan(pair, *extra, fmt="jsonl"):
    # no --max-move bound: the overlap of the two models is far from some applicants by construction
    args = ["plan", str(pair["data"]), "--model", str(pair["model"]), "--applicants", str(pair["applicants"]),
            "--target", "y", "--favorable", "1", "--id-column", "id", "--format", fmt, "-k", "3", "--max-move", "none",
            *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _recourses(text):
    return [(json.loads(line)["applicant"], r) for line in text.splitlines() for r in json.loads(line)["recourses"]]


def _proba(model, rows):
    return model.predict_proba(pd.DataFrame(rows, columns=["x1", "x2", "x3"]))[:, 1]


def test_every_recourse_lands_in_the_overlap(pair):
    out = _plan(pair, "--also-valid-for", str(pair["other"]))
    found = _recourses(out)
    assert len(found) >= 6
    rows = [r["features"] for _, r in found]
    pa, pb = _proba(pair["a"], rows), _proba(pair["b"], rows)
    assert (pa >= 0.5).all() and (pb >= 0.5).all()
    for (_, r), x, y in zip(found, pa, pb):
        assert r["probability"] == pytest.approx(x, abs=1e-6)
        assert r["probabilities"] == pytest.approx({"model": x, "also-1": y}, abs=1e-6)
    # without the other model, the same applicants get recourses model B rejects: the option is what moves them
    plain = [r["features"] for _, r in _recourses(_plan(pair))]
    assert (_proba(pair["b"], plain) < 0.5).any()
    assert all("probabilities" not in r for _, r in _recourses(_plan(pair)))


def test_margin_applies_to_every_model(pair):
    found = _recourses(_plan(pair, "--also-valid-for", str(pair["other"]), "--margin", "0.1"))
    rows = [r["features"] for _, r in found]
    assert found and (_proba(pair["a"], rows) >= 0.6 - 1e-9).all() and (_proba(pair["b"], rows) >= 0.6 - 1e-9).all()


def test_csv_appends_a_column_per_model(pair):
    out = _plan(pair, "--also-valid-for", str(pair["other"]), fmt="csv")
    header = out.splitlines()[0].split(",")
    plain_header = _plan(pair, fmt="csv").splitlines()[0].split(",")
    assert header == [*plain_header, "probability_also-1"]
    frame = pd.read_csv(pd.io.common.StringIO(out))
    ok = frame[frame["status"] == "ok"]
    assert np.allclose(ok["probability_also-1"], _proba(pair["b"], ok[["x1", "x2", "x3"]]), atol=1e-6)


def test_no_overlap_reachable_is_infeasible_with_a_reason(pair):
    # x2 may not change: applicants below x2 = 5 can never satisfy model B
    out = _plan(pair, "--also-valid-for", str(pair["other"]), "--immutable", "x2")
    plans = {json.loads(line)["applicant"]: json.loads(line) for line in out.splitlines()}
    for a in ("p", "q", "s"):
        assert plans[a]["status"] == "infeasible" and not plans[a]["recourses"]
        assert "--also-valid-for" in plans[a]["reason"]
    assert plans["r"]["status"] == "ok"         # x2 = 8: the overlap is reachable by raising x1
    rows = [r["features"] for r in plans["r"]["recourses"]]
    assert (_proba(pair["b"], rows) >= 0.5).all() and all(r["x2"] == 8.0 for r in rows)


def test_same_bytes_for_any_chunk_size(pair):
    extra = ["--also-valid-for", str(pair["other"]), "--margin", "0.05"]
    assert _plan(pair, *extra, "--chunk-size", "1") == _plan(pair, *extra, "--chunk-size", "256")


class _Fixed:
    """A model whose probability of row i is a given number."""

    takes_columns = False

    def __init__(self, p, threshold=0.5):
        self.p = np.asarray(p, dtype=np.float64)
        self.threshold = threshold

    def favorable_probability(self, rows):
        return self.p[np.asarray(rows["i"], dtype=int)]


def test_judge_score_is_threshold_plus_worst_margin():
    rows = pd.DataFrame({"i": np.arange(5)})
    main = _Fixed([0.9, 0.6, 0.5, 0.49, 0.7])
    other = _Fixed([0.55, 0.4, 0.5, 0.9, 0.5 - 1e-17], threshold=0.5)
    judge = make_judge(main, [other])
    assert isinstance(judge, Judge) and make_judge(main) is main
    score = judge.favorable_probability(rows)
    assert (score >= 0.5).tolist() == [True, False, True, False, True]      # 0.5 - 1e-17 rounds to 0.5
    assert score[0] == pytest.approx(0.55) and score[1] == pytest.approx(0.4) and score[3] == pytest.approx(0.49)
    raised = raised_threshold(judge, 0.05)       # every model at its threshold + 0.05
    assert raised.is_favorable(rows).tolist() == [True, False, False, False, False]


def test_judge_tiny_negative_margin_never_rounds_up():
    rows = pd.DataFrame({"i": [0]})
    judge = make_judge(_Fixed([0.9]), [_Fixed([0.3], threshold=0.3 + 1e-12)])
    assert not judge.is_favorable(rows)[0]


def test_judge_refits_need_a_share():
    rows = pd.DataFrame({"i": np.arange(3)})
    main = _Fixed([0.9, 0.9, 0.9])
    refits = [_Fixed([0.6, 0.6, 0.4]), _Fixed([0.6, 0.4, 0.4]), _Fixed([0.6, 0.6, 0.4]), _Fixed([0.6, 0.6, 0.6])]
    everyone = Judge(model=main, refits=tuple(refits), level=1.0, threshold=0.5)
    most = Judge(model=main, refits=tuple(refits), level=0.75, threshold=0.5)
    assert everyone.is_favorable(rows).tolist() == [True, False, False]
    assert most.is_favorable(rows).tolist() == [True, True, False]        # 3 of 4 accept row 1
    assert most.n_required_refits == 3 and Judge(model=main, refits=tuple(refits), level=0.9).n_required_refits == 4


def test_evaluate_also_model_against_an_independent_count(pair, tmp_path):
    plans = tmp_path / "plans.jsonl"
    plans.write_text(_plan(pair))                    # plain plans: model B accepts only some recourses
    args = ["evaluate", str(pair["data"]), "--model", str(pair["model"]), "--plans", str(plans), "--target", "y",
            "--favorable", "1", "--applicants", str(pair["applicants"]), "--id-column", "id",
            "--also-model", str(pair["other"])]
    per = runner.invoke(app, [*args, "--per-applicant", "--format", "json"])
    assert per.exit_code == 0, per.output
    rows = {r["applicant"]: r for r in json.loads(per.stdout)}
    shares, accepted = [], []
    for line in plans.read_text().splitlines():
        rec = json.loads(line)
        if not rec["recourses"]:
            continue
        ok = _proba(pair["b"], [r["features"] for r in rec["recourses"]]) >= 0.5
        shares.append(ok.sum() / len(ok))
        accepted.append(float(ok.any()))
        assert rows[rec["applicant"]]["recourses accepted by b.pkl"] == pytest.approx(ok.sum() / len(ok))
        assert rows[rec["applicant"]]["plans accepted by b.pkl"] == float(ok.any())
    assert 0 < np.mean(shares) < 1
    summary = runner.invoke(app, [*args, "--format", "json"])
    assert summary.exit_code == 0, summary.output
    (row,) = json.loads(summary.stdout)
    assert row["recourses accepted by b.pkl mean"] == pytest.approx(np.mean(shares))
    assert row["plans accepted by b.pkl mean"] == pytest.approx(np.mean(accepted))
    assert "cost mean" in row and "anti-diversity mean" in row


def test_lazy_score_has_the_sign_of_the_full_worst_margin():
    rng = np.random.default_rng(3)
    n = 300
    rows = pd.DataFrame({"i": np.arange(n)})
    main = _Fixed(rng.uniform(0.3, 1, n))
    others = [_Fixed(rng.uniform(0.3, 1, n)) for _ in range(2)]
    refits = tuple(_Fixed(rng.uniform(0.3, 1, n)) for _ in range(5))
    for level in (1.0, 0.6):
        judge = Judge(model=main, others=tuple(others), refits=refits, level=level, threshold=0.5)
        full = judge.worst_margin(judge.probabilities(rows))
        score = judge.favorable_probability(rows)
        assert ((score >= 0.5) == (full >= 0)).all()
        assert np.allclose(score[full >= 0], 0.5 + full[full >= 0])        # accepted rows: the exact worst margin
        assert 0 < (full >= 0).sum() < n


def test_verification_refuses_a_recourse_another_model_rejects(pair):
    from frpd_cli.dataset import build_training_set
    from frpd_cli.judge import annotate_plans
    from frpd_cli.model import load_model
    from frpd_cli.plans import Plan, Recourse
    from frpd_cli.schema import SchemaSpec, infer_schema
    from frpd_cli.verification import RecourseVerificationError, verify_plans

    frame = pd.read_csv(pair["data"])
    schema = infer_schema(frame, SchemaSpec(target="y", favorable="1"))
    models = [load_model(pair[k], favorable=schema.favorable, feature_names=schema.feature_names)
              for k in ("model", "other")]
    judge = make_judge(models[0], models[1:])
    training = build_training_set(frame, schema, judge)
    applicant = {"x1": 2.0, "x2": 2.0, "x3": 5.0}

    def plan(features):
        rec = Recourse(rank=1, features=features, changes={}, cost=1.0, probability=0.0, prototype=0)
        return Plan("a", "ok", None, "quad", (rec,), applicant)

    both = annotate_plans(judge, [plan({"x1": 8.0, "x2": 8.0, "x3": 5.0})], schema.feature_names)
    assert verify_plans(training, judge, both) is both
    only_a = annotate_plans(judge, [plan({"x1": 8.0, "x2": 2.0, "x3": 5.0})], schema.feature_names)
    assert (_proba(pair["a"], [only_a[0].recourses[0].features]) >= 0.5).all()
    with pytest.raises(RecourseVerificationError, match="accepted by also-1"):
        verify_plans(training, judge, only_a)
    unannotated = [plan({"x1": 8.0, "x2": 8.0, "x3": 5.0})]
    with pytest.raises(RecourseVerificationError):
        verify_plans(training, judge, unannotated)


def test_judge_spread_takes_each_refit_s_times_as_far_from_the_model():
    rows = pd.DataFrame({"i": np.arange(4)})
    main = _Fixed([0.9, 0.7, 0.7, 0.52])
    refit = _Fixed([0.7, 0.62, 0.75, 0.6])
    plain = Judge(model=main, refits=(refit,), threshold=0.5)
    wide = Judge(model=main, refits=(refit,), threshold=0.5, spread=3.0)
    assert plain.is_favorable(rows).tolist() == [True, True, True, True]
    # 0.9 + 3 (0.7 - 0.9) = 0.3; 0.7 + 3 (-0.08) = 0.46; 0.7 + 3 (0.05) = 0.85; 0.52 + 3 (0.08) = 0.76
    assert wide.is_favorable(rows).tolist() == [False, False, True, True]
    assert wide.favorable_probability(rows)[2] == pytest.approx(0.7)        # the model is the worst there
    assert wide.worst_margin(wide.probabilities(rows)) == pytest.approx([-0.2, -0.04, 0.2, 0.02])
    assert "--robust-spread" in wide.describe() and "--robust-spread" not in plain.describe()


def test_judge_spread_lazy_score_has_the_sign_of_the_full_worst_margin():
    rng = np.random.default_rng(4)
    n = 300
    rows = pd.DataFrame({"i": np.arange(n)})
    main = _Fixed(rng.uniform(0.4, 1, n))
    refits = tuple(_Fixed(rng.uniform(0.3, 1, n)) for _ in range(4))
    judge = Judge(model=main, others=(_Fixed(rng.uniform(0.3, 1, n)),), refits=refits, threshold=0.5, spread=2.0)
    full = judge.worst_margin(judge.probabilities(rows))
    score = judge.favorable_probability(rows)
    assert ((score >= 0.5) == (full >= 0)).all() and 0 < (full >= 0).sum() < n
    assert np.allclose(score[full >= 0], 0.5 + full[full >= 0])
