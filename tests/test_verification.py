"""Every recourse is checked before it is written; every artifact is re-checked after it is loaded.

Tampering tests edit a payload and then recompute its hash in the manifest (what an attacker, or a careless
script, would do): the sha256 checks pass, so only the load checks stand between the edit and the output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import frpd_cli.planning as planning
from frpd_cli.artifacts import MANIFEST_NAME
from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set, read_training_frame, resolve_spec
from frpd_cli.encoding import fit_encoder
from frpd_cli.exceptions import ArtifactError
from frpd_cli.model import load_model
from frpd_cli.planning import PlanSettings, plan_applicants
from frpd_cli.schema import SchemaSpec, infer_schema
from frpd_cli.verification import (
    PROBABILITY_TOLERANCE,
    RecourseVerificationError,
    check_eigen,
    recourse_violations,
    verify_plans,
)

runner = CliRunner()


def _common(paths):
    return ["--model", str(paths["model"]), "--schema", str(paths["schema"])]


def _tree(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _rehash(folder, name):
    """Recompute a payload's sha256 and size in the manifest, as a tamperer would."""
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    data = (folder / name).read_bytes()
    manifest["payloads"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))


def _rewrite_npz(folder, name, arrays):
    with open(folder / name, "wb") as handle:
        np.savez(handle, **arrays)
    _rehash(folder, name)


# ---------------------------------------------------------------------------- shared inputs


