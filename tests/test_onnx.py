"""ONNX models: the sample pipeline exported to ONNX plans like the pickle; bad files and graphs give clear errors."""

from __future__ import annotations

import csv
import io
import json
import pickle
import subprocess
import sys

import joblib
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from frpd_cli.cli.app import app
from frpd_cli.exceptions import ModelError
from frpd_cli.model import SCORE_BLOCK_ROWS, load_model

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (extra 'onnx')")
onnx = pytest.importorskip("onnx", reason="onnx is not installed (extra 'onnx')")
from onnx import TensorProto, helper  # noqa: E402

runner = CliRunner()
FEATURES = ["age", "personal_status", "duration", "credit_amount", "housing", "job", "savings"]


def _skl2onnx():
    return pytest.importorskip("skl2onnx", reason="skl2onnx (the scikit-learn to ONNX converter) is not installed")


def _export(pipeline, frame: pd.DataFrame, path, *, zipmap: bool):
    """The ONNX recipe of docs/models.md: one input per column, float for numbers, string for text."""
    skl2onnx = _skl2onnx()
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    types = [(c, FloatTensorType([None, 1]) if frame[c].dtype.kind in "if" else StringTensorType([None, 1]))
             for c in frame.columns]
    proto = skl2onnx.convert_sklearn(pipeline, initial_types=types, options={id(pipeline): {"zipmap": zipmap}})
    path.write_bytes(proto.SerializeToString())
    return path


@pytest.fixture(scope="module")
def credit(sample_paths) -> pd.DataFrame:
    return pd.read_csv(sample_paths["data"])


@pytest.fixture(scope="module")
def onnx_models(sample_paths, credit, tmp_path_factory) -> dict:
    """The sample model exported twice: with ZipMap ({label: probability} maps) and with a plain tensor."""
    pipeline = joblib.load(sample_paths["model"])
    folder = tmp_path_factory.mktemp("onnx")
    frame = credit[FEATURES]
    return {"zipmap": _export(pipeline, frame, folder / "zipmap.onnx", zipmap=True),
            "tensor": _export(pipeline, frame, folder / "tensor.onnx", zipmap=False)}


def _plan_csv(paths, model, *extra) -> list[dict]:
    result = runner.invoke(app, ["plan", str(paths["data"]), "--model", str(model), "--schema", str(paths["schema"]),
                                 "--applicants", str(paths["applicants"]), "--format", "csv", *extra])
    assert result.exit_code == 0, result.stderr
    return list(csv.DictReader(io.StringIO(result.stdout)))


# ------------------------------------------------------------------ acceptance: the same recourses as the pickle


@pytest.mark.parametrize("form", ["zipmap", "tensor"])
def test_onnx_export_plans_the_same_recourses_as_the_pickle(sample_paths, onnx_models, form):
    expected = _plan_csv(sample_paths, sample_paths["model"])
    got = _plan_csv(sample_paths, onnx_models[form])
    assert len(got) == len(expected) and len(expected) > 20
    for e, g in zip(expected, got):
        # every field but the probability is identical: same applicant, status, prototypes, recourse values, cost
        assert {k: v for k, v in g.items() if k != "probability"} == {k: v for k, v in e.items() if k != "probability"}
        if e["probability"]:
            assert abs(float(g["probability"]) - float(e["probability"])) <= 1e-5


@pytest.mark.parametrize("form", ["zipmap", "tensor"])
def test_onnx_probabilities_within_1e5_of_the_pickle_on_the_sample_data(sample_paths, onnx_models, credit, form):
    pickled = load_model(sample_paths["model"], favorable=1, feature_names=FEATURES)
    exported = load_model(onnx_models[form], favorable=1, feature_names=FEATURES)
    assert list(exported.estimator.classes_) == [0, 1]
    p = pickled.favorable_probability(credit[FEATURES])
    q = exported.favorable_probability(credit[FEATURES])
    assert q.dtype == np.float64 and q.shape == p.shape
    assert np.max(np.abs(p - q)) <= 1e-5
    # and the decisions agree on every training row (none is within 1e-5 of the threshold here)
    assert np.array_equal(p >= 0.5, q >= 0.5)


