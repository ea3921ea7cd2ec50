"""The selection artifact's csv files are spreadsheet-safe, as frpd's csv output is, and interpolate reads them
back unescaped; selections written before (text as it is, no ``csv_text`` entry) still load."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import joblib
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder
from typer.testing import CliRunner

from frpd_cli.artifacts import read_artifact, write_artifact
from frpd_cli.cli.app import app
from frpd_cli.plans import unescape_csv_text

runner = CliRunner()
CATEGORICAL = ["personal_status", "housing", "job", "savings"]
#: levels a spreadsheet would take for formulas, and one that starts with the escape character itself
LEVELS = {"housing": {"own": "=own", "rent": "-rent", "free": "'free"}, "job": {"skilled": "@skilled"}}
IDS = ["=1+2", "'q", "@SUM(A1)", "-x", "+y", "-3.5"]
FLAGS = ["--target", "label", "--favorable", "1", "--immutable", "personal_status", "--id-column", "applicant_id"]


def _run(args, code=0):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


@pytest.fixture(scope="module")
def hostile(sample_paths, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile")
    credit = pd.read_csv(sample_paths["data"]).replace(LEVELS)
    credit = credit.rename(columns={"credit_amount": "=amount"})
    features = [c for c in credit.columns if c != "label"]
    numeric = [c for c in features if c not in CATEGORICAL]
    model = Pipeline([("pre", ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), CATEGORICAL)],
                                                remainder="passthrough")),
                      ("lr", LogisticRegression(max_iter=2000))]).fit(credit[features], credit["label"])
    assert numeric
    credit.to_csv(folder / "train.csv", index=False)
    joblib.dump(model, folder / "model.pkl")
    applicants = pd.read_csv(sample_paths["applicants"], dtype={"applicant_id": str}).replace(LEVELS)
    applicants = applicants.rename(columns={"credit_amount": "=amount"})
    applicants["applicant_id"] = IDS + applicants["applicant_id"].tolist()[len(IDS):]
    applicants.to_csv(folder / "applicants.csv", index=False)
    return {"data": folder / "train.csv", "model": folder / "model.pkl", "applicants": folder / "applicants.csv",
            "ids": applicants["applicant_id"].tolist()}


def _formula_like(cell: str) -> bool:
    try:
        float(cell)
        return False
    except ValueError:
        return cell[:1] in ("=", "+", "-", "@", "\t", "\r")


def _interpolate(paths, selection, out):
    return _run(["interpolate", "--selection", selection, "--model", paths["model"], "--out", out,
                 "--format", "jsonl", "-q"]).stdout


def test_selection_csv_files_are_spreadsheet_safe_and_read_back_exactly(hostile, tmp_path):
    _run(["select", hostile["data"], "--model", hostile["model"], *FLAGS, "--applicants", hostile["applicants"],
          "--out", tmp_path / "sel", "-q"])
    manifest = json.loads((tmp_path / "sel" / "manifest.json").read_text())
    for name in ("prototypes.csv", "status.csv", "applicants.csv"):
        raw = (tmp_path / "sel" / name).read_bytes()
        # the digest the manifest records is the file's, as written
        assert manifest["payloads"][name]["sha256"] == hashlib.sha256(raw).hexdigest()
        cells = [c for row in csv.reader(io.StringIO(raw.decode())) for c in row]
        assert not [c for c in cells if _formula_like(c)], name
        if name != "status.csv":                         # the files with feature columns
            assert "'=amount" in cells                   # the header is escaped as text cells are
    written = pd.read_csv(tmp_path / "sel" / "applicants.csv", dtype=str, keep_default_na=False)
    assert [unescape_csv_text(a) for a in written["applicant"]] == hostile["ids"]
    prototypes = pd.read_csv(tmp_path / "sel" / "prototypes.csv", dtype=str, keep_default_na=False)
    assert {"'=own", "'-rent"} & set(prototypes["housing"])
    # interpolate reads them back as the values they were: the ids, the levels the model knows
    text = _interpolate(hostile, tmp_path / "sel", tmp_path / "plans")
    records = [json.loads(line) for line in text.splitlines()]
    assert [r["applicant"] for r in records] == hostile["ids"]
    levels = {"=own", "-rent", "'free"}
    recourses = [rc["features"] for r in records for rc in r["recourses"]]
    assert recourses and all(rc["housing"] in levels for rc in recourses)
    assert any(r["status"] == "ok" for r in records)
    # and they are plan's records for the same applicants
    planned = _run(["plan", hostile["data"], "--model", hostile["model"], *FLAGS, "--applicants",
                    hostile["applicants"], "--format", "jsonl", "-q"]).stdout
    assert text == planned


def test_a_selection_written_before_with_unescaped_text_still_interpolates(hostile, tmp_path):
    _run(["select", hostile["data"], "--model", hostile["model"], *FLAGS, "--applicants", hostile["applicants"],
          "--out", tmp_path / "sel", "-q"])
    current = read_artifact(tmp_path / "sel", kind="selection", command_hint="-")
    # the previous version's artifact: the same payloads with their text as it is, and no csv_text entry
    payloads = {}
    for name in current.payload_names:
        path = tmp_path / "sel" / name
        if name.endswith(".csv"):
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            frame.columns = [unescape_csv_text(c) for c in frame.columns]
            payloads[name] = frame.apply(lambda column: column.map(unescape_csv_text))   # pandas 2.0: no DataFrame.map
        elif name.endswith(".json"):
            payloads[name] = json.loads(path.read_text())
        else:
            payloads[name] = dict(current.load_npz(name))
    params = {k: v for k, v in current.params.items() if k != "csv_text"}
    inputs = {"data": hostile["data"], "model": hostile["model"], "applicants": hostile["applicants"]}
    write_artifact(tmp_path / "old", kind="selection", params=params, inputs=inputs, payloads=payloads)
    old_text = (tmp_path / "old" / "applicants.csv").read_text()
    assert "\n'q," in old_text and "\n=1+2," in old_text          # unescaped, as the previous version wrote it
    # the current selection's text is escaped: the two are different files that must give the same plans
    assert "\n''q," in (tmp_path / "sel" / "applicants.csv").read_text() and "csv_text" in current.params
    assert _interpolate(hostile, tmp_path / "old", tmp_path / "p1") == \
        _interpolate(hostile, tmp_path / "sel", tmp_path / "p2")
