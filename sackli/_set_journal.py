"""The journal of a local bag shard set being written (`sackli.ShardedWriter`).

A set `dir/name@N.ext` (or `name@*.ext`) is written inside one hidden folder,
`dir/.name@N.ext.sackli-partial-<tag>/` (see `_unfinished`): the spool of a
set whose record count is not known, the shard files, and the journal
`sackli-write.json`, written once before any record, which says how the
records are dealt:

    {"kind": "set", "where": "local", "target": "name@N.ext",
     "mode": "count" | "spool" | "size",
     "counts": [records of each shard] (mode "count"), "in_place": shards
     written at their names (atomic=False), "options": the writer options,
     "overwrite": whether other sets of the name are replaced}

(a set on a bucket keeps a journal of the same kind with "where": "bucket":
`_bucket_journal`) and `companion.<rule>` files: what to write beside the set (a row set's
schema, `rule` naming how its path follows from the first shard's).

so that `sackli.recover("dir/name@N.ext")` (`_set_recover`) completes the set
a killed process left: the records that reached the disk, in order, dealt
as the writer would have dealt them. The shards are written in place inside
the folder (it is hidden already) and moved onto their names at `close()`;
the spool stays until the set is published, so that a set killed while it
is published is dealt again from it. How far a write got is read from the
files themselves: a shard whose limits file is gone was finished.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, Callable

from ._options import (
    CompressionAutoDetect, CompressionNone, CompressionZstd, LimitsPlacement, WriterOptions,
)
from ._schema_names import schema_path
from ._unfinished import make_write_folder, write_journal

__all__ = ["COMPANION", "COMPANION_RULES", "SPOOL", "SetJournal", "options_from_journal"]

COMPANION_RULES: dict[str, Callable[[str], str]] = {"arrow_schema": schema_path}
"""How a companion file's path follows from the path of the set's first shard."""
COMPANION = "companion."
"""The start of a companion file's name in the folder (then its rule)."""
SPOOL = "spool.bag"
"""The spool of a set whose record count is not known, in its folder."""
_DICTIONARY = "zstd-dictionary"


def _options_to_json(options: WriterOptions) -> dict[str, Any]:
    compression = options.compression
    if isinstance(compression, CompressionZstd):
        codec: dict[str, Any] = {"zstd": compression.level, "literals": compression.literals,
                                 "dictionary": bool(compression.dictionary)}
    elif isinstance(compression, CompressionNone):
        codec = {"none": True}
    else:
        codec = {"auto": True}
    return {"limits_placement": options.limits_placement.name, "compression": codec,
            "atomic": options.atomic, "durable": options.durable,
            "checksum": options.checksum}


def options_from_journal(journal: dict[str, Any], folder: str) -> WriterOptions:
    """The writer options a journal recorded (its zstd dictionary is a file
    in the folder)."""
    saved = journal["options"]
    codec = saved["compression"]
    compression: Any
    if "zstd" in codec:
        dictionary = b""
        if codec.get("dictionary"):
            with open(os.path.join(folder, _DICTIONARY), "rb") as file:
                dictionary = file.read()
        compression = CompressionZstd(codec["zstd"], dictionary, codec.get("literals", "huffman"))
    elif "none" in codec:
        compression = CompressionNone()
    else:
        compression = CompressionAutoDetect()
    return WriterOptions(limits_placement=LimitsPlacement[saved["limits_placement"]],
                         compression=compression, atomic=bool(saved["atomic"]),
                         durable=bool(saved["durable"]),
                         # Journals written before the option: their frames had none.
                         checksum=bool(saved.get("checksum", False)))


class SetJournal:
    """The hidden folder and the journal of one local shard-set write.

    Args:
      spec: `dir/name@N.ext` or `dir/name@*.ext` (local).
      options: the options of every shard.
      mode: "count" (counts known), "spool" (split at the end) or "size"
        (`max_shard_bytes`).
      counts: records of each shard, for "count".
    """

    def __init__(self, spec: str, options: WriterOptions, mode: str,
                 counts: list[int] | None = None, overwrite: bool = False) -> None:
        self.folder = make_write_folder(spec)
        self._options = options
        # Shard files in the hidden folder need no temporary name of their
        # own: they are written in place there, and moved at close().
        self.shard_options = dataclasses.replace(options, atomic=False)
        self.in_place = not options.atomic
        """Whether the shards are written at their own names (atomic=False)."""
        journal = {
            "kind": "set", "where": "local", "target": os.path.basename(spec), "mode": mode,
            "counts": counts,
            "in_place": self.in_place, "options": _options_to_json(options),
            "overwrite": overwrite,
        }
        try:
            compression = options.compression
            if isinstance(compression, CompressionZstd) and compression.dictionary:
                with open(os.path.join(self.folder, _DICTIONARY), "wb") as file:
                    file.write(compression.dictionary)
            # Written once, in a folder no one else writes: a torn journal
            # (a crash before the first record) is reported as damaged.
            write_journal(self.folder, journal)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise

    def shard_path(self, name: str) -> str:
        """Where the shard named `name` (final or pending) is written: in the
        folder, or at `name` itself for a write in place."""
        if self.in_place:
            return name
        return os.path.join(self.folder, os.path.basename(name))

    def spool_path(self) -> str:
        """Where the spool is written."""
        return os.path.join(self.folder, SPOOL)

    def add_companion(self, rule: str, content: bytes) -> None:
        """Keeps a companion file (`rule` names how its path follows from
        the set's first shard: see `COMPANION_RULES`)."""
        with open(os.path.join(self.folder, COMPANION + rule), "wb") as file:
            file.write(content)

    def remove(self) -> None:
        """Removes the folder and everything left in it (the write finished,
        or failed and keeps nothing)."""
        shutil.rmtree(self.folder, ignore_errors=True)
