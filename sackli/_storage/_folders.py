"""Folders on local disk and in buckets: joining names, listing the folders
and entries in one, their sizes, making and deleting them.

A remote "folder" is a key prefix: it exists while objects are under it,
needs no making, and is listed with one request per page of keys (not one
per folder).
"""

from __future__ import annotations

import collections
import errno
import os
import secrets
import shutil
from typing import Any

from ._objects import delete_object, list_objects, object_exists
from ._paths import path_argument
from ._urls import is_remote, normalize

__all__ = ["folder_bytes", "folder_entries", "folder_path", "is_file", "is_folder", "join_path",
           "list_folders", "local_entries", "make_staging_folder", "make_unique_folder", "names_starting",
           "remove_folder"]

# Attempts at a free folder name: with 64 random bits, a second is already unlikely.
_ATTEMPTS = 100


def folder_path(directory: Any) -> str:
    """A folder given as str or os.PathLike, as a str: remote paths spelled
    `gs://bucket/key` (pathlib's `gs:/bucket/key` too), without a trailing
    slash. TypeError (`path_argument`'s) for anything else."""
    path = normalize(path_argument(directory, "directory"))
    return path.rstrip("/") if is_remote(path) else path


def join_path(directory: str, name: str) -> str:
    """The path of `name` inside `directory`."""
    return f"{directory}/{name}" if is_remote(directory) else os.path.join(directory, name)


def is_file(path: str) -> bool:
    """Whether `path` is a file (an object, asked twice before it is
    believed missing)."""
    return object_exists(path) if is_remote(path) else os.path.isfile(path)


def is_folder(path: str) -> bool:
    """Whether `path` can be a folder: a local folder, or a remote prefix
    that no object has the name of."""
    return not object_exists(path) if is_remote(path) else os.path.isdir(path)


def make_unique_folder(prefix: str) -> str:
    """Creates and returns a new local folder `<prefix><random>` (its parent
    must exist), with the mode `os.makedirs` gives: 0777 less the umask.
    `tempfile.mkdtemp` would make it 0700, and such a folder is often
    renamed into a place others must be able to read."""
    for _ in range(_ATTEMPTS):
        path = f"{prefix}{secrets.token_hex(8)}"
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{prefix}*: no free folder name after {_ATTEMPTS} tries")


def make_staging_folder(directory: str, tag: str) -> str:
    """Makes and returns the hidden place where a write that will replace
    `directory` stages its files, named by `tag`: locally a folder beside it,
    `.<name>.<tag>` (on the same file system, so what is staged moves in by
    rename); on a bucket the prefix `<directory>/.<tag>` (nothing to make,
    no request; readers skip hidden names)."""
    if is_remote(directory):
        return join_path(directory, "." + tag)
    parent, name = os.path.split(os.path.abspath(directory))
    staging = os.path.join(parent, f".{name}.{tag}")
    os.makedirs(staging)
    return staging


def remove_folder(folder: str, first: str | None = None) -> None:
    """Deletes a folder and everything in it, ignoring errors locally; a
    remote one loses the object `first` (a name inside it) before the rest,
    so that readers that look for it stop taking the folder for complete."""
    if not is_remote(folder):
        shutil.rmtree(folder, ignore_errors=True)
        return
    if first is not None:
        delete_object(join_path(folder, first))
    for url, _ in list_objects(folder + "/"):
        delete_object(url)


def names_starting(folder: str, prefix: str, entry: str) -> list[str]:
    """Names in `folder` (with its trailing '/', or '' for the current
    folder) starting with `prefix`: a folder listing, or for a remote folder
    an object listing of just that prefix. A missing local folder raises
    FileNotFoundError naming `entry` (what the caller looked for)."""
    if is_remote(folder):
        return [url[len(folder):] for url, _ in list_objects(folder + prefix)]
    try:
        return [name for name in os.listdir(folder or ".") if name.startswith(prefix)]
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT, f"{entry}: the folder does not exist", folder
        ) from None


def local_entries(folder: str) -> list[str]:
    """The names in `folder` ('' for the current folder) when it is a
    folder of this machine, as `os.listdir` gives them (and raises); none
    in a remote folder: what lives only on local disks (the hidden folders
    of unfinished writes) is never kept in a bucket."""
    return [] if is_remote(folder) else os.listdir(folder or ".")


def folder_entries(directory: str) -> set[str]:
    """The names of the files and folders directly in `directory`; none
    when it is missing. NotADirectoryError when a local `directory` is
    something else (a file, a dangling link); a bucket is not asked whether
    an object has the prefix's name (a request more)."""
    if not is_remote(directory):
        if os.path.isdir(directory):
            return set(os.listdir(directory))
        if os.path.lexists(directory):
            raise NotADirectoryError(errno.ENOTDIR, f"{directory}: not a folder", directory)
        return set()
    prefix = directory + "/"
    return {url[len(prefix):].split("/", 1)[0] for url, _ in list_objects(prefix)}


def list_folders(directory: str, marker: str) -> list[str]:
    """The names of the folders in `directory` that can be complete: local
    ones not hidden (unfinished writes are), remote ones holding an object
    `marker` (written last: unfinished writes do not hold it yet).

    Raises FileNotFoundError when a local `directory` is missing, or when a
    remote one holds no such folder at all.
    """
    if not is_remote(directory):
        return sorted(name for name in os.listdir(directory) if not name.startswith("."))
    return list(_remote_folder_bytes(directory, marker))


def folder_bytes(directory: str, marker: str) -> dict[str, int]:
    """The total size of the files of each folder `list_folders` names, by
    name, in order: from one listing of the whole prefix when remote (not
    one per folder). Raises as `list_folders`."""
    if is_remote(directory):
        return _remote_folder_bytes(directory, marker)
    return {name: sum(entry.stat().st_size for entry in os.scandir(join_path(directory, name))
                      if entry.is_file())
            for name in list_folders(directory, marker)}


def _remote_folder_bytes(directory: str, marker: str) -> dict[str, int]:
    prefix = directory + "/"
    sizes: collections.Counter[str] = collections.Counter()
    complete = set()
    for url, size in list_objects(prefix):
        name, _, rest = url[len(prefix):].partition("/")
        if rest:
            sizes[name] += size
            if rest == marker:
                complete.add(name)
    if not complete:
        raise FileNotFoundError(f"{directory}: no dataset shards there (no */{marker})")
    return {name: sizes[name] for name in sorted(complete)}
