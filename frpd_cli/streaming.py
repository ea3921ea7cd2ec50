"""Output files that are written chunk by chunk and can be resumed after a crash.

A long ``frpd plan`` writes each chunk of applicants as soon as it is done. Next
to the output file ``F`` it keeps a sidecar ``F.resume.json`` holding a
fingerprint of the run (input hashes, parameters, format) and a *checkpoint*:
how many applicants are complete and the byte offset where their records end.
The sidecar is replaced atomically after the chunk's bytes are flushed and
fsynced, so it never claims more than the file holds.

Resuming truncates the file to the checkpoint (discarding a torn last line or a
half-written chunk) and continues with the next applicant. Because chunks are
deterministic, the finished file is byte-identical to an uninterrupted run.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from .artifacts import atomic_write_text, fsync_dir
from .exceptions import InputError

__all__ = ["SIDECAR_SUFFIX", "ResumableOutput", "sidecar_path"]

SIDECAR_SUFFIX = ".resume.json"
_VERSION = 1


def sidecar_path(path) -> Path:
    """Where the sidecar of output file ``path`` lives."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


class ResumableOutput:
    """A text output file written in checkpointed chunks.

    Parameters
    ----------
    path : str or Path
        The output file.
    fingerprint : dict
        JSON-able description of everything that determines the file's bytes
        (input hashes, parameters, format). A resume with another fingerprint
        is refused.
    resume : bool, default=False
        Continue an interrupted run instead of starting over.

    Attributes
    ----------
    done : int
        Applicants already complete in the file (0 for a fresh run).
    resumed_offset : int
        Bytes kept from the interrupted run (0 for a fresh run): a csv header
        is already there when it is positive.
    stream : text stream
        Where to write records; call :meth:`checkpoint` after each chunk.

    Raises
    ------
    InputError
        The folder does not exist or is not writable; ``resume`` without a
        partial file and sidecar, or with a sidecar from another run.
    """

    def __init__(self, path, *, fingerprint: dict, resume: bool = False):
        self.path = Path(path)
        self.sidecar = sidecar_path(self.path)
        self.fingerprint = json.loads(json.dumps(fingerprint, sort_keys=True))
        directory = self.path.parent if str(self.path.parent) else Path(".")
        if not directory.is_dir():
            raise InputError(f"Cannot write '{self.path}': the folder '{directory}' does not exist.")
        if not os.access(directory, os.W_OK):
            raise InputError(f"Cannot write '{self.path}': the folder '{directory}' is not writable.")
        self.done = 0
        self.complete = False
        offset = 0
        if resume:
            offset = self._load_checkpoint()
        self._offset = offset
        self.resumed_offset = offset
        try:
            self._raw = open(self.path, "r+b" if resume else "wb")
            if resume:
                self._raw.seek(offset)
                self._raw.truncate(offset)
            self.stream = io.TextIOWrapper(self._raw, encoding="utf-8", newline="", write_through=True)
            if not resume:
                self._save(complete=False)
        except OSError as exc:
            if getattr(self, "_raw", None) is not None:
                self._raw.close()
                if not resume:
                    self.path.unlink(missing_ok=True)
            raise InputError(f"Cannot write '{self.path}': {exc.strerror or exc}.") from None

    # ---------------------------------------------------------------- resume
    def _load_checkpoint(self) -> int:
        if not self.sidecar.exists():
            if self.path.exists():
                raise InputError(
                    f"Cannot resume '{self.path}': it has no progress file '{self.sidecar.name}' (the run that wrote "
                    "it finished, or another program wrote it). Run again without --resume to start over."
                )
            raise InputError(f"Cannot resume '{self.path}': the file does not exist. Run without --resume.")
        try:
            state = json.loads(self.sidecar.read_text(encoding="utf-8"))
            stored, done, offset = state["fingerprint"], int(state["done"]), int(state["offset"])
            complete = bool(state.get("complete", False))
        except (ValueError, KeyError, TypeError):
            raise InputError(
                f"Cannot resume '{self.path}': its progress file '{self.sidecar.name}' is corrupted. "
                "Run again without --resume to start over."
            ) from None
        if state.get("version") != _VERSION:
            raise InputError(f"Cannot resume '{self.path}': its progress file was written by another frpd version.")
        if stored != self.fingerprint:
            keys = sorted(k for k in set(stored) | set(self.fingerprint) if stored.get(k) != self.fingerprint.get(k))
            raise InputError(
                f"Cannot resume '{self.path}': it was produced with other inputs or parameters "
                f"({', '.join(keys)} differ{'s' if len(keys) == 1 else ''}). Run again without --resume to start "
                "over, or with the original inputs and options."
            )
        if not self.path.exists() or self.path.stat().st_size < offset:
            raise InputError(
                f"Cannot resume '{self.path}': the file is shorter than its progress file says "
                f"({offset} bytes expected). Run again without --resume to start over."
            )
        self.done = done
        self.complete = complete
        return offset

    # ---------------------------------------------------------------- writing
    def _save(self, *, complete: bool) -> None:
        state = {"version": _VERSION, "fingerprint": self.fingerprint, "done": self.done, "offset": self._offset,
                 "complete": complete}
        atomic_write_text(self.sidecar, json.dumps(state, sort_keys=True, indent=1))

    def _sync(self) -> None:
        self.stream.flush()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._offset = self._raw.tell()

    def checkpoint(self, n_done: int) -> None:
        """Record that the first ``n_done`` applicants are complete in the file."""
        self._sync()
        self.done = int(n_done)
        self._save(complete=False)

    def finish(self) -> None:
        """Close the complete file and remove its sidecar (there is nothing left to resume)."""
        self._sync()
        self.stream.close()
        self.complete = True
        self.sidecar.unlink(missing_ok=True)
        fsync_dir(self.sidecar.parent)

    def close(self) -> None:
        """Close without marking complete (the run can be resumed)."""
        if not self.stream.closed:
            self.stream.close()
