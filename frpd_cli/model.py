"""Load a trusted classifier and ask it for the probability of the favourable class.

frpd never trains a model: it loads one the user trained, checks once that it fits the
data (feature columns, favourable class), and then asks it, in batches, how likely each
raw row is to receive the favourable decision. Every validity decision in frpd is the
model's own prediction on a raw (decoded) row.

Security
--------
``.pkl``, ``.pickle`` and ``.joblib`` files are read with :func:`joblib.load`, which
unpickles: **loading a pickle runs code chosen by whoever wrote the file**. Only load
models you trained yourself or obtained from someone you trust. ``.skops`` files are
read with :mod:`skops.io`, which refuses every type outside an explicit trusted list
(see :data:`DEFAULT_TRUSTED_TYPES` and ``docs/security.md``).
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import numbers
import os
import pickle
import sys
import threading
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .exceptions import FrpdError, InputError, ModelError, ModelOutputError

__all__ = [
    "DEFAULT_TRUSTED_TYPES",
    "Model",
    "ModelVersionWarning",
    "PICKLE_SUFFIXES",
    "ROWWISE_TRANSFORMERS",
    "SCORE_BLOCK_ROWS",
    "SKOPS_SUFFIXES",
    "fit_as_fitted",
    "load_model",
    "model_output_to_stderr",
]

PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")
SKOPS_SUFFIXES = (".skops",)

#: Rows per estimator call. Every call has exactly this shape (the last block of a batch is
#: padded), so a row's probability never depends on the rows it is batched with. A multiple of
#: the row unrolling of common BLAS kernels (4, 8, 16); large enough that scikit-learn's
#: per-call validation (a few milliseconds) is shared by many rows, small enough that padding a
#: short batch costs well under a millisecond for the tabular models frpd is used with.
SCORE_BLOCK_ROWS = 512

#: Transformers whose output for a row depends on that row only, by elementwise arithmetic and
#: lookups (no matrix products): the steps of a scikit-learn ``Pipeline`` before its final
#: estimator may run once on a whole batch when they are all of these types (or column
#: transformers and pipelines made of them, ``"passthrough"``, ``"drop"``).
ROWWISE_TRANSFORMERS: frozenset[str] = frozenset(
    {
        "sklearn.preprocessing._encoders.OneHotEncoder",
        "sklearn.preprocessing._encoders.OrdinalEncoder",
        "sklearn.preprocessing._data.MinMaxScaler",
        "sklearn.preprocessing._data.StandardScaler",
        "sklearn.preprocessing._data.RobustScaler",
        "sklearn.preprocessing._data.MaxAbsScaler",
        "sklearn.impute._base.SimpleImputer",
    }
)

#: Types that :mod:`skops.io` may report as untrusted and that frpd trusts by default when
#: loading a ``.skops`` model: scikit-learn estimators and transformers commonly used in
#: credit/admissions pipelines, the internal helper objects they hold (trees, optimisers,
#: calibrators, neighbour trees, distance metrics) and numpy types. Anything else
#: (in particular custom classes and arbitrary functions) must be named by the caller.
DEFAULT_TRUSTED_TYPES: frozenset[str] = frozenset(
    {
        # numpy
        "numpy.dtype",
        "numpy.ndarray",
        "numpy.bool_",
        "numpy.float16",
        "numpy.float32",
        "numpy.float64",
        "numpy.int8",
        "numpy.int16",
        "numpy.int32",
        "numpy.int64",
        "numpy.uint8",
        "numpy.uint16",
        "numpy.uint32",
        "numpy.uint64",
        "numpy.str_",
        "numpy.random.mtrand.RandomState",
        "numpy.random._generator.Generator",
        "numpy.random._pcg64.PCG64",
        # composition
        "sklearn.pipeline.Pipeline",
        "sklearn.pipeline.FeatureUnion",
        "sklearn.compose._column_transformer.ColumnTransformer",
        "sklearn.compose._column_transformer.make_column_selector",
        # preprocessing
        "sklearn.preprocessing._encoders.OneHotEncoder",
        "sklearn.preprocessing._encoders.OrdinalEncoder",
        "sklearn.preprocessing._data.MinMaxScaler",
        "sklearn.preprocessing._data.StandardScaler",
        "sklearn.preprocessing._data.RobustScaler",
        "sklearn.preprocessing._data.MaxAbsScaler",
        "sklearn.preprocessing._label.LabelEncoder",
        "sklearn.preprocessing._label.LabelBinarizer",
        "sklearn.impute._base.SimpleImputer",
        # classifiers
        "sklearn.linear_model._logistic.LogisticRegression",
        "sklearn.neural_network._multilayer_perceptron.MLPClassifier",
        "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
        "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
        "sklearn.ensemble._forest.RandomForestClassifier",
        "sklearn.ensemble._forest.ExtraTreesClassifier",
        "sklearn.ensemble._gb.GradientBoostingClassifier",
        "sklearn.ensemble._hist_gradient_boosting.gradient_boosting.HistGradientBoostingClassifier",
        "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
        "sklearn.ensemble._hist_gradient_boosting.binning._BinMapper",
        "sklearn.dummy.DummyRegressor",
        "sklearn.tree._classes.DecisionTreeClassifier",
        "sklearn.tree._classes.DecisionTreeRegressor",
        "sklearn.tree._tree.Tree",
        "sklearn.svm._classes.SVC",
        "sklearn.calibration.CalibratedClassifierCV",
        "sklearn.calibration._CalibratedClassifier",
        "sklearn.calibration._SigmoidCalibration",
        "sklearn.isotonic.IsotonicRegression",
        "sklearn.neighbors._classification.KNeighborsClassifier",
        "sklearn.neighbors._kd_tree.KDTree",
        "sklearn.neighbors._ball_tree.BallTree",
        "sklearn.metrics._dist_metrics.EuclideanDistance64",
        "sklearn.metrics._dist_metrics.ManhattanDistance64",
        "sklearn.metrics._dist_metrics.MinkowskiDistance64",
        "sklearn._loss.loss.HalfBinomialLoss",
        "sklearn._loss.loss.HalfMultinomialLoss",
        "sklearn._loss.link.LogitLink",
        "sklearn._loss.link.MultinomialLogit",
        "sklearn._loss.link.Interval",
    }
)


class ModelVersionWarning(UserWarning):
    """The model file was saved with another scikit-learn version than the one installed."""


@dataclass(frozen=True)
class Model:
    """A loaded, checked classifier and the class frpd treats as favourable.

    Build it with :func:`load_model`, which validates it once.

    Attributes
    ----------
    estimator : object
        The loaded classifier (usually a scikit-learn ``Pipeline``).
    path : str
        The file it was loaded from.
    favorable : object
        The favourable class, as it appears in ``estimator.classes_`` (a plain Python
        scalar), or as given when the estimator has no ``classes_``.
    threshold : float
        A row is favourable when its favourable probability is ``>= threshold``.
    feature_names : tuple of str
        The data's feature columns. Rows are passed to the estimator in the order of its
        ``feature_names_in_`` when it has one, in this order otherwise.
    uses_proba : bool
        True when the estimator has ``predict_proba``; False for predict-only models,
        whose "probability" is 1.0 (predicted favourable) or 0.0.
    """

    estimator: object
    path: str
    favorable: object
    threshold: float
    feature_names: tuple[str, ...]
    uses_proba: bool

    #: :meth:`favorable_probability` takes a dict of column arrays (see :func:`score_columns`).
    takes_columns = True

    @property
    def input_columns(self) -> tuple[str, ...]:
        """The column order the estimator receives."""
        names = getattr(self.estimator, "feature_names_in_", None)
        return tuple(str(c) for c in names) if names is not None else self.feature_names

    def favorable_probability(self, rows) -> np.ndarray:
        """Probability of the favourable class for each raw row, independent of the batch.

        Parameters
        ----------
        rows : DataFrame of shape (n_rows, n_columns), dict or ndarray of shape (n_rows, n_features)
            Raw (decoded) feature values. A DataFrame must hold every feature column (extra
            columns are ignored; order does not matter). A dict maps column names to 1-D arrays
            of equal length and stands for ``pd.DataFrame(rows)``, with the same results. An
            ndarray is read in the order of ``feature_names``.

        Returns
        -------
        proba : ndarray of shape (n_rows,), float64
            ``predict_proba(rows)[:, favourable]``; for predict-only models 1.0 where the
            prediction is the favourable class and 0.0 elsewhere.

        Raises
        ------
        InputError
            A feature column is missing from ``rows``.
        ModelError
            The estimator fails or returns an output of the wrong shape.

        Notes
        -----
        Batch invariance: a row's probability depends on that row only, bit for bit, never
        on which other rows share the call. The estimator is called on blocks of exactly
        :data:`SCORE_BLOCK_ROWS` rows (the last block is padded by repeating its last row;
        the padding's results are discarded), with BLAS pinned to one thread. Matrix
        products take different code paths for different numbers of rows (matrix-vector
        for one row, small-matrix kernels, thread partitions that depend on the shape), and
        those paths round differently; with one shape and one thread, every row of every
        call goes through the same path. Measured with the sample MLP, a logistic
        regression and a random forest: the result of a row does not depend on its
        position inside a block (``docs/architecture.md``).

        When the estimator is a scikit-learn ``Pipeline`` whose steps before the last only
        transform each row on its own (scalers, encoders, imputers, column transformers
        made of them: :data:`ROWWISE_TRANSFORMERS`), those steps run once on all rows and
        only the last step runs block by block, which keeps the cost of a call close to
        one unblocked call. Any other estimator is called whole, block by block.

        Calls: ``ceil(n_rows / SCORE_BLOCK_ROWS)`` ``predict_proba`` (or ``predict``) calls
        of the final estimator per invocation; batch rows before calling to share the
        per-call cost (zero calls for zero rows).
        """
        transformed = self._compiled_columns(rows) if isinstance(rows, dict) else None
        if transformed is not None:
            X, n_rows = transformed, transformed.shape[0]
        else:
            frame = self._prepare(pd.DataFrame(rows) if isinstance(rows, dict) else rows)
            n_rows = len(frame)
            if n_rows == 0:
                return np.zeros(0, dtype=np.float64)
            X = frame.to_numpy() if _fitted_without_names(self.estimator) else frame
        try:
            with model_output_to_stderr(), _one_blas_thread():
                if self.uses_proba:
                    out = _score_in_blocks(self.estimator, "predict_proba", X, self.path,
                                           transformed=transformed is not None)
                else:
                    out = _score_in_blocks(self.estimator, "predict", X, self.path)
        except ModelError:
            raise
        except (Exception, SystemExit) as exc:  # a foreign estimator may raise anything, even call sys.exit
            method = "predict_proba" if self.uses_proba else "predict"
            raise ModelError(
                f"The model '{self.path}' failed in {method} on {n_rows} row(s): {_foreign_failure(exc)}"
            ) from (None if isinstance(exc, SystemExit) else exc)
        if self.uses_proba:
            out = self._check_proba(out, n_rows)
            return np.ascontiguousarray(out[:, self._favorable_index()], dtype=np.float64)
        out = out.reshape(-1) if out.ndim == 2 and out.shape[1] == 1 else out
        if out.shape != (n_rows,):
            raise ModelError(
                f"The model '{self.path}' returned predict output of shape {out.shape}; expected ({n_rows},)."
            )
        return self._predicted_favorable(out).astype(np.float64)

    def _compiled_columns(self, columns: dict):
        """A pipeline's preprocessed matrix of the rows of a dict of column arrays, without building a DataFrame.

        Only when the pipeline's row-wise preprocessing is one ColumnTransformer whose compiled form already
        reproduced scikit-learn exactly in this process (:mod:`frpd_cli._rowwise`) and reads these columns as
        they are; None otherwise (the rows then go the DataFrame way, with the same result). The compiled form
        reads a frame's columns as arrays, so a dict of those arrays gives the same matrix, bit for bit:
        building the DataFrame (and, with pandas' string type, converting text there and back) is the only
        work skipped. About a millisecond per call, which the linear interpolation and the sparse search make
        dozens of per task.
        """
        if not self.uses_proba or _fitted_without_names(self.estimator) or not columns:
            return None
        prefix = _rowwise_prefix(self.estimator)
        if prefix is None or len(prefix) != 1:
            return None
        from ._rowwise import compiled_prefix, n_rows

        compiled = compiled_prefix(prefix[0])
        if not compiled or any(c not in columns for c in self.input_columns):
            return None
        if any(not isinstance(v, np.ndarray) or v.ndim != 1 for v in columns.values()):
            return None
        if len({v.shape[0] for v in columns.values()}) != 1 or n_rows(columns) == 0:
            return None
        try:
            return compiled.transform(columns)
        except Exception:           # anything unexpected: the DataFrame way decides
            return None

    def _check_proba(self, out: np.ndarray, n_rows: int) -> np.ndarray:
        """Check one ``predict_proba`` result; return it as float64 of shape (n_rows, n_classes).

        Every row must hold one finite value per class, each in [0, 1] (within 1e-9) and
        summing to 1 within 1e-6. Raises :class:`ModelOutputError` naming the first bad
        row of the call (its 1-based position among the ``n_rows`` rows passed).
        """
        n_classes = len(self.estimator.classes_)
        if out.ndim != 2 or out.shape != (n_rows, n_classes):
            raise ModelError(
                f"The model '{self.path}' returned predict_proba output of shape {out.shape} for {n_rows} row(s); "
                f"expected ({n_rows}, {n_classes}): one column per class of classes_ "
                f"({', '.join(repr(_plain(c)) for c in self.estimator.classes_)}). Check that the file holds a "
                "fitted scikit-learn classifier."
            )
        if out.dtype.kind not in "fiub":
            try:
                out = out.astype(np.float64)
            except (TypeError, ValueError):
                raise ModelError(
                    f"The model '{self.path}' returned predict_proba values of type {out.dtype} that are not "
                    "numbers; expected probabilities. Check that the file holds a fitted classifier."
                ) from None
        out = np.asarray(out, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            # fast path (three reductions): every row sums to 1 (so it is finite) and every value is in range
            if (out.size and np.all(np.abs(out.sum(axis=1) - 1.0) <= _PROBA_SUM_TOL)
                    and out.min() >= -_PROBA_RANGE_TOL and out.max() <= 1.0 + _PROBA_RANGE_TOL):
                return out
            finite = np.isfinite(out).all(axis=1)
            in_range = ((out >= -_PROBA_RANGE_TOL) & (out <= 1.0 + _PROBA_RANGE_TOL)).all(axis=1)
            sums_to_one = np.abs(out.sum(axis=1) - 1.0) <= _PROBA_SUM_TOL
        bad = np.flatnonzero(~(finite & in_range & sums_to_one))
        if bad.size == 0:
            return out
        r = int(bad[0])
        if not finite[r]:
            problem = "non-finite probabilities (NaN or infinity)"
        elif not in_range[r]:
            problem = "probabilities outside [0, 1]"
        else:
            problem = f"probabilities that sum to {out[r].sum():.9g}, not 1"
        raise ModelOutputError(
            model=self.path, row=r, n_rows=n_rows, n_bad=int(bad.size),
            problem=f"returned {problem}: {_shown_row(out[r])}",
        )

    def is_favorable(self, rows) -> np.ndarray:
        """Whether each row gets the favourable decision: ``favorable_probability(rows) >= threshold``.

        Returns
        -------
        mask : ndarray of shape (n_rows,), bool
        """
        return self.favorable_probability(rows) >= self.threshold

    def _predicted_favorable(self, predictions: np.ndarray) -> np.ndarray:
        if getattr(self.estimator, "classes_", None) is not None:
            # favorable is an element of classes_, the same kind of value predict returns
            mask = np.asarray(predictions == self.favorable)
            if mask.shape == predictions.shape and mask.dtype == bool:
                return mask
        values = predictions.tolist()
        return np.fromiter((_same_class(v, self.favorable) for v in values), dtype=bool, count=len(values))

    def _favorable_index(self) -> int:
        classes = list(self.estimator.classes_)
        for i, c in enumerate(classes):
            if _same_class(c, self.favorable):
                return i
        listed = ", ".join(str(_plain(c)) for c in classes[:20]) + (", ..." if len(classes) > 20 else "")
        raise ModelError(f"The favourable class {_plain(self.favorable)!r} is not one of the classes of the model "
                         f"'{self.path}' ({listed}). Check --favorable and the model's classes.")

    def _prepare(self, rows) -> pd.DataFrame:
        if isinstance(rows, pd.Series):
            rows = rows.to_frame().T
        if not isinstance(rows, pd.DataFrame):
            array = np.asarray(rows)
            if array.ndim == 1:
                array = array.reshape(1, -1)
            if array.ndim != 2 or array.shape[1] != len(self.feature_names):
                raise InputError(
                    f"Rows for the model must have {len(self.feature_names)} columns "
                    f"({', '.join(self.feature_names)}); got an array of shape {np.shape(rows)}."
                )
            rows = pd.DataFrame(array, columns=list(self.feature_names))
        columns = self.input_columns
        present = {str(c) for c in rows.columns}
        missing = [c for c in columns if c not in present]
        if missing:
            raise InputError(
                f"Column(s) {_names(missing)} missing from the rows given to the model '{self.path}'; "
                "the model needs every feature column."
            )
        if not all(isinstance(c, str) for c in rows.columns):
            rows = rows.rename(columns=str)
        if tuple(rows.columns) != columns:
            rows = rows.loc[:, list(columns)]
        categories = _pandas_categories(self.estimator)
        if categories is not None:
            rows = self._as_categories(rows, categories)
        return rows                     # the estimator's columns, in its order (read only: may be the caller's)

    def _as_categories(self, rows: pd.DataFrame, categories) -> pd.DataFrame:
        """The rows with the columns a LightGBM model was trained on as pandas ``category`` columns given that
        dtype (:func:`_as_lightgbm_categories`)."""
        return _as_lightgbm_categories(rows, categories, path=self.path)


def _as_lightgbm_categories(rows, categories, *, path, step: bool = False, refit: bool = False):
    """``rows`` with the columns a LightGBM model was trained on as pandas ``category`` columns given that dtype,
    with the model's own categories in the model's order (LightGBM refuses text columns, and maps the codes of a
    ``category`` column to the training categories, a value it never saw to missing).

    ``step``: the rows are what the steps of a Pipeline before its LightGBM classifier give it (they must be a
    DataFrame holding those columns). ``refit``: the rows are to fit a copy of the model on, so a column that is
    a ``category`` already gets the model's categories too (the copy keeps the categories it is fitted with).
    """
    where = f"The LightGBM step of the Pipeline '{path}'" if step else f"The LightGBM model '{path}'"
    if isinstance(categories, str):     # the model's categorical columns could not be told apart
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(np.asarray(rows, dtype=object))
        text = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])
                and not isinstance(frame[c].dtype, pd.CategoricalDtype)]
        if not text:
            return rows
        raise ModelError(f"{where} was trained on pandas 'category' columns, but {categories} Column(s) "
                         f"{_names(text)} reach it as text, which LightGBM refuses. Save a Pipeline that encodes "
                         "the text columns itself (an OrdinalEncoder before the classifier), or train with every "
                         "categorical column of 'category' dtype.")
    if not isinstance(rows, pd.DataFrame):
        raise ModelError(f"{where} was trained on pandas 'category' columns ({_names(categories)}), but the steps "
                         f"before it give it a {type(rows).__name__}, not a DataFrame, so frpd cannot give those "
                         "columns their dtype. Make those steps output DataFrames (set_output(transform='pandas') "
                         "on them before fitting), or encode the categorical columns in the Pipeline (an "
                         "OrdinalEncoder before the classifier).")
    missing = [name for name in categories if name not in rows.columns]
    if missing:
        raise ModelError(f"{where} was trained on pandas 'category' columns {_names(categories)}, but "
                         f"{_names(missing)} {'is' if len(missing) == 1 else 'are'} not among the columns "
                         f"{'the steps before it give it' if step else 'it is given'} "
                         f"({_names(map(str, rows.columns))}), so frpd cannot give them their dtype. Save a Pipeline "
                         "whose steps before the classifier keep those columns' names (a ColumnTransformer with "
                         "verbose_feature_names_out=False), or encode them in the Pipeline (an OrdinalEncoder).")
    converted = {}
    for name, levels in categories.items():
        column = rows[name]
        if not isinstance(column.dtype, pd.CategoricalDtype):
            converted[name] = pd.Categorical(column.to_numpy(dtype=object), categories=levels)
        elif refit and list(column.cat.categories) != list(levels):
            converted[name] = pd.Categorical(column.astype(object).to_numpy(dtype=object), categories=levels)
    return rows.assign(**converted) if converted else rows     # a new frame: the caller's is left as is


def _lightgbm_step(estimator):
    """The LightGBM classifier that receives the rows, and whether it is a Pipeline's last step: the estimator
    itself (False), the last step of a scikit-learn Pipeline (True), or None for any other model."""
    if type(estimator).__module__.startswith("lightgbm"):
        return estimator, False
    steps = getattr(estimator, "steps", None)
    if type(estimator).__module__ == "sklearn.pipeline" and type(estimator).__name__ == "Pipeline" and steps:
        final = steps[-1][1]
        if type(final).__module__.startswith("lightgbm"):
            return final, True
    return None


def _pipeline_categories(estimator):
    """The pandas categories (:func:`_pandas_categories`) of the LightGBM classifier that ends a Pipeline."""
    found = _lightgbm_step(estimator)
    if found is None or not found[1]:
        return None
    return _pandas_categories(found[0])


def fit_as_fitted(original, refit, X: pd.DataFrame, y, *, path: str) -> None:
    """Fit ``refit`` (an unfitted clone of ``original``) on ``X``, ``y`` as ``original`` was fitted.

    A LightGBM classifier trained on pandas ``category`` columns, alone or as the last step of a Pipeline, is
    given those columns with that dtype and the original's categories (the training CSV's text columns are
    read as text, which LightGBM refuses): a bare classifier in ``X`` itself, the last step of a Pipeline in
    what the steps before it (fitted on ``X`` first) give it. Any other model is fitted on ``X`` as it is.

    Raises
    ------
    ModelError
        The categorical columns cannot be told apart, or the steps before the classifier do not give it a
        DataFrame with those columns (see :func:`_as_lightgbm_categories`).
    """
    found = _lightgbm_step(original)
    categories = None if found is None else _pandas_categories(found[0])
    if categories is None:
        refit.fit(X, y)
        return
    if not found[1]:
        refit.fit(_as_lightgbm_categories(X, categories, path=path, refit=True), y)
        return
    head = refit[:-1]               # the same step objects as the refit's: fitting them fits the refit's
    Z = head.fit_transform(X, y)
    refit.steps[-1][1].fit(_as_lightgbm_categories(Z, categories, path=path, step=True, refit=True), y)


_CATEGORIES = weakref.WeakKeyDictionary()       # estimator -> _find_pandas_categories(estimator)
_NO_CATEGORIES = object()


def _pandas_categories(estimator):
    """A LightGBM model's pandas categories, ``{column: categories}`` (found once per estimator); a sentence
    saying why they cannot be matched to its columns; or None (not such a model)."""
    if not type(estimator).__module__.startswith("lightgbm"):
        return None
    try:
        found = _CATEGORIES.get(estimator, _NO_CATEGORIES)
    except TypeError:                               # not weakly referenceable: found again each call
        return _find_pandas_categories(estimator)
    if found is _NO_CATEGORIES:
        found = _find_pandas_categories(estimator)
        try:
            _CATEGORIES[estimator] = found
        except TypeError:
            pass
    return found


def _find_pandas_categories(estimator):
    """``{column: categories}`` of the columns a LightGBM model was trained on as pandas ``category`` columns.

    The booster keeps the categories of those columns (``pandas_categorical``), in the order of the columns,
    but not their names: they are the model's categorical features (those whose feature information lists
    category codes) when there are as many; otherwise, when the model also has integer-coded categorical
    features, the ones that frpd cannot tell apart are reported as a sentence (see :meth:`Model._prepare`).
    """
    try:
        booster = estimator.booster_
        levels = booster.pandas_categorical
    except Exception:           # not fitted, or not a scikit-learn LightGBM classifier: nothing to convert
        return None
    if not levels:
        return None
    try:
        names = [str(n) for n in booster.feature_name()]
        infos = booster.dump_model(num_iteration=1)["feature_infos"]   # one tree: only the header is needed
    except Exception:
        return "frpd could not read which of its columns they were."
    categorical = [n for n in names if isinstance(infos.get(n), dict) and infos[n].get("values")]
    if len(categorical) != len(levels):
        return (f"its {len(categorical)} categorical feature(s) ({_names(categorical)}) are not the "
                f"{len(levels)} column(s) it kept categories for, so frpd cannot tell which columns they were.")
    return {name: list(values) for name, values in zip(categorical, levels)}


def score_columns(model, columns: dict) -> np.ndarray:
    """``model.favorable_probability`` of the rows of ``columns`` (column name -> 1-D array), as float64.

    A :class:`Model` (or a wrapper that forwards its attributes) is given the dict itself and scores it without
    building a DataFrame when it can; any other model-like object receives ``pd.DataFrame(columns)``. The
    probabilities are the same either way.
    """
    rows = columns if getattr(model, "takes_columns", False) is True else pd.DataFrame(columns)
    return np.asarray(model.favorable_probability(rows), dtype=np.float64)


_PROBA_RANGE_TOL = 1e-9
_PROBA_SUM_TOL = 1e-6


def _shown_row(values: np.ndarray) -> str:
    shown = ", ".join(f"{v:.6g}" for v in values[:6])
    return f"[{shown}{', ...' if values.size > 6 else ''}]"


_redirect_lock = threading.Lock()
_redirect_depth = 0
_redirect_saved: tuple = (None, None)
_libc = None


@contextmanager
def model_output_to_stderr():
    """Send everything written to stdout while the block runs to stderr, so data on stdout stays clean.

    Covers Python-level writes (``print``: ``sys.stdout`` is swapped for ``sys.stderr``)
    and writes to file descriptor 1 from C code or subprocesses (fd 1 is duplicated from
    fd 2 and restored afterwards; C stdio buffers are flushed before the restore). Wrap
    every call into foreign code (loading a model, ``predict_proba``) in it.

    Notes
    -----
    The redirection is process-wide. Nested and concurrent uses (threads) share one
    redirection, set up by the first block to enter and undone by the last to leave, so
    a thread must not write data to stdout while another thread's model call runs; frpd
    writes its data between model calls. Cost: a few system calls per block. When fd 1 or
    fd 2 is closed, only the Python-level swap is done.
    """
    global _redirect_depth, _redirect_saved
    with _redirect_lock:
        if _redirect_depth == 0:
            _flush(sys.stdout)
            _flush(sys.__stdout__)
            _redirect_saved = (sys.stdout, _swap_fd1())
            sys.stdout = sys.stderr
        _redirect_depth += 1
    try:
        yield
    finally:
        with _redirect_lock:
            _redirect_depth -= 1
            if _redirect_depth == 0:
                saved_stdout, saved_fd = _redirect_saved
                _redirect_saved = (None, None)
                _flush(sys.stdout)
                _flush(sys.__stdout__)
                _flush_c_stdio()
                sys.stdout = saved_stdout
                if saved_fd is not None:
                    try:
                        os.dup2(saved_fd, 1)
                    finally:
                        os.close(saved_fd)


def _swap_fd1():
    """Point fd 1 at fd 2; return a duplicate of the old fd 1 (None when that cannot be done)."""
    try:
        saved = os.dup(1)
    except OSError:
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(saved)
        return None
    return saved


def _flush(stream) -> None:
    try:
        if stream is not None:
            stream.flush()
    except (OSError, ValueError):  # a closed or broken stream: nothing to flush
        pass


def _flush_c_stdio() -> None:
    """fflush(NULL): push out what C code buffered in its stdout while fd 1 was redirected."""
    global _libc
    if _libc is False:
        return
    try:
        if _libc is None:
            import ctypes

            _libc = ctypes.CDLL(None)
        _libc.fflush(None)
    except (OSError, AttributeError):  # no C library reachable: Python-level redirection only
        _libc = False


def _foreign_failure(exc: BaseException) -> str:
    """What model code did when it failed: ``"RuntimeError: ..."``, or that it called ``sys.exit``."""
    if isinstance(exc, SystemExit):
        return (f"it called sys.exit({exc.code!r}) (SystemExit), which would have ended frpd with nothing "
                "written; a model must return predictions or raise an error")
    return f"{type(exc).__name__}: {exc}"


def _model_code_errors(load):
    """Wrap ``load_model``: anything the model file's code raises while loading (even ``SystemExit``) is a
    :class:`ModelError` naming the file; frpd's own errors and interrupts (Ctrl-C, signals) pass through."""

    @functools.wraps(load)
    def wrapper(path, *args, **kwargs):
        try:
            return load(path, *args, **kwargs)
        except FrpdError:
            raise
        except (Exception, SystemExit) as exc:
            raise ModelError(f"The model file '{path}' failed while loading: {_foreign_failure(exc)}. Check that "
                             "it is the fitted classifier you meant, saved in this environment.") \
                from (None if isinstance(exc, SystemExit) else exc)

    return wrapper


