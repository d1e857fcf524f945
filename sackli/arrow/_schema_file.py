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

import errno
import os
import re

import pyarrow as pa

from .._engine import CorruptionError
from .._shard_spec import expand_file_spec, split_shard_entry, strip_local_prefix
from .._whole_files import exists, read_bytes, write_bytes

__all__ = ["ENCODING_KEY", "find_schema_file", "read_schema_file", "read_set_schema",
           "schema_message", "schema_path", "write_schema_file"]

SUFFIX = ".arrow_schema"
ENCODING_KEY = b"sackli.encoding"
_SHARD_NUMBERING = re.compile(r"-\d{5}-of-(\d{5})(?=[^/]*$)")


def _one_file(path_or_spec: str) -> str:
    """A file of the set `path_or_spec` names (its first entry), or the
    spec itself for `name@N.ext`; `name@*.ext` is resolved by listing."""
    entry = strip_local_prefix(os.fspath(path_or_spec).split(",")[0])
    sharded = split_shard_entry(entry)
    if sharded is None:
        return entry
    if sharded[1] == "*":
        return expand_file_spec(entry)[0]
    base, count, suffix = sharded
    return f"{base}-00000-of-{int(count):05d}{suffix}"


def schema_path(path_or_spec: str) -> str:
    """Where the schema of a bag set is written: from a shard spec
    (`x@8.bagz` -> `x-of-00008.bagz.arrow_schema`) or from the path of any
    of its files (`x-00003-of-00008.bagz` -> the same); `x@*.bagz` is
    resolved by listing (FileNotFoundError when no set matches)."""
    entry = _one_file(path_or_spec)
    return _SHARD_NUMBERING.sub(r"-of-\1", entry, count=1) + SUFFIX


def _shared_schema_path(path: str) -> str:
    """The name every set of one base shared before schema files were per set."""
    return _SHARD_NUMBERING.sub("", path, count=1) + SUFFIX


def find_schema_file(path_or_spec: str) -> str | None:
    """The schema file of the set: its own, or the older shared one; None
    when there is neither."""
    path = schema_path(path_or_spec)
    if exists(path):
        return path
    shared = _shared_schema_path(_one_file(path_or_spec))
    return shared if shared != path and exists(shared) else None


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
    write_bytes(path, schema_message(schema, encoding))


def read_schema_file(path: str) -> tuple[pa.Schema, str]:
    """(schema without sackli's tag, encoding) from a schema file (a local
    path or a gs:// / s3:// URL).

    Raises FileNotFoundError naming the path, sackli.CorruptionError for a file that is
    not an Arrow schema.
    """
    try:
        data = read_bytes(path)
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
