"""The digests of a command's input files, remembered for the length of the command.

:func:`frpd_cli.artifacts.sha256_file` reads an input file once per command (``input_file=True``): a pool's check
and the run's fingerprint both hash the training CSV (about a second for ten million rows). Kept apart from
:mod:`frpd_cli.artifacts` (numpy, pandas) so that every command can open the memory without importing them.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["remembered_digests", "remembered_digest"]

#: Input files' digests by :func:`file_key` during a command (:func:`remembered_digests`); None outside one.
_REMEMBERED: dict | None = None


@contextlib.contextmanager
def remembered_digests():
    """A context in which :func:`frpd_cli.artifacts.sha256_file` reads each input file once; every command runs in
    one (:func:`frpd_cli.cli._errors.handle_errors`). Nested contexts share the outer one's memory."""
    global _REMEMBERED
    if _REMEMBERED is not None:
        yield
        return
    _REMEMBERED = {}
    try:
        yield
    finally:
        _REMEMBERED = None


def remembered_digest(path, compute) -> str:
    """``compute()``, the digest of the file at ``path``, remembered within :func:`remembered_digests` under the
    file's device, inode, size, modification and change times, and given again while they are unchanged (outside
    a command, or when the file cannot be examined, it is computed every time)."""
    key = None
    if _REMEMBERED is not None:
        try:
            info = os.stat(path)
            key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        except OSError:
            key = None
    if key is not None and key in _REMEMBERED:
        return _REMEMBERED[key]
    digest = compute()
    if key is not None and _REMEMBERED is not None:
        _REMEMBERED[key] = digest
    return digest
