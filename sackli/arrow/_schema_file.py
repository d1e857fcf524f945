"""The schema file beside a bag set written from an Arrow table.

Each set has its own: `dir/name@8.bagz` (shards `dir/name-0000i-of-00008.bagz`)
keeps its schema in `dir/name-of-00008.bagz.arrow_schema`, and `dir/name.bagz`
in `dir/name.bagz.arrow_schema`, so sets of one name with other shard counts
(or windows of a stream) never share one. It sits beside the bag wherever
that is (local disk, gs://, s3://): one encapsulated Arrow IPC schema
message, readable with `pyarrow.ipc.read_schema`, whose metadata says how
the records encode rows (`sackli.encoding`) and, for dictionary columns,
holds the set's dictionaries (`sackli.dictionaries`, see _dictionaries).

Sets written before schema files were per set keep theirs in
`dir/name.bagz.arrow_schema`; readers fall back to that name.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import pyarrow as pa

from .. import CorruptionError
from .._sets import SCHEMA_SUFFIX as SUFFIX, find_schema_file, schema_path
from .._storage import read_object, write_object
from ._dictionaries import DICTIONARIES_KEY, dictionaries_from_blob, dictionaries_to_blob

__all__ = ["ENCODING_KEY", "SUFFIX", "StoredSchema", "find_schema_file", "read_schema_file",
           "read_set_schema", "read_set_stored_schema", "read_stored_schema", "schema_message",
           "schema_path", "stored_schema_of", "write_schema_file"]

ENCODING_KEY = b"sackli.encoding"


def read_set_schema(path_or_spec: str) -> tuple[pa.Schema, str]:
    """(schema, encoding) of the set `path_or_spec` (see `read_schema_file`);
    FileNotFoundError naming the schema file it should have."""
    return read_set_stored_schema(path_or_spec)[:2]


def read_set_stored_schema(path_or_spec: str) -> StoredSchema:
    """What the schema file of the set `path_or_spec` holds (see
    `read_stored_schema`)."""
    path = find_schema_file(path_or_spec)
    return read_stored_schema(path if path is not None else schema_path(path_or_spec))


class StoredSchema(NamedTuple):
    """What a schema file holds."""

    schema: pa.Schema                   # without sackli's metadata keys
    encoding: str                       # "row", "arrow", "json" ("unknown" if untagged)
    dictionaries: dict[str, pa.Array]   # recorded, by dictionary column (maybe none)


def schema_message(schema: pa.Schema, encoding: str,
                   dictionaries: Mapping[str, pa.Array] | None = None) -> bytes:
    """The schema file's content: `schema` tagged with `encoding`, and the
    set's `dictionaries` (by dictionary column) when given."""
    metadata = dict(schema.metadata or {})
    metadata[ENCODING_KEY] = encoding.encode()
    metadata.pop(DICTIONARIES_KEY, None)
    if dictionaries:
        metadata[DICTIONARIES_KEY] = dictionaries_to_blob(dictionaries)
    return schema.with_metadata(metadata).serialize().to_pybytes()


def write_schema_file(path: str, schema: pa.Schema, encoding: str) -> None:
    """Writes `schema`, tagged with `encoding`, to `path` (a local path or a
    gs:// / s3:// URL), atomically."""
    write_object(path, schema_message(schema, encoding))


def read_schema_file(path: str) -> tuple[pa.Schema, str]:
    """(schema without sackli's metadata, encoding) from a schema file (a
    local path or a gs:// / s3:// URL); see `read_stored_schema`."""
    return read_stored_schema(path)[:2]


def read_stored_schema(path: str) -> StoredSchema:
    """What the schema file `path` (a local path or a gs:// / s3:// URL)
    holds.

    Raises FileNotFoundError naming the path, sackli.CorruptionError for a file that is
    not an Arrow schema (or whose recorded dictionaries do not fit it).
    """
    try:
        data = read_object(path)
    except FileNotFoundError:
        raise FileNotFoundError(
            2, f"{path}: no Arrow schema beside the bag (was it written by "
            "sackli.arrow.write_table? pass schema= otherwise)", path) from None
    return stored_schema_of(data, path)


def stored_schema_of(message: bytes, where: str) -> StoredSchema:
    """What a schema file's content (`message`, from `where`) holds;
    sackli.CorruptionError naming `where` if it is not a schema file."""
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(message))
    except (pa.ArrowInvalid, OSError) as error:
        raise CorruptionError(f"{where}: not an Arrow schema file ({error})") from None
    metadata = dict(schema.metadata or {})
    encoding = metadata.pop(ENCODING_KEY, b"").decode() or "unknown"
    blob = metadata.pop(DICTIONARIES_KEY, None)
    schema = schema.with_metadata(metadata or None)
    dictionaries = dictionaries_from_blob(blob, schema, where) if blob is not None else {}
    return StoredSchema(schema, encoding, dictionaries)
