"""Beam pipelines whose workers have only the wheel.

The workers live in a virtualenv of their own, made once for the session
from the wheel $SACKLI_WHEEL names (tests/beam/beam_workers.py), and run as Beam's
worker pool (`python -m apache_beam.runners.worker.worker_pool_main`) from
that virtualenv, in a folder outside the source tree and with no PYTHONPATH.
The pipelines are built here and submitted with the portable runner to
Beam's local job server (what `--job_endpoint=embed` runs, in a process of
its own), which hands every stage to that pool (an EXTERNAL environment):
the shape of a Flink or Spark cluster whose workers installed the wheel
(docs/beam_workers.md).

Every test checks what the workers wrote, here, record by record; every
pipeline also records which interpreter and which sackli its workers ran
(they must be the virtualenv's, installed from the wheel). S3 is moto's
server on 127.0.0.1, which the pool reaches through the AWS_* variables it
was started with and the pipelines' --s3_* options (both Beam's S3 file
system and sackli's own S3 back-end take the options first); a second pool,
started without any AWS_* setting, shows that the options alone suffice.
Without $SACKLI_WHEEL the tests skip (fail on CI).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pathlib
import re
import shutil

import apache_beam as beam
import boto3
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import sackli
from sackli import datasets
from sackli.beam import ReadFromSackli, ReadFromSackliDataset, WriteToSackli, WriteToSackliDataset
import beam_workers
from beam_helpers import _quiet_beam, make_records, shard_names, write_bag  # noqa: F401



# A stuck pool or worker fails its test instead of hanging the suite (the
# fixtures then stop the pool and the job server); the first test also waits
# for the virtualenv (10-40 s).
pytestmark = pytest.mark.timeout(240)

BUCKET = "sackli-beam-workers"
S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1"}
SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}


# --- The workers ---------------------------------------------------------------


@pytest.fixture(scope="session")
def worker_venv(tmp_path_factory):
    """A virtualenv with sackli from the wheel and what the workers need,
    deleted after the session: at 450 MB in 11,000 files, left-over copies
    would slow down every later pytest session of the machine, which
    deletes old temporary folders when it ends (its install log stays)."""
    wheel = beam_workers.worker_wheel()
    venv = beam_workers.make_worker_venv(wheel, tmp_path_factory.mktemp("beam-workers") / "venv")
    print(f"\nthe workers' virtualenv took {venv.seconds:.1f} s to make")
    try:
        yield venv
    finally:
        shutil.rmtree(venv.prefix, ignore_errors=True)


@pytest.fixture(scope="module")
def moto():
    """moto's S3 server on 127.0.0.1 with the bucket BUCKET."""
    server = beam_workers.remote_servers.MotoServer()
    try:
        server.start()
        s3_client(server.url).create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def workers(worker_venv, moto, tmp_path_factory):
    """The worker pool, run from the workers' virtualenv, and the job server
    that hands it the jobs; both stopped (with the workers the pool started)
    after the module's tests, whatever their outcome."""
    cwd = tmp_path_factory.mktemp("beam-workers-cwd")
    assert not beam_workers.inside(cwd, beam_workers.REPO)
    env = {**S3_KEYS, "AWS_ENDPOINT_URL": moto.url,
           "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
    with _running_workers(worker_venv, cwd, env) as workers:
        yield workers


@contextlib.contextmanager
def _running_workers(venv, cwd: pathlib.Path, env: dict[str, str]):
    """A worker pool started from `venv` with `env` and a job server, both
    stopped afterwards, whatever happened."""
    pool = beam_workers.WorkerPool(venv, cwd, env)
    job_server = beam_workers.JobServer(cwd)
    try:
        pool.start()
        job_server.start()
        yield beam_workers.Workers(pool, job_server)
    finally:
        job_server.stop()
        pool.stop()


def s3_client(url: str):
    return boto3.session.Session().client(
        "s3", endpoint_url=url, region_name="us-east-1",
        aws_access_key_id="testing", aws_secret_access_key="testing")


def run_on_workers(workers, build, args=(), facts_folder: pathlib.Path | None = None) -> None:
    """Runs the pipeline `build(p)` builds on the pool's workers. With
    `facts_folder`, the pipeline also writes what its workers ran (see
    `worker_facts`) there, and this checks it."""
    started = workers.pool.workers_started()
    try:
        with beam.Pipeline(options=PipelineOptions(workers.pipeline_args() + list(args))) as p:
            build(p)
            if facts_folder is not None:
                _ = (p | "Facts" >> beam.Create(range(3)) | beam.Map(worker_facts())
                     | "WriteFacts" >> WriteToSackli(str(facts_folder / "facts@1.bag")))
    except Exception as e:
        raise AssertionError(
            f"the pipeline failed on the workers: {type(e).__name__}: {str(e)[-6000:]}\n"
            f"{workers.logs()}") from e
    assert workers.pool.workers_started() > started, (
        f"no worker of the pool ran:\n{workers.logs()}")
    if facts_folder is not None:
        check_facts(workers.venv, read_records(facts_folder / "facts-00000-of-00001.bag"))


def worker_facts():
    """A function (pickled by value: it is local) that tells, as JSON, which
    interpreter and which sackli the worker running it has."""

    def facts(_) -> bytes:
        import importlib.metadata
        import json
        import os
        import sys

        import apache_beam
        import sackli
        from sackli import _engine

        installed = importlib.metadata.distribution("sackli-bagz")
        return json.dumps({
            "executable": sys.executable, "prefix": sys.prefix, "pid": os.getpid(),
            "cwd": os.getcwd(), "path": sys.path, "pythonpath": os.environ.get("PYTHONPATH"),
            "sackli": sackli.__file__, "engine": _engine.__file__, "beam": apache_beam.__file__,
            "version": sackli.__version__, "direct_url": installed.read_text("direct_url.json"),
        }).encode()

    return facts


def check_facts(venv, records: list[bytes]) -> None:
    assert len(records) == 3
    repo = beam_workers.REPO
    for fact in map(json.loads, records):
        assert pathlib.Path(fact["executable"]).parent == venv.bin, fact
        assert pathlib.Path(fact["prefix"]) == venv.prefix, fact
        assert fact["pid"] != os.getpid()
        for name in ("sackli", "engine", "beam"):  # all from the virtualenv's site-packages
            assert pathlib.Path(fact[name]).is_relative_to(venv.site_packages), (name, fact)
        assert pathlib.Path(fact["sackli"]) == venv.site_packages / "sackli" / "__init__.py"
        # ... installed from the wheel, which is this very build of sackli
        assert json.loads(fact["direct_url"])["url"] == venv.wheel.as_uri()
        assert fact["version"] == sackli.__version__
        # ... and the source tree is nowhere on the workers' path.
        assert fact["pythonpath"] is None
        assert not beam_workers.inside(fact["cwd"], repo), fact["cwd"]
        entries = [os.path.join(fact["cwd"], entry) for entry in fact["path"]]  # "" is the cwd
        assert not [e for e in entries if beam_workers.inside(e, repo)], fact["path"]


def read_records(path: pathlib.Path) -> list[bytes]:
    with sackli.Reader(str(path)) as reader:
        return list(reader.read())


# --- Where the data is: a local folder or a prefix on the S3 server -------------


_prefixes = itertools.count()


class Place:
    """A folder the test's inputs go to and its outputs are read from."""

    def __init__(self, where: str, tmp_path: pathlib.Path, moto, name: str) -> None:
        self.where = where
        self.local = tmp_path / "data"
        self.local.mkdir()
        self.s3 = s3_client(moto.url) if where == "s3" else None
        self.prefix = f"{next(_prefixes):03d}-{name}/"
        self.endpoint = moto.url

    def url(self, name: str) -> str:
        if self.s3 is None:
            return str(self.local / name)
        return f"s3://{BUCKET}/{self.prefix}{name}"

    def pipeline_args(self) -> list[str]:
        """Beam's S3 file system takes its settings from the options."""
        if self.s3 is None:
            return []
        return [f"--s3_endpoint_url={self.endpoint}", "--s3_access_key_id=testing",
                "--s3_secret_access_key=testing", "--s3_region_name=us-east-1"]

    def upload(self, folder: pathlib.Path, under: str) -> None:
        """Copies the files of local `folder` (and its subfolders) to
        `under/` (already there when the place is local)."""
        if self.s3 is None:
            assert folder == self.local / under
            return
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = f"{self.prefix}{under}/{path.relative_to(folder).as_posix()}"
                self.s3.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())

    def files(self, under: str) -> dict[str, bytes]:
        """{relative name: contents} of every file under `under/`."""
        if self.s3 is None:
            folder = self.local / under
            return {p.relative_to(folder).as_posix(): p.read_bytes()
                    for p in sorted(folder.rglob("*")) if p.is_file()}
        start = f"{self.prefix}{under}/"
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=start)
        keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
        return {key[len(start):]: self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
                for key in keys}

    def fetch(self, under: str, into: pathlib.Path) -> pathlib.Path:
        """The files under `under/` in a local folder (`into` for S3)."""
        for name, data in self.files(under).items():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            (into / name).write_bytes(data)
        return into


