"""build-pool writes the encoded rows block by block and the CSV is parsed without holding its bytes: the same
pool, bit for bit, the same errors, nothing left behind."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import frpd_cli.data as data_module
import frpd_cli.dataset as dataset
from frpd_cli.artifacts import ArtifactError, staging_folder, write_npy_blocks
from frpd_cli.cli.app import app
from frpd_cli.data import iter_csv, read_csv
from frpd_cli.dataset import RowStage, encode_training, labeled_rows, read_training_frame
from frpd_cli.exceptions import InputError
from frpd_cli.schema import SchemaSpec, infer_schema

runner = CliRunner()


@pytest.mark.parametrize("shape, dtype", [((10, 3), np.float64), ((0, 4), np.float64), ((7,), np.int8),
                                          ((5, 0), np.float64), ((1000, 29), np.float64), ((3, 2), bool)])
def test_blocks_make_the_bytes_np_save_makes(tmp_path, shape, dtype):
    array = (np.random.default_rng(0).random(shape) * 10).astype(dtype)
    whole = io.BytesIO()
    np.save(whole, array)
    blocks = [array[i:i + 3] for i in range(0, len(array), 3)]
    staged = write_npy_blocks(tmp_path / "a.npy", array.shape, array.dtype, blocks)
    assert (tmp_path / "a.npy").read_bytes() == whole.getvalue()
    assert staged.sha256 == hashlib.sha256(whole.getvalue()).hexdigest()
    assert staged.size == len(whole.getvalue())


def test_blocks_that_do_not_add_up_are_refused(tmp_path):
    with pytest.raises(ArtifactError, match="hold 4 rows; expected 5"):
        write_npy_blocks(tmp_path / "a.npy", (5, 2), np.float64, [np.zeros((4, 2))])
    with pytest.raises(ArtifactError, match="expected float64 and rows of shape"):
        write_npy_blocks(tmp_path / "b.npy", (5, 2), np.float64, [np.zeros((5, 3))])
    with pytest.raises(FileExistsError):             # never opens what is there
        write_npy_blocks(tmp_path / "a.npy", (1, 2), np.float64, [np.zeros((1, 2))])


def test_the_staging_folder_is_new_private_and_removed(tmp_path):
    out = tmp_path / "sub" / "pool"
    out.parent.mkdir()
    with staging_folder(out) as folder:
        assert folder.parent == out.parent and folder.name.startswith(".pool.stage-")
        assert (folder.stat().st_mode & 0o777) == 0o700
        (folder / "X.npy").write_bytes(b"x")
    assert not folder.exists()
    with pytest.raises(RuntimeError), staging_folder(out) as folder:
        raise RuntimeError
    assert not folder.exists() and os.listdir(out.parent) == []


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(18, 80, n),
        "income": np.round(rng.lognormal(10, 1, n), 2),
        "job": rng.choice(["a", "b", "c", "d"], n),
        "region": rng.choice(["north", "south"], n),
        "label": rng.integers(0, 2, n),
    })


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(dataset, "STAGE_BLOCK_ROWS", 7)


def test_staged_rows_and_codes_are_the_rows_held_in_memory(tmp_path, small_blocks):
    frame = _frame(100)
    spec = SchemaSpec(target="label", favorable="1", immutable=["region"], increasing=["age"])
    schema = infer_schema(frame, spec)
    encoder, X = encode_training(frame, schema)
    with staging_folder(tmp_path / "pool") as folder:
        stage = RowStage(folder)
        encoder2, X2 = encode_training(frame, schema, stage=stage)
        assert isinstance(X2, np.memmap) and not X2.flags.writeable
        assert X2.dtype == X.dtype and np.array_equal(X, X2) and encoder2.to_dict() == encoder.to_dict()
        features = frame.loc[:, list(schema.feature_names)]
        codes = encoder.constraint_codes(features)
        staged_codes = dataset._staged_codes(encoder, features, "the data file", stage)
        for table in ("immutable", "monotone", "direction"):
            assert np.array_equal(getattr(codes, table), getattr(staged_codes, table)), table
        assert (codes.immutable_names, codes.monotone_names) == (staged_codes.immutable_names,
                                                                 staged_codes.monotone_names)
        assert sorted(stage.arrays) == ["X.npy", "immutable.npy", "monotone.npy"]
        saved = io.BytesIO()
        np.save(saved, X)
        assert stage.arrays["X.npy"].path.read_bytes() == saved.getvalue()


def test_the_codes_of_each_block_are_computed_once_for_both_tables(tmp_path, small_blocks, monkeypatch):
    frame = _frame(100)
    schema = infer_schema(frame, SchemaSpec(target="label", favorable="1", immutable=["region"],
                                            increasing=["age"]))
    encoder, _ = encode_training(frame, schema)
    features = frame.loc[:, list(schema.feature_names)]
    codes = encoder.constraint_codes(features)
    rows_coded = []
    coded = type(encoder).constraint_codes

    def counting(self, rows, **kwargs):
        rows_coded.append(len(rows))
        return coded(self, rows, **kwargs)

    monkeypatch.setattr(type(encoder), "constraint_codes", counting)
    with staging_folder(tmp_path / "pool") as folder:
        stage = RowStage(folder)
        dataset._staged_codes(encoder, features, "the data file", stage)
        assert sum(rows_coded) == len(features) and max(rows_coded) == dataset.STAGE_BLOCK_ROWS
        for table in ("immutable", "monotone"):        # the bytes np.save writes of the whole table
            saved = io.BytesIO()
            np.save(saved, getattr(codes, table))
            assert stage.arrays[f"{table}.npy"].path.read_bytes() == saved.getvalue(), table


def test_an_error_in_a_later_block_is_the_whole_frames_error(tmp_path, small_blocks):
    frame = _frame(60)
    schema = infer_schema(frame, SchemaSpec(target="label", favorable="1"))
    encoder, _ = encode_training(frame, schema)
    bad = frame.copy()
    bad["income"] = bad["income"].astype(float)
    bad.loc[[3, 30, 31, 50], "income"] = np.nan          # rows in several blocks: the message counts them all
    with pytest.raises(InputError) as whole:
        encoder.encode(bad.loc[:, list(schema.feature_names)])
    assert "data rows 4, 31, 32, 51;" in str(whole.value)
    with staging_folder(tmp_path / "pool") as folder:
        stage = RowStage(folder)
        with pytest.raises(InputError) as staged:
            stage.write("X.npy", len(bad), encoder.n_features_out,
                        lambda a, b: encoder.encode(bad.loc[:, list(schema.feature_names)].iloc[a:b]),
                        lambda: encoder.encode(bad.loc[:, list(schema.feature_names)]))
        assert str(staged.value) == str(whole.value)
        assert os.listdir(folder) == [] and stage.arrays == {}


def test_build_pool_in_blocks_is_the_pool_of_one_block(tmp_path, sample_paths, small_blocks, monkeypatch):
    args = [str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema", str(sample_paths["schema"])]
    small = runner.invoke(app, ["build-pool", *args, "--out", str(tmp_path / "small")])
    assert small.exit_code == 0, small.stderr
    monkeypatch.setattr(dataset, "STAGE_BLOCK_ROWS", 1 << 20)
    one = runner.invoke(app, ["build-pool", *args, "--out", str(tmp_path / "one")])
    assert one.exit_code == 0, one.stderr
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "small").iterdir()) and "X.npy" in names
    for name in names:
        if name != "manifest.json":                  # (its creation time differs)
            assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "small" / name).read_bytes(), name
    assert sorted(os.listdir(tmp_path)) == ["one", "small"]           # no staging folder left


def test_build_pool_refusing_a_training_value_leaves_nothing(tmp_path, sample_paths, small_blocks):
    frame = read_training_frame(sample_paths["data"])
    numeric = next(c for c in frame.columns if pd.api.types.is_float_dtype(frame[c]))
    frame.loc[[1500, 1900], numeric] = np.nan                # missing values in late blocks
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "out" / "pool"
    out.parent.mkdir()
    result = runner.invoke(app, ["build-pool", str(data), "--model", str(sample_paths["model"]), "--schema",
                                 str(sample_paths["schema"]), "--out", str(out)])
    assert result.exit_code != 0 and "1501, 1901" in result.stderr, result.stderr
    assert not out.exists() and [p for p in os.listdir(out.parent) if "stage" in p] == []


_OPENS: dict = {}


def _count_opens(event, args):
    if event == "open" and args and str(args[0]) in _OPENS and not (args[2] & (os.O_WRONLY | os.O_RDWR)):
        _OPENS[str(args[0])] += 1


sys.addaudithook(_count_opens)


def _read_fifo(path: Path, payload: bytes):
    """``read_csv`` of a FIFO fed ``payload`` by a thread: the frame, or the exception it raised. A reader that
    opens the FIFO a second time after its writer is gone would wait for ever: after 600 s the test fails and the
    waiting open is released."""
    def write():
        with open(path, "wb") as handle:
            handle.write(payload)

    result = {}

    def read():
        try:
            result["frame"] = read_csv(path)
        except Exception as exc:          # handed to the test
            result["error"] = exc

    writer = threading.Thread(target=write, daemon=True)
    reader = threading.Thread(target=read, daemon=True)
    writer.start()
    reader.start()
    reader.join(600)
    if reader.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))       # the waiting open returns, at end of file
        pytest.fail("read_csv waited on the FIFO after its writer had gone (it opened the FIFO twice)")
    writer.join()
    if "error" in result:
        raise result["error"]
    return result["frame"]


def _opened_once(path: Path, payload: bytes):
    """:func:`_read_fifo`, checking that the FIFO was opened for reading once: a second open waits for a writer
    that may be gone (or reads nothing)."""
    _OPENS[str(path)] = 0
    try:
        return _read_fifo(path, payload)
    finally:
        assert _OPENS.pop(str(path)) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf"])
def test_a_file_is_parsed_as_its_bytes_are(tmp_path, bom):
    text = _frame(3000).assign(job=lambda f: f["job"] + "\u00e9").to_csv(index=False).encode("utf-8")
    expected = pd.read_csv(io.BytesIO(text), encoding="utf-8")
    plain = tmp_path / "plain.csv.gz"           # a name pandas would take for gzip: the file is parsed as text
    plain.write_bytes(bom + text)
    pd.testing.assert_frame_equal(read_csv(plain), expected)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    pd.testing.assert_frame_equal(_opened_once(fifo, bom + text), expected)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("where", ["header", "late"])
def test_a_file_and_a_pipe_give_the_same_errors(tmp_path, where):
    text = _frame(40000).to_csv(index=False).encode("utf-8")          # over a megabyte: several blocks
    cut = text.index(b"\n", 3 * len(text) // 4) + 1 if where == "late" else 2
    bad = text[:cut] + b"\xff" + text[cut:]
    messages = []
    for kind in ("file", "fifo"):
        path = tmp_path / f"{kind}.csv"
        with pytest.raises(InputError) as caught:
            if kind == "file":
                path.write_bytes(bad)
                read_csv(path)
            else:
                os.mkfifo(path)
                _opened_once(path, bad)
        messages.append(str(caught.value).replace(str(path), "PATH"))
    assert messages[0] == messages[1]
    line = bad[:cut].count(b"\n") + 1
    assert f"line {line})" in messages[0] and "0xff" in messages[0]


_BLOCK = data_module._BLOCK        # the blocks the text is checked in


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("raw, byte, line", [
    # an invalid byte after a character split between the first two blocks
    (b"a,b\n" + b"x" * (_BLOCK - 5) + "\u00e9".encode() + b",z\n1,\xff\n", 0xFF, 3),
    # the first two bytes of a three-byte character split between blocks, then a letter
    (b"a,b\n" + b"x" * (_BLOCK - 5) + b"\xe2\x82A\n", 0xE2, 2),
    # a file ending inside a character
    (b"a,b\n1,2\n3,\xe2\x82", 0xE2, 3),
], ids=["after-a-split-character", "in-a-split-character", "in-the-last-character"])
def test_a_decoding_error_names_its_byte_wherever_the_blocks_are_cut(tmp_path, raw, byte, line):
    # the byte and line the whole text decoded at once names, from a file, a pipe and the applicants' reader
    assert raw[:raw.index(bytes([byte]))].count(b"\n") + 1 == line
    expected = f"is not valid utf-8 text (byte 0x{byte:02x} on line {line})."
    plain = tmp_path / "plain.csv"
    plain.write_bytes(raw)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    for read in (lambda: read_csv(plain), lambda: list(iter_csv(plain, chunk_size=10)),
                 lambda: _opened_once(fifo, raw)):
        with pytest.raises(InputError) as caught:
            read()
        assert expected in str(caught.value)


@pytest.mark.parametrize("raw", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf\n \n"], ids=["bom", "boms-blank-lines"])
def test_byte_order_marks_and_blank_lines_are_an_empty_file(tmp_path, raw):
    path = tmp_path / "boms.csv"
    path.write_bytes(raw)
    for read in (lambda: read_csv(path), lambda: list(iter_csv(path, chunk_size=10))):
        with pytest.raises(InputError, match="is empty; expected a header row"):
            read()


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_a_regular_file_is_opened_once(tmp_path, bom):
    text = _frame(3000).to_csv(index=False).encode("utf-8")
    path = tmp_path / "plain.csv"
    path.write_bytes(bom + text)
    _OPENS[str(path)] = 0
    try:
        frame = read_csv(path)
    finally:
        opens = _OPENS.pop(str(path))
    pd.testing.assert_frame_equal(frame, pd.read_csv(io.BytesIO(text)))
    assert opens == 1


@pytest.mark.parametrize("column", [[0, 1, 1, 0, np.nan], [0.0, 1.0, np.nan], [True, False], [1.0, 1e16, np.nan],
                                    ["1", "a", None, 1], [0.1 + 0.2, 0.3]])
@pytest.mark.parametrize("favorable", ["1", "1.0", "True", 1, True, "nan", "1e+16", "0.30000000000000004", 0.3])
def test_labeled_rows_compare_values_and_their_text(column, favorable):
    class Schema:
        target = "t"

    Schema.favorable = favorable
    target = pd.Series(column, name="t")
    expected = (target == favorable).to_numpy() | (target.astype(str) == str(favorable)).to_numpy()
    assert np.array_equal(labeled_rows(pd.DataFrame({"t": target}), Schema), expected)


def test_a_staged_file_that_cannot_be_renamed_is_copied(tmp_path, monkeypatch):
    array = np.arange(12.0).reshape(4, 3)
    staged = write_npy_blocks(tmp_path / "a.npy", array.shape, array.dtype, [array[:3], array[3:]])

    def refuse(*args):
        raise PermissionError("the file is mapped")

    monkeypatch.setattr(os, "rename", refuse)
    described = staged.move_into(tmp_path / "b.npy", "X.npy")
    assert described == {"sha256": staged.sha256, "size": staged.size}
    assert np.array_equal(np.load(tmp_path / "b.npy"), array)


@pytest.mark.parametrize("text", ["t,u\nyes,1\nno,2\n,3\n", "t,u\n1,1\n0,2\n,3\n", "t,u\nTrue,1\nFalse,2\n",
                                  "t,u\n1,1\nx,2\n2.5,3\n", "t,u\n1.0,1\n0.5,2\n,3\n"])
@pytest.mark.parametrize("favorable", ["yes", "1", "1.0", "True", True, 1, "nan", "2.5"])
def test_labeled_rows_of_parsed_columns(text, favorable):
    class Schema:
        target = "t"

    Schema.favorable = favorable
    target = pd.read_csv(io.StringIO(text))["t"]           # the dtypes the parser gives (text: object or str)
    expected = (target == favorable).to_numpy() | (target.astype(str) == str(favorable)).to_numpy()
    assert np.array_equal(labeled_rows(pd.DataFrame({"t": target}), Schema), expected)


def test_build_pool_shows_a_status_line_while_it_writes(tmp_path, sample_paths, monkeypatch):
    # at ten million rows writing the pool takes about 25 s after the rows are scored: a terminal sees a status
    # line for it, not silence
    import contextlib

    import frpd_cli.cli._output as output

    out = tmp_path / "pool"
    shown = []

    @contextlib.contextmanager
    def busy(message, *, quiet=False):
        shown.append((message, (out / "manifest.json").exists()))
        yield lambda text: None
        shown.append(("done", (out / "manifest.json").exists()))

    monkeypatch.setattr(output, "busy", busy)
    args = [str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema", str(sample_paths["schema"])]
    result = runner.invoke(app, ["build-pool", *args, "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    at = [i for i, (message, _) in enumerate(shown) if message.startswith(f"writing the pool to '{out}' (2,000 rows")]
    assert at and shown[at[0]][1] is False and shown[at[0] + 1] == ("done", True), shown
