"""Output files that are written chunk by chunk, replace the old file only on success, and can be resumed.

A long ``frpd plan --output F`` writes each chunk of applicants as soon as it is
done, into a *partial file* ``F.partial`` beside ``F``, and keeps a *progress
file* ``F.resume.json`` holding a fingerprint of the run (input hashes,
parameters, format) and a checkpoint: how many applicants are complete, the
byte offset where their records end and the sha256 of those bytes. The progress
file is replaced atomically after the chunk's bytes are fsynced, so it never
claims more than the partial file holds. ``F`` itself is not touched until the
run succeeds: then the partial file is renamed over it and the progress file
removed.

On failure (an error, SIGINT, SIGTERM):

* a run started without ``resume`` removes the partial and progress files: the
  previous ``F``, if any, is untouched and nothing else is left behind;
* a run started with ``resume`` keeps them, so the same command continues where
  it stopped (a batch job killed by its scheduler passes ``--resume`` every time).

Resuming checks the fingerprint, the sha256 of the kept prefix and (with a
``count_records`` function) that the prefix holds as many applicants as the
progress file says; then it truncates the partial file to the checkpoint
(discarding a torn last line or a half-written chunk) and continues. Because
chunks are deterministic, the finished file is byte-identical to an
uninterrupted run. Resume is idempotent: with neither partial nor progress file
it starts fresh (:attr:`ResumableOutput.state` is ``"fresh"``), and when ``F``
exists without them the earlier run finished (``"complete"``): nothing is
written.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import stat
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from .exceptions import InputError
from .outputs import (
    foreign_file_error,
    fsync_folder,
    output_error,
    output_lock,
    own_file_identity,
    remove_own,
    replaced_file_mode,
    resolve_output,
    signals_held,
    terminate_on_signals,
)

__all__ = ["SIDECAR_SUFFIX", "PARTIAL_SUFFIX", "ResumableOutput", "sidecar_path", "partial_path"]

SIDECAR_SUFFIX = ".resume.json"
PARTIAL_SUFFIX = ".partial"
_VERSION = 2
_CHUNK = 1 << 20
_MAX_PROGRESS_BYTES = 1 << 20   # a progress file is a few hundred bytes: a larger file is not one of frpd's


def _looks_like_progress(state) -> bool:
    """Whether a parsed JSON document is a progress file as frpd writes it (:meth:`ResumableOutput._save`): its
    keys and their types, not merely a ``fingerprint`` key."""
    required = {"version", "fingerprint", "done", "offset"}
    if not isinstance(state, dict) or not required <= set(state) <= required | {"sha256"}:
        return False                    # (a first version of the format had no sha256)
    return (isinstance(state["fingerprint"], dict) and isinstance(state.get("sha256", ""), str) and all(
        isinstance(state[k], int) and not isinstance(state[k], bool) for k in ("version", "done", "offset")))


def _hash_prefix(handle, n: int, digest) -> None:
    """Feed the next ``n`` bytes of ``handle`` (fewer at its end) into ``digest``, in blocks."""
    while n:
        block = handle.read(min(_CHUNK, n))
        if not block:
            return
        digest.update(block)
        n -= len(block)


def sidecar_path(path) -> Path:
    """Where the progress file of output file ``path`` lives."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def partial_path(path) -> Path:
    """Where the records of output file ``path`` are written until the run succeeds."""
    path = Path(path)
    return path.with_name(path.name + PARTIAL_SUFFIX)


class _HashingText:
    """A UTF-8 text stream over a binary file that hashes every byte written."""

    def __init__(self, raw, digest, shown):
        self._raw = raw
        self.digest = digest
        self._shown = shown
        self.closed = False

    def write(self, text: str) -> int:
        data = text.encode("utf-8")
        try:
            self._raw.write(data)
        except OSError as exc:
            raise output_error(self._shown, exc) from None
        self.digest.update(data)
        return len(text)

    def flush(self) -> None:
        try:
            self._raw.flush()
        except OSError as exc:
            raise output_error(self._shown, exc) from None


class _Prefix(io.RawIOBase):
    """The first ``size`` bytes of a binary file, as a readable raw stream."""

    def __init__(self, raw, size: int):
        self._raw = raw
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._raw.readinto(memoryview(buffer)[: min(len(buffer), self._left)]) if self._left else 0
        self._left -= n or 0
        return n or 0


