"""Artifact folders: payload files plus a ``manifest.json``, written atomically, read with checks.

An artifact is what one command leaves for the next (``build-graph`` -> graph,
``select`` -> selection, ``interpolate`` -> plan). It is a folder::

    DIR/
      manifest.json     kind, schema_version, frpd_version, created, params,
                        inputs {name: {path, sha256}}, libraries {name: version},
                        payloads {file name: {sha256, size}}
      *.npz             dicts of arrays (no pickled objects; read with allow_pickle=False)
      *.npy             one array, uncompressed, memory-mapped when read (large payloads: the pool)
      *.csv             tables
      *.json            JSON documents
      *.txt, *.jsonl    text

frpd never pickles its own objects. Reading checks the kind, the schema version, the
sha256 of every payload (corruption) and of every input named by the caller (staleness).
Payload names are plain file names: a manifest can never make frpd read or write outside
the artifact folder. (What an artifact's contents claim is re-checked against the inputs
by its reader: :mod:`frpd_cli.verification`, ``frpd_cli.cli.graph.load_graph``.)

Writing replaces only an empty folder or an artifact of the same kind that holds nothing
but its manifest and payloads, never one of the command's inputs; the new folder is built
beside the old one and swapped in atomically.

Determinism: the same inputs and seed give byte-identical payload files. ``manifest.json``
is byte-identical too when ``SOURCE_DATE_EPOCH`` is set (it is used as ``created``).
"""

from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import io
import json
import math
import os
import platform
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from ._csv import frame_csv
from ._digests import remembered_digest
from .data import EXACT_FLOATS
from .exceptions import ArtifactError, InputError, StaleArtifactError
from .outputs import fsync_folder as fsync_dir
from .outputs import output_lock, replaced_file_mode, signals_held

__all__ = [
    "Artifact",
    "MANIFEST_NAME",
    "NpyBlockWriter",
    "StagedArray",
    "PAYLOAD_SUFFIXES",
    "fsync_dir",
    "SCHEMA_VERSION",
    "atomic_write_bytes",
    "atomic_write_text",
    "read_artifact",
    "sha256_file",
    "staging_folder",
    "write_artifact",
    "write_npy_blocks",
]

SCHEMA_VERSION = 1
_KNOWN_SCHEMA_VERSIONS = frozenset({1})
MANIFEST_NAME = "manifest.json"
PAYLOAD_SUFFIXES = (".npz", ".npy", ".csv", ".json", ".jsonl", ".txt", ".skops", ".joblib")
#: Payloads written as the bytes given (saved estimators: the refits artifact, see frpd_cli.refits).
_BYTES_SUFFIXES = (".skops", ".joblib")
_LIBRARIES = ("numpy", "scipy", "pandas", "scikit-learn", "highspy", "joblib", "networkx", "skops")
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can hold
_CHUNK = 1 << 20


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: os.umask is process-wide
_FILE_MODE = 0o666 & ~_UMASK  # a new file, as open() gives it
_DIR_MODE = 0o777 & ~_UMASK  # a new folder, as mkdir gives it


# ---------------------------------------------------------------------------- files


def sha256_file(path, *, input_file: bool = False) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB chunks.

    ``input_file``: the file is one of the command's inputs (the data file, the model, the applicants), which
    frpd reads and never writes. Within :func:`frpd_cli._digests.remembered_digests` (each command's run) such a
    file is read once: its digest is remembered under its device, inode, size and modification and change times,
    and given again while they are unchanged. Artifact payloads and outputs are always read.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.txt")
    >>> atomic_write_text(p, "abc")
    >>> sha256_file(p)[:16]
    'ba7816bf8f01cfea'
    """
    if input_file:
        return remembered_digest(path, lambda: sha256_file(path))
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, fsync, ``os.replace``.

    Readers see the old file or the new one, never a partial one. On failure the
    temporary file is removed and an existing ``path`` is left untouched. The new file
    keeps the permission bits of the regular file it replaces (a 0600 file stays 0600);
    a new one gets 0666 minus the umask, as ``open`` gives.
    """
    path = Path(path)
    tmp = None
    try:
        with signals_held():        # Ctrl-C or SIGTERM between creating the file and knowing its name would leak it
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, replaced_file_mode(path, follow_symlinks=False))     # os.replace replaces a link itself
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            _remove_quietly(Path(tmp))
        raise
    fsync_dir(path.parent)


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ---------------------------------------------------------------------------- writing