@pytest.fixture(scope="module")
def sample(sample_paths):
    frame = read_training_frame(sample_paths["data"])
    spec = resolve_spec(sample_paths["schema"], SchemaSpec())
    schema = infer_schema(frame, spec)
    model = load_model(sample_paths["model"], favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    applicants = pd.read_csv(sample_paths["applicants"])
    ids = applicants["applicant_id"].astype(str).tolist()
    return training, model, applicants, ids


@pytest.fixture(scope="module")
def plans(sample):
    training, model, applicants, ids = sample
    return [p for chunk in plan_applicants(training, model, applicants, ids, PlanSettings(k=3)) for p in chunk]


@pytest.fixture(scope="module")
def selection(sample_paths, tmp_path_factory):
    out = tmp_path_factory.mktemp("sel") / "sel"
    result = runner.invoke(app, ["select", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                                 str(sample_paths["applicants"]), "--out", str(out), "--save-eigen"])
    assert result.exit_code == 0, result.stderr
    return out


@pytest.fixture
def sel(selection, tmp_path):
    """A private copy of the selection artifact, free to tamper with."""
    copy = tmp_path / "sel"
    copy.mkdir()
    for name, data in _tree(selection).items():
        (copy / name).write_bytes(data)
    return copy


def _first_recourse(plans):
    p = next(i for i, plan in enumerate(plans) if plan.recourses)
    return p, plans[p]


def _with_recourse(plans, p, **changes):
    plan = plans[p]
    first = dataclasses.replace(plan.recourses[0], **changes)
    out = list(plans)
    out[p] = dataclasses.replace(plan, recourses=(first, *plan.recourses[1:]))
    return out


# ---------------------------------------------------------------------------- verify_plans


def test_real_plans_pass_and_are_returned_unchanged(sample, plans):
    training, model, _, _ = sample
    assert sum(len(p.recourses) for p in plans) > 10  # the oracle below checks something
    assert recourse_violations(training, model, plans) == []
    assert verify_plans(training.encoder, model, plans) is plans


def test_graph_plans_pass(sample, sample_paths, tmp_path):
    from frpd_cli.graph import build_graph

    training, model, applicants, ids = sample
    graph = build_graph(training.X, training.codes, n_neighbors=10)
    graph_plans = [p for chunk in plan_applicants(training, model, applicants, ids,
                                                 PlanSettings(k=3, scheme="graph"), graph=graph) for p in chunk]
    assert any(p.recourses for p in graph_plans)
    assert recourse_violations(training.encoder, model, graph_plans) == []


def _violation(sample, plans, **features_or_fields):
    training, model, _, _ = sample
    p, plan = _first_recourse(plans)
    fields = {k: v for k, v in features_or_fields.items() if k in ("cost", "probability", "rank")}
    features = {**plan.recourses[0].features,
                **{k: v for k, v in features_or_fields.items() if k not in fields}}
    bad = _with_recourse(plans, p, features=features, **fields)
    with pytest.raises(RecourseVerificationError) as info:
        verify_plans(training.encoder, model, bad)
    message = str(info.value)
    assert message.startswith("internal error: ") and f"applicant {plan.applicant!r}" in message
    return message


def test_immutable_change_is_an_internal_error(sample, plans):
    _, plan = _first_recourse(plans)
    other = next(v for v in ("male-single", "female-div/sep/mar") if v != plan.applicant_features["personal_status"])
    message = _violation(sample, plans, personal_status=other)
    assert "immutable feature 'personal_status' unchanged" in message and repr(other) in message


def test_monotone_decrease_is_an_internal_error(sample, plans):
    _, plan = _first_recourse(plans)
    message = _violation(sample, plans, age=plan.applicant_features["age"] - 1)
    assert "increasing feature 'age' moves only its allowed way" in message
    ranks = {"none": 0, "little": 1, "moderate": 2, "rich": 3}
    p = next(i for i, pl in enumerate(plans) if pl.recourses and ranks[pl.applicant_features["savings"]] > 0)
    lower = next(k for k, v in ranks.items() if v < ranks[plans[p].applicant_features["savings"]])
    reordered = [plans[p], *plans[:p], *plans[p + 1:]]
    assert "increasing feature 'savings'" in _violation(sample, reordered, savings=lower)


def test_unknown_category_fraction_and_nan_are_internal_errors(sample, plans):
    assert "categories of 'housing' from the training vocabulary" in _violation(sample, plans, housing="castle")
    assert "integer feature 'duration' whole" in _violation(sample, plans, duration=12.5)
    assert "'credit_amount' a finite number" in _violation(sample, plans, credit_amount=math.nan)


def test_below_threshold_and_misreported_probability(sample, plans):
    training, model, _, _ = sample
    p, plan = _first_recourse(plans)
    # the applicant's own row: the model denies it, whatever probability the plan claims
    message = _violation(sample, plans, **plan.applicant_features, probability=0.99)
    assert f"re-predicted favourable (probability >= {model.threshold:g})" in message
    true = plan.recourses[0].probability
    message = _violation(sample, plans, probability=true + 1e-3)
    assert "reported probability equal to the model's" in message
    # noise far below the tolerance is not a violation
    fine = _with_recourse(plans, p, probability=true + PROBABILITY_TOLERANCE / 10)
    assert verify_plans(training.encoder, model, fine) is fine


def test_bad_cost_and_status(sample, plans):
    training, model, _, _ = sample
    assert "cost finite and >= 0" in _violation(sample, plans, cost=math.inf)
    assert "cost finite and >= 0" in _violation(sample, plans, cost=-1.0)
    p, plan = _first_recourse(plans)
    bad = list(plans)
    bad[p] = dataclasses.replace(plan, status="infeasible")
    with pytest.raises(RecourseVerificationError, match="only 'ok' plans carry recourses"):
        verify_plans(training.encoder, model, bad)


def test_one_model_call_per_chunk(sample, plans):
    training, model, _, _ = sample
    calls = []

    class Counting:
        threshold = model.threshold

        def favorable_probability(self, rows):
            calls.append(len(rows))
            return model.favorable_probability(rows)

    verify_plans(training.encoder, Counting(), plans)
    assert calls == [sum(len(p.recourses) for p in plans)]


# ---------------------------------------------------------------------------- plan: nothing written


@pytest.mark.parametrize("breakage", ["immutable", "below-threshold"])
def test_plan_exits_1_and_writes_nothing_when_a_recourse_breaks_a_rule(sample_paths, tmp_path, monkeypatch,
                                                                        breakage):
    real = planning.interpolate_plans

    def broken(encoder, model, raw, *args, **kwargs):
        plans = real(encoder, model, raw, *args, **kwargs)
        p = next(i for i, plan in enumerate(plans) if plan.recourses)
        plan = plans[p]
        if breakage == "immutable":
            old = plan.applicant_features["personal_status"]
            new = next(level for level in ("male-single", "female-div/sep/mar") if level != old)
            features = {**plan.recourses[0].features, "personal_status": new}
        else:
            features = dict(plan.applicant_features)  # the denied applicant, reported as a recourse
        first = dataclasses.replace(plan.recourses[0], features=features)
        plans[p] = dataclasses.replace(plan, recourses=(first, *plan.recourses[1:]))
        return plans

    monkeypatch.setattr(planning, "interpolate_plans", broken)
    output = tmp_path / "plans.csv"
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                                 str(sample_paths["applicants"]), "--format", "csv", "--output", str(output)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "Error: internal error: recourse 1 of applicant 'A" in result.stderr
    rule = "immutable feature 'personal_status'" if breakage == "immutable" else "re-predicted favourable"
    assert rule in result.stderr
    # Not a byte of the plans: the output stays empty (removing the run's empty file and progress file on
    # failure is the output layer's job, tested with it).
    assert not output.exists() or output.read_bytes() == b""
    on_stdout = runner.invoke(app, ["plan", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                                    str(sample_paths["applicants"]), "--format", "jsonl"])
    assert on_stdout.exit_code == 1 and on_stdout.stdout == "" and rule in on_stdout.stderr


# ---------------------------------------------------------------------------- selection artifacts


def _interpolate(sel, paths, out, *extra):
    return runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(paths["model"]),
                               "--out", str(out), "--format", "jsonl", *extra])


