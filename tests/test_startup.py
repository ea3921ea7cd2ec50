"""Fast start: importing the command line and asking for its version or help loads nothing numerical.

These are invariants on ``sys.modules`` in a fresh interpreter, not timings (timings are in
``benchmarks/bench_startup.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from frpd_cli import __version__
from frpd_cli.cli.app import COMMANDS, app

# Modules that only some commands need; none may be imported by `frpd --version`, `frpd --help` or by
# importing the app (registering the commands).
HEAVY = ("dask", "distributed", "highspy", "matplotlib", "networkx", "sklearn", "scipy", "scipy.stats",
         "scipy.sparse.csgraph", "numpy", "pandas", "joblib")

# the console entry point, as `frpd ARGS` runs it; the modules loaded are reported by an atexit handler (main()
# runs those before it ends the process), the exit status is the process's
_PROBE = """
import atexit, json, sys
sys.argv = ["frpd", *json.loads(sys.argv[1])]
atexit.register(lambda: print(json.dumps({"modules": sorted(sys.modules)}), file=sys.stderr))
import frpd_cli.cli.app as cli
if len(sys.argv) > 1:
    cli.main()
"""


def _modules_after(*args: str) -> tuple[int, set[str], str]:
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(args))], capture_output=True, text=True,
                          check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return done.returncode, set(report["modules"]), done.stdout


@pytest.mark.parametrize("args", [(), ("--version",), ("--help",)], ids=["import", "version", "help"])
def test_start_up_imports_nothing_numerical(args):
    code, modules, stdout = _modules_after(*args)
    assert code in (0, None)
    loaded = sorted(m for m in HEAVY if m in modules)
    assert loaded == [], f"`frpd {' '.join(args)}` imported {loaded}"
    # and no command module: commands are imported when they run (the app's value converter is not one)
    assert not any(m.startswith("frpd_cli.cli.") and m not in ("frpd_cli.cli.app", "frpd_cli.cli._params")
                   for m in modules)
    if args == ("--version",):
        assert stdout.strip() == f"frpd {__version__}"
    if args == ("--help",):
        shown = " ".join(stdout.split())
        for name, (_, summary) in COMMANDS.items():
            assert f"{name} {summary}" in shown      # every command, with its whole summary


def test_running_a_command_imports_only_its_module():
    code, modules, _ = _modules_after("evaluate", "--help")
    assert code == 0
    assert "frpd_cli.cli.evaluation" in modules
    assert not {"frpd_cli.cli.plan", "frpd_cli.cli.selection", "frpd_cli.cli.graph"} & modules


def test_command_list_matches_each_command_docstring():
    # the summaries `frpd --help` shows without importing the commands are the commands' own first paragraphs
    for module in {m for m, _ in COMMANDS.values()}:
        __import__(f"frpd_cli.cli.{module}")
    group = typer.main.get_command(app)
    registered = {name for name in group.commands}
    assert registered == set(COMMANDS), "COMMANDS must list every registered command (and only those)"
    for name, (_, summary) in COMMANDS.items():
        first = " ".join(group.commands[name].help.split("\n\n")[0].split())
        assert first == summary, f"COMMANDS[{name!r}] differs from the command's docstring"


def test_deferred_command_runs_and_reports_usage_errors():
    runner = CliRunner()
    result = runner.invoke(app, ["select", "--help"])
    assert result.exit_code == 0 and "--applicants" in result.stdout
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code == 2 and result.stdout == ""


def test_option_choices_equal_the_library_constants():
    # _options spells the choice lists out (importing them would load the numerical modules at start-up)
    from frpd_cli.backends import BACKENDS
    from frpd_cli.choice import PLAN_METHODS, SCHEMES
    from frpd_cli.cli import _options as o
    from frpd_cli.cli._output import FORMATS
    from frpd_cli.dataset import CANDIDATE_POOLS
    from frpd_cli.evaluation import MANIFOLDS
    from frpd_cli.interpolation import ENDPOINTS
    from frpd_cli.projection import IMMUTABLE_POLICIES

    assert o.BACKENDS == BACKENDS and o.PLAN_METHODS == PLAN_METHODS and o.SCHEMES == SCHEMES
    assert o.CANDIDATE_POOLS == CANDIDATE_POOLS and o.MANIFOLDS == MANIFOLDS and o.ENDPOINTS == ENDPOINTS
    assert o.IMMUTABLE_POLICIES == IMMUTABLE_POLICIES and o.FORMATS == FORMATS


# --- parameter conversion without pydantic (frpd_cli.cli._params) ---

# values of every kind a command line, a default or a caller can hand to a parameter: valid ones of each
# type, malformed ones, out-of-range ones and odd spellings; each is converted by frpd's cheap converter and by
# typer's own, and both must agree exactly (the value and its type, or the exception and its message)
_VALUES = [None, "", " ", "3", "-2", "+7", "007", " 3", "3 ", "1_000", "2.5", ".5", "5.", "1e3", "1E-2", "1e400",
           "-0", "nan", "inf", "abc", "0x10", "١٢", "quad", "QUAD", "Quad-DP", "csv", "CSV", "auto", "long", "loky",
           "filter", "predicted", "linear", "euclidean", "favorable", "prototype", "-", "x/y.csv", "sample.csv",
           "true", "no", 0, 1, 3, -1, 10**30, 0.0, 0.5, 1.0, 1.5, -0.0, float("nan"), float("inf"), True, False,
           (), ("a",), ("a", "b"), ["age=1:2"], ("1", 2), b"bytes"]


def _outcome(convert, value, param, ctx):
    try:
        result = convert.coerce(value, param=param, ctx=ctx)
    except Exception as exc:  # the outcome compared is the exception itself
        return ("raised", type(exc), str(exc))
    return ("value", type(result), repr(result))


def test_cheap_conversion_equals_typers_for_every_parameter():
    coercion = pytest.importorskip("typer._coercion")
    from frpd_cli.cli._params import FastParam

    for module in {m for m, _ in COMMANDS.values()}:
        __import__(f"frpd_cli.cli.{module}")
    group = typer.main.get_command(app)
    checked = 0
    for command in [group, *group.commands.values()]:
        ctx = typer.Context(command)
        for param in command.get_params(ctx):
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is None:
                pytest.skip("this typer converts values without type descriptors")
            fast, slow = FastParam(descriptor), coercion.build_runtime_param(descriptor)
            for value in _VALUES:
                ours, theirs = _outcome(fast, value, param, ctx), _outcome(slow, value, param, ctx)
                assert ours == theirs, f"{command.name} {param.name} {value!r}"
                checked += 1
    assert checked > 1000


def test_cheap_conversion_reads_numbers_as_typer_does():
    # decimal spellings the fast path reads itself: the same float, bit for bit, as typer's converter
    coercion = pytest.importorskip("typer._coercion")
    from frpd_cli.cli._params import FastParam

    __import__("frpd_cli.cli.plan")
    command = typer.main.get_command(app).commands["plan"]
    ctx = typer.Context(command)
    params = {p.name: p for p in command.params}
    rng = __import__("random").Random(0)
    texts = ["0.1", "0.3", "1e-7", "2.5e-3", "9007199254740993", "0.30000000000000004", "-12.75", "1.", "123456789.123456789"]
    texts += [f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 17)}f}" for _ in range(200)]
    texts += [f"{rng.random():.{rng.randint(1, 20)}g}" for _ in range(200)]
    for name in ("margin", "theta", "tol", "bandwidth", "seed", "k"):
        param = params[name]
        fast, slow = FastParam(param.type_descriptor), coercion.build_runtime_param(param.type_descriptor)
        for text in texts:
            assert _outcome(fast, text, param, ctx) == _outcome(slow, text, param, ctx), (name, text)


# Loaded by a one-applicant linear plan although it needs none of them: typer's pydantic-based converters, the
# graph scheme, the parallel backends, plotting, provenance and the pool artifact.
NOT_FOR_ONE_PLAN = ("pydantic", "pydantic_core", "networkx", "highspy", "dask", "distributed", "matplotlib",
                    "frpd_cli.graph", "frpd_cli.cli.graph", "frpd_cli.provenance", "frpd_cli.pool",
                    "loky")


def test_one_applicant_plan_loads_only_what_it_needs(sample_paths, tmp_path):
    applicants = tmp_path / "one.csv"
    lines = sample_paths["applicants"].read_text(encoding="utf-8").splitlines()
    applicants.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(applicants), "--format", "csv", "-k", "2"]
    code, modules, stdout = _modules_after(*args)
    assert code in (0, None)
    assert stdout.startswith("applicant,status,") and ",ok," in stdout     # it did plan
    loaded = sorted(m for m in NOT_FOR_ONE_PLAN if m in modules)
    assert loaded == [], f"a one-applicant plan imported {loaded}"


def test_schema_command_converts_values_without_pydantic():
    # repeatable options, callback-checked options and a choice, given and defaulted
    sample = Path(__file__).resolve().parent.parent / "sample_data"
    args = ["schema", str(sample / "credit.csv"), "--schema", str(sample / "schema.toml"), "--format", "json",
            "--immutable", "age", "--range", "duration=6:48", "--weight", "duration=2"]
    code, modules, stdout = _modules_after(*args)
    assert code in (0, None)
    assert json.loads(stdout)                       # the command did its work
    assert not [m for m in modules if m.split(".")[0] in ("pydantic", "pydantic_core")]


# ---------------------------------------------------------------------------- loading and scoring for a short run

_LOAD_SAMPLE_MODEL = """
import json, sys
from frpd_cli.model import load_model
load_model(sys.argv[1], favorable=1, feature_names=json.loads(sys.argv[2]))
before = "sklearn.linear_model" in sys.modules
import sklearn
import sklearn.compose
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor, make_column_transformer
names = sorted(sklearn.compose.__all__)
print(json.dumps({"linear_model_after_load": before, "all": names,
                  "has_hook": "__getattr__" in vars(sklearn.compose),
                  "same_class": ColumnTransformer.__module__ + "." + ColumnTransformer.__qualname__,
                  "target": TransformedTargetRegressor.__module__,
                  "linear_model_after_use": "sklearn.linear_model" in sys.modules}))
