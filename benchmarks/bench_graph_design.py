"""How the actionability graph is built, measured on Adult: the neighbour rule, its cost and what paths cost.

Usage: ``python benchmarks/bench_graph_design.py [--n-applicants N] [--skip-cli]``. Writes the
``bench_graph_design`` section of docs/benchmarks.md. Adult is read from ``../shared/datasets/adult.csv``
(override the folder with FRPD_DATASETS); the benchmark is skipped without it.

Set-up: the paper's protocol of ``benchmarks/paper_tables.py`` (80/20 split, seed 42, the MLP with hidden layers
(20, 50, 20)), the paper's immutable features (marital status, gender) as edge rules, the first N denied test
rows as applicants, K = 3, θ = 0.9, path cost as the proximity term.

Two tables:

* **Neighbour rule** (library calls): for each candidate graph, its edges, the CPU time of ``build_graph``, and
  FACE's and QUAD's mean path cost and anti-diversity over the applicants, with the CPU time per applicant of a
  graph plan (attach + Dijkstra + selection + paths). This is how the default was chosen.
* **build-graph through the command line**: ``frpd build-graph`` on the Adult training rows, in a fresh process
  per case: CPU time (user + system) and peak resident memory of that process (``wait4``), edges and the size of
  ``graph.npz``. CPU time, not wall time: the figures stay meaningful on a shared machine.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import paper_tables as pt  # noqa: E402
from benchmarks._report import machine_line, publish  # noqa: E402
from frpd_cli.cli.graph import FAVORABLE_NEIGHBORS  # noqa: E402
from frpd_cli.evaluation import evaluate_plans, summarize_by_method  # noqa: E402
from frpd_cli.graph import build_graph, default_neighbors  # noqa: E402

PAPER = {"face": (1.33, 2.66), "quad": (1.99, 0.52)}  # Table 2, Adult: path cost, anti-diversity
TARGETS = {"face": 1.35, "quad": 2.0}


def union(a, b):
    """The graph with the edges of both ``a`` and ``b`` (same rows, Euclidean weights: an edge present in both has
    the same weight in both)."""
    adjacency = a.adjacency.maximum(b.adjacency).tocsr()
    adjacency.sort_indices()
    return dataclasses.replace(a, adjacency=adjacency, directed=a.directed or b.directed)


def connected(graph, training):
    """``graph`` with the islands of each immutable group joined by their shortest bridges (``connect=True`` of
    ``build_graph``, applied to an existing edge set)."""
    from frpd_cli.graph import _bridges

    src, dst = graph.adjacency.nonzero()
    b_src, b_dst, b_len = _bridges(training.X, training.codes, src, dst, 1 << 22)
    extra = sp.csr_matrix((np.concatenate([b_len, b_len]), (np.concatenate([b_src, b_dst]),
                                                               np.concatenate([b_dst, b_src]))), shape=graph.adjacency.shape)
    adjacency = graph.adjacency.maximum(extra).tocsr()
    adjacency.sort_indices()
    return dataclasses.replace(graph, adjacency=adjacency)


def favourable_ends(graph, favorable):
    """``graph`` without the edges that leave a favourable row: a path ends at the first favourable row it meets (the
    authors' code removes the edges between two rows of the favourable class)."""
    adjacency = graph.adjacency.tocsr(copy=True)
    adjacency.data[np.repeat(np.asarray(favorable, bool), np.diff(adjacency.indptr))] = 0
    adjacency.eliminate_zeros()
    return dataclasses.replace(graph, adjacency=adjacency, directed=True)


def rule_rows(p, n_applicants: int, neighbors=None, radii=(), unions=(), ends=False, connects=(),
              thetas=(), hubs=()) -> list[str]:
    blocks = pt.category_blocks(p.training)
    default = default_neighbors(p.training.n_rows)
    cases = [("plain", 10, None), ("plain", 50, None), ("per change", 5, blocks), ("per change", 10, blocks),
             ("per change", default, blocks), ("per change", 30, blocks)]
    if neighbors:
        cases = [("per change", k, blocks) for k in neighbors]
    cases += [("radius", r, None) for r in radii]
    cases += [(f"per change ∪ radius {r}", k, blocks) for k, r in unions]
    cases += [("per change, connected", k, blocks) if r is None else (f"per change ∪ radius {r}, connected", k, blocks)
              for k, r in connects]
    if ends:
        cases.append(("per change, favourable rows end paths", default, blocks))
    cases += [(f"per change + {h} nearest favourable", default, blocks) for h in hubs]
    seen, lines = set(), []
    support = pt.graph_support()
    p.applicants, p.ids = p.applicants.head(n_applicants), p.ids[:n_applicants]
    for rule, k, b in cases:
        if (rule, k) in seen:
            continue
        seen.add((rule, k))
        start = time.process_time()
        connect = rule.endswith(", connected")
        if rule == "radius":  # every actionable row within Euclidean distance k (no neighbour count)
            graph = build_graph(p.training.X, p.training.codes, radius=k)
        elif "∪" in rule:  # both: the k nearest per change and every row within the radius
            r = float(rule.split("radius ", 1)[1].split(",")[0])
            graph = union(build_graph(p.training.X, p.training.codes, n_neighbors=k, category_blocks=b),
                          build_graph(p.training.X, p.training.codes, radius=r))
            if connect:  # the islands of the union joined (build_graph's bridges, computed on the union's edges)
                graph = connected(graph, p.training)
        elif "nearest favourable" in rule:  # hub edges: every row (and applicant) to its h nearest favourable rows
            h = int(rule.split("+ ", 1)[1].split(" ", 1)[0])
            graph = build_graph(p.training.X, p.training.codes, n_neighbors=k, category_blocks=b,
                                hubs=p.training.favorable, hub_neighbors=h)
        else:
            graph = build_graph(p.training.X, p.training.codes, n_neighbors=k, category_blocks=b, connect=connect)
        if rule.endswith("end paths"):
            graph = favourable_ends(graph, p.training.favorable)
        build = time.process_time() - start
        records, cpu = [], {}
        for method in ("face", "quad"):
            start = time.process_time()
            recs, _ = pt.run_graph_method(p, method, graph, support)
            cpu[method] = (time.process_time() - start) / max(1, len(p.applicants))
            records += recs
        for theta in thetas:  # QUAD at other thetas on the same graph: (cost, anti-diversity, validity)
            saved, pt.THETA = pt.THETA, theta
            try:
                recs, _ = pt.run_graph_method(p, "quad", graph, support)
            finally:
                pt.THETA = saved
            for rec in recs:
                rec["method"] = f"quad@{theta}"
            records += recs
        summary = summarize_by_method(evaluate_plans(records, p.training, p.model, p.applicants, p.ids, k=3,
                                                     graph=graph)).set_index("method")
        is_default = rule == f"per change + {FAVORABLE_NEIGHBORS} nearest favourable" and k == default
        cells = [rule + (" (default)" if is_default else ""), str(k), f"{graph.n_edges:,}",
                 f"{build:.1f}"]
        for method in ("face", "quad"):
            r = summary.loc[method]
            cells += [f"{r['cost mean']:.3f}", f"{r['anti-diversity mean']:.2f}"]
        moves = [len(r.get("steps") or []) for rec in records if rec["method"] == "quad" for r in rec["recourses"]]
        cells += [f"{summary.loc['quad', 'validity mean']:.2f}", f"{np.mean(moves) if moves else float('nan'):.1f}",
                  f"{cpu['quad'] * 1000:.0f}"]
        for theta in thetas:
            r = summary.loc[f"quad@{theta}"]
            cells.append(f"{r['cost mean']:.3f} / {r['anti-diversity mean']:.2f} / {r['validity mean']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def short_groups(p, k: int = 3) -> int:
    """Applicants whose immutable group holds fewer than ``k`` favourable training rows (no graph plan can be full)."""
    from frpd_cli.applicants import normalise_types

    enc = p.training.encoder
    raw = normalise_types(enc, p.applicants.loc[:, list(p.training.schema.feature_names)].reset_index(drop=True))
    codes0 = enc.constraint_codes(raw)
    fav = p.training.favorable
    imm = p.training.codes.immutable
    return int(sum((fav & np.all(imm == codes0.immutable[i], axis=1)).sum() < k for i in range(len(raw))))


def applicant_codes(p):
    """The applicants' encoded rows and constraint codes, as the planner sees them."""
    from frpd_cli.applicants import normalise_types

    enc = p.training.encoder
    raw = normalise_types(enc, p.applicants.loc[:, list(p.training.schema.feature_names)].reset_index(drop=True))
    return raw, enc.encode(raw), enc.constraint_codes(raw)


def straight_line_bounds(p, k: int = 3, thetas=(0.9,)) -> dict:
    """What any actionability graph can give, computed without a graph.

    A graph recourse ends at a favourable training row the applicant may reach (same immutable values, monotone
    features only the allowed way: the rows of ``candidate_mask``, favourable as the planner scores them: probability
    >= the model's threshold, no margin), and by the triangle inequality its path costs at least the straight-line
    (encoded Euclidean) distance to that row. So, per applicant:

    * ``floor``: the mean distance to its ``k`` nearest distinct candidate rows (fewer when it has fewer distinct
      ones; applicants with fewer than ``k`` candidate rows get no plan and are left out): no plan of
      ``k`` distinct end rows on any graph costs less; FACE on a graph reaches it exactly when each of those rows
      is one straight edge away (the complete graph within the immutable group).
    * ``quad``: QUAD's choice with the straight-line distance as its proximity term, i.e. QUAD on the complete graph
      of the immutable group (every path one straight edge, so path cost = distance): its cost and anti-diversity
      at each theta. Any connected graph offers QUAD the same candidates at higher path costs.

    Returns
    -------
    dict
        ``floor`` (per-applicant means), ``candidates`` (per-applicant counts), and for each theta
        ``quad@theta``: a list of (cost, anti-diversity) per applicant with a full plan.
    """
    from frpd_cli import metrics as m
    from frpd_cli.candidates import CandidateStage
    from frpd_cli.choice import PlanSettings, select_candidates

    training = p.training
    raw, X0, codes0 = applicant_codes(p)
    out = {"floor": [], "candidates": []}
    stages = {t: PlanSettings(method="quad", k=k, theta=t, bandwidth=pt.BANDWIDTH, immutable_policy="filter")
              for t in thetas}
    for t in thetas:
        out[f"quad@{t}"] = []
    stage = CandidateStage(training, stages[thetas[0]] if thetas else PlanSettings(k=k, immutable_policy="filter"))
    for i in range(len(raw)):
        x0, c0 = X0[i], codes0.row(i)
        found = stage.find(x0, c0, raw.iloc[i])
        out["candidates"].append(len(found.rows))
        if len(found.rows) < k:  # no plan at all (the candidate stage needs k rows), on any graph
            continue
        distinct = np.unique(training.X[found.rows], axis=0)
        d = np.sort(np.linalg.norm(distinct - x0[None, :], axis=1))
        out["floor"].append(float(d[:k].mean()))
        for t in thetas:
            (outcome,) = select_candidates(training, x0, found, stages[t])
            if outcome.status != "ok":
                continue
            R = training.X[outcome.rows]
            out[f"quad@{t}"].append((m.cost(x0, R), m.anti_diversity(x0, R)))
    return out


def bound_rows(names, sizes, thetas, tmp: Path) -> list[str]:
    """One row per dataset and number of applicants (the first ``n`` denied test rows, for each ``n`` of ``sizes``):
    the straight-line floor, FACE and QUAD on the per-change and the default graph, QUAD on the complete graph (see
    :func:`straight_line_bounds`)."""
    from frpd_cli.graph import build_graph, default_neighbors

    lines = []
    for name in names:
        spec = next(s for s in pt.SPECS if s.name.lower() == name.lower())
        if not (pt.DATASETS / spec.file).exists():
            print(f"{spec.file} not found in {pt.DATASETS}; skipping {spec.name}", file=sys.stderr)
            continue
        full = pt.prepare(spec, tmp, max(sizes))
        support = pt.graph_support()
        graphs = []
        for hubs in (None, FAVORABLE_NEIGHBORS):  # per change only; the build-graph default (with hub edges)
            extra = {} if hubs is None else {"hubs": full.training.favorable, "hub_neighbors": hubs}
            graphs.append(build_graph(full.training.X, full.training.codes,
                                      n_neighbors=default_neighbors(full.training.n_rows),
                                      category_blocks=pt.category_blocks(full.training), **extra))
        for n in sorted(set(sizes)):
            if n > len(full.applicants) and n != min(sizes):
                continue  # fewer denied test rows than n: the row of a smaller n already holds them all
            p = dataclasses.replace(full, applicants=full.applicants.head(n), ids=full.ids[:n])
            start = time.process_time()
            b = straight_line_bounds(p, 3, thetas)
            bound_cpu = time.process_time() - start
            floor = np.asarray(b["floor"])
            cells = [spec.name, f"{len(p.applicants)}", f"{int(np.median(b['candidates'])):,}",
                     f"{floor.mean():.3f} ± {floor.std():.2f}"]
            for graph in graphs:
                records = []
                for method in ("face", "quad"):
                    recs, _ = pt.run_graph_method(p, method, graph, support)
                    records += recs
                summary = summarize_by_method(evaluate_plans(records, p.training, p.model, p.applicants, p.ids, k=3,
                                                             graph=graph)).set_index("method")
                cells += [f"{summary.loc['face', 'cost mean']:.3f}", f"{summary.loc['quad', 'cost mean']:.3f} / "
                          f"{summary.loc['quad', 'anti-diversity mean']:.2f} / "
                          f"{summary.loc['quad', 'validity mean']:.2f}", f"{graph.n_edges:,}"]
            for t in thetas:
                q = np.asarray(b[f"quad@{t}"]).reshape(-1, 2)
                cells.append(f"{q[:, 0].mean():.3f} / {q[:, 1].mean():.2f} ({len(q)})" if len(q) else "–")
            cells.append(f"{bound_cpu:.1f}")
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], file=sys.stderr, flush=True)
    return lines


