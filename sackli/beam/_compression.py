"""Beam's `compression_type` argument, as bagz's `bagzio` and upstream
Säckli's `sacklio` take it, mapped onto sackli's options.

Bags compress each record, not the whole file, so of Beam's
`CompressionTypes` only three mean something here:

    AUTO          the suffix rule: `.bagz` files are zstd, others raw
    UNCOMPRESSED  records are stored raw, whatever the name
    ZSTD          every record is a zstd frame, whatever the name

Anything else (GZIP, BZIP2, DEFLATE, LZMA) is a `ValueError`: Beam would
compress the whole file, which a bag reader cannot address.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from apache_beam.io.filesystem import CompressionTypes

from .. import CompressionAutoDetect, CompressionNone, CompressionZstd

__all__ = ["check_compression_type", "with_compression_type"]

_OPTIONS = TypeVar("_OPTIONS")
_SUPPORTED = (CompressionTypes.AUTO, CompressionTypes.UNCOMPRESSED, CompressionTypes.ZSTD)


def check_compression_type(compression_type: Any) -> str:
    """`compression_type` as one of Beam's `CompressionTypes` strings;
    ValueError for a type bags cannot hold, TypeError for a non-string."""
    if not isinstance(compression_type, str):
        raise TypeError(
            "compression_type must be one of apache_beam's CompressionTypes, "
            f"not {type(compression_type).__name__}"
        )
    if compression_type not in _SUPPORTED:
        raise ValueError(
            f"compression_type {compression_type!r} is not supported: a bag compresses "
            "each record, so use CompressionTypes.AUTO (zstd for .bagz names), "
            "UNCOMPRESSED or ZSTD"
        )
    return compression_type


def with_compression_type(options: _OPTIONS, compression_type: Any) -> _OPTIONS:
    """`options` (a Reader or Writer Options) with its compression set by
    `compression_type`. AUTO leaves `options` as they are; UNCOMPRESSED and
    ZSTD override auto-detection but must not contradict a compression the
    options name explicitly (ValueError). A zstd compression in `options`
    keeps its level and dictionary under ZSTD."""
    compression_type = check_compression_type(compression_type)
    current = options.compression  # type: ignore[attr-defined]
    if compression_type == CompressionTypes.AUTO:
        return options
    wanted = CompressionNone if compression_type == CompressionTypes.UNCOMPRESSED else CompressionZstd
    if isinstance(current, wanted):
        return options
    if not isinstance(current, CompressionAutoDetect):
        raise ValueError(
            f"compression_type {compression_type!r} contradicts options.compression={current!r}"
        )
    return dataclasses.replace(options, compression=wanted())  # type: ignore[type-var]
