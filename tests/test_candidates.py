"""The candidate stage: which training rows may be prototypes, and the counts behind "why not".

Oracles: a ten-row data set worked out by hand (candidate rows, the counts and the exact reason sentence),
and random small data sets where the candidates, the per-constraint counts, the graph's reachable rows,
their path costs and hop counts are computed by brute force over the raw rows (own min-max scaling, own
Dijkstra), never through the library's constraint codes.
"""

from __future__ import annotations

import heapq
import pickle

import numpy as np
import pandas as pd
import pytest

from frpd_cli.candidates import CandidateStage, _distinct_pool_rows, exclusions
from frpd_cli.choice import PlanSettings, select_candidates, select_for_applicant
from frpd_cli.dataset import build_training_set
from frpd_cli.exceptions import InputError
from frpd_cli.graph import build_graph
from frpd_cli.schema import SchemaSpec, infer_schema

LEVELS = ("low", "mid", "high")


class IncomeModel:
    """Favourable probability income / 100 (threshold 0.5)."""

    threshold = 0.5

    def favorable_probability(self, rows):
        return np.asarray(rows["income"], dtype=float) / 100.0


# ------------------------------------------------------------------------------------------ the hand-worked case

HAND = pd.DataFrame({
    "group": ["a", "a", "a", "a", "b", "b", "a", "a", "b", "a"],
    "age": [30, 40, 25, 35, 50, 45, 30, 60, 30, 33],
    "level": ["low", "high", "mid", "low", "mid", "high", "mid", "low", "low", "high"],
    "income": [60.0, 70.0, 80.0, 20.0, 90.0, 55.0, 65.0, 85.0, 85.0, 52.0],
    "label": [1, 1, 0, 0, 1, 1, 1, 0, 1, 0],
})
APPLICANT = {"group": "a", "age": 30, "level": "mid", "income": 30.0}


def _hand_training(ranges=None):
    spec = SchemaSpec(target="label", favorable=1, categorical=("group",), immutable=("group",),
                      increasing=("age", "level"), ordinal={"level": LEVELS}, ranges=ranges or {})
    schema = infer_schema(HAND, spec)
    model = IncomeModel()
    return build_training_set(HAND, schema, model), model


def _encode(training, raw: dict):
    frame = pd.DataFrame([raw])[list(training.schema.feature_names)]
    return training.encoder.encode(frame)[0], training.encoder.constraint_codes(frame)


def _find(training, model, raw=APPLICANT, **settings):
    stage = CandidateStage(training, PlanSettings(immutable_policy="filter", **settings), model=model)
    x0, codes0 = _encode(training, raw)
    return stage.find(x0, codes0, raw)


def test_hand_worked_candidates_counts_and_reason():
    # pool (income >= 50): every row but 3. Row by row against the applicant (group a, age 30, level mid):
    # 0 low level; 1 ok; 2 younger; 4, 5, 8 other group (8 also low level); 6 ok; 7 low level and income 85
    # outside 50:80; 9 ok. Other group: 4, 5, 8; lower level: 0, 7, 8; outside the range: 4, 7, 8; younger: 2.
    training, model = _hand_training({"income": "50:80"})
    found = _find(training, model, k=3)
    assert found.rows.tolist() == [1, 6, 9] and found.reason is None and found.exclusions == ()
    assert found.n_pool == 9 and found.X is None and found.reach is None
    short = _find(training, model, k=4)
    assert short.rows.tolist() == [1, 6, 9]
    assert [(e.constraint, e.feature, e.count) for e in short.exclusions] == [
        ("immutable", "group", 3), ("increasing", "level", 3), ("range", "income", 3), ("increasing", "age", 1)]
    assert short.reason == ("only 3 candidate row(s): of 9 favourable training rows, 3 differ in group "
                            "(applicant: a); 3 have lower level (applicant: mid); 3 are outside the range of income "
                            "(50:80); 1 have lower age (applicant: 30)")
    # selection takes the stage's answer as it is: with 1 <= candidates < K, every candidate (a short plan)
    settings = PlanSettings(immutable_policy="filter", k=4)
    (out,) = select_candidates(training, _encode(training, APPLICANT)[0], short, settings)
    assert out.status == "ok" and out.reason == short.reason and out.n_candidates == 3
    assert sorted(out.rows.tolist()) == [1, 6, 9]
    none = _find(training, model, raw={**APPLICANT, "group": "b", "age": 99}, k=4)
    (out,) = select_candidates(training, _encode(training, APPLICANT)[0], none, settings)
    assert len(none) == 0 and out.status == "infeasible" and out.reason == none.reason and out.rows.size == 0
    assert none.reason.startswith("only 0 candidate row(s), need 4: ")


