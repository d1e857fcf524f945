"""`sackli convert` to and from Parquet (sackli/cli/_parquet.py)."""

from __future__ import annotations

import json

import sackli
from cli_helpers import (  # registered by conftest.py
    ok, fails,
)


# --- Parquet ------------------------------------------------------------------


def _events_parquet(folder) -> "object":
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({
        "id": pa.array(range(1000), pa.int64()),
        "kind": pa.array(["click", "view", None, "buy"] * 250).dictionary_encode(),
        "payload": pa.array([f"event {i}".encode() for i in range(1000)], pa.binary()),
        "tags": pa.array([[i % 3, i % 5] for i in range(1000)], pa.list_(pa.int32())),
    })
    pq.write_table(table, folder / "events.parquet", row_group_size=128)
    return table


def test_convert_parquet_to_sharded_bags_and_back(tmp_path) -> None:
    """Rows survive Parquet -> 4 .bagz shards -> Parquet, with their types."""
    import pyarrow.parquet as pq

    table = _events_parquet(tmp_path)
    assert ok("convert", "events.parquet", "events@4.bagz", "--level", "5",
              cwd=tmp_path).startswith(b"converted events.parquet to 4 shards")
    sizes = [len(sackli.Reader(tmp_path / f"events-0000{i}-of-00004.bagz")) for i in range(4)]
    assert sizes == [250, 250, 250, 250]
    ok("convert", "events@*.bagz", "back.parquet", cwd=tmp_path)
    back = pq.read_table(tmp_path / "back.parquet")
    assert back.schema == table.schema
    assert back.to_pylist() == table.to_pylist()


def test_convert_parquet_column_and_json_rows(tmp_path) -> None:
    """--column writes one column's bytes as records; --encoding json rows
    read back through --decode auto; raw bags export a `record` column."""
    import json

    import pyarrow.parquet as pq

    _events_parquet(tmp_path)
    ok("convert", "events.parquet", "payload.bag", "--column", "payload", cwd=tmp_path)
    assert sackli.Reader(tmp_path / "payload.bag")[7] == b"event 7"
    ok("convert", "payload.bag", "payload.parquet", cwd=tmp_path)
    assert pq.read_table(tmp_path / "payload.parquet").column("record")[7].as_py() == b"event 7"

    ok("convert", "events.parquet", "rows@*.bag", "--encoding", "json",
       "--max-shard-bytes", "20000", cwd=tmp_path)
    reader = sackli.Reader(tmp_path / "rows@*.bag")
    assert len(reader.paths) > 1
    assert json.loads(reader[3]) == {"id": 3, "kind": "buy", "payload": "ZXZlbnQgMw==",
                                     "tags": [0, 3]}
    ok("convert", "rows@*.bag", "rows.parquet", cwd=tmp_path)
    assert pq.read_table(tmp_path / "rows.parquet").column("id").to_pylist() == list(range(1000))


def test_convert_parquet_refuses_nulls_in_a_column(tmp_path) -> None:
    """A null in --column fails with the row, leaves nothing behind, and
    --skip-nulls leaves the nulls out."""
    _events_parquet(tmp_path)
    line = fails("convert", "events.parquet", "kinds@2.bag", "--column", "kind", cwd=tmp_path)
    assert line == ("sackli: error: column 'kind' is null at row 2; pass skip_nulls=True to "
                    "leave null values out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.parquet"]
    ok("convert", "events.parquet", "kinds@2.bag", "--column", "kind", "--skip-nulls",
       cwd=tmp_path)
    assert len(sackli.Reader(tmp_path / "kinds@2.bag")) == 750


def test_convert_refuses_an_existing_parquet_destination(tmp_path) -> None:
    _events_parquet(tmp_path)
    ok("convert", "events.parquet", "e@2.bagz", cwd=tmp_path)
    assert fails("convert", "events.parquet", "e@2.bagz", cwd=tmp_path).endswith(
        "exist(s); pass --force to overwrite")
    ok("convert", "e@2.bagz", "back.parquet", cwd=tmp_path)
    assert fails("convert", "e@2.bagz", "back.parquet", cwd=tmp_path) == (
        "sackli: error: back.parquet exists; pass --force to overwrite it")
    ok("convert", "e@2.bagz", "back.parquet", "--force", cwd=tmp_path)


def test_raw_bag_to_parquet_and_back_is_the_identity(tmp_path):
    records = [b"\x00\x01", b"", b"text", bytes(range(256))]
    with sackli.Writer(str(tmp_path / "raw.bagz")) as writer:
        writer.write_many(records)
    ok("convert", "raw.bagz", "raw.parquet", cwd=tmp_path)
    ok("convert", "raw.parquet", "back@2.bag", cwd=tmp_path)
    with sackli.Reader(str(tmp_path / "back@2.bag")) as reader:
        assert list(reader) == records
    assert not list(tmp_path.glob("*.arrow_schema"))
