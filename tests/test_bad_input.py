"""Bad input is answered with one `Error:` line naming the file, row and column, exit 1, nothing written."""

from __future__ import annotations

import csv
import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()


def _run(paths, tmp_path, *extra, data=None, applicants=None, model=None, out=True):
    output = tmp_path / "out.csv"
    args = ["plan", str(data or paths["data"]), "--model", str(model or paths["model"]), "--schema",
            str(paths["schema"]), "--applicants", str(applicants or paths["applicants"]), *extra]
    if out:
        args += ["--output", str(output)]
    result = runner.invoke(app, args)
    return result, output


def _assert_error(result, output, *needles):
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if not line.startswith("Warning:")]
    assert lines and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)
    assert not output.exists()
    assert [p for p in output.parent.iterdir() if p.name.startswith(".out.csv")] == []


def _write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_missing_file(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, data=tmp_path / "nope.csv"), "nope.csv", "does not exist")


def test_empty_file(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "e.csv", "")), "e.csv", "empty")


def test_header_only(sample_paths, tmp_path):
    header = (sample_paths["data"].read_text().splitlines()[0]) + "\n"
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "h.csv", header)), "h.csv", "no data rows")


def test_duplicate_columns(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "d.csv", "age,age,label\n1,2,1\n")),
                  "d.csv", "'age'")


def test_wrong_delimiter_hints(sample_paths, tmp_path):
    text = sample_paths["data"].read_text().replace(",", ";")
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "s.csv", text)), "s.csv", "';'")


def test_non_utf8_hints_encoding(sample_paths, tmp_path):
    raw = sample_paths["data"].read_bytes().replace(b"rent", b"r\xe9nt", 1)
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "l.csv", raw, "wb")), "l.csv", "--encoding",
                  "line")


def test_target_missing(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["data"]).drop(columns="label")
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, data=path), "label")


def test_applicants_missing_columns(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    pd.read_csv(sample_paths["applicants"]).drop(columns=["age", "job"]).to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "'age'", "'job'")


