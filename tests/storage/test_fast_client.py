"""The stores' ranged reads: `S3Store` through obstore (sackli/_storage/_s3_ranges.py)
or boto3 where obstore cannot honour a setting, `GcsStore` through its
client's session; both run a batch (`read_many`) concurrently
(`in_parallel`, sackli/_storage/_executor.py).

On each real server (moto, fake-gcs-server, gcp-storage-emulator) behind the
faulting proxy: a batch returns exact bytes with many requests in flight,
and each fault the proxy can inject ends as docs/cloud.md promises.
"""

from __future__ import annotations

import errno
import itertools
import multiprocessing
import os
import random
import re

import pytest

import sackli
from sackli._storage import _objects
from sackli._storage._settings import S3Settings, StorageSettings
from sackli._storage._urls import parse
from remote_helpers import (  # noqa: F401  (fixtures)
    Remote, emulated_gcs, gcs_emulator, remote, s3_remote, servers, write_bag,
)

SIZE = 1 << 20


_folders = itertools.count()


@pytest.fixture(params=["moto", "fake-gcs-server", "gcp-storage-emulator"])
def server(request):
    """A `Remote` with a fresh folder on each of the three servers."""
    yield from _remote_on(request)


def _remote_on(request):
    if request.param == "gcp-storage-emulator":
        yield request.getfixturevalue("emulated_gcs")
        return
    scheme = "s3" if request.param == "moto" else "gs"
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:80]
    remote_ = Remote(scheme, request.getfixturevalue("servers"), f"f{next(_folders):04d}-{name}/")
    remote_.proxy.reset_faults()
    remote_.proxy.reset_counts()
    yield remote_
    remote_.proxy.end_stalls()
    remote_.proxy.reset_faults()


def _object(server, name: str = "object.bin", seed: int = 0):
    """(store, path, identity, bytes) of a new object of SIZE random bytes."""
    data = random.Random(seed).randbytes(SIZE)
    server.put(name, data)
    path = parse(server.url(name))
    store = _objects._current_store(path)
    return store, path, store.stat(path).identity, data


def _ranges(n: int, seed: int = 1) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = rng.randrange(1024, 16385)
        out.append((rng.randrange(SIZE - length), length))
    return out


def _expected(data: bytes, ranges):
    return [data[offset:offset + length] for offset, length in ranges]


def test_s3_reads_ranges_through_obstore(s3_remote):
    store, path, _, _ = _object(s3_remote)
    assert store.ranged_client(path) == "obstore"


def test_a_batch_is_exact_and_concurrent(server):
    store, path, identity, data = _object(server)
    ranges = _ranges(96)
    server.proxy.reset_counts()
    server.proxy.latency = 0.05  # so that overlapping requests show in the counter
    try:
        got = store.read_many(path, ranges, identity)
    finally:
        server.proxy.latency = 0.0
    assert [bytes(piece) for piece in got] == _expected(data, ranges)
    assert server.proxy.counts["GET"] == len(ranges)
    assert server.proxy.max_in_flight >= 8


def test_a_reader_through_the_store_reads_exact_records(server):
    records = [os.urandom(random.Random(i).randrange(0, 3000)) for i in range(400)]
    url = server.url("bag.bagz")
    write_bag(url, records)
    reader = sackli.Reader(url, max_parallelism=8)
    indices = random.Random(2).sample(range(400), 150)
    assert reader.read_indices(indices) == [records[i] for i in indices]
    assert [reader[i] for i in (0, 399, 17)] == [records[0], records[399], records[17]]


@pytest.mark.parametrize("fault", ["shift", "double", "cut", "close", "lose", "503", "429"])
def test_a_fault_in_a_batch_is_retried_and_never_returned(server, fault):
    store, path, identity, data = _object(server)
    ranges = _ranges(12, seed=3)
    proxy = server.proxy
    if fault == "shift":
        proxy.shift_next(3, kinds=["GET"])
    elif fault == "double":
        proxy.double_next(3, kinds=["GET"])
    elif fault in ("cut", "close"):
        proxy.drop_next(3, mode=fault, kinds=["GET"])
    elif fault == "lose":
        proxy.lose_next(3, kinds=["GET"])
    else:
        proxy.fail_next(3, status=int(fault), kinds=["GET"])
    got = store.read_many(path, ranges, identity)
    assert [bytes(piece) for piece in got] == _expected(data, ranges)
    name = {"503": "fail", "429": "fail"}.get(fault, fault)
    assert proxy.faults_applied[name] >= 1
    # A doubled answer is the stale copy the next request on that connection
    # may read; shifted, dropped, lost or failed ones cost a retry each. A
    # cut body costs at least one (with many in flight on moto, obstore's
    # pool sometimes sends one more: the count varies with its connections).
    if fault == "cut":
        assert proxy.counts["GET"] >= len(ranges) + 3
    elif fault != "double":
        assert proxy.counts["GET"] == len(ranges) + 3


