"""The applicants file, read in chunks: validated once up front, then streamed to the planner.

:meth:`ApplicantFile.scan` reads the whole file chunk by chunk and checks every
row the way planning will use it (columns present, numbers numeric, categories
known, no missing values unless they are to be skipped), so that bad input is
refused with the file, row and column named *before* any output is written.
:meth:`ApplicantFile.chunks` then streams the rows again; memory stays bounded
by the chunk size whatever the file's length.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from .data import iter_csv
from .encoding import Encoder
from .exceptions import InputError
from .names import did_you_mean
from .outputs import spool_input

__all__ = ["ApplicantChunk", "ApplicantScan", "ApplicantFile", "OutOfRangeWarning", "normalise_types"]


class OutOfRangeWarning(UserWarning):
    """Applicants hold numeric values outside the training range (the model is asked about them anyway)."""


@dataclass(frozen=True, eq=False)
class ApplicantChunk:
    """A run of consecutive applicants.

    Attributes
    ----------
    offset : int
        0-based row number of the first applicant in the file.
    frame : DataFrame
        Raw feature columns (rows with missing values included when they are
        to be reported as invalid).
    ids : list of str
        Applicant identifiers.
    invalid : dict of int to str
        Chunk-local row -> reason, for rows skipped with status ``invalid-input``.
    """

    offset: int
    frame: pd.DataFrame
    ids: list
    invalid: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ApplicantScan:
    """What a validation pass learned about the file.

    Attributes
    ----------
    n_rows, n_invalid : int
        Data rows, and rows to be reported as ``invalid-input``.
    extra_columns : tuple of str
        Columns that are neither features nor the id column.
    out_of_range : dict
        ``{feature: (count, first_data_row, value)}`` for numeric features with values
        outside the training range (1-based data row of the first such value).
    """

    n_rows: int
    n_invalid: int
    extra_columns: tuple
    out_of_range: dict = field(default_factory=dict)


class ApplicantFile:
    """An applicants CSV checked against the training encoder.

    Parameters
    ----------
    path : str or Path
    encoder : Encoder
        The training data's encoder (feature names, types, vocabularies).
    id_column : str, optional
        Column whose values identify applicants in the output; without it the
        0-based row number does.
    encoding : str, default="utf-8"
    drop_missing : bool, default=False
        Report rows with missing feature values as ``invalid-input`` instead of
        refusing the file.

    Notes
    -----
    ``-`` (stdin) and paths that are not regular files (``/dev/stdin``, a FIFO,
    ``<(...)``) are copied once to a temporary file (removed with this object or
    at exit), so the validation pass and the planning pass read the same bytes;
    :attr:`read_path` is the file actually read.
    """

    def __init__(self, path, encoder: Encoder, *, id_column: str | None = None, encoding: str = "utf-8",
                 drop_missing: bool = False):
        self.path = Path(path)
        self._spool = spool_input(path)
        self.read_path = self.path if self._spool is None else self._spool.path
        self.encoder = encoder
        self.id_column = id_column
        self.encoding = encoding
        self.drop_missing = drop_missing
        self.feature_names = list(encoder.schema.feature_names)
        self._source = f"the applicants file '{self.path}'"

    def _frames(self, chunk_size: int) -> Iterator[pd.DataFrame]:
        text = (self.id_column,) if self.id_column is not None else ()
        frames = iter_csv(self.read_path, chunk_size=chunk_size, encoding=self.encoding, what="applicants file",
                          text_columns=text)
        return frames if self._spool is None else self._named_as_given(frames)

    def _named_as_given(self, frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        # errors about a spooled copy name the input as the user gave it ('-', '/dev/stdin')
        try:
            yield from frames
        except InputError as exc:
            raise InputError(str(exc).replace(str(self.read_path), str(self.path))) from None

    def scan(self, chunk_size: int = 4096) -> ApplicantScan:
        """Validate every row; raise :class:`InputError` naming the row and column of the first problem.

        Checks the columns, every value the way planning encodes it (numbers finite and
        numeric, integers whole, categories known, distances finite) and that the ids
        are unique. Memory: one chunk, plus 8 bytes per applicant for the id check.

        Warns
        -----
        OutOfRangeWarning
            Once per numeric feature holding values outside the training range, with
            their count (the model still decides about those applicants).
        """
        n_rows, n_invalid, extra = 0, 0, ()
        id_hashes = []
        out_of_range: dict = {}
        for frame in self._frames(chunk_size):
            if n_rows == 0:
                extra = self._check_columns(frame)
            chunk = self._prepare(frame, n_rows)
            valid = np.array([i for i in range(len(chunk.frame)) if i not in chunk.invalid], dtype=np.int64)
            if valid.size:
                rows = chunk.frame.iloc[valid].set_axis(n_rows + valid)     # index = 0-based data row in the file
                self.encoder.encode(rows, source=self._source)
                self._count_out_of_range(rows, out_of_range)
            if self.id_column is not None:
                id_hashes.append(pd.util.hash_pandas_object(pd.Series(chunk.ids, dtype=object),
                                                            index=False).to_numpy())
            n_invalid += len(chunk.invalid)
            n_rows += len(frame)
        if id_hashes:
            self._check_unique_ids(np.concatenate(id_hashes), chunk_size)
        for name, (count, row, value) in out_of_range.items():
            j = self.feature_names.index(name)
            warnings.warn(
                f"{count} applicant(s) of {self._source} have '{name}' outside the training range "
                f"[{self.encoder.minimum[j]:g}, {self.encoder.maximum[j]:g}] (first: {value!r} in data row {row}, "
                f"line {row + 1}); they are planned anyway, the model decides.",
                OutOfRangeWarning, stacklevel=2,
            )
        return ApplicantScan(n_rows=n_rows, n_invalid=n_invalid, extra_columns=extra, out_of_range=out_of_range)

    def _count_out_of_range(self, rows: pd.DataFrame, counts: dict) -> None:
        for j, f in enumerate(self.encoder.schema.features):
            if not f.is_numeric:
                continue
            values = pd.to_numeric(rows[f.name]).to_numpy(dtype=np.float64)
            outside = np.flatnonzero((values < self.encoder.minimum[j]) | (values > self.encoder.maximum[j]))
            if outside.size:
                count, row, value = counts.get(f.name, (0, None, None))
                if row is None:
                    row, value = int(rows.index[outside[0]]) + 1, rows[f.name].iloc[outside[0]]
                    value = value.item() if isinstance(value, np.generic) else value
                counts[f.name] = (count + int(outside.size), row, value)

    def _check_unique_ids(self, hashes: np.ndarray, chunk_size: int) -> None:
        """Refuse repeated ids. Ids are compared by 64-bit hash; a repeated hash is confirmed on the ids."""
        ordered = np.sort(hashes)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if repeated.size == 0:
            return
        suspects = set(repeated.tolist())
        rows_of: dict = {}
        offset = 0
        for frame in self._frames(chunk_size):
            ids = ["" if pd.isna(v) else str(v) for v in frame[self.id_column].tolist()]
            h = pd.util.hash_pandas_object(pd.Series(ids, dtype=object), index=False).to_numpy()
            for i in np.flatnonzero(np.isin(h, list(suspects))):
                rows_of.setdefault(ids[i], []).append(offset + int(i) + 1)
            offset += len(frame)
        duplicates = [(a, rows) for a, rows in rows_of.items() if len(rows) > 1]
        if not duplicates:
            return       # a hash collision between different ids
        a, rows = min(duplicates, key=lambda item: item[1][1])
        raise InputError(
            f"Applicant id {a!r} appears {len(rows)} times in {self._source} (data rows "
            f"{', '.join(map(str, rows[:5]))}{' ...' if len(rows) > 5 else ''}; "
            f"{len(duplicates)} repeated id(s) in all); ids must be unique so that each plan names one applicant. "
            f"Fix the '{self.id_column}' column, or leave out --id-column (and id_column in the schema) to "
            "identify applicants by row number."
        )

    def chunks(self, chunk_size: int, *, start: int = 0) -> Iterator[ApplicantChunk]:
        """Stream the applicants in chunks of ``chunk_size`` rows, from row ``start``.

        When ``start`` is not a multiple of ``chunk_size`` (a resumed run with another chunk size), the
        first chunk is the rest of the chunk holding row ``start``.
        """
        offset = 0
        for frame in self._frames(chunk_size):
            if offset + len(frame) > start:
                skip = max(0, start - offset)
                yield self._prepare(frame.iloc[skip:] if skip else frame, offset + skip)
            offset += len(frame)

    # ----------------------------------------------------------------------
    def _check_columns(self, frame: pd.DataFrame) -> tuple:
        missing = [n for n in self.feature_names if n not in frame.columns]
        if missing:
            others = [c for c in map(str, frame.columns) if c not in self.feature_names]
            hints = "".join(did_you_mean(m, others) for m in missing)
            raise InputError(
                f"Column(s) {', '.join(repr(m) for m in missing)} missing from {self._source}; "
                f"the model was trained with them.{hints}"
            )
        if self.id_column is not None and self.id_column not in frame.columns:
            from .schema import DeclarationError

            # a usage error when --id-column named it, an input error when the schema file did (the CLI tells)
            raise DeclarationError(
                "--id-column", self.id_column,
                f"The id column '{self.id_column}' is not in {self._source}."
                f"{did_you_mean(self.id_column, frame.columns)} Its columns are: {', '.join(map(str, frame.columns))}."
            )
        return tuple(str(c) for c in frame.columns if c not in self.feature_names and c != self.id_column)

    def _prepare(self, frame: pd.DataFrame, offset: int) -> ApplicantChunk:
        frame = frame.reset_index(drop=True)
        if self.id_column is not None:
            ids = ["" if pd.isna(v) else str(v) for v in frame[self.id_column].tolist()]
        else:
            ids = [str(offset + i) for i in range(len(frame))]
        features = frame.loc[:, self.feature_names]
        missing = features.isna().to_numpy()
        invalid: dict[int, str] = {}
        if missing.any():
            rows = np.flatnonzero(missing.any(axis=1))
            if not self.drop_missing:
                r = int(rows[0])
                columns = [self.feature_names[j] for j in np.flatnonzero(missing[r])]
                shown = ", ".join(str(offset + int(i) + 1) for i in rows[:5])
                raise InputError(
                    f"Column '{columns[0]}' of {self._source} has a missing value in data row {offset + r + 1} "
                    f"(rows with missing values: {shown}{' ...' if rows.size > 5 else ''}). Fill them, or pass "
                    "--drop-missing to report those applicants as invalid-input."
                )
            for r in rows:
                columns = [self.feature_names[j] for j in np.flatnonzero(missing[r])]
                invalid[int(r)] = f"missing value(s) in {', '.join(columns)}"
        return ApplicantChunk(offset=offset, frame=features, ids=ids, invalid=invalid)


def normalise_types(encoder: Encoder, features: pd.DataFrame) -> pd.DataFrame:
    """Give integer features read as floats (pandas does so when a chunk holds a gap) the int64 type.

    Call it on rows without missing values; values that are not whole numbers are left alone.
    """
    features = features.copy()
    for f in encoder.schema.features:
        column = features[f.name]
        if f.kind == "integer" and pd.api.types.is_float_dtype(column):
            values = column.to_numpy()
            if np.all(np.isfinite(values)) and np.all(values == np.round(values)):
                features[f.name] = values.astype(np.int64)
    return features
