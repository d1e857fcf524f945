"""WriteToSackli to S3 on a real DirectRunner, against moto's server: an
empty shard is one plain PUT of an empty object (Beam's own S3 upload fails
on it with MalformedXML), shards stream through multipart uploads, and the
sink uses the S3 configuration given to Beam (pipeline options) ahead of
the environment's."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

import sackli
from sackli import _storage
from sackli.beam import WriteToSackli
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, SEPARATE, shard_names, with_limits, read_files_with_bagz,
)
from remote_helpers import BUCKET, servers  # loaded through conftest.py


def pipeline_options(endpoint: str) -> PipelineOptions:
    return PipelineOptions([
        f"--s3_endpoint_url={endpoint}", "--s3_access_key_id=testing",
        "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"])


def write_in_pipeline(servers, monkeypatch, records, spec, placement) -> None:
    """Runs Create(records) | WriteToSackli(spec) with Beam's S3 options
    pointing at the moto server, while the environment's endpoint points
    nowhere: the sink must use the options'."""
    with monkeypatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens
        _storage.reset_clients()
        try:
            with beam.Pipeline(options=pipeline_options(servers.moto.url)) as p:
                _ = p | beam.Create(records) | WriteToSackli(
                    spec, options=sackli.Writer.Options(limits_placement=placement))
        finally:
            _storage.reset_clients()


def unfinished_uploads(servers, prefix: str) -> list:
    listed = servers.raw["s3"].client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix)
    return listed.get("Uploads", [])


# Each pipeline takes a while on the DirectRunner: two cases cover both
# placements and both suffixes.
@pytest.mark.parametrize("placement,ext", [(sackli.LimitsPlacement.TAIL, ".bagz"), (SEPARATE, ".bag")],
                         ids=["TAIL-bagz", "SEPARATE-bag"])
def test_empty_shard_is_written_with_a_plain_put(servers, monkeypatch, tmp_path, placement, ext):
    prefix = f"empty-shard/{placement.name.lower()}{ext.replace('.', '-')}/"
    write_in_pipeline(servers, monkeypatch, [b"a"], f"s3://{BUCKET}/{prefix}out@2{ext}", placement)

    names = shard_names("out", 2, ext)
    expected = with_limits(names) if placement == SEPARATE else names
    stored = servers.raw["s3"].objects(BUCKET, prefix)
    assert sorted(stored) == sorted(prefix + n for n in expected)  # no temporary keys
    assert 0 in stored.values()  # the empty shard (and, SEPARATE, its limits)
    assert unfinished_uploads(servers, prefix) == []

    urls = [f"s3://{BUCKET}/{prefix}{n}" for n in names]
    shards = [sackli.Reader(url, limits_placement=placement).read() for url in urls]
    assert sorted(shards) == [[], [b"a"]]
    for name in expected:
        servers.raw["s3"].client.download_file(BUCKET, prefix + name, str(tmp_path / name))
    assert read_files_with_bagz(tmp_path, names, placement == SEPARATE) == [b"a"]


def test_large_shards_stream_in_parts(servers, monkeypatch):
    import random

    rng = random.Random(5)
    # 9 MiB, incompressible: more than one 8 MiB part.
    records = [rng.randbytes(256 * 1024) for _ in range(36)]
    prefix = "streamed-shards/"
    write_in_pipeline(servers, monkeypatch, records, f"s3://{BUCKET}/{prefix}out@1.bagz",
                      sackli.LimitsPlacement.TAIL)
    assert unfinished_uploads(servers, prefix) == []
    # A multipart object's ETag ends with "-<number of parts>".
    client = servers.raw["s3"].client
    parts = [client.head_object(Bucket=BUCKET, Key=prefix + name)["ETag"].strip('"').partition("-")[2]
             for name in shard_names("out", 1, ".bagz")]
    assert parts == ["2"]
    read = sackli.Reader(f"s3://{BUCKET}/{prefix}out@*.bagz").read()
    assert sorted(read) == sorted(records)
