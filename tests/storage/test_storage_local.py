"""The local store (sackli/_storage/_local.py) and the storage front
functions given local paths: real files in tmp_path."""

from __future__ import annotations

import errno
import os

import pytest

from sackli import _storage
from sackli._storage import LocalStore


def _listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


def test_write_object_replaces_the_file_whole_and_leaves_no_temporary(tmp_path) -> None:
    path = str(tmp_path / "spec.json")
    _storage.write_object(path, b"old")
    _storage.write_object(path, b"new", durable=True)
    assert _storage.read_object(path) == b"new"
    assert _listing(tmp_path) == ["spec.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch) -> None:
    path = str(tmp_path / "spec.json")
    _storage.write_object(path, b"old")

    def no_rename(source: str, target: str) -> None:
        raise OSError(errno.EIO, "rename failed")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="rename failed"):
        _storage.write_object(path, b"new")
    monkeypatch.undo()
    assert _storage.read_object(path) == b"old"
    assert _listing(tmp_path) == ["spec.json"]


def test_a_write_into_a_missing_folder_names_the_path(tmp_path) -> None:
    path = str(tmp_path / "missing" / "x.bin")
    with pytest.raises(FileNotFoundError, match="the folder does not exist") as caught:
        _storage.write_object(path, b"data")
    assert caught.value.filename == path


