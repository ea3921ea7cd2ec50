"""The pool's copy of the model's scorer: a run reading a pool scores rows without importing scikit-learn.

Most models frpd is used with are a scikit-learn ``Pipeline`` of a ``ColumnTransformer`` (one-hot encoders and
scalers) and an ``MLPClassifier`` or a ``LogisticRegression``. frpd scores such a model through compiled forms of
both steps (:mod:`frpd_cli._rowwise`), once they reproduced scikit-learn bit for bit. Unpickling the model
imports scikit-learn, and with it scipy.stats: more than a second, most of a one-applicant ``plan --pool``.

So ``frpd build-pool`` keeps those compiled forms (``scorer.json``: the categories, scaling constants and the
network's layers, numbers written as Python writes floats, which read back as the same doubles). Where numpy
reproduces them bit for bit, the kept forms also make scipy's two operations with numpy (the product of a
sparse matrix, :class:`~frpd_cli._rowwise.CSRRows`, and the logistic function), so that scoring imports no scipy
either (``"arithmetic": "numpy"``; ``"libm"`` where numpy's vectorised ``exp`` differs from the C library's, which
scipy's logistic function calls: the C library's then, one value at a time; ``"scipy"`` where both differ). A run
given the pool uses them instead of loading the model file when all of this holds, and loads the model as before
otherwise:

- the model file is the pool's (its sha256, checked when the pool is opened), a pickle or a ``.skops`` file whose
  recorded scikit-learn versions, if any, were the installed one when the pool was built;
- numpy, scipy and scikit-learn have the versions they had then (read from the installed packages' metadata,
  scikit-learn is not imported);
- the kept scorer, given the pool's training rows (up to :data:`CHECK_ROWS` of them, spread over the file),
  returns the probabilities the pool stored for them, bit for bit, without falling back to scikit-learn.

A row the compiled forms do not handle later (an unknown category, a missing value) is scored by the model
itself, loaded then, exactly as without the pool. Everything else that needs the estimator (refits) loads it:
:class:`SnapshotPipeline` is a stand-in for scoring only, and ``--robust`` runs load the model as before.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ._rowwise import CSRRows, Precompiled, final_from_state, final_state, prefix_from_state, prefix_state

__all__ = ["ARITHMETICS", "CHECK_ROWS", "SCORER_PAYLOAD", "SnapshotPipeline", "pool_model", "scorer_outdated", "scorer_state"]

SCORER_PAYLOAD = "scorer.json"
_FORMAT = 2

#: How a kept scorer makes scipy's two operations, in the order tried: numpy alone; numpy with the C library's
#: ``exp`` for the logistic function (numpy's vectorised ``exp`` may differ from it in the last bit); scipy.
ARITHMETICS = ("numpy", "libm", "scipy")

#: Training rows on which a kept scorer must reproduce the pool's probabilities before a run uses it.
CHECK_ROWS = 2048

_PICKLES = (".pkl", ".pickle", ".joblib")
_SKOPS = (".skops",)
_LIBRARIES = {"numpy": "numpy", "scipy": "scipy", "sklearn": "scikit-learn"}


class _NeedsModel(Exception):
    """A kept scorer met a row it does not handle while it was being checked."""


class _Step(Precompiled):
    """The pipeline's preprocessing or final step, scored through its kept compiled form; anything that form does
    not handle goes to the real step, loaded then."""

    def __init__(self, compiled, owner: "SnapshotPipeline", position: int):
        self.frpd_compiled = compiled
        self._owner = owner
        self._position = position

    def transform(self, X):
        return self._owner.real_step(self._position).transform(X)

    def predict_proba(self, X):
        if isinstance(X, CSRRows):
            X = X.to_scipy()
        return self._owner.real_step(self._position).predict_proba(X)


class SnapshotPipeline:
    """A stand-in for the model's fitted ``Pipeline`` (a row-wise ``ColumnTransformer`` and a final estimator),
    built from a pool's kept scorer.

    It has what frpd's scoring reads (``steps``, ``classes_``, ``feature_names_in_``, ``n_features_in_``) and
    nothing else; the real pipeline is unpickled from ``path`` the first time a row needs it.
    """

    frpd_snapshot = True

    def __init__(self, state: dict, path: str, trusted_types=(), sha256: str | None = None):
        self.path = str(path)
        self.trusted_types = tuple(trusted_types or ())
        self.sha256 = sha256            # the model file's, as the pool records it: checked again before loading
        self.classes_ = _classes_from(state["classes"])
        self.feature_names_in_ = np.asarray([str(c) for c in state["feature_names_in"]], dtype=object)
        self.n_features_in_ = len(self.feature_names_in_)
        if state["arithmetic"] not in ARITHMETICS:
            raise ValueError(f"the arithmetic {state['arithmetic']!r}")
        own = False if state["arithmetic"] == "scipy" else state["arithmetic"]
        self.steps = [("preprocessing", _Step(prefix_from_state(state["prefix"], own_arithmetic=own), self, 0)),
                      ("classifier", _Step(final_from_state(state["final"], own_arithmetic=own), self, -1))]
        self._real = None
        self._fallback = True

    def real_step(self, position: int):
        """The real pipeline's preprocessing step (0) or final estimator (-1), unpickled on first use."""
        if not self._fallback:
            raise _NeedsModel
        if self._real is None:
            from .artifacts import sha256_file
            from .exceptions import ModelError
            from .model import _load_pickle, _load_skops, _with_version_warnings, model_output_to_stderr

            path = Path(self.path)
            if self.sha256 is not None and sha256_file(path, input_file=True) != self.sha256:
                raise ModelError(f"The model file '{path}' changed while frpd was running (its sha256 is no longer "
                                 "the one the pool was built from); run the command again.")
            loader = _load_pickle if path.suffix.lower() in _PICKLES else \
                (lambda p: _load_skops(p, self.trusted_types or None))
            with model_output_to_stderr():
                self._real = _with_version_warnings(path, loader)
        if position == -1:
            return self._real.steps[-1][1]
        steps = [step for _, step in self._real.steps[:-1] if step not in (None, "passthrough")]
        return steps[0]

    def predict_proba(self, X):
        self.real_step(-1)
        return self._real.predict_proba(X)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_real"] = None           # a worker unpickles the model itself if it ever needs it
        return state


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _classes_state(classes) -> dict | None:
    classes = np.asarray(classes)
    values = [_plain(c) for c in classes.tolist()]
    kinds = {type(v) for v in values}
    if len(kinds) != 1 or kinds.pop() not in (int, str, bool, float):
        return None
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        return None
    if classes.dtype.kind not in "iubfUO":
        return None
    return {"dtype": classes.dtype.str, "values": values}


