"""Checkpointed output: the old file survives until success, torn writes are discarded, resumed files are
byte-identical, edited prefixes and counts and wrong resumes refused, resume is idempotent."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from frpd_cli.exceptions import InputError
from frpd_cli.outputs import OutputBusyError, lock_path, output_lock
from frpd_cli.streaming import ResumableOutput, partial_path, sidecar_path

FP = {"inputs": {"data": "abc"}, "format": "csv", "k": 3}
CHUNKS = [["h\n"], ["a1\n", "a2\n"], ["b1\n"], ["c1\n", "c2\n", "c3\n"]]


def _count(stream) -> int:
    """Records in a prefix of CHUNKS: one per chunk, i.e. chunks whose first line ends the prefix so far."""
    lines = stream.read().decode().splitlines()
    ends = []
    total = 0
    for chunk in CHUNKS:
        total += len(chunk)
        ends.append(total)
    return sum(1 for end in ends if end <= len(lines))


def _write_all(path, chunks, *, fingerprint=FP, resume=False, stop_after=None, count=_count):
    out = ResumableOutput(path, fingerprint=fingerprint, resume=resume, count_records=count)
    done = out.done
    for i, chunk in enumerate(chunks[done:], start=done):
        if i == 0 and out.resumed_offset:
            continue
        out.stream.write("".join(chunk))
        out.checkpoint(i + 1)
        if stop_after is not None and i + 1 >= stop_after:
            out.close()                                   # what a crash (SIGKILL) leaves behind
            return out
    out.finish()
    return out


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name not in ("full.csv", "out.csv"))


def test_uninterrupted_run_replaces_the_file_only_at_the_end(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("previous\n")
    out = ResumableOutput(path, fingerprint=FP)
    out.stream.write("h\na1\n")
    out.checkpoint(2)
    state = json.loads(sidecar_path(path).read_text())
    assert state["done"] == 2 and state["offset"] == len("h\na1\n")
    assert state["sha256"] == hashlib.sha256(b"h\na1\n").hexdigest()
    assert path.read_text() == "previous\n"               # untouched until the run succeeds
    assert partial_path(path).read_text() == "h\na1\n"
    out.stream.write("b1\n")
    out.finish()
    assert path.read_text() == "h\na1\nb1\n"
    assert _leftovers(tmp_path) == []                      # no partial, progress or lock file


def test_failure_without_resume_leaves_previous_file_and_nothing_else(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("previous\n")
    with pytest.raises(RuntimeError):
        with ResumableOutput(path, fingerprint=FP) as out:
            out.stream.write("h\na1\n")
            out.checkpoint(2)
            raise RuntimeError("model failed")
    assert path.read_text() == "previous\n"
    assert _leftovers(tmp_path) == []


def test_failure_with_resume_keeps_partial_for_continuation(tmp_path):
    full = tmp_path / "full.csv"
    _write_all(full, CHUNKS)
    path = tmp_path / "out.csv"
    with pytest.raises(KeyboardInterrupt):
        with ResumableOutput(path, fingerprint=FP, resume=True, count_records=_count) as out:
            assert out.state == "fresh"
            out.stream.write("h\n")
            out.checkpoint(1)
            out.stream.write("a1\na2\n")
            out.checkpoint(2)
            raise KeyboardInterrupt
    assert not path.exists()
    assert partial_path(path).exists() and sidecar_path(path).exists() and not lock_path(path).exists()
    out = _write_all(path, CHUNKS, resume=True)
    assert out.state == "complete" and path.read_bytes() == full.read_bytes()
    assert _leftovers(tmp_path) == []


def test_resume_after_torn_write_is_byte_identical(tmp_path):
    full = tmp_path / "full.csv"
    _write_all(full, CHUNKS)
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    with open(partial_path(path), "a") as stream:          # a crash in the middle of the next chunk: a torn line
        stream.write("b")
    _write_all(path, CHUNKS, resume=True)
    assert path.read_bytes() == full.read_bytes()


def test_resume_when_progress_lags_the_data(tmp_path):
    full = tmp_path / "full.csv"
    _write_all(full, CHUNKS)
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    with open(partial_path(path), "a") as stream:          # a whole chunk written, crash before its checkpoint
        stream.write("b1\n")
    _write_all(path, CHUNKS, resume=True)
    assert path.read_bytes() == full.read_bytes()


def test_resume_after_an_edited_prefix_is_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=3)
    data = partial_path(path).read_bytes()
    partial_path(path).write_bytes(data.replace(b"a2", b"a9"))       # same length, other bytes
    with pytest.raises(InputError, match="edited"):
        ResumableOutput(path, fingerprint=FP, resume=True, count_records=_count)
    assert partial_path(path).read_bytes() == data.replace(b"a2", b"a9")   # refused: nothing truncated


def test_resume_after_an_edited_count_is_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    state = json.loads(sidecar_path(path).read_text())
    state["done"] = 3                                      # claims a chunk more than the file holds
    sidecar_path(path).write_text(json.dumps(state))
    with pytest.raises(InputError, match="says 3 applicant.*holds 2"):
        ResumableOutput(path, fingerprint=FP, resume=True, count_records=_count)


def test_resume_with_other_fingerprint_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    with pytest.raises(InputError, match="k differs"):
        ResumableOutput(path, fingerprint={**FP, "k": 4}, resume=True)


def test_resume_is_idempotent(tmp_path):
    path = tmp_path / "out.csv"
    out = ResumableOutput(path, fingerprint=FP, resume=True)           # nothing to resume: a fresh run
    assert out.state == "fresh" and "fresh" in out.note
    out.close()
    _write_all(path, CHUNKS, resume=True)
    finished = path.read_bytes()
    again = ResumableOutput(path, fingerprint=FP, resume=True)         # finished: nothing to do
    assert again.state == "complete" and again.stream is None and "complete" in again.note
    again.close()
    assert path.read_bytes() == finished and _leftovers(tmp_path) == []


def test_progress_without_partial_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    partial_path(path).unlink()
    with pytest.raises(InputError, match="partial file .* is gone"):
        ResumableOutput(path, fingerprint=FP, resume=True)


def test_old_progress_file_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    sidecar_path(path).write_text(json.dumps({"version": 1, "fingerprint": FP, "done": 2, "offset": 3}))
    with pytest.raises(InputError, match="another frpd version"):
        ResumableOutput(path, fingerprint=FP, resume=True)


def test_corrupted_progress_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    sidecar_path(path).write_text("{not json")
    with pytest.raises(InputError, match="corrupted"):
        ResumableOutput(path, fingerprint=FP, resume=True)


def test_truncated_partial_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=3)
    partial_path(path).write_text("h\n")
    with pytest.raises(InputError, match="shorter"):
        ResumableOutput(path, fingerprint=FP, resume=True)


def test_second_writer_refused_while_the_first_runs(tmp_path):
    path = tmp_path / "out.csv"
    with output_lock(path):
        with pytest.raises(OutputBusyError, match=r"being written by another frpd process \(pid \d+\)"):
            ResumableOutput(path, fingerprint=FP)
    assert not partial_path(path).exists() and not sidecar_path(path).exists()


def test_missing_folder(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        ResumableOutput(tmp_path / "no" / "out.csv", fingerprint=FP)


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_a_run_keeps_the_mode_of_the_file_it_replaces_and_its_side_files_never_exceed_it(tmp_path, mode):
    path = tmp_path / "out.csv"
    path.write_text("previous\n")
    os.chmod(path, mode)
    before = os.stat(path)
    out = ResumableOutput(path, fingerprint=FP)
    out.stream.write("h\na1\n")
    out.checkpoint(2)
    # while the run writes, the plans written so far and the progress file are no more readable than the target
    assert stat.S_IMODE(os.stat(partial_path(path)).st_mode) == mode
    assert stat.S_IMODE(os.stat(sidecar_path(path)).st_mode) == mode
    out.finish()
    after = os.stat(path)
    assert path.read_text() == "h\na1\n" and after.st_ino != before.st_ino
    assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode) == mode
