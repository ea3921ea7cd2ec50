"""No plan holds two recourses that are the same advice (frpd_cli.directions.same_advice): the same changed
features, the same levels, numeric targets less than SAME_ADVICE of the feature's span apart. A linear model on
integer features gives trade-offs between two features that prototypes in nearly one direction turn into
recourses a unit or two apart (``a: 127 -> 181, b: 59 -> 89`` beside ``a: 127 -> 180, b: 59 -> 91``)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from frpd_cli.dataset import build_training_set
from frpd_cli.encoding import fit_encoder
from frpd_cli.planning import PlanSettings, plan_applicants
from frpd_cli.schema import Feature, Schema, SchemaSpec, infer_schema, move_span

THRESHOLD = 0.5
#: The documented tolerance (frpd_cli.directions.SAME_ADVICE), written out so the oracle does not lean on the code.
SHARE = 0.01


def _score(frame: pd.DataFrame) -> np.ndarray:
    f = {c: frame[c].to_numpy(dtype=float) for c in ("a", "b", "c")}
    z = (f["a"] + 0.5 * f["b"] + 0.2 * f["c"] - 250.0) / 4.0
    return 1.0 / (1.0 + np.exp(-z))


class LinearModel:
    threshold = THRESHOLD

    def favorable_probability(self, rows):
        return _score(pd.DataFrame(rows))


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.integers(0, 301, n) for c in ("a", "b", "c")})
    frame["label"] = (_score(frame) >= THRESHOLD).astype(int)
    return frame


def _training(frame: pd.DataFrame):
    return build_training_set(frame, infer_schema(frame, SchemaSpec(target="label", favorable=1, max_move=0.25)),
                              LinearModel())


def _applicants(n: int = 40, seed: int = 1) -> pd.DataFrame:
    """Short of the boundary by 80 to 100: more than a (or b, or c) can move alone inside the move bound of 75, so
    every recourse trades a against b or c, and prototypes in nearly one direction make nearly one trade."""
    rng = np.random.default_rng(seed)
    a = rng.integers(60, 160, n)
    b = rng.integers(20, 160, n)
    short = rng.uniform(80, 100, n)
    c = np.clip(np.round((250.0 - short - a - 0.5 * b) / 0.2), 0, 300).astype(int)
    frame = pd.DataFrame({"a": a, "b": b, "c": c})
    gap = 250.0 - (frame.a + 0.5 * frame.b + 0.2 * frame.c)
    return frame[(gap >= 80) & (gap <= 100)].reset_index(drop=True)


def _plans(training, applicants, **kw):
    settings = PlanSettings(k=5, sparsify=True, **kw)
    ids = [str(i) for i in range(len(applicants))]
    return [p for chunk in plan_applicants(training, LinearModel(), applicants, ids, settings) for p in chunk]


def _alike(spans: dict, r, s) -> bool:
    """The rule written out on raw values: same changed features (all numeric here), every target within the
    tolerance of the move bound's span."""
    if set(r.changes) != set(s.changes):
        return False
    return all(abs(float(r.features[n]) - float(s.features[n])) < SHARE * spans[n] for n in r.changes)


def test_no_plan_holds_two_recourses_that_are_the_same_advice():
    frame = _frame()
    training = _training(frame)
    spans = {c: move_span(frame[c]) for c in ("a", "b", "c")}
    applicants = _applicants()
    plans = _plans(training, applicants)
    names = list(training.schema.feature_names)
    n_recourses = 0
    for plan in plans:
        assert plan.status == "ok", plan.reason
        for r, s in itertools.combinations(plan.recourses, 2):
            assert not _alike(spans, r, s), (plan.applicant, r.changes, s.changes)
        for r in plan.recourses:             # every recourse still valid and an actual change
            assert _score(pd.DataFrame([r.features])[names])[0] >= THRESHOLD
            assert r.changes
        assert [r.cost for r in plan.recourses] == sorted(r.cost for r in plan.recourses)
        n_recourses += len(plan.recourses)
    # the rule leaves the plans their other options: most plans keep several recourses
    assert n_recourses >= 3 * len(plans)
    dropped = [p for p in plans if p.reason and "the same advice as a cheaper recourse" in p.reason]
    assert dropped and all(p.partial for p in dropped if len(p.recourses) < 5)
    # a plan depends on its applicant only: planned alone, each of these gets the plan it got in the batch
    for i in [int(p.applicant) for p in dropped[:3]]:
        alone = _plans(training, applicants.iloc[[i]].reset_index(drop=True))[0]
        assert [r.features for r in alone.recourses] == [r.features for r in plans[i].recourses]


def test_same_advice_keeps_the_cheapest_of_alike_recourses():
    from frpd_cli.directions import same_advice

    schema = Schema(features=(Feature("term", "integer"), Feature("amount", "continuous"),
                              Feature("kind", "categorical", levels=("p", "q"))), target="y", favorable=1)
    enc = fit_encoder(schema, pd.DataFrame({"term": [0, 300], "amount": [0.0, 1000.0], "kind": ["p", "q"]}),
                      scale="minmax")
    now = pd.DataFrame({"term": [240] * 6, "amount": [0.0] * 6, "kind": ["p"] * 6})
    rows = pd.DataFrame({"term": [173, 174, 171, 174, 174, 240],
                         "amount": [500.0, 495.0, 500.0, 530.0, 495.0, 495.0],
                         "kind": ["p", "p", "p", "p", "q", "p"]})
    out = same_advice(enc, rows, enc.encode(rows), enc.encode(now), np.zeros(6, dtype=int), np.ones(6, dtype=bool))
    # 174/495 is cheaper than 173/500 and alike (1 of 300, 5 of 1000): 173/500 goes. 171/500 is alike to 173/500
    # only, which went; from 174/495 it is 3 of 300 (not less than 1%). 174/530 is 35 of 1000 from it; kind q is
    # another change, term unchanged another set of changes
    assert out.tolist() == [True, False, False, False, False, False]