WHERE = pytest.mark.parametrize("where", ["local", "s3"])


@pytest.fixture
def place(request, tmp_path, moto) -> Place:
    # No glob characters ("[s3]") in the prefix: Beam's file systems, and
    # so the sinks' finalisation, take written paths as patterns.
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60]
    return Place(request.node.callspec.params["where"], tmp_path, moto, name)


# --- The tests ------------------------------------------------------------------


def test_the_workers_run_sackli_from_the_wheel(workers, tmp_path):
    # The facts pipeline alone: the other tests add it to theirs as well.
    run_on_workers(workers, lambda p: None, facts_folder=tmp_path)
    assert not beam_workers.inside(workers.venv.prefix, beam_workers.REPO)


@WHERE
def test_read_map_write(workers, place, tmp_path, where):
    shards = [make_records(n, seed=i) for i, n in enumerate([120, 0, 75])]
    source = place.local / "in"
    source.mkdir()
    for name, records in zip(shard_names("in", 3, ".bagz"), shards):
        write_bag(source / name, records)
    place.upload(source, "in")
    outputs = shard_names("out", 2, ".bagz")

    def build(p):
        written = (p
                   | ReadFromSackli(place.url("in/in@*.bagz"), validate=False)
                   | beam.Map(lambda record: b"w:" + record[::-1])
                   | WriteToSackli(place.url("out/out@2.bagz")))
        assert_that(written, equal_to([place.url(f"out/{name}") for name in outputs]))

    run_on_workers(workers, build, place.pipeline_args(), facts_folder=tmp_path)

    # The shards and nothing else (no temporary files); every record once.
    assert sorted(place.files("out")) == outputs
    if where == "local":  # no temporary folder either
        assert sorted(os.listdir(place.local / "out")) == outputs
    folder = place.fetch("out", tmp_path / "fetched")
    got = [record for name in outputs for record in read_records(folder / name)]
    expected = [b"w:" + record[::-1] for records in shards for record in records]
    assert len(got) == len(expected) == 195
    assert sorted(got) == sorted(expected)


