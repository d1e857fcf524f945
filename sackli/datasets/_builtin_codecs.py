"""`encoders` and `decoders`: the codec tables used when a dataset is opened
with `encoders=None` / `decoders=None`, keyed by type name as in `bags`."""

from __future__ import annotations

import functools
from typing import Any, Callable

from . import _codecs, _media

__all__ = ["decoders", "encoders", "one_argument"]

Codec = Callable[..., Any]

encoders: dict[str, Codec] = {
    "bytes": _codecs.bytes_identity,
    "utf8": _codecs.utf8_encode,
    "msgpack": _codecs.msgpack_encode,
    "int": _codecs.int_encode,
    "array": _codecs.array_encode,
    "jpeg": _media.jpeg_encode,
    "png": _media.png_encode,
    "mp4": _media.mp4_encode,
}

decoders: dict[str, Codec] = {
    "bytes": _codecs.bytes_identity,
    "utf8": _codecs.utf8_decode,
    "msgpack": _codecs.msgpack_decode,
    "int": _codecs.int_decode,
    "array": _codecs.array_decode,
    "jpeg": _media.image_decode,
    "png": _media.image_decode,
    "mp4": _media.mp4_decode,
}

# Built-in codecs that, without arguments, are a method of str or bytes:
# called per value, the method skips a Python frame.
_WITHOUT_ARGUMENTS: dict[Codec, Codec] = {
    # UTF-8 is the default of str.encode and bytes.decode.
    _codecs.utf8_encode: str.encode,
    _codecs.utf8_decode: bytes.decode,
}


def one_argument(codec: Codec, args: tuple[str, ...]) -> Callable[[Any], Any]:
    """An encoder or decoder with the type's arguments bound: a function of
    the value (or buffer) alone."""
    if codec is _codecs.int_decode:
        # int.from_bytes itself, without a Python frame per value.
        return functools.partial(int.from_bytes, byteorder=args[1] if len(args) > 1 else "little")
    if args:
        return lambda value: codec(value, *args)
    return _WITHOUT_ARGUMENTS.get(codec, codec)
