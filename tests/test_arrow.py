"""sackli.arrow: Arrow tables and Parquet into bag shards and back, the
Reader as an Arrow stream source, and DuckDB / Polars over both; errors,
clean-up after failed writes, zero-copy reads and bounded memory."""

from __future__ import annotations

import base64
import datetime
import decimal
import gc
import json
import os
import pathlib
import uuid

import duckdb
import numpy as np
import polars as pl
import polars.testing
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import sackli
import sackli.arrow

# --- Helpers -----------------------------------------------------------------

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


# --- Round trips with encoding="arrow" ---------------------------------------


@pytest.fixture(scope="module")
def every_type() -> pa.Table:
    return every_type_table()


@pytest.mark.parametrize("spec, extra", SPECS, ids=SPEC_IDS)
def test_every_type_round_trips(tmp_path, every_type, spec, extra):
    """Every Arrow type family, nulls, NaN, metadata and dictionaries (also
    nested) come back identical, through every kind of output spec."""
    paths = sackli.arrow.write_table(every_type, tmp_path / spec, **extra)
    assert all(os.path.exists(p) for p in paths)
    if "@3" in spec:
        assert shard_sizes(paths) == [34, 33, 33]
    elif "@*" in spec:
        assert len(paths) > 1 and sum(shard_sizes(paths)) == every_type.num_rows
    else:
        assert paths == [str(tmp_path / spec)]
    name, ext = spec.split("@")[0].split(".")[0], spec.rsplit(".", 1)[1]
    assert (tmp_path / f"{name}.{ext}.arrow_schema").is_file()
    assert sackli.arrow.read_schema(str(tmp_path / spec)).equals(every_type.schema,
                                                                 check_metadata=True)
    back = sackli.arrow.read_table(str(tmp_path / spec), decode="arrow")
    assert_tables_equal(back, every_type)


@pytest.mark.parametrize("spec, extra", [SPECS[0], SPECS[3], SPECS[5]],
                         ids=[SPECS[0][0], SPECS[3][0], SPECS[5][0]])
@pytest.mark.parametrize("rows", [0, 1])
def test_empty_and_one_row_tables_round_trip(tmp_path, every_type, spec, extra, rows):
    """A table of no rows or of one row keeps its schema and rows; `@3`
    makes empty shards where no row goes."""
    table = every_type.slice(7, rows)
    paths = sackli.arrow.write_table(table, tmp_path / spec, **extra)
    if "@3" in spec:
        assert shard_sizes(paths) == [rows, 0, 0]
    assert sum(shard_sizes(paths)) == rows
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / spec), decode="arrow"), table)


@pytest.mark.parametrize("table", [
    pa.table({"a": [1, 2, 3]}).select([]),
    pa.table({"a": [1]}).select([]),
    pa.table({"n": pa.nulls(3)}),
    pa.table({"n": pa.nulls(3), "m": pa.nulls(3)}),
], ids=["no_columns", "no_columns_one_row", "null_column", "null_columns"])
def test_tables_without_buffers_round_trip(tmp_path, table):
    """Tables whose rows carry no data (no columns, or only null columns: an
    empty IPC message body) keep their rows and schema."""
    sackli.arrow.write_table(table, tmp_path / "z.bagz")
    assert len(records_of(tmp_path / "z.bagz")) == table.num_rows
    back = sackli.arrow.read_table(str(tmp_path / "z.bagz"), decode="arrow")
    assert back.schema == table.schema
    assert (back.num_rows, back.num_columns) == (table.num_rows, table.num_columns)


def test_sliced_and_record_batch_inputs_round_trip(tmp_path, every_type):
    """A slice of a table (chunk offsets not at zero) and a single
    RecordBatch encode just their rows."""
    sliced = every_type.slice(13, 41)
    sackli.arrow.write_table(sliced, tmp_path / "s@2.bagz")
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "s@2.bagz"), decode="arrow"),
                        sliced)
    batch = every_type.slice(3, 9).combine_chunks().to_batches()[0]
    sackli.arrow.write_table(batch, tmp_path / "b.bag")
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "b.bag"), decode="arrow"),
                        pa.Table.from_batches([batch]))


def run_end_encoded(values: list) -> pa.RunEndEncodedArray:
    """`values` run-end encoded, one run per value."""
    return pa.RunEndEncodedArray.from_arrays(pa.array(range(1, len(values) + 1), pa.int32()),
                                             pa.array(values))


@pytest.mark.parametrize("with_dictionary", [False, True], ids=["alone", "beside_dictionary"])
def test_sliced_run_end_encoded_column_round_trips(tmp_path, with_dictionary):
    """A slice of a run-end encoded column keeps its values, also beside a
    dictionary column (whose rows are cast to storage types)."""
    columns = {"r": run_end_encoded(["a", "a", None, "b", "c"])}
    if with_dictionary:
        columns["d"] = pa.array(["x", "y", "x", None, "y"]).dictionary_encode()
    table = pa.table(columns).slice(2, 3)
    sackli.arrow.write_table(table, tmp_path / "r.bag")
    back = sackli.arrow.read_table(str(tmp_path / "r.bag"), decode="arrow")
    assert back.schema == table.schema
    assert back.to_pydict() == table.to_pydict()


def test_long_run_end_encoded_column_beside_dictionary_round_trips(tmp_path):
    """A single-chunk table longer than one write piece (8192 rows), with a
    run-end encoded and a dictionary column, comes back unchanged."""
    rows = 10_000
    table = pa.table({"r": run_end_encoded([f"v{i}" for i in range(rows)]),
                      "d": pa.array([str(i % 3) for i in range(rows)]).dictionary_encode()})
    sackli.arrow.write_table(table, tmp_path / "r.bag")
    back = sackli.arrow.read_table(str(tmp_path / "r.bag"), decode="arrow")
    got, want = back.column("r").to_pylist(), table.column("r").to_pylist()
    wrong = [i for i in range(rows) if got[i] != want[i]]
    assert not wrong, f"{len(wrong)} rows differ, the first at {wrong[0]}"