def run_measured(cmd: list[str]) -> tuple[float, float, int]:
    """Run ``cmd``; return (CPU seconds, peak RSS in MB, exit code) of that process alone."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode:
        print(err, file=sys.stderr)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode


def cli_rows(p, tmp: Path) -> list[str]:
    import joblib

    data = tmp / f"{p.spec.name.lower()}_train.csv"
    p.train.to_csv(data, index=False)
    model = tmp / f"{p.spec.name.lower()}_mlp.pkl"
    joblib.dump(p.pipeline, model)
    frpd = str(Path(sys.executable).with_name("frpd"))
    common = [frpd, "build-graph", str(data), "--model", str(model), "--target", p.spec.target, "--favorable", "1",
              "--format", "csv"]
    for c in p.spec.categorical:
        common += ["--categorical", c]
    for c in p.spec.immutable:
        common += ["--immutable", c]
    cases = [("default", []), ("--favorable-neighbors 0 (per change only)", ["--favorable-neighbors", "0"]),
             ("plain, --neighbors 10 --favorable-neighbors 0",
              ["--no-per-change", "--neighbors", "10", "--favorable-neighbors", "0"]),
             ("default, --connect", ["--connect"])]
    lines = []
    for i, (label, extra) in enumerate(cases):
        out = tmp / f"g{i}"
        cpu, rss, rc = run_measured([*common, "--out", str(out), *extra])
        if rc:
            lines.append(f"| {label} | failed (exit {rc}) | | | |")
            continue
        import json

        stats = json.loads((out / "stats.json").read_text())
        size = (out / "graph.npz").stat().st_size / 2**20
        lines.append(f"| {label} | {stats['edges']:,} | {cpu:.1f} | {rss:.0f} | {size:.0f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def bounds_section(args, argv) -> int:
    """The ``--bounds`` run: one table, section ``bench_graph_bounds`` of docs/benchmarks.md."""
    names = [d.strip() for d in args.bounds.split(",") if d.strip()]
    sizes = [int(n) for n in args.bounds_applicants.split(",")] if args.bounds_applicants else [args.n_applicants]
    thetas = [float(t) for t in args.thetas.split(",")] if args.thetas else [0.9]
    load = os.getloadavg()[0]
    start = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        rows = bound_rows(names, sizes, thetas, Path(tmp))
    command = " ".join(argv if argv is not None else sys.argv[1:])
    lines = [
        f"## What any actionability graph can give (`benchmarks/bench_graph_design.py {command}`)", "",
        f"Machine: {machine_line()}; 1-minute load average {load:.2f} when the run started. The set-up of "
        "`paper_tables.py`'s Table 2 (80/20 split, the authors' MLP recipe, the paper's immutable features as edge "
        "rules, no monotone constraint, favourable = probability ≥ the model's threshold 0.5 with no margin, the "
        "first n denied test rows (column 'applicants'; German has 34), K = 3). A graph recourse ends at a favourable training row "
        "the applicant may reach (same immutable values; monotone features only the allowed way) and, by the "
        "triangle inequality, its path costs at least the straight-line (encoded Euclidean) distance to that row. "
        "'floor': the mean over applicants of the mean distance to their 3 nearest distinct such rows (all of "
        "them when fewer; applicants with fewer than 3 such rows get no plan on any graph and are left out): no "
        "graph gives a lower mean path cost for plans of 3 distinct end rows, whatever the "
        "selection method; FACE reaches it exactly on the complete graph of each immutable group (every path one "
        "straight edge). 'per change': FACE's path cost and QUAD's cost / anti-diversity / validity on the "
        "graph of each row's k nearest rows per number of changed categories (k = `default_neighbors(rows)`; the "
        "`build-graph` default before hub edges); 'default': the same graph plus each row's (and applicant's) "
        f"{FAVORABLE_NEIGHBORS} nearest favourable rows (`--favorable-neighbors {FAVORABLE_NEIGHBORS}`, the "
        "`build-graph` default, Table 2's graph). 'QUAD, complete graph': QUAD's choice with the straight-line "
        "distance as proximity among all those rows, i.e. QUAD on the complete graph, where path cost = "
        "distance: cost / anti-diversity (applicants with a full plan). Any connected graph offers QUAD the same "
        "candidates at path costs no lower.", "",
        "| dataset | applicants | candidates (median) | floor | FACE, per change | QUAD, per change | edges, per "
        "change | FACE, default | QUAD, default | edges, default |"
        + "".join(f" QUAD θ = {t}, complete graph |" for t in thetas) + " floor + complete QUAD CPU (s) |",
        "|---|---:|---:|---:|---:|---|---:|---:|---|---:|" + "---|" * len(thetas) + "---:|", *rows, "",
        f"Whole run: {(time.process_time() - start) / 60:.1f} min of CPU (training the classifiers and building the "
        "default graphs included).",
    ]
    publish("bench_graph_bounds", lines)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-applicants", type=int, default=100, help="denied Adult applicants (default 100)")
    parser.add_argument("--skip-cli", action="store_true", help="skip the build-graph command-line table")
    parser.add_argument("--dataset", default="adult", help="another dataset of paper_tables.py (own section)")
    parser.add_argument("--neighbors", default=None, help="comma-separated k to compare, per-change rule")
    parser.add_argument("--radius", default=None, help="comma-separated radii to compare (radius graphs)")
    parser.add_argument("--favourable-ends", action="store_true", help="also the default graph without the edges "
                        "that leave a favourable row (paths end at the first favourable row)")
    parser.add_argument("--connect", default=None, help="comma-separated K or K+R: the per-change K graph (with every "
                        "edge of the radius-R graph), islands of each immutable group joined (build_graph connect)")
    parser.add_argument("--thetas", default=None, help="comma-separated extra thetas for QUAD on every graph")
    parser.add_argument("--union", default=None, help="comma-separated K+R: the per-change K graph with every edge "
                        "of the radius-R graph added")
    parser.add_argument("--hubs", default=None, help="comma-separated H: the default graph plus each row's edges to "
                        "its H nearest favourable rows (build_graph hubs, build-graph --favourable-neighbors)")
    parser.add_argument("--bounds", default=None, help="comma-separated datasets: the straight-line floor of any "
                        "graph's path cost and QUAD on the complete graph (own section, nothing else is run)")
    parser.add_argument("--bounds-applicants", default=None, help="with --bounds: comma-separated numbers of "
                        "applicants, one row each (default: --n-applicants)")
    args = parser.parse_args(argv)
    if args.bounds:
        return bounds_section(args, argv)
    spec = next(s for s in pt.SPECS if s.name.lower() == args.dataset.lower())
    section = "bench_graph_design" + ("" if spec.name == "Adult" else f"_{spec.name.lower()}")
    neighbors = [int(k) for k in args.neighbors.split(",")] if args.neighbors else None
    radii = [float(r) for r in args.radius.split(",")] if args.radius else []
    unions = [(int(c.split("+")[0]), float(c.split("+")[1])) for c in args.union.split(",")] if args.union else []
    connects = [(int(c.split("+")[0]), float(c.split("+")[1]) if "+" in c else None)
                for c in args.connect.split(",")] if args.connect else []
    thetas = [float(t) for t in args.thetas.split(",")] if args.thetas else []
    hubs = [int(h) for h in args.hubs.split(",")] if args.hubs else []
    if not (pt.DATASETS / spec.file).exists():
        print(f"{spec.file} not found in {pt.DATASETS}; nothing to measure", file=sys.stderr)
        return 0
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        p = pt.prepare(spec, tmp, args.n_applicants)
        cli = [] if args.skip_cli else cli_rows(p, tmp)
        short = short_groups(p)
        rules = rule_rows(p, args.n_applicants, neighbors, radii, unions, args.favourable_ends, connects, thetas,
                          hubs)
    lines = [
        f"## Actionability graph design on {spec.name} (`benchmarks/bench_graph_design.py"
        f"{'' if spec.name == 'Adult' else ' ' + ' '.join(argv if argv is not None else sys.argv[1:])}`)", "",
        f"Machine: {machine_line()}; 1-minute load average {load:.2f} when the run started (CPU times are the "
        f"process's own). {spec.name} with the paper's protocol (`paper_tables.py`: 80/20 split, MLP), "
        f"{p.training.n_rows:,} training rows, immutable {', '.join(spec.immutable)} as edge rules; the first "
        f"{len(p.applicants)} denied test rows; K = 3, θ = 0.9; path cost as every method's proximity term. "
        "'plain': each row's k nearest actionable rows; 'per change': its k nearest per number of changed "
        f"categorical features (`category_blocks`, k = `default_neighbors(rows)` = "
        f"{default_neighbors(p.training.n_rows)}; without mutable categorical features both rules give the same "
        "graph); 'per change + h nearest favourable': that graph plus each row's (and each attached applicant's) "
        "edges to its h nearest actionable rows the model predicts favourable (`build_graph(hubs=..., "
        f"hub_neighbors=h)`, `build-graph --favorable-neighbors h`; h = {FAVORABLE_NEIGHBORS} is the `build-graph` "
        "default); 'radius': every actionable row within Euclidean distance k (the `--radius` graph); 'per change "
        "∪ radius r': the edges of both; 'favourable rows end paths': the per-change graph without the edges that "
        "leave a favourable row, so that a path stops at the first favourable row it meets (the authors' code "
        "removes every edge between two favourable rows). "
        + (f"Paper (Table 2): FACE path cost {PAPER['face'][0]}, QUAD {PAPER['quad'][0]} with "
                      f"anti-diversity {PAPER['quad'][1]}; targets FACE ≤ {TARGETS['face']}, QUAD ≤ "
                      f"{TARGETS['quad']}." if spec.name == "Adult" else ""), "",
        "### Neighbour rule", "",
        "| rule | k | edges | build CPU (s) | FACE cost | FACE anti-div | QUAD cost | QUAD anti-div | QUAD validity "
        "| QUAD moves | QUAD plan CPU (ms / applicant) |" + "".join(f" QUAD θ = {t}: cost / anti-div / validity |"
                                                           for t in thetas),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + "---|" * len(thetas), *rules, "",
        f"Applicants whose immutable group holds fewer than 3 favourable training rows: {short} of "
        f"{len(p.applicants)}. QUAD moves: the mean number of moves (edges) of QUAD's recourse paths. "
        "'connected': the islands of each immutable group joined by their shortest bridges "
        "(`build_graph(connect=True)`, `build-graph --connect`)."
        + (" Validity below 1 on a connected graph: applicants whose immutable group holds fewer than 3 favourable "
           "rows (no graph can give them 3 recourses without changing an immutable feature)." if connects else ""),
        "",
    ]
    if cli:
        lines += [f"### `frpd build-graph` on {spec.name} (one fresh process per case)", "",
                  "| graph | edges | CPU (s) | peak RSS (MB) | graph.npz (MB) |", "|---|---:|---:|---:|---:|", *cli,
                  "", "CPU and peak memory include starting Python, loading the data and the model and scoring "
                  "the training rows (about 1-2 s and 250 MB of the figures)."]
    publish(section, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
