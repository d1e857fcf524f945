"""Write destinations (sackli/_storage/_destinations.py, _staged.py): what
a writer asks of a local folder and of a bucket, on real files and on the
S3 and GCS servers of the fixtures."""

from __future__ import annotations

import os

import pytest

import remote_helpers  # loaded through conftest.py
from sackli import _storage
from sackli._storage import LocalDestination, UploadDestination, write_destination

servers, remote = remote_helpers.servers, remote_helpers.remote  # the fixtures


def test_the_destination_is_decided_by_the_path(tmp_path):
    local = write_destination(str(tmp_path / "x.bag"))
    assert isinstance(local, LocalDestination)
    assert (local.keeps_unfinished, local.grows_in_place, local.parallel_opens) == (True, True, 1)
    for url in ("gs://bucket/x.bag", "s3://bucket/x.bag", "/gs:/bucket/x.bag"):
        upload = write_destination(url)
        assert isinstance(upload, UploadDestination), url
        assert not upload.keeps_unfinished and not upload.grows_in_place
        assert upload.parallel_opens == _storage.MAX_PARALLEL_REQUESTS
    shard = local.at(str(tmp_path / "y.bag"))
    assert isinstance(shard, LocalDestination) and shard.path == str(tmp_path / "y.bag")


# --- Local ----------------------------------------------------------------------------


def test_a_local_name_is_occupied_by_anything(tmp_path):
    path = tmp_path / "d"
    destination = write_destination(str(path))
    assert not destination.occupied("spec.json")
    os.symlink(tmp_path / "nowhere", path)  # even a dangling link takes the name
    assert destination.occupied() and destination.occupied("spec.json")


def test_a_local_folder_must_exist(tmp_path):
    write_destination(str(tmp_path / "x.bag")).check_folder("given")
    write_destination("x.bag").check_folder("given")  # the current folder
    with pytest.raises(FileNotFoundError, match="given: the folder does not exist") as error:
        write_destination(str(tmp_path / "no" / "x.bag")).check_folder("given")
    assert error.value.filename == str(tmp_path / "no")


def test_a_local_folder_is_staged_hidden_and_renamed_with_its_journal_removed(tmp_path):
    target = tmp_path / "sub" / "shard"
    destination = write_destination(str(target))
    staged = destination.staging_folder(str(tmp_path / "sub" / ".shard.partial-"))
    assert os.path.isdir(staged) and os.path.basename(staged).startswith(".shard.partial-")
    (tmp_path / "sub" / os.path.basename(staged) / "data").write_bytes(b"x")
    (tmp_path / "sub" / os.path.basename(staged) / "journal").write_bytes(b"{}")
    destination.publish_folder(staged, durable=True, journal="journal")
    assert sorted(os.listdir(target)) == ["data"]
    assert not os.path.exists(staged)


def test_a_local_folder_created_meanwhile_is_not_replaced(tmp_path):
    target = tmp_path / "shard"
    destination = write_destination(str(target))
    staged = destination.staging_folder(str(tmp_path / ".shard.partial-"))
    target.mkdir()  # someone else's, empty: a rename would replace it
    with pytest.raises(FileExistsError, match="created by someone else meanwhile"):
        destination.publish_folder(staged, durable=False)
    assert os.path.isdir(staged)
    destination.discard_folder(staged)
    assert not os.path.exists(staged) and os.listdir(target) == []


@pytest.mark.parametrize("staged_in", [None, "folder"])
def test_a_local_output_appears_whole_on_success_only(tmp_path, staged_in):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    staged = None
    if staged_in:
        (tmp_path / ".work").mkdir()
        staged = str(tmp_path / ".work" / "out.layout")
    destination = write_destination(str(target))
    with pytest.raises(RuntimeError):
        with destination.output(staged) as file:
            file.write(b"half")
            raise RuntimeError("cut short")
    assert target.read_bytes() == b"old"
    with destination.output(staged, durable=True) as file:
        file.write(b"new")
        assert target.read_bytes() == b"old"
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ([".work", "out.bin"] if staged_in else ["out.bin"])
    assert not staged_in or os.listdir(tmp_path / ".work") == []


def test_a_local_output_writes_through_a_link(tmp_path):
    (tmp_path / "real.bin").write_bytes(b"old")
    os.symlink("real.bin", tmp_path / "link.bin")
    with write_destination(str(tmp_path / "link.bin")).output() as file:
        file.write(b"new")
    assert os.path.islink(tmp_path / "link.bin") and (tmp_path / "real.bin").read_bytes() == b"new"


