"""`sackli clean URL_PREFIX` (sackli/_bucket_clean.py): after writers killed
with SIGKILL on moto's S3, fake-gcs-server and gcp-storage-emulator,
`sackli recover` then `sackli clean` leave no hidden object and no
unfinished upload; what a live or decided write still needs, and another
program's objects and uploads, stay."""

from __future__ import annotations

import argparse
from typing import NamedTuple

import pytest

import sackli
from sackli.cli import main
from sackli.cli._clean import parse_duration
from killed_writers import killed_writer
from remote_helpers import (  # noqa: F401  (fixtures)
    BUCKET, emulated_gcs, gcs_emulator, make_records, remote, servers,
)

S3_ONLY = pytest.mark.parametrize("remote", ["s3"], indirect=True)


class _Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys):
    """The `sackli` command line (its main, in this process)."""
    def run(*args: str) -> _Ran:
        capsys.readouterr()
        status = main(list(args))
        out, err = capsys.readouterr()
        return _Ran(status, out, err)
    return run


def _hidden(remote) -> list[str]:
    return sorted(name for name in remote.objects() if name.startswith("."))


def _kill_a_write(remote, name: str, kill_point: str) -> str:
    url = remote.url(name)
    killed_writer(kill_point, f"""
        with sackli.ShardedWriter({url!r}, num_records=20) as writer:
            writer.write_many({make_records(20, seed=3)!r})
    """)
    return url


def test_staging_left_by_a_killed_write_goes_once_old_enough(remote, cli):
    _kill_a_write(remote, "mid@2.bag", "first upload")
    staged = _hidden(remote)
    assert staged
    done = cli("clean", remote.url())  # just written: a writer may still hold it
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"kept {remote.url()}.mid@2.bag.sackli-partial-")
    assert "a writer may still be using it" in done.stdout
    assert done.stdout.splitlines()[-1] == "freed 0 B in 0 leftover(s); kept 1"
    assert _hidden(remote) == staged
    done = cli("clean", remote.url(), "--older-than", "0s", "--dry-run")
    assert done.stdout.startswith("would remove ") and "would free" in done.stdout
    assert _hidden(remote) == staged
    sizes = remote.objects()
    report = sackli.clean(remote.url(), older_than=0)
    assert [entry.action for entry in report.entries] == ["removed"]
    assert report.freed_bytes == sum(sizes[name] for name in staged) > 0
    assert _hidden(remote) == []
    assert cli("clean", remote.url()).stdout == f"{remote.url()}: nothing left behind\n"


def test_a_decided_write_is_kept_for_recover_then_recover_and_clean_leave_nothing(remote, cli):
    url = _kill_a_write(remote, "fwd@2.bag", "copy 1")
    report = sackli.clean(remote.url(), older_than=0)
    assert [(entry.action, entry.detail) for entry in report.entries] == [
        ("kept", f"its publish was decided: `sackli recover {url}` finishes it")]
    assert _hidden(remote)
    assert cli("recover", remote.url()).returncode == 0
    assert sackli.Reader(url).read() == make_records(20, seed=3)
    assert cli("clean", remote.url(), "--older-than", "0").stdout == (
        f"{remote.url()}: nothing left behind\n")
    assert _hidden(remote) == []


def test_staging_of_a_write_that_ended_goes_at_once(remote):
    """Killed while it removed its staging: the set is complete, nothing
    needs the staging, whatever its age."""
    url = _kill_a_write(remote, "end@2.bag", "clean-up")
    assert sackli.Reader(url).read() == make_records(20, seed=3)
    report = sackli.clean(remote.url())  # the default hour
    assert [entry.action for entry in report.entries] == ["removed"]
    assert "its write ended" in report.entries[0].detail
    assert _hidden(remote) == []
    assert sackli.Reader(url).read() == make_records(20, seed=3)


def test_what_is_not_a_sackli_writers_is_never_touched(remote):
    remote.put(".cache/thing", b"another program's")
    remote.put("notes.txt", b"text")
    remote.put(".odd@2.bag.sackli-partial-1-0123456789ab/sackli-write.json", b"not json")
    report = sackli.clean(remote.url(), older_than=0)
    assert [(entry.action, entry.url) for entry in report.entries] == [
        ("kept", remote.url(".odd@2.bag.sackli-partial-1-0123456789ab/"))]
    assert "not a journal this version of sackli can recover from" in report.entries[0].detail
    assert sorted(remote.objects()) == [
        ".cache/thing", ".odd@2.bag.sackli-partial-1-0123456789ab/sackli-write.json", "notes.txt"]


@S3_ONLY
def test_unfinished_uploads_of_bags_are_aborted_and_others_kept(remote, cli):
    client = remote.raw.client
    started = {}
    for name in ("x.bag", ".y@2.bag.sackli-partial-1-0123456789ab/y-00000-of-00002.bag",
                 "z-of-00002.bagz.sackli_set", "video.mp4"):
        key = remote.folder + name
        upload = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        client.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"p" * 100)
        started[name] = upload

    def unfinished() -> list[str]:
        answer = client.list_multipart_uploads(Bucket=BUCKET, Prefix=remote.folder)
        return sorted(upload["Key"][len(remote.folder):] for upload in answer.get("Uploads", []))

    done = cli("clean", remote.url(), "--older-than", "0", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("would abort ") == 3 and unfinished() == sorted(started)
    report = sackli.clean(remote.url(), older_than=0)
    actions = {entry.url[len(remote.url()):]: entry.action for entry in report.entries}
    assert actions == {"x.bag": "aborted", "z-of-00002.bagz.sackli_set": "aborted",
                       ".y@2.bag.sackli-partial-1-0123456789ab/y-00000-of-00002.bag": "aborted",
                       "video.mp4": "kept"}
    assert report.freed_bytes == 300
    assert "another program's" in next(entry.detail for entry in report.entries
                                       if entry.action == "kept")
    assert unfinished() == ["video.mp4"]
    # Sent to within the limit: kept (moto dates every upload's start in
    # 2010, so its part's time is what keeps it).
    key = remote.folder + "young.bag"
    upload = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    client.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"p")
    report = sackli.clean(remote.url(), older_than=3600)
    assert {entry.url[len(remote.url()):]: entry.action for entry in report.entries} == {
        "young.bag": "kept", "video.mp4": "kept"}


def test_on_gcp_storage_emulator(emulated_gcs):
    remote = emulated_gcs
    _kill_a_write(remote, "emu@2.bag", "first upload")
    assert _hidden(remote)
    assert [entry.action for entry in sackli.clean(remote.url()).entries] == ["kept"]
    assert [entry.action for entry in sackli.clean(remote.url(), older_than=0).entries] == [
        "removed"]
    assert _hidden(remote) == []


def test_wrong_arguments(cli, tmp_path):
    with pytest.raises(ValueError, match="is for gs:// and s3:// prefixes"):
        sackli.clean(str(tmp_path))
    done = cli("clean", str(tmp_path))
    assert done.returncode == 1 and "`sackli recover" in done.stderr
    with pytest.raises(ValueError, match="older_than must be >= 0"):
        sackli.clean("s3://bucket/out/", older_than=-1)
    assert [parse_duration(text) for text in ("90", "90s", "30min", "30m", "1h", "2d", "1.5h")] == [
        90, 90, 1800, 1800, 3600, 172800, 5400]
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        parse_duration("soon")
