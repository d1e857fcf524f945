"""`ShardedDatasetWriter` / `ShardedDatasetReader`: a dataset as a folder of
shard folders `000000`, `000001`, ... (each a `DatasetWriter` folder), as
`bags` 0.5.1 lays it out. Workers of a distributed job write and read their
stride of shards (`shard_start`, `shard_step`)."""

from __future__ import annotations

import bisect
import functools
import itertools
import os
from typing import Any, Mapping

from .._bulk import DEFAULT_MAX_RECORD_BYTES
from .._sets import unfinished_writes
from .._storage import folder_path, join_path
from ._closing import ClosesOnExit, DiscardsOnError
from ._concurrent import concurrently_on
from ._dataset_reader import DatasetReader
from ._dataset_writer import DatasetWriter
from ._datapoints import Datapoint, DatapointSequence, Mask
from ._reopening import ReopensWithCache
from ._shard_folders import shard_folder_names, shard_name, shard_sizes
from ._spec import FieldType

__all__ = ["ShardedDatasetReader", "ShardedDatasetWriter"]

GiB = 1024 ** 3


class ShardedDatasetWriter(DiscardsOnError):
    """Writes datapoints into shard folders of `directory`, starting a new
    shard once the current one reaches `shard_size` bytes or `shard_length`
    datapoints (either may be None for no limit).

    Each shard appears whole when it is full or the writer closes (see
    DatasetWriter). Shard numbers run shard_start, shard_start + shard_step,
    ...: give worker w of n `shard_start=w, shard_step=n`. `compression` is
    DatasetWriter's sackli extension (per-field zstd); `durable=True`
    makes each shard's `close()` survive power loss (see DatasetWriter).
    Not thread-safe.

    A process killed mid-write leaves the shards it had finished in place
    and the open one in its hidden folder with its own journal
    (`directory/.000003.sackli-partial-<tag>/`, a DatasetWriter's): `sackli
    recover DIRECTORY` completes every unfinished shard in the folder (one
    per worker at most), `sackli.recover("DIRECTORY/000003")` one. The
    dataset then holds a prefix of the datapoints appended.

    Raises:
      ValueError: shard_start < 0 or shard_step < 1 (and as DatasetWriter).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        spec: Mapping[str, str],
        encoders: Mapping[str, Any] | None = None,
        shard_size: int | None = 10 * GiB,
        shard_length: int | None = None,
        shard_start: int = 0,
        shard_step: int = 1,
        compression: Mapping[str, str] | None = None,
        *,
        durable: bool = False,
    ) -> None:
        if shard_start < 0 or shard_step < 1:
            raise ValueError(
                f"need shard_start >= 0 and shard_step >= 1, not {shard_start} and {shard_step}")
        self._directory = folder_path(directory)
        self._spec = dict(spec)
        self._compression = compression
        self._durable = durable
        self._encoders = encoders
        self._shard_size = shard_size
        self._shard_length = shard_length
        self._next_shard = shard_start
        self._shard_step = shard_step
        self._done_shards = self._done_size = self._done_length = 0
        self._writer: DatasetWriter | None = None

    @property
    def directory(self) -> str:
        """The dataset folder."""
        return self._directory

    @property
    def shards(self) -> int:
        """Shards written so far, the open one included."""
        return self._done_shards + (self._writer is not None)

    @property
    def size(self) -> int:
        """Bytes of all shards' bag files so far."""
        return self._done_size + (self._writer.size if self._writer else 0)

    def __len__(self) -> int:
        return self._done_length + (len(self._writer) if self._writer else 0)

    def append(self, datapoint: Mapping[str, Any], flush: bool = True) -> int:
        """Appends one datapoint; returns its index among this writer's."""
        if self._writer is None:
            folder = join_path(self._directory, shard_name(self._next_shard))
            self._writer = DatasetWriter(folder, self._spec, self._encoders, self._compression,
                                         durable=self._durable)
        writer = self._writer
        index = self._done_length + writer.append(datapoint)
        # The length first, then a bound of the size: both cost nothing.
        if ((self._shard_length and index + 1 - self._done_length >= self._shard_length)
                or (self._shard_size and writer.size_at_most >= self._shard_size
                    and writer.size >= self._shard_size)):
            self._finish_shard()
        return index

    def _finish_shard(self) -> None:
        writer, self._writer = self._writer, None
        assert writer is not None
        writer.close()
        self._done_shards += 1
        self._done_size += writer.size
        self._done_length += len(writer)
        self._next_shard += self._shard_step

    def flush(self) -> None:
        """Flushes the open shard (see DatasetWriter.flush)."""
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Closes the open shard, which then appears. Idempotent."""
        if self._writer is not None:
            self._finish_shard()

    def discard(self) -> None:
        """Discards the open shard (it never appears); closed shards stay."""
        if self._writer is not None:
            self._writer.discard()
            self._writer = None

    def __repr__(self) -> str:
        return (f"<sackli.datasets.ShardedDatasetWriter({self._directory!r}): "
                f"{len(self)} datapoints, {self.shards} shards>")


def shard_folders(directory: str) -> list[str]:
    """The shard folders of a dataset, in order; unfinished writes are
    ignored (see _shard_folders.shard_folder_names).

    Raises FileNotFoundError when `directory` is missing and ValueError when
    the names are not 000000, 000001, ... without gaps.
    """
    return _numbered(directory, shard_folder_names(directory))


def _unfinished_shards(directory: str) -> str:
    """A note naming the unfinished shard writes in `directory` (a killed
    local writer's), with the command that completes them; "" if none."""
    writes = unfinished_writes(directory)
    if not writes:
        return ""
    names = ", ".join(os.path.basename(write.target) for write in writes)
    return (f"; unfinished writes of shards {names} exist there: complete them with "
            f"sackli.recover(path) of each shard (from a shell: sackli recover {directory})")


def shard_folder_bytes(directory: str) -> list[tuple[str, int]]:
    """(folder, total size of its files) of each shard folder, in order: one
    listing of a remote dataset. Raises as `shard_folders`."""
    sizes = shard_sizes(directory)
    return list(zip(_numbered(directory, list(sizes)), sizes.values()))


def _numbered(directory: str, names: list[str]) -> list[str]:
    """The folders `names` of `directory`, checked to be 000000, 000001, ..."""
    for number, name in enumerate(names):
        if not name.isdigit() or int(name) != number:
            raise ValueError(
                f"{directory}: shard folders must be numbered 000000, 000001, ... without "
                f"gaps; found {name!r} where shard {number:06} belongs")
    return [join_path(directory, name) for name in names]


class ShardedDatasetReader(DatapointSequence, ReopensWithCache, ClosesOnExit):
    """Reads the shards shard_start, shard_start + shard_step, ... of a
    dataset folder as one sequence of datapoints (shard by shard), with the
    DatasetReader interface: `r[i]`, `r[i, mask]`, views, `read_indices`
    (one batch per shard and field), `read_indices_iter`, iteration.
    The arguments are DatasetReader's, and `shard_start` / `shard_step`.

    Raises:
      FileNotFoundError: `directory` (or a file of a shard) is missing.
      ValueError: misnumbered shard folders, or no shard selected.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        decoders: Mapping[str, Any] | None = None,
        cache_index: bool = True,
        shard_start: int = 0,
        shard_step: int = 1,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_max_bytes: int | None = None,
        max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        if shard_start < 0 or shard_step < 1:
            raise ValueError(
                f"need shard_start >= 0 and shard_step >= 1, not {shard_start} and {shard_step}")
        self._directory = folder_path(directory)
        # How it was opened (`ReopensWithCache` opens it so again).
        self._opened = {"decoders": decoders, "cache_index": cache_index,
                        "shard_start": shard_start, "shard_step": shard_step,
                        "cache_dir": cache_dir, "cache_max_bytes": cache_max_bytes,
                        "max_record_bytes": max_record_bytes}
        folders = shard_folders(self._directory)[shard_start::shard_step]
        if not folders:
            raise ValueError(
                f"{self._directory}: no shard selected (shard_start={shard_start}, "
                f"shard_step={shard_step}, {len(shard_folders(self._directory))} shards)"
                f"{_unfinished_shards(self._directory)}")
        self._readers = concurrently_on(
            self._directory,
            [functools.partial(DatasetReader, folder, decoders, cache_index,
                               cache_dir=cache_dir, cache_max_bytes=cache_max_bytes,
                               max_record_bytes=max_record_bytes)
             for folder in folders])
        self._stops = list(itertools.accumulate(len(reader) for reader in self._readers))
        self._rows = range(self._stops[-1])

    @property
    def directory(self) -> str:
        """The dataset folder."""
        return self._directory

    @property
    def shards(self) -> int:
        """The number of shards read."""
        return len(self._readers)

    @property
    def shard_readers(self) -> list[DatasetReader]:
        """One DatasetReader per shard read, in order."""
        return list(self._readers)

    @property
    def size(self) -> int:
        """Bytes of the bag files of the shards read."""
        return sum(reader.size for reader in self._readers)

    @property
    def spec(self) -> dict[str, FieldType]:
        """The parsed spec of the first shard read."""
        return self._readers[0].spec

    def _read_row(self, row: int, mask: Mask | None) -> Datapoint:
        shard = bisect.bisect_right(self._stops, row)
        first = self._stops[shard - 1] if shard else 0
        return self._readers[shard]._read_row(row - first, mask)

    def _read_rows(self, rows: list[int], mask: Mask | None) -> list[Datapoint]:
        # One batch per shard: group the rows by shard, then put the
        # datapoints back in the requested order.
        by_shard: dict[int, list[int]] = {}
        for position, row in enumerate(rows):
            by_shard.setdefault(bisect.bisect_right(self._stops, row), []).append(position)
        datapoints: list[Datapoint] = [{} for _ in rows]
        for shard, positions in by_shard.items():
            first = self._stops[shard - 1] if shard else 0
            local = [rows[position] - first for position in positions]
            for position, datapoint in zip(positions, self._readers[shard]._read_rows(local, mask)):
                datapoints[position] = datapoint
        if not rows:
            self._readers[0]._read_rows([], mask)  # still checks the mask
        return datapoints

    def close(self) -> None:
        """Releases every shard's files."""
        for reader in self._readers:
            reader.close()

    def __repr__(self) -> str:
        return (f"<sackli.datasets.ShardedDatasetReader({self._directory!r}): {len(self)} "
                f"datapoints in {self.shards} shards>")
