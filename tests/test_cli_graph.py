"""build-graph, plan --graph, select --graph + interpolate --scheme graph: artifacts, contract, refusals."""

from __future__ import annotations

import csv
import io
import json

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.graph import graph_from_arrays, graph_statistics

runner = CliRunner()


def _common(paths):
    return ["--model", str(paths["model"]), "--schema", str(paths["schema"])]


def _build(paths, out, *extra, data=None):
    return runner.invoke(app, ["build-graph", str(data or paths["data"]), *_common(paths), "--out", str(out),
                               "--format", "csv", *extra])


def _plan(paths, graph, *extra):
    return runner.invoke(app, ["plan", str(paths["data"]), *_common(paths), "--applicants",
                               str(paths["applicants"]), "--graph", str(graph), "--max-move", "none", *extra])


@pytest.fixture(scope="module")
def graph_dir(sample_paths, tmp_path_factory):
    out = tmp_path_factory.mktemp("graph") / "g"
    result = _build(sample_paths, out)
    assert result.exit_code == 0, result.stderr
    return out


def test_build_graph_writes_artifact_stats_and_graphml(sample_paths, tmp_path):
    out, gml = tmp_path / "g", tmp_path / "g.graphml"
    result = _build(sample_paths, out, "--neighbors", "5", "--export", "graphml", str(gml))
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "graph" and set(manifest["inputs"]) == {"data", "model"}
    assert manifest["params"]["neighbors"] == 5 and manifest["params"]["weight"] == "euclidean"
    with np.load(out / "graph.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    graph = graph_from_arrays(arrays)
    n = len(pd.read_csv(sample_paths["data"]))
    assert graph.n_nodes == n and arrays["probability"].shape == (n,) and arrays["favorable"].dtype == bool
    np.testing.assert_array_equal(arrays["favorable"], arrays["probability"] >= 0.5)
    stats = json.loads((out / "stats.json").read_text())
    assert stats == {**graph_statistics(graph), "favorable_nodes": int(arrays["favorable"].sum())}
    assert manifest["params"]["statistics"]["build_seconds"] >= 0
    # stdout: one csv record with the statistics; the summary on stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 1 and int(rows[0]["edges"]) == graph.n_edges and int(rows[0]["nodes"]) == n
    assert "Artifact written" in result.stderr
    G = nx.read_graphml(gml)
    assert G.number_of_nodes() == n and G.number_of_edges() == graph.n_edges
    assert {"probability", "favorable"} <= set(G.nodes["0"])


def test_build_graph_payloads_are_byte_identical(sample_paths, tmp_path):
    for name in ("a", "b"):
        assert _build(sample_paths, tmp_path / name).exit_code == 0
    for payload in ("graph.npz", "stats.json"):
        assert (tmp_path / "a" / payload).read_bytes() == (tmp_path / "b" / payload).read_bytes()


def test_build_graph_export_format_checked(sample_paths, tmp_path):
    result = _build(sample_paths, tmp_path / "g", "--export", "gexf", str(tmp_path / "x"))
    assert result.exit_code == 2 and "graphml" in result.stderr and not (tmp_path / "g").exists()


def test_plan_graph_jsonl_has_paths_and_steps(sample_paths, graph_dir):
    result = _plan(sample_paths, graph_dir, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["applicant"] for r in records] == pd.read_csv(sample_paths["applicants"])["applicant_id"].tolist()
    for rec in records:
        assert rec["status"] == "ok" and rec["method"] == "quad+graph"
        costs = [r["cost"] for r in rec["recourses"]]
        assert costs == sorted(costs)                       # rank 1 the cheapest
        for r in rec["recourses"]:
            assert list(r) == ["rank", "features", "changes", "cost", "probability", "path", "steps", "n_changes",
                               "largest_shift"]
            assert r["n_changes"] == len(r["changes"])
            assert len(r["path"]) == len(r["steps"]) >= 1 and r["probability"] >= 0.5


def test_plan_graph_csv_columns_unchanged(sample_paths, graph_dir):
    result = _plan(sample_paths, graph_dir, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    header = result.stdout.splitlines()[0].split(",")
    assert header[:5] == ["applicant", "status", "reason", "rank", "method"]
    assert header[-5:] == ["cost", "probability", "n_changes", "partial", "largest_shift"]  # graph plans never project


def test_table_shows_numbered_steps(sample_paths, graph_dir):
    result = _plan(sample_paths, graph_dir, "--format", "table")
    assert result.exit_code == 0, result.stderr
    assert "Recourse 1 (cost" in result.stdout and "\n  1. " in result.stdout


def test_jobs_1_and_2_byte_identical(sample_paths, graph_dir):
    for fmt in ("csv", "jsonl"):
        one = _plan(sample_paths, graph_dir, "--format", fmt, "--jobs", "1")
        two = _plan(sample_paths, graph_dir, "--format", fmt, "--jobs", "2", "--chunk-size", "3")
        assert one.exit_code == two.exit_code == 0
        assert one.stdout == two.stdout


def test_face_needs_graph(sample_paths):
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                                 str(sample_paths["applicants"]), "--method", "face"])
    assert result.exit_code == 1 and "The 'face' method needs --graph" in result.stderr and result.stdout == ""


