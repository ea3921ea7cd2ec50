"""Each command's ``--help``, written for a first reading at any terminal width.

- the usage line names the arguments in capitals (``frpd plan [OPTIONS] DATA``);
- the description is reflowed: a docstring's line breaks inside a paragraph are spaces, so paragraphs wrap at
  the terminal's width;
- options are listed by panel (everyday options first, then each ``rich_help_panel`` in the order the command
  first names one), each as its names and value (its choices, or the kind of value) on one line and its help
  below, with its default (``[default: ...]``) whenever it has one; no text is read as markup, so a ``[...]``
  in a help text is shown as written;
- flags show no value type;
- the paragraphs that start with ``Example:`` (or ``Graph example:``...) come last, each printed on one line
  however narrow the terminal (it wraps them for the eye only), so that a copied example runs as printed.

Only click's parameter attributes (``opts``, ``secondary_opts``, ``help``, ``default``, ``show_default``,
``required``, ``is_flag``, ``metavar``) and the parameter's value type are read, so the rendering is the same
with every supported typer. Imported only when a command's help is shown.
"""

from __future__ import annotations

import inspect
import os
import re

__all__ = ["split_help", "format_help", "EXAMPLE", "OPTIONS_PANEL", "ARGUMENTS_PANEL"]

#: A paragraph that is an example command: ``Example: frpd ...``, ``Graph example: frpd ...``.
EXAMPLE = re.compile(r"^(?:[A-Z][a-z-]* )?[Ee]xample: (?P<command>frpd .+)$")
OPTIONS_PANEL = "Options"
ARGUMENTS_PANEL = "Arguments"
_INDENT = 4


def split_help(text: str | None) -> tuple[list[str], list[str]]:
    """A command's help as its prose paragraphs and its example paragraphs, each reflowed to one line."""
    paragraphs = [" ".join(p.split()) for p in inspect.cleandoc(text or "").split("\n\n") if p.strip()]
    return ([p for p in paragraphs if not EXAMPLE.match(p)], [p for p in paragraphs if EXAMPLE.match(p)])


def format_help(command, ctx) -> None:
    """Print the help of ``command`` (a click command built by typer) to stdout."""
    from rich.console import Console, Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.text import Text

    width = os.environ.get("TERMINAL_WIDTH")          # typer's own setting for its help, kept
    console = Console(width=int(width) if width and width.isdigit() else None, highlight=False)
    prose, examples = split_help(command.help)
    console.print()
    console.print(Text(f" {command.get_usage(ctx)}", style="bold"))
    for i, paragraph in enumerate(prose):
        console.print()
        console.print(Padding(Text(paragraph, style="bold" if i == 0 else ""), (0, 1), expand=False))
    console.print()
    for name, params in _panels(command, ctx):
        entries = []
        for param in params:
            entries.append(_title(param, console.width - 4))
            entries.append(Padding(Text(_help_text(param)), (0, 0, 0, _INDENT)))
        console.print(Panel(Group(*entries), title=name, title_align="left", border_style="dim"))
    if examples:
        console.print()
        for example in examples:
            # soft_wrap: one line whatever the width (the terminal wraps it for the eye only)
            console.print(Text(f" {example}"), soft_wrap=True)
    console.print()


def _panels(command, ctx) -> list[tuple[str, list]]:
    """The command's visible parameters by panel: arguments, everyday options, then the other panels in the
    order the command first names one of their options."""
    panels: dict[str, list] = {ARGUMENTS_PANEL: [], OPTIONS_PANEL: []}
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            panels[ARGUMENTS_PANEL].append(param)
        else:
            panels.setdefault(getattr(param, "rich_help_panel", None) or OPTIONS_PANEL, []).append(param)
    return [(name, params) for name, params in panels.items() if params]


