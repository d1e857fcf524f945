"""Whether a path names a dataset folder, and opening it as one.

Tools that take "a bag or a dataset" (`sackli.arrow.read_table`, `sackli
info`, `sackli verify`) decide with one rule, so that a path never means one
thing to one tool and another to the next:

- a path with a shard pattern or a list (`@`, `,`) is a bag spec;
- a remote path naming an existing object is a bag;
- a folder holding `spec.json` is one dataset shard (what `DatasetWriter`
  writes); a folder holding `000000/spec.json` is a sharded dataset (what
  `ShardedDatasetWriter` writes); `spec.json` wins if both are there;
- a local directory holding neither is an error (a bag is never a
  directory); anything else is a bag.
"""

from __future__ import annotations

import os
from typing import Literal, Union

from .._storage import folder_path, is_file, is_folder, join_path, on_this_machine
from ._dataset_reader import DatasetReader
from ._shard_folders import SPEC_FILE
from ._sharded import ShardedDatasetReader, shard_folders

__all__ = ["AnyDatasetReader", "dataset_folders", "dataset_layout", "reader_folders"]

AnyDatasetReader = Union[DatasetReader, ShardedDatasetReader]

# The first shard folder of a sharded dataset.
_FIRST_SHARD = "000000"


def dataset_layout(path: str | os.PathLike[str]) -> Literal["shard", "sharded"] | None:
    """"shard" for a dataset folder, "sharded" for a folder of shard
    folders, None for anything else (a bag spec), by the rule in the module
    doc. A remote path costs up to three metadata requests.

    Raises ValueError for a local directory that is not a dataset.
    """
    text = os.fspath(path)
    if not isinstance(text, str) or "," in text or "@" in os.path.basename(text):
        return None
    folder = folder_path(text)
    if not is_folder(folder):
        return None
    if is_file(join_path(folder, SPEC_FILE)):
        return "shard"
    if is_file(join_path(join_path(folder, _FIRST_SHARD), SPEC_FILE)):
        return "sharded"
    if on_this_machine(folder):  # a remote prefix with no dataset is no folder at all
        raise ValueError(
            f"{folder}: a directory, but not a dataset: it holds neither {SPEC_FILE} (a dataset "
            f"shard) nor {_FIRST_SHARD}/{SPEC_FILE} (a sharded dataset)")
    return None


def dataset_folders(path: str | os.PathLike[str]) -> list[str] | None:
    """The shard folders of the dataset at `path` (the folder itself for
    one shard), None when `path` is a bag spec (see `dataset_layout`).

    Raises ValueError for misnumbered shard folders (as ShardedDatasetReader).
    """
    layout = dataset_layout(path)
    return None if layout is None else layout_folders(path, layout)


def layout_folders(path: str | os.PathLike[str], layout: Literal["shard", "sharded"]) -> list[str]:
    """The shard folders of the dataset at `path` whose `dataset_layout`
    is known."""
    folder = folder_path(path)
    return [folder] if layout == "shard" else shard_folders(folder)


def reader_folders(reader: AnyDatasetReader) -> list[str]:
    """The shard folders a dataset reader reads, in order.

    Raises ValueError for a view (`r[a:b]`) of a reader: tools that read
    whole shards cannot honour it."""
    whole = reader._stops[-1] if isinstance(reader, ShardedDatasetReader) else len(reader._refs)
    if reader._rows != range(whole):
        raise ValueError(f"{reader.directory}: whole datasets only, not views (r[a:b]) of them")
    if isinstance(reader, ShardedDatasetReader):
        return [shard.directory for shard in reader.shard_readers]
    return [reader.directory]
