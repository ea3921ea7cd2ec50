"""frpd audit: group gaps on constructed data with known answers, coverage against a brute-force count,
quantile bins and tiny groups, determinism and the command's errors."""

from __future__ import annotations

import csv
import io
import json
import pickle

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli import metrics as m
from frpd_cli.audit import audit_plans, broken_rules, group_labels
from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set
from frpd_cli.evaluation import _audit_rules, _coerce
from frpd_cli.exceptions import InputError
from frpd_cli.schema import SchemaSpec, infer_schema

runner = CliRunner()


# --------------------------------------------------------------------------- constructed data


class StepModel:
    """Favourable iff x >= 5 (probability 0.9 above, 0.1 below); every other column is ignored."""

    threshold = 0.5

    def favorable_probability(self, rows) -> np.ndarray:
        return np.where(np.asarray(rows["x"], dtype=float) >= 5.0, 0.9, 0.1)


def _training(model):
    x = np.arange(11, dtype=float)            # x in [0, 10]: min-max cost of a move is |dx| / 10
    frame = pd.DataFrame({"x": x, "y": x[::-1], "label": (x >= 5).astype(int)})
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, continuous=("x", "y")))
    return build_training_set(frame, schema, model)


def _batch(x0, groups):
    """Applicants with values x0 (y = 3), each with the one-recourse plan x -> 5 (cost (5 - x0) / 10)."""
    applicants = pd.DataFrame({"x": x0, "y": 3.0})
    records = [{"applicant": str(i), "method": "m", "status": "ok",
                "recourses": [{"rank": 1, "features": {"x": 5.0, "y": 3.0}}]} for i in range(len(x0))]
    return applicants, records, {"g": group_labels(groups)}


def test_group_that_needs_a_larger_change_has_a_positive_gap_excluding_zero():
    model = StepModel()
    training = _training(model)
    rng = np.random.default_rng(7)
    a = 4.0 - 0.5 * rng.random(40)            # group A needs +1.0 to +1.5 in x: costs 0.10 .. 0.15
    b = 2.0 - 1.0 * rng.random(40)            # group B needs +3 to +4: costs 0.30 .. 0.40
    applicants, records, groups = _batch(np.r_[a, b], ["A"] * 40 + ["B"] * 40)
    out = audit_plans(records, training, model, applicants, groups=groups, seed=3).groups.set_index("group")
    cost_a, cost_b = (5.0 - a) / 10.0, (5.0 - b) / 10.0
    assert out.loc["A", "cost mean"] == pytest.approx(cost_a.mean())
    assert out.loc["B", "cost median"] == pytest.approx(np.median(cost_b))
    assert out.loc["B", "gap"] == pytest.approx(cost_b.mean() - cost_a.mean())
    assert out.loc["B", "gap low"] > 0 and out.loc["B", "gap excludes 0"]
    assert out.loc["A", "gap high"] < 0 and out.loc["A", "gap excludes 0"]
    # the bootstrap interval of a mean is close to mean +- 1.96 standard errors (n = 40)
    se = cost_b.std() / np.sqrt(40)
    assert out.loc["B", "cost high"] - out.loc["B", "cost low"] == pytest.approx(2 * 1.96 * se, rel=0.2)
    assert out.loc["B", "cost low"] < cost_b.mean() < out.loc["B", "cost high"]
    assert out.loc["B", "full"] == 1.0 and out.loc["B", "none"] == 0.0 and out.loc["B", "changed"] == 1.0


def test_groups_with_the_same_costs_have_an_interval_including_zero():
    model = StepModel()
    training = _training(model)
    x0 = 4.0 - 3.5 * np.random.default_rng(1).random(30)
    applicants, records, groups = _batch(np.r_[x0, x0], ["A"] * 30 + ["B"] * 30)
    out = audit_plans(records, training, model, applicants, groups=groups, seed=0).groups.set_index("group")
    for g in ("A", "B"):
        assert out.loc[g, "gap"] == pytest.approx(0.0, abs=1e-12)
        assert out.loc[g, "gap low"] < 0 < out.loc[g, "gap high"]
        assert not out.loc[g, "gap excludes 0"]


