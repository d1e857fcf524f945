"""The Arrow bridge's internal interface: rows in and out of records, for
`sackli.beam` and `sackli.cli`.

Who may use it: `sackli.beam` (rows written by a pipeline) and
`sackli.cli` (printing rows, checking a Parquet source); the public names
(`schema_path`, `read_schema`, ...) come from `sackli.arrow` itself. No
stability promise. Each name is defined and documented where it says:

- encoding rows as records: `make_encoder`, `ColumnEncoder` (`_encode`) and
  `default_encoding` (`_row_codec`);
- a set's schema file: found (`find_schema_file`), read with its encoding
  (`read_set_schema`) and its bytes (`schema_message`) (`_schema_file`);
- decoding records as rows: `resolve_rows` (`_set_rows`: the decoding a
  bag's schema file asks for, as a `SetRows` whose `decoder` decodes them),
  `make_decoder` (`_decode`) and `dump_row` (`_json_types`: a row as JSON
  text, as `encoding="json"` writes it);
- a Parquet file or folder opened as a dataset, with its messages:
  `parquet_dataset` (`_inputs`);
- a stream of record batches whose length is known, for `write_table`
  (`sackli convert` from samples): `TableStream` (`_inputs`).
"""

from __future__ import annotations

from ._decode import make_decoder
from ._encode import ColumnEncoder, make_encoder
from ._inputs import TableStream, _parquet_dataset as parquet_dataset
from ._json_types import dump_row
from ._row_codec import default_encoding
from ._schema_file import find_schema_file, read_set_schema, schema_message
from ._set_rows import resolve_rows

__all__ = ["ColumnEncoder", "TableStream", "default_encoding", "dump_row", "find_schema_file",
           "make_decoder", "make_encoder", "parquet_dataset", "read_set_schema", "resolve_rows",
           "schema_message"]
