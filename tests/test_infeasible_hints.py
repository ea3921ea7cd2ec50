"""The hint after a plan run with many infeasible applicants names what left them without candidates."""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()

FEATURES = ["income", "job"]


@pytest.fixture(scope="module")
def income_only(tmp_path_factory):
    """405 rows whose label is income > 60 (job plays no part); a logistic pipeline; three applicants with incomes
    near 20, which the model turns down."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({"income": np.round(rng.uniform(10, 90, n), 1), "job": rng.choice(["a", "b", "c"], n)})
    # five rows of a job no favourable row has: applicants of that job, held to it, have no candidate
    frame = pd.concat([frame, pd.DataFrame({"income": [12.0, 14.0, 16.0, 18.0, 20.0], "job": ["d"] * 5})],
                      ignore_index=True)
    frame["label"] = (frame["income"] > 60).astype(int)
    model = Pipeline([("prep", ColumnTransformer([("text", OneHotEncoder(handle_unknown="ignore"), ["job"]),
                                                  ("numbers", MinMaxScaler(), ["income"])])),
                      ("clf", LogisticRegression(C=1.0, max_iter=1000))]).fit(frame[FEATURES], frame["label"])
    folder = tmp_path_factory.mktemp("income_only")
    data, model_path, applicants = folder / "train.csv", folder / "model.pkl", folder / "applicants.csv"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    denied = pd.DataFrame({"income": [20.0, 22.5, 25.0], "job": ["a", "b", "c"]})
    assert (model.predict_proba(denied)[:, 1] < 0.5).all()
    denied.to_csv(applicants, index=False)
    denied.assign(job="d").to_csv(folder / "job_d.csv", index=False)
    probability = model.predict_proba(frame[FEATURES])[:, 1]
    return {"data": data, "model": model_path, "applicants": applicants, "frame": frame, "denied": denied,
            "probability": probability, "folder": folder}


def _plan(case, *flags):
    result = runner.invoke(app, ["plan", str(case["data"]), "--model", str(case["model"]), "--applicants",
                                 str(case["applicants"]), "--format", "csv", "--scale", "minmax", "--no-direct-search",
                                 *flags])
    assert result.exit_code == 0, result.stderr
    plans = pd.read_csv(io.StringIO(result.stdout))
    assert (plans["status"] == "infeasible").all()
    return result.stderr


def _hints(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Hint:")]


def test_a_margin_above_every_probability_says_lower_the_margin(income_only):
    favourable = income_only["probability"][income_only["probability"] >= 0.5]
    highest = float(favourable.max())
    margin = round(highest - 0.5 + (1.0 - highest) / 2, 6)          # above the highest, below 1
    (hint,) = _hints(_plan(income_only, "--margin", str(margin), "--max-move", "none"))
    assert hint.startswith("Hint: lower --margin: the highest probability reachable is ")
    assert f"is {highest:.4g} " in hint and f"--margin {margin:g} asks for" in hint
    room = float(re.search(r"a --margin of at most (\S+) keeps", hint).group(1))
    assert room <= highest - 0.5 and highest - 0.5 - room < 1e-4        # a margin that keeps the best row
    assert "immutable" not in hint
    assert _hints(_plan(income_only, "--margin", str(margin), "--max-move", "none", "--immutable", "job")) == [hint]


def _removed(case, outside) -> tuple[int, int]:
    """Oracle: of the favourable training rows (at the threshold, --margin 0), how many the rule
    ``outside(income, applicant_income)`` removes, for the first applicant."""
    favourable = case["frame"][case["probability"] >= 0.5]
    own = float(case["denied"]["income"].iloc[0])
    income = favourable["income"].to_numpy()
    return int((outside(income, own) & (income != own)).sum()), len(favourable)


def test_a_move_bound_that_removes_every_candidate_says_raise_it(income_only):
    span = float(income_only["frame"]["income"].max() - income_only["frame"]["income"].min())
    (hint,) = _hints(_plan(income_only, "--max-move", "income=0.1", "--margin", "0"))
    removed, n_pool = _removed(income_only, lambda income, own: np.abs(income - own) > 0.1 * span)
    assert removed == n_pool
    assert "raise --max-move income=SHARE (now 0.1 of its training range)" in hint
    assert f"it removed {removed} of the {n_pool} favourable training rows (candidates) of applicant 0" in hint
    assert hint.startswith("Hint: 3 applicant(s) have too few candidates, most limited by how far income may move")
    assert "fewer immutable" not in hint and "--immutable-policy" not in hint


def test_a_range_that_removes_every_candidate_says_widen_it(income_only):
    (hint,) = _hints(_plan(income_only, "--range", "income=0:50", "--max-move", "none", "--margin", "0"))
    removed, n_pool = _removed(income_only, lambda income, own: (income < 0) | (income > 50))
    assert removed == n_pool
    assert "most limited by the range of income (0:50): widen --range income=... or [range]" in hint
    assert f"it removed {removed} of the {n_pool} favourable training rows (candidates) of applicant 0" in hint
    assert "fewer immutable" not in hint and "--immutable-policy" not in hint


def test_an_immutable_feature_keeps_its_advice(income_only):
    # applicants of job d, held to it: every favourable row differs in job
    case = {**income_only, "applicants": income_only["folder"] / "job_d.csv"}
    (hint,) = _hints(_plan(case, "--immutable", "job", "--immutable-policy", "filter", "--margin", "0"))
    n_pool = int((income_only["probability"] >= 0.5).sum())
    assert hint.startswith("Hint: 3 applicant(s) have too few candidates, most limited by job, which may not change")
    assert f"it removed {n_pool} of the {n_pool} favourable training rows (candidates) of applicant 0" in hint
    assert "try --immutable-policy project, or declare fewer immutable or monotone features" in hint
    assert "--max-move" not in hint and "--margin" not in hint


def test_causes_are_read_from_each_plans_counts():
    from types import SimpleNamespace

    from frpd_cli.candidates import Exclusion, Shortfall
    from frpd_cli.cli.plan import _CauseTally

    def move(n, name):
        return Exclusion(n, "max-move", name, f"{n} move {name} by more than 900")

    tally = _CauseTally()
    for applicant, shortfall in [
        ("a", Shortfall((move(31, "Credit amount"), Exclusion(3, "immutable", "age", "3 differ in age")), 40)),
        ("b", Shortfall((Exclusion(39, "range", "Credit", "39 are outside the range of Credit (0:5)", detail="0:5"),
                         move(2, "Credit amount")), 40)),
        ("c", Shortfall((move(20, "Credit amount"),), 40)),
        ("d", None),                                  # e.g. "3 prototype(s) are not predicted favourable once decoded"
        ("e", Shortfall((Exclusion(9, "copy", "", "9 repeat another candidate row"), move(2, "Credit")), 40)),
        ("f", Shortfall((move(7, "Credit"),))),       # counted of every training row, not of the favourable ones
    ]:
        tally.add(SimpleNamespace(applicant=applicant, reason="...", shortfall=shortfall))
    groups = tally.groups()
    assert [(g["rule"], g.get("feature"), g["n"]) for g in groups] == [
        ("max-move", "Credit amount", 2), ("range", "Credit", 1), ("other", None, 3)]
    assert (groups[0]["applicant"], groups[0]["removed"], groups[0]["n_pool"]) == ("a", 31, 40)
    assert groups[1]["detail"] == "0:5" and groups[0]["detail"] is None


#: Feature names with spaces, parentheses and a semicolon, and a level with parentheses: the summary and the
#: hints name them whole.
INCOME, JOB, NIGHT = "income (k$); net", "job (shift)", "d (night)"


@pytest.fixture(scope="module")
def odd_names(income_only, tmp_path_factory):
    """The data and model of ``income_only`` with the columns named INCOME and JOB and job d named NIGHT."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    names = {"income": INCOME, "job": JOB}
    frame = income_only["frame"].rename(columns=names).replace({JOB: {"d": NIGHT}})
    model = Pipeline([("prep", ColumnTransformer([("text", OneHotEncoder(handle_unknown="ignore"), [JOB]),
                                                  ("numbers", MinMaxScaler(), [INCOME])])),
                      ("clf", LogisticRegression(C=1.0, max_iter=1000))]).fit(frame[[INCOME, JOB]], frame["label"])
    folder = tmp_path_factory.mktemp("odd_names")
    data, model_path = folder / "train.csv", folder / "model.pkl"
    frame.to_csv(data, index=False)
    joblib.dump(model, model_path)
    denied = income_only["denied"].rename(columns=names)
    denied.to_csv(folder / "applicants.csv", index=False)
    denied.assign(**{JOB: NIGHT}).to_csv(folder / "night.csv", index=False)
    probability = model.predict_proba(frame[[INCOME, JOB]])[:, 1]
    assert (model.predict_proba(denied)[:, 1] < 0.5).all()
    return {"data": data, "model": model_path, "applicants": folder / "applicants.csv", "night": folder / "night.csv",
            "frame": frame, "denied": denied, "probability": probability}