def test_full_partial_and_no_plan_shares_and_invalid_recourses_not_counted():
    model = StepModel()
    training = _training(model)
    applicants = pd.DataFrame({"x": [1.0, 2.0, 3.0, 6.0], "y": 3.0})
    records = [
        {"applicant": "0", "method": "m", "recourses": [{"rank": 1, "features": {"x": 5.0, "y": 3.0}},
                                                        {"rank": 2, "features": {"x": 7.0, "y": 3.0}}]},
        # one recourse of two is not favourable: partial, the cheapest valid one costs 0.5
        {"applicant": "1", "method": "m", "recourses": [{"rank": 1, "features": {"x": 4.0, "y": 3.0}},
                                                        {"rank": 2, "features": {"x": 7.0, "y": 3.0}}]},
        {"applicant": "2", "method": "m", "recourses": []},
        {"applicant": "3", "method": "m", "recourses": []},          # already favourable: left out
    ]
    groups = {"g": group_labels(["a", "a", "a", "a"])}
    audit = audit_plans(records, training, model, applicants, groups=groups)
    row = audit.groups.iloc[0]
    assert row["denied"] == 3 and row["with recourse"] == 2
    assert (row["full"], row["partial"], row["none"]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert row["cost mean"] == pytest.approx((0.4 + 0.5) / 2)
    summary = audit.summary.iloc[0]
    assert summary["denied"] == 3 and summary["already favorable"] == 1 and summary["recourses not counted"] == 1


def test_quantile_bins_and_tiny_groups_are_reported():
    labels, order = group_labels(list(range(1, 101)), bins=4)
    assert order == ["[1, 25.75]", "(25.75, 50.5]", "(50.5, 75.25]", "(75.25, 100]"]
    assert [labels.count(g) for g in order] == [25, 25, 25, 25]
    labels, order = group_labels(["3", "1", "", "2", "1"], bins=4)       # 3 distinct values <= 4 bins: categories
    assert order == ["1", "2", "3", "(missing)"] and labels[2] == "(missing)"
    with pytest.raises(InputError, match="bins"):
        group_labels([1, 2], bins=0)

    model = StepModel()
    training = _training(model)
    x0 = 4.0 - 3.5 * np.random.default_rng(2).random(43)
    applicants, records, groups = _batch(x0, ["big"] * 40 + ["tiny"] * 3)
    out = audit_plans(records, training, model, applicants, groups=groups, min_group=20).groups.set_index("group")
    assert out.loc["tiny", "denied"] == 3 and out.loc["tiny", "note"].startswith("tiny group")
    assert out.loc["tiny", "cost mean"] == pytest.approx(((5.0 - x0[40:]) / 10).mean())
    assert pd.isna(out.loc["tiny", "cost low"]) and pd.isna(out.loc["tiny", "gap low"])
    assert out.loc["big", "note"].startswith("small rest (3 < 20)")   # its rest is tiny: no gap interval


def test_bootstrap_depends_on_the_seed_only():
    model = StepModel()
    training = _training(model)
    x0 = 4.0 - 3.5 * np.random.default_rng(4).random(60)
    applicants, records, groups = _batch(x0, ["A", "B", "C"] * 20)
    one = audit_plans(records, training, model, applicants, groups=groups, seed=5, actions=True).groups
    two = audit_plans(records, training, model, applicants, groups=groups, seed=5, actions=True, n_jobs=2).groups
    other = audit_plans(records, training, model, applicants, groups=groups, seed=6).groups
    pd.testing.assert_frame_equal(one, two)
    assert not np.allclose(one["cost low"], other["cost low"])


# --------------------------------------------------------------------------- the share left without a recourse


def _none_batch(groups_and_nones):
    """Denied applicants (x0 in [0.5, 4)) per group: the first ``n_none`` of each group get a plan without any
    recourse (``infeasible``), the others the one valid recourse x -> 5."""
    rng = np.random.default_rng(8)
    x0, labels, records = [], [], []
    for g, n, n_none in groups_and_nones:
        for i in range(n):
            x0.append(4.0 - 3.5 * rng.random())
            labels.append(g)
            recourses = [] if i < n_none else [{"rank": 1, "features": {"x": 5.0, "y": 3.0}}]
            records.append({"applicant": str(len(records)), "method": "m",
                            "status": "infeasible" if i < n_none else "ok", "recourses": recourses})
    return pd.DataFrame({"x": x0, "y": 3.0}), records, {"g": group_labels(labels)}


def _independent_none_gaps(groups_and_nones, *, seed, n_bootstrap, target):
    """The bootstrap none gaps of group ``target`` recomputed by hand: each group's own resamples of its
    applicants (the draws of the stream (seed, method 0, column 0, group, 1)), counting how many drawn
    applicants have no recourse, the rest pooled from the other groups' resamples."""
    counts, sizes = [], []
    for gi, (_g, n, n_none) in enumerate(sorted(groups_and_nones)):
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0, 0, gi, 1]))
        drawn = rng.integers(0, n, size=(n_bootstrap, n), dtype=np.int32)
        counts.append((drawn < n_none).sum(axis=1))          # positions 0 .. n_none - 1 are the ones without
        sizes.append(n)
    t = [g for g, _, _ in sorted(groups_and_nones)].index(target)
    rest = sum(c for i, c in enumerate(counts) if i != t) / (sum(sizes) - sizes[t])
    return counts[t] / sizes[t] - rest


