"""The dictionaries of a row set's dictionary columns, recorded with its schema.

Rows store a dictionary column as its values (see _types), so without more
each decoded batch would get a dictionary of its own, in another order, and
the codes would change from batch to batch. `write_table` therefore keeps
one dictionary per top-level dictionary column for the whole set: the
dictionaries of the batches written, unified in the order their values
first appear (as `pyarrow.Table.unify_dictionaries` does: the first
batch's dictionary as it is, then the new values of each later one). It is
recorded in the schema file's metadata, and decoded batches get it back
with the codes as written (`DictionaryRecoder`).

In the schema file it is the metadata key `sackli.dictionaries`: an Arrow
IPC stream of one record batch of one row, with one `large_list` column per
dictionary column (same name) holding its dictionary. Dictionaries nested
inside lists or structs are not recorded (they come back rebuilt per batch,
as for sets written before dictionaries were recorded).
"""

from __future__ import annotations

from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from .. import CorruptionError

__all__ = ["DICTIONARIES_KEY", "DictionaryRecoder", "DictionaryUnifier", "dictionaries_from_blob",
           "dictionaries_to_blob"]

DICTIONARIES_KEY = b"sackli.dictionaries"


def _dictionary_columns(schema: pa.Schema) -> list[pa.Field]:
    return [field for field in schema if pa.types.is_dictionary(field.type)]


def _max_codes(index_type: pa.DataType) -> int:
    """How many dictionary entries codes of `index_type` can address."""
    bits = index_type.bit_width - (0 if pa.types.is_unsigned_integer(index_type) else 1)
    return 1 << bits


def _identity(array: pa.Array) -> tuple:
    """What tells one array's memory from another's (without comparing
    the values)."""
    return (array.offset, len(array), tuple(b.address if b is not None else 0
                                            for b in array.buffers()))


class DictionaryUnifier:
    """The set's dictionary of each top-level dictionary column of
    `schema`, grown from the batches `observe` sees."""

    def __init__(self, schema: pa.Schema) -> None:
        self._fields = _dictionary_columns(schema)
        self._unified: dict[str, pa.Array] = {}
        self._last_seen: dict[str, tuple] = {}

    def __bool__(self) -> bool:
        return bool(self._fields)

    def observe(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Adds the dictionaries of `batch` (returned as it is). ValueError
        naming the column when the set's dictionary outgrows its index
        type (the codes could not be kept)."""
        for field in self._fields:
            column = batch.column(field.name)
            dictionary = column.dictionary
            identity = _identity(dictionary)
            if self._last_seen.get(field.name) == identity:
                continue  # slices of one batch share its dictionary
            self._last_seen[field.name] = identity
            known = self._unified.get(field.name)
            if known is None:
                self._unified[field.name] = dictionary
            elif not dictionary.equals(known):
                new = dictionary.filter(pc.invert(pc.is_in(dictionary, value_set=known)))
                if len(new):
                    self._unified[field.name] = pa.concat_arrays([known, pc.unique(new)])
            size = len(self._unified[field.name])
            if size > _max_codes(field.type.index_type):
                raise ValueError(
                    f"column {field.name!r}: the dictionaries of its batches hold {size:,} "
                    f"values together, more than {field.type.index_type} codes can address; "
                    "cast the column to a dictionary with a wider index type")
        return batch

    def dictionaries(self) -> dict[str, pa.Array]:
        """The dictionary of each dictionary column seen in a batch."""
        return dict(self._unified)


def dictionaries_to_blob(dictionaries: Mapping[str, pa.Array]) -> bytes:
    """The schema file's `sackli.dictionaries` value."""
    columns = [pa.LargeListArray.from_arrays(pa.array([0, len(d)], pa.int64()), d)
               for d in dictionaries.values()]
    batch = pa.RecordBatch.from_arrays(columns, names=list(dictionaries))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def dictionaries_from_blob(blob: bytes, schema: pa.Schema, where: str) -> dict[str, pa.Array]:
    """The dictionaries recorded in a schema file (`where`, for errors) for
    `schema`'s dictionary columns; CorruptionError when they are not the
    recorded dictionaries of those columns."""
    try:
        table = pa.ipc.open_stream(pa.py_buffer(blob)).read_all()
    except (pa.ArrowInvalid, OSError) as error:
        raise CorruptionError(f"{where}: its recorded dictionaries do not read ({error})") from None
    types = {field.name: field.type for field in _dictionary_columns(schema)}
    found: dict[str, pa.Array] = {}
    for name in table.column_names:
        column = table.column(name)
        value_type = types.get(name)
        if (value_type is None or table.num_rows != 1
                or column.type.value_type != value_type.value_type):
            raise CorruptionError(f"{where}: a dictionary is recorded for {name!r}, which is not "
                                  "a dictionary column of its schema with those values")
        found[name] = column.combine_chunks().values
    return found


class DictionaryRecoder:
    """Gives the dictionary columns of decoded batches the set's recorded
    dictionaries, with the codes as written."""

    def __init__(self, dictionaries: Mapping[str, pa.Array]) -> None:
        self._dictionaries = dict(dictionaries)

    def __bool__(self) -> bool:
        return bool(self._dictionaries)

    def recode(self, batch: pa.RecordBatch, source: str, first: int) -> pa.RecordBatch:
        """`batch` with its recorded dictionary columns recoded;
        CorruptionError naming `source` and the batch's first record when a
        value is not in the recorded dictionary."""
        columns = batch.columns
        for i, name in enumerate(batch.schema.names):
            stored = self._dictionaries.get(name)
            column = columns[i]
            if stored is None or not isinstance(column, pa.DictionaryArray):
                continue
            if column.dictionary.equals(stored):
                continue
            # Each entry of the batch's dictionary -> its code in the set's.
            codes = pc.index_in(column.dictionary, value_set=stored)
            if codes.null_count:
                raise CorruptionError(
                    f"{source}: records from {first} on hold a value of column {name!r} that "
                    "is not in the dictionary recorded in the schema file")
            indices = codes.take(column.indices).cast(column.type.index_type)
            columns[i] = pa.DictionaryArray.from_arrays(indices, stored,
                                                        ordered=column.type.ordered)
        return pa.RecordBatch.from_arrays(columns, schema=batch.schema)
