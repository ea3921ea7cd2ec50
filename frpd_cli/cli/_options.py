"""Options shared by several commands, and loading what they name."""

from __future__ import annotations

import codecs
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Optional

import typer

from ._errors import echo_err
from ._groups import OptionGroup

if TYPE_CHECKING:  # annotations only
    from ..dataset import TrainingSet
    from ..schema import SchemaSpec

# Every command imports this module for its option declarations, so the numerical modules it loads data
# with are imported inside the functions that need them (start-up time).

__all__ = [
    "MaxMoveOpt", "declared_only",
    "DataArg", "ModelOpt", "SchemaOpt", "TargetOpt", "FavorableOpt", "ImmutableOpt", "IncreasingOpt",
    "DecreasingOpt", "CategoricalOpt", "ContinuousOpt", "IdColumnOpt", "SeedOpt", "ThresholdOpt", "EncodingOpt",
    "MaxCandidatesOpt", "MethodOpt", "KOpt", "ThetaOpt", "BandwidthOpt", "CandidatesOpt", "FormatOpt", "PlanFormatOpt",
    "OutputOpt", "JobsOpt",
    "GraphOpt", "EndpointOpt", "MaxHopsOpt", "MaxCostOpt", "PolicyOpt", "DropMissingOpt", "TrustTypeOpt",
    "SchemaFlags", "SCHEMA_OPTIONS", "load_training", "read_applicants", "BackendOpt", "TolOpt", "SchemeOpt", "ThetaListOpt",
    "ManifoldOpt", "WeightOpt", "ScaleOpt", "SCALES", "RadiusOpt", "MaxStepOpt", "KdeBandwidthOpt", "OptionalThresholdOpt",
    "OptionalEndpointOpt", "WEIGHTS", "PoolOpt",
    "LayoutOpt", "QuietOpt", "ExplainOpt", "LAYOUTS", "read_training", "check_id_column",
    "VaryOpt", "RangeOpt", "FeatureWeightOpt", "GraphFeatureWeightOpt", "parse_assignments",
    "MarginOpt", "SparsifyOpt", "DirectSearchOpt", "MaxChangesOpt", "check_margin_options", "resolve_margin",
    "ProximityOpt", "PROXIMITIES", "check_proximity",
    "SCHEMA_PANEL", "TUNING_PANEL", "GRAPH_PANEL", "INPUT_PANEL", "RUNS_PANEL",
]

# The allowed values of choice options. Every command imports this module for its option declarations, so
# these are spelled out here instead of imported from the numerical modules (start-up time);
# tests/test_startup.py checks that they equal the library's own constants.
BACKENDS = ("loky", "dask")
PLAN_METHODS = ("quad", "quad-dp", "quad-greedy", "dpp-greedy", "dpp-ls", "nearest", "exact", "quad-paper",
                "quad-dp-paper", "face")
SCHEMES = ("linear", "graph")
CANDIDATE_POOLS = ("predicted", "labeled")
MANIFOLDS = ("favorable", "labeled", "all")
ENDPOINTS = ("prototype", "first-favorable")
IMMUTABLE_POLICIES = ("filter", "project", "auto")
FORMATS = ("table", "csv", "json", "jsonl")
PLAN_FORMATS = (*FORMATS, "text")   # plan, interpolate: also each plan in plain words
LAYOUTS = ("auto", "wide", "long")
PROXIMITIES = ("distance", "recourse")

#: How a move is priced (``frpd_cli.encoding.SCALES``; not imported here: the encoder pulls pandas in).
SCALES = ("effort", "minmax")

#: Edge weights of build-graph.
WEIGHTS = ("euclidean", "density")


def _choices(values) -> object:
    """A Literal type of the allowed values: typer checks it (exit 2) and lists the values in --help."""
    return Literal[tuple(values)]


def _positive(name: str):
    """A callback: the value (when given) must be a finite number > 0."""

    def check(value):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise typer.BadParameter(f"The '{name}' option must be a finite number > 0. Got {value!r} instead.")
        return value

    return check


def _open_unit(name: str):
    """A callback: the value (when given) must be in the open interval (0, 1)."""

    def check(value):
        if value is not None and not (0.0 < value < 1.0):
            raise typer.BadParameter(f"The '{name}' option must be a number in the open interval (0, 1). "
                                     f"Got {value!r} instead.")
        return value

    return check


def _check_margin(value):
    if value is not None and not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise typer.BadParameter(f"The 'margin' option must be a number in [0, 1) (probability points above "
                                 f"--threshold). Got {value!r} instead.")
    return value


def _check_encoding(value: str) -> str:
    try:
        codecs.lookup(value)
    except LookupError:
        raise typer.BadParameter(f"Unknown text encoding {value!r}; pass a Python codec name such as utf-8, "
                                 "latin-1 or cp1252.") from None
    return value


def _check_theta_list(value: str) -> str:
    parts = [p.strip() for p in str(value).split(",")]
    try:
        thetas = [float(p) for p in parts]
    except ValueError:
        thetas = []
    if not thetas or not all(0.0 <= t <= 1.0 for t in thetas):
        raise typer.BadParameter(f"The 'theta' option must be a number or a comma list of numbers in [0, 1] "
                                 f"(e.g. 0.1,0.5,0.9). Got {value!r} instead.")
    return value