def test_none_gap_of_a_group_left_without_recourse_more_often():
    model = StepModel()
    training = _training(model)
    spec = [("A", 60, 12), ("B", 60, 42)]                     # 20% and 70% without any recourse
    applicants, records, groups = _none_batch(spec)
    out = audit_plans(records, training, model, applicants, groups=groups, seed=3).groups.set_index("group")
    assert out.loc["A", "none"] == pytest.approx(0.2) and out.loc["B", "none"] == pytest.approx(0.7)
    assert out.loc["B", "none gap"] == pytest.approx(0.5) and out.loc["A", "none gap"] == pytest.approx(-0.5)
    assert out.loc["B", "none gap low"] < 0.5 < out.loc["B", "none gap high"]
    assert out.loc["B", "none gap low"] > 0 and out.loc["B", "none gap excludes 0"]
    assert out.loc["A", "none gap high"] < 0 and out.loc["A", "none gap excludes 0"]
    # two groups: A's resampled gaps are B's negated, so the intervals mirror each other
    assert out.loc["A", "none gap low"] == pytest.approx(-out.loc["B", "none gap high"])
    # close to the normal interval of a difference of two proportions
    se = np.sqrt(0.2 * 0.8 / 60 + 0.7 * 0.3 / 60)
    assert out.loc["B", "none gap high"] - out.loc["B", "none gap low"] == pytest.approx(2 * 1.96 * se, rel=0.15)
    # the interval is the 2.5 and 97.5 percentiles of the resampled gaps, recomputed from the same draws
    gaps = _independent_none_gaps(spec, seed=3, n_bootstrap=1000, target="B")
    assert (out.loc["B", "none gap low"], out.loc["B", "none gap high"]) == \
        pytest.approx(tuple(np.quantile(gaps, [0.025, 0.975])), abs=1e-12)


def test_none_gap_of_groups_with_the_same_share_includes_zero_and_depends_on_the_seed_only():
    model = StepModel()
    training = _training(model)
    spec = [("A", 50, 15), ("B", 70, 21)]                     # 30% each
    applicants, records, groups = _none_batch(spec)
    one = audit_plans(records, training, model, applicants, groups=groups, seed=5).groups
    again = audit_plans(records, training, model, applicants, groups=groups, seed=5, actions=True,
                        n_jobs=2).groups
    other = audit_plans(records, training, model, applicants, groups=groups, seed=6).groups
    pd.testing.assert_frame_equal(one, again)
    out = one.set_index("group")
    for g in ("A", "B"):
        assert out.loc[g, "none gap"] == pytest.approx(0.0, abs=1e-12)
        assert out.loc[g, "none gap low"] < 0 < out.loc[g, "none gap high"]
        assert not out.loc[g, "none gap excludes 0"]
    assert not np.allclose(one["none gap low"], other["none gap low"])
    for seed, table in ((5, one), (6, other)):
        gaps = _independent_none_gaps(spec, seed=seed, n_bootstrap=1000, target="A")
        assert table.set_index("group").loc["A", "none gap low"] == pytest.approx(np.quantile(gaps, 0.025),
                                                                                   abs=1e-12)


def test_none_gap_has_an_interval_for_a_group_with_few_recourses_but_many_denied():
    model = StepModel()
    training = _training(model)
    # "few": 25 denied, only 2 with a recourse (cost tiny); "small": 5 denied (tiny for both)
    spec = [("few", 25, 23), ("many", 60, 12), ("small", 5, 1)]
    applicants, records, groups = _none_batch(spec)
    out = audit_plans(records, training, model, applicants, groups=groups, min_group=20).groups.set_index("group")
    assert out.loc["few", "with recourse"] == 2 and pd.isna(out.loc["few", "cost low"])
    assert out.loc["few", "none gap"] == pytest.approx(23 / 25 - 13 / 65)
    assert out.loc["few", "none gap low"] > 0 and out.loc["few", "none gap excludes 0"]
    assert out.loc["few", "note"] == "tiny group (2 < 20): no cost interval"
    assert out.loc["small", "none gap"] == pytest.approx(1 / 5 - 35 / 85)
    assert pd.isna(out.loc["small", "none gap low"]) and pd.isna(out.loc["small", "none gap excludes 0"])
    assert out.loc["small", "note"] == "tiny group (5 < 20 denied): no interval"
    assert out.loc["many", "note"] == "small rest (6 < 20): no cost gap interval"
    assert out.loc["many", "none gap low"] < out.loc["many", "none gap"] < out.loc["many", "none gap high"]


