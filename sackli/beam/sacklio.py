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
from typing import Any, Sequence

import apache_beam as beam
from apache_beam import coders
from apache_beam.io import iobase
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.transforms import trigger

from .._options import LimitsPlacement, ReaderOptions, WriterOptions
from .._shard_spec import strip_local_prefix
from ._batched import batched_source
from ._compression import with_compression_type
from ._display import read_display_data
from ._files import (
    ALLOW_IF_WILDCARD,
    DISALLOW,
    check_empty_match_treatment,
    expand_pattern,
)
from ._rows import BatchesToRows, EncodeRows, WriteSchemaFile, row_schema, stored_rows
from ._sink import BagSink, ShardLimits
from ._stream_windows import fires_once, windowed_for_write
from ._stream_write import WritePanes
from ._source import PatternSource, ReadFileRanges, output_coder
from ._write_path import ShardedPath, for_unbounded_input, parse_write_path

__all__ = ["ReadAllFromSackli", "ReadFromSackli", "ReadFromSackliBatched", "WriteToSackli"]

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
      as_rows: yield Beam Rows typed by the Arrow schema the bags were
        written with (by `sackli.arrow.write_table` or a schema'd
        `WriteToSackli`), so Beam SQL and DataFrames work on them. The schema
        file is read at construction.

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
        as_rows: bool = False,
    ) -> None:
        super().__init__()
        pattern = _pattern(file_pattern)
        reader_options = with_compression_type(_reader_options(options), compression_type)
        treatment = check_empty_match_treatment(empty_match_treatment)
        self._source = PatternSource(
            pattern, reader_options, _coder(coder), bool(with_metadata), treatment)
        self._rows: ReadFromSackliBatched | None = None
        if as_rows:
            if with_metadata or type(coder) is not coders.BytesCoder:
                raise ValueError("as_rows=True yields Beam Rows: it takes no coder and no "
                                 "with_metadata")
            encoding, self._row_type = stored_rows(pattern, reader_options, treatment)
            self._rows = ReadFromSackliBatched(
                pattern, encoding, options=reader_options, validate=False,
                empty_match_treatment=treatment)
        elif validate:
            self._source.validate()

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if self._rows is not None:
            return (pbegin | "ReadBatches" >> self._rows
                    | "ToRows" >> beam.ParDo(BatchesToRows(self._row_type))
                    .with_output_types(self._row_type))
        return pbegin.pipeline | iobase.Read(self._source)

    def display_data(self) -> dict[str, Any]:
        return self._source.display_data()


