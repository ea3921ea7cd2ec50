"""Sparse recourses and the probability margin: oracles on tiny linear models, invariants on real models."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_planning import _plans, _setup, check_invariants
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set
from frpd_cli.evaluation import evaluate_plans, summarize_by_method
from frpd_cli.exceptions import InputError
from frpd_cli.interpolation import interpolate_linear
from frpd_cli.planning import PlanSettings
from frpd_cli.plans import Plan, Recourse
from frpd_cli.schema import SchemaSpec, infer_schema, load_schema_file
from frpd_cli.sparsify import COST_FACTOR, sparsify_recourses
from frpd_cli.verification import RecourseVerificationError, verify_plans

runner = CliRunner()


class LinearScore:
    """A model whose favourable probability is the logistic of a hand-written linear score of raw values."""

    threshold = 0.5

    def __init__(self, weights: dict, bias: float, levels: dict | None = None):
        self.weights, self.bias, self.levels = weights, bias, levels or {}

    def score(self, rows: pd.DataFrame) -> np.ndarray:
        s = np.full(len(rows), self.bias, dtype=np.float64)
        for name, w in self.weights.items():
            s += w * rows[name].to_numpy(dtype=np.float64)
        for name, table in self.levels.items():
            s += np.array([table.get(v, 0.0) for v in rows[name]], dtype=np.float64)
        return s

    def favorable_probability(self, rows) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.score(rows)))


def _unit_training(model, extra=None, n=400, seed=0, ranges=None):
    """Training rows spanning [0, 1] exactly on x1, x2, x3 (so the encoding is the identity), scored by ``model``."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x1": rng.uniform(0, 1, n).round(4), "x2": rng.uniform(0, 1, n).round(4),
                          "x3": rng.uniform(0, 1, n).round(4)})
    frame.loc[0, ["x1", "x2", "x3"]] = 0.0
    frame.loc[1, ["x1", "x2", "x3"]] = 1.0
    if extra is not None:
        for name, values in extra.items():
            frame[name] = [values[i % len(values)] for i in range(n)]
    frame["label"] = (model.favorable_probability(frame) >= 0.5).astype(int)
    schema = infer_schema(frame, SchemaSpec(continuous=("x1", "x2", "x3"), ranges=ranges or {}))
    return build_training_set(frame, schema, model), frame


def _sparse_one(training, model, applicant: dict, prototype: dict, **kw):
    encoder = training.encoder
    raw0 = pd.DataFrame([applicant])[list(training.schema.feature_names)]
    proto = pd.DataFrame([prototype])[list(training.schema.feature_names)]
    X0, XK = encoder.encode(raw0), encoder.encode(proto)
    plain = interpolate_linear(encoder, model, X0, XK, raw0)
    assert plain.found[0]
    sparse = sparsify_recourses(encoder, model, X0, XK, raw0, plain.rows, plain.probability, found=plain.found, **kw)
    cost = lambda rows: float(np.linalg.norm(encoder.encode(rows) - X0))   # noqa: E731
    return plain, sparse, cost(plain.rows), cost(sparse.rows)


def _changed(row: dict, applicant: dict) -> set:
    return {n for n in applicant if row[n] != applicant[n]}


# ------------------------------------------------------------------ oracles


def test_only_the_feature_the_model_needs_is_changed_and_it_stops_on_the_boundary():
    # score 10 x1 + 0.1 x2 + 0.1 x3 - 5: with x2 = x3 = 0.2 the boundary is x1 = 0.496; x2, x3 are not needed
    model = LinearScore({"x1": 10.0, "x2": 0.1, "x3": 0.1}, -5.0)
    training, _ = _unit_training(model)
    applicant = {"x1": 0.3, "x2": 0.2, "x3": 0.2}
    plain, sparse, plain_cost, sparse_cost = _sparse_one(training, model, applicant, {"x1": 0.9, "x2": 0.9, "x3": 0.9})
    assert _changed(plain.rows.iloc[0].to_dict(), applicant) == {"x1", "x2", "x3"}
    row = sparse.rows.iloc[0].to_dict()
    assert _changed(row, applicant) == {"x1"}
    assert sparse.n_changes[0] == 1 and sparse.kept[0]
    assert 0.496 <= row["x1"] <= 0.496 + 0.6 * 1e-3 + 1e-4            # bisection tolerance on a 0.6-long move
    assert sparse.probability[0] >= 0.5
    assert sparse.probability[0] == model.favorable_probability(sparse.rows)[0]
    assert sparse_cost == pytest.approx(row["x1"] - 0.3) and sparse_cost < plain_cost


def test_two_features_needed_together_are_both_kept_and_the_useless_one_dropped():
    # score 3 x1 + 3 x2 + 0 x3 - 4.5: neither x1 nor x2 alone can reach it (x1 <= 1 gives 3 + 0.6 < 4.5)
    model = LinearScore({"x1": 3.0, "x2": 3.0, "x3": 0.0}, -4.5)
    training, _ = _unit_training(model)
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.5}
    plain, sparse, plain_cost, sparse_cost = _sparse_one(training, model, applicant, {"x1": 1.0, "x2": 1.0, "x3": 0.0})
    assert _changed(plain.rows.iloc[0].to_dict(), applicant) == {"x1", "x2", "x3"}
    assert _changed(sparse.rows.iloc[0].to_dict(), applicant) == {"x1", "x2"}
    assert sparse.probability[0] >= 0.5 and sparse_cost <= plain_cost


def test_an_unneeded_categorical_flip_is_returned_to_the_applicants_category():
    model = LinearScore({"x1": 10.0, "x2": 0.0, "x3": 0.0}, -8.0, levels={"colour": {"red": 0.0, "blue": 0.0}})
    training, _ = _unit_training(model, extra={"colour": ["red", "blue"]})
    applicant = {"x1": 0.2, "x2": 0.5, "x3": 0.5, "colour": "red"}
    plain, sparse, plain_cost, sparse_cost = _sparse_one(training, model, applicant,
                                                         {"x1": 1.0, "x2": 0.5, "x3": 0.5, "colour": "blue"})
    assert "colour" in _changed(plain.rows.iloc[0].to_dict(), applicant)     # the plain scheme flips it (t > 0.5)
    row = sparse.rows.iloc[0].to_dict()
    assert _changed(row, applicant) == {"x1"} and row["colour"] == "red"
    assert sparse_cost < plain_cost


