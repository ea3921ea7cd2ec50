"""``frpd select`` (selection artifact) and ``frpd interpolate`` (plan artifact)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import pandas as pd
import typer

from ..artifacts import read_artifact, write_artifact
from ..choice import method_label
from ..dataset import build_training_set, read_training_frame
from ..encoding import Encoder
from ..exceptions import InputError, StaleArtifactError
from ..judge import annotate_plans, primary_model
from ..model import load_model
from ..outputs import check_artifact_folder, check_not_inputs, lock_outputs, resolve_output, spool_input
from ..planning import (
    PlanSettings,
    SelectionOutcome,
    direct_when_empty,
    graph_plans,
    interpolate_plans,
    select_applicants,
)
from ..plans import FEATURE_PREFIX, SELECTION_COLUMNS, check_unique_header, feature_header, plan_record, renamed_features
from ..population import PopulationShares, fit_population, population_of, with_largest_shifts
from ..verification import check_eigen, check_selection, verify_plans
from . import _options as o
from ._checks import RecourseChecks
from ._errors import echo_err, handle_errors
from ._hints import already_favorable_hint, schema_shape_warnings
from ._output import PLAN_FORMATS, PlanWriter, encoder_decimals, open_output, resolve_format, stderr_console, write_records
from ._robust import ROBUST_OPTIONS, RobustModels, extra_inputs, judge_for, robust_params
from .app import app
from .graph import load_graph

__all__ = ["select_command", "interpolate_command"]

SELECTION_KIND = "selection"
PLAN_KIND = "plan"
#: ``params["csv_text"]`` of a selection whose csv files escape text cells for spreadsheets (selections written
#: before it have no such entry and hold the text as it is)
SAFE_CSV_TEXT = "spreadsheet-safe"


def _parse_thetas(text: str) -> list[float]:
    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"The 'theta' option must be a number or a comma list of numbers in [0, 1]. "
                         f"Got {text!r} instead.") from None
    if not values or any(not 0 <= t <= 1 for t in values):
        raise InputError(f"The 'theta' option must be a number or a comma list of numbers in [0, 1]. "
                         f"Got {text!r} instead.")
    return values


@app.command("select")
@handle_errors
@o.SCHEMA_OPTIONS
@ROBUST_OPTIONS
def select_command(
    data: o.DataArg,
    model: o.ModelOpt,
    applicants: Annotated[Path, typer.Option("--applicants", readable=False, help="CSV of applicants.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", readable=False, help="Folder to write the selection artifact to.",
                                      show_default=False)],
    method: o.MethodOpt = "quad",
    k: o.KOpt = 3,
    theta: o.ThetaListOpt = "0.9",
    bandwidth: o.BandwidthOpt = 1.0,
    candidates: o.CandidatesOpt = "predicted",
    save_eigen: Annotated[bool, typer.Option("--save-eigen", help="Also store each applicant's "
                                             "eigendecomposition (float32) in eigen.npz.",
                                             rich_help_panel=o.RUNS_PANEL)] = False,
    reuse_eigen: Annotated[Optional[Path], typer.Option("--reuse-eigen", readable=False, help="A selection folder made with "
                                                        "--save-eigen on the same inputs: applicants whose "
                                                        "candidates are unchanged skip the decomposition.",
                                                        rich_help_panel=o.RUNS_PANEL)] = None,
    immutable_policy: o.PolicyOpt = "auto",
    margin: o.MarginOpt = None,
    proximity: o.ProximityOpt = "distance",
    graph: o.GraphOpt = None,
    endpoint: o.EndpointOpt = "prototype",
    max_hops: o.MaxHopsOpt = None,
    max_cost: o.MaxCostOpt = None,
    fmt: o.FormatOpt = None,
    quiet: o.QuietOpt = False,
    flags: o.SchemaFlags = o.SchemaFlags(),
    threshold: o.ThresholdOpt = 0.5,
    trust_type: o.TrustTypeOpt = None,
    pool: o.PoolOpt = None,
    seed: o.SeedOpt = 0,
    encoding: o.EncodingOpt = "utf-8",
    others: RobustModels = RobustModels(),
    jobs: o.JobsOpt = 1,
) -> None:
    """Select K diverse prototypes per applicant and save them as a selection artifact.

    Example: frpd select sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --applicants sample_data/applicants.csv --out sel/ --theta 0.1,0.5,0.9

    Graph example: frpd select sample_data/credit.csv --model sample_data/model.pkl --schema
    sample_data/schema.toml --applicants sample_data/applicants.csv --graph graph/ --out graph-sel/

    With --graph DIR the prototypes are chosen among the favourable rows each applicant reaches on the graph
    (interpolate the artifact with --scheme graph --graph DIR); --method face needs it.
    """
    check_not_inputs({"--out": out}, {"data": data, "model": model, "applicants": applicants, "schema": flags.schema,
                                      "graph": graph, "--reuse-eigen": reuse_eigen, "pool": pool,
                                      **extra_inputs(others)})
    check_artifact_folder(out)
    # the output locks come first: a second writer is refused before any input is read
    with lock_outputs(folders=(out,)):
        spooled = spool_input(applicants)              # '-' or a pipe: read once, hashed and read from the copy
        if spooled is not None:
            applicants = spooled.path
        thetas = _parse_thetas(theta)
        o.check_proximity(proximity, graph=graph is not None)
        margin = o.resolve_margin(margin, threshold)
        o.check_margin_options(threshold, margin, None, graph=graph is not None)
        settings = PlanSettings(method=method, k=k, theta=thetas[0], bandwidth=bandwidth, candidates=candidates,
                                scheme="linear" if graph is None else "graph", endpoint=endpoint, max_hops=max_hops,
                                max_cost=max_cost, immutable_policy=immutable_policy, margin=margin,
                                proximity=proximity).validate()
        training, loaded, spec = o.load_training(data, model, flags, threshold=threshold, encoding=encoding,
                                                trusted_types=trust_type, pool=pool, quiet=quiet, robust=others)
        loaded_graph = None if graph is None else \
            load_graph(graph, training, data=data, model=model, scored_by=loaded)[0]
        names = list(training.schema.feature_names)
        raw, ids = o.read_applicants(applicants, training, spec.id_column, encoding=encoding)
        stored = None
        if reuse_eigen is not None:
            previous = read_artifact(reuse_eigen, kind=SELECTION_KIND,
                                     inputs={"data": data, "model": model, "applicants": applicants},
                                     command_hint="frpd select DATA --model MODEL --applicants CSV --out DIR "
                                                  "--save-eigen")
            if "eigen.npz" not in previous.payload_names:
                raise InputError(f"The selection '{reuse_eigen}' has no eigendecompositions; make it with --save-eigen.")
            stored = previous.load_npz("eigen.npz")
            check_eigen(stored, n_applicants=len(raw), n_rows=training.n_rows, artifact=reuse_eigen,
                        hint="frpd select DATA --model MODEL --applicants CSV --out DIR --save-eigen")

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        start = time.perf_counter()
        console = stderr_console()
        bar = Progress(TextColumn("selecting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                       console=console, transient=True, disable=quiet or not (len(raw) > 1 and console.is_terminal))
        with bar:
            task = bar.add_task("select", total=len(raw))
            table = select_applicants(training, loaded, raw, ids, settings, thetas=thetas, graph=loaded_graph,
                                      save_eigen=save_eigen, reuse_eigen=stored,
                                      progress=lambda done, total: bar.update(task, completed=done))
        seconds = time.perf_counter() - start
        prototypes = table.prototypes
        status_rows = table.status.to_dict("records")
        applicants_frame = raw.loc[:, names].rename(columns=_feature_headers(names))
        applicants_frame.insert(0, "applicant", ids)
        renamed = renamed_features(names, reserved=SELECTION_COLUMNS)
        if renamed:
            echo_err(f"Note: the feature(s) {', '.join(repr(n) for n in renamed)} have the name of a column of the "
                     f"selection's csv files; their columns in '{out}' are headed "
                     f"{', '.join(repr(FEATURE_PREFIX + n) for n in renamed)} (frpd interpolate reads them back).")
        payloads = {
            "prototypes.csv": _spreadsheet_safe(prototypes),
            "status.csv": _spreadsheet_safe(table.status),
            "applicants.csv": _spreadsheet_safe(applicants_frame),
            "encoder.json": training.encoder.to_dict(),
            "population.json": population_of(training).to_dict(),
            "screening.npz": table.screening,
        }
        if save_eigen:
            payloads["eigen.npz"] = table.eigen
        params = {**settings.to_dict(), "thetas": thetas, "threshold": threshold, "seed": seed,
                  "id_column": spec.id_column, "scale": training.encoder.scale, "csv_text": SAFE_CSV_TEXT,
                  **robust_params(others)}
        inputs = {"data": data, "model": model, "applicants": applicants, **extra_inputs(others)}
        if graph is not None:
            inputs["graph"] = graph
        write_artifact(out, kind=SELECTION_KIND, params=params, inputs=inputs, payloads=payloads,
                       protect=[] if reuse_eigen is None else [reuse_eigen])
        if stored is not None:
            echo_err(f"Reused {table.n_reused} stored eigendecomposition(s) of '{reuse_eigen}'.")
        counts = pd.Series([r["status"] for r in status_rows]).value_counts().to_dict()
        if not quiet:
            echo_err(f"Selected prototypes for {len(raw)} applicant(s) x {len(thetas)} theta(s) in {seconds:.2f} s: "
                     + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + f". Artifact written to '{out}'.")
        hint = already_favorable_hint(sum(r["status"] == "already-favorable" for r in status_rows) // len(thetas),
                                      len(raw), loaded)
        if hint:
            echo_err(hint)

        shown = _summary_rows(prototypes, names, training.frame, raw, ids, encoder_decimals(training.encoder))
        fmt_ = resolve_format(fmt, None)
        with open_output(None) as stream:
            write_records(stream, fmt_, shown, ["applicant", "theta", "status", "rank", "row", "changes", "objective"],
                          title=f"Prototypes ({method})")


def _feature_headers(names) -> dict:
    """``{feature: its column's header}`` in the selection's csv files (``feature:status`` for ``status``)."""
    return {n: feature_header(n, reserved=SELECTION_COLUMNS) for n in names}


def _spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A selection csv payload with its text cells and header escaped as frpd's csv output escapes them
    (:func:`frpd_cli.plans.escape_csv_text`: formula-like text gets a leading ``'``; numbers never change)."""
    from ..plans import escape_csv_text

    safe = frame.rename(columns=escape_csv_text)
    for column in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[column]):
            safe[column] = safe[column].map(escape_csv_text)
    return safe