def write_artifact(out_dir, *, kind: str, params: dict, inputs: dict, payloads: dict,
                   protect=()) -> Path:
    """Write an artifact folder (payloads + ``manifest.json``) atomically.

    Parameters
    ----------
    out_dir : str or Path
        The artifact folder. Its parent is created if needed. An empty folder, or an frpd
        artifact of the same ``kind`` holding only the files its manifest lists, is replaced;
        anything else there is refused (see Raises).
    kind : str
        What the artifact holds (``"graph"``, ``"selection"``, ``"plan"``).
    params : dict
        JSON-able parameters of the command (numpy scalars and arrays, tuples and paths are
        converted).
    inputs : dict of str to path
        Files the artifact was computed from. A folder stands for its ``manifest.json``
        (an upstream artifact). Their path and sha256 are recorded.
    payloads : dict of str to object
        File name to content, by suffix: ``.npz`` a mapping of str to ndarray (saved
        compressed, no object arrays); ``.csv`` a DataFrame (index not written) or str;
        ``.json`` a JSON-able dict/list or str; ``.txt`` a str.
    protect : iterable of path, optional
        Other paths the command reads but does not record (e.g. ``select --reuse-eigen DIR``).
        Like every path of ``inputs``, none may be ``out_dir``, lie inside it, or be an
        artifact folder holding it: replacing ``out_dir`` would destroy the command's own input.

    Returns
    -------
    path : Path
        ``out_dir``.

    Raises
    ------
    ArtifactError
        A payload name or content is invalid; ``out_dir`` is (or holds, or lies inside) an input;
        ``out_dir`` exists and is a file, a non-empty folder that is not an frpd artifact, an
        artifact of another kind, or an artifact folder holding files its manifest does not list
        (the message names them). Nothing is written or deleted then.
    InputError
        An input file does not exist, or ``SOURCE_DATE_EPOCH`` is not an integer.

    Notes
    -----
    Everything is written into a temporary sibling folder first, which is then swapped with
    an existing artifact in one atomic exchange (``renameat2(RENAME_EXCHANGE)`` on Linux; where
    the platform or file system lacks it, the old folder is renamed away, the new one renamed
    in, and the old one put back if that fails); the old artifact is deleted last. A failure
    or ``KeyboardInterrupt`` at any point leaves no temporary folder behind and the old
    artifact in place. The temporary folder is private (0700) while it is written; before the swap it gets the
    permission bits of the folder it replaces (else 0777 minus the umask) and each file those of the file of the
    same name it replaces (else 0666 minus the umask).
    """
    out_dir = Path(out_dir)
    if not isinstance(kind, str) or not kind:
        raise ArtifactError(f"The artifact kind must be a non-empty string. Got {kind!r} instead.")
    for name in payloads:
        _check_payload_name(name)
    recorded_inputs = {name: _describe_input(name, p) for name, p in sorted(inputs.items())}
    created = _created()
    params_json = _to_json_value(params, where="params")
    _check_not_an_input(out_dir, [*inputs.values(), *protect])
    _check_destination(out_dir, kind)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(Path(os.path.realpath(out_dir)), shown=out_dir):  # reuses the lock the command took first
        _check_destination(out_dir, kind)      # again: another process may have written it before we locked
        return _write_locked(out_dir, kind, payloads, created, params_json, recorded_inputs)


def _write_locked(out_dir: Path, kind: str, payloads: dict, created, params_json, recorded_inputs) -> Path:
    tmp_dir = None
    try:
        with signals_held():    # the folder exists only once the cleanup below knows its name
            tmp_dir = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp-"))
        described = {}
        for name, content in payloads.items():
            if isinstance(content, StagedArray):
                described[name] = content.move_into(tmp_dir / name, name)
                continue
            if Path(name).suffix == ".npy":
                described[name] = _write_npy(tmp_dir / name, name, content)
                continue
            data = _payload_bytes(name, content)
            _write_file(tmp_dir / name, data)
            described[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        manifest = {
            "kind": kind,
            "schema_version": SCHEMA_VERSION,
            "frpd_version": __version__,
            "created": created,
            "params": params_json,
            "inputs": recorded_inputs,
            "libraries": _library_versions(),
            "payloads": dict(sorted(described.items())),
        }
        _write_file(tmp_dir / MANIFEST_NAME, _dump_json(manifest, where="manifest").encode("utf-8"))
        _set_modes(tmp_dir, out_dir)
        fsync_dir(tmp_dir)
        _swap_in(tmp_dir, out_dir)
    except BaseException as exc:
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)
        if isinstance(exc, OSError) and _unnamed(exc, out_dir):
            raise _naming(exc, out_dir) from exc
        raise
    return out_dir