def point(i: int) -> dict:
    return {"image": bytes([i % 256]) * (i % 50), "label": i,
            "words": [f"w{i}.{j}" for j in range(i % 5)]}


@WHERE
def test_read_and_write_a_dataset(workers, place, tmp_path, where):
    points = [point(i) for i in range(40)]
    with datasets.ShardedDatasetWriter(place.local / "ds", SPEC, shard_length=12) as writer:
        for datapoint in points:
            writer.append(datapoint)
    place.upload(place.local / "ds", "ds")

    def build(p):
        read = p | ReadFromSackliDataset(place.url("ds"))
        assert_that(read, equal_to(points), label="CheckRead")
        _ = (read
             | beam.Map(lambda d: {**d, "label": d["label"] + 1000, "words": d["words"] + ["!"]})
             | WriteToSackliDataset(place.url("out"), SPEC, shard_length=15))

    run_on_workers(workers, build, place.pipeline_args(), facts_folder=tmp_path)

    # Complete, numbered shards and nothing else (no temporary folder).
    names = sorted(place.files("out"))
    shards = sorted({name.split("/")[0] for name in names})
    assert shards == [f"{k:06}" for k in range(len(shards))] and len(shards) >= 3
    files = ("image.bag", "label.bag", "refs.bag", "spec.json", "words.bag")
    assert names == sorted(f"{shard}/{file}" for shard in shards for file in files)
    if where == "local":  # the temporary folder beside the dataset is gone too
        assert sorted(os.listdir(place.local)) == ["ds", "out"]
    folder = place.fetch("out", tmp_path / "fetched") if where == "s3" else place.local / "out"
    with datasets.ShardedDatasetReader(str(folder)) as reader:
        assert all(len(shard) <= 15 for shard in reader.shard_readers)
        got = sorted(reader, key=lambda d: d["label"])
    assert got == [{**d, "label": d["label"] + 1000, "words": d["words"] + ["!"]} for d in points]


