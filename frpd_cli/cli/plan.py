"""``frpd plan``: select and interpolate for every applicant in one step, streamed and resumable."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import sys
import time
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer

from .. import __version__
from ..applicants import ApplicantFile
from ..exceptions import InputError
from ..outputs import check_not_inputs, is_stdio, lock_outputs, resolve_output
from ..planning import TASK_APPLICANTS, PlanSettings, plan_stream
from . import _options as o
from ._checks import RecourseChecks
from ._errors import echo_err, handle_errors
from ._hints import already_favorable_hint, ignored_columns_warning, infeasible_hints, robust_infeasible_hint
from ._output import PLAN_FORMATS, PlanWriter, encoder_decimals, open_output, resolve_format, stderr_console
from ._robust import ROBUST_OPTIONS, RobustModels, extra_inputs
from ._robust import robust_params as _robust_params
from .app import app

__all__ = ["check_provenance_output", "check_run_options", "plan_command", "run_plan", "summarize_plans", "write_provenance"]

#: With a progress bar, applicants are planned in about PROGRESS_STEPS tasks of at least PROGRESS_MIN_TASK
#: applicants, so that the bar advances (plans do not depend on the tasks; each task costs a few model calls,
#: so a run of N applicants pays at most PROGRESS_STEPS - 1 of them more, and none when N <= PROGRESS_MIN_TASK).
PROGRESS_STEPS = 5
PROGRESS_MIN_TASK = 25

#: The summary's label of each rule that removes candidates (``Exclusion.constraint``,
#: :mod:`frpd_cli.candidates`); copies of another candidate are not a rule.
_RULE_LABELS = {"immutable": "most limited by {}, which may not change",
                "increasing": "most limited by {}, which may only increase",
                "decreasing": "most limited by {}, which may only decrease",
                "range": "most limited by the range of {}",
                "max-move": "most limited by how far {} may move (--max-move)"}


def _two_way_note(two_way: dict, n_planned: int) -> str:
    """Features some plans raise in one recourse and lower in another, most plans first."""
    import shlex

    ranked = sorted(two_way.items(), key=lambda item: -item[1])
    shown = ", ".join(f"{name!r} in {n}" for name, n in ranked[:5]) + (
        f" and {len(ranked) - 5} more feature(s)" if len(ranked) > 5 else "")
    first = shlex.quote(ranked[0][0])
    return (f"Note: plans offer options that move a feature opposite ways ({shown} of the {n_planned} planned "
            f"applicant(s)): the model accepts the feature raised and lowered, so it is not monotone there. Each "
            f"option is valid; if only one direction is advice, declare it (--increasing {first} or --decreasing "
            f"{first}).")


def _reason_key(plan) -> str:
    """A short label grouping infeasible plans by the rule that removed the most of their candidates, in words
    (``most limited by gender, which may not change``), read from the plan's counts (``plan.shortfall``)."""
    reason = plan.reason
    if not reason:
        return "no reason given"
    shortfall = plan.shortfall
    for part in () if shortfall is None else shortfall.exclusions:
        if part.constraint in _RULE_LABELS:         # the largest count of a rule, as the reason lists them
            return _RULE_LABELS[part.constraint].format(part.feature)
    # the reason's first clause without its leading count ("3 recourse(s) dropped: ..." -> "recourse(s) dropped"):
    # the summary puts the number of applicants in front of it; a clause ends at ":", ";" or a parenthesis
    return re.sub(r"^\d+ ", "", re.split(r"[:;]| \(", reason)[0])[:60]


