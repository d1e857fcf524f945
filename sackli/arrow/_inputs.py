"""The tables write_table accepts, as one stream of record batches."""

from __future__ import annotations

import dataclasses
import errno
import os
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.dataset as ds

from .._storage import path_argument

__all__ = ["TableStream", "open_table_stream"]

# Rows a scan of a dataset hands over at a time.
_SCAN_BATCH_ROWS = 16384


@dataclasses.dataclass
class TableStream:
    """A table as a stream: its schema, its batches and, when known without
    reading it, its number of rows."""

    schema: pa.Schema
    batches: Iterator[pa.RecordBatch]
    num_rows: int | None


def _parquet_dataset(path: str) -> ds.Dataset:
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, f"{path}: no such Parquet file or folder", path)
    try:
        return ds.dataset(path, format="parquet", partitioning="hive")
    except pa.ArrowInvalid as error:
        raise ValueError(f"{path}: not a Parquet file or folder of them ({error})") from None


def _from_dataset(dataset: ds.Dataset) -> TableStream:
    return TableStream(dataset.schema,
                       iter(dataset.to_batches(batch_size=_SCAN_BATCH_ROWS)),
                       dataset.count_rows())


def open_table_stream(data: Any) -> TableStream:
    """`data` (Table, RecordBatch, RecordBatchReader, Dataset, Parquet path,
    or an object with `__arrow_c_stream__` / `__arrow_c_array__`) as a
    TableStream; a TableStream as it is (how sackli's own callers, e.g.
    `sackli convert` from an image folder, pass a stream whose length they
    know). Raises TypeError for anything else."""
    if isinstance(data, TableStream):
        return data
    if isinstance(data, pa.Table):
        return TableStream(data.schema, iter(data.to_batches()), data.num_rows)
    if isinstance(data, pa.RecordBatch):
        return TableStream(data.schema, iter([data]), data.num_rows)
    if isinstance(data, pa.RecordBatchReader):
        return TableStream(data.schema, iter(data), None)
    if isinstance(data, ds.Dataset):
        return _from_dataset(data)
    if isinstance(data, (str, os.PathLike)):
        return _from_dataset(_parquet_dataset(path_argument(data, "a Parquet path")))
    if hasattr(data, "__arrow_c_stream__"):
        reader = pa.RecordBatchReader.from_stream(data)
        return TableStream(reader.schema, iter(reader), None)
    if hasattr(data, "__arrow_c_array__"):
        batch = pa.record_batch(data)
        return TableStream(batch.schema, iter([batch]), batch.num_rows)
    raise TypeError(
        "data must be a pyarrow Table, RecordBatch, RecordBatchReader or Dataset, a "
        "Parquet file or folder path, or an object with __arrow_c_stream__ (a Polars "
        f"DataFrame, a DuckDB result), not {type(data).__name__}")
