"""Retries of remote requests (sackli/_storage/_retry.py) against a proxy
that injects faults: exact reads, bounded failures, deadlines."""

from __future__ import annotations

import random
import re
import time

import numpy as np
import pytest

import sackli
from remote_helpers import (  # loaded through conftest.py
    FaultProxy, SEPARATE, servers, remote, write_bag, make_records,
)


# --- 4. Faults -------------------------------------------------------------------------


FAULTS = {
    # 1 request in 4 is answered 503 (S3's SlowDown, GCS's backendError).
    "503": lambda proxy: proxy.fail_fraction(0.25),
    # 1 request in 4 loses its connection before any response.
    "dropped": lambda proxy: proxy.drop_fraction(0.25, "close"),
    # 1 request in 4 gets its headers and half its body, then the connection closes.
    "cut-body": lambda proxy: proxy.drop_fraction(0.25, "cut"),
    "latency": lambda proxy: setattr(proxy, "latency", 0.02),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_reads_are_exact_despite_faults(remote, fault, monkeypatch):
    # Plenty of attempts: 0.25**12 makes a spurious failure negligible.
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "12")
    records = make_records(300, seed=10, max_size=2000)
    write_bag(remote.url("ft-00000-of-00003.bagz"), records[:100])
    write_bag(remote.url("ft-00001-of-00003.bagz"), records[100:170])
    write_bag(remote.url("ft-00002-of-00003.bagz"), records[170:])
    FAULTS[fault](remote.proxy)
    rng = random.Random(11)
    # Opening under faults too: a LIST, and the tail + limits per shard.
    reader = sackli.Reader(remote.url("ft@*.bagz"), max_parallelism=4)
    indices = [rng.randrange(300) for _ in range(150)]
    assert reader.read_indices(indices) == [records[i] for i in indices]
    assert reader.read_indices(np.array(indices[:20])) == [records[i] for i in indices[:20]]
    assert [reader[i] for i in indices[:10]] == [records[i] for i in indices[:10]]
    assert list(reader) == records
    assert reader.read() == records
    assert reader[::7].read() == records[::7]
    assert sackli.Reader(remote.url("ft@3.bagz"), max_parallelism=4).read() == records
    if fault != "latency":
        # About 50 requests, 1 in 4 faulted.
        assert sum(remote.proxy.faults_applied.values()) >= 3, remote.proxy.faults_applied


@pytest.mark.parametrize("kind", ["GET", "open", "LIST"])
def test_response_cut_halfway_is_retried(remote, kind):
    """One response of the given kind loses its connection after the headers
    and half of its body.

    Regression for gs: a cut body raises urllib3's ProtocolError for a media
    GET and requests' ChunkedEncodingError for metadata and listings, which
    must count as transient like a refused connection.
    """
    url = remote.url("cut-00000-of-00001.bag")
    records = make_records(50, seed=16)
    write_bag(url, records)
    reader = sackli.Reader(url)
    remote.proxy.drop_next(1, "cut", kinds=["GET" if kind == "open" else kind])
    if kind == "GET":
        assert reader.read_indices([3, 40]) == [records[3], records[40]]
    else:  # open: the GET of its tail; LIST: opening a set found by listing
        assert sackli.Reader(url if kind == "open" else remote.url("cut@*.bag")).read() == records
    assert remote.proxy.faults_applied["cut"] == 1


def test_uploads_are_retried_after_faults(remote, monkeypatch):
    # Regression for s3: boto3's S3UploadFailedError is not a ClientError;
    # unwrapped, a 503 on upload is transient and retried.
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "6")
    records = make_records(50, seed=12)
    for n, fault in enumerate([lambda: remote.proxy.fail_next(2, kinds=["PUT", "POST"]),
                               lambda: remote.proxy.drop_next(2, "close", kinds=["PUT", "POST"])]):
        remote.proxy.reset_faults()
        fault()
        url = remote.url(f"up{n}.bag")
        write_bag(url, records, limits_placement=SEPARATE)
        assert remote.proxy.faults_applied, "the fault was never triggered"
        assert sackli.Reader(url, limits_placement=SEPARATE).read() == records


def _assert_bounded_failure(call, url: str, limit: float = 30.0) -> OSError:
    start = time.monotonic()
    with pytest.raises(OSError) as caught:
        call()
    elapsed = time.monotonic() - start
    assert elapsed < limit, f"took {elapsed:.1f} s"
    assert url in str(caught.value)
    # Not a file-not-found or permission answer: the server is unreachable.
    assert not isinstance(caught.value, (FileNotFoundError, PermissionError))
    return caught.value