@pytest.mark.parametrize("value_type, values", [
    (pa.int64(), [1, 2, None, 1]),
    (pa.float64(), [1.5, 2.5, None, 1.5]),
    (pa.date32(), [datetime.date(2020, 1, 1), datetime.date(2021, 1, 1), None,
                   datetime.date(2020, 1, 1)]),
], ids=["int64", "float64", "date32"])
def test_dictionary_of_non_string_values_round_trips(tmp_path, value_type, values):
    """Dictionaries of numbers or dates (pandas categoricals of ints, Parquet
    dictionary pages) come back as written, like string dictionaries do."""
    table = pa.table({"d": pa.array(values, value_type).dictionary_encode()})
    sackli.arrow.write_table(table, tmp_path / "d.bag")
    back = sackli.arrow.read_table(str(tmp_path / "d.bag"), decode="arrow")
    assert back.schema == table.schema
    assert back.column("d").to_pylist() == values


def test_dictionary_of_string_view_round_trips(tmp_path):
    """A dictionary of string_view values (what Polars exports for a
    Categorical column) writes and comes back."""
    codes = pa.array([0, 1, None, 0], pa.uint32())
    table = pa.table({"c": pa.DictionaryArray.from_arrays(codes, pa.array(["p", "q"],
                                                                          pa.string_view()))})
    sackli.arrow.write_table(table, tmp_path / "v.bagz")
    back = sackli.arrow.read_table(str(tmp_path / "v.bagz"), decode="arrow")
    assert back.schema == table.schema
    assert back.column("c").to_pylist() == ["p", "q", None, "p"]


def test_polars_dataframe_round_trips(tmp_path):
    """A Polars DataFrame (Arrow C stream; string_view strings, large lists)
    writes and reads back as an equal DataFrame."""
    frame = pl.DataFrame({"a": [1, 2, None], "s": ["x", None, "z"], "l": [[1], [], None],
                          "f": [0.5, None, float("nan")]})
    sackli.arrow.write_table(frame, tmp_path / "p@2.bagz")
    back = pl.from_arrow(sackli.arrow.read_table(str(tmp_path / "p@2.bagz"), decode="arrow"))
    polars.testing.assert_frame_equal(back, frame)


def test_polars_categorical_round_trips(tmp_path):
    """A Polars Categorical column (a dictionary of string_view) writes and
    reads back."""
    frame = pl.DataFrame({"c": pl.Series(["p", "q", "p", None], dtype=pl.Categorical)})
    sackli.arrow.write_table(frame, tmp_path / "c.bagz")
    back = pl.from_arrow(sackli.arrow.read_table(str(tmp_path / "c.bagz"), decode="arrow"))
    assert back["c"].cast(pl.String).to_list() == ["p", "q", "p", None]


def test_duckdb_relation_input(tmp_path):
    """A DuckDB relation is read through its Arrow C stream (length unknown,
    so `@3` spools then splits evenly)."""
    relation = duckdb.sql("select range as i, 'v' || range::varchar as s from range(10)")
    paths = sackli.arrow.write_table(relation, tmp_path / "d@3.bag")
    assert shard_sizes(paths) == [4, 3, 3]
    back = sackli.arrow.read_table(str(tmp_path / "d@3.bag"), decode="arrow")
    assert back.to_pydict() == {"i": list(range(10)), "s": [f"v{i}" for i in range(10)]}


def test_max_shard_bytes_bounds_uncompressed_shards(tmp_path):
    """`@*` starts a new shard before one would pass max_shard_bytes (exactly,
    for uncompressed shards); a record larger than that gets a shard alone."""
    table = pa.table({"id": range(5000), "s": ["x" * (i % 50) for i in range(5000)]})
    paths = sackli.arrow.write_table(table, tmp_path / "o@*.bag", max_shard_bytes=20_000)
    assert len(paths) > 5
    assert paths == [str(tmp_path / f"o-{i:05d}-of-{len(paths):05d}.bag")
                     for i in range(len(paths))]
    assert max(os.path.getsize(p) for p in paths) <= 20_000
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "o@*.bag"), decode="arrow"), table)

    big = pa.table({"b": [b"x" * 5000, b"y", b"z" * 5000]})
    paths = sackli.arrow.write_table(big, tmp_path / "big@*.bag", column="b", max_shard_bytes=1000)
    assert shard_sizes(paths) == [1, 1, 1]
    assert [r for p in paths for r in records_of(p)] == big.column("b").to_pylist()
    assert not [f for f in files_in(tmp_path) if "pending" in f]


def test_separate_limits_option_applies_to_every_shard(tmp_path):
    """`options=` reaches every shard's Writer, also for `@*` shards renamed
    after writing and `@N` shards split from a spool."""
    options = sackli.Writer.Options(limits_placement=sackli.LimitsPlacement.SEPARATE)
    table = pa.table({"id": range(3000)})
    by_size = sackli.arrow.write_table(table, tmp_path / "o@*.bagz", max_shard_bytes=20_000,
                                       options=options)
    stream = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=100))
    spooled = sackli.arrow.write_table(stream, tmp_path / "q@2.bagz", options=options)
    for paths, spec in [(by_size, "o@*.bagz"), (spooled, "q@2.bagz")]:
        for path in paths:
            assert (tmp_path / ("limits." + os.path.basename(path))).is_file()
        reader = sackli.Reader(str(tmp_path / spec),
                               limits_placement=sackli.LimitsPlacement.SEPARATE)
        assert sackli.arrow.read_table(reader, decode="arrow").equals(table)
    assert not [f for f in files_in(tmp_path) if "pending" in f or "spool" in f]


def test_progress_bar(tmp_path, capfd):
    """progress=True draws a progress bar on stderr; progress=False draws
    nothing."""
    table = pa.table({"a": range(100)})
    sackli.arrow.write_table(table, tmp_path / "quiet.bag", progress=False)
    assert capfd.readouterr().err == ""
    sackli.arrow.write_table(table, tmp_path / "loud.bag", progress=True)
    assert "rows" in capfd.readouterr().err


# --- encoding="json", column=, callables ----------------------------------