def summarize_plans(counts: dict, reasons: dict, n: int, seconds: float) -> str:
    """The one-line summary printed on stderr after a run."""
    parts = [f"{counts.get('ok', 0)} planned"]
    if counts.get("partial"):       # ok plans with fewer than K recourses (counted among the planned ones)
        parts[0] += f" ({counts['partial']} partial: fewer than K recourses)"
    if counts.get("already-favorable"):
        parts.append(f"{counts['already-favorable']} already favourable")
    if counts.get("infeasible"):
        by = "; ".join(f"{v} {k}" for k, v in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
        parts.append(f"{counts['infeasible']} infeasible ({by})")
    if counts.get("invalid-input"):
        parts.append(f"{counts['invalid-input']} invalid input")
    rate = n / seconds if seconds > 0 else float("inf")
    return f"{n} applicant(s): {'; '.join(parts)}; {seconds:.2f} s ({rate:.1f} applicants/s)."


def _resume_command() -> str:
    """The command that continues this run: the command line as given, with ``--resume``."""
    import shlex
    import sys

    args = sys.argv[1:]
    if os.path.basename(sys.argv[0]) in ("frpd", "__main__.py") and "plan" in args:
        return shlex.join(["frpd", *args, *([] if "--resume" in args else ["--resume"])])
    return "the same frpd plan command with --resume"


def _count_jsonl(stream) -> int:
    """Applicants in a jsonl prefix: one line each."""
    return sum(block.count(b"\n") for block in iter(lambda: stream.read(1 << 20), b""))


def _count_csv(stream) -> int:
    """Applicants in a csv prefix: rows of rank 1 (the first recourse) or without rank (no recourse)."""
    rows = csv.reader(io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=""))
    header = next(rows, None)
    if header is None or "rank" not in header:
        return 0
    rank = header.index("rank")
    return sum(1 for row in rows if len(row) > rank and row[rank] in ("", "1"))


_RECORD_COUNTERS = {"csv": _count_csv, "jsonl": _count_jsonl}


#: Inputs frpd only reads during a run (their digests may be remembered: ``sha256_file(input_file=True)``);
#: artifact manifests may be written by the run itself (refits fitted for ``--robust``).
_READ_ONLY_INPUTS = ("data", "model", "applicants")


def _fingerprint(inputs: dict, settings: PlanSettings, training, **params) -> dict:
    from ..artifacts import sha256_file  # only a run writing --output FILE needs it

    return {
        "frpd_version": __version__,
        "inputs": {name: sha256_file(path, input_file=name in _READ_ONLY_INPUTS) for name, path in inputs.items()
                   if path is not None},
        "settings": settings.to_dict(),
        "schema": training.schema.to_dict(),
        **params,
    }


