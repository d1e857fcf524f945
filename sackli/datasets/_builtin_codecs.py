"""`encoders` and `decoders`: the codec tables used when a dataset is opened
with `encoders=None` / `decoders=None`, keyed by type name as in `bags`."""

from __future__ import annotations

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

# Built-in decoders that, without arguments, are a method of bytes: called
# per value, the method skips a Python frame.
_WITHOUT_ARGUMENTS = {
    _codecs.utf8_decode: bytes.decode,  # UTF-8 is bytes.decode's default
}


def one_argument(decode: Codec, args: tuple[str, ...]) -> Callable[[bytes], Any]:
    """`decode` with the type's arguments bound: a function of the buffer."""
    if args:
        return lambda buffer: decode(buffer, *args)
    return _WITHOUT_ARGUMENTS.get(decode, decode)
