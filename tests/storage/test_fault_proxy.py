"""The fault proxy's own faults (tests/remote_servers.py): lost responses,
stalls, duplicated requests, shifted ranges, doubled responses, and rules
restricted to one object. Plain `http.client` requests through the proxy to
the real servers, so that no client library's retries hide what happens."""

from __future__ import annotations

import http.client
import random
import socket
import threading
import time
import urllib.parse

import pytest

from remote_helpers import (  # loaded through conftest.py
    BUCKET, FaultProxy, servers, remote, gcs_emulator, emulated_gcs,
)


DATA = random.Random(5).randbytes(1000)


def _put(remote, name: str) -> tuple[str, str]:
    """Method and target of a one-request upload of `name`."""
    key = remote.folder + name
    if remote.scheme == "s3":
        return "PUT", f"/{BUCKET}/{urllib.parse.quote(key)}"
    return "POST", (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name="
                    f"{urllib.parse.quote(key, safe='')}")


def _get(remote, name: str) -> str:
    """Target of a read of `name`'s bytes."""
    key = remote.folder + name
    if remote.scheme == "s3":
        return f"/{BUCKET}/{urllib.parse.quote(key)}"
    return f"/storage/v1/b/{BUCKET}/o/{urllib.parse.quote(key, safe='')}?alt=media"


_S3_AUTHORIZATION = ("AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/s3/aws4_request, "
                     "SignedHeaders=host, Signature=" + "0" * 64)


def _auth(proxy: FaultProxy) -> dict:
    # moto checks no signatures, but refuses anonymous requests.
    return {"Authorization": _S3_AUTHORIZATION} if proxy.flavor == "s3" else {}


def _connect(proxy: FaultProxy, timeout: float = 10.0) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)


def _request(proxy: FaultProxy, method: str, target: str, body: bytes | None = None,
             headers: dict | None = None, timeout: float = 10.0) -> tuple[int, dict, bytes]:
    connection = _connect(proxy, timeout)
    headers = {**_auth(proxy), **(headers or {})}
    try:
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _upload(remote, name: str, data: bytes = DATA, proxy: FaultProxy | None = None) -> int:
    method, target = _put(remote, name)
    status, _, _ = _request(proxy or remote.proxy, method, target, data,
                            {"Content-Type": "application/octet-stream"})
    return status


def test_lose_forwards_but_sends_nothing(remote):
    remote.proxy.lose_next(1, kinds=["PUT", "POST"])
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _upload(remote, "lost.bin")
    assert remote.proxy.faults_applied == {"lose": 1}
    # The server acted: the object is there.
    assert remote.get("lost.bin") == DATA
    # The rule is used up: the next request is answered.
    assert _upload(remote, "kept.bin") == 200


def test_lose_fraction_one_loses_every_answer(remote):
    remote.put("l.bin", DATA)
    remote.proxy.lose_fraction(1.0, kinds=["GET"])
    for _ in range(3):
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _request(remote.proxy, "GET", _get(remote, "l.bin"))
    assert remote.proxy.faults_applied["lose"] == 3


def test_stall_delays_the_answer_after_the_server_acted(remote):
    remote.proxy.stall_next(1, seconds=1.5, kinds=["PUT", "POST"])
    # A client with a shorter timeout gives up; the server has acted anyway.
    with pytest.raises((socket.timeout, TimeoutError)):
        _upload_with_timeout(remote, "stalled.bin", timeout=0.5)
    time.sleep(1.2)  # the stall ends; the answer goes nowhere
    assert remote.proxy.faults_applied == {"stall": 1}
    assert remote.get("stalled.bin") == DATA
    # A patient client gets the answer, late.
    remote.put("s.bin", DATA)
    remote.proxy.stall_next(1, seconds=1.0, kinds=["GET"])
    start = time.monotonic()
    status, _, body = _request(remote.proxy, "GET", _get(remote, "s.bin"), timeout=10)
    assert time.monotonic() - start >= 1.0
    assert (status, body) == (200, DATA)


def _upload_with_timeout(remote, name: str, timeout: float) -> None:
    method, target = _put(remote, name)
    _request(remote.proxy, method, target, DATA, timeout=timeout)


def test_stall_ends_when_the_proxy_stops(remote):
    remote.put("st.bin", DATA)
    proxy = FaultProxy(remote.scheme, upstream=remote.proxy.upstream).start()
    proxy.stall_next(1, seconds=60)
    outcome = []

    def read():
        try:
            outcome.append(_request(proxy, "GET", _get(remote, "st.bin"), timeout=30))
        except Exception as e:  # the proxy closed the connection
            outcome.append(e)

    thread = threading.Thread(target=read)
    thread.start()
    time.sleep(0.5)
    start = time.monotonic()
    proxy.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - start < 5
    assert proxy.faults_applied == {"stall": 1}


