"""Output formats: table on a terminal, csv/json/jsonl for pipes and files, text (plans in plain words).

Data goes to stdout or to ``--output FILE`` through :mod:`frpd_cli.outputs` (a regular file is written
under a temporary name and renamed when complete; a device, FIFO or ``-`` is written directly); messages
and progress go to stderr.
"""

from __future__ import annotations

import errno
import json
import math
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .. import outputs
from .._csv import CsvWriter
from ..exceptions import InputError
from ..plans import (
    Plan,
    csv_columns,
    escape_csv_text,
    feature_header,
    plan_csv_rows,
    plan_record,
    python_value,
    renamed_features,
)

__all__ = ["FORMATS", "PLAN_FORMATS", "LAYOUTS", "busy", "resolve_format", "open_output", "PlanWriter", "stderr_console",
           "data_console", "render_rows_table", "write_records", "format_value", "ValueFormat", "plan_table", "plan_blocks",
           "render_plan", "print_plan", "encoder_decimals", "plan_steps", "render_rows_blocks", "print_rows",
           "reason_line", "Legend"]

FORMATS = ("table", "csv", "json", "jsonl")
#: Formats of the commands that print plans (``plan``, ``interpolate``): also ``text``, each plan in plain words.
PLAN_FORMATS = (*FORMATS, "text")
#: Table layouts: auto (wide when the changed features fit the width, else long), wide, long.
LAYOUTS = ("auto", "wide", "long")


def stderr_console() -> Console:
    return Console(stderr=True)


class _DataConsole(Console):
    """A console for data: a reader that goes away (``frpd plan ... | head``) raises BrokenPipeError, which the
    command's error handler turns into a quiet exit 0 as for every other format (rich's own handling exits 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def data_console(stream, **options) -> Console:
    """A rich console writing tables to ``stream`` (stdout or an --output file); ``options`` go to Console."""
    return _DataConsole(file=stream, **options)


@contextmanager
def busy(message: str, *, quiet: bool = False):
    """A transient status line on stderr while a long step runs, on a terminal only (nothing with ``quiet`` or
    when stderr is a file or pipe). Yields a function that replaces the message."""
    console = None if quiet else stderr_console()
    if console is None or not console.is_terminal:
        yield lambda text: None
        return
    with console.status(message) as status:
        yield lambda text: status.update(text)


def resolve_format(fmt: str | None, output: Path | None, formats: tuple = FORMATS) -> str:
    """The format to use: the one asked for (one of ``formats``), else table on a terminal, csv otherwise."""
    if fmt is None:
        if (output is None or outputs.is_stdio(output)) and sys.stdout.isatty():
            return "table"
        return "csv"
    fmt = fmt.lower()
    if fmt not in formats:
        raise InputError(f"The 'format' option must be one of {', '.join(formats)}. Got {fmt!r} instead.")
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
    whole list with ``indent=2``); ``table`` prints each plan's table as its chunk arrives; ``text`` writes
    each plan in plain words (:func:`frpd_cli.cli._text.plan_text`), using ``schema`` for the direction of
    each change and the features to keep.
    """

    def __init__(self, stream, fmt: str, feature_names, *, console: Console | None = None,
                 projected: bool = False, header_written: bool = False, layout: str = "auto",
                 decimals: dict | None = None, models=(), schema=None, explain: bool = False,
                 scale: str | None = None):
        if layout not in LAYOUTS:
            raise InputError(f"The 'layout' option must be one of {', '.join(LAYOUTS)}. Got {layout!r} instead.")
        self.layout = layout
        self.values = ValueFormat(decimals)
        self.stream = stream
        self.fmt = fmt
        self.feature_names = list(feature_names)
        self.console = console
        self._started = header_written
        self._table_console = None
        self.projected = projected
        self.models = tuple(models)     # other models to satisfy: probability_<name> columns
        self.schema = schema            # text: kinds, ordinal orders, mutability
        self.explain = explain          # table: whole reasons instead of their first clause
        self.scale = scale              # table: how cost is measured, for the legend
        self._seen = Legend()           # table: what the plans printed so far showed (for the legend)
        if fmt == "csv":
            self._csv = CsvWriter(stream)
            renamed = renamed_features(self.feature_names, models=self.models)
            if renamed:
                from ._errors import echo_err

                echo_err(_renamed_warning(renamed, self.models))

    def _header(self) -> list[str]:
        """The csv header: feature names come from the user's columns, so they are escaped as text cells are."""
        return [escape_csv_text(c) for c in csv_columns(self.feature_names, projected=self.projected,
                                                         models=self.models)]

    def write(self, plans: Iterable[Plan]) -> None:
        plans = list(plans)
        if self.fmt == "csv":
            if not self._started:
                self._csv.writerow(self._header())
            rows = []
            for plan in plans:
                rows.extend(plan_csv_rows(plan, self.feature_names, projected=self.projected, models=self.models))
            self._csv.writerows(rows)
        elif self.fmt == "jsonl":
            for plan in plans:
                self.stream.write(json.dumps(plan_record(plan), ensure_ascii=False) + "\n")
        elif self.fmt == "json":
            for plan in plans:
                text = json.dumps(plan_record(plan), ensure_ascii=False, indent=2).replace("\n", "\n  ")
                self.stream.write(("[\n  " if not self._started else ",\n  ") + text)
                self._started = True
        elif self.fmt == "text":
            from ._text import plan_text

            for plan in plans:
                self.stream.write(plan_text(plan, self.schema, self.values))
        else:
            if self._table_console is None:
                self._table_console = data_console(self.stream, force_terminal=None, soft_wrap=False)
            for plan in plans:
                print_plan(self._table_console, plan, self.layout, self.values, explain=self.explain)
                self._seen.add(plan, explain=self.explain)
        if self.fmt != "json":
            self._started = True
        self.stream.flush()

    def close(self) -> None:
        if self.fmt == "table":
            legend = self._seen.text(scale=self.scale)
            if legend is not None:
                self._table_console.print(legend)
        if self.fmt == "csv" and not self._started:
            self._csv.writerow(self._header())
        if self.fmt == "json":
            self.stream.write("\n]\n" if self._started else "[]\n")
        self.stream.flush()


