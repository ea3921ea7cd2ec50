"""Input edges users hit: a ragged first row, the largest 64-bit integer, a file frpd may not read.

- A first data row with one field too many made pandas take column 1 for row labels: every value shifted
  and the error blamed a column of every row. Now one ``Error:`` line names the row, its field count and the
  header's (exit 1), for the data and the applicants file (also on stdin).
- 2**63 - 1 fits in int64 but was refused as "below 2**63" (its float64 form is 2**63); 2**63 is still refused.
- An unreadable data, applicants, schema or plans file was a usage error (exit 2, typer's "is not readable");
  it is an input error (exit 1) naming the file, like a missing one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()
INT64_MAX = 2**63 - 1


def _plan(p, data=None, applicants=None, *extra, stdin=None):
    return runner.invoke(app, ["plan", str(data or p["data"]), "--model", str(p["model"]), "--schema",
                               str(p["schema"]), "--applicants", str(applicants or p["applicants"]), *extra],
                         input=stdin)


def _one_error(result) -> str:
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert result.exit_code == 1 and len(errors) == 1, (result.exit_code, result.stderr)
    assert result.stdout == ""
    return errors[0]


def _with_extra_field(path, out, line):
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[line - 1] += ",surplus"
    out.write_text("\n".join(lines), encoding="utf-8")
    return out


@pytest.mark.parametrize("which", ["data", "applicants", "stdin"])
def test_ragged_first_row_is_named(sample_paths, tmp_path, which):
    source = sample_paths["data" if which == "data" else "applicants"]
    ragged = _with_extra_field(source, tmp_path / "ragged.csv", 2)
    n_names = len(source.read_text(encoding="utf-8").split("\n")[0].split(","))
    if which == "data":
        result = _plan(sample_paths, data=ragged)
    elif which == "applicants":
        result = _plan(sample_paths, applicants=ragged)
    else:
        result = _plan(sample_paths, applicants="-", stdin=ragged.read_text(encoding="utf-8"))
    error = _one_error(result)
    assert f"has {n_names + 1} fields in its first data row (line 2) but {n_names} column names" in error
    assert "missing" not in error and "declared integer" not in error


def test_ragged_later_row_is_named_by_line(sample_paths, tmp_path):
    ragged = _with_extra_field(sample_paths["data"], tmp_path / "ragged.csv", 6)
    error = _one_error(_plan(sample_paths, data=ragged))
    assert "line 6" in error and "saw 9" in error


def _with_value(path, out, row, column, value):
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[row, column] = str(value)
    frame.to_csv(out, index=False)
    return out


@pytest.mark.parametrize("value", [INT64_MAX, -(2**63)])
def test_int64_extremes_are_accepted_in_training(sample_paths, tmp_path, value):
    data = _with_value(sample_paths["data"], tmp_path / "big.csv", 3, "age", value)
    result = _plan(sample_paths, data, None, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    ages = [r["features"]["age"] for rec in records for r in rec["recourses"]]
    # decoded without overflow, inside the training range
    assert ages and all(isinstance(a, int) and min(value, 18) <= a <= max(value, 100) for a in ages)


def test_largest_int64_is_accepted_in_applicants(sample_paths, tmp_path):
    applicants = _with_value(sample_paths["applicants"], tmp_path / "big-app.csv", 0, "duration", INT64_MAX)
    # without a move bound: bringing a duration of 2**63 - 1 back into the data's range is a move of nearly
    # 2**63, far beyond the default bound (the applicant is then infeasible, as it should be)
    result = _plan(sample_paths, None, applicants, "--format", "jsonl", "--max-move", "none")
    assert result.exit_code == 0, result.stderr
    first = json.loads(result.stdout.splitlines()[0])
    assert first["status"] == "ok" and first["recourses"]
    for r in first["recourses"]:
        assert r["changes"].get("duration", [INT64_MAX])[0] == INT64_MAX     # the applicant's value, exactly


def test_beyond_int64_is_refused_with_the_true_range(sample_paths, tmp_path):
    data = _with_value(sample_paths["data"], tmp_path / "big.csv", 3, "age", 2**63)
    error = _one_error(_plan(sample_paths, data))
    assert "'age'" in error and "from -2**63 to 2**63 - 1" in error and "line 5" in error


def _unreadable_runner():
    """A command prefix under which a mode-000 file cannot be read, or None (then the test is skipped)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    probe = subprocess.run([setpriv, "--bounding-set", "-dac_override,-dac_read_search", "true"],
                           capture_output=True)
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"] if probe.returncode == 0 else None


@pytest.mark.parametrize("which", ["data", "applicants", "schema", "plans"])
def test_unreadable_input_is_an_input_error(sample_paths, tmp_path, which):
    prefix = _unreadable_runner()
    if prefix is None:
        pytest.skip("running as root without setpriv: a mode-000 file stays readable")
    locked = tmp_path / ("locked.toml" if which == "schema" else "locked.csv")
    shutil.copy(sample_paths["schema" if which == "schema" else "data"], locked)
    locked.chmod(0)
    paths = {k: str(v) for k, v in sample_paths.items()}
    paths[which] = str(locked)
    if which == "plans":
        args = ["evaluate", paths["data"], "--model", paths["model"], "--schema", paths["schema"], "--plans",
                str(locked), "--applicants", paths["applicants"]]
    else:
        args = ["plan", paths["data"], "--model", paths["model"], "--schema", paths["schema"], "--applicants",
                paths["applicants"]]
    proc = subprocess.run([*prefix, sys.executable, "-m", "frpd_cli", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=600)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert proc.returncode == 1, proc.stderr
    assert len(errors) == 1 and "locked." in errors[0] and "Permission denied" in errors[0], proc.stderr
    assert "Usage:" not in proc.stderr and proc.stdout == ""