def test_a_single_change_dearer_than_the_bound_is_not_taken_but_a_pair_within_it_is():
    # 4 (x1 + x2 + x3) - 4 from (0.2, 0.2, 0.2) towards (1, 1, 1): the plain recourse moves each by 0.1333
    # (cost 0.2309); one feature alone needs a 0.4 move (1.73 times that), two features need 0.2 each (cost
    # 0.2828, 1.22 times). By default (never more than the plain cost) the plain recourse is kept; with a cost
    # factor of 1.5 the pair is taken, and with 2 the single feature.
    model = LinearScore({"x1": 4.0, "x2": 4.0, "x3": 4.0}, -4.0)
    training, _ = _unit_training(model)
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.2}
    proto = {"x1": 1.0, "x2": 1.0, "x3": 1.0}
    plain, default, plain_cost, default_cost = _sparse_one(training, model, applicant, proto)
    assert COST_FACTOR == 1.0
    assert _changed(plain.rows.iloc[0].to_dict(), applicant) == {"x1", "x2", "x3"}
    assert plain_cost == pytest.approx(0.2309, abs=2e-3)
    assert default.rows.equals(plain.rows) and default.n_changes[0] == 3 and default_cost == plain_cost
    _, pair, _, pair_cost = _sparse_one(training, model, applicant, proto, cost_factor=1.5)
    row = pair.rows.iloc[0].to_dict()
    assert len(_changed(row, applicant)) == 2 and pair.n_changes[0] == 2
    assert pair_cost == pytest.approx(0.2828, abs=2e-3) and pair_cost <= 1.5 * plain_cost
    assert pair.probability[0] >= 0.5
    _, alone, _, alone_cost = _sparse_one(training, model, applicant, proto, cost_factor=2.0)
    assert alone.n_changes[0] == 1 and alone_cost == pytest.approx(0.4, abs=2e-3) and alone.probability[0] >= 0.5


def test_one_feature_moved_past_the_prototypes_value_suffices_within_the_bound():
    # 4 x1 + 2 x2 - 4 from (0.2, 0.2, 0.5) towards (0.55, 1, 0.5): the plain recourse is at s = 2.8 / 3 of the
    # segment (cost 0.9333 * |(0.35, 0.8)| = 0.8150, bound 1.2225). x1 alone needs 0.9 (a 0.7 move, t = 2 along
    # x1's own direction: past the prototype's 0.55, within the bound, in the training range); x2 alone would need
    # 1.6 (outside it). Up to the prototype's values only no single feature serves, and both stay changed.
    model = LinearScore({"x1": 4.0, "x2": 2.0, "x3": 0.0}, -4.0)
    training, _ = _unit_training(model)
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.5}
    proto = {"x1": 0.55, "x2": 1.0, "x3": 0.5}
    plain, sparse, plain_cost, sparse_cost = _sparse_one(training, model, applicant, proto, past_prototype=True)
    assert plain_cost == pytest.approx(0.8150, abs=2e-3)
    row = sparse.rows.iloc[0].to_dict()
    assert _changed(row, applicant) == {"x1"} and sparse.n_changes[0] == 1 and sparse.kept[0]
    assert 0.9 <= row["x1"] <= 0.9 + 0.35 * 1e-3 + 1e-4          # bisection tolerance on t, x1 moves 0.35 per unit
    assert sparse.probability[0] >= 0.5 and sparse.probability[0] == model.favorable_probability(sparse.rows)[0]
    assert sparse_cost == pytest.approx(row["x1"] - 0.2) and sparse_cost <= COST_FACTOR * plain_cost
    _, upto, _, _ = _sparse_one(training, model, applicant, proto, past_prototype=False)   # up to the prototype
    assert _changed(upto.rows.iloc[0].to_dict(), applicant) == {"x1", "x2"} and upto.n_changes[0] == 2


def test_the_users_range_stops_a_feature_short_of_what_it_would_need_past_the_prototype():
    # the case above with --range x1=0:0.85: x1 alone would need 0.9, so both features stay changed and x1 <= 0.85
    model = LinearScore({"x1": 4.0, "x2": 2.0, "x3": 0.0}, -4.0)
    training, _ = _unit_training(model, ranges={"x1": "0:0.85"})
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.5}
    _, sparse, _, _ = _sparse_one(training, model, applicant, {"x1": 0.55, "x2": 1.0, "x3": 0.5},
                                  past_prototype=True)
    row = sparse.rows.iloc[0].to_dict()
    assert _changed(row, applicant) == {"x1", "x2"} and row["x1"] <= 0.85 and sparse.probability[0] >= 0.5


def test_the_training_range_stops_a_feature_the_bound_would_let_past_it():
    # 4 x1 + 2 x2 - 4.6 from (0.2, 0.2, 0.5) towards (0.7, 1, 0.5): the plain recourse is at s = 3.4 / 3.6 (cost
    # 0.9444 * |(0.5, 0.8)| = 0.8910, bound 1.3365). x1 alone would need 1.05 (a 0.85 move: within the bound) but
    # the training range ends at 1 (4.4 - 4.6 < 0 there); x2 alone would need 1.9. So both stay changed.
    model = LinearScore({"x1": 4.0, "x2": 2.0, "x3": 0.0}, -4.6)
    training, frame = _unit_training(model)
    assert frame["x1"].max() == 1.0
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.5}
    plain, sparse, plain_cost, sparse_cost = _sparse_one(training, model, applicant, {"x1": 0.7, "x2": 1.0, "x3": 0.5},
                                                         past_prototype=True)
    assert plain_cost == pytest.approx(0.8910, abs=2e-3)
    row = sparse.rows.iloc[0].to_dict()
    assert _changed(row, applicant) == {"x1", "x2"} and sparse.n_changes[0] == 2
    assert row["x1"] <= 1.0 and sparse.probability[0] >= 0.5 and sparse_cost <= COST_FACTOR * plain_cost + 1e-9
    # with a wider training range on x1 (up to 1.2), the same applicant's recourse changes x1 alone, at 1.05
    wide, _ = _unit_training(model, extra={"x1": list(np.linspace(0.0, 1.2, 400).round(4))})
    _, alone, _, _ = _sparse_one(wide, model, applicant, {"x1": 0.7, "x2": 1.0, "x3": 0.5}, past_prototype=True)
    row = alone.rows.iloc[0].to_dict()
    assert _changed(row, applicant) == {"x1"} and 1.05 <= row["x1"] <= 1.05 + 0.5 * 1e-3 + 1e-4


