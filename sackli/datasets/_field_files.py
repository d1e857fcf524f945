"""Per-field compression (a sackli extension) and the file each field lives in.

By default every field is `<field>.bag`, raw, as `bags` writes it. A writer
given `compression={"caption": "zstd"}` (or `"zstd(LEVEL)"`) stores that
field as `caption.bagz`, each non-empty value one zstd frame, and records the
choice in spec.json under the key `sackli/compression`: a key that can never
be a field (field files cannot contain `/`). `bags` cannot read such a
dataset; without compression spec.json stays exactly what `bags` writes.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from .. import CompressionZstd

__all__ = ["COMPRESSION_KEY", "field_file", "parse_compression"]

COMPRESSION_KEY = "sackli/compression"

_ZSTD = re.compile(r"^zstd(?:\((-?[0-9]+)\))?$")


def parse_compression(
    compression: Mapping[str, Any] | None, fields: Mapping[str, Any], where: str
) -> dict[str, CompressionZstd]:
    """field -> zstd settings for the fields to compress.

    Raises TypeError when `compression` is not a dict of str, ValueError for
    a field the spec does not have or a value other than `zstd` /
    `zstd(LEVEL)`.
    """
    if compression is None:
        return {}
    if not isinstance(compression, Mapping):
        raise TypeError(f"{where}: compression must be a dict, not {type(compression).__name__}")
    parsed = {}
    for field, value in compression.items():
        if field not in fields:
            raise ValueError(f"{where}: compression names field {field!r}, which the spec lacks")
        match = _ZSTD.match(value) if isinstance(value, str) else None
        if not match:
            raise ValueError(
                f"{where}: compression of field {field!r} must be 'zstd' or 'zstd(LEVEL)', "
                f"not {value!r}")
        try:
            parsed[field] = CompressionZstd(*(int(x) for x in match.groups() if x))
        except ValueError as error:
            raise ValueError(f"{where}: compression of field {field!r}: {error}") from None
    return parsed


def field_file(field: str, compressed: bool) -> str:
    """The file name of a field: `<field>.bagz` when compressed, else `<field>.bag`."""
    return f"{field}.bagz" if compressed else f"{field}.bag"
