"""``frpd build-graph``: the actionability graph artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..exceptions import NotImplementedYetError
from . import _options as o
from ._errors import handle_errors
from .app import app

__all__ = ["build_graph_command"]


@app.command("build-graph")
@handle_errors
def build_graph_command(
    data: o.DataArg,
    model: o.ModelOpt,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the graph artifact to.", show_default=False)],
) -> None:
    """Build the actionability graph over the training rows (for sequential recourse and FACE).

    Example: frpd build-graph sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --out graph/
    """
    raise NotImplementedYetError("'frpd build-graph' is not implemented yet.")
