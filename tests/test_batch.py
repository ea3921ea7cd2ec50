"""Batch jobs: streaming output, resume after SIGKILL, determinism across jobs and backends, skipped rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.streaming import partial_path, sidecar_path

runner = CliRunner()


def _big_applicants(paths, tmp_path, n_copies=15):
    frame = pd.read_csv(paths["applicants"])
    big = pd.concat([frame] * n_copies, ignore_index=True)
    big["applicant_id"] = [f"B{i:04d}" for i in range(len(big))]
    path = tmp_path / "many.csv"
    big.to_csv(path, index=False)
    return path, len(big)


def _args(paths, applicants, *extra):
    return ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(applicants), *extra]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_sigkill_then_resume_is_byte_identical(gated, tmp_path, fmt):
    applicants = gated.applicants(tmp_path)
    args = ["--format", fmt, "--chunk-size", "8"]
    out = tmp_path / f"out.{fmt}"
    command = [sys.executable, "-m", "frpd_cli", *_args(gated.paths, applicants, *args, "--output", str(out))]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=gated.env)
    try:
        gated.wait_held(process)                          # the model holds the run at applicant 600
        done = json.loads(sidecar_path(out).read_text())["done"]
        assert 0 < done <= 600                                  # chunks before the marker are checkpointed
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert not out.exists() and partial_path(out).exists()       # the destination appears only on success
    with open(partial_path(out), "a", encoding="utf-8") as stream:      # simulate a torn last line as well
        stream.write('B9999,ok,,1,quad,3' if fmt == "csv" else '{"applicant": "B99')
    gated.release.touch()                                       # from here on the model never holds a run
    reference = tmp_path / f"reference.{fmt}"
    made = runner.invoke(app, _args(gated.paths, applicants, *args, "--output", str(reference)))
    assert made.exit_code == 0, made.stderr
    resumed = runner.invoke(app, _args(gated.paths, applicants, *args, "--output", str(out), "--resume"))
    assert resumed.exit_code == 0, resumed.stderr
    assert f"Resuming '{out}' after {done} complete applicant(s)." in resumed.stderr
    assert out.read_bytes() == reference.read_bytes()
    assert not sidecar_path(out).exists() and not partial_path(out).exists()


def test_resume_refuses_other_parameters(sample_paths, tmp_path):
    applicants, _ = _big_applicants(sample_paths, tmp_path, 2)
    out = tmp_path / "out.csv"
    sidecar = sidecar_path(out)
    sidecar.write_text(json.dumps({"version": 2, "fingerprint": {"format": "csv"}, "done": 8, "offset": 0,
                                   "sha256": ""}))
    partial_path(out).write_text("")
    result = runner.invoke(app, _args(sample_paths, applicants, "--output", str(out), "--resume"))
    assert result.exit_code == 1 and "other inputs or parameters" in result.stderr


@pytest.mark.parametrize("extra,needle", [
    ((), "--output FILE"),
    (("--output", "-", "--format", "csv"), "--output FILE"),
    (("--output", "x.fifo", "--format", "jsonl"), "regular file"),
    (("--format", "json", "--output", "x.json"), "--format json is written in one piece"),
    (("--format", "table", "--output", "x.txt"), "--format table is written in one piece"),
    (("--format", "text", "--output", "x.txt"), "--format text is written in one piece"),
], ids=["stdout", "dash", "device", "json", "table", "text"])
def test_resume_without_a_line_oriented_output_file_is_a_usage_error(sample_paths, tmp_path, extra, needle):
    # only csv and jsonl written to a regular file are checkpointed (and so resumable)
    extra = [str(tmp_path / e) if e.startswith("x.") else e for e in extra]
    fifo = tmp_path / "x.fifo"
    if str(fifo) in extra:
        os.mkfifo(fifo)                     # refused without being opened
    result = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], *extra, "--resume"))
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == "" and [p for p in tmp_path.iterdir() if p != fifo] == []
    message = " ".join(result.stderr.split())
    assert "Invalid value for '--resume'" in message and needle in message and "csv" in message, message
    assert "jsonl" in message and "unexpected" not in message


def test_a_failed_progress_write_keeps_and_reports_what_a_resume_continues_from(sample_paths, tmp_path, monkeypatch):
    # the count said "N applicant(s) complete" for the chunk whose progress file could not be written, so the
    # message promised a chunk the resume then planned again
    import errno
    import re
    import tempfile
    from types import SimpleNamespace

    import frpd_cli.streaming as streaming

    args = ["--format", "jsonl", "--chunk-size", "5"]
    reference = tmp_path / "reference.jsonl"
    made = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], *args, "--output", str(reference)))
    assert made.exit_code == 0, made.stderr
    expected = reference.read_bytes().splitlines(keepends=True)
    assert len(expected) == 20                      # one line per applicant: 4 chunks of 5

    calls = []

    def mkstemp(*a, **k):                           # the third progress file (after 10 applicants) cannot be made
        calls.append(1)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return tempfile.mkstemp(*a, **k)

    out = tmp_path / "out.jsonl"
    with monkeypatch.context() as patch:
        patch.setattr(streaming, "tempfile", SimpleNamespace(mkstemp=mkstemp))   # the progress writer's only use
        failed = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], *args, "--output", str(out),
                                          "--resume"))
    assert len(calls) == 3 and failed.exit_code == 1, failed.stderr
    assert failed.stdout == "" and not out.exists()
    kept = re.search(r"\((\d+) applicant\(s\) complete\)", failed.stderr)
    assert kept is not None, failed.stderr
    said = int(kept.group(1))
    progress = json.loads(sidecar_path(out).read_text())
    lines = partial_path(out).read_bytes().splitlines(keepends=True)
    # the message, the progress file and the partial file agree: those applicants' records, byte for byte
    assert said == progress["done"] == len(lines) == 5
    assert lines == expected[:said] and progress["offset"] == len(b"".join(lines))
    resumed = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], *args, "--output", str(out),
                                       "--resume"))
    assert resumed.exit_code == 0, resumed.stderr
    assert f"Resuming '{out}' after {said} complete applicant(s)." in resumed.stderr
    assert out.read_bytes() == reference.read_bytes()


def test_jobs_and_dask_outputs_byte_identical(sample_paths, tmp_path):
    pytest.importorskip("dask.distributed")
    applicants, _ = _big_applicants(sample_paths, tmp_path, 3)
    one = runner.invoke(app, _args(sample_paths, applicants, "--format", "jsonl", "--chunk-size", "7"))
    two = runner.invoke(app, _args(sample_paths, applicants, "--format", "jsonl", "--chunk-size", "7", "--jobs",
                                   "2"))
    dask = runner.invoke(app, _args(sample_paths, applicants, "--format", "jsonl", "--chunk-size", "7", "--jobs",
                                    "2", "--backend", "dask"))
    assert one.exit_code == two.exit_code == dask.exit_code == 0, dask.stderr
    assert one.stdout == two.stdout == dask.stdout


def test_same_seed_same_bytes_twice(sample_paths, tmp_path):
    a = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], "--format", "csv", "--seed", "3"))
    b = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], "--format", "csv", "--seed", "3"))
    assert a.exit_code == 0 and a.stdout == b.stdout


def test_scheduler_needs_dask_backend(sample_paths):
    result = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], "--scheduler", "tcp://127.0.0.1:1"))
    assert result.exit_code == 2 and result.stdout == ""
    message = " ".join(result.stderr.split())
    assert "Invalid value for '--scheduler'" in message and "needs --backend dask" in message, message


@pytest.mark.parametrize("address", ["foo", "tcp://foo", "tcp://host:0", "tcp://host:70000", "tcp://host:port",
                                     "http://host:8786", "tcp://:8786", "tcp://host:8786/x", ""])
@pytest.mark.parametrize("backend", [(), ("--backend", "dask")], ids=["loky", "dask"])
def test_scheduler_that_is_no_address_is_a_usage_error(sample_paths, address, backend):
    # 'foo' ended in Dask's own ValueError ("missing port number"), reported as an unexpected error
    result = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], *backend, "--scheduler", address))
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == ""
    message = " ".join(result.stderr.split())
    assert "Invalid value for '--scheduler'" in message and "tcp://HOST:PORT" in message, message
    assert repr(address) in message and "unexpected" not in message


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "tcp://scheduler.example.org:1", "127.0.0.1:8786",
                                     "tcp://[::1]:8786", "tls://10.0.0.5:65535"])
def test_scheduler_addresses_dask_reads_are_accepted(address):
    from frpd_cli.cli.plan import _check_scheduler

    assert _check_scheduler(address) == address


def test_drop_missing_reports_invalid_input(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["applicants"])
    frame.loc[[2, 5], "duration"] = None
    path = tmp_path / "gaps.csv"
    frame.to_csv(path, index=False)
    refused = runner.invoke(app, _args(sample_paths, path, "--format", "jsonl"))
    assert refused.exit_code == 1 and "row 3" in refused.stderr and "--drop-missing" in refused.stderr
    result = runner.invoke(app, _args(sample_paths, path, "--format", "jsonl", "--drop-missing"))
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["applicant"] for r in records] == frame["applicant_id"].tolist()
    assert [r["status"] for r in records].count("invalid-input") == 2
    assert records[2]["status"] == "invalid-input" and "duration" in records[2]["reason"]
    assert records[3]["status"] == "ok"
    assert "2 invalid input" in result.stderr
    # the others are planned exactly as without the gaps
    plain = runner.invoke(app, _args(sample_paths, sample_paths["applicants"], "--format", "jsonl"))
    expected = [json.loads(line) for line in plain.stdout.splitlines()]
    assert [r for i, r in enumerate(records) if i not in (2, 5)] == [r for i, r in enumerate(expected)
                                                                     if i not in (2, 5)]


def test_resume_with_another_chunk_size_gives_identical_bytes(sample_paths, tmp_path, monkeypatch):
    # results do not depend on the batching, so the chunk size is not part of what a resume must match
    import frpd_cli.cli.plan as plan_module

    applicants, n = _big_applicants(sample_paths, tmp_path, 4)
    reference = tmp_path / "reference.csv"
    done = runner.invoke(app, _args(sample_paths, applicants, "--format", "csv", "--chunk-size", "8",
                                    "--output", str(reference)))
    assert done.exit_code == 0, done.stderr

    real_stream = plan_module.plan_stream

    def interrupted(*args, **kwargs):
        for i, plans in enumerate(real_stream(*args, **kwargs)):
            if i == 3:
                raise RuntimeError("interrupted on purpose")
            yield plans

    out = tmp_path / "out.csv"
    monkeypatch.setattr(plan_module, "plan_stream", interrupted)
    first = runner.invoke(app, _args(sample_paths, applicants, "--format", "csv", "--chunk-size", "8",
                                     "--output", str(out), "--resume"))
    assert first.exit_code != 0 and not out.exists()
    assert json.loads(sidecar_path(out).read_text())["done"] == 24
    monkeypatch.setattr(plan_module, "plan_stream", real_stream)
    resumed = runner.invoke(app, _args(sample_paths, applicants, "--format", "csv", "--chunk-size", "5",
                                       "--output", str(out), "--resume"))
    assert resumed.exit_code == 0, resumed.stderr
    assert "Resuming" in resumed.stderr and "after 24 complete" in resumed.stderr
    assert out.read_bytes() == reference.read_bytes() and n > 24
