"""The training pool artifact: the encoded training rows and the model's verdict on each, saved for reuse.

Every command that plans or selects starts by encoding the training rows and scoring them with the model
(:func:`frpd_cli.dataset.build_training_set`). On Adult that is most of a one-applicant run after start-up.
A *pool* (``frpd build-pool``) keeps the result::

    DIR/
      manifest.json   kind "pool"; params: threshold, text encoding, row count, constraint column names;
                      inputs: the data file and the model (sha256)
      X.npy, probability.npy, immutable.npy, monotone.npy, direction.npy
                      the encoded rows, their scores and constraint codes, one uncompressed array each
      encoder.json    the fitted encoder (schema, min-max ranges, decimals)
      population.json the population shares of every feature (``largest_shift``, :mod:`frpd_cli.population`)
      labeled.npy     the rows labelled favourable (for the target and favourable class in the manifest)
      copy_of.npy     each row's first copy (the lowest row number with the same feature values: copies of a
                      row are one candidate, :func:`frpd_cli.candidates.first_copies`)
      frame.json, frame_<j>.npy
                      the training CSV as parsed: column j's values (numbers as they are, text as codes into
                      its levels, listed in frame.json with the pandas version that parsed them)
      derived.json    the schema inferred from the CSV and the features that look like identifiers, with what
                      they were derived from (:func:`pool_schema`)
      scorer.json     the model's scorer as frpd computes it (a pipeline of one-hot encoders and scalers and a
                      network or logistic regression), for runs that need not load the model (frpd_cli.snapshot)

and :func:`load_pool` turns it back into the same :class:`~frpd_cli.dataset.TrainingSet`, bit for bit,
after checking that it was built from the data file, model, schema, threshold and text encoding given now.
The arrays are memory-mapped read-only, not read: opening a pool of a million rows costs no read of its
240 MB of encoded rows, pages are read when a candidate search touches them, and the worker processes of
``--jobs`` (forked) share those pages instead of copying them. Their sha256 is recorded in the manifest
but only their size is checked when a pool is opened (hashing would read every byte); the two input files
are hashed and compared as before. Pools written by earlier versions (one compressed ``pool.npz``) still load.

A run given a pool does not parse the training CSV either (:func:`pool_frame`): the CSV's sha256 must be the
one the pool records, so its bytes, and with the same text encoding and pandas version their parse, are the
pool's; the parsed columns are rebuilt from ``frame_<j>.npy`` (a few tenths of a second for a million rows,
against about two seconds of parsing). A pool without them (older, or a column of a type they cannot hold
exactly) is used with the CSV parsed as before.

Nor does it infer the schema again (:func:`pool_schema`): the schema and the identifier-like features are
functions of the parsed CSV, the schema declarations and frpd's own inference code, so the pool keeps them
with a key naming all of these (the declarations, the text encoding, the pandas and numpy versions and the
sha256 of the modules that parse the CSV and infer the schema); the CSV's bytes are the pool's (checked above). A run whose key
differs in anything infers the schema from the frame as before.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .artifacts import read_artifact, sha256_file, write_artifact
from .candidates import copy_of
from .constraints import ConstraintCodes
from .dataset import TrainingSet, labeled_rows
from .encoding import DEFAULT_SCALE, Encoder, fit_encoder
from .exceptions import ArtifactError, StaleArtifactError
from .population import PopulationShares, population_of

__all__ = ["POOL_KIND", "POOL_HINT", "write_pool", "load_pool", "open_pool", "pool_frame", "pool_level_codes",
           "pool_schema",
           "pool_schema_outdated", "pool_difference"]

POOL_KIND = "pool"
POOL_HINT = "frpd build-pool DATA --model MODEL --out DIR (with the same schema flags and --threshold)"
_ARRAYS = ("X", "probability", "immutable", "monotone", "direction")


def write_pool(out_dir, training: TrainingSet, *, data, model, threshold: float, encoding: str = "utf-8",
               frame: pd.DataFrame | None = None, spec=None, scorer: dict | None = None,
               staged: dict | None = None) -> Path:
    """Save ``training`` as a pool artifact in ``out_dir``.

    Parameters
    ----------
    out_dir : str or Path
        The artifact folder (replaced when it holds an artifact already).
    training : TrainingSet
        Built from ``data`` with ``model`` at ``threshold``.
    data, model : str or Path
        The training CSV and the model file (their sha256 goes in the manifest).
    threshold : float
        The favourable threshold ``training`` was built with.
    encoding : str
        The text encoding the CSV was read with.
    frame : DataFrame, optional
        The CSV as read (:func:`frpd_cli.dataset.read_training_frame`): kept in the pool when its columns can be
        rebuilt exactly (:func:`pool_frame`), so that runs with the pool need not parse the CSV.
    spec : SchemaSpec, optional
        The declarations ``training.schema`` was inferred with from ``frame``: with both, the schema and the
        identifier-like features are kept (:func:`pool_schema`), so that runs with the same declarations need
        not infer them.
    scorer : dict, optional
        The model's kept scorer (:func:`frpd_cli.snapshot.scorer_state`), checked on ``training``'s rows.
    staged : dict, optional
        Payloads written ahead (:attr:`frpd_cli.dataset.RowStage.arrays`: the encoded rows and constraint codes
        ``training`` holds memory-mapped), moved into the pool instead of written from memory.

    Returns
    -------
    path : Path
    """
    codes = training.codes
    staged = staged or {}
    arrays = {
        "X": np.ascontiguousarray(training.X, dtype=np.float64),          # (views, not copies, of mapped rows)
        "probability": np.asarray(training.probability, dtype=np.float64),
        "immutable": np.asarray(codes.immutable, dtype=np.float64),
        "monotone": np.asarray(codes.monotone, dtype=np.float64),
        "direction": np.asarray(codes.direction),
    }
    params = {"threshold": float(threshold), "encoding": encoding, "scale": training.encoder.scale,
              "n_rows": training.n_rows, "labeled_by": _labeled_by(training.schema),
              "immutable_names": list(codes.immutable_names), "monotone_names": list(codes.monotone_names)}
    payloads = {f"{name}.npy": staged.get(f"{name}.npy", array) for name, array in arrays.items()}
    payloads["labeled.npy"] = np.asarray(training.labeled, dtype=bool)
    payloads["copy_of.npy"] = copy_of(training.frame[list(training.schema.feature_names)])
    payloads["encoder.json"] = training.encoder.to_dict()
    payloads["population.json"] = population_of(training).to_dict()
    parsed = None if frame is None else _frame_payloads(frame)
    if parsed is not None:
        payloads.update(parsed)
    derived = None if frame is None or spec is None else _derived_payload(frame, training.schema, spec, encoding)
    if derived is not None:
        payloads["derived.json"] = derived
    if scorer is not None:
        payloads["scorer.json"] = scorer
    return write_artifact(out_dir, kind=POOL_KIND, params=params, inputs={"data": data, "model": model},
                          payloads=payloads)


def load_pool(pool_dir, frame, schema, *, data, model, threshold: float, encoding: str = "utf-8",
              source: str = "the data file", scale: str = DEFAULT_SCALE, artifact=None,
              derived: bool = False, frame_from_pool: bool = False) -> TrainingSet:
    """Open a pool artifact and return the training set it holds, checked against the inputs given now.

    Parameters
    ----------
    pool_dir : str or Path
        The pool folder from ``frpd build-pool``.
    frame : DataFrame
        The training CSV as read now (the raw rows are taken from it, not stored twice).
    schema : Schema
        The schema in force now (inferred from ``frame`` with the current flags).
    data, model : str or Path
        The training CSV and the model file given now.
    threshold : float
        The favourable threshold given now.
    encoding : str
        The text encoding given now.
    scale : {"effort", "minmax"}
        The ``--scale`` given now.
    artifact : Artifact, optional
        The pool as opened (and checked against ``data`` and ``model``) by :func:`open_pool`.
    derived : bool
        ``schema`` is the pool's stored one (:func:`pool_schema`): derived from the same CSV bytes, declarations,
        library versions and code, which then fit the pool's encoder too (``encoding`` is among the modules of
        the key), so the encoder is read from the pool instead of being fitted again (a pass over the numeric
        columns: about 0.9 s for ten million rows). When its schema is not ``schema``, it is fitted as before.

    Returns
    -------
    training : TrainingSet
        Equal, array for array, to ``build_training_set(frame, schema, model)``.

    Raises
    ------
    StaleArtifactError
        The pool was built from another data file, model, schema, threshold or text encoding (the message
        names which, and how to rebuild it).
    ArtifactError
        The folder is not a pool, or a payload is missing or corrupted.

    Notes
    -----
    Costs reading and hashing the pool and the two input files, and refitting the encoder (one pass over
    the numeric columns) to check it unless ``derived``; encoding the rows and calling the model are skipped.
    """
    if artifact is None:
        artifact = open_pool(pool_dir, data=data, model=model)
    params = artifact.params
    stored_threshold = params.get("threshold")
    if not isinstance(stored_threshold, (int, float)) or float(stored_threshold) != float(threshold):
        raise StaleArtifactError(
            f"The pool '{pool_dir}' was built with --threshold {stored_threshold}, not {threshold:g} as given now "
            f"(favourable rows depend on it). Pass --threshold {stored_threshold}, or rebuild it: {POOL_HINT}"
        )
    if params.get("encoding", "utf-8") != encoding:
        raise StaleArtifactError(
            f"The pool '{pool_dir}' was built reading the data as {params.get('encoding')!r}, not {encoding!r} as "
            f"given now. Rebuild it: {POOL_HINT}"
        )
    stored_scale = params.get("scale", "minmax")          # pools made before --scale existed are min-max
    if stored_scale != scale:
        raise StaleArtifactError(
            f"The pool '{pool_dir}' was built with --scale {stored_scale}, not --scale {scale} as given now (its "
            f"encoded rows are in that scale). Pass --scale {stored_scale}, or rebuild it: {POOL_HINT}"
        )
    features = frame.loc[:, list(schema.feature_names)].reset_index(drop=True)
    stored = artifact.load_json("encoder.json")
    encoder = _stored_encoder(stored, schema, scale) if derived else None
    if encoder is None:
        encoder = fit_encoder(schema, frame, source=source, scale=scale)
    difference = pool_difference(stored, encoder)
    if difference:
        raise StaleArtifactError(f"The pool '{pool_dir}' was built with another schema: {difference}. Rebuild it "
                                 f"with the same schema flags: {POOL_HINT}")
    arrays = _pool_arrays(artifact)
    missing = [name for name in _ARRAYS if name not in arrays]
    n_rows = len(features)
    misshapen = not missing and (
        arrays["X"].shape != (n_rows, encoder.n_features_out) or arrays["probability"].shape != (n_rows,)
        or arrays["X"].dtype != np.float64 or arrays["probability"].dtype != np.float64
        or arrays["immutable"].shape[0] != n_rows or arrays["monotone"].shape[0] != n_rows)
    if missing or misshapen:
        raise ArtifactError(f"The pool '{pool_dir}' does not hold the arrays of {n_rows} rows this frpd expects "
                            f"(missing or misshapen: {', '.join(missing) or 'X or probability'}). "
                            f"Rebuild it: {POOL_HINT}")
    codes = ConstraintCodes(immutable=arrays["immutable"], monotone=arrays["monotone"],
                            direction=arrays["direction"], immutable_names=tuple(params["immutable_names"]),
                            monotone_names=tuple(params["monotone_names"]))
    probability = arrays["probability"]
    training = TrainingSet(frame=features, schema=schema, encoder=encoder, X=arrays["X"], codes=codes,
                           probability=probability, favorable=probability >= threshold,
                           labeled=_labeled(artifact, frame, schema, n_rows))
    if frame_from_pool:
        coded = pool_level_codes(artifact)
        object.__setattr__(training, "_level_codes", {name: coded[name] for name in schema.feature_names
                                                      if name in coded})
    first = _copies(artifact, n_rows)
    if first is not None:
        object.__setattr__(training, "_copy_of", first)
    if "population.json" in artifact.payload_names:      # the same rows and schema: the same shares
        object.__setattr__(training, "_population", PopulationShares.from_dict(artifact.load_json("population.json")))
    return training


def _copies(artifact, n_rows: int) -> np.ndarray | None:
    """The pool's ``copy_of.npy`` (:func:`_hashed_npy`: a damaged one would silently drop candidates as copies),
    else None (the copies are then grouped from the rows)."""
    first = _hashed_npy(artifact, "copy_of.npy")
    return first.view(np.ndarray) if first is not None and first.shape == (n_rows,) and first.dtype.kind == "i" \
        else None


def _hashed_npy(artifact, name: str) -> np.ndarray | None:
    """A small ``.npy`` payload (a few bytes a row) read only when its sha256 is the manifest's, unlike the pool's
    large arrays (checked by size when the pool is opened); None when it is missing or differs."""
    if name not in artifact.payload_names:
        return None
    try:
        if sha256_file(artifact.path / name) != artifact.manifest["payloads"][name]["sha256"]:
            return None
        return artifact.load_npy(name)
    except (ArtifactError, KeyError, TypeError, OSError):
        return None


def _stored_encoder(stored: dict, schema, scale: str) -> Encoder | None:
    """The pool's encoder (``encoder.json``) when it is one of ``schema`` and ``scale``; else None."""
    try:
        encoder = Encoder.from_dict(stored)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if encoder.schema != schema or encoder.scale != scale:
        return None
    return encoder


