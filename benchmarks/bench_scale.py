"""frpd on training sets of growing size: Adult resampled to 26k, 100k, 1M (and 10M) rows.

Run: python benchmarks/bench_scale.py [--sizes 26048,100000,1000000] [--with-10m] [--work DIR]
                                      [--n-applicants 200] [--generate-only]

Data: Adult from ../shared/datasets, 80/20 stratified split with seed 42, the MLP (20, 50, 20) of
`bench_plan.py` trained on the training split. A set of N rows draws N rows of the training split with
replacement (seed 7; the 26,048-row set is the training split itself), jitters hours_per_week by an integer in
[-2, 2] (kept in [1, 99]) and labels every row by the same MLP (label = its prediction at 0.5). Applicants: the
first denied rows of the test split. Schema: immutable marital_status, gender and race, age increasing; `frpd
plan` with quad, K = 3, the defaults otherwise. The sets are written once to the work folder (default
/tmp/frpd-bench-scale) and reused by later runs (`--generate-only` writes them and stops).

Reported per size, from the command line (`frpd` in a fresh process each time; peak memory = the largest
resident set of the process (`VmHWM`: its `ru_maxrss` would include the benchmark's own, carried across exec)
and of its workers (`ru_maxrss` of its children)):

- `frpd build-pool`: wall time and peak memory;
- one applicant: wall time of `frpd plan` without and with `--pool`, and the CPU time of the latter (frpd's
  modules are byte-compiled first, as `pip install` does);
- the applicants (`--n-applicants`, default 200) with `--pool`: CPU per applicant beyond the one-applicant run
  (user + system CPU of the process and its workers), `--jobs 1`, `--jobs 2` and `--max-candidates N`
  (default 1024), and peak memory; for `--jobs 1` also the least CPU of `--repeats` runs (default 3) of the
  applicants and of the one applicant, alternating, which the machine's fast and slow states disturb less;
- whether the plans of `--jobs 1` and `--jobs 2` are byte-identical;
- CPU per applicant of `plan_applicants` in one process (start-up excluded), without and with
  `--max-candidates` (the least of `--repeats` runs), and how many plans the limit leaves unchanged;
- the growth of the per-applicant CPU from the smallest set;
- on the smallest set, how often the distance bound proves the nearest candidates enough (`bound_proofs`).

Results go to docs/benchmarks.md (section bench_scale).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, publish  # noqa: E402
from benchmarks.bench_plan import DATASETS  # noqa: E402

IMMUTABLE = ("marital_status", "gender", "race")
NUMERIC = ("age", "hours_per_week")
SEED = 7

# Runs frpd in this interpreter; at exit writes the CPU time and peak resident memory of its own process and of
# its reaped children (the pool's workers) to the file named by FRPD_BENCH_RUSAGE.
_WRAPPER = """
import atexit, json, os, resource, sys

def _peak_kb(own):
    # Linux carries the resident peak of the process that forked this one across exec into ru_maxrss (here the
    # benchmark's own, about 250 MB): the peak of this process's memory alone is VmHWM
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return own.ru_maxrss

def _report():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["FRPD_BENCH_RUSAGE"], "w") as f:
        json.dump({"cpu": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
                   "rss_self_kb": _peak_kb(own), "rss_children_kb": kids.ru_maxrss}, f)

atexit.register(_report)
sys.argv = ["frpd"] + sys.argv[1:]
from frpd_cli.cli.app import main
main()
"""


def _train(work: Path):
    """The MLP of bench_plan.py on Adult's training split; returns (train frame, test frame, model path)."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    frame = pd.read_csv(DATASETS / "adult.csv")
    features = [c for c in frame.columns if c != "label"]
    categorical = [c for c in features if c not in NUMERIC]
    train, test = train_test_split(frame, test_size=0.2, random_state=42, stratify=frame["label"])
    model_path = work / "adult_mlp.pkl"
    if not model_path.exists():
        pipe = Pipeline([
            ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), categorical),
                                        ("num", MinMaxScaler(), list(NUMERIC))])),
            ("mlp", MLPClassifier(hidden_layer_sizes=(20, 50, 20), random_state=0, max_iter=200)),
        ]).fit(train[features], train["label"])
        joblib.dump(pipe, model_path)
    return train.reset_index(drop=True), test.reset_index(drop=True), model_path


