"""`frpd select` per applicant through the command line, next to the selection itself in the library.

Run: python benchmarks/bench_select_cli.py [--n-applicants N] [--runs R] [--quick]

Adult with the paper's protocol (as in bench_plan.py), no constraints, `--method quad`, K = 3, theta = 0.9,
BLAS single-threaded (as bench_select.py). The `frpd select ... --pool DIR` command runs in this process (its
click command, as the console script would run it, minus interpreter start-up) on N denied applicants and on 1,
R times each, interleaved. CLI per applicant = (median time on N - median on 1) / (N - 1): loading cancels,
and everything that grows with the applicants counts (reading them, candidate filtering, the selection,
building the tables, writing the artifact, printing the summary). Library per applicant = the time spent in
compute_geometry + eigen_decompose + select_prototypes (the work bench_select.py times) during the same runs,
so that both numbers see the same machine load. Overhead = CLI - library, as a share of the library time.
Results go to docs/benchmarks.md (section bench_select_cli).
"""

from __future__ import annotations

import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import typer.main  # noqa: E402

import frpd_cli.choice as choice  # noqa: E402
from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402
from frpd_cli.cli.app import app  # noqa: E402

DATASETS = Path(os.environ.get("FRPD_DATASETS", ROOT.parent / "shared" / "datasets"))


_LIBRARY = ("compute_geometry", "eigen_decompose", "select_prototypes")


class _LibraryClock:
    """Accumulates the time spent in the selection functions that the select command calls."""

    def __init__(self):
        self.seconds = 0.0
        self._saved = {}

    def __enter__(self):
        for name in _LIBRARY:
            original = self._saved[name] = getattr(choice, name)

            def timed(*args, _f=original, **kwargs):
                start = time.perf_counter()
                try:
                    return _f(*args, **kwargs)
                finally:
                    self.seconds += time.perf_counter() - start

            setattr(choice, name, timed)
        return self

    def __exit__(self, *exc):
        for name, original in self._saved.items():
            setattr(choice, name, original)


def _select(command, args) -> tuple[float, float]:
    """Wall time of one in-process run of `frpd select`, and the part of it spent in the library's selection."""
    with _LibraryClock() as clock, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        start = time.perf_counter()
        command.main(args, standalone_mode=False)
        seconds = time.perf_counter() - start
    return seconds, clock.seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-applicants", type=int, default=500, help="denied Adult applicants (default 500)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each size (default 5)")
    parser.add_argument("--quick", action="store_true", help="100 applicants, 3 runs")
    args = parser.parse_args(argv)
    n, runs = (100, 3) if args.quick else (args.n_applicants, args.runs)
    if not (DATASETS / "adult.csv").exists():
        print("adult.csv not found; nothing to measure", file=sys.stderr)
        return 0
    from benchmarks.bench_plan import _train_adult

    command = typer.main.get_command(app)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train_path, model_path, _, denied = _train_adult(tmp)
        applicants = denied.head(n).reset_index(drop=True)
        n = len(applicants)
        applicants.to_csv(tmp / "many.csv", index=False)
        applicants.head(1).to_csv(tmp / "one.csv", index=False)
        common = [str(train_path), "--model", str(model_path)]
        subprocess.run([sys.executable, "-m", "frpd_cli", "build-pool", *common, "--out", str(tmp / "pool")],
                       check=True, capture_output=True)
        select = ["select", *common, "--pool", str(tmp / "pool"), "--method", "quad", "--format", "csv"]
        many, one, lib = [], [], []
        load = os.getloadavg()[0]
        for run in range(runs + 1):
            t_many, lib_many = _select(command, [*select, "--applicants", str(tmp / "many.csv"),
                                                 "--out", str(tmp / "sel_many")])
            t_one, lib_one = _select(command, [*select, "--applicants", str(tmp / "one.csv"),
                                               "--out", str(tmp / "sel_one")])
            if run:                       # the first round warms caches and imports
                many.append(t_many)
                one.append(t_one)
                lib.append((lib_many - lib_one) / (n - 1))
    cli_ms = 1e3 * (statistics.median(many) - statistics.median(one)) / (n - 1)
    lib_ms = 1e3 * statistics.median(lib)
    overhead = cli_ms - lib_ms
    rows = [{"applicants": n, "CLI ms/applicant": f"{cli_ms:.2f}", "library ms/applicant": f"{lib_ms:.2f}",
             "overhead ms": f"{overhead:.2f}", "overhead / library": f"{100 * overhead / lib_ms:.0f}%"}]
    lines = ["## select through the CLI vs the library (Adult, quad, no constraints)", "",
             f"Machine: {machine_line()}. Command: `python benchmarks/bench_select_cli.py` (BLAS single-threaded; "
             f"{runs} runs of each size). Load average (1 min) when the runs started: {load:.1f}.", "",
             *markdown_table(rows, list(rows[0])), "",
             "CLI: (median time of the `frpd select --pool` command on N applicants - the same on 1) / (N - 1): "
             "everything that grows with the applicants. Library: the time spent in compute_geometry + "
             "eigen_decompose + select_prototypes during the same runs. Overhead: reading the applicants, "
             "candidate filtering, the selection and status tables, the artifact (csv, npz) and the summary on "
             "stdout."]
    publish("bench_select_cli", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