def _split_assignment(option: str, text: str) -> tuple[str, str]:
    name, sep, value = str(text).partition("=")
    if not sep or not name.strip() or not value.strip():
        example = "age=18:65" if option == "--range" else "duration=2"
        raise typer.BadParameter(f"The '{option}' option takes COLUMN=VALUE (e.g. {option} {example}). "
                                 f"Got {text!r} instead.")
    return name.strip(), value.strip()


def _check_ranges(values):
    """A callback: every --range is COL=LO:HI (numbers, LO <= HI, one side may be open) or COL=a,b,c."""
    seen = set()
    for text in values or ():
        name, value = _split_assignment("--range", text)
        if name in seen:
            raise typer.BadParameter(f"Column '{name}' has two --range options; give one.")
        seen.add(name)
        from ..schema import Feature, SchemaError, is_relative_range, parse_range

        if is_relative_range(value):           # relative to the applicant: +0:+12, -20%:+10%
            try:
                parse_range(Feature(name, "continuous"), value)
            except SchemaError as exc:
                raise typer.BadParameter(str(exc)) from None
        elif ":" in value:
            parts = [p.strip() for p in value.split(":")]
            try:
                bounds = [None if p == "" else float(p) for p in parts]
            except ValueError:
                bounds = []
            if (len(bounds) != 2 or bounds == [None, None]
                    or any(b is not None and not math.isfinite(b) for b in bounds)
                    or (None not in bounds and bounds[0] > bounds[1])):
                raise typer.BadParameter(f"The '--range' option takes COLUMN=LO:HI with finite numbers LO <= HI "
                                         f"(open ends LO: and :HI allowed), or COLUMN=a,b,c for categorical levels. "
                                         f"Got {text!r} instead.")
    return values


def _check_max_moves(values):
    """A callback: every --max-move is SHARE, none, COL=SHARE or COL=none (SHARE in (0, 1]); one global value."""
    from ..schema import SchemaError, parse_max_move

    seen = set()
    for text in values or ():
        name, sep, value = str(text).partition("=")
        name, value = (name.strip(), value.strip()) if sep else ("", name.strip())
        if name in seen:
            raise typer.BadParameter(f"{'Column ' + repr(name) if name else 'The default'} has two --max-move "
                                     "options; give one.")
        seen.add(name)
        try:
            parse_max_move(value, name or None)
        except SchemaError as exc:
            raise typer.BadParameter(str(exc)) from None
    return values


def _max_moves(values) -> tuple:
    """``--max-move`` values -> (the default share or None, {column: share}); ``none`` is ``math.inf``."""
    from ..schema import parse_max_move

    default, per = None, {}
    for text in values or ():
        name, sep, value = str(text).partition("=")
        if sep:
            per[name.strip()] = parse_max_move(value.strip(), name.strip())
        else:
            default = parse_max_move(name.strip())
    return default, per


def _check_weights(values):
    """A callback: every --weight is COL=W with W a finite number in (0, 1e6]."""
    seen = set()
    for text in values or ():
        name, value = _split_assignment("--weight", text)
        if name in seen:
            raise typer.BadParameter(f"Column '{name}' has two --weight options; give one.")
        seen.add(name)
        try:
            weight = float(value)
        except ValueError:
            weight = float("nan")
        if not (math.isfinite(weight) and 0 < weight <= 1e6):
            raise typer.BadParameter(f"The '--weight' option takes COLUMN=W with W a number > 0 and at most 1e6 "
                                     f"(1 is the default cost weight). Got {text!r} instead.")
    return values


def parse_assignments(values) -> dict:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}`` (values already checked by the option's callback)."""
    return {k.strip(): v.strip() for k, v in (str(t).split("=", 1) for t in values or ())}


# Help panels. Options without a panel are the everyday ones, listed first ("Options"); the others follow in the
# order a command first names one of them.
SCHEMA_PANEL = "Schema flags (instead of, or on top of, --schema)"
TUNING_PANEL = "Recourse tuning"
GRAPH_PANEL = "Graph (sequential recourse)"
INPUT_PANEL = "Input files"
RUNS_PANEL = "Large runs"

DataArg = Annotated[Path, typer.Argument(help="Training CSV (header row; features and the target column).", readable=False,
                                         show_default=False)]
ModelOpt = Annotated[Path, typer.Option("--model", readable=False, help="Trusted model file (.pkl/.joblib run code when loaded; "
                                        ".skops with a trusted-type list; .onnx, extra 'onnx', runs no code).",
                                        show_default=False)]
SchemaOpt = Annotated[Optional[Path], typer.Option("--schema", readable=False, help="Schema TOML file (feature roles, target, "
                                                   "favourable class, limits; frpd schema writes one). Flags "
                                                   "override it.")]
TargetOpt = Annotated[Optional[str], typer.Option("--target", help="Target column.", show_default="label",
                                                  rich_help_panel=SCHEMA_PANEL)]
FavorableOpt = Annotated[Optional[str], typer.Option("--favorable", help="Favourable class of the target.",
                                                     show_default="1", rich_help_panel=SCHEMA_PANEL)]
ImmutableOpt = Annotated[Optional[list[str]], typer.Option("--immutable", metavar="COL", help="Feature that must not "
                                                           "change (repeatable).", rich_help_panel=SCHEMA_PANEL)]
IncreasingOpt = Annotated[Optional[list[str]], typer.Option("--increasing", metavar="COL", help="Feature that may only "
                                                            "increase (repeatable; ordinal categoricals need a declared "
                                                            "order).", rich_help_panel=SCHEMA_PANEL)]
DecreasingOpt = Annotated[Optional[list[str]], typer.Option("--decreasing", metavar="COL", help="Feature that may only "
                                                            "decrease (repeatable).", rich_help_panel=SCHEMA_PANEL)]
CategoricalOpt = Annotated[Optional[list[str]], typer.Option("--categorical", metavar="COL", help="Treat a column as "
                                                             "categorical (repeatable).", rich_help_panel=SCHEMA_PANEL)]
ContinuousOpt = Annotated[Optional[list[str]], typer.Option("--continuous", metavar="COL", help="Treat a column as "
                                                            "continuous (repeatable).", rich_help_panel=SCHEMA_PANEL)]
IdColumnOpt = Annotated[Optional[str], typer.Option("--id-column", metavar="COL", help="Applicants' identifier column "
                                                    "(kept in the output, not a feature).",
                                                    show_default="row number")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of every random choice; same inputs and seed give "
                                      "byte-identical outputs.")]
