"""Recourses of a plan point in different directions when the model allows it (frpd_cli.directions): a recourse
that moves like a cheaper one of its plan is replaced by one along other features, valid at the margin, 1-minimal
and inside every bound; and the moves tried stay inside the training range."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import frpd_cli.directions as directions
from frpd_cli.candidates import favourable_edges
from frpd_cli.dataset import build_training_set
from frpd_cli.directions import SAME_DIRECTION, favourable_levels, same_direction_repeats
from frpd_cli.planning import PlanSettings, plan_applicants
from frpd_cli.schema import SchemaSpec, infer_schema

THRESHOLD, MARGIN, BOUND = 0.5, 0.05, 0.25


def _score(frame: pd.DataFrame) -> np.ndarray:
    """Favourable when 2a + b + c is high: ``a`` pays twice, ``b`` and ``c`` alone can do it too."""
    f = {c: frame[c].to_numpy(dtype=float) for c in ("a", "b", "c")}
    z = (2.0 * f["a"] + f["b"] + f["c"] - 26.0) / 2.0
    return 1.0 / (1.0 + np.exp(-z))


class RuleModel:
    threshold = THRESHOLD

    def favorable_probability(self, rows):
        return _score(pd.DataFrame(rows))


def _training(n: int = 600, seed: int = 0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"group": rng.choice(["x", "y"], n), "a": np.round(rng.uniform(0, 20, n), 2),
                          "b": np.round(rng.uniform(0, 20, n), 2), "c": np.round(rng.uniform(0, 20, n), 2)})
    frame["label"] = (_score(frame) >= THRESHOLD).astype(int)
    spec = SchemaSpec(target="label", favorable=1, categorical=("group",), immutable=("group",), max_move=BOUND)
    return build_training_set(frame, infer_schema(frame, spec), RuleModel())


def _applicants(n: int = 12, seed: int = 1) -> pd.DataFrame:
    """2a + b + c between 20 and 24: a move of a (or of b or c alone, twice as far) inside the bound of 5 is enough."""
    rng = np.random.default_rng(seed)
    a = np.round(rng.uniform(5, 7, n), 2)
    b = np.round(rng.uniform(4, 6, n), 2)
    c = np.round(20.0 + rng.uniform(0, 4, n) - 2 * a - b, 2)
    return pd.DataFrame({"group": rng.choice(["x", "y"], n), "a": a, "b": b, "c": c})


def _plans(training, applicants, **kw):
    settings = PlanSettings(k=3, margin=MARGIN, sparsify=True)
    ids = [str(i) for i in range(len(applicants))]
    return [p for chunk in plan_applicants(training, RuleModel(), applicants, ids, settings, **kw) for p in chunk]


def _moves(training, plan, x0) -> np.ndarray:
    names = list(training.schema.feature_names)
    Z = training.encoder.encode(pd.DataFrame([r.features for r in plan.recourses])[names], source="test")
    X0 = training.encoder.encode(pd.DataFrame([x0])[names], source="test")
    return Z - X0


def _max_cosine(D: np.ndarray) -> float:
    A = D / np.linalg.norm(D, axis=1)[:, None]
    S = A @ A.T
    return float(np.max(S[np.triu_indices(len(D), k=1)]))


def test_recourses_move_along_different_features_when_each_alone_suffices():
    training = _training()
    applicants = _applicants()
    plans = _plans(training, applicants)
    model = RuleModel()
    for plan, (_, x0) in zip(plans, applicants.iterrows()):
        assert plan.status == "ok" and len(plan.recourses) == 3, plan.reason
        # three options in three directions (a alone, b alone, c alone are all within the bound)
        assert _max_cosine(_moves(training, plan, x0)) < SAME_DIRECTION, [r.changes for r in plan.recourses]
        for r in plan.recourses:
            row = pd.DataFrame([r.features])
            assert _score(row)[0] >= THRESHOLD + MARGIN
            assert r.features["group"] == x0["group"]
            for name in ("a", "b", "c"):
                assert abs(float(r.features[name]) - float(x0[name])) <= BOUND * 20 + 1e-9
            for name in r.changes:         # 1-minimal: undoing any one change is rejected at the margin
                undone = row.copy()
                undone[name] = x0[name]
                assert model.favorable_probability(undone)[0] < THRESHOLD + MARGIN


def test_without_the_replacement_the_plans_repeat_one_direction(monkeypatch):
    """The constructed data does provoke repeats: with the rule switched off, plans hold same-direction recourses
    (so the test above checks the rule, not the data). A recourse another one dominates is a repeat too: that rule
    is switched off as well."""
    monkeypatch.setattr(directions, "SAME_DIRECTION", 1.5)
    monkeypatch.setattr(directions, "dominated", lambda encoder, Z, *a: np.zeros(len(Z), dtype=bool))
    training = _training()
    applicants = _applicants()
    plans = _plans(training, applicants)
    repeated = sum(_max_cosine(_moves(training, p, x0)) >= SAME_DIRECTION
                   for p, (_, x0) in zip(plans, applicants.iterrows()) if len(p.recourses) > 1)
    assert repeated >= len(plans) // 2


def test_plans_do_not_depend_on_the_chunk_size_or_the_workers():
    training = _training()
    applicants = _applicants()
    one = _plans(training, applicants, chunk_size=1)
    assert _plans(training, applicants, chunk_size=5) == one
    assert _plans(training, applicants, chunk_size=4, n_jobs=2) == one


def test_same_direction_repeats_keeps_the_cheaper_of_each_direction():
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(2, 7))
        D = rng.normal(size=(n, 3))
        D[rng.random(n) < 0.4] *= 0          # some segments without a move are never repeats nor kept
        D[1] = D[0] * rng.uniform(0.5, 2.0) + rng.normal(scale=0.05, size=3)
        groups = np.sort(rng.integers(0, 2, n))
        usable = rng.random(n) < 0.9
        rep = set(same_direction_repeats(D, groups, usable))
        norms = np.linalg.norm(D, axis=1)
        A = D / np.where(norms > 0, norms, 1.0)[:, None]
        for g in set(groups.tolist()):
            segs = [s for s in np.flatnonzero((groups == g) & usable & (norms > 0))]
            kept = [s for s in segs if s not in rep]
            cos = A @ A.T
            for i, s in enumerate(kept):        # the kept ones point apart
                assert all(cos[s, t] < SAME_DIRECTION for t in kept[i + 1:])
            for s in rep & set(segs):           # each repeat points like a kept one no dearer than itself
                assert any(cos[s, t] >= SAME_DIRECTION and (norms[t], t) < (norms[s], s) for t in kept)
        assert all(usable[s] and norms[s] > 0 for s in rep)


def test_favourable_edges_stay_inside_the_training_range():
    """A decrease the model rewards stops at the training minimum (0 debts), not at the applicant's value minus
    the bound (-2 debts); an applicant already below the minimum keeps its own value as the limit."""
    frame = pd.DataFrame({"debts": [0, 1, 2, 3, 4, 8, 12, 16, 20, 5], "label": [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]})
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, max_move=BOUND))

    class Fewer:
        threshold = 0.5

        def favorable_probability(self, rows):
            return 1.0 / (1.0 + np.exp(pd.DataFrame(rows)["debts"].to_numpy(dtype=float) - 2.0))

    training = build_training_set(frame, schema, Fewer())
    edges = favourable_edges(training.encoder, Fewer(), [{"debts": 3}, {"debts": 12}])
    assert edges["debts"].tolist() == [0.0, 7.0]      # 12 - 0.25 * 20 = 7, inside the range


def test_favourable_levels_pick_the_best_allowed_level():
    levels = ("none", "basic", "degree", "masters")
    frame = pd.DataFrame({"school": list(levels) * 3, "colour": ["red", "green", "blue"] * 4,
                          "label": [0, 1] * 6})
    spec = SchemaSpec(target="label", favorable=1, ordinal={"school": levels}, increasing=("school",),
                      categorical=("colour",))
    schema = infer_schema(frame, spec)
    gain = {"none": 0.0, "basic": 0.3, "degree": 0.2, "masters": 0.1, "red": 0.0, "green": -0.1, "blue": 0.05}

    class Table:
        threshold = 0.5

        def favorable_probability(self, rows):
            rows = pd.DataFrame(rows)
            return 0.2 + rows["school"].map(gain).to_numpy() + rows["colour"].map(gain).to_numpy()

    base = pd.DataFrame({"school": ["none", "degree", "masters"], "colour": ["green", "blue", "red"]})
    out = favourable_levels(schema, Table(), base)
    # school only upwards: from 'degree' the higher 'masters' is worse, so nothing; colour to the best other level
    assert out["school"] == ["basic", None, None]
    assert out["colour"] == ["blue", None, "blue"]


ORDER = ("low", "mid", "high", "top")


def _dominance_encoder(scale: str):
    from frpd_cli.encoding import fit_encoder

    frame = pd.DataFrame({"x": [0.0, 2.5, 5.0, 10.0], "n": [0, 3, 7, 9], "c": ["a", "b", "c", "a"],
                          "o": list(ORDER)})
    spec = SchemaSpec(categorical=("c",), integer=("n",), ordinal={"o": list(ORDER)})
    schema = infer_schema(frame.assign(label=[0, 1, 0, 1]), spec)
    return fit_encoder(schema, frame, scale=scale)


def _dominates_raw(a: dict, b: dict, x0: dict, category: str = "c", ordinal: str = "o", order=ORDER) -> bool:
    """Brute force in raw values: ``a`` differs from ``b`` and every change of ``a`` is in ``b``, at least as far
    (``category`` names the categorical feature, ``ordinal`` the ordinal one with its levels ``order``)."""
    if a == b:
        return False
    for name, value in a.items():
        if value == x0[name]:
            continue
        if b[name] == x0[name] or (name == category and b[name] != value):
            return False
        if name != category:
            da, db = ((order.index(value) - order.index(x0[name]), order.index(b[name]) - order.index(x0[name]))
                      if name == ordinal else (value - x0[name], b[name] - x0[name]))
            if da * db <= 0 or abs(da) > abs(db):
                return False
    return True


@pytest.mark.parametrize("scale", ["minmax", "effort"])
def test_dominated_matches_a_brute_force_over_raw_values(scale):
    from frpd_cli.directions import dominated

    encoder = _dominance_encoder(scale)
    rng = np.random.default_rng(5)
    x0s, rows, groups = [], [], []
    for g in range(150):
        x0 = {"x": float(rng.choice([2.5, 5.0])), "n": int(rng.choice([3, 7])), "c": str(rng.choice(["a", "b"])),
              "o": str(rng.choice(ORDER[:3]))}
        for _ in range(int(rng.integers(1, 5))):
            # each feature kept or moved, drawn from a few values so that equal and nested moves occur often
            row = {"x": x0["x"] if rng.random() < 0.5 else float(rng.choice([0.0, 2.5, 4.0, 5.0, 7.5, 10.0])),
                   "n": x0["n"] if rng.random() < 0.5 else int(rng.choice([0, 3, 5, 7, 9])),
                   "c": x0["c"] if rng.random() < 0.5 else str(rng.choice(["a", "b", "c"])),
                   "o": x0["o"] if rng.random() < 0.5 else str(rng.choice(ORDER))}
            x0s.append(x0)
            rows.append(row)
            groups.append(g)
    usable = rng.random(len(rows)) < 0.9
    got = dominated(encoder, encoder.encode(pd.DataFrame(rows)), encoder.encode(pd.DataFrame(x0s)),
                    np.asarray(groups), usable)
    want = [bool(usable[j]) and any(usable[i] and groups[i] == groups[j] and _dominates_raw(rows[i], rows[j], x0s[j])
                                    for i in range(len(rows)) if i != j) for j in range(len(rows))]
    assert got.tolist() == want
    assert 20 < sum(want) < len(rows) - 20          # the draw holds both kinds


EDU = ("e0", "e1", "e2", "e3", "e4", "e5")
JOB_BONUS = {"a": 0.0, "b": 1.0, "c": 2.0}


class LadderModel:
    """Favourable when the level of ``edu`` (0-5) + hours / 10 + the job's bonus reaches 7: every ``edu`` level
    up helps, so the prototypes' high levels are often more than a recourse needs."""

    threshold = THRESHOLD

    def favorable_probability(self, rows):
        f = pd.DataFrame(rows)
        z = (np.array([EDU.index(v) for v in f["edu"]], dtype=float) + 0.1 * f["hours"].to_numpy(dtype=float)
             + np.array([JOB_BONUS[v] for v in f["job"]]) - 7.0)
        return 1.0 / (1.0 + np.exp(-z))