def _selection_csv(artifact, name: str) -> pd.DataFrame:
    """A selection's csv payload as written (text as it is; ids as text), unescaped when the selection escaped it
    (``params["csv_text"]``; selections of earlier versions hold the text unescaped and are read as they are).
    A feature named as one of the files' own columns keeps its ``feature:<name>`` header (:func:`_feature_headers`);
    a file whose header repeats a name (an earlier version's, for such a feature) is refused."""
    from ..plans import unescape_csv_text

    safe = artifact.params.get("csv_text") == SAFE_CSV_TEXT
    header = artifact.csv_header(name)
    check_unique_header([unescape_csv_text(c) for c in header] if safe else header,
                        f"The file '{name}' of the selection '{artifact.path}'", error=StaleArtifactError,
                        remedy="Run frpd select again with this version, which heads such a feature's column "
                               f"'{FEATURE_PREFIX}<name>', then interpolate.")
    frame = artifact.load_csv(name, dtype={"applicant": str}, keep_default_na=False)
    if not safe:
        return frame
    frame.columns = [unescape_csv_text(c) for c in frame.columns]
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].map(unescape_csv_text)
    return frame


def _summary_rows(prototypes: pd.DataFrame, names, train: pd.DataFrame, raw: pd.DataFrame, ids,
                  decimals: dict | None = None) -> list[dict]:
    """One row per prototype; ``changes`` lists only the features whose values differ (numbers by value:
    ``2.0`` and ``2`` are the same), written with each training column's precision (``decimals``)."""
    from ..interpolation import same_value
    from ._output import ValueFormat

    values = ValueFormat(decimals)
    applicant_rows = dict(zip(ids, raw.loc[:, list(names)].to_dict("records")))
    headers = _feature_headers(names)
    rows = []
    for rec in prototypes.to_dict("records"):
        changes = ""
        if rec["status"] == "ok":
            x0 = applicant_rows[rec["applicant"]]
            changes = ", ".join(f"{n}: {' → '.join(values.pair(n, x0[n], rec[headers[n]]))}" for n in names
                                if not same_value(_number_or_text(x0[n]), _number_or_text(rec[headers[n]])))
        rows.append({"applicant": rec["applicant"], "theta": rec["theta"], "status": rec["status"],
                     "rank": rec["rank"], "row": rec["row"], "changes": changes, "objective": rec["objective"]})
    return rows