def test_untampered_selection_interpolates(sel, sample_paths, tmp_path):
    result = _interpolate(sel, sample_paths, tmp_path / "plans", "--data", str(sample_paths["data"]))
    assert result.exit_code == 0, result.stderr
    assert any(json.loads(line)["recourses"] for line in result.stdout.splitlines())


def test_tampered_selection_changing_an_immutable_feature_refused(sel, sample_paths, tmp_path):
    frame = pd.read_csv(sel / "prototypes.csv", dtype=str, keep_default_na=False)
    line = int(np.flatnonzero(frame["status"] == "ok")[0])
    old = frame.loc[line, "personal_status"]
    frame.loc[line, "personal_status"] = next(v for v in ("male-single", "female-div/sep/mar") if v != old)
    frame.to_csv(sel / "prototypes.csv", index=False, lineterminator="\n")
    _rehash(sel, "prototypes.csv")
    out = tmp_path / "plans"
    result = _interpolate(sel, sample_paths, out)
    assert result.exit_code == 1 and result.stdout == ""
    message = result.stderr
    assert f"'{sel}'" in message and f"prototypes.csv data row {line + 1}" in message
    assert "immutable feature 'personal_status' unchanged" in message and "Re-run: frpd select" in message
    assert not out.exists()


def test_prototype_that_is_not_its_training_row_refused_with_data(sel, sample_paths, tmp_path):
    frame = pd.read_csv(sel / "prototypes.csv", dtype=str, keep_default_na=False)
    line = int(np.flatnonzero(frame["status"] == "ok")[0])
    frame.loc[line, "credit_amount"] = "1234.56"  # a free feature: the applicant's rules still hold
    frame.to_csv(sel / "prototypes.csv", index=False, lineterminator="\n")
    _rehash(sel, "prototypes.csv")
    result = _interpolate(sel, sample_paths, tmp_path / "plans", "--data", str(sample_paths["data"]))
    assert result.exit_code == 1 and result.stdout == ""
    assert f"prototypes.csv data row {line + 1} claims training row {frame.loc[line, 'row']}" in result.stderr
    assert "'credit_amount' is 1234.56 where the training data has" in result.stderr
    # without the training data the prototype still obeys its applicant's rules: the row check needs --data
    assert _interpolate(sel, sample_paths, tmp_path / "plans").exit_code == 0


