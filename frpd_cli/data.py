"""Reading the CSV files frpd works on, with errors that say what to fix."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from .exceptions import InputError

__all__ = ["read_csv"]

_DELIMITERS = (";", "\t", "|")


def read_csv(path, *, encoding: str = "utf-8", what: str = "data file") -> pd.DataFrame:
    """Read a CSV file with a header row into a DataFrame.

    Parameters
    ----------
    path : str or Path
        The file to read.
    encoding : str, default="utf-8"
        Text encoding of the file.
    what : str
        How the file is named in error messages (``"data file"``, ``"applicants file"``).

    Returns
    -------
    frame : DataFrame of shape (n_rows, n_columns)

    Raises
    ------
    InputError
        The file is missing, empty, has only a header, repeats a column name, is
        not in ``encoding``, or seems to use another delimiter than a comma.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"The {what} '{path}' does not exist.")
    if path.is_dir():
        raise InputError(f"The {what} '{path}' is a folder; expected a CSV file.")
    raw = path.read_bytes()
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"The {what} '{path}' is not valid {encoding} text (byte 0x{raw[exc.start]:02x} on line {line}). "
            "Pass --encoding with the file's encoding (for example --encoding latin-1)."
        ) from None
    except LookupError:
        raise InputError(f"Unknown text encoding '{encoding}' given for the {what} '{path}'.") from None
    text = text.lstrip("\ufeff")
    if not text.strip():
        raise InputError(f"The {what} '{path}' is empty; expected a header row and at least one data row.")
    header_line = text.splitlines()[0]
    header = next(csv.reader([header_line]))
    if len(header) == 1:
        for delimiter in _DELIMITERS:
            if delimiter in header_line:
                shown = "tab" if delimiter == "\t" else f"'{delimiter}'"
                raise InputError(
                    f"The {what} '{path}' seems to be separated by {shown}, not commas. "
                    "frpd reads comma-separated files: convert it first "
                    "(for example with `python -c \"import pandas as pd; "
                    f"pd.read_csv('{path.name}', sep='{delimiter if delimiter != chr(9) else chr(92) + 't'}')"
                    f".to_csv('{path.stem}-comma.csv', index=False)\"`)."
                )
    seen: set[str] = set()
    duplicates = []
    for name in header:
        if name in seen:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise InputError(
            f"The {what} '{path}' repeats the column name(s) {', '.join(repr(d) for d in duplicates)}; "
            "every column must have a unique name."
        )
    empty = [i for i, name in enumerate(header) if not name.strip()]
    if empty:
        raise InputError(f"The {what} '{path}' has an empty column name at position {empty[0] + 1} of the header.")
    try:
        frame = pd.read_csv(path, encoding=encoding, skipinitialspace=False, keep_default_na=True)
    except (pd.errors.ParserError, ValueError) as exc:
        message = str(exc).strip().splitlines()[0]
        raise InputError(f"The {what} '{path}' is not a well-formed CSV file: {message}.") from None
    if frame.shape[0] == 0:
        raise InputError(f"The {what} '{path}' has a header but no data rows.")
    return frame
