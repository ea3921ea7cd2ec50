"""``--scale`` on the command line: plans priced in the chosen scale, artifacts that refuse the other one, costs
reported in both; and counts with a few imputed fractions planned as whole numbers."""

from __future__ import annotations

import io
import json

import joblib
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.encoding import fit_encoder
from frpd_cli.schema import SchemaSpec, infer_schema, inspect_schema

runner = CliRunner()


def _common(paths, *extra):
    return [str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]), *extra]


def _plan(paths, *extra):
    result = runner.invoke(app, ["plan", *_common(paths, "--applicants", str(paths["applicants"]),
                                                  "--format", "jsonl", *extra)])
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def _cost(encoder, frame, a, b) -> float:
    Z = encoder.encode(pd.concat([frame.iloc[[a]], frame.iloc[[b]]], ignore_index=True))
    return float(np.linalg.norm(Z[0] - Z[1]))


@pytest.mark.parametrize("scale", ["effort", "minmax"])
def test_recourse_cost_is_the_distance_in_the_chosen_scale(sample_paths, scale):
    data = pd.read_csv(sample_paths["data"])
    applicants = pd.read_csv(sample_paths["applicants"])
    schema = infer_schema(data, _sample_spec(sample_paths))
    encoder = fit_encoder(schema, data, scale=scale)
    names = list(schema.feature_names)
    records = _plan(sample_paths, "--scale", scale)
    checked = 0
    for rec in records:
        for r in rec["recourses"]:
            x0 = applicants.loc[applicants[schema.id_column].astype(str) == rec["applicant"], names]
            frame = pd.concat([x0.reset_index(drop=True), pd.DataFrame([r["features"]])[names]], ignore_index=True)
            assert r["cost"] == pytest.approx(_cost(encoder, frame, 0, 1), abs=1e-3)
            checked += 1
    assert checked >= 30


def _sample_spec(paths):
    from frpd_cli.schema import load_schema_file

    return load_schema_file(paths["schema"])


def test_scales_price_differently_and_minmax_is_the_papers(sample_paths):
    effort = _plan(sample_paths, "--scale", "effort")
    minmax = _plan(sample_paths, "--scale", "minmax")
    assert [r["applicant"] for r in effort] == [r["applicant"] for r in minmax]
    assert effort != minmax


def test_jobs_give_the_same_bytes_under_effort(sample_paths):
    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), "--format", "csv",
                             "--scale", "effort")]
    one, two = runner.invoke(app, [*args, "--jobs", "1"]), runner.invoke(app, [*args, "--jobs", "2"])
    assert one.exit_code == 0 and two.exit_code == 0, two.stderr
    assert one.stdout == two.stdout


def test_graph_built_in_one_scale_is_refused_in_the_other(sample_paths, tmp_path):
    out = tmp_path / "graph"
    built = runner.invoke(app, ["build-graph", *_common(sample_paths, "--out", str(out), "--scale", "minmax")])
    assert built.exit_code == 0, built.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["params"]["scale"] == "minmax"
    result = runner.invoke(app, ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]),
                                                  "--graph", str(out), "--scale", "effort", "--format", "csv")])
    assert result.exit_code == 1
    assert "built with --scale minmax, not --scale effort" in result.stderr
    assert "Pass --scale minmax, or rebuild it" in result.stderr


def test_pool_built_in_one_scale_is_refused_in_the_other(sample_paths, tmp_path):
    out = tmp_path / "pool"
    built = runner.invoke(app, ["build-pool", *_common(sample_paths, "--out", str(out), "--scale", "effort")])
    assert built.exit_code == 0, built.stderr
    assert json.loads((out / "manifest.json").read_text())["params"]["scale"] == "effort"
    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), "--format", "csv")]
    refused = runner.invoke(app, [*args, "--pool", str(out), "--scale", "minmax"])
    assert refused.exit_code == 1
    assert "built with --scale effort, not --scale minmax" in refused.stderr
    pooled = runner.invoke(app, [*args, "--pool", str(out), "--scale", "effort"])
    plain = runner.invoke(app, [*args, "--scale", "effort"])
    assert pooled.exit_code == 0 and pooled.stdout == plain.stdout