def json_table() -> pa.Table:
    return pa.table({
        "int64": pa.array([1, None, -2**63]),
        "int8": pa.array([1, None, -5], pa.int8()),
        "uint32": pa.array([1, None, 2**32 - 1], pa.uint32()),
        "float64": pa.array([1.5, None, -0.25]),
        "float32": pa.array([1.5, None, -0.25], pa.float32()),
        "bool": pa.array([True, None, False]),
        "string": pa.array(["a", None, 'q"uote\n\u00e9\U0001F600']),
        "large_string": pa.array(["a", None, "b"], pa.large_string()),
        "binary": pa.array([b"\x00\xff", None, b""]),
        "fixed_size_binary": pa.array([b"ab", None, b"cd"], pa.binary(2)),
        "list": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
        "list_string": pa.array([["a", None], None, []], pa.list_(pa.string())),
        "struct": pa.array([{"x": 1, "y": "a"}, None, {"x": None, "y": "b"}],
                           pa.struct([("x", pa.int64()), ("y", pa.string())])),
        "nested": pa.array([[{"v": [1.0]}], None, [None]],
                           pa.list_(pa.struct([("v", pa.list_(pa.float64()))]))),
        "timestamp_s": pa.array([0, None, 1600000000], pa.timestamp("s")),
        "timestamp_us_utc": pa.array([0, None, 1600000000123456], pa.timestamp("us", tz="UTC")),
        "decimal": pa.array([decimal.Decimal("1.23"), None, decimal.Decimal("-4.50")],
                            pa.decimal128(10, 2)),
        "dictionary": pa.array(["a", None, "b"]).dictionary_encode(),
        "null": pa.nulls(3),
    }, metadata={"k": "v"})


@pytest.mark.parametrize("spec", ["j.bag", "j@2.bagz"])
def test_json_round_trip(tmp_path, spec):
    """encoding="json" writes one JSON object per row (binary as base64,
    timestamps ISO 8601, decimals as strings) and decode="json" gives the
    table back with its written schema."""
    table = json_table()
    sackli.arrow.write_table(table, tmp_path / spec, encoding="json")
    records = records_of(str(tmp_path / spec))
    assert len(records) == 3
    first = json.loads(records[0])
    assert first["int64"] == 1 and first["string"] == "a" and first["null"] is None
    assert base64.b64decode(first["binary"]) == b"\x00\xff"
    assert first["timestamp_s"] == "1970-01-01T00:00:00" and first["decimal"] == "1.23"
    assert first["struct"] == {"x": 1, "y": "a"}
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / spec), decode="json"), table)
    projected = sackli.arrow.read_table(str(tmp_path / spec), decode="json",
                                        columns=["string", "int8"])
    assert projected.column_names == ["string", "int8"]
    assert projected.column("int8").to_pylist() == [1, None, -5]


@pytest.mark.parametrize("array", [
    pa.array([datetime.date(2020, 1, 2), None], pa.date32()),
    pa.array([datetime.date(2020, 1, 2), None], pa.date64()),
    pa.array([0, None], pa.time32("s")),
    pa.array([3600 * 10**6, None], pa.time64("us")),
    pa.array([1600000000123, None], pa.timestamp("ms")),
    pa.array([1600000000123456789, None], pa.timestamp("ns")),
    pa.array([5, None], pa.duration("s")),
    pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int64())),
], ids=["date32", "date64", "time32", "time64", "timestamp_ms", "timestamp_ns", "duration",
        "map"])
def test_json_round_trip_of_types_the_encoding_converts(tmp_path, array):
    """Dates, times, timestamps, durations and maps, which encoding="json"
    documents how it writes, read back with decode="json" and the schema
    file write_table wrote."""
    table = pa.table({"v": array, "k": pa.array([1, 2])})
    sackli.arrow.write_table(table, tmp_path / "j.bag", encoding="json")
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "j.bag"), decode="json"), table)


def test_json_without_schema_file_infers_columns(tmp_path):
    """decode="json" on JSON records written by hand infers the columns."""
    write_records(tmp_path / "raw.bag", [b'{"a": 1, "b": "x"}', b'{"a": 2, "b": null}'])
    back = sackli.arrow.read_table(str(tmp_path / "raw.bag"), decode="json")
    assert back.to_pydict() == {"a": [1, 2], "b": ["x", None]}


COLUMN_VALUES = [b"abc", b"", b"\x00\xff", b"x" * 1000, b"last"]


@pytest.mark.parametrize("array", [
    pa.array(COLUMN_VALUES, pa.binary()),
    pa.array(COLUMN_VALUES, pa.large_binary()),
    pa.array(COLUMN_VALUES, pa.binary_view()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES], pa.string()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES], pa.large_string()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES], pa.string_view()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES]).dictionary_encode(),
    pa.array([b"ab", b"cd", b"\x00\x00", b"gh", b"ij"], pa.binary(2)),
], ids=["binary", "large_binary", "binary_view", "string", "large_string", "string_view",
        "dictionary", "fixed_size_binary"])
@pytest.mark.parametrize("sliced", [False, True], ids=["whole", "sliced"])
def test_column_writes_values_byte_for_byte(tmp_path, array, sliced):
    """column= writes each value as one record, exactly its bytes (strings as
    UTF-8), also from a slice; no schema file is written."""
    table = pa.table({"k": range(5), "v": array})
    expected = [v.encode() if isinstance(v, str) else v for v in array.to_pylist()]
    if sliced:
        table, expected = table.slice(1, 3), expected[1:4]
    paths = sackli.arrow.write_table(table, tmp_path / "c.bag", column="v")
    assert records_of(paths[0]) == expected
    assert files_in(tmp_path) == ["c.bag"]


def test_column_null_raises_naming_row(tmp_path):
    """A null in column= raises ValueError naming the column and the row
    (counted across chunks), leaving no file behind."""
    table = pa.concat_tables([pa.table({"c": ["a", "b"]}), pa.table({"c": ["c", None, "e"]})])
    for spec in ["n.bag", "n@2.bagz"]:
        with pytest.raises(ValueError, match=r"'c' is null at row 3\b"):
            sackli.arrow.write_table(table, tmp_path / spec, column="c")
    assert files_in(tmp_path) == []


def test_column_skip_nulls_leaves_them_out(tmp_path):
    """skip_nulls=True leaves null values out (the count is then unknown up
    front, so `@2` still splits evenly)."""
    table = pa.concat_tables([pa.table({"c": ["a", None]}), pa.table({"c": ["c", None, "e"]})])
    paths = sackli.arrow.write_table(table, tmp_path / "n@2.bag", column="c", skip_nulls=True)
    assert [records_of(p) for p in paths] == [[b"a", b"c"], [b"e"]]
    assert files_in(tmp_path) == ["n-00000-of-00002.bag", "n-00001-of-00002.bag"]


