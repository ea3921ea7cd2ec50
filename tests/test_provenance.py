"""--provenance: plans tied to the sha256 of what made them; evaluate refuses plans made with other inputs."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from typer.testing import CliRunner

from frpd_cli import __version__
from frpd_cli.cli.app import app
from frpd_cli.exceptions import InputError
from frpd_cli.provenance import PROVENANCE_KIND, read_provenance

runner = CliRunner()


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _plan(paths, *extra, applicants=None):
    return runner.invoke(app, ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema",
                               str(paths["schema"]), "--applicants", str(applicants or paths["applicants"]), *extra])


def _evaluate(paths, plans, *extra, model=None, data=None):
    return runner.invoke(app, ["evaluate", str(data or paths["data"]), "--model", str(model or paths["model"]),
                               "--schema", str(paths["schema"]), "--plans", str(plans), "--format", "csv", *extra])


@pytest.fixture(scope="module")
def planned(sample_paths, tmp_path_factory):
    """Plans written to a file with their provenance, and the plain run's records for comparison."""
    folder = tmp_path_factory.mktemp("prov")
    plans, provenance = folder / "plans.jsonl", folder / "plans.provenance.json"
    result = _plan(sample_paths, "--format", "jsonl", "--output", str(plans), "--provenance", str(provenance))
    assert result.exit_code == 0, result.stderr
    plain = _plan(sample_paths, "--format", "jsonl")
    assert plain.exit_code == 0
    return {"plans": plans, "provenance": provenance, "plain": plain.stdout, "folder": folder}


def test_provenance_records_the_hashes_settings_and_version(sample_paths, planned):
    record = json.loads(planned["provenance"].read_text(encoding="utf-8"))
    assert record["kind"] == PROVENANCE_KIND and record["command"] == "plan"
    assert record["frpd_version"] == __version__
    for name in ("data", "model", "applicants", "schema"):
        assert record["inputs"][name]["sha256"] == _sha(sample_paths[name])
        assert record["inputs"][name]["path"] == str(sample_paths[name])
    assert record["outputs"] == [{"path": str(planned["plans"]), "format": "jsonl", "sha256": _sha(planned["plans"])}]
    settings = record["settings"]
    assert (settings["method"], settings["k"], settings["theta"], settings["threshold"], settings["seed"]) == \
        ("quad", 3, 0.9, 0.5, 0)
    assert settings["schema"]["target"] == "label"
    assert record["libraries"]["scikit-learn"]


def test_record_shapes_unchanged_by_provenance(planned):
    assert planned["plans"].read_text(encoding="utf-8") == planned["plain"]


def test_provenance_of_stdout_plans_hashes_the_text_written(sample_paths, tmp_path):
    provenance = tmp_path / "p.json"
    result = _plan(sample_paths, "--format", "csv", "--provenance", str(provenance))
    assert result.exit_code == 0, result.stderr
    record = json.loads(provenance.read_text(encoding="utf-8"))
    assert record["outputs"][0]["path"] == "-"
    assert record["outputs"][0]["sha256"] == hashlib.sha256(result.stdout.encode("utf-8")).hexdigest()
    assert "Provenance" not in result.stdout and "kind" not in result.stdout     # stdout carries the records only


def test_same_inputs_give_a_byte_identical_provenance(sample_paths, planned, tmp_path):
    again = tmp_path / "again.json"
    result = _plan(sample_paths, "--format", "jsonl", "--output", str(planned["plans"]), "--provenance", str(again))
    assert result.exit_code == 0, result.stderr
    assert again.read_bytes() == planned["provenance"].read_bytes()


def test_evaluate_accepts_the_plans_the_provenance_describes(sample_paths, planned):
    result = _evaluate(sample_paths, planned["plans"], "--provenance", str(planned["provenance"]),
                       "--applicants", str(sample_paths["applicants"]))
    assert result.exit_code == 0, result.stderr
    assert "are the ones recorded" in result.stderr


def test_evaluate_refuses_another_model_naming_both_hashes(sample_paths, planned, tmp_path):
    other = tmp_path / "other.pkl"
    other.write_bytes(sample_paths["model"].read_bytes() + b"\0")      # same classifier, another file
    result = _evaluate(sample_paths, planned["plans"], "--provenance", str(planned["provenance"]), model=other)
    assert result.exit_code == 1 and result.stdout == ""
    message = result.stderr.strip()
    assert message.startswith("Error: ") and "another model" in message
    assert _sha(sample_paths["model"]) in message and _sha(other) in message


def test_evaluate_refuses_other_data_and_applicants(sample_paths, planned, tmp_path):
    data = tmp_path / "credit.csv"
    data.write_bytes(sample_paths["data"].read_bytes() + b"\n")          # a trailing blank line: other bytes
    result = _evaluate(sample_paths, planned["plans"], "--provenance", str(planned["provenance"]), data=data)
    assert result.exit_code == 1
    assert "another training data" in result.stderr and _sha(data) in result.stderr
    applicants = tmp_path / "applicants.csv"
    applicants.write_bytes(sample_paths["applicants"].read_bytes() + b"\n")
    result = _evaluate(sample_paths, planned["plans"], "--provenance", str(planned["provenance"]),
                       "--applicants", str(applicants))
    assert result.exit_code == 1
    assert "another applicants file" in result.stderr and _sha(applicants) in result.stderr


