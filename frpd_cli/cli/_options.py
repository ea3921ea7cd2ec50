"""Options shared by several commands, and loading what they name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..exceptions import InputError
from ._errors import echo_err

if TYPE_CHECKING:  # annotations only
    from ..dataset import TrainingSet
    from ..schema import SchemaSpec

# Every command imports this module for its option declarations, so the numerical modules it loads data
# with are imported inside the functions that need them (start-up time).

__all__ = [
    "DataArg", "ModelOpt", "SchemaOpt", "TargetOpt", "FavorableOpt", "ImmutableOpt", "IncreasingOpt",
    "DecreasingOpt", "CategoricalOpt", "ContinuousOpt", "IdColumnOpt", "SeedOpt", "ThresholdOpt", "EncodingOpt",
    "MethodOpt", "KOpt", "ThetaOpt", "BandwidthOpt", "CandidatesOpt", "FormatOpt", "OutputOpt", "JobsOpt",
    "GraphOpt", "EndpointOpt", "MaxHopsOpt", "MaxCostOpt", "PolicyOpt", "DropMissingOpt", "TrustTypeOpt",
    "PoolOpt", "SchemaFlags", "load_training", "read_applicants",
]

_DATA = "Data and schema"
_SEL = "Selection"
_OUT = "Output"
_GRAPH = "Graph (sequential recourse)"

DataArg = Annotated[Path, typer.Argument(help="Training CSV (header row; features and the target column).",
                                         show_default=False)]
ModelOpt = Annotated[Path, typer.Option("--model", help="Trusted model file (.pkl/.joblib run code when loaded; "
                                        ".skops with a trusted-type list).", show_default=False,
                                        rich_help_panel=_DATA)]
SchemaOpt = Annotated[Optional[Path], typer.Option("--schema", help="Schema TOML file (feature roles, target, "
                                                   "favourable class). Flags override it.", rich_help_panel=_DATA)]
TargetOpt = Annotated[Optional[str], typer.Option("--target", help="Target column [default: label].",
                                                  rich_help_panel=_DATA)]
FavorableOpt = Annotated[Optional[str], typer.Option("--favorable", help="Favourable class of the target "
                                                     "[default: 1].", rich_help_panel=_DATA)]
ImmutableOpt = Annotated[Optional[list[str]], typer.Option("--immutable", help="Feature that must not change "
                                                           "(repeatable).", rich_help_panel=_DATA)]
IncreasingOpt = Annotated[Optional[list[str]], typer.Option("--increasing", help="Feature that may only increase "
                                                            "(repeatable; ordinal categoricals need a declared "
                                                            "order).", rich_help_panel=_DATA)]
DecreasingOpt = Annotated[Optional[list[str]], typer.Option("--decreasing", help="Feature that may only decrease "
                                                            "(repeatable).", rich_help_panel=_DATA)]
CategoricalOpt = Annotated[Optional[list[str]], typer.Option("--categorical", help="Treat a column as categorical "
                                                             "(repeatable).", rich_help_panel=_DATA)]
ContinuousOpt = Annotated[Optional[list[str]], typer.Option("--continuous", help="Treat a column as continuous "
                                                            "(repeatable).", rich_help_panel=_DATA)]
IdColumnOpt = Annotated[Optional[str], typer.Option("--id-column", help="Applicants' identifier column (kept in "
                                                    "the output) [default: row number].", rich_help_panel=_DATA)]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of every random choice; same inputs and seed give "
                                      "byte-identical outputs.", rich_help_panel=_DATA)]
ThresholdOpt = Annotated[float, typer.Option("--threshold", min=0.0, max=1.0,
                                             help="Favourable when the model's probability is >= this.",
                                             rich_help_panel=_DATA)]
EncodingOpt = Annotated[str, typer.Option("--encoding", help="Text encoding of the CSV files.",
                                          rich_help_panel=_DATA)]
MethodOpt = Annotated[str, typer.Option("--method", help="quad, quad-dp, quad-greedy, dpp-greedy, dpp-ls, "
                                        "nearest, exact (face with --graph).", rich_help_panel=_SEL)]
KOpt = Annotated[int, typer.Option("-k", "--k", min=1, help="Recourses per plan.", rich_help_panel=_SEL)]
ThetaOpt = Annotated[float, typer.Option("--theta", min=0.0, max=1.0, help="Diversity weight (0: nearest, "
                                         "1: most diverse).", rich_help_panel=_SEL)]
BandwidthOpt = Annotated[float, typer.Option("--bandwidth",
                                             help="DPP proximity bandwidth h.", rich_help_panel=_SEL)]
CandidatesOpt = Annotated[str, typer.Option("--candidates", help="Prototype pool: rows the model predicts "
                                            "favourable (predicted) or labelled favourable and predicted so "
                                            "(labeled).", rich_help_panel=_SEL)]
FormatOpt = Annotated[Optional[str], typer.Option("--format", help="table, csv, json or jsonl [default: table on "
                                                  "a terminal, csv otherwise].", rich_help_panel=_OUT)]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the data to this file "
                                                   "(atomically) instead of stdout.", rich_help_panel=_OUT)]
JobsOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Worker processes; results do not depend "
                                      "on it.", rich_help_panel=_OUT)]
TrustTypeOpt = Annotated[Optional[list[str]], typer.Option("--trust-type", help="For .skops models: a type to "
                                                           "trust besides the built-in scikit-learn list "
                                                           "(repeatable; e.g. mypackage.MyTransformer).",
                                                           rich_help_panel=_DATA)]
PolicyOpt = Annotated[str, typer.Option("--immutable-policy", help="filter: prototypes are favourable rows that "
                                         "already share the applicant's immutable values; project: also favourable "
                                         "rows moved onto them and re-predicted (marked projected). Graph plans "
                                         "always keep the strict edge rules.", rich_help_panel=_SEL)]
DropMissingOpt = Annotated[bool, typer.Option("--drop-missing", help="Report applicants with missing feature values "
                                              "as invalid-input instead of refusing the file.",
                                              rich_help_panel=_DATA)]
PoolOpt = Annotated[Optional[Path], typer.Option("--pool", help="Training pool folder from build-pool (same data, "
                                                "model, schema flags and threshold): skips encoding and scoring the "
                                                "training rows; results are identical.", rich_help_panel=_DATA)]
GraphOpt = Annotated[Optional[Path], typer.Option("--graph", help="Actionability graph folder from build-graph: "
                                                 "recourses become shortest paths on it (sequential recourse), "
                                                 "prototypes are chosen among the favourable rows it reaches.",
                                                 rich_help_panel=_GRAPH)]
EndpointOpt = Annotated[str, typer.Option("--endpoint", help="Where a graph recourse ends: prototype (the chosen "
                                          "row; keeps the plan's diversity) or first-favorable (the first node of "
                                          "the path the model accepts; cheaper, but paths that share it collapse).",
                                          rich_help_panel=_GRAPH)]
MaxHopsOpt = Annotated[Optional[int], typer.Option("--max-hops", min=1, help="Only prototypes at most this many "
                                                   "moves away (along the shortest path).", rich_help_panel=_GRAPH)]
MaxCostOpt = Annotated[Optional[float], typer.Option("--max-cost", help="Only prototypes "
                                                     "whose shortest path costs at most this (Dijkstra stops "
                                                     "there).", rich_help_panel=_GRAPH)]


@dataclass(frozen=True)
class SchemaFlags:
    """The schema-related flags of a command."""

    schema: Optional[Path] = None
    target: Optional[str] = None
    favorable: Optional[str] = None
    immutable: Optional[list] = None
    increasing: Optional[list] = None
    decreasing: Optional[list] = None
    categorical: Optional[list] = None
    continuous: Optional[list] = None
    id_column: Optional[str] = None

    def spec(self) -> SchemaSpec:
        from ..dataset import resolve_spec
        from ..schema import SchemaSpec

        flags = SchemaSpec(
            target=self.target, favorable=self.favorable, id_column=self.id_column,
            immutable=tuple(self.immutable or ()), increasing=tuple(self.increasing or ()),
            decreasing=tuple(self.decreasing or ()), categorical=tuple(self.categorical or ()),
            continuous=tuple(self.continuous or ()),
        )
        return resolve_spec(self.schema, flags)


def load_training(data: Path, model_path: Path, flags: SchemaFlags, *, threshold: float = 0.5,
                  encoding: str = "utf-8", trusted_types=None, pool: Path | None = None):
    """Read the training CSV, infer the schema, load and check the model, score the rows.

    With ``pool`` (a folder from ``frpd build-pool``) the encoded rows and their scores are read from it,
    after checking it was built from these inputs, instead of being computed.

    Returns
    -------
    training : TrainingSet
    model : Model
    spec : SchemaSpec
    """
    from ..dataset import build_training_set, read_training_frame
    from ..model import load_model
    from ..schema import infer_schema

    spec = flags.spec()
    frame = read_training_frame(data, encoding=encoding)
    schema = infer_schema(frame, spec, source=f"'{data}'")
    model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names,
                       threshold=threshold, trusted_types=trusted_types or None)
    if pool is not None:
        from ..pool import load_pool

        training = load_pool(pool, frame, schema, data=data, model=model_path, threshold=threshold,
                             encoding=encoding, source=f"'{data}'")
    else:
        training = build_training_set(frame, schema, model, source=f"'{data}'")
    return training, model, spec


def read_applicants(path: Path, training: TrainingSet, id_column: str | None, *, encoding: str = "utf-8"):
    """Read and validate a whole applicants file; return the raw feature rows and the applicant ids.

    Ids are the id column's values, or 0-based row numbers without one. Columns that are neither
    features nor the id column are ignored with a warning.
    """
    import pandas as pd

    from ..applicants import ApplicantFile, normalise_types

    source = ApplicantFile(path, training.encoder, id_column=id_column, encoding=encoding)
    scan = source.scan()
    if scan.extra_columns:
        echo_err(f"Warning: ignoring column(s) {', '.join(scan.extra_columns)} of '{path}' (not features).")
    chunks = list(source.chunks(max(scan.n_rows, 1)))
    frame = pd.concat([c.frame for c in chunks], ignore_index=True)
    ids = [a for c in chunks for a in c.ids]
    if len(set(ids)) != len(ids):
        seen: dict = {}
        for row, a in enumerate(ids):
            seen.setdefault(a, []).append(row + 1)
        a, rows = next((a, rows) for a, rows in seen.items() if len(rows) > 1)
        raise InputError(
            f"Applicant id {a!r} appears {len(rows)} times in '{path}' (data rows {', '.join(map(str, rows[:5]))}); "
            f"ids must be unique here. Pass --id-column with a column of unique values."
        )
    return normalise_types(training.encoder, frame), ids