class ResumableOutput:
    """A text output file written in checkpointed chunks into ``F.partial``, renamed to ``F`` on success.

    Parameters
    ----------
    path : str or Path
        The output file ``F`` (a regular file or a new path; a symlink to a regular file is written through).
    fingerprint : dict
        JSON-able description of everything that determines the file's bytes (input hashes, parameters,
        format). A resume with another fingerprint is refused.
    resume : bool, default=False
        Continue an interrupted run; keep the partial and progress files if this run fails too.
    count_records : callable, optional
        ``count_records(stream) -> int``: how many applicants a binary stream of the kept prefix of the
        partial file holds (read it in blocks: memory stays bounded). When given, a resume whose progress
        file claims another count is refused.

    Attributes
    ----------
    state : {"fresh", "resumed", "complete"}
        ``complete``: ``resume`` was asked, ``F`` exists and there is no partial or progress file -- the
        earlier run finished; nothing is opened and :attr:`stream` is None.
    done : int
        Applicants already complete (0 for a fresh run).
    resumed_offset : int
        Bytes kept from the interrupted run (0 for a fresh run): a csv header is already there when it is
        positive.
    note : str or None
        What happened to leftovers of an earlier run, for the user.
    kept : bool
        The run stopped (a signal, or a failure with ``resume``) and its partial and progress files were kept
        for ``resume``.
    stream : text stream
        Where to write records; call :meth:`checkpoint` after each chunk, :meth:`finish` at the end. Use the
        object as a context manager so that a failure cleans up.

    Raises
    ------
    InputError
        The destination cannot be written (folder missing or read-only, a folder, not a regular file);
        another process is writing it (:class:`~frpd_cli.outputs.OutputBusyError`); ``resume`` with a
        progress file from another run, an edited partial file or an edited count; a partial or progress
        file that frpd did not make (a symlink, FIFO, hard link, folder, or a file not in frpd's format) is
        where frpd would write one: it is left untouched.

    Notes
    -----
    The partial file and every progress file are created with ``O_EXCL | O_NOFOLLOW``; leftovers of an earlier
    run are opened with ``O_NOFOLLOW | O_NONBLOCK`` after ``lstat`` shows a regular file with one name, and
    checked again on the open descriptor. Cleanup removes a file only while it is still the one this run made
    (same inode).
    """

    def __init__(self, path, *, fingerprint: dict, resume: bool = False,
                 count_records: Callable[[bytes], int] | None = None):
        self.path = Path(path)
        target = resolve_output(path)
        if target.kind != "file":
            raise InputError(f"Cannot write '{self.path}' chunk by chunk: it is not a regular file (a device, FIFO "
                             "or stdout is written directly, without resume).")
        self.target = target.real
        self.partial = partial_path(self.target)
        self.sidecar = sidecar_path(self.target)
        self.fingerprint = json.loads(json.dumps(fingerprint, sort_keys=True))
        self.resume = resume
        self._count = count_records
        self.done = 0
        self.resumed_offset = 0
        self._offset = 0                # the partial file's length at the last checkpoint its progress file holds
        self.note = None
        self.kept = False
        self.stream = None
        self._raw = None
        self._partial_id = None
        self._sidecar_id = None
        self._made_partial = False      # this run created the partial file (else it resumes one, or none exists)
        self._stack = ExitStack()
        self._stack.enter_context(terminate_on_signals())
        try:
            self._stack.enter_context(output_lock(self.target, shown=self.path))
            self._open()
        except BaseException:
            if self._made_partial:
                self._discard()         # what this run made, an empty partial file or a first progress file
            else:
                self.close()            # a refused resume keeps the files it was asked to continue
            raise

    # ---------------------------------------------------------------- leftovers of an earlier run
    def _shown(self, path: Path) -> Path:
        """A side file as the user would name it: beside ``path`` as given, unless a symlink led elsewhere."""
        given = Path(os.path.abspath(self.path))
        return self.path.with_name(path.name) if given.parent == path.parent else path

    def _foreign(self, path: Path, st: os.stat_result, role: str) -> InputError:
        return foreign_file_error(self._shown(path), st, f"the {role} file of '{self.path}'",
                                  "Move it away (or remove it if it is yours), then run again; or choose another "
                                  "output path.")

    def _leftover(self, path: Path, role: str) -> os.stat_result | None:
        """``lstat`` of a leftover side file, refused unless it is a regular file with one name."""
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise output_error(self._shown(path), exc) from None
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise self._foreign(path, st, role)
        return st

    def _open_leftover(self, path: Path, st: os.stat_result, role: str, flags: int) -> int:
        """Open a checked leftover without following a link or blocking on a FIFO swapped in meanwhile."""
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._foreign(path, os.stat(path, follow_symlinks=False), role) from None
            raise output_error(self._shown(path), exc) from None
        mine = os.fstat(fd)
        if (mine.st_dev, mine.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(mine.st_mode) \
                or mine.st_nlink != 1:
            os.close(fd)
            raise self._foreign(path, mine, role)
        return fd

    def _read_progress(self, st: os.stat_result) -> dict | None:
        """The progress file's content if it is one of frpd's (a JSON object with a fingerprint), else None."""
        if st.st_size > _MAX_PROGRESS_BYTES:
            return None
        fd = self._open_leftover(self.sidecar, st, "progress", os.O_RDONLY)
        try:
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(_MAX_PROGRESS_BYTES + 1)
        except OSError as exc:
            raise output_error(self._shown(self.sidecar), exc) from None
        try:
            state = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return None
        return state if _looks_like_progress(state) else None

    def _partial_matches(self, st: os.stat_result, progress: dict) -> bool:
        """Whether the partial file holds the bytes the progress file recorded (its first ``offset`` bytes hash
        to the recorded sha256): the pair one frpd run left, which a fresh run may discard."""
        try:
            offset, expected = int(progress["offset"]), str(progress["sha256"])
        except (KeyError, TypeError, ValueError):
            return False
        if offset < 0 or st.st_size < offset:
            return False
        fd = self._open_leftover(self.partial, st, "partial", os.O_RDONLY)
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "rb") as handle:
                _hash_prefix(handle, offset, digest)
        except OSError as exc:
            raise output_error(self._shown(self.partial), exc) from None
        return digest.hexdigest() == expected

    # ---------------------------------------------------------------- opening
    def _open(self) -> None:
        digest = hashlib.sha256()
        self.state = "fresh"
        partial_st = self._leftover(self.partial, "partial")
        progress_st = self._leftover(self.sidecar, "progress")
        progress = None if progress_st is None else self._read_progress(progress_st)
        if progress_st is not None and progress is None and not (self.resume and partial_st is not None):
            raise self._foreign(self.sidecar, progress_st, "progress")
        if self.resume and partial_st is not None and progress_st is not None:
            if progress is None:
                raise InputError(f"Cannot resume '{self.path}': its progress file '{self.sidecar.name}' is corrupted. "
                                 "Run again without --resume to start over.")
            fd = self._open_leftover(self.partial, partial_st, "partial", os.O_RDWR)
            self._raw = os.fdopen(fd, "r+b")
            self._load_checkpoint(progress, digest)
            self._partial_id = (partial_st.st_dev, partial_st.st_ino)
            self._sidecar_id = (progress_st.st_dev, progress_st.st_ino)
            self.state = "resumed"
            try:
                self._raw.seek(self.resumed_offset)
                self._raw.truncate(self.resumed_offset)
            except OSError as exc:
                raise output_error(self._shown(self.partial), exc) from None
        else:
            if self.resume and partial_st is None and progress_st is None:
                if self.target.exists():
                    self.state = "complete"
                    self.note = (f"'{self.path}' is complete (no partial or progress file is left): nothing to "
                                 "resume. Run without --resume to plan again.")
                    return
                self.note = f"Nothing to resume for '{self.path}': starting a fresh run."
            elif self.resume and progress_st is None:
                self.note = (f"'{self.partial.name}' has no progress file (the run stopped before its first "
                             "checkpoint): starting a fresh run.")
            elif self.resume:
                raise InputError(f"Cannot resume '{self.path}': its progress file '{self.sidecar.name}' is there "
                                 f"but the partial file '{self.partial.name}' is gone. Run again without --resume "
                                 "to start over.")
            elif partial_st is not None or progress_st is not None:
                self.note = (f"Discarding the partial output of an earlier run of '{self.path}' (pass --resume to "
                             "continue such a run instead).")
            # leftovers are removed only when they are frpd's: a progress file in frpd's format, and beside it
            # a partial file holding the bytes that progress file recorded (a run writes its first checkpoint as
            # soon as it has made the partial file, so a partial file alone, even an empty one, is not frpd's)
            if partial_st is not None and (progress_st is None or not self._partial_matches(partial_st, progress)):
                raise self._foreign(self.partial, partial_st, "partial")
            for path, st in ((self.partial, partial_st), (self.sidecar, progress_st)):
                if st is not None:
                    remove_own(path, (st.st_dev, st.st_ino))
            with signals_held():    # the file exists only once its identity is known to the cleanup
                try:
                    fd = os.open(self.partial, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                 0o600)
                except FileExistsError:
                    raise InputError(f"Cannot write '{self.path}': '{self.partial.name}' appeared while frpd was "
                                     "starting (another program writes there). Run again.") from None
                except OSError as exc:
                    raise output_error(self._shown(self.partial), exc) from None
                mine = os.fstat(fd)
                self._partial_id = (mine.st_dev, mine.st_ino)
                self._made_partial = True
            self._raw = os.fdopen(fd, "wb")
            try:        # the mode of the file it will replace: a 0600 target's plans are never more readable
                os.fchmod(fd, replaced_file_mode(self.target))
            except OSError:
                pass
        self._offset = self.resumed_offset
        self.stream = _HashingText(self._raw, digest, self._shown(self.partial))
        if self.state == "fresh":
            self._save(self.done, self._offset)

    def _load_checkpoint(self, state: dict, digest) -> None:
        redo = "Run again without --resume to start over."
        try:
            stored, done, offset = state["fingerprint"], int(state["done"]), int(state["offset"])
            expected = str(state["sha256"]) if state.get("version") == _VERSION else None
        except (ValueError, KeyError, TypeError):
            raise InputError(f"Cannot resume '{self.path}': its progress file '{self.sidecar.name}' is corrupted. "
                             f"{redo}") from None
        if expected is None:
            raise InputError(f"Cannot resume '{self.path}': its progress file was written by another frpd version. "
                             f"{redo}")
        if stored != self.fingerprint:
            keys = sorted(k for k in set(stored) | set(self.fingerprint) if stored.get(k) != self.fingerprint.get(k))
            raise InputError(
                f"Cannot resume '{self.path}': it was produced with other inputs or parameters "
                f"({', '.join(keys)} differ{'s' if len(keys) == 1 else ''}). Run again without --resume to start "
                "over, or with the original inputs and options."
            )
        raw = self._raw
        if done < 0 or offset < 0 or os.fstat(raw.fileno()).st_size < offset:
            raise InputError(f"Cannot resume '{self.path}': the partial file '{self.partial.name}' is shorter than "
                             f"its progress file says ({offset} bytes expected). {redo}")
        try:
            raw.seek(0)
            _hash_prefix(raw, offset, digest)
            if digest.hexdigest() != expected:
                raise InputError(f"Cannot resume '{self.path}': the first {offset} bytes of '{self.partial.name}' "
                                 f"are not the ones the run wrote (their sha256 differs): the file was edited. {redo}")
            if self._count is not None:
                raw.seek(0)
                found = self._count(io.BufferedReader(_Prefix(raw, offset), _CHUNK))
                if found != done:
                    raise InputError(f"Cannot resume '{self.path}': its progress file says {done} applicant(s) are "
                                     f"complete but '{self.partial.name}' holds {found}: the progress file was "
                                     f"edited. {redo}")
        except OSError as exc:
            raise output_error(self._shown(self.partial), exc) from None
        self.done = done
        self.resumed_offset = offset

    # ---------------------------------------------------------------- writing
    def _save(self, done: int, offset: int) -> None:
        """Replace the progress file atomically with a new one (created exclusively) holding the checkpoint: ``done``
        applicants complete in the first ``offset`` bytes of the partial file (all the bytes hashed so far)."""
        state = {"version": _VERSION, "fingerprint": self.fingerprint, "done": done, "offset": offset,
                 "sha256": self.stream.digest.hexdigest()}
        data = json.dumps(state, sort_keys=True, indent=1).encode("utf-8")
        tmp = None
        try:
            with signals_held():
                fd, tmp = tempfile.mkstemp(dir=self.sidecar.parent, prefix=f".{self.sidecar.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
                os.fchmod(handle.fileno(), replaced_file_mode(self.target))
                mine = os.fstat(handle.fileno())
            os.replace(tmp, self.sidecar)
            tmp = None
            self._sidecar_id = (mine.st_dev, mine.st_ino)
        except OSError as exc:
            raise output_error(self._shown(self.sidecar), exc) from None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def _sync(self) -> int:
        """Flush and fsync the partial file; return its length."""
        try:
            self._raw.flush()
            os.fsync(self._raw.fileno())
            return self._raw.tell()
        except OSError as exc:
            raise output_error(self._shown(self.partial), exc) from None

    def checkpoint(self, n_done: int) -> None:
        """Record that the first ``n_done`` applicants are complete in the partial file.

        :attr:`done` (and the offset kept for ``resume``) change only once the progress file holds them: after a
        failed progress write they still describe the last checkpoint written.
        """
        offset = self._sync()
        self._save(int(n_done), offset)
        self.done, self._offset = int(n_done), offset

    def finish(self) -> None:
        """Rename the complete partial file over the destination, remove the progress file, release the lock."""
        self._sync()
        try:
            self._raw.close()
        except OSError as exc:
            raise output_error(self._shown(self.partial), exc) from None
        existing = self.target.stat() if self.target.exists() else None
        try:
            if existing is not None:
                os.chmod(self.partial, existing.st_mode & 0o7777)
            if own_file_identity(self.partial) != self._partial_id:
                raise InputError(f"Cannot write '{self.path}': '{self.partial.name}' was replaced by another "
                                 "program during the run. Run again.")
            os.replace(self.partial, self.target)
        except OSError as exc:
            raise output_error(self.path, exc) from None
        self._partial_id = None
        remove_own(self.sidecar, self._sidecar_id)
        fsync_folder(self.target.parent)
        self.state = "complete"
        self._stack.close()

    def abort(self) -> None:
        """Stop after a failure: keep the partial and progress files with ``resume``, else remove them."""
        if self.resume:
            self._keep()
            self.kept = self.partial.exists()
        else:
            self._discard()

    def _keep(self) -> None:
        """Close, cutting the partial file back to the last checkpoint its progress file records (what a resume
        keeps: bytes written after it, a chunk whose checkpoint was never written, are planned again), and unlock.

        The file is cut through a duplicate of this run's own descriptor once the stream is closed (its last
        buffered bytes flushed or dropped), never through its path; if the cut fails the resume does it.
        """
        fd = None
        if self._raw is not None and not self._raw.closed:
            try:
                fd = os.dup(self._raw.fileno())
            except OSError:
                pass
        self._close_raw()
        if fd is not None:
            try:
                if os.fstat(fd).st_size > self._offset:
                    os.ftruncate(fd, self._offset)
                    os.fsync(fd)
            except OSError:
                pass
            finally:
                os.close(fd)
        self._stack.close()

    def _discard(self) -> None:
        """Close and remove the partial and progress files this run made (never another file), then unlock."""
        self._close_raw()
        remove_own(self.partial, self._partial_id)
        remove_own(self.sidecar, self._sidecar_id)
        self._stack.close()

    def _close_raw(self) -> None:
        if self._raw is not None and not self._raw.closed:
            try:
                self._raw.close()
            except OSError:
                pass        # unwritten data is discarded; the error that stopped the run is the one reported

    def close(self) -> None:
        """Close without finishing or cleaning up (what a crash leaves), and release the lock."""
        self._close_raw()
        self._stack.close()

    def __enter__(self) -> "ResumableOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None or self.state == "complete":
            self.close()
        elif issubclass(exc_type, KeyboardInterrupt) and self.done > 0:
            # interrupted (Ctrl-C, SIGTERM, SIGHUP) after a checkpoint: keep the work for --resume
            self._keep()
            self.kept = True
        else:
            self.abort()
