"""Evaluation of plan files: hand-computed metrics on tiny plans, invalid rows reported, csv == jsonl."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set
from frpd_cli.evaluation import evaluate_plans, plot_tradeoff, summarize_by_method
from frpd_cli.exceptions import InputError
from frpd_cli.schema import SchemaSpec, infer_schema

runner = CliRunner()


class SumModel:
    """Favourable probability (a + b) / 8: favourable iff a + b >= 4."""

    threshold = 0.5

    def favorable_probability(self, rows) -> np.ndarray:
        return (np.asarray(rows["a"], dtype=float) + np.asarray(rows["b"], dtype=float)) / 8.0


@pytest.fixture(scope="module")
def tiny():
    # encoded: a / 4, b / 4, c=x, c=y
    frame = pd.DataFrame({
        "a": [0.0, 4.0, 0.0, 4.0, 2.0, 0.0],
        "b": [0.0, 0.0, 4.0, 4.0, 2.0, 4.0],
        "c": ["x", "x", "y", "y", "x", "x"],
        "label": [0, 1, 1, 1, 1, 1],
    })
    schema = infer_schema(frame, SchemaSpec(target="label", favorable=1, categorical=("c",), immutable=("c",),
                                            continuous=("a", "b")))
    model = SumModel()
    training = build_training_set(frame, schema, model)
    applicants = pd.DataFrame({"a": [0.0, 3.0], "b": [0.0, 3.0], "c": ["x", "x"]})  # the second is favourable
    return training, model, applicants


def _plan(applicant, method, *features, paths=None):
    recourses = []
    for j, (a, b, c) in enumerate(features):
        r = {"rank": j + 1, "features": {"a": a, "b": b, "c": c}, "cost": 99.0, "probability": 1.0}
        if paths is not None:
            r["path"] = paths[j]
        recourses.append(r)
    return {"applicant": applicant, "status": "ok", "reason": None, "method": method, "recourses": recourses}


def test_metrics_match_hand_computed_values(tiny):
    training, model, applicants = tiny
    rec = _plan("0", "m", (4.0, 0.0, "x"), (1.0, 3.0, "x"))
    row = evaluate_plans([rec], training, model, applicants).iloc[0]
    # x0 = (0, 0, 1, 0); r1 = (1, 0, 1, 0); r2 = (0.25, 0.75, 1, 0)
    d2 = math.sqrt(0.25**2 + 0.75**2)
    assert row["cost"] == pytest.approx((1.0 + d2) / 2)               # the file's cost 99 is ignored
    assert row["anti-diversity"] == pytest.approx(0.25 / d2)          # cos((1, 0), (0.25, 0.75))
    q = 1.0 / (1.0 + math.sqrt(0.75**2 + 0.75**2))
    assert row["dpp"] == pytest.approx(1.0 - q * q)
    # r1 is training row 1; r2's nearest favourable rows are (0, 1, 1, 0) and (0.5, 0.5, 1, 0)
    assert row["manifold"] == pytest.approx(math.sqrt(2 * 0.25**2))
    assert row["sparsity"] == pytest.approx(1.5)                      # r1 changes a; r2 changes a and b
    assert row["validity"] == 1.0 and row["full plans"] == 1.0
    assert row["violations"] == 0.0 and row["problems"] == ""
    assert row["status"] == "needs-recourse" and row["k"] == 2 and row["n_favorable"] == 2


def test_invalid_and_violating_recourses_are_reported(tiny):
    training, model, applicants = tiny
    bad = _plan("0", "bad", (1.0, 1.0, "x"), (5.0, 0.0, "y"))  # not favourable; c immutable and a > 4
    vocab = _plan("0", "vocab", (4.0, 0.0, "x"), (4.0, 0.0, "z"))  # "z" is not a level of c
    per = evaluate_plans([bad, vocab], training, model, applicants)
    first, second = per.iloc[0], per.iloc[1]
    assert first["validity"] == 0.0 and first["n_favorable"] == 1
    assert first["violations"] == 2.0                                 # one immutable, one range
    assert "not predicted favourable" in first["problems"] and "1 immutable, 1 range" in first["problems"]
    assert second["violations"] == 2.0 and "1 immutable, 1 vocabulary" in second["problems"]  # c is immutable
    assert second["validity"] == 0.0 and math.isnan(second["cost"])  # cannot be encoded
    summary = summarize_by_method(per).set_index("method")
    assert summary.loc["bad", "violations mean"] == 2.0
    assert summary.loc["bad", "validity mean"] == 0.0


def test_k_defaults_to_the_largest_rank_per_method(tiny):
    training, model, applicants = tiny
    full = _plan("0", "m", (4.0, 0.0, "x"), (0.0, 4.0, "x"), (2.0, 2.0, "x"))
    short = _plan("1", "m", (4.0, 0.0, "x"))
    short["applicant"] = "0"
    per = evaluate_plans([full, short], training, model, applicants)
    assert per["k"].tolist() == [3, 3]
    assert per["full plans"].tolist() == [1.0, 0.0] and per["validity"].tolist() == [1.0, 0.0]
    assert evaluate_plans([short], training, model, applicants, k=1)["validity"].tolist() == [1.0]


def test_already_favourable_applicants_are_left_out_of_the_means(tiny):
    training, model, applicants = tiny
    recs = [_plan("0", "m", (4.0, 0.0, "x")), {"applicant": "1", "status": "already-favorable", "reason": None,
                                                 "method": "m", "recourses": []}]
    per = evaluate_plans(recs, training, model, applicants)
    assert per["status"].tolist() == ["needs-recourse", "already-favorable"]
    summary = summarize_by_method(per).iloc[0]
    assert summary["applicants"] == 2 and summary["needing recourse"] == 1
    assert summary["validity mean"] == 1.0


def test_an_empty_plan_is_invalid(tiny):
    training, model, applicants = tiny
    recs = [{"applicant": "0", "status": "infeasible", "reason": "x", "method": "m", "recourses": []}]
    row = evaluate_plans(recs, training, model, applicants, k=3).iloc[0]
    assert row["validity"] == 0.0 and row["full plans"] == 0.0 and math.isnan(row["cost"])


def _no_recourse(applicant, method, status):
    return {"applicant": applicant, "status": status, "reason": "x", "method": method, "recourses": []}


def test_plans_without_recourse_count_the_same_without_the_applicants_values(tiny):
    """Oracle: the applicants rebuilt from the records (those without a recourse counted from their status)
    give exactly the metrics of the applicants' own rows."""
    from frpd_cli.evaluation import applicants_from_records

    training, model, applicants = tiny
    applicants = pd.concat([applicants, pd.DataFrame({"a": [1.0], "b": [0.0], "c": ["x"]})], ignore_index=True)
    ok = {"applicant": "0", "status": "ok", "reason": None, "method": "m",
          "recourses": [{"rank": 1, "features": {"a": 4.0, "b": 0.0, "c": "x"}, "changes": {"a": [0.0, 4.0]}}]}
    recs = [ok, _no_recourse("1", "m", "already-favorable"), _no_recourse("2", "m", "infeasible"),
            _no_recourse("0", "n", "infeasible"), _no_recourse("1", "n", "already-favorable"),
            _no_recourse("2", "n", "infeasible")]
    frame, ids, missing = applicants_from_records(recs, ["a", "b", "c"])
    assert ids == ["0"] and missing == ["1", "2"]
    with_rows = evaluate_plans(recs, training, model, applicants)
    without = evaluate_plans(recs, training, model, frame, ids, without_values=missing)
    pd.testing.assert_frame_equal(without, with_rows)
    assert without["status"].tolist() == ["needs-recourse", "already-favorable", "needs-recourse"] * 2
    summary = summarize_by_method(without)
    pd.testing.assert_frame_equal(summary, summarize_by_method(with_rows))
    assert summary["needing recourse"].tolist() == [2, 2] and summary["validity mean"].tolist() == [0.5, 0.0]
    assert summary["n without recourse"].tolist() == [1, 2]
    # no applicant row at all: every plan counted from its status
    alone = evaluate_plans(recs[1:], training, model, frame.iloc[:0], [], without_values=["0", "1", "2"])
    pd.testing.assert_frame_equal(alone, with_rows.iloc[1:].reset_index(drop=True))


