"""``--format text``: every plan in plain words, checked against the same run's records (no golden files).

Each applicant's paragraph must name every change of every recourse with its from/to values at the column's
precision and the right word (raise, lower, change), hold one numbered entry per recourse, list as "keep" the
applicant's mutable features at their values and never an immutable one, and say in words why a plan is
partial, empty or not needed.
"""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from frpd_cli.cli._output import ValueFormat
from frpd_cli.cli._text import change_verb, plan_text
from frpd_cli.cli.app import app
from frpd_cli.plans import Plan, Recourse
from frpd_cli.schema import Feature, Schema

runner = CliRunner()
ORDER = {"savings": ["none", "little", "moderate", "rich"]}
NOMINAL = {"personal_status", "housing", "job"}
ACTION = re.compile(r"\b(raise|lower|change) (\S+) from (\S+) to (\S+?)(?=,|;| and |\.$|\. |$)")


def _run(paths, *extra, fmt):
    args = ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(paths["applicants"]), "--format", fmt, *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _records_and_text(paths, *extra):
    records = [json.loads(line) for line in _run(paths, *extra, fmt="jsonl").splitlines()]
    text = _run(paths, *extra, fmt="text")
    return records, text


def _paragraphs(text: str) -> list[str]:
    assert text.endswith("\n\n")
    return text[:-2].split("\n\n")


def _entries(paragraph: str) -> dict[int, str]:
    """The numbered options of a paragraph, continuation lines joined."""
    entries, current = {}, None
    for line in paragraph.split("\n")[1:]:
        match = re.match(r"^  (\d+)\. (.*)$", line)
        if match:
            current = int(match.group(1))
            entries[current] = match.group(2)
        elif current is not None and line.startswith("     ") and not line.startswith("  Each"):
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


def _kept(paragraph: str) -> dict[str, str]:
    joined = " ".join(line.strip() for line in paragraph.split("\n"))
    match = re.search(r"keeps everything it does not mention as it is now: (.*?)\.(?: |$)", joined)
    if not match:
        return {}
    return dict(item.rsplit(" ", 1) for item in match.group(1).split(", "))


def _same_value(shown: str, value) -> bool:
    if isinstance(value, str):
        return shown == value
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown) - value) <= 0.5 * 10 ** -decimals + 1e-9


def _expected_verb(name, old, new) -> str:
    if name in ORDER:
        return "raise" if ORDER[name].index(new) > ORDER[name].index(old) else "lower"
    if name in NOMINAL:
        return "change"
    return "raise" if new > old else "lower"


def _check_plan(record: dict, paragraph: str, immutable: set) -> None:
    assert paragraph.startswith(f"Applicant {record['applicant']}: ")
    entries = _entries(paragraph)
    assert sorted(entries) == [r["rank"] for r in record["recourses"]]       # one entry per recourse
    for recourse in record["recourses"]:
        actions = ACTION.findall(entries[recourse["rank"]])
        named = {name: (verb, a, b) for verb, name, a, b in actions}
        assert len(named) == len(actions) == len(recourse["changes"]), (entries[recourse["rank"]], recourse)
        for name, (old, new) in recourse["changes"].items():
            verb, a, b = named[name]
            assert _same_value(a, old) and _same_value(b, new), (name, a, b, old, new)
            assert verb == _expected_verb(name, old, new), (name, verb, old, new)
        assert not immutable & set(named)
    if record["recourses"]:
        kept = _kept(paragraph)
        applicant = _applicant_values(record)
        assert set(kept) == set(applicant) - immutable
        for name, shown in kept.items():
            assert _same_value(shown, applicant[name]), (name, shown, applicant[name])


def recourse_changes(record: dict) -> dict:
    """The applicant's own value of every feature some recourse changes."""
    return {n: old for r in record["recourses"] for n, (old, _new) in r["changes"].items()}


def _applicant_values(record: dict) -> dict:
    return record["recourses"][0]["features"] | recourse_changes(record)


