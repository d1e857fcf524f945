"""What remote readers download of a bag's limits, counted in the bytes the
real servers (moto's S3, fake-gcs-server) send through the proxy:
`limits_storage=ON_DISK` (the default) fetches the limits a page at a time
as reads need them, `IN_MEMORY` loads them all once, at open."""

from __future__ import annotations

import random

import pytest

import sackli
from remote_helpers import TAIL, SEPARATE, servers, remote, write_bag  # noqa: F401 (fixtures)

ON_DISK = sackli.LimitsStorage.ON_DISK
IN_MEMORY = sackli.LimitsStorage.IN_MEMORY
PLACEMENTS = pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])

N = 100_000
LIMITS_BYTES = 8 * N
# One page of limits the engine fetches at a time (native/bagz/limits_cache.h).
PAGE_BYTES = 4096 * 8


def _records() -> list[bytes]:
    return [b"%d" % i for i in range(N)]


def _downloaded(remote) -> int:
    return remote.proxy.bytes_sent["GET"]


def test_in_memory_reader_of_a_small_bag_opens_in_one_get(remote):
    # Limits of up to 64 KiB come with the trailer.
    records = [b"%d" % i for i in range(1000)]
    url = remote.url("small.bag")
    write_bag(url, records)
    remote.proxy.reset_counts()
    reader = sackli.Reader(url, limits_storage=IN_MEMORY)
    assert dict(remote.proxy.counts) == {"GET": 1}
    remote.proxy.reset_counts()
    assert reader.read_range(0, len(records)) == records
    assert dict(remote.proxy.counts) == {"GET": 1}  # the records only


@PLACEMENTS
def test_on_disk_reader_downloads_only_the_limits_it_reads(remote, placement):
    records = _records()
    url = remote.url("lazy.bag")
    write_bag(url, records, limits_placement=placement)
    remote.proxy.reset_counts()
    reader = sackli.Reader(url, limits_placement=placement)  # ON_DISK by default
    assert len(reader) == N
    # The last 8 bytes of each object (the TAIL trailer) with its size; no limits.
    assert _downloaded(remote) <= 16
    assert reader[N // 2] == records[N // 2]
    # One page of limits and the record: a small part of the limits.
    assert _downloaded(remote) <= PAGE_BYTES + 16 + len(records[N // 2])
    assert _downloaded(remote) < LIMITS_BYTES / 10
    # Neighbours come from the page already fetched: only their bytes.
    before = _downloaded(remote)
    assert reader.read_range(N // 2 + 1, 100) == records[N // 2 + 1:N // 2 + 101]
    assert _downloaded(remote) - before == sum(map(len, records[N // 2 + 1:N // 2 + 101]))


def test_in_memory_reader_loads_the_limits_once_at_open(remote):
    records = _records()
    url = remote.url("eager.bag")
    write_bag(url, records)
    remote.proxy.reset_counts()
    reader = sackli.Reader(url, limits_storage=IN_MEMORY)
    # The last 64 KiB of limits with the trailer, then the ones before them:
    # each byte of the limits downloaded once.
    assert dict(remote.proxy.counts) == {"GET": 2}
    assert _downloaded(remote) == LIMITS_BYTES
    remote.proxy.reset_counts()
    assert reader.read_range(0, N) == records
    # The records' bytes only: no limit is fetched again.
    assert _downloaded(remote) == sum(map(len, records))


def test_scattered_batch_fetches_its_limits_pages_in_one_request(remote):
    records = _records()
    url = remote.url("scattered.bag")
    write_bag(url, records)
    picked = sorted(random.Random(5).sample(range(N), 200))
    reader = sackli.Reader(url)
    remote.proxy.reset_counts()
    assert reader.read_indices(picked) == [records[i] for i in picked]
    first_gets = remote.proxy.counts["GET"]
    remote.proxy.reset_counts()
    assert reader.read_indices(picked) == [records[i] for i in picked]
    again_gets = remote.proxy.counts["GET"]
    # The same record reads both times; the first batch adds one request
    # for every limits page its records need (neighbouring missing pages are
    # fetched together), not one per record.
    assert first_gets == again_gets + 1, (first_gets, again_gets)


def test_a_beam_range_fetches_only_the_limits_near_it(remote):
    """A sixteenth of a bag whose limits outweigh its records, read as
    sackli.beam reads a range: its records, the limits pages they span and
    those its boundaries are searched in, nothing from the rest of the file
    (a plain bisection would visit pages all over it)."""
    from sackli.beam._source import read_range

    records = _records()
    url = remote.url("range.bag")
    write_bag(url, records)
    size = sum(map(len, records)) + LIMITS_BYTES
    for part in (0, 5, 15):
        start, stop = size * part // 16, size * (part + 1) // 16
        remote.proxy.reset_counts()
        got = list(read_range(url, sackli.Reader.Options(), start, stop, lambda position: True,
                              bytes, False))
        assert got and set(got) <= set(records)
        # The range's share of the file, plus the partly used page at each end.
        assert _downloaded(remote) <= (stop - start) + 2 * PAGE_BYTES, (part, _downloaded(remote))
