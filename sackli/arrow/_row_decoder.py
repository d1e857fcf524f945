"""`RowDecoder`: records of a row bag set decoded as Python dicts, one at a
time or a batch at a time, for a loader's `transform=` or `collate_fn`.

`read_table` decodes rows that it reads itself; a loader (`EpochStream`, a
torch `DataLoader` over a `Reader`) hands out the records as bytes. This
decodes those bytes with the schema written beside the set, by the same
decoders `read_batches` uses.
"""

from __future__ import annotations

import array
import os
from typing import Any, Iterable, Sequence

import pyarrow as pa

from .._storage import path_argument
from ._schema_file import (
    StoredSchema, read_set_stored_schema, schema_message, stored_schema_of,
)
from ._set_rows import SetRows

__all__ = ["RowDecoder"]


class RowDecoder:
    """Decodes the records of a bag set written by `write_table` (or
    `sackli convert` from Parquet, an image folder or WebDataset tars) into
    dicts of column values.

    Args:
      file_spec: the set, as given to `Reader` (`train@*.bagz`): its schema
        file is read once, here.
      columns: decode only these columns (default: all).

    A decoder pickles with its schema (a copy reads no file), so it goes
    to loader workers, also under `spawn`. Binary columns come out as
    `bytes`, strings as `str`, integers as `int`; a record that is not a
    row of the schema raises `sackli.CorruptionError`, naming the set and
    the record's position in the call (the decoder does not know its index
    in the bag).

    Example:
      >>> rows = sackli.arrow.RowDecoder("train@*.bagz")
      >>> rows(sackli.Reader("train@*.bagz")[0])
      {'image': b'\\x89PNG...', 'label': 3, 'path': 'cat/0001.png'}
    """

    def __init__(self, file_spec: str | os.PathLike[str],
                 columns: Sequence[str] | None = None) -> None:
        spec = path_argument(file_spec, "file_spec")
        self._setup(spec, read_set_stored_schema(spec), columns)

    def _setup(self, spec: str, stored: StoredSchema, columns: Sequence[str] | None) -> None:
        self._spec = spec
        self._stored = stored
        self._columns = None if columns is None else list(columns)
        # Dictionary columns come out with the set's recorded dictionaries.
        rows = SetRows(stored.encoding, stored.schema, stored.dictionaries)
        self._decoder = rows.decoder(self._columns)

    @property
    def schema(self) -> pa.Schema:
        """The schema of the set's rows (all columns), as written."""
        return self._stored.schema

    def __call__(self, record: bytes) -> dict[str, Any]:
        """One record as a dict of its (chosen) columns."""
        return self.decode_many([record])[0]

    def decode_many(self, records: Iterable[bytes]) -> list[dict[str, Any]]:
        """Several records, in one decoder call (cheaper per record)."""
        return self.decode_batch(records).to_pylist()

    def decode_batch(self, records: Iterable[bytes]) -> pa.RecordBatch:
        """Several records as one Arrow record batch (no Python object per
        value: for columns that go on to numpy or a framework)."""
        # Some decoders read the records after a prefix of their own (IPC
        # rows: the schema's message); offsets count from the prefix's start.
        prefix = self._decoder.prefix
        records = list(records)
        offsets = array.array("q", [len(prefix)])
        for record in records:
            offsets.append(offsets[-1] + len(record))
        data = b"".join([prefix, *records])
        return self._decoder.decode(data, memoryview(offsets), self._spec, 0)

    def __reduce__(self) -> tuple[Any, ...]:
        stored = self._stored
        return (_restore, (self._spec, schema_message(stored.schema, stored.encoding,
                                                      stored.dictionaries), self._columns))

    def __repr__(self) -> str:
        return f"sackli.arrow.RowDecoder({self._spec!r}, columns={self._columns!r})"


def _restore(spec: str, message: bytes, columns: Sequence[str] | None) -> RowDecoder:
    decoder = RowDecoder.__new__(RowDecoder)
    decoder._setup(spec, stored_schema_of(message, spec), columns)
    return decoder