@pytest.mark.parametrize("table", [
    pa.RecordBatchReader.from_batches(pa.schema([("a", pa.int64())]), []),
    pa.table({"c": pa.array([None, None], pa.string())}),
], ids=["empty_stream", "all_null_skipped"])
def test_no_records_of_unknown_count_into_sharded_spec(tmp_path, table):
    """When no record comes and the count was not known up front (an empty
    stream, or every value skipped as null), `@3` makes three empty shards."""
    extra = {"column": "c", "skip_nulls": True} if isinstance(table, pa.Table) else {}
    paths = sackli.arrow.write_table(table, tmp_path / "e@3.bagz", **extra)
    assert shard_sizes(paths) == [0, 0, 0]
    assert not [f for f in files_in(tmp_path) if "spool" in f]


def test_callable_encoding_and_decode(tmp_path):
    """A function can encode rows (returning an Arrow array or bytes-likes)
    and decode records (returning a RecordBatch, Table or StructArray); no
    schema file is written for a function's records."""
    table = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})

    def as_arrow(batch):
        return pc.binary_join_element_wise(batch.column("s"), batch.column("a").cast(pa.string()),
                                           ":")

    sackli.arrow.write_table(table, tmp_path / "arrow.bag", encoding=as_arrow)
    sackli.arrow.write_table(table, tmp_path / "bytes.bag",
                             encoding=lambda b: [memoryview(b"m%d" % v) for v in
                                                 b.column("a").to_pylist()])
    assert records_of(tmp_path / "arrow.bag") == [b"x:1", b"y:2", b"z:3"]
    assert records_of(tmp_path / "bytes.bag") == [b"m1", b"m2", b"m3"]
    assert files_in(tmp_path) == ["arrow.bag", "bytes.bag"]

    def decode(records):
        return pa.record_batch({"length": pc.binary_length(records),
                                "upper": pc.utf8_upper(records.cast(pa.large_string()))})

    batches = list(sackli.arrow.read_batches(str(tmp_path / "arrow.bag"), decode=decode,
                                             batch_size=2))
    assert [b.num_rows for b in batches] == [2, 1]
    assert pa.Table.from_batches(batches).to_pydict() == {
        "length": [3, 3, 3], "upper": ["X:1", "Y:2", "Z:3"]}
    as_table = sackli.arrow.read_table(str(tmp_path / "arrow.bag"),
                                       decode=lambda r: pa.table({"r": r}), with_index=True)
    assert as_table.to_pydict() == {"r": [b"x:1", b"y:2", b"z:3"], "index": [0, 1, 2]}
    as_struct = sackli.arrow.read_table(
        str(tmp_path / "arrow.bag"),
        decode=lambda r: pa.StructArray.from_arrays([pc.binary_length(r)], ["n"]))
    assert as_struct.to_pydict() == {"n": [3, 3, 3]}


def test_callable_errors(tmp_path):
    """Functions that return the wrong number of records or rows, nulls, or
    the wrong type are refused with a clear error."""
    table = pa.table({"a": [1, 2, 3]})
    with pytest.raises(ValueError, match="returned 1 records for a batch of 3 rows"):
        sackli.arrow.write_table(table, tmp_path / "a.bag", encoding=lambda b: [b"x"])
    with pytest.raises(ValueError, match="null records"):
        sackli.arrow.write_table(table, tmp_path / "a.bag",
                                 encoding=lambda b: pa.array([b"x", None, b"z"]))
    assert files_in(tmp_path) == []
    write_records(tmp_path / "r.bag", [b"1", b"2", b"3"])
    with pytest.raises(TypeError, match="RecordBatch, Table or StructArray"):
        sackli.arrow.read_table(str(tmp_path / "r.bag"), decode=lambda r: r)
    with pytest.raises(ValueError, match="returned 1 rows for 3 records"):
        sackli.arrow.read_table(str(tmp_path / "r.bag"),
                                decode=lambda r: pa.record_batch({"x": [1]}))


# --- Parquet and streams -----------------------------------------------------


def parquet_table(rows: int = 1000) -> pa.Table:
    return pa.table({"id": pa.array(range(rows), pa.int64()),
                     "part": [f"p{i % 3}" for i in range(rows)],
                     "v": [i * 0.5 for i in range(rows)]})


def test_parquet_file_path(tmp_path):
    """A Parquet file path (str or Path) of several row groups converts in
    order."""
    table = parquet_table()
    pq.write_table(table, tmp_path / "one.parquet", row_group_size=100)
    sackli.arrow.write_table(tmp_path / "one.parquet", tmp_path / "a@3.bagz")
    sackli.arrow.write_table(str(tmp_path / "one.parquet"), tmp_path / "b.bag")
    for spec in ["a@3.bagz", "b.bag"]:
        assert_tables_equal(sackli.arrow.read_table(str(tmp_path / spec), decode="arrow"), table)


def test_parquet_folder(tmp_path):
    """A folder of Parquet files converts as one table, file by file."""
    table = parquet_table()
    (tmp_path / "plain").mkdir()
    pq.write_table(table.slice(0, 400), tmp_path / "plain" / "part-0.parquet")
    pq.write_table(table.slice(400), tmp_path / "plain" / "part-1.parquet")
    sackli.arrow.write_table(tmp_path / "plain", tmp_path / "plain.bagz")
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "plain.bagz"), decode="arrow"),
                        table)


def test_hive_partitioned_parquet_folder(tmp_path):
    """A hive-partitioned folder (pyarrow.parquet.write_to_dataset) converts
    with its partition column restored."""
    table = parquet_table()
    pq.write_to_dataset(table, tmp_path / "hive", partition_cols=["part"])
    paths = sackli.arrow.write_table(tmp_path / "hive", tmp_path / "h@2.bagz")
    assert shard_sizes(paths) == [500, 500]
    back = sackli.arrow.read_table(str(tmp_path / "h@2.bagz"), decode="arrow")
    assert sorted(back.column_names) == sorted(table.column_names)
    by_id = lambda rows: sorted(rows, key=lambda row: row["id"])  # noqa: E731
    assert by_id(back.to_pylist()) == by_id(table.select(back.column_names).to_pylist())


def test_pyarrow_dataset(tmp_path):
    """A pyarrow.dataset.Dataset converts (its row count known: even `@3`)."""
    table = parquet_table()
    pq.write_table(table, tmp_path / "one.parquet", row_group_size=128)
    paths = sackli.arrow.write_table(ds.dataset(tmp_path / "one.parquet"), tmp_path / "d@3.bag")
    assert shard_sizes(paths) == [334, 333, 333]
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "d@3.bag"), decode="arrow"), table)


