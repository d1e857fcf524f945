"""Value compression of MapBuffers. The engine decodes zstd itself (and
compresses it when building); gzip, brotli and lzma run here, with the same
codecs and defaults as `mapbuffer` 1.2.0: gzip is libdeflate at level 9
(through the `deflate` package, so gzip maps are byte-identical to
mapbuffer's), brotli quality 5.

A gzip value must be exactly one gzip member: a second member or trailing
bytes are damage (ValidationError), never silently dropped."""

from __future__ import annotations

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


def _deflate() -> Any:
    try:
        import deflate
    except ImportError:
        # A dependency of sackli-bagz: missing only from an install without
        # dependencies. zlib's level 9 would write other bytes than
        # mapbuffer's, so there is no silent fallback.
        raise ImportError("writing gzip maps needs the deflate package (libdeflate, as "
                          "mapbuffer uses): pip install deflate") from None
    return deflate


_GZIP_LEVEL = 9  # mapbuffer's default
_GZIP_MAGIC = b"\x1f\x8b"


def _gzip(data: bytes) -> bytes:
    """`data` as one gzip member, byte for byte what mapbuffer stores."""
    return bytes(_deflate().gzip_compress(data, _GZIP_LEVEL))


class GzipValueError(ValueError):
    """A stored gzip value that is not exactly one complete gzip member."""


def _gunzip(data: bytes) -> bytes:
    """The content of `data`, which must be one gzip member and nothing else.

    zlib.decompress stops after the first member and ignores what follows,
    and libdeflate (what mapbuffer reads with) sizes its output from the last
    4 bytes: both can return part of the value, or nothing, without an error.
    Decoding with a decompressor object shows what is left after the member.
    zlib checks the member's crc32 and size itself (zlib.error)."""
    inflater = zlib.decompressobj(wbits=31)
    content = inflater.decompress(data)
    if not inflater.eof:
        raise GzipValueError(f"truncated gzip member ({len(data)} bytes)")
    rest = inflater.unused_data
    if rest.startswith(_GZIP_MAGIC):
        raise GzipValueError(f"a second gzip member ({len(rest)} bytes) follows the first; "
                             "a map value is one member")
    if rest:
        raise GzipValueError(f"{len(rest)} bytes after the gzip member")
    return content


_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": _gzip,
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
