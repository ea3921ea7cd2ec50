"""Batch runs of `frpd plan` on large applicant files: throughput and peak memory (bounded by the chunk size).

Run: python benchmarks/bench_batch.py [--sizes 10000,100000,1000000] [--jobs 2]

The data is the paper's 2-D synthetic set (uniform on [-2, 4] x [-2, 7], label 1 when
x2 >= 1 + x1 + 2 x1^2 + x1^3 - x1^4), 2,000 training rows and a small MLP. Applicant files of each size are
written to a temporary folder and planned by the `frpd` command in a child process (csv output to a file),
whose peak resident memory is read from the operating system. Results go to docs/benchmarks.md (section
bench_batch).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402


def _label(X: np.ndarray) -> np.ndarray:
    x1, x2 = X[:, 0], X[:, 1]
    return (x2 >= 1 + x1 + 2 * x1**2 + x1**3 - x1**4).astype(int)


def _uniform(rng, n):
    return np.column_stack([rng.uniform(-2, 4, n), rng.uniform(-2, 7, n)]).round(4)


def _prepare(tmp: Path):
    import joblib
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler

    rng = np.random.default_rng(0)
    X = _uniform(rng, 2000)
    train = pd.DataFrame(X, columns=["x1", "x2"])
    train["label"] = _label(X)
    data = tmp / "train.csv"
    train.to_csv(data, index=False)
    model = Pipeline([("scale", MinMaxScaler()),
                      ("mlp", MLPClassifier(hidden_layer_sizes=(20, 20), max_iter=2000, random_state=0))])
    model.fit(train[["x1", "x2"]], train["label"])
    path = tmp / "model.pkl"
    joblib.dump(model, path)
    return data, path, model


def _write_applicants(path: Path, model, n: int, seed: int = 1) -> None:
    """Denied applicants, written block by block (never all in memory)."""
    rng = np.random.default_rng(seed)
    written = 0
    with open(path, "w", encoding="utf-8") as stream:
        stream.write("x1,x2\n")
        while written < n:
            X = _uniform(rng, 200_000)
            denied = X[model.predict_proba(pd.DataFrame(X, columns=["x1", "x2"]))[:, 1] < 0.5][: n - written]
            pd.DataFrame(denied).to_csv(stream, header=False, index=False, lineterminator="\n")
            written += len(denied)


def _run(data, model, applicants, out, jobs: int, chunk_size: int):
    command = [sys.executable, "-m", "frpd_cli", "plan", str(data), "--model", str(model), "--applicants",
               str(applicants), "--format", "csv", "--output", str(out), "--jobs", str(jobs), "--chunk-size",
               str(chunk_size)]
    # A fresh child per run, so RUSAGE_CHILDREN's maximum is this run's (and its workers') peak.
    script = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script, *command], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"frpd plan failed:\n{done.stderr}")
    peak_kb = int(done.stdout.strip().splitlines()[-1])
    return seconds, peak_kb / 1024


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--chunk-size", type=int, default=256)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, model_path, model = _prepare(tmp)
        for n in sizes:
            applicants = tmp / f"applicants-{n}.csv"
            _write_applicants(applicants, model, n)
            out = tmp / f"plans-{n}.csv"
            seconds, peak_mb = _run(data, model_path, applicants, out, args.jobs, args.chunk_size)
            n_lines = sum(1 for _ in open(out, encoding="utf-8")) - 1
            rows.append({"applicants": f"{n:,}", "jobs": args.jobs, "chunk size": args.chunk_size,
                         "seconds": f"{seconds:.1f}", "applicants/s": f"{n / seconds:.0f}",
                         "peak RSS (MB)": f"{peak_mb:.0f}", "output rows": f"{n_lines:,}",
                         "output MB": f"{out.stat().st_size / 2**20:.0f}"})
            print(rows[-1], file=sys.stderr)
            applicants.unlink()
            out.unlink()
    columns = list(rows[0])
    lines = ["## Large batches (`benchmarks/bench_batch.py`)", "",
             f"Machine: {machine_line()}. `frpd plan` (quad, K = 3, linear) on the paper's 2-D synthetic data "
             "(2,000 training rows, MLP (20, 20)); csv written chunk by chunk to a file. Peak RSS is the largest "
             "resident size of the command or any of its worker processes.", "",
             *markdown_table(rows, columns)]
    publish("bench_batch", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