@_model_code_errors
def load_model(path, *, favorable, feature_names, threshold: float = 0.5, trusted_types=None,
               sha256: str | None = None, data: bytes | None = None) -> Model:
    """Load a trusted classifier from a file and check that it fits the data.

    Parameters
    ----------
    path : str or Path
        ``.pkl``, ``.pickle`` or ``.joblib`` (read with joblib: **runs code from the file,
        load only trusted models**) or ``.skops`` (read with skops.io, needs
        ``pip install 'frpd-cli[safe]'``) or ``.onnx`` (an ONNX graph scored with onnxruntime,
        needs ``pip install 'frpd-cli[onnx]'``; runs no code from the file, see
        :mod:`frpd_cli.onnx_model`).
    favorable : object
        The favourable class. Matched against ``classes_`` by value, then by its string
        form, so ``"1"`` (from the command line) matches ``1`` and vice versa.
    feature_names : sequence of str
        The data's feature columns. When the model has ``feature_names_in_``, both must
        hold the same names (order may differ).
    threshold : float, default=0.5
        A row is favourable when its favourable probability is ``>= threshold``; must be
        in the open interval (0, 1).
    trusted_types : sequence of str, optional
        For ``.skops`` files only: extra type names (as skops reports them, e.g.
        ``"mypackage.transformers.Clipper"``) to trust on top of
        :data:`DEFAULT_TRUSTED_TYPES`.
    sha256 : str, optional
        For ``.pkl``/``.pickle``/``.joblib`` and ``.skops`` files: the hex sha256 the file's bytes must have
        (a file frpd wrote and recorded, such as a refit). The bytes are read once, checked, and the model is
        loaded from those same bytes, so what is loaded is what was checked.
    data : bytes, optional
        For ``.pkl``/``.pickle``/``.joblib`` and ``.skops`` files: the file's bytes, already read and checked
        by the caller (an artifact's payload, :meth:`frpd_cli.artifacts.Artifact.read_bytes`); the model is
        loaded from them and the file is not read again. Not with ``sha256``.

    Returns
    -------
    model : Model

    Raises
    ------
    ModelError
        The file is missing, of an unknown type, cannot be read (truncated, missing
        module, untrusted types), is not a classifier, or does not fit the features or
        the favourable class, or its bytes do not have the given ``sha256``.
    InputError
        ``threshold`` is not a number in (0, 1).

    Warns
    -----
    ModelVersionWarning
        The file was saved with another scikit-learn version.

    Examples
    --------
    >>> import joblib, tempfile, os
    >>> import pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> X = pd.DataFrame({"income": [1.0, 2.0, 3.0, 4.0]})
    >>> clf = LogisticRegression().fit(X, [0, 0, 1, 1])
    >>> path = os.path.join(tempfile.mkdtemp(), "model.pkl")
    >>> _ = joblib.dump(clf, path)
    >>> model = load_model(path, favorable="1", feature_names=["income"])
    >>> model.favorable
    1
    >>> model.is_favorable(pd.DataFrame({"income": [0.0, 5.0]})).tolist()
    [False, True]
    """
    threshold = _check_threshold(threshold)
    feature_names = tuple(str(c) for c in feature_names)
    path = Path(path)
    if not path.exists():
        raise ModelError(f"The model file '{path}' does not exist. Check the --model path.")
    if path.is_dir():
        raise ModelError(f"The model path '{path}' is a folder; expected a model file ({_suffix_list()}).")
    suffix = path.suffix.lower()
    if sha256 is not None and data is not None:
        raise TypeError("load_model takes the file's sha256 or its bytes, not both.")
    if sha256 is not None and suffix in PICKLE_SUFFIXES + SKOPS_SUFFIXES:
        data = _checked_bytes(path, sha256)
    if suffix in PICKLE_SUFFIXES:
        with model_output_to_stderr():
            estimator = _with_version_warnings(path, lambda p: _load_pickle(p, data))
    elif suffix in SKOPS_SUFFIXES:
        with model_output_to_stderr():
            estimator = _with_version_warnings(path, lambda p: _load_skops(p, trusted_types, data))
    elif suffix in _ONNX_SUFFIXES:
        from .onnx_model import load_onnx  # onnxruntime is imported only for .onnx files

        with model_output_to_stderr():
            estimator = load_onnx(path, feature_names=feature_names)
    else:
        raise ModelError(
            f"The model file '{path}' has the extension '{path.suffix}'; expected one of {_suffix_list()}. "
            "Save the model with joblib.dump (.joblib/.pkl), skops.io.dump (.skops) or export it to ONNX (.onnx)."
        )

    uses_proba = callable(getattr(estimator, "predict_proba", None))
    if not uses_proba and not callable(getattr(estimator, "predict", None)):
        raise ModelError(
            f"The file '{path}' holds a {type(estimator).__module__}.{type(estimator).__qualname__}, "
            "which is not a classifier: it has neither predict_proba nor predict. "
            "Save the fitted classifier (or the Pipeline ending in it) instead."
        )
    _check_classifier(estimator, path)
    _check_features(estimator, path, feature_names)
    favorable = _check_favorable(estimator, path, favorable, uses_proba)
    return Model(
        estimator=estimator,
        path=str(path),
        favorable=favorable,
        threshold=threshold,
        feature_names=feature_names,
        uses_proba=uses_proba,
    )