def test_extra_applicant_columns_warned(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"])
    frame["notes"] = "x"
    frame.to_csv(path, index=False)
    result, output = _run(sample_paths, tmp_path, applicants=path)
    assert result.exit_code == 0 and "notes" in result.stderr and output.exists()


def test_missing_values_in_applicants_named(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"])
    frame.loc[3, "duration"] = None
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "duration", "row 4")


def test_text_in_continuous_applicant_column(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"]).astype({"credit_amount": object})
    frame.loc[2, "credit_amount"] = "lots"
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "credit_amount", "'lots'", "row 3")


def test_unseen_category(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"])
    frame.loc[0, "housing"] = "castle"
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "housing", "'castle'", "own, rent")


@pytest.mark.parametrize("option,value", [("-k", "0"), ("--theta", "1.5"), ("--theta", "abc"), ("--jobs", "0")])
def test_out_of_range_options_are_usage_errors(sample_paths, tmp_path, option, value):
    result, output = _run(sample_paths, tmp_path, option, value)
    assert result.exit_code == 2 and result.stdout == "" and not output.exists()


@pytest.mark.parametrize("option,value,needle", [
    ("--bandwidth", "0", "> 0"), ("--bandwidth", "-1", "> 0"), ("--bandwidth", "inf", "> 0"),
    ("--bandwidth", "nan", "> 0"), ("--method", "foo", "quad-dp"), ("--format", "xml", "jsonl"),
    ("--backend", "spark", "loky"), ("--theta", "2", "--theta"), ("--endpoint", "x", "first-favorable"),
    ("--immutable-policy", "x", "project"), ("--candidates", "x", "labeled"), ("--tol", "0", "(0, 1)"),
    ("--threshold", "1", "(0, 1)"), ("--threshold", "0", "(0, 1)"), ("--max-cost", "-2", "> 0"),
    ("--encoding", "no-such-codec", "no-such-codec"), ("--chunk-size", "0", "--chunk-size"),
])
def test_invalid_option_values_are_usage_errors(sample_paths, tmp_path, option, value, needle):
    result, output = _run(sample_paths, tmp_path, option, value)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == "" and not output.exists()
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert f"Invalid value for '{option}" in result.stderr or f"Invalid value for '-k' / '{option}" in result.stderr
    assert needle in " ".join(result.stderr.replace("│", " ").split()), result.stderr


@pytest.mark.parametrize("command", [
    ["build-graph", "--weight", "x"], ["build-graph", "--radius", "-1"], ["build-graph", "--max-step", "0"],
    ["build-graph", "--kde-bandwidth", "nan"], ["build-graph", "--export", "xml", "g.xml"],
    ["select", "--theta", "0.1,3"], ["select", "--theta", "a,b"], ["evaluate", "--manifold", "q"],
    ["interpolate", "--scheme", "x"], ["interpolate", "--endpoint", "x"], ["interpolate", "--threshold", "2"],
])
def test_invalid_option_values_of_every_command_are_usage_errors(sample_paths, tmp_path, command):
    name, *extra = command
    common = ["--model", str(sample_paths["model"])]
    if name == "interpolate":
        args = [name, "--selection", str(tmp_path / "sel"), "--out", str(tmp_path / "o"), *common]
    elif name == "evaluate":
        args = [name, str(sample_paths["data"]), "--plans", str(tmp_path / "p.csv"), *common]
    elif name == "select":
        args = [name, str(sample_paths["data"]), "--applicants", str(sample_paths["applicants"]), "--out",
                str(tmp_path / "o"), *common]
    else:
        args = [name, str(sample_paths["data"]), "--out", str(tmp_path / "o"), *common]
    result = runner.invoke(app, [*args, *[str(tmp_path / e) if e.endswith(".xml") else e for e in extra]])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert f"Invalid value for '{extra[0]}'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists() and result.stdout == ""


@pytest.fixture(scope="module")
def reviewed(sample_paths, tmp_path_factory) -> dict:
    """A plans file and a selection artifact of the sample applicants, for the commands that read them."""
    folder = tmp_path_factory.mktemp("reviewed")
    common = [str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
              str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"])]
    plans, selection = folder / "plans.jsonl", folder / "sel"
    made = runner.invoke(app, ["plan", *common, "--format", "jsonl", "--output", str(plans)])
    assert made.exit_code == 0, made.stderr
    made = runner.invoke(app, ["select", *common, "--out", str(selection), "--format", "csv"])
    assert made.exit_code == 0, made.stderr
    return {"plans": plans, "selection": selection}


def _command(name, paths, reviewed, out):
    """The command line of one command, writing every output it has into the folder ``out``."""
    data, model, schema, applicants = (str(paths[k]) for k in ("data", "model", "schema", "applicants"))
    inputs = [data, "--model", model, "--schema", schema]
    return {
        "plan": ["plan", *inputs, "--applicants", applicants, "--output", str(out / "plans.csv")],
        "select": ["select", *inputs, "--applicants", applicants, "--out", str(out / "sel")],
        "build-graph": ["build-graph", *inputs, "--out", str(out / "graph")],
        "build-pool": ["build-pool", *inputs, "--out", str(out / "pool")],
        "evaluate": ["evaluate", *inputs, "--plans", str(reviewed["plans"]), "--output", str(out / "metrics.csv")],
        "audit": ["audit", *inputs, "--plans", str(reviewed["plans"]), "--applicants", applicants, "--actions",
                  "--output", str(out / "audit.csv")],
        "schema": ["schema", data, "--schema", schema, "--write", str(out / "schema.toml")],
        "build-refits": ["build-refits", data, "--model", model, "--schema", schema, "--robust", "2", "--out",
                         str(out / "refits")],
        "interpolate": ["interpolate", "--selection", str(reviewed["selection"]), "--model", model, "--out",
                        str(out / "plans")],
    }[name]


_SCHEMA_COMMANDS = ["plan", "select", "build-graph", "build-pool", "evaluate", "audit", "schema"]
_COLUMN_FLAGS = [("--immutable", "agee", "age"), ("--increasing", "agee", "age"), ("--decreasing", "dration", "duration"),
                 ("--categorical", "housng", "housing"), ("--continuous", "Credit_Amount", "credit_amount"),
                 ("--target", "lable", "label")]
_UNKNOWN_COLUMNS = [
    *[(command, *flag) for command in _SCHEMA_COMMANDS for flag in _COLUMN_FLAGS],
    *[("build-refits", *flag) for flag in _COLUMN_FLAGS if flag[0] in ("--categorical", "--continuous", "--target")],
    *[("interpolate", *flag) for flag in _COLUMN_FLAGS if flag[0] in ("--immutable", "--increasing", "--decreasing")],
    *[(command, "--id-column", "aplicant_id", "applicant_id") for command in ("plan", "select", "audit")],
    ("audit", "--by", "housng", "housing"),
]


@pytest.mark.parametrize("command,flag,column,match", _UNKNOWN_COLUMNS,
                         ids=[f"{c}{f}" for c, f, _, _ in _UNKNOWN_COLUMNS])
def test_an_unknown_column_in_a_flag_is_a_usage_error(sample_paths, reviewed, tmp_path, command, flag, column,
                                                      match):
    # they exited 1 as input errors, unlike --vary, --range, --weight and --max-move (and, in frpd schema, those too)
    out = tmp_path / "out"
    out.mkdir()
    result = runner.invoke(app, [*_command(command, sample_paths, reviewed, out), flag, column])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: Invalid value for '{flag}': "), result.stderr
    assert f"'{column}'" in errors[0] and f"Did you mean '{match}'?" in errors[0], errors[0]
    assert "Traceback" not in result.stderr and list(out.iterdir()) == []     # nothing written, no lock left


@pytest.mark.parametrize("flag,value", [("--vary", "agee"), ("--range", "agee=1:2"), ("--weight", "agee=2"),
                                        ("--max-move", "agee=0.1")])
def test_schema_command_refuses_an_unknown_column_as_the_other_commands_do(sample_paths, reviewed, tmp_path, flag,
                                                                           value):
    out = tmp_path / "out"
    out.mkdir()
    result = runner.invoke(app, [*_command("schema", sample_paths, reviewed, out), flag, value])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == "" and list(out.iterdir()) == []
    assert f"Error: Invalid value for '{flag}': Column 'agee'" in result.stderr
    assert "Did you mean 'age'?" in result.stderr


def test_audit_by_an_unknown_column_without_applicants_is_a_usage_error(sample_paths, reviewed, tmp_path):
    args = ["audit", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--plans", str(reviewed["plans"]), "--by", "housng"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.stdout == ""
    assert "Error: Invalid value for '--by': --by 'housng' is not a feature" in result.stderr
    assert "Did you mean 'housing'?" in result.stderr and "--applicants" in result.stderr


def test_help_lists_the_choices():
    result = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.stdout.replace("│", " ").split())
    for choices in ("quad|quad-dp", "table|csv|json|jsonl", "loky|dask", "filter|project", "prototype|first-favorable"):
        assert choices in text, choices


def test_build_graph_weights_match_the_library():
    from frpd_cli.cli._options import WEIGHTS
    from frpd_cli.graph import _WEIGHTS

    assert WEIGHTS == _WEIGHTS


def test_model_file_that_is_not_a_model(sample_paths, tmp_path):
    path = tmp_path / "m.pkl"
    path.write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    _assert_error(*_run(sample_paths, tmp_path, model=path), "m.pkl")


def test_model_garbage_bytes(sample_paths, tmp_path):
    path = tmp_path / "m.pkl"
    path.write_bytes(b"\x80\x04not really a pickle")
    _assert_error(*_run(sample_paths, tmp_path, model=path), "m.pkl")


def test_model_expects_other_columns(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["data"]).rename(columns={"job": "occupation"})
    path = tmp_path / "renamed.csv"
    frame.to_csv(path, index=False)
    result, output = _run(sample_paths, tmp_path, "--categorical", "occupation", data=path)
    assert result.exit_code == 1 and "occupation" in result.stderr and "job" in result.stderr


def test_model_lacks_favourable_class(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, "--favorable", "7"), "7")


def test_output_not_writable(sample_paths, tmp_path):
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants",
                                 str(sample_paths["applicants"]), "--output", str(tmp_path / "no" / "x.csv")])
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and "does not exist" in result.stderr


