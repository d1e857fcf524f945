"""What the transforms show in a runner's UI (`display_data`): the settings
that decide what a read yields or a write stores, as they will be used."""

from __future__ import annotations

from typing import Any

from apache_beam import coders
from apache_beam.transforms import display

from .._options import (
    CompressionAutoDetect,
    CompressionNone,
    CompressionZstd,
    ReaderOptions,
)

__all__ = ["describe_compression", "read_display_data"]


def describe_compression(compression: Any, writing: bool) -> str:
    """How records are (de)compressed, in words (`zstd level 3`, `none`,
    `auto (zstd for .bagz names)`): the rule, not Beam's whole-file
    `compression_type`, which is always raw for bags. The zstd level
    matters only when `writing`."""
    if isinstance(compression, CompressionZstd):
        text = f"zstd level {compression.level}" if writing else "zstd"
        if writing and compression.literals == "raw":
            text += ", raw literals"
        if compression.dictionary:
            text += f" with a dictionary of {len(compression.dictionary)} bytes"
        return text
    if isinstance(compression, CompressionNone):
        return "none"
    if isinstance(compression, CompressionAutoDetect):
        return "auto (zstd for .bagz names)"
    return repr(compression)


def read_display_data(
    options: ReaderOptions, coder: coders.Coder, with_metadata: bool, **settings: Any
) -> dict[str, Any]:
    """Display items of a read: record compression, limits placement and
    storage, the coder, metadata, and any further `settings` (named items,
    e.g. file_pattern=...)."""
    items = {
        name: display.DisplayDataItem(value if isinstance(value, (int, str, bool)) else repr(value),
                                      label=name.replace("_", " ").capitalize())
        for name, value in settings.items()
    }
    items.update(
        record_compression=display.DisplayDataItem(
            describe_compression(options.compression, writing=False), label="Record Compression"),
        limits_placement=display.DisplayDataItem(
            options.limits_placement.name, label="Limits Placement"),
        limits_storage=display.DisplayDataItem(options.limits_storage.name, label="Limits Storage"),
        coder=display.DisplayDataItem(repr(coder), label="Coder"),
        with_metadata=display.DisplayDataItem(with_metadata, label="With Metadata"),
    )
    return items
