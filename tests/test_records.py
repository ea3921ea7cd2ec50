"""Records a user can read: ranks by cost, n_changes, partial plans, variant method labels, repeated plans."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.choice import method_label
from frpd_cli.cli._output import PlanWriter
from frpd_cli.cli.app import app
from frpd_cli.evaluation import repeated_plans
from frpd_cli.plans import (
    Plan,
    Recourse,
    csv_columns,
    escape_csv_text,
    plan_csv_rows,
    plan_record,
    plan_rows,
    python_value,
    read_plans,
)

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
    assert columns[-5:] == ["cost", "probability", "n_changes", "partial", "largest_shift"]
    assert csv_columns(["a", "b"], projected=True)[-4:] == ["projected", "n_changes", "partial", "largest_shift"]
    assert csv_columns(["a"], models=["also-1"])[-4:] == ["n_changes", "partial", "largest_shift",
                                                          "probability_also-1"]
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
    """Only duration and savings may change: several prototypes often lead to the same boundary point, or to a
    recourse another one of the plan dominates (more duration or more savings than another asks)."""
    result = _plan(sample_paths, "--format", "jsonl", "--vary", "duration", "--vary", "savings")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    ok = [rec for rec in records if rec["status"] == "ok"]
    assert any(rec["partial"] for rec in ok) and any(len(rec["recourses"]) > 1 for rec in ok)
    for rec in ok:
        distinct = {json.dumps(r["features"], sort_keys=True) for r in rec["recourses"]}
        assert len(distinct) == len(rec["recourses"])
        assert rec["partial"] == (len(rec["recourses"]) < 3)
        if rec["partial"]:   # prototypes merged into one recourse, or fewer candidates than K (all of them taken)
            assert f"{len(rec['recourses'])} distinct recourse(s) kept" in rec["reason"] or \
                rec["reason"].startswith(f"{len(rec['recourses'])} of K=3 recourses: only ")
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
    assert "more than one plan" not in one.stderr          # (3 sample plans are partial: that warning stays)
    assert "pair(s) have more than one plan" in two.stderr and "'A001'" in two.stderr
    rows_one = list(csv.DictReader(io.StringIO(one.stdout)))
    rows_two = list(csv.DictReader(io.StringIO(two.stdout)))
    assert len(rows_one) == 20 and rows_two == rows_one + rows_one


def test_table_shows_n_changes(sample_paths):
    result = _plan(sample_paths, "--format", "table")
    assert result.exit_code == 0, result.stderr
    assert "chg" in result.stdout


# Every kind of cell a recourse's features can hold: Python and numpy numbers, NaN, None, bools, text (plain,
# formula-like, number-like, quoted, empty), numpy text.
_CELLS = [0, -3, 2**60, 1.5, -0.0, 3.0, float("nan"), float("inf"), None, True, False, "own", "", "=1+2", "-3.5",
          "'quoted", "@SUM(A1)", "\ttab", "+1e3", np.int64(7), np.float64(2.25), np.float32(0.1), np.float64("nan"),
          np.bool_(True), np.str_("=x"), np.str_("rent"), pd.Timestamp("2020-01-02")]


def _reference_rows(plan, names):
    """The csv rows of a plan as the contract defines them, cell by cell (an oracle for plan_rows and plan_csv_rows)."""
    applicant = escape_csv_text(plan.applicant)
    partial = "true" if plan.partial else "false"
    if not plan.recourses:
        row = {"applicant": applicant, "status": plan.status, "reason": plan.reason or "", "rank": "",
               "method": plan.method}
        row.update({name: "" for name in names})
        row.update({"cost": "", "probability": "", "projected": "", "n_changes": "", "partial": partial,
                    "largest_shift": ""})
        return [row]
    rows = []
    for r in plan.recourses:
        row = {"applicant": applicant, "status": plan.status, "reason": plan.reason or "", "rank": r.rank,
               "method": plan.method}
        row.update({name: escape_csv_text(python_value(r.features[name])) for name in names})
        row.update({"cost": float(round(float(r.cost), 6)), "probability": float(round(float(r.probability), 6)),
                    "projected": "true" if r.projected else "false", "n_changes": r.n_changes, "partial": partial,
                    "largest_shift": "" if r.largest_shift is None else float(round(float(r.largest_shift), 6))})
        rows.append(row)
    return rows


def _writer_reference(plans, names, projected):
    """The csv bytes as a DictWriter over the reference rows writes them."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=csv_columns(names, projected=projected), lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    for plan in plans:
        writer.writerows(_reference_rows(plan, names))
    return out.getvalue()


