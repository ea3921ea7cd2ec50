"""Tests of frpd_cli.metrics: hand-computed values, brute-force oracles and invariants."""

import doctest
from functools import lru_cache
from math import isnan, sqrt

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import frpd_cli.metrics as metrics_module
from frpd_cli.exceptions import InputError
from frpd_cli.metrics import (
    X0_NODE,
    NearestRowIndex,
    anti_diversity,
    constraint_violations,
    cost,
    dpp_diversity,
    manifold_distance,
    path_anti_diversity,
    path_diversity,
    path_plan_cost,
    sparsity,
    summarize,
    validity,
)

SQRT2 = sqrt(2.0)


# --------------------------------------------------------------------------- cost, anti-diversity, DPP


def test_two_orthogonal_recourses():
    x0, R = [0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]]
    # distances 1 and 1 -> mean 1
    assert cost(x0, R) == pytest.approx(1.0)
    # directions (1,0) and (0,1): cosine 0, one pair
    assert anti_diversity(x0, R) == pytest.approx(0.0)
    # Q = [[1, a], [a, 1]] with a = 1/(1+sqrt 2) = sqrt 2 - 1, det = 1 - a^2 = 1 - (3 - 2 sqrt 2) = 2 sqrt 2 - 2
    a = 1.0 / (1.0 + SQRT2)
    assert dpp_diversity(R) == pytest.approx(1.0 - a * a)
    assert dpp_diversity(R) == pytest.approx(2 * SQRT2 - 2)


def test_opposite_directions():
    x0, R = [1.0, 1.0], [[2.0, 1.0], [-1.0, 1.0]]
    # directions (1,0) and (-2,0): cosine -1; distances 1 and 2 -> cost 1.5
    assert anti_diversity(x0, R) == pytest.approx(-1.0)
    assert cost(x0, R) == pytest.approx(1.5)
    # the recourses are 3 apart: det [[1, 1/4], [1/4, 1]] = 1 - 1/16
    assert dpp_diversity(R) == pytest.approx(15 / 16)


