"""Fast start: importing the command line and asking for its version or help loads nothing numerical.

These are invariants on ``sys.modules`` in a fresh interpreter, not timings (timings are in
``benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from frpd_cli import __version__
from frpd_cli.cli.app import COMMANDS, app

# Modules that only some commands need; none may be imported by `frpd --version`, `frpd --help` or by
# importing the app (registering the commands).
HEAVY = ("dask", "distributed", "highspy", "matplotlib", "networkx", "sklearn", "scipy", "scipy.stats",
         "scipy.sparse.csgraph", "numpy", "pandas", "joblib")

_PROBE = """
import json, sys
sys.argv = ["frpd", *json.loads(sys.argv[1])]
import frpd_cli.cli.app as cli
code = 0
if len(sys.argv) > 1:
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _modules_after(*args: str) -> tuple[int, set[str], str]:
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(args))], capture_output=True, text=True,
                          check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"]), done.stdout


@pytest.mark.parametrize("args", [(), ("--version",), ("--help",)], ids=["import", "version", "help"])
def test_start_up_imports_nothing_numerical(args):
    code, modules, stdout = _modules_after(*args)
    assert code in (0, None)
    loaded = sorted(m for m in HEAVY if m in modules)
    assert loaded == [], f"`frpd {' '.join(args)}` imported {loaded}"
    # and no command module: commands are imported when they run
    assert not any(m.startswith("frpd_cli.cli.") and m not in ("frpd_cli.cli.app",) for m in modules)
    if args == ("--version",):
        assert stdout.strip() == f"frpd {__version__}"
    if args == ("--help",):
        shown = " ".join(stdout.split())
        for name, (_, summary) in COMMANDS.items():
            assert f"{name} {summary}" in shown      # every command, with its whole summary


def test_running_a_command_imports_only_its_module():
    code, modules, _ = _modules_after("evaluate", "--help")
    assert code == 0
    assert "frpd_cli.cli.evaluation" in modules
    assert not {"frpd_cli.cli.plan", "frpd_cli.cli.selection", "frpd_cli.cli.graph"} & modules


def test_command_list_matches_each_command_docstring():
    # the summaries `frpd --help` shows without importing the commands are the commands' own first paragraphs
    for module in {m for m, _ in COMMANDS.values()}:
        __import__(f"frpd_cli.cli.{module}")
    group = typer.main.get_command(app)
    registered = {name for name in group.commands}
    assert registered == set(COMMANDS), "COMMANDS must list every registered command (and only those)"
    for name, (_, summary) in COMMANDS.items():
        first = " ".join(group.commands[name].help.split("\n\n")[0].split())
        assert first == summary, f"COMMANDS[{name!r}] differs from the command's docstring"


def test_deferred_command_runs_and_reports_usage_errors():
    runner = CliRunner()
    result = runner.invoke(app, ["select", "--help"])
    assert result.exit_code == 0 and "--applicants" in result.stdout
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code == 2 and result.stdout == ""


def test_option_choices_equal_the_library_constants():
    # _options spells the choice lists out (importing them would load the numerical modules at start-up)
    from frpd_cli.backends import BACKENDS
    from frpd_cli.choice import PLAN_METHODS, SCHEMES
    from frpd_cli.cli import _options as o
    from frpd_cli.cli._output import FORMATS
    from frpd_cli.dataset import CANDIDATE_POOLS
    from frpd_cli.evaluation import MANIFOLDS
    from frpd_cli.interpolation import ENDPOINTS
    from frpd_cli.projection import IMMUTABLE_POLICIES

    assert o.BACKENDS == BACKENDS and o.PLAN_METHODS == PLAN_METHODS and o.SCHEMES == SCHEMES
    assert o.CANDIDATE_POOLS == CANDIDATE_POOLS and o.MANIFOLDS == MANIFOLDS and o.ENDPOINTS == ENDPOINTS
    assert o.IMMUTABLE_POLICIES == IMMUTABLE_POLICIES and o.FORMATS == FORMATS
