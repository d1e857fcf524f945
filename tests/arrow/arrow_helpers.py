"""What the sackli.arrow tests share: table comparison, small bag helpers,
a table of every Arrow type, and the specs every round trip runs over.

Loaded by conftest.py as the module `arrow_helpers` (the tests are not a
package: pytest runs them with --import-mode=importlib)."""

from __future__ import annotations

import datetime
import decimal
import pathlib
import uuid

import numpy as np
import pyarrow as pa

import sackli
import sackli.arrow


_SAME_WIDTH_INT = {pa.float16(): pa.int16(), pa.float32(): pa.int32(), pa.float64(): pa.int64()}


def assert_tables_equal(got: pa.Table, want: pa.Table) -> None:
    """Same schema (types, nullability, field and schema metadata) and same
    values. Floats compare by bit pattern (so NaN equals NaN); columns with
    dictionaries compare by value (decoded dictionaries are rebuilt)."""
    assert got.schema.equals(want.schema, check_metadata=True), (
        f"schemas differ:\n{got.schema}\n--- expected ---\n{want.schema}")
    assert got.num_rows == want.num_rows
    if want.num_rows == 0:
        return  # (combine_chunks of no chunks fails for some types)
    for name, got_column, want_column in zip(want.column_names, got.columns, want.columns):
        a, b = got_column.combine_chunks(), want_column.combine_chunks()
        if b.type in _SAME_WIDTH_INT:
            a, b = a.view(_SAME_WIDTH_INT[b.type]), b.view(_SAME_WIDTH_INT[b.type])
        if "dictionary<" in str(b.type):
            assert a.to_pylist() == b.to_pylist(), name
        else:
            assert a.equals(b), f"column {name}: {a.to_pylist()} != {b.to_pylist()}"