def test_three_recourses():
    x0, R = [0.0, 0.0], [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    # cost: (1 + 1 + sqrt 2) / 3
    assert cost(x0, R) == pytest.approx((2 + SQRT2) / 3)
    # cosines: (1,0).(0,1) = 0; (1,0).(1,1)/sqrt 2 = 1/sqrt 2; (0,1).(1,1)/sqrt 2 = 1/sqrt 2 -> sum sqrt 2
    assert anti_diversity(x0, R) == pytest.approx(SQRT2)
    # distances d12 = sqrt 2, d13 = 1, d23 = 1; a = 1/(1+sqrt 2) = sqrt 2 - 1
    # Q = [[1, a, 1/2], [a, 1, 1/2], [1/2, 1/2, 1]]
    # det = 1(1 - 1/4) - a(a - 1/4) + 1/2(a/2 - 1/2) = 1/2 + a/2 - a^2 = (5/2) sqrt 2 - 3
    assert dpp_diversity(R) == pytest.approx(2.5 * SQRT2 - 3)


def test_three_recourses_at_120_degrees_reach_the_minimum():
    angles = np.deg2rad([90.0, 210.0, 330.0])
    R = np.column_stack([np.cos(angles), np.sin(angles)]) * [[1.0], [2.0], [3.0]]
    # every pair has cosine -1/2, three pairs -> -3/2 (lengths do not matter)
    assert anti_diversity([0.0, 0.0], R) == pytest.approx(-1.5)


def test_anti_diversity_zero_direction_contributes_zero_but_counts():
    x0, R = [0.0, 0.0], [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]
    # pairs (0,1) and (0,2) involve the zero direction -> 0 each; pair (1,2) -> cosine 1
    assert anti_diversity(x0, R) == pytest.approx(1.0)


def test_single_recourse_and_duplicates():
    # empty sum over pairs
    assert anti_diversity([0.0], [[1.0]]) == 0.0
    # Q = [[1]]
    assert dpp_diversity([[5.0, 5.0]]) == pytest.approx(1.0)
    # two identical recourses: Q = all ones, singular
    assert dpp_diversity([[1.0, 2.0], [1.0, 2.0]]) == pytest.approx(0.0)


def test_path_plan_cost():
    # (0.5 + 1.0 + 3.0) / 3 = 1.5
    assert path_plan_cost([0.5, 1.0, 3.0]) == pytest.approx(1.5)
    with pytest.raises(InputError, match=">= 0"):
        path_plan_cost([1.0, -1.0])
    with pytest.raises(InputError, match="non-empty"):
        path_plan_cost([])


@pytest.mark.parametrize(
    "call",
    [
        lambda: cost([0.0, 0.0], [[1.0, 0.0, 0.0]]),
        lambda: anti_diversity([0.0, 0.0, 0.0], [[1.0, 0.0]]),
    ],
)
def test_mismatched_widths_are_rejected(call):
    with pytest.raises(InputError, match="columns but [23] were expected"):
        call()


def test_malformed_plans_are_rejected():
    with pytest.raises(InputError, match="2-d array"):
        cost([0.0, 0.0], [1.0, 0.0])
    with pytest.raises(InputError, match="no rows"):
        cost([0.0, 0.0], np.empty((0, 2)))
    with pytest.raises(InputError, match="NaN"):
        dpp_diversity([[np.nan, 0.0]])
    with pytest.raises(InputError, match="1-d"):
        cost([[0.0, 0.0]], [[1.0, 0.0]])


# --------------------------------------------------------------------------- validity


def test_validity():
    assert validity(np.array([True, True, True]), 3, 3) == 1.0
    assert validity(np.array([True, False, True]), 3, 3) == 0.0
    # fewer recourses than asked for
    assert validity(np.array([True, True]), 2, 3) == 0.0
    assert validity(np.array([], dtype=bool), 0, 3) == 0.0
    with pytest.raises(InputError, match="one decision per recourse"):
        validity([True, True], 3, 3)
    with pytest.raises(InputError, match="'k' must be an int >= 1"):
        validity([True], 1, 0)


# --------------------------------------------------------------------------- manifold distance


def test_manifold_distance_by_hand():
    X_train = [[0.0, 0.0], [1.0, 1.0]]
    R = [[0.0, 2.0], [1.0, 1.0]]
    # (0,2): to (0,0) = 2, to (1,1) = sqrt 2 -> sqrt 2; (1,1) is a training row -> 0; max = sqrt 2
    assert manifold_distance(R, X_train) == pytest.approx(SQRT2)
    index = NearestRowIndex(X_train)
    assert manifold_distance(R, index=index) == pytest.approx(SQRT2)
    assert index.distance(R) == pytest.approx([SQRT2, 0.0])


def test_manifold_distance_rejects_bad_inputs():
    with pytest.raises(InputError, match="'X_train' or a prebuilt 'index'"):
        manifold_distance([[0.0]])
    with pytest.raises(InputError, match="columns but 2 were expected"):
        manifold_distance([[0.0, 0.0, 0.0]], [[0.0, 0.0]])
    with pytest.raises(InputError, match="NearestRowIndex"):
        manifold_distance([[0.0]], index=object())


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n_features=st.integers(1, 6),
    n_train=st.integers(1, 40),
    k=st.integers(1, 5),
)
def test_manifold_distance_matches_brute_force(data, n_features, n_train, k):
    floats = st.floats(-5, 5, allow_nan=False, allow_infinity=False)
    X = data.draw(hnp.arrays(np.float64, (n_train, n_features), elements=floats))
    R = data.draw(hnp.arrays(np.float64, (k, n_features), elements=floats))
    brute = max(min(float(np.linalg.norm(r - x)) for x in X) for r in R)
    assert manifold_distance(R, X) == pytest.approx(brute, abs=1e-9)
    assert manifold_distance(R, index=NearestRowIndex(X)) == pytest.approx(brute, abs=1e-9)


# --------------------------------------------------------------------------- path diversity (Levenshtein)

# Nodes for the hand-computed examples; the applicant x0 = (0, 0) is not a node.
X_NODES = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [1.0, 3.0]])
X0 = np.array([0.0, 0.0])


def test_levenshtein_identical_paths_is_zero():
    assert path_diversity([[0, 1, 4], [0, 1, 4]], X_NODES) == 0.0
    assert path_diversity([[0, 1, 4], [0, 1, 4]], X_NODES, x0=X0) == 0.0
    assert path_diversity([[0, 1, 4], [0, 1, 4]], X_NODES, weighted=False) == 0.0


