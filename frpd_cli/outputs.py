"""One output layer for every command: safe replacement of files, direct writes to streams, locks, spooled input.

Every file frpd writes goes through this module, so the same guarantees hold for
``plan --output``, ``evaluate --output/--plot``, ``build-graph --export`` and the
records ``interpolate`` prints:

* **Regular files** (and new paths) are written to a temporary file in the same
  folder, fsynced, and renamed over the destination only when the run succeeded.
  A failed or interrupted run (any exception, SIGINT, SIGTERM, SIGHUP) removes the
  temporary file; an existing file stays byte for byte as it was.
* **Anything else** -- ``-`` (stdout), ``/dev/stdout``, ``/dev/fd/N`` (a process
  substitution), a FIFO, a character or block device -- is written to directly:
  never renamed, never truncated ahead of time, never fsynced.
* **A symlink** is written through only when it points to a regular file the
  caller may write: the file it points to is replaced (in its own folder) and the
  link stays a link. A dangling link, or one to a file the caller may not write,
  is refused.
* **Inputs are never outputs**: :func:`check_not_inputs` refuses an output path
  that resolves to an input (same inode, or same real path), an output folder
  that contains an input, and an output inside an input folder.
* **One writer per file**: :func:`lock_outputs` takes an advisory ``flock`` on a
  lock file ``.NAME.lock`` beside each destination before the command reads any
  input, held for the whole run; a second writer is refused at once, naming the
  first one's process id.
* **Side files are frpd's own**: lock, partial, progress and temporary files are
  created exclusively (``O_EXCL``, ``O_NOFOLLOW``); one found at their path is used
  only when it is a regular file with one name in frpd's format, never followed,
  truncated or deleted otherwise, and frpd removes a file only while it is still
  the one it made (same inode).
* **Input that is not a regular file** (``-`` for stdin, ``/dev/stdin``,
  ``<(...)``) is spooled once to a temporary file (:func:`spool_input`), so
  readers that pass over it twice read the same bytes.

The numerical core never imports this module; the command line does.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from .exceptions import InputError

__all__ = [
    "STDIO",
    "OutputBusyError",
    "OutputTarget",
    "SpooledInput",
    "Terminated",
    "check_artifact_folder",
    "check_not_inputs",
    "default_file_mode",
    "fsync_folder",
    "is_stdio",
    "foreign_file_error",
    "lock_outputs",
    "lock_path",
    "open_output",
    "output_error",
    "output_lock",
    "output_path",
    "own_file_identity",
    "remove_own",
    "replaced_file_mode",
    "resolve_output",
    "signals_held",
    "spool_input",
    "terminate_on_signals",
]

STDIO = "-"
_FD_ALIAS = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/thread-self/fd)/(\d+)$")
_STD_ALIAS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


class OutputBusyError(InputError):
    """Another process holds the lock of an output file."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: raised in the main thread so that cleanup (``finally``) runs.

    It derives from :class:`KeyboardInterrupt` so that code catching ``Exception`` does not swallow it and
    parallel backends shut their workers down as on Ctrl-C.
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def is_stdio(path) -> bool:
    """Whether ``path`` is ``-`` (stdout for an output, stdin for an input)."""
    return path is not None and str(path) == STDIO


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_read_umask()  # read once at import: os.umask is process-wide


def default_file_mode() -> int:
    """Permission bits of a new output file (0o666 minus the umask, as ``open`` would give)."""
    return _NEW_FILE_MODE


def replaced_file_mode(path, *, follow_symlinks: bool = True) -> int:
    """Permission bits for a file about to replace ``path``: those of ``path`` when it is a regular file (a
    user's 0600 plans file stays 0600; its setuid, setgid and sticky bits are dropped), else
    :func:`default_file_mode`.

    ``follow_symlinks=False`` when the rename replaces a symlink at ``path`` itself rather than its target.
    """
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except (OSError, ValueError):
        return _NEW_FILE_MODE
    # the read, write and execute bits only: a setuid, setgid or sticky bit is not handed to new contents
    return stat.S_IMODE(st.st_mode) & 0o777 if stat.S_ISREG(st.st_mode) else _NEW_FILE_MODE