def _labeled_by(schema) -> list:
    """What the rows labelled favourable depend on besides the CSV's bytes: the target and the favourable
    class, its type included."""
    return [str(schema.target), repr(schema.favorable)]


def _labeled(artifact, frame, schema, n_rows: int) -> np.ndarray:
    """The rows labelled favourable: the pool's ``labeled.npy`` when it was computed for this target and
    favourable class (and its sha256 is the manifest's), else computed from ``frame``."""
    if artifact.params.get("labeled_by") == _labeled_by(schema):
        labeled = _hashed_npy(artifact, "labeled.npy")
        if labeled is not None and labeled.shape == (n_rows,) and labeled.dtype == bool:
            return np.array(labeled)
    return labeled_rows(frame, schema)


def open_pool(pool_dir, *, data, model):
    """Open a pool artifact, checked against the data file and model given now (their sha256).

    Raises
    ------
    ArtifactError, StaleArtifactError, InputError
        As :func:`frpd_cli.artifacts.read_artifact`.
    """
    return read_artifact(pool_dir, kind=POOL_KIND, inputs={"data": data, "model": model}, command_hint=POOL_HINT,
                         hash_npy=False)


#: The column kinds a pool keeps as they are (the others are text, kept as codes into their levels).
_NUMBER_KINDS = "biuf"