def test_long_stream_into_even_shards(tmp_path):
    """A RecordBatchReader of many small batches (length unknown, larger than
    a write piece) into `@4`: spooled, then split into four contiguous runs
    as even as possible, in order, with no spool file left."""
    rows = 50_001
    table = pa.table({"id": pa.array(range(rows), pa.int64()),
                      "s": pa.array([f"row {i}" for i in range(rows)])})
    stream = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=1000))
    paths = sackli.arrow.write_table(stream, tmp_path / "s@4.bagz")
    assert shard_sizes(paths) == [12501, 12500, 12500, 12500]
    assert files_in(tmp_path) == ["s-00000-of-00004.bagz", "s-00001-of-00004.bagz",
                                  "s-00002-of-00004.bagz", "s-00003-of-00004.bagz",
                                  "s.bagz.arrow_schema"]
    back = sackli.arrow.read_table(str(tmp_path / "s@4.bagz"), decode="arrow")
    assert back.equals(table)
    last_shard = sackli.arrow.read_table(paths[3], decode="arrow")
    assert last_shard.column("id").to_pylist() == list(range(37501, rows))


# --- read_batches options ------------------------------------------------------


@pytest.fixture(scope="module")
def hundred(tmp_path_factory) -> tuple[str, pa.Table]:
    """(spec, table) of 100 rows written to `@3.bag`."""
    folder = tmp_path_factory.mktemp("hundred")
    table = pa.table({"i": pa.array(range(100), pa.int64()),
                      "s": [f"s{i}" for i in range(100)],
                      "d": pa.array([["a", "b", None][i % 3]
                                     for i in range(100)]).dictionary_encode(),
                      "f": [i / 4 for i in range(100)]})
    spec = str(folder / "h@3.bag")
    sackli.arrow.write_table(table, spec)
    return spec, table


def test_columns_projection_in_given_order(hundred):
    """columns= reads just those columns, in the order given."""
    spec, table = hundred
    back = sackli.arrow.read_table(spec, decode="arrow", columns=["f", "d", "i"])
    assert back.column_names == ["f", "d", "i"]
    assert back.schema.field("d").type == table.schema.field("d").type
    assert back.to_pydict() == table.select(["f", "d", "i"]).to_pydict()


@pytest.mark.parametrize("indices, positions", [
    ([5, 0, 99], [5, 0, 99]),
    (np.array([7, 7, 3], dtype=np.int64), [7, 7, 3]),
    (np.array([2, 1], dtype=np.uint8), [2, 1]),
    ([-1, -100, 50, 50], [99, 0, 50, 50]),
    (range(90, 100, 3), [90, 93, 96, 99]),
    (slice(None, 10, 4), [0, 4, 8]),
    (pa.array([3, 1]), [3, 1]),
    ([], []),
], ids=["list", "numpy", "uint8", "negative_and_duplicates", "range", "slice", "arrow", "empty"])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_indices_with_index(hundred, indices, positions, batch_size):
    """indices= reads those rows in order (negatives from the end,
    duplicates repeated); with_index=True adds their resolved positions."""
    spec, table = hundred
    back = sackli.arrow.read_table(spec, decode="arrow", indices=indices, with_index=True,
                                   batch_size=batch_size)
    assert back.column_names == ["i", "s", "d", "f", "index"]
    assert back.column("index").to_pylist() == positions
    assert back.column("i").to_pylist() == positions
    expected = table.take(pa.array(positions, pa.int64())).to_pylist()
    assert back.drop_columns(["index"]).to_pylist() == expected


def test_with_index_name_and_raw_records(hundred):
    """with_index="name" names the position column; decode=None gives the
    records as one large_binary column `record`."""
    spec, _ = hundred
    back = sackli.arrow.read_table(spec, indices=[4, 2], with_index="pos")
    assert back.schema == pa.schema([pa.field("record", pa.large_binary(), nullable=False),
                                     pa.field("pos", pa.int64(), nullable=False)])
    assert back.column("record").to_pylist() == [records_of(spec)[4], records_of(spec)[2]]


def test_small_batch_size_yields_several_batches(hundred):
    """batch_size=7 yields batches of at most 7 rows (none spanning two shard
    files), and a RecordBatchReader that is read once."""
    spec, table = hundred
    batches = sackli.arrow.read_batches(spec, decode="arrow", batch_size=7)
    assert isinstance(batches, pa.RecordBatchReader)
    sizes = [batch.num_rows for batch in batches]
    assert sum(sizes) == 100 and max(sizes) == 7 and len(sizes) >= 15
    # Shards hold rows [0, 34), [34, 67), [67, 100).
    assert sizes == [7] * 4 + [6] + [7] * 4 + [5] + [7] * 4 + [5]


def test_default_batches_do_not_span_shards(hundred):
    """Without batch_size, each shard file's rows come as their own batch."""
    spec, _ = hundred
    sizes = [b.num_rows for b in sackli.arrow.read_batches(spec, decode="arrow")]
    assert sizes == [34, 33, 33]


def test_reader_view_and_spec_sources(hundred):
    """A Reader slice reads just its rows (positions relative to the view);
    the Reader given stays open, a spec string works like a Reader."""
    spec, table = hundred
    reader = sackli.Reader(spec)
    view = reader[10:50]
    back = sackli.arrow.read_table(view, decode="arrow", with_index=True, batch_size=9)
    assert back.column("i").to_pylist() == list(range(10, 50))
    assert back.column("index").to_pylist() == list(range(40))
    tail = sackli.arrow.read_table(view, decode="arrow", indices=[-1, 0])
    assert tail.column("i").to_pylist() == [49, 10]
    strided = sackli.arrow.read_table(reader[::-3], decode="arrow")
    assert strided.column("i").to_pylist() == list(range(99, -1, -3))
    assert not reader.closed
    assert sackli.arrow.read_table(spec, decode="arrow").equals(
        sackli.arrow.read_table(reader, decode="arrow"))
    reader.close()


def test_schema_argument_replaces_schema_file(tmp_path):
    """schema= decodes "arrow" rows when there is no schema file."""
    table = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})
    sackli.arrow.write_table(table, tmp_path / "a.bag")
    os.remove(tmp_path / "a.bag.arrow_schema")
    back = sackli.arrow.read_table(str(tmp_path / "a.bag"), decode="arrow", schema=table.schema)
    assert back.equals(table)