def test_onnx_scores_do_not_depend_on_the_batch(sample_paths, onnx_models, credit):
    model = load_model(onnx_models["zipmap"], favorable=1, feature_names=FEATURES)
    rows = credit[FEATURES]
    whole = model.favorable_probability(rows)
    order = np.random.default_rng(0).permutation(len(rows))
    shuffled = model.favorable_probability(rows.iloc[order])
    assert np.array_equal(shuffled, whole[order])          # bit for bit, at other positions in other blocks
    for i in (0, 7, SCORE_BLOCK_ROWS, len(rows) - 1):
        assert model.favorable_probability(rows.iloc[[i]])[0] == whole[i]


def test_onnx_favourable_class_found_by_label(tmp_path, credit):
    """String labels in another order than the probabilities' natural one: the favourable column is found by name."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    frame = credit[FEATURES]
    y = np.where(credit["label"] == 1, "good", "bad")
    pipeline = Pipeline([("pre", ColumnTransformer([("oh", OneHotEncoder(), ["personal_status", "housing", "job",
                                                                          "savings"]),
                                                    ("sc", StandardScaler(), ["age", "duration", "credit_amount"])])),
                         ("lr", LogisticRegression(max_iter=500))]).fit(frame, y)
    joblib.dump(pipeline, tmp_path / "m.pkl")
    for zipmap in (True, False):
        path = _export(pipeline, frame, tmp_path / f"m{zipmap}.onnx", zipmap=zipmap)
        for favorable in ("good", "bad"):
            pickled = load_model(tmp_path / "m.pkl", favorable=favorable, feature_names=FEATURES)
            exported = load_model(path, favorable=favorable, feature_names=FEATURES)
            assert exported.favorable == favorable
            p = pickled.favorable_probability(frame)
            assert np.max(np.abs(exported.favorable_probability(frame) - p)) <= 1e-5
            assert p.min() < 0.2 and p.max() > 0.8       # the two columns really differ


def test_onnx_model_pickles_for_worker_processes(sample_paths, onnx_models, credit):
    model = load_model(onnx_models["tensor"], favorable=1, feature_names=FEATURES)
    clone = pickle.loads(pickle.dumps(model))
    assert clone.estimator._session is None              # rebuilt from the bytes when first used
    rows = credit[FEATURES].iloc[:50]
    assert np.array_equal(clone.favorable_probability(rows), model.favorable_probability(rows))


# ------------------------------------------------------------------ errors at the command line


def _plan_error(paths, model) -> str:
    result = runner.invoke(app, ["plan", str(paths["data"]), "--model", str(model), "--schema", str(paths["schema"]),
                                 "--applicants", str(paths["applicants"]), "--format", "csv"])
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def test_malformed_onnx_file_is_an_error_line(sample_paths, tmp_path):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"this is not a protocol buffer \xff\xfe\x00\x01" * 10)
    message = _plan_error(sample_paths, path)
    assert "broken.onnx" in message and "not a valid ONNX model" in message


def test_truncated_onnx_file_is_an_error_line(sample_paths, onnx_models, tmp_path):
    path = tmp_path / "truncated.onnx"
    path.write_bytes(onnx_models["zipmap"].read_bytes()[:1500])
    message = _plan_error(sample_paths, path)
    assert "truncated.onnx" in message


def test_onnx_model_missing_an_input_names_it(sample_paths, credit, tmp_path):
    """A pipeline fitted without the 'job' column: the export has no 'job' input."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    frame = credit[[c for c in FEATURES if c != "job"]]
    pipeline = Pipeline([("pre", ColumnTransformer([("oh", OneHotEncoder(), ["housing"])], remainder="drop")),
                         ("lr", LogisticRegression())]).fit(frame, credit["label"])
    path = _export(pipeline, frame, tmp_path / "no_job.onnx", zipmap=True)
    message = _plan_error(sample_paths, path)
    assert "no input for the feature column(s) 'job'" in message
    assert "no_job.onnx" in message


