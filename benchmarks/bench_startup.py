"""Start-up time of the command line, next to the interpreter's floors, and what a training pool saves.

Run: python benchmarks/bench_startup.py [--runs N] [--quick]

Every command is run N times (default 10) as a fresh process, in rounds: each round runs every command once, in
an order shuffled per round (fixed seed), so that a change of machine load hits all of them alike and no command
always follows the same one. A command's distance to its floor is taken within each round (its time minus the
floor's time in that round) and the table reports the median of these paired differences and their spread
(minimum and maximum over the rounds), next to the median, minimum and maximum of the raw times: on a shared
machine the floor itself moves by seconds between runs, the paired difference much less. Floors: `python -c pass`
(for --version and --help) and `python -c "import sklearn, pandas"` (for a
one-applicant plan, which has to load a scikit-learn model). One-applicant plans run on the sample data and,
when ../shared/datasets/adult.csv is present, on Adult (the paper's protocol, as in bench_plan.py), each
without and with --pool (a pool from `frpd build-pool`). A second table times the stages of the one-applicant
sample plan inside one process (N fresh processes, CPU time, medians). Results go to docs/benchmarks.md (section
bench_startup).

frpd's own modules are byte-compiled first (``compileall``), as ``pip install`` does for an installed package
and as Python does on a first run unless PYTHONDONTWRITEBYTECODE is set: otherwise an editable install in an
environment that sets it would compile frpd's sources on every run and the table would measure that.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402

DATASETS = Path(os.environ.get("FRPD_DATASETS", ROOT.parent / "shared" / "datasets"))
PY = sys.executable


def _frpd() -> list[str]:
    script = Path(PY).with_name("frpd")
    return [str(script)] if script.exists() else [PY, "-m", "frpd_cli"]


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system, the command and its children) of one run."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr.decode(errors='replace')}")
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _rounds(commands: dict[str, list[str]], runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU times of every command, ``runs`` rounds; entry i of every list is round i."""
    import random

    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():       # warm the file cache
        _run(argv)
    order = list(commands)
    shuffle = random.Random(0).shuffle
    for _ in range(runs):
        shuffle(order)
        for name in order:
            wall, used = _run(commands[name])
            times[name].append(wall)
            cpu[name].append(used)
    return times, cpu


def _paired(values: list[float], floor: list[float]) -> list[float]:
    """Per-round differences to the floor (same round, so under the same load)."""
    return [v - f for v, f in zip(values, floor)]


# Where a one-applicant plan spends its CPU time, measured inside one process: the floor's imports, then each
# stage of `frpd plan` by wrapping the functions that do it (process_time; the wrappers cost microseconds).
_STAGES = r"""
import json, sys, time
T = time.process_time
t0 = T()
import sklearn, pandas
spent = {"floor: import sklearn, pandas": T() - t0}
def add(label, seconds):
    spent[label] = spent.get(label, 0.0) + seconds
def timed(owner, name, label):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = T()
        try:
            return real(*args, **kwargs)
        finally:
            add(label, T() - start)
    setattr(owner, name, wrapper)
def timed_stream(owner, name, label):
    real = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = T()
        stream = real(*args, **kwargs)
        add(label, T() - start)
        while True:
            start = T()
            try:
                item = next(stream)
            except StopIteration:
                add(label, T() - start)
                return
            add(label, T() - start)
            yield item
    setattr(owner, name, wrapper)
sys.argv = ["frpd", *json.loads(sys.argv[1])]
t1 = T()
import frpd_cli.cli.app as app
add("typer and frpd's command line", T() - t1)
load_command = app._load_command
def load_and_instrument(name):
    start = T()
    command = load_command(name)
    import frpd_cli.cli.plan as plan, frpd_cli.dataset as dataset, frpd_cli.model as model
    add("the plan command's modules (frpd, rich)", T() - start)
    timed(model, "load_model", "unpickling the model (its scikit-learn modules)")
    timed(dataset, "build_training_set", "encoding and scoring the training rows")
    timed_stream(plan, "plan_stream", "planning the applicant")
    real = model.Model.favorable_probability
    def scored(self, rows):
        start = T()
        try:
            return real(self, rows)
        finally:
            first = "(number of model calls)" not in spent
            add("(of which the first model call: the training rows, and scikit-learn's check of the compiled "
                "preprocessing)" if first else "(of which the other model calls)", T() - start)
            add("(number of model calls)", 1.0)
    model.Model.favorable_probability = scored
    return command
app._load_command = load_and_instrument
try:
    app.app()           # the command itself (main() would end the process before this script reports)
except SystemExit:
    pass
total = T() - t0
named = sum(v for k, v in spent.items() if not k.startswith("("))
spent["everything else (reading the files, schema, output)"] = total - named
spent["total"] = total
print(json.dumps(spent), file=sys.stderr)
"""


