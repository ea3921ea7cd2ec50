"""Classifiers exported to ONNX, scored with onnxruntime: loading one runs no code from the file.

An ONNX file is a graph of standard operators (matrix products, tree ensembles, one-hot
encoders, ...) and their weights. :func:`load_onnx` parses it as data (protocol buffers,
with :mod:`onnx`), refuses what frpd cannot feed or read, and wraps an onnxruntime session
in :class:`OnnxClassifier`, an object with the scikit-learn classifier interface that
:class:`frpd_cli.model.Model` expects (``classes_``, ``feature_names_in_``,
``predict_proba``). No custom-operator library is registered and no external data file is
read, so a graph can only run the operators built into onnxruntime.

Two input layouts are understood:

* **one input per feature column**, named like the column (what skl2onnx exports for a
  ``Pipeline`` starting with a ``ColumnTransformer``): each column is fed with the input's
  element type (``float``, ``double``, ``int64``, ``int32``, ``string``, ``bool``), shaped
  ``(n_rows, 1)`` or ``(n_rows,)`` as the input declares. An input is matched to the column
  of its own name first, else to the column whose name skl2onnx turns into it
  (:func:`exported_input_name`: ``credit amount`` -> ``credit_amount``), one input per column;
  columns that share such a name the graph has are refused unless each has an input of its own
  name (which input reads which column could not be told);
* **one numeric tensor** of shape ``(n_rows, n_features)``: the raw feature columns in the
  order of the model's metadata entry ``frpd.columns`` (a JSON list of column names), or,
  without it, in the data's feature order. Every feature must then be numeric.

The probability output is the graph output holding one probability per class: the
ZipMap form (a sequence of ``{label: probability}`` maps) or a plain float tensor of shape
``(n_rows, n_classes)``. The class labels come from the graph itself (the ZipMap, a
classifier operator's ``classlabels_*`` attribute, or the constant label vector skl2onnx
stores), or from the metadata entry ``frpd.classes`` (a JSON list) when the graph has none,
so the favourable class is found by its label, as for a pickled model.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .exceptions import ModelError

__all__ = ["COLUMNS_KEY", "CLASSES_KEY", "ONNX_SUFFIXES", "OnnxClassifier", "load_onnx", "exported_input_name"]

ONNX_SUFFIXES = (".onnx",)

#: Metadata entry (``metadata_props``) naming the columns of a single-tensor input, in order (JSON list).
COLUMNS_KEY = "frpd.columns"
#: Metadata entry giving the class labels of the probability columns, in order (JSON list).
CLASSES_KEY = "frpd.classes"

_ELEMENT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(string)": np.str_,
    "tensor(bool)": np.bool_,
}
_FLOAT_TENSORS = ("tensor(float)", "tensor(double)")
_INSTALL_HINT = "Install it with: pip install 'frpd-cli[onnx]'"


class OnnxClassifier:
    """A classifier stored as an ONNX graph, with the scikit-learn interface frpd uses.

    Build it with :func:`load_onnx`. Scoring runs on one onnxruntime thread: a row's
    probabilities do not depend on the other rows of the call (frpd also calls it on
    fixed-size blocks). The object pickles as the model's bytes (for worker processes);
    the session is rebuilt in each process that scores.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, in the order of the probability columns.
    feature_names_in_ : ndarray of shape (n_inputs,) of str
        The feature columns the graph reads, in the order it reads them.
    n_features_in_ : int
    path : str
        The file it was loaded from.
    """

    def __init__(self, content: bytes, *, path: str, classes, columns, layout: str, inputs: dict,
                 output: str, zipmap: bool):
        self._content = content
        self.path = path
        self.classes_ = np.asarray(classes)
        self.feature_names_in_ = np.asarray(list(columns), dtype=object)
        self.n_features_in_ = len(columns)
        self._layout = layout          # "columns" or "tensor"
        self._inputs = inputs          # input name -> (ORT type string, rank)
        self._output = output
        self._zipmap = zipmap
        self._session = None
        self._pid = None

    # -- pickling: the session is not picklable, the bytes are
    def __getstate__(self):
        state = dict(self.__dict__)
        state["_session"] = None
        state["_pid"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def _get_session(self):
        if self._session is None or self._pid != os.getpid():
            self._session = _session(self._content, self.path)
            self._pid = os.getpid()
        return self._session

    def predict_proba(self, X) -> np.ndarray:
        """Probability of each class for each raw row.

        Parameters
        ----------
        X : DataFrame of shape (n_rows, n_columns) or ndarray of shape (n_rows, n_features)
            Raw feature values; a DataFrame must hold every column of ``feature_names_in_``,
            an ndarray holds them in that order.

        Returns
        -------
        proba : ndarray of shape (n_rows, n_classes), float64
        """
        frame = X if isinstance(X, pd.DataFrame) else pd.DataFrame(np.asarray(X, dtype=object),
                                                                   columns=list(self.feature_names_in_))
        n_rows = len(frame)
        feeds = self._feeds(frame)
        try:
            out = self._get_session().run([self._output], feeds)[0]
        except ModelError:
            raise
        except Exception as exc:  # onnxruntime raises its own exception types for bad feeds or failing kernels
            raise ModelError(f"The ONNX model '{self.path}' failed on {n_rows} row(s): {exc}") from exc
        return self._probabilities(out, n_rows)

    def predict(self, X) -> np.ndarray:
        """The most probable class of each row."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def _feeds(self, frame: pd.DataFrame) -> dict:
        if self._layout == "tensor":
            (name, (kind, _)), = self._inputs.items()
            columns = list(self.feature_names_in_)
            values = np.empty((len(frame), len(columns)), dtype=_ELEMENT_TYPES[kind])
            for j, column in enumerate(columns):
                values[:, j] = _column(frame[column], kind, input_name=name, column=column, path=self.path)
            return {name: values}
        feeds = {}
        for (name, (kind, rank)), column in zip(self._inputs.items(), self.feature_names_in_):
            values = _column(frame[column], kind, input_name=name, column=column, path=self.path)
            feeds[name] = values.reshape(-1, 1) if rank == 2 else values
        return feeds

    def _probabilities(self, out, n_rows: int) -> np.ndarray:
        n_classes = len(self.classes_)
        if self._zipmap:
            rows = list(out) if isinstance(out, (list, tuple)) else None
            if rows is None or len(rows) != n_rows:
                shown = f"{len(rows)} map(s)" if rows is not None else type(out).__name__
                raise ModelError(f"The ONNX model '{self.path}' returned {shown} in its output '{self._output}' "
                                 f"for {n_rows} row(s); expected one {{label: probability}} map per row.")
            keys = [_plain(k) for k in self.classes_]
            try:
                proba = np.array([[row[k] for k in keys] for row in rows], dtype=np.float64)
            except (KeyError, TypeError) as exc:
                first = dict(rows[0]) if rows else {}
                raise ModelError(f"The ONNX model '{self.path}' returned maps with labels {sorted(first)!r} in "
                                 f"its output '{self._output}'; expected the labels {keys!r}.") from exc
            return proba.reshape(n_rows, n_classes)
        proba = np.asarray(out)
        if proba.shape != (n_rows, n_classes):
            raise ModelError(f"The ONNX model '{self.path}' returned an output '{self._output}' of shape "
                             f"{proba.shape} for {n_rows} row(s); expected ({n_rows}, {n_classes}): one "
                             f"probability per class ({', '.join(repr(_plain(c)) for c in self.classes_)}).")
        return proba.astype(np.float64)