def test_a_local_file_is_staged_by_its_writer(tmp_path):
    path = str(tmp_path / "x.bag")
    staged = write_destination(path).stage_file()
    assert (staged.local_path, staged.stream, staged.keeps_unfinished) == (path, None, True)
    staged.publish([(path + ".side", path + ".side")])  # the writer's renames did it
    staged.discard()
    assert os.listdir(tmp_path) == []

    class Writer:
        kept = False

        def abandon(self):
            self.kept = True

    writer = Writer()
    staged.abandon(writer, discard=lambda: pytest.fail("a local write is kept"))
    assert writer.kept


def test_local_scratch_goes_beside_and_an_upload_s_into_the_temporary_folder(tmp_path):
    beside = str(tmp_path / "x.sackli-spool.bag")
    assert write_destination(str(tmp_path / "x@2.bag")).scratch_path(beside) == beside
    scratch = write_destination("s3://bucket/x@2.bag").scratch_path(beside)
    assert os.path.dirname(scratch) == os.path.realpath(os.path.dirname(scratch))
    assert os.path.basename(scratch).startswith(".sackli-spool-") and scratch.endswith(".bag")
    assert not os.path.exists(scratch)


def test_local_entries_and_open_local(tmp_path):
    (tmp_path / "a").write_bytes(b"abc")
    assert _storage.local_entries(str(tmp_path)) == ["a"]
    assert _storage.local_entries("gs://bucket/folder") == []
    with _storage.open_local(str(tmp_path / "a")) as file:
        assert file.read() == b"abc"
    assert _storage.open_local("s3://bucket/a") is None
    with pytest.raises(IsADirectoryError):
        _storage.open_local(str(tmp_path))


# --- Buckets ----------------------------------------------------------------------------


def test_an_object_name_is_occupied_only_by_its_marker(remote):
    destination = write_destination(remote.url("shard"))
    remote.put("shard/refs.bag", b"x")
    assert not destination.occupied() and not destination.occupied("spec.json")
    remote.put("shard/spec.json", b"{}")
    assert destination.occupied("spec.json") and not destination.occupied()
    destination.check_folder("anything")  # a bucket has no folders to miss


def test_an_object_folder_is_its_own_staging_and_stays_when_discarded(remote):
    destination = write_destination(remote.url("shard"))
    staged = destination.staging_folder("/ignored/.shard.partial-")
    assert staged == remote.url("shard") and remote.objects() == {}
    _storage.write_object(remote.url("shard/refs.bag"), b"refs")
    destination.publish_folder(staged, durable=True, journal="sackli-write.json")
    destination.discard_folder(staged)
    assert remote.objects() == {"shard/refs.bag": 4}


def test_an_object_output_appears_on_success_only(remote):
    destination = write_destination(remote.url("out.bin"))
    with pytest.raises(RuntimeError):
        with destination.output() as file:
            file.write(b"half")
            raise RuntimeError("cut short")
    assert remote.objects() == {}
    with destination.output("/ignored/staged", durable=True) as file:
        file.write(b"whole")
        assert remote.objects() == {}
    assert remote.get("out.bin") == b"whole"


def test_a_staged_object_streams_and_its_side_file_follows_tagged(remote, tmp_path):
    url = remote.url("x.bag")
    staged = write_destination(url).stage_file()
    assert staged.url == url and not staged.keeps_unfinished
    assert os.path.basename(staged.local_path) == "x.bag"
    spool = os.path.dirname(staged.local_path)
    staged.stream.write(b"records")
    with open(staged.local_path + ".side", "wb") as side:
        side.write(b"limits")
    seen = []

    def tag(version: str) -> dict[str, str]:
        seen.append(version)
        return {"about": "x.bag"}

    staged.publish([(staged.local_path + ".side", url + ".side")], tag)
    assert remote.get("x.bag") == b"records" and remote.get("x.bag.side") == b"limits"
    assert seen == [_storage.stat_object(url).identity]
    assert _storage.stat_object(url + ".side").metadata == {"about": "x.bag"}
    assert not os.path.exists(spool)


def test_a_discarded_or_abandoned_object_leaves_nothing(remote):
    staged = write_destination(remote.url("x.bag")).stage_file()
    staged.stream.write(b"records")
    spool = os.path.dirname(staged.local_path)
    discarded = []

    class Writer:
        def abandon(self):
            pytest.fail("an upload keeps nothing")

    staged.abandon(Writer(), discard=lambda: discarded.append(staged.discard()))
    assert discarded and remote.objects() == {} and not os.path.exists(spool)
    with pytest.raises(IsADirectoryError, match="needs an object name"):
        write_destination(remote.url("")).stage_file()

