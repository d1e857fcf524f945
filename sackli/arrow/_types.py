"""Arrow types as rows are stored: dictionaries replaced by their values.

A one-row Arrow IPC message cannot carry a dictionary (dictionaries travel in
messages of their own), so rows are encoded with every dictionary type, at
any depth, replaced by its value type, and cast back when decoded. The
values survive; the dictionary of a decoded batch is rebuilt from them.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["storage_schema"]


def _field(field: pa.Field) -> pa.Field:
    return field.with_type(_storage_type(field.type))


def _storage_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _storage_type(t.value_type)
    if pa.types.is_struct(t):
        return pa.struct([_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(_field(t.key_field), _field(t.item_field), keys_sorted=t.keys_sorted)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(_field(t.value_field), t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(_field(t.value_field))
    if pa.types.is_list(t):
        return pa.list_(_field(t.value_field))
    if pa.types.is_large_list_view(t):
        return pa.large_list_view(_field(t.value_field))
    if pa.types.is_list_view(t):
        return pa.list_view(_field(t.value_field))
    if pa.types.is_union(t):
        fields = [_field(t.field(i)) for i in range(t.num_fields)]
        return pa.union(fields, t.mode, t.type_codes)
    return t


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` with dictionary types replaced by their value types."""
    return pa.schema([_field(field) for field in schema], metadata=schema.metadata)


def has_dictionaries(schema: pa.Schema) -> bool:
    """Whether some type of `schema`, at any depth, is a dictionary."""
    return storage_schema(schema) != schema
