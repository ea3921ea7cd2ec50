"""Throughput of `plan` (linear scheme): applicants per second and model calls per applicant.

Run: python benchmarks/bench_plan.py [--quick] [--n-applicants N] [--cli-applicants N] [--repeats R]
[--no-library] [--no-dask] [--no-paper] [--no-stages]

Datasets: the sample credit data (with the sample model) and, when present, Adult from ../shared/datasets with
the paper's protocol (80/20 stratified split with seed 42, MLP (20, 50, 20), applicants = test rows predicted
unfavourable). Results go to docs/benchmarks.md (section bench_plan).

Two measurements: the library (plan_applicants in this process) and the command line, which is what users
run: `frpd plan` on the first N denied Adult applicants (default 2,000; quad, K = 3, linear, immutable
marital_status and gender, age increasing), with --jobs 1, --jobs 2, --backend dask on a local cluster it starts
itself, and --backend dask --scheduler on loopback clusters of 2 workers started beforehand (one with Dask's
default settings, one with the configuration file of docs/batch.md). A run's planning
time is its whole wall time minus the wall time of the same command on one applicant (start-up, reading and
scoring the training set; --jobs 1 and 2 share that baseline, the least of their one-applicant runs, since one
applicant starts no pool); a warm-up round runs every variant once (not counted: the first runs on a new
loopback cluster import frpd, scikit-learn and pandas in each worker), then R rounds run every variant once
each, and each variant's best run is kept. Every run's output is checked byte-identical.
The paper's configuration (`--method quad-paper --no-sparsify`) runs with --jobs 1 and 2 as well, and the CPU
time of each stage of a chunk (candidates, selection and its parts, interpolation and its parts, verification;
model calls and encoding inside them) is measured per applicant for both configurations with --jobs 1.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, markdown_table, publish  # noqa: E402
from frpd_cli.dataset import build_training_set  # noqa: E402
from frpd_cli.model import load_model  # noqa: E402
from frpd_cli.planning import PlanSettings, plan_applicants  # noqa: E402
from frpd_cli.schema import SchemaSpec, infer_schema, load_schema_file  # noqa: E402

DATASETS = Path(os.environ.get("FRPD_DATASETS", ROOT.parent / "shared" / "datasets"))


@dataclass
class CountingModel:
    """Wraps a Model and counts its batched calls."""

    model: object
    calls: int = 0
    rows: int = 0

    @property
    def threshold(self):
        return self.model.threshold

    def favorable_probability(self, rows):
        self.calls += 1
        self.rows += len(rows)
        return self.model.favorable_probability(rows)


def _train_adult(tmp: Path):
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    frame = pd.read_csv(DATASETS / "adult.csv")
    features = [c for c in frame.columns if c != "label"]
    numeric = ["age", "hours_per_week"]
    categorical = [c for c in features if c not in numeric]
    train, test = train_test_split(frame, test_size=0.2, random_state=42, stratify=frame["label"])
    pipe = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), categorical),
                                    ("num", MinMaxScaler(), numeric)])),
        ("mlp", MLPClassifier(hidden_layer_sizes=(20, 50, 20), random_state=0, max_iter=200)),
    ]).fit(train[features], train["label"])
    model_path = tmp / "adult.pkl"
    joblib.dump(pipe, model_path)
    train_path = tmp / "adult_train.csv"
    train.to_csv(train_path, index=False)
    denied = test[features][pipe.predict_proba(test[features])[:, 1] < 0.5].reset_index(drop=True)
    spec = SchemaSpec(immutable=("marital_status", "gender"), increasing=("age",))
    return train_path, model_path, spec, denied


def _measure(name, train_path, model_path, spec, applicants, *, jobs_list, method="quad"):
    frame = pd.read_csv(train_path)
    schema = infer_schema(frame, spec)
    model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names)
    training = build_training_set(frame, schema, model)
    settings = PlanSettings(method=method, k=3, theta=0.9)
    ids = [str(i) for i in range(len(applicants))]
    counting = CountingModel(model)
    start = time.perf_counter()
    plans = [p for chunk in plan_applicants(training, counting, applicants, ids, settings, n_jobs=1) for p in chunk]
    seconds1 = time.perf_counter() - start
    rows = [{
        "dataset": name, "applicants": len(applicants), "training rows": training.n_rows,
        "favourable rows": int(training.favorable.sum()), "jobs": 1,
        "applicants/s": len(applicants) / seconds1,
        "model calls/applicant": f"{counting.calls / len(applicants):.3f}",
        "rows scored/applicant": counting.rows / len(applicants),
        "ok": sum(p.status == "ok" for p in plans),
    }]
    for jobs in jobs_list:
        if jobs == 1:
            continue
        start = time.perf_counter()
        plans_j = [p for chunk in plan_applicants(training, model, applicants, ids, settings, n_jobs=jobs)
                   for p in chunk]
        seconds = time.perf_counter() - start
        if plans_j != plans:
            bad = sum(a != b for a, b in zip(plans, plans_j))
            raise SystemExit(f"{name}: {bad} plan(s) differ between --jobs 1 and --jobs {jobs}")
        rows.append({**rows[0], "jobs": jobs, "applicants/s": len(applicants) / seconds})
    return rows


# ---------------------------------------------------------------------------- through the command line

FRPD = [sys.executable, "-m", "frpd_cli"]

# Runs frpd in this interpreter and, at exit, writes the CPU time of its own process and of its reaped children
# (the local pool's workers; a Dask cluster frpd started) to the file named by FRPD_BENCH_RUSAGE.
_WRAPPER = """
import atexit, json, os, resource, sys