def test_max_changes_trades_cost_for_fewer_changes_when_asked():
    # the case above with --max-changes 1: a dearer single change (one feature from 0.2 to 0.6) is accepted
    model = LinearScore({"x1": 4.0, "x2": 4.0, "x3": 4.0}, -4.0)
    training, _ = _unit_training(model)
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.2}
    proto = {"x1": 1.0, "x2": 1.0, "x3": 1.0}
    _, capped, plain_cost, capped_cost = _sparse_one(training, model, applicant, proto, max_changes=1)
    row = capped.rows.iloc[0].to_dict()
    (name,) = _changed(row, applicant)
    assert capped.kept[0] and capped.n_changes[0] == 1
    assert 0.6 <= row[name] <= 0.6 + 1e-3
    assert capped.probability[0] >= 0.5 and capped_cost > COST_FACTOR * plain_cost


def _two_segments(training, model, applicant: dict, prototype: dict, **kw):
    """The same applicant and prototype twice (two recourses of one plan), sparsified together."""
    encoder = training.encoder
    names = list(training.schema.feature_names)
    raw0 = pd.DataFrame([applicant, applicant])[names]
    X0, XK = encoder.encode(raw0), encoder.encode(pd.DataFrame([prototype, prototype])[names])
    plain = interpolate_linear(encoder, model, X0, XK, raw0)
    assert plain.found.all()
    return sparsify_recourses(encoder, model, X0, XK, raw0, plain.rows, plain.probability, found=plain.found, **kw)


def test_recourses_of_one_applicant_prefer_features_the_others_do_not_change():
    # 4.1 x1 + 4 x2 - 4 from (0.2, 0.2) towards (1, 1): the plain recourse moves both by 0.294 (cost 0.416);
    # x1 alone needs a 0.581 move, x2 alone 0.595 (both within a cost factor of 1.5), so each alone is a
    # one-change recourse and x1 is the cheaper. The first recourse takes x1; the second, of the same applicant,
    # takes x2 (the same row again would add nothing to the plan); recourses of different applicants both take x1.
    model = LinearScore({"x1": 4.1, "x2": 4.0, "x3": 0.0}, -4.0)
    training, _ = _unit_training(model)
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.5}
    proto = {"x1": 1.0, "x2": 1.0, "x3": 0.5}
    same = _two_segments(training, model, applicant, proto, groups=np.array([0, 0]), cost_factor=1.5)
    first, second = (same.rows.iloc[i].to_dict() for i in (0, 1))
    assert _changed(first, applicant) == {"x1"} and _changed(second, applicant) == {"x2"}
    assert (4.0 - 0.8) / 4.1 <= first["x1"] <= (4.0 - 0.8) / 4.1 + 1e-3
    assert (4.0 - 0.82) / 4.0 <= second["x2"] <= (4.0 - 0.82) / 4.0 + 1e-3
    assert (same.probability >= 0.5).all() and list(same.n_changes) == [1, 1]
    apart = _two_segments(training, model, applicant, proto, groups=np.array([0, 1]), cost_factor=1.5)
    assert [_changed(apart.rows.iloc[i].to_dict(), applicant) for i in (0, 1)] == [{"x1"}, {"x1"}]
    assert apart.rows.iloc[[0]].reset_index(drop=True).equals(same.rows.iloc[[0]].reset_index(drop=True))


def _colour_case(ranges=None, ordinal=False):
    """4 x1 + colour - 5 with colour red 2, blue 0, green 4.5 (ordinal: red < blue < green, decreasing).

    The applicant (x1 0.2, blue) scores -4.2; the prototype (x1 1, red) 1. Towards the prototype no single
    feature serves (x1 alone reaches -1 at most; red alone -2.2), so the recourse towards it changes both x1
    and the colour (the plain one: x1 0.75, red, cost sqrt(0.55^2 + 2) = 1.517). Green alone scores 0.3: the
    only recourse of one change, at cost sqrt(2) (a one-hot flip), within the bound.
    """
    model = LinearScore({"x1": 4.0, "x2": 0.0, "x3": 0.0}, -5.0,
                        levels={"colour": {"red": 2.0, "blue": 0.0, "green": 4.5}})
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x1": rng.uniform(0, 1, 300).round(4), "x2": rng.uniform(0, 1, 300).round(4),
                          "x3": rng.uniform(0, 1, 300).round(4),
                          "colour": [("red", "blue", "green")[i % 3] for i in range(300)]})
    frame.loc[0, ["x1", "x2", "x3"]] = 0.0
    frame.loc[1, ["x1", "x2", "x3"]] = 1.0
    frame["label"] = (model.favorable_probability(frame) >= 0.5).astype(int)
    spec = SchemaSpec(continuous=("x1", "x2", "x3"), ranges=ranges or {},
                      ordinal={"colour": ("red", "blue", "green")} if ordinal else {},
                      decreasing=("colour",) if ordinal else ())
    training = build_training_set(frame, infer_schema(frame, spec), model)
    applicant = {"x1": 0.2, "x2": 0.5, "x3": 0.5, "colour": "blue"}
    prototype = {"x1": 1.0, "x2": 0.5, "x3": 0.5, "colour": "red"}
    return training, model, applicant, prototype


