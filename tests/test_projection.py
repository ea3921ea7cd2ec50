"""The immutable-feature policies: filter keeps only rows that already comply; project moves the others."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frpd_cli.dataset import build_training_set
from frpd_cli.exceptions import InputError
from frpd_cli.projection import candidate_set, project_rows
from frpd_cli.schema import SchemaSpec, infer_schema


class RuleModel:
    """Favourable when income >= 50 (a transparent stand-in for a classifier)."""

    threshold = 0.5

    def favorable_probability(self, rows):
        return np.where(rows["income"].to_numpy() >= 50, 0.9, 0.1)


@pytest.fixture
def crafted():
    frame = pd.DataFrame({
        "group": ["a", "a", "b", "b", "b", "c", "a"],
        "age": [30, 20, 40, 25, 35, 50, 31],
        "level": ["low", "high", "mid", "high", "low", "mid", "mid"],
        "income": [60, 70, 80, 90, 55, 65, 10],
        "label": [1, 1, 1, 1, 1, 1, 0],
    })
    spec = SchemaSpec(immutable=("group",), increasing=("age", "level"),
                      ordinal={"level": ("low", "mid", "high")})
    schema = infer_schema(frame, spec)
    model = RuleModel()
    return build_training_set(frame, schema, model), model


def _applicant(training, values):
    raw = pd.DataFrame([values])
    x0 = training.encoder.encode(raw)[0]
    codes0 = training.encoder.constraint_codes(raw)
    return raw.iloc[0], x0, codes0


def test_filter_keeps_only_compliant_rows(crafted):
    training, model = crafted
    raw0, x0, codes0 = _applicant(training, {"group": "a", "age": 25, "level": "low", "income": 20})
    cands = candidate_set(training, model, x0, codes0, raw0, training.favorable, policy="filter")
    # group a and age >= 25: rows 0 (30, low) and 6 (31, mid) but row 6 is unfavourable -> only row 0
    assert cands.rows.tolist() == [0] and not cands.projected.any()


def test_project_moves_rows_onto_applicant_values(crafted):
    training, model = crafted
    raw0, x0, codes0 = _applicant(training, {"group": "a", "age": 25, "level": "mid", "income": 20})
    cands = candidate_set(training, model, x0, codes0, raw0, training.favorable, policy="project")
    # strict: row 0? level low < mid -> not compliant; row 1 age 20 < 25 -> not compliant. None strict.
    assert cands.projected.all()
    assert cands.rows.tolist() == [0, 1, 2, 3, 4, 5]
    raw = cands.raw
    assert (raw["group"] == "a").all()                       # immutable set to the applicant's value
    assert (raw["age"] >= 25).all()                          # increasing clipped up
    order = ["low", "mid", "high"]
    assert all(order.index(v) >= order.index("mid") for v in raw["level"])
    assert raw.loc[1, "age"] == 25 and raw.loc[0, "level"] == "mid"
    np.testing.assert_array_equal(cands.X, training.encoder.encode(raw))
    assert (model.favorable_probability(raw) >= 0.5).all()


def test_project_drops_rows_that_stop_being_favourable(crafted):
    training, _ = crafted

    class GroupSensitive(RuleModel):
        def favorable_probability(self, rows):
            ok = (rows["income"].to_numpy() >= 50) & (rows["group"].to_numpy() != "c")
            return np.where(ok, 0.9, 0.1)

    model = GroupSensitive()
    raw0, x0, codes0 = _applicant(training, {"group": "c", "age": 20, "level": "low", "income": 20})
    cands = candidate_set(training, model, x0, codes0, raw0, training.favorable, policy="project")
    # row 5 already has group c (kept as a strict candidate); every projected row gets group c, which this
    # model never accepts, so none is added
    assert cands.rows.tolist() == [5] and cands.projected.tolist() == [False]


def test_project_rows_is_pure(crafted):
    training, _ = crafted
    before = training.frame.copy()
    project_rows(training, np.array([0, 2]), pd.Series({"group": "b", "age": 60, "level": "high", "income": 1}))
    pd.testing.assert_frame_equal(training.frame, before)


def test_unknown_policy_refused(crafted):
    training, model = crafted
    raw0, x0, codes0 = _applicant(training, {"group": "a", "age": 25, "level": "low", "income": 20})
    with pytest.raises(InputError, match="filter, project"):
        candidate_set(training, model, x0, codes0, raw0, training.favorable, policy="loose")


def _coded_rows(rng, n: int, *, levels: tuple, direction: list):
    """Random encoded rows (4 columns) and constraint codes (2 immutable columns, one monotone column per
    direction) with few distinct values each: ``levels`` = (encoded, immutable, monotone) value counts."""
    from frpd_cli.constraints import ConstraintCodes

    X = rng.integers(0, levels[0], size=(n, 4)).astype(np.float64)
    codes = ConstraintCodes(immutable=rng.integers(0, levels[1], size=(n, 2)).astype(np.float64),
                            monotone=rng.integers(0, levels[2], size=(n, len(direction))).astype(np.float64),
                            direction=np.array(direction, dtype=np.int8))
    return X, codes


def _bare_training(X, codes, pool):
    from frpd_cli.dataset import TrainingSet

    return TrainingSet(frame=None, schema=None, encoder=None, X=X, codes=codes, probability=pool * 1.0,
                       favorable=pool, labeled=pool)


@pytest.mark.parametrize("seed", range(5))
def test_candidate_mask_matches_the_rule_row_by_row(seed):
    # oracle: the actionability rule of constraints.actionable_mask on every row, the pool, and "not equal to
    # the applicant", computed on whole arrays; the data has few distinct values so every case occurs
    from frpd_cli.constraints import actionable_mask
    from frpd_cli.projection import candidate_mask

    rng = np.random.default_rng(seed)
    n = 400
    X, codes = _coded_rows(rng, n, levels=(2, 2, 3), direction=[1, -1])
    pool = rng.random(n) < 0.7
    training = _bare_training(X, codes, pool)
    for applicant in range(20):
        x0, codes0 = X[applicant], codes.row(applicant)
        expected = pool & actionable_mask(codes0, codes) & ~np.all(X == x0, axis=1)
        assert np.array_equal(candidate_mask(training, x0, codes0, pool), expected)
        # the encoded candidate rows are X's rows, whether served from the pool's compact copy or not
        cand = np.flatnonzero(expected)
        for rows in (cand, np.flatnonzero(pool), np.arange(n)):
            Xc, fresh = training.encoded_rows(rows)
            assert np.array_equal(Xc, X[rows]) and (fresh or Xc.base is not X)
    # the cases the rule separates all occur: rows equal to an applicant that pass the constraints, and not
    assert np.any(pool & actionable_mask(codes.row(0), codes) & np.all(X == X[0], axis=1))


@pytest.mark.parametrize("seed", range(3))
def test_candidate_positions_are_the_masks_rows_and_remembered_gathers_are_exact(seed):
    # candidate_positions: the rows of candidate_mask as positions in the pool's compact arrays (ascending);
    # encoded_rows finds them in the pool's compact copy through its table of positions (rows outside the
    # pool, or of another pool, are gathered from X); the table is not pickled
    import pickle

    from frpd_cli.candidates import candidate_positions
    from frpd_cli.projection import candidate_mask

    rng = np.random.default_rng(seed)
    n = 500
    X, codes = _coded_rows(rng, n, levels=(3, 3, 4), direction=[1])
    pools = [rng.random(n) < 0.6, rng.random(n) < 0.4]
    training = _bare_training(X, codes, pools[0])
    for pool in pools:
        for applicant in range(15):
            x0, codes0 = X[applicant], codes.row(applicant)
            pool_rows, at = candidate_positions(training, x0, codes0, pool)
            assert np.array_equal(pool_rows, np.flatnonzero(pool)) and np.all(np.diff(at) > 0)
            rows = pool_rows[at]
            assert np.array_equal(rows, np.flatnonzero(candidate_mask(training, x0, codes0, pool)))
            Xc, fresh = training.encoded_rows(rows)
            assert fresh and np.array_equal(Xc, X[rows])
            outside = np.flatnonzero(~pool)[:3]
            for some in (np.arange(3), np.sort(np.concatenate([rows[:2], outside])), outside):
                assert np.array_equal(training.encoded_rows(some)[0], X[some])
            assert np.array_equal(training._pool_positions_of[1][pool_rows], np.arange(pool_rows.size))
    copy = pickle.loads(pickle.dumps(training))
    assert "_pool_positions_of" not in copy.__dict__


def test_training_set_pool_cache_is_not_pickled(crafted):
    import pickle

    training, _ = crafted
    rows, X_rows = training.pool_rows(training.favorable)
    assert np.array_equal(rows, np.flatnonzero(training.favorable)) and np.array_equal(X_rows, training.X[rows])
    copy = pickle.loads(pickle.dumps(training))
    assert "_pool_rows" not in copy.__dict__
    assert np.array_equal(copy.X, training.X) and copy.codes.immutable_names == training.codes.immutable_names


@pytest.mark.parametrize("n_immutable", [0, 1, 3])
def test_candidate_mask_groups_agree_with_the_rule_on_awkward_codes(n_immutable):
    # the pool is grouped by immutable values once: NaN codes (equal to nothing), 0.0 and -0.0 (equal), values
    # no pool row has, and a second pool array (the grouping of the first must not be reused for it)
    from frpd_cli.constraints import ConstraintCodes, actionable_mask
    from frpd_cli.dataset import TrainingSet
    from frpd_cli.projection import candidate_mask

    rng = np.random.default_rng(n_immutable)
    n = 300
    X = rng.integers(0, 3, size=(n, 3)).astype(np.float64)
    immutable = rng.choice([0.0, -0.0, 1.0, np.nan], size=(n, n_immutable))
    codes = ConstraintCodes(immutable=immutable, monotone=rng.integers(0, 3, size=(n, 1)).astype(np.float64),
                            direction=np.array([1], dtype=np.int8))
    pools = [rng.random(n) < 0.6, rng.random(n) < 0.3]
    training = TrainingSet(frame=None, schema=None, encoder=None, X=X, codes=codes, probability=pools[0] * 1.0,
                           favorable=pools[0], labeled=pools[0])
    applicants = [codes.row(i) for i in range(12)]
    applicants.append(ConstraintCodes(immutable=np.full((1, n_immutable), 7.0), monotone=np.zeros((1, 1)),
                                      direction=codes.direction))
    for pool in pools + pools:
        for i, codes0 in enumerate(applicants):
            x0 = X[min(i, n - 1)]
            expected = pool & actionable_mask(codes0, codes) & ~np.all(X == x0, axis=1)
            assert np.array_equal(candidate_mask(training, x0, codes0, pool), expected)
    if n_immutable:
        zero = np.flatnonzero((immutable == 0).all(axis=1) & pools[0])
        assert np.signbit(immutable[zero]).any() and not np.signbit(immutable[zero]).all()
