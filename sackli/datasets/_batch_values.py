"""Reading and decoding a batch of one field's records at once, for the
built-in codecs where that beats decoding record by record (measured in
benchmarks/datasets_bags.py; see docs/datasets.md, Speed):

- `bytes`: the engine's batch read already returns the values (no call of
  the identity decoder per value);
- `int(1|2|4|8[,endian])`: one packed engine read and one conversion of the
  whole buffer by `array` (instead of a `bytes` object and an
  `int.from_bytes` call per value).

Each returns None when its shortcut does not apply to the records read (an
int record of another size: `bags` decodes those too), and the caller
decodes the usual way.
"""

from __future__ import annotations

import array
import functools
import sys
from typing import Any, Callable, Optional

from .. import Reader
from .. import _bulk
from . import _codecs

__all__ = ["BatchRead", "NATIVE_BYTES", "batch_read", "native_kind"]

# (reader, indices) -> the decoded values, or None.
BatchRead = Callable[[Reader, list[int]], Optional[list[Any]]]

# array typecode of each unsigned integer size this platform has.
_UNSIGNED = {array.array(code).itemsize: code for code in "QLIHB"}


def batch_read(codec: Any, args: tuple[str, ...]) -> BatchRead | None:
    """The batch read for `codec` (an undecorated decoder of the codec table)
    with the type's arguments, or None when it has none."""
    if codec is _codecs.bytes_identity:
        return _read_bytes
    unsigned = _unsigned_type(codec, args)
    if unsigned is not None and unsigned[0] in _UNSIGNED:
        return functools.partial(_read_unsigned, *unsigned)
    return None


def _unsigned_type(codec: Any, args: tuple[str, ...]) -> tuple[int, str] | None:
    """(size, endian) of an `int(size[,endian])` field with a size of 1 to 8
    bytes, or None."""
    if codec is not _codecs.int_decode or not args:
        return None
    endian = args[1] if len(args) > 1 else "little"
    size = int(args[0]) if args[0].isdigit() else 0
    return (size, endian) if 1 <= size <= 8 and endian in ("little", "big") else None


# The value kinds of the engine's DatasetReadPlan: (kind, int size, big-endian).
NATIVE_BYTES = (0, 0, False)
_NATIVE_UTF8 = (1, 0, False)
_NATIVE_UNSIGNED = 2


def native_kind(codec: Any, args: tuple[str, ...]) -> tuple[int, int, bool] | None:
    """How the engine's DatasetReadPlan makes the values of a field whose codec
    (an undecorated decoder of the codec table) is `codec`: the record as
    bytes, UTF-8 as str or an unsigned int (those codecs' results); None when
    the values are the codec's to make (from the records as bytes)."""
    if codec is _codecs.bytes_identity:
        return NATIVE_BYTES
    if codec is _codecs.utf8_decode:
        return _NATIVE_UTF8
    unsigned = _unsigned_type(codec, args)
    if unsigned is not None:
        return (_NATIVE_UNSIGNED, unsigned[0], unsigned[1] == "big")
    return None


def _read_bytes(reader: Reader, indices: list[int]) -> list[bytes]:
    return reader.read_indices(indices)


def _read_unsigned(size: int, endian: str, reader: Reader, indices: list[int]) -> list[int] | None:
    data, offsets = _bulk.start_read_indices(reader, indices).packed()
    total = size * len(indices)
    # Every record must be `size` bytes (the offsets step by exactly that).
    if len(data) != total or (
            memoryview(offsets).cast("B").cast("q").tolist() != list(range(0, total + 1, size))):
        return None
    values = array.array(_UNSIGNED[size])
    values.frombytes(data)
    if endian != sys.byteorder:
        values.byteswap()
    return values.tolist()
