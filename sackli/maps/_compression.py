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

from .._engine import RecordTooLargeError
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


class ValueTooLarge(Exception):
    """A value that decodes to more than the cap (`decompress` names it)."""


def _gunzip(data: bytes, cap: int) -> bytes:
    """The content of `data`, which must be one gzip member and nothing else,
    at most `cap` bytes (ValueTooLarge past it, once cap + 1 are decoded).

    zlib.decompress stops after the first member and ignores what follows,
    and libdeflate (what mapbuffer reads with) sizes its output from the last
    4 bytes: both can return part of the value, or nothing, without an error.
    Decoding with a decompressor object shows what is left after the member.
    zlib checks the member's crc32 and size itself (zlib.error)."""
    inflater = zlib.decompressobj(wbits=31)
    content = inflater.decompress(data, cap + 1)
    if len(content) > cap:
        raise ValueTooLarge
    if not inflater.eof:
        raise GzipValueError(f"truncated gzip member ({len(data)} bytes)")
    rest = inflater.unused_data
    if rest.startswith(_GZIP_MAGIC):
        raise GzipValueError(f"a second gzip member ({len(rest)} bytes) follows the first; "
                             "a map value is one member")
    if rest:
        raise GzipValueError(f"{len(rest)} bytes after the gzip member")
    return content


def _unbrotli(data: bytes, cap: int) -> bytes:
    """brotli.decompress(data), stopping once more than `cap` bytes come out
    (output_buffer_limit: brotli >= 1.2). Output below the limit means the
    decoder took all of `data`."""
    decoder = _brotli().Decompressor()
    content = decoder.process(data, output_buffer_limit=cap + 1)
    if len(content) > cap:
        raise ValueTooLarge
    if not decoder.is_finished():
        raise _brotli().error("truncated brotli stream")
    return content


def _unlzma(data: bytes, cap: int) -> bytes:
    """lzma.decompress(data) (concatenated streams, trailing garbage after the
    first ignored), stopping once more than `cap` bytes come out."""
    parts: list[bytes] = []
    size = 0
    while True:
        decoder = lzma.LZMADecompressor()
        try:
            part = decoder.decompress(data, cap + 1 - size)
        except lzma.LZMAError:
            if parts:
                break  # what follows a stream is not one: lzma.decompress ignores it
            raise
        parts.append(part)
        size += len(part)
        if size > cap:
            raise ValueTooLarge
        if not decoder.eof:
            if decoder.needs_input:
                raise lzma.LZMAError("Compressed data ended before the end-of-stream "
                                     "marker was reached")
            raise ValueTooLarge  # output stopped at the cap with input left
        data = decoder.unused_data
        if not data:
            break
    return b"".join(parts)


_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": _gzip,
    "br": lambda data: _brotli().compress(data, quality=5),
    "lzma": lzma.compress,
}
# Each takes the stored value and the most bytes it may decode to.
_DECOMPRESSORS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _gunzip,
    "br": _unbrotli,
    "lzma": _unlzma,
}


def compress_in_python(method: str | None) -> Callable[[bytes], bytes] | None:
    """The compressor Python runs for `method`, or None when the engine
    handles it (no compression, zstd)."""
    return _COMPRESSORS.get(method or "")


def decompressor(method: str | None) -> Callable[[bytes, int], bytes] | None:
    """The decompressor Python runs for `method`, or None when the engine has
    decoded the value already."""
    return _DECOMPRESSORS.get(method or "")


def decompress(method: str, data: bytes, name: str, key: int, offset: int,
               max_bytes: int) -> bytes:
    """`data` (the value of `key`, stored at byte `offset`) decompressed;
    ValidationError naming the map, key and offset when it does not
    decompress, sackli.RecordTooLargeError when it decodes to more than
    `max_bytes` (decoding stops there)."""
    try:
        return _DECOMPRESSORS[method](data, max_bytes)
    except ImportError:
        raise
    except ValueTooLarge:
        raise RecordTooLargeError(
            f"{name}: value of key {key} (byte offset {offset}) decodes to more than "
            f"{max_bytes} bytes (max_value_bytes={max_bytes})") from None
    except Exception as error:  # each codec has its own error types
        raise ValidationError(f"{name}: value of key {key}: does not decompress "
                              f"({method}: {error}) (byte offset {offset})") from None