def _number_or_text(value):
    """A value as compared for changes: numbers (also numeric text such as ``"2.0"``) as floats."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


@app.command("interpolate")
@handle_errors
@o.SCHEMA_OPTIONS.only("schema", "target", "favorable", "immutable", "increasing", "decreasing", "id_column")
@ROBUST_OPTIONS
def interpolate_command(
    selection: Annotated[Path, typer.Option("--selection", readable=False, help="Selection artifact folder from 'frpd select'.",
                                            show_default=False)],
    model: o.ModelOpt,
    out: Annotated[Path, typer.Option("--out", readable=False, help="Folder to write the plan artifact to.", show_default=False)],
    scheme: o.SchemeOpt = "linear",
    graph: o.GraphOpt = None,
    endpoint: o.OptionalEndpointOpt = None,
    data: Annotated[Optional[Path], typer.Option("--data", readable=False, help="The training CSV the selection was made from "
                                                 "(its contents are checked): every prototype must be the training "
                                                 "row it names. Optional for the linear scheme.",
                                                 show_default="the path recorded in the selection")] = None,
    tol: o.TolOpt = 1e-3,
    threshold: o.OptionalThresholdOpt = None,
    margin: o.MarginOpt = None,
    sparsify: o.SparsifyOpt = True,
    direct_search: o.DirectSearchOpt = True,
    max_changes: o.MaxChangesOpt = None,
    trust_type: o.TrustTypeOpt = None,
    fmt: o.PlanFormatOpt = None,
    layout: o.LayoutOpt = "auto",
    explain: o.ExplainOpt = False,
    quiet: o.QuietOpt = False,
    output: o.OutputOpt = None,
    flags: o.SchemaFlags = o.SchemaFlags(),
    seed: o.SeedOpt = 0,
    provenance: o.ProvenanceOpt = None,
    others: RobustModels = RobustModels(),
    jobs: o.JobsOpt = 1,
) -> None:
    """Turn a selection artifact into recourse plans (a plan artifact, and the records on stdout).

    Example: frpd interpolate --selection sel/ --model sample_data/model.pkl --out plans/ --format jsonl

    Graph example: frpd interpolate --selection graph-sel/ --model sample_data/model.pkl --scheme graph --graph
    graph/ --out graph-plans/

    The records name each applicant as the selection does (select --id-column); with --id-column COL, by the
    COL value of the applicants file the selection was made from.
    """
    if output is not None:
        resolve_output(output)
    if (others.robust is not None or others.refits is not None) and data is None:
        from ..exceptions import OptionError

        raise OptionError("--robust", "--robust and --refits need --data: the refits are fitted on (and checked "
                          "against) the training file.")
    if others.resolved_support is not None and data is None:
        from ..exceptions import OptionError

        raise OptionError("--robust-support", "--robust-support needs --data: the labels it counts are the training "
                          "file's.")
    check_not_inputs({"--out": out, "--output": output}, {"selection": selection, "model": model, "graph": graph,
                                                          "data": data, "schema": flags.schema, **extra_inputs(others)})
    if provenance is not None:
        from .plan import check_provenance_output

        check_provenance_output(provenance, {"--output": output, "--out": out},
                                {"selection": selection, "model": model, "graph": graph, "data": data, "schema": flags.schema})
    check_artifact_folder(out)
    # the output locks come first: a second writer is refused before any input is read
    with lock_outputs(files=(output, provenance), folders=(out,)):
        if scheme not in ("linear", "graph"):
            raise InputError(f"The 'scheme' option must be linear or graph. Got {scheme!r} instead.")
        if scheme == "graph" and graph is None:
            raise InputError("The graph scheme needs --graph DIR: the graph the selection was made on (select --graph).")
        if scheme == "linear" and (graph is not None or endpoint is not None):
            raise InputError("The --graph and --endpoint options need --scheme graph.")
        hint = "frpd select DATA --model MODEL --applicants CSV --out DIR"
        artifact = read_artifact(selection, kind=SELECTION_KIND, inputs={"model": model}, command_hint=hint)
        params = artifact.params
        selected_at = float(params.get("margin") or 0.0)       # the margin the selection's pool was taken at
        if scheme == "graph" and margin is not None and margin != selected_at:
            from ..exceptions import OptionError

            raise OptionError("--margin", f"--margin {margin:g} with --scheme graph: the selection's graph prototypes "
                              f"were chosen at margin {selected_at:g}. Select again with frpd select --graph DIR "
                              f"--margin {margin:g}, or use frpd plan --graph DIR --margin {margin:g}.")
        selected_on = params.get("scheme", "linear")
        if selected_on != scheme:
            if selected_on == "graph":
                raise InputError(f"The selection '{selection}' was made on a graph's reachable candidates "
                                 "(select --graph); interpolate it with --scheme graph --graph DIR.")
            raise InputError(f"The selection '{selection}' was made without a graph; graph interpolation needs a "
                             "selection made on the graph's reachable candidates: select --graph DIR, then "
                             "interpolate --scheme graph --graph DIR.")
        encoder = Encoder.from_dict(artifact.load_json("encoder.json"))
        _check_flag_features(flags, encoder.schema, selection)
        declared = o.declared_only(flags).spec()
        _check_same_schema(encoder.schema, declared, selection)
        for message in schema_shape_warnings(encoder.schema, f"the selection '{selection}'", vary=declared.vary):
            echo_err(message)
        names = list(encoder.schema.feature_names)
        margin = selected_at if margin is None else float(margin)   # default: the margin the selection was made at
        o.check_margin_options(params["threshold"] if threshold is None else threshold, margin, max_changes,
                               graph=scheme == "graph")
        loaded = load_model(model, favorable=encoder.schema.favorable, feature_names=tuple(names),
                            threshold=params["threshold"] if threshold is None else threshold,
                            trusted_types=trust_type or None)
        if others.active:     # several models to satisfy: the judge stands for the model
            loaded = judge_for(loaded, others, encoder.schema, threshold=loaded.threshold, trusted_types=trust_type,
                               frame=None if data is None else read_training_frame(data), data=data, model_path=model,
                               scale=encoder.scale)
        training = loaded_graph = settings = train_frame = None
        if scheme == "linear" and data is not None:
            artifact = read_artifact(selection, kind=SELECTION_KIND, inputs={"model": model, "data": data},
                                     command_hint=hint)
            train_frame = read_training_frame(data).loc[:, names]
        if scheme == "graph":
            if data is None:
                data = Path(artifact.manifest["inputs"]["data"]["path"])
            artifact = read_artifact(selection, kind=SELECTION_KIND, inputs={"model": model, "graph": graph,
                                                                             "data": data}, command_hint=hint)
            training = build_training_set(read_training_frame(data), encoder.schema, loaded, source=f"'{data}'",
                                          scale=encoder.scale)
            loaded_graph, _ = load_graph(graph, training, data=data, model=model, scored_by=loaded)
            fields = {f: params[f] for f in PlanSettings.__dataclass_fields__ if f in params}
            if endpoint is not None:
                fields["endpoint"] = endpoint
            settings = PlanSettings(**fields).validate()
            train_frame = training.frame
        applicants, prototypes, status = (_selection_csv(artifact, name) for name in ("applicants.csv",
                                                                                     "prototypes.csv", "status.csv"))
        if declared.id_column is not None and declared.id_column != params.get("id_column"):
            renamed = _ids_by_column(artifact, selection, encoder, declared.id_column, applicants["applicant"].tolist())
            applicants, prototypes, status = (frame.assign(applicant=frame["applicant"].map(renamed))
                                              for frame in (applicants, prototypes, status))
        check_selection(encoder, applicants, prototypes, status, thetas=params["thetas"], k=int(params["k"]),
                        artifact=selection, hint=hint, training=train_frame)
        ids = applicants["applicant"].tolist()
        headers = _feature_headers(names)
        columns = [headers[n] for n in names]
        raw = _restore_types(applicants.loc[:, columns].set_axis(names, axis=1), encoder)
        X0 = encoder.encode(raw, source="the selection's applicants")
        prob0 = primary_model(loaded).favorable_probability(raw)
        thetas = params["thetas"]
        method = params["method"]
        fmt_ = resolve_format(fmt, output, PLAN_FORMATS)
        all_plans = []
        start = time.perf_counter()
        for theta in thetas:
            label = method_label(method, theta=theta, scheme=scheme,
                                 endpoint=settings.endpoint if settings is not None else "prototype",
                                 show_theta=len(thetas) > 1)
            outcomes, ends = [], []
            st = status[status["theta"].astype(float) == float(theta)].set_index("applicant")
            for a in ids:
                s = st.loc[a]
                if s["status"] == "already-favorable":
                    outcomes.append(None)
                    ends.append(None)
                    continue
                if s["status"] != "ok":
                    outcomes.append(SelectionOutcome(s["status"], s["reason"] or None, np.zeros(0, dtype=np.int64)))
                    ends.append(None)
                    continue
                rows = prototypes[(prototypes["applicant"] == a) & (prototypes["theta"].astype(float) == float(theta))]
                rows = rows.sort_values("rank", key=lambda c: c.astype(int))
                projected = None
                if "projected" in rows.columns:
                    projected = rows["projected"].astype(str).str.lower().eq("true").to_numpy()
                outcomes.append(SelectionOutcome("ok", s["reason"] or None, rows["row"].astype(np.int64).to_numpy(),
                                                 projected=projected))
                values = rows.loc[:, columns].set_axis(names, axis=1).reset_index(drop=True)
                ends.append(encoder.encode(_restore_types(values, encoder), source="the selection's prototypes"))
            if scheme == "graph":
                codes0 = encoder.constraint_codes(raw, source="the selection's applicants")
                all_plans.extend(graph_plans(training, loaded_graph, raw, X0, codes0, prob0, ids, outcomes,
                                             method=label, settings=settings, model=loaded))
                continue
            plans = interpolate_plans(encoder, loaded, raw, X0, prob0, ids, outcomes, ends, method=label,
                                      k=int(params["k"]), tol=tol, margin=margin, sparsify=sparsify,
                                      max_changes=max_changes)
            if direct_search:           # as plan does: an applicant the training rows leave without one
                plans = direct_when_empty(encoder, loaded, plans, k=int(params["k"]), margin=margin,
                                          max_changes=max_changes)
            all_plans.extend(plans)
        all_plans = annotate_plans(loaded, all_plans, names)     # each model's probability (with other models)
        all_plans = with_largest_shifts(all_plans, _population(artifact, training, train_frame, encoder))
        verify_plans(encoder, loaded, all_plans, margin=margin)
        seconds = time.perf_counter() - start
        jsonl = "".join(__import__("json").dumps(plan_record(p), ensure_ascii=False) + "\n" for p in all_plans)
        plan_inputs = {"selection": Path(selection) / "manifest.json", "model": model}
        plan_inputs.update(extra_inputs(others))
        plan_params = {"scheme": scheme, "tol": tol, "selection": params, "margin": margin, "sparsify": sparsify,
                       "max_changes": max_changes, **robust_params(others)}
        if scheme == "linear":
            plan_params["direct_search"] = direct_search
        if declared.id_column is not None:
            plan_params["id_column"] = declared.id_column
        if scheme == "graph":
            plan_inputs.update({"graph": graph, "data": data})
            plan_params["endpoint"] = settings.endpoint
        write_artifact(out, kind=PLAN_KIND, params=plan_params, inputs=plan_inputs, payloads={"plans.jsonl": jsonl})
        if not quiet:
            counts = {"ok": sum(p.status == "ok" for p in all_plans), "partial": sum(p.partial for p in all_plans),
                      "infeasible": sum(p.status == "infeasible" for p in all_plans)}
            echo_err(f"Interpolated {len(all_plans)} plan(s) in {seconds:.2f} s ({counts['ok']} ok, of them "
                     f"{counts['partial']} partial: fewer than K recourses; {counts['infeasible']} infeasible). "
                     f"Artifact written to '{out}'.")
        digest = None
        with open_output(output) as stream:
            if provenance is not None:
                import hashlib

                from ..provenance import HashingWriter

                digest = hashlib.sha256()
                stream = HashingWriter(stream, digest)
            writer = PlanWriter(stream, fmt_, names, layout=layout, decimals=encoder_decimals(encoder),
                                projected=scheme == "linear" and "projected" in prototypes.columns,
                                models=getattr(loaded, "names", ("model",))[1:], schema=encoder.schema,
                                explain=explain, scale=encoder.scale)
            writer.write(all_plans)
            writer.close()
        # what the training rows keep and the recourses break (when the training rows were read: --data, or the
        # graph scheme); an applicant's plans of several thetas count it once
        checks = RecourseChecks.of_frame(train_frame, encoder.schema, distinct_applicants=True)
        for p in all_plans if checks else ():
            checks.add_plan(p)
        for message in checks.warnings():
            echo_err(message)
        if provenance is not None:
            _write_interpolate_provenance(provenance, artifact, selection=selection, model=model, graph=graph, out=out,
                                          output=output, fmt=fmt_, digest=digest,
                                          settings={**plan_params, "threshold": primary_model(loaded).threshold})


def _write_interpolate_provenance(provenance, artifact, *, selection, model, graph, out, output, fmt, digest,
                                  settings) -> None:
    """The provenance of interpolate's plans: the model now, the data and applicants the selection recorded."""
    from ..artifacts import sha256_file
    from ..provenance import describe_file, plans_sha256, provenance_record
    from .plan import write_provenance

    recorded = artifact.manifest.get("inputs", {})
    inputs = {"model": describe_file(model, model),
              "selection": describe_file(selection, Path(selection) / "manifest.json")}
    for name in ("data", "applicants"):
        entry = recorded.get(name)
        if isinstance(entry, dict):
            inputs[name] = {"path": entry.get("path"), "sha256": entry.get("sha256")}
    if graph is not None:
        inputs["graph"] = describe_file(graph, Path(graph) / "manifest.json")
    artifact_plans = Path(out) / "plans.jsonl"
    outputs = [{"path": str(artifact_plans), "format": "jsonl", "sha256": sha256_file(artifact_plans)},
               {"path": "-" if output is None else str(output), "format": fmt,
                "sha256": plans_sha256(output, digest)}]
    write_provenance(provenance, provenance_record("interpolate", inputs=inputs, settings=settings, outputs=outputs))