def test_a_categorical_level_other_than_the_prototypes_gives_a_recourse_of_one_change():
    training, model, applicant, prototype = _colour_case()
    plain, sparse, plain_cost, sparse_cost = _sparse_one(training, model, applicant, prototype)
    assert _changed(plain.rows.iloc[0].to_dict(), applicant) == {"x1", "colour"}
    assert plain_cost == pytest.approx(np.sqrt(0.55 ** 2 + 2.0), abs=2e-3)
    row = sparse.rows.iloc[0].to_dict()
    assert _changed(row, applicant) == {"colour"} and row["colour"] == "green" and sparse.n_changes[0] == 1
    assert sparse.probability[0] == model.favorable_probability(sparse.rows)[0] >= 0.5
    assert sparse_cost == pytest.approx(np.sqrt(2.0)) and sparse_cost <= COST_FACTOR * plain_cost
    # the prototype's own directions alone (levels of its own choice switched off) keep both changes
    import frpd_cli.sparsify as module

    try:
        module.FREE_LEVELS = False
        _, own, _, _ = _sparse_one(training, model, applicant, prototype)
    finally:
        module.FREE_LEVELS = True
    assert _changed(own.rows.iloc[0].to_dict(), applicant) == {"x1", "colour"}


@pytest.mark.parametrize("case", [{"ranges": {"colour": "red,blue"}}, {"ordinal": True}],
                         ids=["green not an allowed level", "decreasing ordinal"])
def test_a_level_the_rules_forbid_is_never_offered(case):
    # --range colour=red,blue, or colour decreasing (red < blue < green): green is not a level this recourse may
    # take, so it keeps its two changes (x1 and red), as the plain recourse
    training, model, applicant, prototype = _colour_case(**case)
    plain, sparse, _, _ = _sparse_one(training, model, applicant, prototype)
    row = sparse.rows.iloc[0].to_dict()
    assert row["colour"] == "red" and _changed(row, applicant) == {"x1", "colour"} and sparse.probability[0] >= 0.5


def test_a_second_recourse_takes_an_orthogonal_pair_rather_than_the_first_ones_direction():
    # 6 x1 + 3 x2 + 3 x3 - 6 from (0.2, 0.2, 0.2) towards (1, 1, 1), two recourses of one applicant (cost factor 3):
    # only x1 serves alone (x1 = 0.8, cost 0.6); of the pairs, {x1, x2} is the cheapest (0.4 each, cost 0.566) and
    # {x2, x3} needs 0.6 each (cost 0.849) but is orthogonal to the first recourse. The first recourse takes x1;
    # the second {x2, x3}: changes + 2 * cosine = 2 + 0 against 2 + 2 * 0.707 for {x1, x2}. Weighing diversity
    # at 0, the second takes the cheaper {x1, x2} (the same direction in part).
    import frpd_cli.sparsify as module

    model = LinearScore({"x1": 6.0, "x2": 3.0, "x3": 3.0}, -6.0)
    training, _ = _unit_training(model)
    applicant = {"x1": 0.2, "x2": 0.2, "x3": 0.2}
    proto = {"x1": 1.0, "x2": 1.0, "x3": 1.0}
    same = _two_segments(training, model, applicant, proto, groups=np.array([0, 0]), cost_factor=3.0)
    changed = [_changed(same.rows.iloc[i].to_dict(), applicant) for i in (0, 1)]
    assert changed == [{"x1"}, {"x2", "x3"}] and (same.probability >= 0.5).all()
    second = same.rows.iloc[1].to_dict()
    assert 1.6 <= second["x2"] + second["x3"] <= 1.6 + 2e-3
    weight, module.DIVERSITY = module.DIVERSITY, 0.0
    try:
        blind = _two_segments(training, model, applicant, proto, groups=np.array([0, 0]), cost_factor=3.0)
    finally:
        module.DIVERSITY = weight
    assert [_changed(blind.rows.iloc[i].to_dict(), applicant) for i in (0, 1)] == [{"x1"}, {"x1", "x2"}]


def test_cost_factor_is_validated():
    model = LinearScore({"x1": 4.1, "x2": 4.0, "x3": 0.0}, -4.0)
    training, _ = _unit_training(model)
    with pytest.raises(InputError, match="cost_factor"):
        _two_segments(training, model, {"x1": 0.2, "x2": 0.2, "x3": 0.5}, {"x1": 1.0, "x2": 1.0, "x3": 0.5},
                      cost_factor=0.5)


def test_max_changes_drops_a_recourse_that_cannot_be_short_enough_and_says_so():
    model = LinearScore({"x1": 3.0, "x2": 3.0, "x3": 0.0}, -4.5)
    training, frame = _unit_training(model)
    applicant = pd.DataFrame([{"x1": 0.2, "x2": 0.2, "x3": 0.5}])
    plans = _plans(training, model, applicant, PlanSettings(method="nearest", k=2, max_changes=1))
    assert plans[0].status == "infeasible" and plans[0].recourses == ()
    assert "change more than 1 feature(s) even after sparsification (--max-changes)" in plans[0].reason
    plans = _plans(training, model, applicant, PlanSettings(method="nearest", k=2, max_changes=2))
    assert plans[0].status == "ok"
    assert all(len(r.changes) <= 2 for r in plans[0].recourses)


def test_max_changes_is_validated():
    with pytest.raises(InputError, match="max_changes"):
        PlanSettings(max_changes=0).validate()
    with pytest.raises(InputError, match="graph recourses keep their paths"):
        PlanSettings(max_changes=2, scheme="graph").validate()
    with pytest.raises(InputError, match="margin"):
        PlanSettings(margin=-0.1).validate()


# ------------------------------------------------------------------ invariants on real models


def _by_prototype(plan):
    return {r.prototype: r for r in plan.recourses}


def _compare_with_plain(training, model, applicants, factor=None, **kw):
    """Sparse vs plain plans of the same applicants: per prototype, no more changes, and a cost within the bound
    (``factor`` times the plain recourse's: by default the replacement of a dominated recourse's,
    :data:`frpd_cli.directions.DOMINATED_COST_FACTOR`, since that recourse would otherwise leave the plan)."""
    from frpd_cli.directions import DOMINATED_COST_FACTOR

    factor = max(COST_FACTOR, DOMINATED_COST_FACTOR) if factor is None else factor
    sparse = _plans(training, model, applicants, PlanSettings(k=3, **kw))
    plain = _plans(training, model, applicants, PlanSettings(k=3, sparsify=False, **kw))
    n_compared = n_fewer = 0
    for s, p in zip(sparse, plain):
        assert s.status == p.status
        ref = _by_prototype(p)
        for r in s.recourses:
            q = ref.get(r.prototype)
            if q is None:         # the plain plan merged this prototype's recourse with a closer one
                continue
            n_compared += 1
            assert r.cost <= factor * q.cost + 1e-9, (s.applicant, r.prototype)
            assert len(r.changes) <= len(q.changes), (s.applicant, r.prototype)
            n_fewer += len(r.changes) < len(q.changes)
    return sparse, n_compared, n_fewer