@pytest.mark.parametrize("reader_options", [
    {},
    {"sharding_layout": sackli.ShardingLayout.INTERLEAVED},
    {"cache_policy": sackli.CachePolicy.DROP_AFTER_READ},
    {"cache_policy": sackli.CachePolicy.DIRECT_IO},
    {"limits_storage": sackli.LimitsStorage.IN_MEMORY},
], ids=["default", "interleaved", "drop_after_read", "direct_io", "limits_in_memory"])
@pytest.mark.parametrize("ext", ["bag", "bagz"])
def test_raw_records_match_reader_for_every_reader_option(tmp_path, reader_options, ext):
    """decode=None gives exactly the Reader's records, in the Reader's order,
    whatever the layout or cache policy, for whole readers, views and
    indices."""
    records = [b"rec%d;" % i * (i % 5) for i in range(100)]
    for shard, (start, end) in enumerate([(0, 34), (34, 67), (67, 100)]):
        write_records(tmp_path / f"x-{shard:05d}-of-00003.{ext}", records[start:end])
    reader = sackli.Reader(str(tmp_path / f"x@3.{ext}"), **reader_options)
    expected = list(reader)
    for batch_size in [None, 7]:
        read = lambda source, **kw: sackli.arrow.read_table(  # noqa: E731
            source, batch_size=batch_size, **kw).column("record").to_pylist()
        assert read(reader) == expected
        assert read(reader[5:90]) == expected[5:90]
        assert read(reader, indices=list(range(99, -1, -3))) == expected[::-1][::3]


def test_reader_is_an_arrow_stream(hundred):
    """pa.table(), pl.from_arrow() and DuckDB read a sackli.Reader (or a view
    of one) as its raw records."""
    spec, _ = hundred
    records = records_of(spec)
    reader = sackli.Reader(spec)
    table = pa.table(reader)
    assert table.schema == pa.schema([pa.field("record", pa.large_binary(), nullable=False)])
    assert table.column("record").to_pylist() == records
    assert pa.table(reader[10:50]).column("record").to_pylist() == records[10:50]
    assert pl.from_arrow(reader).to_list() == records
    view = reader[::-1]
    assert [row[0] for row in duckdb.sql("select record from view").fetchall()] == records[::-1]
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        pa.table(reader)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_uncompressed_bag_is_read_without_copy(tmp_path):
    """Records of a local .bag come straight from the memory-mapped file
    (the data buffer lies inside the file's mapping); a .bagz's do not; and
    the batches stay valid after the reader is closed."""
    records = [os.urandom(1000) for _ in range(5000)]
    write_records(tmp_path / "u.bag", records)
    write_records(tmp_path / "c.bagz", records)

    def mappings(path):
        real, spans = os.path.realpath(path), []
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and parts[5] == real:
                    low, high = (int(x, 16) for x in parts[0].split("-"))
                    spans.append((low, high))
        return spans

    for name, mapped in [("u.bag", True), ("c.bagz", False)]:
        reader = sackli.Reader(str(tmp_path / name))
        batch = next(iter(sackli.arrow.read_batches(reader, batch_size=1000)))
        data = batch.column("record").buffers()[2]
        inside = any(low <= data.address and data.address + data.size <= high
                     for low, high in mappings(tmp_path / name))
        assert inside == mapped, name
        reader.close()
        del reader
        gc.collect()
        assert batch.column("record").to_pylist() == records[:1000]
    table = sackli.arrow.read_table(str(tmp_path / "u.bag"))  # its reader is closed by now
    gc.collect()
    assert table.column("record").to_pylist() == records


# --- DuckDB and Polars ---------------------------------------------------------


@pytest.fixture(scope="module")
def sales(tmp_path_factory) -> tuple[str, str]:
    """(Parquet path, bag spec) of the same 20k rows: a category column and
    numeric columns, converted with write_table to `@4.bagz`."""
    folder = tmp_path_factory.mktemp("sales")
    rng = np.random.default_rng(7)
    rows = 20_000
    table = pa.table({
        "id": pa.array(np.arange(rows)),
        "cat": pa.array(rng.choice(["a", "b", "c", "d", "e"], rows)).dictionary_encode(),
        "x": pa.array(rng.integers(-1000, 1000, rows)),
        "y": pa.array(rng.random(rows)),
    })
    parquet = str(folder / "sales.parquet")
    pq.write_table(table, parquet, row_group_size=3000)
    spec = str(folder / "sales@4.bagz")
    paths = sackli.arrow.write_table(parquet, spec)
    assert shard_sizes(paths) == [5000] * 4
    return parquet, spec


def test_duckdb_over_bags_matches_parquet(sales):
    """The same GROUP BY and filter queries give the same answers over the
    Parquet file and over the bag set decoded by read_batches."""
    parquet, spec = sales
    group = ("select cat::varchar as cat, count(*) as n, sum(x) as sx, avg(x) as ax, "
             "sum(y) as sy, avg(y) as ay from {} group by all order by cat")
    where = "select id, x, y from {} where x > 900 and cat = 'b' order by id"
    for query in [group, where]:
        expected = duckdb.sql(query.format(f"read_parquet('{parquet}')")).fetchall()
        stream = sackli.arrow.read_batches(spec, decode="arrow")  # noqa: F841 (used by name)
        got = duckdb.sql(query.format("stream")).fetchall()
        assert len(got) == len(expected) > 4
        for got_row, expected_row in zip(got, expected):
            assert len(got_row) == len(expected_row)
            for got_value, expected_value in zip(got_row, expected_row):
                # Float sums and means may differ in the last bits (DuckDB
                # adds in parallel, in no fixed order); categories, counts,
                # integer sums and ids must be equal, and of the same type.
                assert type(got_value) is type(expected_value), (got_row, expected_row)
                if isinstance(expected_value, float):
                    assert got_value == pytest.approx(expected_value, rel=1e-12), (got_row, expected_row)
                else:
                    assert got_value == expected_value, (got_row, expected_row)
    counts = duckdb.sql(group.format(f"read_parquet('{parquet}')")).fetchall()
    assert sum(row[1] for row in counts) == 20_000