@pytest.mark.parametrize("column, value, words", [("row", "999999", "names the training row 999999, not a row number in [0, 2000)"),
                                                  ("rank", "7", "has rank 7, not in 1..3")])
def test_selection_rows_and_ranks_out_of_range_refused(sel, sample_paths, tmp_path, column, value, words):
    frame = pd.read_csv(sel / "prototypes.csv", dtype=str, keep_default_na=False)
    line = int(np.flatnonzero(frame["status"] == "ok")[0])
    frame.loc[line, column] = value
    frame.to_csv(sel / "prototypes.csv", index=False, lineterminator="\n")
    _rehash(sel, "prototypes.csv")
    result = _interpolate(sel, sample_paths, tmp_path / "plans", "--data", str(sample_paths["data"]))
    assert result.exit_code == 1 and result.stdout == ""
    assert f"prototypes.csv data row {line + 1} {words}" in result.stderr


def test_interpolate_into_its_own_selection_refused(sel, sample_paths):
    before = _tree(sel)
    result = _interpolate(sel, sample_paths, sel)
    assert result.exit_code == 1 and result.stdout == ""
    # the command line's output check or the artifact writer's own: either names the input it would destroy
    assert "input" in result.stderr and f"'{sel}'" in result.stderr
    assert _tree(sel) == before


def test_select_over_a_graph_artifact_refused_and_kept(sample_paths, tmp_path):
    graph = tmp_path / "graph"
    built = runner.invoke(app, ["build-graph", str(sample_paths["data"]), *_common(sample_paths), "--out",
                                str(graph), "--format", "csv"])
    assert built.exit_code == 0, built.stderr
    before = _tree(graph)
    result = runner.invoke(app, ["select", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                                 str(sample_paths["applicants"]), "--out", str(graph)])
    assert result.exit_code == 1 and result.stdout == ""
    assert "holds a 'graph' artifact; this command writes a 'selection' artifact" in result.stderr
    assert _tree(graph) == before and sorted(p.name for p in tmp_path.iterdir()) == ["graph"]


# ---------------------------------------------------------------------------- eigendecompositions


def _reuse(sel, paths, out):
    return runner.invoke(app, ["select", str(paths["data"]), *_common(paths), "--applicants",
                               str(paths["applicants"]), "--out", str(out), "--reuse-eigen", str(sel)])


def test_reuse_of_intact_eigen_works(sel, sample_paths, tmp_path):
    result = _reuse(sel, sample_paths, tmp_path / "again")
    assert result.exit_code == 0, result.stderr
    assert "Reused" in result.stderr
    assert (tmp_path / "again" / "prototypes.csv").read_bytes() == (sel / "prototypes.csv").read_bytes()


def test_nan_eigenvalues_refused(sel, sample_paths, tmp_path):
    with np.load(sel / "eigen.npz") as archive:
        arrays = {k: archive[k] for k in archive.files}
    key = sorted(k for k in arrays if k.startswith("values_"))[0]
    arrays[key] = arrays[key].copy()
    arrays[key][0] = np.nan
    _rewrite_npz(sel, "eigen.npz", arrays)
    out = tmp_path / "again"
    result = _reuse(sel, sample_paths, out)
    assert result.exit_code == 1 and result.stdout == ""
    assert f"'{sel}'" in result.stderr and f"eigen.npz array '{key}' holds nan at flat position 0" in result.stderr
    assert "eigenpairs must be finite" in result.stderr and not out.exists()


def test_reuse_eigen_into_its_own_folder_refused(sel, sample_paths):
    before = _tree(sel)
    result = _reuse(sel, sample_paths, sel)
    assert result.exit_code == 1 and "input" in result.stderr and f"'{sel}'" in result.stderr
    assert _tree(sel) == before