def test_a_plan_without_values_needs_no_recourse_and_a_known_status(tiny):
    training, model, applicants = tiny
    with pytest.raises(InputError, match="holds recourses"):
        evaluate_plans([_plan("0", "m", (4.0, 0.0, "x"))], training, model, applicants.iloc[:0], [],
                       without_values=["0"])
    with pytest.raises(InputError, match="status 'invalid-input'.*--applicants"):
        evaluate_plans([_no_recourse("0", "m", "invalid-input")], training, model, applicants.iloc[:0], [],
                       without_values=["0"])


def test_path_metrics_by_hand(tiny):
    training, model, applicants = tiny
    # x0 -> row 4 (0.5, 0.5) -> row 1 (1, 0) and x0 -> row 4 -> row 5 (0, 1): every step has length sqrt(0.5)
    rec = _plan("0", "g", (4.0, 0.0, "x"), (0.0, 4.0, "x"), paths=[[4, 1], [4, 5]])
    row = evaluate_plans([rec], training, model, applicants).iloc[0]
    step = math.sqrt(0.5)
    assert row["path cost"] == pytest.approx(2 * step)
    assert row["cost"] == pytest.approx(2 * step)                     # graph plans: the path cost
    assert row["path diversity"] == pytest.approx(1.0)                # one substitution
    assert row["path anti-diversity"] == pytest.approx(1 / 3)         # shared edge x0 -> 4 out of three
    assert row["anti-diversity"] == pytest.approx(0.0)
    summary = summarize_by_method(evaluate_plans([rec], training, model, applicants))
    assert "path diversity mean" in summary.columns


