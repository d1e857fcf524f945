"""`sackli.Reader.__arrow_c_stream__`: the engine's own Arrow C stream
(native/arrow/arrow_stream.h, native/python/arrow/arrow_stream.cc), read by pyarrow,
Polars and DuckDB, with and without pyarrow installed."""

from __future__ import annotations

import random

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import sackli


def _records(n: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40))) for _ in range(n)]


@pytest.fixture(params=[".bag", ".bagz"])
def bag(tmp_path, request):
    records = _records(300)
    path = str(tmp_path / f"data{request.param}")
    with sackli.Writer(path) as writer:
        writer.write_many(records)
    return path, records


def test_pyarrow_reads_records_and_views(bag):
    path, records = bag
    reader = sackli.Reader(path)
    table = pa.table(reader)
    assert table.schema == pa.schema([pa.field("record", pa.large_binary(), nullable=False)])
    table.validate(full=True)
    assert table.column("record").to_pylist() == records
    for view, expected in [(reader[::-1], records[::-1]), (reader[7:250:3], records[7:250:3]),
                           (reader[5:5], [])]:
        assert pa.table(view).column("record").to_pylist() == expected


@pytest.mark.parametrize("layout", list(sackli.ShardingLayout))
def test_shard_sets_stream_in_reader_order(tmp_path, layout):
    records = _records(101, seed=3)
    spec = str(tmp_path / "s@4.bagz")
    with sackli.ShardedWriter(spec) as writer:  # CONCATENATED shards
        writer.write_many(records)
    reader = sackli.Reader(spec, sharding_layout=layout)
    expected = list(reader)  # the layout decides the order
    assert sorted(expected) == sorted(records)
    assert pa.table(reader).column("record").to_pylist() == expected
    # A batch never spans two files of a concatenated set.
    batches = pa.RecordBatchReader.from_stream(reader)
    assert sum(batch.num_rows for batch in batches) == len(records)


def test_a_stream_outlives_its_reader(bag):
    """The stream (and batches lent from the mapping) keep the bag open."""
    path, records = bag
    reader = sackli.Reader(path)
    stream = pa.RecordBatchReader.from_stream(reader)
    reader.close()
    del reader
    assert stream.read_all().column("record").to_pylist() == records


def test_closed_reader_raises(bag):
    reader = sackli.Reader(bag[0])
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        reader.__arrow_c_stream__()


def test_corrupt_record_raises_arrow_invalid_naming_file_and_offset(tmp_path):
    path = tmp_path / "bad.bagz"
    with sackli.Writer(str(path)) as writer:
        writer.write_many([b"x" * 100] * 3)
    data = bytearray(path.read_bytes())
    data[4] ^= 0xFF  # inside the first frame's header
    path.write_bytes(bytes(data))
    with pytest.raises(pa.ArrowInvalid, match=r"bad\.bagz.*byte offset") as raised:
        pa.table(sackli.Reader(str(path)))
    assert isinstance(raised.value, ValueError)


def test_polars_and_duckdb_read_a_reader_without_pyarrow(bag, run_python):
    """The core imports nothing above it: with pyarrow unimportable,
    `import sackli` works, loads no Arrow bridge, and Polars and DuckDB read a
    Reader through the engine's stream."""
    path, records = bag
    outcome = run_python(f"""
import sys
sys.modules["pyarrow"] = None  # import pyarrow now raises ImportError
import duckdb, polars, sackli
reader = sackli.Reader({path!r})
print(json.dumps(dict(
    arrow_modules=sorted(m for m in sys.modules if m.startswith("sackli.arrow")),
    polars=[bytes(b).hex() for b in polars.from_arrow(reader).to_list()],
    duckdb=duckdb.sql("select count(*), sum(octet_length(record)) from reader").fetchall()[0],
)))
""").outcome()
    assert outcome["arrow_modules"] == []
    assert outcome["polars"] == [r.hex() for r in records]
    assert outcome["duckdb"] == [len(records), sum(map(len, records))]


def test_polars_and_duckdb_in_process(bag):
    path, records = bag
    reader = sackli.Reader(path)
    assert pl.from_arrow(reader).to_list() == records
    view = reader[10:20]
    assert [row[0] for row in duckdb.sql("select record from view").fetchall()] == records[10:20]
