"""Features that alone separate the training labels (a record of the outcome), against brute-force oracles, and
the warning every command reading the training data gives."""

from __future__ import annotations

import itertools

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.leaks import balanced_accuracy_of_levels, balanced_accuracy_of_threshold, find_label_leaks
from frpd_cli.schema import SchemaSpec, infer_schema

runner = CliRunner()


def _balanced(predicted, labels) -> float:
    return 0.5 * (np.mean(predicted[labels]) + np.mean(~predicted[~labels]))


@pytest.mark.parametrize("seed", range(6))
def test_best_threshold_is_the_brute_forces(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 40))
    values = rng.integers(0, 6, size=n).astype(float) + (rng.random(n) if seed % 2 else 0.0)
    labels = rng.random(n) < 0.4
    labels[:2] = [True, False]                            # both classes
    best = 0.0
    for t in np.unique(values):
        above = values > t
        best = max(best, _balanced(above, labels), _balanced(~above, labels))
    assert balanced_accuracy_of_threshold(values, labels) == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_best_class_per_level_is_the_brute_forces(seed):
    rng = np.random.default_rng(seed)
    n_levels = int(rng.integers(1, 6))
    codes = rng.integers(0, n_levels, size=int(rng.integers(10, 40)))
    labels = rng.random(codes.size) < 0.5
    labels[:2] = [True, False]
    best = max(_balanced(np.isin(codes, chosen), labels)
               for r in range(n_levels + 1) for chosen in itertools.combinations(range(n_levels), r))
    assert balanced_accuracy_of_levels(codes, labels) == pytest.approx(best, abs=1e-12)


def _loans(n=400, seed=0):
    """``charged_off`` is 0 for every repaid loan and positive for most defaults (a record of the outcome); the
    label itself follows income and term, with noise; ``region`` is a categorical of no consequence."""
    rng = np.random.default_rng(seed)
    income = rng.normal(50, 15, size=n).round(1)
    term = rng.integers(6, 60, size=n)
    repaid = (income - 0.5 * term + rng.normal(0, 6, size=n)) > 30
    charged_off = np.where(repaid, 0.0, rng.uniform(500, 5000, size=n).round(0))
    charged_off[np.flatnonzero(~repaid)[:3]] = 0.0          # a few defaults with nothing charged off
    region = rng.choice(["north", "south", "east"], size=n)
    return pd.DataFrame({"income": income, "term": term, "region": region, "charged_off": charged_off,
                         "label": repaid.astype(int)})


def test_a_record_of_the_outcome_is_found_and_nothing_else():
    frame = _loans()
    labels = (frame["label"] == 1).to_numpy()
    leaks = find_label_leaks(frame, infer_schema(frame, SchemaSpec()), labels)
    assert [leak.feature for leak in leaks] == ["charged_off"]
    expected = balanced_accuracy_of_threshold(frame["charged_off"].to_numpy(float), labels)
    assert leaks[0].balanced_accuracy == round(expected, 4) and 0.98 <= expected < 1
    assert leaks[0].n_rows == len(frame)
    # an immutable feature is not moved by any recourse: not reported
    assert find_label_leaks(frame, infer_schema(frame, SchemaSpec(immutable=("charged_off",))), labels) == []
    # every k-th row when the rows are many (here 1 row in 4, from the first)
    sampled = find_label_leaks(frame, infer_schema(frame, SchemaSpec()), labels, max_rows=100)
    on_sample = balanced_accuracy_of_threshold(frame["charged_off"].to_numpy(float)[::4], labels[::4])
    assert on_sample != expected
    assert [(leak.feature, leak.balanced_accuracy, leak.n_rows) for leak in sampled] == (
        [("charged_off", round(on_sample, 4), 100)] if on_sample >= 0.98 else [])


def test_a_level_per_class_is_a_leak_too():
    frame = _loans()
    frame["status"] = np.where(frame["label"] == 1, "closed", "recovery")
    leaks = find_label_leaks(frame, infer_schema(frame, SchemaSpec()), (frame["label"] == 1).to_numpy())
    assert [(leak.feature, leak.balanced_accuracy) for leak in leaks] == [("charged_off", leaks[0].balanced_accuracy),
                                                                          ("status", 1.0)]


def test_plan_warns_once_of_a_feature_that_separates_the_labels(tmp_path):
    frame = _loans()
    frame = frame.drop(columns="region").rename(columns={"charged_off": "prior_chargeoff"})   # named like a
    # record of the past too
    data = tmp_path / "loans.csv"
    frame.to_csv(data, index=False)
    numbers = ["income", "term", "prior_chargeoff"]
    model = LogisticRegression(max_iter=2000).fit(frame[numbers], frame["label"])
    joblib.dump(model, tmp_path / "model.joblib")
    applicants = tmp_path / "applicants.csv"
    frame.loc[frame["label"] == 0, numbers].head(3).to_csv(applicants, index=False)
    result = runner.invoke(app, ["plan", str(data), "--model", str(tmp_path / "model.joblib"), "--applicants",
                                 str(applicants), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "prior_chargeoff" in line and "Warning" in line]
    assert len(lines) == 1, result.stderr                 # the separation, not the name warning as well
    assert lines[0].startswith("Warning: feature 'prior_chargeoff' of ") and "separates the training labels" in lines[0]
    assert "--immutable prior_chargeoff" in lines[0] and "record of the past" not in lines[0]
    # declared immutable: no warning of either kind
    quiet = runner.invoke(app, ["plan", str(data), "--model", str(tmp_path / "model.joblib"), "--immutable",
                                "prior_chargeoff", "--applicants", str(applicants), "--format", "csv"])
    assert quiet.exit_code == 0, quiet.stderr
    assert "prior_chargeoff" not in quiet.stderr


def test_the_sample_data_has_no_leak(sample_paths):
    from frpd_cli.dataset import read_training_frame, resolve_spec

    frame = read_training_frame(sample_paths["data"])
    schema = infer_schema(frame, resolve_spec(sample_paths["schema"], SchemaSpec()))
    assert find_label_leaks(frame, schema, (frame["label"] == 1).to_numpy()) == []


def test_schema_notes_and_warns_of_a_feature_that_separates_the_labels(tmp_path):
    frame = _loans().rename(columns={"charged_off": "prior_chargeoff"})
    data = tmp_path / "loans.csv"
    frame.to_csv(data, index=False)
    result = runner.invoke(app, ["schema", str(data), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    import json

    notes = {row["column"]: row["note"] for row in json.loads(result.stdout)}
    score = balanced_accuracy_of_threshold(frame["prior_chargeoff"].to_numpy(float), (frame["label"] == 1).to_numpy())
    assert notes["prior_chargeoff"] == (f"separates the labels alone (balanced accuracy {score:.3f}): a record of the "
                                        "outcome? drop it from the model or declare it immutable")
    assert notes["income"] == notes["term"] == ""
    warned = [line for line in result.stderr.splitlines() if "'prior_chargeoff'" in line]
    assert len(warned) == 1 and "separates the training labels on its own" in warned[0]
