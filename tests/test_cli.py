"""The command line: exit codes, stdout carries data only, stderr carries messages, formats match the contract."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli import __version__
from frpd_cli.cli.app import app

runner = CliRunner()


def _plan_args(paths, *extra):
    return ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(paths["applicants"]), *extra]


def test_help_lists_the_five_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("build-graph", "select", "interpolate", "plan", "evaluate"):
        assert command in result.stdout


@pytest.mark.parametrize("command", ["build-graph", "select", "interpolate", "plan", "evaluate"])
def test_every_command_help_has_an_example(command):
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.stdout


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"frpd {__version__}"


def test_module_entry_point_runs():
    done = subprocess.run([sys.executable, "-m", "frpd_cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"frpd {__version__}"


def test_usage_error_exits_2():
    result = runner.invoke(app, ["plan", "--no-such-option"])
    assert result.exit_code == 2
    assert result.stdout == ""


def test_out_of_range_option_is_a_usage_error(sample_paths):
    result = runner.invoke(app, _plan_args(sample_paths, "-k", "0"))
    assert result.exit_code == 2
    assert result.stdout == ""


def _same_number(a, b) -> bool:
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def test_plan_csv_contract(sample_paths):
    result = runner.invoke(app, _plan_args(sample_paths, "--format", "csv", "--max-move", "none"))
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    features = ["age", "personal_status", "duration", "credit_amount", "housing", "job", "savings"]
    assert list(rows[0].keys()) == ["applicant", "status", "reason", "rank", "method", *features, "cost",
                                    "probability", "n_changes", "partial", "largest_shift"]
    applicants = pd.read_csv(sample_paths["applicants"])
    # n_changes counts the features that differ from the applicant's; ranks go by cost; partial < K recourses
    by_id = applicants.set_index(applicants["applicant_id"].astype(str))
    for r in rows:
        x0 = by_id.loc[r["applicant"]]
        assert int(r["n_changes"]) == sum(str(x0[f]) != r[f] and not _same_number(x0[f], r[f]) for f in features)
    for a in dict.fromkeys(r["applicant"] for r in rows):
        mine = [r for r in rows if r["applicant"] == a]
        costs = [float(r["cost"]) for r in mine]
        assert costs == sorted(costs) and [int(r["rank"]) for r in mine] == list(range(1, len(mine) + 1))
        assert {r["partial"] for r in mine} == {"true" if len(mine) < 3 else "false"}
    # the schema file names applicant_id as the id column; every applicant appears, in input order
    seen = list(dict.fromkeys(r["applicant"] for r in rows))
    assert seen == applicants["applicant_id"].tolist()
    assert {r["status"] for r in rows} == {"ok"}
    assert all(float(r["probability"]) >= 0.5 for r in rows)
    assert "applicant(s)" in result.stderr          # the summary goes to stderr


def test_without_id_column_applicants_are_row_numbers(sample_paths, tmp_path):
    plain = tmp_path / "applicants.csv"
    pd.read_csv(sample_paths["applicants"]).drop(columns="applicant_id").to_csv(plain, index=False)
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--immutable", "personal_status", "--increasing", "age", "--applicants", str(plain),
                                 "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["applicant"] for r in records] == [str(i) for i in range(20)]


def test_plan_jsonl_contract_with_id_column(sample_paths):
    result = runner.invoke(app, _plan_args(sample_paths, "--format", "jsonl", "--id-column", "applicant_id"))
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["applicant"] for r in records] == pd.read_csv(sample_paths["applicants"])["applicant_id"].tolist()
    first = records[0]
    assert list(first) == ["applicant", "status", "reason", "method", "recourses", "partial"]
    rec = first["recourses"][0]
    assert list(rec) == ["rank", "features", "changes", "cost", "probability", "n_changes", "largest_shift"]
    for name, (old, new) in rec["changes"].items():
        assert rec["features"][name] == new and old != new
    for record in records:
        assert record["partial"] == (record["status"] == "ok" and len(record["recourses"]) < 3)
        for r in record["recourses"]:
            assert r["n_changes"] == len(r["changes"])


def test_json_is_the_jsonl_objects_as_an_array(sample_paths):
    a = runner.invoke(app, _plan_args(sample_paths, "--format", "json"))
    b = runner.invoke(app, _plan_args(sample_paths, "--format", "jsonl"))
    assert json.loads(a.stdout) == [json.loads(line) for line in b.stdout.splitlines()]


def test_table_shows_changes(sample_paths):
    result = runner.invoke(app, _plan_args(sample_paths, "--format", "table"))
    assert result.exit_code == 0, result.stderr
    assert "Applicant" in result.stdout and "→" in result.stdout


def test_output_file_written_and_stdout_empty(sample_paths, tmp_path):
    out = tmp_path / "plans.csv"
    result = runner.invoke(app, _plan_args(sample_paths, "--output", str(out)))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert out.read_text().startswith("applicant,status,reason,rank,method,")
    assert [p.name for p in tmp_path.iterdir()] == ["plans.csv"]


def test_same_inputs_byte_identical_for_jobs_1_and_2(sample_paths):
    one = runner.invoke(app, _plan_args(sample_paths, "--format", "csv", "--jobs", "1"))
    two = runner.invoke(app, _plan_args(sample_paths, "--format", "csv", "--jobs", "2", "--chunk-size", "4"))
    assert one.exit_code == two.exit_code == 0
    assert one.stdout == two.stdout


def test_domain_error_exits_1_without_traceback(sample_paths, tmp_path):
    # a column the schema file names is an input error (exit 1); the same column given with --immutable is a
    # usage error (exit 2), naming the flag
    schema = tmp_path / "schema.toml"
    schema.write_text(sample_paths["schema"].read_text().replace('immutable = ["personal_status"]',
                                                                 'immutable = ["no_such_column"]'))
    result = runner.invoke(app, _plan_args({**sample_paths, "schema": schema}))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and "no_such_column" in result.stderr
    assert "Traceback" not in result.stderr and "Invalid value" not in result.stderr
    flagged = runner.invoke(app, _plan_args(sample_paths, "--immutable", "no_such_column"))
    assert flagged.exit_code == 2 and flagged.stdout == ""
    assert "Error: Invalid value for '--immutable': Column 'no_such_column'" in flagged.stderr


def test_missing_applicant_column_named(sample_paths, tmp_path):
    bad = tmp_path / "bad.csv"
    pd.read_csv(sample_paths["applicants"]).drop(columns=["savings"]).to_csv(bad, index=False)
    args = _plan_args({**sample_paths, "applicants": bad})
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "'savings'" in result.stderr


def test_failed_run_leaves_no_output_file(sample_paths, tmp_path):
    out = tmp_path / "plans.csv"
    result = runner.invoke(app, _plan_args(sample_paths, "--method", "nope", "--output", str(out)))
    assert result.exit_code == 2 and "--method" in result.stderr and "quad-dp" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_select_then_interpolate_matches_plan(sample_paths, tmp_path):
    sel = tmp_path / "sel"
    common = ["--schema", str(sample_paths["schema"])]
    r1 = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                             "--applicants", str(sample_paths["applicants"]), "--out", str(sel), "--format", "csv",
                             *common])
    assert r1.exit_code == 0, r1.stderr
    protos = pd.read_csv(sel / "prototypes.csv")
    assert list(protos.columns[:7]) == ["applicant", "status", "method", "theta", "rank", "row", "objective"]
    assert (protos["status"] == "ok").all() and len(protos) == 3 * 20
    r2 = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]),
                             "--out", str(tmp_path / "plan"), "--format", "jsonl"])
    assert r2.exit_code == 0, r2.stderr
    r3 = runner.invoke(app, _plan_args(sample_paths, "--format", "jsonl"))
    assert r2.stdout == r3.stdout
    assert (tmp_path / "plan" / "plans.jsonl").read_text() == r3.stdout


def test_interpolate_refuses_another_model(sample_paths, tmp_path):
    sel = tmp_path / "sel"
    r1 = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                             "--applicants", str(sample_paths["applicants"]), "--out", str(sel), "--format", "csv",
                             "--schema", str(sample_paths["schema"])])
    assert r1.exit_code == 0, r1.stderr
    other = tmp_path / "other.pkl"
    other.write_bytes(sample_paths["model"].read_bytes() + b"\0")
    r2 = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(other), "--out",
                             str(tmp_path / "p")])
    assert r2.exit_code == 1 and "frpd select" in r2.stderr
    assert not (tmp_path / "p").exists()


def test_select_theta_list(sample_paths, tmp_path):
    sel = tmp_path / "sel"
    result = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--applicants", str(sample_paths["applicants"]), "--out", str(sel),
                                 "--theta", "0,0.5,1", "--method", "dpp-greedy", "--format", "csv",
                                 "--schema", str(sample_paths["schema"])])
    assert result.exit_code == 0, result.stderr
    protos = pd.read_csv(sel / "prototypes.csv")
    assert sorted(protos["theta"].unique().tolist()) == [0.0, 0.5, 1.0]


def test_select_reuses_saved_eigendecompositions(sample_paths, tmp_path):
    common = [str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--applicants",
              str(sample_paths["applicants"]), "--schema", str(sample_paths["schema"]), "--format", "csv"]
    first = runner.invoke(app, ["select", *common, "--out", str(tmp_path / "a"), "--save-eigen"])
    assert first.exit_code == 0, first.stderr
    with __import__("numpy").load(tmp_path / "a" / "eigen.npz", allow_pickle=False) as eig:
        assert eig["values_0"].dtype.name == "float32" and eig["vectors_0"].shape[0] == eig["candidates_0"].size
    second = runner.invoke(app, ["select", *common, "--out", str(tmp_path / "b"), "--reuse-eigen",
                                 str(tmp_path / "a")])
    assert second.exit_code == 0, second.stderr
    assert "Reused 20 stored eigendecomposition(s)" in second.stderr
    a = pd.read_csv(tmp_path / "a" / "prototypes.csv")
    b = pd.read_csv(tmp_path / "b" / "prototypes.csv")
    # the reduced problem is solved exactly on the full objective: the same prototypes come out
    assert a["row"].tolist() == b["row"].tolist()
    missing = runner.invoke(app, ["select", *common, "--out", str(tmp_path / "c"), "--reuse-eigen",
                                  str(tmp_path / "b")])
    assert missing.exit_code == 1 and "--save-eigen" in missing.stderr


def test_select_with_projection_marks_prototypes(sample_paths, tmp_path):
    result = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--applicants", str(sample_paths["applicants"]), "--schema",
                                 str(sample_paths["schema"]), "--immutable", "housing", "--format", "csv",
                                 "--immutable-policy", "project", "--out", str(tmp_path / "s")])
    assert result.exit_code == 0, result.stderr
    protos = pd.read_csv(tmp_path / "s" / "prototypes.csv", dtype={"applicant": str})
    assert list(protos.columns[-2:]) == ["projected", "objective_gap"]  # new columns go after existing ones
    applicants = pd.read_csv(sample_paths["applicants"]).set_index("applicant_id")
    for _, row in protos.iterrows():
        x0 = applicants.loc[row["applicant"]]
        assert row["housing"] == x0["housing"] and row["personal_status"] == x0["personal_status"]
    plans = runner.invoke(app, ["interpolate", "--selection", str(tmp_path / "s"), "--model",
                                str(sample_paths["model"]), "--out", str(tmp_path / "p"), "--format", "jsonl"])
    assert plans.exit_code == 0, plans.stderr
    records = [__import__("json").loads(line) for line in plans.stdout.splitlines()]
    n_projected = sum(bool(r.get("projected")) for rec in records for r in rec["recourses"])
    flagged = int(protos["projected"].astype(str).str.lower().eq("true").sum())
    assert 0 < n_projected <= flagged


def test_select_artifact_bytes_identical_across_runs(sample_paths, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    args = ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--applicants",
            str(sample_paths["applicants"]), "--schema", str(sample_paths["schema"]), "--format", "csv",
            "--seed", "11", "--save-eigen", "--theta", "0.5,0.9"]
    a = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    b = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert a.exit_code == b.exit_code == 0, a.stderr
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert "eigen.npz" in names and "manifest.json" in names
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_build_graph_neighbors_below_one_is_refused(sample_paths, tmp_path):
    result = runner.invoke(app, ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--neighbors", "0", "--out",
                                 str(tmp_path / "g")])
    assert result.exit_code in (1, 2) and result.stdout == ""
    assert not (tmp_path / "g").exists()


def test_plan_with_a_skops_model_matches_the_pickle(sample_paths, tmp_path):
    sio = pytest.importorskip("skops.io")
    import joblib

    skops_path = tmp_path / "model.skops"
    sio.dump(joblib.load(sample_paths["model"]), skops_path)
    from_pickle = runner.invoke(app, _plan_args(sample_paths, "--format", "jsonl"))
    from_skops = runner.invoke(app, _plan_args({**sample_paths, "model": skops_path}, "--format", "jsonl"))
    assert from_skops.exit_code == 0, from_skops.stderr
    assert from_skops.stdout == from_pickle.stdout


def test_every_command_takes_the_shared_flags():
    for command in ("build-graph", "select", "interpolate", "plan", "evaluate"):
        text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
        for flag in ("--schema", "--target", "--favorable", "--immutable", "--increasing", "--decreasing", "--seed"):
            assert flag in text, (command, flag)


def test_interpolate_refuses_other_schema_flags(sample_paths, tmp_path):
    sel = tmp_path / "sel"
    r1 = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                             "--applicants", str(sample_paths["applicants"]), "--out", str(sel), "--format", "csv",
                             "--schema", str(sample_paths["schema"])])
    assert r1.exit_code == 0, r1.stderr
    base = ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]), "--format", "csv"]
    same = runner.invoke(app, [*base, "--out", str(tmp_path / "p1"), "--immutable", "personal_status",
                               "--schema", str(sample_paths["schema"]), "--seed", "4"])
    assert same.exit_code == 0, same.stderr
    other = runner.invoke(app, [*base, "--out", str(tmp_path / "p2"), "--immutable", "housing"])
    assert other.exit_code == 1 and "another schema" in other.stderr and "housing" in other.stderr
    assert not (tmp_path / "p2").exists()


def test_select_refuses_duplicate_applicant_ids(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["applicants"])
    frame.loc[4, "applicant_id"] = frame.loc[1, "applicant_id"]
    path = tmp_path / "dup.csv"
    frame.to_csv(path, index=False)
    result = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--applicants", str(path), "--schema", str(sample_paths["schema"]), "--out",
                                 str(tmp_path / "sel")])
    assert result.exit_code == 1 and "appears 2 times" in result.stderr and "data rows 2, 5" in result.stderr
    assert not (tmp_path / "sel").exists()


def test_summary_groups_infeasible_reasons_without_repeating_their_counts():
    from types import SimpleNamespace

    from frpd_cli.candidates import Exclusion, Shortfall
    from frpd_cli.cli.plan import _reason_key, summarize_plans

    reason = ("3 recourse(s) dropped: they change more than 1 feature(s) even after sparsification "
              "(--max-changes); 0 distinct recourse(s) kept")
    limited = SimpleNamespace(reason="no candidate: 40 differ in gender, 3 have lower age", shortfall=Shortfall(
        (Exclusion(40, "immutable", "gender", "40 differ in gender"), Exclusion(3, "increasing", "age", "3 have lower age")),
        50))
    reasons = {}
    for plan in (SimpleNamespace(reason=reason, shortfall=None),
                 SimpleNamespace(reason=reason.replace("3 recourse", "2 recourse"), shortfall=None), limited):
        reasons[_reason_key(plan)] = reasons.get(_reason_key(plan), 0) + 1
    line = summarize_plans({"ok": 5, "infeasible": 3}, reasons, 8, 2.0)
    assert line == "8 applicant(s): 5 planned; 3 infeasible (2 recourse(s) dropped; 1 most limited by gender, which " \
                   "may not change); 2.00 s (4.0 applicants/s)."
    # copies of another candidate are no rule: the largest count of a rule names the group
    copies = Shortfall((Exclusion(9, "copy", "", "9 repeat another candidate row"),
                        Exclusion(4, "range", "Credit amount", "4 are outside the range of Credit amount (0:5)", "0:5")), 20)
    assert _reason_key(SimpleNamespace(reason="...", shortfall=copies)) == "most limited by the range of Credit amount"
    # a clause ends at ";" or at its parenthesis too, never in the middle of a word
    assert _reason_key(SimpleNamespace(
        reason="the model predicts no training row favourable; even after moving the others within --max-move "
               "(favourable here means ...)", shortfall=Shortfall((), 0))) == "the model predicts no training row favourable"
    assert _reason_key(SimpleNamespace(
        reason="the model predicts no training row favourable (favourable here means probability >= 0.52: --threshold "
               "plus --margin)", shortfall=None)) == "the model predicts no training row favourable"


def test_default_margin_keeps_every_recourse_off_the_boundary_and_margin_0_is_the_paper(sample_paths):
    import joblib

    estimator = joblib.load(sample_paths["model"])
    names = [c for c in pd.read_csv(sample_paths["applicants"]).columns if c != "applicant_id"]
    probabilities = {}
    for extra in ((), ("--margin", "0")):
        result = runner.invoke(app, _plan_args(sample_paths, "--format", "csv", *extra))
        assert result.exit_code == 0, result.stderr
        rows = pd.read_csv(io.StringIO(result.stdout))
        rows = rows[rows["status"] == "ok"]
        # the model's own probability of every recourse, not the reported one
        probabilities[extra] = estimator.predict_proba(rows[names])[:, 1]
    assert probabilities[()].min() >= 0.55 and len(probabilities[()]) >= 50
    assert probabilities[("--margin", "0")].min() < 0.51          # the paper's first accepted points sit on it


def test_default_margin_shrinks_under_a_high_threshold():
    from frpd_cli.choice import DEFAULT_MARGIN, default_margin

    assert DEFAULT_MARGIN == 0.05 and default_margin(0.5) == 0.05 and default_margin(0.94) == 0.05
    assert default_margin(0.96) == pytest.approx(0.02) and 0.96 + default_margin(0.96) < 1


def test_exit_stops_joblibs_reusable_workers():
    # a model may run joblib workers in predict_proba; frpd's exit skips the interpreter's teardown, and must not
    # leave multiprocessing's exit handler to wait for those idle workers (300 s)
    script = (
        "import atexit, multiprocessing, os\n"
        "from joblib import Parallel, delayed\n"
        "from frpd_cli.cli.app import _leave\n"
        "pids = Parallel(n_jobs=2)(delayed(os.getpid)() for _ in range(4))\n"
        "assert os.getpid() not in pids\n"
        "atexit.register(lambda: print('alive', len(multiprocessing.active_children()), flush=True))\n"
        "_leave(0)\n"
    )

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=250)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "alive 0"