def _report():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.environ["FRPD_BENCH_RUSAGE"], "w") as stream:
        json.dump({"parent": own.ru_utime + own.ru_stime, "workers": children.ru_utime + children.ru_stime,
                   "parent_minflt": own.ru_minflt, "workers_minflt": children.ru_minflt}, stream)

atexit.register(_report)
sys.argv = ["frpd", *sys.argv[1:]]
from frpd_cli.cli.app import main
main()
"""


def _tree_stats(pids) -> dict:
    """``/proc/PID/stat`` fields (after the command name) of processes ``pids`` and their live descendants."""
    if not pids or not os.path.isdir("/proc"):
        return {}
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = fields
    found, frontier = set(), {p for p in pids if p in stats}
    while frontier:
        found |= frontier
        frontier = {p for p, fields in stats.items() if int(fields[1]) in frontier} - found
    return {p: stats[p] for p in found}


def _signal_tree(pids, signum) -> None:
    """Send ``signum`` to processes ``pids`` and their descendants (a loopback cluster: SIGSTOP / SIGCONT)."""
    for pid in _tree_stats(pids):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _tree_usage(pids) -> tuple[float, int]:
    """CPU seconds (user + system) and minor faults of processes ``pids`` and their live descendants (/proc)."""
    stats = _tree_stats(pids)
    found = set(stats)
    tick = os.sysconf("SC_CLK_TCK")
    # fields after the command name: state is [0], ppid [1], minflt [7], utime [11], stime [12]
    cpu = sum(int(stats[p][11]) + int(stats[p][12]) for p in found) / tick
    return cpu, sum(int(stats[p][7]) for p in found)


def _frpd_plan(train_path, model_path, applicants_path, out_path, *extra, cluster=(),
               wrapper: str = _WRAPPER) -> tuple[float, float, dict]:
    """Wall time, CPU time (user + system, its worker processes included) and the CPU split of one run.

    ``cluster``: processes of a Dask cluster started beforehand; their CPU during the run counts as the workers'.
    ``extra`` may give another ``--method`` (the last value of an option is the one used).
    """
    import json
    import tempfile

    cmd = [sys.executable, "-c", wrapper, "plan", str(train_path), "--model", str(model_path),
           "--applicants", str(applicants_path), "--target", "label", "--immutable", "marital_status",
           "--immutable", "gender", "--increasing", "age", "--method", "quad", "-k", "3", "--format", "csv",
           "--output", str(out_path), *extra]
    import resource

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "rusage.json"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cluster_before = _tree_usage(cluster)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "FRPD_BENCH_RUSAGE": str(report)})
        seconds = time.perf_counter() - start
        cluster_after = _tree_usage(cluster)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"frpd plan failed ({' '.join(extra)}):\n{done.stderr}")
        split = json.loads(report.read_text())
    cluster_cpu = cluster_after[0] - cluster_before[0]
    split["workers"] += cluster_cpu
    split["workers_minflt"] += cluster_after[1] - cluster_before[1]
    return seconds, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime) + cluster_cpu, split


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The Dask configuration file of docs/batch.md for a cluster that runs frpd (frpd_cli.backends.QUIET_SETTINGS, and glibc's
#: own memory trimming in the workers).
_QUIET_YAML = """distributed:
  worker:
    profile:
      enabled: false
    memory:
      monitor-interval: 2s
  admin:
    tick:
      interval: 1s
    system-monitor:
      interval: 2s
  nanny:
    pre-spawn-environ:
      MALLOC_TRIM_THRESHOLD_: null
