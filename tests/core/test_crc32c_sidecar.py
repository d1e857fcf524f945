"""The CRC-32C sidecar of raw bags (issue 51 §1): `record_checksums=True`
writes `<name>.crc32c` beside a `.bag` (docs/format.md); the bag stays
bagz's bytes; every read path checks every record against it, so a flipped
bit raises CorruptionError naming the file and the record; stale, damaged
and interrupted sidecars are told apart."""

from __future__ import annotations

import os
import pathlib
import random
import struct

import bagz
import google_crc32c
import pyarrow as pa
import pytest

import sackli

_rng = random.Random(5151)


def _records(n: int = 200, size: int = 1024) -> list[bytes]:
    return [b"%05d " % i + _rng.randbytes(size - 6) for i in range(n)]


def _write(path: pathlib.Path, records: list[bytes], **options) -> None:
    with sackli.Writer(path, **options) as writer:
        writer.write_many(records)


def _sidecar(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(path.name + ".crc32c")


def test_the_bag_stays_bagz_bytes_and_the_sidecar_holds_each_crc(tmp_path) -> None:
    records = _records(50)
    plain, checked = tmp_path / "plain.bag", tmp_path / "checked.bag"
    _write(plain, records)
    _write(checked, records, record_checksums=True)
    assert checked.read_bytes() == plain.read_bytes()
    assert not _sidecar(plain).exists()
    assert list(bagz.Reader(str(checked))) == records  # bagz ignores the sidecar
    data = _sidecar(checked).read_bytes()
    assert len(data) == 4 * len(records) + 32
    crcs = struct.unpack(f"<{len(records)}I", data[:4 * len(records)])
    assert list(crcs) == [google_crc32c.value(r) for r in records]
    magic, count, end, limits_crc, self_crc = struct.unpack("<8sQQII", data[-32:])
    assert (magic, count, end) == (b"SKLCRC32", len(records), sum(map(len, records)))
    ends = [sum(map(len, records[:i + 1])) for i in range(len(records))]
    assert limits_crc == google_crc32c.value(struct.pack(f"<{len(ends)}Q", *ends))
    assert self_crc == google_crc32c.value(data[:-4])
    assert sackli.Reader(checked).read() == records


def _read_all(reader: sackli.Reader, how: str) -> list[bytes]:
    """Every record of `reader` through one of the read paths."""
    n = len(reader)
    if how == "single":
        return [reader[i] for i in range(n)]
    if how == "indices":
        return reader.read_indices(list(range(n - 1, -1, -1)))[::-1]
    if how == "range":
        return reader.read_range(0, n)
    if how == "iter":
        return list(reader.read_range_iter(0, n, read_ahead=7))
    if how == "indices_iter":
        return list(reader.read_indices_iter(list(range(n)), read_ahead=5))
    if how == "slice":
        return list(reader[0:n])
    if how == "arrow":
        return [v.as_py() for v in pa.table(reader).column(0)]
    if how == "index":
        return list(sackli.Index(reader))
    raise AssertionError(how)


_PATHS = ["single", "indices", "range", "iter", "indices_iter", "slice", "arrow", "index"]


@pytest.mark.parametrize("how", _PATHS)
def test_every_read_path_refuses_a_flipped_bit(tmp_path, how) -> None:
    records = _records(40)
    path = tmp_path / "c.bag"
    _write(path, records, record_checksums=True)
    data = bytearray(path.read_bytes())
    byte = _rng.randrange(sum(map(len, records)))
    data[byte] ^= 1 << _rng.randrange(8)
    path.write_bytes(bytes(data))
    record = byte // 1024
    # Through the Arrow C stream, pyarrow raises its own error with our message.
    expected = pa.ArrowInvalid if how == "arrow" else sackli.CorruptionError
    with sackli.Reader(path) as reader:
        with pytest.raises(expected) as raised:
            _read_all(reader, how)
    message = str(raised.value)
    assert str(path) in message and f"record {record} is corrupt" in message
    assert f"byte offset {record * 1024}" in message and "c.bag.crc32c" in message


def test_200_single_bit_flips_out_of_200_raise(tmp_path) -> None:
    """The issue's goal: each of 200 random flips in the records raises,
    naming the file and the flipped record."""
    records = _records(100, 1024)
    path = tmp_path / "c.bag"
    _write(path, records, record_checksums=True)
    original = path.read_bytes()
    damaged = tmp_path / "d.bag"
    _sidecar(damaged).write_bytes(_sidecar(path).read_bytes())
    raised = 0
    for _ in range(200):
        data = bytearray(original)
        byte = _rng.randrange(len(records) * 1024)
        data[byte] ^= 1 << _rng.randrange(8)
        damaged.write_bytes(bytes(data))
        with sackli.Reader(damaged) as reader:
            try:
                reader.read()
            except sackli.CorruptionError as error:
                raised += f"record {byte // 1024} is corrupt" in str(error)
    assert raised == 200


def test_a_flipped_limit_is_caught_by_the_records_it_moves(tmp_path) -> None:
    records = _records(30)
    path = tmp_path / "c.bag"
    _write(path, records, record_checksums=True)
    data = bytearray(path.read_bytes())
    limits_at = sum(map(len, records))
    data[limits_at + 8 * 10] ^= 0x02  # record 10's end moves by 2 bytes (still in order)
    path.write_bytes(bytes(data))
    with sackli.Reader(path) as reader:
        assert reader[9] == records[9]
        for i in (10, 11):
            with pytest.raises(sackli.CorruptionError, match=f"record {i} is corrupt"):
                reader[i]


def test_a_bag_rewritten_without_sidecar_support_is_told_apart(tmp_path) -> None:
    path = tmp_path / "c.bag"
    _write(path, _records(20), record_checksums=True)
    with bagz.Writer(str(path)) as writer:  # bagz knows no sidecar: it stays
        for record in _records(21):
            writer.write(record)
    with pytest.raises(sackli.CorruptionError, match="belongs to another version") as raised:
        sackli.Reader(path)
    assert "c.bag.crc32c" in str(raised.value) and "21 records" in str(raised.value)
    _write(path, _records(5))  # a sackli writer without the option removes it
    assert not _sidecar(path).exists()
    assert len(sackli.Reader(path)) == 5


@pytest.mark.parametrize("damage", ["truncated", "magic", "count"])
def test_a_malformed_sidecar_raises_naming_it(tmp_path, damage) -> None:
    path = tmp_path / "c.bag"
    _write(path, _records(10), record_checksums=True)
    sidecar = _sidecar(path)
    data = bytearray(sidecar.read_bytes())
    if damage == "truncated":
        data = data[:20]
    elif damage == "magic":
        data[-32] ^= 0xFF
    else:
        data = data[:4] + data[8:]  # one CRC too few
    sidecar.write_bytes(bytes(data))
    with pytest.raises(sackli.CorruptionError, match="c.bag.crc32c"):
        sackli.Reader(path)


def test_compressed_bags_are_checked_by_zstd_not_a_sidecar(tmp_path) -> None:
    path = tmp_path / "c.bagz"
    _write(path, _records(5), record_checksums=True)
    assert not _sidecar(path).exists()
    with pytest.raises(ValueError, match="checksum=False"):
        sackli.Writer(tmp_path / "d.bagz", record_checksums=True, checksum=False)
    with pytest.raises(TypeError, match="record_checksums"):
        sackli.Writer.Options(record_checksums="yes")


def test_an_empty_bag_has_a_sidecar_too(tmp_path) -> None:
    path = tmp_path / "e.bag"
    _write(path, [], record_checksums=True)
    assert len(_sidecar(path).read_bytes()) == 32
    assert len(sackli.Reader(path)) == 0


def test_an_interrupted_write_in_place_recovers_its_sidecar(tmp_path) -> None:
    """atomic=False with a flush, then abandoned as a crash would: recovery
    keeps the CRCs that reached the disk, computes the rest and adds the
    trailer."""
    records = _records(30)
    path = tmp_path / "c.bag"
    writer = sackli.Writer(path, atomic=False, record_checksums=True)
    writer.write_many(records)
    writer.flush()
    writer._abandon()
    assert os.path.exists(str(path) + ".crc32c.unfinished")
    sackli.recover(path)
    assert not os.path.exists(str(path) + ".crc32c.unfinished")
    with sackli.Reader(path) as reader:
        assert reader.read() == records
    _, count, *_ = struct.unpack("<8sQQII", _sidecar(path).read_bytes()[-32:])
    assert count == 30


def test_an_interrupted_atomic_write_recovers_onto_its_target(tmp_path) -> None:
    records = _records(12)
    path = tmp_path / "c.bag"
    _write(path, _records(3), record_checksums=True)  # the old content's sidecar
    writer = sackli.Writer(path, record_checksums=True)
    writer.write_many(records)
    writer.flush()
    writer._abandon()
    sackli.recover(path)
    with sackli.Reader(path) as reader:
        assert reader.read() == records
    assert not list(tmp_path.glob(".c.bag.sackli-partial-*"))


def test_recovery_without_checks_removes_an_old_sidecar(tmp_path) -> None:
    path = tmp_path / "c.bag"
    _write(path, _records(3), record_checksums=True)
    writer = sackli.Writer(path, atomic=False)
    writer.write_many(_records(4))
    writer.flush()
    writer._abandon()
    sackli.recover(path)
    assert not _sidecar(path).exists()
    assert len(sackli.Reader(path)) == 4


def test_shard_sets_check_every_shard(tmp_path) -> None:
    records = _records(40)
    spec = tmp_path / "s@4.bag"
    with sackli.ShardedWriter(spec, record_checksums=True) as writer:
        writer.write_many(records)
    shards = sorted(tmp_path.glob("s-*-of-00004.bag"))
    assert len(shards) == 4 and all(_sidecar(s).exists() for s in shards)
    data = bytearray(shards[2].read_bytes())
    data[5] ^= 0x10
    shards[2].write_bytes(bytes(data))
    with sackli.Reader(spec) as reader:
        assert reader[0] == records[0]
        with pytest.raises(sackli.CorruptionError, match=r"s-00002-of-00004\.bag: record 0 is corrupt"):
            reader.read()
    with sackli.ShardedWriter(spec, overwrite=True) as writer:  # replaced without checks
        writer.write_many(records)
    assert not any(_sidecar(s).exists() for s in shards)
