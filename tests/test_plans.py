"""Plan records: csv cells escaped for spreadsheets and read back exactly."""

from __future__ import annotations

import csv
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frpd_cli.plans import Plan, Recourse, csv_columns, escape_csv_text, plan_rows, read_plans, unescape_csv_text


@pytest.mark.parametrize("value, expected", [
    ("=HYPERLINK(\"x\")", "'=HYPERLINK(\"x\")"), ("+cmd", "'+cmd"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("'quoted", "''quoted"), ("own", "own"), ("a=b", "a=b"), ("", ""),
    ("-3.5", "-3.5"), ("+1e3", "+1e3"), ("-.5", "-.5"), (-3.5, -3.5), (7, 7), (None, None),
])
def test_escape(value, expected):
    assert escape_csv_text(value) == expected


@settings(deadline=None)
@given(st.text(max_size=12))
def test_unescape_inverts_escape(text):
    escaped = escape_csv_text(text)
    assert unescape_csv_text(escaped) == text
    number = re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", text) is not None
    if text[:1] == "'" or (text[:1] in ("=", "+", "-", "@", "\t", "\r") and not number):
        assert escaped == "'" + text
    else:
        assert escaped == text


def _plan(applicant, housing):
    r = Recourse(rank=1, features={"age": 30, "amount": -3.5, "housing": housing},
                 changes={"housing": ("rent", housing)}, cost=0.5, probability=0.7, prototype=0)
    return Plan(applicant=applicant, status="ok", reason=None, method="quad", recourses=(r,))


def test_plan_rows_escape_text_not_numbers(tmp_path):
    features = ["age", "amount", "housing"]
    rows = plan_rows(_plan("=1+2", "@own"), features) + plan_rows(
        Plan(applicant="-x", status="infeasible", reason="only 0 candidate row(s)", method="quad"), features)
    assert rows[0]["applicant"] == "'=1+2" and rows[0]["housing"] == "'@own" and rows[0]["amount"] == -3.5
    assert rows[1]["applicant"] == "'-x"
    path = tmp_path / "plans.csv"
    with open(path, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=csv_columns(features), extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    text = path.read_text()
    assert "'=1+2,ok" in text and ",-3.5," in text and "'@own" in text
    records = read_plans(path)
    assert [r["applicant"] for r in records] == ["=1+2", "-x"]
    assert records[0]["recourses"][0]["features"]["housing"] == "@own"
    assert float(records[0]["recourses"][0]["features"]["amount"]) == -3.5     # never escaped
