"""sackli._bulk: the internal packed-buffer API that arrow, beam, the CLI and
the shard-set writer share."""

from __future__ import annotations

import array

import pytest

import sackli
from sackli import _bulk

RECORDS = [b"abc", b"", b"defgh", b"i", b"jk"]


def records_of(data, offsets) -> list[bytes]:
    data, ends = bytes(memoryview(data)), memoryview(offsets).tolist()
    return [data[begin:end] for begin, end in zip(ends, ends[1:])]


@pytest.fixture(params=["plain.bag", "packed.bagz"])
def bag(tmp_path, request):
    path = tmp_path / request.param
    with sackli.Writer(path) as writer:
        writer.write_many(RECORDS)
    return sackli.Reader(path)


def test_read_packed_gives_the_records(bag):
    assert records_of(*_bulk.read_packed(bag, 1, 3)) == RECORDS[1:4]


def test_mapped_run_only_for_uncompressed_mapped_files(bag):
    run = _bulk.mapped_run(bag, 0, 5)
    if bag.file_spec.endswith(".bagz"):
        assert run is None
    else:
        assert records_of(*run) == RECORDS


def test_start_read_range_with_a_prefix(bag):
    data, offsets = _bulk.start_read_range(bag, 2, 2, b"PRE").packed()
    assert bytes(memoryview(data))[:3] == b"PRE"
    assert memoryview(offsets).tolist()[0] == 3
    assert records_of(data, offsets) == RECORDS[2:4]


def test_start_read_indices_keeps_order_and_repeats(bag):
    assert records_of(*_bulk.start_read_indices(bag, [4, 0, 4, -1]).packed()) == [
        b"jk", b"abc", b"jk", b"jk"]


def test_ranges_outside_the_reader_raise_index_error_with_numbers(bag):
    with pytest.raises(IndexError, match=r"\[4, 7\).*5 records"):
        _bulk.start_read_range(bag, 4, 3)
    with pytest.raises(IndexError):
        _bulk.start_read_indices(bag, [5])


def test_record_offsets_are_begin_then_ends(bag):
    offsets = _bulk.record_offsets(bag, 0, 1, 3)
    assert bag.file_spec.endswith(".bagz") or offsets.tolist() == [3, 3, 8, 9]
    assert len(offsets) == 4 and offsets[1] == offsets[0]  # record 1 is empty


def test_shard_boundaries(tmp_path):
    with sackli.ShardedWriter(tmp_path / "s@3.bag", num_records=7) as writer:
        writer.write_many(bytes([i]) for i in range(7))
    reader = sackli.Reader(tmp_path / "s@3.bag")
    assert _bulk.shard_boundaries(reader) == [3, 5]
    assert _bulk.shard_boundaries(reader[1:6]) == [2, 4]
    assert _bulk.shard_boundaries(reader[::2]) is None
    interleaved = sackli.Reader(tmp_path / "s@3.bag", sharding_layout=sackli.ShardingLayout.INTERLEAVED)
    assert _bulk.shard_boundaries(interleaved) is None


def test_write_packed_then_publish(tmp_path):
    target = tmp_path / "out.bagz"
    writer = sackli.Writer(tmp_path / "temp.bagz")
    offsets = array.array("q", [0, 2, 2, 5])
    _bulk.write_packed(writer, b"xyzzz", memoryview(offsets))
    _bulk.close_unpublished(writer)
    assert not (tmp_path / "temp.bagz").exists()
    _bulk.publish(writer, str(target))
    assert sackli.Reader(target).read() == [b"xy", b"", b"zzz"]


def test_discard_leaves_nothing(tmp_path):
    writer = sackli.Writer(tmp_path / "gone.bag")
    writer.write(b"x")
    _bulk.discard(writer)
    assert list(tmp_path.iterdir()) == []


def test_reader_and_writer_keep_no_bulk_methods():
    for name in ("_start_packed", "_start_packed_indices", "_mapped_run", "_read_packed",
                 "_record_offsets", "_shard_boundaries"):
        assert not hasattr(sackli.Reader, name)
    for name in ("_write_packed", "_close_unpublished", "_publish"):
        assert not hasattr(sackli.Writer, name)