class BothModel:
    """Favourable iff x >= 5 and y >= 5."""

    threshold = 0.5

    def favorable_probability(self, rows) -> np.ndarray:
        x, y = np.asarray(rows["x"], dtype=float), np.asarray(rows["y"], dtype=float)
        return np.where((x >= 5.0) & (y >= 5.0), 0.9, 0.1)


def test_a_pair_covers_what_neither_action_covers_alone():
    model = BothModel()
    x = np.arange(11, dtype=float)
    frame = pd.DataFrame({"x": x, "y": x, "label": (x >= 5).astype(int)})
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, continuous=("x", "y")))
    training = build_training_set(frame, schema, model)
    applicants = pd.DataFrame({"x": [3.0] * 30 + [8.0] * 30, "y": [3.0] * 30 + [2.0] * 30})
    records = [{"applicant": str(i), "method": "m", "recourses": [{"rank": 1, "features": {"x": 6.0, "y": 6.0}}]}
               for i in range(30)]
    records += [{"applicant": str(i), "method": "m", "recourses": [{"rank": 1, "features": {"x": 8.0, "y": 6.0}}]}
                for i in range(30, 60)]
    groups = {"g": group_labels(["both"] * 30 + ["y only"] * 30)}
    audit = audit_plans(records, training, model, applicants, groups=groups, actions=True, pairs=True)
    actions = audit.actions.set_index("action")
    # x +3 (0.3 of the range) alone flips nobody (y stays low); y up by the mean step 0.35 flips 'y only' only
    assert actions.loc["x ↑ 0.25–0.5", "covered"] == 0
    assert actions.loc["y ↑ 0.25–0.5", "covered"] == 30
    pairs = audit.pairs.set_index("group")
    assert pairs.loc["both", "coverage"] == 1.0 and pairs.loc["both", "single coverage"] == 0.0
    assert {pairs.loc["both", "first"], pairs.loc["both", "second"]} == {"x ↑ 0.25–0.5", "y ↑ 0.25–0.5"}
    assert pairs.loc["y only", "single coverage"] == 1.0


# --------------------------------------------------------------------------- coverage against brute force


@pytest.fixture(scope="module")
def sample_audit(sample_paths, tmp_path_factory):
    from frpd_cli.cli._options import SchemaFlags, read_applicants, read_training
    from frpd_cli.plans import read_plans

    p = sample_paths
    plans = tmp_path_factory.mktemp("audit") / "plans.jsonl"
    result = runner.invoke(app, ["plan", str(p["data"]), "--model", str(p["model"]), "--schema", str(p["schema"]),
                                 "--applicants", str(p["applicants"]), "--format", "jsonl", "--output", str(plans),
                                 "--quiet"])
    assert result.exit_code == 0, result.output
    training, model, spec = read_training(p["data"], p["model"], SchemaFlags(schema=p["schema"]))
    frame, ids = read_applicants(p["applicants"], training, spec.id_column)
    records = read_plans(plans)
    return training, model, frame, ids, records, plans


def _brute_force_covered(action, training, model, raw0) -> int:
    """Apply the action to each denied applicant on its own row, check the rules with metrics'
    constraint_violations and predict that one row."""
    schema, encoder = training.schema, training.encoder
    rules = _audit_rules(training)
    f = schema.feature(action["feature"])
    count = 0
    for i in range(len(raw0)):
        x = raw0.iloc[[i]].reset_index(drop=True)
        if model.favorable_probability(x)[0] >= model.threshold:
            continue
        y = x.copy()
        if f.is_numeric:
            z = encoder.encode(x)
            block = encoder.block(f.name)
            sign = 1.0 if action["direction"] == "up" else -1.0
            weight = 1.0 if encoder.column_scale is None else encoder.column_scale[block.start]
            z[0, block.start] += sign * action["step"] * weight
            y[f.name] = encoder.decode(z)[f.name].astype(float).to_numpy()
        else:
            if str(x[f.name].iloc[0]) != action["from"]:
                continue
            y[f.name] = next(level for level in f.levels if str(level) == action["to"])
        same = m.sparsity(x.iloc[0], y, atol=1e-9).mean == 0
        ranges = {name: (min(lo, x[name].iloc[0]), max(hi, x[name].iloc[0])) for name, (lo, hi) in rules["ranges"].items()}
        if f.is_relative:
            low, high = f.bounds([float(x[f.name].iloc[0])])
            ranges[f.name] = (max(ranges[f.name][0], float(low[0])), min(ranges[f.name][1], float(high[0])))
            ranges[f.name] = (min(ranges[f.name][0], x[f.name].iloc[0]), max(ranges[f.name][1], x[f.name].iloc[0]))
        broken = m.constraint_violations(x.iloc[0], y, **{**rules, "ranges": ranges})["total"] > 0
        if not same and not broken and model.favorable_probability(y)[0] >= model.threshold:
            count += 1
    return count