"""


def _loopback_cluster(n_workers: int, *, quiet: bool = False):
    """Start `dask scheduler` and n workers (1 thread each) on 127.0.0.1; return (address, processes).

    ``quiet``: the scheduler and workers read the configuration file of docs/batch.md (:data:`_QUIET_YAML`), else they run
    with Dask's defaults.
    """
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    env = dict(os.environ)
    if quiet:
        import tempfile

        folder = tempfile.mkdtemp(prefix="frpd-dask-config-")
        atexit.register(shutil.rmtree, folder, True)
        Path(folder, "frpd-dask.yaml").write_text(_QUIET_YAML, encoding="utf-8")
        env["DASK_CONFIG"] = folder
    silent = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", "127.0.0.1:0"], **silent)]
    procs += [subprocess.Popen([str(bindir / "dask"), "worker", address, "--nthreads", "1", "--nworkers", "1",
                                "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"], **silent)
              for _ in range(n_workers)]
    from dask.distributed import Client

    deadline = time.time() + 120
    while True:
        try:
            with Client(address, timeout="5s") as client:
                client.wait_for_workers(n_workers, timeout=60)
            return address, procs
        except Exception:
            if time.time() > deadline:
                _stop(procs)
                raise
            time.sleep(1)


def _stop(procs) -> None:
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


#: Labels of the runs on a loopback Dask cluster started beforehand: Dask's default settings, and docs/batch.md's.
_LOOPBACK = "--backend dask --scheduler"
_LOOPBACK_QUIET = "--backend dask --scheduler, README's cluster settings"

#: The paper's configuration: its QUAD procedure, recourses not sparsified.
_PAPER_FLAGS = ["--method", "quad-paper", "--no-sparsify"]
_PAPER_LABEL = "paper's configuration"


#: A fixed pure-Python loop (no memory traffic, no library): its CPU time is the speed of the CPU it ran on.
_PROBE = "import time\nt = time.process_time()\ns = 0\nfor i in range(3_000_000):\n    s += i * i\nprint(time.process_time() - t)"


def _cpu_probe() -> dict:
    """CPU seconds of :data:`_PROBE` pinned to each CPU in turn (alone), then on every CPU at once (together)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    def start(cpu):
        return subprocess.Popen([sys.executable, "-c", _PROBE], stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))

    alone = [float(start(cpu).communicate()[0]) for cpu in cpus]
    procs = [start(cpu) for cpu in cpus]
    return {"alone": alone, "together": [float(p.communicate()[0]) for p in procs]}