ThresholdOpt = Annotated[float, typer.Option("--threshold", callback=_open_unit("threshold"),
                                             help="Favourable when the model's probability is >= this "
                                             "(in (0, 1)).")]
OptionalThresholdOpt = Annotated[Optional[float], typer.Option("--threshold", callback=_open_unit("threshold"),
                                                               help="Favourable threshold in (0, 1).",
                                                               show_default="the selection's")]
EncodingOpt = Annotated[str, typer.Option("--encoding", callback=_check_encoding,
                                          help="Text encoding of the CSV files.", rich_help_panel=INPUT_PANEL)]
MethodOpt = Annotated[_choices(PLAN_METHODS), typer.Option("--method", case_sensitive=False,
                                                          help="How the K prototypes are chosen: quad is the "
                                                          "paper's; *-paper: its plain QUAD procedures; face needs "
                                                          "--graph.")]
KOpt = Annotated[int, typer.Option("-k", "--k", min=1, help="Recourses per plan.")]
ThetaOpt = Annotated[float, typer.Option("--theta", min=0.0, max=1.0, help="Diversity weight (0: nearest, "
                                         "1: most diverse).")]
BandwidthOpt = Annotated[float, typer.Option("--bandwidth", callback=_positive("bandwidth"),
                                             help="DPP proximity bandwidth h (> 0).", rich_help_panel=TUNING_PANEL)]
CandidatesOpt = Annotated[_choices(CANDIDATE_POOLS), typer.Option("--candidates", case_sensitive=False,
                                                                  help="Prototype pool: rows the model predicts "
                                            "favourable (predicted) or labelled favourable and predicted so "
                                            "(labeled).", rich_help_panel=TUNING_PANEL)]
FormatOpt = Annotated[Optional[_choices(FORMATS)], typer.Option("--format", case_sensitive=False,
                                                                help="table, csv, json or jsonl.",
                                                                show_default="table on a terminal, csv otherwise")]
PlanFormatOpt = Annotated[Optional[_choices(PLAN_FORMATS)], typer.Option(
    "--format", case_sensitive=False, help="table, csv, json, jsonl, or text (each plan in plain words, for the "
    "applicant).", show_default="table on a terminal, csv otherwise")]
LayoutOpt = Annotated[_choices(LAYOUTS), typer.Option("--layout", case_sensitive=False,
                                                      help="Table format: wide (a column per changed feature), "
                                                      "long (a block per recourse, one change per line) or auto "
                                                      "(wide when it fits the terminal width, COLUMNS "
                                                      "respected).")]
ExplainOpt = Annotated[bool, typer.Option("--explain", help="Tables: each plan's reason whole (why it is empty or "
                                          "partial), not only its first clause; csv, json and jsonl always hold it "
                                          "whole.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No summary line and no progress bar on stderr "
                                        "(warnings, hints and errors still show).")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", readable=False, help="Write the data to this file "
                                                   "(atomically) instead of stdout.", show_default="stdout")]
ProvenanceOpt = Annotated[Optional[Path], typer.Option("--provenance", readable=False, help="Also write a JSON document tying the "
                                                       "plans to what made them: the sha256 of every input and of "
                                                       "the plans, the settings and the frpd version.",
                                                       rich_help_panel=RUNS_PANEL)]
JobsOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Worker processes; results do not depend "
                                      "on it.")]
TrustTypeOpt = Annotated[Optional[list[str]], typer.Option("--trust-type", metavar="TYPE", help="For .skops models: a "
                                                           "type to trust besides the built-in scikit-learn list "
                                                           "(repeatable; e.g. mypackage.Scaler).",
                                                           rich_help_panel=INPUT_PANEL)]
PolicyOpt = Annotated[_choices(IMMUTABLE_POLICIES), typer.Option("--immutable-policy", case_sensitive=False,
                                                                 help="filter: prototypes share the applicant's "
                                         "immutable values; project: favourable rows are also moved onto them and "
                                         "re-predicted (marked projected); auto: filter on categorical immutables, "
                                         "project on numeric ones. Not for graph plans.", rich_help_panel=TUNING_PANEL)]
