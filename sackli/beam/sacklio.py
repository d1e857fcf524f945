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
from typing import Any, Sequence, Tuple, Union

import apache_beam as beam
from apache_beam import coders
from apache_beam.io import iobase
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.options.value_provider import ValueProvider
from apache_beam.transforms import trigger, window
from apache_beam.typehints.decorators import TypeCheckError
from apache_beam.typehints.native_type_compatibility import convert_to_beam_type
from apache_beam.typehints.typehints import is_consistent_with

from .. import CompressionZstd, LimitsPlacement
from .._bulk import ReaderOptions, WriterOptions
from .._sets import strip_local_prefix
from .._storage import path_argument
from ._batched import batched_source, register_batch_coder
from ._compression import with_compression_type
from ._display import provided_write_display_data, read_display_data
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
from ._provided import describe, is_deferred, now_or_at_run_time, value
from ._provided_write import WriteToProvidedPath
from ._write_path import ShardedPath, for_unbounded_input, parse_write_path

__all__ = ["ReadAllFromSackli", "ReadFromSackli", "ReadFromSackliBatched", "WriteToSackli"]

# What WriteToSackli takes with the default BytesCoder: the records.
_BYTES_LIKE = Union[bytes, bytearray, memoryview]
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
    say (Beam's base `Coder.to_type_hint` raises NotImplementedError); a
    tuple's parts each say for themselves, so `with_metadata` reads are
    `Tuple[str, int, Any]` at worst."""
    if type(coder) is coders.TupleCoder:
        return Tuple[tuple(_type_hint(part) for part in coder.coders())]
    try:
        return coder.to_type_hint()
    except NotImplementedError:
        return Any


def _typed_read(source: iobase.BoundedSource) -> beam.PTransform:
    """Beam's Read of `source`, its output declared as the type the
    source's coder decodes to (Beam would say Any), so that type checks of
    the transforms downstream see it when the pipeline is built."""
    return iobase.Read(source).with_output_types(_type_hint(source.default_output_coder()))


def _known(argument: Any) -> bool:
    """Whether `argument` has its value now, while the pipeline is built
    (not a template's RuntimeValueProvider, whose value the workers get)."""
    return not isinstance(argument, ValueProvider) or argument.is_accessible()


def _bundle_size(desired_bundle_size: Any) -> int:
    """`desired_bundle_size` checked: an int >= 1."""
    if isinstance(desired_bundle_size, bool) or not isinstance(desired_bundle_size, int):
        raise TypeError(
            f"desired_bundle_size must be an int, not {type(desired_bundle_size).__name__}"
        )
    if desired_bundle_size < 1:
        raise ValueError(f"desired_bundle_size must be >= 1, not {desired_bundle_size}")
    return desired_bundle_size


def _timestamped(element_type: Any) -> bool:
    """Whether Beam typed a PCollection by the `TimestampedValue`s a
    `Create` or a function returned: the runner unwraps them, so the
    elements' own type is unknown (taken as Any)."""
    parts = getattr(element_type, "union_types", (element_type,))
    return any(part is window.TimestampedValue for part in parts)


def _pattern(file_pattern: Any) -> str:
    """`file_pattern` as a str, checked without I/O: every entry must be
    storage sackli's Reader can open."""
    pattern = path_argument(file_pattern, "file_pattern")
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
        `name@*.ext`, comma lists) or a Beam glob (`gs://b/dir/*.bagz`); or
        a ValueProvider of one (a classic template's option), read and
        checked on the workers (`validate` then lists the files there).
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
        file is read at construction, so the pattern must be known then
        (a ValueError for a template's RuntimeValueProvider).

    Files are listed and opened lazily, on workers. Each file splits into
    byte ranges of about the runner's desired bundle size.

    The output is typed as the coder's `to_type_hint()` says (`bytes` by
    default, Any when it does not say; `Tuple[str, int, T]` with
    `with_metadata`), so type checks downstream run when the pipeline is
    built.
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
        # A str, or for a template's ValueProvider one checked on the workers.
        pattern = now_or_at_run_time(_pattern, file_pattern)
        reader_options = with_compression_type(_reader_options(options), compression_type)
        treatment = check_empty_match_treatment(empty_match_treatment)
        self._source = PatternSource(
            pattern, reader_options, _coder(coder), bool(with_metadata), treatment)
        self._rows: ReadFromSackliBatched | None = None
        if as_rows:
            if with_metadata or type(coder) is not coders.BytesCoder:
                raise ValueError("as_rows=True yields Beam Rows: it takes no coder and no "
                                 "with_metadata")
            if not _known(pattern):
                raise ValueError(
                    "as_rows=True types the PCollection by the bags' schema file, read when the "
                    f"pipeline is built, but file_pattern is known only at run time ({pattern}); "
                    "give it as a str, or read ReadFromSackliBatched(file_pattern, 'arrow')")
            encoding, self._row_type = stored_rows(value(pattern), reader_options, treatment)
            self._rows = ReadFromSackliBatched(
                pattern, encoding, options=reader_options, validate=False,
                empty_match_treatment=treatment)
        elif validate and _known(pattern):
            self._source.validate()  # else on the workers, with the same errors

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        if self._rows is not None:
            return (pbegin | "ReadBatches" >> self._rows
                    | "ToRows" >> beam.ParDo(BatchesToRows(self._row_type))
                    .with_output_types(self._row_type))
        return pbegin.pipeline | _typed_read(self._source)

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

    The output is typed `pyarrow.RecordBatch` (`List[bytes]` for "raw").
    Batches never span files: each file is cut into batches on a grid of
    its own, and a range reads the whole batches that start in it, so
    splits (also while a range is read) move whole batches and every record
    is in exactly one batch.
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
        pattern = now_or_at_run_time(_pattern, file_pattern)
        self._source = batched_source(
            pattern, decode, None if columns is None else list(columns), schema,
            batch_size, with_compression_type(_reader_options(options), compression_type),
            check_empty_match_treatment(empty_match_treatment),
        )
        if validate and _known(pattern):
            self._source.validate()  # else on the workers, with the same errors

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection:
        register_batch_coder()  # RecordBatch PCollections then use ArrowBatchCoder
        return pbegin.pipeline | _typed_read(self._source)

    def display_data(self) -> dict[str, Any]:
        return self._source.display_data()


class ReadAllFromSackli(beam.PTransform):
    """Reads the records of every pattern in a PCollection of patterns.

    Each pattern is expanded on a worker into its files; the files are
    redistributed and read as ranges of about `desired_bundle_size` bytes by
    a splittable DoFn (so runners can split them further while reading).

    Args:
      coder: as for `ReadFromSackli`.
      compression_type: as for `ReadFromSackli`, or a ValueProvider of it
        (a classic template's option, read and checked on the workers).
      options: as for `ReadFromSackli`.
      with_metadata: as for `ReadFromSackli`.
      desired_bundle_size: bytes per initial range of a file, or a
        ValueProvider of it (as `compression_type`).
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
        # Values, or for a template's ValueProviders providers of values
        # checked on the workers, where ReadFileRanges takes them.
        self._bundle_bytes = now_or_at_run_time(_bundle_size, desired_bundle_size)
        self._base_options = _reader_options(options)
        self._compression_type = compression_type
        self._options = now_or_at_run_time(
            with_compression_type, self._base_options, compression_type)
        self._coder = _coder(coder)
        self._with_metadata = bool(with_metadata)
        self._empty_match_treatment = check_empty_match_treatment(empty_match_treatment)

    def expand(self, patterns: beam.PCollection) -> beam.PCollection:
        options, treatment = self._options, self._empty_match_treatment
        read = beam.ParDo(
            ReadFileRanges(options, self._coder, self._with_metadata, self._bundle_bytes)
        ).with_output_types(_type_hint(output_coder(self._coder, self._with_metadata)))
        return (
            patterns
            | "ExpandPatterns" >> beam.FlatMap(
                lambda pattern: [
                    f for f in expand_pattern(_pattern(pattern), value(options), treatment)
                    if f.size])
            | "Redistribute" >> beam.Reshuffle()
            | "ReadRanges" >> read
        )

    def display_data(self) -> dict[str, Any]:
        provided = {"compression_type": self._compression_type} if is_deferred(self._options) else {}
        return read_display_data(
            self._base_options if provided else self._options, self._coder, self._with_metadata,
            empty_match_treatment=self._empty_match_treatment,
            desired_bundle_size=describe(self._bundle_bytes), **provided,
        )


class _SinkFactory:
    """WriteToSackli's BagSink for a parsed path, after the checks that
    need the path: called at construction for a path known then, on the
    workers for one a template provides. A class, not a closure, so it
    pickles with pickle, dill and cloudpickle."""

    def __init__(
        self, coder: coders.Coder, options: WriterOptions, limits: ShardLimits,
        skip_if_empty: bool, triggering_frequency: int | None, overwrite: bool,
    ) -> None:
        self._coder = coder
        self._options = options
        self._limits = limits
        self._skip_if_empty = skip_if_empty
        self._triggering_frequency = triggering_frequency
        self._overwrite = overwrite

    def __call__(self, where: ShardedPath) -> BagSink:
        if self._limits and where.num_shards != 0:
            raise ValueError(
                "max_records_per_shard and max_bytes_per_shard start new shards as they fill, "
                f"so they need a shard count the runner decides ('@*'), not {where.num_shards}"
            )
        if "U" in where.template and self._options.limits_placement == LimitsPlacement.SEPARATE:
            raise ValueError(
                "a shard_name_template with a UUID ('U') cannot name SEPARATE limits "
                "files after their shards; use TAIL placement or another template"
            )
        return BagSink(
            where, self._coder, self._options, shard_limits=self._limits,
            skip_if_empty=self._skip_if_empty, triggering_frequency=self._triggering_frequency,
            overwrite=self._overwrite,
        )


class WriteToSackli(beam.PTransform):
    """Writes a PCollection to bag shards.

    Args:
      file_path: `dir/name@N.ext` (N shards named `name-SSSSS-of-NNNNN.ext`),
        `dir/name@*.ext` (the runner decides the number of shards) or
        `dir/name.ext@0` (one unsharded file), `.ext` being `.bag` or `.bagz`
        optionally preceded by more suffix (`name@4.data.bagz`). Any Beam
        file system: local, `gs://`, `s3://`. Or a plain prefix `dir/name`,
        as for Beam's `WriteToTFRecord`: shards `dir/name-SSSSS-of-NNNNN`
        plus `file_name_suffix`, by default `.bag`, or `.bagz` when the
        records are zstd-compressed (`CompressionTypes.ZSTD`, or `options`
        with zstd compression), so the names tell readers how to read
        them. A prefix must not end in `.bag`/`.bagz` or hold an `@` (a
        ValueError: did you mean `name.bag@0` or `name@N.bag`?). A
        ValueProvider (a classic template's option) is read on the workers.
      coder: encodes each element to a record (default: `BytesCoder`).
      compression_type: Beam's `CompressionTypes`, as bagz's `bagzio`
        takes it: AUTO (zstd for `.bagz` names), UNCOMPRESSED or ZSTD; it
        compresses each record, never the whole file.
      file_name_suffix: the suffix of a prefix's shards: `("dir/name",
        file_name_suffix=".bagz", num_shards=3)` writes
        `dir/name-00000-of-00003.bagz`...; not with an `@` path. May be a
        ValueProvider.
      options: a `sackli.Writer.Options` (compression, zstd level and
        dictionary, limits placement). By default `.bagz` shards are zstd
        level 3, `.bag` shards raw.
      num_shards: overrides the path's number of shards (with `@*` or a
        prefix; None or 0: the runner decides). May be a ValueProvider.
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
      skip_if_empty: write no shard for an empty PCollection (an older
        set of the same count is still replaced).
      triggering_frequency: for unbounded input, seconds per fixed window
        to write (it replaces the input's windowing, and is required for a
        globally windowed stream).
      overwrite: replace shard sets of the same name with another shard
        count (deleted, with their `limits.`, schema and manifest files,
        once the new set is in place). Without it such a set is refused
        (FileExistsError naming it), as `sackli.ShardedWriter` refuses it:
        when the pipeline starts for a fixed count, before any shard is
        renamed into place for `@*`. A set of the same count is replaced.

    A PCollection with a Beam schema (elements of `beam.Row` or a schema'd
    NamedTuple) and the default coder is written as Arrow rows, with the
    Arrow schema file beside the shards (as `sackli.arrow.write_table`
    writes them): `ReadFromSackli(..., as_rows=True)`,
    `ReadFromSackliBatched(..., decode="arrow")` and `sackli.arrow` read
    them back.

    The output PCollection holds the final file names. Shards are written
    under a temporary folder and renamed when all are complete; only then
    are the files of the older set they replace deleted (and, with
    `overwrite`, other sets of the same name).
    Unbounded input writes one shard set per window, named with the
    window (`name-2026-01-01T00-00-00_2026-01-01T00-00-10-00000-of-00001.bagz`),
    and one set per pane when its windows can fire more than once (early or
    late firings, allowed lateness): `name-<window>-pane-2-00000-of-00001.bagz`.
    Each pane's set is renamed into place once complete, and the rule above
    applies to the sets of the same window and pane only.

    Raises:
      ValueError: a path of another form, or conflicting arguments; for
        unbounded input, a globally windowed stream without
        `triggering_frequency`, or a template without `W` (or without `P`
        when windows can fire more than once). The checks of a path given by a template's
        ValueProvider run on the workers, with the same errors.
      TypeCheckError: when the pipeline is built, for elements of a type
        the coder does not take: the default `BytesCoder` takes bytes,
        bytearray and memoryview (or schema'd rows), another coder the type
        its `to_type_hint()` names.
      FileExistsError: (raised in the pipeline) another shard set of the
        name exists and `overwrite` is False.
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
        overwrite: bool = False,
    ) -> None:
        super().__init__()
        self._options = with_compression_type(_writer_options(options), compression_type)
        # A bare prefix's suffix says how its records are compressed.
        default_suffix = ".bagz" if isinstance(self._options.compression, CompressionZstd) else ".bag"
        # A ShardedPath, or for a template's ValueProviders one parsed on the workers.
        self._where = now_or_at_run_time(
            parse_write_path, file_path, num_shards, shard_name_template, file_name_suffix,
            default_suffix)
        # What display data shows of an output known only at run time.
        self._given_path = {
            "file_path": os.fspath(file_path) if isinstance(file_path, os.PathLike) else file_path,
            "file_name_suffix": file_name_suffix, "num_shards": num_shards}
        self._coder = _coder(coder)
        self._limits = ShardLimits(max_records_per_shard, max_bytes_per_shard)
        if triggering_frequency is not None and (
            isinstance(triggering_frequency, bool) or not isinstance(triggering_frequency, int)
            or triggering_frequency < 1
        ):
            raise ValueError(f"triggering_frequency must be seconds >= 1, not {triggering_frequency!r}")
        self._skip_if_empty = bool(skip_if_empty)
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be a bool, not {type(overwrite).__name__}")
        self._overwrite = overwrite
        self._triggering_frequency = triggering_frequency
        self._sinks = _SinkFactory(
            self._coder, self._options, self._limits, self._skip_if_empty,
            self._triggering_frequency, self._overwrite)
        # A BagSink, or for a provided path a provider of the one the
        # workers make (see _provided_write).
        self._sink = now_or_at_run_time(self._sinks, self._where)

    def _sink_to(self, where: ShardedPath) -> BagSink:
        return self._sinks(where)

    def _input_type(self, element_type: Any = None) -> Any:
        """The elements this transform takes: bytes-like ones with the
        default `BytesCoder` (or rows of a Beam schema, when
        `element_type` has one: they are written as Arrow rows), else the
        type the coder encodes (Any when it does not say)."""
        if type(self._coder) is not coders.BytesCoder:
            return _type_hint(self._coder)
        if element_type is not None and row_schema(element_type) is not None:
            return element_type
        return _BYTES_LIKE

    def type_check_inputs(self, pvalueish: Any) -> None:
        """Beam's check, when the pipeline is built, that the input's
        element type is one this transform takes (`_input_type`): an `int`
        PCollection is refused there, not by a worker at run time."""
        super().type_check_inputs(pvalueish)
        element_type = getattr(pvalueish, "element_type", None)
        if element_type is None or _timestamped(element_type):
            return
        hint = convert_to_beam_type(self._input_type(element_type))
        if not is_consistent_with(element_type, hint):
            why = (f"the coder {type(self._coder).__name__} encodes {hint}"
                   if type(self._coder) is not coders.BytesCoder else
                   "with the default BytesCoder it writes bytes-like elements (or rows of a "
                   "Beam schema); pass a coder for other elements")
            raise TypeCheckError(
                f"Input type hint violation at {self.label}: expected {hint}, got "
                f"{element_type}: {why}")

    def expand(self, pcoll: beam.PCollection) -> beam.PCollection:
        # Schema'd elements are written as Arrow rows only with the default
        # coder: a coder given means the user chose the bytes.
        schema = row_schema(pcoll.element_type) if type(self._coder) is coders.BytesCoder else None
        if pcoll.is_bounded:
            records = pcoll
            write = (iobase.Write(self._sink) if isinstance(self._sink, BagSink)
                     else WriteToProvidedPath(self._sink))
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
        # For a template's path, both on the workers (see `_provided`).
        where = now_or_at_run_time(for_unbounded_input, self._where, fires_once(records.windowing))
        return records, "WritePanes" >> WritePanes(now_or_at_run_time(self._sinks, where))

    def display_data(self) -> dict[str, Any]:
        if isinstance(self._sink, BagSink):
            return self._sink.display_data()
        return provided_write_display_data(self._options, self._coder, **{
            name: describe(given) for name, given in self._given_path.items()
            if given is not None})
