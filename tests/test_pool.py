"""The training pool artifact: reusing it changes no byte of any output; a pool of other inputs is refused."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.artifacts import read_artifact
from frpd_cli.cli.app import app
from frpd_cli.dataset import build_training_set, read_training_frame, resolve_spec
from frpd_cli.exceptions import StaleArtifactError
from frpd_cli.model import load_model
from frpd_cli.pool import POOL_KIND, load_pool, write_pool
from frpd_cli.schema import SchemaSpec, infer_schema

runner = CliRunner()


def _common(paths, *extra):
    return [str(paths["data"]), "--model", str(paths["model"]), "--schema", str(paths["schema"]), *extra]


@pytest.fixture(scope="module")
def pool_dir(sample_paths, tmp_path_factory):
    out = tmp_path_factory.mktemp("pool") / "pool"
    result = runner.invoke(app, ["build-pool", *_common(sample_paths, "--out", str(out))])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""                       # messages only, on stderr
    assert "Pooled 2000 training rows" in result.stderr
    return out


def _training(paths, spec_flags=SchemaSpec(), threshold=0.5):
    frame = read_training_frame(paths["data"])
    schema = infer_schema(frame, resolve_spec(paths["schema"], spec_flags))
    model = load_model(paths["model"], favorable=schema.favorable, feature_names=schema.feature_names,
                       threshold=threshold)
    return frame, schema, model


def test_pool_holds_the_training_set_bit_for_bit(sample_paths, pool_dir):
    frame, schema, model = _training(sample_paths)
    fresh = build_training_set(frame, schema, model, scale="effort")       # the commands' default scale
    pooled = load_pool(pool_dir, frame, schema, data=sample_paths["data"], model=sample_paths["model"],
                       threshold=0.5, scale="effort")
    for name in ("X", "probability", "favorable", "labeled"):
        a, b = getattr(fresh, name), getattr(pooled, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    for name in ("immutable", "monotone", "direction"):
        assert np.array_equal(getattr(fresh.codes, name), getattr(pooled.codes, name)), name
    assert (fresh.codes.immutable_names, fresh.codes.monotone_names) == (pooled.codes.immutable_names,
                                                                         pooled.codes.monotone_names)
    assert fresh.encoder.to_dict() == pooled.encoder.to_dict()
    pd.testing.assert_frame_equal(fresh.frame, pooled.frame)
    from frpd_cli.population import fit_population, population_of

    assert "_population" in pooled.__dict__          # read from the pool, not refitted over the rows
    assert population_of(pooled).to_dict() == fit_population(frame, schema).to_dict()
    assert read_artifact(pool_dir, kind=POOL_KIND, command_hint="-").params["n_rows"] == 2000


@pytest.mark.parametrize("extra", [("--format", "jsonl"), ("--format", "csv", "--immutable-policy", "project"),
                                   ("--format", "json", "--method", "dpp-greedy", "-k", "2")])
def test_plans_with_and_without_pool_are_byte_identical(sample_paths, pool_dir, extra):
    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), *extra)]
    without = runner.invoke(app, args)
    with_pool = runner.invoke(app, [*args, "--pool", str(pool_dir)])
    assert without.exit_code == 0 and with_pool.exit_code == 0, with_pool.stderr
    assert without.stdout and with_pool.stdout == without.stdout


def test_select_and_build_graph_with_pool_write_identical_payloads(sample_paths, pool_dir, tmp_path):
    for command, payloads, extra in (("select", ("prototypes.csv", "status.csv", "screening.npz"),
                                      ("--applicants", str(sample_paths["applicants"]))),
                                     ("build-graph", ("graph.npz", "stats.json"), ())):
        outs = []
        for name, pool in (("plain", ()), ("pooled", ("--pool", str(pool_dir)))):
            out = tmp_path / f"{command}-{name}"
            result = runner.invoke(app, [command, *_common(sample_paths, *extra, "--out", str(out), *pool)])
            assert result.exit_code == 0, result.stderr
            outs.append(out)
        for payload in payloads:
            assert (outs[0] / payload).read_bytes() == (outs[1] / payload).read_bytes(), (command, payload)


def _refused(paths, pool_dir, *extra, data=None, model=None):
    args = ["plan", str(data or paths["data"]), "--model", str(model or paths["model"]), "--schema",
            str(paths["schema"]), "--applicants", str(paths["applicants"]), "--pool", str(pool_dir), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr
    return result.stderr


def test_pool_of_another_model_is_refused(sample_paths, pool_dir, tmp_path):
    other = tmp_path / "other.pkl"
    other.write_bytes(sample_paths["model"].read_bytes() + b"\0")    # loads the same, hashes differently
    message = _refused(sample_paths, pool_dir, model=other)
    assert "'model'" in message and "frpd build-pool" in message


def test_pool_of_other_data_is_refused(sample_paths, pool_dir, tmp_path):
    other = tmp_path / "credit.csv"
    frame = pd.read_csv(sample_paths["data"])
    frame.loc[0, "credit_amount"] += 1
    frame.to_csv(other, index=False)
    message = _refused(sample_paths, pool_dir, data=other)
    assert "'data'" in message and "frpd build-pool" in message


def test_pool_of_another_schema_or_threshold_is_refused(sample_paths, pool_dir):
    message = _refused(sample_paths, pool_dir, "--immutable", "duration")
    assert "feature 'duration'" in message and "immutable now" in message
    message = _refused(sample_paths, pool_dir, "--threshold", "0.6")
    assert "--threshold 0.5" in message and "0.6" in message


def test_library_refuses_a_pool_written_for_another_schema(sample_paths, tmp_path):
    frame, schema, model = _training(sample_paths)
    out = write_pool(tmp_path / "pool", build_training_set(frame, schema, model), data=sample_paths["data"],
                     model=sample_paths["model"], threshold=0.5)
    _, other_schema, _ = _training(sample_paths, SchemaSpec(categorical=("duration",)))
    with pytest.raises(StaleArtifactError, match="feature 'duration' is"):
        load_pool(out, frame, other_schema, data=sample_paths["data"], model=sample_paths["model"], threshold=0.5)


def test_corrupted_or_foreign_pool_is_refused(sample_paths, pool_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for file in pool_dir.iterdir():
        (broken / file.name).write_bytes(file.read_bytes())
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest["kind"] = "graph"
    (broken / "manifest.json").write_text(json.dumps(manifest))
    assert "expected a 'pool' artifact" in _refused(sample_paths, broken)
    manifest["kind"] = "pool"
    (broken / "manifest.json").write_text(json.dumps(manifest))
    text = bytearray((broken / "encoder.json").read_bytes())      # small payloads: sha256 checked
    text[len(text) // 2] ^= 0x01
    (broken / "encoder.json").write_bytes(bytes(text))
    assert "encoder.json" in (message := _refused(sample_paths, broken)) and "corrupted" in message
    (broken / "encoder.json").write_bytes((pool_dir / "encoder.json").read_bytes())
    rows = (broken / "X.npy").read_bytes()                          # memory-mapped arrays: size checked
    (broken / "X.npy").write_bytes(rows[:-8])
    message = _refused(sample_paths, broken)
    assert "X.npy" in message and "corrupted" in message and "size" in message


def test_pool_arrays_are_memory_mapped_read_only(sample_paths, pool_dir):
    frame, schema, _ = _training(sample_paths)
    pooled = load_pool(pool_dir, frame, schema, data=sample_paths["data"], model=sample_paths["model"],
                       threshold=0.5, scale="effort")
    for array in (pooled.X, pooled.probability, pooled.codes.immutable, pooled.codes.monotone):
        assert isinstance(array, np.memmap) and not array.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        pooled.X[0, 0] = 1.0


def test_pool_of_an_earlier_version_still_loads(sample_paths, pool_dir, tmp_path):
    """Pools written before the arrays were memory-mapped hold them in one compressed pool.npz."""
    from frpd_cli.artifacts import write_artifact

    current = read_artifact(pool_dir, kind=POOL_KIND, command_hint="-")
    arrays = {name: np.array(current.load_npy(f"{name}.npy"))
              for name in ("X", "probability", "immutable", "monotone", "direction")}
    old = write_artifact(tmp_path / "old", kind=POOL_KIND, params=current.params,
                         inputs={"data": sample_paths["data"], "model": sample_paths["model"]},
                         payloads={"pool.npz": arrays, "encoder.json": current.load_json("encoder.json")})
    frame, schema, _ = _training(sample_paths)
    a, b = (load_pool(folder, frame, schema, data=sample_paths["data"], model=sample_paths["model"], threshold=0.5,
                      scale="effort") for folder in (pool_dir, old))
    assert np.array_equal(a.X, b.X) and np.array_equal(a.probability, b.probability)
    assert np.array_equal(a.codes.immutable, b.codes.immutable) and not isinstance(b.X, np.memmap)


def test_a_run_with_the_pool_does_not_parse_the_training_csv(sample_paths, pool_dir, monkeypatch):
    # the pool holds the CSV as parsed (checked by the CSV's sha256): read_training takes it from there, equal
    # in values, dtypes and column order to a parse of the CSV, and the training set is the same
    import frpd_cli.dataset as dataset
    from frpd_cli.cli._options import SchemaFlags, read_training

    parsed = read_training_frame(sample_paths["data"])
    flags = SchemaFlags(schema=sample_paths["schema"])
    expected, _, _ = read_training(sample_paths["data"], sample_paths["model"], flags)

    def refuse(*args, **kwargs):
        raise AssertionError("the training CSV was parsed")

    monkeypatch.setattr(dataset, "read_training_frame", refuse)
    seen = []
    training, _, _ = read_training(sample_paths["data"], sample_paths["model"], flags, pool=pool_dir,
                                   on_frame=seen.append)
    pd.testing.assert_frame_equal(seen[0], parsed, check_exact=True)
    assert list(map(str, seen[0].dtypes)) == list(map(str, parsed.dtypes))
    pd.testing.assert_frame_equal(training.frame, expected.frame, check_exact=True)
    assert np.array_equal(training.X, expected.X) and np.array_equal(training.labeled, expected.labeled)


def test_a_damaged_or_foreign_parsed_csv_in_the_pool_is_not_used(sample_paths, pool_dir, tmp_path, monkeypatch):
    # a parsed column whose bytes differ from the manifest's sha256, or written by another pandas version: the
    # CSV is parsed instead, and the plans are those of a run without the pool
    import frpd_cli.dataset as dataset

    calls = []
    real = dataset.read_training_frame
    monkeypatch.setattr(dataset, "read_training_frame", lambda *a, **k: calls.append(a) or real(*a, **k))
    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), "--format", "csv")]
    without = runner.invoke(app, args)
    assert without.exit_code == 0 and len(calls) == 1
    for damage in ("bytes", "pandas"):
        broken = tmp_path / damage
        broken.mkdir()
        for file in pool_dir.iterdir():
            (broken / file.name).write_bytes(file.read_bytes())
        if damage == "bytes":
            codes = bytearray((broken / "frame_1.npy").read_bytes())   # a text column's codes: 0 -> 1
            codes[-1] ^= 0x01
            (broken / "frame_1.npy").write_bytes(bytes(codes))
        else:
            described = json.loads((broken / "frame.json").read_text())
            described["pandas"] = "0.0"
            from frpd_cli.artifacts import write_artifact

            current = read_artifact(pool_dir, kind=POOL_KIND, command_hint="-")
            payloads = {name: (current.load_json(name) if name.endswith(".json")
                               else np.array(current.load_npy(name))) for name in current.payload_names}
            payloads["frame.json"] = described
            write_artifact(broken, kind=POOL_KIND, params=current.params,
                           inputs={"data": sample_paths["data"], "model": sample_paths["model"]}, payloads=payloads)
        before = len(calls)
        result = runner.invoke(app, [*args, "--pool", str(broken)])
        assert result.exit_code == 0, result.stderr
        assert result.stdout == without.stdout and len(calls) == before + 1, damage


def test_parsed_columns_round_trip_exactly_or_are_not_kept(tmp_path):
    # text with missing values and non-ASCII levels, booleans, floats with NaN, a column of numbers and text:
    # rebuilt equal to the parse; a column of another kind (dates parsed by the caller) is not kept at all
    from frpd_cli.pool import _frame_payloads, _rebuild_frame

    path = tmp_path / "odd.csv"
    path.write_text("a,b,c,d,e\nx,True,1.5,1,7\n,False,,b,8\nÿé,True,2.0,3,9\nx,False,3.25,,10\n", encoding="utf-8")
    frame = read_training_frame(path)
    payloads = _frame_payloads(frame)
    assert payloads is not None
    rebuilt = _rebuild_frame(payloads["frame.json"], {k: v for k, v in payloads.items() if k.endswith(".npy")})
    pd.testing.assert_frame_equal(rebuilt, frame, check_exact=True)
    assert list(map(str, rebuilt.dtypes)) == list(map(str, frame.dtypes))
    assert rebuilt["a"].isna().tolist() == [False, True, False, False]
    dated = frame.assign(e=pd.to_datetime(frame["e"], unit="D"))
    assert _frame_payloads(dated) is None


def test_the_pools_labelled_rows_are_used_only_for_its_target_and_favourable_class(sample_paths, pool_dir,
                                                                                   tmp_path, monkeypatch):
    # labeled.npy is taken as it is when the manifest's target and favourable class (type included) are the
    # schema's and its bytes are the manifest's; otherwise the rows are labelled from the CSV, as without a pool
    import frpd_cli.pool as pool_module
    from frpd_cli.artifacts import write_artifact
    from frpd_cli.dataset import labeled_rows

    frame, schema, _ = _training(sample_paths)
    expected = labeled_rows(frame, schema)
    assert 0 < expected.sum() < expected.size
    calls = []
    monkeypatch.setattr(pool_module, "labeled_rows", lambda f, s: calls.append(1) or labeled_rows(f, s))
    load = dict(data=sample_paths["data"], model=sample_paths["model"], threshold=0.5, scale="effort")
    assert np.array_equal(load_pool(pool_dir, frame, schema, **load).labeled, expected) and not calls
    current = read_artifact(pool_dir, kind=POOL_KIND, command_hint="-")
    payloads = {name: (current.load_json(name) if name.endswith(".json") else np.array(current.load_npy(name)))
                for name in current.payload_names}
    for case in ("favourable as text", "labels damaged"):
        params, arrays = dict(current.params), dict(payloads)
        if case == "favourable as text":
            params["labeled_by"] = [params["labeled_by"][0], repr(str(schema.favorable))]
        else:
            arrays["labeled.npy"] = ~arrays["labeled.npy"]
        out = write_artifact(tmp_path / case.replace(" ", "_"), kind=POOL_KIND, params=params,
                             inputs={"data": sample_paths["data"], "model": sample_paths["model"]}, payloads=arrays)
        if case == "labels damaged":        # bytes that differ from the manifest's sha256
            manifest = json.loads((out / "manifest.json").read_text())
            manifest["payloads"]["labeled.npy"]["sha256"] = current.manifest["payloads"]["labeled.npy"]["sha256"]
            (out / "manifest.json").write_text(json.dumps(manifest))
        before = len(calls)
        assert np.array_equal(load_pool(out, frame, schema, **load).labeled, expected), case
        assert len(calls) == before + 1, case


def test_forked_workers_inherit_the_pools_compact_rows_and_grouping(sample_paths):
    # with --jobs, the pool's compact rows and immutable grouping are computed in this process before the
    # workers are forked (they share the pages); the plans are those of one process
    from frpd_cli.backends import available_cpus, forks_workers
    from frpd_cli.choice import PlanSettings
    from frpd_cli.planning import plan_applicants

    if available_cpus() < 2 or not forks_workers():
        pytest.skip("needs two CPUs and forked workers")
    frame, schema, model = _training(sample_paths)
    applicants = pd.concat([pd.read_csv(sample_paths["applicants"])] * 10, ignore_index=True)
    ids = [str(i) for i in range(len(applicants))]
    settings = PlanSettings(method="quad", k=3)
    runs = {}
    for n_jobs in (1, 2):
        training = build_training_set(frame, schema, model)
        runs[n_jobs] = [p for chunk in plan_applicants(training, model, applicants, ids, settings, n_jobs=n_jobs)
                        for p in chunk]
        if n_jobs == 2:                     # computed here, in the parent, which plans nothing itself
            assert "_pool_index" in training.__dict__ and "_pool_rows" in training.__dict__
            rows, X_rows = training.pool_rows(training.favorable)
            assert training.__dict__["_pool_index"][0] is training.favorable
            assert np.array_equal(rows, np.flatnonzero(training.favorable)) and np.array_equal(X_rows, training.X[rows])
    assert runs[1] == runs[2] and len(runs[1]) == 200


def test_a_run_with_the_pool_does_not_infer_the_schema(sample_paths, pool_dir, monkeypatch):
    # build-pool keeps the inferred schema and the identifier-like features (derived.json); a run with the same
    # declarations takes them from there, equal to what inference gives, and the training set is the same
    import frpd_cli.schema as schema_module
    from frpd_cli.cli._options import SchemaFlags, read_training

    flags = SchemaFlags(schema=sample_paths["schema"])
    expected, _, _ = read_training(sample_paths["data"], sample_paths["model"], flags)

    def refuse(*args, **kwargs):
        raise AssertionError("the schema was inferred again")

    monkeypatch.setattr(schema_module, "infer_schema", refuse)
    monkeypatch.setattr(schema_module, "id_like_columns", refuse)
    training, _, _ = read_training(sample_paths["data"], sample_paths["model"], flags, pool=pool_dir)
    assert training.schema == expected.schema
    assert np.array_equal(training.X, expected.X) and training.encoder.to_dict() == expected.encoder.to_dict()


def test_a_run_with_the_pools_schema_reads_its_encoder_and_copies(sample_paths, pool_dir, monkeypatch, tmp_path):
    # with the stored schema the encoder is read from the pool, not fitted (equal to the fitted one, knots
    # included), and the copies of each row come from copy_of.npy (equal to grouping the rows); with a schema of
    # other declarations the encoder is fitted again
    from dataclasses import replace

    import frpd_cli.pool as pool_module
    from frpd_cli.candidates import first_copies
    from frpd_cli.cli._options import SchemaFlags, read_training

    flags = SchemaFlags(schema=sample_paths["schema"])
    expected, _, _ = read_training(sample_paths["data"], sample_paths["model"], flags)

    def refuse(*args, **kwargs):
        raise AssertionError("the encoder was fitted again")

    with monkeypatch.context() as m:
        m.setattr(pool_module, "fit_encoder", refuse)
        training, _, _ = read_training(sample_paths["data"], sample_paths["model"], flags, pool=pool_dir)
    assert training.encoder.to_dict() == expected.encoder.to_dict()
    for a, b in zip(training.encoder.knots, expected.encoder.knots):
        assert (a is None and b is None) or all(np.array_equal(u, v) for u, v in zip(a, b))
    assert np.array_equal(training.encoder.minimum, expected.encoder.minimum, equal_nan=True)
    names = list(expected.schema.feature_names)
    copies = expected.frame[names].groupby(names, sort=False, dropna=False).ngroup().to_numpy()
    first_row = {g: i for i, g in reversed(list(enumerate(copies)))}
    assert training._copy_of.tolist() == [first_row[g] for g in copies]
    for kind in ("predicted", "labeled"):
        a, b = first_copies(training, training.pool(kind)), first_copies(expected, expected.pool(kind))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    # a damaged copy_of.npy (its sha256 not the manifest's) is not used: the copies are grouped from the rows
    damaged = tmp_path / "pool"
    shutil.copytree(pool_dir, damaged)
    stored = np.load(damaged / "copy_of.npy")
    with open(damaged / "copy_of.npy", "r+b") as handle:      # every row a copy of the first: same size
        handle.seek(-stored.nbytes, 2)
        handle.write(np.zeros(stored.size, dtype=stored.dtype).tobytes())
    again, _, _ = read_training(sample_paths["data"], sample_paths["model"], flags, pool=damaged)
    assert "_copy_of" not in again.__dict__
    a, b = first_copies(again, again.pool()), first_copies(expected, expected.pool())
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[0].sum() > 1
    other = replace(flags, max_moves=["0.5"])
    with monkeypatch.context() as m:
        m.setattr(pool_module, "fit_encoder", refuse)
        with pytest.raises(AssertionError, match="fitted again"):
            read_training(sample_paths["data"], sample_paths["model"], other, pool=pool_dir)


def test_the_pools_schema_is_used_only_with_what_it_was_derived_from(sample_paths, pool_dir, monkeypatch):
    # the stored schema is a function of the CSV (its sha256 checked when the pool is opened), the declarations,
    # the text encoding, the pandas and numpy versions and the inference code: any of these changed, and the
    # pool gives none (the schema is inferred as without a pool)
    from dataclasses import replace

    import frpd_cli.pool as pool_module
    from frpd_cli.cli._options import SchemaFlags
    from frpd_cli.pool import open_pool, pool_schema

    frame = read_training_frame(sample_paths["data"])
    spec = SchemaFlags(schema=sample_paths["schema"]).spec()         # as build-pool declared it
    artifact = open_pool(pool_dir, data=sample_paths["data"], model=sample_paths["model"])
    schema, id_like = pool_schema(artifact, spec)
    assert schema == infer_schema(frame, spec) and id_like == []
    other_spec = replace(spec, max_move=0.5)
    assert infer_schema(frame, other_spec) != schema
    assert pool_schema(artifact, other_spec) == (None, None)
    assert pool_schema(artifact, spec, encoding="latin-1") == (None, None)
    for target, name, value in ((pd, "__version__", "0.0"), (np, "__version__", "0.0"),
                                (pool_module, "_deriving_code_digest", lambda: "0" * 64)):
        with monkeypatch.context() as m:
            m.setattr(target, name, value)
            assert pool_schema(artifact, spec) == (None, None), name
    assert pool_schema(artifact, spec)[0] == schema


def test_plans_with_other_declarations_than_the_pools_are_those_without_the_pool(sample_paths, pool_dir):
    # --max-move changes the schema but not the pool's encoded rows: the pool is used, its stored schema is not
    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), "--format", "csv",
                             "--max-move", "0.1")]
    without = runner.invoke(app, args)
    with_pool = runner.invoke(app, [*args, "--pool", str(pool_dir)])
    assert without.exit_code == 0 and with_pool.exit_code == 0, with_pool.stderr
    default = runner.invoke(app, args[:-2])
    assert without.stdout != default.stdout and with_pool.stdout == without.stdout


def test_the_identifier_warning_is_the_same_with_the_pool(sample_paths, tmp_path):
    # the identifier-like features come from the pool's derived.json: the warning is the one a run without the
    # pool prints (a column of consecutive numbers, a different one in every row)
    frame = pd.read_csv(sample_paths["data"])
    frame["duration"] = np.arange(1, len(frame) + 1)
    data = tmp_path / "credit.csv"
    frame.to_csv(data, index=False)
    common = [str(data), "--model", str(sample_paths["model"]), "--schema", str(sample_paths["schema"])]
    built = runner.invoke(app, ["build-pool", *common, "--out", str(tmp_path / "pool")])
    assert built.exit_code == 0, built.stderr
    derived = read_artifact(tmp_path / "pool", kind=POOL_KIND, command_hint="-").load_json("derived.json")
    assert derived["id_like"] == ["duration"]
    args = ["plan", *common, "--applicants", str(sample_paths["applicants"]), "--format", "csv"]
    without = runner.invoke(app, args)
    with_pool = runner.invoke(app, [*args, "--pool", str(tmp_path / "pool")])
    assert without.exit_code == 0 and with_pool.exit_code == 0, with_pool.stderr
    warning = [line for line in without.stderr.splitlines() if "like an identifier" in line]
    assert len(warning) == 1 and "'duration'" in warning[0]
    assert warning[0] in with_pool.stderr.splitlines() and with_pool.stdout == without.stdout


def test_training_rows_scored_in_slices_are_scored_as_in_one_call(sample_paths, monkeypatch):
    # with slices of one call block (512 rows) the 2,000 sample rows are scored in four slices: the same
    # probabilities, bit for bit, as one call on every row; a bad output in the third slice names its data row
    import frpd_cli.dataset as dataset
    from frpd_cli.exceptions import ModelOutputError

    frame, schema, model = _training(sample_paths)
    whole = build_training_set(frame, schema, model)
    monkeypatch.setattr(dataset, "SCORE_SLICE_BLOCKS", 1)
    calls = []

    class Counted:
        threshold = model.threshold

        def favorable_probability(self, rows):
            calls.append(len(rows))
            return model.favorable_probability(rows)

    told = []
    sliced = build_training_set(frame, schema, Counted(), progress=lambda done, n: told.append((done, n)))
    assert calls == [512, 512, 512, 464]
    assert np.array_equal(whole.probability, sliced.probability)
    # the progress is told before the first slice and after each, the rows scored so far of all
    assert told == [(0, 2000), (512, 2000), (1024, 2000), (1536, 2000), (2000, 2000)]

    class Broken(Counted):
        def favorable_probability(self, rows):
            if 1234 in rows.index:
                raise ModelOutputError(model="m.pkl", row=int(rows.index.get_loc(1234)), n_rows=len(rows), n_bad=1,
                                       problem="returned nonsense: [nan]")
            return model.favorable_probability(rows)

    with pytest.raises(ModelOutputError, match=r"data row 1235 \(line 1236\)"):
        build_training_set(frame, schema, Broken())


def test_a_pool_of_another_version_gets_a_hint_and_the_same_plans(sample_paths, pool_dir, monkeypatch, tmp_path):
    # a pool whose stored schema was derived by other code (another frpd, pandas or numpy) is used without it,
    # with a hint to rebuild it; a pool of the same versions, or one used with other declarations, gets none
    import frpd_cli.pool as pool_module

    args = ["plan", *_common(sample_paths, "--applicants", str(sample_paths["applicants"]), "--format", "csv",
                             "--quiet", "--pool", str(pool_dir))]
    current = runner.invoke(app, args)
    assert current.exit_code == 0 and "Hint: the pool" not in current.stderr
    other = runner.invoke(app, [*args, "--max-move", "0.5"])
    assert other.exit_code == 0 and "Hint: the pool" not in other.stderr
    with monkeypatch.context() as m:
        m.setattr(pool_module, "_deriving_code_digest", lambda: "0" * 64)
        outdated = runner.invoke(app, args)
    assert outdated.exit_code == 0 and outdated.stdout == current.stdout
    assert f"Hint: the pool '{pool_dir}' was built by another version" in outdated.stderr
    assert "(2000 rows)" in outdated.stderr and "frpd build-pool DATA" in outdated.stderr
    # a pool that keeps no schema at all (one JSON cannot hold exactly is never kept): a rebuild would not help
    frame, schema, model = _training(sample_paths)
    bare = write_pool(tmp_path / "bare", build_training_set(frame, schema, model, scale="effort"),
                      data=sample_paths["data"], model=sample_paths["model"], threshold=0.5)
    without = runner.invoke(app, [*args[:-1], str(bare)])
    assert without.exit_code == 0 and without.stdout == current.stdout and "Hint: the pool" not in without.stderr


@pytest.fixture(scope="module")
def credit_with_ids(tmp_path_factory, sample_paths):
    """The sample data with an identifier column first (no schema file: --id-column alone names it)."""
    frame = pd.read_csv(sample_paths["data"])
    frame.insert(0, "applicant_id", [f"C{i:05d}" for i in range(len(frame))])
    data = tmp_path_factory.mktemp("ids") / "credit.csv"
    frame.to_csv(data, index=False)
    return data


def test_build_pool_leaves_the_id_column_out_and_plans_as_plan_does(sample_paths, credit_with_ids, tmp_path):
    common = [str(credit_with_ids), "--model", str(sample_paths["model"]), "--immutable", "personal_status",
              "--increasing", "age", "--id-column", "applicant_id"]
    built = runner.invoke(app, ["build-pool", *common, "--out", str(tmp_path / "pool")])
    assert built.exit_code == 0, built.stderr
    encoder = read_artifact(tmp_path / "pool", kind=POOL_KIND, command_hint="-").load_json("encoder.json")
    names = [f["name"] for f in encoder["schema"]["features"]]
    assert "applicant_id" not in names and sorted(names) == sorted(pd.read_csv(sample_paths["data"]).columns[:-1])
    args = ["plan", *common, "--applicants", str(sample_paths["applicants"]), "--format", "csv"]
    without = runner.invoke(app, args)
    with_pool = runner.invoke(app, [*args, "--pool", str(tmp_path / "pool")])
    assert without.exit_code == 0 and with_pool.exit_code == 0, with_pool.stderr
    assert with_pool.stdout == without.stdout and without.stdout.count("\n") > 20


def test_build_pool_ignores_an_id_column_the_data_does_not_have_and_builds_the_pool(sample_paths, tmp_path):
    # the same flags as every other command of a script: the training data holds no identifier, the applicants do
    flags = ["--schema", str(sample_paths["schema"]), "--id-column", "applicant_id"]
    result = runner.invoke(app, ["build-pool", str(sample_paths["data"]), "--model", str(sample_paths["model"]),
                                 *flags, "--out", str(tmp_path / "pool")])
    assert result.exit_code == 0, result.stderr
    assert "--id-column" not in result.stderr           # the training data need not hold the applicants' ids
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), *flags,
            "--applicants", str(sample_paths["applicants"]), "--format", "csv"]
    with_pool = runner.invoke(app, [*args, "--pool", str(tmp_path / "pool")])
    assert with_pool.exit_code == 0, with_pool.stderr
    assert with_pool.stdout == runner.invoke(app, args).stdout and "\nA001," in with_pool.stdout


def test_an_id_column_unknown_to_the_model_is_named_with_id_column(sample_paths, credit_with_ids, tmp_path):
    result = runner.invoke(app, ["build-pool", str(credit_with_ids), "--model", str(sample_paths["model"]),
                                 "--out", str(tmp_path / "pool")])
    assert result.exit_code == 1 and "unknown to the model: 'applicant_id'" in result.stderr
    assert "pass --id-column applicant_id" in result.stderr


def test_range_checks_over_the_pools_level_codes_match_the_rows(sample_paths, tmp_path):
    """With a pool, the rows outside a categorical's range are found from the pool's level codes (each level judged
    once); they are those the raw rows give: levels withheld by default (``unknown``) and a declared --range."""
    from frpd_cli.candidates import outside_ranges
    from frpd_cli.cli._options import SchemaFlags, read_training

    frame = read_training_frame(sample_paths["data"])
    frame.loc[::17, "housing"] = "unknown"            # a level recording missing information: withheld
    data = tmp_path / "data.csv"
    frame.to_csv(data, index=False)
    flags = SchemaFlags(schema=sample_paths["schema"], ranges=["job=skilled,unskilled"])
    out = tmp_path / "pool"
    result = runner.invoke(app, ["build-pool", str(data), "--model", str(sample_paths["model"]),
                                 "--schema", str(sample_paths["schema"]), "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    pooled, _, _ = read_training(data, sample_paths["model"], flags, pool=out)
    parsed, _, _ = read_training(data, sample_paths["model"], flags)
    assert set(pooled.__dict__["_level_codes"]) >= {"housing", "job"}
    assert "_level_codes" not in parsed.__dict__
    housing = pooled.schema.feature("housing")
    assert "unknown" in housing.withheld
    got, expected = outside_ranges(pooled), outside_ranges(parsed)
    assert len(got) == len(expected) > 2              # the schema file's numeric ranges too
    for (block_a, rows_a), (block_b, rows_b) in zip(got, expected):
        assert block_a == block_b and rows_a.dtype == bool and np.array_equal(rows_a, rows_b)
    # the oracle: the raw values, one by one
    by_name = dict(zip((f.name for f in pooled.schema.features if f.has_range), got))
    assert np.array_equal(by_name["housing"][1], (frame["housing"] == "unknown").to_numpy())
    assert np.array_equal(by_name["job"][1], ~frame["job"].isin(["skilled", "unskilled"]).to_numpy())
