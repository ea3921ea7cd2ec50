"""Checkpointed output: torn writes are discarded, resumed files are byte-identical, wrong resumes refused."""

from __future__ import annotations

import json

import pytest

from frpd_cli.exceptions import InputError
from frpd_cli.streaming import ResumableOutput, sidecar_path

FP = {"inputs": {"data": "abc"}, "format": "csv", "k": 3}
CHUNKS = [["h\n"], ["a1\n", "a2\n"], ["b1\n"], ["c1\n", "c2\n", "c3\n"]]


def _write_all(path, chunks, *, fingerprint=FP, resume=False, stop_after=None):
    out = ResumableOutput(path, fingerprint=fingerprint, resume=resume)
    done = out.done
    for i, chunk in enumerate(chunks[done:], start=done):
        if i == 0 and out.resumed_offset:
            continue
        out.stream.write("".join(chunk))
        out.checkpoint(i + 1)
        if stop_after is not None and i + 1 >= stop_after:
            out.close()
            return out
    out.finish()
    return out


def test_uninterrupted_run_leaves_no_sidecar(tmp_path):
    path = tmp_path / "out.csv"
    out = ResumableOutput(path, fingerprint=FP)
    out.stream.write("h\na1\n")
    out.checkpoint(2)
    state = json.loads(sidecar_path(path).read_text())
    assert state["done"] == 2 and state["offset"] == len("h\na1\n") and state["complete"] is False
    out.stream.write("b1\n")
    out.finish()
    assert path.read_text() == "h\na1\nb1\n" and not sidecar_path(path).exists()
    with pytest.raises(InputError, match="no progress file"):
        ResumableOutput(path, fingerprint=FP, resume=True)


def test_resume_after_torn_write_is_byte_identical(tmp_path):
    full = tmp_path / "full.csv"
    _write_all(full, CHUNKS)
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    with open(path, "a") as stream:          # a crash in the middle of the next chunk: a torn line
        stream.write("b")
    out = _write_all(path, CHUNKS, resume=True)
    assert out.complete and path.read_bytes() == full.read_bytes()


def test_resume_when_sidecar_lags_the_data(tmp_path):
    full = tmp_path / "full.csv"
    _write_all(full, CHUNKS)
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    with open(path, "a") as stream:          # a whole chunk written, crash before its checkpoint
        stream.write("b1\n")
    _write_all(path, CHUNKS, resume=True)
    assert path.read_bytes() == full.read_bytes()


def test_resume_with_other_fingerprint_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    with pytest.raises(InputError, match="k differs"):
        ResumableOutput(path, fingerprint={**FP, "k": 4}, resume=True)


def test_resume_without_sidecar_refused(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("h\n")
    with pytest.raises(InputError, match="no progress file"):
        ResumableOutput(path, fingerprint=FP, resume=True)
    with pytest.raises(InputError, match="does not exist"):
        ResumableOutput(tmp_path / "none.csv", fingerprint=FP, resume=True)


def test_corrupted_sidecar_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=2)
    sidecar_path(path).write_text("{not json")
    with pytest.raises(InputError, match="corrupted"):
        ResumableOutput(path, fingerprint=FP, resume=True)


def test_truncated_file_refused(tmp_path):
    path = tmp_path / "out.csv"
    _write_all(path, CHUNKS, stop_after=3)
    path.write_text("h\n")
    with pytest.raises(InputError, match="shorter"):
        ResumableOutput(path, fingerprint=FP, resume=True)


def test_missing_folder(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        ResumableOutput(tmp_path / "no" / "out.csv", fingerprint=FP)