def _summary(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("3 applicant(s): ")]
    return line


@pytest.mark.parametrize("jobs", [(), ("--jobs", "2", "--chunk-size", "1")], ids=["one-process", "workers"])
def test_a_move_bound_of_a_feature_named_with_punctuation_is_named_whole(odd_names, jobs):
    frame = odd_names["frame"]
    span = float(frame[INCOME].max() - frame[INCOME].min())
    favourable = frame[odd_names["probability"] >= 0.5]
    own = float(odd_names["denied"][INCOME].iloc[0])
    income = favourable[INCOME].to_numpy()
    removed = int(((np.abs(income - own) > 0.1 * span) & (income != own)).sum())
    assert removed == len(favourable)                # the bound alone leaves no candidate: it is the cause
    stderr = _plan(odd_names, "--max-move", f"{INCOME}=0.1", "--margin", "0", *jobs)
    # the counts travel with each plan (from worker processes too): the summary names the feature as written
    assert "; 3 infeasible (3 most limited by how far income (k$); net may move (--max-move)); " in _summary(stderr)
    (hint,) = _hints(stderr)
    assert hint.startswith("Hint: 3 applicant(s) have too few candidates, most limited by how far income (k$); net "
                           "may move: raise --max-move 'income (k$); net'=SHARE (now 0.1 of its training range)")
    assert f"it removed {removed} of the {len(favourable)} favourable training rows (candidates) of applicant 0" in hint


