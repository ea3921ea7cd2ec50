"""Order relations every training row keeps (a part never above its whole), and the plan warning for recourses
that break them."""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.relations import broken_relation, find_order_relations
from frpd_cli.schema import SchemaSpec, infer_schema

runner = CliRunner()


def _loans(n=300, seed=0):
    """``part`` (a guaranteed amount) is at most ``whole`` (the loan) in every row, equal in a quarter; ``term``
    lies below both (months against amounts: no relation); ``flag`` is 0/1."""
    rng = np.random.default_rng(seed)
    whole = rng.integers(20, 200, size=n).astype(np.int64)
    share = rng.choice([0.5, 0.75, 1.0, 1.0], size=n)
    part = np.floor(whole * share).astype(np.int64)
    term = rng.integers(1, 15, size=n)
    flag = rng.integers(0, 2, size=n)
    return pd.DataFrame({"part": part, "whole": whole, "term": term, "flag": flag,
                         "label": (whole - 8 * term < 40).astype(int)})


def test_a_part_never_above_its_whole_is_found_and_nothing_else():
    frame = _loans()
    schema = infer_schema(frame, SchemaSpec())
    relations = find_order_relations(frame, schema)
    assert [(r.low, r.high) for r in relations] == [("part", "whole")]
    (relation,) = relations
    assert relation.n_rows == len(frame)
    assert relation.equal_share == np.mean(frame["part"] == frame["whole"]) >= 0.2
    # an applicant already out of order is not the recourse's doing; a recourse that crosses is
    assert broken_relation(relation, {"part": 60, "whole": 100}, {"part": 60, "whole": 50})
    assert not broken_relation(relation, {"part": 60, "whole": 50}, {"part": 60, "whole": 40})
    assert not broken_relation(relation, {"part": 60, "whole": 100}, {"part": 60, "whole": 60})
    # two immutable features: no recourse moves them, no relation to watch
    frozen = infer_schema(frame, SchemaSpec(immutable=("part", "whole")))
    assert find_order_relations(frame, frozen) == []


def test_plan_warns_of_recourses_that_put_a_part_above_its_whole(tmp_path):
    frame = _loans()
    data = tmp_path / "loans.csv"
    frame.to_csv(data, index=False)
    features = ["part", "whole", "term", "flag"]
    model = LogisticRegression(max_iter=1000).fit(frame[features], frame["label"])
    joblib.dump(model, tmp_path / "model.joblib")
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"part": [90, 30], "whole": [120, 120], "term": [5, 5], "flag": [0, 0]}).to_csv(applicants,
                                                                                                   index=False)
    base = ["plan", str(data), "--model", str(tmp_path / "model.joblib"), "--applicants", str(applicants),
            "--format", "jsonl", "--max-move", "none"]
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    crossing = [(rec["applicant"], r) for rec in records for r in rec["recourses"]
                if r["features"]["part"] > r["features"]["whole"]]
    assert crossing                                            # a smaller loan, its guaranteed part kept
    lines = [line for line in result.stderr.splitlines() if "put 'part' above 'whole'" in line]
    assert len(lines) == 1
    n_applicants = len({a for a, _ in crossing})
    assert lines[0].startswith(f"Warning: {len(crossing)} recourse(s) of {n_applicants} applicant(s) put")
    assert f"in all {len(frame)} rows" in lines[0] and "--decreasing part --increasing whole" in lines[0]
    # the remedy it names keeps every recourse in order (a longer term instead), and the warning goes
    kept = runner.invoke(app, [*base, "--decreasing", "part", "--increasing", "whole"])
    assert kept.exit_code == 0, kept.stderr
    kept_recourses = [r for line in kept.stdout.splitlines() for r in json.loads(line)["recourses"]]
    assert kept_recourses and all(r["features"]["part"] <= r["features"]["whole"] for r in kept_recourses)
    assert "above 'whole'" not in kept.stderr


# ---- ratio relations: a derived feature (SBA's Portion = SBA_Appv / GrAppv) ----

def _shares(n=300, seed=0):
    """``share`` = ``part`` / ``whole`` in every row (stored to 8 digits, as SBA's Portion); ``term`` and
    ``flag`` are unrelated; the label favours small loans and short terms."""
    rng = np.random.default_rng(seed)
    whole = rng.integers(20000, 200000, size=n).astype(np.int64)
    share = rng.choice([0.5, 0.75, 0.8, 0.85, 1.0], size=n)
    part = np.round(whole * share).astype(np.int64)
    share = np.round(part / whole, 8)
    term = rng.integers(1, 15, size=n)
    flag = rng.integers(0, 2, size=n)
    return pd.DataFrame({"part": part, "whole": whole, "share": share, "term": term, "flag": flag,
                         "label": (whole / 1000 - 8 * term < 40).astype(int)})


