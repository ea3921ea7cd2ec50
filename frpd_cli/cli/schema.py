"""``frpd schema``: what frpd infers from a data file, and the schema file that declares it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import _options as o
from ._errors import echo_err, handle_errors
from .app import app

__all__ = ["schema_command", "schema_rows"]

_TABLE_COLUMNS = ["column", "role", "kind", "values", "mutability", "missing", "note"]
_RECORD_COLUMNS = ["column", "role", "kind", "mutability", "min", "max", "levels", "missing", "note"]
_MAX_LEVELS_SHOWN = 8


def _values_cell(row: dict, decimals: dict) -> str:
    """Range (with the column's precision) or levels of one column, for the table."""
    from ._output import format_value

    if row["min"] is not None:
        d = decimals.get(row["column"])
        return f"{_bound(row['min'], d)} – {_bound(row['max'], d)}"
    levels = row["levels"]
    if not levels:
        return ""
    joint = " < " if row["kind"] == "ordinal" else ", "
    shown = [format_value(v) for v in levels[:_MAX_LEVELS_SHOWN]]
    more = f"{joint}… ({len(levels)} levels)" if len(levels) > _MAX_LEVELS_SHOWN else ""
    return joint.join(shown) + more


#: Columns with more decimals than this are measurements or float noise (0.1 + 0.2): their ranges are shown
#: without the zeros the column's precision pads them with; fewer (cents, tenths) are kept as the column writes.
_PADDED_DECIMALS = 4


def _bound(value, decimals) -> str:
    """A range's end at the column's precision: ``337.93 – 18000.00`` for a column of cents, but ``33 – 94`` and
    not ``33.0000000000 – 94.0000000000`` for a column whose one noisy value has ten decimals."""
    from ._output import format_value

    text = format_value(value, decimals)
    if decimals is not None and decimals > _PADDED_DECIMALS and "." in text and "e" not in text.lower():
        text = text.rstrip("0").rstrip(".")
    return text


def schema_rows(report, *, table: bool) -> tuple[list[dict], list[str]]:
    """The rows and columns ``frpd schema`` prints: a ``values`` cell in the table, ``min``/``max``/``levels``
    fields in csv/json/jsonl (``levels`` as a JSON array in csv)."""
    from ._output import format_value

    if table:
        rows = []
        for r in report.columns:
            shown = _values_cell(r, report.decimals)
            if r["role"] == "target":
                shown = f"{shown} (favourable: {format_value(report.schema.favorable)})"
            rows.append({**r, "values": shown, "missing": r["missing"] or "",
                         "note": "" if r["role"] == "target" else r["note"]})
        # columns that say nothing for this file are left out, so that the table fits narrow terminals
        columns = [c for c in _TABLE_COLUMNS if c not in ("missing", "note") or any(row[c] for row in rows)]
        return rows, columns
    return [dict(r) for r in report.columns], _RECORD_COLUMNS


@app.command("schema")
@handle_errors
@o.SCHEMA_OPTIONS.without("scale")
def schema_command(
    data: o.DataArg,
    model: Annotated[Optional[Path], typer.Option("--model", readable=False, help="Also show the favourable class and how many "
                                                  "training rows this model accepts.", show_default=False)] = None,
    write: Annotated[Optional[Path], typer.Option("--write", readable=False, help="Also write the schema as a TOML file that "
                                                  "--schema accepts (every kind, order and mutability spelled "
                                                  "out, ready to edit); - writes it to stdout instead of the "
                                                  "table.", show_default=False)] = None,
    fmt: o.FormatOpt = None,
    quiet: o.QuietOpt = False,
    flags: o.SchemaFlags = o.SchemaFlags(),
    threshold: o.ThresholdOpt = 0.5,
    trust_type: o.TrustTypeOpt = None,
    seed: o.SeedOpt = 0,
    encoding: o.EncodingOpt = "utf-8",
) -> None:
    """Show the schema frpd infers from a data file (roles, kinds, ranges, levels), and write it as TOML.

    One row per column of the file: its role (feature, target, id, excluded), kind (continuous, integer,
    categorical, ordinal), range or levels, mutability and missing values. Schema flags and --schema apply as in
    every other command, so this shows exactly what plan will use. --seed is accepted for uniformity (nothing
    here is random).

    Example: frpd schema sample_data/credit.csv --schema sample_data/schema.toml --write my_schema.toml
    """
    from ..dataset import read_training_frame
    from ..outputs import check_not_inputs, is_stdio, lock_outputs, resolve_output
    from ..schema import (
        inspect_schema,
        past_record_features,
        ranges_outside_training,
        schema_to_toml,
        unordered_scale_features,
    )
    from ._hints import (
        id_like_warning,
        label_leak_warning,
        location_warning,
        many_levels_warning,
        past_record_warning,
        range_outside_warning,
        sensitive_warning,
        unordered_scale_warning,
    )
    from ._output import data_console, open_output, print_rows, resolve_format, write_records

    if write is not None:
        resolve_output(write)
    check_not_inputs({"--write": write}, {"data": data, "model": model, "schema": flags.schema})
    # the output locks come first: a second writer is refused before any input is read
    with lock_outputs(files=(write,)):
        write_to_stdout = write is not None and is_stdio(write)
        fmt_ = resolve_format(fmt, None)
        # the built-in move bound is not written; the levels of missing information plan leaves out are shown
        # (and not written: plan leaves them out again)
        spec = replace(o.declared_only(flags).spec(), withhold_missing=True)
        frame = read_training_frame(data, encoding=encoding)
        report = inspect_schema(frame, spec, source=f"'{data}'")
        toml = schema_to_toml(report.schema, columns=list(frame.columns), source=f"'{Path(data).name}'")
        accepted = _model_summary(model, data, report, frame, threshold, trust_type) if model is not None else None

        warning = id_like_warning(report.id_like, f"'{data}'")
        if warning:
            echo_err(warning)
        unconstrained = unconstrained_warning(report.schema, report.columns)
        if unconstrained:
            echo_err(unconstrained)
        sensitive = sensitive_warning(report.sensitive, report.ages, f"'{data}'")
        if sensitive:
            echo_err(sensitive)
        many = [(name, n) for name, n in report.many_levels if name not in set(report.id_like)]
        for message in (many_levels_warning(many, f"'{data}'"),
                        location_warning(report.locations, f"'{data}'"),
                        unordered_scale_warning(unordered_scale_features(report.schema, vary=spec.vary), f"'{data}'"),
                        label_leak_warning(report.leaks, f"'{data}'"),
                        past_record_warning([n for n in past_record_features(report.schema, vary=spec.vary)
                                             if n not in {leak.feature for leak in report.leaks}], f"'{data}'"),
                        range_outside_warning(ranges_outside_training(report.schema, frame), f"'{data}'")):
            if message:
                echo_err(message)
        if report.n_incomplete:
            echo_err(f"Warning: {report.n_incomplete} of {report.n_rows} rows of '{data}' have missing feature values "
                     "(counted under 'missing'); the schema is inferred from the other rows, and plan refuses the "
                     "file until they are filled or dropped.")
        if write is not None:
            with open_output(write) as stream:
                stream.write(toml)
        if not write_to_stdout:
            with open_output(None) as stream:
                if fmt_ == "table":
                    console = data_console(stream)
                    rows, columns = schema_rows(report, table=True)
                    print_rows(console, rows, columns, title=f"Schema of '{data}' ({report.n_rows} rows)")
                    if accepted is not None:
                        console.print(accepted)
                else:
                    rows, columns = schema_rows(report, table=False)
                    if fmt_ == "csv":
                        import json

                        rows = [{**r, "levels": "" if r["levels"] is None else json.dumps(r["levels"],
                                                                                            ensure_ascii=False)}
                                for r in rows]
                    write_records(stream, fmt_, rows, columns)
        if not quiet:
            parts = [f"{len(report.schema.features)} feature(s) of {report.n_rows} row(s)"]
            if accepted is not None and fmt_ != "table":
                parts.append(accepted.removesuffix("."))     # one sentence: its full stop comes last
            if write is not None and not write_to_stdout:
                parts.append(f"schema written to '{write}' (use it with --schema)")
            echo_err("; ".join(parts) + ".")


def unconstrained_warning(schema, columns=()) -> str | None:
    """A warning when no feature is immutable, monotone or limited: every recourse may then move any feature
    either way, as far as the model rewards it (waiting decades, changing one's marital status).

    ``columns``: the report's column entries (``column``, ``min``, ``max``); the ``--range`` example is then a
    numeric feature spanning more than one unit, not a 0/1 flag (SBA's ``Selected``: ``+0:+12`` is no move of it).
    """
    if any(f.mutability != "free" or f.has_declared_range or f.max_move is not None for f in schema.features):
        return None
    spans = {c["column"]: (c.get("min"), c.get("max")) for c in columns}
    numeric = [f.name for f in schema.features if f.is_numeric]
    wide = [n for n in numeric if n in spans and None not in spans[n] and spans[n][1] - spans[n][0] > 1]
    example = (wide or numeric or [schema.features[0].name])[0]
    return ("Warning: every feature may change in either direction: no feature is immutable, monotone or limited, "
            "so a recourse may ask for any move the model rewards. Declare what applicants cannot change "
            "(--immutable COL, or immutable = [...] in the schema file), what only goes one way (--increasing / "
            f"--decreasing) and how far a feature may move (--range {example}=+0:+12, relative to the applicant; "
            "[range] in the schema file).")


def _model_summary(model_path: Path, data: Path, report, frame, threshold: float, trust_type) -> str:
    """One sentence: the favourable class, the model's classes, and how many training rows it accepts."""
    from ..dataset import build_training_set
    from ..model import load_model
    from ._hints import model_classes

    schema = report.schema
    incomplete = frame.loc[:, list(schema.feature_names)].isna().any(axis=1)
    complete = frame.loc[~incomplete].reset_index(drop=True)
    model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names,
                       threshold=threshold, trusted_types=trust_type or None)
    training = build_training_set(complete, schema, model, source=f"'{data}'")
    n, accepted, labelled = training.n_rows, int(training.favorable.sum()), int(training.labeled.sum())
    share = f" ({100 * accepted / n:.1f}%)" if n else ""
    from ._output import format_value

    classes = model_classes(model)
    listed = f" of the model's classes {', '.join(map(format_value, classes))}" if classes else ""
    return (f"Model '{model_path}': favourable class {format_value(model.favorable)}{listed}; it accepts {accepted} of {n} "
            f"training rows{share} at threshold {threshold:g} ({labelled} are labelled favourable).")
