"""A `schema=` given for a set that has a schema file, checked against it.

Rows are decoded with the schema they were written with, never another:
decoding a row with the wrong types reads its bytes as other values (a
float64's bytes as two float32s, an int's as a string's offsets). A
`schema=` that differs from the schema file is therefore allowed only as
a view of the stored columns, matched by name:

- a projection: a subset of the stored fields, in any order (only those
  columns come out, in that order);
- a widening cast: a type every value of the stored type converts to
  exactly (int32 -> int64, float32 -> float64, string -> large_string,
  date32 -> date64, a decimal with more digits, ...), also inside lists
  and structs (same field names, same order). Narrowing (float64 ->
  float32) and reinterpreting (string -> int64) casts are refused, even
  where pyarrow would make them for the values at hand.

Anything else is a ValueError naming the first field that differs: the
argument is wrong, the data is not.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["check_requested", "widens"]

# Bits of an exactly represented integer in each float type's mantissa.
_MANTISSA_BITS = {16: 11, 32: 24, 64: 53}
_STRING_LIKE = ((pa.types.is_string, pa.types.is_large_string),
                (pa.types.is_binary, pa.types.is_large_binary))


def _integer_widens(source: pa.DataType, target: pa.DataType) -> bool:
    signed_source = pa.types.is_signed_integer(source)
    signed_target = pa.types.is_signed_integer(target)
    if signed_source and not signed_target:
        return False
    if signed_source == signed_target:
        return target.bit_width >= source.bit_width
    return target.bit_width > source.bit_width  # unsigned into signed: one more bit


def _string_like_widens(source: pa.DataType, target: pa.DataType) -> bool:
    """string <-> large_string, binary <-> large_binary, text -> bytes."""
    kinds = [i for i, checks in enumerate(_STRING_LIKE) if any(c(source) for c in checks)]
    targets = [i for i, checks in enumerate(_STRING_LIKE) if any(c(target) for c in checks)]
    return bool(kinds and targets) and (kinds[0] == targets[0] or kinds[0] == 0)


def _decimal_widens(source: pa.DataType, target: pa.DataType) -> bool:
    return (target.scale >= source.scale
            and target.precision - target.scale >= source.precision - source.scale)


_UNIT_ORDER = ["s", "ms", "us", "ns"]


def _list_widens(source: pa.DataType, target: pa.DataType) -> bool:
    if pa.types.is_fixed_size_list(source) or pa.types.is_fixed_size_list(target):
        if not (pa.types.is_fixed_size_list(source) and pa.types.is_fixed_size_list(target)
                and source.list_size == target.list_size):
            return False
    elif pa.types.is_large_list(source) and not pa.types.is_large_list(target):
        return False
    return _field_widens(source.value_field, target.value_field)


def _field_widens(source: pa.Field, target: pa.Field) -> bool:
    return (target.nullable or not source.nullable) and widens(source.type, target.type)


def widens(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether every value of `source` converts exactly to `target` (the
    casts `schema=` may ask for)."""
    if source == target:
        return True
    if pa.types.is_dictionary(source):
        if pa.types.is_dictionary(target):
            return (source.value_type == target.value_type
                    and _integer_widens(source.index_type, target.index_type))
        return widens(source.value_type, target)  # the values, without codes
    if pa.types.is_integer(source) and pa.types.is_integer(target):
        return _integer_widens(source, target)
    if pa.types.is_integer(source) and pa.types.is_floating(target):
        magnitude = source.bit_width - (1 if pa.types.is_signed_integer(source) else 0)
        return magnitude <= _MANTISSA_BITS[target.bit_width]
    if pa.types.is_floating(source) and pa.types.is_floating(target):
        return target.bit_width >= source.bit_width
    if _string_like_widens(source, target):
        return True
    if pa.types.is_decimal(source) and pa.types.is_decimal(target):
        return _decimal_widens(source, target)
    if pa.types.is_date32(source) and pa.types.is_date64(target):
        return True
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(target):
        # Finer units can overflow for far dates: the cast checks each value.
        return (source.tz == target.tz
                and _UNIT_ORDER.index(target.unit) >= _UNIT_ORDER.index(source.unit))
    if pa.types.is_list(source) or pa.types.is_large_list(source) or pa.types.is_fixed_size_list(
            source):
        return (pa.types.is_list(target) or pa.types.is_large_list(target)
                or pa.types.is_fixed_size_list(target)) and _list_widens(source, target)
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        return (source.num_fields == target.num_fields
                and all(source.field(i).name == target.field(i).name
                        and _field_widens(source.field(i), target.field(i))
                        for i in range(source.num_fields)))
    return False


def check_requested(stored: pa.Schema, requested: pa.Schema, where: str) -> None:
    """Checks that each field of `requested` is a stored field of that name
    whose type widens to it (see the module's docstring). ValueError naming
    the first field that is not, and the schema file (`where`)."""
    seen: set[str] = set()
    for field in requested:
        if field.name in seen:
            raise ValueError(f"schema= names the field {field.name!r} twice")
        seen.add(field.name)
        index = stored.get_field_index(field.name)
        if index < 0:
            raise ValueError(
                f"schema= differs from the set's schema file ({where}): it has no field "
                f"{field.name!r} (fields: {', '.join(stored.names)}); schema= may name a subset "
                "of the stored fields, by name")
        have = stored.field(index)
        if not widens(have.type, field.type):
            raise ValueError(
                f"schema= differs from the set's schema file ({where}) at field "
                f"{field.name!r}: {field.type} asked, {have.type} stored, and not every "
                f"{have.type} value converts exactly to {field.type} (schema= may only widen "
                "types, e.g. int32 -> int64 or float32 -> float64)")
        if have.nullable and not field.nullable:
            raise ValueError(
                f"schema= differs from the set's schema file ({where}) at field "
                f"{field.name!r}: non-nullable asked, nullable stored")
