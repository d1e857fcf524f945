"""The file sink behind `WriteToSackli`: one sackli.Writer per shard,
finalised by Beam's temp-then-rename, replacing the older output last.

Each bundle writes its shard under Beam's temporary folder (see
`_shard_file`); when all bundles succeeded, Beam pads `@N` outputs with
empty shards, also in the temporary folder, and calls `finalize_write`.
Only then, with every new shard complete, does anything under the final
names change: the new shards are moved over their final names (SEPARATE
`limits.` files first), and only after the whole set is in place are the
files of older sets deleted (any shard count, with their `limits.` files),
so `name@*` is unambiguous afterwards. A failure before the moves leaves
the older output untouched; a retried finalisation skips moved shards.

Streaming (`_stream_write`): each pane of each window is finalised on its
own, with the window (and, for windows that fire more than once, the pane)
in the names (`_shard_names`), and replaces only that pane's older sets.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

from apache_beam import coders
from apache_beam.io import filebasedsink, iobase
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import display

from .._options import CompressionAutoDetect, CompressionNone, CompressionZstd, LimitsPlacement, WriterOptions
from .._format import has_zstd_suffix, limits_path_for
from ._display import describe_compression
from ._shard_file import ShardFile
from ._shard_names import older_set_pattern, window_label, with_pane_letter
from ._write_path import ShardedPath

__all__ = ["BagSink", "ShardLimits", "record_encoder"]

_MIME_TYPE = "application/octet-stream"


def _resolved(options: WriterOptions, suffix: str) -> WriterOptions:
    """`options` with auto-detected compression fixed by the final suffix
    (temporary names must not decide it). ValueError for `atomic=False` or
    `durable=True`: Beam writes each shard under a temporary name and
    renames it through its own file systems, which neither writes in place
    nor syncs the rename."""
    for field, default in (("atomic", True), ("durable", False)):
        if getattr(options, field) != default:
            raise ValueError(
                f"WriteToSackli: {field}={not default} does not apply to Beam sinks: Beam "
                "writes each shard under a temporary name and renames it through its own "
                "file systems (which neither write in place nor sync the rename)")
    if not isinstance(options.compression, CompressionAutoDetect):
        return options
    compression = CompressionZstd() if has_zstd_suffix(suffix) else CompressionNone()
    return WriterOptions(
        limits_placement=options.limits_placement,
        compression=compression,
        max_parallelism=options.max_parallelism,
    )


def record_encoder(coder: coders.Coder, transform: str) -> Any:
    """A function from an element to its record: `coder.encode`, or for
    `BytesCoder` a check that the element already is bytes."""
    if type(coder) is not coders.BytesCoder:
        return coder.encode

    def as_record(value: Any) -> Any:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"{transform} with BytesCoder writes bytes, not {type(value).__name__}; "
                "pass a coder for other elements"
            )
        return value

    return as_record


class ShardLimits:
    """When a shard is full: `max_records` records or `max_bytes` record
    bytes (before compression, as Beam counts them); None for no limit."""

    def __init__(self, max_records: int | None, max_bytes: int | None) -> None:
        for name, value in (("max_records_per_shard", max_records), ("max_bytes_per_shard", max_bytes)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, not {value}")
        self.max_records = max_records
        self.max_bytes = max_bytes

    def __bool__(self) -> bool:
        return self.max_records is not None or self.max_bytes is not None

    def full(self, records: int, record_bytes: int) -> bool:
        return (self.max_records is not None and records >= self.max_records) or (
            self.max_bytes is not None and record_bytes >= self.max_bytes
        )


class _ShardWriter(iobase.Writer):
    """Beam's writer of one temporary shard, counting what it wrote so
    the sink can start a new shard when this one is full."""

    def __init__(self, sink: "BagSink", temp_shard_path: str) -> None:
        self.sink = sink
        self.temp_shard_path = temp_shard_path  # Beam's windowed DoFn reads it
        self._shard = sink.open(temp_shard_path)
        self._records = 0
        self._bytes = 0

    def write(self, value: Any) -> None:
        record = self.sink.encode(value)
        self._shard.write(record)
        self._records += 1
        self._bytes += len(record)

    def at_capacity(self) -> bool:
        return self.sink.shard_limits.full(self._records, self._bytes)

    def close(self) -> str:
        self._shard.close()
        return self.temp_shard_path


class BagSink(filebasedsink.FileBasedSink):
    """A FileBasedSink whose shards are bags written by sackli.Writer."""

    def __init__(
        self,
        where: ShardedPath,
        coder: coders.Coder,
        options: WriterOptions,
        *,
        shard_limits: ShardLimits | None = None,
        skip_if_empty: bool = False,
        triggering_frequency: int | None = None,
    ) -> None:
        super().__init__(
            where.prefix,
            coder=coder,
            file_name_suffix=where.suffix,
            num_shards=where.num_shards,
            shard_name_template=where.template,
            mime_type=_MIME_TYPE,
            compression_type=CompressionTypes.UNCOMPRESSED,
            skip_if_empty=skip_if_empty,
            triggering_frequency=triggering_frequency,
        )
        self.where = where
        self.shard_name_format = with_pane_letter(self.shard_name_format)
        self.shard_limits = shard_limits or ShardLimits(None, None)
        self._options = _resolved(options, where.suffix)
        self.encode = record_encoder(coder, "WriteToSackli")

    @property
    def _separate(self) -> bool:
        return self._options.limits_placement == LimitsPlacement.SEPARATE

    def open(self, temp_path: str) -> ShardFile:
        return ShardFile(temp_path, self._options)

    def open_writer(self, init_result: str, uid: str) -> _ShardWriter:
        # The final suffix ends the temporary name too (as in Beam's own).
        name = FileSystems.split(self.where.prefix)[1]
        return _ShardWriter(self, FileSystems.join(init_result, uid) + "." + name + self.where.suffix)

    def write_record(self, file_handle: ShardFile, value: Any) -> None:
        file_handle.write(self.encode(value))

    def close(self, file_handle: ShardFile) -> None:
        file_handle.close()

    def _get_final_name(self, shard_num: int, num_shards: int, w: Any = None, pane: int = 0) -> str:
        label = window_label(w)
        return self.where.prefix + self.shard_name_format % dict(
            shard_num=shard_num, num_shards=num_shards, uuid=uuid.uuid4(),
            window=label, window_utc=label, pane=pane,
        ) + self.where.suffix

    def pre_finalize(self, init_result: Any, writer_results: Any) -> None:
        """Nothing: older output is replaced in `finalize_windowed_write`,
        once the new set is complete (Beam's version deletes it here,
        before the empty shards of `@N` are even made)."""

    def pre_finalize_windowed(self, init_result: Any, writer_results: Any, window: Any = None) -> None:
        """Nothing, as `pre_finalize`."""

    def finalize_windowed_write(
        self, init_result: Any, writer_results: Any, pre_finalize_results: Any, w: Any = None,
        pane: int = 0,
    ) -> Iterator[str]:
        """Moves the complete set `writer_results` (temporary shards, in
        shard order once sorted) of window `w`, pane `pane`, to its final
        names, then deletes that pane's older sets; yields the final names."""
        temps = sorted(writer_results)
        finals = [self._get_final_name(shard, len(temps), w, pane) for shard in range(len(temps))]
        pairs = list(zip(temps, finals))
        if self._separate:
            # A shard never reaches its final name without its limits.
            self._move([(limits_path_for(t), limits_path_for(f)) for t, f in pairs])
        self._move(pairs)
        kept = set(finals) | ({limits_path_for(f) for f in finals} if self._separate else set())
        self._delete_older_sets(kept, w, pane)
        try:
            FileSystems.delete([init_result])
        except IOError:
            pass  # a left-over empty temporary folder is harmless
        yield from finals

    def _move(self, pairs: list[tuple[str, str]]) -> None:
        """Moves each temporary file over its final name; a pair whose
        temporary file is gone but whose final name exists was moved by an
        earlier attempt of this finalisation."""
        if not pairs:
            return
        # Temporary names of windowed writes hold `[0.0, 10.0)` (glob
        # syntax), so their folders are listed rather than the names matched.
        folders = {FileSystems.split(temp)[0] for temp, _ in pairs}
        present = _existing([FileSystems.join(f, "*") for f in folders] + [f for _, f in pairs])
        lost = [temp for temp, final in pairs if temp not in present and final not in present]
        if lost:
            raise BeamIOError(f"shards of this write are missing before finalisation: {lost}")
        moves = [(temp, final) for temp, final in pairs if temp in present]
        if moves:
            FileSystems.rename([m[0] for m in moves], [m[1] for m in moves])

    def _delete_older_sets(self, kept: set[str], w: Any, pane: int) -> None:
        """Deletes the files of older shard sets of this output (window and
        pane), with any shard count, and their `limits.` files."""
        where = self.where
        older = older_set_pattern(where.prefix, self.shard_name_template, where.suffix, w, pane)
        globs = [where.prefix + "*" + where.suffix]
        globs.append(limits_path_for(globs[0]))
        stale = [p for p in _existing(globs) if p not in kept and older.fullmatch(p)]
        if stale:
            FileSystems.delete(stale)

    def display_data(self) -> dict[str, Any]:
        where = self.where
        shards = "decided by the runner" if where.num_shards == 0 else where.num_shards
        data = {
            "file_pattern": display.DisplayDataItem(where.pattern(), label="File Pattern"),
            "shards": display.DisplayDataItem(shards, label="Number of Shards"),
            "shard_name_template": display.DisplayDataItem(
                self.shard_name_template or "(one unsharded file)", label="Shard Name Template"),
            "record_compression": display.DisplayDataItem(
                describe_compression(self._options.compression, writing=True), label="Record Compression"),
            "limits_placement": display.DisplayDataItem(
                self._options.limits_placement.name, label="Limits Placement"),
            "coder": display.DisplayDataItem(type(self.coder).__name__, label="Coder"),
        }
        optional = {
            "max_records_per_shard": ("Max Records per Shard", self.shard_limits.max_records),
            "max_bytes_per_shard": ("Max Bytes per Shard", self.shard_limits.max_bytes),
            "skip_if_empty": ("Skip if Empty", self.skip_if_empty or None),
            "triggering_frequency": ("Triggering Frequency", self.triggering_frequency or None),
        }
        for key, (label, value) in optional.items():
            if value is not None:
                data[key] = display.DisplayDataItem(value, label=label)
        return data


def _existing(paths_or_globs: list[str]) -> set[str]:
    """The existing files among `paths_or_globs`, in one listing call."""
    return {m.path for r in FileSystems.match(paths_or_globs) for m in r.metadata_list}
