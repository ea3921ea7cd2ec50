"""Shared fixtures: the sample data, a sample model trained once per test session, real datasets when present."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

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


@pytest.fixture(scope="session")
def german(tmp_path_factory) -> SimpleNamespace:
    """German credit with the paper's protocol, trained once per session (skipped when the data is absent).

    80/20 split stratified on the label (seed 42), an MLP (20, 50, 20) on one-hot ``Personal status`` and
    min-max scaled numbers; ``train_path`` / ``model_path`` are files, ``denied`` the first 40 test rows the
    model predicts unfavourable (feature columns only).
    """
    import joblib
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    frame = pd.read_csv(dataset_path("german.csv"))
    train, test = train_test_split(frame, test_size=0.2, random_state=42, stratify=frame["label"])
    features = [c for c in frame.columns if c != "label"]
    pipe = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["Personal status"]),
                                    ("num", MinMaxScaler(), ["Duration", "Credit amount", "Age"])])),
        ("mlp", MLPClassifier(hidden_layer_sizes=(20, 50, 20), random_state=0, max_iter=500)),
    ]).fit(train[features], train["label"])
    folder = tmp_path_factory.mktemp("german")
    model_path, train_path = folder / "german.pkl", folder / "train.csv"
    joblib.dump(pipe, model_path)
    train.to_csv(train_path, index=False)
    denied = test[features][pipe.predict_proba(test[features])[:, 1] < 0.5].head(40).reset_index(drop=True)
    return SimpleNamespace(train_path=train_path, model_path=model_path, features=features, denied=denied)
