"""encoding="row": the engine's Arrow row codec (docs/format.md, "Arrow
rows"): exact round trips of every type it holds, nulls at every level,
slices, projections, shard sets, interop, and the stored bytes per row."""

from __future__ import annotations

import decimal
import os

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    assert_tables_equal, every_type_table, records_of, SPECS, SPEC_IDS,
)

# Columns of every_type_table the row codec does not hold (IPC rows do).
_NOT_ROW_TYPES = {"string_view", "binary_view", "list_view", "map", "sparse_union",
                  "dense_union", "uuid"}


def _nested_nulls() -> dict[str, pa.Array]:
    """Columns with nulls at every level of nesting (5 rows)."""
    inner = pa.struct([("a", pa.int16()), ("s", pa.string()),
                       ("l", pa.list_(pa.binary()))])
    return {
        "list_list_string": pa.array([[["a", None], None, []], None, [], [[None]], [["b"]]],
                                     pa.list_(pa.list_(pa.string()))),
        "struct_struct": pa.array(
            [{"in": {"a": 1, "s": "x", "l": [b"1", None]}, "b": True}, None,
             {"in": None, "b": None}, {"in": {"a": None, "s": None, "l": None}, "b": False},
             {"in": {"a": 2, "s": "", "l": []}, "b": None}],
            pa.struct([("in", inner), ("b", pa.bool_())])),
        "fixed_list_of_strings": pa.array([["a", None], None, ["", "b"], [None, None], ["c", "d"]],
                                          pa.list_(pa.string(), 2)),
        "fixed_list_of_bools": pa.array([[True, None, False], None, [None] * 3, [True] * 3,
                                         [False] * 3], pa.list_(pa.bool_(), 3)),
        "large_list_of_structs": pa.array(
            [[{"t": 1, "d": decimal.Decimal("1.5")}, None], None, [], [{"t": None, "d": None}],
             [{"t": 3, "d": decimal.Decimal("-2.25")}]],
            pa.large_list(pa.struct([("t", pa.timestamp("ns", "Asia/Tokyo")),
                                     ("d", pa.decimal128(9, 2))]))),
        "list_of_nulls": pa.array([[None, None], None, [], [None], [None] * 9],
                                  pa.list_(pa.null())),
        "list_of_fixed_binary": pa.array([[b"abc", None], None, [], [b"\x00\x00\x00"], [b"xyz"]],
                                         pa.list_(pa.binary(3))),
        "empty_struct": pa.StructArray.from_arrays([], fields=[], mask=pa.array(
            [False, True, False, False, True])),
        "decimal32": pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("-9.99"),
                               decimal.Decimal("0"), decimal.Decimal("99.99")],
                              pa.decimal32(4, 2)),
        "decimal64": pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("-9.99"),
                               decimal.Decimal("0"), decimal.Decimal("1" * 16 + ".99")],
                              pa.decimal64(18, 2)),
        "dictionary_of_dates": pa.array([1, None, 1, 0, 2], pa.int32()).cast(
            pa.date32()).dictionary_encode(),
    }


def row_types_table(repeat: int = 20) -> pa.Table:
    """Every type the row codec holds (every_type_table's, and deeper
    nesting), with nulls in every column and at every level, metadata,
    and `repeat` chunks."""
    table = every_type_table(repeat)
    table = table.drop_columns([c for c in table.column_names if c in _NOT_ROW_TYPES])
    for name, array in _nested_nulls().items():
        table = table.append_column(name, pa.chunked_array([array] * repeat))
    return table


@pytest.fixture(scope="module")
def row_table() -> pa.Table:
    return row_types_table()


def test_the_codec_holds_the_table_and_auto_chooses_it(tmp_path, row_table):
    sackli.arrow.write_table(row_table, tmp_path / "t.bag")
    assert sackli.arrow.row_encoding(str(tmp_path / "t.bag")) == "row"
    first = records_of(str(tmp_path / "t.bag"))[0]
    assert first[0] == 1  # the format's version byte


