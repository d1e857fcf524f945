"""`encoders` and `decoders`: the codec tables used when a dataset is opened
with `encoders=None` / `decoders=None`, keyed by type name as in `bags`."""

from __future__ import annotations

from typing import Any, Callable

from . import _codecs, _media

__all__ = ["decoders", "encoders"]

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
