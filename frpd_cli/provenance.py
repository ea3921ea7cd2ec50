"""Provenance of a plans file: the sha256 of the model, the data and the applicants that made it, and how.

Artifacts record their inputs in ``manifest.json``; plans streamed by ``frpd plan`` (and the
records ``frpd interpolate`` prints) are bare csv/jsonl whose record shapes are part of the
command-line contract. ``--provenance FILE.json`` ties such a file to what produced it in a
separate JSON document:

.. code-block:: json

    {"kind": "frpd-provenance", "schema_version": 1, "frpd_version": "0.1.0", "command": "plan",
     "inputs": {"data": {"path": "train.csv", "sha256": "..."}, "model": {...}, "applicants": {...}},
     "settings": {"method": "quad", "k": 3, "...": "..."},
     "outputs": [{"path": "plans.jsonl", "format": "jsonl", "sha256": "..."}],
     "libraries": {"python": "3.11.7", "numpy": "...", "scikit-learn": "..."}}

The document holds no time stamp, so the same inputs and options give the same bytes.
``frpd evaluate --provenance FILE.json`` checks that its ``--plans`` file is one the document
describes and that its ``--model``, data and ``--applicants`` have the recorded sha256, and
refuses the plans otherwise, naming both hashes.
"""

from __future__ import annotations

import json
import os
import platform
import stat
import sys
from importlib import metadata
from pathlib import Path
from typing import Mapping

from . import __version__
from .artifacts import sha256_file
from .exceptions import InputError

__all__ = [
    "PROVENANCE_KIND",
    "PROVENANCE_VERSION",
    "HashingWriter",
    "ProvenanceMismatchError",
    "check_provenance",
    "describe_file",
    "plans_sha256",
    "provenance_json",
    "provenance_record",
    "read_provenance",
]

PROVENANCE_KIND = "frpd-provenance"
PROVENANCE_VERSION = 1

#: Libraries whose versions shape the results, always recorded.
_CORE_LIBRARIES = ("numpy", "pandas", "scipy", "scikit-learn")
#: Model runtimes, recorded when the run imported them: (import name, distribution names to try).
_MODEL_RUNTIMES = (("onnxruntime", ("onnxruntime",)), ("skops", ("skops",)), ("lightgbm", ("lightgbm",)),
                   ("xgboost", ("xgboost", "xgboost-cpu")))
#: What evaluate compares, in this order.
_CHECKED_INPUTS = ("model", "data", "applicants")
_MAX_BYTES = 1 << 20


class ProvenanceMismatchError(InputError):
    """The plans, model, data or applicants are not those the provenance document records."""


def provenance_record(command: str, *, inputs: Mapping[str, Mapping | None], settings: Mapping,
                      outputs: list[Mapping]) -> dict:
    """The provenance document of one run, as a JSON-ready dict.

    Parameters
    ----------
    command : str
        The frpd command (``plan``, ``interpolate``).
    inputs : mapping of str to mapping or None
        Per input name, ``{"path": ..., "sha256": ...}`` (see :func:`describe_file`); None entries are left out.
    settings : mapping
        Everything else that shaped the results (method, K, theta, schema, threshold, seed, ...), JSON-ready.
    outputs : list of mapping
        The plans written, each ``{"path": ..., "format": ..., "sha256": ...}``.

    Returns
    -------
    record : dict
    """
    return {
        "kind": PROVENANCE_KIND,
        "schema_version": PROVENANCE_VERSION,
        "frpd_version": __version__,
        "command": command,
        "inputs": {name: dict(entry) for name, entry in inputs.items() if entry is not None},
        "settings": dict(settings),
        "outputs": [dict(o) for o in outputs],
        "libraries": _library_versions(),
    }


def describe_file(shown, path, *, input_file: bool = False) -> dict:
    """``{"path": shown, "sha256": sha256 of the bytes at path}`` (``shown`` is the path as the user gave it).

    A path that is not a regular file (a pipe the data was streamed from) cannot be read again: its
    sha256 is None. ``input_file``: as :func:`frpd_cli.artifacts.sha256_file`'s.
    """
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        regular = False
    return {"path": str(shown), "sha256": sha256_file(path, input_file=input_file) if regular else None}


class HashingWriter:
    """A text stream wrapper that also feeds what is written, encoded as UTF-8, to a hashlib object.

    Used when the plans go to stdout, a FIFO or a device, which cannot be read back to hash them.
    """

    def __init__(self, stream, digest):
        self._stream = stream
        self.digest = digest

    def write(self, text):
        self.digest.update(text.encode("utf-8"))
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def plans_sha256(output, digest) -> str:
    """The plans' sha256: of the file when ``output`` is a regular file, else of the text fed to ``digest``."""
    from .outputs import resolve_output

    if output is not None and resolve_output(output).kind == "file":
        return sha256_file(output)
    return digest.hexdigest()


