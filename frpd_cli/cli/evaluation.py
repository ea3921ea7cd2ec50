"""``frpd evaluate``: the paper's metrics for plan files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.measure import Measurement
from rich.table import Table

from ..artifacts import read_artifact
from ..evaluation import MANIFOLDS, evaluate_plans, plan_counts, plot_tradeoff, summarize_by_method, summary_metrics
from ..exceptions import ArtifactError, InputError
from ..outputs import check_not_inputs, lock_outputs, output_path, resolve_output
from . import _options as o
from ._errors import echo_err, handle_errors
from ._output import data_console, open_output, render_rows_blocks, stderr_console, write_records
from ._plan_files import PlansOpt, load_for_review, read_plans_with_applicants
from .app import app

__all__ = ["evaluate_command", "load_graph_artifact", "summary_cells", "METRIC_WORDS", "metric_label"]

_GRAPH_HINT = "frpd build-graph DATA --model MODEL --out DIR"


def load_graph_artifact(folder: Path, data: Path):
    """Read the graph artifact built from ``data`` (kind ``graph``)."""
    from ..graph import graph_from_arrays

    artifact = read_artifact(folder, kind="graph", inputs={"data": data}, command_hint=_GRAPH_HINT)
    npz = [name for name in artifact.payload_names if name.endswith(".npz")]
    name = "graph.npz" if "graph.npz" in npz else (npz[0] if len(npz) == 1 else None)
    if name is None:
        raise ArtifactError(f"The graph artifact '{folder}' has no single .npz payload with the graph "
                            f"(payloads: {', '.join(artifact.payload_names) or 'none'}). Re-run: {_GRAPH_HINT}")
    return graph_from_arrays(artifact.load_npz(name))


def _cell(mean: float, std: float) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    return f"{mean:.2f} ± {std:.2f}"


def summary_cells(summary) -> tuple[list[dict], list[str]]:
    """Rows of "mean ± std" cells (the paper's table layout) and their column names."""
    names = summary_metrics(summary)
    columns = ["method", "applicants", *names]
    rows = []
    for _, r in summary.iterrows():
        row = {"method": r["method"], "applicants": f"{r['needing recourse']}/{r['applicants']}"}
        row.update({n: _cell(r[f"{n} mean"], r[f"{n} std"]) for n in names})
        rows.append(row)
    return rows, columns


#: evaluate's metrics in words for the table: (label, which way is better); the record's own name follows the
#: label in the table, and docs/metrics.md maps both to the paper's names.
METRIC_WORDS = {
    "cost": ("distance moved", "lower"),
    "validity": ("plans fully accepted", "higher"),
    "anti-diversity": ("recourses alike", "lower"),
    "dpp": ("recourses spread apart", "higher"),
    "manifold": ("distance to accepted rows", "lower"),
    "sparsity": ("features changed", "lower"),
    "violations": ("constraints broken", "lower"),
    "full plans": ("plans with K recourses", "higher"),
    "probability": ("probability reached", ""),
    "near threshold": ("barely accepted", "lower"),
    "largest shift": ("population passed", "lower"),
    "shift > 0.3": ("past 30% of people", "lower"),
    "dominated": ("beaten by another option", "lower"),
    "path cost": ("path length", "lower"),
    "path diversity": ("paths differ", "higher"),
    "path anti-diversity": ("paths alike", "lower"),
}


def metric_label(name: str) -> str:
    """A metric's row label: its meaning in words, then its name in the records (``distance moved (cost)``)."""
    words = METRIC_WORDS.get(name)
    return f"{words[0]} ({name})" if words else name


def _print_table(stream, summary) -> None:
    """One row per metric (in words, with which way is better), one column per method; blocks per method when
    the methods do not fit the width (COLUMNS, also when piped)."""
    rows, columns = summary_cells(summary)
    console = data_console(stream)
    title = "Plan metrics per method (mean ± std over the plans)"
    table = Table(title=title, title_justify="left")
    table.add_column("metric", no_wrap=True)
    table.add_column("better", no_wrap=True)
    for r in rows:
        table.add_column(str(r["method"]), no_wrap=True, justify="right")
    for c in columns[1:]:
        label = "applicants needing a recourse" if c == "applicants" else metric_label(c)
        table.add_row(label, METRIC_WORDS.get(c, ("", ""))[1], *[str(r[c]) for r in rows])
    if Measurement.get(console, console.options.update_width(10**6), table).maximum > console.width:
        labelled = [{("applicants needing a recourse" if c == "applicants" else metric_label(c)): r[c]
                     for c in columns} for r in rows]
        console.print(render_rows_blocks(labelled, list(labelled[0]) if labelled else [], title=title))
    else:
        console.print(table)


@app.command("evaluate")
@handle_errors
@o.SCHEMA_OPTIONS
def evaluate_command(
    data: o.DataArg,
    model: o.ModelOpt,
    plans: PlansOpt,
    applicants: Annotated[Optional[Path], typer.Option("--applicants", readable=False, help="The applicants file the plans were "
                                                       "made for (each plan's applicant is looked up by id). "
                                                       "Optional for jsonl/json plans, whose recourses carry the "
                                                       "applicant's values (a plan without recourse counts from "
                                                       "its status); needed for csv plans with recourses.")] = None,
    graph: Annotated[Optional[Path], typer.Option("--graph", readable=False, help="Actionability graph folder (build-graph): path "
                                                  "costs along its edge weights. Without it, graph plans' path "
                                                  "costs are sums of Euclidean step lengths.")] = None,
    k: Annotated[Optional[int], typer.Option("-k", "--k", min=1, help="Recourses in a full plan.",
                                             show_default="per method, the largest rank in the file")] = None,
    manifold: o.ManifoldOpt = "favorable",
    per_applicant: Annotated[bool, typer.Option("--per-applicant", help="Write one row per plan instead of the "
                                                "per-method summary.")] = False,
    plot: Annotated[Optional[Path], typer.Option("--plot", readable=False, help="Also draw cost vs anti-diversity and cost vs DPP, "
                                                 "one point per method, to this PNG (needs frpd-cli[plot]).",)] = None,
    fmt: o.FormatOpt = None,
    quiet: o.QuietOpt = False,
    output: o.OutputOpt = None,
    flags: o.SchemaFlags = o.SchemaFlags(),
    threshold: o.ThresholdOpt = 0.5,
    seed: o.SeedOpt = 0,
    trust_type: o.TrustTypeOpt = None,
    encoding: o.EncodingOpt = "utf-8",
    provenance: Annotated[Optional[Path], typer.Option("--provenance", readable=False, help="The provenance document written with "
                                                       "the plans (plan/interpolate --provenance): the plans must be "
                                                       "the file it describes, made with this --model, data and "
                                                       "--applicants (same sha256); refused otherwise.")] = None,
    also_model: Annotated[Optional[list[Path]], typer.Option("--also-model", readable=False, metavar="MODEL", help="Another model "
                                                             "to check the recourses with (repeatable), e.g. this "
                                                             "quarter's release: adds the share of recourses and "
                                                             "of plans it accepts, per method.")] = None,
) -> None:
    """Recompute the paper's metrics for plan files, per method (mean and std).

    Nothing in the plans file is trusted but the recourses' feature values and paths: every recourse is
    re-encoded and re-predicted with the model, and checked against the schema's constraints.

    Example: frpd evaluate sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --applicants sample_data/applicants.csv --plans plans.jsonl
    """
    for path in (output, plot):
        if path is not None:
            resolve_output(path)               # a folder or a missing folder is refused before the work
    check_not_inputs({"--output": output, "--plot": plot},
                     {"data": data, "model": model, "plans": plans, "applicants": applicants, "graph": graph,
                      "schema": flags.schema, "provenance": provenance,
                      **{f"also_model_{i}": p for i, p in enumerate(also_model or (), start=1)}})
    # the output locks come first: a second writer is refused before any input is read
    with lock_outputs(files=(output, plot)):
        if provenance is not None:
            from ..provenance import check_provenance, read_provenance

            check_provenance(read_provenance(provenance), source=provenance, plans=plans,
                             files={"model": model, "data": data, "applicants": applicants})
            checked = "the plans, model, data and applicants" if applicants is not None else "the plans, model and data"
            echo_err(f"Provenance '{provenance}': {checked} are the ones recorded.")
        if manifold not in MANIFOLDS:
            raise InputError(f"The 'manifold' option must be one of {', '.join(MANIFOLDS)}. Got {manifold!r} instead.")
        fmt, (training, loaded, spec) = load_for_review(fmt, output, plot, data, model, flags, threshold=threshold,
                                                        encoding=encoding, trusted_types=trust_type, quiet=quiet,
                                                        id_in_data=applicants is None)
        others = _load_also_models(also_model or (), training.schema, threshold=threshold, trusted_types=trust_type)
        records, frame, ids, without_values = read_plans_with_applicants(
            plans, applicants, training, spec.id_column, encoding=encoding, keep_without_values=True)
        loaded_graph = load_graph_artifact(graph, data) if graph is not None else None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        console = stderr_console()
        bar = Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                       console=console, transient=True, disable=quiet or not (len(records) > 1 and console.is_terminal))
        with bar:
            task = bar.add_task("evaluate", total=len(records))
            per = evaluate_plans(records, training, loaded, frame, ids, k=k, graph=loaded_graph, manifold=manifold,
                                 progress=lambda done, total: bar.update(task, completed=done), also_models=others,
                                 without_values=without_values)
        summary = summarize_by_method(per)

        if plot is not None:
            with output_path(plot, suffix=".png") as path:
                plot_tradeoff(summary, path)
        with open_output(output) as stream:
            if per_applicant:
                columns = [c for c in per.columns if c not in ("path cost", "path diversity", "path anti-diversity",
                                                               "seconds") or per[c].notna().any()]
                rows = [{c: (None if isinstance(v, float) and math.isnan(v) else v) for c, v in r.items()}
                        for r in per[columns].to_dict("records")]
                write_records(stream, fmt, rows, columns, title="Per-plan metrics")
            elif fmt == "table":
                _print_table(stream, summary)
            else:
                rows = [{c: (None if isinstance(v, float) and math.isnan(v) else v) for c, v in r.items()}
                        for r in summary.to_dict("records")]
                write_records(stream, fmt, rows, list(summary.columns))

        needing = per[per["status"] == "needs-recourse"]
        violations = int(needing["violations"].fillna(0).sum())
        invalid = needing["validity"] < 1
        # a plan below validity 1 is either short (fewer than K recourses, each accepted) or holds a recourse the
        # model turns down: the second is the failure a reviewer looks for, so the two are counted apart
        rejected = int((invalid & (needing["n_favorable"] < needing["n_recourses"])).sum())
        short = int(invalid.sum()) - rejected
        if not quiet:
            full, partial, none = plan_counts(needing).values()
            echo_err(f"Evaluated {len(per)} plan(s) of {summary.shape[0]} method(s); {len(needing)} need a recourse "
                     f"({full} full, {partial} partial, {none} without recourse), {len(per) - len(needing)} already "
                     "favourable.")
        if rejected:
            echo_err(f"Warning: {rejected} plan(s) hold a recourse the model does not predict favourable; "
                     "--per-applicant lists them.")
        if short:
            echo_err(f"Note: {short} plan(s) count as not valid only for holding fewer than K recourses (every "
                     "recourse they hold is predicted favourable); --per-applicant lists them.")
        if violations:
            echo_err(f"Warning: {violations} constraint violation(s) (immutable, monotone, range or vocabulary); "
                     "--per-applicant lists them.")
        for message in _broken_checks(training, records, frame, ids):
            echo_err(message)
        if plot is not None:
            echo_err(f"Wrote {plot}.")


