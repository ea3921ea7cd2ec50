"""Bad input is answered with one `Error:` line naming the file, row and column, exit 1, nothing written."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from frpd_cli.cli.app import app

runner = CliRunner()


def _run(paths, tmp_path, *extra, data=None, applicants=None, model=None, out=True):
    output = tmp_path / "out.csv"
    args = ["plan", str(data or paths["data"]), "--model", str(model or paths["model"]), "--schema",
            str(paths["schema"]), "--applicants", str(applicants or paths["applicants"]), *extra]
    if out:
        args += ["--output", str(output)]
    result = runner.invoke(app, args)
    return result, output


def _assert_error(result, output, *needles):
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if not line.startswith("Warning:")]
    assert lines and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)
    assert not output.exists()
    assert [p for p in output.parent.iterdir() if p.name.startswith(".out.csv")] == []


def _write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_missing_file(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, data=tmp_path / "nope.csv"), "nope.csv", "does not exist")


def test_empty_file(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "e.csv", "")), "e.csv", "empty")


def test_header_only(sample_paths, tmp_path):
    header = (sample_paths["data"].read_text().splitlines()[0]) + "\n"
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "h.csv", header)), "h.csv", "no data rows")


def test_duplicate_columns(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "d.csv", "age,age,label\n1,2,1\n")),
                  "d.csv", "'age'")


def test_wrong_delimiter_hints(sample_paths, tmp_path):
    text = sample_paths["data"].read_text().replace(",", ";")
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "s.csv", text)), "s.csv", "';'")


def test_non_utf8_hints_encoding(sample_paths, tmp_path):
    raw = sample_paths["data"].read_bytes().replace(b"rent", b"r\xe9nt", 1)
    _assert_error(*_run(sample_paths, tmp_path, data=_write(tmp_path, "l.csv", raw, "wb")), "l.csv", "--encoding",
                  "line")


def test_target_missing(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["data"]).drop(columns="label")
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, data=path), "label")


def test_applicants_missing_columns(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    pd.read_csv(sample_paths["applicants"]).drop(columns=["age", "job"]).to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "'age'", "'job'")


def test_extra_applicant_columns_warned(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"])
    frame["notes"] = "x"
    frame.to_csv(path, index=False)
    result, output = _run(sample_paths, tmp_path, applicants=path)
    assert result.exit_code == 0 and "notes" in result.stderr and output.exists()


def test_missing_values_in_applicants_named(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"])
    frame.loc[3, "duration"] = None
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "duration", "row 4")


def test_text_in_continuous_applicant_column(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"]).astype({"credit_amount": object})
    frame.loc[2, "credit_amount"] = "lots"
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "credit_amount", "'lots'", "row 3")


def test_unseen_category(sample_paths, tmp_path):
    path = tmp_path / "a.csv"
    frame = pd.read_csv(sample_paths["applicants"])
    frame.loc[0, "housing"] = "castle"
    frame.to_csv(path, index=False)
    _assert_error(*_run(sample_paths, tmp_path, applicants=path), "housing", "'castle'", "own, rent")


@pytest.mark.parametrize("option,value", [("-k", "0"), ("--theta", "1.5"), ("--theta", "abc"), ("--jobs", "0")])
def test_out_of_range_options_are_usage_errors(sample_paths, tmp_path, option, value):
    result, output = _run(sample_paths, tmp_path, option, value)
    assert result.exit_code == 2 and result.stdout == "" and not output.exists()


@pytest.mark.parametrize("option,value,needle", [
    ("--bandwidth", "0", "> 0"), ("--bandwidth", "-1", "> 0"), ("--bandwidth", "inf", "> 0"),
    ("--bandwidth", "nan", "> 0"), ("--method", "foo", "quad-dp"), ("--format", "xml", "jsonl"),
    ("--backend", "spark", "loky"), ("--theta", "2", "--theta"), ("--endpoint", "x", "first-favorable"),
    ("--immutable-policy", "x", "project"), ("--candidates", "x", "labeled"), ("--tol", "0", "(0, 1)"),
    ("--threshold", "1", "(0, 1)"), ("--threshold", "0", "(0, 1)"), ("--max-cost", "-2", "> 0"),
    ("--encoding", "no-such-codec", "no-such-codec"), ("--chunk-size", "0", "--chunk-size"),
])
def test_invalid_option_values_are_usage_errors(sample_paths, tmp_path, option, value, needle):
    result, output = _run(sample_paths, tmp_path, option, value)
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert result.stdout == "" and not output.exists()
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    assert f"Invalid value for '{option}" in result.stderr or f"Invalid value for '-k' / '{option}" in result.stderr
    assert needle in " ".join(result.stderr.replace("│", " ").split()), result.stderr


@pytest.mark.parametrize("command", [
    ["build-graph", "--weight", "x"], ["build-graph", "--radius", "-1"], ["build-graph", "--max-step", "0"],
    ["build-graph", "--kde-bandwidth", "nan"], ["build-graph", "--export", "xml", "g.xml"],
    ["select", "--theta", "0.1,3"], ["select", "--theta", "a,b"], ["evaluate", "--manifold", "q"],
    ["interpolate", "--scheme", "x"], ["interpolate", "--endpoint", "x"], ["interpolate", "--threshold", "2"],
])
def test_invalid_option_values_of_every_command_are_usage_errors(sample_paths, tmp_path, command):
    name, *extra = command
    common = ["--model", str(sample_paths["model"])]
    if name == "interpolate":
        args = [name, "--selection", str(tmp_path / "sel"), "--out", str(tmp_path / "o"), *common]
    elif name == "evaluate":
        args = [name, str(sample_paths["data"]), "--plans", str(tmp_path / "p.csv"), *common]
    elif name == "select":
        args = [name, str(sample_paths["data"]), "--applicants", str(sample_paths["applicants"]), "--out",
                str(tmp_path / "o"), *common]
    else:
        args = [name, str(sample_paths["data"]), "--out", str(tmp_path / "o"), *common]
    result = runner.invoke(app, [*args, *[str(tmp_path / e) if e.endswith(".xml") else e for e in extra]])
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert f"Invalid value for '{extra[0]}'" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists() and result.stdout == ""


def test_help_lists_the_choices():
    result = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.stdout.replace("│", " ").split())
    for choices in ("quad|quad-dp", "table|csv|json|jsonl", "loky|dask", "filter|project", "prototype|first-favorable"):
        assert choices in text, choices


def test_build_graph_weights_match_the_library():
    from frpd_cli.cli._options import WEIGHTS
    from frpd_cli.graph import _WEIGHTS

    assert WEIGHTS == _WEIGHTS


def test_model_file_that_is_not_a_model(sample_paths, tmp_path):
    path = tmp_path / "m.pkl"
    path.write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    _assert_error(*_run(sample_paths, tmp_path, model=path), "m.pkl")


def test_model_garbage_bytes(sample_paths, tmp_path):
    path = tmp_path / "m.pkl"
    path.write_bytes(b"\x80\x04not really a pickle")
    _assert_error(*_run(sample_paths, tmp_path, model=path), "m.pkl")


def test_model_expects_other_columns(sample_paths, tmp_path):
    frame = pd.read_csv(sample_paths["data"]).rename(columns={"job": "occupation"})
    path = tmp_path / "renamed.csv"
    frame.to_csv(path, index=False)
    result, output = _run(sample_paths, tmp_path, "--categorical", "occupation", data=path)
    assert result.exit_code == 1 and "occupation" in result.stderr and "job" in result.stderr


def test_model_lacks_favourable_class(sample_paths, tmp_path):
    _assert_error(*_run(sample_paths, tmp_path, "--favorable", "7"), "7")


def test_output_not_writable(sample_paths, tmp_path):
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--applicants",
                                 str(sample_paths["applicants"]), "--output", str(tmp_path / "no" / "x.csv")])
    assert result.exit_code == 1 and result.stderr.startswith("Error: ") and "does not exist" in result.stderr


_cells = st.one_of(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6),
                   st.integers(-5, 5).map(str), st.just(""), st.just('"'), st.just(";"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(_cells, min_size=0, max_size=9), min_size=0, max_size=6),
       which=st.sampled_from(["data", "applicants"]))
def test_random_malformed_csvs_never_crash(sample_paths, tmp_path, rows, which):
    header = sample_paths["data"].read_text().splitlines()[0] if which == "data" else \
        sample_paths["applicants"].read_text().splitlines()[0]
    text = "\n".join([header] + [",".join(r) for r in rows]) + "\n"
    path = tmp_path / f"fuzz-{which}.csv"
    path.write_text(text, encoding="utf-8")
    output = tmp_path / "fuzz-out.csv"
    if output.exists():
        output.unlink()
    kwargs = {which: path}
    args = ["plan", str(kwargs.get("data", sample_paths["data"])), "--model", str(sample_paths["model"]),
            "--schema", str(sample_paths["schema"]), "--applicants",
            str(kwargs.get("applicants", sample_paths["applicants"])), "--output", str(output)]
    result = runner.invoke(app, args)
    assert "Traceback" not in result.stderr
    if result.exit_code == 0:
        assert output.exists()     # a malformed-looking file can still be valid (e.g. header-only rows dropped)
    else:
        assert result.exit_code in (1, 2)
        assert result.stderr.startswith("Error:") or "Usage:" in result.stderr
        assert not output.exists()


def _selection(paths, tmp_path):
    sel = tmp_path / "sel"
    result = runner.invoke(app, ["select", str(paths["data"]), "--model", str(paths["model"]), "--applicants",
                                 str(paths["applicants"]), "--schema", str(paths["schema"]), "--out", str(sel),
                                 "--format", "csv"])
    assert result.exit_code == 0, result.stderr
    return sel


def _interpolate(paths, selection, out):
    return runner.invoke(app, ["interpolate", "--selection", str(selection), "--model", str(paths["model"]),
                               "--out", str(out)])


def test_corrupted_selection_artifact(sample_paths, tmp_path):
    sel = _selection(sample_paths, tmp_path)
    with open(sel / "prototypes.csv", "a") as stream:
        stream.write("tampered\n")
    result = _interpolate(sample_paths, sel, tmp_path / "p")
    assert result.exit_code == 1 and result.stderr.startswith("Error:") and "prototypes.csv" in result.stderr
    assert not (tmp_path / "p").exists()


def test_artifact_of_another_kind_or_version(sample_paths, tmp_path):
    import json

    graph = tmp_path / "graph"
    built = runner.invoke(app, ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                "--schema", str(sample_paths["schema"]), "--out", str(graph)])
    assert built.exit_code == 0, built.stderr
    wrong_kind = _interpolate(sample_paths, graph, tmp_path / "p")
    assert wrong_kind.exit_code == 1 and "graph" in wrong_kind.stderr and "selection" in wrong_kind.stderr
    sel = _selection(sample_paths, tmp_path)
    manifest = json.loads((sel / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (sel / "manifest.json").write_text(json.dumps(manifest))
    newer = _interpolate(sample_paths, sel, tmp_path / "p")
    assert newer.exit_code == 1 and "99" in newer.stderr
    missing = _interpolate(sample_paths, tmp_path / "nowhere", tmp_path / "p")
    assert missing.exit_code == 1 and missing.stderr.startswith("Error:")
    assert not (tmp_path / "p").exists()


def test_graph_built_for_other_data_refused(sample_paths, tmp_path):
    graph = tmp_path / "graph"
    assert runner.invoke(app, ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                               "--schema", str(sample_paths["schema"]), "--out", str(graph)]).exit_code == 0
    frame = pd.read_csv(sample_paths["data"]).head(1500)
    other = tmp_path / "other.csv"
    frame.to_csv(other, index=False)
    result, output = _run(sample_paths, tmp_path, "--graph", str(graph), data=other)
    _assert_error(result, output, "data")


def test_missing_applicants_file_with_output(sample_paths, tmp_path):
    result, output = _run(sample_paths, tmp_path, applicants=tmp_path / "nobody.csv")
    _assert_error(result, output, "nobody.csv", "does not exist")
    assert not (tmp_path / "out.csv.resume.json").exists()


def test_missing_schema_file(sample_paths, tmp_path):
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 "--schema", str(tmp_path / "nope.toml"), "--applicants",
                                 str(sample_paths["applicants"])])
    assert result.exit_code == 1 and "nope.toml" in result.stderr and "Traceback" not in result.stderr
