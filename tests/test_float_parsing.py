"""Every CSV frpd reads parses its decimals to the nearest double, as Python's ``float`` does.

The oracle is ``float(text)``, not a pandas version: pandas 2's default parser can be one unit in the last place
off (``40.300000000000004`` read as ``40.3``), which would make the same file give other numbers, and other plans,
under another pandas.
"""

from __future__ import annotations

import numpy as np

from frpd_cli.data import iter_csv, read_csv
from frpd_cli.plans import read_plans


def _hard_decimals(n: int = 400) -> list[str]:
    """Shortest round-trip texts of doubles: 15 to 17 significant digits, where fast parsers slip."""
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.uniform(0, 100, n // 2), rng.lognormal(0, 6, n // 2)])
    return ["40.300000000000004", "0.30000000000000004", "1.0000000000000002"] + [repr(float(v)) for v in values]


def _bits(values) -> list[int]:
    return np.asarray(values, dtype=np.float64).view(np.int64).tolist()


def test_data_files_parse_decimals_exactly(tmp_path):
    texts = _hard_decimals()
    path = tmp_path / "data.csv"
    path.write_text("x,y\n" + "".join(f"{t},{i}\n" for i, t in enumerate(texts)))
    expected = _bits([float(t) for t in texts])
    assert _bits(read_csv(path)["x"]) == expected
    streamed = [v for chunk in iter_csv(path, chunk_size=37) for v in chunk["x"]]
    assert _bits(streamed) == expected


def test_plan_files_parse_decimals_exactly(tmp_path):
    texts = _hard_decimals(40)
    header = "applicant,status,reason,rank,method,cost,probability,x\n"
    rows = "".join(f"a{i},ok,,1,quad,{t},0.75,{t}\n" for i, t in enumerate(texts))
    path = tmp_path / "plans.csv"
    path.write_text(header + rows)
    records = read_plans(path)
    got = [(r["recourses"][0]["cost"], r["recourses"][0]["features"]["x"]) for r in records]
    assert len(got) == len(texts)
    expected = _bits([float(t) for t in texts])
    assert _bits([c for c, _ in got]) == expected
    assert _bits([x for _, x in got]) == expected