def load_onnx(path, *, feature_names) -> OnnxClassifier:
    """Load an ONNX classifier and check that it can be fed the data's feature columns.

    Parameters
    ----------
    path : str or Path
        An ``.onnx`` file (needs ``pip install 'frpd-cli[onnx]'``).
    feature_names : sequence of str
        The data's feature columns.

    Returns
    -------
    model : OnnxClassifier

    Raises
    ------
    ModelError
        onnxruntime or onnx is not installed; the file is not an ONNX model, refers to external
        data or to operators onnxruntime does not have; an input is not a feature column (or a
        feature column has no input); an input or output type frpd cannot feed or read; no
        probability output, or no class labels.

    Notes
    -----
    The file is parsed as data and checked by onnxruntime when the session is built; no code
    from the file runs. External data (weights stored in other files, which a graph names by
    path) is refused, so loading reads no file other than ``path``.
    """
    path = Path(path)
    feature_names = tuple(str(c) for c in feature_names)
    onnx, _ = _import_runtime(path)
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"Cannot read the ONNX model '{path}': {exc.strerror or exc}.") from None
    try:
        proto = onnx.ModelProto()
        proto.ParseFromString(content)      # protocol buffers only: no external file is opened
    except Exception as exc:  # protobuf's DecodeError and friends
        raise ModelError(f"The file '{path}' is not a valid ONNX model: it cannot be parsed ({exc}). Export the "
                         "model again (e.g. with skl2onnx) and pass the .onnx file it wrote.") from None
    if not proto.graph.node and not proto.graph.input:
        raise ModelError(f"The file '{path}' is not a valid ONNX model: it holds no graph. Export the model again "
                         "(e.g. with skl2onnx) and pass the .onnx file it wrote.")
    _refuse_external_data(proto, path)
    session = _session(content, path)
    metadata = {p.key: p.value for p in proto.metadata_props}

    inputs = {i.name: (i.type, len(i.shape) if i.shape is not None else 0) for i in session.get_inputs()}
    layout, columns = _layout(inputs, feature_names, metadata, path)
    output, zipmap = _probability_output(session, path)
    classes = _classes(proto, output, metadata, path)
    n_columns = _n_columns(session, output)
    if not zipmap and n_columns is not None and n_columns != len(classes):
        raise ModelError(f"The ONNX model '{path}' has a probability output '{output}' with {n_columns} column(s) "
                         f"but {len(classes)} class label(s) ({', '.join(repr(c) for c in classes)}); expected "
                         "one column per class.")
    model = OnnxClassifier(content, path=str(path), classes=classes, columns=columns, layout=layout,
                           inputs=inputs, output=output, zipmap=zipmap)
    model._session, model._pid = session, os.getpid()
    return model