# ---------------------------------------------------------------------------- signals


def _raise_terminated(signum, frame):
    # a second signal during cleanup takes the default action (the process ends)
    signal.signal(signum, signal.SIG_DFL)
    raise Terminated(signum)


_TERMINATING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


@contextmanager
def terminate_on_signals():
    """Turn SIGTERM and SIGHUP into :class:`Terminated` while the block runs (main thread only; nestable)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in _TERMINATING:
        current = signal.getsignal(signum)
        if current is signal.SIG_IGN or current is _raise_terminated:
            continue  # ignored on purpose (nohup), or already installed by an outer block
        previous[signum] = current
        signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


_HELD = tuple(s for s in (getattr(signal, "SIGINT", None), *_TERMINATING) if s)


@contextmanager
def signals_held():
    """Hold SIGINT, SIGTERM and SIGHUP while the block runs; they are delivered (and handled) when it ends.

    For the few statements that create a temporary file and record its name: a signal handled between the two
    (Ctrl-C, or :class:`Terminated`) would leave a file no cleanup knows of. The caller enters its cleanup
    ``try`` before the block, so that a signal delivered as the block ends is cleaned up after.

    The signals' handlers are replaced for the block by one that only notes the signal, which is raised again
    once the original handlers are back. (Blocking the signals with ``pthread_sigmask`` would not do: it blocks
    them in the calling thread only, and the kernel hands a process's signal to any other thread -- a BLAS
    thread -- while Python still runs the handler in the main thread at once.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}

    def note(signum, frame):
        pending.append(signum)

    for signum in _HELD:
        handler = signal.getsignal(signum)
        if handler is signal.SIG_IGN or handler is None:
            continue                        # ignored (nohup, a background job) or not set from Python
        previous[signum] = handler
        signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)


# ---------------------------------------------------------------------------- resolving an output


@dataclass(frozen=True)
class OutputTarget:
    """Where an output path leads.

    Attributes
    ----------
    path : Path
        The path as given (used in messages).
    kind : {"stdout", "stream", "file"}
        ``stdout`` for ``-``; ``stream`` for anything written to directly (device, FIFO, an open file
        descriptor); ``file`` for a regular file or a new path, replaced atomically.
    real : Path or None
        For ``file``: the path that is replaced (a symlink's target, resolved).
    fd : int or None
        For ``/dev/stdout``, ``/dev/fd/N`` and the like: the descriptor written to (duplicated).
    """

    path: Path
    kind: str
    real: Path | None = None
    fd: int | None = None


def _fd_alias(text: str) -> int | None:
    if text in _STD_ALIAS:
        return _STD_ALIAS[text]
    match = _FD_ALIAS.match(text)
    return int(match.group(1)) if match else None


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def resolve_output(path) -> OutputTarget:
    """Classify an output path without opening it for writing.

    Raises
    ------
    InputError
        The path is a folder, its folder does not exist or is not writable, it is a dangling symlink or a
        symlink to something the caller may not write, or it names a descriptor that is not open.
    """
    if is_stdio(path):
        return OutputTarget(Path(STDIO), "stdout")
    path = Path(path)
    fd = _fd_alias(os.path.abspath(path))
    if fd is not None:
        try:
            os.fstat(fd)
        except OSError:
            raise InputError(f"Cannot write '{path}': file descriptor {fd} is not open in this process.") from None
        return OutputTarget(path, "stream", fd=fd)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"Cannot write '{path}': it is a symlink to '{os.readlink(path)}', which does not "
                             "exist. frpd writes through a symlink only to an existing regular file; remove the "
                             "link or pass the target's path.") from None
        real = Path(os.path.realpath(path))
        _check_folder(path, _folder(real))
        return OutputTarget(path, "file", real=real)
    except NotADirectoryError:
        raise InputError(f"Cannot write '{path}': a part of its folder is a file, not a folder.") from None
    except OSError as exc:
        raise output_error(path, exc) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"Cannot write '{path}': it is a folder. Pass a file name, e.g. "
                         f"'{path / ('plans' + '.csv')}'.")
    if not stat.S_ISREG(st.st_mode):
        return OutputTarget(path, "stream")
    real = Path(os.path.realpath(path))
    if os.path.islink(path) and not os.access(real, os.W_OK):
        raise InputError(f"Cannot write '{path}': it is a symlink to '{real}', which you may not write. frpd "
                         "writes through a symlink only to a regular file you could write directly.")
    _check_folder(path, _folder(real))
    return OutputTarget(path, "file", real=real)