@pytest.fixture(params=["moto", "fake-gcs-server"])
def versioned_server(request):
    """A `Remote` on each server that names the version (ETag, generation)
    in its answers: gcp-storage-emulator names none (docs/cloud.md)."""
    yield from _remote_on(request)


def test_another_objects_doubled_answer_is_asked_again(versioned_server):
    """A doubled answer waits on its connection for the next request: there,
    another object's read of the same range. Its other version is an answer
    out of step, asked again: never an error saying the object changed,
    never its bytes."""
    server = versioned_server
    store, first, first_identity, first_data = _object(server, "first.bin", seed=1)
    _, second, second_identity, second_data = _object(server, "second.bin", seed=2)
    server.proxy.double_next(1, kinds=["GET"])
    assert store.read(first, 4096, 1000, first_identity) == first_data[4096:5096]
    for _ in range(3):
        assert store.read(second, 4096, 1000, second_identity) == second_data[4096:5096]
    assert server.proxy.faults_applied["double"] == 1


def test_a_single_read_is_checked_too(server):
    store, path, identity, data = _object(server)
    server.proxy.shift_next(1, kinds=["GET"])
    assert store.read(path, 5000, 300, identity) == data[5000:5300]
    assert server.proxy.faults_applied["shift"] == 1
    assert server.proxy.counts["GET"] == 2


def test_a_stalled_answer_times_out_and_is_retried(server, monkeypatch):
    # A deadline of 2 s: each attempt waits 0.5 s on the network.
    monkeypatch.setenv("SACKLI_REMOTE_DEADLINE", "2")
    store, path, identity, data = _object(server)
    server.proxy.stall_next(1, seconds=30, kinds=["GET"])
    try:
        assert store.read(path, 100, 1000, identity) == data[100:1100]
    finally:
        server.proxy.end_stalls()
    assert server.proxy.faults_applied["stall"] == 1
    assert server.proxy.counts["GET"] == 2


def test_failing_requests_end_in_oserror_within_the_bound(server, monkeypatch):
    monkeypatch.setenv("SACKLI_REMOTE_ATTEMPTS", "3")
    store, path, identity, _ = _object(server)
    server.proxy.fail_next(100, status=503, kinds=["GET"])
    with pytest.raises(OSError, match="failed after 3 attempts") as caught:
        store.read_many(path, [(0, 10)], identity)
    assert path.url in str(caught.value)
    assert server.proxy.counts["GET"] == 3


def test_refused_and_missing_objects(server):
    store, path, identity, _ = _object(server)
    server.proxy.fail_next(1, status=403, kinds=["GET"])
    with pytest.raises(PermissionError) as caught:
        store.read_many(path, [(0, 10)], identity)
    assert path.url in str(caught.value)
    missing = parse(server.url("missing.bin"))
    with pytest.raises(FileNotFoundError) as caught:
        store.read_many(missing, [(0, 10), (20, 10)])
    assert missing.url in str(caught.value)


def test_a_replaced_object_is_estale_never_other_bytes(versioned_server):
    """gcp-storage-emulator is not asked: it ignores ifGenerationMatch on
    downloads and names no generation, so it serves the new bytes (real
    GCS answers 412; docs/cloud.md)."""
    server = versioned_server
    store, path, identity, data = _object(server)
    server.put("object.bin", data[::-1])
    with pytest.raises(OSError) as caught:
        store.read_many(path, _ranges(4), identity)
    assert caught.value.errno == errno.ESTALE
    assert path.url in str(caught.value)
    with pytest.raises(OSError) as caught:
        store.read(path, 0, 10, identity)
    assert caught.value.errno == errno.ESTALE


def _child_read(url: str, offset: int, length: int, queue) -> None:
    path = parse(url)
    store = _objects._current_store(path)
    client = store.ranged_client(path) if hasattr(store, "ranged_client") else "google-cloud-storage"
    queue.put((client, bytes(store.read_many(path, [(offset, length), (0, 4)])[0])))