def test_hand_worked_margin_and_labeled_pools():
    training, model = _hand_training({"income": "50:80"})
    # margin 0.12: favourable means income >= 62 -> pool 1, 2, 4, 6, 7, 8; candidates 1 and 6 (9 is below)
    found = _find(training, model, k=3, margin=0.12)
    assert found.rows.tolist() == [1, 6] and found.n_pool == 6
    assert found.reason == ("only 2 candidate row(s): of 6 favourable training rows, 3 are outside the range "
                            "of income (50:80); 2 differ in group (applicant: a); 2 have lower level (applicant: mid); "
                            "1 have lower age (applicant: 30) (favourable here means probability >= 0.62: "
                            "--threshold plus --margin)")
    # labelled and predicted favourable: rows 0, 1, 4, 5, 6, 8 -> candidates 1 and 6
    labeled = _find(training, model, k=2, candidates="labeled")
    assert labeled.rows.tolist() == [1, 6] and labeled.n_pool == 6 and labeled.reason is None


def test_hand_worked_reasons_without_pool_or_when_only_copies_remain():
    training, model = _hand_training()
    # a margin no row reaches: nothing favourable
    none = _find(training, model, k=1, margin=0.45)
    assert none.rows.size == 0 and none.n_pool == 0
    assert none.reason == ("the model predicts no training row favourable (favourable here means probability "
                           ">= 0.95: --threshold plus --margin)")
    # the applicant is row 7 itself (group a, age 60, level low): row 7 is not its own candidate, and every
    # other favourable row is younger -> no constraint is left to name beyond the age
    row7 = HAND.iloc[7].drop("label").to_dict()
    found = _find(training, model, raw=row7, k=1, margin=0.2)    # pool: income >= 70 -> 1, 2, 4, 7, 8
    assert found.rows.size == 0
    assert found.reason.startswith("only 0 candidate row(s), need 1: of 5 favourable training rows, 4 have lower age")
    assert "differ in group (applicant: a)" in found.reason   # rows 4 and 8


def test_first_copies_whatever_the_column_types():
    # the first row of each set of equal rows and their number, against a count over the raw rows; a categorical
    # column with levels no row has (grouped by what is observed) gives the same
    from frpd_cli.candidates import first_copies

    frame = pd.concat([HAND, HAND.iloc[[3, 0, 9, 0]]], ignore_index=True)
    spec = SchemaSpec(target="label", favorable=1, categorical=("group",), immutable=("group",),
                      increasing=("age", "level"), ordinal={"level": LEVELS})
    for data in (frame, frame.assign(group=pd.Categorical(frame["group"], categories=["z", "b", "a", "y"]))):
        training = build_training_set(data, infer_schema(data, spec), IncomeModel())
        pool = training.pool()
        rows = np.flatnonzero(pool)
        first, copies = first_copies(training, pool)
        keys = [tuple(r) for r in frame.drop(columns="label").to_numpy().tolist()]
        expected = [keys.index(keys[i]) == i or keys[i] not in [keys[j] for j in rows if j < i] for i in rows]
        assert first.tolist() == expected and first.sum() == len(rows) - 3     # rows 0 (twice) and 9 repeated
        assert copies[first].tolist() == [sum(keys[j] == keys[i] for j in rows) for i in rows[first]]
        assert copies[~first].tolist() == [0] * int((~first).sum())


