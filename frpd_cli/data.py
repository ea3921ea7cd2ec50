"""Reading the CSV files frpd works on, with errors that say what to fix."""

from __future__ import annotations

import csv
import io
import os
import stat
from pathlib import Path

import pandas as pd

from .exceptions import InputError

__all__ = ["read_csv", "iter_csv", "check_header", "EXACT_FLOATS"]

_DELIMITERS = (";", "\t", "|")
#: pandas' default missing-value markers (``keep_default_na=True``), used for every column but the text ones.
_DEFAULT_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                         "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
#: ``pd.read_csv`` options that parse every decimal to the nearest float, as Python's ``float`` does: the default
#: parser of pandas 2 can be one unit in the last place off (``40.300000000000004`` read as ``40.3``), so the same
#: file would give other numbers, and other plans, under another pandas. pandas 3 parses exactly by default and
#: deprecates the option.
EXACT_FLOATS = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


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
        The file is missing, unreadable, binary (holds NUL bytes), empty, has
        only a header, repeats a column name, is not in ``encoding``, or seems to
        use another delimiter than a comma.

    Notes
    -----
    The file is checked block by block (a pipe or FIFO works; an endless binary
    stream such as ``/dev/zero`` is refused at its first block). A regular UTF-8 file
    is then parsed from the file, read again in blocks; other input is parsed from the
    bytes read.
    """
    path = _check_path(path, what)
    if _is_utf8(encoding) and _plain_file(path):
        # a regular UTF-8 file without a byte order mark is checked block by block and parsed from its path:
        # pandas reads it in blocks too, so the file's bytes are never held whole (1.5 GB instead of 2.0 GB at
        # the peak of ten million rows)
        check_header(path, _check_text(path, "utf-8", what), what)
        source, options = _open_binary(path, what), {"encoding": "utf-8"}
    else:
        source, options = _source(path, what, encoding)
    try:
        with source:        # a handle, not a name: pandas infers no compression from a handle
            frame = pd.read_csv(source, skipinitialspace=False, keep_default_na=True, **options, **EXACT_FLOATS)
    except (pd.errors.ParserError, ValueError) as exc:
        message = str(exc).strip().splitlines()[0]
        raise InputError(f"The {what} '{path}' is not a well-formed CSV file: {message}.") from None
    _check_row_labels(frame, path, what)
    if frame.shape[0] == 0:
        raise InputError(f"The {what} '{path}' has a header but no data rows.")
    return frame


def _plain_file(path: Path) -> bool:
    """A regular file that does not start with a UTF-8 byte order mark (which the checks strip, any number)."""
    import codecs

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False            # (a FIFO is not opened here: its writer would see it closed)
        with open(path, "rb") as stream:
            return stream.read(3) != codecs.BOM_UTF8
    except OSError:
        return False


def _source(path: Path, what: str, encoding: str):
    """The file read whole and checked: the parser's source and options."""
    raw = _read_all(path, what)
    if _is_utf8(encoding):
        # UTF-8 input is checked block by block and parsed from its own bytes: neither the decoded text nor a
        # second copy of the bytes is held (about 1.1 GB fewer at the peak of ten million rows)
        return _utf8_source(raw, path, what, encoding), {"encoding": "utf-8"}
    return _decoded_source(raw, path, what, encoding)


def _is_utf8(encoding: str) -> bool:
    import codecs

    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def _utf8_source(raw: bytes, path: Path, what: str, encoding: str) -> io.BytesIO:
    """The bytes of a UTF-8 file for the parser, leading byte order marks removed, after the checks of
    :func:`_decoded_source` (valid text, not empty, a header line) made block by block."""
    import codecs

    bom = codecs.BOM_UTF8
    start = 0
    while raw.startswith(bom, start):
        start += len(bom)
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(raw)
    has_text = False
    for offset in range(start, len(raw) + 1, _BLOCK):
        block = view[offset:offset + _BLOCK]
        try:
            text = decoder.decode(block, final=offset + _BLOCK >= len(raw))
        except UnicodeDecodeError:
            block.release()
            view.release()
            _decoded_source(raw, path, what, encoding)      # the whole text decoded: the exact error
            raise AssertionError("unreachable: the bytes decoded whole") from None
        has_text = has_text or bool(text.strip())
        block.release()
    view.release()
    if not has_text:
        raise InputError(f"The {what} '{path}' is empty; expected a header row and at least one data row.")
    end = raw.find(b"\n", start)
    check_header(path, raw[start:len(raw) if end < 0 else end + 1].decode("utf-8").splitlines()[0], what)
    return io.BytesIO(raw if start == 0 else raw[start:])