def test_coverage_matches_a_brute_force_count(sample_audit):
    training, model, frame, ids, records, _ = sample_audit
    audit = audit_plans(records, training, model, frame, ids, actions=True)
    raw0 = _coerce(frame.loc[:, list(training.schema.feature_names)], training.schema)
    actions = audit.actions.to_dict("records")
    assert len(actions) >= 5 and {a["direction"] for a in actions} >= {"", "down"}
    for action in actions:
        assert action["covered"] == _brute_force_covered(action, training, model, raw0), action["action"]
    denied = audit.summary.iloc[0]["denied"]
    assert all(a["coverage"] == pytest.approx(a["covered"] / denied) for a in actions)
    # an increase of age (immutable-free but monotone and limited to +5 years) and a decrease: the decrease is
    # never counted (monotone), whatever the model says
    age = training.schema.feature("age")
    assert age.mutability == "increasing"


def test_top_n_coverage_is_the_union_of_the_top_actions(sample_audit):
    training, model, frame, ids, records, _ = sample_audit
    audit = audit_plans(records, training, model, frame, ids, actions=True)
    actions = audit.actions
    assert list(actions["coverage"]) == sorted(actions["coverage"], reverse=True)
    assert actions["cumulative coverage"].is_monotonic_increasing
    assert actions["cumulative coverage"].iloc[0] == actions["coverage"].iloc[0]
    summary = audit.summary.iloc[0]
    assert summary["top 1 coverage"] == actions["coverage"].iloc[0]
    assert summary["top 10 coverage"] == actions["cumulative coverage"].iloc[min(10, len(actions)) - 1]


def _single_moves(training, raw0):
    """Every applicant with one feature moved at a time: numbers by small and large steps both ways, categories
    to every level."""
    schema, enc = training.schema, training.encoder
    befores, afters = [], []
    for i in range(len(raw0)):
        x = raw0.iloc[i]
        for j, f in enumerate(schema.features):
            span = enc.maximum[j] - enc.minimum[j]
            values = ([float(x[f.name]) + s * span for s in (-0.6, -0.1, -0.01, 0.01, 0.1, 0.6)] if f.is_numeric
                      else list(f.levels))
            for v in values:
                y = x.copy()
                y[f.name] = v
                befores.append(x)
                afters.append(y)
    return pd.DataFrame(befores).reset_index(drop=True), pd.DataFrame(afters).reset_index(drop=True)


def _scalar_verdicts(training, before, after) -> list:
    """metrics.constraint_violations on each row, with evaluate's ranges for that applicant."""
    from frpd_cli.evaluation import _ranges_for

    rules = _audit_rules(training)
    out = []
    for i in range(len(after)):
        x = before.iloc[i]
        ranges = _ranges_for(rules["ranges"], x, training.schema)
        out.append(m.constraint_violations(x, after.iloc[[i]].reset_index(drop=True),
                                           **{**rules, "ranges": ranges})["total"] > 0)
    return out


def test_vectorised_rule_check_agrees_with_constraint_violations(sample_audit):
    training, model, frame, ids, records, _ = sample_audit
    raw0 = _coerce(frame.loc[:, list(training.schema.feature_names)], training.schema)
    before, after = _single_moves(training, raw0.iloc[:8])
    expected = _scalar_verdicts(training, before, after)
    assert 0 < sum(expected) < len(expected)
    assert broken_rules(before, after, training).tolist() == expected
    # a numeric monotone feature without any range, and a decreasing one
    frame = pd.DataFrame({"x": np.arange(11.0), "y": np.arange(11.0)[::-1], "label": [0] * 5 + [1] * 6})
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, continuous=("x", "y"), increasing=("x",),
                                            decreasing=("y",)))
    plain = build_training_set(frame, schema, StepModel())
    before, after = _single_moves(plain, pd.DataFrame({"x": [2.0, 7.5], "y": [3.0, 9.0]}))
    expected = _scalar_verdicts(plain, before, after)
    assert 0 < sum(expected) < len(expected)
    assert broken_rules(before, after, plain).tolist() == expected


