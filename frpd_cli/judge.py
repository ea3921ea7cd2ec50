"""What counts as favourable when a recourse must satisfy more than one model.

A :class:`Judge` stands where the model stands in every stage that decides validity (candidates,
interpolation, sparsification, the margin, the final verification): it has the model's interface
(``favorable_probability``, ``threshold``, ``is_favorable``) and answers for all its models at once.
Its "probability" of a row is a score on the model's scale,

    score = threshold + worst margin,

where a model's margin is its favourable probability minus its threshold (plus any ``--margin``),
and the worst margin is the smallest margin over the model and every ``--also-valid-for`` model, and,
with refits (``--robust N``), the margin that at least a share ``q`` of the refits reach
(the ``ceil(q * N)``-th largest), and with label support (``--robust-support K``,
:mod:`frpd_cli.support`) the row's support (the share of favourable labels around the training row nearest to
it) less the threshold. With a spread ``s`` (``--robust-spread``) a refit's probability is taken
``s`` times as far from the model's as it is, ``p + s * (p_refit - p)``: a refit of today's data differs from
today's model less than a model trained on other data of the same population does, and ``s > 1`` asks the
recourse to hold against such wider deviations in the directions the refits show. So ``score >= threshold``
exactly when every required model accepts the row, and bisection on the score is bisection on the worst margin. Raising the judge's
threshold by a margin (:func:`frpd_cli.planning.raised_threshold`) raises every model's threshold
by it.

The score is not a probability of any model: records report each model's own probability
(:meth:`Judge.probabilities`, :func:`annotate_plans`), and the verification before writing checks
each model separately (:func:`judge_violations`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

__all__ = ["DEFAULT_SPREAD", "Judge", "make_judge", "primary_model", "annotate_plans", "judge_violations", "extra_model_names"]

#: ``--robust-spread`` when not given.
DEFAULT_SPREAD = 1.0


@dataclass(frozen=True, eq=False)
class Judge:
    """The model and the other models a recourse must satisfy, judged as one.

    Attributes
    ----------
    model : frpd_cli.model.Model
        The model the plans are made for (its probability is the records' ``probability``).
    others : tuple of Model
        Models every recourse must satisfy too (``--also-valid-for``), named ``also-1``, ``also-2``...
    refits : tuple of Model
        Refitted copies of the model (``--robust N``), named ``refit-1``...; a share ``level`` of them
        must accept every recourse.
    level : float
        Share of the refits that must accept (``--robust-level``, in (0, 1]).
    spread : float
        How many times its deviation from the model's probability a refit's probability counts (>= 1;
        ``--robust-spread``).
    support : tuple
        Empty, or one :class:`frpd_cli.support.LabelSupport` (``--robust-support``), named ``support``: the
        labelled training rows around a recourse must be favourable in the share its threshold asks
        (``--robust-support-level``; by default the model's threshold).
    threshold : float
        The level the score is compared with: the model's threshold, plus any margin
        (:func:`dataclasses.replace` raises it, as :func:`frpd_cli.planning.raised_threshold` does).
    """

    model: object
    others: tuple = ()
    refits: tuple = ()
    level: float = 1.0
    threshold: float = 0.5
    spread: float = 1.0
    support: tuple = ()

    #: :meth:`favorable_probability` accepts what the models accept (a dict of column arrays included).
    takes_columns = True

    def __getattr__(self, name):
        # path, estimator, favorable, feature_names...: the model's (guarded during unpickling)
        if name.startswith("__") or name in ("model", "others", "refits", "level", "threshold", "spread", "support"):
            raise AttributeError(name)
        return getattr(self.model, name)

    @property
    def margin(self) -> float:
        """Probability points above each model's own threshold a row must reach."""
        return float(self.threshold) - float(self.model.threshold)

    @property
    def names(self) -> tuple[str, ...]:
        """``model``, then ``also-1``..., then ``refit-1``..., then ``support`` (the keys of :meth:`probabilities`)."""
        return ("model", *extra_model_names(len(self.others), len(self.refits)), *(("support",) if self.support else ()))

    @property
    def n_required_refits(self) -> int:
        """How many refits must accept a row: ``ceil(level * n_refits)``."""
        return math.ceil(self.level * len(self.refits) - 1e-9) if self.refits else 0

    def probabilities(self, rows) -> dict:
        """Each model's favourable probability of ``rows``, keyed by :attr:`names` (same call per model)."""
        out = {}
        for name, m in zip(self.names, (self.model, *self.others, *self.refits, *self.support)):
            out[name] = np.asarray(m.favorable_probability(rows), dtype=np.float64)
        return out

    def worst_margin(self, probabilities: dict) -> np.ndarray:
        """The worst margin of each row (>= 0: every required model accepts it at this threshold)."""
        raise_by = self.margin
        worst = None
        for name, m in zip(self.names[:1 + len(self.others)], (self.model, *self.others)):
            d = probabilities[name] - (float(m.threshold) + raise_by)
            worst = d if worst is None else np.minimum(worst, d)
        if self.refits:
            names = self.names[1 + len(self.others):]
            D = self._refit_margins(probabilities["model"], [probabilities[n] for n in names], raise_by)
            need = self.n_required_refits
            # the need-th largest margin: that many refits reach it
            kth = -np.partition(-D, need - 1, axis=1)[:, need - 1]
            worst = np.minimum(worst, kth)
        for m in self.support:
            worst = np.minimum(worst, probabilities["support"] - (float(m.threshold) + raise_by))
        return worst

    def _refit_margins(self, p_model: np.ndarray, p_refits: list, raise_by: float) -> np.ndarray:
        """Margins of the refits, shape (n_rows, n_refits): each refit's probability, taken :attr:`spread` times
        as far from the model's, minus its threshold (plus the margin)."""
        s = float(self.spread)
        return np.column_stack([(p if s == 1.0 else p_model + s * (p - p_model)) - (float(m.threshold) + raise_by)
                                for p, m in zip(p_refits, self.refits)])

    def favorable_probability(self, rows) -> np.ndarray:
        """The score ``threshold + worst margin`` of each row (``>= threshold`` exactly when all accept).

        Models are asked in turn, each only about the rows every model before it accepted (a row's probability
        does not depend on the rows it is scored with, :meth:`frpd_cli.model.Model.favorable_probability`): a
        row some model rejects scores ``threshold`` plus that model's (negative) margin, a row all accept
        ``threshold`` plus the worst margin. Every stage uses the score only through ``score >= threshold``.
        """
        d = self._lazy_margin(rows)
        level = float(self.threshold)
        score = level + d
        # a tiny negative margin must not round up to the threshold itself
        below = np.nextafter(level, -np.inf)
        return np.where(d < 0, np.minimum(score, below), np.maximum(score, level))

    def _lazy_margin(self, rows) -> np.ndarray:
        raise_by = self.margin
        worst = None
        alive = None            # positions of the rows every model so far accepted
        p_model = None
        for m in (self.model, *self.others):
            part = rows if alive is None else _take(rows, alive)
            p = np.asarray(m.favorable_probability(part), dtype=np.float64)
            d = p - (float(m.threshold) + raise_by)
            if worst is None:
                worst, p_model = d, p
                alive = np.arange(d.size)
            else:
                worst[alive] = np.minimum(worst[alive], d)
            alive = alive[worst[alive] >= 0]
            if not alive.size:
                return worst
        if self.refits:
            part = _take(rows, alive)
            D = self._refit_margins(p_model[alive], [np.asarray(m.favorable_probability(part), dtype=np.float64)
                                                     for m in self.refits], raise_by)
            need = self.n_required_refits
            kth = -np.partition(-D, need - 1, axis=1)[:, need - 1]
            worst[alive] = np.minimum(worst[alive], kth)
            alive = alive[worst[alive] >= 0]
        for m in self.support:           # last: the neighbour search costs more than a model call
            if not alive.size:
                break
            p = np.asarray(m.favorable_probability(_take(rows, alive)), dtype=np.float64)
            worst[alive] = np.minimum(worst[alive], p - (float(m.threshold) + raise_by))
        return worst

    def is_favorable(self, rows) -> np.ndarray:
        """Whether every required model accepts each row."""
        return self.favorable_probability(rows) >= self.threshold

    def describe(self) -> str:
        """The rule in words, for reasons and messages (no parentheses: it is itself a parenthesis there)."""
        parts = []
        if self.others:
            parts.append(f"the {len(self.others)} --also-valid-for model(s)")
        if self.refits:
            share = "all" if self.n_required_refits == len(self.refits) else \
                f"at least {self.n_required_refits}"
            wide = "" if float(self.spread) == 1.0 else \
                f", each refit's deviation from the model taken {float(self.spread):g} times by --robust-spread"
            parts.append(f"{share} of the {len(self.refits)} refitted models of --robust{wide}")
        for m in self.support:
            near = "" if m.radius_asked is None else \
                f", that training row within distance {m.radius:.4g} of it by --robust-support-radius"
            parts.append(f"favourable labels on at least a share {float(m.threshold) + self.margin:g} of the {m.k} "
                         f"training rows nearest to the training row nearest to it, by --robust-support{near}")
        return "favourable here means accepted by the model and " + " and ".join(parts)


def _take(rows, at: np.ndarray):
    """The rows at positions ``at`` of a DataFrame, a dict of column arrays or an array."""
    if isinstance(rows, dict):
        return {k: np.asarray(v)[at] for k, v in rows.items()}
    if isinstance(rows, pd.DataFrame):
        return rows.iloc[at]
    return np.asarray(rows)[at]


def make_judge(model, others=(), refits=(), *, level: float = 1.0, spread: float = 1.0, support=None):
    """``model`` itself when there is nothing else to satisfy, else a :class:`Judge` at the model's threshold."""
    others, refits = tuple(others), tuple(refits)
    support = () if support is None else (support,)
    if not others and not refits and not support:
        return model
    return Judge(model=model, others=others, refits=refits, level=float(level), threshold=float(model.threshold),
                 spread=float(spread), support=support)


def primary_model(model):
    """The model the plans are made for (``model`` itself unless it is a :class:`Judge`)."""
    return model.model if isinstance(model, Judge) else model


def extra_model_names(n_others: int, n_refits: int) -> tuple[str, ...]:
    """Names of the models besides the main one: ``also-1``..., then ``refit-1``..."""
    return (*(f"also-{i}" for i in range(1, n_others + 1)), *(f"refit-{i}" for i in range(1, n_refits + 1)))


def annotate_plans(judge, plans: list, feature_names) -> list:
    """Plans whose recourses report the model's own probability and every model's (``probabilities``).

    One call per model for all recourses of ``plans``; ``plans`` is returned unchanged when ``judge`` is a
    plain model.
    """
    if not isinstance(judge, Judge):
        return plans
    names = list(feature_names)
    rows = [r.features for p in plans for r in p.recourses]
    if not rows:
        return plans
    frame = pd.DataFrame([{n: f[n] for n in names} for f in rows], columns=names)
    probs = judge.probabilities(frame)
    at = 0
    out = []
    for p in plans:
        if not p.recourses:
            out.append(p)
            continue
        recourses = []
        for r in p.recourses:
            own = {n: float(v[at]) for n, v in probs.items()}
            recourses.append(replace(r, probability=own["model"], probabilities=own))
            at += 1
        out.append(replace(p, recourses=tuple(recourses)))
    return out


def judge_violations(judge, frame: pd.DataFrame, reported: list, tolerance: float) -> list:
    """Rows of ``frame`` (recourses) that a required model rejects, or whose reported probabilities differ.

    Parameters
    ----------
    reported : list of dict or None
        Each recourse's ``probabilities`` as it will be written.

    Returns
    -------
    found : list of (position, rule, detail)
    """
    probs = judge.probabilities(frame)
    raise_by = judge.margin
    found = []
    n_required = 1 + len(judge.others)
    for i in range(len(frame)):
        for name, m in zip(judge.names[:n_required], (judge.model, *judge.others)):
            p = float(probs[name][i])
            if not p >= float(m.threshold) + raise_by - tolerance:
                found.append((i, f"accepted by {name} (probability >= {float(m.threshold) + raise_by:g})",
                              f"{name} gives {p:.6g}"))
        if judge.refits:
            at = float(judge.threshold)
            s, p0 = float(judge.spread), float(probs["model"][i])
            got = sum((float(probs[n][i]) if s == 1.0 else p0 + s * (float(probs[n][i]) - p0))
                      >= float(m.threshold) + raise_by - tolerance
                      for n, m in zip(judge.names[n_required:], judge.refits))
            if got < judge.n_required_refits:
                found.append((i, f"accepted by at least {judge.n_required_refits} of {len(judge.refits)} refits "
                                 f"(probability >= {at:g})", f"{got} accept"))
        for m in judge.support:
            p = float(probs["support"][i])
            if not p >= float(m.threshold) + raise_by - tolerance:
                found.append((i, f"supported by the labels around it (favourable share >= "
                                 f"{float(m.threshold) + raise_by:g} among the {m.k} training rows nearest to its "
                                 "nearest training row)", f"support gives {p:.6g}"))
        claimed = reported[i]
        if claimed is None:
            found.append((i, "every model's probability reported", "the recourse reports none"))
        else:
            for name in judge.names:
                c = claimed.get(name)
                if c is None or not abs(float(c) - float(probs[name][i])) <= tolerance:
                    found.append((i, f"reported probability of {name} equal to its own",
                                  f"reported {c!r}, {name} gives {float(probs[name][i])!r}"))
    return found
