"""Dataset field values as Arrow arrays: the Arrow type of each field type,
and packed records (`(data, offsets)` from the engine) decoded into it.

| field type | Arrow type |
|---|---|
| `bytes` | `large_binary` |
| `utf8` | `large_string` (checked to be UTF-8) |
| `int(n)`, n <= 8 | the smallest of uint8/16/32/64 that holds n bytes |
| `int` | `uint64` |
| `array(dtype)` | dtype's Arrow type (one number per value) |
| `array(dtype,d0,...,dk)` | nested `fixed_size_list`s: `d0` lists of ... `dk` numbers |
| anything else (`msgpack`, `jpeg`, `png`, `mp4`, `int(n)` for n > 8, custom types, dtypes Arrow lacks) | `large_binary`: the stored bytes |

A list field (`type[]`) is a `list` of the item's type. Decoding is
vectorised (numpy over the packed buffers); no Python object is made per
value.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from .. import CorruptionError
from ..datasets import FieldType
from ..datasets._fields import type_text

__all__ = ["field_arrow_type", "field_values", "numpy_for_datasets"]

def numpy_for_datasets() -> Any:
    """numpy, or an ImportError saying that dataset tables need it."""
    try:
        import numpy
    except ImportError as error:
        raise ImportError("reading or writing sackli.datasets folders as Arrow tables needs "
                          "numpy: pip install numpy") from error
    return numpy


_INT_TYPES = {1: pa.uint8(), 2: pa.uint16(), 4: pa.uint32(), 8: pa.uint64()}
_MAX_INT_BYTES = 8


def _int_width(ftype: FieldType) -> int | None:
    """Bytes of the Arrow integer an `int` field decodes to (None: raw)."""
    if not ftype.args:
        return _MAX_INT_BYTES
    try:
        size = int(ftype.args[0])
    except ValueError:
        return None
    if not 1 <= size <= _MAX_INT_BYTES or ftype.args[1:] not in ((), ("little",), ("big",)):
        return None
    return next(width for width in sorted(_INT_TYPES) if width >= size)


def _array_layout(ftype: FieldType) -> tuple[Any, tuple[int, ...]] | None:
    """(Arrow value type, shape) of an `array` field, None when Arrow has no
    type for its dtype or the arguments are not a dtype and sizes."""
    if not ftype.args:
        return None
    try:
        shape = tuple(int(x) for x in ftype.args[1:])
        np = numpy_for_datasets()
        value_type = pa.from_numpy_dtype(np.dtype(ftype.args[0]))
    except (TypeError, ValueError, pa.ArrowNotImplementedError):
        return None
    if any(size < 0 for size in shape) or not (pa.types.is_integer(value_type) or
                                               pa.types.is_floating(value_type) or
                                               pa.types.is_boolean(value_type)):
        return None
    return value_type, shape


def _item_type(ftype: FieldType, decode: bool) -> pa.DataType:
    if decode:
        if ftype.dtype == "bytes":
            return pa.large_binary()
        if ftype.dtype == "utf8":
            return pa.large_string()
        if ftype.dtype == "int" and (width := _int_width(ftype)) is not None:
            return _INT_TYPES[width]
        if ftype.dtype == "array" and (layout := _array_layout(ftype)) is not None:
            value_type, shape = layout
            for size in reversed(shape):
                value_type = pa.list_(value_type, size)
            return value_type
    return pa.large_binary()


def field_arrow_type(ftype: FieldType, decode: bool = True) -> pa.DataType:
    """The Arrow type of a field's column (`decode=False`: the stored bytes)."""
    item = _item_type(ftype, decode)
    return pa.list_(item) if ftype.is_list else item


def _raw(data: Any, offsets: Any, count: int) -> pa.Array:
    return pa.Array.from_buffers(pa.large_binary(), count,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def field_values(
    ftype: FieldType, decode: bool, data: Any, offsets: Any, where: str, first: Any
) -> pa.Array:
    """The values of packed records, decoded to the field's Arrow item type.

    `where` names the field and its file, `first(k)` gives the record index
    of the k-th value, both for errors: sackli.CorruptionError when a value
    does not have the size or encoding its type needs.
    """
    count = len(memoryview(offsets).cast("B")) // 8 - 1
    raw = _raw(data, offsets, count)
    target = _item_type(ftype, decode)
    if target == pa.large_binary():
        return raw
    if target == pa.large_string():
        try:
            return raw.cast(pa.large_string())
        except pa.ArrowInvalid:
            bad = next(k for k, value in enumerate(raw.to_pylist()) if not _is_utf8(value))
            raise CorruptionError(f"{where}: record {first(bad)} is not UTF-8") from None
    np = numpy_for_datasets()
    starts = np.frombuffer(offsets, np.int64)
    sizes = np.diff(starts)
    if ftype.dtype == "int":
        return _ints(np, ftype, target, np.frombuffer(data, np.uint8), starts, sizes, where, first)
    return _arrays(np, ftype, target, data, starts, sizes, where, first)


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _ints(np: Any, ftype: FieldType, target: pa.DataType, data: Any, starts: Any, sizes: Any,
          where: str, first: Any) -> pa.Array:
    width = target.byte_width
    too_long = np.flatnonzero(sizes > width)
    if len(too_long):
        k = int(too_long[0])
        raise CorruptionError(f"{where}: record {first(k)} holds {int(sizes[k])} bytes, more "
                              f"than an {type_text(ftype._replace(is_list=False))} value takes")
    big = ftype.args[1:] == ("big",)
    count = len(sizes)
    if count and bool((sizes == width).all()):
        values = np.frombuffer(data, f"{'>' if big else '<'}u{width}", count, int(starts[0]))
    else:
        # Values of other sizes (`int` without a size, int(3)): byte by byte.
        values = np.zeros(count, np.uint64)
        last = max(len(data) - 1, 0)
        for k in range(int(sizes.max(initial=0))):
            present = sizes > k
            byte = data[np.minimum(starts[:-1] + k, last)].astype(np.uint64)
            shift = np.where(present, (sizes - 1 - k) if big else k, 0).astype(np.uint64) * 8
            values |= np.where(present, byte << shift, np.uint64(0))
    return pa.array(_aligned(np, values.astype(target.to_pandas_dtype(), copy=False)), target)


def _aligned(np: Any, values: Any) -> Any:
    """`values`, copied when a view into a record buffer is not aligned to
    its item size (Arrow's buffers are)."""
    return values if values.ctypes.data % values.dtype.itemsize == 0 else values.copy()


def _arrays(np: Any, ftype: FieldType, target: pa.DataType, data: Any, starts: Any, sizes: Any,
            where: str, first: Any) -> pa.Array:
    value_type, shape = _array_layout(ftype)  # type: ignore[misc]
    dtype = np.dtype(ftype.args[0])
    numbers = math.prod(shape)
    wrong = np.flatnonzero(sizes != dtype.itemsize * numbers)
    if len(wrong):
        k = int(wrong[0])
        raise CorruptionError(
            f"{where}: record {first(k)} holds {int(sizes[k])} bytes; an "
            f"{type_text(ftype._replace(is_list=False))} value takes {dtype.itemsize * numbers}")
    count = len(sizes)
    begin = int(starts[0]) if count else 0
    flat = np.frombuffer(data, dtype, count * numbers, begin) if count else np.zeros(0, dtype)
    array = pa.array(_aligned(np, flat), value_type)
    for size in reversed(shape):
        array = pa.FixedSizeListArray.from_arrays(array, size)
    return array