def _measure_cli(tmp: Path, train_path, model_path, denied, *, n: int, repeats: int, dask: bool,
                 paper: bool = False):
    applicants = tmp / "denied.csv"
    one = tmp / "one.csv"
    denied.head(n).to_csv(applicants, index=False)
    denied.head(1).to_csv(one, index=False)
    variants = [("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"])]
    if paper:
        variants += [(f"--jobs {j}, {_PAPER_LABEL}", ["--jobs", str(j), *_PAPER_FLAGS]) for j in (1, 2)]
    clusters = {}
    if dask:
        variants.append(("--backend dask --jobs 2 (local cluster started by frpd)", ["--backend", "dask", "--jobs", "2"]))
        for quiet, label in ((False, _LOOPBACK), (True, _LOOPBACK_QUIET)):
            try:
                address, clusters[label] = _loopback_cluster(2, quiet=quiet)
                variants.append((f"{label} (loopback cluster, 2 workers)", ["--backend", "dask", "--scheduler", address]))
            except Exception as exc:  # report and go on with the other variants
                print(f"could not start a loopback Dask cluster: {exc}", file=sys.stderr)
    rows, references, probes = [], {}, []
    runs = {label: [] for label, _ in variants}
    singles = {label: [] for label, _ in variants}
    try:
        # Rounds over every variant (not R runs of one variant, then the next): a slow spell of the machine
        # touches every variant alike instead of one of them.
        # An idle loopback cluster (scheduler, workers, nannies) uses about 15% of a CPU (heartbeats, monitors):
        # each cluster is stopped (SIGSTOP) except during its own runs, so that it slows no other run.
        for cluster in clusters.values():
            _signal_tree([proc.pid for proc in cluster], signal.SIGSTOP)
        # round 0 warms up and is not counted: a loopback cluster's workers import frpd, scikit-learn and pandas
        # on their first task (2-4 s of CPU each), which a cluster that serves batch jobs has long done
        for round_ in range(repeats + 1):
            if round_:
                probes.append(_cpu_probe())
            for label, flags in variants:
                out = tmp / "out.csv"
                cluster = clusters.get(label.split(" (")[0], ())
                pids = [proc.pid for proc in cluster]
                if pids:
                    _signal_tree(pids, signal.SIGCONT)
                    time.sleep(1.0)             # let it catch up with its timers before the run
                run = _frpd_plan(train_path, model_path, applicants, out, *flags, cluster=pids)
                data = out.read_bytes()
                config = _PAPER_LABEL in label
                if config not in references:
                    references[config] = data
                elif data != references[config]:
                    raise SystemExit(f"the output of {label} differs from --jobs 1")
                single = _frpd_plan(train_path, model_path, one, tmp / "one_out.csv", *flags, cluster=pids)
                if round_:
                    runs[label].append(run)
                    singles[label].append(single)
                if pids:
                    _signal_tree(pids, signal.SIGSTOP)
        for label, flags in variants:
            whole, cpu, split = min(runs[label], key=lambda r: r[0])
            # One applicant starts no local pool: with --jobs 1 and 2 it is the same run, so both rows of a
            # configuration subtract the least of all their one-applicant runs.
            local = "--backend" not in flags
            same = [lab for lab, fl in variants if "--backend" not in fl and (_PAPER_LABEL in lab) == (_PAPER_LABEL in label)]
            pool = [r for lab in (same if local else [label]) for r in singles[lab]]
            single, single_cpu, single_split = min(pool, key=lambda r: r[0])
            planning = whole - single
            # the same difference in every round, against that round's own one-applicant baseline (for the
            # paired ratios: two runs of one round met the same spell of the machine)
            per_round = [runs[label][r][0] - min(singles[lab][r][0] for lab in (same if local else [label]))
                         for r in range(repeats)]
            rows.append({"run": label, "applicants": n, "whole command s": whole, "one-applicant run s": single,
                         "_per_round": per_round,
                         "planning s": planning, "applicants/s": (n - 1) / planning,
                         "planning CPU s": f"{cpu - single_cpu:.2f}",
                         "CPUs busy": f"{(cpu - single_cpu) / planning:.2f}",
                         "CPU ms/applicant": f"{1000 * (cpu - single_cpu) / (n - 1):.2f}",
                         "parent CPU s": f"{split['parent'] - single_split['parent']:.2f}",
                         "worker CPU s": f"{split['workers'] - single_split['workers']:.2f}",
                         "worker minor faults": f"{split['workers_minflt'] - single_split['workers_minflt']:,}"})
    finally:
        for cluster in clusters.values():
            _signal_tree([proc.pid for proc in cluster], signal.SIGCONT)
            _stop(cluster)
    base = {False: rows[0]["planning s"]}
    for r in rows:
        config = _PAPER_LABEL in r["run"]
        base.setdefault(config, r["planning s"])
        r["speed-up vs --jobs 1"] = f"{base[config] / r['planning s']:.2f}x"
    return rows, probes


# ---------------------------------------------------------------------------- CPU by stage