def test_duplicate_sends_the_request_twice(remote):
    # A second proxy behind the first counts what reaches the server.
    counter = FaultProxy(remote.scheme, upstream=remote.proxy.upstream).start()
    front = FaultProxy(remote.scheme, upstream=counter.url).start()
    try:
        front.duplicate_next(1, kinds=["PUT", "POST"])
        assert _upload(remote, "twice.bin", proxy=front) == 200
        assert front.faults_applied == {"duplicate": 1}
        method = _put(remote, "x")[0]
        assert (front.counts[method], counter.counts[method]) == (1, 2)
        assert remote.get("twice.bin") == DATA
    finally:
        front.stop()
        counter.stop()


def test_duplicate_creates_two_multipart_uploads_on_s3(servers):
    proxy = servers.proxies["s3"]
    proxy.reset_faults()
    key = "dup-multipart/object.bin"
    proxy.duplicate_next(1, kinds=["POST"])
    status, _, body = _request(proxy, "POST", f"/{BUCKET}/{key}?uploads")
    assert status == 200 and b"UploadId" in body
    uploads = servers.raw["s3"].client.list_multipart_uploads(Bucket=BUCKET, Prefix=key)
    assert len(uploads.get("Uploads", [])) == 2
    for upload in uploads["Uploads"]:
        servers.raw["s3"].client.abort_multipart_upload(Bucket=BUCKET, Key=key,
                                                        UploadId=upload["UploadId"])
    proxy.reset_faults()


@pytest.mark.parametrize("asked, served", [
    ((100, 199), (200, 299)),  # a+L .. b+L
    ((400, 799), (0, 399)),    # past the end: a-L .. b-L
    ((900, 999), (800, 899)),
    ((300, 799), (301, 800)),  # neither fits: one byte on
    ((500, 999), (0, 499)),
    ((300, 999), (299, 998)),  # ... or one byte back at the end
])
def test_shift_serves_another_range_of_the_same_length(remote, asked, served):
    remote.put("r.bin", DATA)
    remote.proxy.shift_next(1)
    # Requests without a Range pass and do not use up the rule.
    status, _, body = _request(remote.proxy, "GET", _get(remote, "r.bin"))
    assert (status, body) == (200, DATA)
    assert remote.proxy.faults_applied["shift"] == 0
    a, b = asked
    status, headers, body = _request(remote.proxy, "GET", _get(remote, "r.bin"),
                                     headers={"Range": f"bytes={a}-{b}"})
    assert remote.proxy.faults_applied == {"shift": 1}
    assert status == 206
    x, y = served
    assert {k.lower(): v for k, v in headers.items()}["content-range"] == f"bytes {x}-{y}/1000"
    assert body == DATA[x:y + 1]
    # Used up: the next ranged read is exact.
    status, headers, body = _request(remote.proxy, "GET", _get(remote, "r.bin"),
                                     headers={"Range": f"bytes={a}-{b}"})
    assert (status, body) == (206, DATA[a:b + 1])


def test_shift_of_the_whole_object_is_one_byte_on(remote):
    remote.put("w.bin", DATA)
    remote.proxy.shift_next(1)
    status, headers, body = _request(remote.proxy, "GET", _get(remote, "w.bin"),
                                     headers={"Range": "bytes=0-999"})
    assert status == 206 and body == DATA[1:]


def test_shift_on_the_emulator(emulated_gcs):
    emulated_gcs.put("r.bin", DATA)
    emulated_gcs.proxy.shift_next(1)
    status, headers, body = _request(emulated_gcs.proxy, "GET", _get(emulated_gcs, "r.bin"),
                                     headers={"Range": "bytes=10-19"})
    assert emulated_gcs.proxy.faults_applied == {"shift": 1}
    assert status == 206 and body == DATA[20:30]