def _stages(plan_args: list[str], runs: int) -> list[dict]:
    """Median CPU seconds of each stage of a one-applicant plan (see _STAGES), over ``runs`` fresh processes."""
    import json

    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        done = subprocess.run([PY, "-c", _STAGES, json.dumps(plan_args)], capture_output=True, text=True, cwd=ROOT,
                              check=True)
        for label, value in json.loads(done.stderr.strip().splitlines()[-1]).items():
            samples.setdefault(label, []).append(value)
    rows = []
    # the stages in the order they ran, then the total, then what the model calls took inside two of them
    order = sorted(samples, key=lambda label: (label.startswith("("), label == "total"))
    order = [label for label in order if label != "total"] + ["total"]
    order = [label for label in order if not label.startswith("(")] + [label for label in order if label.startswith("(")]
    for label in order:
        values = samples[label]
        shown = f"{statistics.median(values):.0f} calls" if label == "(number of model calls)" else \
            f"{1000 * statistics.median(values):.0f}"
        rows.append({"stage": label, "median CPU ms": shown})
    return rows


def _compile_frpd() -> str:
    """Byte-compile the frpd_cli package the measured command imports; return where it lives."""
    where = subprocess.run([PY, "-c", "import frpd_cli, os; print(os.path.dirname(frpd_cli.__file__))"],
                           capture_output=True, text=True, check=True, cwd=ROOT).stdout.strip()
    subprocess.run([PY, "-m", "compileall", "-q", where], check=True, capture_output=True)
    return where