def test_polars_over_bags_matches_parquet(sales):
    """Polars gives the same group-by and filter answers over read_table of
    the bag set as over pl.read_parquet."""
    parquet, spec = sales
    from_bags = pl.from_arrow(sackli.arrow.read_table(spec, decode="arrow"))
    from_parquet = pl.read_parquet(parquet)
    assert from_bags.schema == from_parquet.schema

    def grouped(frame):
        return (frame.with_columns(pl.col("cat").cast(pl.String))
                .group_by("cat").agg(pl.len().alias("n"), pl.col("x").sum(),
                                     pl.col("y").mean()).sort("cat"))

    def filtered(frame):
        return (frame.filter((pl.col("x") > 900) & (pl.col("cat").cast(pl.String) == "b"))
                .select("id", "x", "y").sort("id"))

    polars.testing.assert_frame_equal(grouped(from_bags), grouped(from_parquet))
    polars.testing.assert_frame_equal(filtered(from_bags), filtered(from_parquet),
                                      check_exact=True)
    assert grouped(from_bags)["n"].sum() == 20_000


def test_duckdb_on_reader_raw_records(sales):
    """DuckDB reads a sackli.Reader directly: count(*) and the sum of record
    lengths match the Reader's."""
    _, spec = sales
    reader = sackli.Reader(spec)
    query = "select count(*), sum(octet_length(record)) from reader"
    [(count, total)] = duckdb.sql(query).fetchall()
    assert count == len(reader) == 20_000
    assert total == sum(len(record) for record in reader)
    reader.close()


# --- Errors ------------------------------------------------------------------


@pytest.mark.parametrize("data", [{"a": [1]}, [1, 2], 42, None],
                         ids=["dict", "list", "int", "None"])
def test_unsupported_data_is_a_type_error(tmp_path, data):
    """Data that is not table-like raises TypeError (and writes nothing)."""
    with pytest.raises(TypeError, match="pyarrow Table"):
        sackli.arrow.write_table(data, tmp_path / "x.bag")
    assert files_in(tmp_path) == []


def test_missing_or_bad_parquet_path(tmp_path):
    """A missing Parquet path raises FileNotFoundError naming it; a file that
    is not Parquet raises ValueError naming it."""
    missing = str(tmp_path / "nope.parquet")
    with pytest.raises(FileNotFoundError, match="nope.parquet") as error:
        sackli.arrow.write_table(missing, tmp_path / "x.bag")
    assert error.value.filename == missing
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="junk.parquet"):
        sackli.arrow.write_table(str(tmp_path / "junk.parquet"), tmp_path / "x.bag")
    assert files_in(tmp_path) == ["junk.parquet"]


@pytest.mark.parametrize("spec", ["x.bag", "x@3.bagz", "x@*.bagz"])
def test_missing_output_folder(tmp_path, spec):
    """An output folder that does not exist raises FileNotFoundError."""
    extra = {"max_shard_bytes": 1000} if "@*" in spec else {}
    with pytest.raises(FileNotFoundError, match="folder does not exist"):
        sackli.arrow.write_table(pa.table({"a": [1]}), tmp_path / "nodir" / spec, **extra)
    assert files_in(tmp_path) == []


def test_decode_arrow_needs_schema_file(tmp_path):
    """decode="arrow" without a schema file raises FileNotFoundError naming
    the schema path it looked for."""
    write_records(tmp_path / "raw.bag", [b"hello", b"world"])
    with pytest.raises(FileNotFoundError, match="raw.bag.arrow_schema") as error:
        sackli.arrow.read_table(str(tmp_path / "raw.bag"), decode="arrow")
    assert error.value.filename == str(tmp_path / "raw.bag.arrow_schema")


def test_decode_arrow_of_arbitrary_bytes_names_bag(tmp_path):
    """decode="arrow" with a schema over records that are not Arrow rows
    raises ValueError naming the bag."""
    path = str(tmp_path / "raw.bag")
    write_records(path, [b"hello", b"world"])
    with pytest.raises(ValueError, match=f"^{path}: records from 0 on are not rows"):
        sackli.arrow.read_table(path, decode="arrow", schema=pa.schema([("a", pa.int64())]))


def test_decode_with_other_encoding_schema_file(tmp_path):
    """The schema file records the encoding: decoding "json" rows as "arrow"
    (or the other way round) raises ValueError."""
    table = pa.table({"a": [1, 2]})
    sackli.arrow.write_table(table, tmp_path / "j.bag", encoding="json")
    sackli.arrow.write_table(table, tmp_path / "a.bag", encoding="arrow")
    with pytest.raises(ValueError, match="encoding='json', not 'arrow'"):
        sackli.arrow.read_table(str(tmp_path / "j.bag"), decode="arrow")
    with pytest.raises(ValueError, match="encoding='arrow', not 'json'"):
        sackli.arrow.read_table(str(tmp_path / "a.bag"), decode="json")


@pytest.mark.parametrize("batch_size", [None, 2])
def test_decode_json_of_non_json_names_record(tmp_path, batch_size):
    """decode="json" raises ValueError naming the bag and the first record
    that is not a JSON object."""
    path = str(tmp_path / "mixed.bag")
    write_records(path, [b'{"a": 1}', b'{"a": 2}', b"not json", b'{"a": 3}'])
    with pytest.raises(ValueError, match=f"^{path}: record 2 is not JSON"):
        sackli.arrow.read_table(path, decode="json", batch_size=batch_size)
    write_records(tmp_path / "array.bag", [b'{"a": 1}', b"[1]"])
    with pytest.raises(ValueError, match="record 1 is JSON but not an object"):
        sackli.arrow.read_table(str(tmp_path / "array.bag"), decode="json")


def test_bad_arguments(tmp_path):
    """Bad encoding / decode names, column= on a non-binary column, unknown
    columns, columns= without a decode, batch_size < 1 and a clashing
    with_index are refused."""
    table = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})
    with pytest.raises(ValueError, match="encoding must be"):
        sackli.arrow.write_table(table, tmp_path / "x.bag", encoding="csv")
    with pytest.raises(TypeError, match="column 'a' is int64"):
        sackli.arrow.write_table(table, tmp_path / "x.bag", column="a")
    with pytest.raises(KeyError, match="no column 'zz'"):
        sackli.arrow.write_table(table, tmp_path / "x.bag", column="zz")
    assert files_in(tmp_path) == []
    spec = str(tmp_path / "good.bag")
    sackli.arrow.write_table(table, spec)
    with pytest.raises(ValueError, match="decode must be"):
        sackli.arrow.read_table(spec, decode="csv")
    with pytest.raises(KeyError, match="no column 'nope'"):
        sackli.arrow.read_table(spec, decode="arrow", columns=["a", "nope"])
    with pytest.raises(ValueError, match="columns= needs"):
        sackli.arrow.read_table(spec, columns=["a"])
    with pytest.raises(ValueError, match="batch_size"):
        sackli.arrow.read_table(spec, batch_size=0)
    with pytest.raises(ValueError, match="with_index='a'"):
        sackli.arrow.read_table(spec, decode="arrow", with_index="a")
    with pytest.raises(TypeError, match="source must be"):
        sackli.arrow.read_table(42)