@pytest.mark.parametrize("spec, extra", SPECS, ids=SPEC_IDS)
def test_every_row_type_round_trips(tmp_path, row_table, spec, extra):
    """Exact round trips through .bag, .bagz and shard sets, with decode
    "auto", "row" and "arrow" (either Arrow codec, as the sidecar says)."""
    sackli.arrow.write_table(row_table, tmp_path / spec, encoding="row", **extra)
    for decode in ("auto", "row", "arrow"):
        back = sackli.arrow.read_table(str(tmp_path / spec), decode=decode)
        assert_tables_equal(back, row_table)
        back.validate(full=True)


@pytest.mark.parametrize("rows", [0, 1])
def test_empty_and_one_row_tables_round_trip(tmp_path, row_table, rows):
    table = row_table.slice(3, rows)
    sackli.arrow.write_table(table, tmp_path / "t@3.bagz")
    back = sackli.arrow.read_table(str(tmp_path / "t@3.bagz"))
    assert_tables_equal(back, table)


def test_a_table_without_columns_round_trips(tmp_path):
    table = pa.table({"a": [1, 2, 3]}).drop_columns(["a"])
    sackli.arrow.write_table(table, tmp_path / "t.bag", encoding="row")
    back = sackli.arrow.read_table(str(tmp_path / "t.bag"))
    assert back.num_rows == 3 and back.num_columns == 0


def test_sliced_arrays_at_every_level_round_trip(tmp_path, row_table):
    """Slices of the table, and arrays whose children start at non-zero
    offsets (lists over sliced values, structs of sliced children)."""
    values = pa.array(["skip", "a", None, "bc", "d", "e"]).slice(1)
    lists = pa.ListArray.from_arrays(pa.array([0, 2, 2, 4, 5], pa.int32()), values,
                                     mask=pa.array([False, False, True, False, False])).slice(1)
    struct = pa.StructArray.from_arrays(
        [pa.array([9, 1, None, 3, 4], pa.int32()).slice(1),
         pa.array([True, False, None, True, None]).slice(1)], names=["i", "b"],
        mask=pa.array([False, True, False, False])).slice(1)
    fixed = pa.FixedSizeListArray.from_arrays(pa.array(range(12), pa.int8()).slice(2), 2).slice(1, 3)
    table = pa.table({"lists": lists, "struct": struct, "fixed": fixed})
    sackli.arrow.write_table(table, tmp_path / "s.bag")
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "s.bag")), table)

    sliced = row_table.slice(7, 33)
    sackli.arrow.write_table(sliced, tmp_path / "t.bagz")
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "t.bagz")), sliced)


@pytest.mark.parametrize("spec", ["t.bag", "t@3.bagz"])
def test_projection_decodes_only_those_columns(tmp_path, row_table, spec):
    sackli.arrow.write_table(row_table, tmp_path / spec)
    columns = ["struct_struct", "int32", "string", "int32"]
    back = sackli.arrow.read_table(str(tmp_path / spec), columns=columns)
    assert back.column_names == columns
    assert_tables_equal(back, row_table.select(columns))
    with pytest.raises(KeyError, match="no column 'nope'"):
        sackli.arrow.read_table(str(tmp_path / spec), columns=["nope"])


def test_large_batches_decode_in_parts_with_right_indices(tmp_path):
    """Batches large enough to be cut into parts by the engine keep row
    order, and with_index numbers every row of every part."""
    n = 20_000
    table = pa.table({"i": pa.array(range(n), pa.int64()),
                      "s": pa.array([str(k) if k % 7 else None for k in range(n)])})
    sackli.arrow.write_table(table, tmp_path / "big@2.bagz")
    back = sackli.arrow.read_table(str(tmp_path / "big@2.bagz"), with_index=True,
                                   batch_size=9000)
    assert back.column("index").to_pylist() == list(range(n))
    assert_tables_equal(back.drop_columns(["index"]), table)
    picked = sackli.arrow.read_table(str(tmp_path / "big@2.bagz"), indices=[5, -1, 5, 10_001])
    assert picked.column("i").to_pylist() == [5, n - 1, 5, 10_001]


