"""Apache Beam transforms for multi-field datasets (`sackli.datasets`, the
`bags` 0.5.1 layout): `ReadFromSackliDataset` and `WriteToSackliDataset`.

    import apache_beam as beam
    from sackli.beam import ReadFromSackliDataset, WriteToSackliDataset

    spec = {"image": "jpeg", "label": "int(8)", "words": "utf8[]"}
    with beam.Pipeline() as p:
        (p | ReadFromSackliDataset("/data/in", mask={"label": True, "words": True})
           | beam.Map(lambda d: {**d, "image": make_image(d)})
           | WriteToSackliDataset("/data/out", spec, shard_length=10_000))

Reads split shards into ranges of datapoints (a large shard becomes many
bundles, and runners may split ranges again while they are read); writes put
each bundle's shards in a temporary folder and publish them together once
all are complete. Local folders and `gs://` / `s3://` prefixes, through
sackli's storage layer, with the storage settings of the pipeline options
(`--s3_endpoint_url`, ..., `--project`), the environment filling in what
they leave out (see docs/beam.md, "Storage settings on workers").
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping

import apache_beam as beam
from apache_beam.io import iobase

from ..datasets._fields import check_mask, encoder_table, parse_compression, parse_spec
from .._storage import folder_path
from ._dataset_sink import DatasetSink
from ._dataset_source import DatasetSource
from ._provided import now_or_at_run_time

__all__ = ["ReadFromSackliDataset", "WriteToSackliDataset"]


def _directory(directory: Any) -> str:
    path = folder_path(directory)  # TypeError for a wrong type, as every entry point
    if not path:
        raise ValueError("directory is empty")
    return path


class ReadFromSackliDataset(beam.PTransform):
    """Reads the datapoints of a dataset folder (shard folders 000000, ...,
    as `sackli.datasets` and `bags` write them) into a PCollection of dicts.

    Args:
      directory: the dataset folder: local, or a `gs://bucket/prefix` /
        `s3://bucket/prefix`; or a ValueProvider of it (a classic template's
        option, read and checked on the workers).
      decoders: type name -> `decode(buffer, *args)`; None for the built-in
        `sackli.datasets.decoders`. Must be picklable (workers get a copy).
      mask: which fields to read, as for `DatasetReader`: field -> True /
        False, or for a list field a `range` / `slice` of the list. None
        reads every field.

    Nothing is listed or read at construction. On the workers, shards are
    listed, and each shard splits into ranges of about the runner's desired
    bundle size (estimated from its files' sizes); each range is read in
    batches of datapoints (one engine batch per field).

    Raises (when the pipeline runs): FileNotFoundError for a missing
    dataset folder or shard file, ValueError for misnumbered shards or a
    mask naming a field the dataset does not have, sackli.CorruptionError
    for damaged files (see `DatasetReader`).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        decoders: Mapping[str, Any] | None = None,
        mask: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if decoders is not None and not isinstance(decoders, Mapping):
            raise TypeError(f"decoders must be a dict, not {type(decoders).__name__}")
        # A str, or for a template's ValueProvider one checked on the workers.
        self._source = DatasetSource(
            now_or_at_run_time(_directory, directory), decoders, check_mask(mask))

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        # Declared, so that type checks downstream see dicts, not Any.
        return pbegin.pipeline | iobase.Read(self._source).with_output_types(Dict[str, Any])

    def display_data(self) -> dict[str, Any]:
        return self._source.display_data()


class WriteToSackliDataset(beam.PTransform):
    """Writes a PCollection of datapoints (dicts with exactly the spec's
    fields) as a dataset folder: shard folders 000000, 000001, ...,
    byte-compatible with `bags` 0.5.1 (unless `compression` is given).

    Args:
      directory: the dataset folder: local, or a `gs://bucket/prefix` /
        `s3://bucket/prefix`. It must be missing or hold a dataset (shard
        folders only), which the write replaces. May be a ValueProvider, as
        for `ReadFromSackliDataset`.
      spec: field -> type, as for `sackli.datasets.DatasetWriter`.
      encoders: type name -> `encode(value, *args) -> bytes`; None for the
        built-in `sackli.datasets.encoders`. Must be picklable.
      shard_length: datapoints per shard at most (None: one shard per
        bundle the runner makes, however large).
      compression: a sackli extension, as for `DatasetWriter`: field ->
        `"zstd"` / `"zstd(LEVEL)"`.

    Each bundle writes its shards into a hidden temporary folder; the runner
    decides how many shards there are (at least one: an empty PCollection
    writes one empty shard). Once every bundle succeeded, the shards are
    numbered and put in place of the older dataset, which is replaced only
    then (see docs/beam.md for what a concurrent reader sees). A failed
    pipeline leaves the older dataset as it was and no shard a reader would
    take; the output PCollection holds the final shard folders.

    Raises:
      ValueError / TypeError: a malformed spec, a type without an encoder,
        a bad shard_length or compression (at construction).
      FileExistsError: `directory` holds files that are not dataset shards
        (when the pipeline starts writing).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        spec: Mapping[str, str],
        encoders: Mapping[str, Any] | None = None,
        shard_length: int | None = None,
        *,
        compression: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        path = now_or_at_run_time(_directory, directory)  # as for ReadFromSackliDataset
        fields = parse_spec(spec)
        if encoders is not None and not isinstance(encoders, Mapping):
            raise TypeError(f"encoders must be a dict, not {type(encoders).__name__}")
        encoder_table(fields, encoders)
        if shard_length is not None and (
                isinstance(shard_length, bool) or not isinstance(shard_length, int)
                or shard_length < 1):
            raise ValueError(f"shard_length must be an int >= 1 or None, not {shard_length!r}")
        parse_compression(compression, fields, str(path))
        self._sink = DatasetSink(path, spec, encoders, shard_length,
                                 None if compression is None else dict(compression))
        # Datapoints are dicts: Beam refuses other elements when the
        # pipeline is built, not a worker when it runs.
        self.with_input_types(Dict[str, Any])

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        if not pcoll.is_bounded:
            raise ValueError("WriteToSackliDataset writes bounded PCollections only")
        return pcoll | iobase.Write(self._sink)

    def display_data(self) -> dict[str, Any]:
        return self._sink.display_data()
