"""``frpd plan``: select and interpolate for every applicant in one step."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import pandas as pd
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..planning import PlanSettings, plan_applicants
from . import _options as o
from ._errors import echo_err, handle_errors
from .app import _flags, app
from ._output import PlanWriter, open_output, resolve_format, stderr_console

__all__ = ["plan_command", "run_plan", "summarize_plans"]


def summarize_plans(counts: dict, n: int, seconds: float) -> str:
    parts = [f"{counts.get('ok', 0)} planned"]
    if counts.get("already-favorable"):
        parts.append(f"{counts['already-favorable']} already favourable")
    if counts.get("infeasible"):
        parts.append(f"{counts['infeasible']} infeasible")
    rate = n / seconds if seconds > 0 else float("inf")
    return f"{n} applicant(s): {', '.join(parts)} in {seconds:.2f} s ({rate:.1f} applicants/s)."


def run_plan(training, model, applicants: pd.DataFrame, ids, settings: PlanSettings, *, fmt: str | None,
             output: Path | None, jobs: int, chunk_size: int = 64, graph=None) -> None:
    """Plan every applicant and stream the records to stdout or ``output``."""
    fmt = resolve_format(fmt, output)
    start = time.perf_counter()
    counts: dict = {}
    console = stderr_console()
    show_progress = len(applicants) > 1 and console.is_terminal
    progress = Progress(TextColumn("planning"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=console, transient=True, disable=not show_progress)
    with progress, open_output(output) as stream:
        task = progress.add_task("plan", total=len(applicants))
        writer = PlanWriter(stream, fmt, training.schema.feature_names)
        for plans in plan_applicants(training, model, applicants, ids, settings, graph=graph, n_jobs=jobs,
                                     chunk_size=chunk_size,
                                     progress=lambda done, total: progress.update(task, completed=done)):
            for p in plans:
                counts[p.status] = counts.get(p.status, 0) + 1
            writer.write(plans)
        writer.close()
    echo_err(summarize_plans(counts, len(applicants), time.perf_counter() - start))
    if counts.get("infeasible", 0) and counts.get("infeasible", 0) >= max(1, len(applicants) // 2):
        if graph is not None:
            echo_err("Hint: many applicants reach too few favourable rows on the graph; rebuild it with a larger "
                     "--neighbors or a --radius (see each plan's reason).")
        else:
            echo_err("Hint: many applicants have too few candidates; declare fewer immutable or monotone features.")


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
    tol: Annotated[float, typer.Option("--tol",
                                       help="Interpolation tolerance, as a fraction of each segment.",
                                       rich_help_panel="Selection")] = 1e-3,
    graph: o.GraphOpt = None,
    endpoint: o.EndpointOpt = "prototype",
    max_hops: o.MaxHopsOpt = None,
    max_cost: o.MaxCostOpt = None,
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

    With --graph DIR (from build-graph), every recourse is the shortest path on the actionability graph to its
    prototype, and the output adds each path and its steps; --method face takes the K cheapest paths.

    Example: frpd plan sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --applicants sample_data/applicants.csv
    """
    settings = PlanSettings(method=method, k=k, theta=theta, bandwidth=bandwidth, candidates=candidates,
                            tol=tol, scheme="linear" if graph is None else "graph", endpoint=endpoint,
                            max_hops=max_hops, max_cost=max_cost).validate()
    flags = _flags(schema, target, favorable, immutable, increasing, decreasing, categorical, continuous, id_column)
    training, loaded, spec = o.load_training(data, model, flags, threshold=threshold, encoding=encoding)
    loaded_graph = None
    if graph is not None:
        from .graph import load_graph

        loaded_graph, _ = load_graph(graph, training, data=data, model=model)
    frame, ids = o.read_applicants(applicants, training.schema.feature_names, spec.id_column, encoding=encoding)
    run_plan(training, loaded, frame, ids, settings, fmt=fmt, output=output, jobs=jobs, chunk_size=chunk_size,
             graph=loaded_graph)