def _check_folder(path: Path, folder: Path) -> None:
    if not folder.is_dir():
        raise InputError(f"Cannot write '{path}': the folder '{folder}' does not exist. Create it first, or "
                         "choose another path.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"Cannot write '{path}': the folder '{folder}' is not writable (frpd builds the output "
                         "there under a temporary name and renames it). Choose another folder or change its "
                         "permissions.")


def check_artifact_folder(path) -> None:
    """Refuse an artifact folder ``--out`` whose parent folder is missing or not writable, before any work.

    What may be replaced inside an existing folder is decided when the artifact is written.
    """
    path = Path(path)
    _check_folder(path, _folder(Path(os.path.abspath(path))))


def output_error(path, exc: OSError) -> InputError:
    """An :class:`InputError` for an OSError met while writing ``path``: what went wrong and what to do."""
    folder = _folder(Path(path))
    code = getattr(exc, "errno", None)
    if code == errno.ENOSPC or code == errno.EDQUOT:
        hint = f"the disk is full ({exc.strerror}). Free space in '{folder}' or choose another folder"
    elif code in (errno.EACCES, errno.EPERM):
        hint = f"permission denied. Choose another path or change the permissions of '{folder}'"
    elif code == errno.EROFS:
        hint = f"'{folder}' is on a read-only file system. Choose another folder"
    elif code == errno.EISDIR:
        hint = "it is a folder. Pass a file name"
    elif code == errno.ENOENT:
        hint = f"the folder '{folder}' does not exist. Create it first"
    elif code == errno.EFBIG:
        hint = (f"the file would exceed the largest file size allowed ({exc.strerror}; see 'ulimit -f' or the file "
                "system's limit). Raise the limit or choose another folder")
    elif code == errno.ENXIO:
        hint = "nothing is reading from it (a FIFO without a reader, or a socket). Start the reader first"
    else:
        hint = f"{exc.strerror or exc}"
    return InputError(f"Cannot write '{path}': {hint}.")


# ---------------------------------------------------------------------------- inputs are not outputs


def _stat(path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _inside(child: str, parent: str) -> bool:
    try:
        return child != parent and os.path.commonpath([child, parent]) == parent
    except ValueError:
        return False


def _stdin_file() -> os.stat_result | None:
    """``fstat`` of standard input when it is a regular file (redirected from one), else None."""
    try:
        st = os.fstat(0)
    except (OSError, ValueError):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _artifact_folder(source, in_stat) -> str | None:
    """The folder an input stands for when it is an artifact's ``manifest.json`` (``--refits R`` is read as
    ``R/manifest.json``): every file in that folder is part of the input."""
    if in_stat is None or not stat.S_ISREG(in_stat.st_mode) or os.path.basename(str(source)) != "manifest.json":
        return None
    return os.path.dirname(str(source)) or "."


#: Names of the side files frpd keeps beside an output (``FILE.partial``, ``FILE.resume.json``, ``.FILE.lock``):
#: an output of that name would write over another run's side file.
_SIDE_FILE = re.compile(r".+\.(?:partial|resume\.json)|\..+\.lock")


def check_not_inputs(outputs: Mapping[str, object], inputs: Mapping[str, object]) -> None:
    """Refuse outputs that would overwrite or delete an input of the same command.

    Parameters
    ----------
    outputs : mapping of str to path or None
        What the command writes, by the name of its option (``"--output"``, ``"--out"``); files and artifact
        folders. ``None`` and ``-`` are skipped, and so are devices and FIFOs (writing to them destroys no
        file).
    inputs : mapping of str to path or None
        What the command reads, by name (``"data"``, ``"model"``, ``"applicants"``...): files or folders.

    Raises
    ------
    InputError
        An output is an input (same inode or same real path, or the file stdin is redirected from for an input
        ``-``), an output folder contains an input, an output lies inside an input folder (or inside the folder
        of an input artifact's ``manifest.json``), an option's output has the name of an output's side file,
        or two outputs are the same path or one lies inside the other. Nothing has been opened for writing.
    """
    checked = [(name, path) for name, path in outputs.items() if path is not None and not is_stdio(path)]
    seen: dict[str, str] = {}
    for out_name, out in checked:
        out_stat = _stat(out)
        if out_stat is not None and not (stat.S_ISREG(out_stat.st_mode) or stat.S_ISDIR(out_stat.st_mode)):
            continue
        out_real = os.path.realpath(out)
        if out_name.startswith("--") and _SIDE_FILE.fullmatch(os.path.basename(out_real)):   # a user's output
            raise InputError(f"The output {out_name} '{out}' has the name of a side file frpd keeps beside an output "
                             "(FILE.partial, FILE.resume.json, .FILE.lock): writing it could replace another run's. "
                             "Choose another name.")
        if out_real in seen:
            raise InputError(f"The outputs {seen[out_real]} and {out_name} are the same path '{out}'; give each "
                             "its own path.")
        for other_real, other_name in seen.items():
            if _inside(out_real, other_real) or _inside(other_real, out_real):
                inner, outer = (out_name, other_name) if _inside(out_real, other_real) else (other_name, out_name)
                raise InputError(f"The output {inner} is inside the output folder {outer}; put it outside "
                                 "(frpd replaces that folder as a whole).")
        seen[out_real] = out_name
        for in_name, source in inputs.items():
            if source is None:
                continue
            if is_stdio(source):
                # stdin redirected from the output file (``--applicants - --output a.csv < a.csv``)
                in_stat = _stdin_file()
                if out_stat is not None and in_stat is not None \
                        and (out_stat.st_dev, out_stat.st_ino) == (in_stat.st_dev, in_stat.st_ino):
                    raise InputError(f"The output {out_name} '{out}' is the file the {in_name} input '-' (stdin) "
                                     "reads: writing it would destroy the input. Choose another output path.")
                continue
            in_stat = _stat(source)
            in_real = os.path.realpath(source)
            same = (out_stat is not None and in_stat is not None
                    and (out_stat.st_dev, out_stat.st_ino) == (in_stat.st_dev, in_stat.st_ino))
            if same or out_real == in_real:
                raise InputError(f"The output {out_name} '{out}' is the {in_name} input '{source}': writing it "
                                 "would destroy the input. Choose another output path.")
            if _inside(in_real, out_real):
                raise InputError(f"The output folder {out_name} '{out}' contains the {in_name} input '{source}': "
                                 "replacing the folder would delete it. Choose another output folder.")
            if in_stat is not None and stat.S_ISDIR(in_stat.st_mode) and _inside(out_real, in_real):
                raise InputError(f"The output {out_name} '{out}' is inside the {in_name} folder '{source}': "
                                 "writing it would change that input. Choose a path outside it.")
            folder = _artifact_folder(source, in_stat)
            if folder is not None and _inside(out_real, os.path.realpath(folder)):
                raise InputError(f"The output {out_name} '{out}' is inside the {in_name} folder '{folder}': "
                                 "writing it would change that input. Choose a path outside it.")


# ---------------------------------------------------------------------------- locks


def lock_path(path) -> Path:
    """The lock file of output ``path``: ``.NAME.lock`` beside it."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


#: What frpd writes in its lock files: ``frpd PID``. A file at a lock's path that holds anything else (only digits,
#: nothing) is not frpd's and is never taken over or deleted.
_LOCK_TEXT = re.compile(rb"frpd ([0-9]{1,12})")


def _lock_text() -> bytes:
    return f"frpd {os.getpid()}\n".encode("ascii")


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).strip()
    except OSError:
        text = b""
    found = _LOCK_TEXT.fullmatch(text)
    return found.group(1).decode("ascii") if found else "unknown"


_KINDS = ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def _what(st: os.stat_result) -> str:
    """What a non-regular file is, for messages."""
    return next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")


def foreign_file_error(path, st: os.stat_result, role: str, remedy: str) -> InputError:
    """The error for a side file of an output (lock, partial, progress) that frpd did not make.

    Parameters
    ----------
    path : path
        The side file.
    st : os.stat_result
        Its ``lstat``.
    role : str
        What frpd keeps there (``"lock file"``...), e.g. ``"the lock file of 'plans.csv'"``.
    remedy : str
        What to do, a sentence.
    """
    if not stat.S_ISREG(st.st_mode):
        what = _what(st)
    elif st.st_nlink != 1:
        what = f"a hard link to a file that has {st.st_nlink} names"
    else:
        what = "a file frpd did not write"
    return InputError(f"'{path}', {role}, is {what}: frpd never follows, opens for writing, truncates or deletes "
                      f"such a file. {remedy}")


def own_file_identity(path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of what is at ``path`` (not following a symlink), or None."""
    st = _stat_nofollow(path)
    return None if st is None else (st.st_dev, st.st_ino)


def remove_own(path, identity) -> None:
    """Remove ``path`` only while it is still the file frpd made (the same ``(st_dev, st_ino)``)."""
    if identity is not None and own_file_identity(path) == tuple(identity):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


_LOCK_MAX_BYTES = 32
_NEVER_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)


def _foreign_lock(shown, st: os.stat_result) -> InputError:
    return foreign_file_error(lock_path(shown), st, f"the lock file of '{shown}'",
                              f"Remove or rename it if it is yours, then write '{shown}' again (or choose another "
                              "output path).")


def _open_existing_lock(lock: Path, shown) -> int | None:
    """Open a lock file left by another frpd process (running or killed), after checking it is one.

    Returns None when it disappeared meanwhile (its writer finished): the caller creates it again.
    """
    st = _stat_nofollow(lock)
    if st is None:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > _LOCK_MAX_BYTES:
        raise _foreign_lock(shown, st)
    try:
        fd = os.open(lock, os.O_RDWR | _NEVER_FOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:       # replaced by a symlink since we looked
            raise _foreign_lock(shown, _stat_nofollow(lock) or st) from None
        raise output_error(shown, exc) from None
    mine = os.fstat(fd)
    text = os.pread(fd, _LOCK_MAX_BYTES + 1, 0).strip()
    # empty: a writer that has just created it and not yet written its pid (it holds the flock: busy, below), or a
    # file that is not frpd's (nobody holds it: refused after the flock)
    if ((mine.st_dev, mine.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(mine.st_mode)
            or mine.st_nlink != 1 or not (text == b"" or _LOCK_TEXT.fullmatch(text))):
        os.close(fd)
        raise _foreign_lock(shown, mine)
    return fd


def _refuse_if_not_frpds(fd: int, shown) -> None:
    """After the flock on an existing lock file: refuse it (closing ``fd``) unless it holds ``frpd PID``."""
    text = os.pread(fd, _LOCK_MAX_BYTES + 1, 0).strip()
    if not _LOCK_TEXT.fullmatch(text):
        mine = os.fstat(fd)
        os.close(fd)
        raise _foreign_lock(shown, mine)


def _acquire(lock: Path, shown) -> tuple[int, tuple[int, int]]:
    """Take the lock file ``lock``: create it exclusively, or take over one whose writer is gone."""
    while True:
        existing = False
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NEVER_FOLLOW, 0o644)
        except FileExistsError:
            fd = _open_existing_lock(lock, shown)
            if fd is None:
                continue
            existing = True
        except OSError as exc:
            raise output_error(shown, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(fd)
            os.close(fd)
            raise OutputBusyError(f"'{shown}' is being written by another frpd process (pid {pid}). Wait for it "
                                  "to finish, or write to another file.") from None
        except OSError as exc:
            os.close(fd)
            raise output_error(shown, exc) from None
        # the previous holder may have removed the file between our open and our lock: lock the current one
        mine = os.fstat(fd)
        if own_file_identity(lock) == (mine.st_dev, mine.st_ino):
            if existing:
                _refuse_if_not_frpds(fd, shown)
            return fd, (mine.st_dev, mine.st_ino)
        os.close(fd)


# lock files this process took when a command started (lock_outputs), by absolute path: the writers that run
# later in the same command reuse them instead of being refused by their own command
_HELD_BY_COMMAND: dict[str, int] = {}


@contextmanager
def output_lock(path, *, shown=None, _for_command: bool = False) -> Iterator[Path]:
    """Hold an exclusive advisory lock on output ``path`` for the block.

    The lock is a ``flock`` on ``.NAME.lock`` beside ``path``, holding the writer's process id. The file is
    created exclusively, never through a symlink; one found there is used only when it is a regular file with
    one name holding a process id (a lock file of frpd whose writer was killed: not locked, so it is taken
    over). It is removed when the block ends, only while it is still the same file (same inode).
    A lock :func:`lock_outputs` took for the running command is reused, not taken again.

    Raises
    ------
    OutputBusyError
        Another process holds the lock; the message names its process id.
    InputError
        Something else is at the lock's path (a symlink, FIFO, hard link, folder or another file): it is
        left untouched.
    """
    path = Path(path)
    lock = lock_path(path)
    shown = path if shown is None else shown
    key = os.path.abspath(lock)
    if key in _HELD_BY_COMMAND:
        _HELD_BY_COMMAND[key] += 1
        try:
            yield lock
        finally:
            _HELD_BY_COMMAND[key] -= 1
        return
    fd, identity = _acquire(lock, shown)
    if _for_command:
        _HELD_BY_COMMAND[key] = 1
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, _lock_text(), 0)
        yield lock
    finally:
        if _for_command:
            _HELD_BY_COMMAND.pop(key, None)
        remove_own(lock, identity)   # removed while still locked, so no one locks a file that is going away
        os.close(fd)


@contextmanager
def lock_outputs(files=(), folders=()) -> Iterator[None]:
    """Take the locks of a command's outputs before it reads any input; held until the block ends.

    Parameters
    ----------
    files : iterable of path, ``-`` or None
        Output files (``--output``, ``--provenance``...). ``None``, ``-``, devices and FIFOs take no lock.
    folders : iterable of path or None
        Artifact folders (``--out``): locked as ``.NAME.lock`` beside the folder.

    Raises
    ------
    OutputBusyError
        Another process is writing one of them; nothing has been read or written.
    """
    from contextlib import ExitStack

    with ExitStack() as stack:
        for path in files:
            if path is None or is_stdio(path):
                continue
            target = resolve_output(path)
            if target.kind == "file":
                stack.enter_context(output_lock(target.real, shown=target.path, _for_command=True))
        for folder in folders:
            if folder is not None:
                real = Path(os.path.realpath(folder))
                stack.enter_context(output_lock(real, shown=folder, _for_command=True))
        yield


def _stat_nofollow(path) -> os.stat_result | None:
    try:
        return os.stat(path, follow_symlinks=False)
    except OSError:
        return None


# ---------------------------------------------------------------------------- writing


class _GuardedStream:
    """A stream whose write errors become one clear :class:`InputError` (a closed pipe stays BrokenPipeError)."""

    def __init__(self, stream, shown):
        self._stream = stream
        self._shown = shown

    def _guard(self, method, *args):
        try:
            return method(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise output_error(self._shown, exc) from None

    def write(self, data):
        return self._guard(self._stream.write, data)

    def writelines(self, lines):
        return self._guard(self._stream.writelines, lines)

    def flush(self):
        return self._guard(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _copy_owner_and_mode(tmp: str, existing: os.stat_result | None) -> None:
    if existing is None:
        os.chmod(tmp, _NEW_FILE_MODE)
        return
    os.chmod(tmp, stat.S_IMODE(existing.st_mode))
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        try:
            os.chown(tmp, existing.st_uid, existing.st_gid)
        except OSError:
            pass


def fsync_folder(folder: Path) -> None:
    """Persist a folder's entries after a rename (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def _replacing(target: OutputTarget, *, suffix: str = ".tmp") -> Iterator[str]:
    """Lock ``target``, yield a temporary path beside it, and rename it over the target if the block succeeds."""
    real = target.real
    with terminate_on_signals(), output_lock(real, shown=target.path):
        existing = _stat(real)
        tmp = None
        try:
            with signals_held():         # the file exists only once its name is known to the cleanup below
                try:
                    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=suffix, dir=_folder(real))
                except OSError as exc:
                    raise output_error(target.path, exc) from None
                os.close(fd)
            yield tmp
            try:
                with open(tmp, "rb+") as handle:
                    os.fsync(handle.fileno())
                _copy_owner_and_mode(tmp, existing)
                os.replace(tmp, real)
            except OSError as exc:
                raise output_error(target.path, exc) from None
        except BaseException:
            try:
                if tmp is not None:
                    os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        fsync_folder(_folder(real))


def _close_after_failure(handle) -> None:
    """Close a file being abandoned: data still buffered is dropped, and so is a second write error."""
    try:
        handle.close()
    except OSError:
        pass


def _open_stream(target: OutputTarget) -> int:
    if target.fd is not None:
        return os.dup(target.fd)
    try:
        fd = os.open(target.path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)  # never O_TRUNC, never O_CREAT
    except OSError as exc:
        raise output_error(target.path, exc) from None
    if stat.S_ISREG(os.fstat(fd).st_mode):  # replaced by a regular file since we looked: do not write into it
        os.close(fd)
        raise InputError(f"Cannot write '{target.path}': it changed from a device or FIFO to a regular file while "
                         "frpd was starting. Run again.")
    return fd


@contextmanager
def open_output(path, *, binary: bool = False, stdout=None) -> Iterator[object]:
    """A stream to write an output to, with the guarantees of this module.

    Parameters
    ----------
    path : path, ``-`` or None
        ``None`` and ``-`` mean stdout.
    binary : bool, default=False
        Yield a binary stream instead of a UTF-8 text stream (newlines untranslated).
    stdout : text stream, optional
        What stdout is (defaults to ``sys.stdout`` at call time).

    Yields
    ------
    stream
        Write errors raise :class:`InputError` naming the path (a closed pipe raises ``BrokenPipeError``).
        For a regular file, the data reaches ``path`` only when the block ends without an exception.
    """
    target = resolve_output(STDIO if path is None else path)
    if target.kind == "stdout":
        out = sys.stdout if stdout is None else stdout
        if binary:
            out = out.buffer
        guarded = _GuardedStream(out, "stdout")
        yield guarded
        guarded.flush()
        return
    if target.kind == "stream":
        with terminate_on_signals():
            fd = _open_stream(target)
            mode = "wb" if binary else "w"
            kwargs = {} if binary else {"encoding": "utf-8", "newline": ""}
            with open(fd, mode, closefd=True, **kwargs) as handle:
                guarded = _GuardedStream(handle, target.path)
                yield guarded
                guarded.flush()
        return
    with _replacing(target) as tmp:
        mode = "wb" if binary else "w"
        kwargs = {} if binary else {"encoding": "utf-8", "newline": ""}
        handle = open(tmp, mode, **kwargs)
        try:
            guarded = _GuardedStream(handle, target.path)
            yield guarded
            guarded.flush()
        except BaseException:
            _close_after_failure(handle)    # the error that stopped the run is the one reported
            raise
        try:
            handle.close()
        except OSError as exc:
            raise output_error(target.path, exc) from None


@contextmanager
def output_path(path, *, suffix: str | None = None) -> Iterator[Path]:
    """A path for libraries that write a file by name (matplotlib, networkx), with the same guarantees.

    For a regular file: a temporary path beside it, renamed over it when the block succeeds. For a device,
    FIFO or stdout: a temporary file in the system's temporary folder whose bytes are copied to the
    destination when the block succeeds. The temporary name ends with ``suffix`` (default: the
    destination's), since such libraries pick the file format from it.
    """
    target = resolve_output(path)
    suffix = Path(str(path)).suffix if suffix is None else suffix
    if target.kind == "file":
        with _replacing(target, suffix=f".tmp{suffix}") as tmp:
            yield Path(tmp)
        return
    with terminate_on_signals(), tempfile.TemporaryDirectory(prefix="frpd-") as folder:
        tmp = Path(folder) / f"output{suffix}"
        yield tmp
        with open(tmp, "rb") as source, open_output(path, binary=True) as sink:
            shutil.copyfileobj(source, sink)


# ---------------------------------------------------------------------------- input that is not a file


class SpooledInput:
    """A copy of an input that is not a regular file (stdin, a pipe, a device), in a temporary file.

    The copy is removed by :meth:`close`, when the object is garbage collected, or at interpreter exit,
    whichever comes first.

    Attributes
    ----------
    source : Path
        The input as given (``-`` for stdin).
    path : Path
        The temporary copy, read as often as needed.
    """

    def __init__(self, source, *, stdin=None):
        self.source = Path(str(source))
        with signals_held():    # the copy exists only once its finalizer knows it
            fd, tmp = tempfile.mkstemp(prefix="frpd-input-", suffix=".csv")
            self.path = Path(tmp)
            self._finalizer = weakref.finalize(self, _remove, tmp)
        try:
            with os.fdopen(fd, "wb") as sink:
                if is_stdio(source):
                    stream = sys.stdin if stdin is None else stdin
                    _copy_text(getattr(stream, "buffer", stream), sink, source)
                else:
                    with open(source, "rb") as stream:
                        _copy_text(stream, sink, source)
        except OSError as exc:
            self.close()
            shown = "stdin" if is_stdio(source) else f"'{source}'"
            raise InputError(f"Cannot read {shown}: {exc.strerror or exc}.") from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove the copy (idempotent)."""
        self._finalizer()


_SPOOL_BLOCK = 1 << 20


def _copy_text(stream, sink, source) -> None:
    """Copy ``stream`` to ``sink`` block by block, refusing binary data as soon as it appears.

    CSV text never holds a NUL byte: an endless binary stream (``/dev/zero``, a pipe from the wrong
    program) is refused at its first block instead of filling the temporary folder.
    """
    offset = 0
    while True:
        block = stream.read(_SPOOL_BLOCK)
        if not block:
            return
        nul = block.find(b"\0")
        if nul >= 0:
            shown = "stdin" if is_stdio(source) else f"'{source}'"
            raise InputError(
                f"The input {shown} is not a CSV text file: it holds binary data (a NUL byte at byte {offset + nul}). "
                "Pass the CSV file itself (not a model, archive or compressed file; decompress it first)."
            )
        sink.write(block)
        offset += len(block)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def spool_input(path, *, stdin=None) -> SpooledInput | None:
    """Spool ``path`` when it is ``-`` or exists and is not a regular file or a folder; else return None.

    A missing path returns None too: the reader reports it in its own words.
    """
    if path is None:
        return None
    if not is_stdio(path):
        st = _stat(path)
        if st is None or stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            return None
    return SpooledInput(path, stdin=stdin)