VaryOpt = Annotated[Optional[list[str]], typer.Option("--vary", metavar="COL", help="Only these features may change "
                                                      "(repeatable); every other feature becomes immutable.",
                                                      rich_help_panel=SCHEMA_PANEL)]
RangeOpt = Annotated[Optional[list[str]], typer.Option("--range", callback=_check_ranges, metavar="COL=RANGE",
                                                       help="COL=LO:HI (numeric; LO: or :HI leave a side open), "
                                                       "COL=-DOWN:+UP relative to the applicant's value (+0:+12: at "
                                                       "most 12 more, never less; -20%:+10%: in percent of it) or "
                                                       "COL=a,b,c (categorical levels): a recourse never moves the "
                                                       "feature outside (repeatable).", rich_help_panel=SCHEMA_PANEL)]
FeatureWeightOpt = Annotated[Optional[list[str]], typer.Option("--weight", "--feature-weight",
                                                               callback=_check_weights, metavar="COL=W",
                                                               help="COL=W: cost weight W > 0 of a feature in every "
                                                               "distance (selection, interpolation, graph, reported "
                                                               "cost; default 1; repeatable).",
                                                               rich_help_panel=SCHEMA_PANEL)]
MaxMoveOpt = Annotated[Optional[list[str]], typer.Option("--max-move", callback=_check_max_moves,
                                                         metavar="SHARE|COL=SHARE",
                                                         help="The most a recourse moves a numeric feature away "
                                                         "from the applicant's value, either way, as a share of its "
                                                         "training range (at most twice the range of its central "
                                                         "99%: outliers do not widen it; an ordinal: of the steps between its "
                                                         "levels, rounded up to whole levels, at least one; "
                                                         "default 0.25 unless the schema file "
                                                         "declares max_move; none: no bound). COL=SHARE or COL=none "
                                                         "for one feature (repeatable). An applicant whose "
                                                         "prototypes all lie farther gets a partial or empty plan "
                                                         "whose reason names the bound.", rich_help_panel=SCHEMA_PANEL)]
GraphFeatureWeightOpt = Annotated[Optional[list[str]], typer.Option("--feature-weight", callback=_check_weights, metavar="COL=W",
                                                                    help="COL=W: cost weight W > 0 of a feature in "
                                                                    "every distance, edge lengths included (default "
                                                                    "1; repeatable; --weight is the edge weight "
                                                                    "here).", rich_help_panel=SCHEMA_PANEL)]
DropMissingOpt = Annotated[bool, typer.Option("--drop-missing", help="Report applicants with missing feature values "
                                              "as invalid-input instead of refusing the file.",
                                              rich_help_panel=INPUT_PANEL)]
PoolOpt = Annotated[Optional[Path], typer.Option("--pool", readable=False, help="Training pool folder from build-pool (same data, "
                                                "model, schema flags and threshold): skips encoding and scoring the "
                                                "training rows; results are identical.", rich_help_panel=RUNS_PANEL)]
GraphOpt = Annotated[Optional[Path], typer.Option("--graph", readable=False, help="Actionability graph folder from build-graph: "
                                                 "recourses become shortest paths on it (sequential recourse), "
                                                 "prototypes are chosen among the favourable rows it reaches.",
                                                 rich_help_panel=GRAPH_PANEL)]
EndpointOpt = Annotated[_choices(ENDPOINTS), typer.Option("--endpoint", case_sensitive=False,
                                                          help="Where a graph recourse ends: prototype (the chosen "
                                          "row; keeps the plan's diversity) or first-favorable (the first node of "
                                          "the path the model accepts; cheaper, but paths that share it collapse).",
                                          rich_help_panel=GRAPH_PANEL)]
MaxHopsOpt = Annotated[Optional[int], typer.Option("--max-hops", min=1, help="Only prototypes at most this many "
                                                   "moves away (along the shortest path).", show_default="no limit",
                                                   rich_help_panel=GRAPH_PANEL)]
MaxCostOpt = Annotated[Optional[float], typer.Option("--max-cost", callback=_positive("max-cost"),
                                                     help="Only prototypes "
                                                     "whose shortest path costs at most this (Dijkstra stops "
                                                     "there).", show_default="no limit", rich_help_panel=GRAPH_PANEL)]

MarginOpt = Annotated[Optional[float], typer.Option("--margin", callback=_check_margin,
                                                    help="Probability points above --threshold every recourse "
                                                    "must reach (0: the paper's, on the model's boundary).",
                                                    show_default="0.05, or half the room above a --threshold of "
                                                    "0.95 or more", rich_help_panel=TUNING_PANEL)]
SparsifyOpt = Annotated[bool, typer.Option("--sparsify/--no-sparsify",
                                           help="Linear recourses change only the features the model needs "
                                           "(never more cost); --no-sparsify: the paper's plain interpolation.",
                                           rich_help_panel=TUNING_PANEL)]
DirectSearchOpt = Annotated[bool, typer.Option("--direct-search/--no-direct-search",
                                               help="Linear scheme: an applicant no training row within the rules "
                                               "gives a recourse gets the changes a search from its own row finds "
                                               "(single changes, then pairs, then more); --no-direct-search: "
                                               "leave it infeasible.", rich_help_panel=TUNING_PANEL)]