def test_face_plan_runs(sample_paths, graph_dir):
    result = _plan(sample_paths, graph_dir, "--format", "jsonl", "--method", "face", "--endpoint", "first-favorable")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert all(r["method"] == "face+graph:first-favorable" and len(r["recourses"]) == 3 for r in records)


def test_stale_graph_refused_naming_the_input(sample_paths, graph_dir, tmp_path):
    other_model = tmp_path / "other.pkl"
    other_model.write_bytes(sample_paths["model"].read_bytes() + b"\0")
    result = runner.invoke(app, ["plan", str(sample_paths["data"]), "--model", str(other_model), "--schema",
                                 str(sample_paths["schema"]), "--applicants", str(sample_paths["applicants"]),
                                 "--graph", str(graph_dir)])
    assert result.exit_code == 1 and result.stdout == ""
    assert "'model'" in result.stderr and "frpd build-graph" in result.stderr

    other_data = tmp_path / "credit.csv"
    frame = pd.read_csv(sample_paths["data"])
    frame.loc[0, "credit_amount"] += 1
    frame.to_csv(other_data, index=False)
    result = runner.invoke(app, ["plan", str(other_data), *_common(sample_paths), "--applicants",
                                 str(sample_paths["applicants"]), "--graph", str(graph_dir)])
    assert result.exit_code == 1 and "'data'" in result.stderr and "stale" in result.stderr


def test_graph_with_another_schema_refused(sample_paths, graph_dir):
    result = _plan(sample_paths, graph_dir, "--immutable", "job")
    assert result.exit_code == 1
    assert "another schema" in result.stderr and "'job'" in result.stderr


def test_select_then_interpolate_graph_matches_plan(sample_paths, graph_dir, tmp_path):
    sel = tmp_path / "sel"
    r1 = runner.invoke(app, ["select", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                             str(sample_paths["applicants"]), "--out", str(sel), "--graph", str(graph_dir),
                             "--format", "csv", "--max-move", "none"])
    assert r1.exit_code == 0, r1.stderr
    manifest = json.loads((sel / "manifest.json").read_text())
    assert manifest["params"]["scheme"] == "graph" and "graph" in manifest["inputs"]
    r2 = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]),
                             "--scheme", "graph", "--graph", str(graph_dir), "--out", str(tmp_path / "p"),
                             "--format", "jsonl"])
    assert r2.exit_code == 0, r2.stderr
    r3 = _plan(sample_paths, graph_dir, "--format", "jsonl")
    assert r2.stdout == r3.stdout

    # a graph selection is not interpolated linearly, and a linear one not on the graph
    r4 = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]),
                             "--out", str(tmp_path / "q")])
    assert r4.exit_code == 1 and "--scheme graph" in r4.stderr
    lin = tmp_path / "lin"
    r5 = runner.invoke(app, ["select", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                             str(sample_paths["applicants"]), "--out", str(lin), "--format", "csv"])
    assert r5.exit_code == 0
    r6 = runner.invoke(app, ["interpolate", "--selection", str(lin), "--model", str(sample_paths["model"]),
                             "--scheme", "graph", "--graph", str(graph_dir), "--out", str(tmp_path / "r")])
    assert r6.exit_code == 1 and "made without a graph" in r6.stderr
    assert not (tmp_path / "q").exists() and not (tmp_path / "r").exists()