def test_evaluate_reports_the_minmax_cost_beside_the_effort_cost(sample_paths, tmp_path):
    plans = tmp_path / "plans.jsonl"
    records = _plan(sample_paths, "--scale", "effort")
    plans.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = {}
    for scale in ("effort", "minmax"):
        result = runner.invoke(app, ["evaluate", *_common(sample_paths, "--plans", str(plans), "--applicants",
                                                          str(sample_paths["applicants"]), "--format", "csv",
                                                          "--scale", scale)])
        assert result.exit_code == 0, result.stderr
        out[scale] = pd.read_csv(io.StringIO(result.stdout))
    assert "minmax cost mean" in out["effort"].columns and "minmax cost mean" not in out["minmax"].columns
    # the min-max cost of the effort run is the cost an evaluation in the min-max scale measures
    assert out["effort"]["minmax cost mean"].iloc[0] == pytest.approx(out["minmax"]["cost mean"].iloc[0])
    assert out["effort"]["cost mean"].iloc[0] != pytest.approx(out["minmax"]["cost mean"].iloc[0])


# ------------------------------------------------------------------ integers where the data means integers

def _counts(n=300, fractions=2, seed=0):
    rng = np.random.default_rng(seed)
    count = rng.integers(0, 12, n).astype(float)
    count[rng.choice(n, fractions, replace=False)] = [0.0273438, 5.5][:fractions] if fractions <= 2 else \
        rng.uniform(0, 10, fractions)
    amount = np.round(rng.uniform(100, 5000, n), 2)
    label = ((count + amount / 1000 + rng.normal(0, 1, n)) > 8).astype(int)
    return pd.DataFrame({"count": count, "amount": amount, "label": label})


def test_a_column_whole_in_99_percent_of_rows_is_an_integer():
    frame = _counts(300, 2)                          # 99.3% whole
    schema = infer_schema(frame)
    assert schema.feature("count").kind == "integer"
    assert schema.feature("amount").kind == "continuous"
    assert infer_schema(_counts(300, 4)).feature("count").kind == "continuous"   # 98.7%: a measurement
    report = inspect_schema(frame)
    note = next(r["note"] for r in report.columns if r["column"] == "count")
    assert note.startswith("integer: 99.3% of values are whole")
    # declared integer with the same few fractions: accepted too
    assert infer_schema(frame, SchemaSpec(integer=("count",))).feature("count").kind == "integer"


@pytest.mark.parametrize("scale", ["effort", "minmax"])
def test_no_recourse_proposes_a_fractional_count(tmp_path, scale):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    frame = _counts(300, 2)
    data = tmp_path / "train.csv"
    frame.to_csv(data, index=False)
    model = tmp_path / "model.pkl"
    joblib.dump(make_pipeline(StandardScaler(), LogisticRegression()).fit(frame[["count", "amount"]],
                                                                         frame["label"]), model)
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"count": [0.0273438, 1.0, 6.5, 0.0], "amount": [150.0, 300.0, 200.0, 900.0]}).to_csv(
        applicants, index=False)
    result = runner.invoke(app, ["plan", str(data), "--model", str(model), "--applicants", str(applicants),
                                 "--format", "jsonl", "--scale", scale, "--no-sparsify", "--max-move", "none"])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    moved = 0
    for rec, x0 in zip(records, [0.0273438, 1.0, 6.5, 0.0]):
        for r in rec["recourses"]:
            value = r["features"]["count"]
            if value != x0:
                assert float(value).is_integer(), (rec["applicant"], value)
                moved += 1
    assert moved > 0
    # evaluate takes the applicant's own fraction, kept by a (sparse) recourse, as the count it is
    sparse = runner.invoke(app, ["plan", str(data), "--model", str(model), "--applicants", str(applicants),
                                 "--format", "jsonl", "--scale", scale, "--max-move", "none"])
    assert sparse.exit_code == 0, sparse.stderr
    kept = [r["features"]["count"] for line in sparse.stdout.splitlines() for r in json.loads(line)["recourses"]
            if not float(r["features"]["count"]).is_integer()]
    assert kept and set(kept) <= {0.0273438, 6.5}
    plans = tmp_path / "plans.jsonl"
    plans.write_text(sparse.stdout)
    evaluated = runner.invoke(app, ["evaluate", str(data), "--model", str(model), "--plans", str(plans),
                                    "--applicants", str(applicants), "--format", "csv", "--per-applicant",
                                    "--scale", scale])
    assert evaluated.exit_code == 0, evaluated.stderr
    table = pd.read_csv(io.StringIO(evaluated.stdout), keep_default_na=False)
    assert not table["problems"].str.contains("fractions").any(), table["problems"].tolist()
    assert (table.loc[table["status"] == "needs-recourse", "validity"] == 1.0).all()
