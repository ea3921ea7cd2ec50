"""The numeric columns converted once for the training-row searches, and the O(n) "more than two values" test:
the searches give what they gave with a conversion and a sort per column (the reference below)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from frpd_cli.numeric import more_than_two_values, numeric_columns
from frpd_cli.relations import OrderRelation, find_order_relations, relation_columns
from frpd_cli.schema import SchemaSpec, infer_schema
from frpd_cli.sentinels import Sentinel, find_sentinels


def _reference_order_relations(frame, schema, min_equal_share=0.01):
    """The search as first written: each column converted, its distinct values sorted."""
    out = []
    columns = {}
    for f in schema.features:
        if f.is_numeric and f.name in frame.columns:
            v = pd.to_numeric(frame[f.name], errors="coerce").to_numpy(dtype=np.float64)
            if np.isfinite(v).all() and len(np.unique(v)) > 2:
                columns[f.name] = v
    if len(frame) < 20:
        return []
    mutable = {f.name: f.mutability != "immutable" for f in schema.features}
    for low, a in columns.items():
        for high, b in columns.items():
            if low != high and (mutable[low] or mutable[high]) and np.all(a <= b):
                equal = float(np.mean(a == b))
                if equal >= min_equal_share:
                    out.append(OrderRelation(low, high, len(a), equal))
    return out


def _reference_sentinels(frame, schema, max_share=0.1):
    out = []
    for f in schema.features:
        if not f.is_numeric or f.mutability == "immutable" or f.name not in frame.columns:
            continue
        v = pd.to_numeric(frame[f.name], errors="coerce").to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size == 0 or len(np.unique(v)) <= 2 or v.min() >= 0:
            continue
        low = float(v.min())
        at = int(np.sum(v == low))
        if np.all(v[v < 0] == low) and at <= max_share * v.size:
            out.append(Sentinel(f.name, low, at, int(v.size)))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_more_than_two_values_agrees_with_counting_distinct_values(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 12))
    values = rng.integers(0, int(rng.integers(1, 5)), size=n).astype(np.float64) * rng.choice([1.0, -0.5, 1e300])
    assert more_than_two_values(values) == (len(np.unique(values)) > 2)
    assert more_than_two_values(np.full(5, 3.0)) is False
    assert more_than_two_values(np.array([1.0, 1.0, 2.0, 2.0, 1.0])) is False
    assert more_than_two_values(np.array([2.0, 2.0, 2.0, 1.0, 0.0])) is True


def _awkward(seed, n=60):
    """Parts and wholes, codes and flags, with NaN, inf, constant, two-valued and text-in-numbers columns."""
    rng = np.random.default_rng(seed)
    whole = rng.integers(10, 50, size=n).astype(np.float64)
    part = np.minimum(whole, rng.integers(5, 50, size=n))
    stay = rng.integers(0, 30, size=n).astype(np.float64)
    stay[: int(rng.integers(1, 6))] = -1
    gap = stay.copy()
    gap[3] = np.nan                                       # a NaN: no relation, the code still found
    spike = whole.copy()
    spike[5] = np.inf if seed % 2 else -np.inf            # an infinity
    frame = pd.DataFrame({"part": part, "whole": whole, "stay": stay, "gap": gap, "spike": spike,
                          "flag": rng.integers(0, 2, size=n), "two": rng.choice([-1.0, 4.0], size=n),
                          "same": np.full(n, 7.0), "low": whole - 100, "label": rng.integers(0, 2, size=n)})
    return frame


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("immutable", [(), ("whole",), ("part", "whole"), ("stay",)])
def test_the_searches_over_shared_columns_give_what_a_conversion_and_a_sort_per_column_gave(seed, immutable):
    frame = _awkward(seed)
    # the schema of the rows as read (frpd refuses missing values there); the searches see any frame
    schema = infer_schema(frame.replace([np.inf, -np.inf], 0).fillna(0), SchemaSpec(target="label", immutable=immutable))
    columns = numeric_columns(frame, schema)
    assert list(columns) == [f.name for f in schema.features if f.is_numeric]
    relations = _reference_order_relations(frame, schema)
    sentinels = _reference_sentinels(frame, schema)
    if not immutable:
        assert ("part", "whole") in [(r.low, r.high) for r in relations]
        assert [s.feature for s in sentinels] == ["stay", "gap"]
    assert find_order_relations(frame, schema) == relations
    assert find_order_relations(frame, schema, columns=relation_columns(frame, schema, columns)) == relations
    assert find_sentinels(frame, schema) == sentinels
    assert find_sentinels(frame, schema, columns=columns) == sentinels