def test_sparse_sample_recourses_never_change_more_nor_cost_more_than_the_bound(sample_paths, monkeypatch):
    import frpd_cli.directions as directions

    spec = load_schema_file(sample_paths["schema"])
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"])
    sparse, n_compared, n_fewer = _compare_with_plain(training, model, applicants)
    assert n_compared >= 40 and n_fewer >= n_compared // 2
    assert check_invariants(sparse, training, sample_paths["model"], applicants, 3) == len(applicants)
    # only the replacement of a dominated recourse costs more than its prototype's plain recourse: held to the
    # plain cost, every recourse keeps the bound
    monkeypatch.setattr(directions, "DOMINATED_COST_FACTOR", 1.0)
    _compare_with_plain(training, model, applicants, factor=COST_FACTOR)


@pytest.mark.parametrize("margin", [0.0, 0.05])
def test_sparse_german_recourses_hold_every_invariant_at_the_margin(german, margin):
    import joblib

    model_path, features = german.model_path, german.features
    training, model = _setup(german.train_path, model_path,
                             SchemaSpec(immutable=("Personal status",), increasing=("Age",)))
    denied = german.denied.head(30)
    sparse, n_compared, _ = _compare_with_plain(training, model, denied, margin=margin)
    assert n_compared >= 30
    assert check_invariants(sparse, training, model_path, denied, 3) >= 0.8 * len(denied)
    independent = joblib.load(model_path)                      # validity at the margin, re-predicted independently
    rows = pd.DataFrame([r.features for p in sparse for r in p.recourses])
    assert (independent.predict_proba(rows[features])[:, 1] >= 0.5 + margin).all()


# ------------------------------------------------------------------ the margin


def test_margin_recourses_reach_threshold_plus_margin_and_verification_checks_it(sample_paths):
    spec = load_schema_file(sample_paths["schema"])
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"])
    plain = _plans(training, model, applicants, PlanSettings(k=3, sparsify=False))
    margin = _plans(training, model, applicants, PlanSettings(k=3, sparsify=False, margin=0.1))
    low = [r.probability for p in plain for r in p.recourses]
    high = [r.probability for p in margin for r in p.recourses]
    assert min(low) < 0.6 and min(high) >= 0.6                 # without the margin some sit below 0.6
    assert all(p.status == "ok" for p in margin)
    # the gate: a recourse below threshold + margin is refused
    plan = next(p for p in plain if any(r.probability < 0.55 for r in p.recourses))
    verify_plans(training.encoder, model, [plan])
    with pytest.raises(RecourseVerificationError, match="by the margin"):
        verify_plans(training.encoder, model, [plan], margin=0.05)


def test_margin_that_no_probability_can_reach_is_refused(sample_paths):
    spec = load_schema_file(sample_paths["schema"])
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"]).head(2)
    with pytest.raises(InputError, match="below 1"):
        _plans(training, model, applicants, PlanSettings(margin=0.5))


def test_margin_on_the_graph_scheme_keeps_end_points_above_it(sample_paths):
    from frpd_cli.graph import build_graph

    spec = load_schema_file(sample_paths["schema"])
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"]).head(8)
    graph = build_graph(training.X, training.codes, n_neighbors=10)
    for endpoint in ("prototype", "first-favorable"):
        settings = PlanSettings(k=3, scheme="graph", endpoint=endpoint, margin=0.1)
        plans = _plans(training, model, applicants, settings, graph=graph)
        probabilities = [r.probability for p in plans for r in p.recourses]
        assert probabilities and min(probabilities) >= 0.6
        assert all(r.path for p in plans for r in p.recourses)   # graph recourses keep their paths


# ------------------------------------------------------------------ evaluation columns


def test_evaluate_reports_mean_probability_and_the_share_near_the_threshold(sample_paths):
    spec = load_schema_file(sample_paths["schema"])
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"]).head(6)
    names = list(training.schema.feature_names)
    plans = _plans(training, model, applicants, PlanSettings(k=3))
    from frpd_cli.plans import plan_record

    records = [plan_record(p) for p in plans]
    per = evaluate_plans(records, training, model, applicants[names])
    for p, (_, row) in zip(plans, per.iterrows()):
        probs = model.favorable_probability(pd.DataFrame([r.features for r in p.recourses])[names])
        assert row["probability"] == pytest.approx(probs.mean(), abs=1e-12)
        assert row["near threshold"] == pytest.approx(np.mean(probs < 0.51), abs=1e-12)
        assert row["sparsity"] == pytest.approx(np.mean([len(r.changes) for r in p.recourses]))
    summary = summarize_by_method(per)
    assert list(summary.columns[-13:]) == ["probability mean", "probability std", "near threshold mean",
                                           "near threshold std", "largest shift mean", "largest shift std",
                                           "shift > 0.3 mean", "shift > 0.3 std", "dominated mean", "dominated std",
                                           "n full plans", "n partial plans", "n without recourse"]
    assert list(per.columns[-5:]) == ["probability", "near threshold", "largest shift", "shift > 0.3", "dominated"]


# ------------------------------------------------------------------ command line


def _plan_args(paths, *extra):
    return ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(paths["applicants"]), "--format", "jsonl", *extra]


def test_cli_margin_and_max_changes(sample_paths):
    result = runner.invoke(app, _plan_args(sample_paths, "--margin", "0.05", "--max-changes", "2"))
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    recourses = [r for rec in records for r in rec["recourses"]]
    assert recourses and all(r["probability"] >= 0.55 for r in recourses)
    assert all(len(r["changes"]) <= 2 for r in recourses)
    plain = runner.invoke(app, _plan_args(sample_paths, "--no-sparsify"))
    assert plain.exit_code == 0
    n_plain = np.mean([len(r["changes"]) for line in plain.stdout.splitlines() for r in json.loads(line)["recourses"]])
    default = runner.invoke(app, _plan_args(sample_paths))
    n_sparse = np.mean([len(r["changes"]) for line in default.stdout.splitlines()
                        for r in json.loads(line)["recourses"]])
    assert n_sparse < n_plain