def _classes_from(state: dict) -> np.ndarray:
    dtype = np.dtype(state["dtype"])
    if dtype.kind == "O":
        out = np.empty(len(state["values"]), dtype=object)
        out[:] = state["values"]
        return out
    return np.asarray(state["values"], dtype=dtype)


def _versions() -> dict:
    from .model import _installed_version  # from the packages' metadata: nothing is imported

    return {name: _installed_version(name) for name in _LIBRARIES}


def scorer_state(model, features, probability) -> dict | None:
    """The kept scorer of a loaded :class:`~frpd_cli.model.Model`, or None when it has none.

    Only for a pickled scikit-learn ``Pipeline`` whose scoring this process ran entirely through compiled forms
    (:mod:`frpd_cli._rowwise`: they reproduced scikit-learn bit for bit on the rows it scored), saved with the
    installed scikit-learn. The description is read back and must give ``probability`` for the rows of
    ``features`` it is checked on (:func:`_reproduces`), else None.

    Parameters
    ----------
    model : Model
    features : DataFrame
        The training rows (feature columns).
    probability : ndarray
        Their favourable probabilities, as ``model`` gave them.
    """
    from . import _rowwise
    from .model import _installed_version, _rowwise_prefix

    estimator = getattr(model, "estimator", None)
    if estimator is None or not getattr(model, "uses_proba", False) or isinstance(estimator, SnapshotPipeline):
        return None
    path = Path(model.path)
    if path.suffix.lower() not in _PICKLES + _SKOPS:
        return None
    saved = _saved_sklearn_versions(path)
    if saved is None or saved - {_installed_version("sklearn")}:
        return None
    prefix = _rowwise_prefix(estimator)
    if prefix is None or len(prefix) != 1:
        return None
    compiled, final = _rowwise.compiled_prefix(prefix[0]), _rowwise.checked_final(estimator.steps[-1][1])
    if not compiled or not final or compiled.result_type is None and compiled.sparse:
        return None
    names = getattr(estimator, "feature_names_in_", None)
    classes = _classes_state(getattr(estimator, "classes_", []))
    if names is None or classes is None:
        return None
    # numpy's own arithmetic first, then the C library's exp (neither imports scipy when the pool is used),
    # scipy's where both differ
    for arithmetic in ARITHMETICS:
        try:
            state = {"format": _FORMAT, "versions": _versions(), "arithmetic": arithmetic, "classes": classes,
                     "feature_names_in": [str(c) for c in names],
                     "prefix": prefix_state(compiled), "final": final_state(final)}
            state = json.loads(json.dumps(state, allow_nan=False))     # what the pool will hold, read back
            snapshot = _snapshot_model(state, model)
        except (_rowwise._Unsupported, ValueError, TypeError, KeyError):
            return None
        if _reproduces(snapshot, features, probability):
            return state
    return None