def provenance_json(record: Mapping) -> str:
    """The document's text: indented JSON, keys in the order built, one trailing newline."""
    return json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def read_provenance(path) -> dict:
    """Read and check a provenance document written by ``--provenance``.

    Raises
    ------
    InputError
        The file is missing, not JSON, not a provenance document, of an unknown version, or lacks
        the model's sha256.
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"Cannot read the provenance file '{path}': {exc.strerror or exc}.") from None
    if len(raw) > _MAX_BYTES:
        raise InputError(f"The provenance file '{path}' is larger than 1 MiB; a provenance document written by "
                         "frpd is a few kilobytes. Pass the FILE.json written by plan/interpolate --provenance.")
    try:
        record = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"The provenance file '{path}' is not JSON ({exc}). Pass the FILE.json written by "
                         "plan/interpolate --provenance.") from None
    if not isinstance(record, dict) or record.get("kind") != PROVENANCE_KIND:
        raise InputError(f"The file '{path}' is not an frpd provenance document (no \"kind\": "
                         f"\"{PROVENANCE_KIND}\"). Pass the FILE.json written by plan/interpolate --provenance.")
    if record.get("schema_version") != PROVENANCE_VERSION:
        raise InputError(f"The provenance file '{path}' has schema version {record.get('schema_version')!r}; this "
                         f"frpd ({__version__}) reads version {PROVENANCE_VERSION}. Re-run the command that made the "
                         "plans with this frpd.")
    inputs = record.get("inputs")
    model = inputs.get("model") if isinstance(inputs, dict) else None
    if not isinstance(model, dict) or not _is_sha256(model.get("sha256")):
        raise InputError(f"The provenance file '{path}' records no sha256 for the model. Pass the FILE.json written "
                         "by plan/interpolate --provenance.")
    outputs = record.get("outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(o, dict) for o in outputs):
        raise InputError(f"The provenance file '{path}' has an 'outputs' entry that is not a list of objects.")
    return record


def check_provenance(record: Mapping, *, source, plans, files: Mapping[str, object]) -> None:
    """Refuse plans that the provenance document does not describe, or that other inputs made.

    Parameters
    ----------
    record : mapping
        From :func:`read_provenance`.
    source : path
        The provenance file (for messages).
    plans : path
        The plans file being evaluated: its sha256 must be one of the recorded outputs' (when any
        output's sha256 was recorded).
    files : mapping of str to path or None
        The inputs at hand by name (``model``, ``data``, ``applicants``); each one the document records
        must have the recorded sha256. None entries are skipped.

    Raises
    ------
    ProvenanceMismatchError
        Naming the input, the recorded sha256 and the sha256 of the file given now.
    """
    recorded = [o.get("sha256") for o in record.get("outputs", []) if _is_sha256(o.get("sha256"))]
    if recorded:
        now = sha256_file(plans)
        if now not in recorded:
            raise ProvenanceMismatchError(
                f"The plans file '{plans}' (sha256 {now}) is not the one the provenance '{source}' describes "
                f"(sha256 {' or '.join(recorded)}): it was edited, concatenated or written by another run. Pass the "
                "provenance written with these plans, or evaluate without --provenance.")
    inputs = record.get("inputs", {})
    for name in _CHECKED_INPUTS:
        path = files.get(name)
        entry = inputs.get(name)
        if path is None or not isinstance(entry, dict) or not _is_sha256(entry.get("sha256")):
            continue
        now = sha256_file(path)
        if now != entry["sha256"]:
            made = f" ('{entry['path']}')" if entry.get("path") else ""
            raise ProvenanceMismatchError(
                f"The plans in '{plans}' were made with another {_NAMES[name]}: the provenance '{source}' records "
                f"the {name} sha256 {entry['sha256']}{made}; '{path}' has sha256 {now}. Evaluate with the "
                f"{_NAMES[name]} that made the plans, or plan again with this one.")


_NAMES = {"model": "model", "data": "training data", "applicants": "applicants file"}


def _is_sha256(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _library_versions() -> dict:
    versions = {"python": platform.python_version()}
    for name in _CORE_LIBRARIES:
        versions[name] = _version(name)
    for module, distributions in _MODEL_RUNTIMES:
        if module in sys.modules:
            versions[distributions[0]] = next((v for v in map(_version, distributions) if v is not None), None)
    return versions


def _version(distribution: str):
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
