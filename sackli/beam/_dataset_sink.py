"""The Beam sink behind `WriteToSackliDataset`: each bundle writes shard
folders (a `DatasetWriter` each, a new one every `shard_length`
datapoints) under a temporary folder; when every bundle succeeded,
`finalize_write` numbers the new shards 000000, 000001, ... and puts them in
place of the older dataset (see `_dataset_publish`).

The temporary folder is hidden from readers: locally a hidden folder beside
the dataset (`.<name>.sackli-beam-temp-<uuid>`, on the same file system so
the shards move by rename), remotely a hidden prefix inside it
(`<dataset>/.sackli-beam-temp-<uuid>/`), which readers skip because a shard
is a folder holding `spec.json` directly.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator, Mapping

from apache_beam.io import iobase
from apache_beam.options.value_provider import ValueProvider
from apache_beam.transforms import display

from .._storage import join_path, make_staging_folder
from ..datasets import DatasetWriter
from ._dataset_publish import check_replaceable, publish_dataset
from ._provided import value
from ._pipeline_storage import pipeline_storage

__all__ = ["DatasetSink"]

_TEMP_TAG = "sackli-beam-temp-"


class _ShardWriter(iobase.Writer):
    """Writes one temporary shard folder; full at `shard_length` datapoints,
    when Beam closes it and opens the next."""

    def __init__(self, sink: "DatasetSink", folder: str) -> None:
        self._folder = folder
        self._shard_length = sink.shard_length
        with pipeline_storage():  # its uploads keep the settings; close needs them again
            self._writer = DatasetWriter(folder, sink.spec, sink.encoders, sink.compression)

    def write(self, datapoint: Any) -> None:
        try:
            self._writer.append(datapoint)
        except BaseException:
            with pipeline_storage():
                self._writer.discard()  # no partial shard left behind by a failed bundle
            raise

    def at_capacity(self) -> bool:
        return self._shard_length is not None and len(self._writer) >= self._shard_length

    def close(self) -> str:
        with pipeline_storage():
            self._writer.close()
        return self._folder


class DatasetSink(iobase.Sink):
    """Writes a PCollection of datapoints as the shard folders of `directory`."""

    def __init__(
        self, directory: str | ValueProvider, spec: Mapping[str, str], encoders: Mapping[str, Any] | None,
        shard_length: int | None, compression: Mapping[str, str] | None = None,
    ) -> None:
        self._directory = directory  # a template's ValueProvider: read on the workers
        self.spec = dict(spec)
        self.encoders = encoders
        self.shard_length = shard_length
        self.compression = compression

    @property
    def directory(self) -> str:
        """The dataset folder (a template's is known on the workers)."""
        return value(self._directory)

    def initialize_write(self) -> str:
        """Checks that the older content is a dataset (see
        check_replaceable); makes (locally) and returns the temporary folder
        of this write."""
        check_replaceable(self.directory)
        return make_staging_folder(self.directory, _TEMP_TAG + uuid.uuid4().hex)

    def open_writer(self, init_result: str, uid: str) -> _ShardWriter:
        return _ShardWriter(self, join_path(init_result, uid))

    def pre_finalize(self, init_result: str, writer_results: Any) -> None:
        """Nothing: the older dataset is replaced in `finalize_write`, once
        every new shard is complete."""

    def finalize_write(
        self, init_result: str, writer_results: Any, pre_finalize_results: Any
    ) -> Iterator[str]:
        """Publishes the new shards (in the order of their temporary names)
        as the dataset; yields the final shard folders."""
        yield from publish_dataset(init_result, sorted(writer_results), self.directory)

    def display_data(self) -> dict[str, Any]:
        data = {
            "directory": display.DisplayDataItem(str(self._directory), label="Dataset Folder"),
            "spec": display.DisplayDataItem(
                ", ".join(f"{k}: {v}" for k, v in sorted(self.spec.items())), label="Spec"),
        }
        if self.shard_length is not None:
            data["shard_length"] = display.DisplayDataItem(
                self.shard_length, label="Datapoints per Shard")
        return data
