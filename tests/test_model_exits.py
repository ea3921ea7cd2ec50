"""Model code that calls ``sys.exit`` (or raises) is an error naming the model: one ``Error:`` line, exit 1.

A model whose ``predict_proba`` called ``sys.exit(0)`` ended frpd with exit status 0, nothing written and no
message. Each case runs ``python -m frpd_cli`` in a subprocess (the model's class lives in a module on
PYTHONPATH, as a user's would, so that ``--jobs 2`` workers can load it) and checks the exit status, stderr,
stdout and that no output, temporary, partial, progress or lock file is left.
"""

from __future__ import annotations

import os
import subprocess
import sys

import joblib
import pandas as pd
import pytest

_MODULE = '''
import os
import sys

MARK = 7777     # the duration of the applicant whose scoring ends the program


class Exiting:
    """Wraps a classifier; ``when`` says where it calls sys.exit (or raises)."""

    def __init__(self, inner, when, code=0):
        self.inner = inner
        self.when = when
        self.code = code
        self.classes_ = inner.classes_
        self.feature_names_in_ = inner.feature_names_in_

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.when == "load":
            sys.exit(self.code)
        if self.when == "load-raise":
            raise RuntimeError("broken on purpose while loading")

    def predict_proba(self, X):
        if self.when in ("predict", "predict-raise") and (X["duration"] == MARK).any():
            if self.when == "predict":
                sys.exit(self.code)
            raise RuntimeError("broken on purpose while predicting")
        return self.inner.predict_proba(X)
'''


@pytest.fixture(scope="module")
def exiting(sample_paths, tmp_path_factory):
    folder = tmp_path_factory.mktemp("exiting")
    (folder / "frpd_exiting_double.py").write_text(_MODULE)
    sys.path.insert(0, str(folder))
    try:
        import frpd_exiting_double as module
    finally:
        sys.path.remove(str(folder))
    inner = joblib.load(sample_paths["model"])
    models = {}
    for when, code in (("predict", 0), ("predict", "bye"), ("predict-raise", 0), ("load", 0), ("load", 3),
                       ("load-raise", 0)):
        path = folder / f"{when}-{code}.pkl"
        joblib.dump(module.Exiting(inner, when, code), path)
        models[(when, code)] = path
    base = pd.read_csv(sample_paths["applicants"], dtype=str, keep_default_na=False)
    many = pd.concat([base.assign(applicant_id=base["applicant_id"] + f"-{r}") for r in range(12)],
                     ignore_index=True)                         # 240 applicants: --jobs 2 starts two workers
    many.loc[len(many) - 3, "duration"] = "7777"               # scored late: in the last task of a parallel run
    applicants = folder / "applicants.csv"
    many.to_csv(applicants, index=False)
    return {"folder": folder, "models": models, "applicants": applicants}


def _run(sample_paths, exiting, model, tmp_path, *extra):
    out = tmp_path / "plans.csv"
    args = ["plan", str(sample_paths["data"]), "--model", str(model), "--schema", str(sample_paths["schema"]),
            "--applicants", str(exiting["applicants"]), "--format", "csv", "--output", str(out), *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(exiting["folder"]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "frpd_cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=900)
    return proc, out


def _assert_model_error(proc, out, model, *needles):
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    assert f"'{model}'" in errors[0], errors[0]                  # names the model file
    for needle in needles:
        assert needle in errors[0], errors[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert sorted(p.name for p in out.parent.iterdir()) == []   # no output, partial, progress or lock file


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("code", [0, "bye"])
def test_sys_exit_in_predict_proba_is_an_error(sample_paths, exiting, tmp_path, jobs, code):
    model = exiting["models"][("predict", code)]
    proc, out = _run(sample_paths, exiting, model, tmp_path, "--jobs", jobs)
    _assert_model_error(proc, out, model, "predict_proba", f"sys.exit({code!r})")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_exception_in_predict_proba_is_an_error(sample_paths, exiting, tmp_path, jobs):
    model = exiting["models"][("predict-raise", 0)]
    proc, out = _run(sample_paths, exiting, model, tmp_path, "--jobs", jobs)
    _assert_model_error(proc, out, model, "RuntimeError: broken on purpose while predicting")


@pytest.mark.parametrize("when, code, needle", [("load", 0, "sys.exit(0)"), ("load", 3, "sys.exit(3)"),
                                                ("load-raise", 0, "RuntimeError: broken on purpose while loading")])
def test_model_failing_while_loading_is_an_error(sample_paths, exiting, tmp_path, when, code, needle):
    model = exiting["models"][(when, code)]
    proc, out = _run(sample_paths, exiting, model, tmp_path)
    _assert_model_error(proc, out, model, "while loading", needle)
