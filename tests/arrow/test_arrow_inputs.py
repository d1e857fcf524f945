"""sackli.arrow._inputs: what write_table accepts (tables, Polars,
DuckDB, Parquet files and folders, datasets) and what it refuses."""

from __future__ import annotations

import duckdb
import polars as pl
import polars.testing
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    assert_tables_equal, files_in, shard_sizes,
)


# --- Inputs ------------------------------------------------------------------


def test_polars_dataframe_round_trips(tmp_path):
    """A Polars DataFrame (Arrow C stream; string_view strings, large lists)
    writes and reads back as an equal DataFrame."""
    frame = pl.DataFrame({"a": [1, 2, None], "s": ["x", None, "z"], "l": [[1], [], None],
                          "f": [0.5, None, float("nan")]})
    sackli.arrow.write_table(frame, tmp_path / "p@2.bagz")
    back = pl.from_arrow(sackli.arrow.read_table(str(tmp_path / "p@2.bagz"), decode="arrow"))
    polars.testing.assert_frame_equal(back, frame)


def test_duckdb_relation_input(tmp_path):
    """A DuckDB relation is read through its Arrow C stream (length unknown,
    so `@3` spools then splits evenly)."""
    relation = duckdb.sql("select range as i, 'v' || range::varchar as s from range(10)")
    paths = sackli.arrow.write_table(relation, tmp_path / "d@3.bag")
    assert shard_sizes(paths) == [4, 3, 3]
    back = sackli.arrow.read_table(str(tmp_path / "d@3.bag"), decode="arrow")
    assert back.to_pydict() == {"i": list(range(10)), "s": [f"v{i}" for i in range(10)]}


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