def _ladder_plans():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"edu": rng.choice(EDU, 800), "hours": rng.integers(10, 60, 800),
                          "job": rng.choice(list("abc"), 800)})
    model = LadderModel()
    frame["label"] = (model.favorable_probability(frame) >= THRESHOLD).astype(int)
    spec = SchemaSpec(target="label", favorable=1, categorical=("job",), integer=("hours",),
                      ordinal={"edu": list(EDU)}, increasing=("edu",))
    training = build_training_set(frame, infer_schema(frame, spec), model)
    applicants = frame[model.favorable_probability(frame) < THRESHOLD].drop(columns="label").head(40)
    applicants = applicants.reset_index(drop=True)
    settings = PlanSettings(k=3, margin=MARGIN, sparsify=True)
    ids = [str(i) for i in range(len(applicants))]
    plans = [p for chunk in plan_applicants(training, model, applicants, ids, settings) for p in chunk]
    return model, applicants, plans


def _ladder_counts(model, applicants, plans) -> tuple[int, int, int]:
    """Recourses another of their plan dominates, recourses whose ``edu`` a level between would do (at the
    threshold plus the margin, every other value kept), and the recourses."""
    n_dominated = n_high = n = 0
    for plan, (_, x0) in zip(plans, applicants.iterrows()):
        rows = [r.features for r in plan.recourses]
        n += len(rows)
        n_dominated += sum(any(_dominates_raw(a, b, x0, "job", "edu", EDU) for a in rows) for b in rows)
        for r in rows:
            between = [{**r, "edu": EDU[k]} for k in range(EDU.index(x0["edu"]) + 1, EDU.index(r["edu"]))]
            if between and (model.favorable_probability(between) >= THRESHOLD + MARGIN).any():
                n_high += 1
    return n_dominated, n_high, n


def test_no_plan_offers_a_recourse_another_one_dominates_or_a_level_higher_than_needed():
    model, applicants, plans = _ladder_plans()
    n_dominated, n_high, n = _ladder_counts(model, applicants, plans)
    assert (n_dominated, n_high) == (0, 0) and n > 60
    for plan in plans:
        for r in plan.recourses:
            assert model.favorable_probability([r.features])[0] >= THRESHOLD + MARGIN


def test_without_lowering_and_dominance_the_ladder_plans_offer_dominated_recourses(monkeypatch):
    """The ladder provokes both: with the two rules switched off, plans hold dominated recourses and levels higher
    than needed (so the test above checks the rules, not the data)."""
    import frpd_cli.sparsify as sparsify

    monkeypatch.setattr(directions, "dominated", lambda encoder, Z, *a: np.zeros(len(Z), dtype=bool))
    monkeypatch.setattr(sparsify, "_lower_levels", lambda encoder, model, best, raw, probability, active:
                        (np.zeros(len(active), dtype=bool), 0))
    n_dominated, n_high, _ = _ladder_counts(*_ladder_plans())
    assert n_dominated >= 5 and n_high >= 10
