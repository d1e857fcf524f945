"""The schema file beside a bag set written from an Arrow table.

Each set has its own: `dir/name@8.bagz` (shards `dir/name-0000i-of-00008.bagz`)
keeps its schema in `dir/name-of-00008.bagz.arrow_schema`, and `dir/name.bagz`
in `dir/name.bagz.arrow_schema`, so sets of one name with other shard counts
(or windows of a stream) never share one. It sits beside the bag wherever
that is (local disk, gs://, s3://): one encapsulated Arrow IPC schema
message, readable with `pyarrow.ipc.read_schema`, whose metadata says how
the records encode rows (`sackli.encoding`).

Sets written before schema files were per set keep theirs in
`dir/name.bagz.arrow_schema`; readers fall back to that name.
"""

from __future__ import annotations

import pyarrow as pa

from .. import CorruptionError
from .._sets import SCHEMA_SUFFIX as SUFFIX, find_schema_file, schema_path
from .._storage import read_object, write_object

__all__ = ["ENCODING_KEY", "SUFFIX", "find_schema_file", "read_schema_file", "read_set_schema",
           "schema_message", "schema_path", "write_schema_file"]

ENCODING_KEY = b"sackli.encoding"


def read_set_schema(path_or_spec: str) -> tuple[pa.Schema, str]:
    """(schema, encoding) of the set `path_or_spec` (see `read_schema_file`);
    FileNotFoundError naming the schema file it should have."""
    path = find_schema_file(path_or_spec)
    return read_schema_file(path if path is not None else schema_path(path_or_spec))


def schema_message(schema: pa.Schema, encoding: str) -> bytes:
    """The schema file's content: `schema` tagged with `encoding`."""
    metadata = dict(schema.metadata or {})
    metadata[ENCODING_KEY] = encoding.encode()
    return schema.with_metadata(metadata).serialize().to_pybytes()


def write_schema_file(path: str, schema: pa.Schema, encoding: str) -> None:
    """Writes `schema`, tagged with `encoding`, to `path` (a local path or a
    gs:// / s3:// URL), atomically."""
    write_object(path, schema_message(schema, encoding))


def read_schema_file(path: str) -> tuple[pa.Schema, str]:
    """(schema without sackli's tag, encoding) from a schema file (a local
    path or a gs:// / s3:// URL).

    Raises FileNotFoundError naming the path, sackli.CorruptionError for a file that is
    not an Arrow schema.
    """
    try:
        data = read_object(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            2, f"{path}: no Arrow schema beside the bag (was it written by "
            "sackli.arrow.write_table? pass schema= otherwise)", path) from None
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(data))
    except (pa.ArrowInvalid, OSError) as error:
        raise CorruptionError(f"{path}: not an Arrow schema file ({error})") from None
    metadata = dict(schema.metadata or {})
    encoding = metadata.pop(ENCODING_KEY, b"").decode() or "unknown"
    return schema.with_metadata(metadata or None), encoding