def _unnamed(exc: OSError, out_dir: Path) -> bool:
    """Whether an OSError names no path the user knows: none (a write to a full disk), or one of the hidden
    folders beside ``out_dir`` that frpd builds and swaps it with (``.NAME.tmp-*``, ``.NAME.old-*``)."""
    if exc.filename is None:
        return True
    hidden = os.path.join(os.fspath(out_dir.parent), f".{out_dir.name}.")
    return os.fspath(exc.filename).startswith(hidden)


def _naming(exc: OSError, path) -> OSError:
    """The same error (errno, strerror, subclass) naming ``path``, the file or folder being written."""
    return OSError(exc.errno, exc.strerror or str(exc), os.fspath(path))


def _set_modes(new_dir: Path, out_dir: Path) -> None:
    """Give the finished artifact its permission bits before it is swapped in (it is private, 0700, while it is
    written): the replaced folder's, else 0777 minus the umask (as ``mkdir`` gives); each file those of the file
    of the same name it replaces, else 0666 minus the umask (as every new output file)."""
    for name in os.listdir(new_dir):
        os.chmod(new_dir / name, _replaced_mode(out_dir / name, stat.S_ISREG, _FILE_MODE))
    # a folder made inside a setgid folder inherits the setgid bit (group sharing); mkdir would keep it
    made = _DIR_MODE | (stat.S_IMODE(os.lstat(new_dir).st_mode) & stat.S_ISGID)
    os.chmod(new_dir, _replaced_mode(out_dir, stat.S_ISDIR, made))


def _replaced_mode(path: Path, is_kind, default: int) -> int:
    """The permission bits of ``path`` when it exists and ``is_kind`` (never through a symlink), else ``default``."""
    try:
        st = os.lstat(path)
    except OSError:
        return default
    return stat.S_IMODE(st.st_mode) if is_kind(st.st_mode) else default


def _check_not_an_input(out_dir: Path, paths) -> None:
    """Refuse an ``out_dir`` that is, holds, or sits inside an input of the command."""
    target = Path(os.path.realpath(out_dir))
    for given in paths:
        real = Path(os.path.realpath(given))
        if real == target or target in real.parents:
            raise ArtifactError(
                f"The output folder '{out_dir}' is (or holds) an input of this command ('{given}'); writing "
                "the artifact there would delete it. Choose another --out."
            )
        folder = real if real.is_dir() else (real.parent if real.name == MANIFEST_NAME else None)
        if folder is not None and folder in target.parents:
            raise ArtifactError(
                f"The output folder '{out_dir}' lies inside the input artifact '{folder}'; writing there would "
                "alter that artifact. Choose an --out outside it."
            )


