"""Putting a finished set of temporary shard folders in place as a dataset,
replacing an older dataset at the same folder only once the new shards are
all complete.

Locally: the shards are renamed into `<temp>/dataset/000000`, ..., then the
older dataset folder (if any) is renamed aside and `<temp>/dataset` renamed
onto the dataset folder: two renames, so a reader sees the whole old
dataset, the whole new one, or (between the two renames) no folder at all.

Remotely (`gs://`, `s3://`): there is no folder to rename, so shards are
published one by one: for shard k, the older shard k's spec.json is deleted
first (from then on no reader takes it for a shard), then its other objects,
then the new shard's objects are copied in place, spec.json last; older
shards beyond the new count are deleted spec.json first. Every shard a
reader can see is therefore complete, old or new; a reader listing the
dataset during finalisation may see a mix of old and new shards, or a gap
in the numbering (an error, not wrong data).

Both are safe to run again after an interruption (Beam retries a failed
finalisation): shards already moved are skipped. Remote listings, copies
and deletions use the pipeline's storage settings (`_pipeline_storage`).
"""

from __future__ import annotations

import os
import shutil
from typing import Iterator

from .._storage import (
    by_upload, copy_object, delete_object, folder_entries, join_path, list_objects,
)
from ..datasets._layout import SPEC_FILE, remove_shard_folder, shard_name
from ._pipeline_storage import pipeline_storage

__all__ = ["check_replaceable", "publish_dataset"]


def publish_dataset(temp: str, shards: list[str], directory: str) -> Iterator[str]:
    """Makes the complete temporary shard folders `shards` (under `temp`)
    the shards 000000, 000001, ... of `directory`, replacing what was there;
    deletes `temp`; yields the final shard folders in order.

    Raises FileNotFoundError when a shard is neither at its temporary place
    nor already published (it was lost).
    """
    finals = [join_path(directory, shard_name(k)) for k in range(len(shards))]
    if by_upload(directory):  # objects are copied into place, folders renamed
        with pipeline_storage():
            _publish_remote(temp, shards, finals, directory)
    else:
        _publish_local(temp, shards, directory)
    yield from finals


def _publish_local(temp: str, shards: list[str], directory: str) -> None:
    staging = os.path.join(temp, "dataset")
    if not os.path.isdir(temp):
        # An earlier attempt of this finalisation swapped and cleaned up.
        if os.path.isdir(directory):
            return
        raise FileNotFoundError(f"{temp}: the temporary folder of this write is gone")
    if (not os.path.isdir(staging) and os.path.isdir(directory)
            and not any(os.path.isdir(shard) for shard in shards)):
        # An earlier attempt swapped the folders but did not clean up.
        shutil.rmtree(temp, ignore_errors=True)
        return
    os.makedirs(staging, exist_ok=True)
    for number, shard in enumerate(shards):
        target = os.path.join(staging, shard_name(number))
        if os.path.isdir(shard):
            os.rename(shard, target)
        elif not os.path.isdir(target):
            raise FileNotFoundError(f"{shard}: a shard of this write is missing before finalisation")
    if os.path.lexists(directory):
        os.rename(directory, os.path.join(temp, "older"))
    os.makedirs(os.path.dirname(os.path.abspath(directory)), exist_ok=True)
    os.rename(staging, directory)
    shutil.rmtree(temp, ignore_errors=True)


def _objects(prefix: str) -> list[str]:
    """The URLs of the objects under the folder `prefix`."""
    return [url for url, _ in list_objects(prefix + "/")]


def check_replaceable(directory: str) -> None:
    """Raises unless `directory` is missing or a dataset: holds nothing but
    shard folders (digits) and hidden entries (unfinished writes), so that
    replacing it deletes no one else's files.

    Raises:
      FileExistsError: `directory` holds other files or folders (named), or
        is a file.
    """
    with pipeline_storage():
        try:
            names = folder_entries(directory)
        except NotADirectoryError:
            raise FileExistsError(f"{directory}: exists and is not a dataset folder") from None
    others = sorted(n for n in names if not (n.isdigit() or n.startswith(".")))
    if others:
        raise FileExistsError(
            f"{directory}: holds {', '.join(map(repr, others[:5]))}, which are not dataset "
            "shards; a dataset write replaces the folder, so it must be missing or a dataset")


def _publish_remote(temp: str, shards: list[str], finals: list[str], directory: str) -> None:
    # First make sure every shard is there (or published by an earlier
    # attempt), so that a lost one changes nothing. A published shard k is
    # told by the final k/spec.json, which an older dataset's shard k has
    # too: there, a lost temporary shard k goes unnoticed (the older shard
    # k stays).
    pending = []
    for shard, final in zip(shards, finals):
        names = [url[len(shard) + 1:] for url in _objects(shard)]
        if SPEC_FILE in names:
            pending.append((shard, final, names))
        elif not any(url.endswith("/" + SPEC_FILE) for url in _objects(final)):
            raise FileNotFoundError(
                f"{shard}: a shard of this write is missing before finalisation")
    for shard, final, names in pending:
        remove_shard_folder(final)
        names.remove(SPEC_FILE)
        for name in names + [SPEC_FILE]:  # spec.json last: then the shard exists
            copy_object(join_path(shard, name), join_path(final, name))
        for name in [SPEC_FILE] + names:
            delete_object(join_path(shard, name))
    # Older shards beyond the new count.
    kept = set(finals)
    for name in folder_entries(directory):
        folder = join_path(directory, name)
        if folder not in kept and name.isdigit():
            remove_shard_folder(folder)
    for url in _objects(temp):  # left-overs, e.g. of retried bundles
        delete_object(url)
