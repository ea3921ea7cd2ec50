"""Options and loading for recourses that must satisfy several models (``--also-valid-for``, ``--robust``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional

import typer

from ._groups import OptionGroup

__all__ = ["AlsoValidForOpt", "RobustOpt", "RobustSupportOpt", "RobustSupportLevelOpt", "RobustSupportRadiusOpt",
           "RobustLevelOpt", "RobustSpreadOpt", "RefitsOpt", "ResampleOpt", "RobustModels", "ROBUST_OPTIONS",
           "judge_for", "label_support_of", "extra_inputs", "robust_params"]

_SEL = "Selection"
_ROBUST = "Robustness to model updates"


def _check_level(value):
    if value is not None and not 0.0 < value <= 1.0:
        raise typer.BadParameter(f"must be a share in (0, 1] of the refits that accept every recourse. Got {value}.")
    return value


def _auto_none_or(value, parse, what: str):
    """``None``, ``auto`` and ``none`` as they are (lower case), anything else through ``parse`` (None: invalid)."""
    if value is None:
        return None
    word = value.strip().lower()
    if word in ("auto", "none"):
        return word
    parsed = parse(value)
    if parsed is None:
        raise typer.BadParameter(f"must be {what}, auto or none. Got {value!r}.")
    return parsed


def _count(value: str):
    try:
        k = int(value)
    except ValueError:
        return None
    return str(k) if k >= 1 else None


def _distance(value: str):
    try:
        r = float(value)
    except ValueError:
        return None
    return repr(r) if 0.0 < r < math.inf else None


def _check_support(value):
    return _auto_none_or(value, _count, "a number of neighbours (at least 1)")


def _check_support_level(value):
    if value is not None and not 0.0 < value <= 1.0:
        raise typer.BadParameter(f"must be a share in (0, 1] of favourable labels. Got {value}.")
    return value


def _check_support_radius(value):
    return _auto_none_or(value, _distance, "a positive distance (in frpd's encoding of the features)")


def _check_spread(value):
    if value is not None and not 1.0 <= value <= 10.0:
        raise typer.BadParameter(f"must be a factor in [1, 10] on the refits' deviation from the model. Got {value}.")
    return value


AlsoValidForOpt = Annotated[Optional[list[Path]], typer.Option(
    "--also-valid-for", readable=False, metavar="MODEL", help="Another model every recourse must be favourable under too "
    "(repeatable; .pkl/.joblib/.skops/.onnx like --model): a challenger, the previous release. Candidates, "
    "interpolation, sparsification and --margin use the worst of the models; the records add each model's "
    "probability.", rich_help_panel=_ROBUST)]
RobustOpt = Annotated[Optional[int], typer.Option(
    "--robust", metavar="N", min=1, help="Refit N copies of the model's estimator on resamples of the "
    "training file (its target column; see --resample) and require every recourse to be favourable under them too (see "
    "--robust-level): plausible next releases. Deterministic for --seed; --jobs fits them in parallel; "
    "frpd build-refits saves them for reuse (--refits).", rich_help_panel=_ROBUST)]
RobustLevelOpt = Annotated[float, typer.Option(
    "--robust-level", metavar="Q", callback=_check_level, help="Share of the --robust refits that must accept "
    "every recourse (1: all).", rich_help_panel=_ROBUST)]
RobustSpreadOpt = Annotated[Optional[float], typer.Option(
    "--robust-spread", metavar="S", callback=_check_spread, help="How far the next release may stray, in units of "
    "the refits' own deviation from the model: a refit's probability counts S times as far from the model's as it "
    "is (1: the refits as they are). Refits of today's data differ from today's model less than a model trained on "
    "new data does.", rich_help_panel=_ROBUST)]
RobustSupportOpt = Annotated[Optional[str], typer.Option(
    "--robust-support", metavar="K|auto|none", callback=_check_support, help="Also require that the labelled "
    "training rows around every recourse are favourable: the share of favourable labels among the K training rows "
    "nearest to the training row nearest to it must reach --robust-support-level (plus --margin), and that row "
    "must be near it (--robust-support-radius). A model trained "
    "on new rows learns what today's learnt only where the labels are plentiful and agree. auto (the default with "
    "--robust or --refits): K = the square root of the number of favourable-labelled rows; none: off.",
    rich_help_panel=_ROBUST)]
RobustSupportLevelOpt = Annotated[Optional[float], typer.Option(
    "--robust-support-level", metavar="S", callback=_check_support_level, help="The share of favourable labels "
    "--robust-support asks around every recourse (plus --margin; default: --threshold). Higher: recourses only "
    "where the labels agree more, which more next releases accept, and fewer applicants with a plan "
    "(docs/robust.md).", rich_help_panel=_ROBUST)]
RobustSupportRadiusOpt = Annotated[Optional[str], typer.Option(
    "--robust-support-radius", metavar="R|auto|none", callback=_check_support_radius, help="With label support, "
    "also require a training row within distance R of every recourse (frpd's encoding of the features, --scale): "
    "no recourse where no labelled example stands (nor a combination of values no applicant has), which a model "
    "trained on other rows may judge anyhow. auto (the default with label support): the distance within which "
    "nine in ten distinct training rows have another one. More next releases accept the recourses, which change "
    "more features (docs/robust.md); none: off.", rich_help_panel=_ROBUST)]
RefitsOpt = Annotated[Optional[Path], typer.Option(
    "--refits", readable=False, metavar="DIR", help="Refits saved by frpd build-refits (same data, model and --seed) instead of "
    "refitting in this run; implies --robust with their number.", rich_help_panel=_ROBUST)]
ResampleOpt = Annotated[str, typer.Option(
    "--resample", help="How refits draw their rows: mixed (bootstrap and subsample refits in turn); bootstrap; "
    "subsample (half the rows without replacement: more varied refits, each fitted in half the time); halves "
    "(pairs of refits on complementary halves); or shifted (a bootstrap tilted along a random direction of the "
    "numeric features: a drifted population).", rich_help_panel=_ROBUST)]


@dataclass(frozen=True)
class RobustModels:
    """The other models of a run, as given on the command line."""

    also_valid_for: tuple = field(default_factory=tuple)
    robust: Optional[int] = None
    level: float = 1.0
    spread: Optional[float] = None
    refits: Optional[Path] = None
    resample: str = "mixed"
    seed: int = 0
    jobs: int = 1
    support: Optional[str] = None
    support_level: Optional[float] = None
    support_radius: Optional[str] = None

    @property
    def active(self) -> bool:
        return bool(self.also_valid_for) or self.robust is not None or self.refits is not None or \
            self.resolved_support is not None

    @property
    def resolved_support(self) -> Optional[str]:
        """``--robust-support`` as it applies: its value, ``auto`` when not given with refits, None when off."""
        if self.support == "none":
            return None
        if self.support is None:
            return "auto" if self.robust is not None or self.refits is not None else None
        return self.support

    @property
    def resolved_spread(self) -> float:
        """``--robust-spread``, or its default (:data:`frpd_cli.judge.DEFAULT_SPREAD`)."""
        from ..judge import DEFAULT_SPREAD

        return DEFAULT_SPREAD if self.spread is None else float(self.spread)

    def check(self) -> "RobustModels":
        """Usage errors (exit 2)."""
        from ..exceptions import OptionError
        from ..refits import RESAMPLES

        if self.resample not in RESAMPLES:
            raise OptionError("--resample", f"--resample must be one of {', '.join(RESAMPLES)}. "
                              f"Got {self.resample!r} instead.")
        if self.support_level is not None and self.resolved_support is None:
            raise OptionError("--robust-support-level", "--robust-support-level sets the share of favourable labels "
                              "that label support asks, and label support is off: it comes with --robust or "
                              "--refits (unless --robust-support none), or with --robust-support K|auto.")
        if self.support_radius not in (None, "none") and self.resolved_support is None:
            raise OptionError("--robust-support-radius", "--robust-support-radius asks label support for a training "
                              "row near every recourse, and label support is off: it comes with --robust or "
                              "--refits (unless --robust-support none), or with --robust-support K|auto.")
        return self

    @property
    def resolved_radius(self):
        """``--robust-support-radius`` as :class:`frpd_cli.support.LabelSupport` takes it: None (off, or no label
        support), ``"auto"`` (the default with label support) or a float."""
        if self.resolved_support is None or self.support_radius == "none":
            return None
        return "auto" if self.support_radius in (None, "auto") else float(self.support_radius)


def _robust_models(*, also_valid_for, robust, robust_level, robust_spread, refits, resample, robust_support,
                   robust_support_level, robust_support_radius, seed, jobs) -> RobustModels:
    return RobustModels(also_valid_for=tuple(also_valid_for or ()), robust=robust, level=robust_level,
                        spread=robust_spread, refits=refits, resample=resample, seed=seed, jobs=jobs,
                        support=robust_support, support_level=robust_support_level,
                        support_radius=robust_support_radius).check()


#: The other models a recourse must satisfy, declared once: a command takes them as ``others: RobustModels``
#: decorated with this group (it also reads the command's --seed and --jobs).
ROBUST_OPTIONS = OptionGroup(RobustModels, (
    ("also_valid_for", AlsoValidForOpt, None),
    ("robust", RobustOpt, None),
    ("robust_level", RobustLevelOpt, 1.0),
    ("robust_spread", RobustSpreadOpt, None),
    ("refits", RefitsOpt, None),
    ("resample", ResampleOpt, "mixed"),
    ("robust_support", RobustSupportOpt, None),
    ("robust_support_level", RobustSupportLevelOpt, None),
    ("robust_support_radius", RobustSupportRadiusOpt, None),
), build=_robust_models, shared=("seed", "jobs"))


def judge_for(model, robust: RobustModels | None, schema, *, threshold: float, trusted_types=None, frame=None,
              data=None, model_path=None, status=None, scale=None, encoded=None):
    """``model`` itself, or a :class:`frpd_cli.judge.Judge` over it and the other models of ``robust``
    (``--robust-support`` compares rows in the encoding of ``scale``, fitted on ``frame``; ``encoded``, the
    training set's (encoder, encoded rows) when they are at hand, spares encoding ``frame`` again). ``status``,
    when given, is told how the refitting goes (a terminal's status line)."""
    if robust is None or not robust.active:
        return model
    from ..judge import make_judge
    from ..model import load_model

    others = [load_model(p, favorable=schema.favorable, feature_names=schema.feature_names, threshold=threshold,
                         trusted_types=trusted_types or None) for p in robust.also_valid_for]
    refits = []
    if robust.refits is not None:
        from ..refits import load_refits

        refits = load_refits(robust.refits, data=data, model=model_path, seed=robust.seed, n=robust.robust,
                             resample=robust.resample, schema=schema, threshold=threshold,
                             trusted_types=trusted_types or None)
    elif robust.robust is not None:
        from ..model import Model
        from ..refits import fit_refits

        def progress(done: int, n: int) -> None:
            if status is not None:
                status(f"refitting the model: {done} of {n} done ({robust.resample} resamples; frpd build-refits "
                       "keeps refits for later runs)")

        progress(0, robust.robust)
        fitted = fit_refits(model, frame, schema, n=robust.robust, seed=robust.seed, resample=robust.resample,
                            n_jobs=robust.jobs, progress=progress)
        if status is not None:
            status("scoring the training rows with the model and its refits")
        refits = [Model(estimator=e, path=f"{model.path} (refit {i})", favorable=model.favorable,
                        threshold=model.threshold, feature_names=model.feature_names, uses_proba=model.uses_proba)
                  for i, e in enumerate(fitted, start=1)]
    return make_judge(model, others, refits, level=robust.level, spread=robust.resolved_spread,
                      support=None if robust.resolved_support is None else
                      label_support_of(model, robust.resolved_support, schema, frame, scale=scale, encoded=encoded,
                                       level=robust.support_level, radius=robust.resolved_radius))


def label_support_of(model, k: str, schema, frame, *, scale=None, encoded=None, level=None, radius=None):
    """The :class:`frpd_cli.support.LabelSupport` of ``--robust-support k`` over the training ``frame``
    (encoded in ``scale``, or given as ``encoded``: the training set's encoder and encoded rows), asking a share
    ``level`` of favourable labels (``--robust-support-level``; default: the model's threshold) and, with a
    ``radius`` (``--robust-support-radius``: a float or ``"auto"``), a training row that near."""
    from ..dataset import labeled_rows
    from ..encoding import DEFAULT_SCALE, fit_encoder
    from ..support import LabelSupport, auto_neighbors

    if encoded is None:
        encoder = fit_encoder(schema, frame, scale=scale or DEFAULT_SCALE)
        X = encoder.encode(frame.loc[:, list(schema.feature_names)].reset_index(drop=True))
    else:
        encoder, X = encoded
    labeled = labeled_rows(frame, schema)
    n = auto_neighbors(int(labeled.sum()), len(frame)) if k == "auto" else min(int(k), len(frame))
    threshold = float(model.threshold) if level is None else float(level)
    return LabelSupport(encoder, X, labeled, n, threshold=threshold, feature_names=schema.feature_names,
                        radius=radius)


def extra_inputs(robust: RobustModels | None) -> dict:
    """The other models as named inputs (manifests, provenance, --resume fingerprints): ``also_valid_for_1``...,
    ``refits`` (the folder's manifest)."""
    if robust is None:
        return {}
    out = {f"also_valid_for_{i}": Path(p) for i, p in enumerate(robust.also_valid_for, start=1)}
    if robust.refits is not None:
        out["refits"] = Path(robust.refits) / "manifest.json"
    return out


def robust_params(robust: RobustModels | None) -> dict:
    """The settings of ``robust`` that change plans (for fingerprints and provenance); empty when inactive."""
    if robust is None or not robust.active:
        return {}
    out = {}
    if robust.robust is not None or robust.refits is not None:
        out = {"robust": robust.robust, "robust_level": robust.level, "resample": robust.resample,
               "robust_spread": robust.resolved_spread}
    if robust.resolved_support is not None:
        out["robust_support"] = robust.resolved_support
        if robust.support_level is not None:
            out["robust_support_level"] = float(robust.support_level)
        radius = robust.resolved_radius
        out["robust_support_radius"] = "none" if radius is None else radius
    return out