def test_path_outside_the_training_rows_is_reported(tiny):
    training, model, applicants = tiny
    rec = _plan("0", "g", (4.0, 0.0, "x"), (0.0, 4.0, "x"), paths=[[4, 1], [4, 60]])
    row = evaluate_plans([rec], training, model, applicants).iloc[0]
    assert "outside the training rows" in row["problems"] and math.isnan(row["path cost"])


def test_unknown_applicant_is_an_input_error(tiny):
    training, model, applicants = tiny
    with pytest.raises(InputError, match="applicant 'A9'"):
        evaluate_plans([_plan("A9", "m", (4.0, 0.0, "x"))], training, model, applicants)


def test_text_values_from_csv_equal_typed_values(tiny):
    training, model, applicants = tiny
    typed = evaluate_plans([_plan("0", "m", (4.0, 0.0, "x"), (1.0, 3.0, "x"))], training, model, applicants)
    text = evaluate_plans([_plan("0", "m", ("4", "0.0", "x"), ("1", "3", "x"))], training, model, applicants)
    pd.testing.assert_frame_equal(typed, text)


def test_plot_tradeoff_writes_a_png(tiny, tmp_path):
    pytest.importorskip("matplotlib")
    training, model, applicants = tiny
    per = evaluate_plans([_plan("0", "quad@0.5", (4.0, 0.0, "x"), (1.0, 3.0, "x")),
                          _plan("0", "quad@0.9", (4.0, 0.0, "x"), (0.0, 4.0, "x"))], training, model, applicants)
    out = plot_tradeoff(summarize_by_method(per), tmp_path / "p.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- command line


def _common(paths):
    return [str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(paths["applicants"])]


@pytest.fixture(scope="module")
def plan_files(sample_paths, tmp_path_factory):
    folder = tmp_path_factory.mktemp("plans")
    out = {}
    for fmt in ("csv", "jsonl"):
        chunks = []
        for method in ("quad", "dpp-greedy"):
            result = runner.invoke(app, ["plan", *_common(sample_paths), "--method", method, "--format", fmt])
            assert result.exit_code == 0, result.stderr
            text = result.stdout
            if fmt == "csv" and chunks:
                text = text.split("\n", 1)[1]             # concatenated methods share one header
            chunks.append(text)
        out[fmt] = folder / f"plans.{fmt}"
        out[fmt].write_text("".join(chunks), encoding="utf-8")
    return out


def test_csv_and_jsonl_plans_give_the_same_numbers(sample_paths, plan_files):
    outputs = []
    for fmt in ("csv", "jsonl"):
        result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(plan_files[fmt]),
                                     "--format", "csv"])
        assert result.exit_code == 0, result.stderr
        outputs.append(result.stdout)
        assert "Evaluated 40 plan(s) of 2 method(s)" in result.stderr
    assert outputs[0] == outputs[1]
    rows = list(csv.DictReader(io.StringIO(outputs[0])))
    assert [r["method"] for r in rows] == ["quad", "dpp-greedy"]
    for r in rows:
        # a partial plan (1-minimal recourses merged into fewer than K, or a recourse another one of the plan
        # dominates left out: measured 14 full plans of 20) is not a valid plan of K recourses
        assert float(r["validity mean"]) == pytest.approx(float(r["n full plans"]) / 20)
        assert float(r["n full plans"]) >= 12 and float(r["violations mean"]) == 0.0