def _brute_force_products(frame, schema, rtol=1e-6):
    """Every triple a = b * c (b before c in the frame) that all rows keep, within rtol."""
    from frpd_cli.numeric import numeric_columns

    cols = {k: v for k, v in numeric_columns(frame, schema).items() if np.isfinite(v).all() and len(np.unique(v)) > 2}
    out = set()
    for a in cols:
        for i, b in enumerate(cols):
            for c in list(cols)[i + 1:]:
                if a not in (b, c):
                    p = cols[b] * cols[c]
                    if np.all(np.abs(cols[a] - p) <= rtol * np.maximum(np.abs(cols[a]), np.abs(p))):
                        out.add((a, frozenset((b, c))))
    return out


def test_a_derived_ratio_is_found_as_its_product_once_and_broken_only_by_a_recourse():
    from frpd_cli.relations import broken_ratio, find_ratio_relations

    frame = _shares()
    schema = infer_schema(frame, SchemaSpec())
    (ratio,) = find_ratio_relations(frame, schema)
    assert (ratio.derived, ratio.numerator, ratio.denominator, ratio.n_rows) == ("share", "part", "whole", 300)
    assert _brute_force_products(frame, schema) == {("part", frozenset(("share", "whole")))}
    error = np.abs(frame["part"] - frame["share"] * frame["whole"]) / frame["part"]
    assert ratio.max_error == pytest.approx(error.max(), rel=1e-9) and 0 < ratio.max_error < 1e-6
    applicant = {"part": 75000, "whole": 100000, "share": 0.75}
    assert broken_ratio(ratio, applicant, {**applicant, "whole": 80000})          # one side moved alone
    assert broken_ratio(ratio, applicant, {**applicant, "share": 1.0})
    assert not broken_ratio(ratio, applicant, {"part": 60000, "whole": 80000, "share": 0.75})   # all kept
    assert not broken_ratio(ratio, {**applicant, "share": 0.5}, {**applicant, "whole": 1})      # already off
    assert not broken_ratio(ratio, applicant, {**applicant, "whole": "n/a"})


@pytest.mark.parametrize("change", ["noise", "few", "zero", "frozen", "short"])
def test_no_ratio_is_claimed_without_every_row_many_values_and_a_nonzero_denominator(change):
    from frpd_cli.relations import find_ratio_relations

    frame = _shares()
    spec = SchemaSpec()
    if change == "noise":          # one row off by a relative 1e-5: no relation
        frame.loc[7, "share"] = frame.loc[7, "share"] * (1 + 1e-5)
    elif change == "few":          # a multiplication table of few values (9 products) may be a coincidence
        frame["whole"] = np.resize([100000, 120000, 150000, 200000], len(frame))
        frame["share"] = np.resize([0.5, 0.75, 1.0], len(frame))
        frame["part"] = (frame["whole"] * frame["share"]).astype(np.int64)
        assert frame["part"].nunique() == 9
    elif change == "zero":         # a ratio of 0/0 in some rows is no ratio
        frame.loc[:9, ["part", "whole"]] = 0
    elif change == "frozen":       # no recourse moves any of the three
        spec = SchemaSpec(immutable=("part", "whole", "share"))
    else:
        frame = frame.head(15)
    schema = infer_schema(frame, spec)
    assert find_ratio_relations(frame, schema) == []
    if change == "noise":
        assert find_ratio_relations(frame, schema, rtol=1e-4)[0].derived == "share"
    if change == "few":
        assert _brute_force_products(frame, schema) == {("part", frozenset(("share", "whole")))}


def _shares_files(tmp_path):
    frame = _shares()
    data = tmp_path / "loans.csv"
    frame.to_csv(data, index=False)
    features = ["part", "whole", "share", "term", "flag"]
    model = LogisticRegression(max_iter=1000).fit(frame[features], frame["label"])
    joblib.dump(model, tmp_path / "model.joblib")
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"part": [90000, 75000, 60000], "whole": [120000, 100000, 120000], "share": [0.75, 0.75, 0.5],
                  "term": [5, 6, 5], "flag": [0, 1, 0]}).to_csv(applicants, index=False)
    return frame, data, tmp_path / "model.joblib", applicants