def test_every_change_is_written_with_its_values_and_direction(sample_paths):
    records, text = _records_and_text(sample_paths)
    paragraphs = _paragraphs(text)
    assert len(paragraphs) == len(records) == 20
    assert sum(len(r["recourses"]) for r in records) >= 40
    for record, paragraph in zip(records, paragraphs):
        _check_plan(record, paragraph, {"personal_status"})
    words = set(re.findall(r"\b(raise|lower|change) ", text))
    assert words == {"raise", "lower", "change"}       # the sample's plans move features both ways


def test_an_immutable_feature_is_never_advice(sample_paths):
    records, text = _records_and_text(sample_paths, "--immutable", "job", "--immutable", "age")
    for record, paragraph in zip(records, _paragraphs(text)):
        _check_plan(record, paragraph, {"personal_status", "job", "age"})
        if record["status"] == "ok" and not record["partial"]:
            for name in ("personal_status", "job", "age"):
                assert name not in paragraph


def test_infeasible_and_already_favourable_are_said_in_words(sample_paths):
    records, text = _records_and_text(sample_paths, "--immutable", "credit_amount", "--immutable-policy", "filter",
                                      "--no-direct-search")
    assert {r["status"] for r in records} == {"infeasible"}
    for record, paragraph in zip(records, _paragraphs(text)):
        assert paragraph.startswith(f"Applicant {record['applicant']}: no change was found that would get this "
                                    "application accepted")
        assert not _entries(paragraph) and "keeps everything" not in paragraph
        assert f"Details: {record['reason'].split()[0]}" in " ".join(paragraph.split())
    text = _run(sample_paths, "--favorable", "0", fmt="text")
    assert all(p.split("\n")[0].endswith("the model already accepts this application; nothing needs to change.")
               and not _entries(p) for p in _paragraphs(text))


def test_a_partial_plan_says_how_many_options_were_found(sample_paths):
    records, text = _records_and_text(sample_paths, "-k", "6")       # most sample applicants have fewer than 6
    partial = [(r, p) for r, p in zip(records, _paragraphs(text)) if r["partial"]]
    assert partial, "with -k 6 the sample has partial plans"
    for record, paragraph in partial:
        n = len(record["recourses"])
        assert f"Only {n} different option{'s were' if n != 1 else ' was'} found" in paragraph
        assert "Details: " in paragraph
    for record, paragraph in zip(records, _paragraphs(text)):
        _check_plan(record, paragraph, {"personal_status"})
        if not record["partial"] and record["status"] == "ok":
            assert "Only " not in paragraph and "Details:" not in paragraph


def test_text_to_a_file_and_from_interpolate(sample_paths, tmp_path):
    text = _run(sample_paths, fmt="text")
    out = tmp_path / "plans.txt"
    _run(sample_paths, "--output", str(out), fmt="text")
    assert out.read_text(encoding="utf-8") == text
    selection = tmp_path / "selection"
    result = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants",
                                 str(sample_paths["applicants"]), "--out", str(selection)])
    assert result.exit_code == 0, result.stderr
    result = runner.invoke(app, ["interpolate", "--selection", str(selection), "--model", str(sample_paths["model"]),
                                 "--out", str(tmp_path / "plans"), "--format", "text"])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in (tmp_path / "plans" / "plans.jsonl").read_text().splitlines()]
    paragraphs = _paragraphs(result.stdout)
    assert len(paragraphs) == len(records)
    for record, paragraph in zip(records, paragraphs):
        _check_plan(record, paragraph, {"personal_status"})


def test_text_is_only_for_plans_and_cannot_resume(sample_paths, tmp_path):
    result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--plans", str(tmp_path / "none.jsonl"), "--format", "text"])
    assert result.exit_code == 2
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]), "--format", "text",
            "--output", str(tmp_path / "p.txt"), "--resume"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.stdout == ""
    assert "Invalid value for '--resume'" in result.stderr and "--format text is written in one piece" in result.stderr


