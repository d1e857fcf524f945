"""Arrow columns as dataset fields: the field type an Arrow type maps to,
and a column's values in the form the field's encoder takes.

| Arrow type | field type |
|---|---|
| any integer (int8 ... uint64) | `int(byte width)` (unsigned: negative values are refused) |
| string, large_string, string_view | `utf8` |
| binary, large_binary, binary_view, fixed_size_binary | `bytes` |
| float16/32/64, bool | `array(dtype)` (one number per value) |
| nested fixed_size_list of numbers | `array(dtype,d0,...)` |
| list / large_list of one of the above | that type with `[]` |
| dictionary of one of the above | as its values |

This is the inverse of the reading side (_field_arrays), so a table written
with inferred types reads back with the same values.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..datasets import FieldType
from ._field_arrays import numpy_for_datasets

__all__ = ["column_values", "infer_field_type"]

# Field types whose encoders take numpy arrays.
_ARRAY_TYPES = ("array", "jpeg", "png", "mp4")


def _list_value_type(arrow_type: pa.DataType) -> pa.DataType | None:
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or \
            pa.types.is_list_view(arrow_type) or pa.types.is_large_list_view(arrow_type):
        return arrow_type.value_type
    return None


def _array_shape(arrow_type: pa.DataType) -> tuple[pa.DataType, tuple[int, ...]]:
    """(leaf type, sizes) of nested fixed-size lists ((type, ()) otherwise)."""
    shape: list[int] = []
    while pa.types.is_fixed_size_list(arrow_type):
        shape.append(arrow_type.list_size)
        arrow_type = arrow_type.value_type
    return arrow_type, tuple(shape)


def _scalar_field_type(arrow_type: pa.DataType) -> str | None:
    if pa.types.is_dictionary(arrow_type):  # e.g. categorical strings from Parquet
        arrow_type = arrow_type.value_type
    if pa.types.is_integer(arrow_type):
        return f"int({arrow_type.bit_width // 8})"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or \
            pa.types.is_string_view(arrow_type):
        return "utf8"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type) or \
            pa.types.is_binary_view(arrow_type) or pa.types.is_fixed_size_binary(arrow_type):
        return "bytes"
    leaf, shape = _array_shape(arrow_type)
    if (pa.types.is_floating(leaf) or pa.types.is_boolean(leaf) or
            (shape and pa.types.is_integer(leaf))):
        dtype = leaf.to_pandas_dtype()
        name = getattr(dtype, "__name__", str(dtype))
        return f"array({','.join([name, *map(str, shape)])})"
    return None


def infer_field_type(arrow_type: pa.DataType) -> str | None:
    """The field type a column of this Arrow type maps to, or None."""
    value_type = _list_value_type(arrow_type)
    if value_type is not None:
        item = _scalar_field_type(value_type)
        return None if item is None else item + "[]"
    return _scalar_field_type(arrow_type)


def _as_numpy(column: pa.Array, ftype: FieldType, where: str) -> Any:
    """A column of (nested fixed-size lists of) numbers as one numpy array
    of shape (rows, d0, ...), in the field's dtype for `array` fields."""
    np = numpy_for_datasets()
    _, shape = _array_shape(column.type)
    flat = column
    for _ in shape:
        flat = flat.flatten()
    if flat.null_count:
        raise ValueError(f"{where}: holds nulls inside its arrays")
    try:
        values = flat.to_numpy(zero_copy_only=False).reshape((len(column), *shape))
    except (pa.ArrowException, ValueError) as error:
        raise TypeError(f"{where}: a {ftype.dtype} field needs fixed-size lists of numbers, not "
                        f"{column.type} ({error})") from None
    if ftype.dtype == "array" and ftype.args:
        values = values.astype(np.dtype(ftype.args[0]), copy=False)
    return values


def column_values(column: pa.Array, ftype: FieldType, where: str) -> list[Any]:
    """The column's values as the field's encoder takes them: numpy arrays
    for array/image/video fields, Python values otherwise; a list of them
    per row for list fields.

    Raises ValueError naming `where` and the row for a null value.
    """
    if column.null_count:
        row = column.is_null().to_pylist().index(True)
        raise ValueError(f"{where}: row {row} is null; a dataset field cannot hold nulls")
    if ftype.dtype not in _ARRAY_TYPES:
        return column.to_pylist()
    if not ftype.is_list:
        return list(_as_numpy(column, ftype, where))
    if _list_value_type(column.type) is None:
        raise TypeError(f"{where}: a list field needs a list column, not {column.type}")
    items = _as_numpy(column.flatten(), ftype, where)
    offsets = column.offsets.to_pylist()
    base = offsets[0]
    return [list(items[start - base:stop - base]) for start, stop in zip(offsets, offsets[1:])]