def generate(work: Path, sizes: list[int]) -> dict:
    """Write the resampled sets, the applicants and the schema flags into ``work``; return their paths."""
    import joblib

    work.mkdir(parents=True, exist_ok=True)
    train, test, model_path = _train(work)
    pipe = joblib.load(model_path)
    features = [c for c in train.columns if c != "label"]
    paths = {"model": model_path, "sets": {}}
    applicants = work / "applicants.csv"
    if not applicants.exists():
        denied = test[features][pipe.predict_proba(test[features])[:, 1] < 0.5].reset_index(drop=True)
        denied.to_csv(applicants, index=False)
    paths["applicants"] = applicants
    for n in sizes:
        path = work / f"adult_{n}.csv"
        paths["sets"][n] = path
        if path.exists():
            continue
        rng = np.random.default_rng(SEED)
        tmp = path.with_suffix(".csv.part")
        with open(tmp, "w", encoding="utf-8", newline="") as out:
            header = True
            block = 500_000
            for start in range(0, n, block):
                m = min(block, n - start)
                if n == len(train):
                    rows = train.iloc[start:start + m][features].reset_index(drop=True)
                else:
                    rows = train.iloc[rng.integers(0, len(train), size=m)][features].reset_index(drop=True)
                    jitter = rng.integers(-2, 3, size=m)
                    rows["hours_per_week"] = np.clip(rows["hours_per_week"].to_numpy() + jitter, 1, 99)
                rows["label"] = pipe.predict(rows[features]).astype(int)
                rows.to_csv(out, index=False, header=header)
                header = False
        os.replace(tmp, path)
        print(f"wrote {path} ({n} rows)", file=sys.stderr)
    return paths


def _schema_flags() -> list[str]:
    flags = ["--target", "label", "--increasing", "age"]
    for name in IMMUTABLE:
        flags += ["--immutable", name]
    return flags


def run_frpd(args: list[str], work: Path, *, stdout=None) -> dict:
    """Run ``frpd ARGS`` in a fresh interpreter; wall seconds, CPU seconds and peak memory (MB)."""
    usage = work / "rusage.json"
    env = {**os.environ, "FRPD_BENCH_RUSAGE": str(usage)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *args], env=env, stdout=stdout or subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"frpd {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    record = json.loads(usage.read_text())
    return {"wall": wall, "cpu": record["cpu"],
            "rss_mb": max(record["rss_self_kb"], record["rss_children_kb"]) / 1024.0}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def measure(n: int, data: Path, paths: dict, work: Path, n_applicants: int, limit: int, repeats: int = 3) -> dict:
    model, flags = str(paths["model"]), _schema_flags()
    pool = work / f"pool_{n}"
    one = work / "one_applicant.csv"
    many = work / f"applicants_{n_applicants}.csv"
    applicants = pd.read_csv(paths["applicants"])
    applicants.head(1).to_csv(one, index=False)
    applicants.head(n_applicants).to_csv(many, index=False)
    row = {"rows": n}
    build = run_frpd(["build-pool", str(data), "--model", model, *flags, "--out", str(pool)], work)
    row["build-pool s"], row["build-pool MB"] = build["wall"], build["rss_mb"]
    base = ["plan", str(data), "--model", model, *flags, "--method", "quad", "--k", "3", "--format", "csv"]
    cold = run_frpd([*base, "--applicants", str(one)], work)
    warm = run_frpd([*base, "--pool", str(pool), "--applicants", str(one)], work)
    # the per-applicant CPU is a difference of two runs of a few seconds each, on a machine whose CPUs switch
    # between fast and slow states: both are run `repeats` times, alternating, and the least CPU of each is taken
    warm_cpu, many_cpu = [warm["cpu"]], []
    for _ in range(repeats):
        many_cpu.append(run_frpd([*base, "--pool", str(pool), "--applicants", str(many), "--output",
                                  str(work / "plans_repeat.csv")], work)["cpu"])
        if len(warm_cpu) < repeats:
            warm_cpu.append(run_frpd([*base, "--pool", str(pool), "--applicants", str(one)], work)["cpu"])
    row["1 applicant s"], row["1 applicant MB"] = cold["wall"], cold["rss_mb"]
    row["1 applicant --pool s"], row["1 applicant --pool MB"] = warm["wall"], warm["rss_mb"]
    row["1 applicant --pool CPU s"] = min(warm_cpu)
    row[f"CPU ms/applicant, jobs 1, least of {repeats}"] = 1000.0 * (min(many_cpu) - min(warm_cpu)) / n_applicants
    outputs, walls = {}, {}
    for label, extra in (("jobs 1", ["--jobs", "1"]), ("jobs 2", ["--jobs", "2"]),
                         (f"--max-candidates {limit}", ["--max-candidates", str(limit)])):
        out = work / f"plans_{n}_{label.replace(' ', '_').replace('-', '')}.csv"
        with open(out, "w", encoding="utf-8") as handle:
            res = run_frpd([*base, "--pool", str(pool), "--applicants", str(many), *extra], work, stdout=handle)
        outputs[label], walls[label] = _lines(out), res["wall"]
        row[f"CPU ms/applicant, {label}"] = 1000.0 * (res["cpu"] - min(warm_cpu)) / n_applicants
        row[f"peak MB, {label}"] = res["rss_mb"]
    row["wall jobs 1 / jobs 2"] = walls["jobs 1"] / walls["jobs 2"]
    row["jobs 1 = jobs 2"] = "yes" if outputs["jobs 1"] == outputs["jobs 2"] else "NO"
    return row


