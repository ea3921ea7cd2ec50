"""Plausible next models: copies of the user's estimator refitted on resamples of the training data.

A lender retrains its model on newer labelled data; a recourse the next model rejects is worse than none.
``--robust N`` asks every recourse to be favourable under (a share of) N refits as well
(:class:`frpd_cli.judge.Judge`). Each refit is ``sklearn.base.clone(estimator)`` fitted on a resample
of the training file's rows (:data:`DEFAULT_RESAMPLE`: bootstrap and half-size subsamples in turn) and its
*target column* (the next release learns from labels, not
from this model's predictions), with every ``random_state`` parameter set from ``--seed`` and the refit's
number, so the refits are the same for the same data, model, seed and N, whatever ``--jobs``.

The refits artifact (``frpd build-refits``)::

    DIR/
      manifest.json   kind "refits"; params: n, seed, resample, estimator class, skops_types; inputs: data
                      and model (sha256); payloads: sha256 of every refit file
      refit-001.skops ... (skops when installed, else refit-001.joblib)

Security: the refit files hold estimators of the user's own classes. frpd writes them from the model
the user already trusts. With skops, ``params["skops_types"]`` records, per refit file, the types skops
reports as untrusted in it (the model's own types: a refit is a clone of it, and a fitted
HistGradientBoostingClassifier holds ``functools.partial`` and ``check_array``); a file whose bytes have the
recorded sha256 is read trusting exactly those types on top of ``--model``'s list (and ``--trust-type``),
from the same bytes that were hashed. The joblib fallback unpickles, which is acceptable for the same
reason: frpd made the file from that trusted model, and the manifest's sha256 of every refit file is
checked on the bytes that are then loaded.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .exceptions import ArtifactError, InputError, ModelError

__all__ = ["REFITS_KIND", "REFITS_HINT", "RESAMPLES", "DEFAULT_RESAMPLE", "fit_refits", "write_refits", "load_refits", "refit_seed",
           "check_refittable", "resample_of", "refit_rows"]

REFITS_KIND = "refits"
REFITS_HINT = "frpd build-refits DATA --model MODEL --robust N --out DIR (with the same --seed)"
#: How each refit's rows are drawn (:func:`refit_rows`): ``bootstrap`` (n rows with replacement),
#: ``subsample`` (half of the rows, without replacement: more varied refits, each fitted in about half the
#: time), ``shifted`` (a bootstrap weighted towards one end of a random direction of the numeric features: a
#: drifted population), ``mixed`` (bootstrap and subsample refits in turn) or ``halves`` (pairs of refits
#: fitted on complementary halves: two models of disjoint data).
RESAMPLES = ("bootstrap", "subsample", "shifted", "mixed", "halves")
#: ``--resample`` when not given. A bootstrap refit differs from today's model about as much as a fit on
#: another sample of as many rows would; a flexible model fitted on half the rows (subsample) differs more,
#: as a release fitted on new data did in the measurements (docs/robust.md). Both kinds in turn hold every
#: recourse against both, with no setting to tune per data set.
DEFAULT_RESAMPLE = "mixed"


def refit_seed(seed: int, i: int) -> int:
    """The random state of refit ``i`` (0-based) for ``--seed seed``: independent streams per refit."""
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 0x5EED, int(i)]).generate_state(1)[0])


def check_refittable(model) -> None:
    """Refuse models frpd cannot refit (ONNX graphs, objects without ``get_params``/``fit``).

    Raises
    ------
    ModelError
        With a pointer to ``--also-valid-for``.
    """
    estimator = getattr(model, "estimator", model)
    kind = f"{type(estimator).__module__}.{type(estimator).__qualname__}"
    problem = None
    if str(getattr(model, "path", "")).lower().endswith(".onnx"):
        problem = "an ONNX graph has no training procedure frpd can run"
    elif not callable(getattr(estimator, "fit", None)) or not callable(getattr(estimator, "get_params", None)):
        problem = f"a {kind} has no fit/get_params (sklearn.base.clone cannot copy it)"
    else:
        from sklearn.base import clone

        try:
            clone(estimator)
        except Exception as exc:        # a foreign class: clone's own complaint, with context
            problem = f"sklearn.base.clone fails on a {kind}: {type(exc).__name__}: {exc}"
    if problem:
        where = getattr(model, "path", "?")
        raise ModelError(f"--robust refits the model on resamples of the data, but the model '{where}' "
                         f"cannot be refitted: {problem}. Train the next models yourself and pass each with "
                         "--also-valid-for MODEL instead.")


def resample_of(how: str, i: int) -> str:
    """How refit ``i`` (0-based) draws its rows: ``how`` itself, or for ``mixed`` bootstrap (even ``i``) and
    subsample (odd ``i``) in turn."""
    if how == "mixed":
        return "bootstrap" if i % 2 == 0 else "subsample"
    return how


def _resample(rng: np.random.Generator, frame: pd.DataFrame, numeric: list, how: str) -> np.ndarray:
    n = len(frame)
    if how == "bootstrap":
        return rng.integers(0, n, size=n)
    if how == "subsample":
        return np.sort(rng.choice(n, size=max(n // 2, 2), replace=False))
    # shifted: weights grow along a random direction of the standardised numeric features
    Z = frame.loc[:, numeric].to_numpy(dtype=np.float64) if numeric else np.zeros((n, 1))
    Z = (Z - Z.mean(axis=0)) / np.where(Z.std(axis=0) > 0, Z.std(axis=0), 1.0)
    direction = rng.normal(size=Z.shape[1])
    direction /= np.linalg.norm(direction) or 1.0
    weights = np.exp(0.5 * (Z @ direction))
    return rng.choice(n, size=n, replace=True, p=weights / weights.sum())


def refit_rows(X: pd.DataFrame, y: np.ndarray, numeric: list, seed: int, i: int, how: str) -> np.ndarray:
    """Positions of the training rows refit ``i`` (0-based) is fitted on.

    ``halves``: refit ``2j`` draws half the rows as ``subsample`` does, refit ``2j + 1`` takes the other half
    (two models of disjoint data, as today's and the next release are).
    """
    if how == "halves":
        first = refit_rows(X, y, numeric, seed, i - i % 2, "subsample")
        if i % 2 == 0:
            return first
        return np.setdiff1d(np.arange(len(X)), first)
    rng = np.random.default_rng(refit_seed(seed, i))
    how = resample_of(how, i)
    rows = _resample(rng, X, numeric, how)
    for _ in range(100):                 # a resample holding one class only cannot be fitted: draw again
        if np.unique(y[rows]).size >= 2:
            break
        rows = _resample(rng, X, numeric, how)
    return rows


def _fit_one(estimator, X: pd.DataFrame, y: np.ndarray, numeric: list, seed: int, i: int, how: str,
             path: str = "the model"):
    from sklearn.base import clone
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    from .model import fit_as_fitted

    state = refit_seed(seed, i)
    rows = refit_rows(X, y, numeric, seed, i, how)
    refit = clone(estimator)
    params = refit.get_params(deep=True)
    refit.set_params(**{k: state % (2**31 - 1) for k in params if k == "random_state" or k.endswith("__random_state")})
    with threadpool_limits(1), warnings.catch_warnings():
        # the user's own recipe: its convergence was the user's call when the model was trained
        warnings.simplefilter("ignore", ConvergenceWarning)
        # a LightGBM classifier trained on pandas 'category' columns sees them with that dtype again
        fit_as_fitted(estimator, refit, X.iloc[rows].reset_index(drop=True), y[rows], path=path)
    return refit


def _fit_task(shared: tuple, i: int):
    """:func:`_fit_one` in a worker: ``shared`` is (estimator, X, y, numeric, seed, resample, path)."""
    estimator, X, y, numeric, seed, resample, path = shared
    return _fit_one(estimator, X, y, numeric, seed, i, resample, path)


def fit_refits(model, frame: pd.DataFrame, schema, *, n: int, seed: int = 0, resample: str = DEFAULT_RESAMPLE,
               n_jobs: int = 1, progress=None) -> list:
    """Fit ``n`` refits of ``model``'s estimator on resamples of the training frame and its target column.

    Parameters
    ----------
    model : frpd_cli.model.Model
    frame : DataFrame
        The training CSV as read (features and the target column).
    schema : Schema
        Feature names and target.
    n : int
        Number of refits (>= 1).
    seed : int
        ``--seed``; refit ``i`` uses :func:`refit_seed` (seed, i).
    resample : {"mixed", "bootstrap", "subsample", "shifted", "halves"}
        How refit ``i`` draws its rows (:func:`refit_rows`).
    n_jobs : int
        Processes fitting refits; the refits do not depend on it.
    progress : callable, optional
        Called as ``progress(done, n)`` after each refit is in (in refit order).

    Returns
    -------
    refits : list of estimators, in order
    """
    if resample not in RESAMPLES:
        raise InputError(f"The 'resample' option must be one of {', '.join(RESAMPLES)}. Got {resample!r} instead.")
    if int(n) < 1:
        raise InputError(f"The 'robust' option must be an int >= 1. Got {n!r} instead.")
    check_refittable(model)
    names = list(schema.feature_names)
    X = frame.loc[:, names].reset_index(drop=True)
    y = frame[schema.target].to_numpy()
    _check_labels(model, y, schema.target)
    numeric = [f.name for f in schema.features if not f.is_categorical]
    estimator = model.estimator
    try:
        if n_jobs > 1 and n > 1:
            # frpd's own pool: its workers are stopped when the refits are in (joblib's reusable workers outlived
            # the command and held its exit for their 300 s idle timeout)
            from .backends import map_ordered

            fitted = map_ordered(_fit_task, ((i,) for i in range(n)), n_jobs=min(n_jobs, n),
                                 shared=(estimator, X, y, numeric, seed, resample, model.path))
        else:
            fitted = (_fit_one(estimator, X, y, numeric, seed, i, resample, model.path) for i in range(n))
        out = []
        for refit in fitted:
            out.append(refit)
            if progress is not None:
                progress(len(out), n)
        return out
    except ModelError:
        raise
    except Exception as exc:
        raise ModelError(f"Refitting the model '{model.path}' on a resample of the data failed: "
                         f"{type(exc).__name__}: {exc}. Pass models trained elsewhere with --also-valid-for instead.") \
            from exc


def _check_labels(model, y: np.ndarray, target: str) -> None:
    """Refits learn the target column as their classes: it must hold the model's favourable class (as values or
    as text), or a refit has no favourable class to score."""
    from .model import _plain, _same_class

    values = pd.unique(pd.Series(y, dtype=object))
    if len(values) > 1000 or any(_same_class(v, model.favorable) for v in values):
        return          # (a target of more distinct values is not a class label: the refit itself says so)
    shown = ", ".join(str(_plain(v)) for v in values[:10]) + (", ..." if len(values) > 10 else "")
    raise InputError(f"The target column '{target}' never holds the favourable class {_plain(model.favorable)!r} "
                     f"(its values: {shown}), and refits learn that column as their classes. Pass as --target a "
                     f"column coded as the model's classes, or train the next models yourself and pass them with "
                     f"--also-valid-for.")


def _dumps(estimator) -> tuple[str, bytes, list]:
    """The refit's file suffix, bytes and (skops) the types skops will not load from them unless told to."""
    try:
        import skops.io as sio

        blob = sio.dumps(estimator)
        return ".skops", blob, sorted(sio.get_untrusted_types(data=blob))
    except Exception:          # skops not installed, or a type it cannot save: joblib (see the module notes)
        import joblib

        buffer = io.BytesIO()
        joblib.dump(estimator, buffer)
        return ".joblib", buffer.getvalue(), []