def test_permanently_failing_server_raises_oserror_within_bound(remote, monkeypatch):
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "4")
    monkeypatch.setenv("SACKLI_REMOTE_DEADLINE", "3")
    url = remote.url("down.bag")
    write_bag(url, make_records(20, seed=13))
    reader = sackli.Reader(url)
    remote.proxy.fail_fraction(1.0)  # every request: 503
    error = _assert_bounded_failure(lambda: reader.read_indices([1, 5]), url)
    assert "attempt" in str(error)
    _assert_bounded_failure(lambda: sackli.Reader(url), url)
    remote.proxy.reset_faults()
    remote.proxy.drop_fraction(1.0, "close")  # every connection dropped
    _assert_bounded_failure(lambda: list(reader), url)


def test_stopped_server_raises_oserror_within_bound(remote, monkeypatch):
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "4")
    monkeypatch.setenv("SACKLI_REMOTE_DEADLINE", "3")
    records = make_records(20, seed=14)
    url = remote.url("gone.bag")
    write_bag(url, records)
    # A proxy of our own that we can stop: afterwards its port refuses
    # connections, as a server that went away.
    doomed = FaultProxy(remote.scheme, upstream=remote.proxy.upstream).start()
    try:
        with remote.endpoint(doomed.url):
            reader = sackli.Reader(url)
            assert reader[0] == records[0]
            doomed.stop()
            _assert_bounded_failure(lambda: reader.read_indices([2, 9]), url)
            _assert_bounded_failure(lambda: sackli.Reader(url), url)
    finally:
        doomed.stop()


def test_deadline_bounds_a_request_that_hangs(remote, monkeypatch):
    """SACKLI_REMOTE_DEADLINE is "for one request with its retries"
    (sackli/_storage/_retry.py). A server that takes 4 s to answer must not
    hold a read with a 1 s deadline for 4 s (nor, when it never answers, for
    the client libraries' 60 s timeouts).

    Regression: the deadline was only checked between attempts; now it also
    bounds each request's network timeouts.
    """
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "2")
    monkeypatch.setenv("SACKLI_REMOTE_DEADLINE", "1")
    url = remote.url("slow.bag")
    write_bag(url, [b"a", b"b"])
    reader = sackli.Reader(url)
    remote.proxy.latency = 4.0
    start = time.monotonic()
    with pytest.raises(OSError, match=re.escape(url)):
        reader[1]
    assert time.monotonic() - start < 3.0


def test_each_attempt_is_one_request(remote, monkeypatch):
    """SACKLI_REMOTE_ATTEMPTS bounds the requests: the client libraries' own
    retries are meant to be off (sackli/_storage/_s3.py says so), so a
    server that always fails sees exactly that many requests per read.

    Regression for s3: botocore's `retries={"max_attempts": 1}` counts
    retries, not attempts (`total_max_attempts` does), which made each
    attempt two requests with hidden backoff between.
    """
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "3")
    url = remote.url("count.bag")
    write_bag(url, [b"a", b"b"])
    reader = sackli.Reader(url)
    remote.proxy.fail_fraction(1.0, kinds=["GET"])
    remote.proxy.reset_counts()
    with pytest.raises(OSError):
        reader[1]
    assert remote.proxy.counts["GET"] == 3, remote.proxy.log


ONE_FAULT = {
    "503": lambda proxy, kinds: proxy.fail_next(1, kinds=kinds),
    "dropped": lambda proxy, kinds: proxy.drop_next(1, "close", kinds=kinds),
    "cut-body": lambda proxy, kinds: proxy.drop_next(1, "cut", kinds=kinds),
}


def _object_requests(remote) -> list[str]:
    # The kinds of the requests about objects: google-cloud-storage also
    # fetches its bucket's metadata in a background thread now and then.
    return [kind for _, target, kind in remote.proxy.log if ".bin" in target]


@pytest.mark.parametrize("fault", list(ONE_FAULT))
def test_whole_object_reads_are_one_get_and_exact_despite_faults(remote, fault):
    # read_object (spec.json of datasets, small files) asks for the whole
    # object in one GET, without a HEAD first; a failed or cut GET is retried.
    from sackli import _storage

    data = random.Random(3).randbytes(200_000)
    remote.put("whole.bin", data)
    remote.put("empty.bin", b"")
    remote.proxy.reset_counts()
    assert _storage.read_object(remote.url("whole.bin")) == data
    assert _storage.read_object(remote.url("empty.bin")) == b""
    assert _object_requests(remote) == ["GET", "GET"]
    remote.proxy.reset_counts()
    ONE_FAULT[fault](remote.proxy, kinds=["GET"])
    assert _storage.read_object(remote.url("whole.bin")) == data
    assert sum(remote.proxy.faults_applied.values()) == 1, remote.proxy.faults_applied
    assert _object_requests(remote) == ["GET", "GET"]  # the faulted one, then the retry
    with pytest.raises(FileNotFoundError, match="missing.bin"):
        _storage.read_object(remote.url("missing.bin"))