# ---------------------------------------------------------------------------- loading


def _import_runtime(path: Path):
    try:
        import onnxruntime
    except ImportError:
        raise ModelError(f"Reading the ONNX model '{path}' needs the onnxruntime package. {_INSTALL_HINT}") from None
    try:
        import onnx
    except ImportError:
        raise ModelError(f"Reading the ONNX model '{path}' needs the onnx package (to read the graph's class "
                         f"labels). {_INSTALL_HINT}") from None
    return onnx, onnxruntime


def _session(content: bytes, path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1       # one thread: results independent of the batch, and no oversubscription
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3         # errors only; they reach frpd as exceptions
    try:
        return ort.InferenceSession(content, sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's Fail, InvalidGraph, NotImplemented, ...
        raise ModelError(f"onnxruntime cannot load the ONNX model '{path}': {exc}. Check that the file is a "
                         "complete ONNX model using only standard operators (export it again, e.g. with "
                         "skl2onnx), and that onnxruntime is recent enough for its opset.") from None


def _refuse_external_data(proto, path: Path) -> None:
    from onnx.external_data_helper import uses_external_data

    tensors = list(proto.graph.initializer)
    for node in proto.graph.node:
        tensors.extend(a.t for a in node.attribute if a.HasField("t"))
    named = [t.name for t in tensors if uses_external_data(t)]
    if named:
        raise ModelError(f"The ONNX model '{path}' keeps weights in external files (tensor(s) "
                         f"{', '.join(repr(n) for n in named[:5])}); frpd reads only the model file itself. Save "
                         "the model with its weights inside (onnx.save_model(..., save_as_external_data=False)).")


def _layout(inputs: dict, feature_names: tuple[str, ...], metadata: dict, path: Path):
    """Per-column inputs, or one numeric tensor: ("columns" | "tensor", the columns read, in input order)."""
    names = list(inputs)
    for name, (kind, _rank) in inputs.items():
        if kind not in _ELEMENT_TYPES:
            raise ModelError(f"The ONNX model '{path}' has an input '{name}' of type {kind}; frpd feeds only "
                             f"{', '.join(_ELEMENT_TYPES)}. Export the model with one of these input types.")
    read_by = _input_columns(names, feature_names)
    if len(names) == 1 and names[0] not in read_by:
        name = names[0]
        kind, rank = inputs[name]
        if rank != 2 or kind == "tensor(string)":
            raise ModelError(
                f"The ONNX model '{path}' has one input, '{name}' ({kind}, rank {rank}), which is not a feature "
                f"column. frpd feeds either one input per feature column, named like the column, or one numeric "
                f"tensor of shape (rows, {len(feature_names)}) holding the feature columns. Export the pipeline "
                "with one input per column (see the ONNX recipe in docs/models.md).")
        columns = _declared_columns(metadata, feature_names, path) or feature_names
        return "tensor", tuple(columns)
    _refuse_clashes(names, feature_names, path)
    matched = set(read_by.values())
    missing = [c for c in feature_names if c not in matched]
    unknown = [n for n in names if n not in read_by]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"no input for the feature column(s) {_quoted(missing)}")
        if unknown:
            parts.append(f"input(s) {_quoted(unknown)} that are not feature columns of the data")
        advice = ""
        if missing:
            from .schema import extra_columns_remedy

            advice = f" {extra_columns_remedy(missing)}"
        raise ModelError(
            f"The ONNX model '{path}' does not match the data: it has {' and '.join(parts)} (its inputs: "
            f"{_quoted(names)}). Export the model from a pipeline fitted on the data's feature columns, one "
            f"input per column named like it.{advice}")
    for name in names:
        kind, rank = inputs[name]
        if rank not in (1, 2):
            raise ModelError(f"The ONNX model '{path}' has an input '{name}' of rank {rank}; a feature column is "
                             "fed as shape (rows, 1) or (rows,).")
    return "columns", tuple(read_by[name] for name in names)


def exported_input_name(column: str) -> str:
    """The name skl2onnx gives the graph input of a DataFrame column.

    Every character that is neither a word character (a letter or digit of any script, or ``_``) nor ``+``
    becomes ``_``, and a name that then starts with a digit 0-9 gets a leading ``_``. (skl2onnx also appends
    a number to a name already taken by an earlier input; :func:`load_onnx` refuses data whose columns share
    a renamed input name, so that case never needs guessing.)

    Examples
    --------
    >>> [exported_input_name(c) for c in ("credit amount", "age (years)", "2nd-account", "x+y", "âge", "a_b")]
    ['credit_amount', 'age__years_', '_2nd_account', 'x+y', 'âge', 'a_b']
    """
    name = _NOT_IN_INPUT_NAMES.sub("_", str(column))
    return "_" + name if name[:1] in _ASCII_DIGITS else name


_NOT_IN_INPUT_NAMES = re.compile(r"[^\w+]")
_ASCII_DIGITS = frozenset("0123456789")


def _input_columns(names, feature_names) -> dict:
    """Input name -> the feature column it reads: the column of the same name, else the column whose exported
    name (:func:`exported_input_name`) it is, each column read by one input at most."""
    inputs = set(names)
    read_by = {c: c for c in feature_names if c in inputs}
    for column in feature_names:
        if column in read_by:
            continue
        name = exported_input_name(column)
        if name in inputs and name not in read_by:
            read_by[name] = column
    return read_by


def _refuse_clashes(names, feature_names, path: Path) -> None:
    """Refuse feature columns that share an exported input name the graph has, unless each of them has an
    input of its own name: which input reads which column cannot be told."""
    inputs = set(names)
    groups: dict = {}
    for column in feature_names:
        groups.setdefault(exported_input_name(column), []).append(column)
    for name, columns in groups.items():
        if len(columns) > 1 and name in inputs and not all(c in inputs for c in columns):
            listed = _quoted(columns) if len(columns) > 2 else " and ".join(f"'{c}'" for c in columns)
            raise ModelError(
                f"The ONNX model '{path}' cannot be matched to the data: the feature columns {listed} "
                f"{'all' if len(columns) > 2 else 'both'} export as the input name '{name}' (skl2onnx replaces "
                "every character other than a letter, digit, '_' or '+' by '_', and adds a number to a name "
                "already used), so which input reads which column cannot be told. Rename the columns so that "
                "they differ in letters, digits or '_' (in the training data and the applicants), then train and "
                "export the model again.")


def _declared_columns(metadata: dict, feature_names: tuple[str, ...], path: Path):
    text = metadata.get(COLUMNS_KEY)
    if text is None:
        return None
    try:
        columns = json.loads(text)
    except ValueError:
        columns = None
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise ModelError(f"The ONNX model '{path}' has a metadata entry '{COLUMNS_KEY}' that is not a JSON list of "
                         f"column names: {text[:200]!r}.")
    missing = [c for c in feature_names if c not in columns]
    unknown = [c for c in columns if c not in feature_names]
    if missing or unknown or len(set(columns)) != len(columns):
        raise ModelError(f"The ONNX model '{path}' declares its input columns ({COLUMNS_KEY}) as {_quoted(columns)}; "
                         f"the data's feature columns are {_quoted(feature_names)}. They must be the same names, "
                         "each once (order may differ).")
    return tuple(columns)


def _probability_output(session, path: Path) -> tuple[str, bool]:
    outputs = session.get_outputs()
    candidates = []
    for o in outputs:
        if o.type.startswith("seq(map("):
            candidates.append((o.name, True))
        elif o.type in _FLOAT_TENSORS and o.shape is not None and len(o.shape) == 2:
            candidates.append((o.name, False))
    if len(candidates) > 1:
        named = [c for c in candidates if "prob" in c[0].lower()]
        candidates = named if len(named) == 1 else candidates
    shown = ", ".join(f"'{o.name}' ({o.type}, shape {o.shape})" for o in outputs)
    if not candidates:
        raise ModelError(f"The ONNX model '{path}' has no probability output (outputs: {shown}); expected a "
                         "sequence of {label: probability} maps (ZipMap) or a float tensor of shape (rows, classes). "
                         "Export the classifier with its probabilities (skl2onnx does by default).")
    if len(candidates) > 1:
        raise ModelError(f"The ONNX model '{path}' has several outputs that could be the probabilities ({shown}); "
                         "export it with one, named like 'probabilities'.")
    return candidates[0]


def _n_columns(session, output: str):
    for o in session.get_outputs():
        if o.name == output and o.shape is not None and len(o.shape) == 2 and isinstance(o.shape[1], int):
            return o.shape[1]
    return None


def _classes(proto, output: str, metadata: dict, path: Path) -> list:
    """The class labels, in probability-column order: from the graph, else from the metadata."""
    from onnx import numpy_helper

    initializers = {t.name: t for t in proto.graph.initializer}
    found = []
    zipmap = []
    for node in proto.graph.node:
        labels = None
        for attribute in node.attribute:
            if attribute.name.startswith("classlabels_"):
                values = list(attribute.ints) or [s.decode("utf-8") for s in attribute.strings]
                labels = values or labels
        if labels is None and node.op_type == "ArrayFeatureExtractor" and node.input and node.input[0] in initializers:
            array = numpy_helper.to_array(initializers[node.input[0]]).reshape(-1)
            labels = [v.decode("utf-8") if isinstance(v, bytes) else _plain(v) for v in array.tolist()]
        if labels is None:
            continue
        if node.op_type == "ZipMap" and output in node.output:
            zipmap.append(labels)
        found.append(labels)
    declared = _declared_classes(metadata, path)
    if zipmap:
        labels = zipmap[0]
    elif declared is not None:
        labels = declared
    else:
        distinct = []
        for labels in found:
            if labels not in distinct:
                distinct.append(labels)
        if len(distinct) != 1:
            what = "no class labels" if not distinct else f"several label lists ({distinct!r})"
            raise ModelError(f"The ONNX model '{path}' has {what}, so frpd cannot tell which probability column is "
                             f"the favourable class. Declare them in the model's metadata entry '{CLASSES_KEY}' as a "
                             "JSON list in column order, e.g. onnx.helper.set_model_props(model, "
                             f"{{'{CLASSES_KEY}': '[0, 1]'}}).")
        labels = distinct[0]
    if declared is not None and declared != labels:
        raise ModelError(f"The ONNX model '{path}' declares the classes {declared!r} ({CLASSES_KEY}) but its graph "
                         f"labels the probabilities {labels!r}. Remove or correct the metadata entry.")
    if len(labels) < 2:
        raise ModelError(f"The ONNX model '{path}' knows {len(labels)} class(es) ({labels!r}); a classifier that "
                         "decides between outcomes needs at least 2.")
    return labels


def _declared_classes(metadata: dict, path: Path):
    text = metadata.get(CLASSES_KEY)
    if text is None:
        return None
    try:
        labels = json.loads(text)
    except ValueError:
        labels = None
    if not isinstance(labels, list) or not all(isinstance(c, (str, int)) and not isinstance(c, bool) for c in labels):
        raise ModelError(f"The ONNX model '{path}' has a metadata entry '{CLASSES_KEY}' that is not a JSON list of "
                         f"class labels (numbers or strings): {text[:200]!r}.")
    return labels


# ---------------------------------------------------------------------------- feeding


def _column(series: pd.Series, kind: str, *, input_name: str, column: str, path: str) -> np.ndarray:
    """One feature column as the element type of the input that reads it."""
    dtype = _ELEMENT_TYPES[kind]
    if kind == "tensor(string)":
        if isinstance(series.dtype, pd.StringDtype) or (series.dtype == object
                                                        and pd.api.types.infer_dtype(series, skipna=False) == "string"):
            return series.to_numpy(dtype=object)       # already Python strings (the common case): no conversion
        return series.astype(str).to_numpy(dtype=object)
    if kind == "tensor(bool)":
        values = series.to_numpy()
        if values.dtype != bool:
            raise ModelError(f"The ONNX model '{path}' reads column '{column}' as booleans (input '{input_name}', "
                             f"{kind}); the column holds {values.dtype} values. Export the model with the column's "
                             "type.")
        return values
    if series.dtype.kind in "iu" and dtype in (np.float32, np.float64, np.int64):
        return series.to_numpy(dtype=dtype)            # whole numbers into a numeric input: a plain cast
    try:
        values = pd.to_numeric(series, errors="raise").to_numpy(dtype=np.float64)
    except (ValueError, TypeError):
        first = next((v for v in series.tolist() if not _is_number(v)), None)
        raise ModelError(f"The ONNX model '{path}' reads column '{column}' as numbers (input '{input_name}', "
                         f"{kind}) but it holds text (e.g. {first!r}). Export the pipeline with its encoder so that "
                         "the input takes strings, or use data whose column is numeric.") from None
    if np.issubdtype(dtype, np.integer):
        if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
            bad = float(values[~(np.isfinite(values) & (values == np.round(values)))][0])
            raise ModelError(f"The ONNX model '{path}' reads column '{column}' as integers (input '{input_name}', "
                             f"{kind}) but got {bad!r}. Declare the column as an integer feature, or export the "
                             "model with a float input.")
    return values.astype(dtype)


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _quoted(names) -> str:
    return ", ".join(f"'{n}'" for n in names)