def _ids_by_column(artifact, selection: Path, encoder: Encoder, id_column: str, ids: list) -> dict:
    """``{id in the selection: the applicant's id_column value}``, read from the applicants file the selection was
    made from (the one its manifest records, unchanged since), with ``select --id-column``'s checks: the column
    is there (else a :class:`~frpd_cli.schema.DeclarationError`, a usage error when the flag named it), its
    values unique.

    Raises
    ------
    InputError
        ``id_column`` is a feature of the selection, or the applicants file is no longer there.
    StaleArtifactError
        The applicants file changed since the selection was made.
    """
    from ..applicants import ApplicantFile

    rerun = (f"Run frpd select again with --id-column {id_column}, then interpolate.")
    if id_column in encoder.schema.feature_names:
        raise InputError(f"The selection '{selection}' was made with '{id_column}' as a feature, so it cannot name "
                         f"the applicants. {rerun}")
    recorded = artifact.params.get("id_column")
    named = "by row number" if recorded is None else f"by '{recorded}'"
    entry = artifact.manifest.get("inputs", {}).get("applicants")
    path = Path(entry["path"]) if isinstance(entry, dict) and entry.get("path") else None
    if path is None or not path.is_file():
        where = "" if path is None else f" ('{path}')"
        raise InputError(f"The selection '{selection}' names its applicants {named}; naming them by '{id_column}' "
                         f"needs the applicants file it was made from{where}, which is not there. {rerun}")
    read_artifact(selection, kind=SELECTION_KIND, inputs={"applicants": path},
                  command_hint=f"frpd select DATA --model MODEL --applicants CSV --out DIR --id-column {id_column}")
    source = ApplicantFile(path, encoder, id_column=id_column)
    scan = source.scan()
    values = [a for chunk in source.chunks(max(scan.n_rows, 1)) for a in chunk.ids]
    if len(values) != len(ids):
        raise InputError(f"The selection '{selection}' holds {len(ids)} applicant(s) and its applicants file '{path}' "
                         f"{len(values)}. {rerun}")
    return dict(zip(ids, values))