# ---------------------------------------------------------------------------- batching


def _score_in_blocks(estimator, method: str, X, path: str, *, transformed: bool = False) -> np.ndarray:
    """``estimator.<method>`` on every row of ``X``, called on blocks of exactly SCORE_BLOCK_ROWS rows.

    The outputs of the blocks are stacked in row order, without the padding. ``transformed``: ``X`` is
    already the output of the pipeline's row-wise prefix (:meth:`Model._compiled_columns`).
    """
    final, Xt = estimator, X
    prefix = _rowwise_prefix(estimator)
    if prefix is not None:
        Xt = X if transformed else _transform_rowwise(prefix, Xt)
        final = estimator.steps[-1][1]
    call = getattr(final, method)
    categories = _pipeline_categories(estimator)
    if categories is not None:
        # a Pipeline's LightGBM classifier trained on pandas 'category' columns: the columns the steps before it
        # give it get that dtype (they pass the training CSV's text through as text, which LightGBM refuses)
        call = _typed_call(estimator, method, categories, path, transformed=prefix is not None)
    # A pipeline's preprocessed blocks go to a compiled predict_proba when it reproduced scikit-learn's
    # exactly (frpd_cli._rowwise.final_scorer); anything else is scikit-learn's own call.
    fast = prefix is not None and method == "predict_proba" and not isinstance(Xt, (pd.DataFrame, pd.Series))
    scorer = None
    first = None                    # the compiled first layer of every row of a CSR matrix, computed once
    n_rows = Xt.shape[0]
    parts = []
    for start in range(0, n_rows, SCORE_BLOCK_ROWS):
        stop = min(start + SCORE_BLOCK_ROWS, n_rows)
        # a short last block is padded with copies of the last row, so that every block has the same shape
        index = None if stop - start == SCORE_BLOCK_ROWS else np.minimum(np.arange(start, start + SCORE_BLOCK_ROWS),
                                                                          n_rows - 1)
        out = None
        if fast and scorer is None:
            from ._rowwise import checked_final, final_scorer

            scorer = checked_final(final)
            if scorer is None:      # checked once per estimator and process: on this block
                scorer, out = final_scorer(final, _block(Xt, start, stop, index))
            fast = bool(scorer)
        if fast and out is None:
            if _is_csr(Xt):
                # the first layer's rows do not depend on the other rows of a block (CompiledFinal.first_layer):
                # computed for all rows at once, then cut into the same blocks the layers after it see
                if first is None:
                    first = scorer.first_layer(Xt)
                out = scorer.after_first(_block(first, start, stop, index))
            else:
                out = scorer(_block(Xt, start, stop, index))
        if out is None:
            out = np.asarray(call(_block(Xt, start, stop, index)))
        if out.ndim == 0 or out.shape[0] != SCORE_BLOCK_ROWS:
            raise ModelError(
                f"The model '{path}' returned {method} output of shape {out.shape} for {SCORE_BLOCK_ROWS} rows; "
                f"expected one output row per input row."
            )
        parts.append(out[: stop - start])
    return np.concatenate(parts, axis=0)


