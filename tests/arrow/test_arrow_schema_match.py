"""`schema=` against a set's schema file: refused (ValueError naming the
first field that differs) unless it is a projection or a widening cast,
both applied by name; and without a schema file, records whose length
cannot be a row of the given schema are corruption."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from sackli.arrow._schema_match import widens

TABLE = pa.table({
    "id": pa.array([1, 2, 3], pa.int64()),
    "score": pa.array([0.5, 1.5, 2.5], pa.float64()),
    "name": pa.array(["a", "bb", "ccc"], pa.string()),
    "n": pa.array([7, -8, None], pa.int32()),
    "ratio": pa.array([0.25, None, 4.0], pa.float32()),
})

ENCODINGS = ["row", "arrow", "json"]


@pytest.fixture(params=ENCODINGS)
def written(request, tmp_path):
    path = str(tmp_path / "t.bagz")
    sackli.arrow.write_table(TABLE, path, encoding=request.param)
    return path


# The garbage cases (each gave wrong values silently) and others,
# with the field each must name.
REFUSED = {
    "float32 for float64": (
        [("id", pa.int64()), ("score", pa.float32()), ("name", pa.string())], "score"),
    "types swapped between two columns": (
        [("id", pa.float64()), ("score", pa.int64()), ("name", pa.string())], "id"),
    "string for int": ([("id", pa.string()), ("score", pa.float64())], "id"),
    "int64 for int32 reversed (narrowing)": ([("id", pa.int32())], "id"),
    "a field the set lacks": ([("id", pa.int64()), ("age", pa.int64())], "age"),
    "signed for unsigned": ([("n", pa.uint64())], "n"),
}


@pytest.mark.parametrize("fields, name", REFUSED.values(), ids=REFUSED.keys())
def test_a_schema_that_differs_is_refused_naming_the_field(written, fields, name):
    schema = pa.schema(fields)
    with pytest.raises(ValueError, match=rf"schema= differs from the set's schema file "
                                         rf"\(.*t\.bagz\.arrow_schema\).*'{name}'") as caught:
        sackli.arrow.read_table(written, schema=schema)
    assert not isinstance(caught.value, sackli.CorruptionError)  # the argument is wrong
    with pytest.raises(ValueError, match=f"'{name}'"):
        sackli.arrow.read_batches(written, schema=schema)


def test_non_nullable_asked_of_a_nullable_column_is_refused(written):
    with pytest.raises(ValueError, match="'n': non-nullable asked, nullable stored"):
        sackli.arrow.read_table(written, schema=pa.schema([pa.field("n", pa.int32(), False)]))


def test_the_stored_schema_reads_as_without_it(written):
    assert sackli.arrow.read_table(written, schema=TABLE.schema).equals(TABLE)


@pytest.mark.parametrize("names", [["score", "id"], ["name"],
                                   ["ratio", "n", "name", "score", "id"]])
def test_a_projection_gives_those_columns_by_name_in_that_order(written, names):
    schema = pa.schema([TABLE.schema.field(n) for n in names])
    got = sackli.arrow.read_table(written, schema=schema)
    assert got.schema == schema
    assert got.equals(TABLE.select(names))


def test_widening_casts_give_exact_values_by_name(written):
    schema = pa.schema([("ratio", pa.float64()), ("n", pa.float64()), ("name", pa.large_string()),
                        ("id", pa.int64())])
    got = sackli.arrow.read_table(written, schema=schema)
    assert got.schema == schema
    assert got.column("ratio").to_pylist() == [0.25, None, 4.0]
    assert got.column("n").to_pylist() == [7, -8, None]
    assert got.column("name").to_pylist() == ["a", "bb", "ccc"]
    assert got.column("id").to_pylist() == [1, 2, 3]


def test_columns_select_from_the_schema_given(written):
    schema = pa.schema([("n", pa.int64()), ("id", pa.int64())])
    got = sackli.arrow.read_table(written, schema=schema, columns=["id", "n"])
    assert got.schema == pa.schema([("id", pa.int64()), ("n", pa.int64())])
    assert got.to_pydict() == {"id": [1, 2, 3], "n": [7, -8, None]}
    with pytest.raises(KeyError, match="'score'"):
        sackli.arrow.read_table(written, schema=schema, columns=["score"])


def test_small_batches_and_indices_keep_the_cast(tmp_path):
    path = str(tmp_path / "many@3.bagz")
    big = pa.table({"x": pa.array(range(5000), pa.int32()), "s": [str(i) for i in range(5000)]})
    sackli.arrow.write_table(big, path)
    schema = pa.schema([("x", pa.int64())])
    got = sackli.arrow.read_table(path, schema=schema, batch_size=700)
    assert got.column("x").to_pylist() == list(range(5000))
    assert got.schema == schema
    sample = sackli.arrow.read_table(path, schema=schema, indices=[4999, 0, 17])
    assert sample.column("x").to_pylist() == [4999, 0, 17]


@pytest.mark.parametrize("source, target, ok", [
    (pa.int32(), pa.int64(), True), (pa.uint32(), pa.int64(), True),
    (pa.uint32(), pa.int32(), False), (pa.int8(), pa.uint16(), False),
    (pa.float32(), pa.float64(), True), (pa.float64(), pa.float32(), False),
    (pa.int32(), pa.float64(), True), (pa.int64(), pa.float64(), False),
    (pa.int16(), pa.float32(), True), (pa.int32(), pa.float32(), False),
    (pa.string(), pa.large_string(), True), (pa.large_string(), pa.string(), True),
    (pa.string(), pa.binary(), True), (pa.binary(), pa.string(), False),
    (pa.string(), pa.int64(), False), (pa.int64(), pa.string(), False),
    (pa.date32(), pa.date64(), True), (pa.date64(), pa.date32(), False),
    (pa.timestamp("ms", "UTC"), pa.timestamp("us", "UTC"), True),
    (pa.timestamp("us", "UTC"), pa.timestamp("ms", "UTC"), False),
    (pa.timestamp("ms", "UTC"), pa.timestamp("ms"), False),
    (pa.decimal128(10, 2), pa.decimal128(12, 3), True),
    (pa.decimal128(10, 2), pa.decimal128(10, 3), False),
    (pa.list_(pa.int32()), pa.large_list(pa.int64()), True),
    (pa.large_list(pa.int32()), pa.list_(pa.int32()), False),
    (pa.list_(pa.float64()), pa.list_(pa.float32()), False),
    (pa.struct([("a", pa.int8()), ("b", pa.string())]),
     pa.struct([("a", pa.int16()), ("b", pa.string())]), True),
    (pa.struct([("a", pa.int8()), ("b", pa.string())]),
     pa.struct([("b", pa.string()), ("a", pa.int8())]), False),
    (pa.dictionary(pa.int8(), pa.string()), pa.dictionary(pa.int32(), pa.string()), True),
    (pa.dictionary(pa.int32(), pa.string()), pa.dictionary(pa.int8(), pa.string()), False),
    (pa.dictionary(pa.int8(), pa.string()), pa.string(), True),
])
def test_which_casts_widen(source, target, ok):
    assert widens(source, target) is ok


def test_nested_and_dictionary_widening_reads_exactly(tmp_path):
    table = pa.table({
        "l": pa.array([[1, None], [], None], pa.list_(pa.int32())),
        "st": pa.array([{"a": 1, "b": "x"}, None, {"a": -3, "b": None}],
                       pa.struct([("a", pa.int8()), ("b", pa.string())])),
        "k": pa.array(["u", "v", "u"]).dictionary_encode(),
    })
    path = str(tmp_path / "nested.bagz")
    sackli.arrow.write_table(table, path)
    schema = pa.schema([("k", pa.string()),
                        ("st", pa.struct([("a", pa.int64()), ("b", pa.string())])),
                        ("l", pa.large_list(pa.int64()))])
    got = sackli.arrow.read_table(path, schema=schema)
    assert got.schema == schema
    assert got.to_pydict() == {"k": ["u", "v", "u"], "st": table.column("st").to_pylist(),
                               "l": [[1, None], [], None]}


def test_the_row_decoder_and_cli_printing_use_the_stored_schema(tmp_path):
    path = str(tmp_path / "rd.bagz")
    sackli.arrow.write_table(TABLE, path)
    assert sackli.arrow.RowDecoder(path, columns=["score", "id"])(
        sackli.Reader(path)[1]) == {"score": 1.5, "id": 2}


# --- Without a schema file: schema= is the rows' schema, and records of
# another length are corruption, naming the file and the record.

WRONG_WITHOUT_FILE = {
    "int32 for int64": pa.schema([("id", pa.int32()), ("score", pa.float64()),
                                  ("name", pa.string()), ("n", pa.int32()),
                                  ("ratio", pa.float32())]),
    "float32 for float64": pa.schema([("id", pa.int64()), ("score", pa.float32()),
                                      ("name", pa.string()), ("n", pa.int32()),
                                      ("ratio", pa.float32())]),
    "a column fewer": pa.schema([("id", pa.int64()), ("score", pa.float64()),
                                 ("name", pa.string()), ("n", pa.int32())]),
    "int64 for int32 at the end": pa.schema([("id", pa.int64()), ("score", pa.float64()),
                                             ("name", pa.string()), ("n", pa.int32()),
                                             ("ratio", pa.float64())]),
}


@pytest.mark.parametrize("schema", WRONG_WITHOUT_FILE.values(), ids=WRONG_WITHOUT_FILE.keys())
@pytest.mark.parametrize("columns", [None, ["id"]])
def test_without_a_schema_file_rows_of_another_length_are_corruption(tmp_path, schema, columns):
    path = str(tmp_path / "bare.bagz")
    sackli.arrow.write_table(TABLE, path)
    os.remove(path + ".arrow_schema")
    assert sackli.arrow.read_table(path, decode="row", schema=TABLE.schema).equals(TABLE)
    with pytest.raises(sackli.CorruptionError,
                       match=r"bare\.bagz: record 0 is not a row written with encoding='row' "
                             r"for this schema \((a struct body holds \d+ bytes where its "
                             r"header says \d+|a struct is shorter than its fixed part)\)"):
        sackli.arrow.read_table(path, decode="row", schema=schema, columns=columns)


def test_without_a_schema_file_the_record_named_is_the_first_of_another_length(tmp_path):
    # Rows of one int32 column, one of them written by a wider schema.
    narrow = pa.schema([("x", pa.int32())])
    path = str(tmp_path / "mixed.bag")
    sackli.arrow.write_table(pa.table({"x": pa.array([1, 2], pa.int32())}), path)
    records = list(sackli.Reader(path))
    wide = str(tmp_path / "wide.bag")
    sackli.arrow.write_table(pa.table({"x": pa.array([3], pa.int64())}), wide)
    records.insert(1, sackli.Reader(wide)[0])
    os.remove(path)
    with sackli.Writer(path) as writer:
        for record in records:
            writer.write(record)
    os.remove(path + ".arrow_schema")
    with pytest.raises(sackli.CorruptionError, match=r"mixed\.bag: record 1 is not a row"):
        sackli.arrow.read_table(path, decode="row", schema=narrow)