def _saved_sklearn_versions(path: Path) -> set | None:
    """The scikit-learn versions a model file records (none for a pickle that records none), read without loading
    it; None when a ``.skops`` file cannot be read."""
    from .model import _pickled_sklearn_version

    if path.suffix.lower() in _PICKLES:
        saved = _pickled_sklearn_version(path)
        return set() if saved is None else {saved}
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            schema = json.loads(archive.read("schema.json").decode("utf-8"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    found, stack = set(), [schema]
    while stack:                    # every estimator's state holds its "_sklearn_version" as a string node
        node = stack.pop()
        if isinstance(node, dict):
            version = node.get("_sklearn_version")
            if isinstance(version, dict) and isinstance(version.get("content"), str):
                content = version["content"]            # a JSON node: the string as JSON text
                try:
                    content = json.loads(content) if content.startswith('"') else content
                except ValueError:
                    return None
                found.add(str(content))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _check_rows(n_rows: int) -> np.ndarray:
    """The rows a kept scorer is checked on: all of them, or :data:`CHECK_ROWS` spread evenly over the file."""
    if n_rows <= CHECK_ROWS:
        return np.arange(n_rows)
    return np.unique(np.linspace(0, n_rows - 1, CHECK_ROWS).round().astype(np.int64))


def _snapshot_model(state: dict, model_like):
    """A :class:`~frpd_cli.model.Model` scoring through ``state``, with ``model_like``'s path, favourable class,
    threshold and feature names."""
    from .model import Model

    return Model(estimator=SnapshotPipeline(state, model_like.path), path=model_like.path,
                 favorable=model_like.favorable, threshold=model_like.threshold,
                 feature_names=tuple(model_like.feature_names), uses_proba=True)


def _reproduces(snapshot, features, probability) -> bool:
    """Whether the model ``snapshot`` (scoring through a :class:`SnapshotPipeline`) gives ``probability`` (bit for
    bit) on the check rows of ``features``, handling every one of them itself."""
    from .model import score_columns

    stand_in = snapshot.estimator
    stand_in._fallback = False
    try:
        rows = _check_rows(len(features))
        columns = {name: features[name].to_numpy()[rows] for name in snapshot.input_columns}
        got = score_columns(snapshot, columns)
    except (_NeedsModel, KeyError, ValueError, TypeError, IndexError):
        return False
    finally:
        stand_in._fallback = True
    expected = np.asarray(probability)[rows]
    return got.dtype == expected.dtype and got.shape == expected.shape and got.tobytes() == expected.tobytes()


def pool_model(artifact, *, path, favorable, feature_names, threshold: float, features, trusted_types=None):
    """The model of a pool's kept scorer (:class:`SnapshotPipeline` in a :class:`~frpd_cli.model.Model`), or None
    when the model must be loaded from its file (no kept scorer, other library versions, a scorer that does not
    reproduce the pool's probabilities).

    Parameters
    ----------
    artifact : Artifact
        The pool, opened and checked against the data and model files given now.
    path : str or Path
        The model file given now (the pool's, by its sha256).
    favorable, feature_names, threshold
        As :func:`frpd_cli.model.load_model` takes them; checked the same way (``ModelError`` for a favourable
        class or feature columns the model does not have).
    features : DataFrame
        The training rows as read now (the pool's rows).
    trusted_types : sequence of str, optional
        For a ``.skops`` model: the types to trust if a row needs the model itself (as ``load_model`` takes them).
    """
    from .model import Model, _check_favorable, _check_features, _check_threshold

    path = Path(path)
    if SCORER_PAYLOAD not in artifact.payload_names or path.suffix.lower() not in _PICKLES + _SKOPS:
        return None
    try:
        state = artifact.load_json(SCORER_PAYLOAD)
        if not isinstance(state, dict) or state.get("format") != _FORMAT or state.get("versions") != _versions():
            return None
        recorded = (artifact.manifest.get("inputs") or {}).get("model") or {}
        stand_in = SnapshotPipeline(state, str(path), trusted_types, sha256=recorded.get("sha256"))
    except Exception:           # an unreadable or unexpected description: the model file decides
        return None
    threshold = _check_threshold(threshold)
    feature_names = tuple(str(c) for c in feature_names)
    _check_features(stand_in, path, feature_names)
    favorable = _check_favorable(stand_in, path, favorable, True)
    model = Model(estimator=stand_in, path=str(path), favorable=favorable, threshold=threshold,
                  feature_names=feature_names, uses_proba=True)
    probability = artifact.load_npy("probability.npy")
    if probability.shape != (len(features),):
        return None
    return model if _reproduces(model, features, probability) else None


def scorer_outdated(artifact) -> str | None:
    """When the pool keeps a scorer written under other versions of numpy, scipy or scikit-learn than those
    installed: those versions, as text (``"scikit-learn 1.5.0 (installed: 1.6.1)"``); None otherwise."""
    if SCORER_PAYLOAD not in artifact.payload_names:
        return None
    try:
        kept = artifact.load_json(SCORER_PAYLOAD).get("versions")
    except Exception:
        return None
    if not isinstance(kept, dict):
        return None
    installed = _versions()
    differ = [f"{_LIBRARIES.get(name, name)} {kept.get(name)} (installed: {installed[name]})"
              for name in _LIBRARIES if kept.get(name) != installed[name]]
    return ", ".join(differ) or None