def _typed_call(pipeline, method: str, categories, path: str, *, transformed: bool):
    """``<method>`` of a Pipeline's last step (a LightGBM classifier) on what the steps before it give, with the
    classifier's pandas categories (:func:`_as_lightgbm_categories`): on rows the steps have already transformed
    (``transformed``: its row-wise prefix ran on all rows) or on raw rows, transformed block by block."""
    final = getattr(pipeline.steps[-1][1], method)
    head = None if transformed else pipeline[:-1]

    def call(X):
        Z = X if head is None else head.transform(X)
        return final(_as_lightgbm_categories(Z, categories, path=path, step=True))

    return call


def _block(X, start: int, stop: int, index):
    """Rows ``start:stop`` of ``X``, or the rows ``index`` (a padded last block)."""
    if index is None:
        if _is_csr(X):
            return X[start:stop]        # a CSR matrix's rows sliced: the same entries as indexing them, cheaper
        index = np.arange(start, stop)  # other matrices and frames: a copy of the rows, as a padded block is
    return X.iloc[index] if isinstance(X, (pd.DataFrame, pd.Series)) else X[index]


def _is_csr(X) -> bool:
    return getattr(X, "format", None) == "csr" and hasattr(X, "indptr")


def _transform_rowwise(prefix: list, X):
    """The row-wise steps applied to ``X``: compiled when a single ColumnTransformer allows it (same bits)."""
    if len(prefix) == 1 and isinstance(X, pd.DataFrame):
        from ._rowwise import _PROBE_ROWS, compile_prefix, compiled_prefix

        compiled = compiled_prefix(prefix[0])
        if compiled is None and len(X) > _PROBE_ROWS:
            # not checked yet, a large first batch (the training rows): check on its first rows, so that
            # scikit-learn transforms those only; the rest is computed as every later batch is
            compiled = compile_prefix(prefix[0], X)      # None: not usable (or not checkable on these rows)
        elif compiled is None:         # not checked yet: scikit-learn's output serves this batch and the check
            out = prefix[0].transform(X)
            compile_prefix(prefix[0], X, reference=out)
            return out
        out = compiled.transform(X) if compiled else None
        if out is not None:
            return out
    for step in prefix:
        X = step.transform(X)
    return X


