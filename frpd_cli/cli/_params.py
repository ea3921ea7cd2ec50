"""Cheap conversion of command-line values, with typer's own conversion as the reference.

Recent typer versions convert every parameter value (given or defaulted) through a pydantic ``TypeAdapter``
built for that parameter on first use: importing pydantic and building some forty adapters costs a large share
of a short run's start-up. :func:`install` gives each parameter of a command a converter that handles the
ordinary cases directly -- no value, a string for a path, a string or an ``int`` / ``float`` already of the
right kind within the option's bounds, one of a choice option's values, strings for a repeatable string option
-- and hands every other value (anything malformed, out of bounds, or of another kind) to typer's own
converter, built only then. Values typer accepts come out the same; every error message is typer's, because
only typer's converter ever rejects a value.

Nothing here changes an option, its help or its messages; with a typer that converts values without pydantic
(no ``type_descriptor`` on its parameters) :func:`install` does nothing. ``tests/test_startup.py`` compares
this conversion with typer's, parameter by parameter, on valid and invalid values of every command.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args, get_origin

__all__ = ["install", "FastParam"]

# Plain decimal spellings that Python and pydantic read as the same number (anything else: typer decides).
_INT = re.compile(r"[+-]?[0-9]{1,18}")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?")
_SLOW = object()   # "let typer convert this one"


def _within(value, info) -> bool:
    low, high = info.min, info.max
    return (low is None or value >= low) and (high is None or value <= high)


class FastParam:
    """Converts one parameter's values like typer's converter does, without building it unless needed.

    Has the ``coerce(value, param, ctx)`` method typer calls; values outside the cases below are passed to
    typer's converter (``typer._coercion.build_runtime_param`` of the parameter's descriptor), built once on
    first need.
    """

    def __init__(self, descriptor) -> None:
        self.descriptor = descriptor
        self._typer = None
        annotation = descriptor.annotation
        info = descriptor.parameter_info
        self._convert = None
        plain = info.parser is None and not info.clamp and descriptor.file_annotation is None
        if not plain:
            return
        if annotation is str:
            self._convert = self._str
        elif annotation is bool:
            self._convert = self._bool
        elif annotation is int:
            self._convert = self._int
        elif annotation is float:
            self._convert = self._float
        elif isinstance(annotation, type) and issubclass(annotation, Path):
            if info.path_type is None and not info.allow_dash and not info.resolve_path:
                self._convert = self._path
        elif descriptor.is_choice and not descriptor.is_list:
            self._choices = descriptor.choices
            self._convert = self._choice
        elif get_origin(annotation) is list and get_args(annotation) == (str,):
            self._convert = self._str_list

    # the cases handled here; each returns _SLOW for anything else
    @staticmethod
    def _str(value, param, ctx):
        return value if type(value) is str else _SLOW

    @staticmethod
    def _bool(value, param, ctx):
        return value if type(value) is bool else _SLOW

    def _int(self, value, param, ctx):
        if type(value) is str and _INT.fullmatch(value):
            value = int(value)
        if type(value) is int and _within(value, self.descriptor.parameter_info):
            return value
        return _SLOW

    def _float(self, value, param, ctx):
        if type(value) is str and _FLOAT.fullmatch(value):
            value = float(value)
        if type(value) is float and _within(value, self.descriptor.parameter_info):
            return value
        return _SLOW

    def _path(self, value, param, ctx):
        if type(value) is not str:
            return _SLOW
        from typer._param_types import coerce_cli_path

        annotation = self.descriptor.annotation
        # typer turns the string into the annotation's path type first, then applies its checks (a path it
        # refuses goes back to typer, for typer's own message)
        try:
            return coerce_cli_path(annotation(value), self.descriptor.parameter_info, path_type=annotation,
                                   param=param, ctx=ctx)
        except Exception:
            return _SLOW

    def _choice(self, value, param, ctx):
        if type(value) is not str:
            return _SLOW
        from typer._param_types import coerce_cli_choice

        try:
            return coerce_cli_choice(value, choices=self._choices, case_sensitive=self.descriptor.case_sensitive,
                                     ctx=ctx)
        except ValueError:
            return _SLOW

    @staticmethod
    def _str_list(value, param, ctx):
        if type(value) in (tuple, list) and all(type(item) is str for item in value):
            return list(value)
        return _SLOW

    def _typer_converter(self):
        if self._typer is None:
            from typer._coercion import build_runtime_param

            self._typer = build_runtime_param(self.descriptor)
        return self._typer

    def coerce(self, value: Any, param, ctx) -> Any:
        """The converted value (typer's converter decides every case not handled here)."""
        multiple = param.multiple or param.nargs == -1
        if value is None:
            return () if multiple else None
        if self._convert is not None and not (multiple and isinstance(value, str)):
            converted = self._convert(value, param, ctx)
            if converted is not _SLOW:
                return converted
        return self._typer_converter().coerce(value, param=param, ctx=ctx)


def install(params) -> None:
    """Give every parameter built by typer in ``params`` a :class:`FastParam` (idempotent; a no-op with a
    typer whose parameters have no ``type_descriptor``)."""
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or not hasattr(param, "_runtime_param") or not hasattr(param, "get_runtime_param"):
            continue
        if isinstance(param._runtime_param, FastParam):
            continue
        try:
            param._runtime_param = FastParam(descriptor)
        except AttributeError:   # a typer whose descriptors differ: keep its own conversion
            return
