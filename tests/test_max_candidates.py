"""--max-candidates: the candidates kept are exactly the nearest ones (brute force, ties by row), plans of
applicants with few enough candidates do not change, and outputs stay byte-identical across --jobs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.candidates import CandidateStage, candidate_mask, nearest_rows
from frpd_cli.choice import PlanSettings
from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set, read_training_frame, resolve_spec
from frpd_cli.exceptions import InputError
from frpd_cli.model import load_model
from frpd_cli.schema import SchemaSpec, infer_schema

runner = CliRunner()


@pytest.fixture(scope="module")
def sample(sample_paths):
    frame = read_training_frame(sample_paths["data"])
    schema = infer_schema(frame, resolve_spec(sample_paths["schema"], SchemaSpec()))
    model = load_model(sample_paths["model"], favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    applicants = pd.read_csv(sample_paths["applicants"]).loc[:, list(schema.feature_names)]
    X0 = training.encoder.encode(applicants)
    codes0 = training.encoder.constraint_codes(applicants)
    raws = [applicants.iloc[i] for i in range(len(applicants))]
    return training, model, X0, codes0, raws


def _brute_force(training, rows, x0, m):
    """The m rows nearest to x0 by a Python sort on (distance, row), each distance computed alone: the oracle.

    (The distance of one row, by the formula the search uses; np.sum instead of einsum can differ in the last
    bit, and on a grid of equal distances that reorders ties.)
    """
    def distance(r):
        diff = training.X[r:r + 1] - x0
        return float(np.sqrt(np.einsum("ij,ij->i", diff, diff))[0])

    keyed = sorted((distance(r), int(r)) for r in rows)
    return sorted(r for _, r in keyed[:m])


def test_nearest_rows_are_the_nearest_candidates(sample):
    training, _, X0, codes0, raws = sample
    pool = training.favorable
    checked = 0
    for i in range(len(raws)):
        rows = np.flatnonzero(candidate_mask(training, X0[i], codes0.row(i), pool, raws[i]))
        for m in (1, 3, 10, 57):
            if rows.size <= m:
                continue
            oracle = _brute_force(training, rows, X0[i], m)
            assert nearest_rows(training, pool, rows, X0[i], m).tolist() == oracle
            checked += 1
    assert checked > 50


def test_nearest_rows_on_random_data_with_ties_match_brute_force():
    """Duplicated rows and a coarse grid (exact ties at the cut): the rows kept are the oracle's."""
    from frpd_cli.constraints import ConstraintCodes
    from frpd_cli.dataset import TrainingSet

    rng = np.random.default_rng(3)
    base = rng.integers(0, 4, size=(400, 3)).astype(np.float64) / 3.0      # a coarse grid: many equal distances
    X = np.vstack([base, base[:100]])
    n = X.shape[0]
    codes = ConstraintCodes(immutable=np.zeros((n, 0)), monotone=np.zeros((n, 0)), direction=np.zeros(0),
                            immutable_names=(), monotone_names=())
    training = TrainingSet(frame=pd.DataFrame({"a": np.zeros(n)}), schema=None, encoder=None, X=X, codes=codes,
                           probability=np.ones(n), favorable=np.ones(n, dtype=bool), labeled=np.ones(n, dtype=bool))
    pool = training.favorable
    for trial in range(20):
        x0 = rng.integers(0, 4, size=3) / 3.0 + (0.0 if trial % 2 else 0.01)
        rows = np.flatnonzero(np.any(X != x0, axis=1))
        rows = rows[rng.random(rows.size) < 0.7]                # candidates: a subset of the group
        for m in (1, 5, 40, 200):
            oracle = _brute_force(training, rows, x0, m)
            assert nearest_rows(training, pool, rows, x0, m).tolist() == oracle, (trial, m)