_cells = st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6),
                   st.integers(-5, 5).map(str), st.just(""), st.just('"'), st.just(";"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(_cells, min_size=0, max_size=9), min_size=0, max_size=6),
       which=st.sampled_from(["data", "applicants"]))
def test_random_malformed_csvs_never_crash(sample_paths, tmp_path, rows, which):
    header = sample_paths["data"].read_text().splitlines()[0] if which == "data" else \
        sample_paths["applicants"].read_text().splitlines()[0]
    text = "\n".join([header] + [",".join(r) for r in rows]) + "\n"
    path = tmp_path / f"fuzz-{which}.csv"
    path.write_text(text, encoding="utf-8")
    output = tmp_path / "fuzz-out.csv"
    if output.exists():
        output.unlink()
    kwargs = {which: path}
    args = ["plan", str(kwargs.get("data", sample_paths["data"])), "--model", str(sample_paths["model"]),
            "--schema", str(sample_paths["schema"]), "--applicants",
            str(kwargs.get("applicants", sample_paths["applicants"])), "--output", str(output)]
    result = runner.invoke(app, args)
    assert "Traceback" not in result.stderr
    if result.exit_code == 0:
        assert output.exists()     # a malformed-looking file can still be valid (e.g. header-only rows dropped)
    else:
        assert result.exit_code in (1, 2)
        assert result.stderr.startswith("Error:") or "Usage:" in result.stderr
        assert not output.exists()


