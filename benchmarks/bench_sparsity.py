"""Sparse, effort-priced recourses, the probability margin and the move bound, side by side with DiCE random on the same model and
applicants.

Run: python benchmarks/bench_sparsity.py [--n-applicants N] [--datasets german,sba,bank,adult,compas] [--no-dice]

Per dataset (the protocol of `paper_tables.py`: 80/20 split stratified on the label, seed 42, the paper's MLP,
its immutable features, applicants = the first N test rows the model predicts unfavourable, K = 3, theta = 0.9):

- quad with the paper's plain interpolation (`--no-sparsify`) in the paper's min-max scale;
- quad with sparse recourses at margin 0.05 in the min-max scale (`--scale minmax`) and in the effort scale
  (`--scale effort`: a move costs the share of the training population it crosses), each without a move bound
  and with `frpd`'s default one (`--max-move 0.25`: no numeric feature moves by more than 25% of its training
  range);
- DiCE random (`features_to_vary` = the mutable features, seed 42), when dice-ml is installed.

Every recourse is re-predicted by the model (`frpd_cli.evaluation`); the constraint audit counts immutable,
monotone, range and vocabulary violations. Every plan's cost is measured in both scales, whatever scale planned
it. Far moves: the share of recourses that move some numeric feature by more than 30% of its training range.
CPU seconds per applicant (`time.process_time`) are measured around the library call, and the part of it spent
sparsifying. Output: section `sparsity` of docs/benchmarks.md.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._report import machine_line, publish  # noqa: E402
from benchmarks.paper_tables import (  # noqa: E402
    DATASETS,
    SEED,
    SPECS,
    THETA,
    K,
    dice_available,
    log,
    prepare,
    run_dice,
    run_method,
)
from frpd_cli.evaluation import NEAR_THRESHOLD, evaluate_plans, summarize_by_method  # noqa: E402
from frpd_cli.schema import DEFAULT_MAX_MOVE, SchemaSpec, infer_schema  # noqa: E402

WANTED = ("German", "SBA", "Bank", "Adult", "COMPAS")
#: The move bound of `frpd`'s commands (`--max-move`, a share of each numeric feature's training range).
BOUND = DEFAULT_MAX_MOVE
RUNS = (  # label, scale, settings, move bound (None: none)
    ("quad plain minmax", "minmax", {"sparsify": False, "margin": 0.0}, None),
    ("quad sparse minmax M=0.05", "minmax", {"sparsify": True, "margin": 0.05}, None),
    (f"quad sparse minmax M=0.05 max-move {BOUND:g}", "minmax", {"sparsify": True, "margin": 0.05}, BOUND),
    ("quad sparse effort M=0.05", "effort", {"sparsify": True, "margin": 0.05}, None),
    (f"quad sparse effort M=0.05 max-move {BOUND:g}", "effort", {"sparsify": True, "margin": 0.05}, BOUND),
)
MARGINS = {label: extra.get("margin", 0.0) for label, _, extra, _ in RUNS}
#: The default configuration the targets are about: `frpd plan`'s defaults (effort scale, sparse recourses,
#: margin 0.05, the move bound), and the same in the paper's min-max scale.
DEFAULT_RUN = f"quad sparse effort M=0.05 max-move {BOUND:g}"
MINMAX_RUN = f"quad sparse minmax M=0.05 max-move {BOUND:g}"
#: A move is far when it crosses more than this share of a numeric feature's training range.
FAR = 0.3


def _cpu(call):
    start = time.process_time()
    out = call()
    return out, time.process_time() - start


class _SparseClock:
    """CPU seconds spent in sparsification during a run: the sparsify call and the repeated-recourse handling of
    `frpd_cli.planning.interpolate_plans` and `frpd_cli.directions` (nested calls counted once)."""

    def __init__(self):
        self.seconds, self._depth, self._saved = 0.0, 0, []

    def _wrap(self, call):
        def timed(*args, **kwargs):
            self._depth += 1
            start = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds += time.process_time() - start
        return timed

    def __enter__(self):
        import frpd_cli.directions as directions
        import frpd_cli.planning as planning
        import frpd_cli.sparsify as sparsify

        for module, name in ((sparsify, "sparsify_recourses"), (planning, "_other_when_repeated"),
                             (directions, "other_directions")):
            self._saved.append((module, name, getattr(module, name)))
            setattr(module, name, self._wrap(getattr(module, name)))
        return self

    def __exit__(self, *exc):
        for module, name, call in self._saved:
            setattr(module, name, call)


def _recourse_probabilities(p, records) -> dict:
    """Per method: the model's probability of every recourse (re-predicted here, not read from the records)."""
    out = {}
    names = list(p.training.schema.feature_names)
    for method in dict.fromkeys(r["method"] for r in records):
        rows = [r2["features"] for r in records if r["method"] == method for r2 in r["recourses"]]
        frame = pd.DataFrame(rows, columns=names)
        out[method] = (np.asarray(p.model.favorable_probability(frame), dtype=np.float64) if len(frame)
                       else np.zeros(0))
    return out


