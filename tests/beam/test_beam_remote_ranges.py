"""A remote shard read by Beam in 16 ranges, on the DirectRunner, against
moto's S3 server: each range opens its own reader, and all of them together
must download at most 1.1x the shard (the bytes the server really sent,
counted by the proxy in front of it). Before ranges fetched only their
limits, every range downloaded all of the shard's limits."""

from __future__ import annotations

import hashlib
import random

import apache_beam as beam
import pytest
from apache_beam.io import iobase
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

from sackli.beam import ReadAllFromSackli, ReadFromSackli
from beam_helpers import _quiet_beam  # noqa: F401 (autouse fixture)
from remote_helpers import BUCKET, servers, write_bag  # noqa: F401 (fixture)

RANGES = 16
N = 50_000
BAR = 1.1


@pytest.fixture(scope="module")
def big_shard(servers):
    """(url, size, records) of a TAIL .bag of N records of ~300 bytes on S3."""
    rng = random.Random(16)
    records = [b"%d:" % i + rng.randbytes(rng.randrange(200, 400)) for i in range(N)]
    url = f"s3://{BUCKET}/beam-ranges/big.bag"
    write_bag(url, records)
    size = servers.raw["s3"].objects(BUCKET, "beam-ranges/big.bag")["beam-ranges/big.bag"]
    return url, size, records


def _pipeline_options(servers) -> PipelineOptions:
    # Both Beam's S3 file system (the listing) and sackli's own client (the
    # reads) take the endpoint from the options: the proxy, which counts.
    return PipelineOptions([
        f"--s3_endpoint_url={servers.proxies['s3'].url}", "--s3_access_key_id=testing",
        "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"])


def _digest(records) -> str:
    """The same for the same records in any order."""
    return hashlib.sha256(b"".join(sorted(records))).hexdigest()


def _assert_reads(read: beam.PCollection, records: list[bytes]) -> None:
    # One digest of everything read: equal_to compares 50k records slowly.
    assert_that(read | beam.combiners.ToList() | beam.Map(_digest), equal_to([_digest(records)]))


def _check_traffic(proxy, size: int) -> None:
    # Each range opens its own reader: the GET of its tail each.
    assert proxy.counts["GET"] >= RANGES, dict(proxy.counts)
    fetched = proxy.bytes_sent["GET"]
    print(f"fetched {fetched / size:.3f}x the shard")
    assert fetched <= BAR * size, f"{fetched} bytes fetched for a shard of {size} ({fetched / size:.2f}x)"


def test_read_from_sackli_in_16_ranges_fetches_little_more_than_the_shard(
        servers, big_shard, monkeypatch):
    url, size, records = big_shard
    # The runner asks the source for ranges of this size (Beam's default is
    # about 1000 * sqrt(size): too few ranges for a shard this small).
    chunk = -(-size // RANGES)
    monkeypatch.setattr(iobase.Read, "get_desired_chunk_size", staticmethod(lambda total: chunk))
    proxy = servers.proxies["s3"]
    proxy.reset_counts()
    with beam.Pipeline(options=_pipeline_options(servers)) as p:
        read = p | ReadFromSackli(url, validate=False)
        _assert_reads(read, records)
    _check_traffic(proxy, size)


def test_read_all_from_sackli_in_16_ranges_fetches_little_more_than_the_shard(servers, big_shard):
    url, size, records = big_shard
    proxy = servers.proxies["s3"]
    proxy.reset_counts()
    with beam.Pipeline(options=_pipeline_options(servers)) as p:
        read = p | beam.Create([url]) | ReadAllFromSackli(desired_bundle_size=-(-size // RANGES))
        _assert_reads(read, records)
    _check_traffic(proxy, size)

