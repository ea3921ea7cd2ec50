"""The side files of an output (lock, partial, progress) are frpd's own or left alone; a write error cleans up
before its one error line; the output lock is taken before any input is read; an interrupted run keeps its work
and says how to resume it.

Every run works on copies in a temporary folder: a regression can only damage those.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.outputs import lock_path
from frpd_cli.streaming import partial_path, sidecar_path

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture()
def work(sample_paths, tmp_path) -> dict:
    """Copies of the sample inputs in a fresh folder (the current folder of the runs is not changed)."""
    folder = tmp_path / "work"
    folder.mkdir()
    paths = {}
    for key in ("data", "model", "schema", "applicants"):
        paths[key] = folder / Path(sample_paths[key]).name
        shutil.copyfile(sample_paths[key], paths[key])
    paths["folder"] = folder
    return paths


def _plan(paths, *extra, applicants=None) -> list[str]:
    return ["plan", str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]),
            "--applicants", str(applicants or paths["applicants"]), *extra]


def _listing(folder: Path) -> dict:
    """Every entry of ``folder``: kind and content hash (files), to compare before and after a run."""
    out = {}
    for p in sorted(folder.iterdir()):
        st = os.stat(p, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            out[p.name] = ("link", os.readlink(p))
        elif stat.S_ISFIFO(st.st_mode):
            out[p.name] = ("fifo",)
        elif stat.S_ISDIR(st.st_mode):
            out[p.name] = ("dir", tuple(sorted(os.listdir(p))))
        else:
            out[p.name] = ("file", _sha(p), st.st_nlink)
    return out


def _plant(path: Path, kind: str, victim: Path) -> None:
    """Put something frpd did not make where it keeps a side file."""
    if kind == "hard link":
        os.link(victim, path)
    elif kind == "symlink":
        path.symlink_to(victim.name)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
        (path / "notes.txt").write_text("keep me\n")
    else:
        path.write_text("not frpd's\n")


KINDS = ["hard link", "symlink", "fifo", "folder", "another file"]


# ---------------------------------------------------------------------------- the lock file


@pytest.mark.parametrize("kind", KINDS)
def test_plan_never_touches_what_is_at_the_lock_path(work, kind):
    """`ln credit.csv .plans.csv.lock` made frpd truncate credit.csv to its pid and delete it."""
    folder, out = work["folder"], work["folder"] / "plans.csv"
    out.write_text("previous\n")
    _plant(lock_path(out), kind, work["data"])
    before = _listing(folder)
    result = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(out)))
    assert result.exit_code == 1, result.stderr
    assert result.stderr.startswith("Error: '") and "the lock file of" in result.stderr, result.stderr
    assert "never follows, opens for writing, truncates or deletes" in result.stderr
    assert _listing(folder) == before                      # the data, the planted entry and plans.csv as they were


def _evaluate_args(work, plans, *extra):
    return ["evaluate", str(work["data"]), "--model", str(work["model"]), "--schema", str(work["schema"]),
            "--plans", str(plans), *extra]


@pytest.mark.parametrize("command", ["schema --write", "evaluate --output", "plan --provenance", "select --out",
                                     "interpolate --out", "build-graph --out", "build-graph --export",
                                     "build-pool --out", "build-refits --out"])
def test_every_writer_refuses_a_hard_link_at_its_lock_path(work, command):
    folder = work["folder"]
    common = [str(work["data"]), "--model", str(work["model"]), "--schema", str(work["schema"])]
    if command == "schema --write":
        out, args = folder / "new.toml", ["schema", *common, "--write", str(folder / "new.toml")]
    elif command == "evaluate --output":
        plans = folder / "plans.jsonl"
        made = runner.invoke(app, _plan(work, "--format", "jsonl", "--output", str(plans)))
        assert made.exit_code == 0, made.stderr
        out, args = folder / "metrics.csv", _evaluate_args(work, plans, "--format", "csv", "--output",
                                                           str(folder / "metrics.csv"))
    elif command == "plan --provenance":
        out = folder / "plans.provenance.json"
        args = _plan(work, "--format", "csv", "--output", str(folder / "plans.csv"), "--provenance", str(out))
    elif command == "select --out":
        out, args = folder / "sel", ["select", *common, "--applicants", str(work["applicants"]), "--out",
                                     str(folder / "sel")]
    elif command == "interpolate --out":           # refused before the (missing) selection is read
        out, args = folder / "plans", ["interpolate", "--selection", str(folder / "sel"), "--model",
                                       str(work["model"]), "--out", str(folder / "plans")]
    elif command == "build-graph --out":
        out, args = folder / "graph", ["build-graph", *common, "--out", str(folder / "graph")]
    elif command == "build-graph --export":
        out, args = folder / "g.graphml", ["build-graph", *common, "--out", str(folder / "graph"), "--export",
                                           "graphml", str(folder / "g.graphml")]
    elif command == "build-refits --out":
        out, args = folder / "refits", ["build-refits", *common, "--robust", "2", "--out", str(folder / "refits")]
    else:
        out, args = folder / "pool", ["build-pool", *common, "--out", str(folder / "pool")]
    _plant(lock_path(out), "hard link", work["data"])
    before = _listing(folder)
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.stderr
    assert "the lock file of" in result.stderr and "hard link" in result.stderr, result.stderr
    assert _listing(folder) == before


_HOLDER = """
import sys
from frpd_cli.outputs import output_lock
with output_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()            # holds the lock until killed
"""


def test_a_lock_left_by_a_killed_writer_is_taken_over(work):
    """Liveness is the flock, not the pid in the file: a writer killed with SIGKILL leaves a file nobody locks."""
    out = work["folder"] / "plans.csv"
    # ``with`` closes the pipes: left open, they are collected during a later in-process run, whose stderr then
    # starts with "Warning: unclosed file" (ResourceWarning) instead of its own message.
    with subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, cwd=ROOT) as holder:
        try:
            assert holder.stdout.readline() == b"locked\n"
            busy = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(out)))
            assert busy.exit_code == 1
            assert f"'{out}' is being written by another frpd process (pid {holder.pid})" in busy.stderr
            holder.kill()
            holder.wait()
        finally:
            if holder.poll() is None:
                holder.kill()
                holder.wait()
    assert lock_path(out).read_text() == f"frpd {holder.pid}\n"  # left behind, unlocked
    done = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(out)))
    assert done.exit_code == 0, done.stderr
    assert out.exists() and not lock_path(out).exists()


@pytest.mark.parametrize("text", ["", "31337\n", "frpd\n", "frpd 12 extra\n"])
def test_a_file_at_the_lock_path_that_only_looks_like_a_lock_is_kept(work, text):
    """A user's ``.plans.csv.lock`` that was empty or held only digits was taken over and deleted at exit: only
    a file holding ``frpd PID`` (what frpd writes) is a lock a killed run left."""
    folder, out = work["folder"], work["folder"] / "plans.csv"
    lock_path(out).write_text(text)
    before = _listing(folder)
    result = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(out)))
    assert result.exit_code == 1 and "the lock file of" in result.stderr, result.stderr
    assert _listing(folder) == before


# ---------------------------------------------------------------------------- partial and progress files


def _run(args, timeout=600):
    """A run in a subprocess: a FIFO planted by a test can never hang the test itself."""
    return subprocess.run([sys.executable, "-m", "frpd_cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          cwd=ROOT, timeout=timeout)


@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
@pytest.mark.parametrize("side", ["partial", "progress"])
@pytest.mark.parametrize("kind", KINDS)
def test_plan_never_follows_or_clobbers_a_partial_or_progress_file_it_did_not_make(work, kind, side, resume):
    """`ln -s victim.txt p3.csv.partial` made frpd overwrite victim.txt; a FIFO there hung the run."""
    folder, out = work["folder"], work["folder"] / "p3.csv"
    victim = folder / "victim.txt"
    victim.write_text("precious\n")
    planted = partial_path(out) if side == "partial" else sidecar_path(out)
    _plant(planted, kind, victim)
    before = _listing(folder)
    args = _plan(work, "--format", "csv", "--output", str(out), *(["--resume"] if resume else []))
    result = _run(args) if kind == "fifo" else runner.invoke(app, args)
    code = getattr(result, "returncode", getattr(result, "exit_code", None))
    stderr = result.stderr if isinstance(result.stderr, str) else result.stderr.decode()
    assert code == 1, stderr
    assert stderr.startswith("Error: ") and f"the {side} file of" in stderr, stderr
    assert _listing(folder) == before                      # victim, planted entry, no p3.csv, no lock left


def test_an_unusable_progress_path_leaves_no_empty_partial_and_names_it(work):
    out = work["folder"] / "o.csv"
    sidecar_path(out).mkdir()
    result = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(out)))
    assert result.exit_code == 1
    assert "'" + str(sidecar_path(out)) + "', the progress file of" in result.stderr, result.stderr
    assert "a folder" in result.stderr
    assert not partial_path(out).exists() and not out.exists() and not lock_path(out).exists()


def _killed_run(out: Path, text: str = "applicant,status\n0,ok\n") -> None:
    """The partial and progress files a run killed after its first checkpoint leaves (``close`` without
    ``finish``: what SIGKILL leaves behind)."""
    from frpd_cli.streaming import ResumableOutput

    run = ResumableOutput(out, fingerprint={"inputs": {"data": "x"}, "format": "csv"}, resume=True)
    run.stream.write(text)
    run.checkpoint(1)
    run.close()
    assert partial_path(out).exists() and sidecar_path(out).exists()


def test_leftovers_frpd_made_are_still_discarded_by_a_fresh_run(work):
    """What frpd made itself is recognised: the partial and progress files of a killed run (the partial holding
    the bytes its progress file recorded) are discarded by a fresh run."""
    out = work["folder"] / "plans.csv"
    reference = runner.invoke(app, _plan(work, "--format", "csv", "--chunk-size", "4"))
    _killed_run(out)
    done = runner.invoke(app, _plan(work, "--format", "csv", "--chunk-size", "4", "--output", str(out)))
    assert done.exit_code == 0 and "Discarding" in done.stderr, done.stderr
    assert out.read_text() == reference.stdout and not partial_path(out).exists()
    assert not sidecar_path(out).exists()


@pytest.mark.parametrize("case", ["empty partial alone", "partial alone", "partial edited after the checkpoint",
                                  "progress of another format", "progress with only a fingerprint"])
def test_side_files_that_only_look_like_frpds_are_kept(work, case):
    """A user's empty ``FILE.partial``, a partial whose bytes are not the ones its progress file recorded, and a JSON
    file that merely has a ``fingerprint`` key were deleted by a fresh run; now each is refused and kept."""
    folder, out = work["folder"], work["folder"] / "q.csv"
    if case == "empty partial alone":
        partial_path(out).write_text("")
    elif case == "partial alone":
        partial_path(out).write_text("mine\n")
    elif case == "partial edited after the checkpoint":
        _killed_run(out)
        partial_path(out).write_text("applicant,status\n9,mine\n")
    elif case == "progress of another format":
        partial_path(out).write_text("mine\n")
        sidecar_path(out).write_text('{"fingerprint": "x"}')
    else:
        sidecar_path(out).write_text('{"fingerprint": {}}')
    before = _listing(folder)
    result = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(out)))
    assert result.exit_code == 1 and result.stderr.startswith("Error: "), result.stderr
    assert "file frpd did not write" in result.stderr
    assert _listing(folder) == before


# ---------------------------------------------------------------------------- outputs that are inputs


@pytest.fixture()
def refits(work):
    """Two refits of the sample model, built into the work folder."""
    out = work["folder"] / "R"
    built = runner.invoke(app, ["build-refits", str(work["data"]), "--model", str(work["model"]), "--schema",
                                str(work["schema"]), "--robust", "2", "--out", str(out), "-q"])
    assert built.exit_code == 0, built.stderr
    return out


@pytest.mark.parametrize("command,option,name", [("plan", "--output", "refit-001.skops"), ("plan", "--output", "new.csv"),
                                                 ("plan", "--provenance", "refit-002.skops"),
                                                 ("interpolate", "--output", "refit-001.skops"),
                                                 ("interpolate", "--output", "new.csv")])
def test_no_output_lands_inside_the_refits_folder_it_reads(work, refits, command, option, name):
    """`plan --refits R --output R/refit-001.skops` replaced a refit by plans (the artifact then refused to load):
    the folder of an input artifact read through its manifest is an input folder too."""
    if command == "interpolate":
        selection = work["folder"] / "S"
        made = runner.invoke(app, ["select", str(work["data"]), "--model", str(work["model"]), "--schema",
                                   str(work["schema"]), "--applicants", str(work["applicants"]), "--out",
                                   str(selection), "-k", "2"])
        assert made.exit_code == 0, made.stderr
        args = ["interpolate", "--selection", str(selection), "--model", str(work["model"]), "--refits", str(refits),
                "--robust", "2", "--data", str(work["data"]), "--out", str(work["folder"] / "I")]
    else:
        args = _plan(work, "--format", "csv", "--refits", str(refits), "--robust", "2")
    before = _listing(refits)
    result = runner.invoke(app, [*args, option, str(refits / name)] + (["--output", str(work["folder"] / "o.csv")]
                                                                       if option == "--provenance" else []))
    assert result.exit_code == 1 and "is inside the refits folder" in result.stderr, result.stderr
    assert _listing(refits) == before


def test_stdin_redirected_from_the_output_file_is_refused(work):
    """`frpd plan ... --applicants - --output a.csv < a.csv` replaced the applicants file by the plans."""
    folder = work["folder"]
    applicants = folder / "a.csv"
    shutil.copyfile(work["applicants"], applicants)
    before = _listing(folder)
    with open(applicants, "rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "frpd_cli", *_plan(work, "--format", "csv", "--output",
                                                                         str(applicants), applicants="-")],
                              stdin=stdin, capture_output=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1, done.stderr
    assert b"is the file the applicants input '-' (stdin) reads" in done.stderr
    assert _listing(folder) == before


@pytest.mark.parametrize("name", ["plans.csv.partial", "plans.csv.resume.json", ".plans.csv.lock"])
def test_an_output_named_like_another_outputs_side_file_is_refused(work, name):
    """An output named ``o.csv.partial`` while a run writes ``o.csv`` was renamed over that run's partial file."""
    folder = work["folder"]
    before = _listing(folder)
    result = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(folder / name)))
    assert result.exit_code == 1 and "has the name of a side file" in result.stderr, result.stderr
    assert _listing(folder) == before


