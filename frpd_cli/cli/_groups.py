"""Option groups: options declared once and handed to every command that takes them as one object.

A command names the object as a parameter annotated with the group's class (``flags: SchemaFlags =
SchemaFlags()``; the default only keeps Python's parameter order rules) and is decorated with the group
(``@SCHEMA_OPTIONS``). The decorator puts the group's options in that parameter's
place in the signature typer reads, so ``--help``, defaults, panels and shell completion are those of ordinary
``Annotated`` options; when the command runs, the options' values are gathered into the object.

Adding an option to a group touches one place: its ``Annotated`` declaration and the class's field.

An object with a ``usage_error(exc)`` method also decides which errors raised while the command runs are the
group's usage errors: the exception it returns (e.g. an ``OptionError`` naming the flag) is raised instead.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, replace
from typing import Any, Callable

__all__ = ["OptionGroup"]


@dataclass(frozen=True)
class OptionGroup:
    """Options that a command receives as one object built by ``build``.

    Parameters
    ----------
    cls : type
        The object's class; the command's parameter annotated with it receives the object.
    options : tuple of (name, annotation, default)
        The options, each an ``Annotated[type, typer.Option(...)]`` with its default, ``name`` being both the
        command's parameter name typer sees and the keyword passed to ``build``.
    build : callable, optional
        ``build(**values, **shared)`` -> the object (default: ``cls``).
    shared : tuple of str
        Parameters of the command itself (not of the group) that ``build`` also receives; the command keeps
        them too.
    """

    cls: type
    options: tuple
    build: Callable[..., Any] | None = None
    shared: tuple = ()

    def without(self, *names: str) -> "OptionGroup":
        """The group less the options ``names`` (their fields keep the class's defaults)."""
        unknown = set(names) - {name for name, _, _ in self.options}
        if unknown:
            raise ValueError(f"{self.cls.__name__} options have no {sorted(unknown)}")
        return replace(self, options=tuple(o for o in self.options if o[0] not in names))

    def only(self, *names: str) -> "OptionGroup":
        """The group with just the options ``names``, in the group's order."""
        return self.without(*[name for name, _, _ in self.options if name not in names])

    def declaring(self, **annotations) -> "OptionGroup":
        """The group with other declarations of some options (another help text or option name)."""
        return replace(self, options=tuple((name, annotations.get(name, annotation), default)
                                           for name, annotation, default in self.options))

    def __call__(self, func: Callable) -> Callable:
        """Decorate a command: its parameter annotated with ``cls`` becomes the group's options."""
        signature = inspect.signature(func, eval_str=True)
        target = [p.name for p in signature.parameters.values() if p.annotation is self.cls]
        if len(target) != 1:
            raise TypeError(f"{func.__qualname__} needs one parameter annotated {self.cls.__name__}")
        [target] = target
        make = self.build or self.cls
        names = [name for name, _, _ in self.options]
        parameters = []
        for p in signature.parameters.values():
            if p.name == target:
                parameters.extend(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                                    default=default) for name, annotation, default in self.options)
            else:       # keyword-only: typer passes every value by name, and order is free of default rules
                parameters.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
        shared = self.shared

        @functools.wraps(func)
        def command(**kwargs):
            values = {name: kwargs.pop(name) for name in names}
            group = kwargs[target] = make(**values, **{name: kwargs[name] for name in shared})
            usage_error = getattr(group, "usage_error", None)
            if usage_error is None:
                return func(**kwargs)
            try:
                return func(**kwargs)
            except Exception as exc:
                usage = usage_error(exc)
                if usage is None:
                    raise
                raise usage from None

        command.__signature__ = signature.replace(parameters=parameters)
        return command
