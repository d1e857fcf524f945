"""The Beam source behind `ReadFromSackliDataset`: a dataset's shard folders
split into ranges of datapoints.

Positions are datapoint indices within a shard. A shard's byte size (the sum
of its files' sizes, from one listing of the whole dataset) and its number
of datapoints (from the tail of refs.bag, 8 bytes) turn Beam's
`desired_bundle_size` (bytes) into a number of datapoints per range, so a
large shard becomes many bundles; an offset range tracker lets runners
split a range again while it is read.
Nothing is listed or opened at pipeline construction.
"""

from __future__ import annotations

import functools
from typing import Any, Iterator, Mapping

from apache_beam import coders
from apache_beam.io import iobase, range_trackers
from apache_beam.options.value_provider import ValueProvider
from apache_beam.transforms import display

from .._storage import join_path
from ..datasets import DatasetReader
from ..datasets._layout import concurrently_on, open_records, shard_folder_bytes
from ._lazy_concat import LazyConcatSource
from ._provided import value
from ._pipeline_storage import pipeline_storage

__all__ = ["DatasetSource", "ShardSource", "shard_sources"]

# Datapoints read by one engine batch while a range is read.
_READ_CHUNK = 256
# Datapoints are dicts of field name -> value: the coder Beam picks for the
# element type ReadFromSackliDataset declares (Dict[str, Any]).
DATAPOINT_CODER = coders.MapCoder(coders.StrUtf8Coder(), coders.FastPrimitivesCoder())


def _datapoints(folder: str) -> int:
    """The number of datapoints of a shard: the length of its refs.bag (the
    engine reads only the file's tail)."""
    records = open_records(join_path(folder, "refs.bag"), cache_index=False)
    try:
        return len(records)
    finally:
        records.close()


class ShardSource(iobase.BoundedSource):
    """One shard folder as a Beam source over datapoints [0, length)."""

    def __init__(
        self, folder: str, length: int, size: int, decoders: Mapping[str, Any] | None,
        mask: Mapping[str, Any] | None,
    ) -> None:
        self._folder = folder
        self._length = length
        self._size = size
        self._decoders = decoders
        self._mask = mask

    @property
    def folder(self) -> str:
        """The shard folder."""
        return self._folder

    def estimate_size(self) -> int:
        return self._size

    def split(
        self, desired_bundle_size: int, start_position: int | None = None,
        stop_position: int | None = None,
    ) -> Iterator[iobase.SourceBundle]:
        start = 0 if start_position is None else start_position
        stop = self._length if stop_position is None else stop_position
        bytes_per_datapoint = self._size / max(1, self._length)
        step = max(1, int(desired_bundle_size / max(1.0, bytes_per_datapoint)))
        for begin in range(start, stop, step):
            end = min(stop, begin + step)
            yield iobase.SourceBundle(
                int((end - begin) * bytes_per_datapoint), self, begin, end)

    def get_range_tracker(
        self, start_position: int | None, stop_position: int | None
    ) -> range_trackers.OffsetRangeTracker:
        start = 0 if start_position is None else start_position
        stop = self._length if stop_position is None else stop_position
        return range_trackers.OffsetRangeTracker(start, stop)

    def read(self, range_tracker: range_trackers.OffsetRangeTracker) -> Iterator[Any]:
        with pipeline_storage():  # its files open now, and keep the settings
            reader = DatasetReader(self._folder, self._decoders)
        with reader:
            index = range_tracker.start_position()
            # Datapoints are read a chunk at a time (one engine batch per
            # field) but each is claimed before it is yielded, so a dynamic
            # split stops the read exactly where the runner asked.
            while index < min(range_tracker.stop_position(), len(reader)):
                stop = min(index + _READ_CHUNK, range_tracker.stop_position(), len(reader))
                for datapoint in reader.read_indices(range(index, stop), self._mask):
                    if not range_tracker.try_claim(index):
                        return
                    yield datapoint
                    index += 1

    def default_output_coder(self) -> coders.Coder:
        return DATAPOINT_CODER

    def display_data(self) -> dict[str, Any]:
        return {"shard": display.DisplayDataItem(self._folder, label="Shard Folder")}


def shard_sources(
    directory: str, decoders: Mapping[str, Any] | None, mask: Mapping[str, Any] | None
) -> list[ShardSource]:
    """A source per non-empty shard of the dataset: one listing, and the tail
    of each refs.bag (concurrently for a remote dataset)."""
    with pipeline_storage():
        folders = shard_folder_bytes(directory)
        lengths = concurrently_on(
            directory, [functools.partial(_datapoints, folder) for folder, _ in folders])
    return [ShardSource(folder, length, size, decoders, mask)
            for (folder, size), length in zip(folders, lengths) if length]


class DatasetSource(LazyConcatSource):
    """Every shard of a dataset folder; the shards are listed on workers."""

    def __init__(
        self, directory: str | ValueProvider, decoders: Mapping[str, Any] | None,
        mask: Mapping[str, Any] | None,
    ) -> None:
        self._directory = directory  # a template's ValueProvider: read on the workers
        self._decoders = decoders
        self._mask = mask

    def _parts(self) -> list[ShardSource]:
        return shard_sources(value(self._directory), self._decoders, self._mask)

    def estimate_size(self) -> int:
        with pipeline_storage():
            return sum(size for _, size in shard_folder_bytes(value(self._directory)))

    def default_output_coder(self) -> coders.Coder:
        return DATAPOINT_CODER

    def display_data(self) -> dict[str, Any]:
        data = {"directory": display.DisplayDataItem(str(self._directory), label="Dataset Folder")}
        if self._mask is not None:
            data["mask"] = display.DisplayDataItem(repr(dict(self._mask)), label="Mask")
        if self._decoders is not None:
            data["decoders"] = display.DisplayDataItem(
                ", ".join(sorted(self._decoders)), label="Decoders")
        return data