def _far_shares(p, records) -> dict:
    """Per method: the share of recourses that move some numeric feature by more than FAR of its training range."""
    numeric = [(j, f.name) for j, f in enumerate(p.training.schema.features) if f.is_numeric]
    enc = p.training.encoder
    applicants = {str(i): p.applicants.iloc[k] for k, i in enumerate(p.ids)}
    out = {}
    for method in dict.fromkeys(r["method"] for r in records):
        far, total = 0, 0
        for rec in records:
            if rec["method"] != method:
                continue
            x0 = applicants[str(rec["applicant"])]
            for r in rec["recourses"] or []:
                total += 1
                moves = [abs(float(r["features"][name]) - float(x0[name])) / (enc.maximum[j] - enc.minimum[j])
                         for j, name in numeric if enc.maximum[j] > enc.minimum[j]]
                far += bool(moves) and max(moves) > FAR
        out[method] = far / total if total else float("nan")
    return out


def _empty_plans(records) -> dict:
    """Per method: the applicants (needing recourse) whose plan holds no recourse."""
    out = {}
    for rec in records:
        out.setdefault(rec["method"], 0)
        if not rec["recourses"] and rec.get("status") != "already-favorable":
            out[rec["method"]] += 1
    return out


def _violation_kinds(problems) -> dict:
    """Violations of each rule (immutable, monotone, range, vocabulary), read from `evaluate_plans`' problems."""
    out = {}
    for text in problems.fillna(""):
        for count, kind in re.findall(r"(\d+) (immutable|monotone|range|vocabulary)", text.partition(
                "constraint violations: ")[2].split(";")[0]):
            out[kind] = out.get(kind, 0) + int(count)
    return out


def _cell(value, digits=2) -> str:
    return "–" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.{digits}f}"