"""

SAMPLE_FEATURES = ["age", "personal_status", "duration", "credit_amount", "housing", "job", "savings"]


def test_loading_a_pipeline_defers_sklearn_compose_until_it_is_used(sample_paths):
    # sklearn.compose's __init__ imports all of sklearn.linear_model, which the sample MLP pipeline does not use;
    # once anything reads from the package, it is the complete package
    done = subprocess.run([sys.executable, "-c", _LOAD_SAMPLE_MODEL, str(sample_paths["model"]),
                           json.dumps(SAMPLE_FEATURES)], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["linear_model_after_load"] is False
    assert report["all"] == ["ColumnTransformer", "TransformedTargetRegressor", "make_column_selector",
                             "make_column_transformer"]
    assert report["has_hook"] is False
    assert report["same_class"] == "sklearn.compose._column_transformer.ColumnTransformer"
    assert report["target"] == "sklearn.compose._target"
    # once used, the package has imported what a plain import of it imports (sklearn.linear_model, in the versions
    # whose sklearn.compose imports it)
    plain = subprocess.run([sys.executable, "-c", "import sys, sklearn.compose; "
                            "print('sklearn.linear_model' in sys.modules)"], capture_output=True, text=True, check=True)
    assert report["linear_model_after_use"] is (plain.stdout.strip() == "True")


def test_one_applicant_plan_with_the_sample_model_skips_sklearn_linear_model(sample_paths, tmp_path):
    applicants = tmp_path / "one.csv"
    lines = sample_paths["applicants"].read_text(encoding="utf-8").splitlines()
    applicants.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    args = ["plan", str(sample_paths["data"]), "--model", str(sample_paths["model"]), "--schema",
            str(sample_paths["schema"]), "--applicants", str(applicants), "--format", "csv"]
    code, modules, stdout = _modules_after(*args)
    assert code in (0, None)
    assert ",ok," in stdout
    assert "sklearn.linear_model" not in modules
    # nor the modules only a run writing --output FILE needs
    assert "frpd_cli.streaming" not in modules and "frpd_cli.artifacts" not in modules


def test_deferred_package_is_left_alone_when_already_imported():
    # loaded on purpose, and used: an earlier in-process run may have left the package deferred (registered, its
    # __init__ not run yet); reading one of its names runs it, as any use would
    from sklearn.compose import ColumnTransformer  # noqa: F401

    from frpd_cli import model as model_module

    before = sys.modules["sklearn.compose"]
    model_module._defer_package_inits()
    assert sys.modules["sklearn.compose"] is before and "__getattr__" not in vars(before)
    model_module._defer_package_inits(("frpd_no_such_package_here",))      # no spec: nothing registered
    assert "frpd_no_such_package_here" not in sys.modules


def _credit_frame(n: int, seed: int):
    import numpy as np
    import pandas as pd

    sample = Path(__file__).resolve().parent.parent / "sample_data" / "credit.csv"
    frame = pd.read_csv(sample)[SAMPLE_FEATURES]
    rows = np.random.default_rng(seed).integers(0, len(frame), size=n)
    return frame.iloc[rows].reset_index(drop=True)


def test_a_large_first_batch_is_checked_on_its_first_rows_with_the_same_bits(sample_paths, monkeypatch):
    from sklearn.compose import ColumnTransformer

    from frpd_cli import _rowwise
    from frpd_cli.model import load_model

    rows = _credit_frame(_rowwise._PROBE_ROWS + 1500, 3)
    seen = []
    original = ColumnTransformer.transform

    def counting(self, X, **params):
        seen.append(len(X))
        return original(self, X, **params)

    monkeypatch.setattr(ColumnTransformer, "transform", counting)
    fast = load_model(sample_paths["model"], favorable=1, feature_names=SAMPLE_FEATURES)
    got = fast.favorable_probability(rows)
    assert seen == [_rowwise._PROBE_ROWS]            # scikit-learn transformed the probe only
    assert _rowwise.compiled_prefix(fast.estimator.steps[0][1])      # and the compiled form was accepted
    seen.clear()
    monkeypatch.setattr(_rowwise, "compile_prefix", lambda transformer, frame, reference=None: None)
    slow = load_model(sample_paths["model"], favorable=1, feature_names=SAMPLE_FEATURES)
    want = slow.favorable_probability(rows)
    assert seen and sum(seen) == len(rows)          # every row through scikit-learn
    assert got.tobytes() == want.tobytes()


def test_frames_in_any_column_order_score_the_same(sample_paths):
    from frpd_cli.model import load_model

    model = load_model(sample_paths["model"], favorable=1, feature_names=SAMPLE_FEATURES)
    rows = _credit_frame(40, 4)
    assert tuple(rows.columns) == model.input_columns           # passed on without a copy
    reordered = rows[list(reversed(SAMPLE_FEATURES))].assign(extra=1.0)
    for batch in (rows, reordered, rows.iloc[5:9], reordered.iloc[5:9]):
        want = model.estimator.predict_proba(batch[list(model.input_columns)])[:, 1]
        got = model.favorable_probability(batch)
        assert got.shape == (len(batch),)
        # the same bits whatever the column order; and the estimator's own probability (blocks may round the last
        # bit differently from one unblocked call, so that comparison is to 1e-12)
        assert got.tobytes() == model.favorable_probability(batch[list(model.input_columns)]).tobytes()
        assert abs(got - want).max() < 1e-12


@pytest.mark.parametrize("values", [
    ["a", "b", "a", "c"],
    ["a", "b", "unknown", "c"],          # an unknown level: left to Series.map and its fallback
    ["a", None, "b", "c"],               # a missing value
    ["1", "2", "1", "2"],
    [1, 2, 1, 2],                        # numbers against text levels
], ids=["known", "unknown", "missing", "digits", "numbers"])
@pytest.mark.parametrize("dtype", [object, "string", "str"])
def test_text_level_lookup_agrees_with_series_map(values, dtype):
    import numpy as np
    import pandas as pd

    from frpd_cli.encoding import _text_level_codes

    levels = ("a", "b", "c", "1", "2")
    index = {level: i for i, level in enumerate(levels)}
    try:
        series = pd.Series(values, dtype=dtype)
    except (TypeError, ValueError):
        pytest.skip("this dtype does not hold these values")
    mapped = series.map(index)
    codes = _text_level_codes(index, series)
    if mapped.isna().any():
        assert codes is None                    # anything Series.map does not match goes the usual way
    elif codes is not None:
        assert codes.dtype == np.int64 and codes.tolist() == mapped.astype(np.int64).tolist()
    assert _text_level_codes({1: 0, 2: 1}, series) is None         # levels that are not text: never taken


@pytest.mark.parametrize("code, status, err", [(None, 0, ""), (0, 0, ""), (3, 3, ""), ("oops", 1, "oops\n")])
def test_leaving_flushes_the_streams_runs_atexit_and_keeps_the_exit_status(code, status, err):
    # the console script ends without tearing the interpreter down: what was printed must still get out, the
    # atexit handlers still run (after stdout is flushed), and the status is the one sys.exit(code) gives
    script = ("import atexit, sys\n"
              "from frpd_cli.cli.app import _leave\n"
              "atexit.register(lambda: sys.stdout.write('|atexit'))\n"
              "sys.stdout.write('data' * 10000)\n"
              f"_leave({code!r})\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == status
    assert done.stdout == "data" * 10000 + "|atexit"
    assert done.stderr == err