_OUTSIDE_THE_CODEC = {
    "map": (pa.array([[("a", 1)], []], pa.map_(pa.string(), pa.int64())), "map type"),
    "union": (pa.UnionArray.from_sparse(pa.array([0, 1], pa.int8()),
                                        [pa.array([1, None]), pa.array(["a", "b"])]),
              "union type"),
    "uuid": (pa.array([bytes(16), None], pa.uuid()), "extension type"),
    "view": (pa.array(["a", None], pa.string_view()), "type 'vu'"),
    "nested": (pa.array([[{"m": [("k", 1)]}], None],
                        pa.list_(pa.struct([("m", pa.map_(pa.string(), pa.int8()))]))),
               "column 'nested.item.m': map type"),
}


@pytest.mark.parametrize("name", _OUTSIDE_THE_CODEC)
def test_unsupported_types_fall_back_to_ipc_rows(tmp_path, name):
    """Schemas with a type outside the codec, at any depth, are written as
    IPC rows by "auto" (recorded in the schema file); encoding="row" says
    which column and type it cannot hold."""
    array, reason = _OUTSIDE_THE_CODEC[name]
    table = pa.table({"i": [1, 2], name: array})
    sackli.arrow.write_table(table, tmp_path / "m.bag")
    assert sackli.arrow.row_encoding(str(tmp_path / "m.bag")) == "arrow"
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "m.bag")), table)
    with pytest.raises(ValueError, match=reason):
        sackli.arrow.write_table(table, tmp_path / "n.bag", encoding="row")
    assert not os.path.exists(tmp_path / "n.bag")


def test_decoded_rows_work_in_duckdb_and_polars(tmp_path):
    table = pa.table({
        "id": pa.array(range(6), pa.int32()),
        "name": ["a", None, "c", "d", "e", "f"],
        "ts": pa.array([0, 1, None, 3, 4, 5], pa.timestamp("us", "UTC")),
        "price": pa.array([decimal.Decimal("1.25")] * 5 + [None], pa.decimal128(10, 2)),
        "tags": pa.array([["x"], [], None, ["y", None], ["z"], []], pa.list_(pa.string())),
        "pt": pa.array([{"x": 1.0, "y": 2.0}, None] * 3,
                       pa.struct([("x", pa.float64()), ("y", pa.float64())])),
    })
    sackli.arrow.write_table(table, tmp_path / "d@2.bagz")
    back = sackli.arrow.read_table(str(tmp_path / "d@2.bagz"))
    got = duckdb.sql("SELECT sum(id), count(name), sum(price), sum(len(tags)), sum(pt.x) "
                     "FROM back").fetchall()[0]
    assert got == (15, 5, decimal.Decimal("6.25"), 4, 3.0)
    frame = pl.from_arrow(back)
    assert frame["tags"].list.len().sum() == 4
    assert frame.filter(pl.col("name").is_null())["id"].to_list() == [1]
    assert frame["ts"].dtype == pl.Datetime("us", "UTC")


# --- Stored bytes per row ------------------------------------------------------

