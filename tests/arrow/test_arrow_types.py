"""sackli.arrow._types: every Arrow type survives rows written with
encoding="arrow" (dictionaries, run-end encoding, views, slices, empty tables)."""

from __future__ import annotations

import datetime
import os

import polars as pl
import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    assert_tables_equal, records_of, shard_sizes, every_type_table, SPECS, SPEC_IDS,
)


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
    set_name = f"{name}-of-{len(paths):05d}" if "@" in spec else name  # a schema file per set
    assert (tmp_path / f"{set_name}.{ext}.arrow_schema").is_file()
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


def test_polars_categorical_round_trips(tmp_path):
    """A Polars Categorical column (a dictionary of string_view) writes and
    reads back."""
    frame = pl.DataFrame({"c": pl.Series(["p", "q", "p", None], dtype=pl.Categorical)})
    sackli.arrow.write_table(frame, tmp_path / "c.bagz")
    back = pl.from_arrow(sackli.arrow.read_table(str(tmp_path / "c.bagz"), decode="arrow"))
    assert back["c"].cast(pl.String).to_list() == ["p", "q", "p", None]
