"""Plan tables that fit the terminal: wide when the changed features fit, long (a block per recourse) otherwise,
headers never split inside a word, values with their training column's precision."""

from __future__ import annotations

import io
import json
import re

import joblib
import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from frpd_cli.cli._output import LAYOUTS, ValueFormat, format_value, print_plan, print_rows
from frpd_cli.cli.app import app
from frpd_cli.plans import Plan, Recourse

runner = CliRunner()

_BLOCK = re.compile(r"^  Recourse (\d+)(\*?)  cost (\S+)  probability (\S+)  (\d+) changes?(?:  largest shift (\S+))?$")
_CHANGE = re.compile(r"^    (.+?):\s+(.*) → (.*)$")
_TITLE = re.compile(r"^Applicant (\S+)  (\S+)  method (\S+)$")


def parse_long(text: str) -> dict:
    """Read the long layout back: {applicant: [{rank, cost, probability, n_changes, changes: {f: (old, new)}}]}."""
    plans: dict = {}
    current = None
    for line in text.splitlines():
        if m := _TITLE.match(line.rstrip()):
            current = plans.setdefault(m.group(1), [])
        elif m := _BLOCK.match(line.rstrip()):
            current.append({"rank": int(m.group(1)), "cost": float(m.group(3)), "probability": float(m.group(4)),
                            "n_changes": int(m.group(5)), "changes": {},
                            "largest_shift": None if m.group(6) is None else float(m.group(6))})
        elif (m := _CHANGE.match(line.rstrip())) and current:
            current[-1]["changes"][m.group(1)] = (m.group(2), m.group(3))
    return plans


def _render(plan: Plan, width: int, layout: str = "auto", decimals=None) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None, soft_wrap=False)
    print_plan(console, plan, layout, ValueFormat(decimals))
    return buffer.getvalue()


def _plan(changes_per_recourse: list[dict], applicant="A1") -> Plan:
    features = {}
    for changes in changes_per_recourse:
        for name, (old, _new) in changes.items():
            features[name] = old
    recourses = tuple(Recourse(rank=i + 1, features={**features, **{n: new for n, (_, new) in ch.items()}},
                               changes=ch, cost=0.5 + i, probability=0.75, prototype=i)
                      for i, ch in enumerate(changes_per_recourse))
    return Plan(applicant, "ok", None, "quad", recourses, features)


def test_layouts_match_the_option_choices():
    from frpd_cli.cli import _options as o

    assert o.LAYOUTS == LAYOUTS


def test_format_value_never_shows_numpy_and_writes_integers_as_integers():
    assert format_value(np.float64(7.0)) == "7"
    assert format_value(np.int64(12)) == "12"
    assert format_value(np.float64(1929.2), 2) == "1929.20"
    assert format_value(35.4, 0) == "35"
    assert format_value("own") == "own"
    assert format_value(float("nan")) == ""


def test_precision_grows_only_when_the_column_precision_would_hide_a_change():
    values = ValueFormat({"amount": 2, "age": 0})
    assert values.pair("amount", 1929.22, 2175.931) == ("1929.22", "2175.93")
    assert values.pair("amount", 1929.22, 1929.224) == ("1929.220", "1929.224")
    assert values.pair("age", 35.0, 36) == ("35", "36")


def test_wide_table_when_it_fits_long_blocks_when_not():
    changes = [{"age": (35, 36), "credit_amount": (1929.22, 2175.93)}, {"housing": ("rent", "own")}]
    plan = _plan(changes)
    wide = _render(plan, 120)
    assert "┏" in wide and "Recourse 1" not in wide
    assert "35 → 36" in wide and "1929.22 → 2175.93" in wide
    narrow_plan = _plan([{f"feature_{i:02d}": (i, i + 1) for i in range(25)}])
    long = _render(narrow_plan, 80)
    assert "┏" not in long
    parsed = parse_long(long)["A1"]
    assert parsed[0]["n_changes"] == 25
    assert parsed[0]["changes"] == {f"feature_{i:02d}": (str(i), str(i + 1)) for i in range(25)}


def test_forced_layouts():
    plan = _plan([{"age": (35, 36)}])
    assert "Recourse 1" in _render(plan, 200, "long") and "┏" not in _render(plan, 200, "long")
    wide_plan = _plan([{f"feature_{i:02d}": (i, i + 1) for i in range(25)}])
    forced = _render(wide_plan, 80, "wide")
    assert "┏" in forced
    header = next(line for line in forced.splitlines() if "feature_00" in line)
    assert all(f"feature_{i:02d}" in header for i in range(25))     # one line of whole headers, wider than 80


