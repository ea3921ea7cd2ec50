"""``frpd build-pool``: encode and score the training rows once, for reuse by plan, select and build-graph."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from . import _options as o
from ._errors import echo_err, handle_errors
from .app import app

__all__ = ["build_pool_command"]


@app.command("build-pool")
@handle_errors
@o.SCHEMA_OPTIONS
def build_pool_command(
    data: o.DataArg,
    model: o.ModelOpt,
    out: Annotated[Path, typer.Option("--out", readable=False, help="Folder to write the pool artifact to.", show_default=False)],
    flags: o.SchemaFlags = o.SchemaFlags(),
    threshold: o.ThresholdOpt = 0.5,
    trust_type: o.TrustTypeOpt = None,
    encoding: o.EncodingOpt = "utf-8",
    quiet: o.QuietOpt = False,
) -> None:
    """Encode the training rows and score them with the model once, and save them as a pool artifact.

    plan, select and build-graph given --pool DIR with the same data, model, schema flags and threshold read
    the rows from it instead of encoding and scoring them again; their outputs are byte-identical. A pool
    built from other inputs is refused, naming what differs.

    Example: frpd build-pool sample_data/credit.csv --model sample_data/model.pkl --schema sample_data/schema.toml
    --out pool/
    """
    from ..artifacts import staging_folder
    from ..dataset import RowStage
    from ..outputs import check_artifact_folder, check_not_inputs, lock_outputs
    from ..pool import write_pool
    from ..snapshot import scorer_state
    from ._output import busy

    check_not_inputs({"--out": out}, {"data": data, "model": model, "schema": flags.schema})
    check_artifact_folder(out)
    # the output locks come first: a second writer is refused before any input is read; the encoded rows are
    # written block by block beside the pool and moved into it, never held in memory
    with lock_outputs(folders=(out,)), staging_folder(out) as folder:
        start = time.perf_counter()
        read = []
        stage = RowStage(folder)
        training, loaded, spec = o.load_training(data, model, flags, threshold=threshold, encoding=encoding,
                                                 trusted_types=trust_type, quiet=quiet, on_frame=read.append,
                                                 stage=stage, id_in_data=True)
        # the rest takes about a third of the run (the copies table, population shares, parsed columns, hashes)
        with busy(f"writing the pool to '{out}' ({training.n_rows:,} rows)", quiet=quiet):
            scorer = scorer_state(loaded, training.frame, training.probability)
            write_pool(out, training, data=data, model=model, threshold=threshold, encoding=encoding,
                       frame=read[0], spec=spec, scorer=scorer, staged=stage.arrays)
        if not quiet:
            kept = (" It keeps the model's scorer: runs with the pool score rows without loading the model."
                    if scorer is not None else "")
            echo_err(f"Pooled {training.n_rows} training rows ({int(training.favorable.sum())} favourable, "
                     f"{training.X.shape[1]} encoded columns) in {time.perf_counter() - start:.2f} s. "
                     f"Artifact written to '{out}'.{kept}")