def test_interpolate_refuses_another_graph(sample_paths, graph_dir, tmp_path):
    sel = tmp_path / "sel"
    assert runner.invoke(app, ["select", str(sample_paths["data"]), *_common(sample_paths), "--applicants",
                               str(sample_paths["applicants"]), "--out", str(sel), "--graph", str(graph_dir),
                               "--format", "csv"]).exit_code == 0
    other = tmp_path / "g5"
    assert _build(sample_paths, other, "--neighbors", "5").exit_code == 0
    result = runner.invoke(app, ["interpolate", "--selection", str(sel), "--model", str(sample_paths["model"]),
                                 "--scheme", "graph", "--graph", str(other), "--out", str(tmp_path / "p")])
    assert result.exit_code == 1 and "'graph'" in result.stderr


def test_infeasible_when_disconnected(sample_paths, tmp_path):
    # a one-neighbour radius-free graph with a tight max step leaves applicants without a way out
    out = tmp_path / "g"
    assert _build(sample_paths, out, "--neighbors", "1", "--max-step", "0.05").exit_code == 0
    result = _plan(sample_paths, out, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert all(r["status"] == "infeasible" and r["recourses"] == [] for r in records)
    assert all("no actionable neighbour" in r["reason"] or "reachable on the graph" in r["reason"] for r in records)
    assert "Hint:" in result.stderr


def test_build_graph_default_counts_neighbours_per_changed_category(sample_paths, graph_dir, tmp_path):
    from frpd_cli.graph import default_neighbors

    manifest = json.loads((graph_dir / "manifest.json").read_text())
    n = len(pd.read_csv(sample_paths["data"]))
    assert manifest["params"]["neighbors"] == default_neighbors(n) and manifest["params"]["per_change"] is True
    with np.load(graph_dir / "graph.npz", allow_pickle=False) as z:
        graph = graph_from_arrays({k: z[k] for k in z.files})
    assert graph.category_blocks is not None and len(graph.category_blocks) >= 1
    # the plain rule on request: fewer edges, no blocks stored
    plain = tmp_path / "plain"
    result = _build(sample_paths, plain, "--no-per-change", "--neighbors", str(default_neighbors(n)))
    assert result.exit_code == 0, result.stderr
    with np.load(plain / "graph.npz", allow_pickle=False) as z:
        plain_graph = graph_from_arrays({k: z[k] for k in z.files})
    assert plain_graph.category_blocks is None and plain_graph.n_edges < graph.n_edges
    assert json.loads((plain / "manifest.json").read_text())["params"]["per_change"] is False


def test_build_graph_neighbors_must_be_positive(sample_paths, tmp_path):
    result = _build(sample_paths, tmp_path / "g", "--neighbors", "0")
    assert result.exit_code == 2 and "--neighbors" in result.stderr and not (tmp_path / "g").exists()


def test_build_graph_connect_joins_islands_and_refuses_one_way_features(sample_paths, tmp_path):
    from scipy.sparse.csgraph import connected_components

    data = ["build-graph", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--target", "label",
            "--favorable", "1", "--categorical", "personal_status", "--categorical", "housing", "--categorical",
            "job", "--immutable", "personal_status", "--id-column", "applicant_id", "--format", "csv"]
    data += ["--favorable-neighbors", "0"]  # the nearest-neighbour rule alone, so that it leaves islands
    plain = runner.invoke(app, [*data, "--out", str(tmp_path / "plain"), "--neighbors", "1", "--no-per-change"])
    joined = runner.invoke(app, [*data, "--out", str(tmp_path / "joined"), "--neighbors", "1", "--no-per-change",
                                 "--connect"])
    assert plain.exit_code == 0 and joined.exit_code == 0, plain.stderr + joined.stderr
    manifest = json.loads((tmp_path / "joined" / "manifest.json").read_text())
    assert manifest["params"]["connect"] is True
    graphs = {}
    for name in ("plain", "joined"):
        with np.load(tmp_path / name / "graph.npz", allow_pickle=False) as z:
            graphs[name] = graph_from_arrays({k: z[k] for k in z.files})
    frame = pd.read_csv(sample_paths["data"])
    groups = frame["personal_status"].to_numpy()
    # one component per immutable group (value of personal_status) present in the data
    n_joined, label = connected_components(graphs["joined"].adjacency, directed=False)
    assert n_joined == len(set(groups))
    for g in set(groups):
        assert len(set(label[groups == g])) == 1
    assert connected_components(graphs["plain"].adjacency, directed=False)[0] > n_joined
    # the sample schema declares increasing features: --connect is a usage error that says what to do
    refused = _build(sample_paths, tmp_path / "refused", "--connect")
    assert refused.exit_code == 2
    assert "Error:" in refused.stderr and "--connect" in refused.stderr and "increasing" in refused.stderr
    assert not (tmp_path / "refused").exists()