def _decoded_source(raw: bytes, path: Path, what: str, encoding: str):
    """Decode the whole file, check it (valid text, not empty, a header line) and return the parser's source and
    options."""
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise _decode_error(path, what, encoding, raw[exc.start], line) from None
    except LookupError:
        raise InputError(f"Unknown text encoding '{encoding}' given for the {what} '{path}'.") from None
    text = text.lstrip("\ufeff")
    if not text or text.isspace():                 # (no stripped copy of the whole text)
        raise InputError(f"The {what} '{path}' is empty; expected a header row and at least one data row.")
    check_header(path, text[:text.find("\n") + 1 or len(text)].splitlines()[0], what)
    # parsed from UTF-8 bytes: a StringIO would hold the text as four bytes a character (2.3 GB for the 570 MB of
    # ten million rows) besides the text itself; the parser decodes the bytes as it reads them. A text that has
    # no UTF-8 form (a lone surrogate some codecs let through) is parsed as text.
    try:
        return io.BytesIO(text.encode("utf-8")), {"encoding": "utf-8"}
    except UnicodeEncodeError:
        return io.StringIO(text), {}


def _check_row_labels(frame: pd.DataFrame, path: Path, what: str) -> None:
    """Refuse a file whose first data row has more fields than its header names.

    pandas then silently takes the first column(s) for row labels and shifts every column by one: the file
    would be read with a wrong value in every column of every row (and "missing" values at the end).
    """
    if isinstance(frame.index, pd.RangeIndex):
        return
    n_names = frame.shape[1]
    n_fields = n_names + frame.index.nlevels
    raise InputError(
        f"The {what} '{path}' has {n_fields} fields in its first data row (line 2) but {n_names} column names in "
        f"its header: the row has {frame.index.nlevels} field(s) too many (a trailing comma, or an unquoted comma "
        "inside a value?). Remove the extra field(s), quote values holding commas, or name every column in the "
        "header."
    )


_BLOCK = 1 << 20


def _check_path(path, what: str) -> Path:
    path = Path(path)
    try:
        path.stat()
    except FileNotFoundError:
        raise InputError(f"The {what} '{path}' does not exist.") from None
    except OSError as exc:
        raise _unreadable(path, what, exc) from None
    if path.is_dir():
        raise InputError(f"The {what} '{path}' is a folder; expected a CSV file.")
    return path


def _unreadable(path: Path, what: str, exc: OSError) -> InputError:
    return InputError(f"The {what} '{path}' cannot be read: {exc.strerror or exc}. "
                      "Check the path and its permissions.")


def _open_binary(path: Path, what: str):
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _unreadable(path, what, exc) from None


def _read_block(stream, path: Path, what: str, offset: int) -> bytes:
    """Read the next block; refuse binary data (a NUL byte never occurs in CSV text)."""
    try:
        block = stream.read(_BLOCK)
    except OSError as exc:
        raise _unreadable(path, what, exc) from None
    nul = block.find(b"\0")
    if nul >= 0:
        raise _binary(path, what, offset + nul)
    return block


def _binary(path: Path, what: str, byte: int) -> InputError:
    return InputError(
        f"The {what} '{path}' is not a CSV text file: it holds binary data (a NUL byte at byte {byte}). "
        "Pass the CSV file itself (not a model, archive or compressed file; decompress it first)."
    )


