"""Which HTTP client should fetch the ranged GETs of remote bags?

Starts moto's S3 server, fake-gcs-server and gcp-storage-emulator on
127.0.0.1, each behind the tests' proxy (tests/remote_servers.py), uploads a
16 MiB object, and times each candidate client on the same ranges:

  * "single": 200 ranged GETs of 8 KiB, one after the other;
  * "batch": 500 ranges of 1-16 KiB, fetched with 32 in flight;

direct and with `--latency-ms` (20) added to every request by the proxy. It
prints wall seconds (median of `--repeat`), the process's CPU time per
request (user + system: what the requests cost the host, most of it under
the GIL for the Python clients), and the most requests the proxy saw in
flight. The candidates:

  * boto3 / google-cloud-storage (the stores' current clients), "batch" from a
    pool of 32 threads;
  * obstore (Rust's object_store; the request work runs without the GIL),
    "batch" from a pool of 32 threads calling its blocking `get`; on gs its
    GCSStore (the XML API), each GET pinned to the generation;
  * pycurl (libcurl's multi interface, S3 requests signed with botocore's
    SigV4 signer), "batch" as one multi transfer of 32 handles.

    python benchmarks/remote_clients.py                 # about two minutes
    python benchmarks/remote_clients.py --repeat 1 --latency-ms 50

The decision and its numbers: docs/development.md, "The remote data path".
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import multiprocessing
import os
import pathlib
import random
import statistics
import sys
import time
from datetime import timedelta
from typing import Callable

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from remote_servers import FakeGcsServer, FaultProxy, GcpStorageEmulator, MotoServer  # noqa: E402

BUCKET = "bench-clients"
KEY = "dir/object.bin"
SIZE = 16 << 20
IN_FLIGHT = 32

Ranges = list[tuple[int, int]]
Fetch = Callable[[Ranges], list[bytes]]


def _workloads(seed: int = 0) -> dict[str, Ranges]:
    rng = random.Random(seed)
    singles = [(rng.randrange(SIZE - 8192), 8192) for _ in range(200)]
    batch = []
    for _ in range(500):
        length = rng.randrange(1024, 16385)
        batch.append((rng.randrange(SIZE - length), length))
    return {"single": singles, "batch": batch}


def _pooled(one: Callable[[int, int], bytes], pool: concurrent.futures.Executor) -> Fetch:
    return lambda ranges: list(pool.map(lambda r: one(*r), ranges))


def _boto3_client(endpoint: str):
    import boto3
    import botocore.config

    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, aws_access_key_id="bench", aws_secret_access_key="bench",
        region_name="us-east-1",
        config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"},
                                      max_pool_connections=128))


def s3_candidates(endpoint: str, pool: concurrent.futures.Executor) -> dict[str, tuple[Fetch, Fetch]]:
    """name -> (sequential fetch, concurrent fetch) of S3 ranges."""
    client = _boto3_client(endpoint)

    def boto3_one(offset: int, length: int) -> bytes:
        return client.get_object(Bucket=BUCKET, Key=KEY,
                                 Range=f"bytes={offset}-{offset + length - 1}")["Body"].read()

    import obstore
    from obstore.store import S3Store as ObS3Store

    store = ObS3Store(BUCKET, endpoint=endpoint, access_key_id="bench", secret_access_key="bench",
                      region="us-east-1", client_options={"allow_http": True},
                      retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=30),
                                    "backoff": {"init_backoff": timedelta(milliseconds=10),
                                                "max_backoff": timedelta(seconds=1), "base": 2}})

    def obstore_one(offset: int, length: int) -> bytes:
        return bytes(obstore.get(store, KEY, options={"range": (offset, offset + length)}).bytes())

    curl = _CurlS3(endpoint)
    return {
        "boto3": (lambda rs: [boto3_one(*r) for r in rs], _pooled(boto3_one, pool)),
        "obstore": (lambda rs: [obstore_one(*r) for r in rs], _pooled(obstore_one, pool)),
        "pycurl": (lambda rs: [curl.fetch([r])[0] for r in rs], curl.fetch),
    }


def gcs_candidates(endpoint: str, pool: concurrent.futures.Executor) -> dict[str, tuple[Fetch, Fetch]]:
    from urllib.parse import quote

    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="bench", credentials=AnonymousCredentials(),
                            client_options=ClientOptions(api_endpoint=endpoint))
    url = f"{endpoint}/download/storage/v1/b/{BUCKET}/o/{quote(KEY, safe='')}"

    def gcs_one(offset: int, length: int) -> bytes:
        # The store's own request: a plain media GET through the client's session.
        response = client._http.get(url, params={"alt": "media"}, stream=True, headers={
            "Range": f"bytes={offset}-{offset + length - 1}", "Accept-Encoding": "gzip"})
        with response:
            return response.raw.read(decode_content=False)

    curl = _CurlGcs(url)
    candidates = {
        "google-cloud-storage": (lambda rs: [gcs_one(*r) for r in rs], _pooled(gcs_one, pool)),
        "pycurl": (lambda rs: [curl.fetch([r])[0] for r in rs], curl.fetch),
    }
    obstore_one = _obstore_gcs(endpoint, lambda: client.bucket(BUCKET).get_blob(KEY).generation)
    candidates["obstore"] = (lambda rs: [obstore_one(*r) for r in rs], _pooled(obstore_one, pool))
    return candidates


def _obstore_gcs(endpoint: str, generation: Callable[[], int]) -> Callable[[int, int], bytes]:
    """One ranged GET through obstore's GCSStore (the XML API, path-style),
    pinned to the object's `generation()` (`?generation=`) as a reader's
    would be; the store is made at the first call, so that a server it
    cannot serve fails this candidate's row alone.

    fake-gcs-server serves the XML API only to its public host (by default
    storage.googleapis.com), hence the Host header; gcp-storage-emulator
    sends no Last-Modified, which obstore's GCS client requires."""
    made: list = []

    def one(offset: int, length: int) -> bytes:
        import obstore

        if not made:
            from obstore.store import GCSStore

            made.append(GCSStore(
                BUCKET, skip_signature=True, config={"base_url": endpoint},
                client_options={"allow_http": True, "pool_max_idle_per_host": "128",
                                "default_headers": {"Host": "storage.googleapis.com"}},
                retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=30)}))
            made.append(str(generation()))
        store, pinned = made
        options = {"range": (offset, offset + length), "version": pinned}
        return bytes(obstore.get(store, KEY, options=options).bytes())

    return one