def _selection(paths, tmp_path):
    sel = tmp_path / "sel"
    result = runner.invoke(app, ["select", str(paths["data"]), "--model", str(paths["model"]), "--applicants",
                                 str(paths["applicants"]), "--schema", str(paths["schema"]), "--out", str(sel),
                                 "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    return sel


def _interpolate(paths, selection, out):
    return runner.invoke(app, ["interpolate", "--selection", str(selection), "--model", str(paths["model"]),
                               "--out", str(out)])


def test_corrupted_selection_artifact(sample_paths, tmp_path):
    sel = _selection(sample_paths, tmp_path)
    with open(sel / "prototypes.csv", "a") as stream:
        stream.write("tampered\n")
    result = _interpolate(sample_paths, sel, tmp_path / "p")
    assert result.exit_code == 1 and result.stderr.startswith("Error:") and "prototypes.csv" in result.stderr
    assert not (tmp_path / "p").exists()


def test_artifact_of_another_kind_or_version(sample_paths, tmp_path):
    import json

    graph = tmp_path / "graph"
    built = runner.invoke(app, ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                "--schema", str(sample_paths["schema"]), "--out", str(graph)])
    assert built.exit_code == 0, built.stderr
    wrong_kind = _interpolate(sample_paths, graph, tmp_path / "p")
    assert wrong_kind.exit_code == 1 and "graph" in wrong_kind.stderr and "selection" in wrong_kind.stderr
    sel = _selection(sample_paths, tmp_path)
    manifest = json.loads((sel / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (sel / "manifest.json").write_text(json.dumps(manifest))
    newer = _interpolate(sample_paths, sel, tmp_path / "p")
    assert newer.exit_code == 1 and "99" in newer.stderr
    missing = _interpolate(sample_paths, tmp_path / "nowhere", tmp_path / "p")
    assert missing.exit_code == 1 and missing.stderr.startswith("Error:")
    assert not (tmp_path / "p").exists()


def test_graph_built_for_other_data_refused(sample_paths, tmp_path):
    graph = tmp_path / "graph"
    assert runner.invoke(app, ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                               "--schema", str(sample_paths["schema"]), "--out", str(graph)]).exit_code == 0
    frame = pd.read_csv(sample_paths["data"]).head(1500)
    other = tmp_path / "other.csv"
    frame.to_csv(other, index=False)
    result, output = _run(sample_paths, tmp_path, "--graph", str(graph), data=other)
    _assert_error(result, output, "data")


def test_missing_applicants_file_with_output(sample_paths, tmp_path):
    result, output = _run(sample_paths, tmp_path, applicants=tmp_path / "nobody.csv")
    _assert_error(result, output, "nobody.csv", "does not exist")
    assert not (tmp_path / "out.csv.resume.json").exists()


def test_missing_schema_file(sample_paths, tmp_path):
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(tmp_path / "nope.toml"), "--applicants",
                                 str(sample_paths["applicants"])])
    assert result.exit_code == 1 and "nope.toml" in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------ model outputs (checked, never written)


class Tampered:
    """The sample model with its predict_proba output altered (a double for broken or hostile models)."""

    def __init__(self, inner, mode):
        self.inner, self.mode = inner, mode
        self.classes_ = inner.classes_
        self.feature_names_in_ = inner.feature_names_in_
        self.rows_seen = 0

    def predict_proba(self, X):
        p = np.array(self.inner.predict_proba(X), dtype=float)
        seen, self.rows_seen = self.rows_seen, self.rows_seen + len(p)
        if self.mode == "nan":
            p[:] = np.nan
        elif self.mode == "nan-row-5" and len(p) > 4:
            p[4] = np.nan
        elif self.mode == "scaled":
            p *= 1.89
        elif self.mode == "nan-after-training" and seen >= 2000:
            # the 2,000 training rows are scored first (in blocks); a block's first row is never padding
            p[0] = np.nan
        return p


def _tampered(paths, tmp_path, mode):
    path = tmp_path / f"tampered-{mode}.pkl"
    joblib.dump(Tampered(joblib.load(paths["model"]), mode), path)
    return path


@pytest.mark.parametrize("mode, needles", [
    ("nan", ["non-finite", "data row 1 (line 2)", "credit.csv"]),
    ("nan-row-5", ["non-finite", "data row 5 (line 6)", "credit.csv"]),
    ("scaled", ["outside [0, 1]", "data row 1 (line 2)"]),
    ("nan-after-training", ["non-finite", "row(s) passed in this call"]),
])
def test_bad_model_outputs_refused(sample_paths, tmp_path, mode, needles):
    model = _tampered(sample_paths, tmp_path, mode)
    # json: written only when the whole run succeeded (csv/jsonl files are checkpointed chunk by chunk for --resume)
    result, output = _run(sample_paths, tmp_path, "--format", "json", model=model)
    _assert_error(result, output, model.name, *needles)


