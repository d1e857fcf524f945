"""How to decode the rows of a bag set: the decoding its schema file asks
for, the schema the rows were written with, the set's recorded
dictionaries, and a `schema=` the caller gave, matched against the stored
one by name (_schema_match).

`resolve_rows` reads the schema file at most once (on a bucket each read
costs requests); `SetRows.decoder` builds the decoder `read_batches`,
`RowDecoder` and the command line use. Rows are always decoded with the
stored schema; the recorded dictionaries and the casts `schema=` asks for
are applied to each decoded batch (`_FinishedDecoder`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import pyarrow as pa

from .. import Reader
from ._decode import make_decoder
from ._dictionaries import DictionaryRecoder
from ._row_codec import ROW_ENCODING
from ._schema_file import StoredSchema, find_schema_file, read_stored_schema, schema_path
from ._schema_match import check_requested

__all__ = ["ROW_ENCODINGS", "SetRows", "resolve_rows"]

# The row encodings a schema file may name (write_table's `encoding`).
ROW_ENCODINGS = (ROW_ENCODING, "arrow", "json")


@dataclasses.dataclass(frozen=True)
class SetRows:
    """The decoding of a set's records: `decode` resolved ("row", "arrow",
    "json", a function, or None for raw records), the `schema` to decode
    with (the stored one where there is a schema file; None for JSON rows
    without one: inferred), the set's recorded `dictionaries` and the
    `requested` schema (a `schema=` checked against the schema file)."""

    decode: Any
    schema: pa.Schema | None
    dictionaries: Mapping[str, pa.Array] = dataclasses.field(default_factory=dict)
    requested: pa.Schema | None = None

    def decoder(self, columns: Sequence[str] | None) -> Any:
        """The decoder of these rows, giving `columns` (default: all of the
        requested schema, else of the stored one)."""
        if self.requested is None:
            inner = make_decoder(self.decode, self.schema, columns)
            out_schema = None
        else:
            names = self.requested.names
            wanted = list(columns) if columns is not None else names
            missing = [c for c in wanted if c not in names]
            if missing:
                raise KeyError(f"no column {missing[0]!r} (columns of schema=: "
                               f"{', '.join(names)})")
            inner = make_decoder(self.decode, self.schema, wanted)
            out_schema = pa.schema([self.requested.field(c) for c in wanted],
                                   metadata=self.requested.metadata)
        recoder = DictionaryRecoder(self.dictionaries)
        if not recoder and (out_schema is None or out_schema == inner.schema):
            return inner
        return _FinishedDecoder(inner, recoder, out_schema)


class _FinishedDecoder:
    """A decoder whose batches get the set's dictionaries back and are cast
    to the requested schema (by name: the inner decoder gives the columns in
    the requested order)."""

    def __init__(self, inner: Any, recoder: DictionaryRecoder,
                 out_schema: pa.Schema | None) -> None:
        self._inner = inner
        self._recoder = recoder
        self._out = out_schema
        self.prefix = inner.prefix
        self.parallel = getattr(inner, "parallel", False)
        self.schema = out_schema if out_schema is not None else _output_schema(inner)

    def _finish(self, batch: pa.RecordBatch, source: str, first: int) -> pa.RecordBatch:
        if self._recoder:
            batch = self._recoder.recode(batch, source, first)
        if self._out is None or batch.schema == self._out:
            return batch
        columns = []
        for column, field in zip(batch.columns, self._out):
            if column.type != field.type:
                try:
                    column = column.cast(field.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                    raise ValueError(f"{source}: schema= asks for column {field.name!r} as "
                                     f"{field.type}, which a value of the records from {first} "
                                     f"on does not fit ({error})") from None
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=self._out)

    def decode(self, data: Any, offsets: Any, source: str, first: int) -> pa.RecordBatch:
        return self._finish(self._inner.decode(data, offsets, source, first), source, first)

    def decode_parts(self, data: Any, offsets: Any, source: str,
                     first: int) -> list[pa.RecordBatch]:
        if not hasattr(self._inner, "decode_parts"):
            return [self.decode(data, offsets, source, first)]
        parts = self._inner.decode_parts(data, offsets, source, first)
        finished, at = [], first
        for part in parts:
            finished.append(self._finish(part, source, at))
            at += part.num_rows
        return finished


def _output_schema(decoder: Any) -> pa.Schema:
    return getattr(decoder, "output_schema", lambda: decoder.schema)()


def resolve_rows(reader: Reader, decode: Any, schema: pa.Schema | None) -> SetRows:
    """The decoding of `reader`'s records, its schema file found and read at
    most once.

    `decode` with "auto", "arrow" and "raw" resolved: "auto" is the encoding
    the schema file names (None, raw records, without a schema file or for
    an encoding read_batches has no decoder for); "arrow" means Arrow rows of
    either codec, "row" or IPC ("arrow"), as the schema file says. A `schema`
    given for a set with a schema file must match it (see _schema_match:
    ValueError naming the first field that differs); without a schema file
    it is the schema of the rows (records that cannot be rows of it are
    corruption)."""
    if decode == "raw":
        return SetRows(None, schema)
    first = reader.paths[0]
    found: list[tuple[str | None, StoredSchema | None]] = []

    def schema_file() -> tuple[str | None, StoredSchema | None]:
        if not found:
            path = find_schema_file(first)
            found.append((path, read_stored_schema(path) if path is not None else None))
        return found[0]

    if decode in ("auto", "arrow"):
        contents = schema_file()[1]
        encoding = contents.encoding if contents is not None else None
        if decode == "arrow":
            decode = ROW_ENCODING if encoding == ROW_ENCODING else "arrow"
        else:
            decode = encoding if encoding in ROW_ENCODINGS else None
    if decode not in ROW_ENCODINGS:
        return SetRows(decode, schema)
    path, contents = schema_file()
    if path is None and (schema is not None or decode == "json"):
        return SetRows(decode, schema)
    stored = contents if contents is not None else read_stored_schema(schema_path(first))
    if stored.encoding != decode:
        raise ValueError(f"{path}: the rows were written with encoding={stored.encoding!r}, "
                         f"not {decode!r}")
    if schema is not None:
        check_requested(stored.schema, schema, str(path))
    return SetRows(decode, stored.schema, stored.dictionaries, schema)