def _breaking(records):
    """(recourses, applicants) that break share = part / whole, counted from the records (the oracle)."""
    def holds(x):
        return abs(x["part"] - x["share"] * x["whole"]) <= 1e-6 * max(abs(x["part"]), abs(x["share"] * x["whole"]))

    found = [(rec["applicant"], r) for rec in records for r in rec["recourses"]
             if holds({**r["features"], **{k: v[0] for k, v in r["changes"].items()}}) and not holds(r["features"])]
    return len(found), len({a for a, _ in found})


def _warnings(stderr):
    return [line for line in stderr.splitlines() if line.startswith("Warning: ") and " recourse(s) of " in line]


def test_plan_interpolate_and_evaluate_warn_of_recourses_that_break_a_derived_ratio(tmp_path):
    frame, data, model, applicants = _shares_files(tmp_path)
    common = ["--model", str(model), "--format", "jsonl", "--max-move", "none"]
    plan = runner.invoke(app, ["plan", str(data), "--applicants", str(applicants), *common])
    assert plan.exit_code == 0, plan.stderr
    records = [json.loads(line) for line in plan.stdout.splitlines()]
    n_broken, n_applicants = _breaking(records)
    assert n_broken > 0
    ratio = [line for line in plan.stderr.splitlines() if "break 'share' = 'part' / 'whole'" in line]
    assert len(ratio) == 1
    assert ratio[0].startswith(f"Warning: {n_broken} recourse(s) of {n_applicants} applicant(s) break")
    assert f"all {len(frame)} rows" in ratio[0] and "--immutable share --immutable part --immutable whole" in ratio[0]
    assert "retrain the model without it" in ratio[0]
    # the same warnings from the two steps of plan (the training rows read with --data) ...
    select = runner.invoke(app, ["select", str(data), "--model", str(model), "--applicants", str(applicants),
                                 "--out", str(tmp_path / "sel"), "--max-move", "none"])
    assert select.exit_code == 0, select.stderr
    interpolate = runner.invoke(app, ["interpolate", "--selection", str(tmp_path / "sel"), "--model", str(model),
                                      "--out", str(tmp_path / "plans"), "--data", str(data), "--format", "jsonl"])
    assert interpolate.exit_code == 0, interpolate.stderr
    assert interpolate.stdout == plan.stdout
    assert _warnings(interpolate.stderr) == _warnings(plan.stderr) and len(_warnings(plan.stderr)) >= 2
    # ... and from evaluate, which reads the plans back
    plans = tmp_path / "plans.jsonl"
    plans.write_text(plan.stdout, encoding="utf-8")
    evaluate = runner.invoke(app, ["evaluate", str(data), "--model", str(model), "--plans", str(plans),
                                   "--applicants", str(applicants), "--format", "csv"])
    assert evaluate.exit_code == 0, evaluate.stderr
    assert _warnings(evaluate.stderr) == _warnings(plan.stderr)
    # the remedy it names keeps every recourse on the ratio, and the warning goes
    kept = runner.invoke(app, ["plan", str(data), "--applicants", str(applicants), *common,
                               "--immutable", "share", "--immutable", "part", "--immutable", "whole"])
    assert kept.exit_code == 0, kept.stderr
    assert _breaking([json.loads(line) for line in kept.stdout.splitlines()]) == (0, 0)
    assert "break 'share'" not in kept.stderr


