"""Text cells holding a line break (a bare carriage return above all) stay inside their csv record.

Ids such as ``"\\rCR"`` used to be written unquoted: pandas read a 60-row plan as 63 rows, ``evaluate`` could not
read it back, and ``select`` + ``interpolate`` turned the id into ``CR``. Oracles: the ids as written in the
applicants file, read back by pandas and by the ``csv`` module from every csv frpd writes (plans, evaluate's
table, the selection artifact's files), and the number of records.
"""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli._csv import LINE_BREAKS, CsvWriter, csv_line, frame_csv
from frpd_cli.cli.app import app
from frpd_cli.plans import read_plans, unescape_csv_text

runner = CliRunner()
#: a bare CR, CR at the end, LF, CRLF, and the separators str.splitlines also cuts at
ODD_IDS = ["\rCR", "end\r", "N\nL", "C\r\nL", "L\u2028S", "x\x85y", "v\x0bt", "f\x0cf", "g\x1dg"]


@pytest.fixture(scope="module")
def odd(sample_paths, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("breaks")
    rows = list(csv.reader(io.StringIO(sample_paths["applicants"].read_text(encoding="utf-8"))))
    for i, name in enumerate(ODD_IDS, start=1):
        rows[i][0] = name
    path = tmp / "applicants.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    ids = [r[0] for r in rows[1:]]
    assert pd.read_csv(path, dtype=str, keep_default_na=False)["applicant_id"].tolist() == ids   # input sound
    return {"applicants": path, "ids": ids, "tmp": tmp}


def _base(p, command):
    return [command, str(p["data"]), "--model", str(p["model"]), "--schema", str(p["schema"])]


def _csv_ids(path_or_text, column="applicant"):
    # bytes decoded as they are: read_text and CliRunner's stdout would turn "\r\n" into "\n"
    text = path_or_text if isinstance(path_or_text, str) else path_or_text.read_bytes().decode("utf-8")
    frame = pd.read_csv(io.StringIO(text), dtype={column: str}, keep_default_na=False)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(frame)                       # csv and pandas see the same records
    assert [r[column] for r in rows] == frame[column].tolist()
    return [unescape_csv_text(v) for v in frame[column]], frame


def test_plan_csv_keeps_every_record_and_id(sample_paths, odd):
    out = odd["tmp"] / "plans.csv"
    result = runner.invoke(app, [*_base(sample_paths, "plan"), "--applicants", str(odd["applicants"]),
                                 "--format", "csv", "--output", str(out)])
    assert result.exit_code == 0, result.stderr
    jsonl = runner.invoke(app, [*_base(sample_paths, "plan"), "--applicants", str(odd["applicants"]),
                                "--format", "jsonl"])
    records = [json.loads(line) for line in _out(jsonl).split("\n") if line]
    n_rows = sum(max(1, len(r["recourses"])) for r in records)
    ids, frame = _csv_ids(out)
    assert len(frame) == n_rows
    assert list(dict.fromkeys(ids)) == odd["ids"]         # every id exactly as written, in order
    assert [r["applicant"] for r in read_plans(out)] == odd["ids"]
    assert [r["applicant"] for r in records] == odd["ids"]
    assert [r["applicant"] for r in read_plans(_write(odd["tmp"] / "p.jsonl", _out(jsonl)))] == odd["ids"]
    ev = runner.invoke(app, [*_base(sample_paths, "evaluate"), "--plans", str(out), "--applicants",
                             str(odd["applicants"]), "--per-applicant", "--format", "csv"])
    assert ev.exit_code == 0, ev.stderr
    ids, _ = _csv_ids(_out(ev))
    assert ids == odd["ids"]


def _write(path, text):
    path.write_bytes(text.encode("utf-8"))
    return path


def _out(result) -> str:
    """A command's stdout exactly as written (``result.stdout`` turns "\r\n" into "\n")."""
    return result.stdout_bytes.decode("utf-8")


def test_select_and_interpolate_keep_the_ids(sample_paths, odd):
    sel = odd["tmp"] / "sel"
    result = runner.invoke(app, [*_base(sample_paths, "select"), "--applicants", str(odd["applicants"]),
                                 "--out", str(sel), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    shown, _ = _csv_ids(_out(result))
    assert list(dict.fromkeys(shown)) == odd["ids"]
    for name in ("prototypes.csv", "status.csv", "applicants.csv"):
        # each record whole; text cells escaped for spreadsheets as in csv output ('\rCR' starts like a formula)
        frame = pd.read_csv(sel / name, dtype={"applicant": str}, keep_default_na=False)
        assert list(dict.fromkeys(frame["applicant"].map(unescape_csv_text))) == odd["ids"], name
    inter = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]),
                                "--out", str(odd["tmp"] / "plan-art"), "--format", "csv"])
    assert inter.exit_code == 0, inter.stderr
    ids, _ = _csv_ids(_out(inter))
    assert list(dict.fromkeys(ids)) == odd["ids"]
    stored = (odd["tmp"] / "plan-art" / "plans.jsonl").read_text(encoding="utf-8")
    assert [json.loads(line)["applicant"] for line in stored.split("\n") if line] == odd["ids"]


@pytest.mark.parametrize("char", list(LINE_BREAKS))
def test_writer_quotes_every_line_break_and_round_trips(char):
    rows = [["a", 1.5, None, True], [f"x{char}y", -2, "", "q,\"r\""], [char, 0.1, "plain", 3]]
    buffer = io.StringIO()
    writer = CsvWriter(buffer)
    writer.writerows(rows)
    text = buffer.getvalue()
    back = list(csv.reader(io.StringIO(text, newline="")))
    assert back == [[("" if v is None else str(v)) for v in row] for row in rows]
    frame = pd.read_csv(io.StringIO(text), header=None, dtype=str, keep_default_na=False)
    assert frame[0].tolist() == ["a", f"x{char}y", char]
    assert text == "".join(csv_line(r) for r in rows)     # the same bytes as the cell-by-cell rendering


def test_writer_and_frames_without_breaks_are_the_csv_modules_bytes():
    rows = [["a", 1.5, None, True, 10**20, "x,y", 'q"q', ""], ["", 2, "-3", False, 0.1, "é", " s ", "t"]]
    expected = io.StringIO()
    csv.writer(expected, lineterminator="\n").writerows(rows)
    got = io.StringIO()
    CsvWriter(got).writerows(rows)
    assert got.getvalue() == expected.getvalue()
    frame = pd.DataFrame({"applicant": ["1", "b"], "rank": [1, 2], "x": [0.5, float("nan")]})
    assert frame_csv(frame) == frame.to_csv(index=False, lineterminator="\n")
    odd_frame = frame.assign(applicant=["\rCR", "b"])
    back = pd.read_csv(io.StringIO(frame_csv(odd_frame)), dtype={"applicant": str}, keep_default_na=False)
    plain = pd.read_csv(io.StringIO(frame_csv(frame)), dtype={"applicant": str}, keep_default_na=False)
    assert back["applicant"].tolist() == ["\rCR", "b"]
    pd.testing.assert_frame_equal(back.drop(columns="applicant"), plain.drop(columns="applicant"))
