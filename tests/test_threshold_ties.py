"""An applicant whose favourable probability is exactly the threshold: frpd's ``>=`` and the model's own
``predict`` disagree on it, and the run says so instead of calling a denied applicant favourable in silence."""

from __future__ import annotations

import json

import joblib
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()


def _files(tmp_path):
    """Training rows with income 0..99 and a logistic model that is exactly 0.5 at income 50 (its decision
    function is income - 50, so expit gives 0.5 to the bit there), and applicants at 50 (the tie) and 40."""
    income = np.arange(100, dtype=np.float64)
    years = (np.arange(100) % 7).astype(np.float64)
    frame = pd.DataFrame({"income": income, "years": years, "label": (income >= 50).astype(int)})
    data = tmp_path / "train.csv"
    frame.to_csv(data, index=False)
    model = LogisticRegression().fit(frame[["income", "years"]], frame["label"])
    model.coef_ = np.array([[1.0, 0.0]])
    model.intercept_ = np.array([-50.0])
    path = tmp_path / "model.joblib"
    joblib.dump(model, path)
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"income": [50.0, 40.0], "years": [3.0, 3.0]}).to_csv(applicants, index=False)
    assert model.predict_proba(pd.read_csv(applicants))[0, 1] == 0.5
    assert model.predict(pd.read_csv(applicants)).tolist() == [0, 0]      # the model denies both
    return data, path, applicants


def test_an_applicant_exactly_at_the_threshold_is_named_with_the_way_to_plan_for_it(tmp_path):
    data, model, applicants = _files(tmp_path)
    base = ["plan", str(data), "--model", str(model), "--applicants", str(applicants), "--format", "jsonl",
            "--max-move", "none"]
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.stderr
    tie, denied = [json.loads(line) for line in result.stdout.splitlines()]
    assert tie["status"] == "already-favorable" and denied["status"] == "ok"
    assert "exactly the threshold 0.5" in tie["reason"] and "--threshold" in tie["reason"]
    warning = [line for line in result.stderr.splitlines() if "exactly at the threshold" in line]
    assert len(warning) == 1 and warning[0].startswith("Warning: 1 applicant(s)") and "applicant 0" in warning[0]
    # what the warning proposes plans for it
    above = runner.invoke(app, [*base, "--threshold", "0.500001"])
    assert above.exit_code == 0, above.stderr
    assert [json.loads(line)["status"] for line in above.stdout.splitlines()] == ["ok", "ok"]
    assert "exactly at the threshold" not in above.stderr

