"""What the transforms show in a runner's UI (`display_data`): the settings
that decide what a read yields or a write stores, as they will be used."""

from __future__ import annotations

from typing import Any

from apache_beam import coders
from apache_beam.options.value_provider import ValueProvider
from apache_beam.transforms import display

from .. import CompressionAutoDetect, CompressionNone, CompressionZstd
from .._bulk import ReaderOptions, WriterOptions

__all__ = ["describe_compression", "provided_write_display_data", "read_display_data"]


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


def _setting_items(settings: dict[str, Any]) -> dict[str, display.DisplayDataItem]:
    """Display items of named settings; a ValueProvider shows as Beam prints
    it (`RuntimeValueProvider(option: out, type: str, default_value:
    None)`): its value may exist only on the workers."""
    return {
        name: display.DisplayDataItem(
            value if isinstance(value, (int, str, bool)) else
            str(value) if isinstance(value, ValueProvider) else repr(value),
            label=name.replace("_", " ").capitalize())
        for name, value in settings.items()
    }


def provided_write_display_data(
    options: WriterOptions, coder: coders.Coder, **given: Any
) -> dict[str, Any]:
    """Display items of a write whose output a template provides: the
    output arguments as `given` (providers described, not resolved), the
    record compression (AUTO still follows the suffix, known on the
    workers), the limits placement and the coder."""
    return _setting_items(given) | {
        "record_compression": display.DisplayDataItem(
            describe_compression(options.compression, writing=True), label="Record Compression"),
        "limits_placement": display.DisplayDataItem(
            options.limits_placement.name, label="Limits Placement"),
        "coder": display.DisplayDataItem(type(coder).__name__, label="Coder"),
    }


def read_display_data(
    options: ReaderOptions, coder: coders.Coder, with_metadata: bool, **settings: Any
) -> dict[str, Any]:
    """Display items of a read: record compression, limits placement and
    storage, the coder, metadata, and any further `settings` (named items,
    e.g. file_pattern=...)."""
    items = _setting_items(settings)
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