def test_copy_of_against_a_scan_of_the_rows():
    # each row's first copy is the lowest row number with equal values (a missing value equals a missing value),
    # with text, categorical, integer and float columns
    from frpd_cli.pool import copy_of

    rng = np.random.default_rng(5)
    n = 300
    frame = pd.DataFrame({"t": rng.choice(["a", "b", None], n), "i": rng.integers(0, 3, n),
                          "f": rng.choice([0.5, 1.5, np.nan], n)})
    for data in (frame, frame.assign(t=pd.Categorical(frame["t"], categories=["z", "b", "a"]))):
        keys = [tuple("NA" if pd.isna(v) else v for v in row) for row in frame.itertuples(index=False)]
        expected = [keys.index(key) for key in keys]
        got = copy_of(data)
        assert got.dtype == np.int32 and got.tolist() == expected
        assert len(set(expected)) < n // 4                      # the rows do repeat
    assert copy_of(frame.iloc[:0]).tolist() == []


@pytest.mark.parametrize("limit", [None, 2])
def test_pool_grouping_with_codes_too_wide_for_one_integer(limit, monkeypatch):
    # seven immutable columns of over 1,000 levels each: their product passes 2**62, so the codes are renumbered
    # on the way (with a limit of 2, after every column); the groups are those of a scan of the rows
    import frpd_cli.candidates as candidates
    from frpd_cli.candidates import _PoolIndex

    if limit is not None:
        monkeypatch.setattr(candidates, "_CODE_LIMIT", limit)
    from frpd_cli.constraints import ConstraintCodes

    rng = np.random.default_rng(3)
    n = 4000
    immutable = rng.integers(0, 2000, (n, 7)).astype(float)
    immutable[rng.integers(0, n, 40)] = immutable[rng.integers(0, n, 40)]      # some rows share all five
    immutable[7, 2] = np.nan                                                  # never a candidate
    codes = ConstraintCodes(immutable=immutable, monotone=np.zeros((n, 0)), direction=np.zeros(0, dtype=np.int8))
    rows = np.sort(rng.choice(n, 3000, replace=False))
    assert np.prod([float(np.unique(immutable[rows, j]).size) for j in range(7)]) > 2.0 ** 62
    index = _PoolIndex(codes, rows)
    expected: dict = {}
    for at, row in enumerate(rows):
        key = tuple(float(v) for v in immutable[row])
        if not any(v != v for v in key):
            expected.setdefault(key, []).append(at)
    assert {key: at.tolist() for key, at in index.groups.items()} == expected
    assert any(len(at) > 1 for at in expected.values())


def test_projecting_policies_add_their_note_and_need_the_model():
    training, model = _hand_training()
    settings = PlanSettings(immutable_policy="project", k=10)
    stage = CandidateStage(training, settings, model=model)
    x0, codes0 = _encode(training, APPLICANT)
    found = stage.find(x0, codes0, APPLICANT)
    # strict rows 1, 6, 9 first; then the other pool rows with group a, age and level raised to 30 and mid
    # where lower: 0 (60), 2 (80), 4 (90), 5 (55), 7 (85), 8 (85), all distinct and still favourable
    assert found.rows.tolist() == [1, 6, 9, 0, 2, 4, 5, 7, 8]
    assert found.projected.tolist() == [False] * 3 + [True] * 6
    moved = {"group": "a", "age": 30, "level": "mid", "income": 85.0}
    assert np.array_equal(found.X[-1], _encode(training, moved)[0])
    assert np.array_equal(found.X[:3], training.X[[1, 6, 9]])
    assert found.reason == ("only 9 candidate row(s): of 9 favourable training rows, 3 differ in group "
                            "(applicant: a); 3 have lower level (applicant: mid); 1 have lower age (applicant: 30); "
                            "even after projecting the others onto the applicant's immutable values")
    with pytest.raises(InputError, match="needs the model"):
        CandidateStage(training, settings).find(x0, codes0, APPLICANT)


