"""One place that turns errors into ``Error: ...`` on stderr and an exit status."""

from __future__ import annotations

import errno
import functools
import os
import sys
import warnings

import typer

from ..exceptions import FrpdError, OptionError
from ..outputs import Terminated, output_error, terminate_on_signals

__all__ = ["handle_errors", "echo_err"]


def echo_err(message: str) -> None:
    """Print a message line to stderr (never stdout)."""
    typer.echo(message, err=True)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    echo_err(f"Warning: {message}")


def handle_errors(func):
    """Run a command body; FrpdError -> exit 1 with ``Error: ...``; any other failure likewise, with a hint."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from .._digests import remembered_digests

        debug = os.environ.get("FRPD_DEBUG", "") not in ("", "0")
        try:
            with warnings.catch_warnings(), terminate_on_signals(), remembered_digests():
                warnings.simplefilter("default")
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
                warnings.filterwarnings("ignore", category=FutureWarning)
                warnings.showwarning = _show_warning
                return func(*args, **kwargs)
        except typer.Exit:
            raise
        except OptionError as exc:
            # an invalid option value found after parsing: a usage error (exit 2), shown the way typer shows its own
            raise typer.BadParameter(str(exc), param_hint=f"'{exc.option}'") from None
        except FrpdError as exc:
            if debug:
                raise
            echo_err(f"Error: {exc}")
            raise typer.Exit(1) from None
        except Terminated as exc:
            echo_err(f"Error: stopped by {exc}.")
            raise typer.Exit(128 + exc.signum) from None
        except KeyboardInterrupt:
            echo_err("Error: interrupted.")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # The reader of stdout went away (e.g. `frpd plan ... | head`): stop quietly.
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            raise typer.Exit(0) from None
        except OSError as exc:
            # the system refused a file operation frpd did not foresee (permissions, disk full, a special file)
            if debug:
                raise
            echo_err(f"Error: {_os_error_message(exc)}")
            raise typer.Exit(1) from None
        except Exception as exc:  # a bug or an unforeseen failure: still no traceback by default
            if debug:
                raise
            echo_err(f"Error: unexpected {type(exc).__name__}: {exc}. Run again with FRPD_DEBUG=1 for a traceback.")
            raise typer.Exit(1) from None

    return wrapper


def _os_error_message(exc: OSError) -> str:
    """One sentence for an OSError: the path (or connection), what the system said, what to do."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if exc.filename is not None and full:
        return str(output_error(exc.filename, exc))      # only a write fills a disk: name what was being written
    if exc.filename is None:
        said = f"{type(exc).__name__}: {exc.strerror or exc}."
        if full:
            return f"{said} The disk is full: free space where the outputs are written, then run again."
        if _from_dask(exc):
            return (f"{said} Check the Dask scheduler's address (--scheduler) and that it and its workers are "
                    "reachable.")
        return f"{said} Check that the inputs and outputs are reachable."
    name = f"'{exc.filename}'"
    if exc.filename2 is not None:
        name += f" (and '{exc.filename2}')"
    return (f"Cannot use {name}: {exc.strerror or type(exc).__name__}. Check that the path exists and is a regular "
            "file or folder you may read (or write, for outputs), and that the disk has space.")


_DASK_MODULES = ("dask", "distributed", "tornado")


def _from_dask(exc: BaseException) -> bool:
    """Whether an error was raised by Dask's own code (a connection to a scheduler or a worker), not by frpd's."""
    if type(exc).__module__.split(".")[0] in _DASK_MODULES:
        return True
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0] in _DASK_MODULES:
            return True
        tb = tb.tb_next
    return False