def _read_all(path: Path, what: str) -> bytes:
    with _open_binary(path, what) as stream:
        first = _read_block(stream, path, what, 0)
        if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            # a regular file whose first block is text is read again in one call, into one object of its size
            # (joining blocks would hold the file twice at the end)
            try:
                stream.seek(0)
                raw = stream.read()
            except OSError as exc:
                raise _unreadable(path, what, exc) from None
            nul = raw.find(b"\0")
            if nul >= 0:
                raise _binary(path, what, nul)
            return raw
        blocks, size = [first], len(first)
        while first:
            block = _read_block(stream, path, what, size)
            if not block:
                break
            blocks.append(block)
            size += len(block)
    return b"".join(blocks)


def _decode_error(path: Path, what: str, encoding: str, byte: int, line: int) -> InputError:
    return InputError(
        f"The {what} '{path}' is not valid {encoding} text (byte 0x{byte:02x} on line {line}). "
        "Pass --encoding with the file's encoding (for example --encoding latin-1)."
    )


def check_header(path: Path, header_line: str, what: str) -> list[str]:
    """Check a CSV header line: delimiter, duplicate and empty names. Returns the column names."""
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
    return header


def _check_text(path: Path, encoding: str, what: str) -> str:
    """Decode the whole file block by block (bounded memory); return its first line."""
    import codecs

    try:
        decoder = codecs.getincrementaldecoder(encoding)()
    except LookupError:
        raise InputError(f"Unknown text encoding '{encoding}' given for the {what} '{path}'.") from None
    first_line, lines, has_text, offset = None, 0, False, 0
    with _open_binary(path, what) as stream:
        while True:
            block = _read_block(stream, path, what, offset)
            offset += len(block)
            try:
                text = decoder.decode(block, final=not block)
            except UnicodeDecodeError as exc:
                line = lines + block[: exc.start].count(b"\n") + 1
                raise _decode_error(path, what, encoding, block[exc.start], line) from None
            if first_line is None and text:
                first_line = text.lstrip("\ufeff")
            elif first_line is not None and "\n" not in first_line:
                first_line += text
            has_text = has_text or bool(text.strip())
            lines += block.count(b"\n")
            if not block:
                break
    if not has_text or first_line is None:
        raise InputError(f"The {what} '{path}' is empty; expected a header row and at least one data row.")
    return first_line.splitlines()[0]


def iter_csv(path, *, chunk_size: int, encoding: str = "utf-8", what: str = "applicants file",
             dtype: dict | None = None, text_columns=()):
    """Read a CSV file chunk by chunk, after checking its text and header (memory bounded by the chunk).

    Parameters
    ----------
    text_columns : sequence of str
        Columns read verbatim as strings: ``NA``, ``NaN``, ``null`` and empty cells stay
        as written (identifiers). Other columns use pandas' missing-value markers.

    Yields
    ------
    frame : DataFrame of at most ``chunk_size`` rows (index continues across chunks).

    Raises
    ------
    InputError
        As :func:`read_csv`, before the first chunk is yielded.
    """
    path = _check_path(path, what)
    header = check_header(path, _check_text(path, encoding, what), what)
    text_columns = [c for c in text_columns if c in header]
    na = {}
    if text_columns:
        # per-column missing-value markers: the text columns get none, the others pandas' defaults
        na = {"keep_default_na": False,
              "na_values": {c: sorted(_DEFAULT_NA) for c in header if c not in text_columns}}
        dtype = {**(dtype or {}), **{c: str for c in text_columns}}
    else:
        na = {"keep_default_na": True}
    try:
        reader = pd.read_csv(path, encoding=encoding, chunksize=chunk_size, dtype=dtype, **na, **EXACT_FLOATS)
        n = 0
        with reader:
            for frame in reader:
                if n == 0:
                    _check_row_labels(frame, path, what)
                n += len(frame)
                yield frame
    except InputError:
        raise
    except (pd.errors.ParserError, ValueError) as exc:
        message = str(exc).strip().splitlines()[0]
        raise InputError(f"The {what} '{path}' is not a well-formed CSV file: {message}.") from None
    if n == 0:
        raise InputError(f"The {what} '{path}' has a header but no data rows.")
