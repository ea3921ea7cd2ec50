"""Every command's --help as a newcomer reads it: at 80 columns, defaults shown, nothing eaten, examples that run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from frpd_cli.cli._help import EXAMPLE
from frpd_cli.cli.app import COMMANDS, _load_command, app

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
#: The order the examples run in: each may use what an earlier one wrote (graph/, sel/, plans.jsonl).
EXAMPLE_ORDER = ["schema", "build-pool", "build-graph", "build-refits", "select", "interpolate", "plan", "evaluate",
                 "audit"]
_BOX = re.compile(r"[│╭╮╰╯─]")


def _help(command: str, columns: int = 80) -> str:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": str(columns), "TERMINAL_WIDTH": None})
    assert result.exit_code == 0, result.output
    return result.stdout


def _flat(text: str) -> str:
    """The rendered help as one line of words: panel borders and line breaks gone."""
    return " ".join(_BOX.sub(" ", text).split())


def _examples(text: str) -> list[str]:
    return [m.group("command") for line in text.splitlines() if (m := EXAMPLE.match(line.strip()))]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_fits_80_columns_with_every_example_on_one_line(command):
    text = _help(command)
    examples = [line for line in text.splitlines() if EXAMPLE.match(line.strip())]
    assert examples, f"{command} --help shows no example"
    too_wide = [line for line in text.splitlines() if len(line.rstrip()) > 80 and line not in examples]
    assert too_wide == []
    # each example of the docstring is one line of the help, whole
    written = [" ".join(p.split()) for p in _load_command(command).help.split("\n\n")]
    assert [line.strip() for line in examples] == [p for p in written if EXAMPLE.match(p)]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_usage_names_the_arguments_and_flags_show_no_type(command):
    text = _help(command)
    usage = next(line for line in text.splitlines() if line.strip().startswith("Usage:"))
    assert "{" not in usage and "}" not in usage
    assert "<bool>" not in text and "BOOLEAN" not in text
    if command != "interpolate":                    # interpolate reads its data from the selection
        assert usage.strip().endswith("[OPTIONS] DATA")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_no_help_text_is_eaten_and_defaults_show(command):
    """Each option's help is shown whole (no ``[...]`` read as markup), followed by its default."""
    flat = _flat(_help(command))
    click_command = _load_command(command)
    ctx = click_command.make_context(command, ["--help"], resilient_parsing=True)
    for param in click_command.get_params(ctx):
        help_text = " ".join((getattr(param, "help", None) or "").split())
        assert help_text in flat, (command, param.name)
        show = getattr(param, "show_default", None)
        if isinstance(show, str):
            assert f"{help_text} [default: {show}]" in flat, (command, param.name)
    assert not re.search(r"\w \.( |$)", flat)          # what eaten markup leaves: "Target column ."


def test_plan_help_shows_the_defaults_the_markup_used_to_eat():
    flat = _flat(_help("plan"))
    for shown in ("Target column. [default: label]", "Favourable class of the target. [default: 1]",
                  "[default: table on a terminal, csv otherwise]", "[default: row number]", "[default: quad]",
                  "[default: 3]", "[default: sparsify]", "[default: 0.05, or half the room above a --threshold of "
                  "0.95 or more]"):
        assert shown in flat, shown


def test_descriptions_are_reflowed_to_the_terminal():
    # a wide terminal shows each paragraph of the description on one line: no line break kept from the docstring
    for command in COMMANDS:
        text = _help(command, columns=1000)
        prose = text.split("╭", 1)[0].splitlines()
        docstring = _load_command(command).help
        for paragraph in docstring.split("\n\n"):
            words = " ".join(paragraph.split())
            if not words or EXAMPLE.match(words):
                continue
            assert any(line.strip() == words for line in prose), (command, words[:60])


def test_plan_help_lists_everyday_options_first_and_rare_ones_in_their_panels():
    text = _help("plan")
    panels = re.findall(r"╭─ (.+?) ─", text)
    assert panels[:3] == ["Arguments", "Options", "Schema flags (instead of, or on top of, --schema)"]
    assert {"Recourse tuning", "Graph (sequential recourse)", "Robustness to model updates", "Input files",
            "Large runs"} <= set(panels[3:])

    def panel_of(option: str) -> str:
        at = text.index(f"│ {option}")
        return re.findall(r"╭─ (.+?) ─", text[:at])[-1]

    for option in ("--model", "--applicants", "--schema", "--id-column", "-k, --k", "--theta", "--format",
                   "-o, --output"):
        assert panel_of(option) == "Options", option
    assert panel_of("--backend") == panel_of("--chunk-size") == panel_of("--resume") == "Large runs"
    assert panel_of("--tol") == panel_of("--margin") == "Recourse tuning"
    assert panel_of("--endpoint") == panel_of("--max-hops") == "Graph (sequential recourse)"
    assert panel_of("--robust-level") == panel_of("--resample") == panel_of("--robust-support") == \
        "Robustness to model updates"
    assert text.index("Schema flags") < text.index("Recourse tuning") < text.index("Large runs")


def test_help_at_80_columns_from_the_terminal_width_setting():
    # typer's TERMINAL_WIDTH setting (no COLUMNS), in a real process
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "frpd_cli", "plan", "--help"], capture_output=True, text=True,
                          env={**env, "TERMINAL_WIDTH": "80"}, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines if not EXAMPLE.match(line.strip())) == 80
    assert sum(bool(EXAMPLE.match(line.strip())) for line in lines) == 2


def test_every_example_runs_as_printed(sample_paths, tmp_path, monkeypatch):
    """Each example of every command's --help, copied from the 80-column help, runs against the sample data."""
    assert sorted(EXAMPLE_ORDER) == sorted(COMMANDS), "give each new command its place in EXAMPLE_ORDER"
    data = tmp_path / "sample_data"
    data.mkdir()
    for name in ("credit.csv", "applicants.csv", "schema.toml"):
        shutil.copy(ROOT / "sample_data" / name, data / name)
    shutil.copy(sample_paths["model"], data / "model.pkl")
    monkeypatch.chdir(tmp_path)
    ran = []
    for command in EXAMPLE_ORDER:
        for example in _examples(_help(command)):
            args = shlex.split(example)
            assert args[:2] == ["frpd", command], example
            result = runner.invoke(app, args[1:])
            assert result.exit_code == 0, (example, result.stderr)
            ran.append(command)
    assert set(ran) == set(COMMANDS)
    assert (tmp_path / "plans.jsonl").stat().st_size > 0 and (tmp_path / "graph-plans" / "manifest.json").exists()
