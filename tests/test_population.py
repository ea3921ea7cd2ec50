"""largest_shift: the largest share of the training population a recourse's change passes, against brute force."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.population import fit_population
from frpd_cli.schema import SchemaSpec, infer_schema, load_schema_file

runner = CliRunner()


def _mid_share(column: list, value: float) -> float:
    """Brute force: the share of ``column`` below ``value`` plus half the share at it, linear between data values."""
    data = sorted(float(v) for v in column)
    n = len(data)
    distinct = sorted(set(data))

    def at(v):
        return (sum(x < v for x in data) + 0.5 * sum(x == v for x in data)) / n

    if value <= distinct[0]:
        return at(distinct[0])
    if value >= distinct[-1]:
        return at(distinct[-1])
    for a, b in zip(distinct, distinct[1:]):
        if a <= value <= b:
            return at(a) + (at(b) - at(a)) * (value - a) / (b - a)
    raise AssertionError(value)


def _shift_oracle(frame: pd.DataFrame, schema, name: str, old, new) -> float:
    f = schema.feature(name)
    if f.is_numeric:
        column = frame[name].tolist()
        return abs(_mid_share(column, float(new)) - _mid_share(column, float(old)))
    shares = {str(level): float((frame[name].astype(str) == str(level)).mean()) for level in f.levels}
    if f.kind == "ordinal":
        order = [str(level) for level in f.levels]
        mid = {lv: sum(shares[x] for x in order[:i]) + shares[lv] / 2 for i, lv in enumerate(order)}
        return abs(mid[str(new)] - mid[str(old)])
    return (shares[str(old)] + shares[str(new)]) / 2          # nominal: as two adjacent levels


def test_shift_of_a_numeric_move_is_the_difference_of_mid_shares():
    frame = pd.DataFrame({"x": [1, 2, 2, 3, 5, 8, 8, 8, 9, 10], "label": [0, 1] * 5})
    schema = infer_schema(frame, SchemaSpec(continuous=("x",)))
    population = fit_population(frame, schema)
    for old, new in [(1, 10), (2, 8), (2, 3), (3, 4.5), (0, 20), (8, 8), (5, 2.5)]:
        assert population.shift("x", old, new) == pytest.approx(_shift_oracle(frame, schema, "x", old, new),
                                                                 abs=1e-12), (old, new)
    # a move across the whole data passes everyone but half of each end's mass
    assert population.shift("x", 1, 10) == pytest.approx(1 - 0.05 - 0.05)


def test_sample_plan_largest_shift_is_the_largest_brute_force_shift(sample_paths):
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
                                 str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]),
                                 "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    frame = pd.read_csv(sample_paths["data"])
    schema = infer_schema(frame, load_schema_file(sample_paths["schema"]))
    kinds = set()
    n = 0
    for rec in map(json.loads, result.stdout.splitlines()):
        for r in rec["recourses"]:
            shifts = [_shift_oracle(frame, schema, name, old, new) for name, (old, new) in r["changes"].items()]
            kinds |= {schema.feature(name).kind for name in r["changes"]}
            assert r["largest_shift"] == pytest.approx(max(shifts), abs=1e-6), r
            n += 1
    assert n >= 50 and {"integer", "continuous", "categorical", "ordinal"} <= kinds


def test_csv_and_table_carry_largest_shift(sample_paths):
    common = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
              str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"])]
    csv_out = runner.invoke(app, [*common, "--format", "csv"])
    jsonl = runner.invoke(app, [*common, "--format", "jsonl"])
    table = runner.invoke(app, [*common, "--format", "table"], env={"COLUMNS": "200"})
    assert csv_out.exit_code == jsonl.exit_code == table.exit_code == 0
    import io

    rows = pd.read_csv(io.StringIO(csv_out.stdout))
    assert list(rows.columns[-3:]) == ["n_changes", "partial", "largest_shift"]
    shifts = [r["largest_shift"] for rec in map(json.loads, jsonl.stdout.splitlines()) for r in rec["recourses"]]
    assert rows["largest_shift"].dropna().tolist() == pytest.approx(shifts, abs=1e-12)
    assert "shift" in table.stdout and f"{shifts[0]:.2f}" in table.stdout


def test_interpolate_reports_the_same_largest_shift_as_plan(sample_paths, tmp_path):
    sel = tmp_path / "sel"
    common = ["--schema", str(sample_paths["schema"])]
    r1 = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                             "--applicants", str(sample_paths["applicants"]), "--out", str(sel), *common])
    assert r1.exit_code == 0, r1.stderr
    r2 = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]),
                             "--out", str(tmp_path / "p"), "--format", "jsonl"])
    assert r2.exit_code == 0, r2.stderr
    shifts = [r["largest_shift"] for rec in map(json.loads, r2.stdout.splitlines()) for r in rec["recourses"]]
    assert shifts and all(s is not None and 0 <= s <= 1 for s in shifts)
    assert np.isfinite(shifts).all()


def test_evaluate_reports_mean_largest_shift_and_the_share_above_0_3(sample_paths, tmp_path):
    import io

    plan = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
                               str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]),
                               "--format", "jsonl"])
    assert plan.exit_code == 0, plan.stderr
    plans = tmp_path / "plans.jsonl"
    plans.write_text(plan.stdout)
    result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--plans", str(plans), "--per-applicant",
                                 "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    per = pd.read_csv(io.StringIO(result.stdout))
    frame = pd.read_csv(sample_paths["data"])
    schema = infer_schema(frame, load_schema_file(sample_paths["schema"]))
    large = 0
    for rec, (_, row) in zip(map(json.loads, plan.stdout.splitlines()), per.iterrows()):
        shifts = [max(_shift_oracle(frame, schema, n, a, b) for n, (a, b) in r["changes"].items())
                  for r in rec["recourses"]]
        assert row["largest shift"] == pytest.approx(np.mean(shifts), abs=1e-9)
        assert row["shift > 0.3"] == pytest.approx(np.mean(np.array(shifts) > 0.3), abs=1e-12)
        large += sum(s > 0.3 for s in shifts)
    assert 0 < large                                # some sample recourses do move far (savings none -> rich)
