"""Write a benchmark's section into docs/benchmarks.md, replacing its previous run."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

__all__ = ["write_section", "machine_line", "markdown_table", "publish"]

_DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
_HEADER = "# Benchmarks\n\nProduced by `make bench` (and `make paper-tables`). Each section is rewritten by its script.\n"


def machine_line() -> str:
    """One line describing the machine the numbers come from."""
    return f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, {platform.machine()}"


def write_section(name: str, markdown: str, *, path: Path = _DOC) -> None:
    """Replace (or append) the section delimited by markers named ``name``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{markdown.rstrip()}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else _HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end) + r"\n?", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def markdown_table(rows: list[dict], columns: list[str]) -> list[str]:
    """Lines of a markdown table; floats shown with one decimal."""
    def cell(value):
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *["| " + " | ".join(cell(r[c]) for c in columns) + " |" for r in rows]]


def publish(name: str, lines: list[str]) -> None:
    """Print a benchmark's markdown and write it as section ``name`` of docs/benchmarks.md."""
    md = "\n".join(lines)
    print(md)
    write_section(name, md)

