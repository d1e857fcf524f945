"""CRC-32C sidecars of raw bags on buckets (docs/format.md): a remote
`Writer` / `ShardedWriter` with `record_checksums=True` uploads
`<name>.crc32c` beside each bag; readers of the bucket check every record
against it; a write without the option marks its object so that readers
ignore an older object's sidecar.
On moto and fake-gcs-server."""

from __future__ import annotations

import pytest

import sackli
from sackli.cli._sidecar_check import has_sidecar
from remote_helpers import make_records, remote, servers, write_bag  # noqa: F401


def _flip(remote, name: str, byte: int) -> None:
    data = bytearray(remote.get(name))
    data[byte] ^= 0x08
    remote.put(name, bytes(data))


def test_a_remote_bag_and_its_sidecar(remote) -> None:
    records = make_records(300, seed=3, max_size=500)
    write_bag(remote.url("c.bag"), records, record_checksums=True)
    assert {"c.bag", "c.bag.crc32c"} <= set(remote.objects())
    assert remote.objects()["c.bag.crc32c"] == 4 * len(records) + 32
    with sackli.Reader(remote.url("c.bag")) as reader:
        assert reader.read() == records
    first = next(i for i, r in enumerate(records) if r)
    _flip(remote, "c.bag", sum(map(len, records[:first])))
    with sackli.Reader(remote.url("c.bag")) as reader:
        with pytest.raises(sackli.CorruptionError, match=f"record {first} is corrupt"):
            reader.read_indices(list(range(len(records))))
        with pytest.raises(sackli.CorruptionError, match="c.bag.crc32c"):
            reader[first]


def test_a_remote_write_without_checks_makes_readers_ignore_the_old_sidecar(remote) -> None:
    """The new object's metadata says it has no sidecar: the old one beside
    it (a bucket write deletes nothing it need not) is never read."""
    write_bag(remote.url("c.bag"), [b"old"] * 3, record_checksums=True)
    write_bag(remote.url("c.bag"), [b"new"] * 5)
    assert "c.bag.crc32c" in remote.objects()
    remote.proxy.reset_counts()
    assert sackli.Reader(remote.url("c.bag")).read() == [b"new"] * 5
    assert "HEAD" not in remote.proxy.counts
    assert not [entry for entry in remote.proxy.log if "crc32c" in entry[1]]  # never asked for
    assert not has_sidecar(remote.url("c.bag"))


def test_a_bag_uploaded_by_another_tool_is_checked_against_its_sidecar(remote, tmp_path) -> None:
    """Objects without sackli's metadata (copied up with another tool)
    are asked about: their sidecar is found and used."""
    local = tmp_path / "c.bag"
    with sackli.Writer(local, record_checksums=True) as writer:
        writer.write_many([b"record %d" % i for i in range(10)])
    remote.put("c.bag", local.read_bytes())
    remote.put("c.bag.crc32c", (tmp_path / "c.bag.crc32c").read_bytes())
    _flip(remote, "c.bag", 3)
    with sackli.Reader(remote.url("c.bag")) as reader:
        with pytest.raises(sackli.CorruptionError, match="record 0 is corrupt"):
            reader[0]


def test_a_remote_shard_set_with_sidecars(remote) -> None:
    records = make_records(80, seed=4, max_size=300)
    with sackli.ShardedWriter(remote.url("s@2.bag"), record_checksums=True) as writer:
        writer.write_many(records)
    names = set(remote.objects())
    for shard in ("s-00000-of-00002.bag", "s-00001-of-00002.bag"):
        assert {shard, shard + ".crc32c"} <= names
    assert not any(".sackli-partial-" in name for name in names)
    with sackli.Reader(remote.url("s@2.bag")) as reader:
        assert reader.read() == records
    with sackli.ShardedWriter(remote.url("s@2.bag"), overwrite=True) as writer:
        writer.write_many(records[::-1])
    with sackli.Reader(remote.url("s@2.bag")) as reader:  # the old sidecars are ignored
        assert reader.read() == records[::-1]
