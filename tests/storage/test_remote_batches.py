"""Batches of remote reads: the engine hands each object all the ranges of a
batch in one `read_many`, which keeps up to the reader's `remote_parallelism`
requests in flight; remote runs waste at most half of what they ask for, so
a shuffled epoch fetches at most 1.5x the bag. Asserted with the proxy's
counters (requests, bytes, requests in flight), never with a clock."""

from __future__ import annotations

import errno
import multiprocessing
import pickle
import random
import re
import threading

import pytest

import sackli
import sackli.maps
from sackli._storage import _objects
from remote_helpers import remote, servers, write_bag  # noqa: F401  (fixtures)


# A proxy latency that keeps every GET of a batch at the proxy long enough
# for the others to arrive (the peak is counted, so a slow machine only
# makes it easier to reach).
LATENCY = 0.1


def _sparse_bag(remote, name: str, wanted: int = 64) -> tuple[str, list[bytes], list[int]]:
    """A bag whose records 0, 2, 4, ... are small and 70 KiB apart (more
    than any coalescing gap): each wanted record needs a GET of its own."""
    records: list[bytes] = []
    for i in range(wanted):
        records += [f"wanted {i}".encode(), b"\0" * (70 * 1024)]
    url = remote.url(name)
    write_bag(url, records)
    return url, records, list(range(0, 2 * wanted, 2))


def test_a_sparse_batch_keeps_many_requests_in_flight_by_default(remote):
    url, records, wanted = _sparse_bag(remote, "sparse.bag")
    reader = sackli.Reader(url)
    assert reader.options.remote_parallelism == 32
    assert reader[0] == records[0]  # the limits page: not counted below
    remote.proxy.latency = LATENCY
    remote.proxy.reset_counts()
    assert reader.read_indices(wanted) == [records[i] for i in wanted]
    assert dict(remote.proxy.counts) == {"GET": 64}
    assert 16 <= remote.proxy.max_in_flight <= 32, remote.proxy.max_in_flight


def test_remote_parallelism_bounds_the_requests_in_flight(remote):
    url, records, wanted = _sparse_bag(remote, "bounded.bag", wanted=24)
    for parallelism in (1, 4):
        reader = sackli.Reader(url, remote_parallelism=parallelism)
        assert reader[0] == records[0]
        remote.proxy.latency = LATENCY
        remote.proxy.reset_counts()
        assert reader.read_indices(wanted) == [records[i] for i in wanted]
        assert remote.proxy.counts["GET"] == 24
        assert remote.proxy.max_in_flight == parallelism, (parallelism, remote.proxy.max_in_flight)
        # It travels with the reader: a pickled copy (a DataLoader worker, a
        # Beam worker) keeps the bound.
        copy = pickle.loads(pickle.dumps(reader))
        assert copy[0] == records[0]
        remote.proxy.reset_counts()
        assert copy.read_indices(wanted) == [records[i] for i in wanted]
        assert remote.proxy.max_in_flight == parallelism
        remote.proxy.latency = 0.0


def test_a_batch_keeps_its_connections_for_the_next(remote):
    # Both clients pool more connections per host than a batch keeps in
    # flight (boto3: max_pool_connections; google-cloud-storage: requests'
    # pool, 10 per host by default, widened by the store), so a batch leaves
    # them open for the next instead of opening one per request.
    url, records, wanted = _sparse_bag(remote, "pooled.bag", wanted=40)
    reader = sackli.Reader(url)
    assert reader[0] == records[0]
    remote.proxy.latency = LATENCY
    assert reader.read_indices(wanted) == [records[i] for i in wanted]
    assert remote.proxy.max_in_flight >= 16
    with remote.proxy._lock:
        open_connections = len(remote.proxy._connections)
    assert open_connections >= 16, open_connections


def test_a_shuffled_epoch_fetches_at_most_one_and_a_half_times_the_bag(remote):
    # Records of 1-16 KiB: before the rule, records less than 64 KiB apart
    # shared a GET and dragged the gaps along (about 5x this bag per epoch).
    rng = random.Random(44)
    records = [rng.randbytes(rng.randrange(1024, 16 * 1024)) for _ in range(600)]
    url = remote.url("epoch.bagz")
    write_bag(url, records)
    bag_bytes = remote.objects()["epoch.bagz"]
    reader = sackli.Reader(url)
    order = rng.sample(range(len(records)), len(records))
    remote.proxy.reset_counts()
    assert list(reader.read_indices_iter(order)) == [records[i] for i in order]
    fetched = remote.proxy.bytes_sent["GET"]
    assert bag_bytes * 0.9 <= fetched <= 1.5 * bag_bytes, (fetched, bag_bytes)
    assert set(remote.proxy.counts) == {"GET"}
    # A scan still fetches in large requests.
    remote.proxy.reset_counts()
    assert list(reader) == records
    assert remote.proxy.counts["GET"] <= 8, remote.proxy.counts