def _renamed_warning(renamed, models) -> str:
    """The warning of a plan csv whose feature columns are headed ``feature:<name>`` (a name the csv uses)."""
    shown = ", ".join(f"'{n}'" for n in renamed)
    headers = ", ".join(f"'{feature_header(n, models=models)}'" for n in renamed)
    return (f"Warning: the feature(s) {shown} have the name of a column of the plan csv; their columns are headed "
            f"{headers} (frpd evaluate and frpd audit read them back as the features; --format jsonl keeps every "
            "name as it is).")


def format_value(value, decimals: int | None = None) -> str:
    """A raw value as a person writes it: integers as integers, floats with ``decimals`` decimals (the
    training column's precision) when known, never a numpy repr; missing values as an empty string.

    Examples
    --------
    >>> [format_value(v) for v in (2.0, 3, 0.1234567, "own", None)]
    ['2', '3', '0.123457', 'own', '']
    >>> format_value(1929.2, 2), format_value(35.0, 0)
    ('1929.20', '35')
    """
    value = python_value(value)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if decimals is not None:
        if decimals <= 0:
            return str(int(round(value)))
        return f"{float(value):.{decimals}f}"
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"


def _fmt(value) -> str:
    return format_value(value)


def encoder_decimals(encoder) -> dict:
    """Decimals per numeric feature as the encoder rounds decoded values (integers 0; continuous features the
    training column's decimals, when it has few enough)."""
    return {f.name: d for f, d in zip(encoder.schema.features, encoder.decimals) if d is not None}


