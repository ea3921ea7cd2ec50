"""Output formats: table on a terminal, csv/json/jsonl for pipes and files.

Data goes to stdout or to ``--output FILE`` through :mod:`frpd_cli.outputs` (a regular file is written
under a temporary name and renamed when complete; a device, FIFO or ``-`` is written directly); messages
and progress go to stderr.
"""

from __future__ import annotations

import csv
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import outputs
from ..exceptions import InputError
from ..plans import Plan, csv_columns, escape_csv_text, plan_record, plan_rows, python_value

__all__ = ["FORMATS", "resolve_format", "open_output", "PlanWriter", "stderr_console", "render_rows_table",
           "write_records"]

FORMATS = ("table", "csv", "json", "jsonl")


def stderr_console() -> Console:
    return Console(stderr=True)


def resolve_format(fmt: str | None, output: Path | None) -> str:
    """The format to use: the one asked for, else table on a terminal, csv otherwise."""
    if fmt is None:
        if (output is None or outputs.is_stdio(output)) and sys.stdout.isatty():
            return "table"
        return "csv"
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise InputError(f"The 'format' option must be one of {', '.join(FORMATS)}. Got {fmt!r} instead.")
    return fmt


@contextmanager
def open_output(output: Path | None, *, binary: bool = False):
    """A stream for the data: stdout (``None`` or ``-``), a device or FIFO written directly, or a regular
    file replaced atomically when the block succeeds (see :mod:`frpd_cli.outputs`)."""
    with outputs.open_output(output, binary=binary) as stream:
        yield stream


class PlanWriter:
    """Writes plans chunk by chunk in the chosen format; memory is bounded by one chunk in every format.

    ``json`` is streamed as ``[``, the records separated by ``,`` and ``]`` (the same bytes as dumping the
    whole list with ``indent=2``); ``table`` prints each plan's table as its chunk arrives.
    """

    def __init__(self, stream, fmt: str, feature_names, *, console: Console | None = None,
                 projected: bool = False, header_written: bool = False):
        self.stream = stream
        self.fmt = fmt
        self.feature_names = list(feature_names)
        self.console = console
        self._started = header_written
        self._table_console = None
        if fmt == "csv":
            self._csv = csv.DictWriter(stream, fieldnames=csv_columns(self.feature_names, projected=projected),
                                       lineterminator="\n", extrasaction="ignore")

    def write(self, plans: Iterable[Plan]) -> None:
        plans = list(plans)
        if self.fmt == "csv":
            if not self._started:
                self._csv.writeheader()
            for plan in plans:
                self._csv.writerows(plan_rows(plan, self.feature_names))
        elif self.fmt == "jsonl":
            for plan in plans:
                self.stream.write(json.dumps(plan_record(plan), ensure_ascii=False) + "\n")
        elif self.fmt == "json":
            for plan in plans:
                text = json.dumps(plan_record(plan), ensure_ascii=False, indent=2).replace("\n", "\n  ")
                self.stream.write(("[\n  " if not self._started else ",\n  ") + text)
                self._started = True
        else:
            if self._table_console is None:
                self._table_console = Console(file=self.stream, force_terminal=None, soft_wrap=False)
            for plan in plans:
                self._table_console.print(plan_table(plan))
                steps = plan_steps(plan)
                if steps is not None:
                    self._table_console.print(steps)
        if self.fmt != "json":
            self._started = True
        self.stream.flush()

    def close(self) -> None:
        if self.fmt == "csv" and not self._started:
            self._csv.writeheader()
        if self.fmt == "json":
            self.stream.write("\n]\n" if self._started else "[]\n")
        self.stream.flush()


def _fmt(value) -> str:
    value = python_value(value)
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)