class _CountingObject(_objects.RemoteObject):
    """A real remote object that counts the engine's batch calls."""

    calls: list[tuple[str, int]] = []
    lock = threading.Lock()

    def read_many(self, ranges):
        with self.lock:
            self.calls.append((self.url, len(ranges)))
        return super().read_many(ranges)


@pytest.mark.parametrize("storage", [sackli.LimitsStorage.IN_MEMORY, sackli.LimitsStorage.ON_DISK],
                         ids=["in_memory", "on_disk"])
def test_the_engine_makes_one_read_many_per_object_and_batch(remote, monkeypatch, storage):
    for s in range(3):
        records = []
        for i in range(20):
            records += [f"{s}:{i}".encode(), b"\0" * (70 * 1024)]
        write_bag(remote.url(f"set-{s:05d}-of-00003.bag"), records)
    monkeypatch.setattr(_objects, "RemoteObject", _CountingObject)
    _CountingObject.calls = []
    reader = sackli.Reader(remote.url("set@3.bag"), limits_storage=storage)
    _CountingObject.calls = []
    wanted = [s * 40 + 2 * i for i in (9, 1, 5, 3) for s in (2, 0, 1)]
    remote.proxy.reset_counts()
    assert reader.read_indices(wanted) == [f"{g // 40}:{g % 40 // 2}".encode() for g in wanted]
    assert remote.proxy.counts["GET"] == 12 + (3 if storage == sackli.LimitsStorage.ON_DISK else 0)
    shards = sorted(url.rsplit("/", 1)[1] for url, _ in _CountingObject.calls)
    if storage == sackli.LimitsStorage.ON_DISK:
        # Each shard's limits page, then its records: a call each.
        assert shards == sorted([f"set-{s:05d}-of-00003.bag" for s in range(3)] * 2)
        assert sorted(n for _, n in _CountingObject.calls) == [1, 1, 1, 4, 4, 4]
    else:
        assert shards == [f"set-{s:05d}-of-00003.bag" for s in range(3)]
        assert [n for _, n in _CountingObject.calls] == [4, 4, 4]


def test_errors_mid_batch_surface_as_from_a_single_read(remote):
    url, records, wanted = _sparse_bag(remote, "errors.bag", wanted=32)
    reader = sackli.Reader(url)
    assert reader[0] == records[0]
    # Transient failures of some of the batch's GETs are retried.
    remote.proxy.fail_next(5, status=503, kinds=["GET"])
    assert reader.read_indices(wanted) == [records[i] for i in wanted]
    assert remote.proxy.faults_applied["fail"] == 5
    # Replaced under the reader: ESTALE naming the object, never other bytes.
    write_bag(url, [r.replace(b"wanted", b"WANTED") for r in records])
    with pytest.raises(OSError) as single:
        reader[2]
    with pytest.raises(OSError) as batch:
        reader.read_indices(wanted)
    assert single.value.errno == batch.value.errno == errno.ESTALE
    assert url in str(batch.value) and "changed since it was opened" in str(batch.value)
    # Deleted under the reader: what a single read raises (naming the URL).
    fresh = sackli.Reader(url)
    assert fresh[0] == records[0].replace(b"wanted", b"WANTED")
    remote.delete("errors.bag")
    with pytest.raises(OSError) as single:
        fresh[2]
    with pytest.raises(OSError) as batch:
        fresh.read_indices(wanted)
    assert type(batch.value) is type(single.value)
    assert batch.value.errno == single.value.errno
    assert re.search(re.escape(url), str(batch.value)), batch.value


def test_a_remote_map_batch_keeps_its_requests_in_flight(remote):
    # Values of 70 KiB; every other value (in the file's order, the index's
    # Eytzinger order) asked for: each a GET of its own, all of them in one
    # read_many (the maps once ran 16 at a time).
    rng = random.Random(5)
    data = {key: rng.randbytes(70 * 1024) for key in range(96)}
    url = remote.url("m.mb")
    sackli.maps.write(url, data.items(), compress=None)
    mb = sackli.maps.MapBuffer(url)
    position = mb._core_now().find
    wanted = sorted(data, key=position)[::2]
    remote.proxy.latency = LATENCY
    remote.proxy.reset_counts()
    assert mb.get_many(wanted) == [data[key] for key in wanted]
    assert dict(remote.proxy.counts) == {"GET": 48}
    assert 16 < remote.proxy.max_in_flight <= 32, remote.proxy.max_in_flight


def _read_in_child(reader: sackli.Reader, wanted: list[int], queue) -> None:
    queue.put(reader.read_indices(wanted))


def test_batches_work_in_a_forked_child(remote):
    url, records, wanted = _sparse_bag(remote, "forked.bag", wanted=16)
    reader = sackli.Reader(url)
    assert reader.read_indices(wanted) == [records[i] for i in wanted]  # the pool exists
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_in_child, args=(reader, wanted, queue))
    child.start()
    try:
        assert queue.get(timeout=120) == [records[i] for i in wanted]
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
