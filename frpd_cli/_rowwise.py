"""A direct implementation of the most common model preprocessing, bit for bit equal to scikit-learn's.

Most models frpd is used with are a scikit-learn ``Pipeline`` whose first step is a
``ColumnTransformer`` of a ``OneHotEncoder`` (categorical columns) and a ``MinMaxScaler`` or
``StandardScaler`` (numeric columns). ``ColumnTransformer.transform`` validates its input column by
column on every call, which costs about ten milliseconds per call whatever the number of rows; the
linear interpolation makes about nine model calls per chunk of applicants, so that fixed cost was
the largest single item of a plan after the selection itself.

:func:`compile_prefix` reads the fitted transformer once and returns a :class:`CompiledPrefix` that
computes the same matrix with a few numpy operations: the one-hot codes by a hash lookup of each
column, the scaling by the same two elementwise operations scikit-learn applies (``X *= scale_;
X += min_``, or ``X -= mean_; X /= scale_``), and the horizontal stacking into the same sparse (or
dense) layout. The result must be identical, not close: a last bit can flip a decision at the
threshold. So the compiled form is used only after it reproduced scikit-learn's own output exactly
(type, shape, dtype, sparse structure and every value's bits) on the first rows it is given, and
only for inputs it fully understands: string or numeric categories that are all known, numeric
columns of plain integer or float64 type without NaN or infinity. Anything else (unknown
categories, missing values, other transformers or options, a changed output configuration) goes
to scikit-learn itself, for that call, with the same result.

Nothing here changes what a row's probability is; it only removes repeated validation.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import pandas as pd

__all__ = ["CSRRows", "CompiledFinal", "CompiledPrefix", "Precompiled", "checked_final", "compile_prefix", "compiled_prefix",
           "final_from_state", "final_scorer", "final_state", "prefix_from_state", "prefix_state"]

_CT = "sklearn.compose._column_transformer.ColumnTransformer"
_ONEHOT = "sklearn.preprocessing._encoders.OneHotEncoder"
_MINMAX = "sklearn.preprocessing._data.MinMaxScaler"
_STANDARD = "sklearn.preprocessing._data.StandardScaler"

#: Rows of the first batch on which a compiled prefix must reproduce scikit-learn exactly.
_PROBE_ROWS = 4096

_UNCHECKED = object()
_compiled: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _kind(obj) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


class _OneHot:
    """One-hot block of ``columns`` (no dropped or infrequent categories)."""

    def __init__(self, encoder, columns):
        self.columns = list(columns)
        self.n_out = int(sum(len(c) for c in encoder.categories_))
        self.offsets = np.cumsum([0] + [len(c) for c in encoder.categories_])[:-1].astype(np.int64)
        self.dtype = np.dtype(encoder.dtype)
        self.string = []
        self.lookups = []
        for cats in encoder.categories_:
            cats = np.asarray(cats)
            if cats.dtype.kind == "O" and all(type(c) is str for c in cats):
                # the same lookup scikit-learn makes (a dict from category to position), without its checks
                self.string.append(True)
                self.lookups.append({c: i for i, c in enumerate(cats.tolist())})
            elif cats.dtype.kind in "iuf" and not (cats.dtype.kind == "f" and np.isnan(cats).any()):
                self.string.append(False)
                self.lookups.append(cats)
            else:
                raise _Unsupported
        self.n_features = len(self.lookups)

    def codes(self, frame):
        """Output column of every row's category, shape (n_rows, n_features); None when a value is not simple.

        ``frame``: a DataFrame, or a dict of one array per column (see :meth:`CompiledPrefix.transform`).
        """
        n = n_rows(frame)
        out = np.empty((n, self.n_features), dtype=np.int64)
        for j, (name, lookup, string) in enumerate(zip(self.columns, self.lookups, self.string)):
            values = _array(frame[name])
            if string:
                if values.dtype.kind != "O":
                    return None
                try:
                    code = np.fromiter(map(lookup.__getitem__, values), dtype=np.int64, count=n)
                except (KeyError, TypeError):
                    return None         # an unknown category or a missing value: scikit-learn decides
            else:
                if not isinstance(values.dtype, np.dtype) or values.dtype.kind not in "iuf":
                    return None
                if values.dtype.kind == "f" and not np.isfinite(values).all():
                    return None
                code = np.searchsorted(lookup, values)
                inside = code < lookup.size
                if not inside.all() or not (lookup[code] == values).all():
                    return None
            out[:, j] = code + self.offsets[j]
        return out


class _Scaler:
    """Dense block of numeric ``columns``: ``X *= a; X += b`` (min-max) or ``X -= a; X /= b`` (standard)."""

    def __init__(self, scaler, columns, kind):
        self.columns = list(columns)
        self.n_out = len(self.columns)
        self.kind = kind
        if kind == _MINMAX:
            self.first, self.second = np.asarray(scaler.scale_), np.asarray(scaler.min_)
            self.clip = tuple(scaler.feature_range) if scaler.clip else None
        else:
            self.first = np.asarray(scaler.mean_) if scaler.with_mean else None
            self.second = np.asarray(scaler.scale_) if scaler.with_std else None
            self.clip = None
        for a in (self.first, self.second):
            if a is not None and (a.dtype != np.float64 or a.shape != (self.n_out,)):
                raise _Unsupported

    def values(self, frame):
        """The scaled block, float64 of shape (n_rows, n_columns); None when a column is not plain numbers."""
        # column by column: selecting the columns as a new frame costs more than the arithmetic on a few rows
        X = np.empty((n_rows(frame), self.n_out), dtype=np.float64)
        for j, name in enumerate(self.columns):
            column = frame[name]
            dtype = column.dtype
            if not isinstance(dtype, np.dtype) or not (dtype.kind in "iu" or dtype == np.float64):
                return None
            X[:, j] = _array(column)            # int64 -> float64: the conversion pandas makes, exact or rounded alike
        if not np.isfinite(X).all():
            return None
        if self.kind == _MINMAX:
            X *= self.first
            X += self.second
            if self.clip is not None:
                np.clip(X, self.clip[0], self.clip[1], out=X)
        else:
            if self.first is not None:
                X -= self.first
            if self.second is not None:
                X /= self.second
        return X


class _Unsupported(Exception):
    pass


def n_rows(frame) -> int:
    """Rows of a DataFrame or of a dict of equal-length column arrays."""
    if isinstance(frame, pd.DataFrame):
        return len(frame)
    return len(next(iter(frame.values()))) if frame else 0


def _array(column) -> np.ndarray:
    """A column as an ndarray: a frame's column through ``to_numpy``, a dict's array as it is."""
    return column if isinstance(column, np.ndarray) else column.to_numpy()


class CompiledPrefix:
    """A fitted ``ColumnTransformer`` of one-hot encoders and scalers, computed directly.

    Use :func:`compile_prefix`; :meth:`transform` returns None for a batch it does not handle.
    """

    def __init__(self, transformer):
        if _kind(transformer) != _CT or getattr(transformer, "feature_names_in_", None) is None:
            raise _Unsupported
        config = getattr(transformer, "_sklearn_output_config", None) or {}
        if config.get("transform") not in (None, "default"):
            raise _Unsupported
        self.sparse = bool(transformer.sparse_output_)
        self.blocks = []
        names = {str(c) for c in transformer.feature_names_in_}
        for _name, step, columns in transformer.transformers_:
            if isinstance(step, str) and step == "drop":
                continue
            if isinstance(columns, str) or not all(isinstance(c, str) for c in np.asarray(columns, dtype=object)):
                raise _Unsupported          # a single column name (1-D input) or positions: not handled here
            columns = [str(c) for c in columns]
            if not columns:
                continue                    # scikit-learn skips empty selections
            if isinstance(step, str):
                raise _Unsupported          # passthrough
            if not set(columns) <= names:
                raise _Unsupported
            kind = _kind(step)
            if kind == _ONEHOT:
                if (getattr(step, "drop_idx_", None) is not None or getattr(step, "_infrequent_enabled", False)
                        or len(step.categories_) != len(columns)):
                    raise _Unsupported
                self.blocks.append(_OneHot(step, columns))
            elif kind in (_MINMAX, _STANDARD):
                self.blocks.append(_Scaler(step, columns, kind))
            else:
                raise _Unsupported
        if not self.blocks:
            raise _Unsupported
        self.n_out = sum(b.n_out for b in self.blocks)
        self.result_type = None       # the sparse class scikit-learn returns, learned when checked
        self.index_dtype = None

    def transform(self, frame):
        """The transformed rows, as scikit-learn's ``transform`` returns them; None when not handled.

        ``frame``: a DataFrame, or a dict of one 1-D array per column (every array of the same length). A dict
        gives the same result as the DataFrame of the same arrays whenever it is handled: the columns are read as
        the same arrays (a dict's array as it is, a frame's column by ``to_numpy``). A column the DataFrame would
        hold under another dtype (pandas converts text to its string type) is read back as the same values.
        """
        parts, start = [], 0
        for block in self.blocks:
            if isinstance(block, _OneHot):
                codes = block.codes(frame)
                if codes is None:
                    return None
                parts.append((True, codes + start, start, block))
            else:
                values = block.values(frame)
                if values is None:
                    return None
                parts.append((False, values, start, block))
            start += block.n_out
        n = n_rows(frame)
        return self._sparse(parts, n) if self.sparse else self._dense(parts, n)

    def _dense(self, parts, n):
        out = []
        for onehot, values, start, block in parts:
            if onehot:
                dense = np.zeros((n, block.n_out), dtype=block.dtype)
                np.put_along_axis(dense, values - start, 1, axis=1)
                out.append(dense)
            else:
                out.append(values)
        return np.hstack(out)

    def _sparse(self, parts, n):
        # Every row: its one-hot entries and the non-zero scaled values, in ascending output column order
        # (the order scipy's hstack of the blocks gives; checked against scikit-learn before first use).
        columns, values = [], []
        for onehot, block_values, start, block in parts:
            if onehot:
                columns.append(block_values)
                values.append(np.ones(block_values.shape, dtype=np.float64))
            else:
                columns.append(np.broadcast_to(np.arange(start, start + block.n_out, dtype=np.int64),
                                               block_values.shape))
                values.append(block_values)
        C = np.concatenate(columns, axis=1)
        V = np.concatenate(values, axis=1)
        keep = V != 0
        indptr = np.zeros(n + 1, dtype=self.index_dtype or np.int32)
        np.cumsum(keep.sum(axis=1), out=indptr[1:])
        indices = C[keep].astype(self.index_dtype or np.int32)
        data = V[keep]
        cls = self.result_type
        if cls is None:
            from scipy import sparse

            cls = sparse.csr_matrix
        return cls((data, indices, indptr), shape=(n, self.n_out))


def _same(a, b) -> bool:
    """Whether two transform outputs are identical: type, shape, dtype, sparse structure, every bit."""
    if type(a) is not type(b) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    if isinstance(a, np.ndarray):
        return a.tobytes() == b.tobytes()
    return (a.indptr.dtype == b.indptr.dtype and a.indices.dtype == b.indices.dtype
            and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
            and a.data.tobytes() == b.data.tobytes())


def compiled_prefix(transformer):
    """What :func:`compile_prefix` decided for ``transformer``: a CompiledPrefix, False (not compilable) or None
    (not checked yet in this process). A :class:`Precompiled` stand-in carries its own."""
    if isinstance(transformer, Precompiled):
        return transformer.frpd_compiled
    return _decision(_compiled, transformer)


def _decision(decided, key):
    """What was decided for ``key`` in the weak table ``decided``: its compiled form, False (not compiled: the
    check failed, or ``key`` cannot be weakly referenced) or None (not checked yet)."""
    try:
        known = decided.get(key, _UNCHECKED)
    except TypeError:               # not weak-referenceable: never compiled
        return False
    if known is _UNCHECKED:
        return None
    return False if known is None else known


def compile_prefix(transformer, frame: pd.DataFrame, reference=None):
    """The compiled form of ``transformer`` if it reproduces scikit-learn on ``frame``, else None.

    Parameters
    ----------
    transformer : fitted ColumnTransformer (anything else gives None)
    frame : DataFrame
        Rows to check on (the first :data:`_PROBE_ROWS`, or all of them with ``reference``); typically the
        first batch scored.
    reference : optional
        ``transformer.transform(frame)`` when the caller has computed it (the check then costs no second
        scikit-learn call).

    Returns
    -------
    CompiledPrefix or None
        Remembered per transformer (weakly), so the check runs once per process.
    """
    known = compiled_prefix(transformer)
    if known is not None:
        return known or None
    compiled = None
    try:
        candidate = CompiledPrefix(transformer)
    except (_Unsupported, AttributeError, TypeError, ValueError):
        candidate = None
    if candidate is not None:
        probe = frame if reference is not None else frame.iloc[:_PROBE_ROWS]
        try:
            expected = reference if reference is not None else transformer.transform(probe)
            if not isinstance(expected, np.ndarray):
                candidate.result_type = type(expected)
                candidate.index_dtype = expected.indices.dtype
            got = candidate.transform(probe)
            if got is None:
                return None         # rows it leaves to scikit-learn (an unknown category): check on a later batch
            if _same(got, expected):
                compiled = candidate
        except Exception:           # whatever went wrong, scikit-learn stays in charge
            compiled = None
    _compiled[transformer] = compiled
    return compiled


# ---------------------------------------------------------------------------- the final estimator

_MLP = "sklearn.neural_network._multilayer_perceptron.MLPClassifier"
_LOGISTIC = "sklearn.linear_model._logistic.LogisticRegression"
_final: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class CompiledFinal:
    """``predict_proba`` of a fitted binary ``MLPClassifier`` or ``LogisticRegression``, without its input checks.

    The same operations in the same order as scikit-learn (``X @ W + b`` per layer, the activations in place,
    ``[1 - p, p]``), on the matrix the pipeline's preprocessing produced. scikit-learn's ``predict_proba``
    validates that matrix first (``check_array`` and friends: a fraction of a millisecond per call, which is
    most of the cost of a block of 512 rows of a small network); frpd's blocks are already float64 arrays or
    CSR matrices of the right width.
    """

    def __init__(self, estimator):
        kind = _kind(estimator)
        classes = getattr(estimator, "classes_", None)
        if classes is None or len(classes) != 2:
            raise _Unsupported
        if kind == _MLP:
            from sklearn.neural_network._base import ACTIVATIONS

            if estimator.n_outputs_ != 1 or estimator.out_activation_ != "logistic":
                raise _Unsupported
            self.layers = [(np.asarray(w), np.asarray(b)) for w, b in zip(estimator.coefs_, estimator.intercepts_)]
            self.activation = str(estimator.activation)
            self.hidden = ACTIVATIONS[self.activation]
            self.logistic = True
            self.own_arithmetic = False
        elif kind == _LOGISTIC:
            coef = np.asarray(estimator.coef_)
            if coef.ndim != 2 or coef.shape[0] != 1:
                raise _Unsupported
            self.layers = [(coef.T, np.asarray(estimator.intercept_))]
            self.activation = None
            self.hidden = None
            self.logistic = True
            self.own_arithmetic = False
        else:
            raise _Unsupported
        self.n_features = self.layers[0][0].shape[0]

    def __call__(self, X) -> np.ndarray | None:
        """``predict_proba(X)``; None for an input it does not handle (not float64, other width)."""
        if X.ndim != 2 or X.shape[1] != self.n_features or X.dtype != np.float64:
            return None
        if not isinstance(X, np.ndarray) and getattr(X, "format", None) != "csr":
            return None
        return self.after_first(self.first_layer(X))

    def first_layer(self, X) -> np.ndarray:
        """The first layer's output on ``X`` (a float64 matrix of the right width), activation included.

        On a CSR matrix every output row depends on its input row only: scipy adds a row's entries one by one,
        in their stored order, whatever the other rows (no BLAS kernel chosen by the matrix's shape). So the
        first layer of many rows can be computed at once and cut into blocks afterwards, bit for bit as if each
        block had been computed on its own (``frpd_cli.model._score_in_blocks``).
        """
        weights, bias = self.layers[0]
        activation = X @ weights
        activation += bias
        if len(self.layers) > 1:
            self.hidden(activation)
        return activation

    def after_first(self, activation: np.ndarray) -> np.ndarray:
        """``predict_proba`` from the first layer's output (:meth:`first_layer`): the other layers, in place."""
        last = len(self.layers) - 1
        for i, (weights, bias) in enumerate(self.layers[1:], start=1):
            activation = activation @ weights
            activation += bias
            if i != last:
                self.hidden(activation)
        if self.own_arithmetic == "libm":
            _libm_expit(activation)
        elif self.own_arithmetic:
            _numpy_expit(activation)
        else:
            from scipy.special import expit

            expit(activation, out=activation)
        p = activation.ravel()
        return np.vstack([1 - p, p]).T


def checked_final(estimator):
    """What :func:`final_scorer` decided for ``estimator``: a CompiledFinal, False (scikit-learn keeps the job) or
    None (not checked yet in this process). A :class:`Precompiled` stand-in carries its own."""
    if isinstance(estimator, Precompiled):
        return estimator.frpd_compiled
    return _decision(_final, estimator)


def final_scorer(estimator, block) -> tuple:
    """A checked :class:`CompiledFinal` for ``estimator`` (or None), and the block's probabilities if computed.

    Decided once per estimator, on the first preprocessed ``block`` this process scores: the compiled form is
    used only if it gives ``estimator.predict_proba(block)`` bit for bit (every row of the block), else
    scikit-learn keeps the job. Returns ``(scorer, proba)``: ``proba`` is ``estimator.predict_proba(block)``
    when this call made the check (so that the block is not scored again), else None.
    """
    try:
        known = _final.get(estimator, _UNCHECKED)
    except TypeError:
        return None, None
    if known is not _UNCHECKED:
        return known, None
    compiled, expected = None, None
    try:
        candidate = CompiledFinal(estimator)
        got = candidate(block)
        if got is not None:
            expected = np.asarray(estimator.predict_proba(block))
            if got.shape == expected.shape and got.dtype == expected.dtype and got.tobytes() == expected.tobytes():
                compiled = candidate
    except Exception:               # private layout changed, unexpected attributes: scikit-learn stays in charge
        compiled = None
    _final[estimator] = compiled
    return compiled, expected


# ---------------------------------------------------------------------------- kept compiled forms
#
# A pool keeps the compiled forms of its model (frpd_cli.snapshot), so that a run reading the pool scores rows
# without importing scikit-learn (most of a one-applicant run's start). They are written as JSON: numbers as
# Python writes floats (the shortest text that reads back as the same double), arrays with their dtype; and
# used only after they reproduced the pool's stored probabilities bit for bit (frpd_cli.snapshot).


class Precompiled:
    """A stand-in for a fitted step whose compiled form is known without checking it in this process: a kept
    compiled form (``frpd_compiled``), checked by its owner (:mod:`frpd_cli.snapshot`)."""

    frpd_compiled = None


def _inplace_relu(X):
    np.maximum(X, 0, out=X)


def _inplace_tanh(X):
    np.tanh(X, out=X)


def _inplace_logistic(X):
    from scipy.special import expit

    expit(X, out=X)


def _inplace_identity(X):
    pass


def _numpy_expit(X):
    """``scipy.special.expit(X, out=X)`` written with numpy: ``1 / (1 + exp(-x))``, the operations scipy's
    expit makes, in its order. The same bits wherever numpy's ``exp`` of a double gives the C library's (numpy
    builds with their own vectorised ``exp`` may not): a kept scorer records which form reproduced scikit-learn
    (:func:`frpd_cli.snapshot.scorer_state`)."""
    np.negative(X, out=X)
    np.exp(X, out=X)
    X += 1.0
    np.divide(1.0, X, out=X)


def _exp_or_inf(value: float) -> float:
    try:
        return math.exp(value)
    except OverflowError:               # the C library's exp returns inf there; Python's math.exp raises
        return math.inf


def _libm_expit(X):
    """``scipy.special.expit(X, out=X)`` with the C library's ``exp`` (Python's ``math.exp`` calls it), one value
    at a time: ``1 / (1 + exp(-x))`` in scipy's order. Where numpy's vectorised ``exp`` differs from the C
    library's in the last bit (numpy builds for AVX-512, say), this still gives scipy's bits without importing
    scipy.special (about 0.1 s of a run's start); a kept scorer records which form reproduced scikit-learn
    (:func:`frpd_cli.snapshot.scorer_state`). ``X``: a C-contiguous float64 array."""
    flat = X.reshape(-1)
    negated = np.negative(flat).tolist()
    try:
        e = np.fromiter(map(math.exp, negated), dtype=np.float64, count=len(negated))
    except OverflowError:
        e = np.fromiter(map(_exp_or_inf, negated), dtype=np.float64, count=len(negated))
    e += 1.0
    np.divide(1.0, e, out=flat)


class CSRRows:
    """Rows in compressed sparse row form, multiplied by a dense matrix as scipy multiplies a CSR matrix.

    scipy's product (``csr_matvecs``) goes row by row and adds each stored entry's contribution in stored order,
    ``y += a * W[j]`` (a product rounded, then a sum rounded); :meth:`__matmul__` makes the same operations, one
    stored position of every row at a time, so a kept scorer needs no scipy import (about 0.2 s of a run's
    start). Used only where it reproduced scikit-learn's probabilities (:mod:`frpd_cli.snapshot`); anything else
    receives a scipy matrix (:meth:`to_scipy`).
    """

    format = "csr"
    ndim = 2

    def __init__(self, arrays, shape):
        self.data, self.indices, self.indptr = arrays
        self.shape = tuple(shape)
        self.dtype = self.data.dtype

    def __matmul__(self, weights):
        weights = np.asarray(weights)
        n = self.shape[0]
        out = np.zeros((n, weights.shape[1]), dtype=np.result_type(self.dtype, weights.dtype))
        counts = np.diff(self.indptr)
        for k in range(int(counts.max()) if n else 0):
            rows = np.flatnonzero(counts > k)
            at = self.indptr[rows] + k
            out[rows] += self.data[at, None] * weights[self.indices[at]]
        return out

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            return self.to_scipy()[key]
        start, stop, _ = key.indices(self.shape[0])
        stop = max(start, stop)
        low, high = int(self.indptr[start]), int(self.indptr[stop])
        return CSRRows((self.data[low:high], self.indices[low:high], self.indptr[start:stop + 1] - low),
                       (stop - start, self.shape[1]))

    def to_scipy(self):
        """The same rows as a scipy ``csr_matrix``."""
        from scipy import sparse

        return sparse.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)