def test_levenshtein_disjoint_paths_with_x0():
    # P = (n0, n1) = ((1,0), (2,0)); Q = (n2, n3) = ((0,1), (0,3)); x0 = (0,0)
    # step lengths (deletion costs): P: |n0-x0| = 1, |n1-n0| = 1;  Q: |n2-x0| = 1, |n3-n2| = 2
    # substitution: d(n0,n2) = sqrt2, d(n0,n3) = sqrt10, d(n1,n2) = sqrt5, d(n1,n3) = sqrt13
    # D[0] = [0, 1, 3]; D[1][0] = 1, D[2][0] = 2
    # D[1][1] = min(1+1, 1+1, 0+sqrt2) = sqrt2
    # D[1][2] = min(sqrt2+2, 3+1, 1+sqrt10) = 2+sqrt2
    # D[2][1] = min(2+1, sqrt2+1, 1+sqrt5) = 1+sqrt2
    # D[2][2] = min((1+sqrt2)+2, (2+sqrt2)+1, sqrt2+sqrt13) = 3+sqrt2
    assert path_diversity([[0, 1], [2, 3]], X_NODES, x0=X0) == pytest.approx(3 + SQRT2)


def test_levenshtein_disjoint_paths_without_x0():
    # same paths, first-node deletion costs 0: P steps [0, 1], Q steps [0, 2]
    # D[0] = [0, 0, 2]; D[1][0] = 0, D[2][0] = 1
    # D[1][1] = min(0+0, 0+0, 0+sqrt2) = 0
    # D[1][2] = min(0+2, 2+0, 0+sqrt10) = 2
    # D[2][1] = min(1+0, 0+1, 0+sqrt5) = 1
    # D[2][2] = min(1+2, 2+1, 0+sqrt13) = 3
    assert path_diversity([[0, 1], [2, 3]], X_NODES) == pytest.approx(3.0)


def test_levenshtein_unit_costs():
    # classic edit distance on ids: (0,1,2) -> (0,3): substitute 1->3, delete 2 = 2
    assert path_diversity([[0, 1, 2], [0, 3]], X_NODES, weighted=False) == 2.0


def test_levenshtein_prefix_costs_the_dropped_steps():
    # Q = P + (n4): only option is to insert n4, cost = its step |n4 - n1| = |(1,3)-(2,0)| = sqrt10
    # (substituting instead can only add cost here)
    assert path_diversity([[0, 1], [0, 1, 4]], X_NODES) == pytest.approx(sqrt(10.0))


def test_path_diversity_averages_the_pairs():
    paths = [[0, 1], [2, 3], [0, 1, 4]]
    # pairs: (P0,P1) = 3+sqrt2 (above), (P0,P2) = sqrt10 (above), (P1,P2) by the pairwise call
    p12 = path_diversity([paths[1], paths[2]], X_NODES, x0=X0)
    p02 = path_diversity([paths[0], paths[2]], X_NODES, x0=X0)
    expected = (3 + SQRT2 + p02 + p12) / 3
    assert p02 == pytest.approx(sqrt(10.0))
    assert path_diversity(paths, X_NODES, x0=X0) == pytest.approx(expected)


def test_path_metrics_of_a_single_path_are_nan():
    assert isnan(path_diversity([[0, 1]], X_NODES))
    assert isnan(path_anti_diversity([[0, 1]], X_NODES))


def _paper_lev(P, Q, X, x0):
    """The paper's recursion, written as directly as possible (memoised on tuples)."""

    def d(a, b):
        return float(np.linalg.norm(a - b))

    def drop_cost(S):
        # d(s_last, s_{last-1}); the predecessor of the first node is x0 (or cost 0 without x0)
        if len(S) >= 2:
            return d(X[S[-1]], X[S[-2]])
        return 0.0 if x0 is None else d(X[S[0]], x0)

    @lru_cache(maxsize=None)
    def lev(P, Q):
        if not P and not Q:
            return 0.0
        options = []
        if Q:
            options.append(drop_cost(Q) + lev(P, Q[:-1]))
        if P:
            options.append(drop_cost(P) + lev(P[:-1], Q))
        if P and Q:
            options.append(d(X[P[-1]], X[Q[-1]]) + lev(P[:-1], Q[:-1]))
        return min(options)

    return lev(tuple(P), tuple(Q))


