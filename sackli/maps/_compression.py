"""Value compression of MapBuffers. The engine decodes zstd itself (and
compresses it when building); gzip, brotli and lzma run here, with the same
defaults as `mapbuffer` 1.2.0 (gzip level 9, brotli quality 5)."""

from __future__ import annotations

import gzip
import lzma
import zlib
from typing import Any, Callable

from ._errors import ValidationError

# The names `compress=` accepts, as `mapbuffer` normalises them.
_ALIASES: dict[Any, str | None] = {
    None: None, False: None, "": None, 0: None, "none": None,
    True: "gzip", 1: "gzip", "gzip": "gzip", "br": "br", "zstd": "zstd", "lzma": "lzma",
}
COMPRESSIONS = ("gzip", "br", "zstd", "lzma")


def normalize(compress: Any) -> str | None:
    """The canonical name of `compress` (None for no compression); ValueError
    for a compression maps cannot hold."""
    key = compress.lower() if isinstance(compress, str) else compress
    try:
        return _ALIASES[key]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported map compression {compress!r}; "
                         f"supported: None, {', '.join(COMPRESSIONS)}") from None


def _brotli() -> Any:
    try:
        import brotli
    except ImportError:
        raise ImportError("maps compressed with 'br' need the brotli package: "
                          "pip install 'sackli-bagz[brotli]'") from None
    return brotli


def _gunzip(data: bytes) -> bytes:
    # zlib raises zlib.error for bad data (gzip.decompress raises several types).
    return zlib.decompress(data, wbits=31)


_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda data: gzip.compress(data, compresslevel=9, mtime=0),
    "br": lambda data: _brotli().compress(data, quality=5),
    "lzma": lzma.compress,
}
_DECOMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": _gunzip,
    "br": lambda data: _brotli().decompress(data),
    "lzma": lzma.decompress,
}


def compress_in_python(method: str | None) -> Callable[[bytes], bytes] | None:
    """The compressor Python runs for `method`, or None when the engine
    handles it (no compression, zstd)."""
    return _COMPRESSORS.get(method or "")


def decompressor(method: str | None) -> Callable[[bytes], bytes] | None:
    """The decompressor Python runs for `method`, or None when the engine has
    decoded the value already."""
    return _DECOMPRESSORS.get(method or "")


def decompress(method: str, data: bytes, name: str, key: int, offset: int) -> bytes:
    """`data` (the value of `key`, stored at byte `offset`) decompressed;
    ValidationError naming the map, key and offset when it does not
    decompress."""
    try:
        return _DECOMPRESSORS[method](data)
    except ImportError:
        raise
    except Exception as error:  # each codec has its own error types
        raise ValidationError(f"{name}: value of key {key}: does not decompress "
                              f"({method}: {error}) (byte offset {offset})") from None
