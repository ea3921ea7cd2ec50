"""The ``frpd`` command: argument parsing only; the work is one library call per command.

Start-up is kept short: each command lives in its own module, imported only when that command runs (or its
``--help`` is asked for). ``frpd --version`` and ``frpd --help`` import typer and nothing numerical; the
command list shown by ``--help`` comes from :data:`COMMANDS` (a test checks it against each command's own
help).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from .. import __version__

__all__ = ["app", "main", "COMMANDS"]

# command name -> (module under frpd_cli.cli that registers it, the summary shown by ``frpd --help``);
# in the order ``frpd --help`` lists them.
COMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": ("evaluation", "Recompute the paper's metrics for plan files, per method (mean and std)."),
    "audit": ("audit", "Audit a batch of plans: cost of recourse by group, and the actions that help the most "
                       "denied applicants."),
    "build-graph": ("graph", "Build the actionability graph over the training rows (for sequential recourse and "
                             "FACE)."),
    "plan": ("plan", "Plan K diverse recourses for every applicant (select prototypes, then interpolate)."),
    "select": ("selection", "Select K diverse prototypes per applicant and save them as a selection artifact."),
    "interpolate": ("selection", "Turn a selection artifact into recourse plans (a plan artifact, and the records "
                                 "on stdout)."),
    "build-pool": ("pool", "Encode the training rows and score them with the model once, and save them as a pool "
                           "artifact."),
    "build-refits": ("refits", "Refit copies of the model on resamples of the training data and save them as a "
                               "refits artifact."),
    "schema": ("schema", "Show the schema frpd infers from a data file (roles, kinds, ranges, levels), and write "
                         "it as TOML."),
}


def _load_command(name: str):
    """Import the module of command ``name`` (which registers it on :data:`app`) and return its click command."""
    importlib.import_module(f"{__package__}.{COMMANDS[name][0]}")
    group = typer.main.get_command(app)
    return group.commands[name]


def _convert_cheaply(command, ctx) -> None:
    """Give the parameters ``command`` parses in ``ctx`` (its help option included) the cheap value conversion
    of :mod:`._params` (start-up time: typer's own conversion imports pydantic)."""
    from ._params import install

    install(command.get_params(ctx))


class _Command(TyperCommand):
    """Every ``frpd`` command: a typer command whose parameter values are converted by :mod:`._params`."""

    def parse_args(self, ctx, args):
        _convert_cheaply(self, ctx)
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx) -> list[str]:
        # arguments by their names in capitals (typer 0.29 writes a required one as {data})
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = (param.metavar or param.name).upper()
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_help(self, ctx, formatter) -> None:
        from ._help import format_help

        format_help(self, ctx)


class _App(typer.Typer):
    """The ``frpd`` application: commands registered on it are :class:`_Command` unless they name a class."""

    def command(self, *args, cls=None, **kwargs):
        return super().command(*args, cls=cls or _Command, **kwargs)


class _DeferredCommand(TyperCommand):
    """Stands for a command whose module is not imported yet: its name and summary for ``frpd --help``;
    running it (or asking for its own help) imports the module and hands over to the real command."""

    def make_context(self, info_name, args, parent=None, **extra):
        return _load_command(self.name).make_context(info_name, args, parent=parent, **extra)


class _LazyGroup(TyperGroup):
    """The ``frpd`` group: commands registered so far, plus the not yet imported ones of :data:`COMMANDS`.

    Its own help and usage errors are plain text: rich's help renderer alone takes longer to import than the
    rest of ``frpd --help``. Each command's help keeps the rich panels.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None

    def parse_args(self, ctx, args):
        _convert_cheaply(self, ctx)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx, formatter) -> None:
        # whole summaries, wrapped (click would cut them at the first line's width)
        rows = [(name, command.get_short_help_str(limit=1000)) for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def list_commands(self, ctx) -> list[str]:
        names = list(COMMANDS)
        return names + [n for n in super().list_commands(ctx) if n not in COMMANDS]

    def get_command(self, ctx, cmd_name: str):
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = _DeferredCommand(name=cmd_name, help=COMMANDS[cmd_name][1], callback=None)
        return command


app = _App(
    name="frpd",
    help="Feasible recourse plans via diverse interpolation: for applicants a classifier turned down, K diverse, "
         "valid, actionable changes that would flip the decision.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=_LazyGroup,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"frpd {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    """Feasible recourse plans via diverse interpolation."""


def main() -> None:
    """Entry point of the ``frpd`` console script.

    Once a command has finished (its files closed, its workers stopped), the process leaves without tearing the
    interpreter down: freeing the modules and objects of scikit-learn, pandas and scipy one by one takes about
    0.7 s and does nothing a finished command needs. The ``atexit`` handlers run and the standard streams are
    flushed first, as at a normal exit; the exit status is the one ``sys.exit`` would give.
    """
    try:
        app()
    except SystemExit as exc:
        _leave(exc.code)
    _leave(0)


def _stop_joblib_workers() -> None:
    """Stop the worker processes of joblib's reusable executor, if anything started them (a model whose
    ``predict_proba`` runs joblib with ``n_jobs``).

    A normal interpreter exit stops them before the ``atexit`` handlers run; :func:`_leave` skips that step, and
    multiprocessing's handler would then wait for the idle workers to time out (300 s).
    """
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None)
    if executor is not None:
        try:
            executor.shutdown(wait=True, kill_workers=True)
        except Exception:                   # the workers are gone already, or joblib changed: nothing to stop
            pass


def _leave(code) -> None:
    """Run the ``atexit`` handlers, flush stdout and stderr and end the process with status ``code``."""
    import atexit

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:                                   # sys.exit("message"): the message on stderr, status 1
        sys.stderr.write(f"{code}\n")
        status = 1
    _stop_joblib_workers()
    atexit._run_exitfuncs()                 # as at a normal exit: handlers first, then the streams are flushed
    try:
        sys.stdout.flush()
    except BrokenPipeError:                 # the reader went away (`frpd plan ... | head`): nothing to report
        pass
    except OSError as exc:                  # e.g. a full disk under `> file`: the data did not all get out
        sys.stderr.write(f"Error: cannot write the output to stdout: {exc.strerror or exc}.\n")
        status = status or 1
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(status)
