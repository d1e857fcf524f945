"""Apache Beam transforms for bags: `ReadFromSackli`, `ReadAllFromSackli`
and `WriteToSackli`, modelled on Beam's `tfrecordio`.

    import apache_beam as beam
    from sackli.beam import ReadFromSackli, WriteToSackli

    with beam.Pipeline() as p:
        (p | ReadFromSackli("/data/in@*.bagz")
           | beam.Map(bytes.upper)
           | WriteToSackli("/data/out@8.bagz"))

Reads split files into byte ranges (one large shard becomes many bundles)
and claim records through offset trackers, so runners can rebalance work
dynamically; writes go through Beam's file systems with temp-then-rename
finalisation.
"""

from __future__ import annotations

import os
from typing import Any

import apache_beam as beam
from apache_beam import coders
from apache_beam.io import iobase

from apache_beam.io.filesystem import CompressionTypes

from .._options import LimitsPlacement, ReaderOptions, WriterOptions
from .._shard_spec import strip_local_prefix
from ._files import expand_pattern
from ._compression import with_compression_type
from ._sink import BagSink, ShardLimits
from ._stream_windows import check_single_firing
from ._source import PatternSource, ReadFileRanges, output_coder
from ._write_path import ShardedPath, for_unbounded_input, parse_write_path

__all__ = ["ReadAllFromSackli", "ReadFromSackli", "WriteToSackli"]

# Beam's own default for file reads (filebasedsource's ReadAllFiles).
DEFAULT_DESIRED_BUNDLE_SIZE = 64 << 20


def _reader_options(options: Any) -> ReaderOptions:
    if options is None:
        return ReaderOptions()
    if not isinstance(options, ReaderOptions):
        raise TypeError(f"options must be a sackli.Reader.Options, not {type(options).__name__}")
    return options


def _writer_options(options: Any) -> WriterOptions:
    if options is None:
        return WriterOptions()
    if not isinstance(options, WriterOptions):
        raise TypeError(f"options must be a sackli.Writer.Options, not {type(options).__name__}")
    return options


def _coder(coder: Any) -> coders.Coder:
    if not isinstance(coder, coders.Coder):
        raise TypeError(f"coder must be an apache_beam Coder, not {type(coder).__name__}")
    return coder


def _pattern(file_pattern: Any) -> str:
    """`file_pattern` as a str, checked without I/O: every entry must be
    storage sackli's Reader can open."""
    pattern = os.fspath(file_pattern)
    if not isinstance(pattern, str):
        raise TypeError(f"file_pattern must be a str or os.PathLike[str], not {type(pattern).__name__}")
    if not pattern:
        raise ValueError("file_pattern is empty")
    for entry in pattern.split(","):
        if not entry:
            raise ValueError(f"file_pattern {pattern!r} has an empty entry")
        strip_local_prefix(entry)  # ValueError for storage the Reader cannot open
    return pattern


class ReadFromSackli(beam.PTransform):
    """Reads the records of bag files into a PCollection.

    Args:
      file_pattern: anything `sackli.Reader` accepts (`name@N.ext`,
        `name@*.ext`, comma lists) or a Beam glob (`gs://b/dir/*.bagz`).
      coder: decodes each record (default: `BytesCoder`, records as bytes).
      options: a `sackli.Reader.Options` (limits placement, compression,
        zstd dictionary...); the sharding layout does not matter here, as
        each file is read on its own.
      with_metadata: yield `(file_name, index_in_file, record)` tuples.
      validate: check at construction that the files exist (a listing);
        with False, nothing touches storage until the pipeline runs.

    Files are listed and opened lazily, on workers. Each file splits into
    byte ranges of about the runner's desired bundle size.
    """

    def __init__(
        self,
        file_pattern: str | os.PathLike[str],
        coder: coders.Coder = coders.BytesCoder(),
        *,
        options: ReaderOptions | None = None,
        with_metadata: bool = False,
        validate: bool = True,
    ) -> None:
        super().__init__()
        self._source = PatternSource(
            _pattern(file_pattern), _reader_options(options), _coder(coder), bool(with_metadata)
        )
        if validate:
            self._source.validate()

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        return pbegin.pipeline | iobase.Read(self._source)

    def display_data(self) -> dict[str, Any]:
        return self._source.display_data()


class ReadAllFromSackli(beam.PTransform):
    """Reads the records of every pattern in a PCollection of patterns.

    Each pattern is expanded on a worker into its files; the files are
    redistributed and read as ranges of about `desired_bundle_size` bytes by
    a splittable DoFn (so runners can split them further while reading).

    Args:
      coder, options, with_metadata: as for `ReadFromSackli`.
      desired_bundle_size: bytes per initial range of a file.
    """

    def __init__(
        self,
        coder: coders.Coder = coders.BytesCoder(),
        *,
        options: ReaderOptions | None = None,
        with_metadata: bool = False,
        desired_bundle_size: int = DEFAULT_DESIRED_BUNDLE_SIZE,
    ) -> None:
        super().__init__()
        if isinstance(desired_bundle_size, bool) or not isinstance(desired_bundle_size, int):
            raise TypeError(
                f"desired_bundle_size must be an int, not {type(desired_bundle_size).__name__}"
            )
        if desired_bundle_size < 1:
            raise ValueError(f"desired_bundle_size must be >= 1, not {desired_bundle_size}")
        self._options = _reader_options(options)
        self._coder = _coder(coder)
        self._with_metadata = bool(with_metadata)
        self._bundle_bytes = desired_bundle_size

    def expand(self, patterns: beam.PCollection) -> beam.PCollection:
        options = self._options
        read = beam.ParDo(
            ReadFileRanges(options, self._coder, self._with_metadata, self._bundle_bytes)
        ).with_output_types(output_coder(self._coder, self._with_metadata).to_type_hint())
        return (
            patterns
            | "ExpandPatterns" >> beam.FlatMap(
                lambda pattern: [f for f in expand_pattern(_pattern(pattern), options) if f.size])
            | "Redistribute" >> beam.Reshuffle()
            | "ReadRanges" >> read
        )