def test_onnx_input_that_is_not_a_feature_is_named(sample_paths, onnx_models, tmp_path):
    proto = onnx.load(str(onnx_models["zipmap"]))
    for node in proto.graph.node:
        node.input[:] = ["job_code" if name == "job" else name for name in node.input]
    for graph_input in proto.graph.input:
        if graph_input.name == "job":
            graph_input.name = "job_code"
    path = tmp_path / "renamed.onnx"
    onnx.save(proto, str(path))
    message = _plan_error(sample_paths, path)
    assert "'job_code'" in message and "'job'" in message


# ------------------------------------------------------------------ hand-made graphs: one tensor, outputs, labels


def _graph(path, *, n_in: int, n_out_cols=None, classes=None, columns=None, out_name="probabilities",
           extra_nodes=(), domain_op=None):
    """X (float, rows x n_in) -> Softmax over a linear map to n_out columns."""
    n_out = n_in if n_out_cols is None else n_out_cols
    weights = helper.make_tensor("W", TensorProto.FLOAT, [n_in, n_out],
                                 np.arange(1, n_in * n_out + 1, dtype=np.float32).ravel() / 10.0)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["logits"]),
             helper.make_node("Softmax", ["logits"], [out_name], axis=1)]
    if domain_op is not None:
        nodes.insert(0, helper.make_node(domain_op, ["X"], ["X_custom"], domain="com.example.evil"))
        nodes.append(helper.make_node("Identity", ["X_custom"], ["custom_out"]))
    outputs = [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, [None, n_out_cols])]
    if domain_op is not None:
        outputs.append(helper.make_tensor_value_info("custom_out", TensorProto.FLOAT, [None, n_in]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_in])],
                              outputs, initializer=[weights])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.example.evil", 1)] if domain_op else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    props = {}
    if classes is not None:
        props["frpd.classes"] = json.dumps(classes)
    if columns is not None:
        props["frpd.columns"] = json.dumps(columns)
    if props:
        helper.set_model_props(model, props)
    onnx.save(model, str(path))
    return path


def _softmax_reference(X, n_out):
    W = (np.arange(1, X.shape[1] * n_out + 1, dtype=np.float64) / 10.0).reshape(X.shape[1], n_out)
    logits = X @ W
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_single_tensor_input_takes_the_columns_in_the_data_order(tmp_path):
    path = _graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2, classes=[0, 1])
    model = load_model(path, favorable=1, feature_names=["a", "b"])
    rows = pd.DataFrame({"b": [0.5, -1.0, 2.0], "a": [1.0, 3.0, -2.0]})     # order of the frame does not matter
    expected = _softmax_reference(rows[["a", "b"]].to_numpy(), 2)[:, 1]
    assert np.allclose(model.favorable_probability(rows), expected, atol=1e-6)


def test_single_tensor_columns_declared_in_the_metadata(tmp_path):
    path = _graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2, classes=[0, 1], columns=["b", "a"])
    model = load_model(path, favorable=1, feature_names=["a", "b"])
    rows = pd.DataFrame({"a": [1.0, 3.0, -2.0], "b": [0.5, -1.0, 2.0]})
    expected = _softmax_reference(rows[["b", "a"]].to_numpy(), 2)[:, 1]
    assert np.allclose(model.favorable_probability(rows), expected, atol=1e-6)
    with pytest.raises(ModelError, match="frpd.columns"):
        load_model(_graph(tmp_path / "u.onnx", n_in=2, n_out_cols=2, classes=[0, 1], columns=["b", "zz"]),
                   favorable=1, feature_names=["a", "b"])


def test_single_tensor_refuses_text_columns(tmp_path):
    path = _graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2, classes=["no", "yes"])
    model = load_model(path, favorable="yes", feature_names=["a", "b"])
    with pytest.raises(ModelError, match=r"reads column 'b' as numbers .* holds text \(e\.g\. 'own'\)"):
        model.favorable_probability(pd.DataFrame({"a": [1.0], "b": ["own"]}))


def test_graph_without_class_labels_asks_for_them(tmp_path):
    with pytest.raises(ModelError, match="no class labels.*frpd.classes"):
        load_model(_graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2), favorable=1, feature_names=["a", "b"])