#: (module, attribute, label) of each stage timed, in the order of the table; "Class.method" for methods. Indented
#: labels are parts of the stage above; model calls and encoding happen inside the other stages. A label may be
#: timed at several places (their times add up).
_STAGES = [
    ("frpd_cli.planning", "plan_chunk", "plan_chunk (all stages of a chunk)"),
    ("frpd_cli.candidates", "CandidateStage.find", "candidates"),
    ("frpd_cli.planning", "select_candidates", "selection"),
    ("frpd_cli.choice", "_geometry_of_rows", "  geometry (gather, directions)"),
    ("frpd_cli.choice", "eigen_decompose", "  eigenpairs"),          # computed ahead (saved, several thetas)
    ("frpd_cli.selection.prototypes", "eigen_decompose", "  eigenpairs"),  # computed by the method that needs them
    ("frpd_cli.choice", "select_prototypes", "  select_prototypes"),
    ("frpd_cli.planning", "interpolate_plans", "interpolation"),
    ("frpd_cli.planning", "interpolate_linear", "  interpolate_linear"),
    ("frpd_cli.sparsify", "sparsify_recourses", "  sparsify_recourses"),
    ("frpd_cli.planning", "_other_when_repeated", "  repeated recourses (_other_when_repeated)"),
    ("frpd_cli.planning", "verify_plans", "verification"),
    ("frpd_cli.model", "Model.favorable_probability", "model calls (inside the stages above)"),
    ("frpd_cli.encoding", "Encoder.encode", "encoding (inside the stages above)"),
]

# Runs frpd plan in this interpreter with process-time accumulators around the stages of a chunk (--jobs 1) and
# writes their totals, in seconds, to the file named by FRPD_BENCH_STAGES at exit (then runs as _WRAPPER).
_STAGES_WRAPPER = """
import atexit, collections, importlib, json, os, time

totals = collections.Counter()

def wrap(owner, name, label):
    inner = getattr(owner, name)
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[label] += time.process_time() - start
    setattr(owner, name, timed)

for module, attribute, label in %r:
    owner = importlib.import_module(module)
    *classes, name = attribute.split(".")
    for cls in classes:
        owner = getattr(owner, cls)
    wrap(owner, name, label)

def _report_stages():
    with open(os.environ["FRPD_BENCH_STAGES"], "w") as stream:
        json.dump(dict(totals), stream)

atexit.register(_report_stages)
""" % (_STAGES,) + _WRAPPER


def _measure_stages(tmp: Path, train_path, model_path, denied, *, n: int, repeats: int) -> list[dict]:
    """CPU ms per applicant of each stage, default and paper's configuration, --jobs 1 (least of ``repeats``)."""
    import json

    applicants = tmp / "denied_stages.csv"
    denied.head(n).to_csv(applicants, index=False)
    columns = {}
    for config, flags in (("default", []), (_PAPER_LABEL, _PAPER_FLAGS)):
        best: dict = {}
        for _ in range(repeats):
            report = tmp / "stages.json"
            os.environ["FRPD_BENCH_STAGES"] = str(report)
            try:
                _frpd_plan(train_path, model_path, applicants, tmp / "stages_out.csv", "--jobs", "1", *flags,
                           wrapper=_STAGES_WRAPPER)
            finally:
                del os.environ["FRPD_BENCH_STAGES"]
            for stage, seconds in json.loads(report.read_text()).items():
                best[stage] = min(best.get(stage, float("inf")), seconds)
        columns[config] = best
    return [{"stage": label.replace("  ", "· "), **{f"{config} CPU ms/applicant":
                                                     f"{1000 * columns[config].get(label, 0.0) / n:.3f}"
                                                     for config in columns}}
            for label in dict.fromkeys(label for _, _, label in _STAGES)]   # a label timed at two places: one row


def _paired(rows, numerator: str, denominator: str) -> str:
    """Median and range over the rounds of ``planning(denominator) / planning(numerator)``, each round its own."""
    times = {r["run"].split(" (")[0]: r.get("_per_round") for r in rows}
    a, b = times.get(numerator), times.get(denominator)
    if not a or not b:
        return ""
    ratios = sorted(d / c for c, d in zip(a, b) if c > 0 and d > 0)
    if not ratios:
        return ""
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    return f"; round by round {median:.2f}x median ({ratios[0]:.2f}x to {ratios[-1]:.2f}x over {len(ratios)} rounds)"