def test_regressor_refused_by_the_cli(sample_paths, tmp_path):
    from sklearn.linear_model import LinearRegression

    frame = pd.read_csv(sample_paths["data"])
    numeric = ["age", "duration", "credit_amount"]
    path = tmp_path / "regressor.pkl"
    joblib.dump(LinearRegression().fit(frame[numeric], frame["label"]), path)
    _assert_error(*_run(sample_paths, tmp_path, model=path), "regressor.pkl", "regressor", "classes_")


_NOISY_MODULE = '''
import os


class Noisy:
    """Wraps a classifier and writes to stdout (Python and file-descriptor level) when loaded and called."""

    def __init__(self, inner):
        self.inner = inner
        self.classes_ = inner.classes_
        self.feature_names_in_ = inner.feature_names_in_

    def __setstate__(self, state):
        self.__dict__.update(state)
        print("noise: loading")
        os.write(1, b"noise: fd 1 while loading\\n")

    def predict_proba(self, X):
        print("noise: predicting", len(X))
        os.write(1, b"noise: fd 1 while predicting\\n")
        return self.inner.predict_proba(X)
'''


def test_model_output_on_stdout_goes_to_stderr(sample_paths, tmp_path, monkeypatch):
    (tmp_path / "frpd_noisy_double.py").write_text(_NOISY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import frpd_noisy_double

    noisy = tmp_path / "noisy.pkl"
    joblib.dump(frpd_noisy_double.Noisy(joblib.load(sample_paths["model"])), noisy)
    args = ["plan", str(sample_paths["data"]), "--model", "MODEL", "--schema", str(sample_paths["schema"]),
            "--applicants", str(sample_paths["applicants"]), "--format", "csv"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "frpd_cli", *[str(noisy) if a == "MODEL" else a for a in args]],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for noise in ("noise: loading", "noise: fd 1 while loading", "noise: predicting",
                  "noise: fd 1 while predicting"):
        assert noise in proc.stderr and noise not in proc.stdout
    clean = runner.invoke(app, [str(sample_paths["model"]) if a == "MODEL" else a for a in args])
    assert clean.exit_code == 0 and proc.stdout == clean.stdout     # the data is exactly the quiet model's


# ------------------------------------------------------------------ extreme and malformed values


def _applicants_with(paths, tmp_path, row, column, value, name="a.csv"):
    frame = pd.read_csv(paths["applicants"], dtype=str, keep_default_na=False)
    frame.loc[row, column] = value
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("column, value, needles", [
    ("credit_amount", "inf", ["holds inf", "expected a finite number"]),
    ("credit_amount", "-inf", ["holds -inf", "expected a finite number"]),
    ("credit_amount", "1e308", ["holds 1e+308", "magnitude at most"]),
    ("age", "35.7", ["holds 35.7", "whole number"]),
])
def test_extreme_applicant_values_named(sample_paths, tmp_path, column, value, needles):
    path = _applicants_with(sample_paths, tmp_path, 2, column, value)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "a.csv", f"'{column}'", "data row 3 (line 4)",
                  *needles)


@pytest.mark.parametrize("value, needle", [("1e308", "magnitude at most"), ("inf", "finite number"),
                                           ("-1e200", "magnitude at most")])
def test_extreme_training_values_named(sample_paths, tmp_path, value, needle):
    frame = pd.read_csv(sample_paths["data"], dtype=str, keep_default_na=False)
    frame.loc[4, "credit_amount"] = value
    path = tmp_path / "train.csv"
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, data=path), "train.csv", "'credit_amount'", "data row 5 (line 6)",
                  needle)


def test_out_of_range_applicants_warned_and_planned(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["applicants"], dtype=str, keep_default_na=False)
    frame.loc[1, "credit_amount"] = "1000000"
    frame.loc[6, "credit_amount"] = "2000000"
    frame.loc[3, "duration"] = "1"
    path = tmp_path / "far.csv"
    frame.to_csv(path, index=False)
    result, output = _run(sample_paths, tmp_path, "--format", "jsonl", applicants=path)
    assert result.exit_code == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warned) == 2, result.stderr
    amount = next(w for w in warned if "'credit_amount'" in w)
    assert "2 applicant(s)" in amount and "1000000" in amount and "data row 2" in amount
    assert "1 applicant(s)" in next(w for w in warned if "'duration'" in w)
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["applicant"] for r in records] == frame["applicant_id"].tolist()