def test_output_with_another_number_of_columns_than_classes(tmp_path):
    with pytest.raises(ModelError, match="'probabilities' with 3 column\\(s\\) but 2 class label"):
        load_model(_graph(tmp_path / "t.onnx", n_in=2, n_out_cols=3, classes=[0, 1]), favorable=1,
                   feature_names=["a", "b"])


def test_unexpected_output_shape_at_run_time_is_named(tmp_path):
    """The output's width is not declared: the mismatch shows when scoring, naming the output and its shape."""
    nodes = [helper.make_node("Concat", ["X", "X"], ["wide"], axis=1),
             helper.make_node("Softmax", ["wide"], ["probabilities"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, None])],
                              [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, None])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    helper.set_model_props(proto, {"frpd.classes": "[0, 1]"})
    path = tmp_path / "t.onnx"
    onnx.save(proto, str(path))
    model = load_model(path, favorable=1, feature_names=["a", "b"])
    with pytest.raises(ModelError, match=r"output 'probabilities' of shape \(512, 4\).*expected \(512, 2\)"):
        model.favorable_probability(pd.DataFrame({"a": [1.0], "b": [2.0]}))


def test_graph_without_probability_output_lists_its_outputs(tmp_path):
    path = _graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2, classes=[0, 1])
    proto = onnx.load(str(path))
    proto.graph.node.append(helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1, keepdims=0))
    del proto.graph.output[:]
    proto.graph.output.append(helper.make_tensor_value_info("label", TensorProto.INT64, [None]))
    onnx.save(proto, str(path))
    with pytest.raises(ModelError, match=r"no probability output \(outputs: 'label' \(tensor\(int64\)"):
        load_model(path, favorable=1, feature_names=["a", "b"])


def test_operator_from_an_unknown_domain_is_refused(tmp_path):
    """Only onnxruntime's built-in operators run: no custom-operator library is ever registered."""
    path = _graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2, classes=[0, 1], domain_op="RunShell")
    with pytest.raises(ModelError, match="onnxruntime cannot load"):
        load_model(path, favorable=1, feature_names=["a", "b"])


def test_external_data_is_refused_without_reading_it(tmp_path):
    path = _graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2, classes=[0, 1])
    proto = onnx.load(str(path))
    weights = proto.graph.initializer[0]
    weights.ClearField("float_data")
    weights.ClearField("raw_data")
    weights.data_location = TensorProto.EXTERNAL
    entry = weights.external_data.add()
    entry.key, entry.value = "location", "../../secret.bin"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ModelError, match="external files.*'W'"):
        load_model(path, favorable=1, feature_names=["a", "b"])


def test_missing_onnxruntime_gives_the_install_hint(tmp_path, monkeypatch):
    path = _graph(tmp_path / "t.onnx", n_in=2, n_out_cols=2, classes=[0, 1])
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ModelError, match=r"needs the onnxruntime package.*frpd-cli\[onnx\]"):
        load_model(path, favorable=1, feature_names=["a", "b"])