def library_cpu(n: int, data: Path, paths: dict, work: Path, n_applicants: int, limit: int,
                repeats: int = 3) -> dict:
    """CPU per applicant of `plan_applicants` (one process, the pool loaded, after a first applicant; the least of
    ``repeats`` runs), without and with ``max_candidates``: the process's start-up is left out, which the
    command-line difference above cannot do precisely (a few seconds of start-up against 200 applicants of a few
    ms each)."""
    from frpd_cli.choice import PlanSettings
    from frpd_cli.dataset import read_training_frame
    from frpd_cli.model import load_model
    from frpd_cli.planning import plan_applicants
    from frpd_cli.pool import load_pool
    from frpd_cli.schema import SchemaSpec, infer_schema

    frame = read_training_frame(data)
    schema = infer_schema(frame, SchemaSpec(target="label", immutable=IMMUTABLE, increasing=("age",)))
    model = load_model(paths["model"], favorable=schema.favorable, feature_names=schema.feature_names)
    training = load_pool(work / f"pool_{n}", frame, schema, data=data, model=paths["model"], threshold=0.5,
                         scale="effort")   # the scale `frpd build-pool` encodes in by default
    applicants = pd.read_csv(paths["applicants"]).head(n_applicants)
    out, plans = {}, {}
    for label, lim in (("full", None), (f"--max-candidates {limit}", limit)):
        settings = PlanSettings(method="quad", k=3, theta=0.9, max_candidates=lim)

        def run(frame_):
            ids = [str(i) for i in range(len(frame_))]
            return [p for chunk in plan_applicants(training, model, frame_, ids, settings, n_jobs=1) for p in chunk]

        run(applicants.head(1))
        spent = []
        for _ in range(repeats):               # the least of several runs: the machine's slow states vary
            start = time.process_time()
            plans[label] = run(applicants)
            spent.append(time.process_time() - start)
        out[f"library CPU ms/applicant, {label}"] = 1000.0 * min(spent) / len(applicants)
    # a cut plan carries its pruning bound (json/jsonl only): the plans are compared without it
    same = sum(a == replace(b, pruning=None) for a, b in zip(plans["full"], plans[f"--max-candidates {limit}"]))
    out[f"plans equal with --max-candidates {limit}"] = f"{same}/{len(applicants)}"
    return out


