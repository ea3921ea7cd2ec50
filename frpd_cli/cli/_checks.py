"""What the training rows keep and recourses may break, for every command that writes or reads recourses
(``plan``, ``interpolate``, ``evaluate``): order relations (:mod:`frpd_cli.relations`), ratio relations
(a derived feature) and lone negative codes (:mod:`frpd_cli.sentinels`), searched once over the training rows,
and the warnings on stderr of the recourses that break them."""

from __future__ import annotations

import shlex

__all__ = ["RecourseChecks"]


class RecourseChecks:
    """The relations and codes of the training rows, and per item the recourses that break it: ``[recourses,
    applicants, first example]`` (counts, not the applicants' ids: a batch of millions stays small).

    With ``distinct_applicants`` an applicant is counted once per item however many of its plans are added (a
    command holding several plans per applicant, one per method or theta, holds their ids anyway); without
    it, once per plan (``plan``: one plan per applicant).
    """

    def __init__(self, relations=(), ratios=(), sentinels=(), *, distinct_applicants: bool = False):
        self.relations, self.ratios, self.sentinels = list(relations), list(ratios), list(sentinels)
        self._distinct = distinct_applicants
        self._tallies: tuple = ({}, {}, {})      # order relations, ratio relations, codes

    @classmethod
    def of_frame(cls, frame, schema, *, distinct_applicants: bool = False) -> RecourseChecks:
        """The checks of raw training rows ``frame`` (none without a frame); each numeric column is converted
        once for the three searches."""
        import pandas as pd

        if not isinstance(frame, pd.DataFrame):
            return cls(distinct_applicants=distinct_applicants)
        from ..numeric import numeric_columns
        from ..relations import find_order_relations, find_ratio_relations, relation_columns
        from ..sentinels import find_sentinels

        columns = numeric_columns(frame, schema)
        usable = relation_columns(frame, schema, columns)
        return cls(find_order_relations(frame, schema, columns=usable),
                   find_ratio_relations(frame, schema, columns=usable),
                   find_sentinels(frame, schema, columns=columns), distinct_applicants=distinct_applicants)

    @classmethod
    def of_training(cls, training, **kwargs) -> RecourseChecks:
        """The checks of a training set's raw rows (``training.frame``)."""
        return cls.of_frame(getattr(training, "frame", None), training.schema, **kwargs)

    def __bool__(self) -> bool:
        return bool(self.relations or self.ratios or self.sentinels)

    def add_plan(self, plan) -> None:
        """Count the recourses of a plan (of status ``ok``; any other holds none)."""
        if plan.status == "ok" and self:
            self.add(plan.applicant, plan.applicant_features, [r.features for r in plan.recourses])

    def add(self, applicant, applicant_features: dict, recourses) -> None:
        """Count the recourses (raw feature dicts) of one applicant (``applicant_features``, raw)."""
        from ..relations import broken_ratio, broken_relation

        def order_example(relation, features):
            return (applicant, features) if broken_relation(relation, applicant_features, features) else None

        def ratio_example(relation, features):
            return (applicant, features) if broken_ratio(relation, applicant_features, features) else None

        def code_example(sentinel, features):
            name = sentinel.feature
            old = applicant_features.get(name)
            if _equals(features.get(name), sentinel.value) and not _equals(old, sentinel.value):
                return applicant, old
            return None

        for found, tally, example in zip((self.relations, self.ratios, self.sentinels), self._tallies,
                                         (order_example, ratio_example, code_example)):
            if found:
                self._count(found, tally, example, applicant, recourses)

    def _count(self, found, tally: dict, example, applicant, recourses) -> None:
        seen = set()
        for features in recourses:
            for item in found:
                first = example(item, features)
                if first is None:
                    continue
                entry = tally.setdefault(item, [0, 0, first, set() if self._distinct else None])
                entry[0] += 1
                if item in seen:
                    continue
                seen.add(item)
                if entry[3] is None:
                    entry[1] += 1
                elif applicant not in entry[3]:
                    entry[3].add(applicant)
                    entry[1] += 1

    def warnings(self) -> list[str]:
        """The warnings of the recourses counted, in the order relations, ratios, codes (each in the order
        first broken)."""
        relations, ratios, codes = self._tallies
        return ([_broken_relation_warning(item, n, n_applicants, first)
                 for item, (n, n_applicants, first, _) in relations.items()]
                + [_broken_ratio_warning(item, n, n_applicants, first)
                   for item, (n, n_applicants, first, _) in ratios.items()]
                + [_sentinel_warning(item, n, n_applicants, first)
                   for item, (n, n_applicants, first, _) in codes.items()])


def _equals(value, number: float) -> bool:
    try:
        return float(value) == number
    except (TypeError, ValueError):
        return False


def _sentinel_warning(sentinel, n_coded: int, n_applicants: int, first) -> str:
    from ._output import format_value

    name, value = sentinel.feature, format_value(sentinel.value)
    applicant, old = first
    return (f"Warning: {n_coded} recourse(s) of {n_applicants} applicant(s) move {name!r} to {value} (first: "
            f"applicant {applicant}, from {format_value(old)}), its only negative value, held by {sentinel.n_at} "
            f"of its {sentinel.n_rows} training rows while every other value is 0 or more: a code for a missing or "
            f"wrong value rather than an amount, which no applicant can choose. --range {shlex.quote(name)}=0: "
            "keeps recourses off it.")


def _broken_relation_warning(relation, n_broken: int, n_applicants: int, first) -> str:
    from ._output import format_value

    low, high = relation.low, relation.high
    applicant, features = first
    return (f"Warning: {n_broken} recourse(s) of {n_applicants} applicant(s) put {low!r} above {high!r} (first: "
            f"applicant {applicant}, {low} {format_value(features[low])} > {high} {format_value(features[high])}), "
            f"which no training row does ({low} <= {high} in all {relation.n_rows} rows, equal in "
            f"{relation.equal_share:.0%} of them): a combination that may not exist, such as a part larger than "
            f"its whole. frpd does not keep such relations by itself: review these recourses, or keep the two in "
            f"order with --decreasing {shlex.quote(low)} --increasing {shlex.quote(high)} (which also forbids the "
            "moves that crossed them).")


def _broken_ratio_warning(relation, n_broken: int, n_applicants: int, first) -> str:
    from ._output import format_value

    derived, numerator, denominator = relation.derived, relation.numerator, relation.denominator
    applicant, features = first
    try:
        ratio = format_value(float(features[numerator]) / float(features[denominator]))
    except ZeroDivisionError:
        ratio = "undefined"
    frozen = " ".join(f"--immutable {shlex.quote(name)}" for name in (derived, numerator, denominator))
    return (f"Warning: {n_broken} recourse(s) of {n_applicants} applicant(s) break {derived!r} = {numerator!r} / "
            f"{denominator!r} (first: applicant {applicant}, {numerator} {format_value(features[numerator])} / "
            f"{denominator} {format_value(features[denominator])} = {ratio} but {derived} "
            f"{format_value(features[derived])}), which every training row keeps (all {relation.n_rows} rows, "
            f"within a relative {relation.max_error:.1e}): {derived!r} is derived from the other two, and a "
            f"recourse that moves one of the three alone is a combination no row can have. frpd cannot recompute "
            f"a derived feature: drop {derived!r} from the training data and retrain the model without it (its "
            f"value follows from the other two), or keep the three as they are with {frozen}.")