MaxCandidatesOpt = Annotated[Optional[int], typer.Option(
    "--max-candidates", min=1, help="Linear scheme: search only the N candidates nearest to each applicant: the "
    "selection's cost per applicant stops growing with the training set. "
    "Applicants with at most N candidates get the same plans as without it; the others' may differ.",
    show_default="all", rich_help_panel=TUNING_PANEL)]
MaxChangesOpt = Annotated[Optional[int], typer.Option("--max-changes", min=1,
                                                      help="Linear recourses: at most this many changed "
                                                      "features; a longer recourse is sparsified further (then "
                                                      "it may cost more) or dropped, with a reason.",
                                                      show_default="no limit", rich_help_panel=TUNING_PANEL)]
ProximityOpt = Annotated[_choices(PROXIMITIES), typer.Option("--proximity", case_sensitive=False,
                                                             help="How selection prices a candidate prototype: "
                                                             "distance (the paper's) or recourse (the cost of the "
                                                             "recourse it leads to: cheaper plans, at most 8 model "
                                                             "rows per candidate). Not with --graph.",
                                                             rich_help_panel=TUNING_PANEL)]

OptionalEndpointOpt = Annotated[Optional[_choices(ENDPOINTS)],
                                typer.Option("--endpoint", case_sensitive=False,
                                             help="Graph scheme: prototype or first-favorable.",
                                             show_default="the selection's", rich_help_panel=GRAPH_PANEL)]
BackendOpt = Annotated[_choices(BACKENDS), typer.Option("--backend", case_sensitive=False,
                                                        help=f"Where chunks run: {', '.join(BACKENDS)} (loky: "
                                                        "local processes; dask: a Dask cluster, extra 'dask').",
                                                        rich_help_panel=RUNS_PANEL)]
TolOpt = Annotated[float, typer.Option("--tol", callback=_open_unit("tol"),
                                       help="Interpolation tolerance, as a fraction of each segment (in (0, 1)).",
                                       rich_help_panel=TUNING_PANEL)]
SchemeOpt = Annotated[_choices(SCHEMES), typer.Option("--scheme", case_sensitive=False,
                                                      help="linear, or graph (shortest paths on the graph the "
                                                      "selection was made on; needs --graph).")]
ThetaListOpt = Annotated[str, typer.Option("--theta", callback=_check_theta_list,
                                           help="Diversity weight in [0, 1], or a comma list (e.g. 0.1,0.5,0.9): "
                                           "the geometry is computed once per applicant.")]
ManifoldOpt = Annotated[_choices(MANIFOLDS), typer.Option("--manifold", case_sensitive=False,
                                                          help="Training rows that stand for the data manifold: "
                                                          "favorable (predicted), labeled or all.")]
ScaleOpt = Annotated[_choices(SCALES), typer.Option("--scale", case_sensitive=False,
                                                    help="How a move is priced: effort (the share of the training "
                                                    "population it crosses, so moves to a feature's extremes cost "
                                                    "much) or minmax (min-max scaled, as in the paper).",
                                                    rich_help_panel=SCHEMA_PANEL)]
WeightOpt = Annotated[_choices(WEIGHTS), typer.Option("--weight", case_sensitive=False,
                                                      help="Edge weight: euclidean (length in the encoded space) "
                                                      "or density (FACE: length / kernel density at the "
                                                      "midpoint).", rich_help_panel="Graph")]
RadiusOpt = Annotated[Optional[float], typer.Option("--radius", callback=_positive("radius"),
                                                    help="Instead of --neighbors: edges to every actionable row "
                                                    "within this Euclidean distance.", rich_help_panel="Graph")]
MaxStepOpt = Annotated[Optional[float], typer.Option("--max-step", callback=_positive("max-step"),
                                                     help="Drop edges longer than this.", show_default="no limit",
                                                     rich_help_panel="Graph")]
KdeBandwidthOpt = Annotated[Optional[float], typer.Option("--kde-bandwidth", callback=_positive("kde-bandwidth"),
                                                          help="Kernel bandwidth of --weight density.",
                                                          show_default="median edge length", rich_help_panel="Graph")]


def resolve_margin(margin: float | None, threshold: float) -> float:
    """``--margin`` as given, or its default for ``threshold`` (:func:`frpd_cli.choice.default_margin`)."""
    from ..choice import default_margin

    return default_margin(threshold) if margin is None else float(margin)


def check_margin_options(threshold: float, margin: float, max_changes: int | None, *, graph: bool) -> None:
    """Usage errors of --margin and --max-changes (exit 2)."""
    from ..exceptions import OptionError

    if threshold + margin >= 1.0:
        raise OptionError("--margin", f"--threshold plus --margin must be below 1 (no probability can reach it). "
                          f"Got {threshold:g} + {margin:g}; choose a smaller --margin.")
    if max_changes is not None and graph:
        raise OptionError("--max-changes", "--max-changes applies to linear recourses; graph recourses keep "
                          "their paths. Leave out --graph, or --max-changes.")