def test_formats_json_and_table(sample_paths, plan_files):
    result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(plan_files["jsonl"]),
                                 "--format", "json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data[0]["method"] == "quad" and "cost mean" in data[0] and "cost std" in data[0]
    table = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(plan_files["jsonl"]),
                                "--format", "table"])
    assert table.exit_code == 0 and " ± " in table.stdout and "anti-diversity" in table.stdout
    assert "Evaluated" not in table.stdout                            # the summary goes to stderr


def test_a_violating_row_is_reported(sample_paths, plan_files, tmp_path):
    frame = pd.read_csv(plan_files["csv"], dtype=str, keep_default_na=False)
    first = frame.index[0]
    levels = sorted(set(pd.read_csv(sample_paths["data"])["personal_status"]))
    frame.loc[first, "personal_status"] = next(v for v in levels if v != frame.loc[first, "personal_status"])
    frame.loc[first, "credit_amount"] = "1e9"
    bad = tmp_path / "bad.csv"
    frame.to_csv(bad, index=False)
    result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(bad), "--format", "csv",
                                 "--per-applicant"])
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    target = next(r for r in rows if r["applicant"] == frame.loc[first, "applicant"] and r["method"] == "quad")
    assert float(target["violations"]) == 2.0 and "1 immutable, 1 range" in target["problems"]
    assert "constraint violation" in result.stderr
    others = [r for r in rows if r is not target]
    assert all(float(r["violations"]) == 0.0 for r in others)


def test_contract_form_without_applicants_on_jsonl(sample_paths, plan_files):
    """`frpd evaluate DATA --model MODEL --plans FILE`: jsonl recourses carry the applicants' values."""
    base = ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--format", "csv"]
    without = runner.invoke(app, [*base, "--plans", str(plan_files["jsonl"])])
    with_file = runner.invoke(app, [*base, "--plans", str(plan_files["jsonl"]), "--applicants",
                                    str(sample_paths["applicants"])])
    assert without.exit_code == 0, without.stderr
    assert without.stdout == with_file.stdout


def test_csv_plans_without_applicants_ask_for_them(sample_paths, plan_files):
    result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--plans", str(plan_files["csv"])])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error:") and "--applicants" in result.stderr


