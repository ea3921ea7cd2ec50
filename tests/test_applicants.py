"""The applicants file: verbatim ids, unique ids, rows named as the user sees them, out-of-range warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import frpd_cli.applicants as applicants_module
from frpd_cli.applicants import ApplicantFile, OutOfRangeWarning
from frpd_cli.encoding import fit_encoder
from frpd_cli.exceptions import InputError
from frpd_cli.schema import SchemaSpec, infer_schema


@pytest.fixture(scope="module")
def encoder():
    frame = pd.DataFrame({"age": [20, 40, 30, 60], "amount": [100.5, 300.0, 1000.0, 250.0],
                          "job": ["b", "a", "c", "b"], "label": [0, 1, 1, 0]})
    return fit_encoder(infer_schema(frame, SchemaSpec()), frame)


def _file(tmp_path, text, encoder, **kwargs):
    path = tmp_path / "applicants.csv"
    path.write_text(text)
    return ApplicantFile(path, encoder, **kwargs)


def _rows(n, start=0):
    return "".join(f"P{i},{30 + i % 5},{200 + i}.5,a\n" for i in range(start, start + n))


def test_ids_kept_verbatim(tmp_path, encoder):
    text = "id,age,amount,job\nNaN,30,200,a\nNA,31,201,b\nnull,32,202,c\n007,33,203,a\n,34,204,b\n-3.5,35,205,a\n"
    source = _file(tmp_path, text, encoder, id_column="id")
    assert source.scan().n_rows == 6
    ids = [a for chunk in source.chunks(4) for a in chunk.ids]
    assert ids == ["NaN", "NA", "null", "007", "", "-3.5"]


def test_missing_markers_still_missing_in_feature_columns(tmp_path, encoder):
    source = _file(tmp_path, "id,age,amount,job\nNA,30,NA,a\n", encoder, id_column="id")
    with pytest.raises(InputError, match="'amount'.*missing value in data row 1"):
        source.scan()


def test_error_in_a_later_chunk_names_the_file_row(tmp_path, encoder):
    lines = _rows(10).splitlines()
    lines[7] = "P7,37,inf,a"
    source = _file(tmp_path, "id,age,amount,job\n" + "\n".join(lines) + "\n", encoder, id_column="id")
    with pytest.raises(InputError, match=r"'amount' of the applicants file .* holds inf in data row 8 \(line 9\)"):
        source.scan(chunk_size=3)


def test_error_after_skipped_invalid_rows_names_the_file_row(tmp_path, encoder):
    text = "id,age,amount,job\nP0,30,,a\nP1,31,200,a\nP2,32.5,200,a\n"
    source = _file(tmp_path, text, encoder, id_column="id", drop_missing=True)
    with pytest.raises(InputError, match=r"'age' .* holds 32.5 in data row 3 \(line 4\); expected a whole number"):
        source.scan()


@pytest.mark.parametrize("chunk_size", [2, 4096])
def test_duplicate_ids_refused_across_chunks(tmp_path, encoder, chunk_size):
    text = "id,age,amount,job\n" + _rows(5) + "P1,30,200,a\n" + _rows(2, start=10) + "P3,30,200,a\n"
    source = _file(tmp_path, text, encoder, id_column="id")
    with pytest.raises(InputError) as info:
        source.scan(chunk_size=chunk_size)
    message = str(info.value)
    assert "Applicant id 'P1' appears 2 times" in message and "data rows 2, 6" in message
    assert "2 repeated id(s)" in message and "--id-column" in message


def test_hash_collisions_are_not_duplicates(tmp_path, encoder, monkeypatch):
    # every id hashes to 0: the second pass compares the ids themselves and finds them all different
    source = _file(tmp_path, "id,age,amount,job\n" + _rows(6), encoder, id_column="id")
    monkeypatch.setattr(applicants_module.pd.util, "hash_pandas_object",
                        lambda s, index=False: pd.Series(np.zeros(len(s), dtype=np.uint64)))
    assert source.scan(chunk_size=4).n_rows == 6


def test_row_numbers_as_ids_never_collide(tmp_path, encoder):
    source = _file(tmp_path, "age,amount,job\n30,200,a\n30,200,a\n", encoder)
    assert source.scan().n_rows == 2


def test_out_of_range_warned_once_per_column_with_count(tmp_path, encoder):
    text = ("id,age,amount,job\nP0,30,200,a\nP1,61,200,a\nP2,19,5000,b\nP3,30,99,c\nP4,30,1000,a\n"
            "P5,70,100.5,a\n")
    source = _file(tmp_path, text, encoder, id_column="id")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scan = source.scan(chunk_size=2)
    messages = [str(w.message) for w in caught if w.category is OutOfRangeWarning]
    assert len(messages) == 2
    age = next(m for m in messages if "'age'" in m)
    amount = next(m for m in messages if "'amount'" in m)
    assert age.startswith("3 applicant(s)") and "[20, 60]" in age and "61 in data row 2, line 3" in age
    assert amount.startswith("2 applicant(s)") and "[100.5, 1000]" in amount and "5000" in amount
    assert scan.out_of_range == {"age": (3, 2, 61), "amount": (2, 3, 5000.0)}


def test_in_range_file_gives_no_warning(tmp_path, encoder):
    source = _file(tmp_path, "id,age,amount,job\nP0,20,100.5,a\nP1,60,1000,c\n", encoder, id_column="id")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert source.scan().out_of_range == {}
