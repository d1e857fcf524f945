"""The schema file beside a bag set written from an Arrow table.

`dir/name@8.bagz` (shards `dir/name-0000i-of-00008.bagz`) and `dir/name.bagz`
both keep their schema in `dir/name.bagz.arrow_schema` (on local disk, gs://
or s3://, wherever the bag is): one encapsulated
Arrow IPC schema message, readable with `pyarrow.ipc.read_schema`. Its
metadata says how the records encode rows (`sackli.encoding`).
"""

from __future__ import annotations

import os
import re

import pyarrow as pa

from .._engine import CorruptionError
from .._shard_spec import split_shard_entry, strip_local_prefix
from .._whole_files import read_bytes, write_bytes

__all__ = ["ENCODING_KEY", "read_schema_file", "schema_message", "schema_path", "write_schema_file"]

SUFFIX = ".arrow_schema"
ENCODING_KEY = b"sackli.encoding"
_SHARD_NUMBERING = re.compile(r"-\d{5}-of-\d{5}(?=[^/]*$)")


def schema_path(path_or_spec: str) -> str:
    """Where the schema of a bag set lives, from a shard spec (`x@8.bagz`)
    or from the path of any of its files (`x-00003-of-00008.bagz`)."""
    entry = strip_local_prefix(os.fspath(path_or_spec).split(",")[0])
    sharded = split_shard_entry(entry)
    if sharded is not None:
        base, _, suffix = sharded
        entry = base + suffix
    else:
        entry = _SHARD_NUMBERING.sub("", entry, count=1)
    return entry + SUFFIX


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