def check_proximity(proximity: str, *, graph: bool) -> None:
    """Usage error of --proximity (exit 2): the recourse proximity is for linear recourses."""
    from ..exceptions import OptionError

    if proximity == "recourse" and graph:
        raise OptionError("--proximity", "--proximity recourse prices linear recourses; with --graph every "
                          "prototype is priced by its path cost already. Leave out --graph, or --proximity recourse.")


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
    vary: Optional[list] = None
    ranges: Optional[list] = None
    weights: Optional[list] = None
    max_moves: Optional[list] = None
    scale: str = "effort"
    #: whether the built-in move bound applies when no flag or file declares one (planning commands; evaluate
    #: and audit check only declared constraints: :func:`declared_only`)
    default_max_move: ClassVar[bool] = True

    def spec(self) -> SchemaSpec:
        from ..dataset import resolve_spec
        from ..schema import SchemaSpec

        flags = SchemaSpec(
            target=self.target, favorable=self.favorable, id_column=self.id_column,
            immutable=tuple(self.immutable or ()), increasing=tuple(self.increasing or ()),
            decreasing=tuple(self.decreasing or ()), categorical=tuple(self.categorical or ()),
            continuous=tuple(self.continuous or ()), vary=tuple(self.vary or ()),
            ranges=parse_assignments(self.ranges), weights=_weights(self.weights),
            max_move=_max_moves(self.max_moves)[0], max_moves=_max_moves(self.max_moves)[1],
        )
        from dataclasses import replace

        from ..schema import DEFAULT_MAX_MOVE

        spec = resolve_spec(self.schema, flags)
        if not self.default_max_move:
            return spec
        # frpd's planning commands keep recourses off levels of missing information, and bound every move unless
        # the flags or the schema file say otherwise
        spec = replace(spec, withhold_missing=True)
        if spec.max_move is not None:
            return spec
        return replace(spec, max_move=DEFAULT_MAX_MOVE)

    def usage_error(self, exc):
        """An :class:`OptionError` (exit 2) for a declaration error caused by these flags, else None.

        A :class:`~frpd_cli.schema.DeclarationError` is a usage error when the column it names was given with
        the flag it names (``--immutable agee``); the same column from the schema file stays an input error.
        """
        from ..exceptions import OptionError
        from ..schema import DeclarationError

        if not isinstance(exc, DeclarationError):
            return None
        option, column = exc.option, exc.column
        given = {"--range": parse_assignments(self.ranges), "--weight": _weights(self.weights),
                 "--vary": dict.fromkeys(self.vary or ()), "--max-move": _max_moves(self.max_moves)[1],
                 "--immutable": dict.fromkeys(self.immutable or ()),
                 "--increasing": dict.fromkeys(self.increasing or ()),
                 "--decreasing": dict.fromkeys(self.decreasing or ()),
                 "--categorical": dict.fromkeys(self.categorical or ()),
                 "--continuous": dict.fromkeys(self.continuous or ()),
                 "--target": dict.fromkeys(() if self.target is None else (self.target,)),
                 "--id-column": dict.fromkeys(() if self.id_column is None else (self.id_column,)),
                 }.get(option, {})
        if option == "--vary" and self.vary:
            return OptionError(option, str(exc))
        if column in given:
            return OptionError(option, str(exc))
        return None


@dataclass(frozen=True)
class _DeclaredSchemaFlags(SchemaFlags):
    default_max_move: ClassVar[bool] = False


def declared_only(flags: SchemaFlags) -> SchemaFlags:
    """The same flags without the built-in move bound: only a bound the flags or the schema file declare."""
    from dataclasses import fields

    return _DeclaredSchemaFlags(**{f.name: getattr(flags, f.name) for f in fields(flags)})


def _weights(values) -> dict:
    return {k: float(v) for k, v in parse_assignments(values).items()}


#: The schema options, declared once: a command takes them as ``flags: SchemaFlags`` decorated with this group
#: (or a part of it: ``SCHEMA_OPTIONS.without("scale")``).
SCHEMA_OPTIONS = OptionGroup(SchemaFlags, (
    ("schema", SchemaOpt, None),
    ("target", TargetOpt, None),
    ("favorable", FavorableOpt, None),
    ("immutable", ImmutableOpt, None),
    ("increasing", IncreasingOpt, None),
    ("decreasing", DecreasingOpt, None),
    ("categorical", CategoricalOpt, None),
    ("continuous", ContinuousOpt, None),
    ("vary", VaryOpt, None),
    ("ranges", RangeOpt, None),
    ("weights", FeatureWeightOpt, None),
    ("max_moves", MaxMoveOpt, None),
    ("scale", ScaleOpt, "effort"),
    ("id_column", IdColumnOpt, None),
))


def load_training(data: Path, model_path: Path, flags: SchemaFlags, *, quiet: bool = False, **options):
    """:func:`read_training` (same arguments and results) with a transient status line on a terminal while it
    runs (none with ``quiet``, or when stderr is not a terminal)."""
    from ._output import busy

    with busy(f"reading '{data}' and scoring its rows with the model", quiet=quiet) as status:
        return read_training(data, model_path, flags, status=status, **options)