def test_evaluate_refuses_plans_the_provenance_does_not_describe(sample_paths, planned, tmp_path):
    edited = tmp_path / "plans.jsonl"
    lines = planned["plans"].read_text(encoding="utf-8").splitlines(keepends=True)
    edited.write_text("".join(lines[:-1]), encoding="utf-8")             # one plan dropped
    result = _evaluate(sample_paths, edited, "--provenance", str(planned["provenance"]))
    assert result.exit_code == 1
    assert "is not the one the provenance" in result.stderr and _sha(edited) in result.stderr
    # without --provenance the same file is evaluated: the check is opt-in
    assert _evaluate(sample_paths, edited).exit_code == 0


def test_evaluate_refuses_a_file_that_is_not_a_provenance(sample_paths, planned, tmp_path):
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"kind": "something else"}', encoding="utf-8")
    result = _evaluate(sample_paths, planned["plans"], "--provenance", str(bogus))
    assert result.exit_code == 1 and "not an frpd provenance document" in result.stderr
    with pytest.raises(InputError, match="not JSON"):
        bogus.write_text("{", encoding="utf-8")
        read_provenance(bogus)


def test_provenance_is_never_an_input_nor_the_output(sample_paths, planned, tmp_path):
    copy = tmp_path / "applicants.csv"
    shutil.copy(sample_paths["applicants"], copy)
    before = copy.read_bytes()
    result = _plan(sample_paths, "--format", "csv", "--provenance", str(copy), applicants=copy)
    assert result.exit_code == 1 and "Error:" in result.stderr
    assert copy.read_bytes() == before
    out = tmp_path / "plans.csv"
    result = _plan(sample_paths, "--format", "csv", "--output", str(out), "--provenance", str(out))
    assert result.exit_code == 2 and "--provenance" in result.stderr and not out.exists()
    result = _plan(sample_paths, "--format", "csv", "--provenance", "-")
    assert result.exit_code == 2 and result.stdout == ""


def test_failed_run_writes_no_provenance(sample_paths, tmp_path):
    provenance = tmp_path / "p.json"
    result = _plan(sample_paths, "--format", "csv", "--provenance", str(provenance), "--target", "no_such_column")
    assert result.exit_code != 0
    assert not provenance.exists() and list(tmp_path.iterdir()) == []


def test_interpolate_provenance_describes_both_plan_files(sample_paths, tmp_path):
    selection, plans_dir = tmp_path / "sel", tmp_path / "plans"
    common = ["--model", str(sample_paths["model"])]
    result = runner.invoke(app, ["select", str(sample_paths["data"]), *common, "--schema", str(sample_paths["schema"]),
                                 "--applicants", str(sample_paths["applicants"]), "--out", str(selection)])
    assert result.exit_code == 0, result.stderr
    provenance, printed = tmp_path / "ip.json", tmp_path / "ip.csv"
    result = runner.invoke(app, ["interpolate", "--selection", str(selection), *common, "--out", str(plans_dir),
                                 "--format", "csv", "--output", str(printed), "--provenance", str(provenance)])
    assert result.exit_code == 0, result.stderr
    record = json.loads(provenance.read_text(encoding="utf-8"))
    assert record["command"] == "interpolate"
    assert record["inputs"]["model"]["sha256"] == _sha(sample_paths["model"])
    assert record["inputs"]["data"]["sha256"] == _sha(sample_paths["data"])           # as the selection recorded
    assert record["inputs"]["applicants"]["sha256"] == _sha(sample_paths["applicants"])
    assert {o["sha256"] for o in record["outputs"]} == {_sha(plans_dir / "plans.jsonl"), _sha(printed)}
    ok = _evaluate(sample_paths, plans_dir / "plans.jsonl", "--provenance", str(provenance))
    assert ok.exit_code == 0, ok.stderr
    inside = runner.invoke(app, ["interpolate", "--selection", str(selection), *common, "--out", str(plans_dir),
                                 "--provenance", str(plans_dir / "p.json")])
    assert inside.exit_code == 2 and "inside" in inside.stderr
    mixed = runner.invoke(app, ["interpolate", "--selection", str(selection), *common, "--out", str(plans_dir),
                                "--format", "csv", "--provenance", "-"])
    assert mixed.exit_code == 2 and mixed.stdout == ""


def test_resumable_output_gets_the_hash_of_the_finished_file(sample_paths, tmp_path):
    out, provenance = tmp_path / "plans.csv", tmp_path / "p.json"
    result = _plan(sample_paths, "--format", "csv", "--output", str(out), "--resume", "--provenance", str(provenance))
    assert result.exit_code == 0, result.stderr
    record = json.loads(provenance.read_text(encoding="utf-8"))
    assert record["outputs"][0]["sha256"] == _sha(out)
    # a second --resume run finds the output complete and plans nothing: it does not vouch for that file again
    provenance.unlink()
    again = _plan(sample_paths, "--format", "csv", "--output", str(out), "--resume", "--provenance", str(provenance))
    assert again.exit_code == 0, again.stderr
    assert not provenance.exists() and "left as it was" in again.stderr
