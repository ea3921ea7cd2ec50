"""Shared fixtures: the sample data, a sample model trained once per test session, real datasets when present."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import settings

# The terminal the suite runs under must not decide its outcome: variables that force colour (typer decides at
# import, from GITHUB_ACTIONS, FORCE_COLOR or PY_COLORS, to colour help and usage errors; Rich colours frpd's own
# stderr), a narrow or dumb terminal (tables wrap, Rich draws no status line). Set before anything imports typer
# or Rich; subprocesses inherit them. Tests that need another width or terminal set it themselves.
for _name in ("FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "TERMINAL_WIDTH",
              "LINES"):
    os.environ.pop(_name, None)
os.environ["COLUMNS"] = "80"
if os.environ.get("TERM") in ("dumb", "unknown"):
    os.environ["TERM"] = "xterm-256color"

# Property tests draw the same examples on every machine and every run: a red suite on a fresh machine must be
# reproducible, never a draw of luck (and the example database of one machine never decides another's run).
settings.register_profile("frpd", derandomize=True, database=None)
settings.load_profile("frpd")

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


TINY_FEATURES = ["income", "years", "sector", "debt"]


def _tiny_credit(folder: Path, *, seed: int, n: int, cut: float, below: float, n_applicants: int) -> dict:
    """A small credit problem: income, years (integer), sector (a, b, c), debt; the label is 1 when income + 1.5
    years - debt + 10 [sector c] > ``cut``; a logistic pipeline on one-hot sector and min-max numbers. The
    applicants are the first ``n_applicants`` rows the model scores below ``below``. Files in ``folder``."""
    import joblib
    import numpy as np
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "income": np.round(rng.uniform(10, 90, n), 1),
        "years": rng.integers(0, 30, n),
        "sector": rng.choice(["a", "b", "c"], n),
        "debt": np.round(rng.uniform(0, 50, n), 1),
    })
    score = frame["income"] + 1.5 * frame["years"] - frame["debt"] + 10 * (frame["sector"] == "c")
    frame["label"] = (score > cut).astype(int)
    model = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), ["sector"]),
                                    ("num", MinMaxScaler(), ["income", "years", "debt"])])),
        ("clf", LogisticRegression(C=50.0, max_iter=2000)),
    ]).fit(frame[TINY_FEATURES], frame["label"])
    data, model_path, app_path = folder / "train.csv", folder / "model.pkl", folder / "applicants.csv"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    proba = model.predict_proba(frame[TINY_FEATURES])[:, 1]
    applicants = frame[TINY_FEATURES][proba < below].head(n_applicants).reset_index(drop=True)
    applicants.to_csv(app_path, index=False)
    return {"data": data, "model": model_path, "applicants": app_path, "frame": frame, "estimator": model,
            "raw": applicants, "tmp": folder}


@pytest.fixture(scope="session")
def tiny_credit():
    """The builder of a small credit problem (``tiny_credit(folder, seed=, n=, cut=, below=, n_applicants=)``)."""
    return _tiny_credit


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


_GATED_MODEL = '''
import errno
import os
import time

MARKER = 123456.0


class Gated:
    """Predicts like the wrapped model; a call on a batch holding the marker row (credit_amount MARKER) creates
    the file ``reached``, writes the line ``held`` to the FIFO ``held`` when a test listens on it, and waits
    until the file ``release`` exists (at most ten minutes). With ``release`` present it never waits: the run is
    the same as with the wrapped model."""

    def __init__(self, inner, reached, release, held=None):
        self.inner = inner
        self.reached = reached
        self.release = release
        self.held = held
        self.classes_ = inner.classes_
        self.feature_names_in_ = inner.feature_names_in_
        self.n_features_in_ = inner.n_features_in_

    def _gate(self, X):
        if (X["credit_amount"] == MARKER).any() and not os.path.exists(self.release):
            with open(self.reached, "a"):
                pass
            if self.held is not None:
                try:
                    fd = os.open(self.held, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as error:            # nobody listens: the file above is the only signal
                    if error.errno != errno.ENXIO:
                        raise
                else:
                    try:
                        os.write(fd, b"held\\n")   # one atomic write, smaller than PIPE_BUF
                    finally:
                        os.close(fd)
            deadline = time.monotonic() + 600
            while not os.path.exists(self.release) and time.monotonic() < deadline:
                time.sleep(0.01)

    def predict_proba(self, X):
        self._gate(X)
        return self.inner.predict_proba(X)

    def predict(self, X):
        self._gate(X)
        return self.inner.predict(X)
'''


@pytest.fixture()
def gated(sample_paths, tmp_path_factory, monkeypatch):
    """A model that holds a run at a marker applicant until the test releases it: runs interrupted at a point the
    test controls, on any machine, however fast or loaded.

    Attributes: ``model`` (path), ``reached`` (the file the model creates when it holds), ``release`` (create it to
    let the run go on; with it present, runs are not held), ``env`` (for subprocesses: imports the model's
    module), ``applicants(folder, n_copies, marker_at)`` (the sample applicants repeated under new ids B0000...,
    the row ``marker_at`` made the marker), ``wait_held(process)`` (returns once the model holds that process's
    run; fails if the run ends first), ``wait_exits(pids, timeout)`` (returns once those processes have exited).
    """
    import importlib

    import joblib
    import pandas as pd

    folder = tmp_path_factory.mktemp("gated")
    (folder / "frpd_test_gated_model.py").write_text(_GATED_MODEL)
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module("frpd_test_gated_model")
    reached, release, held = folder / "reached", folder / "release", folder / "held"
    os.mkfifo(held)
    # opened for reading and writing: the model's non-blocking open always finds a reader, and the FIFO never
    # reports end-of-file between two holds (Linux semantics; the suite runs on Linux)
    listener = os.open(held, os.O_RDWR | os.O_NONBLOCK)
    model = folder / "gated.pkl"
    joblib.dump(module.Gated(joblib.load(sample_paths["model"]), str(reached), str(release), str(held)), model)

    def applicants(where: Path, n_copies: int = 55, marker_at: int = 600) -> Path:
        frame = pd.read_csv(sample_paths["applicants"])
        big = pd.concat([frame] * n_copies, ignore_index=True)
        big["applicant_id"] = [f"B{i:04d}" for i in range(len(big))]
        big.loc[marker_at, "credit_amount"] = module.MARKER
        path = where / "many.csv"
        big.to_csv(path, index=False)
        return path

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)}
    def wait_held(process, timeout: float = 600.0) -> None:
        """Block until the model holds the run (its line arrives on the FIFO); fail if the run ends first.

        Woken by the line or by the process's exit (a pidfd), never by a clock: what the test does next happens
        mid-run on any machine, however fast or loaded."""
        if not wait_for_events(listener, process, timeout):
            if process.poll() is not None:
                detail = process.stderr.read().decode() if process.stderr is not None else ""
                pytest.fail(f"the run ended (exit {process.returncode}) before the model held it: {detail}")
            pytest.fail(f"the model did not hold the run within {timeout:.0f} s")
        assert os.read(listener, 5) == b"held\n"

    yield SimpleNamespace(model=model, reached=reached, release=release, env=env, applicants=applicants,
                          paths={**sample_paths, "model": model}, wait_held=wait_held,
                          wait_exits=wait_for_exits)
    os.close(listener)
    sys.modules.pop("frpd_test_gated_model", None)


def _pidfd(pid: int):
    """A descriptor that becomes readable when process ``pid`` exits; None when it is already gone."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None


def wait_for_events(fd: int, process, timeout: float) -> bool:
    """Wait until ``fd`` is readable (True) or ``process`` exits or ``timeout`` seconds pass (False)."""
    pidfd = _pidfd(process.pid)
    try:
        watched = [fd] if pidfd is None else [fd, pidfd]
        deadline = time.monotonic() + timeout
        while True:
            wait = 0.0 if pidfd is None else max(0.0, deadline - time.monotonic())
            ready = select.select(watched, [], [], wait)[0]
            if fd in ready:
                return True
            if pidfd is None or pidfd in ready or time.monotonic() >= deadline:
                process.poll()
                return False
    finally:
        if pidfd is not None:
            os.close(pidfd)


def wait_for_exits(pids, timeout: float) -> None:
    """Wait until every process of ``pids`` has exited, or ``timeout`` seconds pass (woken by pidfds)."""
    fds = [fd for fd in map(_pidfd, pids) if fd is not None]
    try:
        deadline = time.monotonic() + timeout
        while fds and time.monotonic() < deadline:
            for fd in select.select(fds, [], [], max(0.0, deadline - time.monotonic()))[0]:
                fds.remove(fd)
                os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)
