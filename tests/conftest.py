"""Shared fixtures: the sample data, a sample model trained once per test session, real datasets when present."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
DATASETS = ROOT.parent / "shared" / "datasets"


@pytest.fixture(scope="session")
def sample_model(tmp_path_factory) -> Path:
    """A sample model trained from the committed sample data (deterministic), in a temporary folder."""
    out = tmp_path_factory.mktemp("model") / "model.pkl"
    subprocess.run([sys.executable, str(SAMPLE / "train_model.py"), "--data", str(SAMPLE / "credit.csv"),
                    "--out", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def sample_paths(sample_model) -> dict:
    return {
        "data": SAMPLE / "credit.csv",
        "applicants": SAMPLE / "applicants.csv",
        "schema": SAMPLE / "schema.toml",
        "model": sample_model,
    }


def dataset_path(name: str) -> Path:
    """Path of a real dataset beside the project; the calling test is skipped when it is absent."""
    path = DATASETS / name
    if not path.exists():
        pytest.skip(f"real dataset {name} not available at ../shared/datasets (optional acceptance data)")
    return path