def _random_column(kind: str, n: int, rng: np.random.Generator) -> pa.Array:
    """A column of `kind` with about 10% nulls (n rows)."""
    nulls = rng.random(n) < 0.1
    words = ["ab", "cde", "f", "ghij", "", "klmno"]
    if kind == "list<string>":  # 0-3 short strings: ~13 bytes of data per row
        values = [[words[k] for k in rng.integers(0, 6, rng.integers(0, 4))] for _ in range(n)]
        return pa.array(values, pa.list_(pa.string()), mask=nulls)
    if kind == "string":
        return pa.array([words[k] for k in rng.integers(0, 6, n)], mask=nulls)
    if kind == "struct<int32,string>":
        return pa.StructArray.from_arrays(
            [pa.array(rng.integers(0, 100, n), pa.int32()),
             pa.array([words[k] for k in rng.integers(0, 6, n)])], names=["i", "s"],
            mask=pa.array(nulls))
    if kind == "bool":
        return pa.array(rng.random(n) < 0.5, mask=nulls)
    if kind == "null":
        return pa.nulls(n)
    numpy_types = {"int8": "i1", "int16": "i2", "int32": "i4", "int64": "i8", "uint32": "u4",
                   "float32": "f4", "float64": "f8"}
    if kind in numpy_types:
        return pa.array(rng.integers(0, 100, n).astype(numpy_types[kind]), mask=nulls)
    arrow_types = {"timestamp[us, tz=UTC]": pa.timestamp("us", "UTC"), "date32": pa.date32(),
                   "time64[ns]": pa.time64("ns"), "duration[s]": pa.duration("s")}
    if kind in arrow_types:
        width = pa.int32() if kind == "date32" else pa.int64()
        return pa.array(rng.integers(0, 100, n), width, mask=nulls).cast(arrow_types[kind])
    if kind == "decimal128":
        return pa.array([decimal.Decimal(int(k)) / 100 for k in rng.integers(0, 10**6, n)],
                        pa.decimal128(12, 2), mask=nulls)
    if kind == "fixed_size_binary[16]":
        return pa.array([bytes(16)] * n, pa.binary(16), mask=nulls)
    if kind == "fixed_size_list<int16, 4>":
        return pa.FixedSizeListArray.from_arrays(
            pa.array(rng.integers(0, 9, 4 * n), pa.int16()), 4, mask=pa.array(nulls))
    raise AssertionError(kind)


# (kind, bound on stored bytes per row): the row's fixed cost is 2 bytes
# (version + validity bitmap); a fixed value is its width; a variable one
# its bytes + a 4-byte end (+ a 4-byte count and per element a bit and a
# 4-byte end for lists of strings).
_BYTES_PER_ROW = [
    ("int8", 3), ("int16", 4), ("int32", 6), ("int64", 10), ("uint32", 6), ("float32", 6),
    ("float64", 10), ("bool", 3), ("null", 2), ("timestamp[us, tz=UTC]", 10), ("date32", 6),
    ("time64[ns]", 10), ("duration[s]", 10), ("decimal128", 18),
    ("fixed_size_binary[16]", 18), ("fixed_size_list<int16, 4>", 2 + 4 + 1 + 8),
    ("string", 2 + 4 + 5), ("struct<int32,string>", 2 + 4 + 1 + 4 + 4 + 5),
    ("list<string>", 2 + 4 + 4 + 1 + 3 * (4 + 5)),
]


@pytest.mark.parametrize("kind, bound", _BYTES_PER_ROW, ids=[k for k, _ in _BYTES_PER_ROW])
def test_stored_bytes_per_row_are_bounded(tmp_path, kind, bound):
    """The issue's bound: each type costs at most its data plus a small
    fixed overhead per row, whatever the size of the batch written."""
    rng = np.random.default_rng(7)
    per_row = []
    for rows in (1000, 8000):
        table = pa.table({"c": _random_column(kind, rows, rng)})
        path = tmp_path / f"{rows}.bag"
        sackli.arrow.write_table(table, path)
        assert sackli.arrow.row_encoding(str(path)) == "row"
        per_row.append(sum(map(len, records_of(str(path)))) / rows)
        assert_tables_equal(sackli.arrow.read_table(str(path)), table)
    assert max(per_row) <= bound, per_row
    assert abs(per_row[0] - per_row[1]) <= 1.0, per_row  # not growing with the batch
