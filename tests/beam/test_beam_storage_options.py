"""Storage settings given as pipeline options reach every read, write,
listing and publication of the sackli transforms, with nothing in the
environment (as on workers, where the settings arrive as options).

S3: moto's server on 127.0.0.1, every AWS_* variable removed and no
configuration file: only the `--s3_*` options say where the server is and
which keys to use. GCS: gcp-storage-emulator, the environment reduced to
STORAGE_EMULATOR_HOST (Beam has no endpoint option for GCS), the project
given as `--project`. Each transform writes, then reads back what it wrote,
on the DirectRunner in memory and in multi_processing mode (its workers are
subprocesses with the same cleaned environment). Nothing is mocked.
"""

from __future__ import annotations

import itertools
import os
import re

import apache_beam as beam
import boto3
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import sackli
from sackli import _storage
from sackli.beam import (
    ReadAllFromSackli, ReadFromSackli, ReadFromSackliBatched, ReadFromSackliDataset,
    WriteToSackli, WriteToSackliDataset,
)
from sackli.beam._pipeline_storage import storage_settings
from beam_helpers import _quiet_beam, RUNNER_ARGS, make_records, shard_names  # noqa: F401
from remote_helpers import Remote, gcs_emulator  # noqa: F401 (fixture)
import remote_servers  # loaded through conftest.py

BUCKET = "sackli-storage-options"
KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
        "region_name": "us-east-1"}
SPEC = {"label": "int(8)", "words": "utf8[]"}
RUNNERS = pytest.mark.parametrize("runner", ["direct", "multi_processing"])
PLACEMENTS = pytest.mark.parametrize(
    "placement", [sackli.LimitsPlacement.TAIL, sackli.LimitsPlacement.SEPARATE],
    ids=["TAIL", "SEPARATE"])

_numbers = itertools.count()


def unique_folder(request) -> str:
    """A folder name of the test's own (no glob characters: Beam's file
    systems take written paths as patterns)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60]
    return f"{next(_numbers):03d}-{name}/"


def clean_environment(monkeypatch, tmp_path, **keep: str) -> None:
    """Removes every AWS_*, GOOGLE_*, CLOUDSDK_* variable and
    STORAGE_EMULATOR_HOST for the test (AWS configuration files point
    nowhere, no instance metadata is asked), then sets `keep`; sackli's
    clients are made anew."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_")) or name == "STORAGE_EMULATOR_HOST":
            monkeypatch.delenv(name)
    missing = str(tmp_path / "no-such-aws-file")
    monkeypatch.setenv("AWS_CONFIG_FILE", missing)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", missing)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name, value in keep.items():
        monkeypatch.setenv(name, value)
    _storage.reset_clients()


def pipeline(runner: str, options: list[str]) -> beam.Pipeline:
    return beam.Pipeline(options=PipelineOptions(RUNNER_ARGS[runner] + options))


def point(i: int) -> dict:
    return {"label": i, "words": [f"w{i}.{j}" for j in range(i % 4)]}


# --- Options -> settings ----------------------------------------------------------


def test_options_give_every_s3_setting():
    settings = storage_settings(PipelineOptions([
        "--s3_access_key_id=AKID", "--s3_secret_access_key=SECRET", "--s3_session_token=TOKEN",
        "--s3_endpoint_url=http://127.0.0.1:1", "--s3_region_name=eu-west-3",
        "--s3_api_version=2006-03-01", "--s3_verify=/etc/ca.pem", "--s3_disable_ssl"]))
    assert settings == _storage.StorageSettings(s3=_storage.S3Settings(
        access_key_id="AKID", secret_access_key="SECRET", session_token="TOKEN",
        endpoint_url="http://127.0.0.1:1", region_name="eu-west-3", api_version="2006-03-01",
        verify="/etc/ca.pem", use_ssl=False))
    assert settings.s3.client_arguments() == {
        "aws_access_key_id": "AKID", "aws_secret_access_key": "SECRET",
        "aws_session_token": "TOKEN", "endpoint_url": "http://127.0.0.1:1",
        "region_name": "eu-west-3", "api_version": "2006-03-01", "verify": "/etc/ca.pem",
        "use_ssl": False}
    assert "SECRET" not in repr(settings) and "TOKEN" not in repr(settings)
    # A dict of options (what RuntimeValueProvider holds on workers) too.
    assert storage_settings({"s3_region_name": "eu-west-3"}) == _storage.StorageSettings(
        s3=_storage.S3Settings(region_name="eu-west-3"))


