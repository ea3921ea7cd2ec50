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

import hashlib
import io
import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Callable

from .artifacts import atomic_write_bytes
from .exceptions import InputError
from .outputs import default_file_mode, fsync_folder, output_error, output_lock, resolve_output, terminate_on_signals

__all__ = ["SIDECAR_SUFFIX", "PARTIAL_SUFFIX", "ResumableOutput", "sidecar_path", "partial_path"]

SIDECAR_SUFFIX = ".resume.json"
PARTIAL_SUFFIX = ".partial"
_VERSION = 2
_CHUNK = 1 << 20


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
    stream : text stream
        Where to write records; call :meth:`checkpoint` after each chunk, :meth:`finish` at the end. Use the
        object as a context manager so that a failure cleans up.

    Raises
    ------
    InputError
        The destination cannot be written (folder missing or read-only, a folder, not a regular file);
        another process is writing it (:class:`~frpd_cli.outputs.OutputBusyError`); ``resume`` with a
        progress file from another run, an edited partial file or an edited count.
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
        self.note = None
        self.stream = None
        self._raw = None
        self._stack = ExitStack()
        self._stack.enter_context(terminate_on_signals())
        try:
            self._stack.enter_context(output_lock(self.target, shown=self.path))
            self._open()
        except BaseException:
            self._stack.close()
            raise

    # ---------------------------------------------------------------- opening
    def _open(self) -> None:
        digest = hashlib.sha256()
        self.state = "fresh"
        if self.resume:
            has_partial, has_progress = self.partial.exists(), self.sidecar.exists()
            if not has_partial and not has_progress:
                if self.target.exists():
                    self.state = "complete"
                    self.note = (f"'{self.path}' is complete (no partial or progress file is left): nothing to "
                                 "resume. Run without --resume to plan again.")
                    return
                self.note = f"Nothing to resume for '{self.path}': starting a fresh run."
            elif has_partial and not has_progress:
                self.note = (f"'{self.partial.name}' has no progress file (the run stopped before its first "
                             "checkpoint): starting a fresh run.")
            elif has_progress and not has_partial:
                raise InputError(f"Cannot resume '{self.path}': its progress file '{self.sidecar.name}' is there "
                                 f"but the partial file '{self.partial.name}' is gone. Run again without --resume "
                                 "to start over.")
            else:
                self._load_checkpoint(digest)
                self.state = "resumed"
        elif self.partial.exists() or self.sidecar.exists():
            self.note = (f"Discarding the partial output of an earlier run of '{self.path}' (pass --resume to "
                         "continue such a run instead).")
        try:
            if self.state == "resumed":
                self._raw = open(self.partial, "r+b")
                self._raw.seek(self.resumed_offset)
                self._raw.truncate(self.resumed_offset)
            else:
                self._raw = open(self.partial, "wb")
                os.chmod(self.partial, default_file_mode())
        except OSError as exc:
            raise output_error(self.path, exc) from None
        self._offset = self.resumed_offset
        self.stream = _HashingText(self._raw, digest, self.path)
        if self.state == "fresh":
            self._save()

    def _load_checkpoint(self, digest) -> None:
        redo = "Run again without --resume to start over."
        try:
            state = json.loads(self.sidecar.read_text(encoding="utf-8"))
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
        if done < 0 or offset < 0 or self.partial.stat().st_size < offset:
            raise InputError(f"Cannot resume '{self.path}': the partial file '{self.partial.name}' is shorter than "
                             f"its progress file says ({offset} bytes expected). {redo}")
        with open(self.partial, "rb") as handle:
            left = offset
            while left:
                block = handle.read(min(_CHUNK, left))
                if not block:
                    break
                digest.update(block)
                left -= len(block)
        if digest.hexdigest() != expected:
            raise InputError(f"Cannot resume '{self.path}': the first {offset} bytes of '{self.partial.name}' are "
                             f"not the ones the run wrote (their sha256 differs): the file was edited. {redo}")
        if self._count is not None:
            with open(self.partial, "rb", buffering=0) as raw:
                found = self._count(io.BufferedReader(_Prefix(raw, offset), _CHUNK))
            if found != done:
                raise InputError(f"Cannot resume '{self.path}': its progress file says {done} applicant(s) are "
                                 f"complete but '{self.partial.name}' holds {found}: the progress file was edited. "
                                 f"{redo}")
        self.done = done
        self.resumed_offset = offset

    # ---------------------------------------------------------------- writing
    def _save(self) -> None:
        state = {"version": _VERSION, "fingerprint": self.fingerprint, "done": self.done, "offset": self._offset,
                 "sha256": self.stream.digest.hexdigest()}
        data = json.dumps(state, sort_keys=True, indent=1).encode("utf-8")
        try:
            atomic_write_bytes(self.sidecar, data)
        except OSError as exc:
            raise output_error(self.path, exc) from None

    def _sync(self) -> None:
        try:
            self._raw.flush()
            os.fsync(self._raw.fileno())
        except OSError as exc:
            raise output_error(self.path, exc) from None
        self._offset = self._raw.tell()

    def checkpoint(self, n_done: int) -> None:
        """Record that the first ``n_done`` applicants are complete in the partial file."""
        self._sync()
        self.done = int(n_done)
        self._save()

    def finish(self) -> None:
        """Rename the complete partial file over the destination, remove the progress file, release the lock."""
        self._sync()
        self._raw.close()
        existing = self.target.stat() if self.target.exists() else None
        try:
            if existing is not None:
                os.chmod(self.partial, existing.st_mode & 0o7777)
            os.replace(self.partial, self.target)
        except OSError as exc:
            raise output_error(self.path, exc) from None
        self.sidecar.unlink(missing_ok=True)
        fsync_folder(self.target.parent)
        self.state = "complete"
        self._stack.close()

    def abort(self) -> None:
        """Stop after a failure: keep the partial and progress files with ``resume``, else remove them."""
        self.close()
        if not self.resume:
            self.partial.unlink(missing_ok=True)
            self.sidecar.unlink(missing_ok=True)

    def close(self) -> None:
        """Close without finishing or cleaning up (what a crash leaves), and release the lock."""
        if self._raw is not None and not self._raw.closed:
            self._raw.close()
        self._stack.close()

    def __enter__(self) -> "ResumableOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self.state != "complete":
            self.abort()
        else:
            self.close()