@pytest.mark.parametrize("projected", [False, True])
def test_csv_rows_built_directly_equal_plan_rows(projected):
    rng = np.random.default_rng(3)
    names = [f"f{i}" for i in range(6)]
    plans = []
    for p in range(60):
        recourses = []
        for rank in range(int(rng.integers(0, 4))):
            features = {n: _CELLS[int(rng.integers(len(_CELLS)))] for n in names}
            recourses.append(Recourse(rank=rank + 1, features=features, changes={}, cost=float(rng.random() * 3),
                                      probability=float(rng.random()), prototype=0, projected=bool(rng.random() < .5)))
        applicant = ["7", "=cmd", "-2", "'a"][p % 4]
        status = "ok" if recourses else ["infeasible", "already-favorable", "invalid-input"][p % 3]
        plans.append(Plan(applicant, status, [None, "", "1 prototype(s) led to the same recourse"][p % 3],
                          "quad", tuple(recourses), {n: 0 for n in names}, partial=bool(p % 5 == 0)))
    for plan in plans:
        columns = csv_columns(names, projected=projected)
        assert plan_csv_rows(plan, names, projected=projected) == [[row[c] for c in columns]
                                                                   for row in _reference_rows(plan, names)]
        assert plan_rows(plan, names) == _reference_rows(plan, names)
    out = io.StringIO()
    writer = PlanWriter(out, "csv", names, projected=projected)
    writer.write(plans[:30])
    writer.write(plans[30:])
    writer.close()
    assert out.getvalue() == _writer_reference(plans, names, projected)


def test_an_empty_csv_output_is_its_header():
    out = io.StringIO()
    writer = PlanWriter(out, "csv", ["a", "b"], projected=True)
    writer.close()
    assert out.getvalue() == ",".join(csv_columns(["a", "b"], projected=True)) + "\n"


def _formula_named_credit(folder, tiny_credit):
    """The small credit problem with two columns named like spreadsheet formulas (``=income``, ``+sector``)."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    base = tiny_credit(folder, seed=3, n=160, cut=60.0, below=0.4, n_applicants=6)
    names = {"income": "=income", "sector": "+sector"}
    frame = base["frame"].rename(columns=names)
    features = ["=income", "years", "+sector", "debt"]
    model = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["+sector"]),
                                    ("num", MinMaxScaler(), ["=income", "years", "debt"])])),
        ("clf", LogisticRegression(C=50.0, max_iter=2000)),
    ]).fit(frame[features], frame["label"])
    paths = {"data": folder / "named.csv", "model": folder / "named.pkl", "applicants": folder / "named-apps.csv"}
    frame.to_csv(paths["data"], index=False)
    joblib.dump(model, paths["model"])
    base["raw"].rename(columns=names).to_csv(paths["applicants"], index=False)
    return paths


def test_csv_header_cells_are_escaped_and_read_back(tmp_path, tiny_credit):
    """A feature named like a formula is escaped in the header as a text cell would be; evaluate maps it back."""
    paths = _formula_named_credit(tmp_path, tiny_credit)
    common = [str(paths["data"]), "--model", str(paths["model"])]
    texts = {}
    for fmt in ("csv", "jsonl"):
        result = runner.invoke(app, ["plan", *common, "--applicants", str(paths["applicants"]), "--format", fmt])
        assert result.exit_code == 0, result.stderr
        texts[fmt] = _write(tmp_path / f"plans.{fmt}", result.stdout)
    header = next(csv.reader(io.StringIO(texts["csv"].read_text(encoding="utf-8"))))
    assert header[5:9] == ["'=income", "years", "'+sector", "debt"]
    assert [c for c in header if c[:1] in "=+-@\t\r"] == []
    # the csv file reads back to the same plans as the jsonl one, the escaped header mapped to its column
    by_csv, by_jsonl = read_plans(texts["csv"]), read_plans(texts["jsonl"])
    assert [r["applicant"] for r in by_csv] == [r["applicant"] for r in by_jsonl]
    assert any(r["recourses"] for r in by_csv)
    for a, b in zip(by_csv, by_jsonl):            # csv cells of a column with empty cells are read as text
        assert [{k: str(v) for k, v in r["features"].items()} for r in a["recourses"]] == \
            [{k: str(v) for k, v in r["features"].items()} for r in b["recourses"]]
    outputs = []
    for fmt in ("csv", "jsonl"):
        result = runner.invoke(app, ["evaluate", *common, "--applicants", str(paths["applicants"]),
                                     "--plans", str(texts[fmt]), "--format", "csv"])
        assert result.exit_code == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]


def test_record_tables_escape_their_header_cells():
    from frpd_cli.cli._output import write_records

    out = io.StringIO()
    write_records(out, "csv", [{"=group": "@a", "n": 1}], ["=group", "n"])
    assert out.getvalue() == "'=group,n\n'@a,1\n"