def bound_proofs(n_applicants: int, thetas: list[float], work: Path, paths: dict, data: Path) -> list[dict]:
    """How often the distance bound proves that no candidate beyond the m nearest enters the optimal set.

    For each applicant with more than 85 candidates (below that quad solves the whole problem exactly): the
    exact optimum over its m nearest candidates (m = 16, 32, 64, 85; enumeration), then the bound: a set holding
    a candidate farther than the (m+1)-th nearest has objective at least (1 - theta) (d_(m+1) + d_(1) + ... +
    d_(K-1)) (theta ||v||^2 >= 0); the proof holds when that exceeds the optimum found.
    """
    import math

    from frpd_cli.candidates import CandidateStage
    from frpd_cli.choice import PlanSettings
    from frpd_cli.dataset import build_training_set, read_training_frame
    from frpd_cli.model import load_model
    from frpd_cli.schema import SchemaSpec, infer_schema
    from frpd_cli.selection import compute_geometry
    from frpd_cli.selection.exact import solve_subset_qp
    from frpd_cli.selection.quad import quad_objective_values

    frame = read_training_frame(data)
    schema = infer_schema(frame, SchemaSpec(target="label", immutable=IMMUTABLE, increasing=("age",)))
    model = load_model(paths["model"], favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    raw = pd.read_csv(paths["applicants"]).head(n_applicants).loc[:, list(schema.feature_names)]
    X0, codes0 = training.encoder.encode(raw), training.encoder.constraint_codes(raw)
    stage = CandidateStage(training, PlanSettings(), model=model)
    geometries = []
    for i in range(len(raw)):
        found = stage.find(X0[i], codes0.row(i), raw.iloc[i])
        if len(found) > 85:
            geometries.append(compute_geometry(training.X[found.rows], X0[i]))
    rows, k = [], 3
    for theta in thetas:
        proved = 0
        for g in geometries:
            d = g.distances
            order = np.lexsort((np.arange(d.size), d))
            for m in (16, 32, 64, 85):
                near = np.sort(order[:m])
                local, _ = solve_subset_qp(g.directions[near], d[near], k, theta, max_enumeration=math.comb(m, k))
                best = quad_objective_values(g.directions, d, near[local], theta)
                if (1.0 - theta) * (d[order[m]] + d[order[0]] + d[order[1]]) > best * (1.0 + 1e-9):
                    proved += 1
                    break
        rows.append({"theta": theta, "applicants": len(geometries), "proved": proved})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="26048,100000,1000000")
    parser.add_argument("--with-10m", action="store_true", help="also 10,000,000 rows (about 600 MB of csv)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/frpd-bench-scale"))
    parser.add_argument("--n-applicants", type=int, default=200)
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--max-candidates", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of the per-applicant measurements (the least CPU is reported)")
    parser.add_argument("--bound-applicants", type=int, default=100,
                        help="applicants of the bound measurement (on the smallest set; 0: none)")
    args = parser.parse_args(argv)
    if not (DATASETS / "adult.csv").exists():
        print(f"adult.csv not found in {DATASETS}", file=sys.stderr)
        return 1
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.with_10m:
        sizes.append(10_000_000)
    paths = generate(args.work, sizes)
    if args.generate_only:
        return 0
    # frpd's modules byte-compiled, as `pip install` leaves them: with PYTHONDONTWRITEBYTECODE set, an editable
    # install would otherwise compile its sources in every run and the start-up columns would measure that
    import frpd_cli

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(frpd_cli.__file__).parent)], check=True,
                   capture_output=True)
    rows = []
    for n in sizes:
        rows.append(measure(n, paths["sets"][n], paths, args.work, args.n_applicants, args.max_candidates,
                            args.repeats))
        rows[-1].update(library_cpu(n, paths["sets"][n], paths, args.work, args.n_applicants, args.max_candidates,
                                    args.repeats))
        print(rows[-1], file=sys.stderr)
    for row in rows:                            # growth of the per-applicant CPU from the smallest set
        for c in (f"CPU ms/applicant, jobs 1, least of {args.repeats}", "library CPU ms/applicant, full"):
            row[f"{c}: x smallest"] = row[c] / rows[0][c] if rows[0][c] > 0 else float("nan")
    bounds = (bound_proofs(args.bound_applicants, [0.9, 0.5, 0.2], args.work, paths, paths["sets"][sizes[0]])
              if args.bound_applicants else [])
    columns = list(rows[0])
    lines = [
        "## Training sets of growing size (`benchmarks/bench_scale.py`)", "",
        f"Machine: {machine_line()}, single-threaded BLAS; load average "
        f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1 / 5 / 15 min) at the end of the run. "
        "Command: `python benchmarks/bench_scale.py --sizes "
        f"{args.sizes}{' --with-10m' if args.with_10m else ''} --n-applicants {args.n_applicants}"
        f"{'' if args.repeats == 3 else f' --repeats {args.repeats}'}`.", "",
        "Adult resampled (hours jittered, labelled by the MLP), immutable marital_status, gender and race, age "
        "increasing, quad, K = 3; each command in a fresh process (s: wall seconds; MB: peak resident memory of "
        "the process or of its largest worker; CPU ms/applicant: CPU of the run minus that of the one-applicant "
        f"run (the least of {args.repeats}), divided by the applicants, once, or the least of {args.repeats} runs "
        "of each, alternating; "
        f"library: `plan_applicants` in one process, start-up excluded, the least of {args.repeats} runs; "
        "x smallest: against the smallest set).", "",
        "| training rows | " + " | ".join(str(row["rows"]) for row in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    for c in columns[1:]:
        lines.append(f"| {c} | " + " | ".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c])
                                              for row in rows) + " |")
    if bounds:
        lines += ["", f"Distance bound (`bound_proofs`, {sizes[0]} rows, the first {args.bound_applicants} "
                  "applicants, those with more than 85 candidates): proofs that no candidate beyond the m nearest "
                  "(m up to 85) enters the optimal set.", "", "| theta | applicants | proved |", "|---|---|---|"]
        lines += [f"| {b['theta']} | {b['applicants']} | {b['proved']} |" for b in bounds]
    publish("bench_scale", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