@pytest.mark.parametrize("extra, text", [
    (["--margin", "-0.1"], "margin"),
    (["--margin", "1"], "margin"),
    (["--margin", "0.5"], "below 1"),
    (["--max-changes", "0"], "max-changes"),
])
def test_cli_refuses_bad_margin_and_max_changes_as_usage_errors(sample_paths, extra, text):
    result = runner.invoke(app, _plan_args(sample_paths, *extra))
    assert result.exit_code == 2
    assert text in result.stderr and result.stdout == ""


def test_cli_max_changes_with_a_graph_is_a_usage_error(sample_paths, tmp_path):
    result = runner.invoke(app, _plan_args(sample_paths, "--max-changes", "2", "--graph", str(tmp_path)))
    assert result.exit_code == 2 and "graph recourses keep their paths" in result.stderr


def test_help_lists_the_new_options():
    result = runner.invoke(app, ["plan", "--help"])
    for option in ("--margin", "--no-sparsify", "--max-changes"):
        assert option in result.stdout


def test_plans_do_not_depend_on_their_batch_with_a_margin_and_max_changes(sample_paths):
    spec = load_schema_file(sample_paths["schema"])
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"])
    settings = PlanSettings(k=3, margin=0.05, max_changes=2)
    reference = _plans(training, model, applicants, settings, chunk_size=256)
    for chunk_size in (1, 7):
        assert _plans(training, model, applicants, settings, chunk_size=chunk_size) == reference


def test_verify_plans_margin_names_the_rule():
    class Half:
        threshold = 0.5

        def favorable_probability(self, rows):
            return np.full(len(rows), 0.52)

    model = LinearScore({"x1": 1.0, "x2": 0.0, "x3": 0.0}, 0.0)
    training, _ = _unit_training(model)
    features = {"x1": 0.5, "x2": 0.5, "x3": 0.5}
    plan = Plan("a", "ok", None, "quad", (Recourse(1, features, {}, 0.0, 0.52, 0),), {"x1": 0.4, "x2": 0.5,
                                                                                     "x3": 0.5})
    verify_plans(training.encoder, Half(), [plan], margin=0.02)
    with pytest.raises(RecourseVerificationError, match=r"0.5 \+ 0.05"):
        verify_plans(training.encoder, Half(), [plan], margin=0.05)


@pytest.mark.parametrize("k", [3, 5])
def test_picking_rank_by_rank_is_picking_segment_by_segment(sample_paths, monkeypatch, k):
    """The vectorised pick (all groups' first segments, then their second ones, ...) gives the segment-by-segment
    reference's picks and supports exactly, on every call of a plan run; and so the same plans."""
    from frpd_cli import sparsify

    spec = load_schema_file(sample_paths["schema"])
    training, model = _setup(sample_paths["data"], sample_paths["model"], spec)
    applicants = pd.read_csv(sample_paths["applicants"])
    by_rank, in_order = sparsify._SmallSupports._pick_by_rank, sparsify._SmallSupports._pick_in_order
    calls = []

    def both(self, chosen, groups, support, deltas, *rest):
        reference = support.copy()
        expected = in_order(self, chosen, groups, reference, deltas, *rest)
        got = by_rank(self, chosen, groups, support, deltas, *rest)
        assert got.dtype == expected.dtype and got.tolist() == expected.tolist()
        assert np.array_equal(support, reference)
        calls.append((len(got), int(np.bincount(np.unique(groups, return_inverse=True)[1].ravel()).max())))
        return got

    monkeypatch.setattr(sparsify._SmallSupports, "_pick_by_rank", both)
    plans = _plans(training, model, applicants, PlanSettings(k=k), chunk_size=7)
    assert sum(n for n, _ in calls) >= 2 * len(applicants) and max(r for _, r in calls) >= 2   # real groups
    monkeypatch.setattr(sparsify._SmallSupports, "_pick_by_rank", in_order)
    reference = _plans(training, model, applicants, PlanSettings(k=k), chunk_size=7)
    assert plans == reference


def test_picking_rank_by_rank_on_random_groups(monkeypatch):
    """Groups of 1 to 6 segments, interleaved (a group's segments need not be next to each other), on a model
    where many supports are accepted: the two picks agree exactly."""
    from frpd_cli import sparsify

    model = LinearScore({"x1": 4.0, "x2": 3.0, "x3": 3.5}, -4.0)
    training, _ = _unit_training(model)
    encoder = training.encoder
    rng = np.random.default_rng(5)
    n = 60
    raw0 = pd.DataFrame({c: rng.uniform(0.0, 0.4, n).round(3) for c in ("x1", "x2", "x3")})
    proto = pd.DataFrame({c: rng.uniform(0.7, 1.0, n).round(3) for c in ("x1", "x2", "x3")})
    X0, XK = encoder.encode(raw0), encoder.encode(proto)
    plain = interpolate_linear(encoder, model, X0, XK, raw0)
    groups = rng.permutation(np.repeat(np.arange(15), rng.integers(1, 7, 15)))[:n]
    groups = np.resize(groups, n)
    seen = []
    by_rank, in_order = sparsify._SmallSupports._pick_by_rank, sparsify._SmallSupports._pick_in_order

    def both(self, chosen, groups_, support, deltas, *rest):
        reference = support.copy()
        expected = in_order(self, chosen, groups_, reference, deltas, *rest)
        got = by_rank(self, chosen, groups_, support, deltas, *rest)
        seen.append(len(got))
        assert got.tolist() == expected.tolist() and np.array_equal(support, reference)
        return got

    monkeypatch.setattr(sparsify._SmallSupports, "_pick_by_rank", both)
    for factor in (1.0, 1.5, 3.0):
        sparsify_recourses(encoder, model, X0, XK, raw0, plain.rows, plain.probability, found=plain.found,
                           groups=groups, cost_factor=factor)
    assert seen and max(seen) >= n // 2