def write_refits(out_dir, refits: list, *, data, model, seed: int, resample: str = DEFAULT_RESAMPLE,
                 target: str | None = None) -> Path:
    """Save refits as a refits artifact (``manifest.json`` + one file per refit)."""
    from .artifacts import write_artifact

    payloads, skops_types = {}, {}
    for i, refit in enumerate(refits, start=1):
        suffix, blob, types = _dumps(refit)
        name = f"refit-{i:03d}{suffix}"
        payloads[name] = blob
        if suffix == ".skops":
            skops_types[name] = types
    estimator = refits[0] if refits else None
    # the types of each skops file are read back trusted when the file is the one written (load_refits)
    return write_artifact(out_dir, kind=REFITS_KIND,
                          params={"n": len(refits), "seed": int(seed), "resample": resample, "target": target,
                                  "estimator": f"{type(estimator).__module__}.{type(estimator).__qualname__}",
                                  "skops_types": skops_types},
                          inputs={"data": data, "model": model}, payloads=payloads)


def load_refits(folder, *, data, model, seed: int, n: int | None, resample: str = DEFAULT_RESAMPLE, schema,
                threshold: float, trusted_types=None) -> list:
    """The refits of an artifact as :class:`frpd_cli.model.Model` objects, after checking they fit this run.

    Each refit file is read once and loaded from those bytes, checked against the manifest's sha256 (the refits
    beyond ``n`` are checked too); a ``.skops`` refit trusts the types the artifact recorded for it
    (``params["skops_types"]``, written by :func:`write_refits`) besides ``trusted_types``.

    Raises
    ------
    StaleArtifactError
        The artifact was built from another data file or model, or with another seed, target or resample, or
        holds fewer than ``n`` refits (with more, the first ``n`` are used: they are the refits of ``n``).
    ArtifactError
        A refit file's bytes differ from those the manifest records, or the recorded types are malformed.
    """
    from .artifacts import read_artifact
    from .exceptions import StaleArtifactError
    from .model import load_model

    # the refit files are hashed as they are read, below: each is read once
    artifact = read_artifact(folder, kind=REFITS_KIND, inputs={"data": data, "model": model}, command_hint=REFITS_HINT,
                             checked_on_read=_is_refit)
    params = artifact.params
    wanted = {"seed": int(seed), "resample": resample, "target": schema.target}
    for key, value in wanted.items():
        if params.get(key) != value:
            raise StaleArtifactError(
                f"The refits artifact '{folder}' was built with {key} {params.get(key)!r}; this run asks for "
                f"{value!r}. Rebuild it: {REFITS_HINT}, or run without --refits to refit in this run.")
    names = sorted(p for p in artifact.payload_names if _is_refit(p))
    if n is not None and int(n) > len(names):
        raise StaleArtifactError(
            f"The refits artifact '{folder}' holds n {len(names)} refits; this run asks for --robust {n}. Rebuild it "
            f"with --robust {n}: {REFITS_HINT}.")
    # refit i depends on the seed and i only (refit_seed): the first n refits of a larger artifact are the
    # refits of --robust n; the others are checked all the same, as every payload of an artifact is
    names, unused = (names, []) if n is None else (names[:int(n)], names[int(n):])
    for name in unused:
        artifact.read_bytes(name, command_hint=REFITS_HINT)
    recorded = params.get("skops_types") or {}
    if not isinstance(recorded, dict):
        raise ArtifactError(f"The manifest of the refits artifact '{folder}' has a malformed skops_types entry. "
                            f"Rebuild it: {REFITS_HINT}.")
    refits = []
    for name in names:
        types = recorded.get(name, [])
        if not isinstance(types, list) or not all(isinstance(t, str) and t for t in types):
            raise ArtifactError(f"The manifest of the refits artifact '{folder}' records malformed types for "
                                f"'{name}'. Rebuild it: {REFITS_HINT}.")
        # loaded from the very bytes whose sha256 was checked
        refits.append(load_model(Path(folder) / name, favorable=schema.favorable, feature_names=schema.feature_names,
                                 threshold=threshold, trusted_types=[*(trusted_types or ()), *types],
                                 data=artifact.read_bytes(name, command_hint=REFITS_HINT)))
    return refits


def _is_refit(name: str) -> bool:
    return name.startswith("refit-")