@pytest.fixture(scope="module")
def gapped_plans(sample_paths, tmp_path_factory):
    """Plans of 24 rows of the training file, some already favourable and, with --max-changes 1, some
    infeasible (measured: 3): jsonl of two methods concatenated, json and csv; and the applicants file."""
    folder = tmp_path_factory.mktemp("gapped")
    frame = pd.read_csv(sample_paths["data"]).drop(columns="label").head(24)
    frame.insert(0, "applicant_id", [f"R{i:02d}" for i in range(len(frame))])
    applicants = folder / "applicants.csv"
    frame.to_csv(applicants, index=False)
    base = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(applicants), "--max-changes", "1"]
    out = {"applicants": applicants}
    for fmt, methods in (("jsonl", ("quad", "nearest")), ("json", ("quad",)), ("csv", ("quad",))):
        text = ""
        for method in methods:
            result = runner.invoke(app, [*base, "--method", method, "--format", fmt])
            assert result.exit_code == 0, result.stderr
            text += result.stdout
        out[fmt] = folder / f"plans.{fmt}"
        out[fmt].write_text(text, encoding="utf-8")
    statuses = [json.loads(line)["status"] for line in out["jsonl"].read_text(encoding="utf-8").splitlines()]
    assert "infeasible" in statuses and "already-favorable" in statuses and "ok" in statuses
    return out


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
@pytest.mark.parametrize("per_applicant", [False, True])
def test_without_applicants_infeasible_and_favourable_plans_count_as_with_them(sample_paths, gapped_plans, fmt,
                                                                                per_applicant):
    """Oracle: jsonl/json plans evaluated without --applicants give exactly the output with it; plans without
    a recourse count from their status (infeasible: needing one, validity 0), none is left out."""
    base = ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--plans", str(gapped_plans[fmt]), "--format", "csv",
            *(["--per-applicant"] if per_applicant else [])]
    without = runner.invoke(app, base)
    with_file = runner.invoke(app, [*base, "--applicants", str(gapped_plans["applicants"])])
    assert with_file.exit_code == 0, with_file.stderr
    assert without.exit_code == 0, without.stderr
    assert without.stdout == with_file.stdout
    assert "left out" not in without.stderr
    if not per_applicant:
        rows = list(csv.DictReader(io.StringIO(without.stdout)))
        assert all(r["applicants"] == "24" and int(r["n without recourse"]) >= 1 for r in rows)


def test_csv_plans_with_applicants_count_as_jsonl(sample_paths, gapped_plans):
    outputs = []
    for fmt in ("csv", "json"):
        result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                     "--schema", str(sample_paths["schema"]), "--plans", str(gapped_plans[fmt]),
                                     "--applicants", str(gapped_plans["applicants"]), "--format", "csv",
                                     "--per-applicant"])
        assert result.exit_code == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]


def test_csv_plans_of_no_recourse_only_need_no_applicants(sample_paths, gapped_plans, tmp_path):
    frame = pd.read_csv(gapped_plans["csv"], dtype=str, keep_default_na=False)
    empty = tmp_path / "empty.csv"
    frame[frame["rank"] == ""].to_csv(empty, index=False)
    base = ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--plans", str(empty), "--format", "csv"]
    without = runner.invoke(app, base)
    with_file = runner.invoke(app, [*base, "--applicants", str(gapped_plans["applicants"])])
    assert without.exit_code == 0, without.stderr
    assert without.stdout == with_file.stdout
    row = next(csv.DictReader(io.StringIO(without.stdout)))
    assert row["validity mean"] == "0.0" and row["n without recourse"] == row["needing recourse"] != "0"


