"""``frpd audit``: who bears the cost of recourse in a batch of plans, and which actions help the most people."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..exceptions import InputError, OptionError
from ..outputs import check_not_inputs, lock_outputs, output_path, resolve_output
from . import _options as o
from ._errors import echo_err, handle_errors
from ._output import busy, data_console, open_output, print_rows, write_records
from ._plan_files import PlansOpt, load_for_review, read_plans_with_applicants
from .app import app

__all__ = ["audit_command"]

_AUDIT = "Audit"


@app.command("audit")
@handle_errors
@o.SCHEMA_OPTIONS
def audit_command(
    data: o.DataArg,
    model: o.ModelOpt,
    plans: PlansOpt,
    applicants: Annotated[Optional[Path], typer.Option("--applicants", readable=False, help="The applicants file the plans were "
                                                       "made for; a --by column may be any of its columns, also one "
                                                       "the model does not use. Optional for jsonl/json plans "
                                                       "(then --by must be a feature); needed for csv plans.")] = None,
    by: Annotated[Optional[list[str]], typer.Option("--by", metavar="COL", help="Report by the groups of this "
                                                    "column (repeatable; each column on its own). Numeric columns are "
                                                    "cut into --bins quantile bins.", rich_help_panel=_AUDIT)] = None,
    bins: Annotated[int, typer.Option("--bins", min=1, help="Quantile bins of a numeric --by column.",
                                      rich_help_panel=_AUDIT)] = 4,
    actions: Annotated[bool, typer.Option("--actions", help="Write the actions table: every change the plans make, "
                                          "with the share of all denied applicants it alone gets accepted "
                                          "(coverage).", rich_help_panel=_AUDIT)] = False,
    pairs: Annotated[bool, typer.Option("--pairs", help="Write, per group of --by, the pair of actions (among the "
                                        "10 of highest coverage) that gets most of the group accepted.",
                                        rich_help_panel=_AUDIT)] = False,
    top: Annotated[int, typer.Option("--top", min=0, help="Actions to write, by decreasing coverage (0: all).",
                                     rich_help_panel=_AUDIT)] = 20,
    min_group: Annotated[int, typer.Option("--min-group", min=1, help="Groups with fewer denied applicants holding "
                                           "a valid recourse are reported as tiny, without cost interval; the none "
                                           "gap (share left without any recourse) has no interval when the group or "
                                           "the rest has fewer denied applicants.",
                                           rich_help_panel=_AUDIT)] = 20,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=1, help="Bootstrap resamples of the 95% intervals.",
                                           rich_help_panel=_AUDIT)] = 1000,
    k: Annotated[Optional[int], typer.Option("-k", "--k", min=1, help="Recourses in a full plan.",
                                             show_default="per method, the largest rank in the file")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", readable=False, help="Also draw each group's mean cost with "
                                                 "its interval and the top actions' coverage to this PNG (needs "
                                                 "frpd-cli[plot]).")] = None,
    fmt: o.FormatOpt = None,
    quiet: o.QuietOpt = False,
    output: o.OutputOpt = None,
    jobs: o.JobsOpt = 1,
    flags: o.SchemaFlags = o.SchemaFlags(),
    threshold: o.ThresholdOpt = 0.5,
    seed: o.SeedOpt = 0,
    trust_type: o.TrustTypeOpt = None,
    encoding: o.EncodingOpt = "utf-8",
) -> None:
    """Audit a batch of plans: cost of recourse by group, and the actions that help the most denied applicants.

    Plans are re-checked as evaluate checks them (re-encoded, re-predicted, constraints); costs are in the
    scale of --scale, the one the plans were made in. Tables: groups (with --by), actions (--actions), pairs
    (--pairs); a terminal shows each asked for; csv/json/jsonl hold one table, the last of them (a warning
    names the ones left out).

    Example: frpd audit sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --applicants sample_data/applicants.csv --plans plans.jsonl --by housing --actions
    """
    from ..audit import UNKNOWN_GROUP, audit_plans, group_labels, plot_audit

    if not by and not actions:
        raise OptionError("--by", "Nothing to audit: pass --by COL (a group report) and/or --actions.")
    if pairs and not by:
        raise OptionError("--pairs", "Pairs of actions are found per group: pass --by COL as well.")
    if seed < 0:
        raise OptionError("--seed", f"The seed must be an int >= 0. Got {seed} instead.")
    for path in (output, plot):
        if path is not None:
            resolve_output(path)
    check_not_inputs({"--output": output, "--plot": plot},
                     {"data": data, "model": model, "plans": plans, "applicants": applicants, "schema": flags.schema})
    with lock_outputs(files=(output, plot)):
        fmt, (training, loaded, spec) = load_for_review(fmt, output, plot, data, model, flags, threshold=threshold,
                                                        encoding=encoding, trusted_types=trust_type, quiet=quiet,
                                                        id_in_data=applicants is None)
        by = list(dict.fromkeys(by or ()))
        features = list(training.schema.feature_names)
        others = [c for c in by if c not in features]
        if others and applicants is None:
            from ..names import did_you_mean

            raise OptionError("--by", f"--by {others[0]!r} is not a feature, and without --applicants only the "
                              f"features are known.{did_you_mean(others[0], features)} (features: "
                              f"{', '.join(features)}). Pass a feature, or --applicants with the file that has the "
                              "column.")
        records, frame, ids, without = read_plans_with_applicants(plans, applicants, training, spec.id_column,
                                                                  encoding=encoding, used=by, keep_without_values=True)
        columns = _group_columns(applicants, others, len(frame), encoding) if others else {}
        groups = {}
        for c in by:
            if c in features:
                groups[c] = group_labels(frame[c].tolist(), bins=bins,
                                         numeric=training.schema.feature(c).is_numeric)
            else:
                groups[c] = group_labels(columns[c], bins=bins)
        with busy("auditing the plans", quiet=quiet):
            result = audit_plans(records, training, loaded, frame, ids, groups=groups, k=k,
                                 actions=actions or pairs, pairs=pairs, min_group=min_group, n_bootstrap=bootstrap,
                                 seed=seed, n_jobs=jobs, without_values=without)
        shown_actions = result.actions if top == 0 else \
            result.actions[result.actions["rank"] <= top]
        if plot is not None:
            from ..audit import Audit

            with output_path(plot, suffix=".png") as path:
                plot_audit(Audit(result.groups, shown_actions, result.pairs, result.summary), path)
        tables = []
        if by:
            tables.append(("groups", "Cost of each denied applicant's cheapest recourse, by group, and the share "
                           "left without any recourse (none gap: the group's share minus the rest's, in points; "
                           "* a gap's interval excludes 0)", result.groups))
        if actions:
            size = ("share of the training population a move crosses" if training.encoder.scale == "effort"
                    else "share of the feature's min-max range")
            tables.append(("actions", "Actions by coverage (share of the denied applicants one action alone gets "
                           f"accepted; ↑/↓ sizes: {size}; median change: in the feature's own units)",
                           shown_actions))
        if pairs:
            tables.append(("pairs", "Best pair of actions per group", result.pairs))
        with open_output(output) as stream:
            if fmt == "table":
                console = data_console(stream)
                for kind, title, table in tables:
                    rows, names = _terminal(kind, table)
                    print_rows(console, rows, names, title=title)
            else:
                _kind, _title, table = tables[-1]
                write_records(stream, fmt, _records(table), list(table.columns))
        if fmt != "table" and len(tables) > 1:
            left = " and ".join(kind for kind, _, _ in tables[:-1])
            echo_err(f"Warning: {fmt} holds one table: wrote the {tables[-1][0]} table; the {left} table(s) were "
                     "left out (run once per table, e.g. without --actions for the groups, or use --format table).")
        if not quiet:
            for r in result.summary.to_dict("records"):
                line = (f"Audited {r['plans']} plan(s) of method {r['method']}: {r['denied']} denied applicant(s), "
                        f"{r['already favorable']} plan(s) of applicants already favourable left out")
                if r["recourses not counted"]:
                    line += f", {r['recourses not counted']} recourse(s) not counted (not favourable or breaking a rule)"
                if r["actions"] is not None:
                    cover = ", ".join(f"{100 * r[f'top {n} coverage']:.1f}%" for n in (1, 3, 10))
                    line += f"; {r['actions']} action(s); the top 1, 3 and 10 cover {cover} of the denied"
                if by:
                    line += "; " + _largest_none_gap(result.groups, r["method"])
                echo_err(line + ".")
        unknown = int(result.summary["values unknown"].max()) if len(result.summary) else 0
        if unknown:
            echo_err(f"Note: {unknown} denied applicant(s) have a plan without recourse in '{plans}', which does not "
                     f"hold their values: they count as denied without a recourse (group '{UNKNOWN_GROUP}'), and no "
                     "action can be tried on them, so coverage counts them as not covered. Pass --applicants to "
                     "group them and try every action on them.")
        notes = result.groups["note"].fillna("") if len(result.groups) else None
        tiny = int(notes.str.startswith("tiny").sum()) if notes is not None else 0
        if tiny:
            denied = int(notes.str.contains("denied): no interval", regex=False).sum())
            also = (f"; {denied} of them (fewer than {min_group} denied applicants) also without interval of the "
                    "none gap") if denied else ""
            echo_err(f"Note: {tiny} tiny group(s) (fewer than {min_group} denied applicants with a recourse) "
                     f"are reported without cost interval{also}.")
        if plot is not None:
            echo_err(f"Wrote {plot}.")


def _group_columns(path: Path, columns: list[str], n_rows: int, encoding: str) -> dict:
    """The values of the --by columns that are not features, read from the applicants file as text."""
    if not columns:
        return {}
    import pandas as pd

    header = pd.read_csv(path, nrows=0, encoding=encoding).columns.tolist()
    missing = [c for c in columns if c not in header]
    if missing:
        from ..names import did_you_mean

        raise OptionError("--by", f"--by {missing[0]!r} is not a column of '{path}'.{did_you_mean(missing[0], header)} "
                          f"(columns: {', '.join(header)}). Pass a column of the applicants file.")
    table = pd.read_csv(path, usecols=columns, dtype=str, keep_default_na=False, encoding=encoding)
    if len(table) != n_rows:
        raise InputError(f"'{path}' has {len(table)} data rows but {n_rows} applicants were read from it; check "
                         "for blank or malformed lines.")
    return {c: table[c].tolist() for c in columns}


def _largest_none_gap(groups, method) -> str:
    """The summary's words on the largest none gap (in absolute value) whose interval excludes 0."""
    rows = [r for r in _records(groups) if r["method"] == method and r["none gap excludes 0"]]
    if not rows:
        return "no gap in the share left without any recourse whose 95% interval excludes 0"
    r = min(rows, key=lambda r: (-abs(r["none gap"]), -r["none gap"]))
    more = "more" if r["none gap"] > 0 else "less"
    return (f"largest gap in the share left without any recourse: {r['by']} = {r['group']}, {_pct(r['none'])} "
            f"against {_pct(r['none'] - r['none gap'])} for the rest ({_points(r['none gap'])} points, 95% "
            f"[{_points(r['none gap low'])}, {_points(r['none gap high'])}]: {more} often left with nothing)")


