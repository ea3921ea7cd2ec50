"""What a terminal shows: progress bars beside the tables frpd prints (in one pseudo-terminal session), and the
words of the tables and messages a newcomer reads."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app

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


# --------------------------------------------------------------------------- words a newcomer reads

runner = CliRunner()


def _plan(sample_paths, *extra, columns: int = 80):
    return runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                               "--schema", str(sample_paths["schema"]), "--applicants",
                               str(sample_paths["applicants"]), *extra], env={"COLUMNS": str(columns)})


#: Flags that leave the sample's applicants without any candidate (every reason is long).
_NOTHING_LEFT = ("--immutable", "job", "--immutable", "housing", "--immutable", "duration", "--immutable",
                 "credit_amount", "--immutable-policy", "filter", "--no-direct-search")


def test_plan_tables_explain_their_numbers_once_and_cut_reasons_to_a_clause(sample_paths):
    import json

    table = _plan(sample_paths, "--format", "table", "-q")
    assert table.exit_code == 0, table.stderr
    assert table.stdout.count("cost: how far the recourse moves the applicant") == 1
    assert "partial: fewer than K different recourses" in table.stdout    # the sample has partial plans
    assert "led to the same recourse" not in table.stdout          # partial plans: the legend says what it means
    empty = _plan(sample_paths, *_NOTHING_LEFT, "--format", "table", "-q")
    records = [json.loads(line) for line in _plan(sample_paths, *_NOTHING_LEFT, "--format", "jsonl",
                                                  "-q").stdout.splitlines()]
    assert records and all(r["status"] == "infeasible" and r["reason"].count(";") >= 3 for r in records)
    flat = " ".join(empty.stdout.split())
    for r in records:
        first = r["reason"].split("; ")[0]
        assert f"{first} … (--explain)" in flat and r["reason"] not in flat
    assert flat.count("--explain shows them whole") == 1
    explained = " ".join(_plan(sample_paths, *_NOTHING_LEFT, "--format", "table", "-q", "--explain").stdout.split())
    assert all(" ".join(r["reason"].split()) in explained for r in records) and "(--explain)" not in explained


def test_the_projection_note_is_told_once(sample_paths):
    table = _plan(sample_paths, "--immutable", "age", "--immutable-policy", "project", "--format", "table", "-q")
    assert table.exit_code == 0, table.stderr
    marked = sum(line.lstrip("│ ").split(" ")[0].endswith("*") for line in table.stdout.splitlines())
    assert marked >= 2                                                 # several recourses from projected rows
    assert table.stdout.count("* prototype projected onto the applicant's immutable values") == 1


def test_evaluate_names_its_metrics_in_words_and_fits_the_width_when_piped(sample_paths, tmp_path):
    from frpd_cli.cli.evaluation import METRIC_WORDS, metric_label

    plans = tmp_path / "plans.jsonl"
    plans.write_text(_plan(sample_paths, "--format", "jsonl", "-q").stdout)
    result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--plans", str(plans), "--format",
                                 "table", "-q"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    for name in ("cost", "validity", "anti-diversity", "dpp", "manifold"):
        assert metric_label(name) in result.stdout
    # the paper's names of every metric in words are in docs/metrics.md
    metrics_doc = (Path(__file__).resolve().parent.parent / "docs" / "metrics.md").read_text()
    for name in METRIC_WORDS:
        assert f"`{metric_label(name)}`" in metrics_doc, name


def test_schema_writes_ranges_and_classes_as_people_do(tmp_path):
    import joblib
    from sklearn.linear_model import LogisticRegression

    # one noisy value gives age more than ten decimals: its range is still 33 – 94 (not 40.300000000000004,
    # which the csv parser of older pandas versions reads as 40.3: the precision shown would depend on pandas)
    frame = pd.DataFrame({"age": [33.0, 94.0, 40.30000000001, 50.0, 60.0, 70.0] * 3,
                          "ratio": [0.1234567891, 0.5, 0.25, 0.75, 0.3, 0.9] * 3,
                          "label": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0] * 3})
    data, model = tmp_path / "data.csv", tmp_path / "model.pkl"
    frame.to_csv(data, index=False)
    joblib.dump(LogisticRegression().fit(frame[["age", "ratio"]], frame["label"]), model)
    result = runner.invoke(app, ["schema", str(data), "--model", str(model), "--format", "table"],
                           env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.stderr
    assert "33 – 94" in result.stdout and "0.1234567891 – 0.9 " in result.stdout
    assert "0000" not in result.stdout
    assert "favourable class 1 of the model's classes 0, 1;" in " ".join(result.stdout.split())


@pytest.mark.parametrize("flags, said", [
    (("--immutable", "agee"), "Did you mean 'age'?"),
    (("--target", "Label"), "Did you mean 'label'?"),
    (("--range", "savngs=none,little"), "Did you mean 'savings'?"),
    (("--id-column", "applicant"), "Did you mean 'applicant_id'?"),
])
def test_a_misspelt_column_gets_its_near_miss(sample_paths, flags, said):
    result = _plan(sample_paths, *flags, "--format", "csv")
    assert result.exit_code in (1, 2) and said in result.stderr, result.stderr


def test_a_forgotten_id_column_gets_a_hint(sample_paths, tmp_path):
    schema = tmp_path / "schema.toml"
    schema.write_text("\n".join(line for line in sample_paths["schema"].read_text().splitlines()
                                if not line.startswith("id_column")))
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema", str(schema),
            "--applicants", str(sample_paths["applicants"]), "--format", "csv", "-q"]
    forgotten = runner.invoke(app, args)
    assert forgotten.exit_code == 0, forgotten.stderr
    assert "pass --id-column applicant_id" in forgotten.stderr
    given = runner.invoke(app, [*args, "--id-column", "applicant_id"])
    assert given.exit_code == 0 and "Hint" not in given.stderr and "ignoring" not in given.stderr
