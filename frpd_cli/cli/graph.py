"""``frpd build-graph``: the actionability graph artifact, and loading it for the graph scheme."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer

from ..artifacts import read_artifact, write_artifact
from ..constraints import actionable_pairs
from ..exceptions import ArtifactError, InputError, OptionError, StaleArtifactError
from ..graph import (
    APPROXIMATE_MIN_ROWS,
    approximate_search_available,
    build_graph,
    default_candidates,
    default_neighbors,
    graph_from_arrays,
    graph_statistics,
    graph_to_arrays,
    resolve_search,
    to_networkx,
)
from ..judge import primary_model
from ..outputs import check_artifact_folder, check_not_inputs, lock_outputs, output_path, resolve_output
from . import _options as o
from ._errors import echo_err, handle_errors
from ._output import open_output, resolve_format, stderr_console, write_records
from .app import app

__all__ = ["build_graph_command", "load_graph", "check_graph_payload", "category_blocks", "GRAPH_KIND", "GRAPH_HINT"]

GRAPH_KIND = "graph"
GRAPH_HINT = "frpd build-graph DATA --model MODEL --out DIR"
_EXPORT_FORMATS = ("graphml",)
_SEARCHES = ("auto", "exact", "approximate")
#: Default of ``--favorable-neighbors``: edges from every row to its 10 nearest favourable rows (docs/benchmarks.md,
#: "What any actionability graph can give": on Adult FACE's path cost falls from 1.46 to the straight-line floor,
#: 1.33, and QUAD's from 1.96 to 1.81; on SBA QUAD's from 1.05 to 0.87 with a full plan for 99 applicants of 100).
FAVORABLE_NEIGHBORS = 10
_STAT_COLUMNS = ["nodes", "edges", "directed", "weak_components", "largest_component", "favorable_nodes",
                 "median_out_degree", "sinks", "isolated_nodes", "build_seconds"]


def _plain_schema(schema) -> list:
    """The features of a schema as plain JSON values (as stored in the manifest)."""
    return json.loads(json.dumps(schema.to_dict()["features"], default=str))


def _schema_difference(stored: list, current: list) -> str | None:
    """What differs between two feature lists, in words; None when they agree."""
    old = {f["name"]: f for f in stored}
    new = {f["name"]: f for f in current}
    if list(old) != list(new):
        gone = [n for n in old if n not in new]
        added = [n for n in new if n not in old]
        if gone or added:
            parts = ([f"features {', '.join(map(repr, gone))} only in the graph's schema"] if gone else []) + (
                [f"features {', '.join(map(repr, added))} only in the current schema"] if added else [])
            return "; ".join(parts)
        return "the features are in another order"
    for name, f in old.items():
        for key in ("kind", "mutability", "levels"):
            if f.get(key) != new[name].get(key):
                return f"feature '{name}' has {key} {f.get(key)!r} in the graph but {new[name].get(key)!r} now"
        if f.get("weight", 1.0) != new[name].get("weight", 1.0):     # edge lengths are weighted distances
            return (f"feature '{name}' has weight {f.get('weight', 1.0)!r} in the graph but "
                    f"{new[name].get('weight', 1.0)!r} now")
    return None


def category_blocks(encoder) -> list[tuple[int, int]]:
    """The ``[start, stop)`` encoded columns of each categorical (one-hot) feature of ``encoder``."""
    return [(int(encoder.offsets[j]), int(encoder.offsets[j + 1]))
            for j, f in enumerate(encoder.schema.features) if f.is_categorical]


def load_graph(graph_dir: Path, training, *, data: Path, model: Path, scored_by=None):
    """Open a graph artifact and check it belongs to ``data``, ``model`` and the current schema.

    Returns
    -------
    graph : frpd_cli.graph.Graph
    artifact : frpd_cli.artifacts.Artifact

    Raises
    ------
    StaleArtifactError
        The graph was built from another data file, another model, or another schema (the message
        names which).
    ArtifactError
        ``graph.npz`` fails its load checks (see :func:`check_graph_payload`).
    """
    artifact = read_artifact(graph_dir, kind=GRAPH_KIND, inputs={"data": data, "model": model},
                             command_hint=GRAPH_HINT)
    built_scale = artifact.params.get("scale", "minmax")         # graphs made before --scale existed are min-max
    if built_scale != training.encoder.scale:
        raise StaleArtifactError(
            f"The graph artifact '{graph_dir}' was built with --scale {built_scale}, not --scale "
            f"{training.encoder.scale} as now (its edge lengths are distances in that scale). Pass --scale "
            f"{built_scale}, or rebuild it with --scale {training.encoder.scale}: {GRAPH_HINT}"
        )
    difference = _schema_difference(artifact.params.get("schema", []), _plain_schema(training.schema))
    if difference:
        raise StaleArtifactError(
            f"The graph artifact '{graph_dir}' was built with another schema: {difference}. Rebuild it with the "
            f"same schema flags: {GRAPH_HINT}"
        )
    arrays = artifact.load_npz("graph.npz")
    try:
        graph = graph_from_arrays(arrays)
    except ArtifactError as exc:
        raise ArtifactError(f"The graph artifact '{graph_dir}' fails its load checks: graph.npz: {exc} "
                            f"Re-run: {GRAPH_HINT}") from None
    if graph.n_nodes != training.n_rows:
        raise StaleArtifactError(
            f"The graph artifact '{graph_dir}' has {graph.n_nodes} nodes but '{data}' has {training.n_rows} rows. "
            f"Re-run: {GRAPH_HINT}"
        )
    own = None
    if scored_by is not None and primary_model(scored_by) is not scored_by:
        # the rows were scored by the judge of several models; the graph stores the model's own probabilities
        own = np.asarray(primary_model(scored_by).favorable_probability(training.frame), dtype=np.float64)
    check_graph_payload(graph, arrays, training, graph_dir=graph_dir, threshold=artifact.params.get("threshold"),
                        probability=own)
    return graph, artifact


def check_graph_payload(graph, arrays: dict, training, *, graph_dir, threshold=None, probability=None) -> None:
    """Re-check a loaded graph against the training data it claims to be built from.

    Every edge must be actionable between the rows it joins (immutable features equal, monotone
    features moving their allowed way), and the stored probabilities (when present) must be finite,
    in [0, 1] and the model's own for each row; the favourable flags must agree with them at the
    ``threshold`` the graph was built with. ``probability``: the model's own probability of each training row
    when ``training`` was scored by several models (:class:`frpd_cli.judge.Judge`); default its probabilities.

    Raises
    ------
    ArtifactError
        Naming the artifact, ``graph.npz``, the edge or node and the broken rule.
    """
    def fail(problem: str) -> ArtifactError:
        return ArtifactError(f"The graph artifact '{graph_dir}' fails its load checks: graph.npz {problem}. It was "
                             f"edited or damaged after it was built. Re-run: {GRAPH_HINT}")

    if graph.category_blocks is not None:
        expected = np.asarray(category_blocks(training.encoder), dtype=np.int64).reshape(-1, 2)
        if not np.array_equal(graph.category_blocks, expected):
            raise fail(f"holds the category blocks {graph.category_blocks.tolist()}, but the data's categorical "
                       f"features occupy the encoded columns {expected.tolist()}")
    A = graph.adjacency
    src = np.repeat(np.arange(graph.n_nodes), np.diff(A.indptr))
    broken = np.flatnonzero(~actionable_pairs(training.codes, src, A.indices))
    if broken.size:
        e = int(broken[0])
        raise fail(f"holds the edge {int(src[e])} -> {int(A.indices[e])}, which changes an immutable feature or moves "
                   "a monotone feature the wrong way")
    n = training.n_rows
    own = training.probability if probability is None else probability
    if "probability" in arrays:
        stored = np.asarray(arrays["probability"])
        if stored.shape != (n,) or stored.dtype.kind != "f":
            raise fail(f"array 'probability' is {stored.dtype} {stored.shape}; expected {n} floats")
        bad = np.flatnonzero(~np.isfinite(stored) | (stored < 0) | (stored > 1))
        if bad.size:
            raise fail(f"array 'probability' holds {float(stored[bad[0]])!r} for node {int(bad[0])}; probabilities "
                       "must be finite and in [0, 1]")
        off = np.flatnonzero(np.abs(stored - own) > 1e-9)
        if off.size:
            r = int(off[0])
            raise fail(f"array 'probability' gives node {r} probability {float(stored[r]):.6g}, but the model gives "
                       f"{float(own[r]):.6g} for that training row")
    if "favorable" in arrays:
        flags = np.asarray(arrays["favorable"])
        if flags.shape != (n,) or flags.dtype.kind != "b":
            raise fail(f"array 'favorable' is {flags.dtype} {flags.shape}; expected {n} booleans")
        if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
            off = np.flatnonzero(flags != (own >= threshold))
            if off.size:
                r = int(off[0])
                raise fail(f"array 'favorable' marks node {r} {'favourable' if flags[r] else 'unfavourable'}, unlike "
                           f"its probability {float(own[r]):.6g} at the graph's threshold {threshold:g}")


def _write_graphml(graph, training, path: Path) -> None:
    import networkx as nx

    G = to_networkx(graph)
    for node in range(graph.n_nodes):
        G.nodes[node]["probability"] = float(training.probability[node])
        G.nodes[node]["favorable"] = bool(training.favorable[node])
    with output_path(path) as tmp:
        nx.write_graphml(G, tmp)


@app.command("build-graph")
@handle_errors
@o.SCHEMA_OPTIONS.declaring(weights=o.GraphFeatureWeightOpt)
def build_graph_command(
    data: o.DataArg,
    model: o.ModelOpt,
    out: Annotated[Path, typer.Option("--out", readable=False, help="Folder to write the graph artifact to.", show_default=False)],
    neighbors: Annotated[Optional[int], typer.Option("--neighbors", min=1, help="Edges to the k nearest "
                                                     "actionable rows of each row (duplicates extra), per number "
                                                     "of changed categories unless --no-per-change. Larger k "
                                                     "reaches more rows in fewer moves. Default: from the number "
                                                     "of rows, sqrt(rows)/8 kept within 10 to 20.",
                                                     show_default=False, rich_help_panel="Graph")] = None,
    per_change: Annotated[bool, typer.Option("--per-change/--no-per-change", help="Count --neighbors separately "
                                             "for each number of categorical features a move changes, so that "
                                             "one move may change several categories (a path of one-category "
                                             "moves pays sqrt(2) per category, one move sqrt(2c) for c).",
                                             rich_help_panel="Graph")] = True,
    radius: o.RadiusOpt = None,
    favorable_neighbors: Annotated[int, typer.Option("--favorable-neighbors", min=0, help="Also an edge from each "
                                                     "row (and each applicant) to its H nearest actionable rows the "
                                                     "model predicts favourable, so the nearest favourable rows are "
                                                     "one straight move away (FACE then costs the straight-line "
                                                     "distance to them). 0: none.",
                                                     rich_help_panel="Graph")] = FAVORABLE_NEIGHBORS,
    connect: Annotated[bool, typer.Option("--connect/--no-connect", help="Join the islands of each immutable "
                                          "group by their shortest edges, so every row reaches every row of its "
                                          "group (applicants on a small island otherwise reach few favourable "
                                          "rows). Not with --increasing/--decreasing features.",
                                          rich_help_panel="Graph")] = False,
    max_step: o.MaxStepOpt = None,
    neighbor_search: Annotated[str, typer.Option("--neighbor-search", help="How the nearest rows are found: exact, "
                                                 "approximate (a faiss HNSW index proposes the candidates; the "
                                                 "edge rule and lengths stay exact, a true neighbour can be "
                                                 "missed; needs faiss-cpu, the ann extra) or auto: approximate "
                                                 f"from {APPROXIMATE_MIN_ROWS:,} rows when faiss is installed. "
                                                 "Deterministic for a --seed. See docs/scale.md.",
                                                 case_sensitive=False, rich_help_panel="Graph")] = "auto",
    search_candidates: Annotated[Optional[int], typer.Option("--search-candidates", min=1, help="Approximate "
                                                             "search: distinct nearest points proposed per "
                                                             "distinct row (more: higher recall, slower). "
                                                             "Default: 4 x --neighbors, at least 128.",
                                                             show_default=False, rich_help_panel="Graph")] = None,
    weight: o.WeightOpt = "euclidean",
    kde_bandwidth: o.KdeBandwidthOpt = None,
    export: Annotated[Optional[tuple[str, Path]], typer.Option("--export", help="Also write the graph for "
                                                               "inspection tools: --export graphml FILE.",
                                                               show_default=False, rich_help_panel="Graph")]
    = None,
    fmt: o.FormatOpt = None,
    quiet: o.QuietOpt = False,
    flags: o.SchemaFlags = o.SchemaFlags(),
    threshold: o.ThresholdOpt = 0.5,
    trust_type: o.TrustTypeOpt = None,
    pool: o.PoolOpt = None,
    seed: o.SeedOpt = 0,
    encoding: o.EncodingOpt = "utf-8",
) -> None:
    """Build the actionability graph over the training rows (for sequential recourse and FACE).

    Nodes are the training rows; an edge u -> v joins v to u when the move keeps every immutable feature and
    moves monotone features only their allowed way, and v is among u's --neighbors nearest such rows that change
    as many categorical features as v does (or within --radius), or among u's --favorable-neighbors nearest such
    rows the model predicts favourable. The statistics go to stdout.

    Example: frpd build-graph sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --out graph/
    """
    if export is not None and export[0].lower() not in _EXPORT_FORMATS:
        raise OptionError("--export", f"The 'export' format must be one of {', '.join(_EXPORT_FORMATS)}. "
                          f"Got {export[0]!r} instead (use --export graphml FILE).")
    if export is not None:
        resolve_output(export[1])
    check_not_inputs({"--out": out, "--export": None if export is None else export[1]},
                     {"data": data, "model": model, "schema": flags.schema, "pool": pool})
    check_artifact_folder(out)
    # the output locks come first: a second writer is refused before any input is read
    with lock_outputs(files=(None if export is None else export[1],), folders=(out,)):
        if kde_bandwidth is not None and weight != "density":
            raise InputError("The 'kde-bandwidth' option only applies to --weight density.")
        fmt_ = resolve_format(fmt, None)
        neighbor_search = neighbor_search.lower()
        if neighbor_search not in _SEARCHES:
            raise OptionError("--neighbor-search", f"--neighbor-search must be one of {', '.join(_SEARCHES)}. Got "
                              f"{neighbor_search!r} instead.")
        if neighbor_search == "approximate" and radius is not None:
            raise OptionError("--neighbor-search", "--neighbor-search approximate finds nearest neighbours; a "
                              "--radius graph is built by the exact search. Drop --radius, or use "
                              "--neighbor-search exact.")
        if neighbor_search == "approximate" and not approximate_search_available():
            raise OptionError("--neighbor-search", "--neighbor-search approximate needs faiss, which is not "
                              "installed. Install it (pip install 'frpd-cli[ann]', or pip install faiss-cpu), or use "
                              "--neighbor-search exact.")
        training, _, _ = o.load_training(data, model, flags, threshold=threshold, encoding=encoding,
                                         trusted_types=trust_type, pool=pool, quiet=quiet, id_in_data=True)
        if neighbors is None:
            neighbors = default_neighbors(training.n_rows)
        blocks = category_blocks(training.encoder) if per_change and radius is None else None
        if connect and training.codes.monotone.shape[1] > 0:
            monotone = [f.name for f in training.schema.features if f.mutability in ("increasing", "decreasing")]
            raise OptionError("--connect", "--connect needs every move to be reversible, but "
                              f"{', '.join(repr(m) for m in monotone)} may only move one way (--increasing/"
                              "--decreasing). Drop --connect, or those declarations.")

        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        console = stderr_console()
        progress = Progress(TextColumn("building graph"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            console=console, transient=True, disable=quiet or not console.is_terminal)
        searched = resolve_search(neighbor_search, training.n_rows, radius)
        if (neighbor_search == "auto" and searched == "exact" and radius is None
                and training.n_rows >= APPROXIMATE_MIN_ROWS and not quiet):
            echo_err(f"Note: {training.n_rows} rows: the exact neighbour search may take long; pip install "
                     "'frpd-cli[ann]' enables the approximate one (--neighbor-search auto, docs/scale.md).")
        start = time.perf_counter()
        with progress:
            task = progress.add_task("graph", total=training.n_rows)
            hubs = dict(hubs=training.favorable, hub_neighbors=favorable_neighbors) if favorable_neighbors else {}
            graph = build_graph(training.X, training.codes, n_neighbors=neighbors, radius=radius, max_step=max_step,
                                weight=weight, bandwidth=kde_bandwidth, category_blocks=blocks, connect=connect,
                                search=neighbor_search, candidates=search_candidates, seed=seed,
                                progress=lambda done, total: progress.update(task, completed=done), **hubs)
        seconds = time.perf_counter() - start

        stats = {**graph_statistics(graph), "favorable_nodes": int(training.favorable.sum())}
        arrays = {**graph_to_arrays(graph), "probability": training.probability.astype(np.float64),
                  "favorable": training.favorable.astype(bool)}
        params = {
            "neighbors": graph.n_neighbors, "radius": graph.radius, "max_step": graph.max_step, "weight": graph.weight,
            "bandwidth": graph.bandwidth, "threshold": threshold, "seed": seed,
            "per_change": graph.category_blocks is not None,
            "connect": connect,
            "neighbor_search": searched,
            "search_candidates": (default_candidates(neighbors) if search_candidates is None else search_candidates)
            if searched == "approximate" else None,
            "favorable_neighbors": favorable_neighbors,
            "schema": _plain_schema(training.schema),
            "scale": training.encoder.scale,
            # build_seconds is the one field that differs between identical runs; the payloads do not.
            "statistics": {**stats, "build_seconds": round(seconds, 3)},
        }
        write_artifact(out, kind=GRAPH_KIND, params=params, inputs={"data": data, "model": model},
                       payloads={"graph.npz": arrays, "stats.json": stats})
        if export is not None:
            _write_graphml(graph, training, export[1])
        if not quiet:
            echo_err(f"Built the actionability graph of {stats['nodes']} rows in {seconds:.2f} s: {stats['edges']} edges, "
                     f"{stats['favorable_nodes']} favourable nodes. Artifact written to '{out}'."
                     + (f" GraphML written to '{export[1]}'." if export is not None else ""))
        if stats["weak_components"] > 1:
            echo_err(f"Note: {stats['weak_components']} weakly connected components (largest: "
                     f"{stats['largest_component']} nodes); applicants reach only their own component.")
        record = {**stats, "build_seconds": round(seconds, 3)}
        with open_output(None) as stream:
            if fmt_ == "table":  # one record: a statistic per line reads better at 80 columns
                write_records(stream, fmt_, [{"statistic": c, "value": record[c]} for c in _STAT_COLUMNS],
                              ["statistic", "value"], title="Actionability graph")
            else:
                write_records(stream, fmt_, [record], _STAT_COLUMNS)
