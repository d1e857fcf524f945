"""The Arrow bridge: Arrow tables and Parquet into bag shards, bag records
out as Arrow record batches (and so into pyarrow, Polars and DuckDB).

Needs the `arrow` extra (`pip install 'sackli-bagz[arrow]'`, i.e. pyarrow).

Other sackli packages (the command line, Beam) import, besides this
module, only `_codecs` (rows in and out of records).
Internal interface: _codecs

    >>> import sackli.arrow
    >>> sackli.arrow.write_table("events.parquet", "events@8.bagz")
    >>> table = sackli.arrow.read_table("events@8.bagz", columns=["id", "kind"])

A `sackli.datasets` folder reads as one column per field, and a table
writes into one with `spec=`:

    >>> labels = sackli.arrow.read_table("my_dataset", fields=["label"])
    >>> sackli.arrow.write_table(table, "new_dataset", spec="auto")

A `sackli.Reader` is itself an Arrow stream source (`__arrow_c_stream__`):
`pyarrow.table(reader)` gives its records as one `large_binary` column.
See docs/arrow.md for the record encodings, the schema file and datasets.
"""

try:
    import pyarrow  # noqa: F401
except ImportError as _error:  # pragma: no cover - depends on the install
    raise ImportError(
        "sackli.arrow needs pyarrow; install it with: pip install 'sackli-bagz[arrow]'"
    ) from _error

from ._decode import records_array
from ._read import read_batches, read_table
from ._row_decoder import RowDecoder
from ._schema_file import find_schema_file, read_schema_file, read_set_schema, schema_path
from ._write import write_table

__all__ = ["RowDecoder", "read_batches", "read_schema", "read_table", "records_array", "row_encoding",
           "schema_path", "write_table"]


def read_schema(file_spec: str) -> "pyarrow.Schema":
    """The Arrow schema written beside a bag set by `write_table`.

    Raises FileNotFoundError when there is no schema file."""
    return read_set_schema(file_spec)[0]


def row_encoding(file_spec: str) -> str | None:
    """How `write_table` encoded the rows of a bag set ("row", "arrow" or
    "json"), from its schema file; None when there is no schema file."""
    path = find_schema_file(file_spec)
    return read_schema_file(path)[1] if path is not None else None