def _sample_model(tmp: Path) -> Path:
    model = ROOT / "sample_data" / "model.pkl"
    if not model.exists():
        model = tmp / "model.pkl"
        subprocess.run([PY, str(ROOT / "sample_data" / "train_model.py"), "--out", str(model)], check=True)
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (default 10)")
    parser.add_argument("--quick", action="store_true", help="3 runs, no Adult")
    args = parser.parse_args(argv)
    runs = 3 if args.quick else args.runs
    frpd = _frpd()
    _compile_frpd()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sample = ROOT / "sample_data"
        model = _sample_model(tmp)
        one = tmp / "one.csv"
        lines = (sample / "applicants.csv").read_text(encoding="utf-8").splitlines()
        one.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
        data_args = [str(sample / "credit.csv"), "--model", str(model), "--schema", str(sample / "schema.toml")]
        subprocess.run([*frpd, "build-pool", *data_args, "--out", str(tmp / "pool")], check=True,
                       capture_output=True)
        plan = [*frpd, "plan", *data_args, "--applicants", str(one), "--format", "csv"]
        commands = {
            "python -c pass": [PY, "-c", "pass"],
            "frpd --version": [*frpd, "--version"],
            "frpd --help": [*frpd, "--help"],
            'python -c "import sklearn, pandas"': [PY, "-c", "import sklearn, pandas"],
            "frpd plan, 1 applicant (sample)": plan,
            "frpd plan --pool, 1 applicant (sample)": [*plan, "--pool", str(tmp / "pool")],
        }
        if not args.quick and (DATASETS / "adult.csv").exists():
            from benchmarks.bench_plan import _train_adult

            train_path, model_path, spec, denied = _train_adult(tmp)
            denied.head(1).to_csv(tmp / "adult_one.csv", index=False)
            adult_args = [str(train_path), "--model", str(model_path)]
            adult_args += [a for name in spec.immutable for a in ("--immutable", name)]
            adult_args += [a for name in spec.increasing for a in ("--increasing", name)]
            subprocess.run([*frpd, "build-pool", *adult_args, "--out", str(tmp / "adult_pool")], check=True,
                           capture_output=True)
            adult_plan = [*frpd, "plan", *adult_args, "--applicants", str(tmp / "adult_one.csv"), "--format", "csv"]
            commands["frpd plan, 1 applicant (Adult)"] = adult_plan
            commands["frpd plan --pool, 1 applicant (Adult)"] = [*adult_plan, "--pool", str(tmp / "adult_pool")]
        elif not args.quick:
            print("adult.csv not found; skipping the Adult rows", file=sys.stderr)
        load = os.getloadavg()[0]
        times, cpu = _rounds(commands, runs)
        stages = _stages(plan[len(frpd):], runs)

    floors = {"frpd --version": "python -c pass", "frpd --help": "python -c pass"}
    rows = []
    for name, t in times.items():
        floor = floors.get(name, 'python -c "import sklearn, pandas"' if name.startswith("frpd plan") else None)
        row = {"command": f"`{name}`", "median s": f"{statistics.median(t):.3f}", "min s": f"{min(t):.3f}",
               "max s": f"{max(t):.3f}", "above its floor s": "", "spread s": "",
               "median CPU s": f"{statistics.median(cpu[name]):.3f}", "CPU above its floor s": ""}
        if floor is not None:
            above = _paired(t, times[floor])
            above_cpu = _paired(cpu[name], cpu[floor])
            row["above its floor s"] = f"{statistics.median(above):+.3f}"
            row["spread s"] = f"{min(above):+.3f} .. {max(above):+.3f}"
            row["CPU above its floor s"] = f"{statistics.median(above_cpu):+.3f}"
        rows.append(row)
    out = ["## Start-up and the training pool", "",
           f"Machine: {machine_line()}. Command: `python benchmarks/bench_startup.py` ({runs} rounds; every round "
           f"runs each command once as a fresh process, in a shuffled order; wall time, and CPU time: user + system "
           f"of the command and its children, which a loaded machine inflates much less than wall time). Load "
           f"average (1 min) when the runs started: {load:.1f}, when they ended: {os.getloadavg()[0]:.1f}.", "",
           *markdown_table(rows, ["command", "median s", "min s", "max s", "above its floor s", "spread s",
                                  "median CPU s", "CPU above its floor s"]), "",
           "Above its floor: the median over the rounds of (the command's time - its floor's time in the same "
           "round); spread: the smallest and the largest of these differences; the CPU column is the same median "
           "for CPU time.", "",
           f"Where the one-applicant sample plan spends its CPU time (one process, each stage timed by wrapping the "
           f"function that does it; medians of {runs} runs; stages in the order they run):", "",
           *markdown_table(stages, ["stage", "median CPU ms"]), "",
           "Floors: `--version` and `--help` against `python -c pass`; a one-applicant plan against "
           "`python -c \"import sklearn, pandas\"` (loading any scikit-learn model imports both). Commands import "
           "their modules only when they run, so `--version` and `--help` load typer and nothing numerical "
           "(a test checks that numpy, pandas, scipy, sklearn, dask, highspy, matplotlib and networkx stay "
           "unloaded), and command-line values are converted without typer's pydantic adapters (a test checks "
           "that a one-applicant plan loads neither pydantic nor networkx, highspy, dask or matplotlib, and with the "
           "sample MLP pipeline not sklearn.linear_model either: unpickling defers sklearn.compose's __init__ until "
           "the package is used). "
           "frpd's modules were byte-compiled before the runs, as an installed package is "
           f"(PYTHONDONTWRITEBYTECODE {'set' if os.environ.get('PYTHONDONTWRITEBYTECODE') else 'not set'} "
           "in this environment). `--pool DIR` (from `frpd build-pool`) skips encoding the training rows and "
           "scoring them with the model; its plans are byte-identical to those without it."]
    publish("bench_startup", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
