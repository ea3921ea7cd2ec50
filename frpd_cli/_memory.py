"""Values of rows remembered by a key, for scores that depend on the row alone (each distinct row computed once)."""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["remembered"]


def remembered(keys: list, memory: dict, limit: int, compute: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The value of each row, read from ``memory`` by its key or computed once per distinct new key.

    Parameters
    ----------
    keys : list of hashable
        One key per row; rows with equal keys have equal values.
    memory : dict
        Key -> value, updated in place; cleared first when it would grow beyond ``limit`` entries.
    limit : int
    compute : callable
        Given the positions (ndarray of int) of one row per new key, their values (an array whose first axis
        follows the positions).

    Returns
    -------
    ndarray
        Shape ``(len(keys),)`` plus the shape of one value.
    """
    todo: dict = {}
    known = []
    for j, key in enumerate(keys):
        value = memory.get(key)
        if value is None:
            todo.setdefault(key, []).append(j)
        else:
            known.append((j, value))
    fresh = compute(np.array([at[0] for at in todo.values()], dtype=np.int64)) if todo or not keys else None
    shape = (np.shape(known[0][1]) if known else np.shape(fresh)[1:])
    out = np.empty((len(keys), *shape))
    for j, value in known:
        out[j] = value
    if todo:
        if len(memory) + len(todo) > limit:
            memory.clear()
        for (key, at), value in zip(todo.items(), fresh):
            out[at] = value
            memory[key] = value
    return out
