"""Opening a remote object with one suffix-ranged GET (`Store.read_tail`):
its size, identity and metadata come with its last bytes, which serve the
engine's first read (moto and fake-gcs-server behind the fault proxy; the
proxy's counters, never times)."""

from __future__ import annotations

import errno
import io

import pytest

import sackli
from sackli._storage import _objects, parse
from sackli._storage._retry import Transient
from sackli._storage._store import tail_size
from remote_helpers import fresh_remote, make_records, remote, servers, write_bag  # noqa: F401

TAIL = 64


def _store(url: str):
    return _objects._store(parse(url))


def _put(remote, name: str, data: bytes, metadata: dict[str, str] | None = None) -> str:
    url = remote.url(name)
    _objects.put_file(url, io.BytesIO(data), metadata or {})
    return url


@pytest.fixture(params=[("s3", "default"), ("s3", "boto3"), ("gs", "default")],
                ids=["s3", "s3-boto3", "gs"])
def client(request, servers):
    """Each client of the store: S3 also through boto3 alone."""
    scheme, client_name = request.param
    with fresh_remote(scheme, servers, request) as remote:
        if client_name == "boto3":
            with remote.endpoint(remote.proxy.url, SACKLI_S3_CLIENT="boto3"):
                yield remote
        else:
            yield remote


@pytest.mark.parametrize("size", [0, 1, TAIL - 1, TAIL, TAIL + 1, 5000])
def test_one_request_tells_size_identity_metadata_and_the_tail(client, size):
    data = bytes(range(256)) * (size // 256 + 1)
    data = data[:size]
    url = _put(client, f"o{size}.bin", data, {"sackli-records-version": "v7"})
    expected = _objects.stat_object(url)
    client.proxy.reset_counts()
    stat, tail = _store(url).read_tail(parse(url), TAIL)
    assert bytes(tail) == data[-TAIL:] if size else bytes(tail) == b""
    assert stat == expected
    assert stat.metadata == {"sackli-records-version": "v7"}
    # An empty object may need a HEAD where the server answers it no range.
    assert client.proxy.counts["GET"] == 1 or size == 0, client.proxy.log


def test_a_missing_object_is_named(remote):
    url = remote.url("absent.bin")
    with pytest.raises(FileNotFoundError, match="absent.bin"):
        _store(url).read_tail(parse(url), TAIL)


@pytest.mark.parametrize("fault", ["cut", "lose", "503"])
def test_a_cut_lost_or_failed_tail_answer_is_asked_again(remote, fault):
    data = bytes(range(200)) * 10
    url = _put(remote, "faulted.bin", data)
    if fault == "503":
        remote.proxy.fail_next(1, kinds=["GET"])
    elif fault == "cut":
        remote.proxy.drop_next(1, mode="cut", kinds=["GET"])
    else:
        remote.proxy.lose_next(1, kinds=["GET"])
    stat, tail = _store(url).read_tail(parse(url), TAIL)
    assert (stat.size, bytes(tail)) == (len(data), data[-TAIL:])
    assert sum(remote.proxy.faults_applied.values()) == 1


def test_a_416_falls_back_to_a_head_and_a_read(remote):
    data = b"x" * 300
    url = _put(remote, "refused.bin", data)
    remote.proxy.fail_next(1, status=416, kinds=["GET"])
    remote.proxy.reset_counts()
    stat, tail = _store(url).read_tail(parse(url), TAIL)
    assert (stat.size, bytes(tail)) == (len(data), data[-TAIL:])
    assert remote.proxy.counts["HEAD"] == 1, remote.proxy.log


def test_only_the_last_bytes_of_the_object_are_believed():
    # A shifted or stale answer (another range, a body cut short) is asked again.
    assert tail_size("bytes 36-99/100", 64, 64) == 100
    assert tail_size("bytes 0-9/10", 64, 10) == 10
    assert tail_size("bytes 0--1/0", 64, 0) == 0
    assert tail_size(None, 64, 0) == 0
    for header, received in [("bytes 35-98/100", 64), ("bytes 0-63/100", 64),
                             ("bytes 36-99/100", 63), ("bytes 1-9/10", 9), (None, 10),
                             ("bytes */100", 0)]:
        with pytest.raises(Transient):
            tail_size(header, 64, received)


def test_a_stale_answer_on_the_connection_is_not_the_tail(remote):
    """The proxy writes an earlier ranged answer twice: the tail's request
    reads the stale copy first (another range), and asks again."""
    data = bytes(range(256)) * 8
    url = _put(remote, "desync.bin", data)
    store, path = _store(url), parse(url)
    remote.proxy.double_next(1, kinds=["GET"])
    assert bytes(store.read(path, 0, 100)) == data[:100]
    for _ in range(3):
        stat, tail = store.read_tail(path, TAIL)
        assert (stat.size, bytes(tail)) == (len(data), data[-TAIL:])


@pytest.mark.parametrize("storage", [sackli.LimitsStorage.ON_DISK, sackli.LimitsStorage.IN_MEMORY],
                         ids=["on_disk", "in_memory"])
def test_a_bag_opens_in_one_request_and_stays_pinned_to_it(remote, storage):
    records = make_records(50, seed=2)
    url = remote.url("pinned.bag")
    write_bag(url, records)
    remote.proxy.reset_counts()
    reader = sackli.Reader(url, limits_storage=storage)
    assert len(reader) == len(records)
    assert dict(remote.proxy.counts) == {"GET": 1}, remote.proxy.log
    # Larger, so that the range read next exists in it too (fake-gcs-server
    # answers 416 before it compares the generation).
    write_bag(url, [b"x" * 400] * 50)
    with pytest.raises(OSError) as caught:
        reader[3]
    assert caught.value.errno == errno.ESTALE and url in str(caught.value)


def test_limits_beyond_the_tail_take_one_more_request(remote):
    records = [b"r"] * 20_000  # 160,000 bytes of limits: more than the tail
    url = remote.url("long.bag")
    write_bag(url, records)
    remote.proxy.reset_counts()
    reader = sackli.Reader(url, limits_storage=sackli.LimitsStorage.IN_MEMORY)
    assert dict(remote.proxy.counts) == {"GET": 2}, remote.proxy.log
    assert reader.read_range(19_990, 10) == records[-10:]


def test_tiny_and_empty_bags(remote):
    tiny, empty = remote.url("tiny.bag"), remote.url("empty.bag")
    write_bag(tiny, [b"one"])
    write_bag(empty, [])
    assert sackli.Reader(tiny, limits_storage=sackli.LimitsStorage.IN_MEMORY).read() == [b"one"]
    assert len(sackli.Reader(empty)) == 0
    remote.put("zero.bag", b"")  # a 0-byte object: a bag of no records
    assert len(sackli.Reader(remote.url("zero.bag"))) == 0
    remote.put("short.bag", b"abc")
    with pytest.raises(sackli.CorruptionError, match="short.bag"):
        sackli.Reader(remote.url("short.bag"))