def test_options_give_the_gcs_project_and_impersonation(monkeypatch):
    settings = storage_settings(PipelineOptions(["--project=my-project"]))
    assert settings == _storage.StorageSettings(gcs=_storage.GcsSettings(project="my-project"))
    # With an emulator no credentials are made (it takes none).
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:1")
    impersonating = PipelineOptions(["--project=p", "--impersonate_service_account=a@p.iam"])
    assert storage_settings(impersonating) == _storage.StorageSettings(
        gcs=_storage.GcsSettings(project="p"))
    # Without one, the credentials are Beam's for the account to impersonate;
    # where Beam finds none (or lacks google-auth), Beam's file systems
    # connect anonymously, and so do sackli's.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    from apache_beam.internal.gcp import auth

    found = auth.get_service_credentials(impersonating)
    gcs = storage_settings(PipelineOptions(["--project=p", "--impersonate_service_account=a@p.iam"])).gcs
    assert gcs.project == "p"
    if found is None:
        assert gcs.anonymous and gcs.credentials is None
    else:
        assert not gcs.anonymous and gcs.credentials is found.get_google_auth_credentials()


def test_options_without_storage_settings_give_none():
    assert storage_settings(None) is None
    assert storage_settings(PipelineOptions(["--direct_num_workers=2"])) is None
    assert storage_settings({}) is None


# --- S3: moto, and an environment without any AWS setting ------------------------


@pytest.fixture(scope="module")
def moto():
    """moto's S3 server on 127.0.0.1 with the bucket BUCKET."""
    server = remote_servers.MotoServer()
    try:
        server.start()
        raw_s3(server.url).create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.close()


def raw_s3(url: str):
    """A client of the server for the test's own checks (explicit settings)."""
    return boto3.session.Session().client("s3", endpoint_url=url, **KEYS)


class S3Place:
    """A fresh prefix of the bucket, and the pipeline options that reach it."""

    def __init__(self, moto, folder: str) -> None:
        self.endpoint = moto.url
        self.folder = folder
        self.raw = raw_s3(moto.url)

    def url(self, name: str) -> str:
        return f"s3://{BUCKET}/{self.folder}{name}"

    def options(self) -> list[str]:
        return [f"--s3_endpoint_url={self.endpoint}", "--s3_access_key_id=testing",
                "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"]

    def objects(self) -> list[str]:
        pages = self.raw.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=self.folder)
        return sorted(item["Key"][len(self.folder):]
                      for page in pages for item in page.get("Contents", []))


@pytest.fixture
def s3(moto, request, monkeypatch, tmp_path):
    """An S3Place, with every AWS setting removed from the environment."""
    clean_environment(monkeypatch, tmp_path)
    yield S3Place(moto, unique_folder(request))
    _storage.reset_clients()


def test_what_opens_under_settings_keeps_them(s3):
    """sackli._storage alone: an upload and a Reader opened inside
    `using(settings)` keep working outside it (the engine's own threads
    read later), while a new request outside the block has no settings."""
    import concurrent.futures

    settings = _storage.StorageSettings(s3=_storage.S3Settings(
        endpoint_url=s3.endpoint, access_key_id="testing", secret_access_key="testing",
        region_name="us-east-1"))
    records = make_records(400, seed=8)
    with _storage.using(settings):
        writer = sackli.Writer(s3.url("kept.bag"), limits_placement=sackli.LimitsPlacement.SEPARATE)
    writer.write_many(records)
    writer.close()  # the upload and the limits' PUT, outside the block
    assert s3.objects() == ["kept.bag", "limits.kept.bag"]
    with _storage.using(settings):
        reader = sackli.Reader(s3.url("kept.bag"), limits_placement=sackli.LimitsPlacement.SEPARATE)
        assert _storage.list_objects(s3.url("")) == [
            (s3.url("kept.bag"), s3.raw.head_object(Bucket=BUCKET, Key=s3.folder + "kept.bag")[
                "ContentLength"]),
            (s3.url("limits.kept.bag"), 8 * len(records))]
    with reader, concurrent.futures.ThreadPoolExecutor(2) as pool:
        assert list(pool.map(reader.__getitem__, range(len(records)))) == records
        assert list(reader) == records
    assert _storage.current_settings() is None
    with pytest.raises(PermissionError, match="no AWS credentials"):
        _storage.list_objects(s3.url(""))


