"""The built-in value codecs of `bags` 0.5.1 that need no media library:
`bytes`, `utf8`, `msgpack`, `int(size,endian)` and `array(dtype,*shape)`.

Each encoder takes the value and the type's arguments (strings, as written in
the spec) and returns bytes; each decoder takes the stored bytes and the same
arguments. The encodings are the ones `bags` writes, byte for byte.
"""

from __future__ import annotations

import operator
from typing import Any

import msgpack

__all__ = [
    "array_decode", "array_encode", "bytes_identity", "int_decode", "int_encode",
    "needs_numpy", "utf8_decode", "utf8_encode",
]


def needs_numpy() -> Any:
    """numpy, or an ImportError saying which codecs need it."""
    try:
        import numpy
    except ImportError as error:
        raise ImportError(
            "the int (without a size), array, jpeg, png and mp4 codecs of "
            "sackli.datasets need numpy: pip install numpy") from error
    return numpy


def bytes_identity(value: Any, *args: str) -> Any:
    """`bytes`: the value as it is."""
    return value


def utf8_encode(value: str, *args: str) -> bytes:
    """`utf8`: a str as UTF-8."""
    return value.encode("utf-8")


def utf8_decode(buffer: bytes, *args: str) -> str:
    """`utf8`: UTF-8 bytes as a str."""
    return buffer.decode("utf-8")


def msgpack_encode(value: Any, *args: str) -> bytes:
    """`msgpack`: msgpack's default packing."""
    return msgpack.packb(value)


def msgpack_decode(buffer: bytes, *args: str) -> Any:
    """`msgpack`: msgpack's default unpacking."""
    return msgpack.unpackb(buffer)


def int_encode(value: int, size: str | None = None, endian: str = "little") -> bytes:
    """`int(size,endian)`: an unsigned integer in `size` bytes; without a
    size, in the fewest bytes that hold it (0 in none, as `bags` does)."""
    value = operator.index(value)
    if size is None:
        # bags computes ceil(log2(1 + value) / 8) in floating point; in exact
        # integers that is the number of whole bytes the bits need.
        nbytes = (value.bit_length() + 7) // 8
    else:
        nbytes = int(size)
    return value.to_bytes(nbytes, endian)  # type: ignore[arg-type]


def int_decode(buffer: bytes, size: str | None = None, endian: str = "little") -> int:
    """`int(size,endian)`: the unsigned integer in the buffer."""
    return int.from_bytes(buffer, endian)  # type: ignore[arg-type]


def _shape(shape: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(int(x) for x in shape)


def array_encode(value: Any, dtype: str, *shape: str) -> bytes:
    """`array(dtype,*shape)`: a numpy array of exactly that dtype and shape,
    as its raw bytes in C order."""
    np = needs_numpy()
    if value.dtype != np.dtype(dtype):
        raise ValueError(f"expected an array of dtype {dtype}, got {value.dtype}")
    if value.shape != _shape(shape):
        raise ValueError(f"expected an array of shape {_shape(shape)}, got {value.shape}")
    return value.tobytes()


def array_decode(buffer: bytes, dtype: str, *shape: str) -> Any:
    """`array(dtype,*shape)`: a writable numpy array of the buffer's values.

    `bags` returns a read-only view of the (immutable) record bytes, which
    torch warns about and training code cannot modify in place. The values
    here are the same, and a buffer of the wrong size fails the same way
    (the view and reshape come first), but the array owns its memory: one
    copy of the record, no more, so writing to it changes no other value.
    """
    np = needs_numpy()
    return np.frombuffer(buffer, dtype).reshape(_shape(shape)).copy()