#: A column whose values need more decimals than this (a ratio such as SBA's Portion, most of whose values are
#: 0.5 or 0.75 but a few 0.29677419) shows each value without its trailing zeros: 0.75, not 0.75000000.
FIXED_DECIMALS = 3


class ValueFormat:
    """Formats each feature's values with the precision of its training column.

    Up to :data:`FIXED_DECIMALS` decimals every value shows them all (1929.20); beyond, trailing zeros are
    dropped down to one decimal (0.75, 1.0, 0.8499997), so that a few long values of a column do not pad all
    the others with zeros.

    Parameters
    ----------
    decimals : dict of str to int, optional
        Decimals per numeric feature (:func:`encoder_decimals`); other features and
        unknown columns are written by :func:`format_value` without a fixed precision.

    Examples
    --------
    >>> ValueFormat({"amount": 2, "portion": 8})("amount", 1929.2), ValueFormat({"portion": 8})("portion", 0.75)
    ('1929.20', '0.75')
    >>> ValueFormat({"portion": 8})("portion", 1.0), ValueFormat({"portion": 8})("portion", 0.84999970)
    ('1.0', '0.8499997')
    """

    def __init__(self, decimals: dict | None = None):
        self.decimals = dict(decimals or {})

    def __call__(self, name: str, value) -> str:
        return _format_with(value, self.decimals.get(name))

    def pair(self, name: str, old, new) -> tuple[str, str]:
        """Old and new value of a change; more decimals when the column's own would show them equal."""
        a, b = self(name, old), self(name, new)
        d = self.decimals.get(name)
        if a == b and d is not None and _numbers_differ(old, new):
            for more in range(d + 1, 12):
                a, b = _format_with(old, more), _format_with(new, more)
                if a != b:
                    break
        return a, b


def _format_with(value, decimals: int | None) -> str:
    text = format_value(value, decimals)
    if decimals is not None and decimals > FIXED_DECIMALS and "." in text and "e" not in text:
        text = text.rstrip("0")
        if text.endswith("."):
            text += "0"
    return text


def _numbers_differ(a, b) -> bool:
    a, b = python_value(a), python_value(b)
    return (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
            and float(a) != float(b))


def _changed_features(plan: Plan) -> list[str]:
    order = list(plan.applicant_features)
    changed = []
    for r in plan.recourses:
        for name in r.changes:
            if name not in changed:
                changed.append(name)
    changed.sort(key=lambda n: order.index(n) if n in order else len(order))
    return changed


_THRESHOLD_NOTE = re.compile(r" \(favourable here means [^)]*\)$")


def reason_line(reason: str | None, *, explain: bool = False) -> str | None:
    """A plan's reason for the table: its first clause (the whole of it with ``explain``); csv, json and jsonl
    keep the whole reason."""
    if not reason:
        return None
    if explain:
        return reason
    first = _THRESHOLD_NOTE.sub("", reason.split("; ")[0])
    return first if first == reason else f"{first} … (--explain)"


def _shown_reason(plan: Plan, explain: bool) -> str | None:
    """The reason a table shows: an empty plan's (it is all there is to say), a partial plan's with --explain
    (the legend says what partial means)."""
    if plan.recourses and not explain:
        return None
    return reason_line(plan.reason, explain=explain)