def _rowwise_prefix(estimator) -> list | None:
    """The transform steps of a plain scikit-learn Pipeline when each of them is row-wise, else None.

    Remembered per estimator object and its list of steps (reading ``transformers_`` of a fitted
    ColumnTransformer rebuilds it: a millisecond per model call otherwise).
    """
    steps = getattr(estimator, "steps", None)
    try:
        known = _PREFIXES.get(estimator)
    except TypeError:                   # not weak-referenceable
        return _find_rowwise_prefix(estimator, steps)
    if known is not None and known[0] is steps:
        return known[1]
    prefix = _find_rowwise_prefix(estimator, steps)
    _PREFIXES[estimator] = (steps, prefix)
    return prefix


_PREFIXES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _find_rowwise_prefix(estimator, steps) -> list | None:
    if getattr(type(estimator), "frpd_snapshot", False) is True:
        return [steps[0][1]]            # a pool's kept scorer (frpd_cli.snapshot): one compiled preprocessing step
    if type(estimator).__module__ != "sklearn.pipeline" or type(estimator).__name__ != "Pipeline" or not steps:
        return None
    prefix = [step for _, step in steps[:-1] if step not in (None, "passthrough")]
    return prefix if all(_is_rowwise(step) for step in prefix) else None


def _is_rowwise(step) -> bool:
    if isinstance(step, str):
        return step in ("passthrough", "drop")
    kind = f"{type(step).__module__}.{type(step).__qualname__}"
    if kind in ROWWISE_TRANSFORMERS:
        return True
    if kind == "sklearn.compose._column_transformer.ColumnTransformer":
        fitted = getattr(step, "transformers_", None)
        return fitted is not None and all(_is_rowwise(t) for _, t, _ in fitted)
    if kind == "sklearn.pipeline.Pipeline":
        return all(s is None or _is_rowwise(s) for _, s in step.steps)
    return False


