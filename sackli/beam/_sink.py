"""The file sink behind `WriteToSackli`: one sackli.Writer per shard,
finalised by Beam's temp-then-rename.

Each bundle writes its shard under Beam's temporary folder; Beam renames the
finished shards to their final names once all bundles succeeded, so a failed
or retried bundle never leaves a partial shard under a final name (see
`_shard_file` for how one shard is written). SEPARATE placement writes
`limits.<name>` beside each shard; it is renamed with its shard, before it.
"""

from __future__ import annotations

from typing import Any

from apache_beam import coders
from apache_beam.io import filebasedsink
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import display

from .._options import (
    CompressionAutoDetect,
    CompressionNone,
    CompressionZstd,
    LimitsPlacement,
    WriterOptions,
)
from .._format import has_zstd_suffix, limits_path_for
from ._shard_file import ShardFile
from ._write_path import ShardedPath

__all__ = ["BagSink"]

_MIME_TYPE = "application/octet-stream"


def _resolved(options: WriterOptions, suffix: str) -> WriterOptions:
    """`options` with auto-detected compression fixed by the final suffix
    (temporary names must not decide it)."""
    if not isinstance(options.compression, CompressionAutoDetect):
        return options
    compression = CompressionZstd() if has_zstd_suffix(suffix) else CompressionNone()
    return WriterOptions(
        limits_placement=options.limits_placement,
        compression=compression,
        max_parallelism=options.max_parallelism,
    )


class BagSink(filebasedsink.FileBasedSink):
    """A FileBasedSink whose shards are bags written by sackli.Writer."""

    def __init__(self, where: ShardedPath, coder: coders.Coder, options: WriterOptions) -> None:
        super().__init__(
            where.prefix,
            coder=coder,
            file_name_suffix=where.suffix,
            num_shards=where.num_shards,
            shard_name_template=where.template,
            mime_type=_MIME_TYPE,
            compression_type=CompressionTypes.UNCOMPRESSED,
        )
        self._options = _resolved(options, where.suffix)
        self._encode = None if type(coder) is coders.BytesCoder else coder.encode

    @property
    def _separate(self) -> bool:
        return self._options.limits_placement == LimitsPlacement.SEPARATE

    def open(self, temp_path: str) -> ShardFile:
        return ShardFile(temp_path, self._options)

    def write_record(self, file_handle: ShardFile, value: Any) -> None:
        if self._encode is None:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise TypeError(
                    f"WriteToSackli with BytesCoder writes bytes, not {type(value).__name__}; "
                    "pass a coder for other elements"
                )
            file_handle.write(value)
        else:
            file_handle.write(self._encode(value))

    def close(self, file_handle: ShardFile) -> None:
        file_handle.close()

    def pre_finalize(self, init_result: Any, writer_results: Any) -> None:
        """Deletes an earlier run's files under the final names, with their
        `limits.` files. Beam's own version globs for as many shards as
        bundles wrote, which misses `@N` outputs padded with empty shards and
        then keeps old shards whose size matches (its local checksum)."""
        count = max(self.num_shards, len(list(writer_results)))
        glob = self._get_final_name_glob(count)
        stale = [m.path for r in FileSystems.match([glob, limits_path_for(glob)]) for m in r.metadata_list]
        if stale:
            FileSystems.delete(stale)

    def finalize_windowed_write(
        self, init_result: Any, writer_results: Any, pre_finalize_results: Any, w: Any = None
    ) -> Any:
        if self._separate:
            self._rename_limits(sorted(writer_results), w)
        return super().finalize_windowed_write(
            init_result, writer_results, pre_finalize_results, w
        )

    def _rename_limits(self, writer_results: list[str], w: Any) -> None:
        """Moves each shard's limits file to its final name, before Beam
        moves the shards (skipping those a retried finalisation moved)."""
        sources = [limits_path_for(path) for path in writer_results]
        present = {m.path for r in FileSystems.match(sources) for m in r.metadata_list}
        moves = [
            (source, limits_path_for(self._get_final_name(shard, len(writer_results), w)))
            for shard, source in enumerate(sources)
            if source in present
        ]
        if moves:
            FileSystems.rename([m[0] for m in moves], [m[1] for m in moves])

    def display_data(self) -> dict[str, Any]:
        data = super().display_data()
        data["options"] = display.DisplayDataItem(repr(self._options), label="Writer Options")
        return data
