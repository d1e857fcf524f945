"""A bag shard of a `gs://` / `s3://` shard set, for the shard-set writer.

Object stores cannot rename, and a shard set is published only when every
shard is complete (for `name@*.ext` only then are the names known). So each
shard streams into a hidden object beside the set,
`<folder>/.sackli-partial-<token>/<name>`, which no glob of the set
matches and which is complete when the shard is finished; `publish` copies
it onto its final name on the server (no bytes pass through us) and
deletes it. A failure or `abort()` deletes the hidden objects.
"""

from __future__ import annotations

import os
import uuid

from . import _bulk
from ._format import checksums_path_for, limits_path_for
from ._options import LimitsPlacement, WriterOptions
from ._shard_set import BagShard
from ._storage import WriteDestination, copy_object, delete_objects

__all__ = ["RemoteBagShard", "partial_folder"]


def partial_folder(spec: str) -> str:
    """A fresh hidden folder (URL prefix) beside the set `spec` for its
    shards until they are published."""
    folder = spec.rpartition("/")[0]
    return f"{folder}/.sackli-partial-{os.getpid()}-{uuid.uuid4().hex[:12]}/"


class RemoteBagShard(BagShard):
    """One remote shard: written by a `sackli.Writer` (which streams it) to
    `partial + name`, copied onto its target by `publish`. Without
    `partial` (a single bag, not a set) it is written straight to `path`
    and appears when finished."""

    def __init__(self, path: str, options: WriterOptions, partial: str | None,
                 destination: WriteDestination) -> None:
        self._separate = options.limits_placement == LimitsPlacement.SEPARATE
        self._hidden = partial is not None
        self._temp = partial + path.rpartition("/")[2] if self._hidden else path
        super().__init__(self._temp, options, destination.at(self._temp))

    def finish(self) -> None:
        self._writer.close()  # the hidden object (and its limits object) appear

    def _files(self, path: str) -> list[str]:
        # What a reader needs before the records: their limits, their checks.
        before = [limits_path_for(path)] if self._separate else []
        if self._writer._core.record_checksums:
            before.append(checksums_path_for(path))
        return [*before, path]

    def _stale(self, target: str) -> list[str]:
        """Objects an older bag of that name may have left beside it that
        would describe other records: a SEPARATE bag's limits. (An older
        CRC-32C sidecar is ignored: the shard's metadata says whether it
        has one of its own, `Writer`.)"""
        return [] if self._separate else [limits_path_for(target)]

    def publish(self, target: str) -> list[str]:
        delete_objects(self._stale(target))
        if target == self._temp:
            return self._files(target)
        # A SEPARATE limits object goes first: a reader finds the records
        # object only once its limits are there.
        published = []
        for temp, final in zip(self._files(self._temp), self._files(target)):
            copy_object(temp, final)
            published.append(final)
        delete_objects(self._files(self._temp))
        return published

    def targets(self, target: str) -> list[str]:
        return [limits_path_for(target), checksums_path_for(target), target]

    def staged(self, target: str) -> tuple[list[tuple[str, str, int]], list[str]]:
        """For a journaled set (`_bucket_journal`): (hidden URL, final URL,
        records) of each object this shard staged for `target`, and the
        final URLs its publish deletes (a stale limits object)."""
        records = self.records_written
        objects = [(temp, final, records if final == target else 0)
                   for temp, final in zip(self._files(self._temp), self._files(target))]
        return objects, self._stale(target)

    def discard(self) -> None:
        """Deletes what this shard wrote: an unfinished upload leaves
        nothing; finished objects (the hidden ones, or a single bag's) are
        deleted. An older object under a single bag's name stays unless
        this shard finished and so replaced it."""
        if not self._writer.closed:
            _bulk.discard(self._writer)
            if not self._hidden:
                return
        delete_objects(self._files(self._temp))