def _one_blas_thread():
    """A context in which BLAS uses one thread (the process's one controller, built on first use)."""
    from .backends import thread_controller

    return thread_controller().limit(limits=1, user_api="blas")


# ---------------------------------------------------------------------------- loading


#: Packages whose ``__init__`` only re-exports names of its submodules and imports much more than a pickled
#: model needs from them. ``sklearn.compose`` imports ``TransformedTargetRegressor`` and with it all of
#: ``sklearn.linear_model`` (and ``sklearn.svm``): about a quarter of what unpickling a pipeline of a
#: ``ColumnTransformer`` and an MLP or a tree ensemble imports (``docs/benchmarks.md``). See
#: :func:`_defer_package_inits`.
_DEFERRED_PACKAGES = ("sklearn.compose",)


def _defer_package_inits(names=_DEFERRED_PACKAGES) -> None:
    """Register each package of ``names`` not imported yet without running its ``__init__`` until it is used.

    The package module is created from its import spec (``__path__``, ``__file__``, ``__spec__`` set, so its
    submodules import as usual: unpickling ``sklearn.compose._column_transformer.ColumnTransformer`` imports
    that submodule and what it imports, not the package's other submodules). The first read of an attribute
    the package does not have yet (``from sklearn.compose import X``, ``sklearn.compose.X``, ``__all__``)
    runs the real ``__init__`` in the module, once, and then behaves exactly as a normal import. Nothing is
    done for a package already imported, or when its spec cannot be found (then the normal import runs).
    """
    import importlib.util

    for name in names:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.loader is None or not spec.submodule_search_locations:
            continue
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__getattr__"] = _RunInitOnUse(module, spec)
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)


