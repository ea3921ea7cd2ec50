"""`frpd build-graph` on Adult resampled to 100k and 1M rows: exact and approximate neighbour search.

Run: python benchmarks/bench_graph_scale.py [--sizes 100000,1000000] [--exact-max 100000] [--work DIR]
                                            [--skip-generate]

The sets, the model and the schema flags are those of `bench_scale.py` (same work folder, default
/tmp/frpd-bench-scale; the pools are built there when missing). Per size, `frpd build-graph --pool` with the
defaults (20 neighbours per number of changed categories, 10 favourable neighbours) runs in a fresh process with
`--neighbor-search approximate`, and with `--neighbor-search exact` up to `--exact-max` rows (the exact search on
categorical data is quadratic per immutable group). Reported: CPU seconds (user + system), wall seconds, peak
resident memory, edges, and the recall of the approximate graph: the fraction of the exact graph's edges it holds
(and how many of its edges the exact graph lacks).

Results go to docs/benchmarks.md (section bench_graph_scale).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, publish  # noqa: E402
from benchmarks.bench_scale import _schema_flags, generate, run_frpd  # noqa: E402


def _edge_keys(graph_dir: Path) -> np.ndarray:
    """The edges of a graph artifact as sorted ``src * N + dst`` keys."""
    with np.load(graph_dir / "graph.npz", allow_pickle=False) as z:
        indptr, indices = z["indptr"], z["indices"]
    n = indptr.size - 1
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) * n + indices


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--exact-max", type=int, default=100_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/frpd-bench-scale"))
    parser.add_argument("--skip-generate", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    work = args.work
    if args.skip_generate:
        paths = {"model": work / "adult_mlp.pkl", "sets": {n: work / f"adult_{n}.csv" for n in sizes}}
    else:
        paths = generate(work, sizes)
    model, flags = str(paths["model"]), _schema_flags()
    rows = []
    for n in sizes:
        data, pool = paths["sets"][n], work / f"pool_{n}"
        if not (pool / "manifest.json").exists():
            run_frpd(["build-pool", str(data), "--model", model, *flags, "--out", str(pool)], work)
        keys = {}
        for search in ("exact", "approximate"):
            if search == "exact" and n > args.exact_max:
                continue
            out = work / f"graph_{n}_{search}"
            run = run_frpd(["build-graph", str(data), "--model", model, *flags, "--pool", str(pool), "--out",
                            str(out), "--neighbor-search", search, "--quiet", "--format", "csv"], work)
            keys[search] = _edge_keys(out)
            rows.append({"rows": n, "search": search, **run, "edges": keys[search].size})
            print(rows[-1], file=sys.stderr, flush=True)
        if "exact" in keys:
            common = np.intersect1d(keys["exact"], keys["approximate"], assume_unique=True).size
            rows[-1]["recall"] = common / keys["exact"].size
            rows[-1]["extra"] = keys["approximate"].size - common
    lines = [
        "## Graphs of a million rows (`benchmarks/bench_graph_scale.py`)",
        "",
        f"Machine: {machine_line()}. Adult resampled (`bench_scale.py`), `frpd build-graph --pool` with the defaults "
        "(20 neighbours per number of changed categories, 10 favourable neighbours), one process per run. Recall: "
        "the fraction of the exact graph's edges the approximate graph holds; extra: its edges the exact graph "
        "lacks (a missed neighbour lets a farther one in). Peak memory: `ru_maxrss` of the process.",
        "",
        "| rows | search | CPU s | wall s | peak MB | edges | recall | extra |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        recall = f"{r['recall']:.4f}" if "recall" in r else "-"
        extra = f"{r['extra']:,}" if "extra" in r else "-"
        lines.append(f"| {r['rows']:,} | {r['search']} | {r['cpu']:.1f} | {r['wall']:.1f} | {r['rss_mb']:.0f} | "
                     f"{r['edges']:,} | {recall} | {extra} |")
    publish("bench_graph_scale", lines)


if __name__ == "__main__":
    main()
