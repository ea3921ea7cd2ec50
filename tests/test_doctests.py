"""The examples in frpd's docstrings run and print what they show (one test per module that has any)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import frpd_cli


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(frpd_cli.__path__, prefix="frpd_cli.")
                  if not m.name.endswith("__main__"))


def _with_examples() -> list[str]:
    finder = doctest.DocTestFinder()
    out = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:             # a module of an optional extra that is not installed
            continue
        if any(t.examples for t in finder.find(module, name)):
            out.append(name)
    return out


@pytest.mark.parametrize("name", _with_examples())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring example(s) of {name} failed"