# --------------------------------------------------------------------------- command line


@pytest.fixture(scope="module")
def constructed(tmp_path_factory):
    """A model that ignores the group column, which is in the applicants file only."""
    import sklearn.compose  # noqa: F401 - imported for real: loading a model that does not use it would leave
    from sklearn.tree import DecisionTreeClassifier  # the loader's deferred stub in sys.modules for later tests

    folder = tmp_path_factory.mktemp("constructed")
    x = np.arange(11, dtype=float)
    train = pd.DataFrame({"x": np.tile(x, 3), "y": np.repeat([1.0, 5.0, 9.0], 11)})
    train["label"] = (train["x"] >= 5).astype(int)
    train.to_csv(folder / "train.csv", index=False)
    tree = DecisionTreeClassifier(max_depth=1).fit(train[["x", "y"]], train["label"])
    (folder / "model.pkl").write_bytes(pickle.dumps(tree))
    rng = np.random.default_rng(11)
    a = 4.0 - 0.5 * rng.random(30)
    b = 2.0 - rng.random(30)
    apps = pd.DataFrame({"id": [f"P{i:02d}" for i in range(60)], "x": np.round(np.r_[a, b], 3),
                         "y": np.round(rng.uniform(0, 10, 60), 2), "region": ["north"] * 30 + ["south"] * 30})
    apps.to_csv(folder / "applicants.csv", index=False)
    with open(folder / "plans.jsonl", "w") as out:
        for r in apps.to_dict("records"):
            rec = {"applicant": r["id"], "method": "m", "status": "ok", "reason": None,
                   "recourses": [{"rank": 1, "features": {"x": 5.0, "y": r["y"]}, "changes": {"x": [r["x"], 5.0]}}]}
            out.write(json.dumps(rec) + "\n")
    return folder


def _args(folder, *extra):
    return ["audit", str(folder / "train.csv"), "--model", str(folder / "model.pkl"), "--target", "label",
            "--continuous", "x", "--continuous", "y",
            "--applicants", str(folder / "applicants.csv"), "--id-column", "id", "--plans",
            str(folder / "plans.jsonl"), *extra]