def _frame_payloads(frame: pd.DataFrame) -> dict | None:
    """The payloads of :func:`pool_frame` for ``frame``, or None when a column cannot be rebuilt exactly (not
    numbers nor text, a name that is not text, or a round trip that does not give back the same frame)."""
    columns, payloads = [], {}
    for j, name in enumerate(frame.columns):
        column = frame[name]
        dtype = column.dtype
        if not isinstance(name, str):
            return None
        if isinstance(dtype, np.dtype) and dtype.kind in _NUMBER_KINDS:
            payloads[f"frame_{j}.npy"] = np.ascontiguousarray(column.to_numpy())
            columns.append({"name": name, "dtype": str(dtype)})
            continue
        codes, levels = pd.factorize(column, use_na_sentinel=True)
        levels = list(np.asarray(levels, dtype=object))
        if not all(type(level) is str for level in levels):
            return None
        payloads[f"frame_{j}.npy"] = codes.astype(np.min_scalar_type(-len(levels) - 1))
        columns.append({"name": name, "dtype": str(dtype), "levels": levels})
    described = {"pandas": pd.__version__, "n_rows": int(frame.shape[0]), "columns": columns}
    rebuilt = _rebuild_frame(described, {name: np.asarray(array) for name, array in payloads.items()})
    if rebuilt is None or not _same_frame(rebuilt, frame):
        return None
    payloads["frame.json"] = described
    return payloads