def test_loading_a_pickle_does_not_import_onnxruntime(sample_paths):
    code = ("import sys; from frpd_cli.model import load_model; "
            f"load_model({str(sample_paths['model'])!r}, favorable=1, feature_names={FEATURES!r}); "
            "print('onnxruntime' in sys.modules, 'frpd_cli.onnx_model' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_onnx_plans_identical_with_worker_processes(sample_paths, onnx_models, credit, tmp_path):
    """Forked workers rebuild their onnxruntime session; the bytes do not depend on --jobs."""
    applicants = credit[FEATURES].head(200).copy()
    applicants.insert(0, "applicant_id", [f"X{i}" for i in range(len(applicants))])
    path = tmp_path / "applicants.csv"
    applicants.to_csv(path, index=False)
    paths = {**sample_paths, "applicants": path}
    outputs = []
    for jobs in ("1", "2"):
        result = runner.invoke(app, ["plan", str(paths["data"]), "--model", str(onnx_models["tensor"]), "--schema",
                                     str(paths["schema"]), "--applicants", str(path), "--format", "csv", "--jobs",
                                     jobs])
        assert result.exit_code == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 100


def test_columns_fed_with_each_input_type(tmp_path):
    """An int64 column and a double column, each its own input: cast as declared; fractions refused for int64."""
    nodes = [helper.make_node("Cast", ["n"], ["n_double"], to=TensorProto.DOUBLE),
             helper.make_node("Concat", ["n_double", "x"], ["both"], axis=1),
             helper.make_node("Softmax", ["both"], ["probabilities"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("n", TensorProto.INT64, [None, 1]),
                                           helper.make_tensor_value_info("x", TensorProto.DOUBLE, [None, 1])],
                              [helper.make_tensor_value_info("probabilities", TensorProto.DOUBLE, [None, 2])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    helper.set_model_props(proto, {"frpd.classes": '["low", "high"]'})
    path = tmp_path / "t.onnx"
    onnx.save(proto, str(path))
    model = load_model(path, favorable="high", feature_names=["x", "n"])
    rows = pd.DataFrame({"x": [0.25, 3.0, -1.5], "n": [2, 0, 7]})
    expected = 1.0 / (1.0 + np.exp(rows["n"].to_numpy(float) - rows["x"].to_numpy()))    # softmax of (n, x), column x
    assert np.allclose(model.favorable_probability(rows), expected, rtol=0, atol=1e-12)
    assert np.allclose(model.favorable_probability(rows.astype({"n": float})), expected, rtol=0, atol=1e-12)
    with pytest.raises(ModelError, match=r"reads column 'n' as integers .* got 2\.5"):
        model.favorable_probability(pd.DataFrame({"x": [0.0], "n": [2.5]}))


# ------------------------------------------------------------------ columns whose names an exporter renames

PUNCTUATED = ["credit amount", "age (years)", "2nd-account"]


def _punctuated_frame(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"credit amount": rng.uniform(500, 9000, n).round(2),
                         "age (years)": rng.integers(20, 70, n),
                         "2nd-account": rng.choice(["none", "savings", "checking"], n)})


def _punctuated_pipeline(frame: pd.DataFrame, label):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

    numeric = [c for c in frame.columns if frame[c].dtype.kind in "if"]
    text = [c for c in frame.columns if c not in numeric]
    pre = ColumnTransformer([("num", MinMaxScaler(), numeric), ("cat", OneHotEncoder(), text)])
    return Pipeline([("pre", pre), ("lr", LogisticRegression(C=10.0, max_iter=2000))]).fit(frame, label)


@pytest.fixture(scope="module")
def punctuated(tmp_path_factory) -> dict:
    """Data whose column names hold spaces and punctuation, a pipeline fitted on them, pickled and exported."""
    folder = tmp_path_factory.mktemp("punctuated")
    frame = _punctuated_frame(3, 600)
    score = frame["credit amount"] / 3000 - frame["age (years)"] / 40 + (frame["2nd-account"] == "savings")
    label = (score > 0.5).astype(int)
    pipeline = _punctuated_pipeline(frame, label)
    frame.assign(label=label).to_csv(folder / "train.csv", index=False)
    joblib.dump(pipeline, folder / "model.pkl")
    onnx_path = _export(pipeline, frame, folder / "model.onnx", zipmap=True)
    candidates = _punctuated_frame(4, 200)
    denied = candidates[pipeline.predict_proba(candidates)[:, 1] < 0.4].head(6)
    denied.to_csv(folder / "applicants.csv", index=False)
    return {"frame": frame, "pipeline": pipeline, "data": folder / "train.csv", "pickle": folder / "model.pkl",
            "onnx": onnx_path, "applicants": folder / "applicants.csv", "n_denied": len(denied)}


def test_punctuated_columns_are_fed_to_their_renamed_inputs(punctuated):
    # the graph's inputs are not the column names: skl2onnx renamed them
    names = [i.name for i in onnx.load(str(punctuated["onnx"])).graph.input]
    assert names == ["credit_amount", "age__years_", "_2nd_account"]
    exported = load_model(punctuated["onnx"], favorable=1, feature_names=PUNCTUATED)
    assert list(exported.estimator.feature_names_in_) == PUNCTUATED
    rows = punctuated["frame"][PUNCTUATED[::-1]]                  # the frame's column order does not matter
    expected = punctuated["pipeline"].predict_proba(punctuated["frame"])[:, 1]
    assert np.max(np.abs(exported.favorable_probability(rows) - expected)) <= 1e-5


def test_plans_with_the_exported_punctuated_model_are_the_pickles(punctuated):
    assert punctuated["n_denied"] >= 3

    def plan(model):
        result = runner.invoke(app, ["plan", str(punctuated["data"]), "--model", str(model), "--applicants",
                                     str(punctuated["applicants"]), "--format", "csv", "--max-move", "none"])
        assert result.exit_code == 0, result.stderr
        return list(csv.DictReader(io.StringIO(result.stdout)))

    expected, got = plan(punctuated["pickle"]), plan(punctuated["onnx"])
    assert len(got) == len(expected) and {r["status"] for r in got} == {"ok"}
    for e, g in zip(expected, got):
        assert {k: v for k, v in g.items() if k != "probability"} == {k: v for k, v in e.items() if k != "probability"}
        assert abs(float(g["probability"]) - float(e["probability"])) <= 1e-5 and float(g["probability"]) >= 0.5


def test_columns_that_export_as_the_same_input_name_are_refused(punctuated, tmp_path):
    # 'credit amount' and 'credit_amount' both export as 'credit_amount' (skl2onnx names the second
    # 'credit_amount1'): feeding by name would give the graph's 'credit_amount' the wrong column
    frame = punctuated["frame"].assign(credit_amount=punctuated["frame"]["credit amount"] * 0.5)
    label = (frame["credit_amount"] > 2000).astype(int)
    path = _export(_punctuated_pipeline(frame, label), frame, tmp_path / "clash.onnx", zipmap=True)
    with pytest.raises(ModelError) as caught:
        load_model(path, favorable=1, feature_names=list(frame.columns))
    message = str(caught.value)
    assert "'credit amount' and 'credit_amount' both export as the input name 'credit_amount'" in message
    frame.assign(label=label).to_csv(tmp_path / "train.csv", index=False)
    result = runner.invoke(app, ["schema", str(tmp_path / "train.csv"), "--model", str(path)])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: ") and "'credit amount' and 'credit_amount'" in result.stderr


def test_an_input_of_the_columns_own_name_wins_over_a_renamed_one(tmp_path):
    # inputs 'a b' and 'a_b' named exactly like their columns, and 'c_d', the renamed 'c d': each column is fed
    # to its own input (a graph built by hand, with names skl2onnx would not give)
    names = ["a b", "a_b", "c_d"]
    weights = helper.make_tensor("W", TensorProto.DOUBLE, [3, 2], [1.0, 0.0, 0.0, 2.0, -3.0, 0.0])
    nodes = [helper.make_node("Concat", names, ["all"], axis=1), helper.make_node("MatMul", ["all", "W"], ["z"]),
             helper.make_node("Softmax", ["z"], ["probabilities"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.DOUBLE, [None, 1])
                                           for n in names],
                              [helper.make_tensor_value_info("probabilities", TensorProto.DOUBLE, [None, 2])],
                              initializer=[weights])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    helper.set_model_props(proto, {"frpd.classes": "[0, 1]"})
    path = tmp_path / "named.onnx"
    onnx.save(proto, str(path))
    model = load_model(path, favorable=1, feature_names=["c d", "a_b", "a b"])
    rows = pd.DataFrame({"a b": [0.5, -1.0, 2.0], "a_b": [1.5, 0.25, -0.5], "c d": [0.1, 0.7, -0.3]})
    z0 = rows["a b"].to_numpy() - 3.0 * rows["c d"].to_numpy()
    z1 = 2.0 * rows["a_b"].to_numpy()
    assert np.allclose(model.favorable_probability(rows), 1.0 / (1.0 + np.exp(z0 - z1)), rtol=0, atol=1e-12)
