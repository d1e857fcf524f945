"""`DatasetReader`: reads one dataset folder (a shard) written by `bags`
0.5.1 or sackli.datasets.

A batch of datapoints costs one engine batch read of refs.bag and one per
requested field (list items of all datapoints gathered into one batch), each
parallel with the GIL released; only the decoders run per value in Python.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from .._engine import CorruptionError
from .._reader import Reader
from ._bag import open_records
from ._builtin_codecs import decoders as builtin_decoders, one_argument
from ._closing import ClosesOnExit
from ._datapoints import Datapoint, DatapointSequence, Mask
from ._field_files import COMPRESSION_KEY, field_file, parse_compression
from ._folders import SPEC_FILE, folder_path, join, read_bytes
from ._mask import Selection, resolve_mask
from ._refs import unpack_refs
from ._spec import FieldType, ShardFolder, parse_spec

__all__ = ["DatasetReader", "read_spec"]

_LIMIT_BYTES = 8


def read_spec(directory: str) -> tuple[dict[str, FieldType], dict[str, str]]:
    """The parsed spec.json of a dataset folder, and the file name of each
    field (see _field_files).

    Raises FileNotFoundError naming spec.json when it is missing, and
    ValueError when it is not a valid spec.
    """
    path = join(directory, SPEC_FILE)
    content = read_bytes(path)
    try:
        raw = json.loads(content)
        compression = raw.pop(COMPRESSION_KEY, None) if isinstance(raw, dict) else None
        fields = parse_spec(raw)
        compressed = parse_compression(compression, fields, path)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path}: not a valid dataset spec: {error}") from error
    return fields, {field: field_file(field, field in compressed) for field in fields}


class DatasetReader(DatapointSequence, ShardFolder, ClosesOnExit):
    """Reads a dataset folder: `len(r)`, `r.size`, `r.spec`, `r[i]` (a dict
    of decoded fields), `r[i, mask]`, `r[a:b]` views, batch reads
    (`read_indices`, `read_indices_iter`) and iteration. Thread-safe.

    Args:
      directory: the folder holding spec.json, refs.bag and `<field>.bag`
        (`<field>.bagz` for fields written with compression); local, or a
        `gs://bucket/prefix` / `s3://bucket/prefix`.
      decoders: type name -> `decode(buffer, *args)`; None for the built-in
        `sackli.datasets.decoders`.
      cache_index: keep each file's offsets in memory (True) or read them
        from the file when needed (False).

    Raises:
      FileNotFoundError: spec.json, refs.bag or a field's file is missing.
      sackli.CorruptionError: a file is truncated or not a `bags` file.
    Reads raise sackli.CorruptionError for refs that point past a field's
    file, naming the field and both files.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        decoders: Mapping[str, Any] | None = None,
        cache_index: bool = True,
    ) -> None:
        self._directory = folder_path(directory)
        self._fields, self._files = read_spec(self._directory)
        self._files["refs"] = "refs.bag"
        self._decoders = builtin_decoders if decoders is None else decoders
        self._refs = open_records(self._path("refs"), cache_index)
        self._readers = {
            field: open_records(self._path(field), cache_index) for field in self._fields}
        self._rows = range(len(self._refs))

    def _path(self, name: str) -> str:
        return join(self._directory, self._files[name])

    @property
    def size(self) -> int:
        """Bytes of the dataset's bag files (spec.json excluded, as in `bags`)."""
        readers = [self._refs, *self._readers.values()]
        return sum(r.stored_bytes + _LIMIT_BYTES * (len(r) + 1) for r in readers)

    def _read_rows(self, rows: list[int], mask: Mask | None) -> list[Datapoint]:
        plan = resolve_mask(mask, self._fields, self._directory)
        datapoints: list[Datapoint] = [{} for _ in rows]
        if not rows or not plan:
            return datapoints
        refs = self._read_refs(rows)
        for position, field, ftype, selection in plan:
            field_refs = [datapoint_refs[position] for datapoint_refs in refs]
            if ftype.is_list:
                self._read_lists(rows, field, ftype, field_refs, selection, datapoints)
            else:
                self._read_scalars(rows, field, ftype, field_refs, datapoints)
        return datapoints

    def _read_refs(self, rows: list[int]) -> list[list[Any]]:
        """The refs of the datapoints at `rows`, one entry per field."""
        refs = []
        for row, record in zip(rows, self._refs.read_indices(rows)):
            try:
                datapoint_refs = unpack_refs(record)
            except Exception:  # msgpack raises several kinds for bad bytes
                datapoint_refs = None
            if not isinstance(datapoint_refs, list) or len(datapoint_refs) != len(self._fields):
                raise CorruptionError(
                    f"{self._path('refs')}: the refs of datapoint {row} are not a msgpack list "
                    f"of {len(self._fields)} entries (one per field of spec.json)")
            refs.append(datapoint_refs)
        return refs

    def _decoder(self, field: str, ftype: FieldType) -> Any:
        """`decode(buffer)` for the field's values."""
        try:
            decode = self._decoders[ftype.dtype]
        except KeyError:
            raise ValueError(
                f"field {field!r} of {self._directory}: no decoder for type "
                f"{ftype.dtype!r}") from None
        return one_argument(decode, ftype.args)

    def _read_values(self, field: str, ftype: FieldType, indices: list[int]) -> list[Any]:
        """The decoded values at `indices` of the field's file, read in one batch.

        Raises ValueError naming the file and record when a value does not
        decode (an ImportError of a missing codec library passes as it is).
        """
        decode = self._decoder(field, ftype)
        records = self._readers[field].read_indices(indices)
        try:
            return list(map(decode, records))
        except ImportError:
            raise
        except Exception as error:
            for index, record in zip(indices, records):  # find the bad one
                try:
                    decode(record)
                except Exception:
                    break
            raise ValueError(
                f"{self._path(field)}: record {index} of field {field!r} does not decode as "
                f"{ftype.dtype}: {error!r}") from error

    def _read_scalars(
        self, rows: list[int], field: str, ftype: FieldType, indices: list[Any],
        datapoints: list[Datapoint],
    ) -> None:
        length = len(self._readers[field])
        for row, index in zip(rows, indices):
            if not isinstance(index, int) or not 0 <= index < length:
                raise self._bad_ref(row, field, index)
        for datapoint, value in zip(datapoints, self._read_values(field, ftype, indices)):
            datapoint[field] = value

    def _read_lists(
        self, rows: list[int], field: str, ftype: FieldType, field_refs: list[Any],
        selection: Selection, datapoints: list[Datapoint],
    ) -> None:
        reader = self._readers[field]
        indices: list[int] = []
        counts: list[int] = []
        for row, ref in zip(rows, field_refs):
            start, stop = self._list_span(row, field, ref, len(reader))
            if selection is not True:
                first, last = selection  # type: ignore[misc]
                start, stop = start + first, stop if last is None else min(start + last, stop)
            before = len(indices)
            indices.extend(range(start, stop))
            counts.append(len(indices) - before)
        values = self._read_values(field, ftype, indices) if indices else []
        position = 0
        for datapoint, count in zip(datapoints, counts):
            datapoint[field] = values[position:position + count]
            position += count

    def _list_span(self, row: int, field: str, ref: Any, length: int) -> tuple[int, int]:
        """[start, stop) of a list field's items from its ref."""
        if ref == []:
            return 0, 0
        if (isinstance(ref, list) and len(ref) == 2 and all(isinstance(x, int) for x in ref)
                and ref[0] >= 0 and ref[1] >= 0 and ref[0] + ref[1] <= length):
            return ref[0], ref[0] + ref[1]
        raise self._bad_ref(row, field, ref)

    def _bad_ref(self, row: int, field: str, ref: Any) -> CorruptionError:
        return CorruptionError(
            f"{self._path('refs')}: datapoint {row} refers to {ref!r} in field {field!r}, "
            f"but {self._path(field)} has {len(self._readers[field])} records")

    @property
    def field_readers(self) -> dict[str, Reader]:
        """Each field's records as a sackli.Reader (record i is the field
        file's record i): for tools that read raw field bytes."""
        return dict(self._readers)

    def close(self) -> None:
        """Releases the files (views of this reader too)."""
        self._refs.close()
        for reader in self._readers.values():
            reader.close()

    def __repr__(self) -> str:
        return (f"<sackli.datasets.DatasetReader({self._directory!r}): {len(self)} "
                f"datapoints, fields {', '.join(self._fields)}>")