def test_double_desyncs_the_next_request_on_the_connection(remote):
    first, second = DATA[:100], DATA[100:300]
    remote.put("d1.bin", first)
    remote.put("d2.bin", second)
    remote.proxy.double_next(1, kinds=["GET"])
    connection = _connect(remote.proxy)
    try:
        connection.request("GET", _get(remote, "d1.bin"), headers=_auth(remote.proxy))
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, first)
        # The next request on this connection reads the stale copy.
        connection.request("GET", _get(remote, "d2.bin"), headers=_auth(remote.proxy))
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, first)
        # ... and the proxy went on forwarding: d2's answer comes next.
        connection.request("GET", _get(remote, "d1.bin"), headers=_auth(remote.proxy))
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, second)
    finally:
        connection.close()
    assert remote.proxy.faults_applied == {"double": 1}
    # A new connection is not affected.
    status, _, body = _request(remote.proxy, "GET", _get(remote, "d2.bin"))
    assert (status, body) == (200, second)


def test_double_of_a_head_answer(servers):
    # An answer without a body, doubled: its headers come twice.
    proxy = servers.proxies["s3"]
    proxy.reset_faults()
    servers.raw["s3"].put(BUCKET, "dbl/h.bin", DATA)
    proxy.double_next(1, kinds=["HEAD"])
    connection = _connect(proxy)
    try:
        for _ in range(2):
            connection.request("HEAD", f"/{BUCKET}/dbl/h.bin", headers=_auth(proxy))
            response = connection.getresponse()
            response.read()
            assert response.status == 200 and response.getheader("Content-Length") == "1000"
    finally:
        connection.close()
    assert proxy.faults_applied == {"double": 1}
    proxy.reset_faults()


def test_match_restricts_a_fault_to_one_object(remote):
    remote.proxy.fail_next(1, status=500, match="limits.")
    assert _upload(remote, "a.bag") == 200
    assert remote.proxy.faults_applied == {}
    assert _upload(remote, "a.bag.limits.x") == 500
    assert _upload(remote, "a.bag.limits.x") == 200
    assert remote.proxy.faults_applied == {"fail": 1}
    assert [fault for fault, _, _ in remote.proxy.fault_log] == ["fail"]


def test_match_with_a_fraction_and_kinds(remote):
    remote.put("m1.bin", DATA)
    remote.put("m2.bin", DATA)
    remote.proxy.lose_fraction(1.0, kinds=["GET"], match="m2.bin")
    assert _request(remote.proxy, "GET", _get(remote, "m1.bin"))[2] == DATA
    assert _upload(remote, "m2.bin") == 200  # not a GET
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _request(remote.proxy, "GET", _get(remote, "m2.bin"))
    assert remote.proxy.faults_applied == {"lose": 1}


def test_zero_fraction_adds_no_fault(remote):
    remote.put("z.bin", DATA)
    remote.proxy.fail_fraction(0.0)
    remote.proxy.lose_fraction(0.0)
    assert _request(remote.proxy, "GET", _get(remote, "z.bin"))[2] == DATA
    assert remote.proxy.faults_applied == {}


def test_end_stalls_releases_a_stalled_answer(remote):
    remote.put("e.bin", DATA)
    remote.proxy.stall_next(1, seconds=60, kinds=["GET"])
    outcome = []
    thread = threading.Thread(
        target=lambda: outcome.append(_request(remote.proxy, "GET", _get(remote, "e.bin"),
                                               timeout=30)))
    thread.start()
    deadline = time.monotonic() + 5
    while not remote.proxy.faults_applied and time.monotonic() < deadline:
        time.sleep(0.02)
    assert remote.proxy.in_flight() == 1
    remote.proxy.end_stalls()
    thread.join(5)
    assert not thread.is_alive()
    assert outcome and outcome[0][0] == 200 and outcome[0][2] == DATA
    deadline = time.monotonic() + 5  # the handler leaves just after it answered
    while remote.proxy.in_flight() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert remote.proxy.in_flight() == 0


@pytest.mark.parametrize("method, target, kind", [
    ("GET", "/download/storage/v1/b/bkt/o/dir%2Fa?alt=media", "GET"),
    ("GET", "/storage/v1/b/bkt/o/dir%2Fa?alt=media", "GET"),
    ("GET", "/storage/v1/b/bkt/o/dir%2Fa", "HEAD"),
    ("GET", "/storage/v1/b/bkt/o?prefix=dir", "LIST"),
    # The XML API, path style (obstore's GCSStore): bytes, listings.
    ("GET", "/bkt/dir%2Fa%2Ebin?generation=7", "GET"),
    ("GET", "/bkt?list-type=2", "LIST"),
    ("HEAD", "/bkt/dir%2Fa", "HEAD"),
    ("POST", "/upload/storage/v1/b/bkt/o?uploadType=media", "POST"),
])
def test_gcs_requests_are_classified_for_both_apis(method, target, kind):
    from remote_servers import classify

    assert classify("gs", method, target) == kind
