"""Schema-aware pipelines: bags of Arrow rows as Beam Rows, and back.

A shard set written by `sackli.arrow.write_table` (encoding "row",
"arrow" or "json") carries its Arrow schema in a schema file beside it. Reading it
`as_rows` yields one Beam Row per record, typed by that schema, so Beam SQL
and the DataFrame API work on it. Writing a schema'd PCollection (elements
of `beam.Row` or a NamedTuple with a Beam schema) stores each element as an
Arrow row (encoding "row", as `write_table` chooses it: IPC rows for schemas
the row codec cannot hold) and writes the schema file beside the output.

Beam schemas hold fewer types than Arrow (see
`apache_beam.typehints.arrow_type_compatibility`): integers, floats,
booleans, strings, binary, lists, maps and structs. A column of another type
(timestamps, dates, decimals...) is a clear error; `ReadFromSackliBatched`
reads such bags as Arrow batches.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.portability.api import schema_pb2
from apache_beam.typehints import arrow_type_compatibility, schemas
from apache_beam.typehints.row_type import RowTypeConstraint

from ..arrow import schema_path
from ..arrow._codecs import default_encoding, make_encoder, read_set_schema, schema_message
from ._files import expand_pattern
from ._pipeline_storage import pipeline_storage

__all__ = ["BatchesToRows", "EncodeRows", "WriteSchemaFile", "row_schema", "stored_rows"]

# Rows are encoded this many at a time (one Arrow batch each).
_ROWS_PER_BATCH = 1024
# The schema file's mime type in object stores.
_MIME_TYPE = "application/vnd.apache.arrow.file"


def _beam_row_type(schema: pa.Schema, where: str) -> type:
    """The Beam row type (a NamedTuple) of an Arrow schema; ValueError
    naming the first column Beam schemas cannot hold."""
    for field in schema:
        try:
            arrow_type_compatibility.beam_schema_from_arrow_schema(pa.schema([field]))
        except ValueError:
            raise ValueError(
                f"{where}: column {field.name!r} has Arrow type {field.type}, which Beam "
                "schemas cannot hold; read these bags with ReadFromSackliBatched instead"
            ) from None
    return schemas.named_tuple_from_schema(
        arrow_type_compatibility.beam_schema_from_arrow_schema(schema))


def stored_rows(file_pattern: str, options: Any, empty_match_treatment: str) -> tuple[str, type]:
    """(row encoding, Beam row type) of the bags of `file_pattern`, from
    the schema file beside its first file (I/O: a listing and one read, at
    pipeline construction, as Beam's `ReadFromParquet(as_rows=True)` does).

    Raises FileNotFoundError when no file matches or there is no schema
    file, ValueError for an encoding other than "row"/"arrow"/"json" or a column
    Beam schemas cannot hold."""
    files = expand_pattern(file_pattern, options, empty_match_treatment)
    if not files:
        raise FileNotFoundError(
            2, f"{file_pattern}: as_rows needs a file to take the schema from; none matches",
            file_pattern)
    path = files[0].path
    with pipeline_storage():  # remote: read as the pipeline's options say, like the listing
        schema, encoding = read_set_schema(path)
    if encoding not in ("row", "arrow", "json"):
        raise ValueError(f"{path}: the rows were written with encoding={encoding!r}; "
                         "as_rows reads 'row', 'arrow' and 'json' rows")
    return encoding, _beam_row_type(schema, path)


class BatchesToRows(beam.DoFn):
    """Each RecordBatch of decoded rows as Beam Rows of `row_type`."""

    def __init__(self, row_type: type) -> None:
        self._row_type = row_type

    def __getstate__(self) -> dict[str, Any]:
        # The row type is a class Beam generated, which the standard
        # library's pickle (and dill) cannot find by name: its Beam schema
        # travels instead (serialised: pickle cannot find the proto's class
        # either), and names the same type (by the schema's id).
        state = self.__dict__.copy()
        state["_row_type"] = schemas.schema_from_element_type(self._row_type).SerializeToString()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        schema = schema_pb2.Schema.FromString(state["_row_type"])
        state["_row_type"] = schemas.named_tuple_from_schema(schema)
        self.__dict__.update(state)

    def process(self, batch: pa.RecordBatch) -> Iterator[Any]:
        columns = [batch.column(name).to_pylist() for name in self._row_type._fields]
        make = self._row_type
        for values in zip(*columns):
            yield make(*values)


def row_schema(element_type: Any) -> pa.Schema | None:
    """The Arrow schema of a schema'd PCollection's element type, or None
    when the elements have no Beam schema (bytes, objects with a coder)."""
    try:
        constraint = (element_type if isinstance(element_type, RowTypeConstraint)
                      else RowTypeConstraint.from_user_type(element_type))
    except (TypeError, ValueError):
        return None
    if constraint is None:
        return None
    beam_schema = schemas.schema_from_element_type(constraint)
    return arrow_type_compatibility.arrow_schema_from_beam_schema(beam_schema)


class _EncodeBatch(beam.DoFn):
    """A list of rows as their Arrow row records (bytes), in order."""

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema
        self._encoder = None

    def setup(self) -> None:
        self._encoder = make_encoder(self._schema, None, default_encoding(self._schema), False)

    def process(self, rows: list[Any]) -> Iterator[bytes]:
        names = self._schema.names
        batch = pa.RecordBatch.from_pylist(
            [{name: getattr(row, name) for name in names} for row in rows], schema=self._schema)
        data, offsets = self._encoder.encode(batch)
        view = memoryview(data)
        for k in range(len(rows)):
            yield bytes(view[offsets[k]:offsets[k + 1]])


class EncodeRows(beam.PTransform):
    """Schema'd elements -> Arrow row records (bytes), batched per window."""

    def __init__(self, schema: pa.Schema) -> None:
        super().__init__()
        self._schema = schema

    def expand(self, rows: beam.PCollection) -> beam.PCollection:
        return (
            rows
            | "Batch" >> beam.BatchElements(min_batch_size=_ROWS_PER_BATCH,
                                            max_batch_size=_ROWS_PER_BATCH)
            | "Encode" >> beam.ParDo(_EncodeBatch(self._schema)).with_output_types(bytes)
        )


def _write_schema(path: str, message: bytes) -> None:
    """Writes the schema file through Beam's file systems (any of them,
    configured by the pipeline's options): to a temporary name, then
    renamed, so readers never see half of it."""
    # A name of this writer's own: two workers may write the same set's
    # schema file at once (a stream's panes reach this more than once).
    temp = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
    with FileSystems.create(temp, _MIME_TYPE) as file:
        file.write(message)
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temp], [path])


class WriteSchemaFile(beam.PTransform):
    """Once shards are final (the input: their file names), writes the
    schema file of each shard set among them (one per set: a windowed
    stream writes a set per window, each with its schema file)."""

    def __init__(self, schema: pa.Schema) -> None:
        super().__init__()
        self._message = schema_message(schema, default_encoding(schema))

    def expand(self, file_names: beam.PCollection) -> beam.PCollection:
        message = self._message
        return (
            file_names
            | "SchemaPaths" >> beam.Map(schema_path)
            | "OncePerSet" >> beam.Distinct()
            | "Write" >> beam.Map(lambda path: (_write_schema(path, message), path)[1])
        )