def test_without_the_options_nothing_is_reached(s3, monkeypatch, tmp_path):
    """The environment has no credentials: sackli's own client fails, and so
    does the transforms' way of opening a bag while the running pipeline's
    options lack the S3 settings; with them it reads. (A whole pipeline
    without the options would fail in Beam's own listing first, after its
    S3 client's minutes of retries.)"""
    from apache_beam.io.filesystems import FileSystems

    from sackli.beam._pipeline_storage import open_reader

    with sackli.Writer(str(tmp_path / "x.bag")) as writer:
        writer.write_many([b"one", b"", b"three"])
    s3.raw.put_object(Bucket=BUCKET, Key=s3.folder + "x.bag", Body=(tmp_path / "x.bag").read_bytes())
    with pytest.raises(PermissionError, match="no AWS credentials"):
        sackli.Reader(s3.url("x.bag"))
    monkeypatch.setattr(FileSystems, "_pipeline_options", PipelineOptions([]))
    with pytest.raises(PermissionError, match="no AWS credentials"):
        open_reader(s3.url("x.bag"), sackli.Reader.Options())
    monkeypatch.setattr(FileSystems, "_pipeline_options", PipelineOptions(s3.options()))
    with open_reader(s3.url("x.bag"), sackli.Reader.Options()) as reader:
        assert list(reader) == [b"one", b"", b"three"]


def test_user_code_in_the_pipeline_does_not_get_the_options(s3):
    """The options reach sackli's transforms; a sackli.Reader that user code
    opens in a pipeline still reads the environment (here: nothing), so the
    transforms' reads that succeed below did take the options."""
    with pipeline("direct", s3.options()) as p:
        _ = p | beam.Create([b"a", b"b"]) | WriteToSackli(s3.url("own@1.bag"))
    shard = s3.url(shard_names("own", 1, ".bag")[0])
    with pytest.raises(Exception, match="no AWS credentials") as failed:
        with pipeline("direct", s3.options()) as p:
            _ = p | beam.Create([shard]) | beam.Map(lambda url: len(sackli.Reader(url)))
    assert shard in str(failed.value)


@RUNNERS
@PLACEMENTS
def test_write_then_read_records(s3, runner, placement):
    records = make_records(300, seed=5)
    write_options = sackli.Writer.Options(limits_placement=placement)
    read_options = sackli.Reader.Options(limits_placement=placement)
    names = shard_names("out", 3, ".bagz")
    with pipeline(runner, s3.options()) as p:
        written = p | beam.Create(records) | WriteToSackli(s3.url("out@3.bagz"),
                                                           options=write_options)
        assert_that(written, equal_to([s3.url(name) for name in names]))
    limits = ["limits." + name for name in names] if placement != sackli.LimitsPlacement.TAIL else []
    assert s3.objects() == sorted(names + limits)  # and nothing temporary

    with pipeline(runner, s3.options()) as p:
        read = p | "Read" >> ReadFromSackli(s3.url("out@*.bagz"), options=read_options)
        assert_that(read, equal_to(records), label="CheckRead")
        batches = p | "Batched" >> ReadFromSackliBatched(
            s3.url("out@3.bagz"), decode="raw", options=read_options, batch_size=7)
        assert_that(batches | beam.FlatMap(lambda batch: batch), equal_to(records),
                    label="CheckBatched")
        every = (p | beam.Create([s3.url("out@*.bagz")])
                 | ReadAllFromSackli(options=read_options, with_metadata=True))
        assert_that(every | beam.Map(lambda item: item[2]), equal_to(records),
                    label="CheckReadAll")