def _points(v) -> str:
    return f"{100 * v:+.1f}"


def _plain(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _records(table) -> list[dict]:
    return [{c: _plain(v) for c, v in r.items()} for r in table.to_dict("records")]


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def _num(v) -> str:
    return "–" if v is None else f"{v:.3f}"


def _change(v) -> str:
    """A numeric action's median raw change, signed (+2, -15.5); a category move has none."""
    if v is None:
        return "–"
    return f"{v:+.6g}"


def _interval(low, high) -> str:
    return "" if low is None or high is None else f" [{low:.3f}, {high:.3f}]"


def _terminal(kind: str, table) -> tuple[list[dict], list[str]]:
    """The rows and columns a terminal shows: fewer columns than the data, intervals in one cell."""
    rows = _records(table)
    several = len({r["method"] for r in rows}) > 1
    out = []
    for r in rows:
        if kind == "groups":
            flag = " *" if r["gap excludes 0"] else ""
            none_gap = "–" if r["none gap"] is None else _points(r["none gap"])
            if r["none gap low"] is not None:
                none_gap += f" [{_points(r['none gap low'])}, {_points(r['none gap high'])}]"
            none_gap += " *" if r["none gap excludes 0"] else ""
            row = {"by": r["by"], "group": r["group"], "denied": r["denied"], "full": _pct(r["full"]),
                   "partial": _pct(r["partial"]), "none": _pct(r["none"]), "none gap [95%]": none_gap,
                   "cost mean [95%]": _num(r["cost mean"]) + _interval(r["cost low"], r["cost high"]),
                   "median": _num(r["cost median"]), "changed": _num(r["changed"]),
                   "gap to the rest [95%]": (_num(r["gap"]) + _interval(r["gap low"], r["gap high"]) + flag),
                   "note": r["note"]}
        elif kind == "actions":
            row = {"rank": r["rank"], "action": r["action"], "median change": _change(r["median change"]),
                   "plans": r["plans"], "cost": _num(r["cost"]), "coverage": _pct(r["coverage"]),
                   "top-n coverage": _pct(r["cumulative coverage"])}
        else:
            row = {"by": r["by"], "group": r["group"], "denied": r["denied"], "first": r["first"] or "–",
                   "second": r["second"] or "–", "coverage": _pct(r["coverage"]),
                   "best single": r["best single"] or "–", "single coverage": _pct(r["single coverage"])}
        out.append({"method": r["method"], **row} if several else row)
    columns = list(out[0]) if out else list(table.columns)
    return out, columns