class WriteToSackli(beam.PTransform):
    """Writes a PCollection to bag shards.

    Args:
      file_path: `dir/name@N.ext` (N shards named `name-SSSSS-of-NNNNN.ext`),
        `dir/name@*.ext` (the runner decides the number of shards) or
        `dir/name.ext@0` (one unsharded file), `.ext` being `.bag` or `.bagz`
        optionally preceded by more suffix (`name@4.data.bagz`). Any Beam
        file system: local, `gs://`, `s3://`. With `file_name_suffix`, a
        plain prefix instead, as in Beam's `WriteToText`.
      coder: encodes each element to a record (default: `BytesCoder`).
      compression_type: Beam's `CompressionTypes`, as bagz's `bagzio`
        takes it: AUTO (zstd for `.bagz` names), UNCOMPRESSED or ZSTD; it
        compresses each record, never the whole file.
      file_name_suffix: makes `file_path` a prefix: `("dir/name",
        file_name_suffix=".bagz", num_shards=3)` writes
        `dir/name-00000-of-00003.bagz`...; not with an `@` path.
      options: a `sackli.Writer.Options` (compression, zstd level and
        dictionary, limits placement). By default `.bagz` shards are zstd
        level 3, `.bag` shards raw.
      num_shards: overrides the path's number of shards (with `@*`).
      shard_name_template: Beam's shard name template, instead of
        `-SSSSS-of-NNNNN` (`-W-SSSSS-of-NNNNN` for unbounded input).
      max_records_per_shard, max_bytes_per_shard: start a new shard when
        one holds this many records or record bytes (before compression);
        only when the runner decides the shard count (`@*`), for bounded
        input.
      skip_if_empty: write no shard for an empty PCollection (older
        output of the same name is still replaced).
      triggering_frequency: for unbounded input, seconds per fixed window
        to write (it replaces the input's windowing, and is required for a
        globally windowed stream).

    The output PCollection holds the final file names. Shards are written
    under a temporary folder and renamed when all are complete; only then
    are older shard sets of the same name (any shard count) deleted.
    Unbounded input writes one shard set per window, named with the
    window (`name-2026-01-01T00-00-00_2026-01-01T00-00-10-00000-of-00001.bagz`);
    each window must fire once (the default trigger, or
    `triggering_frequency`).

    Raises:
      ValueError: a path of another form, or conflicting arguments.
    """

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        coder: coders.Coder = coders.BytesCoder(),
        compression_type: str = CompressionTypes.AUTO,
        *,
        file_name_suffix: str | None = None,
        options: WriterOptions | None = None,
        num_shards: int | None = None,
        shard_name_template: str | None = None,
        max_records_per_shard: int | None = None,
        max_bytes_per_shard: int | None = None,
        skip_if_empty: bool = False,
        triggering_frequency: int | None = None,
    ) -> None:
        super().__init__()
        self._where = parse_write_path(
            os.fspath(file_path), num_shards, shard_name_template, file_name_suffix)
        self._options = with_compression_type(_writer_options(options), compression_type)
        self._coder = _coder(coder)
        self._limits = ShardLimits(max_records_per_shard, max_bytes_per_shard)
        if self._limits and self._where.num_shards != 0:
            raise ValueError(
                "max_records_per_shard and max_bytes_per_shard start new shards as they fill, "
                f"so they need a shard count the runner decides ('@*'), not {self._where.num_shards}"
            )
        if triggering_frequency is not None and (
            isinstance(triggering_frequency, bool) or not isinstance(triggering_frequency, int)
            or triggering_frequency < 1
        ):
            raise ValueError(f"triggering_frequency must be seconds >= 1, not {triggering_frequency!r}")
        self._skip_if_empty = bool(skip_if_empty)
        self._triggering_frequency = triggering_frequency
        self._sink = self._sink_to(self._where)

    def _sink_to(self, where: ShardedPath) -> BagSink:
        if "U" in where.template and self._options.limits_placement == LimitsPlacement.SEPARATE:
            raise ValueError(
                "a shard_name_template with a UUID ('U') cannot name SEPARATE limits "
                "files after their shards; use TAIL placement or another template"
            )
        return BagSink(
            where, self._coder, self._options, shard_limits=self._limits,
            skip_if_empty=self._skip_if_empty, triggering_frequency=self._triggering_frequency,
        )

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        sink = self._sink
        if not pcoll.is_bounded:
            if self._limits:
                # Beam's windowed writer checks a shard's size only after a
                # whole group of elements: the limits would not hold.
                raise ValueError(
                    "max_records_per_shard and max_bytes_per_shard apply to bounded input only")
            if self._triggering_frequency is None:
                check_single_firing(pcoll.windowing)
            sink = self._sink_to(for_unbounded_input(self._where))
        return pcoll | iobase.Write(sink)

    def display_data(self) -> dict[str, Any]:
        return self._sink.display_data()