def test_the_pool_is_one_array_per_question_and_is_favourable_at_the_level():
    training, _ = _hand_training()
    assert training.pool("predicted") is training.favorable
    labeled = training.pool("labeled")
    assert labeled is training.pool("labeled")
    assert labeled.tolist() == (training.favorable & (HAND["label"] == 1).to_numpy()).tolist()
    high = training.pool("predicted", threshold=0.62)
    assert high is training.pool("predicted", threshold=0.62)
    assert np.flatnonzero(high).tolist() == [1, 2, 4, 6, 7, 8]
    assert np.flatnonzero(training.pool("labeled", threshold=0.62)).tolist() == [1, 4, 6, 8]
    copy = pickle.loads(pickle.dumps(training))
    assert np.array_equal(copy.pool("labeled", threshold=0.62), training.pool("labeled", threshold=0.62))


# ------------------------------------------------------------------------------------------ brute force

FEATURES = ["group", "age", "level", "debt", "sector", "income"]


class DebtIncomeModel:
    threshold = 0.5

    def favorable_probability(self, rows):
        return np.clip(np.asarray(rows["income"], float) / 100.0 + 0.04 * np.asarray(rows["debt"], float), 0, 1)


def _random_case(seed: int, n: int = 70, copies: int = 0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "group": rng.choice(["a", "b", "c"], n),
        "age": rng.integers(20, 26, n),
        "level": rng.choice(list(LEVELS), n),
        "debt": rng.integers(0, 4, n),
        "sector": rng.choice(["x", "y", "z"], n),
        "income": rng.integers(0, 10, n) * 10.0,
        "label": rng.integers(0, 2, n),
    })
    if copies:          # copies of some rows (labels drawn apart), everything shuffled: a copy may come first
        extra = frame.iloc[rng.integers(0, n, copies)].assign(label=rng.integers(0, 2, copies))
        frame = pd.concat([frame, extra], ignore_index=True).iloc[rng.permutation(n + copies)].reset_index(drop=True)
    spec = SchemaSpec(target="label", favorable=1, categorical=("group", "sector"), immutable=("group",),
                      increasing=("age", "level"), decreasing=("debt",), ordinal={"level": LEVELS},
                      ranges={"income": "20:70", "sector": "x,y"})
    schema = infer_schema(frame, spec)
    model = DebtIncomeModel()
    return frame, build_training_set(frame, schema, model), model