def _listing(folder: Path, names) -> str:
    names = sorted(names)
    shown = ", ".join(repr(n + ("/" if (folder / n).is_dir() else "")) for n in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _check_destination(out_dir: Path, kind: str) -> None:
    """Refuse to replace anything but an empty folder or a clean artifact of the same kind."""
    if not out_dir.exists() and not out_dir.is_symlink():
        return
    if not out_dir.is_dir() or out_dir.is_symlink():
        raise ArtifactError(
            f"The output path '{out_dir}' exists and is not an artifact folder; "
            "choose another --out or remove it."
        )
    entries = os.listdir(out_dir)
    if not entries:
        return
    try:
        existing = json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
        is_ours = (isinstance(existing, dict) and "frpd_version" in existing and "kind" in existing
                   and isinstance(existing.get("payloads"), dict))
    except (OSError, ValueError):
        is_ours = False
    if not is_ours:
        raise ArtifactError(
            f"The output folder '{out_dir}' exists and is not an frpd artifact (it holds "
            f"{_listing(out_dir, entries)}); refusing to replace it. Choose another --out or remove the folder."
        )
    if existing["kind"] != kind:
        raise ArtifactError(
            f"The output folder '{out_dir}' holds a {existing['kind']!r} artifact; this command writes a {kind!r} "
            f"artifact and replaces only one of the same kind. Choose another --out, or remove '{out_dir}' "
            "if you no longer need it."
        )
    foreign = set(entries) - {MANIFEST_NAME} - set(existing["payloads"])
    if foreign:
        raise ArtifactError(
            f"The artifact folder '{out_dir}' holds {len(foreign)} file(s) frpd did not write: "
            f"{_listing(out_dir, foreign)}; replacing the artifact would delete them. Move them out of the folder "
            "or choose another --out."
        )


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False where that is unsupported."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(new_dir: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        os.rename(new_dir, out_dir)
        fsync_dir(out_dir.parent)
        return
    if _exchange(new_dir, out_dir):  # new_dir now holds the old artifact
        fsync_dir(out_dir.parent)
        shutil.rmtree(new_dir, ignore_errors=True)
        return
    old_dir = None
    try:
        # no signal between the two renames: out_dir is missing in between (the old artifact under a hidden name)
        with signals_held():
            old_dir = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old-"))
            os.rmdir(old_dir)  # only reserve a unique name
            os.rename(out_dir, old_dir)
            try:
                os.rename(new_dir, out_dir)
            except BaseException:
                os.rename(old_dir, out_dir)
                raise
        fsync_dir(out_dir.parent)
    finally:
        if old_dir is not None:         # gone already when the old artifact was renamed back
            shutil.rmtree(old_dir, ignore_errors=True)


def _payload_bytes(name: str, content) -> bytes:
    suffix = Path(name).suffix
    if suffix in _BYTES_SUFFIXES:
        if not isinstance(content, bytes):
            raise ArtifactError(f"The payload '{name}' must be bytes; got {type(content).__name__}.")
        return content
    if isinstance(content, str) and suffix != ".npz":
        return content.encode("utf-8")
    if suffix == ".npz":
        if not isinstance(content, Mapping):
            raise ArtifactError(
                f"The payload '{name}' must be a dict of arrays; got {type(content).__name__}."
            )
        return _npz_bytes(name, content)
    if suffix == ".csv":
        if not isinstance(content, pd.DataFrame):
            raise ArtifactError(f"The payload '{name}' must be a DataFrame or str; got {type(content).__name__}.")
        return frame_csv(content).encode("utf-8")
    if suffix == ".json":
        return _dump_json(_to_json_value(content, where=name), where=name).encode("utf-8")
    raise ArtifactError(f"The payload '{name}' must be a str; got {type(content).__name__}.")


def _npz_bytes(name: str, arrays: Mapping) -> bytes:
    """A compressed ``.npz`` whose bytes depend only on the arrays (fixed zip dates, no pickles)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, mode="w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key, value in arrays.items():
            if not isinstance(key, str) or not key or "/" in key or "\\" in key or key.startswith("."):
                raise ArtifactError(
                    f"Array names in the payload '{name}' must be plain non-empty strings; got {key!r}."
                )
            array = np.asanyarray(value)
            if array.dtype.hasobject:
                raise ArtifactError(
                    f"The array '{key}' of the payload '{name}' has dtype object, which would need pickling. "
                    "Convert it to a numeric or fixed-width string dtype (e.g. .astype(str))."
                )
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with archive.open(info, mode="w", force_zip64=True) as handle:
                np.lib.format.write_array(handle, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def _write_npy(path: Path, name: str, content) -> dict:
    """Write one array as an uncompressed ``.npy`` file (no pickles); its sha256 and size for the manifest.

    The array's bytes go to the file as they are (no copy in memory beyond numpy's own buffering); the
    file is then hashed from the page cache. Same array, same bytes.
    """
    if not isinstance(content, np.ndarray):
        raise ArtifactError(f"The payload '{name}' must be a numpy array; got {type(content).__name__}.")
    if content.dtype.hasobject:
        raise ArtifactError(f"The payload '{name}' has dtype object, which would need pickling. Convert it to a "
                            "numeric or fixed-width string dtype.")
    with open(path, "xb") as handle:      # the temporary folder is ours and fresh: nothing may be there
        np.lib.format.write_array(handle, np.ascontiguousarray(content), allow_pickle=False)
        handle.flush()
        os.fsync(handle.fileno())
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


@dataclass(frozen=True)
class StagedArray:
    """A ``.npy`` payload written ahead, block by block, into a staging folder (:func:`write_npy_blocks`):
    :func:`write_artifact` moves the file into the artifact instead of writing an array held in memory."""

    path: Path
    sha256: str
    size: int

    def move_into(self, target: Path, name: str) -> dict:
        if Path(name).suffix != ".npy":
            raise ArtifactError(f"The staged payload '{name}' must be a .npy file.")
        try:
            os.rename(self.path, target)       # the staging folder is a sibling of the artifact's: one file system
        except OSError:
            # where a file held memory-mapped cannot be renamed (Windows): copied, then checked against its hash
            shutil.copyfile(self.path, target)
            if sha256_file(target) != self.sha256:
                raise ArtifactError(
                    f"The staged payload '{name}' changed while it was copied into the artifact.") from None
        return {"sha256": self.sha256, "size": self.size}

    def open(self) -> np.ndarray:
        """The array, memory-mapped read-only (valid after the move too: the mapping holds the file)."""
        return np.load(self.path, mmap_mode="r", allow_pickle=False)


@contextmanager
def staging_folder(out_dir):
    """A fresh private folder beside ``out_dir`` for payloads written ahead (:func:`write_npy_blocks`), removed
    with whatever is left in it on leaving (the payloads :func:`write_artifact` took are no longer there).

    Named ``.NAME.stage-XXXXXXXX`` (random, created exclusively, mode 0700), like the artifact's own temporary
    folder: nothing that exists is opened or replaced. The parent folder must exist.
    """
    out_dir = Path(out_dir)
    folder = None
    try:
        with signals_held():    # the folder exists only once the cleanup below knows its name
            folder = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.stage-"))
        yield folder
    except OSError as exc:
        # a payload written ahead is part of the artifact: an error writing it names the artifact's folder
        if folder is not None and exc.filename is not None and \
                Path(os.fspath(exc.filename)).is_relative_to(folder):
            raise _naming(exc, out_dir) from exc
        raise
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def write_npy_blocks(path, shape: tuple, dtype, blocks: Iterable[np.ndarray]) -> StagedArray:
    """Write an array of ``shape`` and ``dtype`` given as consecutive blocks of rows, as ``np.save`` of the whole
    array would (the same bytes), hashing them on the way; only one block is in memory at a time.

    ``path`` must not exist (created exclusively). Raises :class:`ArtifactError` when the blocks do not add up to
    ``shape`` or have another dtype or row width. :class:`NpyBlockWriter` does the same a block at a time, for
    several files written from the same blocks of work.
    """
    with _naming_errors(path), NpyBlockWriter(path, shape, dtype) as writer:
        for block in blocks:
            writer.write(block)
        return writer.finish()


class NpyBlockWriter:
    """A ``.npy`` file written block by block (:func:`write_npy_blocks`), as ``np.save`` of the whole array would
    write it, and hashed on the way.

    ``NpyBlockWriter(path, shape, dtype)`` creates ``path`` exclusively and writes the header; :meth:`write`
    appends consecutive blocks of rows; :meth:`finish` checks that they add up to ``shape``, syncs the file and
    returns the :class:`StagedArray`. Used as a context manager, the file is closed on leaving (also on an
    error; what was written stays, as for :func:`write_npy_blocks`). An error writing that names no file (a
    full disk) names ``path``.
    """

    def __init__(self, path, shape: tuple, dtype):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(n) for n in shape)
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(self.dtype),
                                                      "fortran_order": False, "shape": self.shape})
        self._digest = hashlib.sha256(header.getvalue())
        self._rows, self._size = 0, len(header.getvalue())
        with _naming_errors(self.path):
            self._handle = open(self.path, "xb")
            try:
                self._handle.write(header.getvalue())
            except BaseException:
                self._handle.close()
                raise

    def write(self, block: np.ndarray) -> None:
        """Append the next rows (``block`` of the writer's dtype and row shape)."""
        block = np.ascontiguousarray(block)
        if block.dtype != self.dtype or block.shape[1:] != self.shape[1:]:
            raise ArtifactError(f"A block of {self.path.name} has dtype {block.dtype} and shape {block.shape}; "
                                f"expected {self.dtype} and rows of shape {self.shape[1:]}.")
        data = memoryview(block.reshape(-1).view(np.uint8))
        with _naming_errors(self.path):
            self._handle.write(data)
        self._digest.update(data)
        self._rows += block.shape[0]
        self._size += data.nbytes

    def finish(self) -> StagedArray:
        """Check the rows add up to the shape, sync and close the file; the staged array."""
        if self._rows != self.shape[0]:
            raise ArtifactError(f"The blocks of {self.path.name} hold {self._rows} rows; expected {self.shape[0]}.")
        with _naming_errors(self.path):
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            os.chmod(self.path, _FILE_MODE)
        return StagedArray(path=self.path, sha256=self._digest.hexdigest(), size=self._size)

    def __enter__(self) -> NpyBlockWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self._handle.close()


@contextmanager
def _naming_errors(path):
    """An :class:`OSError` that names no file (a write to a full disk) raised again naming ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise _naming(exc, path) from exc
        raise


def _write_file(path: Path, data: bytes) -> None:
    """Write a file of the artifact's temporary folder (its mode is set with the others: :func:`_set_modes`)."""
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _describe_input(name: str, path) -> dict:
    given = Path(path)
    target = given / MANIFEST_NAME if given.is_dir() else given
    if not target.is_file():
        raise InputError(f"The input '{name}' ('{given}') does not exist or is not a file or artifact folder.")
    return {"path": str(given.resolve()), "sha256": sha256_file(target)}


def _created() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None or epoch == "":
        moment = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    else:
        try:
            moment = _dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise InputError(
                f"SOURCE_DATE_EPOCH must be an integer number of seconds since 1970-01-01 UTC. Got {epoch!r}."
            ) from None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _library_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _to_json_value(value, *, where: str):
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            key = _plain_scalar(key)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise ArtifactError(f"Keys in {where} must be strings or numbers; got {key!r}.")
            out[str(key) if not isinstance(key, str) else key] = _to_json_value(item, where=where)
        return out
    if isinstance(value, (list, tuple)):
        return [_to_json_value(v, where=where) for v in value]
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return [_to_json_value(v, where=where) for v in value.tolist()]
        return _to_json_value(value.tolist(), where=where)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    value = _plain_scalar(value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArtifactError(
                f"{where} contains {value!r}, which is not valid JSON. Store it as null, or in an .npz payload."
            )
        return value
    raise ArtifactError(f"{where} contains a {type(value).__name__} ({value!r}), which is not JSON-able.")


def _plain_scalar(value):
    return value.item() if isinstance(value, np.generic) else value


def _dump_json(value, *, where: str) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError) as exc:
        raise ArtifactError(f"{where} cannot be written as JSON: {exc}.") from exc


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Artifact:
    """A checked artifact folder.

    Attributes
    ----------
    path : Path
        The folder.
    manifest : dict
        The parsed ``manifest.json``.
    """

    path: Path
    manifest: dict = field(repr=False)

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    @property
    def params(self) -> dict:
        return self.manifest.get("params", {})

    @property
    def payload_names(self) -> tuple[str, ...]:
        return tuple(self.manifest["payloads"])

    def load_npz(self, name: str) -> dict[str, np.ndarray]:
        """The arrays of an ``.npz`` payload, read with ``allow_pickle=False``."""
        path = self._payload_path(name, ".npz")
        try:
            with np.load(path, allow_pickle=False) as archive:
                return {key: archive[key] for key in archive.files}
        except (ValueError, OSError, zipfile.BadZipFile) as exc:
            raise ArtifactError(f"The payload '{name}' of the artifact '{self.path}' cannot be read: {exc}.") from exc

    def load_npy(self, name: str) -> np.ndarray:
        """A ``.npy`` payload memory-mapped read-only (``allow_pickle=False``): pages are read when touched and
        shared by every process that maps the same file."""
        path = self._payload_path(name, ".npy")
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise ArtifactError(f"The payload '{name}' of the artifact '{self.path}' cannot be read: {exc}.") from exc
        if not isinstance(array, np.ndarray) or array.dtype.hasobject:
            raise ArtifactError(f"The payload '{name}' of the artifact '{self.path}' is not a numeric array.")
        return array

    def load_csv(self, name: str, **read_csv_kwargs) -> pd.DataFrame:
        """An ``.csv`` payload as a DataFrame (keyword arguments go to :func:`pandas.read_csv`)."""
        return pd.read_csv(self._payload_path(name, ".csv"), **{**EXACT_FLOATS, **read_csv_kwargs})

    def csv_header(self, name: str) -> list[str]:
        """The header cells of a ``.csv`` payload as written (before pandas renames repeated names)."""
        import csv

        with open(self._payload_path(name, ".csv"), encoding="utf-8", newline="") as stream:
            return next(csv.reader(stream), [])

    def load_json(self, name: str):
        """A ``.json`` payload, parsed."""
        path = self._payload_path(name, ".json")
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ArtifactError(f"The payload '{name}' of the artifact '{self.path}' is not valid JSON: {exc}.") from exc

    def load_text(self, name: str) -> str:
        """A payload's text."""
        return self._payload_path(name, None).read_text(encoding="utf-8")

    def read_bytes(self, name: str, *, command_hint: str) -> bytes:
        """A payload's bytes, read once and refused unless their sha256 is the manifest's: for payloads
        :func:`read_artifact` was told to leave to their reader (``checked_on_read``), so that what is used is
        what was checked. ``command_hint`` is the command that rebuilds the artifact, as for
        :func:`read_artifact`."""
        path = self._payload_path(name, None)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ArtifactError(f"The payload '{name}' of the artifact '{self.path}' cannot be read: {exc}.") from exc
        entry = self.manifest["payloads"][name]
        if hashlib.sha256(data).hexdigest() != (entry.get("sha256") if isinstance(entry, dict) else None):
            raise _corrupted(name, self.path, f"Re-run: {command_hint}")
        return data

    def _payload_path(self, name: str, suffix: str | None) -> Path:
        _check_payload_name(name)
        if name not in self.manifest["payloads"]:
            raise ArtifactError(
                f"The artifact '{self.path}' has no payload '{name}'; it has: {', '.join(self.payload_names) or 'none'}."
            )
        if suffix is not None and Path(name).suffix != suffix:
            raise ArtifactError(f"The payload '{name}' is not a {suffix} file.")
        return self.path / name


def read_artifact(path, *, kind: str, inputs: dict | None = None, command_hint: str,
                  hash_npy: bool = True, checked_on_read=None) -> Artifact:
    """Open an artifact folder and check it before use.

    Parameters
    ----------
    path : str or Path
        The artifact folder.
    kind : str
        The expected kind.
    inputs : dict of str to path, optional
        Inputs named on the command line now (a folder stands for its ``manifest.json``);
        each must have the sha256 recorded when the artifact was built.
    command_hint : str
        The command that (re)builds this artifact, quoted in error messages, e.g.
        ``"frpd build-graph DATA --model MODEL --out DIR"``.
    hash_npy : bool, default=True
        False: ``.npy`` payloads are checked by their size only (the manifest's), not by their sha256. Hashing
        is a full read of the file (about 0.5 s for the 240 MB of a million-row pool), which memory-mapping
        is meant to avoid; the reader then checks their header (dtype, shape) itself.
    checked_on_read : callable, optional
        ``checked_on_read(name)`` true: the payload ``name`` is not hashed here (it must exist); its reader
        takes its bytes with :meth:`Artifact.read_bytes`, which checks their sha256, so the file is read once.

    Returns
    -------
    artifact : Artifact

    Raises
    ------
    ArtifactError
        Missing folder or manifest, invalid JSON, another kind, an unknown schema
        version, a missing or corrupted payload (sha256 mismatch), an unsafe payload name.
    StaleArtifactError
        An input given now differs from (or was not among) the ones the artifact was built from.
    InputError
        An input given now does not exist.
    """
    folder = Path(path)
    remedy = f"Re-run: {command_hint}"
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ArtifactError(f"The {kind} artifact '{folder}' {what}. Create it with: {command_hint}")
    manifest_path = folder / MANIFEST_NAME
    if not manifest_path.is_file():
        raise ArtifactError(
            f"The folder '{folder}' has no {MANIFEST_NAME}, so it is not an frpd artifact (or it is incomplete). "
            f"{remedy}"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"The manifest of '{folder}' is not valid JSON ({exc}); the artifact is corrupted. {remedy}") from None
    if not isinstance(manifest, dict) or not {"kind", "schema_version", "payloads"} <= manifest.keys():
        raise ArtifactError(
            f"The manifest of '{folder}' lacks kind, schema_version or payloads; it is not an frpd artifact. {remedy}"
        )
    if manifest["kind"] != kind:
        raise ArtifactError(
            f"'{folder}' is a {manifest['kind']!r} artifact; expected a {kind!r} artifact, made by: {command_hint}"
        )
    version = manifest["schema_version"]
    if version not in _KNOWN_SCHEMA_VERSIONS or isinstance(version, bool):
        newer = isinstance(version, int) and not isinstance(version, bool) and version > max(_KNOWN_SCHEMA_VERSIONS)
        advice = "upgrade frpd, or re-run" if newer else "re-run"
        raise ArtifactError(
            f"The artifact '{folder}' has schema version {version!r} (written by frpd "
            f"{manifest.get('frpd_version', '?')}); this frpd ({__version__}) reads version(s) "
            f"{', '.join(map(str, sorted(_KNOWN_SCHEMA_VERSIONS)))}. To fix it, {advice}: {command_hint}"
        )
    payloads = manifest["payloads"]
    if not isinstance(payloads, dict):
        raise ArtifactError(f"The manifest of '{folder}' has a malformed payload list. {remedy}")
    root = folder.resolve()
    for name, entry in payloads.items():
        _check_payload_name(name)
        file = folder / name
        if not file.is_file() or file.resolve().parent != root:
            raise ArtifactError(f"The payload '{name}' of the artifact '{folder}' is missing. {remedy}")
        if checked_on_read is not None and checked_on_read(name):
            continue
        expected = entry.get("sha256") if isinstance(entry, dict) else None
        if not hash_npy and name.endswith(".npy"):
            size = entry.get("size") if isinstance(entry, dict) else None
            if file.stat().st_size != size:
                raise ArtifactError(
                    f"The payload '{name}' of the artifact '{folder}' is corrupted (its size, "
                    f"{file.stat().st_size} bytes, differs from the manifest's {size}). {remedy}"
                )
            continue
        if sha256_file(file) != expected:
            raise _corrupted(name, folder, remedy)
    recorded = manifest.get("inputs") or {}
    for name, given in (inputs or {}).items():
        given = Path(given)
        target = given / MANIFEST_NAME if given.is_dir() else given
        if not target.is_file():
            raise InputError(f"The input '{name}' ('{given}') does not exist or is not a file or artifact folder.")
        if name not in recorded:
            raise StaleArtifactError(
                f"The {kind} artifact '{folder}' was not built from an input named '{name}' "
                f"(it records: {', '.join(recorded) or 'none'}). {remedy}"
            )
        if sha256_file(target, input_file=True) != recorded[name].get("sha256"):
            raise StaleArtifactError(
                f"The {kind} artifact '{folder}' is stale: its '{name}' input was '{recorded[name].get('path')}' "
                f"with other contents than '{given}' given now. {remedy}"
            )
    return Artifact(path=folder, manifest=manifest)


# ---------------------------------------------------------------------------- helpers


def _corrupted(name: str, folder: Path, remedy: str) -> ArtifactError:
    return ArtifactError(
        f"The payload '{name}' of the artifact '{folder}' is corrupted (its sha256 differs from the "
        f"manifest's). {remedy}"
    )


def _check_payload_name(name) -> None:
    if (
        not isinstance(name, str)
        or not name
        or name in (".", "..")
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or ".." in name
        or name == MANIFEST_NAME
        or Path(name).suffix not in PAYLOAD_SUFFIXES
    ):
        raise ArtifactError(
            f"Invalid payload name {name!r}: expected a plain file name (no folders, no '..', not starting "
            f"with '.', not {MANIFEST_NAME}) ending in one of {', '.join(PAYLOAD_SUFFIXES)}."
        )


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
