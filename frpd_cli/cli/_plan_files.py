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
                               encoding: str = "utf-8", used=(), keep_without_values: bool = False):
    """The plan records and the applicants' raw rows and ids they refer to.

    The applicants come from ``--applicants`` (columns in ``used`` are read by the caller, not warned about), or
    are rebuilt from jsonl/json recourses. A plan whose applicant cannot be rebuilt holds no recourse (or no
    recourse with ``changes``): with ``keep_without_values`` the plans without recourse are kept, their ids
    returned for :func:`frpd_cli.evaluation.evaluate_plans` (which counts them from their status), those of
    status ``invalid-input`` are left out with a warning, and one with recourses is an error; without it every
    such plan is left out with a warning. A repeated (applicant, method) pair is warned about.

    Returns
    -------
    records : list of dict
    frame : DataFrame of the applicants' raw feature rows
    ids : list of str
    without_values : list of str
        Ids of the applicants of kept plans whose values are not in ``frame`` (empty unless
        ``keep_without_values``).
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
        return records, frame, ids, []
    frame, ids, unknown = applicants_from_records(records, training.schema.feature_names)
    if unknown and keep_without_values:
        records, unknown = _kept_without_values(records, set(unknown))
    elif unknown:
        echo_err(f"Warning: {len(unknown)} applicant(s) have no recourse to rebuild their values from "
                 f"({_shown(unknown)}); their plans are left out. Pass --applicants to include them.")
        gone = set(unknown)
        records = [r for r in records if str(r["applicant"]) not in gone]
        unknown = []
    if not records and keep_without_values:
        raise InputError(f"No plan in '{plans}' is left to evaluate: every one is of status invalid-input.")
    if not records:
        raise InputError("No plan in the file has a recourse to rebuild its applicant from; pass --applicants.")
    return records, frame, ids, unknown


def _shown(ids) -> str:
    return ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")


def _kept_without_values(records, unknown: set) -> tuple[list, list]:
    """The records of applicants without values that an evaluation counts from their status (every other
    record kept as is), and those applicants' ids; plans of status ``invalid-input`` are left out, saying so."""
    with_recourses = list(dict.fromkeys(str(r["applicant"]) for r in records
                                        if str(r["applicant"]) in unknown and r["recourses"]))
    if with_recourses:
        raise InputError(f"The recourses of {len(with_recourses)} applicant(s) ({_shown(with_recourses)}) carry "
                         "no 'changes' to rebuild the applicant's values from; pass --applicants with the "
                         "applicants file the plans were made for.")
    unread = [str(r["applicant"]) for r in records
              if str(r["applicant"]) in unknown and r.get("status") == "invalid-input"]
    if unread:
        echo_err(f"Warning: {len(unread)} plan(s) of status invalid-input ({_shown(unread)}) are left out: their "
                 "applicants' values could not be read when the plans were made, and the plans do not hold them.")
        gone = set(unread)
        records = [r for r in records if not (str(r["applicant"]) in gone and r.get("status") == "invalid-input")]
    kept = list(dict.fromkeys(str(r["applicant"]) for r in records if str(r["applicant"]) in unknown))
    return records, kept
