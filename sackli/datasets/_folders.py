"""Dataset folders on local disk or in a bucket (`gs://` / `s3://` prefixes,
through sackli's storage layer): joining names, reading and writing small
files, and listing shard folders (with their sizes).

A remote "folder" is a key prefix. Bags in it are read and written by the
engine like any remote bag; spec.json is uploaded last when a shard closes,
so a shard whose spec.json exists is complete (local shards get the same
guarantee from a rename).
"""

from __future__ import annotations

import collections
import os
import secrets
import shutil
from typing import Any

from .._sets import path_argument
from .._storage import REMOTE_OPENER, delete_object, is_remote, list_objects, normalize
from .._whole_files import read_bytes, write_bytes  # spec.json, as schema sidecars

__all__ = ["exists", "folder_bytes", "folder_path", "join", "list_folders", "make_unique_folder",
           "read_bytes", "remove_shard_folder", "shard_name", "write_bytes"]

SPEC_FILE = "spec.json"
# Attempts at a free folder name: with 64 random bits, a second is already unlikely.
_ATTEMPTS = 100


def folder_path(directory: Any) -> str:
    """A dataset folder given as str or os.PathLike, as a str: remote paths
    spelled `gs://bucket/key` (pathlib's `gs:/bucket/key` too), without a
    trailing slash."""
    path = normalize(path_argument(directory, "directory"))
    return path.rstrip("/") if is_remote(path) else path


def shard_name(number: int) -> str:
    """The name of shard folder `number` of a sharded dataset: 000000, ..."""
    return f"{number:06}"


def make_unique_folder(prefix: str) -> str:
    """Creates and returns a new local folder `<prefix><random>` (its parent
    must exist), with the mode `os.makedirs` and `bags` give: 0777 less the
    umask. `tempfile.mkdtemp` would make it 0700, and the folder is renamed
    into the shard, which others must be able to read like a `bags` one."""
    for _ in range(_ATTEMPTS):
        path = f"{prefix}{secrets.token_hex(8)}"
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{prefix}*: no free folder name after {_ATTEMPTS} tries")


def remove_shard_folder(folder: str) -> None:
    """Deletes a shard folder; a remote one loses spec.json first, so that
    readers stop taking it for a shard at once."""
    if not is_remote(folder):
        shutil.rmtree(folder, ignore_errors=True)
        return
    delete_object(join(folder, SPEC_FILE))
    for url, _ in list_objects(folder + "/"):
        delete_object(url)


def join(directory: str, name: str) -> str:
    """The path of `name` inside `directory`."""
    return f"{directory}/{name}" if is_remote(directory) else os.path.join(directory, name)


def exists(path: str) -> bool:
    """Whether the file (or, locally, folder) exists."""
    if is_remote(path):
        return bool(REMOTE_OPENER.exists(path))
    return os.path.lexists(path)


def list_folders(directory: str) -> list[str]:
    """The names of the folders in `directory` that can be shards: local
    ones not hidden (unfinished writes are), remote ones holding spec.json
    (unfinished writes do not yet).

    Raises FileNotFoundError when a local `directory` is missing, or when a
    remote one holds no shard at all.
    """
    if not is_remote(directory):
        return sorted(name for name in os.listdir(directory) if not name.startswith("."))
    return list(_remote_folder_bytes(directory))


def folder_bytes(directory: str) -> dict[str, int]:
    """The total size of the files of each folder `list_folders` names, by
    name, in order: from one listing of the whole prefix when remote (not
    one per folder). Raises as `list_folders`."""
    if is_remote(directory):
        return _remote_folder_bytes(directory)
    return {name: sum(entry.stat().st_size for entry in os.scandir(join(directory, name))
                      if entry.is_file())
            for name in list_folders(directory)}


def _remote_folder_bytes(directory: str) -> dict[str, int]:
    prefix = directory + "/"
    sizes: collections.Counter[str] = collections.Counter()
    shards = set()
    for url, size in list_objects(prefix):
        name, _, rest = url[len(prefix):].partition("/")
        if rest:
            sizes[name] += size
            if rest == SPEC_FILE:
                shards.add(name)
    if not shards:
        raise FileNotFoundError(f"{directory}: no dataset shards there (no */{SPEC_FILE})")
    return {name: sizes[name] for name in sorted(shards)}
