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
from ._compression import with_compression_type
from ._files import (
    ALLOW_IF_WILDCARD,
    DISALLOW,
    check_empty_match_treatment,
    expand_pattern,
)
from ._sink import BagSink
from ._display import read_display_data
from ._source import PatternSource, ReadFileRanges, output_coder
from ._write_path import parse_write_path

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


def _type_hint(coder: coders.Coder) -> Any:
    """The element type `coder` decodes to, or Any for coders that do not
    say (Beam's base `Coder.to_type_hint` raises NotImplementedError)."""
    try:
        return coder.to_type_hint()
    except NotImplementedError:
        return Any


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

    The first three arguments are those of bagz's `bagzio.ReadFromBagz` and
    upstream Säckli's `sacklio.ReadFromSackli`, in the same order.

    Args:
      file_pattern: anything `sackli.Reader` accepts (`name@N.ext`,
        `name@*.ext`, comma lists) or a Beam glob (`gs://b/dir/*.bagz`).
      coder: decodes each record (default: `BytesCoder`, records as bytes).
      compression_type: Beam's `CompressionTypes`: AUTO (zstd for `.bagz`
        names, raw otherwise), UNCOMPRESSED or ZSTD (whatever the names).
        Other types are a ValueError: bags compress records, not files.
      options: a `sackli.Reader.Options` (limits placement, compression,
        zstd dictionary...); the sharding layout does not matter here, as
        each file is read on its own.
      with_metadata: yield `(file_name, index_in_file, record)` tuples.
      validate: check at construction that the files exist (a listing);
        with False, nothing touches storage until the pipeline runs.
      empty_match_treatment: Beam's `EmptyMatchTreatment`: whether an entry
        of the pattern may match no file (default DISALLOW: an error).

    Files are listed and opened lazily, on workers. Each file splits into
    byte ranges of about the runner's desired bundle size.
    """

    def __init__(
        self,
        file_pattern: str | os.PathLike[str],
        coder: coders.Coder = coders.BytesCoder(),
        compression_type: str = CompressionTypes.AUTO,
        *,
        options: ReaderOptions | None = None,
        with_metadata: bool = False,
        validate: bool = True,
        empty_match_treatment: str = DISALLOW,
    ) -> None:
        super().__init__()
        self._source = PatternSource(
            _pattern(file_pattern),
            with_compression_type(_reader_options(options), compression_type),
            _coder(coder),
            bool(with_metadata),
            check_empty_match_treatment(empty_match_treatment),
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
      coder, compression_type, options, with_metadata: as for
        `ReadFromSackli`.
      desired_bundle_size: bytes per initial range of a file.
      empty_match_treatment: Beam's `EmptyMatchTreatment`; by default
        ALLOW_IF_WILDCARD, as for Beam's own ReadAll transforms: a pattern
        with a `*` (a glob, `name@*.bagz`) may match nothing, a named file
        must exist.
    """

    def __init__(
        self,
        coder: coders.Coder = coders.BytesCoder(),
        compression_type: str = CompressionTypes.AUTO,
        *,
        options: ReaderOptions | None = None,
        with_metadata: bool = False,
        desired_bundle_size: int = DEFAULT_DESIRED_BUNDLE_SIZE,
        empty_match_treatment: str = ALLOW_IF_WILDCARD,
    ) -> None:
        super().__init__()
        if isinstance(desired_bundle_size, bool) or not isinstance(desired_bundle_size, int):
            raise TypeError(
                f"desired_bundle_size must be an int, not {type(desired_bundle_size).__name__}"
            )
        if desired_bundle_size < 1:
            raise ValueError(f"desired_bundle_size must be >= 1, not {desired_bundle_size}")
        self._options = with_compression_type(_reader_options(options), compression_type)
        self._coder = _coder(coder)
        self._with_metadata = bool(with_metadata)
        self._bundle_bytes = desired_bundle_size
        self._empty_match_treatment = check_empty_match_treatment(empty_match_treatment)

    def expand(self, patterns: beam.PCollection) -> beam.PCollection:
        options, treatment = self._options, self._empty_match_treatment
        read = beam.ParDo(
            ReadFileRanges(options, self._coder, self._with_metadata, self._bundle_bytes)
        ).with_output_types(_type_hint(output_coder(self._coder, self._with_metadata)))
        return (
            patterns
            | "ExpandPatterns" >> beam.FlatMap(
                lambda pattern: [f for f in expand_pattern(_pattern(pattern), options, treatment)
                                 if f.size])
            | "Redistribute" >> beam.Reshuffle()
            | "ReadRanges" >> read
        )

    def display_data(self) -> dict[str, Any]:
        return read_display_data(
            self._options, self._coder, self._with_metadata,
            empty_match_treatment=self._empty_match_treatment,
            desired_bundle_size=self._bundle_bytes,
        )


class WriteToSackli(beam.PTransform):
    """Writes a PCollection to bag shards.

    Args:
      file_path: `dir/name@N.ext` (N shards named `name-SSSSS-of-NNNNN.ext`),
        `dir/name@*.ext` (the runner decides the number of shards) or
        `dir/name.ext@0` (one unsharded file), `.ext` being `.bag` or `.bagz`
        optionally preceded by more suffix (`name@4.data.bagz`). Any Beam
        file system: local, `gs://`, `s3://`.
      coder: encodes each element to a record (default: `BytesCoder`).
      options: a `sackli.Writer.Options` (compression, zstd level and
        dictionary, limits placement). By default `.bagz` shards are zstd
        level 3, `.bag` shards raw.
      num_shards: overrides the path's number of shards (with `@*`).
      shard_name_template: Beam's shard name template, instead of
        `-SSSSS-of-NNNNN`.

    The output PCollection holds the final file names. Shards are written
    under a temporary folder and renamed when all are complete.

    Raises:
      ValueError: a path of another form, or conflicting arguments.
    """

    def __init__(
        self,
        file_path: str | os.PathLike[str],
        coder: coders.Coder = coders.BytesCoder(),
        *,
        options: WriterOptions | None = None,
        num_shards: int | None = None,
        shard_name_template: str | None = None,
    ) -> None:
        super().__init__()
        where = parse_write_path(os.fspath(file_path), num_shards, shard_name_template)
        writer_options = _writer_options(options)
        if "U" in where.template and writer_options.limits_placement == LimitsPlacement.SEPARATE:
            raise ValueError(
                "a shard_name_template with a UUID ('U') cannot name SEPARATE limits "
                "files after their shards; use TAIL placement or another template"
            )
        self._sink = BagSink(where, _coder(coder), writer_options)

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        return pcoll | iobase.Write(self._sink)

    def display_data(self) -> dict[str, Any]:
        return self._sink.display_data()