def test_ids_kept_verbatim_and_escaped_in_csv(sample_paths, tmp_path):
    ids = ["NaN", "NA", "null", "=1+2", "+SUM(A1)", "@x", "-3.5", "-cmd", "007", "'q"]
    frame = pd.read_csv(sample_paths["applicants"], dtype=str, keep_default_na=False)
    frame.loc[: len(ids) - 1, "applicant_id"] = ids
    path = tmp_path / "ids.csv"
    frame.to_csv(path, index=False)
    result, output = _run(sample_paths, tmp_path, "--format", "csv", applicants=path)
    assert result.exit_code == 0, result.stderr
    with open(output, newline="") as stream:
        written = list(dict.fromkeys(row["applicant"] for row in csv.DictReader(stream)))
    expected = ["NaN", "NA", "null", "'=1+2", "'+SUM(A1)", "'@x", "-3.5", "'-cmd", "007", "''q"]
    assert written[: len(ids)] == expected
    jsonl = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants", str(path), "--format",
                                 "jsonl", "--output", str(jsonl)])
    assert result.exit_code == 0
    assert [json.loads(line)["applicant"] for line in jsonl.read_text().splitlines()][: len(ids)] == ids
    evaluated = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                    "--schema", str(sample_paths["schema"]), "--plans", str(output), "--applicants",
                                    str(path), "--per-applicant", "--format", "jsonl"])
    assert evaluated.exit_code == 0, evaluated.stderr
    assert [json.loads(line)["applicant"] for line in evaluated.stdout.splitlines()][: len(ids)] == ids


def test_categories_escaped_in_csv_numbers_not(sample_paths, tmp_path):
    data = pd.read_csv(sample_paths["data"])
    data["housing"] = data["housing"].map({"own": "=own", "rent": "@rent"}).fillna(data["housing"])
    train = tmp_path / "train.csv"
    data.to_csv(train, index=False)
    applicants = pd.read_csv(sample_paths["applicants"])
    applicants["housing"] = applicants["housing"].map({"own": "=own", "rent": "@rent"}).fillna(applicants["housing"])
    path = tmp_path / "apps.csv"
    applicants.to_csv(path, index=False)
    model = _renamed_housing_model(sample_paths, tmp_path)
    result, output = _run(sample_paths, tmp_path, "--format", "csv", data=train, applicants=path, model=model)
    assert result.exit_code == 0, result.stderr
    with open(output, newline="") as stream:
        rows = list(csv.DictReader(stream))
    housing = {row["housing"] for row in rows if row["housing"]}
    assert housing and housing <= {"'=own", "'@rent", "free"}
    assert all(not row["cost"].startswith("'") and not row["probability"].startswith("'") for row in rows)


class RenamedHousing:
    """The sample model, reading housing values written with a formula-like prefix."""

    def __init__(self, inner):
        self.inner = inner
        self.classes_ = inner.classes_
        self.feature_names_in_ = inner.feature_names_in_

    def predict_proba(self, X):
        X = X.copy()
        X["housing"] = X["housing"].map({"=own": "own", "@rent": "rent"}).fillna(X["housing"])
        return self.inner.predict_proba(X)


def _renamed_housing_model(paths, tmp_path):
    path = tmp_path / "renamed.pkl"
    joblib.dump(RenamedHousing(joblib.load(paths["model"])), path)
    return path


def test_plan_refuses_duplicate_applicant_ids(sample_paths, tmp_path):
    path = _applicants_with(sample_paths, tmp_path, 4, "applicant_id", "A002")
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "'A002' appears 2 times", "data rows 2, 5",
                  "--id-column")


# ------------------------------------------------------------------ files that are not what they seem


def test_schema_path_is_a_folder(sample_paths, tmp_path):
    folder = tmp_path / "schema"
    folder.mkdir()
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(folder), "--applicants", str(sample_paths["applicants"]),
                                 "--output", str(tmp_path / "out.csv")])
    _assert_error(result, tmp_path / "out.csv", "is a folder", "schema")