def test_an_immutable_feature_named_with_parentheses_is_named_whole(odd_names):
    # applicants of job d (night), held to it: every favourable row differs in the job
    n_pool = int((odd_names["probability"] >= 0.5).sum())
    stderr = _plan({**odd_names, "applicants": odd_names["night"]}, "--immutable", JOB, "--immutable-policy",
                   "filter", "--margin", "0")
    assert "; 3 infeasible (3 most limited by job (shift), which may not change); " in _summary(stderr)
    (hint,) = _hints(stderr)
    assert hint.startswith("Hint: 3 applicant(s) have too few candidates, most limited by job (shift), which may not "
                           f"change (it removed {n_pool} of the {n_pool} favourable training rows (candidates) of "
                           "applicant 0)")


def test_a_range_of_levels_with_parentheses_is_quoted_whole(odd_names):
    # job d (night) only: every favourable row has another job, so the range removes them all
    n_pool = int((odd_names["probability"] >= 0.5).sum())
    assert NIGHT not in set(odd_names["frame"][JOB][odd_names["probability"] >= 0.5])
    stderr = _plan({**odd_names, "applicants": odd_names["night"]}, "--range", f"{JOB}={NIGHT}", "--max-move", "none",
                   "--margin", "0")
    assert "; 3 infeasible (3 most limited by the range of job (shift)); " in _summary(stderr)
    (hint,) = _hints(stderr)
    assert hint.startswith("Hint: 3 applicant(s) have too few candidates, most limited by the range of job (shift) "
                           f"(d (night)): widen --range 'job (shift)'=... or [range] in the schema file: it removed "
                           f"{n_pool} of the {n_pool} favourable training rows (candidates) of applicant 0.")


def _range_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning: the range of")]


def test_a_range_outside_every_training_value_is_warned_about(income_only):
    income = income_only["frame"]["income"]
    for declared, shown, side in [("5e6:6e6", "5e+06:6e+06", "above"), (":5", ":5", "below"), ("95:", "95:", "above")]:
        (warning,) = _range_warnings(_plan(income_only, "--range", f"income={declared}", "--max-move", "none"))
        assert warning.startswith(f"Warning: the range of 'income' ({shown}, from --range or [range] in the schema "
                                  f"file) lies wholly {side} its values in '{income_only['data']}' "
                                  f"(min {income.min():g}, max {income.max():g})")
    # a range holding a training value, if only at one end, is not
    for declared in ("50:1e9", f":{income.min():g}", f"{income.max():g}:", "30:40"):
        result = runner.invoke(app, ["plan", str(income_only["data"]), "--model", str(income_only["model"]),
                                     "--applicants", str(income_only["applicants"]), "--format", "csv",
                                     "--range", f"income={declared}"])
        assert result.exit_code == 0, result.stderr
        assert _range_warnings(result.stderr) == [], declared


