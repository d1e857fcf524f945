"""Writing to and reading from S3 through Beam's own file system, against
moto's server."""

from __future__ import annotations

import apache_beam as beam
import boto3
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import sackli
from sackli.beam import ReadFromSackli, WriteToSackli
from beam_helpers import (  # loaded through conftest.py; _quiet_beam is autouse
    _quiet_beam, SEPARATE, PLACEMENTS, make_records, shard_names, with_limits, read_files,
    read_files_with_bagz,
)


# --- S3 through Beam's file system --------------------------------------------


BUCKET = "sackli-beam-test"


@pytest.fixture(scope="module")
def s3_endpoint():
    """The URL of a moto S3 server (in a thread) with the bucket BUCKET."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        s3_client(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        server.stop()


def s3_client(url: str):
    return boto3.client("s3", aws_access_key_id="testing", aws_secret_access_key="testing",
                        region_name="us-east-1", endpoint_url=url)


class TestS3:
    @PLACEMENTS
    def test_write(self, s3_endpoint, tmp_path, monkeypatch, placement):
        # Beam takes the credentials from the pipeline options; the
        # environment only keeps a real profile of the machine out of it.
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.delenv("AWS_PROFILE", raising=False)
        prefix = f"{placement.name.lower()}/dir"
        records = make_records(500, seed=7)
        pipeline_options = PipelineOptions([
            f"--s3_endpoint_url={s3_endpoint}", "--s3_access_key_id=testing",
            "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"])
        names = shard_names("out", 3, ".bagz")
        with beam.Pipeline(options=pipeline_options) as p:
            written = p | beam.Create(records) | WriteToSackli(
                f"s3://{BUCKET}/{prefix}/out@3.bagz",
                options=sackli.Writer.Options(limits_placement=placement))
            assert_that(written, equal_to([f"s3://{BUCKET}/{prefix}/{n}" for n in names]))

        client = s3_client(s3_endpoint)
        listed = client.list_objects_v2(Bucket=BUCKET, Prefix=placement.name.lower() + "/")
        keys = sorted(o["Key"] for o in listed.get("Contents", []))
        expected = with_limits(names) if placement == SEPARATE else names
        assert keys == [f"{prefix}/{n}" for n in expected]  # no temporary keys left
        for name in expected:
            client.download_file(BUCKET, f"{prefix}/{name}", str(tmp_path / name))
        options = sackli.Reader.Options(limits_placement=placement)
        assert sorted(read_files(tmp_path, names, options)) == sorted(records)
        assert sorted(read_files_with_bagz(tmp_path, names, placement == SEPARATE)) == sorted(records)

        # Read back in a pipeline: Beam's S3 file system lists the shards,
        # sackli's own S3 back-end reads them, both with the pipeline's
        # options (the environment names no endpoint).
        for pattern in (f"s3://{BUCKET}/{prefix}/out@*.bagz", f"s3://{BUCKET}/{prefix}/*.bagz"):
            with beam.Pipeline(options=pipeline_options) as p:
                read = p | ReadFromSackli(pattern, options=options, validate=False)
                assert_that(read, equal_to(records))
