"""The benchmarks' S3 harness (benchmarks/moto_s3.py: moto's server behind
the tests' FaultProxy with `latency` set): a ranged GET through it returns the
right bytes and headers, waits at least the latency, and is counted with its
bytes; sackli reaches it through the environment, which is put back after."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import random
import sys
import time

import boto3

import sackli

BUCKET = "sackli-latency-proxy"


def _load_moto_s3():
    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "moto_s3.py"
    spec = importlib.util.spec_from_file_location("bench_moto_s3", path)
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)  # the module puts tests/ on sys.path (for remote_servers)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def test_ranged_get_through_the_latency_proxy(monkeypatch, tmp_path):
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    data = random.Random(7).randbytes(100_000)
    with _load_moto_s3().serve_s3() as (server, proxy):
        assert os.environ["AWS_ENDPOINT_URL"] == proxy.url
        direct = boto3.client("s3", endpoint_url=server.url)
        direct.create_bucket(Bucket=BUCKET)
        direct.put_object(Bucket=BUCKET, Key="blob", Body=data)
        etag = direct.head_object(Bucket=BUCKET, Key="blob")["ETag"]

        latency = 0.05
        proxy.latency = latency
        proxy.reset_counts()
        client = boto3.client("s3")  # the endpoint from the environment: the proxy
        start = time.monotonic()
        answer = client.get_object(Bucket=BUCKET, Key="blob", Range="bytes=1000-60999")
        body = answer["Body"].read()
        assert time.monotonic() - start >= latency
        assert body == data[1000:61000]
        assert answer["ContentRange"] == "bytes 1000-60999/100000"
        assert answer["ETag"] == etag
        assert dict(proxy.counts) == {"GET": 1}
        assert proxy.bytes_sent["GET"] == 60_000

        # sackli's reads go through the proxy too, and are counted.
        local = tmp_path / "x.bag"
        with sackli.Writer(local) as writer:
            writer.write_many([b"first", b"second" * 1000])
        direct.upload_file(str(local), BUCKET, "x.bag")
        proxy.reset_counts()
        assert sackli.Reader(f"s3://{BUCKET}/x.bag")[1] == b"second" * 1000
        assert proxy.counts["GET"] >= 1
        assert proxy.bytes_sent["GET"] >= 6000
    assert "AWS_ENDPOINT_URL" not in os.environ