def test_interpolate_and_evaluate_warn_of_a_part_above_its_whole_as_plan_does(tmp_path):
    frame = _loans()
    data = tmp_path / "loans.csv"
    frame.to_csv(data, index=False)
    model = LogisticRegression(max_iter=1000).fit(frame[["part", "whole", "term", "flag"]], frame["label"])
    joblib.dump(model, tmp_path / "model.joblib")
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"part": [90, 30], "whole": [120, 120], "term": [5, 5], "flag": [0, 0]}).to_csv(applicants,
                                                                                                   index=False)
    common = ["--model", str(tmp_path / "model.joblib")]
    plan = runner.invoke(app, ["plan", str(data), "--applicants", str(applicants), *common, "--format", "csv",
                               "--max-move", "none"])
    assert plan.exit_code == 0, plan.stderr
    (line,) = _warnings(plan.stderr)
    assert "put 'part' above 'whole'" in line
    runner.invoke(app, ["select", str(data), "--applicants", str(applicants), *common, "--out",
                        str(tmp_path / "sel"), "--max-move", "none"])
    interpolate = runner.invoke(app, ["interpolate", "--selection", str(tmp_path / "sel"), *common, "--out",
                                      str(tmp_path / "plans"), "--data", str(data), "--format", "csv"])
    assert interpolate.exit_code == 0, interpolate.stderr
    assert _warnings(interpolate.stderr) == [line]
    plans = tmp_path / "plans.csv"
    plans.write_text(plan.stdout, encoding="utf-8")      # csv plans: the applicants' values from --applicants
    evaluate = runner.invoke(app, ["evaluate", str(data), *common, "--plans", str(plans), "--applicants",
                                   str(applicants), "--format", "csv"])
    assert evaluate.exit_code == 0, evaluate.stderr
    assert _warnings(evaluate.stderr) == [line]


def _brute_force_ratios(frame, schema, rtol=1e-6, min_distinct=10):
    """The ratio relations by their definition, every triple checked on every row."""
    from frpd_cli.numeric import numeric_columns
    from frpd_cli.relations import RatioRelation

    cols = {k: v for k, v in numeric_columns(frame, schema).items() if np.isfinite(v).all() and len(np.unique(v)) > 2}
    mutable = {f.name: f.mutability != "immutable" for f in schema.features}
    names = list(cols)
    out = []
    for a in names:
        for i, b in enumerate(names):
            for c in names[i + 1:]:
                if a in (b, c) or not (mutable[a] or mutable[b] or mutable[c]):
                    continue
                p = cols[b] * cols[c]
                error = np.abs(cols[a] - p)
                scale = np.maximum(np.abs(cols[a]), np.abs(p))
                if not np.all(error <= rtol * scale):
                    continue
                nb, nc = len(np.unique(cols[b])), len(np.unique(cols[c]))
                derived, denominator = (b, c) if nb < nc else (c, b)
                if (len(np.unique(cols[a])) < min_distinct or len(np.unique(cols[denominator])) < min_distinct
                        or np.any(cols[denominator] == 0)):
                    continue
                max_error = float(np.max(np.where(scale > 0, error / np.where(scale > 0, scale, 1), 0)))
                out.append((names.index(a), names.index(derived), names.index(denominator),
                            RatioRelation(derived, a, denominator, len(frame), max_error)))
    return [r for *_, r in sorted(out, key=lambda item: item[:3])]


@pytest.mark.parametrize("seed", range(8))
def test_the_screened_ratio_search_finds_what_checking_every_triple_on_every_row_finds(seed):
    """Columns mostly 0 pass the screen's rows by chance (0 = 0 * anything); products of many values, of few
    values, with zeros in a factor, and one off by a hair hold or fail on the rows the screen does not see."""
    from frpd_cli.relations import find_ratio_relations

    rng = np.random.default_rng(seed)
    n = 400
    sparse = [np.where(rng.random(n) < 0.97, 0, rng.integers(1, 50, size=n)) for _ in range(3)]
    x = rng.integers(1, 300, size=n).astype(np.float64)
    y = rng.choice([0.5, 0.75, 0.8, 1.25], size=n)
    z = rng.integers(0 if seed % 2 else 1, 40, size=n).astype(np.float64)     # a zero in some seeds
    xz = x * z
    off = x * y
    off[int(rng.integers(0, n))] *= 1 + 1e-4                                    # one row off, unseen by the screen
    frame = pd.DataFrame({"s1": sparse[0], "s2": sparse[1], "s3": sparse[2], "x": x, "y": y, "z": z,
                          "xy": x * y, "xz": xz, "off": off, "s1z": sparse[0] * z,
                          "label": rng.integers(0, 2, size=n)})
    immutable = ("x", "y", "xy") if seed in (2, 3) else ()
    schema = infer_schema(frame, SchemaSpec(target="label", immutable=immutable))
    expected = _brute_force_ratios(frame, schema)
    found = find_ratio_relations(frame, schema)
    assert [(r.derived, r.numerator, r.denominator) for r in found] == \
        [(r.derived, r.numerator, r.denominator) for r in expected]
    assert [r.max_error for r in found] == pytest.approx([r.max_error for r in expected], abs=1e-15)
    assert ("y", "xy", "x") in [(r.derived, r.numerator, r.denominator) for r in found] or immutable