class Legend:
    """What the plan tables of a run showed, to explain it once after them (cost, prob, chg, shift, ``*``,
    partial, shortened reasons)."""

    def __init__(self):
        self.recourses = self.shift = self.projected = self.partial = self.cut = False

    def add(self, plan: Plan, *, explain: bool = False) -> None:
        self.recourses |= bool(plan.recourses)
        self.shift |= any(r.largest_shift is not None for r in plan.recourses)
        self.projected |= any(r.projected for r in plan.recourses)
        self.partial |= bool(plan.partial)
        shown = _shown_reason(plan, explain)
        self.cut |= bool(shown) and shown != plan.reason

    def text(self, *, scale: str | None = None) -> Text | None:
        """The legend, or None when the tables showed nothing it explains."""
        lines = []
        if self.recourses:
            unit = {"minmax": "a feature's whole training range counts 1 and a change of category 1.41 (--scale "
                              "minmax)",
                    "effort": "a move counts the share of the training population it passes, a change of "
                              "category 1.41 (--scale effort)"}.get(scale, "in the units of --scale")
            lines.append(f"cost: how far the recourse moves the applicant, over all features: {unit}. prob: the "
                         "model's probability of accepting it. chg: how many features change."
                         + (" shift: the largest share of the population one change passes." if self.shift else ""))
        if self.projected:
            lines.append("* prototype projected onto the applicant's immutable values or moved within its --max-move "
                         "bounds (a favourable row moved and re-predicted; see --immutable-policy, --max-move).")
        if self.partial:
            lines.append("partial: fewer than K different recourses were found (why: --explain, or the reason "
                         "of the csv/jsonl records).")
        if self.cut:
            lines.append("…: reasons are cut to their first clause; --explain shows them whole.")
        return Text("\n".join(lines), style="dim") if lines else None


def _plan_title(plan: Plan) -> Text:
    status = {"ok": "green", "already-favorable": "cyan", "infeasible": "red"}.get(plan.status, "yellow")
    return Text.assemble(("Applicant ", "bold"), (str(plan.applicant), "bold"), "  ",
                         (plan.status, f"bold {status}"), (" (partial)" if plan.partial else "", "yellow"),
                         f"  method {plan.method}")


def plan_table(plan: Plan, values: ValueFormat | None = None, *, two_lines: bool = False,
               explain: bool = False) -> Table:
    """A rich table of one plan: the applicant's values and each recourse's changes (old -> new).

    Column headers and cells never wrap inside a word; ``two_lines`` puts a change's new value on a
    second line (``old`` / ``→ new``), which narrows the columns. The caption is the plan's reason as
    :func:`_shown_reason` says; what the columns and marks mean is told once, after all tables (:class:`Legend`).
    """
    values = values or ValueFormat()
    changed = _changed_features(plan)
    caption = _shown_reason(plan, explain)
    table = Table(title=_plan_title(plan), caption=caption, title_justify="left", caption_justify="left",
                  expand=False)
    table.add_column("#", justify="right", no_wrap=True)
    for name in changed:
        table.add_column(name, no_wrap=True)
    table.add_column("cost", justify="right", no_wrap=True)
    table.add_column("prob", justify="right", no_wrap=True)
    table.add_column("chg", justify="right", no_wrap=True)      # n_changes: how many features change
    shifts = any(r.largest_shift is not None for r in plan.recourses)
    if shifts:       # largest_shift: the largest share of the population one change passes
        table.add_column("shift", justify="right", no_wrap=True)
    if not plan.recourses:
        return table
    table.add_row("now", *[values(n, plan.applicant_features.get(n, "")) for n in changed], "", "", "",
                  *([""] if shifts else []), style="dim")
    for r in plan.recourses:
        cells = []
        for name in changed:
            if name in r.changes:
                old, new = values.pair(name, *r.changes[name])
                cells.append(Text.assemble((old, "dim"), "\n→ " if two_lines else " → ", (new, "bold yellow")))
            else:
                cells.append(Text("·", style="dim"))
        rank = f"{r.rank}*" if r.projected else str(r.rank)
        shift = [] if not shifts else ["" if r.largest_shift is None else f"{r.largest_shift:.2f}"]
        table.add_row(rank, *cells, f"{r.cost:.3f}", f"{r.probability:.2f}", str(r.n_changes), *shift)
    return table


