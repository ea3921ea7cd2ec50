"""``frpd evaluate``: the paper's metrics for plan files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..exceptions import NotImplementedYetError
from . import _options as o
from ._errors import handle_errors
from .app import app

__all__ = ["evaluate_command"]


@app.command("evaluate")
@handle_errors
def evaluate_command(
    data: o.DataArg,
    model: o.ModelOpt,
    plans: Annotated[Path, typer.Option("--plans", help="Plans from plan/interpolate (csv or jsonl).",
                                        show_default=False)],
) -> None:
    """Recompute the paper's metrics for plan files, per method (mean and std).

    Example: frpd evaluate sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --plans plans.jsonl
    """
    raise NotImplementedYetError("'frpd evaluate' is not implemented yet.")