def read_training(data: Path, model_path: Path, flags: SchemaFlags, *, threshold: float = 0.5,
                  encoding: str = "utf-8", trusted_types=None, pool: Path | None = None, robust=None,
                  on_frame=None, status=None, stage=None, id_in_data: bool = False):
    """Read the training CSV, infer the schema, load and check the model, score the rows.

    With ``pool`` (a folder from ``frpd build-pool``) the encoded rows and their scores are read from it,
    after checking it was built from these inputs, instead of being computed. With ``robust``
    (:class:`frpd_cli.cli._robust.RobustModels`) the model returned is the judge over every model to satisfy.
    A pool that holds the parsed CSV (:func:`frpd_cli.pool.pool_frame`) spares parsing it; any trouble opening
    the pool and the CSV is parsed, and the pool's own checks report it as before. ``on_frame``, when given, is
    called with the CSV as read (``build-pool`` keeps it in the pool). ``status``, when given, replaces the text
    of a terminal's status line while the model is refitted (``--robust``). ``stage``
    (:class:`frpd_cli.dataset.RowStage`, without ``pool`` or ``robust``): the encoded rows and constraint codes are
    written there block by block and held memory-mapped (``build-pool``). ``id_in_data``: the run reads no applicants file, so an
    ``--id-column`` the data file does not have is warned about (:func:`check_id_column`).

    Returns
    -------
    training : TrainingSet
    model : Model
    spec : SchemaSpec
    """
    from ..dataset import build_training_set, read_training_frame
    from ..model import load_model
    from ..schema import DeclarationError, infer_schema

    if stage is not None and (pool is not None or robust is not None):
        raise ValueError("read_training: a stage is for a training set built from the CSV by the model alone")
    spec = flags.spec()
    artifact, frame, schema, id_like, hinted, from_pool = None, None, None, None, False, False
    if pool is not None:
        from ..exceptions import FrpdError
        from ..pool import POOL_HINT, open_pool, pool_frame, pool_schema, pool_schema_outdated

        try:
            artifact = open_pool(pool, data=data, model=model_path)
            frame = pool_frame(artifact, encoding=encoding)
            from_pool = frame is not None
            schema, id_like = pool_schema(artifact, spec, encoding=encoding)
        except FrpdError:      # reported by load_pool below, after the CSV's, schema's and model's own errors
            artifact, schema, id_like = None, None, None
        hinted = artifact is not None and schema is None and pool_schema_outdated(artifact, spec, encoding=encoding)
        if hinted:
            echo_err(f"Hint: the pool '{pool}' was built by another version of frpd, pandas or numpy, so the schema "
                     f"is inferred from the CSV again ({artifact.params.get('n_rows', '?')} rows); a pool built now "
                     f"keeps it: {POOL_HINT}.")
    if frame is None:
        frame = read_training_frame(data, encoding=encoding)
    if id_in_data:
        check_id_column(flags, frame, data)
    if on_frame is not None:
        on_frame(frame)
    if schema is None:
        try:
            schema = infer_schema(frame, spec, source=f"'{data}'")
        except DeclarationError as exc:
            raise (flags.usage_error(exc) or exc) from None
    model = None
    if artifact is not None and (robust is None or not robust.active):
        # the pool's kept scorer spares loading the model (and importing scikit-learn) when it reproduces the
        # pool's probabilities; refits need the estimator itself
        from ..snapshot import pool_model

        model = pool_model(artifact, path=model_path, favorable=schema.favorable, feature_names=schema.feature_names,
                           threshold=threshold, features=frame, trusted_types=trusted_types or None)
        if model is None and not hinted:
            from ..pool import POOL_HINT
            from ..snapshot import scorer_outdated

            versions = scorer_outdated(artifact)
            if versions:
                echo_err(f"Hint: the pool '{pool}' keeps the model's scorer for other library versions ({versions}), "
                         f"so the model is loaded; a pool built now keeps one for these: {POOL_HINT}.")
    if model is None:
        model = load_model(model_path, favorable=schema.favorable, feature_names=schema.feature_names,
                           threshold=threshold, trusted_types=trusted_types or None)
    if pool is not None:
        from ..pool import load_pool

        training = load_pool(pool, frame, schema, data=data, model=model_path, threshold=threshold,
                             encoding=encoding, source=f"'{data}'", scale=flags.scale, artifact=artifact,
                             derived=id_like is not None, frame_from_pool=from_pool)
        encoded = (training.encoder, training.X)
    else:
        from ..dataset import encode_training

        encoded = encode_training(frame, schema, source=f"'{data}'", scale=flags.scale, stage=stage)
    scoring = None
    if robust is not None and robust.active:
        # several models to satisfy: the judge over them scores the rows (label support compares rows in the
        # training set's encoding, the pool's mapped rows with --pool)
        from ._robust import judge_for

        model = judge_for(model, robust, schema, threshold=threshold, trusted_types=trusted_types, frame=frame,
                          data=data, model_path=model_path, scale=flags.scale, encoded=encoded, status=status)
        scoring = None if status is None else _judge_progress(robust, status)
        if pool is not None:            # the pool holds the model's verdict alone: the judge scores its rows again
            from ..dataset import rescored

            training = rescored(training, model, source=f"'{data}'", progress=scoring)
    if pool is None:
        training = build_training_set(frame, schema, model, source=f"'{data}'", scale=flags.scale,
                                      encoded=encoded, progress=scoring, stage=stage)
    _warn_about_training(frame, training, model, source=f"'{data}'", id_like=id_like, spec=spec)
    return training, model, spec


