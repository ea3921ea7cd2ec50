"""Tests of frpd_cli.artifacts: manifest + payload folders, atomic, hashed, versioned."""

import errno
import hashlib
import json
import os
import stat
import zipfile

import numpy as np
import pandas as pd
import pytest

import frpd_cli._digests as _digests
import frpd_cli.artifacts as artifacts
from frpd_cli import __version__
from frpd_cli._digests import remembered_digests
from frpd_cli.artifacts import (
    MANIFEST_NAME,
    SCHEMA_VERSION,
    atomic_write_bytes,
    atomic_write_text,
    read_artifact,
    sha256_file,
    write_artifact,
)
from frpd_cli.exceptions import ArtifactError, InputError, StaleArtifactError

HINT = "frpd build-graph DATA --model MODEL --out DIR"


@pytest.fixture
def inputs(tmp_path):
    data = tmp_path / "train.csv"
    data.write_text("a,b\n1,2\n")
    model = tmp_path / "model.pkl"
    model.write_bytes(b"\x80\x04model")
    return {"data": data, "model": model}


def _payloads():
    return {
        "graph.npz": {
            "indptr": np.array([0, 2, 3], dtype=np.int64),
            "weights": np.array([0.5, 1.25, np.inf]),
            "labels": np.array(["own", "rent"]),
        },
        "rows.csv": pd.DataFrame({"x": [0.1, 1 / 3], "housing": ["own", "rent"]}),
        "meta.json": {"k": 3, "theta": np.float64(0.9), "columns": ("a", "b")},
        "notes.txt": "built for tests\n",
    }


def _write(out, inputs, **kwargs):
    return write_artifact(
        out, kind="graph", params={"k": 3, "bandwidth": 0.25}, inputs=inputs, payloads=_payloads(), **kwargs
    )


def test_round_trip(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    art = read_artifact(out, kind="graph", inputs=inputs, command_hint=HINT)
    arrays = art.load_npz("graph.npz")
    for key, value in _payloads()["graph.npz"].items():
        np.testing.assert_array_equal(arrays[key], value)
        assert arrays[key].dtype == value.dtype
    pd.testing.assert_frame_equal(art.load_csv("rows.csv"), _payloads()["rows.csv"])
    assert art.load_json("meta.json") == {"k": 3, "theta": 0.9, "columns": ["a", "b"]}
    assert art.load_text("notes.txt") == "built for tests\n"
    m = art.manifest
    assert m["kind"] == "graph" and m["schema_version"] == SCHEMA_VERSION and m["frpd_version"] == __version__
    assert m["params"] == {"k": 3, "bandwidth": 0.25}
    assert m["inputs"]["data"] == {"path": str(inputs["data"].resolve()), "sha256": sha256_file(inputs["data"])}
    assert {"python", "numpy", "scipy", "pandas", "scikit-learn", "highspy"} <= m["libraries"].keys()
    assert set(m["payloads"]) == {"graph.npz", "rows.csv", "meta.json", "notes.txt"}
    for name, entry in m["payloads"].items():
        assert entry["sha256"] == sha256_file(out / name) and entry["size"] == (out / name).stat().st_size
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST_NAME, *m["payloads"]])


