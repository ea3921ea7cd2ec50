"""Records a user can read: ranks by cost, n_changes, partial plans, variant method labels, repeated plans."""

from __future__ import annotations

import csv
import io
import json

import pytest
from typer.testing import CliRunner

from frpd_cli.choice import method_label
from frpd_cli.cli.app import app
from frpd_cli.evaluation import repeated_plans
from frpd_cli.plans import Plan, Recourse, csv_columns, plan_record, plan_rows, read_plans

runner = CliRunner()


def _plan(paths, *extra):
    return runner.invoke(app, ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema",
                               str(paths["schema"]), "--applicants", str(paths["applicants"]), *extra])


@pytest.mark.parametrize("kwargs, label", [
    ({}, "quad"),
    ({"theta": 0.9}, "quad"),
    ({"theta": 0.5}, "quad@0.5"),
    ({"theta": 0.9, "show_theta": True}, "quad@0.9"),
    ({"scheme": "graph"}, "quad+graph"),
    ({"scheme": "graph", "endpoint": "first-favorable"}, "quad+graph:first-favorable"),
    ({"theta": 0.1, "scheme": "graph", "endpoint": "first-favorable"}, "quad@0.1+graph:first-favorable"),
    ({"theta": 0.1}, "quad@0.1"),
])
def test_method_label_grammar(kwargs, label):
    assert method_label("quad", **kwargs) == label


def test_methods_without_theta_never_name_it():
    assert method_label("nearest", theta=0.3) == "nearest"
    assert method_label("face", theta=0.3, scheme="graph") == "face+graph"
    assert method_label("dpp-greedy", theta=0.3) == "dpp-greedy@0.3"


def _recourse(rank, changes, cost=1.0):
    features = {"a": 1, "b": "x", **{k: v[1] for k, v in changes.items()}}
    return Recourse(rank=rank, features=features, changes=changes, cost=cost, probability=0.7, prototype=0)


def test_records_carry_n_changes_and_partial_at_the_end():
    plan = Plan("7", "ok", "1 prototype(s) led to the same recourse", "quad",
                (_recourse(1, {"a": (0, 1)}), _recourse(2, {"a": (0, 1), "b": ("y", "x")}, cost=2.0)),
                {"a": 0, "b": "y"}, partial=True)
    rec = plan_record(plan)
    assert list(rec) == ["applicant", "status", "reason", "method", "recourses", "partial"]
    assert rec["partial"] is True and [r["n_changes"] for r in rec["recourses"]] == [1, 2]
    columns = csv_columns(["a", "b"])
    assert columns[-4:] == ["cost", "probability", "n_changes", "partial"]
    assert csv_columns(["a", "b"], projected=True)[-3:] == ["projected", "n_changes", "partial"]
    rows = plan_rows(plan, ["a", "b"])
    assert [(r["n_changes"], r["partial"]) for r in rows] == [(1, "true"), (2, "true")]
    empty = plan_rows(Plan("8", "infeasible", "none", "quad", (), {"a": 0, "b": "y"}), ["a", "b"])
    assert (empty[0]["n_changes"], empty[0]["partial"]) == ("", "false")


def test_sample_plans_rank_by_cost_and_count_changes(sample_paths):
    result = _plan(sample_paths, "--format", "jsonl", "--theta", "0.5")
    assert result.exit_code == 0, result.stderr
    for line in result.stdout.splitlines():
        rec = json.loads(line)
        assert rec["method"] == "quad@0.5"
        costs = [r["cost"] for r in rec["recourses"]]
        assert costs == sorted(costs) and [r["rank"] for r in rec["recourses"]] == list(range(1, len(costs) + 1))
        assert rec["partial"] == (rec["status"] == "ok" and len(costs) < 3)
        for r in rec["recourses"]:
            # n_changes is the number of features whose value differs from the applicant's
            assert r["n_changes"] == len(r["changes"]) >= 1


def test_a_plan_with_fewer_than_k_recourses_is_partial_and_stays_ok(sample_paths):
    """Only duration and savings may change: several prototypes often lead to the same boundary point."""
    result = _plan(sample_paths, "--format", "jsonl", "--vary", "duration", "--vary", "savings")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    ok = [rec for rec in records if rec["status"] == "ok"]
    assert any(rec["partial"] for rec in ok) and not all(rec["partial"] for rec in ok)
    for rec in ok:
        distinct = {json.dumps(r["features"], sort_keys=True) for r in rec["recourses"]}
        assert len(distinct) == len(rec["recourses"])
        assert rec["partial"] == (len(rec["recourses"]) < 3)
        if rec["partial"]:
            assert f"{len(rec['recourses'])} distinct recourse(s) kept" in rec["reason"]
        for r in rec["recourses"]:
            assert set(r["changes"]) <= {"duration", "savings"} and r["n_changes"] == len(r["changes"])
    assert all(rec["partial"] is False for rec in records if rec["status"] != "ok")


def test_read_plans_keeps_repeated_pairs_apart(tmp_path, sample_paths):
    result = _plan(sample_paths, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    doubled = tmp_path / "doubled.csv"
    doubled.write_text("\n".join(lines + lines[1:]) + "\n", encoding="utf-8")
    single = read_plans(_write(tmp_path / "single.csv", result.stdout))
    records = read_plans(doubled)
    assert len(records) == 2 * len(single)
    assert records[: len(single)] == single and records[len(single):] == single
    pairs = repeated_plans(records)
    assert len(pairs) == len(single) and all(n == 2 for _, _, n in pairs)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_evaluate_warns_on_repeated_pairs_and_does_not_merge(tmp_path, sample_paths):
    result = _plan(sample_paths, "--format", "jsonl")
    doubled = _write(tmp_path / "doubled.jsonl", result.stdout + result.stdout)
    single = _write(tmp_path / "single.jsonl", result.stdout)
    common = [str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
              str(sample_paths["schema"]), "--per-applicant", "--format", "csv"]
    one = runner.invoke(app, ["evaluate", *common, "--plans", str(single)])
    two = runner.invoke(app, ["evaluate", *common, "--plans", str(doubled)])
    assert one.exit_code == two.exit_code == 0, two.stderr
    assert "Warning" not in one.stderr
    assert "pair(s) have more than one plan" in two.stderr and "'A001'" in two.stderr
    rows_one = list(csv.DictReader(io.StringIO(one.stdout)))
    rows_two = list(csv.DictReader(io.StringIO(two.stdout)))
    assert len(rows_one) == 20 and rows_two == rows_one + rows_one


def test_table_shows_n_changes(sample_paths):
    result = _plan(sample_paths, "--format", "table")
    assert result.exit_code == 0, result.stderr
    assert "chg" in result.stdout