@pytest.mark.parametrize("spec, max_shard_bytes", [
    ("x@3.bag", 1000), ("x.bag", 1000), ("x@*.bag", None), ("x@*.bag", 0)])
def test_max_shard_bytes_goes_with_star_spec_only(tmp_path, spec, max_shard_bytes):
    """max_shard_bytes is refused with `@N` or a plain path, required by
    `@*`, and must be positive."""
    with pytest.raises(ValueError, match="max_shard_bytes"):
        sackli.arrow.write_table(pa.table({"a": [1]}), tmp_path / spec,
                                 max_shard_bytes=max_shard_bytes)
    assert files_in(tmp_path) == []


@pytest.mark.parametrize("indices", [[0, 3], [-4], [2, 100]])
def test_out_of_range_indices(tmp_path, indices):
    """An index outside the reader raises IndexError."""
    sackli.arrow.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "a.bag")
    with pytest.raises(IndexError, match="out of range"):
        sackli.arrow.read_table(str(tmp_path / "a.bag"), decode="arrow", indices=indices)


def _fails_on_third_piece():
    calls = []

    def encode(batch):
        calls.append(batch.num_rows)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return [b"r%d" % v for v in batch.column("a").to_pylist()]

    return encode


def _stream_failing_midway(table):
    def batches():
        yield from table.slice(0, 20_000).to_batches(max_chunksize=1000)
        raise RuntimeError("boom")

    return pa.RecordBatchReader.from_batches(table.schema, batches())


@pytest.mark.parametrize("spec, extra", [
    ("p.bagz", {}), ("q@3.bagz", {}), ("s@*.bagz", {"max_shard_bytes": 5000}),
    ("t@3.bag", {"limits": True})])
@pytest.mark.parametrize("failure", ["encoding", "stream"])
def test_failed_write_leaves_nothing_behind(tmp_path, spec, extra, failure):
    """A write that fails midway (the encoding function or the input stream
    raising) leaves no shard, temporary shard, spool, limits or schema file."""
    table = pa.table({"a": range(30_000), "s": [str(i) for i in range(30_000)]})
    extra = dict(extra)
    if extra.pop("limits", False):
        extra["options"] = sackli.Writer.Options(limits_placement=sackli.LimitsPlacement.SEPARATE)
    if failure == "encoding":
        stream = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(1000))
        data = table if spec != "t@3.bag" else stream  # t@3 spools (unknown length)
        with pytest.raises(RuntimeError, match="boom"):
            sackli.arrow.write_table(data, tmp_path / spec, encoding=_fails_on_third_piece(),
                                     **extra)
    else:
        with pytest.raises(RuntimeError, match="boom"):
            sackli.arrow.write_table(_stream_failing_midway(table), tmp_path / spec, **extra)
    assert files_in(tmp_path) == []


# --- Memory --------------------------------------------------------------------

_STREAM_WRITER = """
import json, resource, sys, threading, time
import numpy as np, pyarrow as pa, sackli.arrow

ROW_BYTES, ROWS_PER_BATCH, BATCHES = 16 << 10, 256, 50   # 4 MiB batches, 200 MiB
block = np.random.default_rng(0).integers(0, 256, ROW_BYTES * ROWS_PER_BATCH,
                                          dtype=np.uint8).tobytes()
ends = pa.array(np.arange(ROWS_PER_BATCH + 1, dtype=np.int32) * ROW_BYTES).buffers()[1]
schema = pa.schema([("i", pa.int64()), ("payload", pa.binary())])

def batches():
    for b in range(BATCHES):
        payload = pa.BinaryArray.from_buffers(pa.binary(), ROWS_PER_BATCH,
                                              [None, ends, pa.py_buffer(block)])
        ids = pa.array(np.arange(ROWS_PER_BATCH) + b * ROWS_PER_BATCH)
        yield pa.record_batch([ids, payload], schema=schema)

def anon_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0

peak_anon = base_anon = anon_bytes()
done = threading.Event()
def sample():
    global peak_anon
    while not done.is_set():
        peak_anon = max(peak_anon, anon_bytes())
        time.sleep(0.002)
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
base_maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
paths = sackli.arrow.write_table(pa.RecordBatchReader.from_batches(schema, batches()), SPEC)
done.set()
sampler.join()
rows = 0
for path in paths:
    with sackli.Reader(path) as reader:
        rows += len(reader)
print(json.dumps({"rows": rows, "data": ROW_BYTES * ROWS_PER_BATCH * BATCHES,
                  "maxrss_growth": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                                   - base_maxrss,
                  "anon_growth": peak_anon - base_anon}))
"""


def _stream_write(run_python, spec: str) -> dict:
    result = run_python(f"SPEC = {spec!r}\n" + _STREAM_WRITER, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_streamed_write_keeps_peak_rss_bounded(run_python):
    """Writing a 200 MiB stream of record batches to one .bagz keeps the
    process's peak RSS growth (getrusage) under half the data size."""
    outcome = _stream_write(run_python, "out.bagz")
    assert outcome["rows"] == 50 * 256
    assert outcome["maxrss_growth"] < outcome["data"] / 2, outcome


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status")
def test_streamed_write_to_sharded_bagz_keeps_anonymous_memory_bounded(run_python):
    """Writing a 200 MiB stream to `@2.bagz` (spooled, then split and
    compressed) keeps peak anonymous memory growth under half the data size:
    the split does not hold a whole shard's compressed records at once."""
    outcome = _stream_write(run_python, "out@2.bagz")
    assert outcome["rows"] == 50 * 256
    assert outcome["anon_growth"] < outcome["data"] / 2, outcome