path_strategy = st.lists(st.integers(0, 7), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(
    P=path_strategy,
    Q=path_strategy,
    seed=st.integers(0, 2**32 - 1),
    use_x0=st.booleans(),
)
def test_levenshtein_matches_the_papers_recursion_and_is_symmetric(P, Q, seed, use_x0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(8, 3))
    x0 = rng.normal(size=3) if use_x0 else None
    expected = _paper_lev(P, Q, X, x0)
    assert path_diversity([P, Q], X, x0=x0) == pytest.approx(expected, abs=1e-9)
    assert path_diversity([Q, P], X, x0=x0) == pytest.approx(expected, abs=1e-9)


def test_path_inputs_are_validated():
    with pytest.raises(InputError, match=r"outside \[0, 5\)"):
        path_diversity([[0, 5], [0]], X_NODES)
    with pytest.raises(InputError, match="pass it as 'x0='"):
        path_anti_diversity([[X0_NODE, 0], [0]], X_NODES, x0=X0)
    with pytest.raises(InputError, match="non-empty"):
        path_diversity([[], [0]], X_NODES)
    with pytest.raises(InputError, match="integer node ids"):
        path_diversity([[0.0, 1.0], [0]], X_NODES)
    with pytest.raises(InputError, match="'x0' has 3 features"):
        path_diversity([[0], [1]], X_NODES, x0=[0.0, 0.0, 0.0])


# --------------------------------------------------------------------------- path anti-diversity (Jaccard)


def test_jaccard_identical_paths_is_one():
    assert path_anti_diversity([[0, 1, 4], [0, 1, 4]], X_NODES) == 1.0
    assert path_anti_diversity([[0, 1, 4], [0, 1, 4]], X_NODES, x0=X0) == 1.0


def test_jaccard_disjoint_paths_is_zero():
    assert path_anti_diversity([[0, 1], [2, 3]], X_NODES) == 0.0
    # different first nodes: the x0 edges (-1,0) and (-1,2) differ too
    assert path_anti_diversity([[0, 1], [2, 3]], X_NODES, x0=X0) == 0.0


def test_jaccard_partial_overlap_by_hand():
    # P = (n0, n1): edges (x0,n0) len 1, (n0,n1) len 1
    # Q = (n0, n2, n3): edges (x0,n0) len 1, (n0,n2) len sqrt2, (n2,n3) len 2
    # shared: (x0,n0) = 1; union: 1 + 1 + sqrt2 + 2 = 4 + sqrt2
    assert path_anti_diversity([[0, 1], [0, 2, 3]], X_NODES, x0=X0) == pytest.approx(1 / (4 + SQRT2))
    # without x0 nothing is shared
    assert path_anti_diversity([[0, 1], [0, 2, 3]], X_NODES) == 0.0
    # P = (n0, n1, n4), Q = (n0, n1, n2), no x0: shared (n0,n1) len 1;
    # union 1 + |n4-n1| + |n2-n1| = 1 + sqrt10 + sqrt5
    assert path_anti_diversity([[0, 1, 4], [0, 1, 2]], X_NODES) == pytest.approx(1 / (1 + sqrt(10) + sqrt(5)))


def test_jaccard_edges_are_directed_and_averaged():
    # (n0 -> n1) and (n1 -> n0) are different moves
    assert path_anti_diversity([[0, 1], [1, 0]], X_NODES) == 0.0
    # three paths: Jac(A,B) = 1, Jac(A,C) = Jac(B,C) = 0 -> mean 1/3
    assert path_anti_diversity([[0, 1], [0, 1], [2, 3]], X_NODES) == pytest.approx(1 / 3)


def test_jaccard_degenerate_pairs():
    # single-node paths without x0 have no edges: both edge sets are empty -> 1
    assert path_anti_diversity([[0], [3]], X_NODES) == 1.0
    # zero-length edges only (duplicated rows): falls back to |shared| / |union| = 1/3
    X_dup = np.zeros((3, 2))
    assert path_anti_diversity([[0, 1], [0, 2]], X_dup, x0=[0.0, 0.0]) == pytest.approx(1 / 3)


# --------------------------------------------------------------------------- sparsity and constraint checks


def test_sparsity_counts_changed_features():
    x0 = pd.Series({"age": 30, "job": "a", "amount": 1000.0})
    R = pd.DataFrame({"amount": [1000.0 + 1e-12, 900.0, 900.0], "age": [30, 31, 35], "job": ["a", "a", "b"]})
    # row 0: nothing changed (round-off below atol); row 1: age, amount; row 2: all three
    result = sparsity(x0, R)
    assert result.per_recourse.tolist() == [0, 2, 3]
    assert result.mean == pytest.approx(5 / 3)


def test_sparsity_rejects_mismatched_columns():
    with pytest.raises(InputError, match=r"Missing from raw_R: \['job'\]"):
        sparsity(pd.Series({"age": 1, "job": "a"}), pd.DataFrame({"age": [2]}))


CONSTRAINTS = dict(
    immutable=["sex"],
    increasing=["age", "savings"],
    decreasing=["debt"],
    ordinal_orders={"savings": ["low", "mid", "high"]},
    ranges={"age": (18, 70), "debt": (0, 10)},
    vocabularies={"job": ["a", "b"], "savings": ["low", "mid", "high"]},
)
RAW_X0 = pd.Series({"age": 30, "sex": "f", "savings": "mid", "debt": 5.0, "job": "a"})


def test_constraint_violations_detects_each_kind():
    R = pd.DataFrame(
        [
            # clean: age up, savings mid -> high (rank 1 -> 2), debt down, job in vocabulary
            {"age": 31, "sex": "f", "savings": "high", "debt": 4.0, "job": "b"},
            # immutable sex changed (1); age went down (monotone 1)
            {"age": 29, "sex": "m", "savings": "mid", "debt": 5.0, "job": "a"},
            # age 75 > 70 (range 1); savings mid -> low (monotone 1); debt up (monotone 1); job 'c' (vocabulary 1)
            {"age": 75, "sex": "f", "savings": "low", "debt": 6.0, "job": "c"},
            # savings 'huge' not in order (monotone 1, vocabulary 1); debt 11 up (monotone 1) and > 10 (range 1)
            {"age": 30, "sex": "f", "savings": "huge", "debt": 11.0, "job": "a"},
        ]
    )
    out = constraint_violations(RAW_X0, R, **CONSTRAINTS)
    assert out["immutable"] == 1
    assert out["monotone"] == 1 + 2 + 2
    assert out["range"] == 2
    assert out["vocabulary"] == 2
    assert out["total"] == 10
    assert out["violated"].tolist() == [False, True, True, True]


def test_constraint_violations_clean_plan():
    R = pd.DataFrame(
        [
            {"age": 31, "sex": "f", "savings": "high", "debt": 4.0, "job": "b"},
            {"age": 30, "sex": "f", "savings": "mid", "debt": 5.0, "job": "a"},  # staying put is allowed
        ]
    )
    out = constraint_violations(RAW_X0, R, **CONSTRAINTS)
    assert {k: out[k] for k in ("immutable", "monotone", "range", "vocabulary", "total")} == dict.fromkeys(
        ("immutable", "monotone", "range", "vocabulary", "total"), 0
    )
    assert out["violated"].tolist() == [False, False]


def test_constraint_violations_rejects_bad_declarations():
    R = pd.DataFrame([RAW_X0.to_dict()])
    with pytest.raises(InputError, match="both increasing and decreasing"):
        constraint_violations(RAW_X0, R, increasing=["age"], decreasing=["age"])
    with pytest.raises(InputError, match=r"not columns of the plan: \['height'\]"):
        constraint_violations(RAW_X0, R, immutable=["height"])
    with pytest.raises(InputError, match="not in its declared order"):
        constraint_violations(RAW_X0, R, increasing=["savings"], ordinal_orders={"savings": ["low", "high"]})
    with pytest.raises(InputError, match="ordinal_orders"):
        constraint_violations(RAW_X0, R, increasing=["job"])
    with pytest.raises(InputError, match="lo <= hi"):
        constraint_violations(RAW_X0, R, ranges={"age": (70, 18)})


# --------------------------------------------------------------------------- summarize


def test_summarize_ignores_nan_and_uses_population_std():
    # non-NaN values 1, 3: mean 2, population variance ((1-2)^2 + (3-2)^2) / 2 = 1
    s = summarize([1.0, np.nan, 3.0])
    assert (s.mean, s.std, s.count, s.n_missing) == (2.0, 1.0, 2, 1)
    # 1..4: mean 2.5, variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25 (ddof=0, not 5/3)
    assert summarize([1, 2, 3, 4]).std == pytest.approx(sqrt(1.25))
    assert summarize([5.0]).std == 0.0


def test_summarize_all_missing():
    s = summarize([np.nan, np.nan])
    assert isnan(s.mean) and isnan(s.std) and s.count == 0 and s.n_missing == 2
    assert summarize([]).count == 0
    with pytest.raises(InputError, match="infinite"):
        summarize([1.0, np.inf])


def test_summarize_of_validity_is_the_papers_fraction():
    # validity per applicant 1, 1, 0, 1 -> fraction 0.75
    per_applicant = [validity(np.array([True] * 3), 3, 3)] * 2 + [validity(np.array([True, False, True]), 3, 3)]
    per_applicant.append(1.0)
    assert summarize(per_applicant).mean == pytest.approx(0.75)


def test_docstring_examples_run():
    failures, attempted = doctest.testmod(metrics_module)
    assert attempted > 0 and failures == 0
