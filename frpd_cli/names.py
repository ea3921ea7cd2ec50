"""Near misses among column names, for messages about a name that is not there."""

from __future__ import annotations

import difflib

__all__ = ["near_miss", "did_you_mean"]


def near_miss(name: str, names) -> str | None:
    """The name of ``names`` that ``name`` most likely misspells, or None.

    The same name in another case wins; otherwise the closest by :func:`difflib.get_close_matches` (ratio at
    least 0.6, compared in lower case).

    Examples
    --------
    >>> near_miss("agee", ["age", "job", "label"]), near_miss("Label", ["age", "label"]), near_miss("x", ["age"])
    ('age', 'label', None)
    """
    names = [str(n) for n in names]
    folded = {n.lower(): n for n in reversed(names)}
    if str(name).lower() in folded and folded[str(name).lower()] != name:
        return folded[str(name).lower()]
    close = difflib.get_close_matches(str(name).lower(), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close and folded[close[0]] != name else None


def did_you_mean(name: str, names) -> str:
    """`` Did you mean 'age'?`` for a likely misspelling of one of ``names``, else an empty string."""
    match = near_miss(name, names)
    return f" Did you mean '{match}'?" if match else ""
