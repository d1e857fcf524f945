"""How a dataset lies in its folder (local, or a `gs://` / `s3://` prefix):
shard folders named 000000, 000001, ..., each holding its bags and a
spec.json. spec.json is written last when a shard closes (uploaded last;
renamed into place locally), so a shard whose spec.json exists is complete.
The folders themselves are the storage layer's (`sackli._storage`).
"""

from __future__ import annotations

from .._storage import folder_bytes, list_folders, remove_folder

__all__ = ["SPEC_FILE", "remove_shard_folder", "shard_folder_names", "shard_name",
           "shard_sizes"]

SPEC_FILE = "spec.json"


def shard_name(number: int) -> str:
    """The name of shard folder `number` of a sharded dataset: 000000, ..."""
    return f"{number:06}"


def remove_shard_folder(folder: str) -> None:
    """Deletes a shard folder; a remote one loses spec.json first, so that
    readers stop taking it for a shard at once."""
    remove_folder(folder, first=SPEC_FILE)


def shard_folder_names(directory: str) -> list[str]:
    """The names of the folders in `directory` that can be shards: local
    ones not hidden (unfinished writes are), remote ones holding spec.json
    (unfinished writes do not yet).

    Raises FileNotFoundError when a local `directory` is missing, or when a
    remote one holds no shard at all.
    """
    return list_folders(directory, SPEC_FILE)


def shard_sizes(directory: str) -> dict[str, int]:
    """The total size of the files of each folder `shard_folder_names`
    names, by name, in order: from one listing of the whole prefix when
    remote. Raises as `shard_folder_names`."""
    return folder_bytes(directory, SPEC_FILE)