def test_plans_unchanged_for_applicants_with_few_enough_candidates(sample_paths, sample):
    training, model, X0, codes0, raws = sample
    base = PlanSettings(immutable_policy="filter")
    stage = CandidateStage(training, base, model=model)
    counts = [len(stage.find(X0[i], codes0.row(i), raws[i])) for i in range(len(raws))]
    m = sorted(counts)[len(counts) // 2]                        # about half the applicants have more
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]), "--format", "jsonl",
            "--immutable-policy", "filter", "--quiet"]
    full = runner.invoke(app, args)
    limited = runner.invoke(app, [*args, "--max-candidates", str(m)])
    everything = runner.invoke(app, [*args, "--max-candidates", str(max(counts))])
    assert full.exit_code == limited.exit_code == everything.exit_code == 0, limited.stderr
    assert everything.stdout == full.stdout
    a, b = full.stdout.splitlines(), limited.stdout.splitlines()
    assert len(a) == len(b) == len(counts)
    for line_a, line_b, count in zip(a, b, counts):
        if count <= m:
            assert line_a == line_b
    tiny = runner.invoke(app, [*args, "--max-candidates", "3"])     # the limit is active: the 3 nearest only
    assert tiny.exit_code == 0 and tiny.stdout != full.stdout
    parallel = runner.invoke(app, [*args, "--max-candidates", str(m), "--jobs", "2"])
    assert parallel.exit_code == 0 and parallel.stdout == limited.stdout


def test_max_candidates_is_refused_where_it_cannot_apply(sample):
    training, model, *_ = sample
    with pytest.raises(InputError, match="max_candidates"):
        PlanSettings(k=3, max_candidates=2).validate()
    with pytest.raises(InputError, match="filter rule"):
        CandidateStage(training, PlanSettings(immutable_policy="project", max_candidates=10), model=model)


def test_the_pruning_bound_holds_for_every_set_with_a_left_out_candidate(sample):
    # the oracle: every K-set of the applicant's candidates that holds one --max-candidates left out, its QUAD
    # objective computed from scratch; the bound must be at most the best of them, and "proven" must say whether
    # the chosen set is at least as good as all of them
    from itertools import combinations

    from frpd_cli.choice import select_for_applicant
    from frpd_cli.selection.geometry import compute_geometry
    from frpd_cli.selection.prototypes import quad_objective

    training, model, X0, codes0, raws = sample
    checked, proofs = 0, set()
    for theta in (0.9, 0.3, 0.05):
        full = PlanSettings(method="quad", k=3, theta=theta).validate()
        for i in range(len(raws)):
            every = CandidateStage(training, full, model=model).find(X0[i], codes0.row(i), raws[i]).rows
            if not 6 <= every.size <= 60:
                continue
            m = every.size // 2
            cut = PlanSettings(method="quad", k=3, theta=theta, max_candidates=m).validate()
            (out,) = select_for_applicant(training, X0[i], codes0.row(i), raws[i], cut, model=model)
            kept = np.asarray(nearest_rows(training, training.favorable, every, X0[i], m))
            assert out.pruning is not None and out.pruning["candidates"] == every.size
            assert out.pruning["searched"] == m
            geometry = compute_geometry(training.X[every], X0[i])
            position = {int(r): j for j, r in enumerate(every)}
            left = {position[int(r)] for r in np.setdiff1d(every, kept)}
            best = min(quad_objective(geometry, list(s), theta=theta)
                       for s in combinations(range(every.size), 3) if left & set(s))
            assert out.pruning["bound"] <= best * (1 + 1e-9)
            chosen = quad_objective(geometry, [position[int(r)] for r in out.rows], theta=theta)
            assert out.pruning["objective"] == pytest.approx(chosen, rel=1e-9)
            assert out.pruning["proven"] == (out.pruning["bound"] * (1 - 1e-12) >= out.pruning["objective"])
            if out.pruning["proven"]:
                assert chosen <= best * (1 + 1e-9)          # a proof is a true statement
            proofs.add(out.pruning["proven"])
            checked += 1
    assert checked >= 10 and proofs == {True, False}


def test_pruning_is_reported_only_where_candidates_were_cut(sample_paths, tmp_path):
    import json

    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]), "--format", "jsonl",
            "--theta", "0.1"]
    plain = runner.invoke(app, args)
    cut = runner.invoke(app, [*args, "--max-candidates", "20"])
    two = runner.invoke(app, [*args, "--max-candidates", "20", "--jobs", "2"])
    assert plain.exit_code == cut.exit_code == two.exit_code == 0, cut.stderr
    assert "pruning" not in plain.stdout and cut.stdout == two.stdout
    records = [json.loads(line) for line in cut.stdout.splitlines()]
    pruned = [r["pruning"] for r in records if "pruning" in r]
    assert pruned and len(pruned) < len(records)
    assert all(p["candidates"] > p["searched"] == 20 for p in pruned)
    proven = sum(p["proven"] for p in pruned)
    assert f"cut the candidates of {len(pruned)} applicant(s) to the nearest; for {proven} of them" in cut.stderr
