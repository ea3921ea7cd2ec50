"""The output layer: regular files replaced only on success, streams written directly, inputs never clobbered,
one writer per file, spooled stdin, clean exits on SIGTERM.

Devices are stood for by FIFOs, pipes and subprocess pipes in temporary folders: no test opens a real device or
any path outside its temporary folder for writing.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import joblib
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli import outputs
from frpd_cli.cli.app import app
from frpd_cli.exceptions import InputError
from frpd_cli.outputs import (
    OutputBusyError,
    check_not_inputs,
    lock_path,
    open_output,
    output_lock,
    output_path,
    resolve_output,
    spool_input,
)
from frpd_cli.streaming import partial_path, sidecar_path

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _others(folder: Path, *keep: str) -> list[str]:
    """Files in ``folder`` besides ``keep``: temporary, partial, progress and lock files left behind."""
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def _read_fifo(path: Path, into: list) -> threading.Thread:
    def read():
        with open(path, "rb") as handle:
            into.append(handle.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


# ---------------------------------------------------------------------------- regular files


def test_regular_file_replaced_on_success_with_its_mode(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old\n")
    path.chmod(0o640)
    with open_output(path) as stream:
        stream.write("new\n")
        assert path.read_text() == "old\n"                 # nothing visible before the end
    assert path.read_text() == "new\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert _others(tmp_path, "out.csv") == []


def test_failure_keeps_previous_file_and_leaves_nothing(tmp_path):
    path = tmp_path / "out.csv"
    path.write_bytes(b"previous results\n")
    with pytest.raises(RuntimeError):
        with open_output(path) as stream:
            stream.write("half")
            raise RuntimeError("planning failed")
    assert path.read_bytes() == b"previous results\n"
    assert _others(tmp_path, "out.csv") == []


def test_disk_full_is_one_clear_error_and_keeps_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "out.csv"
    path.write_bytes(b"previous\n")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outputs.os, "fsync", full)
    with pytest.raises(InputError, match=r"Cannot write '.*out.csv': the disk is full .* Free space in"):
        with open_output(path) as stream:
            stream.write("new\n")
    assert path.read_bytes() == b"previous\n"
    assert _others(tmp_path, "out.csv") == []


def test_write_errors_name_the_path(tmp_path):
    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    guarded = outputs._GuardedStream(Full(), tmp_path / "x.csv")
    with pytest.raises(InputError, match="x.csv': the disk is full"):
        guarded.write("a")


@pytest.mark.parametrize("make, message", [
    (lambda p: p.mkdir(), "it is a folder"),
    (lambda p: None, None),
])
def test_folder_output_refused(tmp_path, make, message):
    path = tmp_path / "target"
    make(path)
    if message is None:
        assert resolve_output(path).kind == "file"
        return
    with pytest.raises(InputError, match=message):
        resolve_output(path)


def test_missing_folder_refused(tmp_path):
    with pytest.raises(InputError, match="the folder '.*nowhere' does not exist. Create it first"):
        resolve_output(tmp_path / "nowhere" / "out.csv")


def test_read_only_folder_is_one_clear_error(tmp_path, monkeypatch):
    # the tests may run as root, for whom every folder is writable: stand for a read-only one
    real_access = os.access
    monkeypatch.setattr(outputs.os, "access",
                        lambda path, mode: False if Path(path) == tmp_path and mode & os.W_OK else real_access(path, mode))
    with pytest.raises(InputError, match=r"the folder '.*' is not writable .* Choose another folder"):
        resolve_output(tmp_path / "out.csv")
    with pytest.raises(InputError, match="is not writable"):
        outputs.check_artifact_folder(tmp_path / "graph")
    assert _others(tmp_path) == []


def test_symlink_to_a_regular_file_is_written_through(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    with open_output(link) as stream:
        stream.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert _others(tmp_path, "real.csv", "link.csv") == []


def test_dangling_symlink_refused(tmp_path):
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="symlink to .*missing.csv', which does not exist"):
        with open_output(link) as stream:
            stream.write("x")
    assert link.is_symlink() and not (tmp_path / "missing.csv").exists()


# ---------------------------------------------------------------------------- streams


def test_fifo_is_written_directly_and_stays_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list = []
    reader = _read_fifo(fifo, got)
    with open_output(fifo) as stream:
        stream.write("a,b\n1,2\n")
    reader.join(10)
    assert got == [b"a,b\n1,2\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert _others(tmp_path, "pipe") == []                 # no temporary file, no lock file


def test_fd_alias_writes_to_the_open_descriptor(tmp_path):
    """``/dev/fd/N`` (what ``>(...)`` passes) writes into descriptor N, as a process substitution expects."""
    read_end, write_end = os.pipe()
    try:
        target = resolve_output(f"/dev/fd/{write_end}")
        assert target.kind == "stream" and target.fd == write_end
        with open_output(f"/dev/fd/{write_end}", binary=True) as stream:
            stream.write(b"bytes\n")
        os.close(write_end)
        write_end = None
        with os.fdopen(read_end, "rb") as handle:
            read_end = None
            assert handle.read() == b"bytes\n"
    finally:
        for fd in (read_end, write_end):
            if fd is not None:
                os.close(fd)


def test_std_aliases_are_streams_on_their_descriptors():
    # classification only: nothing is opened, so a regression cannot touch the system's /dev entries
    for alias, fd in (("/dev/stdout", 1), ("/dev/stderr", 2), ("/dev/fd/1", 1), ("/proc/self/fd/2", 2)):
        target = resolve_output(alias)
        assert (target.kind, target.fd) == ("stream", fd)


def test_stdout_alias_in_a_subprocess_goes_to_its_pipe():
    # /proc/self/fd/1 stands for /dev/stdout (same alias rule): a faulty rename there fails, it cannot
    # replace a system file
    code = ("from frpd_cli.outputs import open_output\n"
            "with open_output('/proc/self/fd/1') as s:\n"
            "    s.write('through the pipe\\n')\n")
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"through the pipe\n"


def test_output_path_copies_into_a_stream(tmp_path):
    fifo = tmp_path / "plot.png"
    os.mkfifo(fifo)
    got: list = []
    reader = _read_fifo(fifo, got)
    with output_path(fifo) as path:
        assert path.suffix == ".png" and path.parent != tmp_path
        path.write_bytes(b"\x89PNG data")
    reader.join(10)
    assert got == [b"\x89PNG data"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


# ---------------------------------------------------------------------------- inputs are not outputs


def test_check_not_inputs(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n")
    hard = tmp_path / "hard.csv"
    os.link(data, hard)
    soft = tmp_path / "soft.csv"
    soft.symlink_to(data)
    artifact = tmp_path / "graph"
    artifact.mkdir()
    (artifact / "graph.npz").write_bytes(b"x")
    for out in (data, hard, soft, tmp_path / "." / "data.csv"):
        with pytest.raises(InputError, match="is the data input"):
            check_not_inputs({"--output": out}, {"data": data})
    with pytest.raises(InputError, match="contains the data input"):
        check_not_inputs({"--out": tmp_path}, {"data": data})
    with pytest.raises(InputError, match="inside the graph folder"):
        check_not_inputs({"--output": artifact / "plans.csv"}, {"graph": artifact})
    with pytest.raises(InputError, match="are the same path"):
        check_not_inputs({"--output": tmp_path / "x", "--plot": tmp_path / "x"}, {})
    with pytest.raises(InputError, match="--output is inside the output folder --out"):
        check_not_inputs({"--out": tmp_path / "plans", "--output": tmp_path / "plans" / "records.csv"}, {})
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    check_not_inputs({"--output": fifo, "--other": "-"}, {"data": data, "applicants": fifo, "stdin": "-"})
    check_not_inputs({"--output": tmp_path / "new.csv"}, {"data": data, "schema": None})


# ---------------------------------------------------------------------------- locks


def test_lock_refuses_a_second_writer_and_names_the_first(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old\n")
    with output_lock(path):
        assert lock_path(path).read_text().strip() == f"frpd {os.getpid()}"
        with pytest.raises(OutputBusyError, match=rf"'{path}' is being written by another frpd process "
                                                  rf"\(pid {os.getpid()}\)"):
            with open_output(path) as stream:
                stream.write("new\n")
    assert path.read_text() == "old\n" and not lock_path(path).exists()
    with open_output(path) as stream:                      # released: the next writer proceeds
        stream.write("new\n")
    assert path.read_text() == "new\n"


def test_stale_lock_file_is_taken_over(tmp_path):
    path = tmp_path / "out.csv"
    lock_path(path).write_text("frpd 999999\n")           # left by a writer killed with SIGKILL: not locked
    with open_output(path) as stream:
        stream.write("x")
    assert path.read_text() == "x" and not lock_path(path).exists()


# ---------------------------------------------------------------------------- spooled input


def test_spool_stdin_and_fifo(tmp_path):
    spooled = spool_input("-", stdin=io.BytesIO(b"a,b\n1,2\n"))
    assert spooled.path.read_bytes() == b"a,b\n1,2\n" and spooled.path.read_bytes() == b"a,b\n1,2\n"
    spooled.close()
    assert not spooled.path.exists()
    fifo = tmp_path / "in"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as handle:
            handle.write(b"x\n1\n")

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    spooled = spool_input(fifo)
    writer.join(10)
    assert spooled.path.read_bytes() == b"x\n1\n"
    path = spooled.path
    del spooled
    assert not path.exists()                               # removed with its object
    regular = tmp_path / "file.csv"
    regular.write_text("a\n")
    assert spool_input(regular) is None and spool_input(tmp_path / "missing.csv") is None


# ---------------------------------------------------------------------------- the commands


def _plan(paths, *extra, applicants=None):
    return ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(applicants or paths["applicants"]), *extra]


def test_output_dash_is_stdout(sample_paths):
    plain = runner.invoke(app, _plan(sample_paths, "--format", "jsonl"))
    dash = runner.invoke(app, _plan(sample_paths, "--format", "jsonl", "--output", "-"))
    assert plain.exit_code == dash.exit_code == 0, dash.stderr
    assert dash.stdout == plain.stdout and dash.stdout.count("\n") == 20


def test_applicants_dash_reads_stdin_once(sample_paths):
    plain = runner.invoke(app, _plan(sample_paths, "--format", "csv"))
    piped = runner.invoke(app, _plan(sample_paths, "--format", "csv", applicants="-"),
                          input=Path(sample_paths["applicants"]).read_bytes())
    assert plain.exit_code == piped.exit_code == 0, piped.stderr
    assert piped.stdout == plain.stdout


def test_applicants_from_a_pipe_and_output_to_the_stdout_descriptor(sample_paths):
    """``--applicants /proc/self/fd/0`` (a pipe, read twice before the fix) and ``--output /proc/self/fd/1`` (a
    pipe: written directly, never renamed) in a subprocess whose standard streams are pipes. These stand for
    ``/dev/stdin`` and ``/dev/stdout`` (the same alias rule) without naming a system file a regression could
    replace."""
    plain = runner.invoke(app, _plan(sample_paths, "--format", "jsonl"))
    done = subprocess.run([sys.executable, "-m", "frpd_cli", *_plan(sample_paths, "--format", "jsonl", "--output",
                                                                      "/proc/self/fd/1",
                                                                      applicants="/proc/self/fd/0")],
                          input=Path(sample_paths["applicants"]).read_bytes(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == plain.stdout


def test_plan_into_a_fifo(sample_paths, tmp_path):
    plain = runner.invoke(app, _plan(sample_paths, "--format", "csv"))
    fifo = tmp_path / "plans.csv"
    os.mkfifo(fifo)
    got: list = []
    reader = _read_fifo(fifo, got)
    result = runner.invoke(app, _plan(sample_paths, "--format", "csv", "--output", str(fifo)))
    reader.join(30)
    assert result.exit_code == 0, result.stderr
    assert got == [plain.stdout.encode()] and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert _others(tmp_path, "plans.csv") == []
    refused = runner.invoke(app, _plan(sample_paths, "--format", "csv", "--output", str(fifo), "--resume"))
    assert refused.exit_code == 2 and refused.stdout == ""
    assert "Invalid value for '--resume'" in refused.stderr and "a regular file" in refused.stderr


@pytest.mark.parametrize("name", ["data", "model", "applicants", "schema"])
def test_plan_output_equal_to_an_input_is_refused(sample_paths, tmp_path, name):
    paths = {}
    for key in ("data", "model", "applicants", "schema"):    # copies: a regression must not damage the repository
        copy = tmp_path / Path(sample_paths[key]).name
        copy.write_bytes(Path(sample_paths[key]).read_bytes())
        paths[key] = copy
    before = _sha(paths[name])
    link = tmp_path / "link"
    link.symlink_to(paths[name])
    for output in (paths[name], link):
        for fmt in ("csv", "json"):
            result = runner.invoke(app, _plan(paths, "--format", fmt, "--output", str(output)))
            assert result.exit_code == 1 and f"is the {name} input" in result.stderr, result.stderr
            assert result.stderr.startswith("Error:") and _sha(paths[name]) == before
    assert _others(tmp_path, *[p.name for p in paths.values()], "link") == []


def test_evaluate_and_build_graph_outputs_equal_to_inputs_refused(sample_paths, tmp_path):
    plans = tmp_path / "plans.jsonl"
    made = runner.invoke(app, _plan(sample_paths, "--format", "jsonl", "--output", str(plans)))
    assert made.exit_code == 0, made.stderr
    before = _sha(plans)
    result = runner.invoke(app, ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--plans", str(plans), "--output",
                                 str(plans)])
    assert result.exit_code == 1 and "is the plans input" in result.stderr and _sha(plans) == before
    data = tmp_path / "credit.csv"
    data.write_bytes(Path(sample_paths["data"]).read_bytes())
    before = _sha(data)
    result = runner.invoke(app, ["build-graph", str(data), "--model", str(sample_paths["model"]), "--schema",
                                 str(sample_paths["schema"]), "--out", str(tmp_path)])
    assert result.exit_code == 1 and "contains the data input" in result.stderr and _sha(data) == before
    result = runner.invoke(app, ["build-graph", str(data), "--model", str(sample_paths["model"]), "--schema",
                                 str(sample_paths["schema"]), "--out", str(tmp_path / "g"), "--export", "graphml",
                                 str(data)])
    assert result.exit_code == 1 and "is the data input" in result.stderr and _sha(data) == before
    assert not (tmp_path / "g").exists()


def test_interpolate_and_select_outputs_equal_to_inputs_refused(sample_paths, tmp_path):
    sel = tmp_path / "sel"
    made = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                               "--schema", str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]),
                               "--out", str(sel)])
    assert made.exit_code == 0, made.stderr
    before = {p.name: _sha(p) for p in sel.iterdir()}
    for extra in (["--out", str(sel)], ["--out", str(tmp_path / "plans"), "--output", str(sel / "prototypes.csv")]):
        result = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]),
                                     *extra])
        assert result.exit_code == 1 and result.stderr.startswith("Error:"), result.stderr
        assert "selection" in result.stderr
        assert {p.name: _sha(p) for p in sel.iterdir()} == before
    applicants = tmp_path / "in" / "applicants.csv"
    applicants.parent.mkdir()
    applicants.write_bytes(Path(sample_paths["applicants"]).read_bytes())
    result = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants", str(applicants),
                                 "--out", str(applicants.parent)])
    assert result.exit_code == 1 and "contains the applicants input" in result.stderr
    assert applicants.read_bytes() == Path(sample_paths["applicants"]).read_bytes()


def test_output_folder_is_one_clear_error(sample_paths, tmp_path):
    (tmp_path / "applicants.csv").write_bytes(Path(sample_paths["applicants"]).read_bytes())
    result = runner.invoke(app, _plan(sample_paths, "--output", str(tmp_path), applicants=tmp_path / "applicants.csv"))
    assert result.exit_code == 1 and "it is a folder" in result.stderr     # not "contains the applicants input"
    for fmt in ("csv", "json"):
        result = runner.invoke(app, _plan(sample_paths, "--format", fmt, "--output", str(tmp_path)))
        assert result.exit_code == 1 and "it is a folder" in result.stderr and "unexpected" not in result.stderr
    result = runner.invoke(app, _plan(sample_paths, "--output", str(tmp_path / "no" / "x.csv")))
    assert result.exit_code == 1 and "does not exist" in result.stderr


def test_second_writer_refused(sample_paths, tmp_path):
    out = tmp_path / "plans.csv"
    out.write_text("previous\n")
    with output_lock(out):                                 # another frpd run holds the output
        for fmt in ("csv", "json"):
            result = runner.invoke(app, _plan(sample_paths, "--format", fmt, "--output", str(out)))
            assert result.exit_code == 1, result.stderr
            assert f"Error: '{out}' is being written by another frpd process (pid {os.getpid()})" in result.stderr
    assert out.read_text() == "previous\n" and _others(tmp_path, "plans.csv") == []


_FLAKY = '''
class RaisesOnMarker:
    """Predicts like the wrapped model, but raises on a row whose credit_amount is the marker."""

    def __init__(self, inner):
        self.inner = inner
        self.classes_ = inner.classes_
        self.feature_names_in_ = inner.feature_names_in_
        self.n_features_in_ = inner.n_features_in_

    def predict_proba(self, X):
        if (X["credit_amount"] == 123456.0).any():
            raise RuntimeError("the model failed on this input")
        return self.inner.predict_proba(X)

    def predict(self, X):
        return self.inner.predict(X)
'''


@pytest.fixture()
def flaky(sample_paths, tmp_path, monkeypatch):
    """A model that raises on the last applicant, and applicants whose last chunk holds that applicant."""
    module = tmp_path / "frpd_test_flaky_model.py"
    module.write_text(textwrap.dedent(_FLAKY))
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    flaky_module = importlib.import_module("frpd_test_flaky_model")
    model = tmp_path / "flaky.pkl"
    joblib.dump(flaky_module.RaisesOnMarker(joblib.load(sample_paths["model"])), model)
    frame = pd.read_csv(sample_paths["applicants"])
    last = frame.iloc[[0]].copy()
    last["applicant_id"] = "MARK"
    last["credit_amount"] = 123456.0
    applicants = tmp_path / "applicants.csv"
    pd.concat([frame, last], ignore_index=True).to_csv(applicants, index=False)
    yield {**sample_paths, "model": model, "applicants": applicants}
    sys.modules.pop("frpd_test_flaky_model", None)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json", "table"])
def test_failing_run_keeps_previous_output(flaky, tmp_path, fmt):
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / f"plans.{fmt}"
    out.write_bytes(b"previous results\n")
    result = runner.invoke(app, _plan(flaky, "--format", fmt, "--chunk-size", "4", "--output", str(out)))
    # the marker row is outside the training range: one warning line, then the error
    errors = [line for line in result.stderr.splitlines() if not line.startswith("Warning:")]
    assert result.exit_code == 1 and errors[0].startswith("Error:"), result.stderr
    assert out.read_bytes() == b"previous results\n"
    assert _others(folder, out.name) == []                 # no temporary, partial, progress or lock file


def _start(paths, applicants, out, *extra, env=None):
    command = [sys.executable, "-m", "frpd_cli", *_plan(paths, "--chunk-size", "8",
                                                         "--output", str(out), *extra, applicants=applicants)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env)


def _progress_done(out: Path) -> int:
    try:
        return json.loads(sidecar_path(out).read_text())["done"]
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_sigterm_leaves_previous_output_and_no_temporary_file(gated, tmp_path, fmt):
    applicants = gated.applicants(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / f"plans.{fmt}"
    out.write_bytes(b"previous results\n")
    process = _start(gated.paths, applicants, out, "--format", fmt, env=gated.env)
    try:
        gated.wait_held(process)                   # planning the task of applicant 600: mid-run
        if fmt == "csv":
            assert 0 < _progress_done(out) <= 600          # chunks before it are checkpointed
        else:
            assert any(p.suffix == ".tmp" for p in folder.iterdir())
        process.send_signal(signal.SIGTERM)
        stderr = process.communicate(timeout=600)[1].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Error: stopped by SIGTERM" in stderr and "Traceback" not in stderr
    assert out.read_bytes() == b"previous results\n"
    if fmt == "csv":                                       # kept to be resumed (tests/test_output_safety.py)
        assert _others(folder, out.name) == sorted([partial_path(out).name, sidecar_path(out).name])
    else:                                                  # json is not written chunk by chunk: nothing to resume
        assert _others(folder, out.name) == []


def test_resume_after_sigterm_refuses_an_edited_prefix_and_is_idempotent(gated, tmp_path):
    applicants = gated.applicants(tmp_path)
    args = ["--format", "csv", "--chunk-size", "8"]
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / "plans.csv"
    process = _start(gated.paths, applicants, out, "--format", "csv", "--resume", env=gated.env)
    try:
        gated.wait_held(process)
        assert 0 < _progress_done(out) <= 600
        process.send_signal(signal.SIGTERM)
        stderr = process.communicate(timeout=600)[1].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Kept" in stderr and not out.exists()           # a --resume run keeps its partial file to continue
    gated.release.touch()                                  # from here on the model never holds a run
    reference = tmp_path / "reference.csv"
    done = runner.invoke(app, _plan(gated.paths, *args, "--output", str(reference), applicants=applicants))
    assert done.exit_code == 0, done.stderr
    partial = partial_path(out)
    kept = partial.read_bytes()
    args = _plan(gated.paths, *args, "--output", str(out), "--resume", applicants=applicants)
    edited = kept.replace(b"B0001", b"B000X", 1)
    assert edited != kept
    partial.write_bytes(edited)
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1 and "the file was edited" in refused.stderr, refused.stderr
    assert partial.read_bytes() == edited and not out.exists()
    partial.write_bytes(kept)
    resumed = runner.invoke(app, args)
    assert resumed.exit_code == 0 and "Resuming" in resumed.stderr, resumed.stderr
    assert out.read_bytes() == reference.read_bytes() and _others(folder, "plans.csv") == []
    mtime = out.stat().st_mtime_ns
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and "is complete" in again.stderr, again.stderr
    assert not re.search(r"^\d+ applicant\(s\): ", again.stderr, re.M)    # nothing planned: no summary line
    assert out.read_bytes() == reference.read_bytes() and out.stat().st_mtime_ns == mtime


def test_evaluate_and_export_into_fifos_keep_them_fifos(sample_paths, tmp_path):
    """The commands that replaced /dev/null with a regular file: their outputs into FIFOs standing for devices."""
    pytest.importorskip("matplotlib", reason="--plot needs the plot extra")
    plans = tmp_path / "plans.jsonl"
    made = runner.invoke(app, _plan(sample_paths, "--format", "jsonl", "--output", str(plans)))
    assert made.exit_code == 0, made.stderr
    evaluate = ["evaluate", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
                str(sample_paths["schema"]), "--plans", str(plans), "--format", "csv"]
    plain = runner.invoke(app, evaluate)
    assert plain.exit_code == 0, plain.stderr
    fifos = {name: tmp_path / name for name in ("metrics", "plot", "graphml")}
    for fifo in fifos.values():
        os.mkfifo(fifo)
    got: dict = {name: [] for name in fifos}
    readers = [_read_fifo(fifos[name], got[name]) for name in fifos]
    result = runner.invoke(app, [*evaluate, "--output", str(fifos["metrics"]), "--plot", str(fifos["plot"])])
    assert result.exit_code == 0, result.stderr
    built = runner.invoke(app, ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                "--schema", str(sample_paths["schema"]), "--out", str(tmp_path / "graph"),
                                "--export", "graphml", str(fifos["graphml"])])
    assert built.exit_code == 0, built.stderr
    for reader in readers:
        reader.join(30)
    assert got["metrics"] == [plain.stdout.encode()]
    assert got["plot"][0].startswith(b"\x89PNG")
    assert got["graphml"][0].startswith(b"<?xml") and b"<graphml" in got["graphml"][0]
    assert all(stat.S_ISFIFO(os.stat(f).st_mode) for f in fifos.values())
    assert _others(tmp_path, "plans.jsonl", "graph", *fifos) == []


def _signal_after_creating(monkeypatch, module, signum):
    """Make ``module``'s ``tempfile.mkstemp``/``mkdtemp`` deliver ``signum`` to this process once the file exists."""
    import tempfile as real

    class Tempfile:
        gettempdir = staticmethod(real.gettempdir)

        @staticmethod
        def mkstemp(*args, **kwargs):
            made = real.mkstemp(*args, **kwargs)
            os.kill(os.getpid(), signum)
            return made

        @staticmethod
        def mkdtemp(*args, **kwargs):
            made = real.mkdtemp(*args, **kwargs)
            os.kill(os.getpid(), signum)
            return made

    monkeypatch.setattr(module, "tempfile", Tempfile)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_right_after_a_temporary_file_is_made_leaves_no_file(tmp_path, monkeypatch, signum):
    """Ctrl-C or SIGTERM landing between creating a temporary file and recording its name: nothing is left."""
    from frpd_cli import artifacts, outputs
    from frpd_cli.outputs import Terminated, open_output, terminate_on_signals

    expected = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
    # a background job starts with SIGINT ignored: here Ctrl-C acts as at a terminal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _no_leftovers_after(signum, expected, tmp_path, monkeypatch, artifacts, outputs, open_output,
                            terminate_on_signals)
    finally:
        signal.signal(signal.SIGINT, previous)