def run_dataset(spec, tmp: Path, n_applicants: int, use_dice: bool):
    from dataclasses import replace

    from frpd_cli.dataset import build_training_set

    log(f"{spec.name}: training the MLP")
    p = prepare(spec, tmp, n_applicants)
    effort = replace(p, training=build_training_set(p.train, p.training.schema, p.model, scale="effort"))
    bounded = infer_schema(p.train, SchemaSpec(target=spec.target, favorable=1, categorical=spec.categorical,
                                               immutable=spec.immutable, max_move=BOUND))
    prepared = {("minmax", None): p, ("effort", None): effort}
    for scale in ("minmax", "effort"):
        prepared[scale, BOUND] = replace(p, training=build_training_set(p.train, bounded, p.model, scale=scale))
    records, seconds, sparse_seconds = [], {}, {}
    for label, scale, extra, bound in RUNS:
        q = prepared[scale, bound]
        with _SparseClock() as clock:
            (recs, _), cpu = _cpu(lambda extra=extra, label=label, q=q: run_method(q, "quad", label=label,
                                                                                    extra=extra))
        records += recs
        seconds[label] = cpu / max(1, len(p.applicants))
        sparse_seconds[label] = clock.seconds / max(1, len(p.applicants)) if extra.get("sparsify") else float("nan")
        log(f"  {label}: {seconds[label] * 1000:.1f} ms CPU/applicant "
            f"({sparse_seconds[label] * 1000:.2f} ms sparsifying)")
    if use_dice:
        (recs, _), cpu = _cpu(lambda: run_dice(p, "random", len(p.applicants), constrained=True))
        for rec in recs:
            rec["method"] = "DiCE random"
        records += recs
        seconds["DiCE random"] = cpu / max(1, len(p.applicants))
        log(f"  DiCE random: {seconds['DiCE random']:.2f} s CPU/applicant")
    # costs in the effort scale (`cost`) and in the paper's min-max scale (`minmax cost`) for every method
    per = evaluate_plans(records, effort.training, p.model, p.applicants, p.ids, k=K)
    summary = summarize_by_method(per)
    probabilities = _recourse_probabilities(p, records)
    far = _far_shares(p, records)
    empty = _empty_plans(records)
    threshold = p.model.threshold
    rows = []
    for _, r in summary.iterrows():
        method = r["method"]
        probs = probabilities.get(method, np.zeros(0))
        margin = MARGINS.get(method, 0.0)
        rows.append({
            "method": method, "n": int(r["needing recourse"]), "recourses": int(probs.size),
            "cost": r["cost mean"], "minmax cost": r["minmax cost mean"], "far": far.get(method, float("nan")),
            "validity": r["validity mean"], "anti-diversity": r["anti-diversity mean"],
            "changed features": r["sparsity mean"], "full plans": r["full plans mean"],
            "empty plans": empty.get(method, 0),
            "violations": float(per.loc[per["method"] == method, "violations"].fillna(0).sum()),
            "probability": r["probability mean"], "near threshold": r["near threshold mean"],
            "min probability": float(probs.min()) if probs.size else float("nan"),
            "valid at margin": float(np.mean(probs >= threshold + margin)) if probs.size else float("nan"),
            "margin": margin, "cpu": seconds.get(method, float("nan")),
            "sparse cpu": sparse_seconds.get(method, float("nan")) * 1000,
            "violation kinds": _violation_kinds(per.loc[per["method"] == method, "problems"]),
        })
    return p, rows


