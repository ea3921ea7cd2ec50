"""The documentation runs: every shell command shown in README.md and docs/*.md, and every captured output.

Fenced blocks are read from the Markdown files. A shell block (``console``, ``sh``, ``shell``, ``bash``) is run
with bash in a fresh temporary folder holding a copy of the sample data (``sample_data/`` and, for the generic
names the docs use, ``train.csv``, ``denied.csv``, ``one.csv``, ``schema.toml``, ``model.pkl`` ...) with this
checkout's frpd first on ``PATH``; it must exit 0 and print no ``Error:``. In a ``console`` block holding ``$ ``
prompts only the prompted lines run (the others are their output). An HTML comment on the line before a block
says more:

- ``<!-- docs-check: skip (reason) -->``: not run (a real dataset, a cluster, a long run); the reason is the
  test's skip reason;
- ``<!-- docs-check: file NAME -->``: the block is the contents of the file NAME, written into the folder
  before the shell blocks of the same page that follow it run;
- ``<!-- output-of: COMMAND -->``: the block is (a part of) what COMMAND prints at 80 columns; the test runs
  COMMAND and requires the block's lines, in order and adjacent, in its output (timing lines aside).

Blocks of other languages (``toml``, ``json``, ``python``, ``text`` ...) without a marker are illustrations.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"

SHELL = {"console", "sh", "shell", "bash"}
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*(docs-check:\s*skip|docs-check:\s*file|output-of:)\s*(.*?)\s*-->$")
#: Lines of an output that differ from run to run (elapsed times) are left out of the comparison.
TIMING = re.compile(r"\b\d+(\.\d+)?\s*(s|ms|seconds?)\b(?! of)")


@dataclass(frozen=True)
class Ran:
    """What a script did: the exit code of its last command, and everything the commands printed."""

    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Block:
    """A fenced block of a Markdown page: its page, first line number, info string, text and marker."""

    page: Path
    line: int
    info: str
    text: str
    marker: str | None = None
    argument: str = ""

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with the marker comment on the line before it, if any."""
    blocks, lines = [], page.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```+)\s*(\S*)", lines[i])
        if not fence:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence.group(1)):
            end += 1
        marker = MARKER.match(lines[i - 1].strip()) if i > 0 else None
        kind = re.sub(r"\s+", " ", marker.group(1)).replace(": ", ":") if marker else None
        blocks.append(Block(page, i + 1, fence.group(2), "\n".join(lines[i + 1:end]) + "\n", kind,
                            marker.group(2) if marker else ""))
        i = end + 1
    return blocks


ALL_BLOCKS = [block for page in PAGES for block in read_blocks(page)]
SHELL_BLOCKS = [b for b in ALL_BLOCKS if b.info in SHELL]
OUTPUT_BLOCKS = [b for b in ALL_BLOCKS if b.marker == "output-of:"]


def shell_script(block: Block) -> str:
    """The commands of a shell block: the prompted lines (with their continuations) when it has prompts."""
    lines = block.text.rstrip("\n").split("\n")
    if not any(line.startswith("$ ") for line in lines):
        return block.text
    script, continued = [], False
    for line in lines:
        if line.startswith("$ ") or continued:
            script.append(line[2:] if line.startswith("$ ") and not continued else line)
            continued = line.endswith("\\")
    return "\n".join(script) + "\n"


def shown_output(block: Block) -> str:
    """The output lines of a ``console`` block with prompts (every line that is neither a command nor its
    continuation); empty for blocks without prompts."""
    lines = block.text.rstrip("\n").split("\n")
    if not any(line.startswith("$ ") for line in lines):
        return ""
    shown, continued = [], False
    for line in lines:
        if line.startswith("$ ") or continued:
            continued = line.endswith("\\")
        else:
            shown.append(line)
    return "\n".join(shown) + "\n"


@pytest.fixture(scope="session")
def sandbox_files(sample_model, tmp_path_factory) -> Path:
    """A folder of the files the docs' commands name: the sample data under its own and generic names."""
    import pandas as pd

    folder = tmp_path_factory.mktemp("docs-files")
    (folder / "sample_data").mkdir()
    for name in ("credit.csv", "applicants.csv", "schema.toml"):
        shutil.copy(SAMPLE / name, folder / "sample_data" / name)
    shutil.copy(sample_model, folder / "sample_data" / "model.pkl")
    for alias, source in {"credit.csv": "credit.csv", "train.csv": "credit.csv", "applicants.csv":
                          "applicants.csv", "denied.csv": "applicants.csv", "schema.toml": "schema.toml",
                          "model.pkl": "model.pkl", "q4.pkl": "model.pkl", "challenger.pkl": "model.pkl"}.items():
        shutil.copy(folder / "sample_data" / source, folder / alias)
    pd.read_csv(SAMPLE / "applicants.csv").head(1).to_csv(folder / "one.csv", index=False)
    try:
        import joblib
        import skops.io
    except ImportError:  # the 'safe' extra is absent: blocks naming a .skops file fail with a clear error
        pass
    else:
        skops.io.dump(joblib.load(sample_model), folder / "challenger.skops")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    frpd = bin_dir / "frpd"
    frpd.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m frpd_cli "$@"\n')
    frpd.chmod(0o755)
    done = _run("frpd plan train.csv --model model.pkl --schema schema.toml --applicants denied.csv "
                "--format jsonl --output q3.jsonl", folder, folder)
    assert done.returncode == 0, done.stderr
    return folder


def _env(files: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FRPD_DEBUG", "NO_COLOR")}
    env.update(COLUMNS="80", LINES="50", PATH=f"{files / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p))
    return env


def _commands(script: str) -> list[str]:
    """The commands of a script, one per line once continuation lines are joined."""
    return [line for line in script.replace("\\\n", " ").split("\n") if line.strip()]


def _run(script: str, cwd: Path, files: Path) -> Ran:
    """Run a script command by command, stopping at the first that fails: a plain ``frpd ...`` command (with
    ``> FILE`` or ``>> FILE`` at most) in this process (no interpreter start-up per command), anything else
    with bash and this checkout's frpd first on PATH."""
    from typer.testing import CliRunner

    from frpd_cli.cli.app import app

    done = Ran(0, "", "")
    for command in _commands(script.replace(".venv/bin/frpd", "frpd")):
        words = shlex.split(command, comments=True)
        if not words:
            continue
        redirect = words[-2] if len(words) > 2 and words[-2] in (">", ">>") else None
        args = words[1:-2] if redirect else words[1:]
        if words[0] != "frpd" or any(w in ("|", "&", "&&", "<", ">", ">>", ";") for w in args):
            ran = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=cwd, env=_env(files),
                                 capture_output=True, text=True, timeout=600)
            code, out, err = ran.returncode, ran.stdout, ran.stderr
        else:
            here = os.getcwd()
            os.chdir(cwd)
            try:
                result = CliRunner().invoke(app, args, env={"COLUMNS": "80", "LINES": "50", "FRPD_DEBUG": None,
                                                            "NO_COLOR": None})
            finally:
                os.chdir(here)
            code, out, err = result.exit_code, result.stdout, result.stderr
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                err += "".join(traceback.format_exception(result.exception))
            if redirect:
                with open(cwd / words[-1], "a" if redirect == ">>" else "w", encoding="utf-8") as stream:
                    stream.write(out)
                out = ""
        done = Ran(code, done.stdout + out, done.stderr + err)
        if code != 0:
            break
    return done


def _sandbox(files: Path, where: Path, block: Block) -> Path:
    """A fresh copy of the sample files, with the files that earlier blocks of the page declare."""
    shutil.copytree(files, where, ignore=shutil.ignore_patterns("bin"))
    for earlier in read_blocks(block.page):
        if earlier.line >= block.line:
            break
        if earlier.marker == "docs-check:file":
            (where / earlier.argument).write_text(earlier.text, encoding="utf-8")
    return where


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.id)
def test_shell_block_runs_on_the_sample_data(block, sandbox_files, tmp_path):
    if block.marker == "docs-check:skip":
        pytest.skip(block.argument.strip("() ") or "marked not to run")
    where = _sandbox(sandbox_files, tmp_path / "run", block)
    done = _run(shell_script(block), where, sandbox_files)
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stderr[-3000:]}"
    assert "Error:" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    shown = _comparable(shown_output(block))
    if shown:
        assert _contains(_comparable(done.stdout), shown), (
            f"{block.id}: the output shown is not what the commands print now; they print:\n{done.stdout}")


def _contains(printed: list[str], shown: list[str]) -> bool:
    """Whether ``shown`` is a run of adjacent lines of ``printed``."""
    return any(printed[i:i + len(shown)] == shown for i in range(len(printed) - len(shown) + 1))


def _comparable(text: str) -> list[str]:
    return [line.rstrip() for line in text.split("\n") if line.strip() and not TIMING.search(line)]


@pytest.mark.parametrize("block", OUTPUT_BLOCKS, ids=lambda b: b.id)
def test_captured_output_matches_a_real_run(block, sandbox_files, tmp_path):
    where = _sandbox(sandbox_files, tmp_path / "run", block)
    done = _run(block.argument, where, sandbox_files)
    assert done.returncode == 0, done.stderr[-3000:]
    shown, printed = _comparable(block.text), _comparable(done.stdout + "\n" + done.stderr)
    assert shown, f"{block.id}: empty output block"
    assert _contains(printed, shown), (
        f"{block.id}: the output shown is not what `{block.argument}` prints now; at 80 columns it prints:\n"
        + "\n".join(printed))


def test_every_shell_block_is_run_or_says_why_not():
    assert len(SHELL_BLOCKS) >= 8
    for block in SHELL_BLOCKS:
        assert block.marker != "docs-check:skip" or block.argument.strip("() "), f"{block.id}: skip without reason"
        assert "frpd" in block.text or block.marker == "docs-check:skip", f"{block.id}: runs no frpd command"


def test_markers_are_spelled_right():
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1):
            if re.match(r"^<!--\s*(docs-check|output-of)", line.strip()):
                assert MARKER.match(line.strip()), f"{page.name}:{number}: unknown marker {line!r}"


def test_readme_starts_where_the_user_is():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.split("\n")
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; details belong in docs/"
    assert "make test" in text and "make demo" in text
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:2] == ["## Try it", "## Your own data"], headings


def test_relative_links_point_to_files():
    for page in [*PAGES, SAMPLE / "README.md"]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to missing {target}"


def test_every_docs_page_is_in_the_readme_index():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in text, f"docs/{page.name} is not linked from README.md"
