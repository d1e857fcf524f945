"""sackli.arrow with DuckDB and Polars: queries over bags give what they
give over Parquet."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import polars.testing
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    shard_sizes,
)


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