# ------------------------------------------------------------------ 1-minimal recourses


def _single_undos(features: dict, applicant: dict, names: list) -> list[dict]:
    """Every recourse with exactly one of its changed features restored to the applicant's value."""
    return [{**features, n: applicant[n]} for n in names if features[n] != applicant[n]]


def _assert_one_minimal(records, applicants: pd.DataFrame, predict, level: float, names: list) -> tuple[int, dict]:
    """Every recourse of ``records`` with 2+ changes: each single undo is below ``level`` (an independent predict)."""
    rows, owners = [], []
    spread = {}
    by_id = {str(i): r for i, r in zip(applicants.index if "applicant_id" not in applicants else
                                       applicants["applicant_id"], applicants[names].to_dict("records"))}
    n = 0
    for rec in records:
        x0 = by_id[str(rec["applicant"])]
        counts = [len(r["changes"]) for r in rec["recourses"]]
        if counts:
            spread[str(rec["applicant"])] = (min(counts), max(counts))
        for r in rec["recourses"]:
            n += 1
            assert predict(pd.DataFrame([r["features"]])[names])[0] >= level - 1e-12
            for undo in _single_undos(r["features"], x0, names):
                rows.append(undo)
                owners.append((rec["applicant"], r["rank"]))
    if rows:
        p = predict(pd.DataFrame(rows)[names])
        kept = [owners[i] for i in np.flatnonzero(p >= level)]
        assert not kept, f"recourses with an unneeded change (applicant, rank): {kept[:10]}"
    return n, spread


def test_minimal_recourses_undo_the_costliest_unneeded_change_first():
    # either x1 or x2 alone is enough (score x1 + x2 - 0.9 >= 0 at 0.5): a recourse moving both gives one back,
    # the costlier move first, so the cheaper one stays
    from frpd_cli.sparsify import minimal_recourses

    model = LinearScore({"x1": 10.0, "x2": 10.0}, -9.0)
    training, _ = _unit_training(model)
    raw0 = pd.DataFrame([{"x1": 0.0, "x2": 0.0, "x3": 0.5}, {"x1": 0.1, "x2": 0.1, "x3": 0.5}])
    rows = pd.DataFrame([{"x1": 0.95, "x2": 0.92, "x3": 0.5}, {"x1": 0.5, "x2": 0.5, "x3": 0.9}])
    X0 = training.encoder.encode(raw0)
    result = minimal_recourses(training.encoder, model, X0, raw0, rows, model.favorable_probability(rows))
    assert result.rows.to_dict("records")[0] == {"x1": 0.0, "x2": 0.92, "x3": 0.5}      # x1 moved more: undone
    # the second needs both x1 and x2 (0.5 + 0.5 = 1.0 >= 0.9; alone 0.6 < 0.9); x3 does nothing: undone
    assert result.rows.to_dict("records")[1] == {"x1": 0.5, "x2": 0.5, "x3": 0.5}
    assert result.n_undone.tolist() == [1, 1]
    assert result.probability.tolist() == pytest.approx(model.favorable_probability(result.rows).tolist())
    assert result.n_model_calls == 2


def test_minimal_recourses_keep_a_recourse_that_needs_every_change():
    from frpd_cli.sparsify import minimal_recourses

    model = LinearScore({"x1": 10.0, "x2": 10.0}, -15.0)                # needs x1 + x2 >= 1.5
    training, _ = _unit_training(model)
    raw0 = pd.DataFrame([{"x1": 0.0, "x2": 0.0, "x3": 0.5}])
    rows = pd.DataFrame([{"x1": 0.8, "x2": 0.8, "x3": 0.5}])
    result = minimal_recourses(training.encoder, model, training.encoder.encode(raw0), raw0, rows,
                               model.favorable_probability(rows))
    assert result.rows.to_dict("records") == rows.to_dict("records") and result.n_undone.tolist() == [0]


def test_every_sample_recourse_is_one_minimal_at_the_default_margin(sample_paths):
    import joblib

    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
                                 str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]),
                                 "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    applicants = pd.read_csv(sample_paths["applicants"])
    names = [c for c in applicants.columns if c != "applicant_id"]
    estimator = joblib.load(sample_paths["model"])
    n, spread = _assert_one_minimal(records, applicants, lambda X: estimator.predict_proba(X)[:, 1], 0.55, names)
    assert n >= 50
    assert max(hi for _, hi in spread.values()) <= 6            # measured: 1 to 6 changes per recourse (each move
    # within the default --max-move bound of 0.25 of its range, savings one level of its four, so some recourses
    # need more changes: A014's "savings: none -> rich" became recourses of 5 and 6 changes)


