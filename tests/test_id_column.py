"""--id-column across the commands: the applicants' identifier where applicants are read (plan, select,
interpolate), a warning where a run reads no applicants file and the data lacks the column (build-graph,
evaluate without --applicants; build-pool and build-refits in their own test files)."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()
# the sample schema file names applicant_id; these flags name no identifier, as a run without it would
FLAGS = ["--target", "label", "--favorable", "1", "--immutable", "personal_status", "--increasing", "age"]


def _run(args, code=0):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def _select(paths, out, *extra):
    return _run(["select", paths["data"], "--model", paths["model"], *FLAGS, "--applicants", paths["applicants"],
                 "--out", out, "-q", *extra])


def _interpolate(paths, selection, out, *extra, code=0):
    return _run(["interpolate", "--selection", selection, "--model", paths["model"], "--out", out, "--format", "csv",
                 "-q", *extra], code=code)


def test_interpolate_names_the_applicants_by_the_id_column(sample_paths, tmp_path):
    _select(sample_paths, tmp_path / "by-row")
    _select(sample_paths, tmp_path / "by-id", "--id-column", "applicant_id")
    by_row = _interpolate(sample_paths, tmp_path / "by-row", tmp_path / "p1").stdout
    assert [r["applicant"] for r in csv.DictReader(io.StringIO(by_row))][:1] == ["0"]
    # oracle: a selection made with --id-column; the same records, named by the column, whichever way it is named
    expected = _interpolate(sample_paths, tmp_path / "by-id", tmp_path / "p2").stdout
    renamed = _interpolate(sample_paths, tmp_path / "by-row", tmp_path / "p3", "--id-column", "applicant_id").stdout
    agreed = _interpolate(sample_paths, tmp_path / "by-id", tmp_path / "p4", "--id-column", "applicant_id").stdout
    assert renamed == expected == agreed
    ids = pd.read_csv(sample_paths["applicants"], dtype=str)["applicant_id"].tolist()
    assert list(dict.fromkeys(r["applicant"] for r in csv.DictReader(io.StringIO(renamed)))) == ids
    # the plan artifact holds the same ids as the records printed
    plans = [json.loads(line) for line in (tmp_path / "p3" / "plans.jsonl").read_text().splitlines()]
    assert [p["applicant"] for p in plans] == ids
    # and the records are plan's with the same column, row for row
    planned = _run(["plan", sample_paths["data"], "--model", sample_paths["model"], *FLAGS, "--applicants",
                    sample_paths["applicants"], "--id-column", "applicant_id", "--format", "csv", "-q"]).stdout
    key = ("applicant", "status", "rank")
    assert [tuple(r[c] for c in key) for r in csv.DictReader(io.StringIO(planned))] == \
        [tuple(r[c] for c in key) for r in csv.DictReader(io.StringIO(renamed))]


def test_interpolate_refuses_an_id_column_the_applicants_do_not_have_as_select_does(sample_paths, tmp_path):
    _select(sample_paths, tmp_path / "sel")
    refused = _interpolate(sample_paths, tmp_path / "sel", tmp_path / "plans", "--id-column", "applicantid", code=2)
    selected = _run(
        ["select", sample_paths["data"], "--model", sample_paths["model"], *FLAGS, "--applicants",
         sample_paths["applicants"], "--out", tmp_path / "sel2", "-q", "--id-column", "applicantid"], code=2)
    message = "Error: Invalid value for '--id-column': The id column 'applicantid' is not in the applicants file"
    assert message in refused.stderr and message in selected.stderr and "Did you mean 'applicant_id'?" in refused.stderr
    assert refused.stdout == "" and not (tmp_path / "plans").exists()


def test_interpolate_refuses_a_feature_of_the_selection_as_id_column(sample_paths, tmp_path):
    _select(sample_paths, tmp_path / "sel")
    refused = _interpolate(sample_paths, tmp_path / "sel", tmp_path / "plans", "--id-column", "duration", code=1)
    assert "made with 'duration' as a feature" in refused.stderr and "frpd select again with --id-column duration" \
        in refused.stderr
    assert not (tmp_path / "plans").exists()


def test_interpolate_refuses_to_rename_when_the_applicants_file_changed(sample_paths, tmp_path):
    applicants = tmp_path / "applicants.csv"
    applicants.write_bytes(sample_paths["applicants"].read_bytes())
    _select({**sample_paths, "applicants": applicants}, tmp_path / "sel")
    frame = pd.read_csv(applicants, dtype=str)
    frame["applicant_id"] = frame["applicant_id"].iloc[::-1].to_list()       # other ids for the same rows
    frame.to_csv(applicants, index=False)
    refused = _interpolate(sample_paths, tmp_path / "sel", tmp_path / "plans", "--id-column", "applicant_id", code=1)
    assert "applicants" in refused.stderr and "frpd select" in refused.stderr
    applicants.unlink()
    gone = _interpolate(sample_paths, tmp_path / "sel", tmp_path / "plans", "--id-column", "applicant_id", code=1)
    assert "which is not there" in gone.stderr and "--id-column applicant_id" in gone.stderr


def test_build_graph_ignores_an_id_column_the_data_does_not_have(sample_paths, tmp_path):
    built = _run(["build-graph", sample_paths["data"], "--model", sample_paths["model"], *FLAGS,
                  "--id-column", "applicant_id", "--out", tmp_path / "graph"])
    assert "--id-column" not in built.stderr           # the training data need not hold the applicants' ids
    plain = _run(["build-graph", sample_paths["data"], "--model", sample_paths["model"], *FLAGS,
                  "--out", tmp_path / "plain"])
    assert "Warning: --id-column" not in plain.stderr
    # the option left nothing out: the same graph
    digests = [json.loads((tmp_path / name / "manifest.json").read_text())["payloads"]["graph.npz"]["sha256"]
               for name in ("graph", "plain")]
    assert digests[0] == digests[1]
    # and the graph serves plan's run with the same flags
    planned = _run(["plan", sample_paths["data"], "--model", sample_paths["model"], *FLAGS, "--id-column",
                    "applicant_id", "--applicants", sample_paths["applicants"], "--graph", tmp_path / "graph",
                    "--format", "csv", "-q"])
    assert "Warning: --id-column" not in planned.stderr and "\nA001," in planned.stdout


def test_evaluate_ignores_an_unused_id_column_and_refuses_one_the_applicants_lack(sample_paths, tmp_path):
    plans = tmp_path / "plans.jsonl"
    plans.write_text(_run(["plan", sample_paths["data"], "--model", sample_paths["model"], *FLAGS, "--applicants",
                           sample_paths["applicants"], "--id-column", "applicant_id", "--format", "jsonl",
                           "-q"]).stdout)
    common = ["evaluate", sample_paths["data"], "--model", sample_paths["model"], *FLAGS, "--plans", plans,
              "--format", "csv", "-q"]
    unused = _run([*common, "--id-column", "applicant_id"])
    assert "--id-column" not in unused.stderr
    assert unused.stdout == _run(common).stdout
    # with --applicants the column is read: there, no warning, and a name the file lacks is a usage error
    used = _run([*common, "--applicants", sample_paths["applicants"], "--id-column", "applicant_id"])
    assert "Warning: --id-column" not in used.stderr
    refused = _run([*common, "--applicants", sample_paths["applicants"], "--id-column", "applicantid"], code=2)
    assert "The id column 'applicantid' is not in the applicants file" in refused.stderr


def test_a_near_miss_of_a_data_column_is_warned_about(sample_paths, tmp_path):
    # the data holds an identifier and the option misspells it: the identifier stays a feature, and a run that
    # reads no applicants says so (plan refuses the name in the applicants file instead)
    frame = pd.read_csv(sample_paths["data"])
    frame.insert(0, "applicant_id", [f"T{i:04d}" for i in range(len(frame))])
    data = tmp_path / "train.csv"
    frame.to_csv(data, index=False)
    built = _run(["build-graph", data, "--model", sample_paths["model"], *FLAGS, "--id-column", "applicantid",
                  "--out", tmp_path / "graph"], code=1)        # the model knows no such feature
    assert "unknown to the model: 'applicant_id'" in built.stderr
    warned = [line for line in built.stderr.splitlines() if line.startswith("Warning: --id-column")]
    assert len(warned) == 1 and "Did you mean 'applicant_id'?" in warned[0]
    assert "'applicant_id' stays a feature" in warned[0]
    named = _run(["build-graph", data, "--model", sample_paths["model"], *FLAGS, "--id-column", "applicant_id",
                  "--out", tmp_path / "named"])
    assert "Warning: --id-column" not in named.stderr