def plan_blocks(plan: Plan, values: ValueFormat | None = None, *, explain: bool = False) -> Text:
    """The long layout of one plan: a block per recourse listing only its changes, one per line.

    ::

        Applicant A001  ok  method quad
          Recourse 1  cost 1.414  probability 0.68  2 changes
            age:            35 → 36
            credit_amount:  1929.22 → 2175.93
    """
    values = values or ValueFormat()
    text = _plan_title(plan)
    text.append("\n")
    reason = _shown_reason(plan, explain)
    if reason:
        text.append(f"  {reason}\n", style="dim")
    changed = _changed_features(plan)
    pad = min(max((len(n) for n in changed), default=0) + 1, 24)
    for r in plan.recourses:
        n_changes = len(r.changes)
        text.append(f"  Recourse {r.rank}{'*' if r.projected else ''}", style="bold")
        shift = "" if r.largest_shift is None else f"  largest shift {r.largest_shift:.2f}"
        text.append(f"  cost {r.cost:.3f}  probability {r.probability:.2f}  "
                    f"{n_changes} change{'s' if n_changes != 1 else ''}{shift}\n")
        for name in (n for n in changed if n in r.changes):
            old, new = values.pair(name, *r.changes[name])
            text.append(f"    {(name + ':').ljust(pad)} ")
            text.append(old, style="dim")
            text.append(" → ")
            text.append(new, style="bold yellow")
            text.append("\n")
    return text


def _natural_width(console: Console, renderable) -> int:
    """The width a renderable takes when nothing is wrapped (not capped at the console's width)."""
    return Measurement.get(console, console.options.update_width(10**6), renderable).maximum


def print_plan(console: Console, plan: Plan, layout: str = "auto", values: ValueFormat | None = None, *,
               explain: bool = False) -> None:
    """Print one plan in the table format (:func:`render_plan`); a forced wide table wider than the console
    is printed at its own width (the terminal wraps its lines, but no header or value is split)."""
    for renderable, width in render_plan(plan, console, layout, values, explain=explain):
        if width is None or width <= console.width:
            console.print(renderable)
        else:
            data_console(console.file, width=width, color_system=console.color_system,
                         force_terminal=console.is_terminal, no_color=console.no_color,
                         soft_wrap=False).print(renderable)


def render_plan(plan: Plan, console: Console, layout: str = "auto", values: ValueFormat | None = None, *,
                explain: bool = False) -> list:
    """What to print for one plan in the table format: the wide table when it fits the console's width
    (``layout="auto"``) or when asked for (``"wide"``, printed at its natural width), else the long
    layout (:func:`plan_blocks`); graph plans add their steps.

    Returns
    -------
    renderables : list of (renderable, width or None)
    """
    out = []
    if layout == "long" or not plan.recourses:
        out.append((plan_blocks(plan, values, explain=explain), None))
    else:
        chosen = None
        for two_lines in (False, True):
            table = plan_table(plan, values, two_lines=two_lines, explain=explain)
            if _natural_width(console, table) <= console.width:
                chosen = (table, None)
                break
        if chosen is None:
            if layout == "wide":
                table = plan_table(plan, values, explain=explain)
                chosen = (table, max(console.width, _natural_width(console, table)))
            else:
                chosen = (plan_blocks(plan, values, explain=explain), None)
        out.append(chosen)
    steps = plan_steps(plan, values)
    if steps is not None:
        out.append((steps, None))
    return out


def plan_steps(plan: Plan, values: ValueFormat | None = None) -> Text | None:
    """Graph plans: each recourse's moves as a numbered sequence of actions (None for linear plans).

    One line per action, wrapped by the console, so it reads at 80 columns::

        Recourse 2 (cost 1.606, 2 moves via rows 1055, 727):
          1. age 35 → 36, credit_amount 1929.22 → 2005.76, housing rent → own
          2. age 36 → 37, duration 24 → 12, credit_amount 2005.76 → 722.24
    """
    if not any(r.path is not None for r in plan.recourses):
        return None
    values = values or ValueFormat()
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
                old, new = values.pair(name, old, new)
                text.append(f"{name} ")
                text.append(old, style="dim")
                text.append(" → ")
                text.append(new, style="bold yellow")
            text.append("\n")
    return text


