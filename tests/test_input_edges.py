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