def check_id_column(flags: SchemaFlags, frame, data: Path) -> None:
    """Warn about an ``--id-column`` that looks like a misspelling of a column of the data file, in a run that
    reads no applicants.

    For the commands that read no applicants file (``build-graph``, ``build-pool``, ``build-refits``, and
    ``evaluate`` and ``audit`` without ``--applicants``), where the identifier column is only the data file's
    column left out of the features. The training data need not hold the applicants' identifier, and a script
    gives every command the same flags: a name the data file does not have leaves nothing out, silently, as in
    ``plan``. But a near miss of one of its columns (``applicantid`` for ``applicant_id``) leaves that column
    among the features, where an identifier is no feature: a warning says so. (A mistyped name is refused where
    the column is read, in the applicants file of ``plan``, ``select``, ``interpolate``.) The schema file's
    ``id_column`` is not checked: one file serves every command.
    """
    from ..names import near_miss

    name = flags.id_column
    if name is None or name in frame.columns:
        return
    match = near_miss(name, [str(c) for c in frame.columns])
    if match:
        echo_err(f"Warning: --id-column '{name}' is not a column of '{data}'. Did you mean '{match}'? This run reads "
                 f"no applicants file, so the option only names the data file's identifier column to leave out of "
                 f"the features; '{match}' stays a feature.")


def _judge_progress(robust, status):
    """``progress(done, n)`` for scoring the training rows with every model to satisfy: the status line names them
    and counts the rows (label support finds the labels around each row the first time it is asked, which on a
    million rows takes most of a minute)."""
    models = ["the model"]
    if robust.also_valid_for:
        models.append(f"{len(robust.also_valid_for)} other model(s)")
    if robust.refits is not None or robust.robust is not None:
        models.append("its refits")
    if robust.resolved_support is not None:
        models.append("label support (the labels around each row, found once per run)")
    what = models[0] if len(models) == 1 else ", ".join(models[:-1]) + " and " + models[-1]

    def progress(done: int, n: int) -> None:
        status(f"scoring the training rows with {what}: {done:,} of {n:,} rows")

    return progress


def _warn_about_training(frame, training: TrainingSet, model, *, source: str, spec, id_like=None) -> None:
    """Warnings and hints about inputs that are likely a mistake (see ``_hints``); ``spec``, the declarations the
    schema was inferred with (what the user declared about each feature); ``id_like``, when given, is
    ``id_like_columns(frame, training.schema)`` (stored in a pool)."""
    from ..leaks import find_label_leaks
    from ..schema import (
        ages_without_horizon,
        flag_features,
        id_like_columns,
        ranges_outside_training,
        sensitive_like_features,
    )
    from ._hints import (
        age_horizon_hint,
        flag_note,
        id_like_warning,
        label_leak_warning,
        no_favorable_hint,
        outlier_bound_note,
        range_outside_warning,
        schema_shape_warnings,
        sensitive_warning,
        withheld_levels_note,
    )

    if id_like is None:
        id_like = id_like_columns(frame, training.schema)
    leaks = find_label_leaks(training.frame, training.schema, training.labeled) if training.labeled.any() else []
    highest = float(training.probability.max()) if training.n_rows else 0.0
    for message in (id_like_warning(id_like, source),
                    sensitive_warning(*sensitive_like_features(training.schema, vary=spec.vary), source),
                    age_horizon_hint(ages_without_horizon(training.schema, spec), source),
                    no_favorable_hint(int(training.favorable.sum()), training.n_rows, model, highest),
                    outlier_bound_note(training.schema, training.encoder, source),
                    withheld_levels_note(training.schema),
                    flag_note(training.schema, flag_features(training.schema, frame, vary=spec.vary), source),
                    _no_labels(frame, training, source),
                    label_leak_warning(leaks, source),
                    *schema_shape_warnings(training.schema, source, vary=spec.vary, id_like=id_like,
                                           leaks=[leak.feature for leak in leaks]),
                    range_outside_warning(ranges_outside_training(training.schema, frame), source)):
        if message:
            echo_err(message)


def _no_labels(frame, training: TrainingSet, source: str) -> str | None:
    from ._hints import no_labels_warning

    if not training.n_rows or training.labeled.any() or training.schema.target not in frame.columns:
        return None
    import pandas as pd

    values = pd.unique(frame[training.schema.target].astype(object))
    return no_labels_warning(training.schema.target, list(values), training.schema.favorable, source)


def read_applicants(path: Path, training: TrainingSet, id_column: str | None, *, encoding: str = "utf-8",
                    used=()):
    """Read and validate a whole applicants file; return the raw feature rows and the applicant ids.

    Ids are the id column's values (verbatim strings; unique, see ``ApplicantFile.scan``), or 0-based
    row numbers without one. Columns that are neither features nor the id column are ignored with a
    warning, unless the command reads them itself (``used``, e.g. ``audit --by``).
    """
    import pandas as pd

    from ..applicants import ApplicantFile, normalise_types

    source = ApplicantFile(path, training.encoder, id_column=id_column, encoding=encoding)
    scan = source.scan()
    from ._hints import ignored_columns_warning

    warning = ignored_columns_warning([c for c in scan.extra_columns if c not in set(used)], f"'{path}'", id_column)
    if warning:
        echo_err(warning)
    chunks = list(source.chunks(max(scan.n_rows, 1)))
    frame = pd.concat([c.frame for c in chunks], ignore_index=True)
    ids = [a for c in chunks for a in c.ids]
    return normalise_types(training.encoder, frame), ids