#: The hidden activations of scikit-learn's MLP by name, written as scikit-learn writes them
#: (``sklearn.neural_network._base.ACTIVATIONS``), for kept compiled forms.
_ACTIVATIONS = {"relu": _inplace_relu, "tanh": _inplace_tanh, "logistic": _inplace_logistic,
                "identity": _inplace_identity}

#: The sparse classes a kept prefix may return, by name.
_SPARSE_RESULTS = ("csr_matrix", "csr_array")


def _array_state(a) -> dict:
    a = np.asarray(a)
    if a.dtype.kind not in "iuf":
        raise _Unsupported
    # the memory layout too: a matrix product may take another kernel for another layout
    order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"
    return {"dtype": a.dtype.str, "shape": list(a.shape), "order": order, "values": a.ravel(order=order).tolist()}


def _array_from(state) -> np.ndarray:
    dtype = np.dtype(state["dtype"])
    if dtype.kind not in "iuf":
        raise ValueError(f"an array of type {dtype}")
    order = state.get("order", "C")
    if order not in ("C", "F"):
        raise ValueError(f"the memory order {order!r}")
    return np.asarray(state["values"], dtype=dtype).reshape(state["shape"], order=order)


def prefix_state(compiled: CompiledPrefix) -> dict:
    """A JSON-ready description of a checked :class:`CompiledPrefix` (:func:`prefix_from_state` reads it)."""
    blocks = []
    for block in compiled.blocks:
        if isinstance(block, _OneHot):
            lookups = [{"text": list(lookup)} if string else {"numbers": _array_state(lookup)}
                       for lookup, string in zip(block.lookups, block.string)]
            blocks.append({"kind": "onehot", "columns": block.columns, "dtype": block.dtype.str, "lookups": lookups})
        else:
            blocks.append({"kind": "minmax" if block.kind == _MINMAX else "standard", "columns": block.columns,
                           "first": None if block.first is None else _array_state(block.first),
                           "second": None if block.second is None else _array_state(block.second),
                           "clip": None if block.clip is None else [float(c) for c in block.clip]})
    result = None
    if compiled.result_type is not None:
        result = compiled.result_type.__name__
        if result not in _SPARSE_RESULTS:
            raise _Unsupported
    return {"sparse": compiled.sparse, "blocks": blocks, "result_type": result,
            "index_dtype": None if compiled.index_dtype is None else np.dtype(compiled.index_dtype).str}