def _broken_checks(training, records, applicants, ids) -> list[str]:
    """The warnings of recourses that break what the training rows keep (:mod:`frpd_cli.cli._checks`), as plan
    gives them: each record's recourses against its applicant's raw row (an applicant of several methods'
    plans counted once)."""
    from ._checks import RecourseChecks

    checks = RecourseChecks.of_training(training, distinct_applicants=True)
    if not checks:
        return []
    names = list(training.schema.feature_names)
    row_of: dict = {}
    for i, a in enumerate(ids):
        row_of.setdefault(str(a), i)
    rows = applicants.loc[:, names].to_dict("records")
    for record in records:
        recourses = record.get("recourses") or []
        i = row_of.get(str(record["applicant"]))
        if recourses and i is not None:
            checks.add(str(record["applicant"]), rows[i], [r.get("features") or {} for r in recourses])
    return checks.warnings()


def _load_also_models(paths, schema, *, threshold: float, trusted_types) -> dict:
    """The --also-model models by name: the file name, or ``also-<i>`` where two files share a name."""
    from ..model import load_model

    names = [Path(p).name for p in paths]
    out = {}
    for i, (p, name) in enumerate(zip(paths, names), start=1):
        key = name if names.count(name) == 1 else f"also-{i}"
        out[key] = load_model(p, favorable=schema.favorable, feature_names=schema.feature_names, threshold=threshold,
                              trusted_types=trusted_types or None)
    return out
