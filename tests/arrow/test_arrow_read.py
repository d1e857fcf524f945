"""sackli.arrow._read: read_batches options (columns, indices, batch
sizes, views), the Reader as an Arrow stream, and zero-copy reads."""

from __future__ import annotations

import gc
import os

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    records_of, write_records,
)


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
    back = sackli.arrow.read_table(spec, decode="raw", indices=[4, 2], with_index="pos")
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


# --- Errors ------------------------------------------------------------------


@pytest.mark.parametrize("indices", [[0, 3], [-4], [2, 100]])
def test_out_of_range_indices(tmp_path, indices):
    """An index outside the reader raises IndexError."""
    sackli.arrow.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "a.bag")
    with pytest.raises(IndexError, match="out of range"):
        sackli.arrow.read_table(str(tmp_path / "a.bag"), decode="arrow", indices=indices)


def test_decode_auto_follows_the_schema_file(tmp_path):
    """The default decode ("auto", shared with `sackli convert`) decodes rows
    as the schema file says and gives raw records without one; a table of
    raw records written back is those records again (bag -> table -> bag)."""
    table = pa.table({"a": pa.array([1, None, 3], pa.int16()), "s": ["x", "y", None]})
    sackli.arrow.write_table(table, tmp_path / "rows.bagz", encoding="json")
    assert sackli.arrow.read_table(str(tmp_path / "rows.bagz")).equals(table)
    records = [b"\x00raw", b"", b"bytes \xff"]
    with sackli.Writer(str(tmp_path / "raw.bag")) as writer:
        writer.write_many(records)
    raw = sackli.arrow.read_table(str(tmp_path / "raw.bag"))
    assert raw.column_names == ["record"] and raw.column(0).to_pylist() == records
    sackli.arrow.write_table(raw, tmp_path / "again@2.bag")
    with sackli.Reader(str(tmp_path / "again@2.bag")) as reader:
        assert list(reader) == records
    assert not list(tmp_path.glob("again*.arrow_schema"))  # raw records carry no schema
    # Asked for explicitly, the same table is encoded as rows.
    sackli.arrow.write_table(raw, tmp_path / "rows2.bag", encoding="arrow")
    assert sackli.arrow.read_table(str(tmp_path / "rows2.bag")).equals(raw)