def _check_flag_features(flags, stored, selection: Path) -> None:
    """Usage error (exit 2): an --immutable, --increasing or --decreasing flag naming no feature of the selection."""
    from ..exceptions import OptionError
    from ..names import did_you_mean

    names = list(stored.feature_names)
    for mutability in ("immutable", "increasing", "decreasing"):
        for name in getattr(flags, mutability) or ():
            if name not in names:
                raise OptionError(f"--{mutability}", f"Column '{name}' (declared {mutability}) is not a feature of "
                                  f"the selection '{selection}'.{did_you_mean(name, names)} Its features are: "
                                  f"{', '.join(names)}.")


def _check_same_schema(stored, spec, selection: Path) -> None:
    """Schema flags given to interpolate must agree with the schema the selection was made with."""
    problems = []
    if spec.target is not None and spec.target != stored.target:
        problems.append(f"target {spec.target!r} (selection: {stored.target!r})")
    if spec.favorable is not None and str(spec.favorable) != str(stored.favorable):
        problems.append(f"favourable class {spec.favorable!r} (selection: {stored.favorable!r})")
    names = set(stored.feature_names)
    for mutability in ("immutable", "increasing", "decreasing"):
        for name in getattr(spec, mutability):
            if name not in names:
                problems.append(f"{mutability} {name!r} is not a feature of the selection")
            elif stored.feature(name).mutability != mutability:
                problems.append(f"{name!r} is {stored.feature(name).mutability} in the selection, not {mutability}")
    problems.extend(_limit_differences(stored, spec))
    if problems:
        raise InputError(f"The selection '{selection}' was made with another schema: {'; '.join(problems)}. "
                         "Run frpd select again with these options, then interpolate.")