# --- Settings that reach the workers only as pipeline options ---------------------


@pytest.fixture(scope="module")
def workers_without_aws(worker_venv, moto, tmp_path_factory):
    """A second worker pool (and job server) whose environment has no AWS
    setting at all: no keys, no endpoint, no configuration file, no instance
    metadata. Its workers can reach S3 only through the pipeline's options."""
    cwd = tmp_path_factory.mktemp("beam-workers-no-aws-cwd")
    missing = str(cwd / "no-such-aws-file")
    env = {"AWS_CONFIG_FILE": missing, "AWS_SHARED_CREDENTIALS_FILE": missing,
           "AWS_EC2_METADATA_DISABLED": "true"}
    with _running_workers(worker_venv, cwd, env) as workers:
        assert not [name for name in workers.pool.env
                    if name.startswith("AWS_") and name not in env]
        yield workers


def test_storage_settings_reach_the_workers_as_options(workers_without_aws, moto, tmp_path):
    workers = workers_without_aws
    place = Place("s3", tmp_path, moto, "options-only")
    records = make_records(150, seed=21)
    points = [point(i) for i in range(30)]
    with datasets.ShardedDatasetWriter(place.local / "ds", SPEC, shard_length=12) as writer:
        for datapoint in points:
            writer.append(datapoint)
    place.upload(place.local / "ds", "ds")
    outputs = shard_names("out", 2, ".bag")

    def plain_reader_error():
        """What a sackli.Reader that user code opens on a worker raises:
        the options reach sackli's transforms, not the workers' environment."""

        def attempt(url: str) -> str:
            import sackli

            try:
                sackli.Reader(url)
            except PermissionError as error:
                return "no AWS credentials" if "no AWS credentials" in str(error) else str(error)
            return "read"

        return attempt

    def write(p):
        written = (p | beam.Create(records)
                   | WriteToSackli(place.url("out/out@2.bag"),
                                   options=sackli.Writer.Options(
                                       limits_placement=sackli.LimitsPlacement.SEPARATE)))
        assert_that(written, equal_to([place.url(f"out/{name}") for name in outputs]))

    run_on_workers(workers, write, place.pipeline_args(), facts_folder=tmp_path)
    assert sorted(place.files("out")) == sorted(outputs + [f"limits.{n}" for n in outputs])

    def read(p):
        read = p | ReadFromSackli(place.url("out/out@*.bag"), validate=False,
                                  options=sackli.Reader.Options(
                                      limits_placement=sackli.LimitsPlacement.SEPARATE))
        assert_that(read, equal_to(records), label="CheckRecords")
        assert_that(p | ReadFromSackliDataset(place.url("ds")), equal_to(points),
                    label="CheckDataset")
        plain = p | "Plain" >> beam.Create([place.url("ds/000000/refs.bag")]) | beam.Map(
            plain_reader_error())
        assert_that(plain, equal_to(["no AWS credentials"]), label="CheckPlainReader")

    run_on_workers(workers, read, place.pipeline_args())
    folder = place.fetch("out", tmp_path / "fetched")
    got = []
    for name in outputs:
        with sackli.Reader(str(folder / name),
                           limits_placement=sackli.LimitsPlacement.SEPARATE) as reader:
            got += list(reader)
    assert sorted(got) == sorted(records)