@pytest.mark.parametrize("edit, words", [
    (lambda a: a.update(values_0=a["values_0"][:-1]), "do not have the shapes"),
    (lambda a: a.update(candidates_0=a["candidates_0"] + 10_000), "not a training row in [0, 100)"),
    (lambda a: a.update(values_7=a["values_0"]), "applicant index 7, but there are 3"),
    (lambda a: a.pop("vectors_0"), "lacks vectors_0"),
    (lambda a: a.update(junk=a["values_0"]), "unknown array 'junk'"),
])
def test_check_eigen_oracles(edit, words):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(5, 2))
    arrays = {"values_0": np.array([2.0, 1.0]), "vectors_0": vectors, "candidates_0": np.arange(5)}
    check_eigen(dict(arrays), n_applicants=3, n_rows=100, artifact="sel", hint="frpd select")
    edit(arrays)
    with pytest.raises(ArtifactError) as info:
        check_eigen(arrays, n_applicants=3, n_rows=100, artifact="sel", hint="frpd select")
    assert "'sel'" in str(info.value) and words in str(info.value)


# ---------------------------------------------------------------------------- graph artifacts


@pytest.fixture
def graph_dir(sample_paths, tmp_path):
    out = tmp_path / "graph"
    result = runner.invoke(app, ["build-graph", str(sample_paths["data"]), *_common(sample_paths), "--out",
                                 str(out), "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    return out


def _graph_plan(paths, graph):
    return runner.invoke(app, ["plan", str(paths["data"]), *_common(paths), "--applicants", str(paths["applicants"]),
                               "--graph", str(graph), "--format", "csv"])


def _edit_graph(graph, edit):
    with np.load(graph / "graph.npz") as archive:
        arrays = {k: archive[k] for k in archive.files}
    edit(arrays)
    _rewrite_npz(graph, "graph.npz", arrays)


def test_graph_with_out_of_range_index_refused(sample_paths, graph_dir):
    def edit(a):
        a["indices"] = a["indices"].copy()
        a["indices"][3] = 10**6

    _edit_graph(graph_dir, edit)
    result = _graph_plan(sample_paths, graph_dir)
    assert result.exit_code == 1 and result.stdout == ""
    assert f"'{graph_dir}' fails its load checks: graph.npz" in result.stderr
    assert "node id 1000000 at position 3" in result.stderr


def test_graph_edge_breaking_an_immutable_feature_refused(sample, sample_paths, graph_dir):
    training = sample[0]
    status = training.frame["personal_status"].to_numpy()

    node = []

    def edit(a):
        # retarget the first edge of a node to a row with another personal_status, keeping the CSR sorted and valid
        u = int(np.flatnonzero(np.diff(a["indptr"]) > 0)[0])
        start, stop = int(a["indptr"][u]), int(a["indptr"][u + 1])
        targets = set(a["indices"][start:stop].tolist())
        other = next(int(r) for r in np.flatnonzero(status != status[u]) if int(r) not in targets)
        row = np.sort(np.array([other, *a["indices"][start + 1:stop].tolist()], dtype=np.int64))
        a["indices"] = np.concatenate([a["indices"][:start], row, a["indices"][stop:]])
        a["directed"] = np.array(True)
        node.append(u)

    _edit_graph(graph_dir, edit)
    result = _graph_plan(sample_paths, graph_dir)
    assert result.exit_code == 1 and result.stdout == ""
    assert f"graph.npz holds the edge {node[0]} -> " in result.stderr
    assert "changes an immutable feature" in result.stderr


@pytest.mark.parametrize("value, words", [(1.89, "holds 1.89 for node 5"), (np.nan, "holds nan for node 5"),
                                          (0.123456, "node 5 probability 0.123456, but the model gives")])
def test_graph_probabilities_checked(sample_paths, graph_dir, value, words):
    def edit(a):
        a["probability"] = a["probability"].copy()
        a["probability"][5] = value

    _edit_graph(graph_dir, edit)
    result = _graph_plan(sample_paths, graph_dir)
    assert result.exit_code == 1 and result.stdout == ""
    assert words in result.stderr


# ---------------------------------------------------------------------------- the numpy screen


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import frpd_cli.verification as verification  # noqa: E402

_VALUES = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0, math.nan, math.inf, -math.inf]),
                    st.sampled_from(["2", "x", None, True]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_VALUES, _VALUES, _VALUES, _VALUES), min_size=1, max_size=6))