# ---------------------------------------------------------------------------- write errors


def _limit_file_size(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_write_error_removes_every_file_frpd_made_then_one_error_line(work, fmt):
    """`ulimit -f 40` left o.csv.partial, o.csv.resume.json and .o.csv.lock and blamed --scheduler."""
    folder = work["folder"]
    frame = pd.read_csv(work["applicants"])
    many = pd.concat([frame] * 20, ignore_index=True)
    many["applicant_id"] = [f"N{i:04d}" for i in range(len(many))]
    applicants = folder / "app400.csv"
    many.to_csv(applicants, index=False)
    out = folder / f"o.{fmt}"
    out.write_text("OLD\n")
    before = _listing(folder)
    result = subprocess.run([sys.executable, "-m", "frpd_cli", *_plan(work, "--format", fmt, "--chunk-size", "16",
                                                                      "--output", str(out), applicants=applicants)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, timeout=600,
                            preexec_fn=_limit_file_size(40 * 1024))
    stderr = result.stderr.decode()
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert result.returncode == 1, stderr
    written = partial_path(out) if fmt == "csv" else out
    assert errors == [line for line in stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: Cannot write '{written}': the file would exceed"), stderr
    assert "--scheduler" not in stderr and "Traceback" not in stderr
    assert _listing(folder) == before                      # o.csv is OLD; no partial, progress, lock, temporary


def test_a_full_disk_is_named_and_cleaned_up(work, monkeypatch):
    import errno

    out = work["folder"] / "o.csv"
    out.write_text("OLD\n")
    before = _listing(work["folder"])
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 3:                                # the second checkpoint
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    result = runner.invoke(app, _plan(work, "--format", "csv", "--chunk-size", "4", "--output", str(out)))
    monkeypatch.undo()
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Cannot write '"), result.stderr
    assert "the disk is full (No space left on device)" in result.stderr and result.stderr.count("Error:") == 1
    assert _listing(work["folder"]) == before


# ---------------------------------------------------------------------------- the lock comes first


def test_the_lock_is_taken_before_the_applicants_are_read(work, tmp_path):
    """A second writer started while the first is still reading its applicants (a slow pipe) is refused at once,
    and the first completes with the right output."""
    folder, out = work["folder"], work["folder"] / "plans.csv"
    reference = runner.invoke(app, _plan(work, "--format", "csv"))
    assert reference.exit_code == 0, reference.stderr
    fifo = tmp_path / "applicants.fifo"
    os.mkfifo(fifo)
    first = subprocess.Popen([sys.executable, "-m", "frpd_cli", *_plan(work, "--format", "csv", "--output", str(out),
                                                                      applicants=fifo)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        data = work["applicants"].read_bytes()
        with open(fifo, "wb") as pipe:                     # returns once the first run opens its applicants
            pipe.write(data[: len(data) // 2])
            pipe.flush()
            second = runner.invoke(app, _plan(work, "--format", "csv", "--output", str(out)))
            assert second.exit_code == 1, second.stderr
            assert second.stderr == (f"Error: '{out}' is being written by another frpd process (pid {first.pid}). "
                                     "Wait for it to finish, or write to another file.\n")
            assert not out.exists()
            pipe.write(data[len(data) // 2:])
        stdout, stderr = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, stderr.decode()
    assert out.read_text() == reference.stdout
    assert sorted(p.name for p in folder.iterdir()) == sorted(["plans.csv", *(work[k].name for k in
                                                                              ("data", "model", "schema",
                                                                               "applicants"))])


# ---------------------------------------------------------------------------- interrupted runs


def _wait_until_held(process, gated, out) -> None:
    """Wait until the gated model holds the run; the chunks before the held one are checkpointed by then."""
    gated.wait_held(process)
    assert sidecar_path(out).exists() and os.path.getsize(partial_path(out)) > 0


def _default_signals():
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):   # a background or nohup job ignores some
        signal.signal(signum, signal.SIG_DFL)


_REFERENCES: dict = {}     # uninterrupted outputs by format (the applicants are the same in every test)


@pytest.mark.parametrize("signum, fmt", [(signal.SIGINT, "csv"), (signal.SIGTERM, "jsonl"), (signal.SIGHUP, "csv")],
                         ids=["SIGINT-csv", "SIGTERM-jsonl", "SIGHUP-csv"])
def test_an_interrupted_run_keeps_its_work_and_says_how_to_resume(gated, tmp_path, signum, fmt):
    """Ctrl-C (and SIGTERM, SIGHUP) without --resume deleted the work done although --help says it can be
    continued. Now the partial and progress files stay, the previous output is untouched, stderr gives the exact
    command, and that command completes the output byte for byte as an uninterrupted run."""
    applicants = gated.applicants(tmp_path)
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / f"plans.{fmt}"
    out.write_bytes(b"previous results\n")
    args = _plan(gated.paths, "--format", fmt, "--chunk-size", "8", "--output", str(out), applicants=applicants)
    process = subprocess.Popen([sys.executable, "-m", "frpd_cli", *args], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, cwd=ROOT, env=gated.env, preexec_fn=_default_signals)
    try:
        _wait_until_held(process, gated, out)
        process.send_signal(signum)
        stderr = process.communicate(timeout=600)[1].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    assert out.read_bytes() == b"previous results\n"
    assert partial_path(out).exists() and sidecar_path(out).exists() and not lock_path(out).exists()
    lines = [line for line in stderr.splitlines() if "To continue, run: " in line]
    assert len(lines) == 1, stderr
    assert f"Kept '{partial_path(out)}' (" in lines[0] and f"'{out}' is untouched" in lines[0]
    command = shlex.split(lines[0].split("To continue, run: ", 1)[1])
    assert command == ["frpd", *args, "--resume"]
    gated.release.touch()                                  # from here on the model never holds a run
    if fmt not in _REFERENCES:
        reference = tmp_path / f"reference.{fmt}"
        made = runner.invoke(app, _plan(gated.paths, "--format", fmt, "--chunk-size", "8", "--output",
                                        str(reference), applicants=applicants))
        assert made.exit_code == 0, made.stderr
        _REFERENCES[fmt] = reference.read_bytes()
    resumed = runner.invoke(app, command[1:])
    assert resumed.exit_code == 0 and "Resuming" in resumed.stderr, resumed.stderr
    assert out.read_bytes() == _REFERENCES[fmt]
    assert sorted(p.name for p in folder.iterdir()) == [out.name]
