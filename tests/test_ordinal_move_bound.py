"""The move bound (``--max-move``) holds ordinal features too: a recourse moves an ordinal at most the share of the
steps between its lowest and highest level, rounded up (at least one level), from the applicant's level. Checked
against the level positions of every recourse, with a witness that the model would otherwise ask for more."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from frpd_cli.dataset import build_training_set
from frpd_cli.planning import PlanSettings, plan_applicants
from frpd_cli.schema import Feature, Schema, SchemaSpec, infer_schema
from frpd_cli.verification import RecourseVerificationError, verify_plans

THRESHOLD, MARGIN = 0.5, 0.05
EDU = tuple(f"e{i}" for i in range(8))          # 7 steps: at 0.25, ceil(1.75) = 2 levels either way


class LadderModel:
    """Favourable when the level of ``edu`` (0-7) + hours / 10 + the job's bonus reaches 8: a low level needs a
    long climb unless hours or the job make up for it."""

    threshold = THRESHOLD

    def favorable_probability(self, rows):
        f = pd.DataFrame(rows)
        z = (np.array([EDU.index(v) for v in f["edu"]], dtype=float) + 0.1 * f["hours"].to_numpy(dtype=float)
             + np.array([{"a": 0.0, "b": 1.0, "c": 2.0}[v] for v in f["job"]]) - 8.0)
        return 1.0 / (1.0 + np.exp(-z))


def _frame(n: int = 900, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"edu": rng.choice(EDU, n), "hours": rng.integers(10, 60, n), "job": rng.choice(list("abc"), n)})
    frame["label"] = (LadderModel().favorable_probability(frame) >= THRESHOLD).astype(int)
    return frame


def _spec(**extra) -> SchemaSpec:
    return SchemaSpec(target="label", favorable=1, categorical=("job",), integer=("hours",),
                      ordinal={"edu": list(EDU)}, increasing=("edu",), **extra)


def _plans(spec: SchemaSpec, n_applicants: int = 40):
    frame, model = _frame(), LadderModel()
    training = build_training_set(frame, infer_schema(frame, spec), model)
    applicants = frame[model.favorable_probability(frame) < THRESHOLD].drop(columns="label").head(n_applicants)
    applicants = applicants.reset_index(drop=True)
    ids = [str(i) for i in range(len(applicants))]
    settings = PlanSettings(k=3, margin=MARGIN, sparsify=True)
    plans = [p for chunk in plan_applicants(training, model, applicants, ids, settings) for p in chunk]
    return training, applicants, plans


def _level_moves(applicants, plans) -> list[int]:
    return [EDU.index(r.features["edu"]) - EDU.index(x0["edu"])
            for plan, (_, x0) in zip(plans, applicants.iterrows()) for r in plan.recourses]


@pytest.mark.parametrize("n_levels, share, expected", [
    (8, 0.25, 2), (16, 0.25, 4), (4, 0.25, 1), (5, 0.25, 1), (3, 0.25, 1), (8, 0.5, 4), (8, 0.1, 1),
    (2, 0.25, None),          # one step: every level is within one level
    (8, 1.0, None), (8, math.inf, None)])
def test_the_bound_is_the_share_of_the_steps_rounded_up_and_at_least_one_level(n_levels, share, expected):
    levels = [f"l{i}" for i in range(n_levels)]
    frame = pd.DataFrame({"o": levels * 2, "x": np.arange(2 * n_levels, dtype=float), "label": [0, 1] * n_levels})
    schema = infer_schema(frame, SchemaSpec(target="label", ordinal={"o": levels}, max_move=share))
    f = schema.feature("o")
    assert f.max_levels == expected and f.max_move_share == share and f.max_move is None
    stored = Schema.from_dict(json.loads(json.dumps(schema.to_dict(), allow_nan=False))).feature("o")
    # artifacts keep it (as JSON); a bound declared none is stored as no bound, as for a numeric feature
    assert stored == (f if math.isfinite(share) else replace(f, max_move_share=None))
    frozen = infer_schema(frame, SchemaSpec(target="label", ordinal={"o": levels}, immutable=("o",), max_move=share))
    assert frozen.feature("o").max_levels is None                       # nothing to bound
    if expected is not None:
        low, high = f.level_window(np.arange(n_levels))
        assert low.tolist() == [max(i - expected, 0) for i in range(n_levels)]
        assert high.tolist() == [min(i + expected, n_levels - 1) for i in range(n_levels)]


def test_no_recourse_moves_an_ordinal_past_its_bound_and_the_model_would_ask_for_more():
    _, applicants, plans = _plans(_spec(max_move=0.25))
    moves = _level_moves(applicants, plans)
    assert len(moves) > 40 and max(moves) <= 2 and min(moves) >= 0 and max(moves) == 2
    model = LadderModel()
    for plan in plans:
        for r in plan.recourses:
            assert model.favorable_probability([r.features])[0] >= THRESHOLD + MARGIN
    # the witness: without the bound on edu (the numbers keep theirs), the same applicants get climbs of 3 and more
    _, _, free = _plans(_spec(max_move=0.25, max_moves={"edu": math.inf}))
    assert max(_level_moves(applicants, free)) >= 4


def test_an_applicant_out_of_reach_is_told_which_bound_and_how_many_rows_it_rules_out():
    _, applicants, plans = _plans(_spec(max_move=0.25), n_applicants=120)
    reasons = [p.reason for p in plans if p.status == "infeasible"]
    bound = [r for r in reasons if "move edu by more than 2 levels, --max-move 0.25 of its levels" in r]
    assert bound, reasons
    # and the rows it counts are the favourable rows of the applicant's reach more than 2 levels up
    frame = _frame()
    favourable = frame[LadderModel().favorable_probability(frame) >= THRESHOLD + MARGIN]
    plan = next(p for p in plans if p.reason in bound)
    x0 = applicants.iloc[[p.applicant for p in plans].index(plan.applicant)]
    far = int((np.abs(favourable["edu"].map(EDU.index) - EDU.index(x0["edu"])) > 2).sum())
    assert f"{far} move edu by more than 2 levels" in plan.reason


def test_moved_candidates_are_brought_into_the_levels_of_reach():
    # applicants whose own favourable rows all lie farther: the rows moved into the bounds keep edu within 2
    # levels (marked projected), and some such recourse exists on this data
    _, applicants, plans = _plans(_spec(max_move=0.25), n_applicants=120)
    projected = [(r, x0) for plan, (_, x0) in zip(plans, applicants.iterrows()) for r in plan.recourses
                 if r.projected]
    assert projected
    assert all(0 <= EDU.index(r.features["edu"]) - EDU.index(x0["edu"]) <= 2 for r, x0 in projected)


def test_verification_refuses_an_ordinal_moved_past_its_bound():
    training, applicants, plans = _plans(_spec(max_move=0.25), n_applicants=10)
    plan = next(p for p in plans if p.recourses and EDU.index(applicants.iloc[int(p.applicant)]["edu"]) <= 4)
    x0 = applicants.iloc[int(plan.applicant)]
    far = {**plan.recourses[0].features, "edu": EDU[EDU.index(x0["edu"]) + 3], "hours": 59}
    bad = replace(plan, recourses=(replace(plan.recourses[0], features=far,
                                           probability=float(LadderModel().favorable_probability([far])[0])),))
    with pytest.raises(RecourseVerificationError, match=r"inside its --max-move bound \(a move of at most 2 levels"):
        verify_plans(training.encoder, LadderModel(), [bad], margin=MARGIN)


def test_a_bound_declared_for_an_ordinal_is_written_to_the_schema_file_and_read_back(tmp_path):
    from frpd_cli.schema import load_schema_file, schema_to_toml

    frame = _frame(60)
    schema = infer_schema(frame, _spec(max_move=0.25, max_moves={"edu": 0.5}))
    assert schema.feature("edu").max_levels == 4
    text = schema_to_toml(schema)
    assert "[max_move]" in text and "0.5" in text
    (tmp_path / "schema.toml").write_text(text)
    again = infer_schema(frame, load_schema_file(tmp_path / "schema.toml"))
    assert again.feature("edu") == schema.feature("edu") and again.feature("hours") == schema.feature("hours")


def test_an_ordinal_without_a_bound_may_take_every_level():
    f = Feature("o", "ordinal", levels=("a", "b", "c"))
    assert f.max_levels is None and f.move_text == ""
    assert [w.tolist() for w in f.level_window([0, 2])] == [[0, 0], [2, 2]]


@pytest.mark.parametrize("declared, expected", [(0.25, 2), (None, 0)])
def test_evaluate_counts_a_level_beyond_a_declared_bound_as_a_range_violation(declared, expected):
    # plans of another tool: one recourse climbs 3 levels, one 2, one 4; only a declared bound is audited
    from frpd_cli.evaluation import evaluate_plans

    frame, model = _frame(), LadderModel()
    spec = _spec() if declared is None else _spec(max_move=declared)
    training = build_training_set(frame, infer_schema(frame, spec), model)
    applicant = pd.DataFrame([{"edu": "e1", "hours": 30, "job": "a"}])
    recourses = [{"rank": j + 1, "features": {"edu": level, "hours": 30, "job": "a"}}
                 for j, level in enumerate(("e4", "e3", "e5"))]
    record = {"applicant": "0", "status": "ok", "reason": None, "method": "other", "recourses": recourses}
    row = evaluate_plans([record], training, model, applicant, ["0"]).iloc[0]
    assert row["violations"] == expected


def test_projected_rows_take_the_nearest_level_inside_the_window_and_a_missing_one_stays_missing():
    from frpd_cli.candidates import project_rows

    frame = _frame(200)
    frame.loc[3, "edu"] = None
    model = LadderModel()
    spec = SchemaSpec(target="label", favorable=1, categorical=("job",), integer=("hours",),
                      ordinal={"edu": list(EDU)}, max_move=0.25)                      # edu may go either way
    training = build_training_set(frame.dropna(), infer_schema(frame.dropna(), spec), model)
    object.__setattr__(training, "frame", frame.drop(columns="label"))     # a row without a level, as read
    raw0 = pd.Series({"edu": "e3", "hours": 30, "job": "a"})
    out = project_rows(training, np.arange(len(frame)), raw0)
    expected = [None if pd.isna(v) else EDU[min(max(EDU.index(v), 1), 5)] for v in frame["edu"]]   # e1..e5
    assert [None if pd.isna(v) else v for v in out["edu"]] == expected
    assert sum(v is not None and v != w for v, w in zip(expected, frame["edu"])) > 20       # many were moved
