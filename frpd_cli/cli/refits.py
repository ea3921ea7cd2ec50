"""``frpd build-refits``: refit copies of the model on resamples of the training data, for ``--robust``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from . import _options as o
from ._errors import echo_err, handle_errors
from ._robust import ResampleOpt, RobustModels
from .app import app

__all__ = ["build_refits_command"]


@app.command("build-refits")
@handle_errors
@o.SCHEMA_OPTIONS.only("schema", "target", "favorable", "categorical", "continuous", "id_column")
def build_refits_command(
    data: o.DataArg,
    model: o.ModelOpt,
    out: Annotated[Path, typer.Option("--out", readable=False, help="Folder to write the refits artifact to.", show_default=False)],
    robust: Annotated[int, typer.Option("--robust", metavar="N", min=1, help="How many refits.",
                                        show_default=False)],
    resample: ResampleOpt = "mixed",
    seed: o.SeedOpt = 0,
    jobs: o.JobsOpt = 1,
    flags: o.SchemaFlags = o.SchemaFlags(),
    threshold: o.ThresholdOpt = 0.5,
    trust_type: o.TrustTypeOpt = None,
    encoding: o.EncodingOpt = "utf-8",
    quiet: o.QuietOpt = False,
) -> None:
    """Refit copies of the model on resamples of the training data and save them as a refits artifact.

    Each refit is sklearn.base.clone of the model's estimator fitted on a resample of the data file's rows and
    target column (--resample: mixed, bootstrap, subsample, halves or shifted), with every random_state set from
    --seed and the refit's number: the same data, model, seed and N give the same refits, whatever --jobs.
    plan, select and interpolate given --refits DIR require every recourse to be favourable under them
    (--robust-level: a share of them). Models frpd cannot refit (ONNX, classes without fit/get_params) are
    refused: pass models trained elsewhere with --also-valid-for.

    Example: frpd build-refits sample_data/credit.csv --model sample_data/model.pkl --schema
    sample_data/schema.toml --robust 4 --out refits/
    """
    from ..dataset import read_training_frame
    from ..model import load_model
    from ..outputs import check_artifact_folder, check_not_inputs, lock_outputs
    from ..refits import fit_refits, write_refits
    from ..schema import DeclarationError, infer_schema

    RobustModels(robust=robust, resample=resample).check()
    check_not_inputs({"--out": out}, {"data": data, "model": model, "schema": flags.schema})
    check_artifact_folder(out)
    # the output locks come first: a second writer is refused before any input is read
    with lock_outputs(folders=(out,)):
        start = time.perf_counter()
        frame = read_training_frame(data, encoding=encoding)
        o.check_id_column(flags, frame, data)
        try:
            spec = infer_schema(frame, flags.spec(), source=f"'{data}'")
        except DeclarationError as exc:
            raise (flags.usage_error(exc) or exc) from None
        loaded = load_model(model, favorable=spec.favorable, feature_names=spec.feature_names, threshold=threshold,
                            trusted_types=trust_type or None)
        from ._output import busy

        with busy(f"refitting the model on {resample} resamples", quiet=quiet) as status:
            refits = fit_refits(loaded, frame, spec, n=robust, seed=seed, resample=resample, n_jobs=jobs,
                                progress=lambda done, n: status(f"refitting the model on {resample} resamples: "
                                                                f"{done} of {n} done"))
        write_refits(out, refits, data=data, model=model, seed=seed, resample=resample, target=spec.target)
        if not quiet:
            echo_err(f"Refitted the model {robust} time(s) on {resample} resamples of {len(frame)} rows in "
                     f"{time.perf_counter() - start:.2f} s. Artifact written to '{out}'.")