def test_a_write_through_a_symbolic_link_replaces_its_target(tmp_path) -> None:
    target = tmp_path / "real.json"
    target.write_bytes(b"old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    _storage.write_object(str(link), b"new")
    assert link.is_symlink()
    assert target.read_bytes() == b"new"


def test_read_object_of_a_missing_file_raises_file_not_found(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        _storage.read_object(str(tmp_path / "absent"))


def test_ranged_reads_return_exactly_the_range(tmp_path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(100)))
    store = LocalStore()
    assert store.read(str(path), 10, 5) == bytes(range(10, 15))
    assert store.read(str(path), 0, 0) == b""
    with pytest.raises(OSError, match="asked for 10 bytes at offset 95, got 5"):
        store.read(str(path), 95, 10)


def test_stat_gives_the_size_and_an_identity_that_changes_on_replace(tmp_path) -> None:
    path = str(tmp_path / "data.bin")
    _storage.write_object(path, b"12345")
    first = _storage.stat_object(path)
    assert first.size == 5 and first.metadata == {}
    _storage.write_object(path, b"123456")
    second = _storage.stat_object(path)
    assert second.size == 6
    assert second.identity != first.identity  # a new inode: the file was replaced
    with pytest.raises(FileNotFoundError):
        _storage.stat_object(str(tmp_path / "absent"))


def test_exists_counts_files_folders_and_dangling_links(tmp_path) -> None:
    (tmp_path / "file").write_bytes(b"")
    (tmp_path / "folder").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name in ("file", "folder", "dangling"):
        assert _storage.object_exists(str(tmp_path / name)), name
    assert not _storage.object_exists(str(tmp_path / "absent"))
    assert _storage.is_file(str(tmp_path / "file"))
    assert not _storage.is_file(str(tmp_path / "folder"))
    assert _storage.is_folder(str(tmp_path / "folder"))


def test_delete_removes_files_and_ignores_missing_ones(tmp_path) -> None:
    paths = [str(tmp_path / name) for name in ("a", "b")]
    for path in paths:
        _storage.write_object(path, b"x")
    _storage.delete_object(paths[0])
    _storage.delete_object(paths[0])  # again: not an error
    assert _listing(tmp_path) == ["b"]
    _storage.delete_objects(paths + [str(tmp_path / "never")])
    assert _listing(tmp_path) == []


def test_list_objects_lists_files_under_a_prefix_with_sizes(tmp_path) -> None:
    (tmp_path / "run-1.bag").write_bytes(b"abc")
    (tmp_path / "run-2.bag").write_bytes(b"abcdef")
    (tmp_path / "other.bag").write_bytes(b"a")
    (tmp_path / "run-dir").mkdir()
    (tmp_path / "run-dir" / "inner").write_bytes(b"ab")
    found = _storage.list_objects(str(tmp_path / "run-"))
    assert found == [(str(tmp_path / "run-1.bag"), 3), (str(tmp_path / "run-2.bag"), 6),
                     (str(tmp_path / "run-dir" / "inner"), 2)]


def test_folders_list_without_hidden_ones_and_sum_their_file_sizes(tmp_path) -> None:
    for name, size in (("000000", 3), ("000001", 5)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "refs.bag").write_bytes(bytes(size))
    (tmp_path / ".000002.partial").mkdir()  # an unfinished write
    directory = str(tmp_path)
    assert _storage.list_folders(directory, "spec.json") == ["000000", "000001"]
    assert _storage.folder_bytes(directory, "spec.json") == {"000000": 3, "000001": 5}
    assert _storage.folder_entries(directory) == {"000000", "000001", ".000002.partial"}
    assert _storage.folder_entries(str(tmp_path / "absent")) == set()
    with pytest.raises(FileNotFoundError):
        _storage.list_folders(str(tmp_path / "absent"), "spec.json")


def test_remove_folder_and_unique_folders(tmp_path) -> None:
    made = _storage.make_unique_folder(str(tmp_path / ".tmp-"))
    assert os.path.isdir(made) and os.path.basename(made).startswith(".tmp-")
    assert _storage.make_unique_folder(str(tmp_path / ".tmp-")) != made
    _storage.write_object(_storage.join_path(made, "spec.json"), b"{}")
    _storage.remove_folder(made, first="spec.json")
    assert not os.path.exists(made)


def test_names_starting_names_the_entry_when_the_folder_is_missing(tmp_path) -> None:
    (tmp_path / "x-00000-of-00002.bag").write_bytes(b"")
    (tmp_path / "y.bag").write_bytes(b"")
    folder = str(tmp_path) + "/"
    assert _storage.names_starting(folder, "x-", "x@*.bag") == ["x-00000-of-00002.bag"]
    missing = r"^\[Errno 2\] x@\*\.bag: the folder does not exist"
    with pytest.raises(FileNotFoundError, match=missing):
        _storage.names_starting(folder + "absent/", "x-", "x@*.bag")


def test_sync_folders_skips_remote_paths(tmp_path) -> None:
    _storage.sync_folders([str(tmp_path / "a"), str(tmp_path / "b"), "gs://bucket/key"])


def test_a_path_is_told_apart_once_where_it_comes_in(tmp_path) -> None:
    local = str(tmp_path / "x.bag")
    assert _storage.canonical_path(local) == local
    assert _storage.canonical_path("/gs:/bucket/x.bag") == "gs://bucket/x.bag"
    with pytest.raises(ValueError, match="'hdfs:' paths are not supported"):
        _storage.canonical_path("hdfs://cluster/x.bag")
    assert _storage.opener_for([local, local]) is None  # local bags: the engine alone
    opener = _storage.opener_for([local, "gs://bucket/x.bag"])
    assert opener is not None and opener(local) is None
    assert _storage.on_this_machine(local) and not _storage.by_upload(local)
    assert _storage.by_upload("s3://bucket/x") and _storage.parallel_requests("s3://bucket/x") > 1
    assert _storage.parallel_requests(local) == 1


def test_a_missing_bag_lists_its_folder_once(tmp_path, monkeypatch) -> None:
    import sackli

    listed = []
    real_listdir = os.listdir

    def counting_listdir(folder="."):
        listed.append(os.fspath(folder))
        return real_listdir(folder)

    monkeypatch.setattr(os, "listdir", counting_listdir)
    with pytest.raises(FileNotFoundError):
        sackli.Reader(str(tmp_path / "absent.bag"))
    assert listed == [str(tmp_path)]  # for unfinished writes that would explain it


def test_list_objects_of_a_relative_prefix_gives_relative_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkdir("run-dir")
    for path in ("run-1.bag", "run-dir/inner", "other.bag"):
        with open(path, "wb") as file:
            file.write(b"ab")
    assert _storage.list_objects("run-") == [("run-1.bag", 2), ("run-dir/inner", 2)]


def test_atomic_output_appears_whole_at_the_end_and_leaves_nothing_on_failure(tmp_path) -> None:
    path = str(tmp_path / "out.parquet")
    with _storage.atomic_output(path) as file:
        file.write(b"first ")
        assert _listing(tmp_path) != ["out.parquet"]  # under a hidden temporary name
        file.write(b"second")
    assert _storage.read_object(path) == b"first second"
    with pytest.raises(RuntimeError):
        with _storage.atomic_output(path) as file:
            file.write(b"cut short")
            raise RuntimeError("the producer failed")
    assert _storage.read_object(path) == b"first second"
    assert _listing(tmp_path) == ["out.parquet"]
    with pytest.raises(FileNotFoundError, match="the folder does not exist"):
        with _storage.atomic_output(str(tmp_path / "absent" / "out.parquet")):
            pass


def test_folder_entries_refuses_a_file_and_staging_folders_sit_beside(tmp_path) -> None:
    (tmp_path / "a.bag").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        _storage.folder_entries(str(tmp_path / "a.bag"))
    staging = _storage.make_staging_folder(str(tmp_path / "dataset"), "tag-1")
    assert staging == str(tmp_path / ".dataset.tag-1") and os.path.isdir(staging)
    remote = _storage.make_staging_folder("gs://bucket/dataset", "tag-1")
    assert remote == "gs://bucket/dataset/.tag-1"  # a prefix: nothing made, no request
