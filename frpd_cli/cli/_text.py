"""``--format text``: each plan in plain words, for the person who receives it.

::

    Applicant A013: to be accepted, any one of these would do:
      1. raise savings from none to moderate.
      2. change job from unskilled to skilled.
      3. change job from unskilled to management.
      Each option keeps everything it does not mention as it is now: age 35, duration 24,
      credit_amount 1929.22, housing rent, job unskilled, savings none.

Numbers are written with their training column's precision (:class:`ValueFormat`); a number or an ordered
category that goes up is *raised*, one that goes down *lowered*, any other category *changed*. The features
to keep are the mutable ones: an immutable feature is never advice, neither as a change nor as something to
keep. Partial, infeasible, already favourable and incomplete applicants get a plain sentence, the technical
reason after ``Details:``.
"""

from __future__ import annotations

import textwrap

from ..plans import Plan, python_value
from ._output import ValueFormat

__all__ = ["plan_text", "change_verb", "opposite_moves"]

_WIDTH = 100


def change_verb(feature, old, new) -> str:
    """``raise`` when the value goes up (a number, or an ordinal level later in the declared order), ``lower``
    when it goes down, ``change`` for an unordered category (or a feature the schema does not know)."""
    if feature is None:
        return "change"
    if feature.kind == "ordinal" and old in feature.levels and new in feature.levels:
        return "raise" if feature.levels.index(new) > feature.levels.index(old) else "lower"
    if feature.kind in ("continuous", "integer"):
        a, b = python_value(old), python_value(new)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return "raise" if b > a else "lower"
    return "change"


def opposite_moves(plan: Plan, features: dict) -> list[tuple[str, int, int]]:
    """The features one recourse of ``plan`` raises and another lowers: ``(name, rank raising, rank lowering)``,
    the first of each, in the order the plan first moves them (``features``: name -> Feature).

    A model that is not monotone in a feature may accept it moved either way; the person then reads "raise it"
    and "lower it" side by side.
    """
    ups: dict = {}
    downs: dict = {}
    for r in plan.recourses:
        for name, (old, new) in r.changes.items():
            verb = change_verb(features.get(name), old, new)
            if verb == "raise":
                ups.setdefault(name, r.rank)
            elif verb == "lower":
                downs.setdefault(name, r.rank)
    return [(name, ups[name], downs[name]) for name in ups if name in downs]


def _action(features: dict, values: ValueFormat, name: str, old, new) -> str:
    a, b = values.pair(name, old, new)
    return f"{change_verb(features.get(name), old, new)} {name} from {a} to {b}"


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _wrapped(text: str, indent: str, more: str) -> list[str]:
    return textwrap.wrap(text, width=_WIDTH, initial_indent=indent, subsequent_indent=more,
                         break_long_words=False, break_on_hyphens=False)


def _option(features: dict, values: ValueFormat, recourse) -> str:
    changes = [_action(features, values, n, *recourse.changes[n]) for n in _ordered(recourse.changes, recourse)]
    text = _joined(changes)
    if len(changes) > 1:
        text += ", all together"
    steps = recourse.steps or []
    if len(steps) > 1:
        moves = [_joined([_action(features, values, n, *pair) for n, pair in step.items()]) for step in steps]
        text += f", in {len(steps)} steps: " + "; then ".join(moves)
    return text + "."


def _ordered(changes: dict, recourse) -> list[str]:
    order = list(recourse.features)
    return sorted(changes, key=lambda n: order.index(n) if n in order else len(order))


def _kept(plan: Plan, features: dict, values: ValueFormat) -> list[str]:
    kept = []
    for name, value in plan.applicant_features.items():
        feature = features.get(name)
        if feature is not None and feature.mutability == "immutable":
            continue
        kept.append(f"{name} {values(name, value)}")
    return kept


def plan_text(plan: Plan, schema=None, values: ValueFormat | None = None) -> str:
    """One plan in plain words (a paragraph ending with a blank line).

    Parameters
    ----------
    plan : Plan
    schema : Schema, optional
        Kinds, ordinal orders and mutability of the features: which changes go up or down, which features the
        applicant is asked to keep (the immutable ones are left out). Without it every change is a
        ``change`` and every feature is listed to keep.
    values : ValueFormat, optional
        The precision of each numeric feature.
    """
    values = values or ValueFormat()
    features = {} if schema is None else {f.name: f for f in schema.features}
    head = f"Applicant {plan.applicant}"
    lines: list[str] = []
    if plan.status == "already-favorable":
        lines += _wrapped(f"{head}: the model already accepts this application; nothing needs to change.", "", "  ")
    elif plan.status == "invalid-input":
        lines += _wrapped(f"{head}: no plan was made, because the application has missing values.", "", "  ")
    elif not plan.recourses:
        lines += _wrapped(f"{head}: no change was found that would get this application accepted while keeping "
                          "its rules (what may not change, what may only go up or down, and how far each value "
                          "may move).", "", "  ")
    else:
        several = len(plan.recourses) > 1
        lines.append(f"{head}: to be accepted, {'any one of these would do' if several else 'this would do'}:")
        for r in plan.recourses:
            lines += _wrapped(_option(features, values, r), f"  {r.rank}. ", " " * (len(str(r.rank)) + 4))
        kept = _kept(plan, features, values)
        if kept:
            subject = "Each option keeps" if several else "It keeps"
            lines += _wrapped(f"{subject} everything it does not mention as it is now: {', '.join(kept)}.",
                              "  ", "  ")
        for name, up, down in opposite_moves(plan, features):
            first, second = sorted((up, down))
            lines += _wrapped(f"Options {first} and {second} move {name} opposite ways: the model accepts either "
                              "direction (each option is complete on its own).", "  ", "  ")
        if plan.partial:
            n = len(plan.recourses)
            lines += _wrapped(f"Only {n} different option{'s were' if n != 1 else ' was'} found for this "
                              "application.", "  ", "  ")
    if plan.reason and (plan.status != "ok" or plan.partial or not plan.recourses):
        lines += _wrapped(f"Details: {plan.reason}", "  ", "  ")
    return "\n".join(lines) + "\n\n"