def _brute(frame: pd.DataFrame, pool: np.ndarray, raw0: dict):
    """Candidate rows and per-constraint counts, row by row over the raw values; a row equal to an earlier
    candidate is a copy (not a candidate, counted apart)."""
    rank = {v: i for i, v in enumerate(LEVELS)}
    rules = [("immutable", "group", lambda r: r["group"] == raw0["group"]),
             ("increasing", "age", lambda r: r["age"] >= raw0["age"]),
             ("increasing", "level", lambda r: rank[r["level"]] >= rank[raw0["level"]]),
             ("decreasing", "debt", lambda r: r["debt"] <= raw0["debt"]),
             ("range", "sector", lambda r: r["sector"] in ("x", "y") or r["sector"] == raw0["sector"]),
             ("range", "income", lambda r: 20 <= r["income"] <= 70 or r["income"] == raw0["income"])]
    # exclusions list ranges in schema order (sector before income), after the immutable and monotone rules
    counts = {(kind, name): 0 for kind, name, _ in rules}
    rows, seen, n_copies = [], set(), 0
    for i, r in enumerate(frame[FEATURES].to_dict("records")):
        if not pool[i]:
            continue
        ok = True
        for kind, name, rule in rules:
            if not rule(r):
                counts[(kind, name)] += 1
                ok = False
        if ok and any(r[f] != raw0[f] for f in FEATURES):
            key = tuple(r[f] for f in FEATURES)
            if key in seen:
                n_copies += 1
            else:
                seen.add(key)
                rows.append(i)
    order = [key for key in counts if counts[key]]
    order.sort(key=lambda key: -counts[key])
    return rows, [(kind, name, counts[(kind, name)]) for kind, name in order], n_copies


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("candidates,margin", [("predicted", 0.0), ("labeled", 0.0), ("predicted", 0.15)])
@pytest.mark.parametrize("pooled", [False, True])
def test_filter_candidates_and_counts_match_brute_force(seed, candidates, margin, pooled):
    frame, training, model = _random_case(seed, copies=25)
    if pooled:          # the copies as a pool gives them (over every row, not only the favourable ones)
        from frpd_cli.pool import copy_of

        object.__setattr__(training, "_copy_of", copy_of(frame[FEATURES]))
    prob = model.favorable_probability(frame)
    pool = prob >= 0.5 + margin
    if candidates == "labeled":
        pool &= (frame["label"] == 1).to_numpy()
    applicants = frame[FEATURES].head(25).to_dict("records")           # each equals its own row
    rng = np.random.default_rng(100 + seed)
    applicants += [dict(zip(FEATURES, (rng.choice(["a", "b", "c"]), int(rng.integers(20, 26)), rng.choice(LEVELS),
                                       int(rng.integers(0, 4)), rng.choice(["x", "y", "z"]),
                                       float(rng.integers(0, 10) * 10))))
                   for _ in range(15)]
    n_short = n_copies = 0
    for raw0 in applicants:
        expected, counts, copies = _brute(frame, pool, raw0)
        n_copies += copies
        k = 4
        found = _find(training, model, raw=raw0, k=k, candidates=candidates, margin=margin)
        assert found.rows.tolist() == expected
        assert found.n_pool == int(pool.sum())
        x0, codes0 = _encode(training, raw0)
        assert [(e.constraint, e.feature, e.count) for e in exclusions(training, codes0, pool, raw0)] == counts
        # the pool's distinct rows with their codes gathered once (what an explained applicant reads)
        distinct = _distinct_pool_rows(training, pool)
        assert [(e.constraint, e.feature, e.count)
                for e in exclusions(training, codes0, pool, raw0, copies=distinct)] == counts
        if len(expected) < k:
            n_short += 1
            parts = counts + [("copy", "", copies)] * bool(copies)
            parts.sort(key=lambda part: -part[2])
            assert [(e.constraint, e.feature, e.count) for e in found.exclusions] == parts
            assert (f"{copies} repeat another candidate row" in found.reason) == bool(copies)
            need = f", need {k}" if not expected else ""    # with some candidates the plan holds them (short)
            assert f"only {len(expected)} candidate row(s){need}: of {int(pool.sum())} favourable" in found.reason
        else:
            assert found.reason is None
        # the linear scheme's selection sees exactly these candidates
        settings = PlanSettings(method="nearest", k=min(k, max(1, len(expected))), theta=0.0,
                                immutable_policy="filter", candidates=candidates, margin=margin)
        out = select_for_applicant(training, x0, codes0, raw0, settings, model=model)[0]
        if len(expected) >= settings.k:
            assert set(out.rows.tolist()) <= set(expected) and out.n_candidates == len(expected)
    assert n_short and (n_copies or candidates == "labeled")  # the counts and the copies were exercised


def _scaled(frame: pd.DataFrame) -> np.ndarray:
    """Min-max scaled x and y (the graph test's only features besides the immutable group)."""
    cols = []
    for name in ("x", "y"):
        v = frame[name].to_numpy(float)
        cols.append((v - v.min()) / (v.max() - v.min()))
    return np.column_stack(cols)