def _title(param, width: int):
    """``-o, --output PATH`` / ``--sparsify / --no-sparsify`` / ``DATA PATH``, styled, folded at ``|`` when
    a list of choices is wider than ``width``."""
    from rich.text import Text

    if param.param_type_name == "argument":
        names = (param.metavar or param.name).upper()
        value = _value(param, metavar=False)
    else:
        names = ", ".join(sorted(param.opts, key=lambda o: o.startswith("--")))      # -o, --output
        if param.secondary_opts:
            names += " / " + ", ".join(param.secondary_opts)
        value = "" if getattr(param, "is_flag", False) else _value(param)
    title = Text(names, style="bold cyan")
    if value:
        title.append(" ")
        title.append(_fold(value, width - len(names) - 1, len(names) + 1), style="yellow")
    return title


def _fold(value: str, room: int, indent: int) -> str:
    """Break a long ``a|b|c`` list after a ``|`` so that each line fits ``room`` (continued lines indented)."""
    if len(value) <= room or "|" not in value:
        return value
    lines, line = [], ""
    for part in value.split("|"):
        piece = part if not line else f"{line}|{part}"
        if line and len(piece) + 1 > room:        # + 1: the "|" that ends a folded line
            lines.append(line + "|")
            line = part
        else:
            line = piece
    lines.append(line)
    return ("\n" + " " * indent).join(lines)


def _value(param, *, metavar: bool = True) -> str:
    """The option's value: its metavar, its choices (``table|csv|json|jsonl``) or its kind (PATH, INTEGER...),
    with the bounds it checks."""
    if metavar and param.metavar:
        return param.metavar
    descriptor = getattr(param, "type_descriptor", None)
    choices = getattr(descriptor if descriptor is not None else getattr(param, "type", None), "choices", None)
    if choices:
        return "|".join(str(c) for c in choices)
    kind = _kind(param)
    low, high = _bounds(param)
    if low is not None and high is not None:
        return f"{kind} in [{low:g}, {high:g}]"
    if low is not None:
        return f"{kind} >= {low:g}"
    if high is not None:
        return f"{kind} <= {high:g}"
    return kind


_KINDS = {int: "INTEGER", float: "NUMBER", str: "TEXT", bool: "BOOLEAN"}


def _kind(param) -> str:
    """PATH, INTEGER, NUMBER, TEXT (typer 0.29 describes the value by a descriptor, earlier ones by a click type)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        if getattr(descriptor, "is_path", False):
            return "PATH"
        annotation = descriptor.annotation
        args = getattr(annotation, "__args__", None)
        if getattr(descriptor, "is_tuple", False) and args:
            return " ".join("PATH" if isinstance(a, type) and a.__name__.endswith("Path") else _KINDS.get(a, "TEXT")
                            for a in args)
        if getattr(descriptor, "is_list", False) and args:
            annotation = args[0]
        return _KINDS.get(annotation, "TEXT")
    name = str(getattr(param.type, "name", "text")).lower()
    for word, kind in (("path", "PATH"), ("integer", "INTEGER"), ("float", "NUMBER"), ("bool", "BOOLEAN")):
        if word in name:
            return kind
    return "TEXT"


def _bounds(param) -> tuple:
    """The (min, max) a number option checks, None where open."""
    info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
    source = info if info is not None else getattr(param, "type", None)
    return getattr(source, "min", None), getattr(source, "max", None)


def _help_text(param) -> str:
    """The help, reflowed, then ``[default: ...]`` and ``[required]`` where they apply."""
    parts = [" ".join((getattr(param, "help", None) or "").split())]
    default = _default(param)
    if default is not None:
        parts.append(f"[default: {default}]")
    if param.required:
        parts.append("[required]")
    return " ".join(p for p in parts if p)


def _default(param) -> str | None:
    """The default shown: the option's ``show_default`` text, else its default value (a flag pair: the name
    in force); None when it has none worth showing (no value, a required option, a lone flag)."""
    show = getattr(param, "show_default", None)
    if isinstance(show, str):
        return show
    if show is False or param.required or param.param_type_name == "argument":
        return None
    value = param.default
    if getattr(param, "is_flag", False):
        if not param.secondary_opts:
            return None
        return (param.opts if value else param.secondary_opts)[-1].lstrip("-")
    if value is None or callable(value) or value in ((), []):
        return None
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)
