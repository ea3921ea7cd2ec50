"""CSV text that every reader splits into the records it was written as: cells holding a line break are quoted.

Python's ``csv`` writer (before 3.13) quotes a cell holding a character of its line terminator, ``\\n`` here,
but not a bare carriage return: ``"\\rCR"`` was written unquoted and read back (by pandas, by ``csv``) as a
record break. :class:`CsvWriter` writes rows with the ``csv`` module and quotes, in the rare rows that need
it, every text cell holding any character a reader may take for a line break: ``\\r`` and ``\\n`` (``csv``,
pandas), and the other separators of :meth:`str.splitlines` (``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``,
``\\u2028``, ``\\u2029``). :func:`frame_csv` does the same for a DataFrame written by pandas. Other rows are
the ``csv`` module's bytes, unchanged.
"""

from __future__ import annotations

import csv
import io
import re

import pandas as pd

__all__ = ["LINE_BREAKS", "CsvWriter", "csv_line", "frame_csv"]

#: Characters some reader takes for the end of a line.
LINE_BREAKS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: Breaks the ``csv`` module leaves unquoted with ``lineterminator="\n"`` (it quotes ``\n`` itself).
_UNQUOTED = re.compile("[" + re.escape(LINE_BREAKS.replace("\n", "")) + "]")


def _cell(value) -> str:
    """One cell as the ``csv`` module writes it (QUOTE_MINIMAL, ``,`` and ``"``), line breaks quoted."""
    if value is None:
        return ""
    if isinstance(value, str):
        if value and (any(c in value for c in LINE_BREAKS) or "," in value or '"' in value):
            return '"' + value.replace('"', '""') + '"'
        return value
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([value])
    text = buffer.getvalue()[:-1]
    return "" if text == '""' else text


def csv_line(row) -> str:
    """One record (a list of cells) as a csv line ending in ``\\n``; cells holding a line break are quoted.

    Examples
    --------
    >>> csv_line(["\\rCR", 1.5, None, "a,b", True])
    '"\\rCR",1.5,,"a,b",True\\n'
    """
    cells = [_cell(v) for v in row]
    if len(cells) == 1 and cells[0] == "":
        return '""\n'                        # as the csv module: a lone empty cell is not an empty line
    return ",".join(cells) + "\n"


class CsvWriter:
    """A ``csv.writer(stream, lineterminator="\\n")`` that also quotes cells holding any line break.

    Rows are rendered by the ``csv`` module (fast); only when the rendered text holds a break the module
    left unquoted are its rows rendered again cell by cell (:func:`csv_line`).
    """

    def __init__(self, stream):
        self.stream = stream
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\n")

    def writerow(self, row) -> None:
        self.writerows([row])

    def writerows(self, rows) -> None:
        rows = rows if isinstance(rows, list) else list(rows)
        self._writer.writerows(rows)
        text = self._buffer.getvalue()
        self._buffer.seek(0)
        self._buffer.truncate()
        if _UNQUOTED.search(text) is not None:
            text = "".join(csv_line(row) for row in rows)
        self.stream.write(text)


def frame_csv(frame: pd.DataFrame) -> str:
    """``frame.to_csv(index=False, lineterminator="\\n")``, with text cells holding a line break quoted.

    Frames without such a cell give pandas' text unchanged; otherwise every non-numeric cell is quoted
    (``csv.QUOTE_NONNUMERIC``), which pandas and ``csv`` read back to the same values.
    """
    text = frame.to_csv(index=False, lineterminator="\n")
    if _UNQUOTED.search(text) is None:
        return text
    return frame.to_csv(index=False, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