def _dijkstra(P: np.ndarray, group, y, p0, g0, y0, radius: float, limit: float):
    """Costs and hop counts from the applicant over moves of length in (0, radius] that keep the group and
    do not lower y; nodes beyond ``limit`` are unreached."""
    n = len(P)
    dist, hops = np.full(n, np.inf), np.full(n, -1)
    heap = []
    for v in range(n):
        d = float(np.linalg.norm(P[v] - p0))
        if group[v] == g0 and y[v] >= y0 and 0 < d <= radius and d <= limit:
            heapq.heappush(heap, (d, 1, v))
    while heap:
        d, h, u = heapq.heappop(heap)
        if np.isfinite(dist[u]):
            continue
        dist[u], hops[u] = d, h
        for v in range(n):
            w = float(np.linalg.norm(P[v] - P[u]))
            if not np.isfinite(dist[v]) and group[v] == group[u] and y[v] >= y[u] and 0 < w <= radius \
                    and d + w <= limit:
                heapq.heappush(heap, (d + w, h + 1, v))
    return dist, hops


class XModel:
    threshold = 0.5

    def favorable_probability(self, rows):
        return np.clip(np.asarray(rows["x"], float) / 10.0, 0, 1)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("max_hops,max_cost", [(None, None), (2, None), (None, 0.45)])
def test_graph_candidates_match_brute_force_reachability(seed, max_hops, max_cost):
    rng = np.random.default_rng(seed)
    n = 60
    frame = pd.DataFrame({"group": rng.choice(["a", "b"], n), "x": rng.random(n) * 10, "y": rng.random(n) * 10,
                          "label": rng.integers(0, 2, n)})
    spec = SchemaSpec(target="label", favorable=1, categorical=("group",), immutable=("group",),
                      increasing=("y",), continuous=("x", "y"), ranges={"y": ":8"})
    model = XModel()
    training = build_training_set(frame, infer_schema(frame, spec), model)
    radius = 0.22
    graph = build_graph(training.X, training.codes, radius=radius)
    P = _scaled(frame)
    group, y = frame["group"].to_numpy(), frame["y"].to_numpy()
    pool = frame["x"].to_numpy() / 10 >= 0.5
    settings = PlanSettings(method="nearest", k=3, theta=0.0, scheme="graph", max_hops=max_hops, max_cost=max_cost)
    stage = CandidateStage(training, settings, model=model, graph=graph)
    n_short = n_ok = 0
    for _ in range(25):
        raw0 = {"group": rng.choice(["a", "b"]), "x": float(rng.random() * 4), "y": float(rng.random() * 7)}
        p0 = (np.array([raw0["x"], raw0["y"]]) - frame[["x", "y"]].min().to_numpy()) / \
            (frame[["x", "y"]].max() - frame[["x", "y"]].min()).to_numpy()
        dist, hops = _dijkstra(P, group, y, p0, raw0["group"], raw0["y"], radius,
                               np.inf if max_cost is None else max_cost)
        actionable = pool & (group == raw0["group"]) & (y >= raw0["y"]) & (y <= 8)
        reachable = actionable & np.isfinite(dist)
        if max_hops is not None:
            reachable &= hops <= max_hops
        x0, codes0 = _encode(training, raw0)
        found = stage.find(x0, codes0, raw0)
        assert found.rows.tolist() == np.flatnonzero(reachable).tolist()
        assert found.proximity == pytest.approx(dist[reachable], rel=1e-12)
        assert np.array_equal(found.ends, pool & (y <= 8))
        assert np.array_equal(np.isfinite(found.reach.dist), np.isfinite(dist))
        if len(found) < 3:
            n_short += 1
            reached = int(np.isfinite(dist).sum())
            assert found.reason.startswith(
                f"only {len(found)} candidate row(s) reachable on the graph{', need 3' if not len(found) else ''}: "
                f"the applicant reaches {reached} "
                f"of {n} training rows") or found.reason.startswith("the applicant has no actionable neighbour")
            if not found.reason.startswith("the applicant has no"):
                assert f", {int((np.isfinite(dist) & pool).sum())} of them favourable" in found.reason
                if actionable.sum() >= 3:
                    assert f"; {int(actionable.sum())} favourable rows are actionable but not reachable: " in found.reason
                    assert found.reason.endswith("rebuild the graph with a larger --radius (now 0.22)")
                else:   # then the counts of the linear filter say why
                    assert f"; only {int(actionable.sum())} favourable row(s) are actionable at all: of " \
                        f"{int(pool.sum())} favourable training rows, " in found.reason
                    assert f"{int((pool & (group != raw0['group'])).sum())} differ in group" in found.reason
        else:
            n_ok += 1
            (out,) = select_candidates(training, x0, found, settings)
            # nearest on the graph: the k cheapest paths among exactly these candidates
            cheapest = np.flatnonzero(reachable)[np.lexsort((np.flatnonzero(reachable), dist[reachable]))][:3]
            assert out.rows.tolist() == cheapest.tolist()
    assert n_short and n_ok


