"""The ``frpd`` command: argument parsing only; the work is one library call per command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import __version__
from ..exceptions import NotImplementedYetError
from ..planning import PlanSettings
from . import _options as o
from ._errors import handle_errors

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


@app.command("plan")
@handle_errors
def plan_command(
    data: o.DataArg,
    model: o.ModelOpt,
    applicants: Annotated[Path, typer.Option("--applicants", help="CSV of applicants to plan for (feature "
                                             "columns; an id column with --id-column).", show_default=False)],
    method: o.MethodOpt = "quad",
    k: o.KOpt = 3,
    theta: o.ThetaOpt = 0.9,
    bandwidth: o.BandwidthOpt = 1.0,
    candidates: o.CandidatesOpt = "predicted",
    fmt: o.FormatOpt = None,
    output: o.OutputOpt = None,
    jobs: o.JobsOpt = 1,
    chunk_size: Annotated[int, typer.Option("--chunk-size", min=1, help="Applicants per batch (memory and "
                                            "model-call size).", rich_help_panel="Output")] = 64,
    tol: Annotated[float, typer.Option("--tol", min=0.0, max=1.0, min_open=True, max_open=True,
                                       help="Interpolation tolerance, as a fraction of each segment.",
                                       rich_help_panel="Selection")] = 1e-3,
    graph: Annotated[Optional[Path], typer.Option("--graph", help="Actionability graph folder from "
                                                  "build-graph (sequential recourse).")] = None,
    schema: o.SchemaOpt = None,
    target: o.TargetOpt = None,
    favorable: o.FavorableOpt = None,
    immutable: o.ImmutableOpt = None,
    increasing: o.IncreasingOpt = None,
    decreasing: o.DecreasingOpt = None,
    categorical: o.CategoricalOpt = None,
    continuous: o.ContinuousOpt = None,
    id_column: o.IdColumnOpt = None,
    threshold: o.ThresholdOpt = 0.5,
    seed: o.SeedOpt = 0,
    encoding: o.EncodingOpt = "utf-8",
) -> None:
    """Plan K diverse recourses for every applicant (select prototypes, then interpolate).

    Example: frpd plan sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --applicants sample_data/applicants.csv
    """
    from .plan import read_applicants, run_plan

    if graph is not None:
        raise NotImplementedYetError("Graph plans (--graph) are not implemented yet; omit --graph for linear plans.")
    settings = PlanSettings(method=method, k=k, theta=theta, bandwidth=bandwidth, candidates=candidates,
                            tol=tol).validate()
    flags = _flags(schema, target, favorable, immutable, increasing, decreasing, categorical, continuous, id_column)
    training, loaded, spec = o.load_training(data, model, flags, threshold=threshold, encoding=encoding)
    frame, ids = read_applicants(applicants, training.schema.feature_names, spec.id_column, encoding=encoding)
    run_plan(training, loaded, frame, ids, settings, fmt=fmt, output=output, jobs=jobs, chunk_size=chunk_size)


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


def _register_artifact_commands() -> None:
    from . import selection  # noqa: F401  (registers select and interpolate)


_register_artifact_commands()


def main() -> None:
    """Entry point of the ``frpd`` console script."""
    app()