def render_rows_table(rows: list[dict], columns: list[str], *, title: str | None = None,
                      width: int | None = None) -> Table | None:
    """A plain rich table of dict rows.

    With ``width``, the columns are sized so that the table fits it without splitting any word of a
    header or a cell (a column is never narrower than its longest word; spare room goes to the columns
    that would otherwise wrap most); None when even that does not fit.
    """
    cells = [[_fmt(row.get(c, "")) for c in columns] for row in rows]
    table = Table(title=title, title_justify="left")
    widths = None if width is None else _fitted_widths(columns, cells, width)
    if width is not None and widths is False:
        return None
    for i, c in enumerate(columns):
        table.add_column(c, overflow="fold", width=None if not widths else widths[i])
    for row in cells:
        table.add_row(*row)
    return table


def _fitted_widths(columns: list[str], cells: list[list[str]], width: int):
    """Column widths that fit ``width`` without splitting words: None when the natural widths fit, False
    when the longest words alone do not."""
    from rich.cells import cell_len

    def longest_word(text: str) -> int:
        return max((cell_len(w) for w in text.split()), default=0)

    def longest_line(text: str) -> int:
        return max((cell_len(line) for line in text.splitlines()), default=0)

    texts = [[c, *(row[i] for row in cells)] for i, c in enumerate(columns)]
    low = [max(1, *(longest_word(t) for t in col)) for col in texts]
    high = [max(1, *(longest_line(t) for t in col)) for col in texts]
    room = width - (3 * len(columns) + 1)          # borders and one space of padding on each side
    if sum(high) <= room:
        return None
    if sum(low) > room:
        return False
    spare, wanted = room - sum(low), [h - lo for lo, h in zip(low, high)]
    total = sum(wanted)
    extra = [spare * w // total for w in wanted]
    for i in sorted(range(len(wanted)), key=lambda i: -(spare * wanted[i] % total))[:spare - sum(extra)]:
        extra[i] += 1
    return [lo + e for lo, e in zip(low, extra)]


def render_rows_blocks(rows: list[dict], columns: list[str], *, title: str | None = None) -> Text:
    """Dict rows one block each, one ``column: value`` line per column: for tables too wide to read."""
    text = Text()
    if title:
        text.append(f"{title}\n", style="bold")
    pad = min(max((len(c) for c in columns), default=0) + 1, 24)
    for i, row in enumerate(rows):
        if i:
            text.append("\n")
        for c in columns:
            value = _fmt(row.get(c, ""))
            text.append(f"{(c + ':').ljust(pad)} ".rstrip() if not value else f"{(c + ':').ljust(pad)} ",
                        style="dim")
            text.append(f"{value}\n")
    return text


def print_rows(console: Console, rows: list[dict], columns: list[str], *, title: str | None = None) -> None:
    """Print dict rows as a table when no header or cell needs to be split inside a word at the console's
    width, else as blocks (:func:`render_rows_blocks`)."""
    table = render_rows_table(rows, columns, title=title, width=console.width)
    console.print(table if table is not None else render_rows_blocks(rows, columns, title=title))


def write_records(stream, fmt: str, rows: list[dict], columns: list[str], *, title: str | None = None) -> None:
    """Write flat records (summary tables, prototype lists) in any format."""
    if fmt == "csv":
        writer = CsvWriter(stream)
        writer.writerow([escape_csv_text(c) for c in columns])     # names may come from the user's columns
        writer.writerows([[escape_csv_text(python_value(r.get(c, ""))) for c in columns] for r in rows])
    elif fmt == "jsonl":
        for r in rows:
            stream.write(json.dumps({c: python_value(r.get(c)) for c in columns}, ensure_ascii=False) + "\n")
    elif fmt == "json":
        json.dump([{c: python_value(r.get(c)) for c in columns} for r in rows], stream, ensure_ascii=False,
                  indent=2)
        stream.write("\n")
    else:
        print_rows(data_console(stream), rows, columns, title=title)