def prefix_from_state(state: dict, *, own_arithmetic=False) -> CompiledPrefix:
    """The :class:`CompiledPrefix` :func:`prefix_state` described (raises ValueError, KeyError or TypeError on a
    description it does not understand); with ``own_arithmetic`` (``"numpy"`` or ``"libm"``; True means
    ``"numpy"``) its sparse rows are :class:`CSRRows` instead of scipy matrices."""
    compiled = CompiledPrefix.__new__(CompiledPrefix)
    compiled.sparse = bool(state["sparse"])
    compiled.blocks = []
    for described in state["blocks"]:
        columns = [str(c) for c in described["columns"]]
        if described["kind"] == "onehot":
            block = _OneHot.__new__(_OneHot)
            block.columns = columns
            block.dtype = np.dtype(described["dtype"])
            block.string, block.lookups, sizes = [], [], []
            for lookup in described["lookups"]:
                if "text" in lookup:
                    levels = [str(c) for c in lookup["text"]]
                    block.string.append(True)
                    block.lookups.append({c: i for i, c in enumerate(levels)})
                    sizes.append(len(levels))
                else:
                    values = _array_from(lookup["numbers"])
                    block.string.append(False)
                    block.lookups.append(values)
                    sizes.append(values.size)
            if len(columns) != len(sizes):
                raise ValueError("a one-hot block with as many columns as category lists")
            block.n_out = int(sum(sizes))
            block.offsets = np.cumsum([0] + sizes)[:-1].astype(np.int64)
            block.n_features = len(sizes)
        elif described["kind"] in ("minmax", "standard"):
            block = _Scaler.__new__(_Scaler)
            block.columns = columns
            block.n_out = len(columns)
            block.kind = _MINMAX if described["kind"] == "minmax" else _STANDARD
            block.first = None if described["first"] is None else _array_from(described["first"])
            block.second = None if described["second"] is None else _array_from(described["second"])
            block.clip = None if described["clip"] is None else tuple(float(c) for c in described["clip"])
            for a in (block.first, block.second):
                if a is not None and (a.dtype != np.float64 or a.shape != (block.n_out,)):
                    raise ValueError("scaler arrays of one float64 per column")
        else:
            raise ValueError(f"a block of kind {described['kind']!r}")
        compiled.blocks.append(block)
    if not compiled.blocks:
        raise ValueError("no blocks")
    compiled.n_out = sum(b.n_out for b in compiled.blocks)
    compiled.result_type = None
    if state["result_type"] is not None:
        if state["result_type"] not in _SPARSE_RESULTS:
            raise ValueError(f"a result of type {state['result_type']!r}")
        if own_arithmetic:
            compiled.result_type = CSRRows
        else:
            from scipy import sparse

            compiled.result_type = getattr(sparse, state["result_type"])
    compiled.index_dtype = None if state["index_dtype"] is None else np.dtype(state["index_dtype"])
    return compiled