names = st.text(alphabet=st.characters(categories=("Ll", "Lu", "Nd"), include_characters="_"), min_size=1,
                max_size=18).filter(lambda s: not s[0].isdigit())
numbers = st.one_of(st.integers(-10**6, 10**6), st.floats(-1e5, 1e5, allow_nan=False).map(lambda x: round(x, 2)))
levels = st.sampled_from(["own", "rent", "free", "management", "unskilled", "female-div/sep/mar"])


@st.composite
def plans(draw):
    features = draw(st.lists(names, min_size=1, max_size=12, unique=True))
    kinds = {f: draw(st.sampled_from(["number", "level"])) for f in features}
    recourses = []
    for _ in range(draw(st.integers(1, 3))):
        chosen = draw(st.lists(st.sampled_from(features), min_size=1, unique=True))
        changes = {}
        for f in chosen:
            pool = numbers if kinds[f] == "number" else levels
            old, new = draw(pool), draw(pool)
            if old != new:
                changes[f] = (old, new)
        if changes:
            recourses.append(changes)
    return _plan(recourses or [{features[0]: (1, 2)}])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans(), width=st.integers(40, 200))
def test_any_plan_at_any_width_keeps_headers_whole_or_reads_back_exactly(plan, width):
    out = _render(plan, width)
    changed = {n for r in plan.recourses for n in r.changes}
    if "┏" in out:
        lines = out.splitlines()
        assert all(len(line.rstrip()) <= width for line in lines)
        header = "\n".join(line for line in lines if line.startswith("┃"))
        for name in changed:                       # each header on one line, whole
            assert any(re.search(rf"┃ +{re.escape(name)} +┃", line) for line in header.splitlines()), name
    else:
        parsed = parse_long(out)["A1"]
        for block, r in zip(parsed, plan.recourses):
            assert block["n_changes"] == len(r.changes)
            assert block["changes"] == {n: (format_value(a), format_value(b)) for n, (a, b) in r.changes.items()}