def plan_table(plan: Plan) -> Table:
    """A rich table of one plan: the applicant's values and each recourse's changes (old -> new)."""
    changed = []
    for r in plan.recourses:
        for name in r.changes:
            if name not in changed:
                changed.append(name)
    changed.sort(key=lambda n: list(plan.applicant_features).index(n) if n in plan.applicant_features else 0)
    status = {"ok": "green", "already-favorable": "cyan", "infeasible": "red"}.get(plan.status, "yellow")
    title = Text.assemble(("Applicant ", "bold"), (str(plan.applicant), "bold"), "  ",
                          (plan.status, f"bold {status}"), (" (partial)" if plan.partial else "", "yellow"),
                          f"  method {plan.method}")
    caption = plan.reason or None
    if any(r.projected for r in plan.recourses):
        note = "* prototype projected onto the applicant's immutable values"
        caption = f"{caption}\n{note}" if caption else note
    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left", expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    for name in changed:
        table.add_column(name, overflow="fold")
    table.add_column("cost", justify="right", no_wrap=True)
    table.add_column("prob", justify="right", no_wrap=True)
    table.add_column("chg", justify="right", no_wrap=True)      # n_changes: how many features change
    if not plan.recourses:
        return table
    table.add_row("now", *[_fmt(plan.applicant_features.get(n, "")) for n in changed], "", "", "", style="dim")
    for r in plan.recourses:
        cells = []
        for name in changed:
            if name in r.changes:
                old, new = r.changes[name]
                # short changes on one line, long ones over two, so narrow terminals never split a number
                joint = " → " if len(_fmt(old)) + len(_fmt(new)) <= 12 else "\n→ "
                cells.append(Text.assemble((_fmt(old), "dim"), joint, (_fmt(new), "bold yellow")))
            else:
                cells.append(Text("·", style="dim"))
        rank = f"{r.rank}*" if r.projected else str(r.rank)
        table.add_row(rank, *cells, f"{r.cost:.3f}", f"{r.probability:.2f}", str(r.n_changes))
    return table


def plan_steps(plan: Plan) -> Text | None:
    """Graph plans: each recourse's moves as a numbered sequence of actions (None for linear plans).

    One line per action, wrapped by the console, so it reads at 80 columns::

        Recourse 2 (cost 1.606, 2 moves via rows 1055, 727):
          1. age 35 → 36, credit_amount 1929.22 → 2005.76, housing rent → own
          2. age 36 → 37, duration 24 → 12, credit_amount 2005.76 → 722.24
    """
    if not any(r.path is not None for r in plan.recourses):
        return None
    text = Text()
    for r in plan.recourses:
        moves = [step for step in (r.steps or []) if step]
        via = ", ".join(str(p) for p in (r.path or []))
        text.append(f"Recourse {r.rank}", style="bold")
        text.append(f" (cost {r.cost:.3f}, {len(moves)} move{'s' if len(moves) != 1 else ''} via "
                    f"row{'s' if len(r.path or []) != 1 else ''} {via}):\n", style="dim")
        for i, step in enumerate(moves, start=1):
            text.append(f"  {i}. ")
            for j, (name, (old, new)) in enumerate(step.items()):
                if j:
                    text.append(", ")
                text.append(f"{name} ")
                text.append(_fmt(old), style="dim")
                text.append(" → ")
                text.append(_fmt(new), style="bold yellow")
            text.append("\n")
    return text


def render_rows_table(rows: list[dict], columns: list[str], *, title: str | None = None) -> Table:
    """A plain rich table of dict rows."""
    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*[_fmt(row.get(c, "")) for c in columns])
    return table


def write_records(stream, fmt: str, rows: list[dict], columns: list[str], *, title: str | None = None) -> None:
    """Write flat records (summary tables, prototype lists) in any format."""
    if fmt == "csv":
        writer = csv.DictWriter(stream, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows([{c: escape_csv_text(python_value(r.get(c, ""))) for c in columns} for r in rows])
    elif fmt == "jsonl":
        for r in rows:
            stream.write(json.dumps({c: python_value(r.get(c)) for c in columns}, ensure_ascii=False) + "\n")
    elif fmt == "json":
        json.dump([{c: python_value(r.get(c)) for c in columns} for r in rows], stream, ensure_ascii=False,
                  indent=2)
        stream.write("\n")
    else:
        Console(file=stream).print(render_rows_table(rows, columns, title=title))