def final_state(compiled: CompiledFinal) -> dict:
    """A JSON-ready description of a checked :class:`CompiledFinal` (:func:`final_from_state` reads it)."""
    if compiled.activation is not None and compiled.activation not in _ACTIVATIONS:
        raise _Unsupported
    return {"activation": compiled.activation, "logistic": bool(compiled.logistic),
            "layers": [{"weights": _array_state(w), "bias": _array_state(b)} for w, b in compiled.layers]}


def final_from_state(state: dict, *, own_arithmetic=False) -> CompiledFinal:
    """The :class:`CompiledFinal` :func:`final_state` described (its hidden activation written here, as
    scikit-learn writes it); with ``own_arithmetic`` the logistic function is computed without scipy: with
    numpy (``"numpy"`` or True, :func:`_numpy_expit`) or with the C library's ``exp`` (``"libm"``,
    :func:`_libm_expit`) instead of scipy's ``expit``."""
    compiled = CompiledFinal.__new__(CompiledFinal)
    compiled.layers = [(_array_from(layer["weights"]), _array_from(layer["bias"])) for layer in state["layers"]]
    if not compiled.layers or any(w.ndim != 2 or w.dtype != np.float64 for w, _ in compiled.layers):
        raise ValueError("layers of float64 weight matrices")
    activation = state["activation"]
    if len(compiled.layers) > 1 and activation not in _ACTIVATIONS:
        raise ValueError(f"the activation {activation!r}")
    compiled.activation = activation
    if own_arithmetic and activation == "logistic":
        compiled.hidden = _libm_expit if own_arithmetic == "libm" else _numpy_expit
    else:
        compiled.hidden = _ACTIVATIONS.get(activation)
    compiled.own_arithmetic = own_arithmetic
    compiled.logistic = bool(state["logistic"])
    compiled.n_features = compiled.layers[0][0].shape[0]
    return compiled