def test_every_german_recourse_is_one_minimal_at_the_default_margin(german, tmp_path):
    import joblib

    app_path = tmp_path / "denied.csv"
    german.denied.to_csv(app_path, index=False)
    result = runner.invoke(app, ["plan", str(german.train_path), "--model", str(german.model_path), "--applicants",
                                 str(app_path), "--immutable", "Personal status", "--increasing", "Age",
                                 "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    estimator = joblib.load(german.model_path)
    n, _ = _assert_one_minimal(records, german.denied, lambda X: estimator.predict_proba(X)[:, 1], 0.55,
                               german.features)
    # 23 denied test rows, measured 52 recourses of 1 to 3 changes (65 before a recourse another one of its plan
    # dominates left the plan: the same move in another amount, or a change added to another recourse's)
    assert n >= 45


LEVELS = ("e0", "e1", "e2", "e3", "e4", "e5")


def _ordinal_set(model, *, mutability="increasing", ranges=None):
    """A training set of x1, x2, x3 in [0, 1] and an ordinal ``edu`` (``LEVELS``), scored by ``model``."""
    rng = np.random.default_rng(0)
    n = 360
    frame = pd.DataFrame({"x1": rng.uniform(0, 1, n).round(4), "x2": rng.uniform(0, 1, n).round(4),
                          "x3": rng.uniform(0, 1, n).round(4), "edu": [LEVELS[i % 6] for i in range(n)]})
    frame.loc[0, ["x1", "x2", "x3"]] = 0.0
    frame.loc[1, ["x1", "x2", "x3"]] = 1.0
    frame["label"] = (model.favorable_probability(frame) >= 0.5).astype(int)
    declared = {mutability: ("edu",)} if mutability != "free" else {}
    schema = infer_schema(frame, SchemaSpec(continuous=("x1", "x2", "x3"), ordinal={"edu": list(LEVELS)},
                                            ranges=ranges or {}, **declared))
    return build_training_set(frame, schema, model)


def _levels_brute_force(model, row: dict, applicant: dict, allowed=LEVELS) -> str:
    """The level of ``edu`` nearest the applicant's, between it and the recourse's, that the model accepts with
    every other value of ``row`` kept: a brute force over the levels."""
    a, b = LEVELS.index(applicant["edu"]), LEVELS.index(row["edu"])
    step = 1 if b >= a else -1
    for k in range(a + step, b + step, step):
        if LEVELS[k] in allowed and model.favorable_probability(pd.DataFrame([{**row, "edu": LEVELS[k]}]))[0] >= 0.5:
            return LEVELS[k]
    return row["edu"]


@pytest.mark.parametrize("table, start, recourse", [
    # the score rises with the level: the least level that is enough (e3), not the prototype's e5
    ({"e0": 0, "e1": 1, "e2": 2, "e3": 3, "e4": 4, "e5": 5}, "e0", "e5"),
    # a level between that the model rejects (e2) is passed over for the next one it accepts
    ({"e0": 0, "e1": 3.2, "e2": 0, "e3": 3.5, "e4": 4, "e5": 5}, "e0", "e5"),
    # nothing lower is enough: the recourse keeps its level
    ({"e0": 0, "e1": 0, "e2": 0, "e3": 0, "e4": 0, "e5": 5}, "e0", "e5"),
    # one level up: nothing between to try
    ({"e0": 0, "e1": 5, "e2": 5, "e3": 5, "e4": 5, "e5": 5}, "e0", "e1"),
])
def test_an_ordinal_change_goes_back_to_the_nearest_level_the_model_accepts(table, start, recourse):
    from frpd_cli.sparsify import minimal_recourses

    model = LinearScore({"x1": 0.0}, -3.0, levels={"edu": table})
    training = _ordinal_set(model)
    raw0 = pd.DataFrame([{"x1": 0.2, "x2": 0.3, "x3": 0.4, "edu": start}])
    rows = pd.DataFrame([{"x1": 0.2, "x2": 0.3, "x3": 0.4, "edu": recourse}])
    result = minimal_recourses(training.encoder, model, training.encoder.encode(raw0), raw0, rows,
                               model.favorable_probability(rows))
    got = result.rows.to_dict("records")[0]
    assert got["edu"] == _levels_brute_force(model, rows.to_dict("records")[0], raw0.to_dict("records")[0])
    assert result.probability[0] == pytest.approx(model.favorable_probability(result.rows)[0])
    assert result.probability[0] >= 0.5


def test_lowered_levels_keep_the_allowed_levels_and_a_decreasing_ordinals_side():
    from frpd_cli.sparsify import minimal_recourses

    # the score falls with the level: a decreasing ordinal moved from e5 to e0 comes back to e2 ...
    model = LinearScore({"x1": 0.0}, 2.5, levels={"edu": {"e0": 0, "e1": -1, "e2": -2, "e3": -3, "e4": -4,
                                                           "e5": -5}})
    training = _ordinal_set(model, mutability="decreasing")
    raw0 = pd.DataFrame([{"x1": 0.2, "x2": 0.3, "x3": 0.4, "edu": "e5"}])
    rows = pd.DataFrame([{"x1": 0.2, "x2": 0.3, "x3": 0.4, "edu": "e0"}])
    X0 = training.encoder.encode(raw0)
    result = minimal_recourses(training.encoder, model, X0, raw0, rows, model.favorable_probability(rows))
    assert result.rows["edu"].tolist() == ["e2"]
    # ... and to e1 when the user allows only e0, e1 and e5 (e2 is not tried)
    training = _ordinal_set(model, mutability="decreasing", ranges={"edu": ("e0", "e1", "e5")})
    result = minimal_recourses(training.encoder, model, X0, raw0, rows, model.favorable_probability(rows))
    assert result.rows["edu"].tolist() == ["e1"]
    assert _levels_brute_force(model, rows.to_dict("records")[0], raw0.to_dict("records")[0],
                               allowed=("e0", "e1", "e5")) == "e1"


def test_a_lowered_level_can_make_another_change_unneeded_and_it_is_given_back():
    # x1 alone (10 * 0.9 - 4 > 0) or e1 alone (6 - 4 > 0) is enough, e5 does as well; the recourse moves both.
    # The undo round gives back the costlier change first (edu's one-hot move, 1.414 against 0.9 of x1); then
    # nothing is left to lower. Reversed, x1 would go first and edu come down from e5 to e1.
    from frpd_cli.sparsify import minimal_recourses

    model = LinearScore({"x1": 10.0}, -4.0, levels={"edu": {"e0": 0, "e1": 6, "e2": 6, "e3": 6, "e4": 6,
                                                            "e5": 6}})
    training = _ordinal_set(model)
    raw0 = pd.DataFrame([{"x1": 0.0, "x2": 0.3, "x3": 0.4, "edu": "e0"}])
    rows = pd.DataFrame([{"x1": 0.9, "x2": 0.3, "x3": 0.4, "edu": "e5"}])
    result = minimal_recourses(training.encoder, model, training.encoder.encode(raw0), raw0, rows,
                               model.favorable_probability(rows))
    got = result.rows.to_dict("records")[0]
    assert (got["x1"], got["edu"]) == (0.9, "e0")
    # with x1 needed as well (bias -9.5: x1 alone 8.99 - 9.5 < 0, with e1 6 + 9 - 9.5 > 0) edu comes down to e1
    model = LinearScore({"x1": 10.0}, -9.5, levels=model.levels)
    training = _ordinal_set(model)
    result = minimal_recourses(training.encoder, model, training.encoder.encode(raw0), raw0, rows,
                               model.favorable_probability(rows))
    got = result.rows.to_dict("records")[0]
    assert (got["x1"], got["edu"]) == (0.9, "e1")