class _RunInitOnUse:
    """A deferred package's ``__getattr__``: runs the package's ``__init__`` on the first missing attribute."""

    def __init__(self, module, spec):
        self.module, self.spec = module, spec

    def __call__(self, attr: str):
        namespace = self.module.__dict__
        if namespace.get("__getattr__") is self:
            del namespace["__getattr__"]
            self.spec.loader.exec_module(self.module)
        try:
            return namespace[attr]
        except KeyError:
            raise AttributeError(f"module {self.module.__name__!r} has no attribute {attr!r}") from None


def _checked_bytes(path: Path, sha256: str) -> bytes:
    """The bytes of the model file ``path``, refused unless their sha256 is ``sha256``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"The model file '{path}' cannot be read: {exc}.") from exc
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise ModelError(
            f"The model file '{path}' is not the file frpd recorded: its sha256 is {actual}, the record says "
            f"{sha256}. It was changed after it was written; frpd does not load it. Rebuild it."
        )
    return data


def _load_pickle(path: Path, data: bytes | None = None):
    import joblib

    try:
        _defer_package_inits()
        return joblib.load(path if data is None else io.BytesIO(data))
    except ModuleNotFoundError as exc:
        raise _missing_module_error(path, exc) from exc
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError,
            IndexError, KeyError, OSError, MemoryError) as exc:
        raise ModelError(
            f"The model file '{path}' cannot be unpickled ({type(exc).__name__}: {exc}). "
            "It may be truncated, not a pickle, or saved with incompatible library versions; "
            f"re-save it with joblib.dump in this environment (scikit-learn {_installed_version('sklearn')})."
        ) from exc


def _missing_module_error(path: Path, exc: ModuleNotFoundError) -> ModelError:
    """The error for a pickle that names a module the environment lacks.

    A module missing from a package that is installed (``numpy._core`` under numpy 1.x, a private
    scikit-learn module renamed between versions) means the file was saved with another version of that
    package, not that a package is missing.
    """
    name = exc.name or "?"
    top = name.split(".")[0]
    installed = _installed_version(top) if "." in name else None
    if installed is not None:
        return ModelError(
            f"The model file '{path}' needs the module '{name}', which {top} {installed} (installed here) does "
            f"not have: the model was saved with another version of {top}."
        )
    return ModelError(
        f"The model file '{path}' needs the Python module '{name}', which is not installed. "
        f"Install the package that provides '{name}' (the one used to train the model), "
        "or re-save the model without it."
    )


def _installed_version(package: str) -> str | None:
    """The version of an importable top-level package, or None when it is not installed."""
    import importlib.util

    try:
        if importlib.util.find_spec(package) is None:
            return None
    except (ImportError, ValueError):
        return None
    from importlib import metadata

    distribution = {"sklearn": "scikit-learn"}.get(package, package)
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "(version unknown)"


def _pickled_sklearn_version(path: Path) -> str | None:
    """The scikit-learn version recorded in a pickle (scikit-learn estimators store ``_sklearn_version`` in their
    state), read from the file's bytes without unpickling; None when the file records none or cannot be read.

    Reads plain pickles and joblib's gzip, bz2, lzma/xz and zlib compressed files.
    """
    import re

    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            import gzip

            data = gzip.decompress(data)
        elif data[:3] == b"BZh":
            import bz2

            data = bz2.decompress(data)
        elif data[:6] == b"\xfd7zXZ\x00" or data[:3] == b"]\x00\x00":
            import lzma

            data = lzma.decompress(data)
        elif data[:1] == b"\x78":
            import zlib

            data = zlib.decompressobj().decompress(data)
    except Exception:  # unreadable or damaged: no version known
        return None
    # the key, its memo entry if any (MEMOIZE, BINPUT, LONG_BINPUT), then the value as SHORT_BINUNICODE (1-byte
    # length) or BINUNICODE (4 bytes)
    found = re.search(rb"_sklearn_version(?:\x94|q.|r.{4})?(?:\x8c(.)|X(.{4}))", data, re.DOTALL)
    if found is None:
        return None
    start = found.end()
    size = found.group(1)[0] if found.group(1) is not None else int.from_bytes(found.group(2), "little")
    value = data[start:start + size]
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if re.fullmatch(r"[0-9][0-9A-Za-z.+-]{0,40}", text) else None


def _load_skops(path: Path, trusted_types, data: bytes | None = None):
    try:
        import skops.io as sio
    except ImportError:
        raise ModelError(
            f"Reading the .skops model '{path}' needs the skops package. "
            "Install it with: pip install 'frpd-cli[safe]'"
        ) from None
    extra = _check_trusted_types(trusted_types)
    try:
        untrusted = sio.get_untrusted_types(file=path) if data is None else sio.get_untrusted_types(data=data)
    except Exception as exc:  # zip/JSON errors of a damaged file: report, do not continue
        raise ModelError(
            f"The .skops model file '{path}' cannot be read ({type(exc).__name__}: {exc}). "
            "It may be truncated or not a skops file; re-save it with skops.io.dump."
        ) from exc
    allowed = DEFAULT_TRUSTED_TYPES | extra
    refused = sorted(t for t in untrusted if t not in allowed)
    if refused:
        raise ModelError(
            f"The .skops model file '{path}' contains types frpd does not trust: {', '.join(refused)}. "
            "Loading them could run their code. If you trust them, pass each with --trust-type TYPE "
            "(trusted_types=[...] in Python)."
        )
    try:
        trusted = [t for t in untrusted if t in allowed]
        return sio.load(path, trusted=trusted) if data is None else sio.loads(data, trusted=trusted)
    except Exception as exc:  # a damaged or incompatible file: report with the cause
        raise ModelError(
            f"The .skops model file '{path}' cannot be loaded ({type(exc).__name__}: {exc}). "
            "Re-save it with skops.io.dump in this environment."
        ) from exc


def _with_version_warnings(path: Path, loader):
    """Run ``loader(path)``, turning scikit-learn's InconsistentVersionWarning into one ModelVersionWarning.

    scikit-learn warns once per estimator of the file (a Pipeline: once per step); frpd issues one warning
    naming the version(s) the file was saved with and the installed one. When the file cannot be loaded at all,
    the error says which scikit-learn saved it (from those warnings or the file's bytes), which is installed,
    and what to do.
    """
    try:
        from sklearn.exceptions import InconsistentVersionWarning
    except ImportError:  # scikit-learn absent: nothing to translate
        InconsistentVersionWarning = None

    saved, current, others = set(), None, []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                estimator = loader(path)
            finally:
                for w in caught:
                    if InconsistentVersionWarning is not None and issubclass(w.category, InconsistentVersionWarning):
                        saved.add(str(w.message.original_sklearn_version))
                        current = str(w.message.current_sklearn_version)
                    else:
                        others.append(w)
    except ModelError as exc:
        raise _version_error(path, exc, saved) from exc.__cause__
    for w in others:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    if saved:
        versions = ", ".join(sorted(saved))
        pin = sorted(saved)[-1]
        warnings.warn(
            f"{path.name} was saved with scikit-learn {versions}; this environment has {current}; "
            f"predictions may differ — re-train the model or pin scikit-learn=={pin}.",
            ModelVersionWarning,
            stacklevel=3,
        )
    return estimator


def _version_error(path: Path, exc: ModelError, saved: set) -> ModelError:
    """``exc`` (the file could not be loaded), saying which scikit-learn saved the file when that is another one
    than the installed scikit-learn, and what to do."""
    installed = _installed_version("sklearn")
    if not saved and path.suffix.lower() in PICKLE_SUFFIXES:
        recorded = _pickled_sklearn_version(path)
        saved = {recorded} if recorded else set()
    if installed is None or not saved or saved == {installed}:
        return exc
    versions = ", ".join(sorted(saved))
    cause = exc.__cause__
    detail = " ".join((f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)).split())
    return ModelError(
        f"The model file '{path}' cannot be loaded: it was saved with scikit-learn {versions} and this environment "
        f"has scikit-learn {installed} ({detail}). Re-save the model with scikit-learn {installed} (re-train it, or "
        "load it where it was saved and export it with skops.io.dump or to ONNX, which frpd also reads), or run frpd "
        f"in an environment with scikit-learn=={sorted(saved)[-1]}."
    )


# ---------------------------------------------------------------------------- checks


def _check_threshold(threshold) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):
        raise InputError(f"The threshold must be a number in (0, 1). Got {threshold!r} instead.")
    value = float(threshold)
    if not (0.0 < value < 1.0) or math.isnan(value):
        raise InputError(f"The threshold must be in the open interval (0, 1). Got {threshold!r} instead.")
    return value


def _check_trusted_types(trusted_types) -> frozenset[str]:
    if trusted_types is None:
        return frozenset()
    if isinstance(trusted_types, str):
        trusted_types = [trusted_types]
    bad = [t for t in trusted_types if not isinstance(t, str) or not t]
    if bad:
        raise InputError(f"Trusted types must be non-empty type names (strings). Got {bad!r}.")
    return frozenset(trusted_types)


def _check_classifier(estimator, path: Path) -> None:
    """Refuse estimators without ``classes_`` (regressors, unfitted or hand-made objects)."""
    kind = f"{type(estimator).__module__}.{type(estimator).__qualname__}"
    try:
        classes = getattr(estimator, "classes_", None)
    except Exception:  # a Pipeline ending in a regressor raises from its classes_ property
        classes = None
    if classes is None:
        role = _estimator_type(estimator)
        what = "a regressor" if role == "regressor" else "not a fitted classifier"
        raise ModelError(
            f"The file '{path}' holds a {kind}, which is {what}: it has no classes_, so frpd cannot tell "
            "which output is the favourable decision. Save a fitted classifier (or the Pipeline ending in "
            "one) with classes_ and predict_proba or predict."
        )
    try:
        n_classes = len(classes)
    except TypeError:
        n_classes = 0
    if n_classes < 2:
        raise ModelError(
            f"The model '{path}' ({kind}) knows {n_classes} class(es) "
            f"({', '.join(repr(_plain(c)) for c in classes) if n_classes else 'none'}); a classifier that decides "
            "between outcomes needs at least 2. Re-train it on data holding both decisions."
        )


def _estimator_type(estimator) -> str | None:
    try:
        tags = estimator.__sklearn_tags__()
        return getattr(tags, "estimator_type", None)
    except Exception:  # not a scikit-learn estimator, or an older one
        return getattr(estimator, "_estimator_type", None)


def _check_features(estimator, path: Path, feature_names: tuple[str, ...]) -> None:
    names_in = getattr(estimator, "feature_names_in_", None)
    if names_in is not None:
        model_names = [str(c) for c in names_in]
        missing = [c for c in model_names if c not in set(feature_names)]
        extra = [c for c in feature_names if c not in set(model_names)]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing from the data: {_names(missing)} (the model was trained with them)")
            if extra:
                parts.append(f"in the data but unknown to the model: {_names(extra)}")
            advice = "Use the data the model was trained on."
            if extra:
                from .schema import extra_columns_remedy

                advice = f"Use the data the model was trained on. {extra_columns_remedy(extra)}"
            raise ModelError(
                f"The model '{path}' and the data have different feature columns; " + "; ".join(parts) + f". {advice}"
            )
        return
    n_in = getattr(estimator, "n_features_in_", None)
    if isinstance(n_in, numbers.Integral) and int(n_in) != len(feature_names):
        raise ModelError(
            f"The model '{path}' expects {int(n_in)} features; the data has {len(feature_names)} "
            f"({', '.join(feature_names)}). Use the data the model was trained on."
        )


def _check_favorable(estimator, path: Path, favorable, uses_proba: bool):
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        if uses_proba:
            raise ModelError(
                f"The model '{path}' has predict_proba but no classes_, so the favourable class's column "
                "is unknown. Save a fitted scikit-learn classifier (with classes_)."
            )
        return _plain(favorable)
    classes = list(classes)
    matches = [c for c in classes if _same_class(c, favorable)]
    exact = [c for c in matches if _plain(c) == _plain(favorable) and type(_plain(c)) is type(_plain(favorable))]
    if len(matches) == 1 or len(exact) == 1:
        return _plain((exact or matches)[0])
    listed = ", ".join(repr(_plain(c)) for c in classes)
    if not matches:
        raise ModelError(
            f"The favourable class {favorable!r} is not one of the model's classes ({listed}). "
            "Pass --favorable with one of them."
        )
    raise ModelError(
        f"The favourable class {favorable!r} matches several of the model's classes ({listed}). "
        "Pass --favorable with the exact class."
    )


# ---------------------------------------------------------------------------- helpers


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _same_class(a, b) -> bool:
    """Whether two class labels are the same: equal values, or equal string forms ("1" vs 1, "1" vs 1.0)."""
    a, b = _plain(a), _plain(b)
    if isinstance(a, str) and not isinstance(b, str):
        a, b = b, a
    if isinstance(b, str) and not isinstance(a, str):
        # a label typed on the command line against a non-string class
        if str(a) == b:
            return True
        if isinstance(a, numbers.Real) and not isinstance(a, bool):
            try:
                return float(b) == float(a)
            except ValueError:
                return False
        return False
    if isinstance(a, bool) != isinstance(b, bool):
        return False  # 1 == True in Python, but they are different labels
    try:
        return bool(a == b)
    except Exception:  # exotic labels with a failing __eq__: fall back to their string forms
        return str(a) == str(b)


def _fitted_without_names(estimator) -> bool:
    """A scikit-learn estimator fitted on an array warns when given a DataFrame: give it an array."""
    return getattr(estimator, "feature_names_in_", None) is None and hasattr(estimator, "n_features_in_")


def _names(columns) -> str:
    return ", ".join(f"'{c}'" for c in columns)


_ONNX_SUFFIXES = (".onnx",)  # frpd_cli.onnx_model.ONNX_SUFFIXES, without importing that module here


def _suffix_list() -> str:
    return ", ".join(PICKLE_SUFFIXES + SKOPS_SUFFIXES + _ONNX_SUFFIXES)
