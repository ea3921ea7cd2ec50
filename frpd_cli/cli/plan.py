"""``frpd plan``: select and interpolate for every applicant in one step."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ..data import read_csv
from ..exceptions import InputError
from ..planning import PlanSettings, plan_applicants
from ._errors import echo_err
from ._output import PlanWriter, open_output, resolve_format, stderr_console

__all__ = ["read_applicants", "run_plan", "summarize_plans"]


def read_applicants(path: Path, feature_names, id_column: str | None, *, encoding: str = "utf-8"):
    """Read the applicants file; return the frame and the applicant ids (id column or 0-based row number)."""
    frame = read_csv(path, encoding=encoding, what="applicants file")
    missing = [n for n in feature_names if n not in frame.columns]
    if missing:
        raise InputError(
            f"Column(s) {', '.join(repr(m) for m in missing)} missing from the applicants file '{path}'; "
            "the model was trained with them."
        )
    if id_column is not None:
        if id_column not in frame.columns:
            raise InputError(
                f"The id column '{id_column}' is not in the applicants file '{path}'. "
                f"Its columns are: {', '.join(map(str, frame.columns))}."
            )
        ids = [str(v) for v in frame[id_column].tolist()]
    else:
        ids = [str(i) for i in range(len(frame))]
    extra = [c for c in frame.columns if c not in feature_names and c != id_column]
    if extra:
        echo_err(f"Warning: ignoring column(s) {', '.join(map(str, extra))} of '{path}' (not features).")
    return frame, ids


def summarize_plans(counts: dict, n: int, seconds: float) -> str:
    parts = [f"{counts.get('ok', 0)} planned"]
    if counts.get("already-favorable"):
        parts.append(f"{counts['already-favorable']} already favourable")
    if counts.get("infeasible"):
        parts.append(f"{counts['infeasible']} infeasible")
    rate = n / seconds if seconds > 0 else float("inf")
    return f"{n} applicant(s): {', '.join(parts)} in {seconds:.2f} s ({rate:.1f} applicants/s)."


def run_plan(training, model, applicants: pd.DataFrame, ids, settings: PlanSettings, *, fmt: str | None,
             output: Path | None, jobs: int, chunk_size: int = 64) -> None:
    """Plan every applicant and stream the records to stdout or ``output``."""
    fmt = resolve_format(fmt, output)
    start = time.perf_counter()
    counts: dict = {}
    console = stderr_console()
    show_progress = len(applicants) > 1 and console.is_terminal
    progress = Progress(TextColumn("planning"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=console, transient=True, disable=not show_progress)
    with progress, open_output(output) as stream:
        task = progress.add_task("plan", total=len(applicants))
        writer = PlanWriter(stream, fmt, training.schema.feature_names)
        for plans in plan_applicants(training, model, applicants, ids, settings, n_jobs=jobs,
                                     chunk_size=chunk_size,
                                     progress=lambda done, total: progress.update(task, completed=done)):
            for p in plans:
                counts[p.status] = counts.get(p.status, 0) + 1
            writer.write(plans)
        writer.close()
    echo_err(summarize_plans(counts, len(applicants), time.perf_counter() - start))
    if counts.get("infeasible", 0) and counts.get("infeasible", 0) >= max(1, len(applicants) // 2):
        echo_err("Hint: many applicants have too few candidates; declare fewer immutable or monotone features.")