def test_sha256_file_oracle(tmp_path):
    path = tmp_path / "f"
    data = os.urandom(3 * (1 << 20) + 17)  # crosses chunk boundaries
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_npz_has_no_pickles_and_loads_with_allow_pickle_false(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    with np.load(out / "graph.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == ["indptr", "labels", "weights"]
        assert archive["labels"].dtype.kind == "U"
    with zipfile.ZipFile(out / "graph.npz") as archive:
        assert all(info.compress_type == zipfile.ZIP_DEFLATED for info in archive.infolist())


def test_object_arrays_refused(tmp_path, inputs):
    with pytest.raises(ArtifactError, match="dtype object"):
        write_artifact(
            tmp_path / "g", kind="graph", params={}, inputs={},
            payloads={"x.npz": {"a": np.array([{"x": 1}], dtype=object)}},
        )
    assert {p.name for p in tmp_path.iterdir()} == {"train.csv", "model.pkl"}


def test_wrong_kind_refused(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    with pytest.raises(ArtifactError) as info:
        read_artifact(out, kind="selection", command_hint="frpd select DATA --out DIR")
    assert "'graph' artifact; expected a 'selection' artifact" in str(info.value)
    assert "frpd select DATA --out DIR" in str(info.value)


@pytest.mark.parametrize("version, advice", [(2, "upgrade frpd"), (0, "re-run"), ("1", "re-run")])
def test_unknown_schema_version_refused(tmp_path, inputs, version, advice):
    out = _write(tmp_path / "g", inputs)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    manifest["schema_version"] = version
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError) as info:
        read_artifact(out, kind="graph", command_hint=HINT)
    assert f"schema version {version!r}" in str(info.value) and advice in str(info.value) and HINT in str(info.value)


def test_missing_folder_and_manifest(tmp_path, inputs):
    with pytest.raises(ArtifactError, match=f"does not exist. Create it with: {HINT}"):
        read_artifact(tmp_path / "nothing", kind="graph", command_hint=HINT)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError, match="has no manifest.json"):
        read_artifact(tmp_path / "empty", kind="graph", command_hint=HINT)


def test_invalid_manifest_json(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    (out / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        read_artifact(out, kind="graph", command_hint=HINT)


def test_tampered_payload_detected(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    with open(out / "rows.csv", "a") as handle:
        handle.write("9,own\n")
    with pytest.raises(ArtifactError) as info:
        read_artifact(out, kind="graph", command_hint=HINT)
    assert "'rows.csv'" in str(info.value) and "corrupted" in str(info.value) and HINT in str(info.value)


def test_missing_payload_detected(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    (out / "graph.npz").unlink()
    with pytest.raises(ArtifactError, match="'graph.npz' of the artifact .* is missing"):
        read_artifact(out, kind="graph", command_hint=HINT)


def test_stale_input_detected(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    inputs["data"].write_text("a,b\n1,3\n")
    with pytest.raises(StaleArtifactError) as info:
        read_artifact(out, kind="graph", inputs=inputs, command_hint=HINT)
    message = str(info.value)
    assert "stale" in message and "'data'" in message and f"Re-run: {HINT}" in message
    assert str(inputs["data"].resolve()) in message
    # the unchanged input alone is fine
    read_artifact(out, kind="graph", inputs={"model": inputs["model"]}, command_hint=HINT)


def test_other_file_with_same_contents_is_not_stale(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(inputs["data"].read_bytes())
    read_artifact(out, kind="graph", inputs={"data": copy}, command_hint=HINT)


def test_unrecorded_input_is_stale(tmp_path, inputs):
    out = _write(tmp_path / "g", {"data": inputs["data"]})
    with pytest.raises(StaleArtifactError, match="not built from an input named 'model'"):
        read_artifact(out, kind="graph", inputs=inputs, command_hint=HINT)


def test_upstream_artifact_as_input(tmp_path, inputs):
    graph = _write(tmp_path / "g", inputs)
    sel = write_artifact(tmp_path / "s", kind="selection", params={}, inputs={"graph": graph}, payloads={})
    assert read_artifact(sel, kind="selection", inputs={"graph": graph}, command_hint=HINT).manifest["inputs"][
        "graph"
    ]["sha256"] == sha256_file(graph / MANIFEST_NAME)
    _write(graph, {"data": inputs["data"]})  # rebuilt upstream with other inputs
    with pytest.raises(StaleArtifactError, match="'graph'"):
        read_artifact(sel, kind="selection", inputs={"graph": graph}, command_hint=HINT)


def test_missing_input_file(tmp_path, inputs):
    with pytest.raises(InputError, match="'data'"):
        write_artifact(tmp_path / "g", kind="graph", params={}, inputs={"data": tmp_path / "no.csv"}, payloads={})
    out = _write(tmp_path / "g", inputs)
    with pytest.raises(InputError, match="'data'"):
        read_artifact(out, kind="graph", inputs={"data": tmp_path / "no.csv"}, command_hint=HINT)


# ------------------------------------------------------------------ names and paths


@pytest.mark.parametrize(
    "name",
    ["../x.json", "a/b.json", "a\\b.json", "..", ".hidden.json", "manifest.json", "x.pkl", "noext", "", "/abs.json"],
)
def test_bad_payload_names_refused(tmp_path, name):
    with pytest.raises(ArtifactError, match="Invalid payload name"):
        write_artifact(tmp_path / "g", kind="graph", params={}, inputs={}, payloads={name: "x"})
    assert not (tmp_path / "g").exists() and not (tmp_path / "x.json").exists()
    assert list(tmp_path.iterdir()) == []


def test_manifest_paths_never_followed(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    secret = tmp_path / "secret.json"
    secret.write_text("{}")
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    manifest["payloads"]["../secret.json"] = {"sha256": sha256_file(secret), "size": 2}
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="Invalid payload name '../secret.json'"):
        read_artifact(out, kind="graph", command_hint=HINT)


def test_symlinked_payload_outside_folder_refused(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    outside = tmp_path / "outside.txt"
    outside.write_text("built for tests\n")
    (out / "notes.txt").unlink()
    (out / "notes.txt").symlink_to(outside)
    with pytest.raises(ArtifactError, match="'notes.txt'"):
        read_artifact(out, kind="graph", command_hint=HINT)


def test_load_unlisted_payload_refused(tmp_path, inputs):
    art = read_artifact(_write(tmp_path / "g", inputs), kind="graph", command_hint=HINT)
    with pytest.raises(ArtifactError, match="has no payload 'other.csv'"):
        art.load_csv("other.csv")
    with pytest.raises(ArtifactError, match="Invalid payload name"):
        art.load_json("../meta.json")


def test_nan_in_json_refused(tmp_path):
    with pytest.raises(ArtifactError, match="not valid JSON"):
        write_artifact(tmp_path / "g", kind="graph", params={}, inputs={}, payloads={"m.json": {"x": float("nan")}})
    with pytest.raises(ArtifactError, match="not valid JSON"):
        write_artifact(tmp_path / "g", kind="graph", params={"theta": np.nan}, inputs={}, payloads={})
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ atomicity


def test_failure_mid_write_leaves_nothing(tmp_path, inputs, monkeypatch):
    real = artifacts._write_file
    calls = []

    def failing(path, data):
        calls.append(path.name)
        if len(calls) == 2:
            raise OSError("disk full (simulated)")
        real(path, data)

    monkeypatch.setattr(artifacts, "_write_file", failing)
    before = set(tmp_path.iterdir())
    with pytest.raises(OSError, match="simulated"):
        _write(tmp_path / "g", inputs)
    assert set(tmp_path.iterdir()) == before  # no artifact, no temporary folder


def test_failure_while_replacing_keeps_old_artifact(tmp_path, inputs, monkeypatch):
    out = _write(tmp_path / "g", inputs)
    old_manifest = (out / MANIFEST_NAME).read_bytes()
    before = set(tmp_path.iterdir())

    def failing_manifest(value, *, where):
        raise OSError("crash before the manifest (simulated)")

    monkeypatch.setattr(artifacts, "_dump_json", failing_manifest)
    with pytest.raises(OSError, match="simulated"):
        write_artifact(out, kind="graph", params={}, inputs={}, payloads={"new.txt": "new"})
    assert set(tmp_path.iterdir()) == before
    assert (out / MANIFEST_NAME).read_bytes() == old_manifest and not (out / "new.txt").exists()


def test_failure_during_swap_restores_old_artifact(tmp_path, inputs, monkeypatch):
    out = _write(tmp_path / "g", inputs)
    old_manifest = (out / MANIFEST_NAME).read_bytes()
    before = set(tmp_path.iterdir())
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # old moved away; moving the new one in fails
            raise OSError("rename failed (simulated)")
        real_rename(src, dst)

    monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)  # a platform without renameat2
    monkeypatch.setattr(artifacts.os, "rename", rename)
    with pytest.raises(OSError, match="simulated"):
        write_artifact(out, kind="graph", params={}, inputs={}, payloads={"new.txt": "new"})
    monkeypatch.undo()
    assert set(tmp_path.iterdir()) == before
    assert (out / MANIFEST_NAME).read_bytes() == old_manifest


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_replacing_an_artifact_of_the_same_kind(tmp_path, inputs, monkeypatch, exchange):
    out = _write(tmp_path / "g", inputs)
    if not exchange:
        monkeypatch.setattr(artifacts, "_exchange", lambda a, b: False)
    write_artifact(out, kind="graph", params={}, inputs={}, payloads={"only.txt": "x"})
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "only.txt"]
    assert read_artifact(out, kind="graph", command_hint=HINT).payload_names == ("only.txt",)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g", "model.pkl", "train.csv"]


def _tree(folder):
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("other_kind", ["selection", "plan"])
def test_artifact_of_another_kind_refused_and_kept(tmp_path, inputs, other_kind):
    out = _write(tmp_path / "g", inputs)
    before, listing = _tree(out), set(tmp_path.iterdir())
    with pytest.raises(ArtifactError) as info:
        write_artifact(out, kind=other_kind, params={}, inputs={}, payloads={"only.txt": "x"})
    message = str(info.value)
    assert f"holds a 'graph' artifact; this command writes a {other_kind!r} artifact" in message
    assert "Choose another --out" in message
    assert _tree(out) == before and set(tmp_path.iterdir()) == listing  # byte-identical, no temp folder


def test_user_file_inside_an_artifact_refused_and_kept(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    (out / "my_notes.txt").write_text("mine")
    (out / "figures").mkdir()
    (out / "figures" / "f.png").write_bytes(b"png")
    before, listing = _tree(out), set(tmp_path.iterdir())
    with pytest.raises(ArtifactError) as info:
        _write(out, inputs)
    message = str(info.value)
    assert "holds 2 file(s) frpd did not write: 'figures/', 'my_notes.txt'" in message
    assert "Move them out" in message
    assert _tree(out) == before and set(tmp_path.iterdir()) == listing


def test_payload_missing_from_old_artifact_is_still_replaced(tmp_path, inputs):
    out = _write(tmp_path / "g", inputs)
    (out / "notes.txt").unlink()  # an incomplete artifact of the same kind: nothing of the user's in it
    _write(out, inputs)
    assert (out / "notes.txt").read_text() == "built for tests\n"


def test_output_that_is_an_input_refused(tmp_path, inputs):
    sel = write_artifact(tmp_path / "sel", kind="selection", params={}, inputs=inputs, payloads={"p.csv": "a\n1\n"})
    before = _tree(sel)
    for recorded, protect in [({"selection": sel / MANIFEST_NAME}, ()), ({"selection": sel}, ()),
                              ({}, [sel])]:
        with pytest.raises(ArtifactError, match="is \\(or holds\\) an input of this command"):
            write_artifact(sel, kind="selection", params={}, inputs=recorded, payloads={}, protect=protect)
    with pytest.raises(ArtifactError, match="lies inside the input artifact"):
        write_artifact(sel / "plans", kind="plan", params={}, inputs={"selection": sel / MANIFEST_NAME},
                       payloads={})
    with pytest.raises(ArtifactError, match="is \\(or holds\\) an input"):  # the data file's own folder
        write_artifact(tmp_path, kind="graph", params={}, inputs=inputs, payloads={})
    assert _tree(sel) == before and sorted(p.name for p in tmp_path.iterdir()) == ["model.pkl", "sel", "train.csv"]


def test_failed_build_keeps_the_old_artifact(tmp_path, inputs, monkeypatch):
    out = _write(tmp_path / "g", inputs)
    before, listing = _tree(out), set(tmp_path.iterdir())

    def failing(name, arrays):
        raise ArtifactError("a payload cannot be written (simulated)")

    monkeypatch.setattr(artifacts, "_npz_bytes", failing)
    with pytest.raises(ArtifactError, match="simulated"):
        _write(out, inputs)
    assert _tree(out) == before and set(tmp_path.iterdir()) == listing


@pytest.mark.parametrize("where", ["_write_file", "_exchange", "fsync_dir"])
def test_keyboard_interrupt_leaves_no_temp_folder(tmp_path, inputs, monkeypatch, where):
    out = _write(tmp_path / "g", inputs)
    before, listing = _tree(out), set(tmp_path.iterdir())
    real = getattr(artifacts, where)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(artifacts, where, interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_artifact(out, kind="graph", params={}, inputs={}, payloads={"new.txt": "new"})
    monkeypatch.setattr(artifacts, where, real)
    assert set(tmp_path.iterdir()) == listing
    assert _tree(out) == before


def test_refuses_to_replace_a_non_artifact_folder(tmp_path):
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(ArtifactError, match="not an frpd artifact \\(it holds 'thesis.tex'\\); refusing to replace"):
        write_artifact(precious, kind="graph", params={}, inputs={}, payloads={})
    assert (precious / "thesis.tex").read_text() == "years of work"
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(ArtifactError, match="is not an artifact folder"):
        write_artifact(file, kind="graph", params={}, inputs={}, payloads={})
    empty = tmp_path / "empty"
    empty.mkdir()
    write_artifact(empty, kind="graph", params={}, inputs={}, payloads={})
    assert (empty / MANIFEST_NAME).is_file()


def test_atomic_write_text_failure_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "plans.csv"
    atomic_write_text(path, "old\n")

    def boom(fd):
        raise OSError("fsync failed (simulated)")

    monkeypatch.setattr(artifacts.os, "fsync", boom)
    with pytest.raises(OSError, match="simulated"):
        atomic_write_text(path, "new\n")
    monkeypatch.undo()
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["plans.csv"]


def test_atomic_write_bytes_and_mode(tmp_path):
    path = tmp_path / "x.bin"
    atomic_write_bytes(path, b"\x00\x01")
    atomic_write_bytes(path, b"\x02")
    assert path.read_bytes() == b"\x02"
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask


# ------------------------------------------------------------------ determinism


def test_byte_identical_with_source_date_epoch(tmp_path, inputs, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    a = _write(tmp_path / "a", inputs)
    b = _write(tmp_path / "b", inputs)
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert json.loads((a / MANIFEST_NAME).read_text())["created"] == "2023-11-14T22:13:20Z"


def test_npz_entries_have_fixed_dates(tmp_path, inputs):
    """Zip entries carry a fixed date, so the payload does not depend on when it was written."""
    out = _write(tmp_path / "g", inputs)
    with zipfile.ZipFile(out / "graph.npz") as archive:
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_created_without_source_date_epoch(tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    out = write_artifact(tmp_path / "g", kind="graph", params={}, inputs={}, payloads={})
    created = json.loads((out / MANIFEST_NAME).read_text())["created"]
    assert created.endswith("Z") and len(created) == len("2024-01-01T00:00:00Z")


def test_bad_source_date_epoch(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH"):
        write_artifact(tmp_path / "g", kind="graph", params={}, inputs={}, payloads={})


def test_an_input_file_is_read_once_per_command_while_unchanged(tmp_path, monkeypatch):
    # within remembered_digests an input file's digest is remembered while its device, inode, size and times
    # are unchanged; a file rewritten (another modification time) or replaced is read again; payloads
    # (input_file=False) and calls outside are always read
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b\n1,2\n")
    opened = []
    real_open = open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(artifacts, "open", counting_open, raising=False)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    with remembered_digests():
        assert artifacts.sha256_file(path, input_file=True) == expected
        assert artifacts.sha256_file(path, input_file=True) == expected
        assert len(opened) == 1
        assert artifacts.sha256_file(path) == expected and len(opened) == 2
        with remembered_digests():                            # nested: the same memory
            assert artifacts.sha256_file(path, input_file=True) == expected and len(opened) == 2
        before = path.stat()
        path.write_bytes(b"a,b\n1,3\n")                       # same size, rewritten in place, a second later
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 10**9))
        assert artifacts.sha256_file(path, input_file=True) == hashlib.sha256(path.read_bytes()).hexdigest()
        assert len(opened) == 3
        replacement = tmp_path / "new.csv"
        replacement.write_bytes(b"a,b\n9,9\n")
        os.replace(replacement, path)                          # another file at the path
        assert artifacts.sha256_file(path, input_file=True) == hashlib.sha256(b"a,b\n9,9\n").hexdigest()
        assert len(opened) == 4
    assert _digests._REMEMBERED is None
    artifacts.sha256_file(path, input_file=True)
    artifacts.sha256_file(path, input_file=True)
    assert len(opened) == 6


_MODES_SCRIPT = r"""
import os, sys
from pathlib import Path
from frpd_cli.artifacts import write_artifact

root = Path(sys.argv[1])
data = root / "train.csv"
data.write_text("a,b\n1,2\n")
payloads = {"rows.json": {"k": 3}, "table.npy": __import__("numpy").arange(3)}
for name in ("new", "empty", "replaced"):
    if name == "empty":
        (root / name).mkdir()
        os.chmod(root / name, 0o755)
    if name == "replaced":
        write_artifact(root / name, kind="graph", params={}, inputs={"data": data}, payloads={"rows.json": {}})
        os.chmod(root / name, 0o755)
        os.chmod(root / name / "rows.json", 0o604)
        os.chmod(root / name / "manifest.json", 0o644)
    write_artifact(root / name, kind="graph", params={}, inputs={"data": data}, payloads=payloads)
"""


def test_artifact_folder_modes_follow_umask_or_the_replaced_folder(tmp_path):
    """A new artifact folder gets 0777 minus the umask (its files 0666 minus it), like mkdir and open; a replaced
    folder, and each file replacing one of the same name, keep their permission bits. Run under umask 027, which
    no default mode (0700 for a private folder, 0755/0644 under the usual umask) matches."""
    import subprocess
    import sys

    subprocess.run(["sh", "-c", 'umask 027 && exec "$0" -c "$1" "$2"', sys.executable, _MODES_SCRIPT,
                    str(tmp_path)], check=True)

    def mode(path):
        return oct(path.stat().st_mode & 0o7777)

    new, empty, replaced = tmp_path / "new", tmp_path / "empty", tmp_path / "replaced"
    assert mode(new) == oct(0o750)
    assert {p.name: mode(p) for p in new.iterdir()} == dict.fromkeys(["manifest.json", "rows.json", "table.npy"],
                                                                     oct(0o640))
    assert mode(empty) == oct(0o755)                     # the empty folder it replaces
    assert mode(replaced) == oct(0o755)
    assert {p.name: mode(p) for p in replaced.iterdir()} == {"manifest.json": oct(0o644), "rows.json": oct(0o604),
                                                             "table.npy": oct(0o640)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "new", "replaced", "train.csv"]


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")      # as a write to a full disk: no file named


def test_disk_full_names_the_artifact_folder(tmp_path, inputs, monkeypatch):
    monkeypatch.setattr(artifacts, "_write_file", _disk_full)
    out = tmp_path / "g"
    with pytest.raises(OSError) as caught:
        _write(out, inputs)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pkl", "train.csv"]     # no temporary folder


def test_disk_full_while_staging_names_the_artifact_folder(tmp_path):
    def blocks():
        yield np.zeros((2, 3))
        _disk_full()

    out = tmp_path / "pool"
    with pytest.raises(OSError) as caught:
        with artifacts.staging_folder(out) as folder:
            artifacts.write_npy_blocks(folder / "X.npy", (4, 3), np.float64, blocks())
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(out)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_atomic_write_bytes_keeps_the_mode_of_the_file_it_replaces(tmp_path, mode):
    path = tmp_path / "plans.csv"
    path.write_bytes(b"old")
    os.chmod(path, mode)
    before = os.stat(path)
    atomic_write_bytes(path, b"new")
    after = os.stat(path)
    assert path.read_bytes() == b"new" and after.st_ino != before.st_ino       # a new file took its place
    assert stat.S_IMODE(after.st_mode) == stat.S_IMODE(before.st_mode) == mode


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_atomic_write_bytes_hands_no_setuid_bit_to_new_contents(tmp_path):
    path = tmp_path / "tool"
    path.write_bytes(b"old")
    os.chmod(path, 0o4755 | stat.S_ISGID)
    if not stat.S_IMODE(os.stat(path).st_mode) & stat.S_ISUID:
        pytest.skip("this file system keeps no setuid bit")
    atomic_write_bytes(path, b"new")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o755
