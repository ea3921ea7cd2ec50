"""The training data as every command needs it: schema, encoder, encoded rows, model predictions."""

from __future__ import annotations

import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .constraints import ConstraintCodes
from .data import read_csv
from .encoding import DEFAULT_SCALE, Encoder, check_magnitude, fit_encoder
from .exceptions import InputError, ModelOutputError, SchemaError
from .schema import Schema, SchemaSpec, load_schema_file, merge_specs

__all__ = ["TrainingSet", "RowStage", "build_training_set", "encode_training", "rescored", "labeled_rows",
           "resolve_spec", "read_training_frame", "CANDIDATE_POOLS"]

CANDIDATE_POOLS = ("predicted", "labeled")


@dataclass(frozen=True)
class TrainingSet:
    """Training rows in raw and encoded form, with the model's verdict on each.

    Attributes
    ----------
    frame : DataFrame of shape (n_rows, n_features)
        Raw feature values, in schema order.
    schema : Schema
    encoder : Encoder
    X : ndarray of shape (n_rows, n_features_out)
        Encoded rows.
    codes : ConstraintCodes
        Immutable and monotone codes of every row.
    probability : ndarray of shape (n_rows,)
        The model's favourable probability of each row.
    favorable : ndarray of bool, shape (n_rows,)
        Rows the model predicts favourable.
    labeled : ndarray of bool, shape (n_rows,)
        Rows whose target is the favourable class.
    """

    frame: pd.DataFrame
    schema: Schema
    encoder: Encoder
    X: np.ndarray
    codes: ConstraintCodes
    probability: np.ndarray
    favorable: np.ndarray
    labeled: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    def pool(self, candidates: str = "predicted", *, threshold: float | None = None) -> np.ndarray:
        """Rows eligible as prototypes before per-applicant constraints (the first step of
        :class:`frpd_cli.candidates.CandidateStage`).

        ``"predicted"``: rows the model predicts favourable. ``"labeled"``: rows
        labelled favourable *and* predicted favourable, so that every prototype
        is itself a valid recourse. ``threshold``: favourable means a probability
        of at least this (``--threshold`` plus ``--margin``) instead of the
        model's threshold the rows were scored with.

        The same array is returned for the same arguments (remembered per
        training set), so that the caches keyed by a pool (:meth:`pool_rows`,
        the candidate filter's grouping) hold for a whole run. Pools are not
        modified in place.

        Returns
        -------
        pool : ndarray of bool, shape (n_rows,)
        """
        if candidates not in CANDIDATE_POOLS:
            raise InputError(
                f"The 'candidates' option must be one of {', '.join(CANDIDATE_POOLS)}. Got {candidates!r} instead."
            )
        if candidates == "predicted" and threshold is None:
            return self.favorable
        key = (candidates, None if threshold is None else float(threshold))
        pools = self.__dict__.get("_pools")
        if pools is None:
            pools = {}
            object.__setattr__(self, "_pools", pools)
        if key not in pools:
            favorable = self.favorable if threshold is None else self.probability >= float(threshold)
            pools[key] = favorable if candidates == "predicted" else favorable & self.labeled
        return pools[key]

    def pool_rows(self, pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The row numbers of ``pool`` (a bool mask over the rows) and those rows of ``X``, contiguous.

        Remembered for the last pool array asked about (by identity; pools are not modified in place), so that
        per-applicant candidate filtering and selection read the pool's rows from one compact array gathered
        once per run instead of gathering them from ``X`` for every applicant. Not pickled.

        Returns
        -------
        rows : ndarray of int64, shape (n_pool,)
        X_rows : ndarray of shape (n_pool, n_features_out)
        """
        cached = self.__dict__.get("_pool_rows")
        if cached is not None and cached[0] is pool:
            return cached[1], cached[2]
        rows = np.flatnonzero(pool)
        # a plain array: a gather from a pool's memory-mapped rows would otherwise stay an np.memmap, whose
        # indexing goes through Python for every candidate filter of every applicant
        X_rows = np.take(self.X, rows, axis=0).view(np.ndarray)
        object.__setattr__(self, "_pool_rows", (pool, rows, X_rows))
        return rows, X_rows

    def encoded_rows(self, rows: np.ndarray) -> tuple[np.ndarray, bool]:
        """``X[rows]`` for ascending row numbers, and whether it is a new array the caller may overwrite.

        When the last pool of :meth:`pool_rows` holds every row asked for, they are read from its compact
        array (all of it, without a copy, when ``rows`` are the whole pool; found there through a table of
        each row's position, made once per pool, instead of a search); otherwise gathered from ``X``
        (``np.take``: several times faster than fancy indexing here).
        """
        cached = self.__dict__.get("_pool_rows")
        if cached is not None:
            pool_rows, X_rows = cached[1], cached[2]
            if rows.size == pool_rows.size and np.array_equal(rows, pool_rows):
                return X_rows, False
            if rows.size and int(rows.min()) >= 0 and int(rows.max()) < self.n_rows:
                at = np.take(self._pool_positions(cached), rows)
                if int(at.min()) >= 0:          # every row in the pool: -1 marks the others
                    return np.take(X_rows, at, axis=0), True
        return np.take(self.X, rows, axis=0), True

    def _pool_positions(self, cached: tuple) -> np.ndarray:
        """Each training row's position in the compact arrays of the pool ``cached`` (-1: not in it)."""
        known = self.__dict__.get("_pool_positions_of")
        if known is not None and known[0] is cached[1]:
            return known[1]
        pool_rows = cached[1]
        dtype = np.int32 if pool_rows.size < np.iinfo(np.int32).max else np.int64
        positions = np.full(self.n_rows, -1, dtype=dtype)
        positions[pool_rows] = np.arange(pool_rows.size, dtype=dtype)
        object.__setattr__(self, "_pool_positions_of", (pool_rows, positions))
        return positions

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_pool_rows", None)
        state.pop("_pool_positions_of", None)
        return state


def resolve_spec(schema_file: str | Path | None, flags: SchemaSpec) -> SchemaSpec:
    """Merge a schema file (optional) with the command-line flags (which win)."""
    if schema_file:
        _check_schema_path(Path(schema_file))
    base = load_schema_file(schema_file) if schema_file else SchemaSpec()
    return merge_specs(base, flags)


_MAX_SCHEMA_BYTES = 1 << 20


def _check_schema_path(path: Path) -> None:
    """A schema path must be a readable TOML file (or a pipe), not a folder or a device."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return          # load_schema_file says it does not exist
    except OSError as exc:
        raise SchemaError(f"The schema file '{path}' cannot be read: {exc.strerror or exc}. "
                          "Check the path and its permissions.") from None
    if stat.S_ISDIR(mode):
        raise SchemaError(f"The schema path '{path}' is a folder; expected a TOML file (for example "
                          f"'{path / 'schema.toml'}').")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise SchemaError(f"The schema path '{path}' is a device, not a file; expected a TOML file.")
    if stat.S_ISREG(mode) and path.stat().st_size > _MAX_SCHEMA_BYTES:
        raise SchemaError(f"The schema file '{path}' is {path.stat().st_size} bytes; a schema is a small TOML file "
                          f"(at most {_MAX_SCHEMA_BYTES} bytes). Check the --schema path.")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise SchemaError(f"The schema file '{path}' cannot be read: {exc.strerror or exc}. "
                          "Check the path and its permissions.") from None


#: Rows encoded at a time when the encoded rows go to a :class:`RowStage` (``build-pool``): 15 MB of Adult's rows.
STAGE_BLOCK_ROWS = 65536


@dataclass
class RowStage:
    """Where the encoded rows and constraint codes of a training set are written, block by block, instead of
    being held in memory (``build-pool``: 2.6 GB of the ten million rows of Adult resampled).

    ``folder`` is a staging folder (:func:`frpd_cli.artifacts.staging_folder`); ``arrays`` maps the pool's payload
    names (``X.npy``, ``immutable.npy``, ``monotone.npy``) to the files written, which the training set holds
    memory-mapped and :func:`frpd_cli.pool.write_pool` moves into the pool.
    """

    folder: Path
    arrays: dict = field(default_factory=dict)

    def write(self, name: str, n: int, width: int, block, whole) -> np.ndarray:
        """Write ``block(start, stop)`` (float64 rows of ``width``) for consecutive blocks of the ``n`` rows as
        ``name``; return the array memory-mapped. A block that raises :class:`InputError` makes ``whole()`` run
        (the same computation on every row at once), so the error is the one the whole frame gives (its counts
        and first row are over every row, not one block's)."""
        return self.write_tables({name: width}, n, lambda a, b: (block(a, b),), whole)[name]

    def write_tables(self, widths: dict, n: int, blocks, whole) -> dict:
        """:meth:`write` of several arrays made by one computation: ``blocks(start, stop)`` gives the rows of
        every name of ``widths`` (name to width), in its order, and each block is computed once for them all.
        Returns the arrays memory-mapped, by name."""
        from contextlib import ExitStack

        from .artifacts import NpyBlockWriter

        paths = {name: self.folder / name for name in widths}
        try:
            with ExitStack() as files:
                writers = [files.enter_context(NpyBlockWriter(paths[name], (n, width), np.float64))
                           for name, width in widths.items()]
                for start in range(0, n, STAGE_BLOCK_ROWS):
                    tables = blocks(start, min(start + STAGE_BLOCK_ROWS, n))
                    for writer, table in zip(writers, tables, strict=True):
                        writer.write(table)
                staged = [writer.finish() for writer in writers]
        except InputError:
            for path in paths.values():
                path.unlink(missing_ok=True)
            whole()
            raise
        out = {}
        for (name, width), array in zip(widths.items(), staged):
            self.arrays[name] = array
            out[name] = array.open() if n * width else np.zeros((n, width))
        return out


def encode_training(frame: pd.DataFrame, schema: Schema, *, source: str = "the data file",
                    scale: str = DEFAULT_SCALE, stage: RowStage | None = None) -> tuple:
    """The encoder fitted on the training CSV and its encoded rows: ``(encoder, X)``.

    With ``stage``, the rows are encoded block by block into its folder and ``X`` is that file memory-mapped
    (the same values, bit for bit: the encoding of a row depends on that row alone).
    """
    encoder = fit_encoder(schema, frame, source=source, scale=scale)
    features = frame.loc[:, list(schema.feature_names)].reset_index(drop=True)
    if stage is None:
        return encoder, encoder.encode(features, source=source)
    X = stage.write("X.npy", len(features), encoder.n_features_out,
                    lambda a, b: encoder.encode(features.iloc[a:b], source=source),
                    lambda: encoder.encode(features, source=source))
    return encoder, X


def _staged_codes(encoder: Encoder, features: pd.DataFrame, source: str, stage: RowStage) -> ConstraintCodes:
    """:meth:`Encoder.constraint_codes` of every row, its two tables written block by block into ``stage`` (the
    codes of each block computed once for both)."""
    empty = encoder.constraint_codes(features.iloc[:0], source=source)      # the names, directions and widths

    def blocks(start: int, stop: int) -> tuple:
        codes = encoder.constraint_codes(features.iloc[start:stop], source=source)
        return codes.immutable, codes.monotone

    tables = stage.write_tables({"immutable.npy": empty.immutable.shape[1], "monotone.npy": empty.monotone.shape[1]},
                                len(features), blocks, lambda: encoder.constraint_codes(features, source=source))
    return replace(empty, immutable=tables["immutable.npy"], monotone=tables["monotone.npy"])


def build_training_set(frame: pd.DataFrame, schema: Schema, model, *, source: str = "the data file",
                       scale: str = DEFAULT_SCALE, encoded: tuple | None = None, progress=None,
                       stage: RowStage | None = None) -> TrainingSet:
    """Fit the encoder and score every training row with the model.

    Parameters
    ----------
    frame : DataFrame
        The training CSV as read.
    schema : Schema
        The feature schema (see :func:`frpd_cli.schema.infer_schema`).
    model : frpd_cli.model.Model
        The loaded model; must expose ``favorable_probability`` and ``threshold``.
    source : str
        How the data is named in messages.
    scale : {"effort", "minmax"}
        How numeric moves are priced (see :mod:`frpd_cli.encoding`).
    encoded : tuple, optional
        ``(encoder, X)`` from :func:`encode_training` with the same frame, schema and scale, when already made.
    progress : callable, optional
        Called as ``progress(done, n_rows)`` before the rows are scored and after each slice of them
        (:func:`_score_training_rows`).
    stage : RowStage, optional
        Write the encoded rows (unless ``encoded`` holds them) and the constraint codes there, block by block,
        and hold them memory-mapped (``build-pool``).
    """
    encoder, X = (encode_training(frame, schema, source=source, scale=scale, stage=stage) if encoded is None
                  else encoded)
    features = frame.loc[:, list(schema.feature_names)].reset_index(drop=True)
    codes = (encoder.constraint_codes(features, source=source) if stage is None
             else _staged_codes(encoder, features, source, stage))
    probability = _score_training_rows(model, features, source, progress=progress)
    favorable = probability >= model.threshold
    return TrainingSet(frame=features, schema=schema, encoder=encoder, X=X, codes=codes,
                       probability=probability, favorable=favorable, labeled=labeled_rows(frame, schema))


def rescored(training: TrainingSet, model, *, source: str = "the data file", progress=None) -> TrainingSet:
    """``training`` with every row scored again by ``model`` (encoded rows and codes kept).

    A pool (:mod:`frpd_cli.pool`) holds the model's own verdict; with other models to satisfy
    (:class:`frpd_cli.judge.Judge`) the rows are scored by the judge, exactly as :func:`build_training_set` would
    (``progress`` as there).
    """
    probability = _score_training_rows(model, training.frame, source, progress=progress)
    return replace(training, probability=probability, favorable=probability >= model.threshold)


#: Model call blocks (:data:`frpd_cli.model.SCORE_BLOCK_ROWS` rows each) per slice when every training row is
#: scored (:func:`_score_training_rows`): 65,536 rows.
SCORE_SLICE_BLOCKS = 128


def _score_training_rows(model, features: pd.DataFrame, source: str, *, progress=None) -> np.ndarray:
    """Every training row's favourable probability, scored in slices of :data:`SCORE_SLICE_BLOCKS` call blocks.

    The model's intermediate arrays (a pipeline's transformed rows, a network's layers) then take the memory of
    one slice, not of the training set: about 350 MB fewer at the peak of a million rows. The slices are
    multiples of the model's call blocks (:data:`frpd_cli.model.SCORE_BLOCK_ROWS`), whose rows' probabilities
    do not depend on the other rows of a call, so they are those of one call on every row, bit for bit.
    ``progress``, when given, is called as ``progress(done, n_rows)`` before the first slice and after each.
    """
    from .model import SCORE_BLOCK_ROWS

    size = SCORE_SLICE_BLOCKS * SCORE_BLOCK_ROWS
    parts = []
    if progress is not None:
        progress(0, len(features))
    for start in range(0, max(len(features), 1), size):
        rows = features if len(features) <= size else features.iloc[start:start + size]
        try:
            parts.append(np.asarray(model.favorable_probability(rows), dtype=np.float64))
        except ModelOutputError as exc:
            # the rows passed are the data rows in file order: name the row as the user sees it
            row = start + exc.row
            raise exc.located(f"data row {row + 1} (line {row + 2}) of {source}") from None
        if progress is not None:
            progress(min(start + size, len(features)), len(features))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def labeled_rows(frame: pd.DataFrame, schema: Schema) -> np.ndarray:
    """Rows of the training CSV whose target is the favourable class (compared as values or as text).

    Returns
    -------
    labeled : ndarray of bool, shape (n_rows,)
    """
    target = frame[schema.target]
    same = (target == schema.favorable).to_numpy()
    if pd.api.types.is_object_dtype(target.dtype) or isinstance(target.dtype, pd.CategoricalDtype):
        return same | (target.astype(str) == str(schema.favorable)).to_numpy()
    # numbers or booleans: each distinct value's text compared once (no text of every row: 700 MB at ten
    # million rows), the same test as the text of every row
    codes, values = pd.factorize(target, use_na_sentinel=False)
    favourable_text = (pd.Series(values, dtype=target.dtype).astype(str) == str(schema.favorable)).to_numpy()
    return same | favourable_text[codes]


def read_training_frame(path, *, encoding: str = "utf-8") -> pd.DataFrame:
    """Read the training CSV; refuse infinite or overflowing numbers, naming their row and column.

    Raises
    ------
    InputError
        As :func:`frpd_cli.data.read_csv`, or a numeric column holds ``inf``/``-inf`` or a
        value beyond :data:`frpd_cli.encoding.MAX_MAGNITUDE`.
    """
    frame = read_csv(path, encoding=encoding, what="data file")
    for name in frame.columns:
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            check_magnitude(column.to_numpy(dtype=np.float64), column, str(name), f"the data file '{path}'")
    return frame