def test_reads_after_a_fork_use_a_client_of_their_own(server):
    """obstore's runtime does not survive a fork (a child's calls would never
    return): a child forked after the parent read through it reads through
    boto3."""
    store, path, identity, data = _object(server)
    assert store.read_many(path, [(0, 100), (7, 3)], identity)[0] == data[:100]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_read, args=(path.url, 1000, 500, queue))
    child.start()
    try:
        client, got = queue.get(timeout=60)
    finally:
        child.join(10)
        if child.exitcode is None:
            child.kill()
    assert child.exitcode == 0
    assert got == data[1000:1500]
    assert client == ("boto3" if path.scheme == "s3" else "google-cloud-storage")
    assert store.read(path, 0, 100, identity) == data[:100]


# --- the fallback to boto3 ------------------------------------------------------------


def test_sackli_s3_client_boto3_reads_through_boto3(s3_remote, monkeypatch):
    monkeypatch.setenv("SACKLI_S3_CLIENT", "boto3")
    _objects.reset_clients()
    store, path, identity, data = _object(s3_remote)
    assert store.ranged_client(path) == "boto3"
    ranges = _ranges(40)
    s3_remote.proxy.latency = 0.05
    s3_remote.proxy.shift_next(1, kinds=["GET"])
    try:
        got = store.read_many(path, ranges, identity)
    finally:
        s3_remote.proxy.latency = 0.0
    assert got == _expected(data, ranges)
    assert s3_remote.proxy.max_in_flight >= 8
    assert s3_remote.proxy.faults_applied["shift"] == 1
    monkeypatch.delenv("SACKLI_S3_CLIENT")
    _objects.reset_clients()
    assert store.ranged_client(path) == "obstore"


def test_a_ca_bundle_is_honoured_by_obstore(s3_remote):
    import certifi

    _, path, identity, data = _object(s3_remote)
    settings = StorageSettings(s3=S3Settings(endpoint_url=s3_remote.proxy.url, verify=certifi.where()))
    store = _objects._store(path, settings)
    assert store.ranged_client(path) == "obstore"
    assert store.read_many(path, [(10, 20), (5000, 7)], identity) == [data[10:30], data[5000:5007]]


def test_an_unusable_ca_bundle_reads_through_boto3(s3_remote, tmp_path):
    _, path, identity, data = _object(s3_remote)
    bundle = tmp_path / "ca.pem"
    bundle.write_text("not a certificate")  # boto3 reads it only for https endpoints
    settings = StorageSettings(s3=S3Settings(endpoint_url=s3_remote.proxy.url, verify=str(bundle)))
    store = _objects._store(path, settings)
    assert store.ranged_client(path) == "boto3"
    assert store.read_many(path, [(10, 20), (5000, 7)], identity) == [data[10:30], data[5000:5007]]


def test_an_accelerated_endpoint_reads_through_boto3(s3_remote, tmp_path, monkeypatch):
    config = tmp_path / "config"
    config.write_text("[default]\ns3 =\n    use_accelerate_endpoint = true\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    _objects.reset_clients()
    path = parse(s3_remote.url("object.bin"))
    try:
        # Only the choice: no request leaves this machine.
        assert _objects._current_store(path).ranged_client(path) == "boto3"
    finally:
        monkeypatch.undo()
        _objects.reset_clients()


def test_given_settings_reach_obstore(s3_remote, servers):
    _, path, identity, data = _object(s3_remote)
    settings = StorageSettings(s3=S3Settings(
        endpoint_url=s3_remote.proxy.url, access_key_id="given", secret_access_key="given",
        region_name="eu-west-1"))
    store = _objects._store(path, settings)
    assert store.ranged_client(path) == "obstore"
    s3_remote.proxy.reset_counts()
    assert store.read(path, 3, 4, identity) == data[3:7]
    assert s3_remote.proxy.counts["GET"] == 1  # through the given endpoint


def test_without_obstore_reads_go_through_boto3(s3_remote, run_python):
    _, path, identity, data = _object(s3_remote)
    result = run_python(f"""
        import sys
        sys.modules["obstore"] = None  # not installed
        from sackli._storage import _objects
        from sackli._storage._urls import parse
        path = parse({path.url!r})
        store = _objects._current_store(path)
        def read():
            return store.ranged_client(path), [bytes(b).hex() for b in store.read_many(
                path, [(0, 16), (900, 16)], {identity!r})]
        report(read)
    """)
    client, pieces = eval(result.outcome()["ok"])
    assert client == "boto3"
    assert pieces == [data[:16].hex(), data[900:916].hex()]