class _Curl:
    """A minimal libcurl multi fetcher of ranged GETs (the benchmark's only:
    no retries, no checks)."""

    def __init__(self) -> None:
        import pycurl

        self.pycurl = pycurl
        self.multi = pycurl.CurlMulti()
        self.multi.setopt(pycurl.M_MAX_HOST_CONNECTIONS, IN_FLIGHT)
        self.idle = [pycurl.Curl() for _ in range(IN_FLIGHT)]

    def request(self, offset: int, length: int) -> tuple[str, list[str]]:
        raise NotImplementedError

    def fetch(self, ranges: Ranges) -> list[bytes]:
        pycurl = self.pycurl
        out: list[bytes] = [b""] * len(ranges)
        pending = list(enumerate(ranges))[::-1]
        busy = 0
        while pending or busy:
            while pending and self.idle:
                index, (offset, length) = pending.pop()
                handle = self.idle.pop()
                url, headers = self.request(offset, length)
                handle.buffer = io.BytesIO()
                handle.index = index
                handle.setopt(pycurl.URL, url)
                handle.setopt(pycurl.HTTPHEADER, headers)
                handle.setopt(pycurl.WRITEDATA, handle.buffer)
                self.multi.add_handle(handle)
                busy += 1
            while self.multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
                pass
            _, done, failed = self.multi.info_read()
            for handle in done:
                out[handle.index] = handle.buffer.getvalue()
                self.multi.remove_handle(handle)
                self.idle.append(handle)
                busy -= 1
            if failed:
                raise OSError(f"pycurl: {failed[0][2]}")
            if busy and not done:
                self.multi.select(1.0)
        return out


class _CurlS3(_Curl):
    def __init__(self, endpoint: str) -> None:
        super().__init__()
        from botocore.auth import S3SigV4Auth
        from botocore.credentials import Credentials

        self.signer = S3SigV4Auth(Credentials("bench", "bench"), "s3", "us-east-1")
        self.url = f"{endpoint}/{BUCKET}/{KEY}"

    def request(self, offset: int, length: int) -> tuple[str, list[str]]:
        from botocore.awsrequest import AWSRequest

        request = AWSRequest("GET", self.url, headers={"Range": f"bytes={offset}-{offset + length - 1}"})
        self.signer.add_auth(request)
        return self.url, [f"{name}: {value}" for name, value in request.headers.items()]