def _no_leftovers_after(signum, expected, tmp_path, monkeypatch, artifacts, outputs, open_output,
                        terminate_on_signals):
    target = tmp_path / "sidecar.json"
    target.write_bytes(b"old")
    _signal_after_creating(monkeypatch, artifacts, signum)
    with pytest.raises(expected), terminate_on_signals():
        artifacts.atomic_write_bytes(target, b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sidecar.json"] and target.read_bytes() == b"old"

    out = tmp_path / "plans.csv"
    _signal_after_creating(monkeypatch, outputs, signum)
    with pytest.raises(expected), open_output(out) as stream:
        stream.write("never\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sidecar.json"]

    folder = tmp_path / "artifact"
    _signal_after_creating(monkeypatch, artifacts, signum)
    with pytest.raises(expected), terminate_on_signals():
        artifacts.write_artifact(folder, kind="test", params={}, inputs={}, payloads={"a.json": "{}"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sidecar.json"]


def test_disk_full_writing_an_artifact_names_it(sample_paths, tmp_path, monkeypatch):
    import frpd_cli.artifacts as artifacts

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")      # a write to a full disk names no file

    monkeypatch.setattr(artifacts, "_write_file", full)
    out = tmp_path / "sel"
    result = runner.invoke(app, ["select", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants",
                                 str(sample_paths["applicants"]), "-q", "--out", str(out)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"Error: Cannot write '{out}': the disk is full (No space left on "
                                          f"device). Free space in '{tmp_path}' or choose another folder."]
    assert list(tmp_path.iterdir()) == []


def test_unnamed_os_errors_blame_the_scheduler_only_from_dask():
    from frpd_cli.cli._errors import _os_error_message

    def raised(exc, module):
        try:
            exec("raise exc", {"__name__": module, "exc": exc})
        except OSError as caught:
            return caught

    reset = raised(OSError(errno.ECONNRESET, "Connection reset by peer"), "distributed.comm.tcp")
    assert "--scheduler" in _os_error_message(reset)
    for exc in (OSError(errno.ECONNRESET, "Connection reset by peer"), OSError(errno.ENOSPC, "No space left")):
        assert "--scheduler" not in _os_error_message(raised(exc, "frpd_cli.cli.plan"))
    assert "The disk is full" in _os_error_message(OSError(errno.ENOSPC, "No space left on device"))


def test_table_to_a_reader_that_goes_away_exits_quietly(sample_paths, tmp_path):
    """`frpd plan ... --format table | head -1`: exit 0 and nothing on stderr, as for the other formats (rich's
    console would turn the broken pipe into exit 1). The 200 applicants' tables (about 160 kB) outgrow the pipe's
    buffer, so frpd is still writing when the reader closes its end."""
    frame = pd.read_csv(sample_paths["applicants"])
    many = pd.concat([frame] * 10, ignore_index=True)
    many["applicant_id"] = [f"B{i:04d}" for i in range(len(many))]
    applicants = tmp_path / "many.csv"
    many.to_csv(applicants, index=False)
    command = [sys.executable, "-m", "frpd_cli", "plan", str(sample_paths["data"]), "--model",
               str(sample_paths["model"]), "--schema", str(sample_paths["schema"]), "--applicants", str(applicants),
               "-q", "--format", "table"]
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT)
        try:
            assert process.stdout.readline()
            process.stdout.close()
            status = process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert (status, (tmp_path / "stderr.txt").read_text()) == (0, "")