class ReadFromSackliBatched(beam.PTransform):
    """Reads bag files as batches of records: `pyarrow.RecordBatch`es
    through `sackli.arrow` (as Beam's `ReadFromParquetBatched` reads row
    groups), or lists of bytes with `decode="raw"`. Beam's cost per element
    (~10 µs) is then paid once per batch, not once per record.

    Args:
      file_pattern: as for `ReadFromSackli`.
      decode: None: one `large_binary` column `record`. "arrow" / "row" /
        "json": the columns of rows written by `sackli.arrow.write_table`
        (schema from the schema file beside the bags, or `schema`; "arrow"
        reads either Arrow row codec, as the schema file says). A function
        from a `large_binary` array to a RecordBatch. "raw": lists of bytes.
      columns: with "arrow"/"row"/"json", only these columns.
      compression_type: as for `ReadFromSackli`.
      options: as for `ReadFromSackli`.
      validate: as for `ReadFromSackli`.
      empty_match_treatment: as for `ReadFromSackli`.
      batch_size: records per batch (default: about 8 MiB of stored bytes).
      schema: the Arrow schema of "arrow"/"row"/"json" rows, instead of
        the file.

    Batches never span files or split ranges; every record is in exactly
    one batch, also when the runner splits ranges while they are read.
    """

    def __init__(
        self,
        file_pattern: str | os.PathLike[str],
        decode: Any = None,
        columns: Sequence[str] | None = None,
        compression_type: str = CompressionTypes.AUTO,
        *,
        options: ReaderOptions | None = None,
        batch_size: int | None = None,
        schema: Any = None,
        validate: bool = True,
        empty_match_treatment: str = DISALLOW,
    ) -> None:
        super().__init__()
        self._source = batched_source(
            _pattern(file_pattern), decode, None if columns is None else list(columns), schema,
            batch_size, with_compression_type(_reader_options(options), compression_type),
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
      coder: as for `ReadFromSackli`.
      compression_type: as for `ReadFromSackli`.
      options: as for `ReadFromSackli`.
      with_metadata: as for `ReadFromSackli`.
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
        `-SSSSS-of-NNNNN` (`-W-SSSSS-of-NNNNN` for unbounded input, and
        `-W-pane-P-SSSSS-of-NNNNN` when its windows can fire more than
        once); `P` is the pane's index (0 for bounded input).
      max_records_per_shard: start a new shard when one holds this many
        records; only when the runner decides the shard count (`@*`), for
        bounded input.
      max_bytes_per_shard: start a new shard when one holds this many
        record bytes (before compression); only as for
        `max_records_per_shard`.
      skip_if_empty: write no shard for an empty PCollection (older
        output of the same name is still replaced).
      triggering_frequency: for unbounded input, seconds per fixed window
        to write (it replaces the input's windowing, and is required for a
        globally windowed stream).

    A PCollection with a Beam schema (elements of `beam.Row` or a schema'd
    NamedTuple) and the default coder is written as Arrow rows, with the
    Arrow schema file beside the shards (as `sackli.arrow.write_table`
    writes them): `ReadFromSackli(..., as_rows=True)`,
    `ReadFromSackliBatched(..., decode="arrow")` and `sackli.arrow` read
    them back.

    The output PCollection holds the final file names. Shards are written
    under a temporary folder and renamed when all are complete; only then
    are older shard sets of the same name (any shard count) deleted.
    Unbounded input writes one shard set per window, named with the
    window (`name-2026-01-01T00-00-00_2026-01-01T00-00-10-00000-of-00001.bagz`),
    and one set per pane when its windows can fire more than once (early or
    late firings, allowed lateness): `name-<window>-pane-2-00000-of-00001.bagz`.
    Each pane's set is renamed into place once complete and replaces only
    older sets of the same window and pane.

    Raises:
      ValueError: a path of another form, or conflicting arguments; for
        unbounded input, a globally windowed stream without
        `triggering_frequency`, or a template without `W` (or without `P`
        when windows can fire more than once).
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
        # Schema'd elements are written as Arrow rows only with the default
        # coder: a coder given means the user chose the bytes.
        schema = row_schema(pcoll.element_type) if type(self._coder) is coders.BytesCoder else None
        if pcoll.is_bounded:
            records, write = pcoll, iobase.Write(self._sink)
        else:
            records, write = self._stream_write(pcoll)
        if schema is None:
            return records | write
        files = records | "EncodeRows" >> EncodeRows(schema) | "Write" >> write
        finished = files
        if not pcoll.is_bounded:
            # One schema file per pane's set as soon as that set is final,
            # not when the names' own windows next fire.
            finished = files | "EveryFileNow" >> beam.WindowInto(
                beam.window.GlobalWindows(), trigger=trigger.Repeatedly(trigger.AfterCount(1)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING)
        _ = finished | "WriteSchema" >> WriteSchemaFile(schema)
        return files

    def _stream_write(self, pcoll: beam.PCollection) -> tuple[beam.PCollection, beam.PTransform]:
        """The records of an unbounded `pcoll` in the windows they are
        written in, and the transform writing one shard set per pane."""
        if self._limits:
            # A pane's shards are written together: the limits would need
            # a shard count of their own per pane.
            raise ValueError(
                "max_records_per_shard and max_bytes_per_shard apply to bounded input only")
        records = windowed_for_write(pcoll, self._triggering_frequency)
        where = for_unbounded_input(self._where, fires_once(records.windowing))
        return records, "WritePanes" >> WritePanes(self._sink_to(where))

    def display_data(self) -> dict[str, Any]:
        return self._sink.display_data()
