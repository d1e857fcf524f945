"""Shard sets and Arrow schema files on gs:// and s3:// (ShardedWriter,
sackli.arrow.write_table / read_table / read_schema, sackli convert),
against moto's S3 server and fake-gcs-server behind the fault proxy."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from cli_helpers import fails, ok
from remote_helpers import SEPARATE, TAIL, make_records, remote, servers  # noqa: F401

PLACEMENTS = pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])


def read_all(url: str, **options) -> list[bytes]:
    with sackli.Reader(url, **options) as reader:
        return list(reader)


def shard_names(base: str, count: int, suffix: str) -> list[str]:
    return [f"{base}-{i:05d}-of-{count:05d}{suffix}" for i in range(count)]


def with_limits(names: list[str]) -> list[str]:
    return sorted(names + [f"limits.{name}" for name in names])


@PLACEMENTS
@pytest.mark.parametrize("num_records", [True, False], ids=["counted", "spooled"])
def test_sharded_writer_writes_a_set_of_n(remote, placement, num_records):
    records = make_records(301, seed=1)
    with sackli.ShardedWriter(remote.url("set@3.bagz"), limits_placement=placement,
                              num_records=len(records) if num_records else None) as writer:
        writer.write_many(records)
    names = shard_names("set", 3, ".bagz")
    assert writer.paths == [remote.url(n) for n in names]
    # Nothing hidden is left: only the set (and its limits objects), and the
    # set's manifest.
    assert sorted(remote.objects()) == sorted(
        (with_limits(names) if placement == SEPARATE else names) + ["set-of-00003.bagz.sackli_set"])
    assert read_all(remote.url("set@*.bagz"), limits_placement=placement) == records
    # Contiguous, even runs: 101, 100, 100 records.
    assert [len(read_all(remote.url(n), limits_placement=placement)) for n in names] == [101, 100, 100]


def test_sharded_writer_by_size_names_the_set_at_close(remote):
    records = make_records(400, seed=2)
    with sackli.ShardedWriter(remote.url("big@*.bag"), max_shard_bytes=10_000) as writer:
        writer.write_many(records)
    count = len(writer.paths)
    assert count > 2
    assert sorted(remote.objects()) == sorted(
        shard_names("big", count, ".bag") + [f"big-of-{count:05d}.bag.sackli_set"])
    assert read_all(remote.url("big@*.bag")) == records


def test_a_failed_set_leaves_the_older_set_and_nothing_hidden(remote):
    old = make_records(30, seed=3)
    with sackli.ShardedWriter(remote.url("keep@2.bag")) as writer:
        writer.write_many(old)
    before = {name: remote.get(name) for name in remote.objects()}
    with pytest.raises(RuntimeError, match="stop"):
        with sackli.ShardedWriter(remote.url("keep@2.bag"), num_records=40) as writer:
            writer.write_many(make_records(30, seed=4))  # the first shard is finished
            raise RuntimeError("stop")
    assert {name: remote.get(name) for name in remote.objects()} == before


def test_a_single_remote_bag_through_sharded_writer(remote):
    records = make_records(50, seed=5)
    with sackli.ShardedWriter(remote.url("one.bagz")) as writer:
        writer.write_many(records)
    assert list(remote.objects()) == ["one.bagz"]
    assert read_all(remote.url("one.bagz")) == records


def typed_table() -> pa.Table:
    return pa.table({
        "small": pa.array([1, -2, None], pa.int32()),
        "when": pa.array([datetime.datetime(2024, 5, 1, 12, 30), None,
                          datetime.datetime(1999, 12, 31)], pa.timestamp("ms", tz="Europe/Paris")),
        "day": pa.array([datetime.date(2020, 1, 2), datetime.date(1970, 1, 1), None], pa.date32()),
        "price": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.50")],
                          pa.decimal128(9, 2)),
        "name": ["a", None, "c"],
    })


@pytest.mark.parametrize("encoding", ["row", "arrow", "json"])
@pytest.mark.parametrize("spec", ["tab.bagz", "tab@2.bagz"])
def test_write_table_and_read_it_back_with_its_schema(remote, encoding, spec):
    table = typed_table()
    paths = sackli.arrow.write_table(table, remote.url(spec), encoding=encoding)
    assert paths == ([remote.url("tab.bagz")] if "@" not in spec
                     else [remote.url(n) for n in shard_names("tab", 2, ".bagz")])
    schema_name = "tab-of-00002.bagz.arrow_schema" if "@" in spec else "tab.bagz.arrow_schema"
    manifest = ["tab-of-00002.bagz.sackli_set"] if "@" in spec else []
    assert sorted(remote.objects()) == sorted(
        [p.rpartition("/")[2] for p in paths] + [schema_name] + manifest)
    assert sackli.arrow.read_schema(remote.url(spec)) == table.schema
    assert sackli.arrow.row_encoding(remote.url(spec)) == encoding
    read_spec = spec.replace("@2", "@*")
    assert sackli.arrow.read_table(remote.url(read_spec), decode=encoding).equals(table)


@pytest.mark.parametrize("spec", ["kinds.bagz", "kinds@2.bagz"])
def test_a_remote_set_records_its_dictionaries(remote, spec):
    table = pa.Table.from_batches([
        pa.record_batch({"k": pa.array(["b", "a", "b"]).dictionary_encode()}),
        pa.record_batch({"k": pa.array(["c", "a"]).dictionary_encode()}),
    ])
    sackli.arrow.write_table(table, remote.url(spec))
    got = sackli.arrow.read_table(remote.url(spec.replace("@2", "@*")), batch_size=2)
    assert {tuple(c.dictionary.to_pylist()) for c in got.column("k").chunks} == {("b", "a", "c")}
    assert pa.chunked_array([c.indices for c in got.column("k").chunks]).to_pylist() == [
        0, 1, 0, 2, 1]


def test_a_schema_that_cannot_be_read_is_an_error(remote):
    sackli.arrow.write_table(typed_table(), remote.url("bad.bagz"), encoding="json")
    remote.put("bad.bagz.arrow_schema", b"not a schema")
    with pytest.raises(sackli.CorruptionError, match="bad.bagz.arrow_schema"):
        sackli.arrow.read_table(remote.url("bad.bagz"), decode="json")
    remote.delete("bad.bagz.arrow_schema")
    with pytest.raises(FileNotFoundError, match="bad.bagz.arrow_schema"):
        sackli.arrow.read_schema(remote.url("bad.bagz"))
    assert sackli.arrow.row_encoding(remote.url("bad.bagz")) is None


# --- sackli convert to and from gs:// / s3:// ------------------------------------
# The command runs as a subprocess with the environment the `servers` fixture
# set (the endpoints of the proxies).


def test_convert_a_local_bag_to_a_remote_set_and_back(remote, tmp_path):
    records = make_records(120, seed=6)
    with sackli.Writer(tmp_path / "src.bag") as writer:
        writer.write_many(records)
    ok("convert", "src.bag", remote.url("out@3.bagz"), cwd=tmp_path)
    assert sorted(remote.objects()) == sorted(
        shard_names("out", 3, ".bagz") + ["out-of-00003.bagz.sackli_set"])
    assert read_all(remote.url("out@*.bagz")) == records
    ok("convert", remote.url("out@*.bagz"), "back.bag", cwd=tmp_path)
    assert read_all(str(tmp_path / "back.bag")) == records


def test_convert_by_size_and_force_replaces_the_older_set(remote, tmp_path):
    records = make_records(300, seed=7)
    with sackli.Writer(tmp_path / "src.bag") as writer:
        writer.write_many(records)
    ok("convert", "src.bag", remote.url("out@2.bag"), cwd=tmp_path)
    error = fails("convert", "src.bag", remote.url("out@*.bag"), "--max-shard-bytes", "10000",
                  cwd=tmp_path)
    assert "--force" in error
    ok("convert", "src.bag", remote.url("out@*.bag"), "--max-shard-bytes", "10000", "--force",
       cwd=tmp_path)
    names = sorted(remote.objects())
    count = len(names) - 1  # and the set's manifest
    # The @2 set (and its manifest) is gone.
    assert count > 2 and names == sorted(
        shard_names("out", count, ".bag") + [f"out-of-{count:05d}.bag.sackli_set"])
    assert read_all(remote.url("out@*.bag")) == records


def test_convert_between_parquet_and_remote_bags(remote, tmp_path):
    import pyarrow.parquet as pq

    table = typed_table()
    pq.write_table(table, tmp_path / "t.parquet")
    ok("convert", "t.parquet", remote.url("rows@2.bagz"), cwd=tmp_path)
    assert sackli.arrow.read_table(remote.url("rows@*.bagz"), decode="arrow").equals(table)
    ok("convert", remote.url("rows@*.bagz"), remote.url("p.parquet"), cwd=tmp_path)
    (tmp_path / "p.parquet").write_bytes(remote.get("p.parquet"))
    assert pq.read_table(tmp_path / "p.parquet").equals(table)
    ok("convert", remote.url("rows@2.bagz"), "local.parquet", cwd=tmp_path)
    assert pq.read_table(tmp_path / "local.parquet").equals(table)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.parquet", "p.parquet", "t.parquet"]


def test_convert_refuses_other_formats_on_remote_destinations(remote, tmp_path):
    with sackli.Writer(tmp_path / "src.bag") as writer:
        writer.write_many([b"a"])
    error = fails("convert", "src.bag", remote.url("out.tfrecord"), cwd=tmp_path, status=2)
    assert "write other formats to a local path" in error
    assert remote.objects() == {}
