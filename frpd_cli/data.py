"""Reading the CSV files frpd works on, with errors that say what to fix."""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import itertools
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
    stream such as ``/dev/zero`` is refused at its first block). The file is opened
    once: a regular UTF-8 file is then parsed from the same handle, read again from its
    start in blocks; other input is parsed from the bytes read.
    """
    path = _check_path(path, what)
    with _open_binary(path, what) as stream:        # opened once: a FIFO's writer sees one reader
        if _is_utf8(encoding) and _plain_file(stream, path, what):
            # a regular UTF-8 file without a byte order mark is checked block by block and parsed from the same
            # handle, seeked back: pandas reads it in blocks too, so the file's bytes are never held whole (1.5 GB
            # instead of 2.0 GB at the peak of ten million rows)
            check_header(path, _check_blocks(_blocks(stream, path, what), path, what, "utf-8"), what)
            _seek_start(stream, path, what)
            source, options = stream, {"encoding": "utf-8"}
        else:
            source, options = _source(_read_all(stream, path, what), path, what, encoding)
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


def _plain_file(stream, path: Path, what: str) -> bool:
    """Whether ``stream`` is a regular file that does not start with a UTF-8 byte order mark (which the checks
    strip, any number); a regular file is left at its start. A FIFO or pipe is not read here."""
    if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
        return False
    try:
        start = stream.read(len(codecs.BOM_UTF8))
    except OSError as exc:
        raise _unreadable(path, what, exc) from None
    _seek_start(stream, path, what)
    return start != codecs.BOM_UTF8


def _seek_start(stream, path: Path, what: str) -> None:
    try:
        stream.seek(0)
    except OSError as exc:
        raise _unreadable(path, what, exc) from None


def _source(raw: bytes, path: Path, what: str, encoding: str):
    """The file's bytes, checked: the parser's source and options."""
    if _is_utf8(encoding):
        # UTF-8 input is checked block by block and parsed from its own bytes: neither the decoded text nor a
        # second copy of the bytes is held (about 1.1 GB fewer at the peak of ten million rows)
        return _utf8_source(raw, path, what, encoding), {"encoding": "utf-8"}
    return _decoded_source(raw, path, what, encoding)


def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def _utf8_source(raw: bytes, path: Path, what: str, encoding: str) -> io.BytesIO:
    """The bytes of a UTF-8 file for the parser, leading byte order marks removed, after the checks of
    :func:`_check_blocks` (valid text, not empty, a header line) made block by block."""
    blocks = (raw[offset:offset + _BLOCK] for offset in range(0, len(raw), _BLOCK))
    check_header(path, _check_blocks(blocks, path, what, encoding, whole=raw), what)
    start = 0
    while raw.startswith(codecs.BOM_UTF8, start):
        start += len(codecs.BOM_UTF8)
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


def _read_all(stream, path: Path, what: str) -> bytes:
    """Every byte of ``stream`` (from its start), refusing binary data at its first block."""
    first = _read_block(stream, path, what, 0)
    if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
        # a regular file whose first block is text is read again in one call, into one object of its size
        # (joining blocks would hold the file twice at the end)
        _seek_start(stream, path, what)
        try:
            raw = stream.read()
        except OSError as exc:
            raise _unreadable(path, what, exc) from None
        nul = raw.find(b"\0")
        if nul >= 0:
            raise _binary(path, what, nul)
        return raw
    blocks, size = [first], len(first)
    for block in _blocks(stream, path, what, size) if first else ():
        blocks.append(block)
        size += len(block)
    return b"".join(blocks)


def _blocks(stream, path: Path, what: str, offset: int = 0):
    """The blocks of ``stream`` up to its end, each checked by :func:`_read_block` (``offset``: the byte the
    stream is at)."""
    while block := _read_block(stream, path, what, offset):
        offset += len(block)
        yield block


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
    """Check the whole file block by block (bounded memory), as :func:`_check_blocks`; return its first line."""
    with contextlib.closing(_file_blocks(path, what)) as blocks:
        return _check_blocks(blocks, path, what, encoding)


def _file_blocks(path: Path, what: str):
    # (a generator: the file is opened when the first block is asked for, after the encoding is known)
    with _open_binary(path, what) as stream:
        yield from _blocks(stream, path, what)


def _check_blocks(blocks, path: Path, what: str, encoding: str, *, whole: bytes | None = None) -> str:
    """Decode the text given as consecutive byte ``blocks`` (an iterable of bytes) in ``encoding``, one block at
    a time, and check it: valid text, and not empty once leading byte order marks are set aside. Returns its first
    line, without them.

    A decoding error names the offending byte and its line in the whole text, wherever the blocks are cut (a
    character may begin in one block and end in the next). ``whole``: the bytes the blocks were cut from, when
    they are held; the line of an error is then counted in them, instead of the line ends of every block as it
    passes.
    """
    try:
        decoder = codecs.getincrementaldecoder(encoding)()
    except LookupError:
        raise InputError(f"Unknown text encoding '{encoding}' given for the {what} '{path}'.") from None
    head, in_head, has_text = "", True, False
    offset = lines = 0          # the bytes decoded so far and (without ``whole``) their line ends
    for block in itertools.chain(blocks, [None]):
        pending = decoder.getstate()[0]           # the bytes of a character the previous block began
        try:
            text = decoder.decode(b"" if block is None else block, final=block is None)
        except UnicodeDecodeError as exc:
            data = pending + (b"" if block is None else block)       # where exc.start counts from
            if whole is None:
                before = lines - pending.count(b"\n") + data.count(b"\n", 0, exc.start)
            else:
                before = whole.count(b"\n", 0, offset - len(pending) + exc.start)
            raise _decode_error(path, what, encoding, data[exc.start], before + 1) from None
        if block is not None:
            offset += len(block)
            if whole is None:
                lines += block.count(b"\n")
        if not head:
            text = text.lstrip("\ufeff")
        if in_head:
            head += text
            in_head = "\n" not in text
        has_text = has_text or bool(text.strip())
    if not has_text:
        raise InputError(f"The {what} '{path}' is empty; expected a header row and at least one data row.")
    return head.splitlines()[0]


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