def _synthetic(tmp_path, n_features=25, n_rows=400):
    """A 25-feature credit-like dataset (continuous with 2 decimals, integers, categoricals) and a model."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(7)
    data = {}
    score = np.zeros(n_rows)
    for i in range(n_features):
        name = f"f{i:02d}_{['amount', 'count', 'kind'][i % 3]}"
        if i % 3 == 0:
            x = np.round(rng.normal(1000, 300, n_rows), 2)
            score += (x - 1000) / 300
        elif i % 3 == 1:
            x = rng.integers(0, 10, n_rows)
            score += (x - 4.5) / 3
        else:
            x = rng.choice(["low", "mid", "high"], n_rows)
            score += (x == "high").astype(float) - (x == "low").astype(float)
        data[name] = x
    frame = pd.DataFrame(data)
    frame["label"] = (score + rng.normal(0, 1, n_rows) > 0).astype(int)
    categorical = [c for c in frame.columns if c.endswith("kind")]
    numeric = [c for c in frame.columns if c not in categorical and c != "label"]
    model = Pipeline([("pre", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), categorical),
                                                 ("num", StandardScaler(), numeric)])),
                      ("clf", LogisticRegression(max_iter=500))])
    model.fit(frame.drop(columns="label"), frame["label"])
    data_path, model_path = tmp_path / "wide.csv", tmp_path / "wide.pkl"
    frame.to_csv(data_path, index=False)
    joblib.dump(model, model_path)
    denied = frame[model.predict_proba(frame.drop(columns="label"))[:, 1] < 0.3].drop(columns="label").head(4)
    applicants = tmp_path / "denied.csv"
    denied.to_csv(applicants, index=False)
    return data_path, model_path, applicants


def test_long_layout_shows_every_changed_value_of_25_features_at_80_columns(tmp_path):
    data, model, applicants = _synthetic(tmp_path)
    # plain interpolation: most of the 25 features change (sparse recourses would fit the wide table)
    base = ["plan", str(data), "--model", str(model), "--applicants", str(applicants), "--theta", "0.5",
            "--no-sparsify", "--max-move", "none"]
    table = runner.invoke(app, [*base, "--format", "table"], env={"COLUMNS": "80"})
    records = runner.invoke(app, [*base, "--format", "jsonl"])
    assert table.exit_code == 0 and records.exit_code == 0, table.stderr + records.stderr
    assert "┏" not in table.stdout                      # 25 features do not fit 80 columns: the long layout
    assert all(len(line) <= 80 for line in table.stdout.splitlines())
    parsed = parse_long(table.stdout)
    frame = pd.read_csv(data)
    decimals = {c: 2 for c in frame.columns if c.endswith("amount")}
    total = 0
    for rec in map(json.loads, records.stdout.splitlines()):
        blocks = parsed[rec["applicant"]]
        assert len(blocks) == len(rec["recourses"])
        for block, r in zip(blocks, rec["recourses"]):
            assert block["rank"] == r["rank"] and block["n_changes"] == len(r["changes"])
            assert abs(block["cost"] - r["cost"]) <= 5e-4 and abs(block["probability"] - r["probability"]) <= 5e-3
            assert abs(block["largest_shift"] - r["largest_shift"]) <= 5e-3 + 1e-9   # shown to 2 decimals
            assert set(block["changes"]) == set(r["changes"])
            for name, (old, new) in r["changes"].items():
                shown_old, shown_new = block["changes"][name]
                if name.endswith("kind"):
                    assert (shown_old, shown_new) == (old, new)
                elif name.endswith("count"):                        # integers as integers
                    assert (shown_old, shown_new) == (str(int(old)), str(int(new)))
                else:                                               # the column's two decimals
                    assert re.fullmatch(r"-?\d+\.\d{2,}", shown_old) and re.fullmatch(r"-?\d+\.\d{2,}", shown_new)
                    assert abs(float(shown_old) - old) <= 0.005 + 1e-9 and abs(float(shown_new) - new) <= 0.005 + 1e-9
                total += 1
    assert total > 0 and decimals


def test_wide_layout_when_the_sample_plans_fit(sample_paths):
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]), "--format", "table"]
    wide = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert wide.exit_code == 0 and "┏" in wide.stdout and "Recourse 1" not in wide.stdout
    assert "credit_amount" in wide.stdout and "credit_am\n" not in wide.stdout
    long = runner.invoke(app, [*args, "--layout", "long"], env={"COLUMNS": "160"})
    assert long.exit_code == 0 and "┏" not in long.stdout and "Recourse 1" in long.stdout
    bad = runner.invoke(app, [*args, "--layout", "tall"])
    assert bad.exit_code == 2 and bad.stdout == ""


def test_rows_tables_never_split_a_word():
    rows = [{"column": "personal_status", "values": "female-div/sep/mar, male-div/sep, male-mar/wid"},
            {"column": "credit_amount", "values": "337.93 – 18000.00"}]
    for width in range(30, 120, 7):
        buffer = io.StringIO()
        print_rows(Console(file=buffer, width=width, color_system=None), rows, ["column", "values"])
        text = buffer.getvalue()
        for word in ("personal_status", "credit_amount", "female-div/sep/mar,", "337.93"):
            assert word in text, (width, text)


def test_select_lists_only_changes_that_differ_numerically(sample_paths, tmp_path):
    # integer columns spelled as floats in the training file ("24.0") against integers in the applicants file:
    # 24.0 and 24 are the same value, not a change
    training = pd.read_csv(sample_paths["data"])
    training = training.astype({"age": float, "duration": float})
    data = tmp_path / "spelled.csv"
    training.to_csv(data, index=False)
    assert "24.0" in data.read_text(encoding="utf-8")
    frame = pd.read_csv(sample_paths["applicants"]).head(4)
    applicants = tmp_path / "four.csv"
    frame.to_csv(applicants, index=False)
    result = runner.invoke(app, ["select", str(data), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants", str(applicants), "--out",
                                 str(tmp_path / "sel"), "--format", "jsonl", "--theta", "0"])
    assert result.exit_code == 0, result.stderr
    prototypes = pd.read_csv(tmp_path / "sel" / "prototypes.csv", dtype={"applicant": str})
    frame = frame.set_index("applicant_id")
    checked = unchanged = 0
    for rec in map(json.loads, result.stdout.splitlines()):
        proto = prototypes[(prototypes["applicant"] == rec["applicant"]) & (prototypes["rank"] == rec["rank"])].iloc[0]
        listed = dict(part.split(": ", 1) for part in rec["changes"].split(", ")) if rec["changes"] else {}
        for name in ("age", "duration"):
            differs = float(frame.loc[rec["applicant"], name]) != float(proto[name])
            assert (name in listed) == differs, (name, rec["changes"])
            if differs:                                   # integers written as integers
                assert listed[name] == f"{int(frame.loc[rec['applicant'], name])} → {int(proto[name])}"
                checked += 1
            else:
                unchanged += 1
        for old_new in listed.values():
            old, new = old_new.split(" → ")
            assert old != new
    assert checked > 0 and unchanged > 0