class _CurlGcs(_Curl):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url + "?alt=media"

    def request(self, offset: int, length: int) -> tuple[str, list[str]]:
        return self.url, [f"Range: bytes={offset}-{offset + length - 1}"]


def _run(flavor: str, endpoint: str, name: str, workloads: dict[str, Ranges],
         repeat: int) -> list[tuple[float, float]]:
    """(median wall seconds, CPU seconds per request) of the client `name`
    for the singles (sequential) and the batch (concurrent)."""
    data = random.Random(1).randbytes(SIZE)
    with concurrent.futures.ThreadPoolExecutor(IN_FLIGHT) as pool:
        make = s3_candidates if flavor == "s3" else gcs_candidates
        sequential, overlapped = make(endpoint, pool)[name]
        rows = []
        for fetch, ranges in ((sequential, workloads["single"]), (overlapped, workloads["batch"])):
            fetch(ranges[:4])  # connections up, imports done
            walls, cpus = [], []
            for _ in range(repeat):
                start, cpu = time.perf_counter(), time.process_time()
                got = fetch(ranges)
                walls.append(time.perf_counter() - start)
                cpus.append(time.process_time() - cpu)
                assert got == [data[o:o + n] for o, n in ranges], "wrong bytes"
            rows.append((statistics.median(walls), statistics.median(cpus) / len(ranges)))
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = random.Random(1).randbytes(SIZE)
    workloads = _workloads()
    servers = [("s3 (moto)", MotoServer(), "s3"), ("gs (fake-gcs-server)", FakeGcsServer(), "gs"),
               ("gs (gcp-storage-emulator)", GcpStorageEmulator(BUCKET), "gs")]
    print(f"| server | client | latency | 200 singles (s) | batch of 500, {IN_FLIGHT} in flight (s) "
          "| CPU per request, single / batch (µs) | most in flight |")
    print("|---|---|---|---|---|---|---|")
    for label, server, flavor in servers:
        server.start()
        try:
            if flavor == "s3":
                client = _boto3_client(server.url)
                client.create_bucket(Bucket=BUCKET)
                client.put_object(Bucket=BUCKET, Key=KEY, Body=data)
            else:
                from google.api_core.client_options import ClientOptions
                from google.auth.credentials import AnonymousCredentials
                from google.cloud import storage

                gcs = storage.Client(project="bench", credentials=AnonymousCredentials(),
                                     client_options=ClientOptions(api_endpoint=server.url))
                if isinstance(server, FakeGcsServer):
                    gcs.create_bucket(BUCKET)
                gcs.bucket(BUCKET).blob(KEY).upload_from_string(data)
            proxy = FaultProxy(flavor, server.url).start()
            try:
                names = ["boto3", "obstore", "pycurl"] if flavor == "s3" else [
                    "google-cloud-storage", "pycurl", "obstore"]
                for name in names:
                    for latency in (0.0, args.latency_ms / 1000):
                        proxy.latency = latency
                        proxy.reset_counts()
                        # In a child process, so that its CPU time is the
                        # client's alone (the proxy runs in this one).
                        with multiprocessing.get_context("fork").Pool(1) as child:
                            try:
                                rows = child.apply(_run, (flavor, proxy.url, name, workloads,
                                                          args.repeat))
                            except Exception as error:  # a client this server cannot serve
                                print(f"| {label} | {name} | {latency * 1000:.0f} ms | "
                                      f"failed: {str(error).splitlines()[0][:160]} | | | |",
                                      flush=True)
                                continue
                        (single, cpu_single), (batch, cpu_batch) = rows
                        print(f"| {label} | {name} | {latency * 1000:.0f} ms | {single:.3f} | "
                              f"{batch:.3f} | {cpu_single * 1e6:.0f} / {cpu_batch * 1e6:.0f} | "
                              f"{proxy.max_in_flight} |", flush=True)
            finally:
                proxy.stop()
        finally:
            server.close()


if __name__ == "__main__":
    main()