def _ratios(rows) -> list[str]:
    """The two targets read from the rows: --jobs 2 over --jobs 1, and the loopback cluster over --jobs 2.

    Each as the best runs of the variants compared, and round by round: the two runs of one round against their
    round's baselines, the median and range of those ratios (less sensitive to one variant's lucky run).
    """
    rate = {r["run"].split(" (")[0]: float(r["applicants/s"]) for r in rows}
    cpu = {r["run"].split(" (")[0]: float(r["planning CPU s"]) for r in rows}
    busy = {r["run"].split(" (")[0]: r["CPUs busy"] for r in rows}
    lines = []
    if "--jobs 1" in rate and "--jobs 2" in rate:
        lines.append(f"- `--jobs 2` plans {rate['--jobs 2'] / rate['--jobs 1']:.2f}x as many applicants per second "
                     f"as `--jobs 1` (target 1.7x){_paired(rows, '--jobs 2', '--jobs 1')}, and uses "
                     f"{cpu['--jobs 2'] / cpu['--jobs 1']:.2f}x its CPU time, with {busy['--jobs 2']} CPUs busy on "
                     f"average; {rate['--jobs 2']:.0f} applicants/s "
                     "(target 800/s).")
    paper = [f"{rate[key]:.0f}/s with `{key.split(',')[0]}`" for key in rate if _PAPER_LABEL in key]
    if paper:
        lines.append(f"- the paper's configuration (`{' '.join(_PAPER_FLAGS)}`) plans {' and '.join(paper)} "
                     "(target 800/s with `--jobs 2` for the default configuration).")
    for loop, what in ((_LOOPBACK, "Dask's default settings"),
                       (_LOOPBACK_QUIET, "README's configuration: no worker profiler, quieter timers, glibc's memory trimming")):
        if loop in rate and "--jobs 2" in rate:
            lines.append(f"- the loopback Dask cluster of 2 workers ({what}) plans at "
                         f"{100 * rate[loop] / rate['--jobs 2']:.0f}% of the local `--jobs 2` rate (target at least "
                         f"80%){_paired(rows, loop, '--jobs 2')}, and uses {cpu[loop] / cpu['--jobs 2']:.2f}x its "
                         "CPU.")
    return lines


def _probe_lines(probes) -> list[str]:
    """What the CPU probe of every round says about the machine's speed during the runs."""
    if not probes or not probes[0]["alone"]:
        return []
    alone = [t for p in probes for t in p["alone"]]
    together = [t for p in probes for t in p["together"]]
    uneven = [max(p["together"]) / min(p["together"]) for p in probes]
    rounds = "; ".join(f"{'/'.join(f'{t:.2f}' for t in p['alone'])} alone, "
                       f"{'/'.join(f'{t:.2f}' for t in p['together'])} together" for p in probes)
    return ["", f"CPU probe (before each round: a fixed pure-Python loop pinned to each CPU alone, then to every CPU "
                f"at once; CPU seconds, lower is faster): alone {min(alone):.2f}-{max(alone):.2f} s, together "
                f"{min(together):.2f}-{max(together):.2f} s; the slower CPU took {min(uneven):.2f}x to "
                f"{max(uneven):.2f}x the faster one's time when both ran. Per round: {rounds}. The same work takes "
                "this machine's CPUs more or less time from one moment to the next, each CPU on its own: a run on "
                "one CPU needs one of them to be fast, a run on two needs both."]


