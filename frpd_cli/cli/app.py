"""The ``frpd`` command: argument parsing only; the work is one library call per command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import __version__
from . import _options as o

__all__ = ["app", "main"]

app = typer.Typer(
    name="frpd",
    help="Feasible recourse plans via diverse interpolation: for applicants a classifier turned down, K diverse, "
         "valid, actionable changes that would flip the decision.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"frpd {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    """Feasible recourse plans via diverse interpolation."""


def _flags(schema, target, favorable, immutable, increasing, decreasing, categorical, continuous, id_column):
    return o.SchemaFlags(schema=schema, target=target, favorable=favorable, immutable=immutable,
                         increasing=increasing, decreasing=decreasing, categorical=categorical,
                         continuous=continuous, id_column=id_column)


def _register_commands() -> None:
    # Each command lives in its own module; importing it registers it on ``app``.
    from . import evaluation, graph, plan, selection  # noqa: F401,E401


_register_commands()


def main() -> None:
    """Entry point of the ``frpd`` console script."""
    app()