def test_cli_group_column_the_model_does_not_use(constructed):
    result = runner.invoke(app, _args(constructed, "--by", "region", "--format", "csv"))
    assert result.exit_code == 0, result.output
    rows = {r["group"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert set(rows) == {"north", "south"}
    assert float(rows["south"]["gap"]) > 0 and float(rows["south"]["gap low"]) > 0
    assert rows["south"]["gap excludes 0"] == "True"
    assert "Audited 60 plan(s)" in result.stderr and "ignoring column" not in result.stderr

def test_cli_none_gap_columns_star_and_summary(constructed, tmp_path):
    """20 of the 30 south applicants get no recourse, no north one: south's none gap is +66.7 points."""
    from frpd_cli.audit import GROUP_COLUMNS

    lines = (constructed / "plans.jsonl").read_text().splitlines()
    kept = [json.dumps({**json.loads(line), "status": "infeasible", "reason": "none", "recourses": []})
            if 30 <= i < 50 else line for i, line in enumerate(lines)]
    plans = tmp_path / "plans.jsonl"
    plans.write_text("\n".join(kept) + "\n")
    args = [str(plans) if a == str(constructed / "plans.jsonl") else a for a in _args(constructed, "--by", "region")]
    result = runner.invoke(app, [*args, "--format", "csv"])
    assert result.exit_code == 0, result.output
    header = next(csv.reader(io.StringIO(result.stdout)))
    assert header[:19] == list(GROUP_COLUMNS[:19]) and header[18] == "note"        # existing columns unchanged
    assert header[19:] == ["none gap", "none gap low", "none gap high", "none gap excludes 0"]
    rows = {r["group"]: r for r in csv.DictReader(io.StringIO(result.stdout))}
    assert float(rows["south"]["none"]) == pytest.approx(2 / 3) and float(rows["north"]["none"]) == 0.0
    assert float(rows["south"]["none gap"]) == pytest.approx(2 / 3)
    assert float(rows["south"]["none gap low"]) > 0 and rows["south"]["none gap excludes 0"] == "True"
    assert rows["south"]["note"] == "tiny group (10 < 20): no cost interval"
    assert "largest gap in the share left without any recourse: region = south, 66.7% against 0.0% for the " \
           "rest (+66.7 points, 95% [+" in result.stderr
    table = runner.invoke(app, [*args, "--format", "table"], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    south = next(line for line in table.stdout.splitlines() if "south" in line)
    assert "+66.7 [+" in south and "] *" in south
    plain = runner.invoke(app, _args(constructed, "--by", "region", "--format", "csv"))
    assert "no gap in the share left without any recourse whose 95% interval excludes 0" in plain.stderr


def test_cli_numeric_group_column_is_binned_and_output_is_deterministic(constructed):
    first = runner.invoke(app, _args(constructed, "--by", "y", "--bins", "3", "--format", "json", "--seed", "2"))
    again = runner.invoke(app, _args(constructed, "--by", "y", "--bins", "3", "--format", "json", "--seed", "2",
                                     "--jobs", "2"))
    assert first.exit_code == 0, first.output
    assert first.stdout == again.stdout
    rows = json.loads(first.stdout)
    assert [r["denied"] for r in rows] == [20, 20, 20]
    assert rows[0]["group"].startswith("[") and rows[-1]["group"].endswith("]")


def test_cli_actions_pairs_and_plot(constructed, tmp_path):
    png = tmp_path / "audit.png"
    result = runner.invoke(app, _args(constructed, "--by", "region", "--actions", "--format", "jsonl",
                                      "--plot", str(png), "--scale", "minmax"))
    assert result.exit_code == 0, result.output
    actions = [json.loads(line) for line in result.stdout.splitlines()]
    # every plan moves x up to 5: north needs +1.0 to +1.5 (0.1-0.25 of the range), south +3 to +4 (0.25-0.5)
    # (binned in min-max shares of the range: --scale minmax)
    assert {a["action"] for a in actions} == {"x ↑ 0.1–0.25", "x ↑ 0.25–0.5"}
    big = next(a for a in actions if a["size"] == "0.25–0.5")
    x0 = pd.read_csv(constructed / "applicants.csv")["x"].to_numpy()
    step = np.mean((5.0 - x0[30:]) / 10.0)                         # the mean move of the south plans, applied
    assert big["plans"] == 30 and big["step"] == pytest.approx(step)
    assert big["covered"] == int(np.sum(x0 + 10 * step > 4.5))      # the tree accepts x > 4.5
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the groups table asked for with --by is not in the jsonl: said on stderr, not dropped silently
    assert "Warning: jsonl holds one table: wrote the actions table; the groups table(s) were left out" \
        in result.stderr
    pairs = runner.invoke(app, _args(constructed, "--by", "region", "--pairs", "--format", "csv"))
    assert pairs.exit_code == 0, pairs.output
    rows = list(csv.DictReader(io.StringIO(pairs.stdout)))
    assert [r["group"] for r in rows] == ["north", "south"]
    assert "the top 1, 3 and 10 cover" in pairs.stderr


def test_cli_without_applicants_groups_by_features_only(constructed):
    args = ["audit", str(constructed / "train.csv"), "--model", str(constructed / "model.pkl"), "--target", "label",
            "--continuous", "x", "--continuous", "y", "--plans", str(constructed / "plans.jsonl"), "--format", "csv"]
    with_file = runner.invoke(app, _args(constructed, "--by", "y", "--format", "csv"))
    alone = runner.invoke(app, [*args, "--by", "y"])
    assert alone.exit_code == 0, alone.output
    assert alone.stdout == with_file.stdout          # the applicants rebuilt from the jsonl recourses
    refused = runner.invoke(app, [*args, "--by", "region"])
    assert refused.exit_code == 2 and "--applicants with the file" in refused.stderr and refused.stdout == ""


@pytest.mark.parametrize("extra, code, message", [
    ((), 2, "Nothing to audit"),
    (("--pairs",), 2, "--by"),
    (("--by", "nope"), 2, "'nope' is not a column"),
    (("--by", "region", "--format", "xml"), 2, "xml"),
])
def test_cli_errors(constructed, extra, code, message):
    result = runner.invoke(app, _args(constructed, *extra))
    assert result.exit_code == code
    assert message in result.stderr and result.stdout == ""


def test_plans_without_recourse_and_without_values_are_counted():
    model = StepModel()
    training = _training(model)
    applicants, records, groups = _batch(np.array([1.0, 2.0, 3.0, 4.0]), ["A", "A", "B", "B"])
    records = records + [{"applicant": "u1", "method": "m", "status": "infeasible", "recourses": []},
                         {"applicant": "u2", "method": "m", "status": "infeasible", "recourses": []},
                         {"applicant": "u3", "method": "m", "status": "already-favorable", "recourses": []}]
    audit = audit_plans(records, training, model, applicants, groups=groups, actions=True, pairs=True,
                        without_values=["u1", "u2", "u3"])
    summary = audit.summary.iloc[0]
    assert (summary["plans"], summary["denied"], summary["already favorable"], summary["values unknown"]) == \
        (7, 6, 1, 2)
    rows = audit.groups.set_index("group")
    assert list(rows.index) == ["A", "B", "(values unknown)"]
    assert rows["denied"].sum() == 6
    assert rows.loc["(values unknown)", ["full", "partial", "none"]].tolist() == [0.0, 0.0, 1.0]
    assert rows.loc["A", "denied"] == 2 and rows.loc["A", "full"] == 1.0      # the other groups as before
    # coverage: over all six denied applicants; the two without values are covered by no action
    x0 = applicants["x"].to_numpy()
    for action in audit.actions.to_dict("records"):
        assert action["coverage"] == pytest.approx(action["covered"] / 6)
        assert action["covered"] <= 4
    best = audit.actions.iloc[0]
    step = best["step"] * 10.0                                                 # min-max: the range of x is 10
    assert best["covered"] == int(np.sum(x0 + step >= 5.0 - 1e-9))
    assert audit.pairs.set_index("group").loc["(values unknown)", "denied"] == 2


def test_cli_without_applicants_counts_the_plans_without_recourse(constructed, tmp_path):
    # the last ten applicants' plans hold no recourse: without the applicants file their values are unknown
    lines = (constructed / "plans.jsonl").read_text().splitlines()
    infeasible = [json.loads(line) for line in lines[50:]]
    kept = lines[:50] + [json.dumps({**rec, "status": "infeasible", "recourses": [], "reason": "none"})
                         for rec in infeasible]
    plans = tmp_path / "plans.jsonl"
    plans.write_text("\n".join(kept) + "\n")
    base = ["audit", str(constructed / "train.csv"), "--model", str(constructed / "model.pkl"), "--target",
            "label", "--continuous", "x", "--continuous", "y", "--plans", str(plans), "--scale", "minmax"]
    alone = runner.invoke(app, [*base, "--actions", "--format", "csv"])
    assert alone.exit_code == 0, alone.output
    assert "Audited 60 plan(s) of method m: 60 denied applicant(s)" in alone.stderr
    assert "Note: 10 denied applicant(s) have a plan without recourse" in alone.stderr
    actions = list(csv.DictReader(io.StringIO(alone.stdout)))
    assert actions and all(float(a["coverage"]) == pytest.approx(int(a["covered"]) / 60) for a in actions)
    # with the applicants file the same applicants are scored: denied the same, each action tried on all 60
    with_file = runner.invoke(app, [*base, "--applicants", str(constructed / "applicants.csv"), "--id-column", "id",
                                    "--actions", "--format", "csv"])
    assert with_file.exit_code == 0, with_file.output
    assert "Audited 60 plan(s) of method m: 60 denied applicant(s)" in with_file.stderr
    scored = {a["action"]: int(a["covered"]) for a in csv.DictReader(io.StringIO(with_file.stdout))}
    assert all(int(a["covered"]) <= scored[a["action"]] for a in actions)
    groups = runner.invoke(app, [*base, "--by", "y", "--bins", "2", "--format", "json"])
    assert groups.exit_code == 0, groups.output
    rows = json.loads(groups.stdout)
    assert sum(r["denied"] for r in rows) == 60 and rows[-1]["group"] == "(values unknown)"
    assert rows[-1]["denied"] == 10 and rows[-1]["none"] == 1.0


def test_cli_action_table_on_a_terminal_gives_the_median_change_and_what_a_size_means(constructed):
    """'x ↑ 0.25–0.5' is a share of the population crossed (or of the range), not of x's units: the terminal
    table says so and shows each action's median raw change next to it."""
    for scale, size in (("effort", "share of the training population a move crosses"),
                        ("minmax", "share of the feature's min-max range")):
        result = runner.invoke(app, _args(constructed, "--actions", "--format", "table", "--scale", scale),
                               env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert size in result.stdout and "median change" in result.stdout
        data = runner.invoke(app, _args(constructed, "--actions", "--format", "jsonl", "--scale", scale))
        for a in map(json.loads, data.stdout.splitlines()):
            row = next(line for line in result.stdout.splitlines() if a["action"] in line)
            assert f"{a['median change']:+.6g}" in row