def _schema() -> Schema:
    return Schema(features=(Feature("age", "integer", mutability="increasing"),
                            Feature("group", "categorical", levels=("a", "b"), mutability="immutable"),
                            Feature("savings", "ordinal", levels=tuple(ORDER["savings"])),
                            Feature("housing", "categorical", levels=("own", "rent")),
                            Feature("amount", "continuous")), target="label", favorable=1)


def test_verbs_follow_the_feature_kind():
    schema = _schema()
    assert change_verb(schema.feature("savings"), "rich", "little") == "lower"
    assert change_verb(schema.feature("savings"), "none", "moderate") == "raise"
    assert change_verb(schema.feature("housing"), "rent", "own") == "change"
    assert change_verb(schema.feature("amount"), 2.5, 1.0) == "lower"
    assert change_verb(schema.feature("age"), 30, 31) == "raise"
    assert change_verb(None, 1, 2) == "change"


def test_a_graph_recourse_lists_its_steps_in_order():
    features = {"age": 30, "group": "a", "savings": "none", "housing": "rent", "amount": 1234.5}
    end = {**features, "savings": "little", "amount": 1000.25}
    recourse = Recourse(rank=1, features=end, changes={"savings": ("none", "little"), "amount": (1234.5, 1000.25)},
                        cost=0.5, probability=0.7, prototype=3, path=[7, 3],
                        steps=[{"amount": (1234.5, 1000.25)}, {"savings": ("none", "little")}])
    plan = Plan("X1", "ok", None, "quad+graph", (recourse,), features)
    text = plan_text(plan, _schema(), ValueFormat({"amount": 2, "age": 0}))
    assert text == ("Applicant X1: to be accepted, this would do:\n"
                    "  1. raise savings from none to little and lower amount from 1234.50 to 1000.25, all together, "
                    "in 2\n     steps: lower amount from 1234.50 to 1000.25; then raise savings from none to little.\n"
                    "  It keeps everything it does not mention as it is now: age 30, savings none, housing rent, "
                    "amount\n  1234.50.\n\n")


