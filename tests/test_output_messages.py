"""Messages read by people: no numpy reprs in error texts, progress and summaries on stderr only when wanted,
NO_COLOR honoured, shell completion available."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()
_NUMPY_REPR = re.compile(r"\bnp\.|numpy\.|array\(|dtype=")


def _error_cases(paths, tmp: Path) -> dict:
    """Command lines that fail, each for a different reason, over the sample data."""
    data, model, schema, applicants = (str(paths[k]) for k in ("data", "model", "schema", "applicants"))
    frame = pd.read_csv(paths["data"])
    app_frame = pd.read_csv(paths["applicants"])

    fractional = frame.astype({"duration": float})
    # a few fractions in 100 rows pass as imputed counts; one row in ten is a fraction no count has
    fractional.loc[3::10, "duration"] = 7.5
    fractional.to_csv(tmp / "fractional.csv", index=False)
    text_in_number = app_frame.copy()
    text_in_number["credit_amount"] = text_in_number["credit_amount"].astype(object)
    text_in_number.loc[1, "credit_amount"] = "lots"
    text_in_number.to_csv(tmp / "text.csv", index=False)
    unseen = app_frame.copy()
    unseen.loc[0, "housing"] = "castle"
    unseen.to_csv(tmp / "unseen.csv", index=False)
    infinite = app_frame.copy()
    infinite["credit_amount"] = infinite["credit_amount"].astype(float)
    infinite.loc[2, "credit_amount"] = np.inf
    infinite.to_csv(tmp / "inf.csv", index=False)

    from sklearn.dummy import DummyClassifier

    one_class = DummyClassifier().fit(frame.drop(columns="label"), np.zeros(len(frame), dtype=np.int64))
    joblib.dump(one_class, tmp / "one_class.pkl")
    (tmp / "short_order.toml").write_text('[ordinal]\nsavings = ["none", "rich"]\n', encoding="utf-8")

    plan = ["plan", data, "--model", model, "--schema", schema, "--format", "csv"]
    return {
        "integer declared, fraction found": ["schema", str(tmp / "fractional.csv"), "--schema", schema],
        "integer declared, fraction found (plan)": ["plan", str(tmp / "fractional.csv"), "--model", model,
                                                    "--schema", schema, "--applicants", applicants],
        "text in a numeric applicant column": [*plan, "--applicants", str(tmp / "text.csv")],
        "unseen category": [*plan, "--applicants", str(tmp / "unseen.csv")],
        "infinite applicant value": [*plan, "--applicants", str(tmp / "inf.csv")],
        "one-class model": ["plan", data, "--model", str(tmp / "one_class.pkl"), "--schema", schema,
                            "--applicants", applicants],
        "favourable class unknown": [*plan, "--applicants", applicants, "--favorable", "7"],
        "ordinal order misses levels": ["schema", data, "--schema", str(tmp / "short_order.toml")],
        "immutable column missing": [*plan, "--applicants", applicants, "--immutable", "no_such"],
        "categorical cannot be monotone": [*plan, "--applicants", applicants, "--increasing", "housing"],
    }


def test_no_numpy_repr_in_any_error_text(sample_paths, tmp_path):
    seen = {}
    for name, args in _error_cases(sample_paths, tmp_path).items():
        result = runner.invoke(app, args)
        assert result.exit_code in (1, 2), (name, result.exit_code, result.stderr)
        assert "Error" in result.stderr, (name, result.stderr)
        seen[name] = result.stderr
    offending = {name: text for name, text in seen.items() if _NUMPY_REPR.search(text)}
    assert offending == {}
    assert "7.5" in seen["integer declared, fraction found"]      # the value itself is shown, as written


def test_progress_never_reaches_a_pipe_and_quiet_drops_the_summary(sample_paths):
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]), "--format", "csv"]
    loud = runner.invoke(app, args)
    quiet = runner.invoke(app, [*args, "--quiet"])
    assert loud.exit_code == 0 and quiet.exit_code == 0
    assert loud.stdout == quiet.stdout
    assert "applicant(s):" in loud.stderr and "planning" not in loud.stderr and "\r" not in loud.stderr
    assert quiet.stderr == ""


@pytest.mark.parametrize("command", ["plan", "select", "interpolate", "evaluate", "build-graph", "build-pool",
                                     "schema"])
def test_every_command_takes_quiet(command):
    text = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).stdout
    assert "--quiet" in text


def test_progress_bar_on_a_terminal_only():
    from frpd_cli.cli._output import stderr_console

    assert not stderr_console().is_terminal           # under pytest stderr is captured: bars are disabled


def test_no_color_is_honoured(monkeypatch):
    from frpd_cli.cli._output import print_plan
    from frpd_cli.plans import Plan, Recourse

    plan = Plan("A1", "ok", None, "quad", (Recourse(1, {"age": 36}, {"age": (35, 36)}, 1.0, 0.7, 0),), {"age": 35})
    import io

    def rendered() -> str:
        buffer = io.StringIO()
        print_plan(Console(file=buffer, force_terminal=True, width=100, color_system="truecolor"), plan)
        return buffer.getvalue()

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert re.search(r"\x1b\[[0-9;]*3[0-9]m|\x1b\[[0-9;]*38;", rendered())      # colours on a colour terminal
    monkeypatch.setenv("NO_COLOR", "1")
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]m|\x1b\[[0-9;]*38;", rendered())


def _frpd() -> str:
    return str(Path(sys.executable).with_name("frpd"))


def test_shell_completion_is_available():
    if not Path(_frpd()).exists():
        pytest.skip("the frpd console script is not installed beside this interpreter")
    helped = subprocess.run([_frpd(), "--help"], capture_output=True, text=True, check=False)
    assert "--install-completion" in helped.stdout and "--show-completion" in helped.stdout
    env = {**os.environ, "_FRPD_COMPLETE": "complete_bash", "COMP_WORDS": "frpd pl", "COMP_CWORD": "1"}
    done = subprocess.run([_frpd()], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0 and "plan" in done.stdout.split()
    env = {**os.environ, "_FRPD_COMPLETE": "complete_bash", "COMP_WORDS": "frpd plan --lay", "COMP_CWORD": "2"}
    done = subprocess.run([_frpd()], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0 and "--layout" in done.stdout.split()
    env = {**os.environ, "_FRPD_COMPLETE": "complete_bash", "COMP_WORDS": "frpd plan --layout ", "COMP_CWORD": "3"}
    done = subprocess.run([_frpd()], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0 and set(done.stdout.split()) == {"auto", "wide", "long"}
    # --show-completion prints the script of the shell it runs under (detected from the parent processes), so
    # run it under bash; a stray word after it is ignored.
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    script = subprocess.run([bash, "-c", '"$0" --show-completion; exit $?', _frpd()], capture_output=True, text=True,
                            check=False)
    assert script.returncode == 0 and "_FRPD_COMPLETE=complete_bash" in script.stdout, (script.returncode,
                                                                                      script.stderr[-2000:])


def test_evaluate_reports_progress_for_every_plan(sample_paths):
    from frpd_cli.cli import _options as o
    from frpd_cli.evaluation import evaluate_plans

    plans = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                "--schema", str(sample_paths["schema"]), "--applicants",
                                str(sample_paths["applicants"]), "--format", "jsonl"])
    import json

    records = [json.loads(line) for line in plans.stdout.splitlines()]
    flags = o.SchemaFlags(schema=sample_paths["schema"])
    training, model, spec = o.load_training(sample_paths["data"], sample_paths["model"], flags)
    frame, ids = o.read_applicants(sample_paths["applicants"], training, spec.id_column)
    calls = []
    evaluate_plans(records, training, model, frame, ids, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i + 1, len(records)) for i in range(len(records))]


def test_status_line_only_on_a_terminal_and_not_when_quiet(monkeypatch):
    import io

    from frpd_cli.cli import _output

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr(_output, "stderr_console", lambda: Console(file=screen, force_terminal=True, width=80))
    with _output.busy("reading 'x.csv'") as status:
        status("scoring 12 rows")
    assert "reading 'x.csv'" in screen.getvalue() or "scoring 12 rows" in screen.getvalue()
    screen.seek(0)
    screen.truncate()
    with _output.busy("reading 'x.csv'", quiet=True) as status:
        status("scoring")
    assert screen.getvalue() == ""
    monkeypatch.setattr(_output, "stderr_console", lambda: Console(file=screen, force_terminal=False))
    with _output.busy("reading 'x.csv'"):
        pass
    assert screen.getvalue() == ""