def test_invalid_input_plans_without_applicants_are_left_out_by_name(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["applicants"]).head(4)
    frame["housing"] = frame["housing"].astype(object)
    frame.loc[1, "housing"] = None
    applicants = tmp_path / "missing.csv"
    frame.to_csv(applicants, index=False)
    plan = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
                               str(sample_paths["schema"]), "--applicants", str(applicants), "--drop-missing",
                               "--format", "jsonl"])
    assert plan.exit_code == 0, plan.stderr
    plans = tmp_path / "plans.jsonl"
    plans.write_text(plan.stdout, encoding="utf-8")
    result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--plans", str(plans), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    assert f"1 plan(s) of status invalid-input ({frame.loc[1, 'applicant_id']}) are left out" in result.stderr
    assert next(csv.DictReader(io.StringIO(result.stdout)))["applicants"] == "3"


def test_recourses_without_changes_need_the_applicants(sample_paths, gapped_plans, tmp_path):
    records = [json.loads(line) for line in gapped_plans["jsonl"].read_text(encoding="utf-8").splitlines()]
    first = next(r for r in records if r["recourses"])
    for rec in records:                             # every method's plan of that applicant
        if rec["applicant"] == first["applicant"]:
            for r in rec["recourses"]:
                del r["changes"]
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--plans", str(edited)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error:") and first["applicant"] in result.stderr
    assert "--applicants" in result.stderr


def test_applicants_rebuilt_from_records():
    from frpd_cli.evaluation import applicants_from_records

    records = [
        {"applicant": "a", "recourses": [{"features": {"x": 3, "c": "p"}, "changes": {"x": [1, 3]}}]},
        {"applicant": "b", "recourses": []},
        {"applicant": "a", "recourses": [{"features": {"x": 1, "c": "q"}, "changes": {"c": ["p", "q"]}}]},
    ]
    frame, ids, missing = applicants_from_records(records, ["x", "c"])
    assert ids == ["a"] and missing == ["b"]
    assert frame.to_dict("records") == [{"x": 1, "c": "p"}]


def test_plans_for_other_applicants_exit_1(sample_paths, plan_files, tmp_path):
    applicants = pd.read_csv(sample_paths["applicants"]).head(3)
    few = tmp_path / "few.csv"
    applicants.to_csv(few, index=False)
    args = ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(few), "--plans", str(plan_files["csv"])]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error:") and "not in the applicants" in result.stderr


def test_plot_option(sample_paths, plan_files, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "tradeoff.png"
    result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(plan_files["csv"]),
                                 "--format", "csv", "--plot", str(png)])
    assert result.exit_code == 0, result.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_plot_without_matplotlib_says_what_to_install(sample_paths, plan_files, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(plan_files["csv"]),
                                 "--plot", str(tmp_path / "x.png")])
    assert result.exit_code == 1 and result.stdout == ""
    assert "frpd-cli[plot]" in result.stderr


def test_graph_path_costs_and_steps_off_the_graph(tiny):
    from frpd_cli.graph import build_graph

    training, model, applicants = tiny
    graph = build_graph(training.X, training.codes, n_neighbors=5)   # every actionable pair within a c-group
    on = _plan("0", "g", (4.0, 0.0, "x"), (0.0, 4.0, "x"), paths=[[4, 1], [4, 5]])
    row = evaluate_plans([on], training, model, applicants, graph=graph).iloc[0]
    assert row["path cost"] == pytest.approx(2 * math.sqrt(0.5)) and row["problems"] == ""
    off = _plan("0", "g", (4.0, 0.0, "x"), (0.0, 4.0, "y"), paths=[[4, 1], [4, 2]])  # 4 -> 2 changes c
    row = evaluate_plans([off], training, model, applicants, graph=graph).iloc[0]
    assert "leaves the graph" in row["problems"] and math.isnan(row["path cost"])
    assert row["violations"] == 1.0


def test_keeping_an_out_of_range_applicant_value_is_not_a_violation(tiny):
    training, model, _ = tiny
    applicants = pd.DataFrame({"a": [-1.0], "b": [0.0], "c": ["x"]})   # a below the training minimum 0
    row = evaluate_plans([_plan("0", "m", (-1.0, 4.0, "x"), (-1.0, 5.0, "x"))], training, model,
                         applicants).iloc[0]
    assert row["violations"] == 1.0 and "1 range" in row["problems"]  # only b = 5 > 4 counts