def run_plan(training, model, applicants: ApplicantFile, settings: PlanSettings, *, fmt: str | None,
             output: Path | None, jobs: int, chunk_size: int = 256, graph=None, backend: str = "loky",
             scheduler: str | None = None, resume: bool = False,
             fingerprint: Callable[[], dict] | None = None, layout: str = "auto", quiet: bool = False,
             digest=None, explain: bool = False) -> bool:
    """Plan every applicant and stream the records to stdout or ``output``, chunk by chunk.

    ``fingerprint`` returns what identifies the run (input hashes, parameters) for ``--resume``; it is
    called only when writing to a file, after the applicants are validated. ``digest`` (a hashlib object)
    is fed the UTF-8 text written when the records do not go to a regular file (for ``--provenance``).
    ``layout`` is the table layout and ``explain`` its whole reasons; ``quiet`` drops the progress bar and the
    summary line.
    Returns False when ``--resume`` found ``output`` already complete (nothing was planned), else True.
    """
    fmt = resolve_format(fmt, output, PLAN_FORMATS)
    target = None if output is None else resolve_output(output)   # a folder, a missing folder: refused now
    scan = applicants.scan(chunk_size=max(chunk_size, 4096))       # refuses bad input before writing anything
    warning = ignored_columns_warning(scan.extra_columns, f"'{applicants.path}'", applicants.id_column)
    if warning:
        echo_err(warning)
    streamable = fmt in ("csv", "jsonl")
    to_file = target is not None and target.kind == "file"
    if resume and not (to_file and streamable):
        raise InputError("--resume needs --output FILE (a regular file, not stdout, a device or a FIFO) and "
                         "--format csv or jsonl (formats written chunk by chunk).")
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ..projection import effective_policy, may_project

    projected = graph is None and may_project(training.schema, settings.immutable_policy)
    start = time.perf_counter()
    counts: dict = {}
    reasons: dict = {}
    ties: list = []                     # already favourable applicants exactly at the threshold
    checks = RecourseChecks.of_training(training)   # relations and codes of the training rows, and the tally
    causes = _CauseTally()
    pruned = _PruningTally()
    console = stderr_console()
    shown = not quiet and scan.n_rows > 1 and console.is_terminal
    progress = Progress(TextColumn("planning"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=console, transient=True, disable=not shown)
    # with a bar, the applicants are planned in steps, so that it advances (PROGRESS_STEPS); records for this
    # terminal are printed while the bar is cleared, never through it
    step = min(max(-(-scan.n_rows // PROGRESS_STEPS), PROGRESS_MIN_TASK), TASK_APPLICANTS) if shown else None
    if step is not None:
        chunk_size = min(chunk_size, step)
    under_bar = shown and (output is None or is_stdio(output)) and sys.stdout.isatty()
    decimals = encoder_decimals(training.encoder) if fmt in ("table", "text") else None
    models = getattr(model, "names", ("model",))[1:]       # other models to satisfy: their csv columns

    from ._text import opposite_moves

    schema_features = {f.name: f for f in training.schema.features}
    two_way: dict = {}                  # feature -> plans raising it in one recourse and lowering it in another

    def consume(plans, writer, done):
        for p in plans:
            counts[p.status] = counts.get(p.status, 0) + 1
            if p.at_threshold:
                ties.append(p.applicant)
            checks.add_plan(p)
            if len(p.recourses) > 1:
                for name, _, _ in opposite_moves(p, schema_features):
                    two_way[name] = two_way.get(name, 0) + 1
            if p.partial:
                counts["partial"] = counts.get("partial", 0) + 1
            if p.pruning is not None:
                pruned.add(p.pruning)
            if p.status == "infeasible":
                causes.add(p)
                key = _reason_key(p)
                reasons[key] = reasons.get(key, 0) + 1
        progress.update(task, completed=done)
        if under_bar:
            progress.stop()             # the bar is erased; the records go where it was, then it is drawn below
            writer.write(plans)
            progress.start()
        else:
            writer.write(plans)

    with progress:
        task = progress.add_task("plan", total=scan.n_rows)
        if to_file and streamable:
            from ..streaming import ResumableOutput

            stamp = fingerprint() if fingerprint is not None else {}
            # --chunk-size, --jobs and the backend are not part of it: they never change the output bytes
            out = ResumableOutput(output, fingerprint={**stamp, "format": fmt},
                                  resume=resume, count_records=_RECORD_COUNTERS[fmt])
            try:
                with out:
                    if out.note:
                        echo_err(out.note)
                    if out.state == "complete":
                        return False
                    if out.done:
                        echo_err(f"Resuming '{output}' after {out.done} complete applicant(s).")
                    writer = PlanWriter(out.stream, fmt, training.schema.feature_names, projected=projected,
                                        header_written=out.resumed_offset > 0, layout=layout, decimals=decimals,
                                        models=models, schema=training.schema, explain=explain,
                                        scale=training.encoder.scale)
                    done = out.done
                    for plans in plan_stream(training, model, applicants.chunks(chunk_size, start=out.done), settings,
                                             graph=graph, n_jobs=jobs, backend=backend, scheduler=scheduler,
                                             task_applicants=step):
                        done += len(plans)
                        consume(plans, writer, done)
                        out.checkpoint(done)
                    writer.close()
                    out.finish()
            except BaseException:
                if out.kept:
                    echo_err(f"Kept '{out.partial}' ({out.done} applicant(s) complete) and its progress file "
                             f"'{out.sidecar}'; '{output}' is untouched. To continue, run: {_resume_command()}")
                raise
        else:
            with open_output(output) as stream:
                if digest is not None:
                    from ..provenance import HashingWriter

                    stream = HashingWriter(stream, digest)
                writer = PlanWriter(stream, fmt, training.schema.feature_names, projected=projected, layout=layout,
                                    decimals=decimals, models=models, schema=training.schema, explain=explain,
                                    scale=training.encoder.scale)
                done = 0
                for plans in plan_stream(training, model, applicants.chunks(chunk_size), settings, graph=graph,
                                         n_jobs=jobs, backend=backend, scheduler=scheduler, task_applicants=step):
                    done += len(plans)
                    consume(plans, writer, done)
                if under_bar:
                    progress.stop()     # the legend after the tables, where the bar was
                writer.close()
    n = sum(v for key, v in counts.items() if key != "partial")
    if not quiet:
        echo_err(summarize_plans(counts, reasons, n, time.perf_counter() - start))
        if pruned.n:
            echo_err(pruned.summary())
    for message in checks.warnings():
        echo_err(message)
    if two_way:
        echo_err(_two_way_note(two_way, counts.get("ok", 0)))
    if ties:
        echo_err(f"Warning: {len(ties)} applicant(s) have a favourable probability exactly at the threshold "
                 f"{model.threshold:g} (first: applicant {ties[0]}); frpd counts them already favourable (>= "
                 "threshold) and plans nothing for them, but the model's own predict() may break the tie the other "
                 f"way and deny them (scikit-learn's does, when the favourable class is not its first). A --threshold "
                 f"a little above {model.threshold:g} (e.g. {model.threshold + 1e-6:g}) plans recourses for them.")
    hint = already_favorable_hint(counts.get("already-favorable", 0), n, model)
    if hint:
        echo_err(hint)
    infeasible = counts.get("infeasible", 0)
    if infeasible and infeasible >= max(1, n // 4) and training.favorable.any():   # else: the threshold hint
        robust_hint = robust_infeasible_hint(model, settings.margin)
        if robust_hint:                 # besides the constraints' hint: either may be what leaves them without
            echo_err(robust_hint)
        margin_hint = _margin_hint(training, model, settings)
        if margin_hint:                 # nothing is favourable at the margin: every other cause is moot
            echo_err(margin_hint)
        elif graph is not None:
            echo_err("Hint: many applicants reach too few favourable rows on the graph; rebuild it with a larger "
                     "--neighbors or a --radius (see each plan's reason).")
        else:
            policy = effective_policy(training.schema, settings.immutable_policy)
            for message in infeasible_hints(causes.groups(), training.schema, policy=policy):
                echo_err(message)
    return True


class _CauseTally:
    """What left each infeasible applicant without candidates, read from its plan's counts (``plan.shortfall``): per
    (rule, feature) of the largest count, how many applicants and the first one's counts (the removed rows and the
    favourable rows they are of)."""

    def __init__(self):
        self._groups: dict = {}
        self.n_other = 0

    def add(self, plan) -> None:
        shortfall = plan.shortfall
        # counted of the favourable rows, the largest count first; copies of another candidate are no rule to relax
        first = (shortfall.exclusions[0] if shortfall is not None and shortfall.n_pool is not None
                 and shortfall.exclusions else None)
        if first is None or first.constraint not in _RULE_LABELS:
            self.n_other += 1
            return
        key = (first.constraint, first.feature)
        if key in self._groups:
            self._groups[key]["n"] += 1
        else:
            self._groups[key] = {"rule": first.constraint, "feature": first.feature, "n": 1,
                                 "applicant": plan.applicant, "removed": int(first.count),
                                 "n_pool": int(shortfall.n_pool), "detail": first.detail or None}

    def groups(self) -> list[dict]:
        """The causes, most applicants first (ties in the order first seen), and ``other`` for the rest."""
        out = sorted(self._groups.values(), key=lambda g: -g["n"])
        if self.n_other:
            out.append({"rule": "other", "n": self.n_other})
        return out


def _margin_hint(training, model, settings) -> str | None:
    """``--margin`` asks for more than any candidate row's probability: no applicant can have a candidate."""
    margin = float(settings.margin or 0.0)
    if not margin:
        return None
    pool = training.pool(settings.candidates)
    if not pool.any() or training.pool(settings.candidates, threshold=float(model.threshold) + margin).any():
        return None
    from ._hints import margin_hint

    return margin_hint(float(training.probability[pool].max()), float(model.threshold), margin)


class _PruningTally:
    """What ``--max-candidates`` may have cost, over a run: for how many applicants the distance bound proves that
    no candidate left out could enter a better set, and how low the others' sets could go (each a float, not the
    plan's record: a batch of millions stays small)."""

    def __init__(self):
        from array import array

        self.n, self.proven, self.room = 0, 0, array("d")

    def add(self, pruning: dict) -> None:
        self.n += 1
        if pruning["proven"]:
            self.proven += 1
        elif pruning["objective"] > 0:
            self.room.append(pruning["bound"] / pruning["objective"])

    def summary(self) -> str:
        import numpy as np

        text = (f"--max-candidates cut the candidates of {self.n} applicant(s) to the nearest; for {self.proven} of "
                "them no candidate left out could enter a better set (the distance bound, in each json/jsonl "
                "record's 'pruning')")
        if len(self.room):
            text += (f"; for the other {self.n - self.proven}, a set holding one could have an objective as low as "
                     f"{100 * float(np.median(np.frombuffer(self.room))):.0f}% of the chosen set's (median)")
        return text + "."


def check_provenance_output(provenance: Path | None, outputs: dict, inputs: dict) -> None:
    """Refuse a --provenance path that is stdout beside stdout data, another output, or an input."""
    if provenance is None:
        return
    from ..exceptions import OptionError

    records = outputs.get("--output")
    if is_stdio(provenance) and (records is None or is_stdio(records)):
        raise OptionError("--provenance", "--provenance - would mix the provenance document into the plans on "
                          "stdout. Give it a file name (e.g. plans.provenance.json), or write the plans with --output.")
    resolve_output(provenance)
    if not is_stdio(provenance):
        real = os.path.realpath(provenance)
        for name, path in outputs.items():
            if path is None or is_stdio(path):
                continue
            other = os.path.realpath(path)
            if other == real or real.startswith(other.rstrip(os.sep) + os.sep):
                raise OptionError("--provenance", f"--provenance '{provenance}' is {name} or inside it; give the "
                                  "provenance document its own file name (e.g. plans.provenance.json) outside it.")
    check_not_inputs({"--provenance": provenance}, inputs)


def write_provenance(provenance: Path, record: dict) -> None:
    """Write the provenance document through the output layer (atomic for a regular file)."""
    from ..provenance import provenance_json

    with open_output(provenance) as stream:
        stream.write(provenance_json(record))
    echo_err(f"Provenance written to '{provenance}'.")


#: What --scheduler accepts: a Dask scheduler's address, PROTOCOL://HOST:PORT (tcp, or tls when Dask's
#: configuration sets it up) or HOST:PORT, which Dask reads as tcp; HOST may be an IPv6 address in brackets.
_SCHEDULER_ADDRESS = re.compile(r"(?:(?:tcp|tls)://)?(?:\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]@]+):([0-9]{1,5})")


def _check_scheduler(value: str | None) -> str | None:
    """A callback: --scheduler (when given) must be a Dask scheduler address with a port."""
    if value is None:
        return value
    match = _SCHEDULER_ADDRESS.fullmatch(value)
    if match is None or not 0 < int(match.group(1)) < 65536:
        raise typer.BadParameter(f"The 'scheduler' option takes a Dask scheduler address tcp://HOST:PORT (e.g. "
                                 f"tcp://10.0.0.5:8786, as the scheduler prints when it starts). Got {value!r} "
                                 "instead.")
    return value


def check_run_options(*, resume: bool, fmt: str | None, output: Path | None, backend: str,
                      scheduler: str | None) -> None:
    """Usage errors (exit 2) of --resume and --scheduler, before any input is read."""
    from ..exceptions import OptionError

    if scheduler is not None and backend != "dask":
        raise OptionError("--scheduler", f"--scheduler names a Dask scheduler, so it needs --backend dask (--backend "
                          f"{backend} runs the work in local processes). Add --backend dask, or leave out "
                          "--scheduler.")
    if not resume:
        return
    if output is None or is_stdio(output):
        raise OptionError("--resume", "--resume continues a run that writes its plans to a file (--output FILE, in "
                          "csv or jsonl); plans written to stdout cannot be continued. Add --output FILE, or leave "
                          "out --resume.")
    if resolve_output(output).kind != "file":
        raise OptionError("--resume", f"--resume continues a run written to a regular file (in csv or jsonl); "
                          f"--output '{output}' is a device, a FIFO or a file descriptor, written directly. Give a file "
                          "name, or leave out --resume.")
    fmt_ = resolve_format(fmt, output, PLAN_FORMATS)
    if fmt_ not in _RECORD_COUNTERS:
        raise OptionError("--resume", f"--resume continues csv and jsonl outputs only (written and checkpointed line "
                          f"by line); --format {fmt_} is written in one piece. Use --format csv or --format jsonl, "
                          "or leave out --resume.")


def _check_outputs(output: Path | None, inputs: dict) -> None:
    """Refuse an --output (or its partial/progress file) that is one of the inputs, before writing anything."""
    outputs = {"--output": output}
    if output is not None:
        resolve_output(output)                          # a folder or a missing folder is refused first
    if output is not None and not is_stdio(output):
        from ..streaming import partial_path, sidecar_path

        real = Path(os.path.realpath(output))
        outputs["the partial file of --output"] = partial_path(real)
        outputs["the progress file of --output"] = sidecar_path(real)
    check_not_inputs(outputs, inputs)


@app.command("plan")
@handle_errors
@o.SCHEMA_OPTIONS
@ROBUST_OPTIONS
def plan_command(
    data: o.DataArg,
    model: o.ModelOpt,
    applicants: Annotated[Path, typer.Option("--applicants", readable=False, help="CSV of applicants to plan for (feature "
                                             "columns; an id column with --id-column); - reads stdin.",
                                             show_default=False)],
    flags: o.SchemaFlags = o.SchemaFlags(),
    method: o.MethodOpt = "quad",
    k: o.KOpt = 3,
    theta: o.ThetaOpt = 0.9,
    threshold: o.ThresholdOpt = 0.5,
    fmt: o.PlanFormatOpt = None,
    layout: o.LayoutOpt = "auto",
    explain: o.ExplainOpt = False,
    output: o.OutputOpt = None,
    quiet: o.QuietOpt = False,
    jobs: o.JobsOpt = 1,
    seed: o.SeedOpt = 0,
    candidates: o.CandidatesOpt = "predicted",
    bandwidth: o.BandwidthOpt = 1.0,
    immutable_policy: o.PolicyOpt = "auto",
    margin: o.MarginOpt = None,
    sparsify: o.SparsifyOpt = True,
    direct_search: o.DirectSearchOpt = True,
    max_changes: o.MaxChangesOpt = None,
    max_candidates: o.MaxCandidatesOpt = None,
    proximity: o.ProximityOpt = "distance",
    tol: o.TolOpt = 1e-3,
    graph: o.GraphOpt = None,
    endpoint: o.EndpointOpt = "prototype",
    max_hops: o.MaxHopsOpt = None,
    max_cost: o.MaxCostOpt = None,
    others: RobustModels = RobustModels(),
    trust_type: o.TrustTypeOpt = None,
    encoding: o.EncodingOpt = "utf-8",
    drop_missing: o.DropMissingOpt = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted run writing --output (csv or "
                                         "jsonl), byte-identical to an uninterrupted one; safe to pass every time. "
                                         "A run with it that fails on an error keeps its partial files too.",
                                         rich_help_panel=o.RUNS_PANEL)] = False,
    backend: o.BackendOpt = "loky",
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", callback=_check_scheduler, help="Dask scheduler address "
                                                     "(tcp://HOST:PORT); without it --backend dask starts a "
                                                     "loopback cluster of --jobs workers.",
                                                     rich_help_panel=o.RUNS_PANEL)] = None,
    chunk_size: Annotated[int, typer.Option("--chunk-size", min=1, help="Applicants per batch (memory and "
                                            "model-call size; part of what makes outputs identical).",
                                            rich_help_panel=o.RUNS_PANEL)] = 256,
    pool: o.PoolOpt = None,
    provenance: o.ProvenanceOpt = None,
) -> None:
    """Plan K diverse recourses for every applicant (select prototypes, then interpolate).

    For each applicant the model turns down, frpd picks K favourable training rows that differ from one another
    (the prototypes) and moves the applicant towards each until the model accepts: K different changes, each one
    enough on its own, none touching an immutable feature or moving a feature the wrong way or out of its range.
    Every recourse reaches a probability of at least --threshold + --margin. Linear recourses change only the
    features the model needs (--no-sparsify: the paper's plain interpolation).

    With --graph DIR (from build-graph) every recourse is the shortest path of moves between training rows to its
    prototype; --method face takes the K cheapest paths. With --output FILE in csv or jsonl, a run stopped by
    Ctrl-C, SIGTERM or SIGHUP keeps its work and prints the command that continues it (--resume); a run that
    fails on an error leaves nothing behind.

    Example: frpd plan sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --applicants sample_data/applicants.csv

    Example: frpd plan sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --applicants sample_data/applicants.csv -k 2 --format jsonl --output plans.jsonl
    """
    _check_outputs(output, {"data": data, "model": model, "applicants": applicants, "schema": flags.schema,
                            "graph": graph, "pool": pool, **extra_inputs(others)})
    check_provenance_output(provenance, {"--output": output}, {"data": data, "model": model, "applicants": applicants,
                                                              "schema": flags.schema, "graph": graph, "pool": pool,
                                                              **extra_inputs(others)})
    check_run_options(resume=resume, fmt=fmt, output=output, backend=backend, scheduler=scheduler)
    # the output locks come first: a second writer is refused before any input is read
    with lock_outputs(files=(output, provenance)):
        margin = o.resolve_margin(margin, threshold)
        o.check_margin_options(threshold, margin, max_changes, graph=graph is not None)
        o.check_proximity(proximity, graph=graph is not None)
        settings = PlanSettings(method=method, k=k, theta=theta, bandwidth=bandwidth, candidates=candidates,
                                tol=tol, scheme="linear" if graph is None else "graph", endpoint=endpoint,
                                max_hops=max_hops, max_cost=max_cost, immutable_policy=immutable_policy,
                                margin=margin, sparsify=sparsify, max_changes=max_changes, proximity=proximity,
                                max_candidates=max_candidates, direct=direct_search).validate()
        training, loaded, spec = o.load_training(data, model, flags, threshold=threshold, encoding=encoding,
                                                trusted_types=trust_type, pool=pool, quiet=quiet, robust=others)
        loaded_graph = None
        if graph is not None:
            from .graph import load_graph

            loaded_graph, _ = load_graph(graph, training, data=data, model=model, scored_by=loaded)
        source = ApplicantFile(applicants, training.encoder, id_column=spec.id_column, encoding=encoding,
                               drop_missing=drop_missing)
        inputs = {"data": data, "model": model, "applicants": source.read_path, "schema": flags.schema,
                  "graph": None if graph is None else Path(graph) / "manifest.json", **extra_inputs(others)}

        def fingerprint() -> dict:
            # called once the inputs are validated (hashing a missing file would fail first)
            return _fingerprint(inputs, settings, training, threshold=threshold, seed=seed, id_column=spec.id_column,
                                drop_missing=drop_missing, scale=training.encoder.scale, **_robust_params(others))

        digest = hashlib.sha256() if provenance is not None else None
        planned = run_plan(training, loaded, source, settings, fmt=fmt, output=output, jobs=jobs,
                           chunk_size=chunk_size, graph=loaded_graph, backend=backend, scheduler=scheduler, resume=resume,
                           fingerprint=fingerprint, layout=layout, quiet=quiet, digest=digest, explain=explain)
        if provenance is not None and not planned:
            # frpd cannot tell which run wrote a complete output: keep (or leave missing) the provenance of that run
            echo_err(f"Note: '{output}' was already complete; --provenance '{provenance}' is left as it was (frpd "
                     "cannot tell which run wrote that file). Remove the output to plan and record it again.")
        elif provenance is not None:
            from ..provenance import describe_file, plans_sha256, provenance_record

            shown = {"data": data, "model": model, "applicants": applicants, "schema": flags.schema, "graph": graph,
                     **extra_inputs(others)}
            fmt_ = resolve_format(fmt, output, PLAN_FORMATS)
            record = provenance_record(
                "plan",
                inputs={name: None if path is None
                        else describe_file(shown[name], path, input_file=name in _READ_ONLY_INPUTS)
                        for name, path in inputs.items()},
                settings={**settings.to_dict(), "schema": training.schema.to_dict(), "threshold": threshold, "seed": seed,
                          "id_column": spec.id_column, "drop_missing": drop_missing, "chunk_size": chunk_size,
                          "encoding": encoding, "scale": training.encoder.scale, **_robust_params(others)},
                outputs=[{"path": "-" if output is None else str(output), "format": fmt_,
                          "sha256": plans_sha256(output, digest)}])
            write_provenance(provenance, record)