def test_a_column_with_a_few_long_values_does_not_pad_every_value_with_zeros(tmp_path):
    """A ratio column mostly 0.5 / 0.75 but with a few values of 8 decimals (SBA's Portion): the text and the
    table show 0.75 and 1.0, not 0.75000000; the value a change needs keeps every decimal it has."""
    import joblib
    import numpy as np
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    portion = rng.choice([0.5, 0.75, 1.0], size=200)
    portion[:3] = [0.29677419, 0.61290323, 0.83870968]
    amount = rng.integers(1000, 5000, size=200)
    frame = pd.DataFrame({"portion": portion, "amount": amount, "label": (portion < 0.8).astype(int)})
    data = tmp_path / "train.csv"
    frame.to_csv(data, index=False)
    model = LogisticRegression().fit(frame[["portion", "amount"]], frame["label"])
    joblib.dump(model, tmp_path / "model.joblib")
    applicants = tmp_path / "applicants.csv"
    pd.DataFrame({"portion": [1.0], "amount": [2500]}).to_csv(applicants, index=False)
    base = ["plan", str(data), "--model", str(tmp_path / "model.joblib"), "--applicants", str(applicants),
            "--max-move", "none"]
    record = json.loads(runner.invoke(app, [*base, "--format", "jsonl"]).stdout)
    new = [r["changes"]["portion"][1] for r in record["recourses"] if "portion" in r["changes"]]
    assert new
    for fmt in ("text", "table"):
        result = runner.invoke(app, [*base, "--format", fmt], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.stderr
        assert "1.0" in result.stdout and "1.00000000" not in result.stdout
        for value in new:                       # the changed value as the records hold it, trailing zeros off
            assert f"{value:.8f}".rstrip("0") in result.stdout


def test_value_format_drops_trailing_zeros_only_beyond_a_few_decimals():
    values = ValueFormat({"amount": 2, "portion": 8})
    assert values("amount", 1929.2) == "1929.20" and values("amount", 12.0) == "12.00"
    assert [values("portion", v) for v in (0.75, 1.0, 0.8499997)] == ["0.75", "1.0", "0.8499997"]
    assert values.pair("portion", 0.75, 0.7500001) == ("0.75", "0.7500001")


def test_options_that_move_a_feature_opposite_ways_are_said_to_be_both_valid():
    from frpd_cli.cli._text import opposite_moves

    features = {"age": 30, "group": "a", "savings": "little", "housing": "rent", "amount": 1000.0}

    def option(rank, **changes):
        end = {**features, **{n: new for n, (_, new) in changes.items()}}
        return Recourse(rank=rank, features=end, changes=changes, cost=0.1 * rank, probability=0.7, prototype=rank)

    up, down, other = (option(1, amount=(1000.0, 1200.0)), option(2, amount=(1000.0, 700.0), age=(30, 31)),
                       option(3, savings=("little", "none"), housing=("rent", "own")))
    schema = _schema()
    by_name = {f.name: f for f in schema.features}
    plan = Plan("X2", "ok", None, "quad", (up, down, other), features)
    assert opposite_moves(plan, by_name) == [("amount", 1, 2)]
    text = plan_text(plan, schema, ValueFormat({"amount": 0}))
    assert ("  Options 1 and 2 move amount opposite ways: the model accepts either direction (each option is\n"
            "  complete on its own).\n") in text
    # an ordinal lowered by one option and raised by another is opposite too; the same way twice is not
    lowered, raised = option(2, savings=("little", "none")), option(3, savings=("little", "rich"))
    assert opposite_moves(Plan("X3", "ok", None, "quad", (up, lowered, raised), features), by_name) == [
        ("savings", 3, 2)]
    same_way = Plan("X4", "ok", None, "quad", (up, option(2, amount=(1000.0, 1100.0))), features)
    assert opposite_moves(same_way, by_name) == [] and "opposite" not in plan_text(same_way, schema)


def test_plan_notes_features_its_options_move_opposite_ways(tmp_path):
    # a model that accepts x far from 50 either way: an applicant at 50 is told to raise x or to lower it
    import joblib
    import numpy as np
    import pandas as pd
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures, StandardScaler

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": np.round(rng.uniform(0, 100, 600), 1), "y": np.round(rng.uniform(0, 10, 600), 1)})
    frame["label"] = (np.abs(frame["x"] - 50) > 20).astype(int)
    model = make_pipeline(PolynomialFeatures(2), StandardScaler(), LogisticRegression(C=100, max_iter=5000))
    model.fit(frame[["x", "y"]], frame["label"])
    data, model_path, applicants = tmp_path / "d.csv", tmp_path / "m.joblib", tmp_path / "a.csv"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    pd.DataFrame({"x": [50.0, 48.0], "y": [5.0, 5.0]}).to_csv(applicants, index=False)
    args = ["plan", str(data), "--model", str(model_path), "--applicants", str(applicants), "--immutable", "y"]
    result = runner.invoke(app, [*args, "--format", "jsonl"])
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    two_way = [r for r in records if {np.sign(c["changes"]["x"][1] - c["changes"]["x"][0])
                                      for c in r["recourses"]} == {1.0, -1.0}]
    assert two_way                                        # the oracle: some plan raises x and lowers it
    (note,) = [line for line in result.stderr.splitlines() if "opposite ways" in line]
    assert note.startswith(f"Note: plans offer options that move a feature opposite ways ('x' in {len(two_way)} of "
                           f"the {len(records)} planned applicant(s))")
    assert "--increasing x or --decreasing x" in note
    held = runner.invoke(app, [*args, "--format", "jsonl", "--increasing", "x"])
    assert held.exit_code == 0 and "opposite ways" not in held.stderr
    text = runner.invoke(app, [*args, "--format", "text"]).stdout
    assert text.count("move x opposite ways") == len(two_way)
