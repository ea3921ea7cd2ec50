"""Option groups: the schema and robustness options are declared once and reach every command unchanged."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Optional

import pytest
import typer
from typer.testing import CliRunner

from frpd_cli.cli._groups import OptionGroup
from frpd_cli.cli._options import SCHEMA_OPTIONS, SchemaFlags
from frpd_cli.cli._robust import ROBUST_OPTIONS, RobustModels
from frpd_cli.cli.app import COMMANDS, _load_command

runner = CliRunner()


def _options_of(command: str) -> dict:
    """option name -> click parameter, for every option of ``command``."""
    click_command = _load_command(command)
    return {opt: p for p in click_command.params for opt in p.opts}


def test_the_schema_group_is_the_schema_flags():
    # adding an option touches one place: every field of SchemaFlags has its option, and no option is left over
    # (default_max_move is a setting of each command, not an option)
    assert [name for name, _, _ in SCHEMA_OPTIONS.options] == [
        f.name for f in dataclasses.fields(SchemaFlags) if f.name not in ("id_column", "default_max_move")
    ] + ["id_column"]
    for name, _, default in SCHEMA_OPTIONS.options:
        assert SchemaFlags.__dataclass_fields__[name].default == default, name


def test_every_command_declares_the_schema_options_alike():
    """The same option (name, help, default, panel) in every command that takes it: one declaration."""
    seen: dict = {}
    for command in COMMANDS:
        for opt, param in _options_of(command).items():
            if opt not in ("--schema", "--target", "--favorable", "--immutable", "--increasing", "--decreasing",
                           "--categorical", "--continuous", "--vary", "--range", "--id-column", "--scale",
                           "--also-valid-for", "--robust-level", "--refits", "--robust-support"):
                continue
            shape = (param.name, param.help, param.default, getattr(param, "rich_help_panel", None))
            seen.setdefault(opt, {})[command] = shape
    for opt, shapes in seen.items():
        assert len(set(shapes.values())) == 1, (opt, shapes)
    assert set(seen["--schema"]) == set(COMMANDS)               # every command reads a schema file
    assert set(seen["--refits"]) == set(seen["--robust-support"]) == {"plan", "select", "interpolate"}


@dataclasses.dataclass(frozen=True)
class Pair:
    left: Optional[str] = None
    right: int = 2
    seed: int = 0


def test_a_group_hands_the_command_one_object_built_from_the_options():
    group = OptionGroup(Pair, (
        ("left", Annotated[Optional[str], typer.Option("--left", help="Left.")], None),
        ("right", Annotated[int, typer.Option("--right", min=1, help="Right.")], 2),
    ), build=lambda left, right, seed: Pair(left, right, seed), shared=("seed",))
    got = []
    app = typer.Typer()

    @app.command()
    @group
    def run(name: str, pair: Pair = Pair(), seed: Annotated[int, typer.Option("--seed")] = 0) -> None:
        got.append((name, pair, seed))

    assert runner.invoke(app, ["x", "--left", "a", "--right", "5", "--seed", "7"]).exit_code == 0
    assert runner.invoke(app, ["y"]).exit_code == 0
    assert got == [("x", Pair("a", 5, 7), 7), ("y", Pair(None, 2, 0), 0)]
    bad = runner.invoke(app, ["z", "--right", "0"])                    # the option's own bounds still apply
    assert bad.exit_code == 2 and "--right" in bad.output
    text = runner.invoke(app, ["--help"], env={"COLUMNS": "120"}).output
    assert "--left" in text and "--right" in text and "--pair" not in text


def test_a_group_refuses_a_command_without_its_parameter():
    def run(name: str) -> None:
        pass

    with pytest.raises(TypeError, match="SchemaFlags"):
        SCHEMA_OPTIONS(run)
    with pytest.raises(ValueError, match="no"):
        SCHEMA_OPTIONS.without("nonsense")


def test_plan_receives_the_robust_options_with_its_seed_and_jobs(sample_paths):
    from frpd_cli.cli.app import app

    # a resample the library does not know is refused by the group's object (a usage error, before any work)
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--applicants", str(sample_paths["applicants"]), "--robust", "2",
                                 "--resample", "nonsense"])
    assert result.exit_code == 2 and "--resample" in result.stderr
    assert ROBUST_OPTIONS.shared == ("seed", "jobs") and RobustModels().level == 1.0