def _table(rows) -> list[str]:
    head = ["method", "n", "recourses", "cost (effort)", "cost (min-max)", "far moves", "validity", "anti-diversity",
            "changed features", "full plans", "empty plans",
            "probability", "below thr+0.01", "min probability", "valid at margin", "violations", "CPU s / applicant",
            "sparsify CPU ms / applicant"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in rows:
        lines.append("| " + " | ".join([
            r["method"], str(r["n"]), str(r["recourses"]), _cell(r["cost"]), _cell(r["minmax cost"]),
            _cell(r["far"]), _cell(r["validity"]),
            _cell(r["anti-diversity"]), _cell(r["changed features"]), _cell(r["full plans"]), str(r["empty plans"]),
            _cell(r["probability"], 3), _cell(r["near threshold"]), _cell(r["min probability"], 3),
            _cell(r["valid at margin"]), f"{r['violations']:.0f}", _cell(r["cpu"], 3), _cell(r["sparse cpu"])]) + " |")
    return lines


def _targets(name: str, rows) -> list[str]:
    by = {r["method"]: r for r in rows}
    dice, before = by.get("DiCE random"), by.get("quad sparse minmax M=0.05")
    lines = []
    for label in (DEFAULT_RUN, MINMAX_RUN):
        ours = by.get(label)
        if not ours:
            continue
        ok = ours["far"] <= 0.10 and ours["valid at margin"] == 1.0 and ours["violations"] == 0
        lines.append(f"- {name}: {label}: far moves {ours['far']:.2f} (without the bound: {before['far']:.2f}"
                     + (f"; DiCE random {dice['far']:.2f}" if dice else "") + "), valid at "
                     f"its margin {ours['valid at margin']:.2f}, {ours['violations']:.0f} violations "
                     f"({'met' if ok else 'NOT met'}); plans with no recourse {ours['empty plans']} of {ours['n']} "
                     f"(without the bound: {before['empty plans']}), full plans {ours['full plans']:.2f} "
                     f"(without: {before['full plans']:.2f}); cost {ours['cost']:.3f} effort, "
                     f"{ours['minmax cost']:.3f} min-max.")
        if dice:
            lines.append(f"- {name}: {label}: changed features {ours['changed features']:.2f} vs DiCE "
                         f"{dice['changed features']:.2f} "
                         f"({'met' if ours['changed features'] <= dice['changed features'] else 'NOT met'}); "
                         f"anti-diversity {ours['anti-diversity']:.2f} vs DiCE {dice['anti-diversity']:.2f} "
                         f"({'met' if ours['anti-diversity'] < dice['anti-diversity'] else 'NOT met'}).")
    broken = [f"{r['method']} " + ", ".join(f"{v} {k}" for k, v in sorted(r["violation kinds"].items()))
              for r in rows if r["violation kinds"]]
    lines.append(f"- {name}: violations by rule: {'; '.join(broken) if broken else 'none'}.")
    mine = [r for r in rows if r["method"].startswith("quad sparse")]
    ok = all(r["valid at margin"] == 1.0 and r["violations"] == 0 for r in mine if r["recourses"])
    lines.append(f"- {name}: every sparse run valid at its margin with zero violations: {'yes' if ok else 'NO'}.")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-applicants", type=int, default=200, help="applicants per dataset (default 200)")
    parser.add_argument("--datasets", default=",".join(w.lower() for w in WANTED))
    parser.add_argument("--no-dice", action="store_true", help="skip DiCE random")
    parser.add_argument("--section", default="sparsity", help="section of docs/benchmarks.md to write (default "
                        "sparsity; another name keeps a partial run apart)")
    args = parser.parse_args(argv)
    wanted = {d.strip().lower() for d in args.datasets.split(",") if d.strip()}
    use_dice = not args.no_dice and dice_available()
    if not args.no_dice and not use_dice:
        log("dice-ml is not installed (pip install 'frpd-cli[bench]'); skipping DiCE random")
    lines = [
        "## Sparse recourses, the margin, the scale and the move bound (`benchmarks/bench_sparsity.py`)", "",
        f"Machine: {machine_line()}, single-threaded BLAS. Command: `python benchmarks/bench_sparsity.py "
        f"--n-applicants {args.n_applicants}`.", "",
        "Protocol of the paper tables (80/20 split stratified on the label, seed 42, MLP (20, 50, 20), the paper's "
        f"immutable features, no monotone constraints), applicants = the first {args.n_applicants} test rows the "
        f"model predicts unfavourable, quad with K = {K}, θ = {THETA}. DiCE random on the same model and applicants "
        f"(`features_to_vary` = the mutable features, `random_seed={SEED}`). Every recourse is re-predicted by the "
        "model. Columns: cost (effort: a numeric move priced by the share of training rows it crosses; categorical "
        "changes as in the paper) and cost (min-max: the paper's scale), both measured on every method's plans "
        "whatever scale planned them; far moves: the share of recourses that move some numeric feature by more than "
        f"{FAR:.0%} of its training range; validity (at the threshold 0.5), anti-diversity (lower is more diverse; "
        "in the effort scale), changed "
        "features (mean per recourse) and full plans are `frpd evaluate`'s per-applicant means; probability is "
        f"the mean favourable probability of the recourses, below thr+0.01 the share under 0.5 + {NEAR_THRESHOLD}; "
        "min probability and valid at margin (share of recourses at or above 0.5 + M) are over all recourses; "
        "violations counts immutable, monotone, range and vocabulary breaches; CPU seconds per applicant around "
        "the library call (planning, or DiCE's `generate_counterfactuals`); sparsify CPU ms per applicant: the part "
        "of it spent in sparsification (`sparsify_recourses` and the repeated-recourse handling of "
        "`interpolate_plans`). Sparse recourses never cost more than the plain one (`COST_FACTOR` = 1) nor "
        "change more features. empty plans: applicants whose plan holds no recourse. max-move 0.25: the schema "
        "carries `frpd`'s default move bound (`--max-move 0.25`, enforced in every stage; an applicant with fewer "
        "than K candidates within it gets favourable rows moved into it and re-predicted).", "",
    ]
    summary_lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in SPECS:
            if spec.name not in WANTED or spec.name.lower() not in wanted:
                continue
            if not (DATASETS / spec.file).exists():
                log(f"{spec.file} not found in {DATASETS}; skipping {spec.name}")
                continue
            p, rows = run_dataset(spec, Path(tmp), args.n_applicants, use_dice)
            lines += [f"### {spec.name} ({p.training.n_rows} training rows, {len(p.training.schema.features)} "
                      "features)", "", *_table(rows), ""]
            summary_lines += _targets(spec.name, rows)
    lines += ["### Targets", "", *summary_lines]
    publish(args.section, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