def _limit_differences(stored, spec) -> list[str]:
    """Weights and ranges of a schema file given to interpolate that differ from the selection's."""
    from ..exceptions import SchemaError
    from ..schema import parse_range

    problems = []
    names = set(stored.feature_names)
    for name, weight in spec.weights.items():
        if name in names and stored.feature(name).weight != weight:
            problems.append(f"weight of {name!r} {weight:g} (selection: {stored.feature(name).weight:g})")
    for name, value in spec.ranges.items():
        if name not in names:
            continue
        f = stored.feature(name)
        try:
            wanted = parse_range(f, value)
        except SchemaError as exc:
            problems.append(str(exc))
            continue
        if (wanted.low, wanted.high, wanted.allowed, wanted.rel_low, wanted.rel_high, wanted.rel_percent) != (
                f.low, f.high, f.allowed, f.rel_low, f.rel_high, f.rel_percent):
            problems.append(f"range of {name!r} {value!r} differs from the selection's")
    for f in stored.features:
        share = spec.max_moves.get(f.name, spec.max_move)
        if share is None or not f.is_numeric or f.mutability == "immutable":
            continue
        had = math.inf if f.max_move is None else f.max_move_share
        if share != had:
            problems.append(f"max_move of {f.name!r} {'none' if math.isinf(share) else f'{share:g}'} (selection: "
                            f"{'none' if had is None or math.isinf(had) else f'{had:g}'})")
    return problems


def _population(artifact, training, train_frame, encoder):
    """The training population of a selection (its ``population.json``; selections made before it was stored:
    from the training data when it was read, else None and the records leave ``largest_shift`` empty)."""
    if "population.json" in artifact.payload_names:
        return PopulationShares.from_dict(artifact.load_json("population.json"))
    if training is not None:
        return population_of(training)
    if train_frame is not None:
        return fit_population(train_frame, encoder.schema)
    return None


def _restore_types(frame: pd.DataFrame, encoder: Encoder) -> pd.DataFrame:
    """Give columns read back from an artifact CSV the types of the training data."""
    frame = frame.copy()
    for f in encoder.schema.features:
        if f.is_categorical:
            levels = {str(level): level for level in f.levels}
            frame[f.name] = [levels.get(str(v), v) for v in frame[f.name]]
        else:
            frame[f.name] = pd.to_numeric(frame[f.name])
    return frame
