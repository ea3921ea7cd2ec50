"""Order relations every training row keeps (a part never above its whole), and the plan warning for recourses
that break them."""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
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
