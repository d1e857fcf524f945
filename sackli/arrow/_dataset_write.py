"""Arrow tables into dataset folders (`sackli.datasets`): one field per
column, the types given or inferred from the Arrow types (_field_specs).

The rows go through `sackli.datasets`' writers, so the files are what
`bags` 0.5.1 writes for the same datapoints, and each shard appears whole.
If the write fails, the shards this call finished are removed too: a table
is written whole or not at all.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import pyarrow as pa

from ..datasets import DatasetWriter, ShardedDatasetWriter
from ..datasets._fields import parse_spec
from ..datasets._layout import remove_shard_folder, shard_name
from .._storage import folder_path, join_path
from ._field_specs import column_values, infer_field_type
from ._inputs import open_table_stream

__all__ = ["write_dataset_table"]

_GIB = 1024 ** 3


def dataset_spec(schema: pa.Schema, spec: Mapping[str, str] | str) -> dict[str, str]:
    """The field types of the table's columns: given in `spec`, inferred
    from the Arrow types for the others (all of them for `"auto"`).

    Raises ValueError for a spec naming a column the table lacks and for a
    column whose Arrow type maps to no field type.
    """
    if isinstance(spec, str):
        if spec != "auto":
            raise ValueError(f"spec must be a dict of field types or 'auto', not {spec!r}")
        spec = {}
    if not isinstance(spec, Mapping):
        raise TypeError(f"spec must be a dict of field types or 'auto', not {type(spec).__name__}")
    if len(set(schema.names)) != len(schema.names):
        raise ValueError(f"the table has two columns of one name: {schema.names}")
    unknown = [name for name in spec if name not in schema.names]
    if unknown:
        raise ValueError(f"spec names {', '.join(map(repr, unknown))}, which the table lacks "
                         f"(its columns: {', '.join(map(repr, schema.names))})")
    fields = {}
    for column in schema:
        ftype = spec.get(column.name) or infer_field_type(column.type)
        if ftype is None:
            raise ValueError(
                f"column {column.name!r} is {column.type}, which maps to no dataset field type; "
                f"give its type in spec=, e.g. spec={{{column.name!r}: 'msgpack'}}")
        fields[column.name] = ftype
    return fields


def write_dataset_table(
    data: Any,
    directory: str | os.PathLike[str],
    spec: Mapping[str, str] | str,
    *,
    encoders: Mapping[str, Any] | None = None,
    compression: Mapping[str, str] | None = None,
    sharded: bool = True,
    shard_length: int | None = None,
    shard_size: int | None = 10 * _GIB,
    durable: bool = False,
) -> list[str]:
    """Writes the rows of a table as datapoints of a dataset (see
    sackli.arrow.write_table); returns the shard folders written."""
    stream = open_table_stream(data)
    fields = dataset_spec(stream.schema, spec)
    parsed = parse_spec(fields)
    folder = folder_path(directory)
    writer: Any
    if sharded:
        writer = ShardedDatasetWriter(folder, fields, encoders, shard_size=shard_size,
                                      shard_length=shard_length, compression=compression,
                                      durable=durable)
    else:
        writer = DatasetWriter(folder, fields, encoders, compression, durable=durable)
    names = stream.schema.names
    try:
        for batch in stream.batches:
            columns = [column_values(batch.column(name), parsed[name],
                                     f"column {name!r} (field of {folder})") for name in names]
            for row in zip(*columns):
                writer.append(dict(zip(names, row)))
        writer.close()
    except BaseException:
        writer.discard()
        if sharded:
            for shard in range(writer.shards):
                remove_shard_folder(join_path(folder, shard_name(shard)))
        raise
    if not sharded:
        return [folder]
    return [join_path(folder, shard_name(shard)) for shard in range(writer.shards)]