def _load_line() -> str:
    try:
        load = os.getloadavg()
        return f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) at the end of the run"
    except OSError:
        return "load average unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small runs only")
    parser.add_argument("--n-applicants", type=int, default=5000, help="Adult applicants to plan (default 5000)")
    parser.add_argument("--cli-applicants", type=int, default=2000,
                        help="Adult applicants for the command-line runs (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each command-line run (best kept)")
    parser.add_argument("--no-library", action="store_true", help="only the command-line runs")
    parser.add_argument("--no-dask", action="store_true", help="skip the Dask runs")
    parser.add_argument("--no-paper", action="store_true",
                        help="skip the command-line runs of the paper's configuration (quad-paper, no sparsify)")
    parser.add_argument("--no-stages", action="store_true", help="skip the CPU-by-stage runs")
    args = parser.parse_args(argv)

    import tempfile

    results, cli_rows, stage_rows, probes = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sample_model = ROOT / "sample_data" / "model.pkl"
        if not sample_model.exists():
            import subprocess

            sample_model = tmp / "model.pkl"
            subprocess.run([sys.executable, str(ROOT / "sample_data" / "train_model.py"), "--out",
                            str(sample_model)], check=True)
        spec = load_schema_file(ROOT / "sample_data" / "schema.toml")
        applicants = pd.read_csv(ROOT / "sample_data" / "applicants.csv")
        if not args.no_library:
            results += _measure("sample credit", ROOT / "sample_data" / "credit.csv", sample_model, spec,
                                applicants, jobs_list=[1])
        if (DATASETS / "adult.csv").exists():
            train_path, model_path, spec, denied = _train_adult(tmp)
            if not args.no_library:
                n = min(len(denied), 100 if args.quick else args.n_applicants)
                results += _measure("adult", train_path, model_path, spec, denied.head(n), jobs_list=[1, 2])
            n_cli = min(len(denied), 200 if args.quick else args.cli_applicants)
            cli_rows, probes = _measure_cli(tmp, train_path, model_path, denied, n=n_cli, repeats=args.repeats,
                                    dask=not args.no_dask, paper=not args.no_paper)
            if not args.no_stages:
                stage_rows = _measure_stages(tmp, train_path, model_path, denied, n=n_cli, repeats=args.repeats)
        else:
            print("adult.csv not found; skipping the Adult rows", file=sys.stderr)

    columns = ["dataset", "applicants", "training rows", "favourable rows", "jobs", "applicants/s",
               "model calls/applicant", "rows scored/applicant", "ok"]
    lines = ["## plan throughput (linear scheme, quad, K = 3, θ = 0.9)", "",
             f"Machine: {machine_line()}; {_load_line()}. Command: `python benchmarks/bench_plan.py`."]
    if cli_rows:
        for r in cli_rows:
            for key in ("whole command s", "one-applicant run s", "planning s"):
                r[key] = f"{r[key]:.2f}"
        lines += ["", f"### Through the command line (`frpd plan`, Adult, best of {args.repeats} rounds after a "
                      "warm-up round)", "",
                  *markdown_table(cli_rows, ["run", "applicants", "whole command s", "one-applicant run s",
                                             "planning s", "applicants/s", "speed-up vs --jobs 1",
                                             "planning CPU s", "CPUs busy", "CPU ms/applicant", "parent CPU s",
                                             "worker CPU s",
                                             "worker minor faults"]),
                  "", "planning s = whole command minus the same command on one applicant (start-up, reading and "
                  "scoring the training set; a one-applicant run starts no pool, see README, so --jobs 1 and 2 share one "
                  "baseline: the least of their one-applicant runs), so the local-cluster "
                  "row includes starting the Dask cluster and the loopback-cluster rows do not (their clusters were "
                  "started beforehand, and stopped with SIGSTOP outside their own runs: an idle loopback cluster "
                  "uses 15-20% of a CPU with Dask's default settings, which would slow the other runs). planning CPU s: the same "
                  "difference in CPU time (user + system) of frpd "
                  "and its worker processes: what parallelism costs in extra work, independent of how loaded the "
                  "machine is; CPUs busy: planning CPU s / planning s, the CPUs the run kept busy on average; "
                  "parent / worker CPU s split it between the frpd process itself (reading applicants, "
                  "cutting tasks, unpickling results, writing the output) and the workers (local pool workers and "
                  "a Dask cluster frpd started, reaped by it; for the loopback cluster, its scheduler, workers and "
                  "their nanny processes, read from /proc before and after the run), each as the same difference; "
                  "worker minor faults: page faults of those processes (copy-on-write copies of the parent's "
                  "memory after the fork among them). The outputs of all runs are byte-identical (checked).",
                  "", *_ratios(cli_rows), *_probe_lines(probes)]
    if stage_rows:
        lines += ["", f"### CPU by stage (`frpd plan --jobs 1`, the same Adult applicants, least of {args.repeats})",
                  "", *markdown_table(stage_rows, list(stage_rows[0])),
                  "", "Process time spent in each stage of a chunk, per applicant, measured by accumulators around "
                  "the functions named (rows marked · are parts of the stage above; model calls and encoding are "
                  "counted inside the stages that make them; the repeated recourses' own interpolation and "
                  "sparsification count in theirs too). Paper's configuration: `--method quad-paper "
                  "--no-sparsify`."]
    if results:
        lines += ["", "### In the library (`plan_applicants` in one process)", "", *markdown_table(results, columns)]
        lines += ["", "Model calls (`favorable_probability`) are batched across a chunk's applicants (256 by "
                  "default): one call for the coarse grid of every segment, then one per two bisection steps; each "
                  "call runs the estimator on blocks of 512 rows (`SCORE_BLOCK_ROWS`)."]
    publish("bench_plan", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