@pytest.mark.parametrize("policy", ["filter", "auto", "project"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_moved_into_the_bounds_match_a_row_by_row_rule(policy, seed, monkeypatch):
    # the rows moved_candidates re-predicts: read from the pool's grouping, they must be those a rule over every
    # row gives (same immutable values, the categorical ones only under auto; monotone moves the allowed way;
    # not already taken; the nearest few, ties by row)
    import frpd_cli.candidates as C

    monkeypatch.setattr(C, "MOVED_NEAREST", 7)
    rng = np.random.default_rng(seed)
    n = 90
    frame = pd.DataFrame({
        "group": rng.choice(["a", "b"], n), "years": rng.integers(0, 3, n), "age": rng.integers(20, 26, n),
        "level": rng.choice(list(LEVELS), n), "debt": rng.integers(0, 4, n), "income": rng.integers(0, 10, n) * 10.0,
        "label": rng.integers(0, 2, n)})
    frame = pd.concat([frame, frame.iloc[rng.integers(0, n, 30)]], ignore_index=True)   # copies of some rows,
    n += 30
    frame = frame.iloc[rng.permutation(n)].reset_index(drop=True)                         # a copy may come first
    spec = SchemaSpec(target="label", favorable=1, categorical=("group",), immutable=("group", "years"),
                      increasing=("age", "level"), decreasing=("debt",), ordinal={"level": LEVELS})
    training = build_training_set(frame, infer_schema(frame, spec), DebtIncomeModel())
    pool = rng.random(n) < 0.6
    rank = {v: i for i, v in enumerate(LEVELS)}
    # the first pool row with its values stands for its copies (they would move to the same row)
    features = frame.drop(columns="label")
    first = pool & ~features.where(np.repeat(pool[:, None], features.shape[1], axis=1)).duplicated().to_numpy()
    assert (pool & ~first).sum() >= 5
    for a in range(0, n, 9):
        taken = np.flatnonzero(first)[a % 5::6]
        r0 = frame.iloc[a]
        ok = first.copy()
        ok[taken] = False
        if policy != "project":
            ok &= (frame["group"] == r0["group"]).to_numpy() & (frame["age"] >= r0["age"]).to_numpy()
            ok &= (frame["level"].map(rank) >= rank[r0["level"]]).to_numpy() & (frame["debt"] <= r0["debt"]).to_numpy()
            if policy == "filter":
                ok &= (frame["years"] == r0["years"]).to_numpy()
        rows = np.flatnonzero(ok)
        d = ((training.X[rows] - training.X[a]) ** 2).sum(axis=1)
        expected = np.sort(rows[np.lexsort((rows, d))[:7]])
        got = C._movable_rows(training, training.X[a], training.codes.row(a), pool, taken, policy)
        assert np.array_equal(got, expected), (policy, a)
