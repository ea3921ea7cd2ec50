"""What a terminal shows: progress bars beside the tables frpd prints, in one pseudo-terminal session."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pandas as pd
import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")

_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


def screen(data: str) -> list[str]:
    """The lines a terminal shows after ``data``: a small emulator of what rich sends (text, carriage return,
    line feed, cursor up/down, erase line, colours and cursor visibility ignored)."""
    lines: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(data):
        ch = data[i]
        if ch == "\x1b":
            m = _CSI.match(data, i)
            if m is None:
                i += 1
                continue
            args, command = m.groups()
            n = int(args) if args.isdigit() else 1
            while len(lines) <= row:
                lines.append([])
            if command == "A":
                row = max(0, row - n)
            elif command == "B":
                row += n
            elif command == "K":
                lines[row] = [] if args == "2" else lines[row][:col]
            elif command == "G":
                col = max(0, n - 1)
            i = m.end()
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
        else:
            while len(lines) <= row:
                lines.append([])
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        i += 1
    return ["".join(line).rstrip() for line in lines]


def test_the_screen_emulator():
    assert screen("abc\rX\n12\x1b[2K\r3") == ["Xbc", "3"]
    assert screen("one\ntwo\x1b[1A\r\x1b[2Kun\n") == ["un", "two"]


def _environment(columns: int = 80) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERMINAL_WIDTH", "CI")}
    return {**env, "COLUMNS": str(columns), "LINES": "24", "TERM": "xterm-256color"}


def run_in_terminal(args: list[str], *, columns: int = 80) -> tuple[int, str]:
    """Run ``args`` with stdin, stdout and stderr on one pseudo-terminal; everything it showed, as sent."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=_environment(columns),
                            close_fds=True)
    os.close(slave)
    received = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:                 # EIO: the child has closed its end
            break
        if not data:
            break
        received.append(data)
    os.close(master)
    return proc.wait(), b"".join(received).decode("utf-8", errors="replace")


@pytest.fixture()
def many_applicants(sample_paths, tmp_path):
    """100 applicants: the sample's 20, five times over under new ids."""
    frame = pd.read_csv(sample_paths["applicants"])
    frames = [frame.assign(applicant_id=[f"{a}-{i}" for a in frame["applicant_id"]]) for i in range(5)]
    path = tmp_path / "applicants.csv"
    pd.concat(frames, ignore_index=True).to_csv(path, index=False)
    return path


def test_progress_bar_and_tables_share_the_terminal_without_mixing(sample_paths, many_applicants):
    args = [sys.executable, "-m", "frpd_cli", "plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
            "--schema", str(sample_paths["schema"]), "--applicants", str(many_applicants)]
    code, shown = run_in_terminal(args)
    assert code == 0, shown[-2000:]
    # what the same run prints to a pipe: the tables alone
    piped = subprocess.run([*args, "--format", "table", "-q"], capture_output=True, text=True, check=True,
                           env=_environment())
    tables = [line.rstrip() for line in piped.stdout.splitlines()]
    lines = screen(shown)
    assert "planning" in shown                                      # a bar was drawn
    # the screen holds exactly the tables, then the summary on stderr: no bar left, no line of a table mixed
    # with the bar (the bar is erased before each chunk's tables and drawn again below them)
    start = lines.index(tables[0])
    assert lines[start:start + len(tables)] == tables
    rest = [line for line in lines[start + len(tables):] if line]
    assert rest and rest[0].startswith("100 applicant(s): 100 planned"), rest
    assert not any("planning" in line or "/100" in line for line in lines)
    # the counter advances: it is drawn again after each step with the applicants done so far
    counts = [int(n) for n in re.findall(r"(\d+)/100", re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown))]
    assert counts == sorted(counts) and {25, 50, 75} <= set(counts), counts


def test_a_bar_with_records_to_a_file_leaves_only_the_summary(sample_paths, many_applicants, tmp_path):
    out = tmp_path / "plans.csv"
    code, shown = run_in_terminal([sys.executable, "-m", "frpd_cli", "plan", str(sample_paths["data"]), "--model",
                                   str(sample_paths["model"]), "--schema", str(sample_paths["schema"]),
                                   "--applicants", str(many_applicants), "--output", str(out)])
    assert code == 0, shown[-2000:]
    assert [line for line in screen(shown) if line][-1].startswith("100 applicant(s): 100 planned")
    assert out.read_text().count("\n") > 100