def test_dominated_is_the_share_of_recourses_another_of_the_plan_beats(sample_paths, tmp_path):
    # hand-made plans for the first three sample applicants, counted by hand: savings is an ordinal
    # (none < little < moderate < rich), so "rich" asks more than "moderate"; a longer cut of duration with a
    # change of housing asks more than the shorter cut alone; a smaller cut with a credit change asks less of
    # duration than the longer cut, so neither beats the other
    applicants = pd.read_csv(sample_paths["applicants"])
    base = {i: applicants.iloc[i].drop("applicant_id").to_dict() for i in range(3)}
    plans = {
        0: [{"savings": "moderate"}, {"savings": "rich"}, {"housing": "own"}],                       # 1 of 3
        1: [{"duration": 24}, {"duration": 18, "housing": "own"}, {"duration": 28, "credit_amount": 1500.0}],  # 1/3
        2: [{"savings": "little"}, {"job": "management"}, {"duration": 12}],                          # none
    }
    lines = []
    for i, changes in plans.items():
        recourses = [{"rank": j + 1, "features": {**base[i], **c}, "cost": 1.0, "probability": 0.6}
                     for j, c in enumerate(changes)]
        lines.append(json.dumps({"applicant": applicants["applicant_id"][i], "status": "ok", "reason": None,
                                 "method": "hand", "recourses": recourses}, default=float))
    path = tmp_path / "plans.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    applicants_path = tmp_path / "applicants.csv"
    applicants.head(3).to_csv(applicants_path, index=False)
    common = [str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
              str(sample_paths["schema"]), "--applicants", str(applicants_path)]
    result = runner.invoke(app, ["evaluate", *common, "--plans", str(path), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    row = json.loads(result.stdout)[0]
    assert row["dominated mean"] == pytest.approx((1 / 3 + 1 / 3 + 0) / 3)
    # frpd's own plans of the sample hold none
    result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans",
                                 str(_write_plans(sample_paths, tmp_path)), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["dominated mean"] == 0.0


def _write_plans(sample_paths, folder):
    result = runner.invoke(app, ["plan", *_common(sample_paths), "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    path = folder / "frpd.jsonl"
    path.write_text(result.stdout, encoding="utf-8")
    return path


def test_short_plans_are_told_apart_from_plans_holding_a_refused_recourse(sample_paths, plan_files, tmp_path):
    """A plan below validity 1 only for holding fewer than K recourses is not a plan whose recourse the model turns
    down: stderr counts the two apart, and warns only of the second."""
    records = [json.loads(line) for line in plan_files["jsonl"].read_text(encoding="utf-8").splitlines()]
    quad = [r for r in records if r["method"] == "quad"]
    short = sum(1 for r in quad if r["status"] == "ok" and len(r["recourses"]) < 3)
    assert short >= 1                                          # the sample holds partial plans
    result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(plan_files["jsonl"]),
                                 "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    assert "does not predict favourable" not in result.stderr
    assert f"Note: {sum(1 for r in records if r['status'] == 'ok' and len(r['recourses']) < 3)} plan(s) " \
           "count as not valid only for holding fewer than K recourses" in result.stderr
    # one full plan's first recourse sent back to the applicant's own (refused) values
    full = next(r for r in quad if len(r["recourses"]) == 3)
    first = full["recourses"][0]
    first["features"].update({f: old for f, (old, _new) in first["changes"].items()})
    first["changes"] = {}
    bad = tmp_path / "refused.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = runner.invoke(app, ["evaluate", *_common(sample_paths), "--plans", str(bad), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    assert "Warning: 1 plan(s) hold a recourse the model does not predict favourable" in result.stderr
