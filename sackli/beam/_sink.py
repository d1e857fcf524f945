"""The file sink behind `WriteToSackli`: one sackli.Writer per shard,
finalised by Beam's temp-then-rename, replacing the older output last.

Each bundle writes its shard under Beam's temporary folder (see
`_shard_file`); when all bundles succeeded, Beam pads `@N` outputs with
empty shards, also in the temporary folder, and calls `finalize_write`.
Only then, with every new shard complete, does anything under the final
names change: the new shards are moved over their final names (SEPARATE
`limits.` files first), and only after the whole set is in place are the
left-overs of an older set of the same count deleted. A failure before the
moves leaves the older output untouched; a retried finalisation skips
moved shards.

Another shard count is the rule of `sackli.ShardedWriter`
(`sackli._set_conflicts`): a set of the same name with another count is
refused (FileExistsError naming it, before anything under the final names
changes: at `initialize_write` when the count is fixed, and again before
the moves, where `@*` learns its count), unless `overwrite=True`; then it
is deleted, with its `limits.` files, schema file and manifest, once the
new set is in place, so `name@*` is unambiguous afterwards.

Streaming (`_stream_write`): each pane of each window is finalised on its
own, with the window (and, for windows that fire more than once, the pane)
in the names (`_shard_names`), and the rule applies to that pane's sets.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Iterator

from apache_beam import coders
from apache_beam.io import filebasedsink, iobase
from apache_beam.io.filesystem import BeamIOError, CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import display

from .. import CompressionAutoDetect, CompressionNone, CompressionZstd, LimitsPlacement
from .._bulk import ReaderOptions, WriterOptions
from .._sets import (
    LIMITS_PREFIX, checksums_path_for, has_zstd_suffix, limits_path_for, manifest_url,
    other_sets_error, set_files, spec_of,
)
from ._display import describe_compression
from ._shard_file import ShardFile
from ._shard_names import older_set_pattern, window_label, with_pane_letter
from ._write_path import ShardedPath

__all__ = ["BagSink", "ShardLimits", "delete_quietly", "record_encoder"]

_MIME_TYPE = "application/octet-stream"
# Template letters of the window: a set they name is known only at
# finalisation.
_WINDOW_LETTERS = re.compile(r"[WV]")


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
        checksum=options.checksum,
        record_checksums=options.record_checksums,
    )


class _BytesRecord:
    """An element as its record under `BytesCoder`: the element itself,
    checked to be bytes-like. A class of the module, not a closure, so the
    sinks holding it pickle with pickle, dill and cloudpickle alike."""

    def __init__(self, transform: str) -> None:
        self._transform = transform

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"{self._transform} with BytesCoder writes bytes, not {type(value).__name__}; "
                "pass a coder for other elements"
            )
        return value


def record_encoder(coder: coders.Coder, transform: str) -> Any:
    """A picklable function from an element to its record: `coder.encode`
    (a bound method pickles with its coder), or for `BytesCoder` a check
    that the element already is bytes."""
    if type(coder) is not coders.BytesCoder:
        return coder.encode
    return _BytesRecord(transform)


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
        overwrite: bool = False,
    ) -> None:
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be a bool, not {type(overwrite).__name__}")
        self.overwrite = overwrite
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

    @property
    def _raw(self) -> bool:
        # Raw records are the ones a CRC-32C sidecar may check.
        return isinstance(self._options.compression, CompressionNone)

    def reader_options(self) -> ReaderOptions:
        """How to read back a shard this sink wrote (streaming merges
        shard files of one pane, `_stream_write`)."""
        return ReaderOptions(limits_placement=self._options.limits_placement,
                             compression=self._options.compression)

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

    def initialize_write(self) -> str:
        """Refuses other shard sets of this output (another count, unless
        `overwrite`) when the count is fixed and no window names the set,
        so a doomed write fails before it starts; then Beam's temporary
        folder."""
        count = self.where.num_shards
        if count and not _WINDOW_LETTERS.search(self.shard_name_template):
            finals = [self._get_final_name(shard, count) for shard in range(count)]
            self._check_other_sets(finals, self._sets_beside(finals, None, 0)[1])
        return super().initialize_write()

    def pre_finalize(self, init_result: Any, writer_results: Any) -> None:
        """Nothing: older output is replaced in `finalize_windowed_write`,
        once the new set is complete (Beam's version deletes it here,
        before the empty shards of `@N` are even made)."""

    def pre_finalize_windowed(self, init_result: Any, writer_results: Any, window: Any = None) -> None:
        """Nothing, as `pre_finalize`."""

    def finalize_windowed_write(
        self, init_result: Any, writer_results: Any, pre_finalize_results: Any, w: Any = None,
        pane: int = 0, in_order: bool = False,
    ) -> Iterator[str]:
        """Moves the complete set `writer_results` (temporary shards, in
        shard order once sorted, or as given if `in_order`) of window `w`,
        pane `pane`, to its final names, then deletes what is left of that
        pane's older set of the same count and, with `overwrite`, its sets
        of other counts (refused before the moves without it); yields the
        final names."""
        temps = list(writer_results) if in_order else sorted(writer_results)
        finals = [self._get_final_name(shard, len(temps), w, pane) for shard in range(len(temps))]
        stale, others = self._sets_beside(finals, w, pane)
        try:
            self._check_other_sets(finals, others)
        except FileExistsError:
            delete_quietly([init_result])  # the new shards: nothing else was touched
            raise
        pairs = list(zip(temps, finals))
        if self._separate:
            # A shard never reaches its final name without its limits.
            self._move([(limits_path_for(t), limits_path_for(f)) for t, f in pairs])
        if self._raw and self._options.record_checksums:
            # Nor without its checks (the sidecar goes first, as Writer's does).
            self._move([(checksums_path_for(t), checksums_path_for(f)) for t, f in pairs])
        elif self._raw:
            # A sidecar beside a final name checked the records it replaces.
            stale_checks = [checksums_path_for(f) for f in finals]
            delete_quietly(sorted(_existing(stale_checks)))
        self._move(pairs)
        # A manifest a sackli writer left for a set of these names describes
        # the objects just replaced: readers would take the new set as torn.
        manifests = [m for m in dict.fromkeys(map(manifest_url, finals)) if m]
        self._delete_sets([stale, *others.values()] if self.overwrite else [stale], manifests)
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

    def _sets_beside(
        self, finals: list[str], w: Any, pane: int
    ) -> tuple[list[str], dict[int | None, list[str]]]:
        """The existing files (shards and `limits.` files) of this output's
        sets in window `w`, pane `pane`, other than the new set's `finals`
        and their limits: (those of an older set of the same count, which
        the new set replaces; those of sets of other counts, by count, None
        for files whose names carry no count and that no final name
        overwrites)."""
        where = self.where
        kept = set(finals) | ({limits_path_for(f) for f in finals} if self._separate else set())
        older = older_set_pattern(where.prefix, self.shard_name_template, where.suffix, w, pane)
        glob = where.prefix + "*" + where.suffix
        stale: list[str] = []
        others: dict[int | None, list[str]] = {}
        count = len(finals) or where.num_shards  # `@N` with skip_if_empty: still N
        for path in sorted(_existing([glob, limits_path_for(glob)])):
            match = older.fullmatch(path)
            if path in kept or match is None:
                continue
            shard = path[:match.start("limits")] + path[match.end("limits"):] if match["limits"] else path
            of = None if match["count"] is None else int(match["count"])
            if shard in finals or of == count:
                stale.append(path)
            else:
                others.setdefault(of, []).append(path)
        return stale, others

    def _check_other_sets(self, finals: list[str], others: dict[int | None, list[str]]) -> None:
        """Raises FileExistsError naming `others`, the sets of this output
        with another shard count, unless `overwrite` (ShardedWriter's rule
        and wording: `sackli._set_conflicts`)."""
        if not others or self.overwrite:
            return
        named = {}
        for count, paths in sorted(others.items(), key=lambda item: item[0] or 0):
            shards = _shards(paths) or paths
            named[spec_of(shards[0]) if count is not None else "other shards"] = shards
        shard = finals[0] if finals else next(iter(named.values()))[0]
        target, ambiguous = spec_of(shard), spec_of(shard, "*")
        if ambiguous == shard or not finals:  # names without `-SSSSS-of-NNNNN`, or no new set
            target = ambiguous = self.where.pattern()
        raise other_sets_error(target, named, ambiguous)

    def _delete_sets(self, sets: list[list[str]], about: list[str]) -> None:
        """Deletes the listed files of each set (shards and `limits.`
        files), then the files about it (schema file, record format,
        manifest: `set_files`) and those of `about`, once the new set is in
        place."""
        own: list[str] = []
        about = list(about)
        for paths in sets:
            set_own, set_about = set_files(_shards(paths))
            own += paths + set_own + [checksums_path_for(p) for p in _shards(paths)]
            about += set_about
        present = _existing(own + about) if own or about else set()
        for batch in (own, about):
            gone = [p for p in dict.fromkeys(batch) if p in present]
            if gone:
                FileSystems.delete(gone)

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
            "overwrite": display.DisplayDataItem(self.overwrite, label="Overwrite Other Shard Sets"),
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


def _shards(paths: list[str]) -> list[str]:
    """The shards among `paths` (not their `limits.` files)."""
    return [p for p in paths if not FileSystems.split(p)[1].startswith(LIMITS_PREFIX)]


def delete_quietly(paths: list[str]) -> None:
    """Deletes `paths` (files or folders), ignoring failures: they are
    gone already (a retried finalisation), or left-over temporary files,
    which are harmless."""
    if not paths:
        return
    try:
        FileSystems.delete(paths)
    except IOError:
        pass


def _existing(paths_or_globs: list[str]) -> set[str]:
    """The existing files among `paths_or_globs`, in one listing call."""
    return {m.path for r in FileSystems.match(paths_or_globs) for m in r.metadata_list}