@RUNNERS
def test_write_then_read_rows(s3, runner):
    rows = [beam.Row(id=i, name=f"n{i}", score=i / 4) for i in range(150)]
    with pipeline(runner, s3.options()) as p:
        _ = p | beam.Create(rows) | WriteToSackli(s3.url("rows@2.bagz"))
    # The shards and their schema file (written by Beam's S3 file system).
    assert s3.objects() == sorted(shard_names("rows", 2, ".bagz")
                                  + ["rows-of-00002.bagz.arrow_schema"])
    with pipeline(runner, s3.options()) as p:
        back = p | ReadFromSackli(s3.url("rows@2.bagz"), as_rows=True)
        assert_that(back | beam.Map(tuple), equal_to([tuple(row) for row in rows]))


@RUNNERS
def test_write_then_read_a_dataset(s3, runner):
    points = [point(i) for i in range(45)]
    with pipeline(runner, s3.options()) as p:
        _ = p | beam.Create(points) | WriteToSackliDataset(s3.url("ds"), SPEC, shard_length=20)
    # Published (the runner decides how many shards, at least three), nothing
    # temporary left.
    shards = sorted({name.split("/")[1] for name in s3.objects()})
    assert len(shards) >= 3 and shards == [f"{k:06}" for k in range(len(shards))]
    with pipeline(runner, s3.options()) as p:
        assert_that(p | ReadFromSackliDataset(s3.url("ds")), equal_to(points))
    # A second write replaces the dataset (listing, copies and deletions of
    # the publication through the options).
    with pipeline("direct", s3.options()) as p:
        _ = p | beam.Create(points[:5]) | WriteToSackliDataset(s3.url("ds"), SPEC)
    assert sorted({name.split("/")[1] for name in s3.objects()}) == ["000000"]
    with pipeline("direct", s3.options()) as p:
        assert_that(p | ReadFromSackliDataset(s3.url("ds")), equal_to(points[:5]))


# --- GCS: the emulator, the environment reduced to STORAGE_EMULATOR_HOST ----------


@pytest.fixture
def gcs(gcs_emulator, request, monkeypatch, tmp_path):
    """A gs `Remote` on gcp-storage-emulator; the environment holds only
    STORAGE_EMULATOR_HOST of all storage settings."""
    clean_environment(monkeypatch, tmp_path,
                      STORAGE_EMULATOR_HOST=gcs_emulator.proxies["gs"].url)
    remote = Remote("gs", gcs_emulator, unique_folder(request))
    remote.proxy.reset_faults()
    yield remote
    _storage.reset_clients()


@RUNNERS
def test_gcs_write_then_read_with_the_project_as_an_option(gcs, runner):
    options = ["--project=options-project"]
    records = make_records(120, seed=9)
    rows = [beam.Row(id=i, name=f"n{i}") for i in range(40)]
    points = [point(i) for i in range(25)]
    with pipeline(runner, options) as p:
        _ = p | "Records" >> beam.Create(records) | "Write" >> WriteToSackli(gcs.url("out@2.bag"))
        _ = p | "Rows" >> beam.Create(rows) | "WriteRows" >> WriteToSackli(gcs.url("rows@1.bag"))
        _ = (p | "Points" >> beam.Create(points)
             | "WriteDataset" >> WriteToSackliDataset(gcs.url("ds"), SPEC, shard_length=10))
    with pipeline(runner, options) as p:
        assert_that(p | "Read" >> ReadFromSackli(gcs.url("out@*.bag")), equal_to(records),
                    label="CheckRead")
        every = p | beam.Create([gcs.url("out@2.bag")]) | ReadAllFromSackli()
        assert_that(every, equal_to(records), label="CheckReadAll")
        back = p | "ReadRows" >> ReadFromSackli(gcs.url("rows@1.bag"), as_rows=True)
        assert_that(back | beam.Map(tuple), equal_to([tuple(row) for row in rows]),
                    label="CheckRows")
        assert_that(p | ReadFromSackliDataset(gcs.url("ds")), equal_to(points),
                    label="CheckDataset")