def test_binary_data_file_refused(sample_paths, tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(b"age,label\n" + bytes(range(256)) * 8)
    _assert_error(*_run(sample_paths, tmp_path, data=path), "data.csv", "binary data", "NUL byte at byte")
    _assert_error(*_run(sample_paths, tmp_path, applicants=sample_paths["model"]), "model.pkl", "binary data")


def _feed_fifo(path: Path, payload: bytes | None):
    """A thread writing ``payload`` (or NUL bytes forever) into a FIFO until the reader goes away."""

    def write():
        try:
            with open(path, "wb") as stream:
                if payload is not None:
                    stream.write(payload)
                    return
                block = bytes(1 << 16)
                while True:
                    stream.write(block)
        except (BrokenPipeError, OSError):
            pass

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _release_fifo(path: Path, thread: threading.Thread) -> None:
    if thread.is_alive():       # the command never opened the FIFO: open it once so the writer's open returns
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
    thread.join(timeout=30)
    assert not thread.is_alive()


@pytest.mark.parametrize("which", ["data", "applicants"])
def test_endless_binary_stream_refused(sample_paths, tmp_path, which):
    fifo = tmp_path / "endless.csv"
    os.mkfifo(fifo)
    thread = _feed_fifo(fifo, None)
    try:
        result, output = _run(sample_paths, tmp_path, **{which: fifo})
    finally:
        _release_fifo(fifo, thread)
    _assert_error(result, output, "endless.csv", "binary data", "NUL byte at byte 0")


def test_training_data_from_a_pipe(sample_paths, tmp_path):
    fifo = tmp_path / "train-pipe.csv"
    os.mkfifo(fifo)
    thread = _feed_fifo(fifo, sample_paths["data"].read_bytes())
    try:
        piped, _ = _run(sample_paths, tmp_path, "--format", "csv", data=fifo, out=False)
    finally:
        _release_fifo(fifo, thread)
    regular, _ = _run(sample_paths, tmp_path, "--format", "csv", out=False)
    assert piped.exit_code == 0, piped.stderr
    assert piped.stdout == regular.stdout and piped.stdout.startswith("applicant,status")


def test_unreadable_files_named(sample_paths, tmp_path, monkeypatch):
    loop = tmp_path / "loop.csv"
    loop.symlink_to(loop)
    _assert_error(*_run(sample_paths, tmp_path, data=loop), "loop.csv", "cannot be read")
    _assert_error(*_run(sample_paths, tmp_path, applicants=loop), "loop.csv", "cannot be read")

    import frpd_cli.data as data_module

    def denied(path, mode="r", *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(data_module, "open", denied, raising=False)
    _assert_error(*_run(sample_paths, tmp_path), "credit.csv", "cannot be read: Permission denied")


def test_unforeseen_os_errors_are_not_unexpected(sample_paths, tmp_path, monkeypatch):
    import frpd_cli.cli._options as options

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device", "somewhere.tmp")

    monkeypatch.setattr(options, "load_training", disk_full)
    result, output = _run(sample_paths, tmp_path)
    _assert_error(result, output, "'somewhere.tmp'", "No space left on device")
    assert "unexpected" not in result.stderr


# ------------------------------------------------------------------ random bad files: refused cleanly or planned fully


_BAD_CELLS = st.sampled_from(["abc", "inf", "-inf", "nan", "", "1e308", "-1e308", "35.7", "1e-300", "castle",
                              "=1+2", "NA", "null", " ", '"', "0x10", "1,5", "1e200", "-0", "9" * 30, "\u00e9t\u00e9"])
_MUTATIONS = st.one_of(
    st.tuples(st.just("cell"), st.integers(0, 7), st.integers(0, 8), _BAD_CELLS),
    st.tuples(st.just("drop-column"), st.integers(0, 8)),
    st.tuples(st.just("duplicate-row"), st.integers(0, 7)),
    st.tuples(st.just("extra-field"), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.floats(0.0, 1.0)),
    st.tuples(st.just("binary"), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("empty")),
    st.tuples(st.just("header-only")),
)


def _mutate(text: str, mutations) -> bytes:
    lines = text.splitlines()
    for mutation in mutations:
        kind = mutation[0]
        if not lines and kind not in ("binary",):
            continue
        if kind == "cell":
            _, row, column, value = mutation
            row = 1 + row % max(len(lines) - 1, 1)
            if row < len(lines):
                cells = lines[row].split(",")
                cells[column % len(cells)] = value
                lines[row] = ",".join(cells)
        elif kind == "drop-column":
            column = mutation[1] % len(lines[0].split(","))
            lines = [",".join(c for j, c in enumerate(line.split(",")) if j != column) for line in lines]
        elif kind == "duplicate-row" and len(lines) > 1:
            lines.append(lines[1 + mutation[1] % (len(lines) - 1)])
        elif kind == "extra-field" and len(lines) > 1:
            row = 1 + mutation[1] % (len(lines) - 1)
            lines[row] += ",surplus"
        elif kind == "truncate":
            joined = "\n".join(lines)
            lines = joined[: int(len(joined) * mutation[1])].split("\n")
        elif kind == "binary":
            return mutation[1] + b"\x00" + "\n".join(lines).encode()
        elif kind == "empty":
            lines = []
        elif kind == "header-only":
            lines = lines[:1]
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.sampled_from(["data", "applicants"]), mutations=st.lists(_MUTATIONS, min_size=1, max_size=3))
def test_random_bad_files_refused_cleanly_or_planned_fully(sample_paths, tmp_path, which, mutations):
    from frpd_cli.plans import unescape_csv_text

    base = {"data": "\n".join(sample_paths["data"].read_text().splitlines()[:401]),
            "applicants": "\n".join(sample_paths["applicants"].read_text().splitlines()[:7])}
    paths = {}
    for name, text in base.items():
        paths[name] = tmp_path / f"random-{name}.csv"
        paths[name].write_bytes(_mutate(text, mutations) if name == which else (text + "\n").encode())
    result = runner.invoke(app, ["plan", str(paths["data"]), "--model", str(sample_paths["model"]), "--schema",
                                 str(sample_paths["schema"]), "--applicants", str(paths["applicants"]),
                                 "--format", "csv"])
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr, result.stderr
    if result.exit_code == 0:
        # the input was in fact valid: every applicant is in the output, in order, each with its rows
        expected = pd.read_csv(paths["applicants"], dtype=str, keep_default_na=False)["applicant_id"].tolist()
        rows = list(csv.DictReader(result.stdout.splitlines()))
        assert rows and all(None not in row and row["status"] for row in rows)
        assert list(dict.fromkeys(unescape_csv_text(row["applicant"]) for row in rows)) == expected
    else:
        assert result.exit_code == 1, (result.exit_code, result.stderr)
        assert result.stdout == ""                       # refused before anything was written
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
        others = [line for line in result.stderr.splitlines() if not line.startswith(("Error:", "Warning:"))]
        assert len(errors) == 1 and others == [], result.stderr


def test_os_errors_without_a_file_name_the_failure(sample_paths, tmp_path, monkeypatch):
    import frpd_cli.cli._options as options

    def refused(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(options, "load_training", refused)
    result, output = _run(sample_paths, tmp_path)
    _assert_error(result, output, "ConnectionRefusedError", "Connection refused")
    assert "unexpected" not in result.stderr
    assert "--scheduler" not in result.stderr            # raised by frpd's own code: no Dask scheduler involved


@pytest.mark.parametrize("command", ["plan", "schema"])
@pytest.mark.parametrize("flag", ["--immutable", "--increasing", "--categorical"])
def test_the_target_named_by_a_flag_is_a_usage_error(sample_paths, reviewed, tmp_path, command, flag):
    # --vary label exited 2 and --immutable label 1; both are a bad option value
    out = tmp_path / "out"
    out.mkdir()
    result = runner.invoke(app, [*_command(command, sample_paths, reviewed, out), flag, "label"])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == "" and list(out.iterdir()) == []
    assert f"Error: Invalid value for '{flag}': Column 'label' is the target" in result.stderr


def test_the_target_declared_immutable_in_the_schema_file_stays_an_input_error(sample_paths, tmp_path):
    schema = tmp_path / "schema.toml"
    schema.write_text(sample_paths["schema"].read_text(encoding="utf-8").replace(
        'immutable = ["personal_status"]', 'immutable = ["personal_status", "label"]'), encoding="utf-8")
    assert '"label"]' in schema.read_text(encoding="utf-8")
    result = runner.invoke(app, ["schema", str(sample_paths["data"]), "--schema", str(schema)])
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    assert "Column 'label' is the target; it cannot also be declared immutable." in result.stderr
    assert "Invalid value" not in result.stderr


def test_a_comma_list_in_one_flag_value_says_to_repeat_the_flag(sample_paths, reviewed, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result = runner.invoke(app, [*_command("plan", sample_paths, reviewed, out), "--immutable", "age,housing"])
    assert result.exit_code == 2 and result.stdout == ""
    assert ("name each on its own: --immutable age --immutable housing on the command line, or "
            '["age", "housing"] in the schema file') in result.stderr


def test_a_comma_list_in_one_schema_file_string_says_to_split_it(sample_paths, tmp_path):
    schema = tmp_path / "schema.toml"
    schema.write_text(sample_paths["schema"].read_text(encoding="utf-8").replace(
        'immutable = ["personal_status"]', 'immutable = ["personal_status,housing"]'), encoding="utf-8")
    result = runner.invoke(app, ["schema", str(sample_paths["data"]), "--schema", str(schema)])
    assert result.exit_code == 1
    assert '["personal_status", "housing"] in the schema file' in result.stderr