def files_in(folder: pathlib.Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def records_of(spec) -> list[bytes]:
    with sackli.Reader(spec) as reader:
        return list(reader)


def shard_sizes(paths: list[str]) -> list[int]:
    sizes = []
    for path in paths:
        with sackli.Reader(path) as reader:
            sizes.append(len(reader))
    return sizes


def write_records(path, records) -> None:
    with sackli.Writer(path) as writer:
        writer.write_many(records)


def every_type_table(repeat: int = 20) -> pa.Table:
    """A table of every Arrow type family, with a null in every column (but
    the non-nullable `id`), field and schema metadata; `repeat` copies of
    five rows, so the columns have `repeat` chunks. (Run-end encoded arrays
    have tests of their own below.)"""
    D = datetime.date
    ints = [0, -1, None, 2**40, 5]
    columns = {
        "int8": pa.array([1, -128, 127, None, 0], pa.int8()),
        "int16": pa.array([1, -2**15, 2**15 - 1, None, 0], pa.int16()),
        "int32": pa.array([1, -2**31, 2**31 - 1, None, 0], pa.int32()),
        "int64": pa.array([1, -2**63, 2**63 - 1, None, 0], pa.int64()),
        "uint8": pa.array([1, 0, 255, None, 7], pa.uint8()),
        "uint16": pa.array([1, 0, 2**16 - 1, None, 7], pa.uint16()),
        "uint32": pa.array([1, 0, 2**32 - 1, None, 7], pa.uint32()),
        "uint64": pa.array([1, 0, 2**64 - 1, None, 7], pa.uint64()),
        "float16": pa.array([np.float16(1.5), None, np.float16(-0.0), np.float16("inf"),
                             np.float16("nan")], pa.float16()),
        "float32": pa.array([1.5, None, -0.0, float("-inf"), float("nan")], pa.float32()),
        "float64": pa.array([1.5, None, -0.0, float("inf"), float("nan")], pa.float64()),
        "bool": pa.array([True, False, None, True, False]),
        "null": pa.nulls(5),
        "string": pa.array(["a", "", None, "h\u00e9llo \U0001F600", "x" * 100]),
        "large_string": pa.array(["a", "", None, "\u00e9", "x"], pa.large_string()),
        "binary": pa.array([b"\x00", b"", None, b"\xff\xfe", b"z" * 50]),
        "large_binary": pa.array([b"\x00", b"", None, b"\xff", b"z"], pa.large_binary()),
        "fixed_size_binary": pa.array([b"ab", b"\x00\x00", None, b"\xff\xff", b"zz"], pa.binary(2)),
        "string_view": pa.array(["a", "a string longer than twelve bytes", None, "", "x"],
                                pa.string_view()),
        "binary_view": pa.array([b"a", b"bytes longer than twelve bytes", None, b"", b"\x00"],
                                pa.binary_view()),
        "date32": pa.array([D(2020, 1, 1), D(1, 1, 1), None, D(1970, 1, 1), D(9999, 12, 31)],
                           pa.date32()),
        "date64": pa.array([D(2020, 1, 1), D(1, 1, 1), None, D(1970, 1, 1), D(9999, 12, 31)],
                           pa.date64()),
        "time32_s": pa.array([0, 86399, None, 1, 2], pa.time32("s")),
        "time32_ms": pa.array([0, 86399999, None, 1, 2], pa.time32("ms")),
        "time64_us": pa.array([0, 86399999999, None, 1, 2], pa.time64("us")),
        "time64_ns": pa.array([0, 86399999999999, None, 1, 2], pa.time64("ns")),
        "timestamp_s": pa.array(ints, pa.timestamp("s")),
        "timestamp_ms_utc": pa.array(ints, pa.timestamp("ms", tz="UTC")),
        "timestamp_us_new_york": pa.array(ints, pa.timestamp("us", tz="America/New_York")),
        "timestamp_ns_offset": pa.array([0, -1, None, 2**62, 5], pa.timestamp("ns", tz="+05:30")),
        "duration_s": pa.array(ints, pa.duration("s")),
        "duration_ns": pa.array(ints, pa.duration("ns")),
        "interval": pa.array([pa.MonthDayNano([1, 2, 3]), None, pa.MonthDayNano([0, 0, -1]),
                              pa.MonthDayNano([-1, 0, 0]), pa.MonthDayNano([0, 31, 10**15])],
                             pa.month_day_nano_interval()),
        "decimal128": pa.array([decimal.Decimal("1.23"), decimal.Decimal("-" + "9" * 35 + ".99"),
                                None, decimal.Decimal("0"), decimal.Decimal("0.01")],
                               pa.decimal128(37, 2)),
        "decimal256": pa.array([decimal.Decimal("1.23"), decimal.Decimal("-" + "9" * 70 + ".99"),
                                None, decimal.Decimal("0"), decimal.Decimal("0.01")],
                               pa.decimal256(72, 2)),
        "list": pa.array([[1, 2], [], None, [None], [3]], pa.list_(pa.int32())),
        "large_list": pa.array([["a"], [], None, [None], ["b", "c"]], pa.large_list(pa.string())),
        "fixed_size_list": pa.array([[1, 2, 3], [4, 5, 6], None, [None, 1, 2], [0, 0, 0]],
                                    pa.list_(pa.int16(), 3)),
        "list_view": pa.array([[1], [2, 3], None, [], [None]], pa.list_view(pa.int32())),
        "struct": pa.array([{"x": 1, "y": "a"}, {"x": None, "y": None}, None, {"x": 2, "y": "b"},
                            {"x": 3, "y": ""}], pa.struct([("x", pa.int64()), ("y", pa.string())])),
        "list_struct_list": pa.array(
            [[{"v": [1.0, 2.0]}], [], None, [None, {"v": None}], [{"v": []}]],
            pa.list_(pa.struct([("v", pa.list_(pa.float64()))]))),
        "map": pa.array([[("a", 1), ("b", 2)], [], None, [("c", None)], [("d", 4)]],
                        pa.map_(pa.string(), pa.int64())),
        "sparse_union": pa.UnionArray.from_sparse(
            pa.array([0, 1, 0, 1, 0], pa.int8()),
            [pa.array([1, None, None, 4, 5]), pa.array(["a", "b", None, None, "e"])]),
        "dense_union": pa.UnionArray.from_dense(
            pa.array([0, 1, 0, 1, 1], pa.int8()), pa.array([0, 0, 1, 1, 2], pa.int32()),
            [pa.array([1, None]), pa.array(["a", None, "c"])]),
        "uuid": pa.array([uuid.UUID(int=1).bytes, None, uuid.UUID(int=2).bytes,
                          uuid.UUID(int=2**128 - 1).bytes, uuid.UUID(int=0).bytes], pa.uuid()),
        "dictionary": pa.array(["red", "green", None, "red", "blue"]).dictionary_encode(),
        "dictionary_int8_ordered": pa.DictionaryArray.from_arrays(
            pa.array([0, 1, None, 0, 1], pa.int8()), pa.array(["lo", "hi"]), ordered=True),
        "list_of_dictionary": pa.array([["a", "b"], [], None, [None, "a"], ["c"]],
                                       pa.list_(pa.dictionary(pa.int32(), pa.string()))),
        "struct_of_dictionary": pa.array(
            [{"d": "x"}, None, {"d": None}, {"d": "y"}, {"d": "x"}],
            pa.struct([("d", pa.dictionary(pa.int16(), pa.string()))])),
    }
    fields = [pa.field("id", pa.int64(), nullable=False, metadata={"role": "key"})]
    fields += [pa.field(name, array.type) for name, array in columns.items()]
    schema = pa.schema(fields, metadata={"origin": "test_arrow", "version": "1"})
    five = pa.table([pa.array(range(5), pa.int64()), *columns.values()], schema=schema)
    table = pa.concat_tables([five] * repeat)
    return table.set_column(0, schema.field("id"), pa.array(range(table.num_rows), pa.int64()))


# Output specs, with the extra write_table arguments each needs.
SPECS = [
    ("t.bag", {}),
    ("t.bagz", {}),
    ("t@3.bag", {}),
    ("t@3.bagz", {}),
    ("t@*.bag", {"max_shard_bytes": 100_000}),
    ("t@*.bagz", {"max_shard_bytes": 30_000}),
]


SPEC_IDS = [spec for spec, _ in SPECS]