def test_schema_warns_about_a_range_of_the_schema_file(income_only, tmp_path):
    schema = tmp_path / "schema.toml"
    schema.write_text('[range]\nincome = "5e6:6e6"\n', encoding="utf-8")
    result = runner.invoke(app, ["schema", str(income_only["data"]), "--schema", str(schema), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    (warning,) = _range_warnings(result.stderr)
    assert "'income' (5e+06:6e+06," in warning and "wholly above" in warning
    assert "Warning" not in result.stdout


def test_a_fact_of_the_applicant_is_never_offered_as_a_rule_to_relax():
    import pandas as pd

    from frpd_cli.cli._hints import infeasible_hints
    from frpd_cli.schema import SchemaSpec, infer_schema

    frame = pd.DataFrame({"priors_count": [0, 1, 2, 5], "age": [20, 30, 40, 50], "job": ["a", "b", "a", "b"],
                          "income": [1.0, 2.0, 3.0, 4.0], "label": [0, 1, 0, 1]})
    schema = infer_schema(frame, SchemaSpec(immutable=("priors_count", "job"), increasing=("age",)))

    def cause(rule, feature):
        return {"rule": rule, "feature": feature, "n": 4, "applicant": 7, "removed": 90, "n_pool": 100,
                "detail": None}

    past, age, job = infeasible_hints([cause("immutable", "priors_count"), cause("increasing", "age"),
                                       cause("immutable", "job")], schema, policy="filter")
    assert past.startswith("Hint: 4 applicant(s) have too few candidates, most limited by priors_count, which may "
                           "not change (it removed 90 of the 100 favourable training rows")
    assert "priors_count is named like a record of the past, so the rule stays" in past
    assert "--immutable-policy project may find more" in past
    assert "age is named like an age, so the rule stays" in age and "--immutable-policy" not in age
    for hint in (past, age):
        assert "fewer immutable" not in hint
    # a feature whose name says nothing keeps the advice to relax it
    assert "declare fewer immutable or monotone features" in job
    # a protected characteristic: a disparity to review, with no setting to relax (projection neither)
    schema = infer_schema(frame.assign(gender=["f", "m"] * 2), SchemaSpec(immutable=("gender",)))
    (gender,) = infeasible_hints([cause("immutable", "gender")], schema, policy="filter")
    assert "gender is named like a protected characteristic, so the rule stays" in gender
    assert "a disparity of the model and its data for review (frpd audit --by gender measures it)" in gender
    assert "--immutable-policy" not in gender and "fewer immutable" not in gender


def test_causes_beyond_the_shown_ones_are_named_not_called_other_reasons():
    import pandas as pd

    from frpd_cli.cli._hints import infeasible_hints
    from frpd_cli.schema import SchemaSpec, infer_schema

    frame = pd.DataFrame({n: [1.0, 2.0, 3.0, 4.0] for n in ("a", "b", "c", "d", "e")} | {"label": [0, 1, 0, 1]})
    schema = infer_schema(frame, SchemaSpec(immutable=("a", "b", "c")))

    def cause(rule, feature, n):
        return {"rule": rule, "feature": feature, "n": n, "applicant": 0, "removed": 9, "n_pool": 10,
                "detail": None}

    causes = [cause("immutable", "a", 5), cause("immutable", "b", 4), cause("immutable", "c", 3),
              cause("max-move", "d", 2), cause("range", "e", 1), {"rule": "other", "n": 6}]
    lines = infeasible_hints(causes, schema, policy="filter")
    assert len(lines) == 4
    assert lines[-1] == ("Hint: 3 more applicant(s) have too few candidates, most limited by d (2), e (1), and 6 for "
                         "other reasons (see each plan's reason).")
    # only causes of no rule: as before
    only_other = infeasible_hints([*causes[:3], {"rule": "other", "n": 6}], schema, policy="filter")
    assert only_other[-1] == "Hint: 6 other applicant(s) have no recourse for other reasons (see each plan's reason)."