def test_numpy_screen_finds_exactly_what_the_row_rules_find(pairs):
    """The screen narrows the rows the exact rules look at; it must never hide a violation."""
    frame = pd.DataFrame({"n": [0, 1, 3], "i": [0, 2, 4], "c": ["a", "b", "a"], "y": [0, 1, 1]})
    spec = SchemaSpec(target="y", favorable=1, integer=("i",), continuous=("n",), immutable=("n",),
                      increasing=("i",))
    encoder = fit_encoder(infer_schema(frame, spec), frame)
    rows = [{"n": a, "i": b, "c": "a"} for a, b, _, _ in pairs]
    origins = [{"n": c, "i": d, "c": "a"} for _, _, c, d in pairs]
    screened = verification._rule_violations(encoder, rows, origins)
    original = verification._suspects
    try:
        verification._suspects = lambda f, rows, origins: range(len(rows))
        exact = verification._rule_violations(encoder, rows, origins)
    finally:
        verification._suspects = original
    assert screened == exact


def test_prototype_hidden_behind_another_status_still_checked(sel, sample_paths, tmp_path):
    """interpolate takes an ok applicant's rows whatever their own status column says: so do the checks."""
    frame = pd.read_csv(sel / "prototypes.csv", dtype=str, keep_default_na=False)
    line = int(np.flatnonzero(frame["status"] == "ok")[0])
    frame.loc[line, "status"] = "infeasible"
    frame.to_csv(sel / "prototypes.csv", index=False, lineterminator="\n")
    _rehash(sel, "prototypes.csv")
    result = _interpolate(sel, sample_paths, tmp_path / "plans")
    assert result.exit_code == 1 and result.stdout == ""
    assert f"prototypes.csv data row {line + 1} has status 'infeasible' for applicant" in result.stderr


def test_duplicated_status_row_refused(sel, sample_paths, tmp_path):
    text = (sel / "status.csv").read_text()
    lines = text.splitlines(keepends=True)
    (sel / "status.csv").write_text(text + lines[1])
    _rehash(sel, "status.csv")
    result = _interpolate(sel, sample_paths, tmp_path / "plans")
    assert result.exit_code == 1 and result.stdout == ""
    assert f"status.csv data row {len(lines)} repeats applicant" in result.stderr


def test_failed_select_keeps_the_previous_selection(selection, sel, sample_paths, tmp_path):
    """A run that fails (here: a damaged --reuse-eigen) leaves the artifact it would replace byte for byte."""
    previous = tmp_path / "previous"
    previous.mkdir()
    for name, data in _tree(selection).items():
        (previous / name).write_bytes(data)
    before = _tree(previous)
    with np.load(sel / "eigen.npz") as archive:
        arrays = {k: archive[k] for k in archive.files}
    key = sorted(k for k in arrays if k.startswith("vectors_"))[0]
    arrays[key] = np.full_like(arrays[key], np.inf)
    _rewrite_npz(sel, "eigen.npz", arrays)
    listing = sorted(p.name for p in tmp_path.iterdir())
    result = _reuse(sel, sample_paths, previous)
    assert result.exit_code == 1 and "eigenpairs must be finite" in result.stderr
    assert _tree(previous) == before and sorted(p.name for p in tmp_path.iterdir()) == listing


def test_linear_interpolate_with_other_data_is_stale(sel, sample_paths, tmp_path):
    other = tmp_path / "other.csv"
    text = sample_paths["data"].read_text().splitlines(keepends=True)
    other.write_text("".join(text[:-1]))  # one training row fewer: row numbers may no longer match
    result = _interpolate(sel, sample_paths, tmp_path / "plans", "--data", str(other))
    assert result.exit_code == 1 and result.stdout == ""
    assert "is stale: its 'data' input" in result.stderr and not (tmp_path / "plans").exists()
