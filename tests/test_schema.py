"""Schema inference, declarations from files and flags, and their errors."""

import pandas as pd
import pytest

from frpd_cli.exceptions import SchemaError
from frpd_cli.schema import SchemaSpec, infer_schema, load_schema_file, merge_specs


@pytest.fixture
def frame():
    return pd.DataFrame({
        "age": [20, 35, 50, 41],
        "amount": [1200.5, 300.25, 4000.0, 80.75],
        "job": ["skilled", "unskilled", "skilled", "management"],
        "savings": ["none", "rich", "little", "none"],
        "flag": [0, 1, 1, 0],
        "label": [0, 1, 1, 0],
    })


def test_inference_kinds_and_sorted_levels(frame):
    schema = infer_schema(frame)
    kinds = {f.name: f.kind for f in schema.features}
    assert kinds == {"age": "integer", "amount": "continuous", "job": "categorical", "savings": "categorical",
                     "flag": "integer"}
    assert schema.feature("job").levels == ("management", "skilled", "unskilled")
    assert schema.target == "label" and schema.favorable == 1
    assert "label" not in schema.feature_names


def test_ordinal_order_and_monotone(frame):
    spec = SchemaSpec(increasing=("savings", "age"), ordinal={"savings": ("none", "little", "moderate", "rich")})
    schema = infer_schema(frame, spec)
    f = schema.feature("savings")
    assert f.kind == "ordinal" and f.levels == ("none", "little", "moderate", "rich")
    assert f.mutability == "increasing" and schema.feature("age").mutability == "increasing"


def test_monotone_unordered_categorical_refused(frame):
    with pytest.raises(SchemaError, match="Declare its order under \\[ordinal\\]"):
        infer_schema(frame, SchemaSpec(increasing=("job",)))


def test_ordinal_missing_level_named(frame):
    with pytest.raises(SchemaError, match="little"):
        infer_schema(frame, SchemaSpec(ordinal={"savings": ("none", "rich")}))


def test_unknown_column_lists_existing(frame):
    with pytest.raises(SchemaError) as info:
        infer_schema(frame, SchemaSpec(immutable=("Age",)))
    message = str(info.value)
    assert "'Age'" in message and "age, amount, job, savings, flag, label" in message


def test_conflicting_declarations(frame):
    with pytest.raises(SchemaError, match="both immutable and increasing"):
        infer_schema(frame, SchemaSpec(immutable=("age",), increasing=("age",)))


def test_categorical_override_of_numeric_column(frame):
    schema = infer_schema(frame, SchemaSpec(categorical=("flag",)))
    assert schema.feature("flag").kind == "categorical" and schema.feature("flag").levels == (0, 1)


def test_text_declared_continuous_names_row(frame):
    with pytest.raises(SchemaError, match="data row 1"):
        infer_schema(frame, SchemaSpec(continuous=("job",)))


def test_integer_beyond_64_bits_in_a_declared_numeric_column_named(tmp_path, frame):
    # pandas reads a column holding a 30-digit integer as objects; every value still converts to a number
    path = tmp_path / "d.csv"
    frame.assign(age=["20", "999999999999999999999999999999", "50", "41"]).to_csv(path, index=False)
    read = pd.read_csv(path)
    assert read["age"].dtype == object
    for spec in (SchemaSpec(integer=("age",)), SchemaSpec(continuous=("age",))):
        with pytest.raises(SchemaError, match="data row 2 .* holds the number 999999999999999999999999999999, too "
                                              "large for a 64-bit integer"):
            infer_schema(read, spec)


def test_flags_override_file(tmp_path, frame):
    path = tmp_path / "schema.toml"
    path.write_text('target = "label"\nimmutable = ["job"]\nincreasing = ["age"]\ncategorical = ["flag"]\n')
    base = load_schema_file(path)
    merged = merge_specs(base, SchemaSpec(increasing=("job",), continuous=("flag",), ordinal={}))
    assert "job" in merged.increasing and "job" not in merged.immutable
    assert "flag" in merged.continuous and "flag" not in merged.categorical
    assert merged.target == "label" and "age" in merged.increasing


def test_schema_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("immutable = 'age'\n")
    with pytest.raises(SchemaError, match="must be a list of column names"):
        load_schema_file(bad)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("immutables = ['age']\n")
    with pytest.raises(SchemaError, match="unknown key"):
        load_schema_file(unknown)
    with pytest.raises(SchemaError, match="does not exist"):
        load_schema_file(tmp_path / "missing.toml")


def test_favorable_string_matches_integer_target(frame):
    schema = infer_schema(frame, SchemaSpec(favorable="1"))
    assert schema.favorable == 1 and isinstance(schema.favorable, int)


def test_missing_target(frame):
    with pytest.raises(SchemaError, match="--target"):
        infer_schema(frame.drop(columns="label"))


def test_round_trip_dict(frame):
    from frpd_cli.schema import Schema

    schema = infer_schema(frame, SchemaSpec(ordinal={"savings": ("none", "little", "rich")},
                                            immutable=("job",)))
    assert Schema.from_dict(schema.to_dict()) == schema


@pytest.mark.parametrize("declared", [(False, True), ("False", "True"), ("false", "TRUE")])
@pytest.mark.parametrize("dtype", [bool, object])
def test_a_boolean_column_declared_ordinal_keeps_booleans_as_levels(declared, dtype):
    flag = pd.Series([True, False, True, False], dtype=dtype)
    frame = pd.DataFrame({"flag": flag, "x": [1.0, 2.0, 3.0, 4.0], "label": [0, 1, 1, 0]})
    f = infer_schema(frame, SchemaSpec(ordinal={"flag": declared}, increasing=("flag",))).feature("flag")
    assert f.kind == "ordinal" and f.mutability == "increasing"
    assert f.levels == (False, True) and all(type(level) is bool for level in f.levels)


def test_a_boolean_column_declared_with_other_levels_says_how_to_declare_it():
    frame = pd.DataFrame({"flag": [True, False, True], "label": [0, 1, 1]})
    with pytest.raises(SchemaError, match=r"holds booleans .* flag = \[false, true\]"):
        infer_schema(frame, SchemaSpec(ordinal={"flag": ("no", "yes")}))
