"""Arrow types as rows are stored: dictionaries replaced by their values.

A one-row Arrow IPC message cannot carry a dictionary (dictionaries travel in
messages of their own), so rows are encoded with every dictionary type, at
any depth, replaced by its value type, and turned back into dictionaries
when decoded. The values survive; the dictionary of a decoded batch is
rebuilt from them, and where the set records its dictionaries the batch
then gets the set's (_dictionaries).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["concat_batches", "decode_dictionaries", "restore_dictionaries", "storage_schema",
           "storage_type"]

_VIEWS = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}


def _field(field: pa.Field) -> pa.Field:
    return field.with_type(storage_type(field.type))


def storage_type(t: pa.DataType) -> pa.DataType:
    """`t` with dictionaries replaced by their values. A top-level
    dictionary of view values (Polars' Categorical) is stored as large
    strings or binaries, which pyarrow can take values from."""
    if pa.types.is_dictionary(t):
        return storage_type(_VIEWS.get(t.value_type, t.value_type))
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


def decode_dictionaries(array: pa.Array) -> pa.Array:
    """`array` in its storage type. Only the columns that hold dictionaries
    are touched (casting others, e.g. sliced run-end encoded arrays, is not
    safe in every pyarrow)."""
    target = storage_type(array.type)
    if target == array.type:
        return array
    if isinstance(array, pa.DictionaryArray):
        values = array.dictionary
        if values.type != target:
            values = values.cast(target) if values.type in _VIEWS else decode_dictionaries(values)
        return values.take(array.indices)
    return array.cast(target)


def restore_dictionaries(array: pa.Array, target: pa.DataType) -> pa.Array:
    """`array`, in storage type, as `target` (dictionaries rebuilt)."""
    if array.type == target:
        return array
    if pa.types.is_dictionary(target):
        encoded = restore_dictionaries(array, target.value_type if target.value_type not in _VIEWS
                                       else array.type).dictionary_encode()
        return pa.DictionaryArray.from_arrays(
            encoded.indices.cast(target.index_type), encoded.dictionary.cast(target.value_type),
            ordered=target.ordered)
    return array.cast(target)


def to_storage(batch: pa.RecordBatch, storage: pa.Schema) -> pa.RecordBatch:
    """`batch` as `storage` (= storage_schema(batch.schema))."""
    columns = [decode_dictionaries(c) for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=storage)


def from_storage(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A batch decoded in storage types, as `schema`."""
    columns = [restore_dictionaries(c, f.type) for c, f in zip(batch.columns, schema)]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def concat_batches(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """The record batches (at least one, of one schema) as one batch."""
    if len(batches) == 1:
        return batches[0]
    combined = pa.Table.from_batches(batches).combine_chunks().to_batches()
    return combined[0] if combined else batches[0]
