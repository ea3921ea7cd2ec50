"""One place that turns errors into ``Error: ...`` on stderr and an exit status."""

from __future__ import annotations

import functools
import os
import sys
import warnings

import typer

from ..exceptions import FrpdError
from ..outputs import Terminated, terminate_on_signals

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
        debug = os.environ.get("FRPD_DEBUG", "") not in ("", "0")
        try:
            with warnings.catch_warnings(), terminate_on_signals():
                warnings.simplefilter("default")
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
                warnings.filterwarnings("ignore", category=FutureWarning)
                warnings.showwarning = _show_warning
                return func(*args, **kwargs)
        except typer.Exit:
            raise
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
        except Exception as exc:  # a bug or an unforeseen failure: still no traceback by default
            if debug:
                raise
            echo_err(f"Error: unexpected {type(exc).__name__}: {exc}. Run again with FRPD_DEBUG=1 for a traceback.")
            raise typer.Exit(1) from None

    return wrapper