def _same_frame(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return (list(a.columns) == list(b.columns) and list(map(str, a.dtypes)) == list(map(str, b.dtypes))
            and a.index.equals(b.index) and a.equals(b))


def _rebuild_frame(described: dict, arrays: dict) -> pd.DataFrame | None:
    n_rows = described["n_rows"]
    columns = {}
    for j, column in enumerate(described["columns"]):
        values = np.array(arrays[f"frame_{j}.npy"])           # a copy in memory: the frame's own, writable
        if values.shape != (n_rows,):
            return None
        if "levels" in column:
            levels = np.empty(len(column["levels"]) + 1, dtype=object)
            levels[:-1] = column["levels"]
            levels[-1] = np.nan                                  # code -1: a missing value
            if values.size and (values.min() < -1 or values.max() >= len(column["levels"])):
                return None
            values = levels[values]
        # no copies: ``values`` is this frame's own (about 0.15 s less for a million rows)
        columns[column["name"]] = pd.Series(values, dtype=column["dtype"], name=column["name"], copy=False)
    return pd.DataFrame(columns, index=pd.RangeIndex(n_rows), copy=False) if columns else None


def pool_frame(artifact, *, encoding: str = "utf-8") -> pd.DataFrame | None:
    """The training CSV as parsed when the pool was built, or None when the pool cannot give it.

    Parameters
    ----------
    artifact : Artifact
        From :func:`open_pool` (so the data file given now has the bytes the pool was built from).
    encoding : str
        The text encoding given now.

    Returns
    -------
    frame : DataFrame or None
        Equal to ``read_training_frame(data, encoding=encoding)`` (values, dtypes, column order); None when
        the pool does not hold the parsed columns, was read with another text encoding or parsed by another
        pandas version, or a column does not come back whole: the caller then parses the CSV.
    """
    if "frame.json" not in artifact.payload_names or artifact.params.get("encoding", "utf-8") != encoding:
        return None
    described = artifact.load_json("frame.json")
    if not isinstance(described, dict) or described.get("pandas") != pd.__version__:
        return None
    try:
        names = [f"frame_{j}.npy" for j in range(len(described["columns"]))]
        # hashed, unlike the pool's other arrays: they are small (a few bytes a row), and a damaged one would
        # change the raw values plans print; one that differs from the manifest is not used
        if any(sha256_file(artifact.path / name) != artifact.manifest["payloads"][name]["sha256"] for name in names):
            return None
        return _rebuild_frame(described, {name: artifact.load_npy(name) for name in names})
    except (ArtifactError, KeyError, TypeError, ValueError, OSError):
        return None


def pool_level_codes(artifact) -> dict:
    """The codes of the text columns of the pool's parsed CSV: ``{name: (codes, levels)}``.

    ``codes`` (integers, shape (n_rows,), memory-mapped) index ``levels`` (a tuple of str), -1 a missing value:
    the column :func:`pool_frame` rebuilds is ``levels[codes]``. Empty when the pool holds no parsed CSV (or one
    :func:`pool_frame` would not use: only call it for a frame that function gave).
    """
    if "frame.json" not in artifact.payload_names:
        return {}
    described = artifact.load_json("frame.json")
    out = {}
    for j, column in enumerate(described["columns"]):
        if "levels" in column:
            out[column["name"]] = (artifact.load_npy(f"frame_{j}.npy"), tuple(column["levels"]))
    return out


#: The modules that parse the CSV (when the pool's parsed copy is not used), infer the schema from it and fit the
#: encoder (:func:`load_pool` reads the pool's encoder with the stored schema).
_DERIVING_MODULES = ("data", "dataset", "schema", "encoding")


def _deriving_code_digest() -> str | None:
    """The sha256 of the sources of :data:`_DERIVING_MODULES` (None when one cannot be read): a pool's stored
    schema is used only by the same parsing and inference code."""
    import importlib

    digest = hashlib.sha256()
    try:
        for name in _DERIVING_MODULES:
            source = Path(importlib.import_module(f"{__package__}.{name}").__file__).read_bytes()
            digest.update(hashlib.sha256(source).digest())
    except (OSError, TypeError):
        return None
    return digest.hexdigest()


def _derived_key(spec, encoding: str) -> dict | None:
    """What a stored schema was derived from besides the CSV's bytes (checked by :func:`open_pool`)."""
    digest = _deriving_code_digest()
    if digest is None:
        return None
    return {"spec": repr(spec), "encoding": encoding, "pandas": pd.__version__, "numpy": np.__version__,
            "code": digest}


def _derived_payload(frame: pd.DataFrame, schema, spec, encoding: str) -> dict | None:
    """The ``derived.json`` payload, or None when the schema does not come back equal from JSON."""
    from .schema import Schema, id_like_columns

    key = _derived_key(spec, encoding)
    if key is None:
        return None
    payload = {"key": key, "schema": schema.to_dict(), "id_like": id_like_columns(frame, schema)}
    try:
        stored = json.loads(json.dumps(payload, allow_nan=False))
        if Schema.from_dict(stored["schema"]) != schema:
            return None
    except (TypeError, ValueError):
        return None
    return payload


def pool_schema(artifact, spec, *, encoding: str = "utf-8"):
    """The schema the pool's CSV gives with the declarations ``spec``, and its identifier-like features, as
    stored by ``build-pool``; ``(None, None)`` when the pool cannot give them.

    Parameters
    ----------
    artifact : Artifact
        From :func:`open_pool` (so the data file given now has the bytes the pool was built from).
    spec : SchemaSpec
        The declarations in force now.
    encoding : str
        The text encoding given now.

    Returns
    -------
    schema : Schema or None
        Equal to ``infer_schema(frame, spec)`` for the CSV as parsed now; None when the pool holds no stored
        schema, or one derived with other declarations, text encoding, pandas or numpy version or inference code.
    id_like : list of str or None
        ``id_like_columns(frame, schema)``.
    """
    from .schema import Schema, SchemaError

    if "derived.json" not in artifact.payload_names:
        return None, None
    try:
        stored = artifact.load_json("derived.json")
        key = _derived_key(spec, encoding)
        if key is None or stored.get("key") != key:
            return None, None
        id_like = stored["id_like"]
        if not isinstance(id_like, list) or not all(isinstance(name, str) for name in id_like):
            return None, None
        return Schema.from_dict(stored["schema"]), id_like
    except (ArtifactError, SchemaError, AttributeError, KeyError, TypeError, ValueError, OSError):
        return None, None


def pool_schema_outdated(artifact, spec, *, encoding: str = "utf-8") -> bool:
    """Whether the pool keeps no schema for ``spec`` only because it was built by another version of frpd's
    parsing and inference code, pandas or numpy: rebuilt now, it would spare the run inferring the schema. False
    when the declarations or the text encoding differ (a pool serves other declarations without its stored
    schema, by design), when its schema is used, and when it keeps none at all (a schema that JSON cannot hold
    exactly is never kept, so a rebuild would not help)."""
    if "derived.json" not in artifact.payload_names:
        return False
    try:
        stored = artifact.load_json("derived.json").get("key")
        key = _derived_key(spec, encoding)
    except (ArtifactError, AttributeError, OSError, ValueError):
        return False
    if not isinstance(stored, dict) or key is None:
        return False
    return (stored.get("spec"), stored.get("encoding")) == (key["spec"], key["encoding"]) and stored != key


def _pool_arrays(artifact) -> dict:
    """The pool's arrays: memory-mapped ``.npy`` payloads, or the arrays of an older pool's ``pool.npz``."""
    if "pool.npz" in artifact.payload_names:
        return artifact.load_npz("pool.npz")
    return {name: artifact.load_npy(f"{name}.npy") for name in _ARRAYS if f"{name}.npy" in artifact.payload_names}


def pool_difference(stored: dict, encoder: Encoder) -> str | None:
    """What differs between a stored encoder (``Encoder.to_dict()`` as read back) and ``encoder``, in words.

    Returns None when they agree (the identifier column, which does not enter the pool, is ignored).
    """
    old, new = stored.get("schema", {}), encoder.schema.to_dict()
    for key, what in (("target", "target"), ("favorable", "favourable class")):
        if str(old.get(key)) != str(new.get(key)):
            return f"{what} {old.get(key)!r} in the pool but {new.get(key)!r} now"
    old_features = {f["name"]: f for f in old.get("features", [])}
    new_features = {f["name"]: f for f in new["features"]}
    if list(old_features) != list(new_features):
        gone = [n for n in old_features if n not in new_features]
        added = [n for n in new_features if n not in old_features]
        if gone or added:
            return "; ".join(([f"features {', '.join(map(repr, gone))} only in the pool"] if gone else [])
                             + ([f"features {', '.join(map(repr, added))} only now"] if added else []))
        return "the features are in another order"
    for name, f in old_features.items():
        g = new_features[name]
        for key in ("kind", "mutability"):
            if f.get(key) != g.get(key):
                return f"feature '{name}' is {f.get(key)} in the pool but {g.get(key)} now"
        if f.get("weight", 1.0) != g.get("weight", 1.0):
            return f"feature '{name}' has weight {f.get('weight', 1.0)} in the pool but {g.get('weight', 1.0)} now"
        if [str(v) for v in f.get("levels", [])] != [str(v) for v in g.get("levels", [])]:
            return f"feature '{name}' has levels {f.get('levels')} in the pool but {g.get('levels')} now"
    fresh = encoder.to_dict()
    for key in ("minimum", "maximum", "decimals", "knots", "fractional"):
        if stored.get(key) != fresh.get(key):
            if key == "knots":
                return "the training values the effort scale is fitted on differ"
            return f"the encoder's {key} values differ (pool {stored.get(key)}, now {fresh.get(key)})"
    return None
