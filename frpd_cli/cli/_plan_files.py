"""Reading plan files with their applicants, as ``evaluate`` and ``audit`` do."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from ..exceptions import InputError
from ..plans import read_plans
from . import _options as o
from ._errors import echo_err
from ._output import resolve_format

__all__ = ["PlansOpt", "require_matplotlib", "load_for_review", "read_plans_with_applicants"]

PlansOpt = Annotated[Path, typer.Option("--plans", readable=False, help="Plans from plan/interpolate (csv or jsonl; "
                                        "several methods may be concatenated).", show_default=False)]


def require_matplotlib() -> None:
    """Refuse ``--plot`` before any work when matplotlib (the ``plot`` extra) is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("--plot needs matplotlib: install the plot extra with "
                         "`pip install 'frpd-cli[plot]'`.") from None


def load_for_review(fmt, output: Path | None, plot: Path | None, data: Path, model: Path, flags, **options):
    """The setup ``evaluate`` and ``audit`` share, in order: the output format, matplotlib when ``--plot`` asks
    for it, then the training data and model with only a *declared* move bound checked (a review never imposes
    the planning default). Returns ``(fmt, (training, loaded, spec))``; ``options`` go to
    :func:`_options.load_training`."""
    fmt = resolve_format(fmt, output)
    if plot is not None:
        require_matplotlib()
    return fmt, o.load_training(data, model, o.declared_only(flags), **options)


@contextmanager
def _records_kept():
    """No cyclic garbage collection while plan records are built, and none over them afterwards.

    A plans file of 100,000 plans is millions of small dicts and lists, which live until the command ends and
    hold no reference cycles (reference counting frees them). Left to the collector, each full collection
    walks all of them again: reading took 3x the CPU. They are moved to the permanent generation instead.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def read_plans_with_applicants(plans: Path, applicants: Path | None, training, id_column: str | None, *,
                               encoding: str = "utf-8", used=()):
    """The plan records and the applicants' raw rows and ids they refer to.

    The applicants come from ``--applicants`` (columns in ``used`` are read by the caller, not warned about), or
    are rebuilt from jsonl/json recourses; plans of applicants that cannot be rebuilt are left out with a
    warning. A repeated (applicant, method) pair is warned about.

    Returns
    -------
    records : list of dict
    frame : DataFrame of the applicants' raw feature rows
    ids : list of str
    """
    from ..evaluation import applicants_from_records, repeated_plans

    with _records_kept():
        records = read_plans(plans)
    repeated = repeated_plans(records)
    if repeated:
        a, mth, n = repeated[0]
        echo_err(f"Warning: {len(repeated)} (applicant, method) pair(s) have more than one plan in '{plans}' (first: "
                 f"applicant {a!r}, method {mth!r}, {n} plans); each plan counts on its own, so these "
                 "applicants weigh more in their method's means. Give each run its own method label (e.g. --theta, "
                 "--graph, --endpoint) or read the files separately.")
    if applicants is not None:
        frame, ids = o.read_applicants(applicants, training, id_column, encoding=encoding, used=used)
        return records, frame, ids
    frame, ids, unknown = applicants_from_records(records, training.schema.feature_names)
    if unknown:
        echo_err(f"Warning: {len(unknown)} applicant(s) have no recourse to rebuild their values from "
                 f"({', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''}); their plans are left out. "
                 "Pass --applicants to include them.")
        gone = set(unknown)
        records = [r for r in records if str(r["applicant"]) not in gone]
    if not records:
        raise InputError("No plan in the file has a recourse to rebuild its applicant from; pass --applicants.")
    return records, frame, ids
