"""The refs of a run of datapoints as columns: for each field, where its
values are (checked against the field's file).

Column readers (`sackli.arrow`'s dataset tables) and `sackli verify` read
refs.bag a run at a time. The refs of a run are parsed in bulk by the engine
(_engine.parse_dataset_refs with the read plan of the fields, as dataset
batches parse theirs) when the records
are what `bags` writes (msgpack arrays of unsigned ints and `[]` /
`[start, length]` lists, each record ending exactly where its ref list
does); anything else, and machines without numpy, take the per-record
msgpack path, which also finds the bad record for the error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from .. import CorruptionError, Reader
from .. import _bulk, _engine
from .._storage import folder_path, join_path
from ._bag import open_records
from ._dataset_reader import read_spec
from ._mask import resolve_mask
from ._refs import unpack_refs

__all__ = ["FieldRefs", "ShardFiles", "read_field_refs"]


class ShardFiles:
    """The files of one dataset shard that a column reader needs, and no
    others: spec.json (parsed), refs.bag and the chosen fields' files, each
    opened as a sackli.Reader of its `bags` records.

    Args:
      folder: the shard folder (local, gs:// or s3://).
      fields: the fields to open (None: all).
      cache_index: keep each file's offsets in memory.

    Raises:
      ValueError: a field the spec lacks (naming it and listing the fields),
        or a malformed spec.json.
      FileNotFoundError: spec.json, refs.bag or a chosen field's file is missing.
      sackli.CorruptionError: a file is not a `bags` file.
    """

    def __init__(self, folder: str, fields: Sequence[str] | None = None,
                 cache_index: bool = True) -> None:
        self.directory = folder_path(folder)
        self.fields, self._files = read_spec(self.directory)
        chosen = list(self.fields) if fields is None else list(fields)
        for field in chosen:
            if field not in self.fields:
                raise ValueError(
                    f"{self.directory}: no field {field!r} in the dataset; its fields are "
                    f"{', '.join(map(repr, self.fields)) or 'none'}")
        self._files["refs"] = "refs.bag"
        self.refs: Reader = open_records(self.path("refs"), cache_index)
        self.field_readers: dict[str, Reader] = {}
        try:
            for field in chosen:
                self.field_readers[field] = open_records(self.path(field), cache_index)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.refs)

    def path(self, name: str) -> str:
        """The path of a field's file (`"refs"` for refs.bag)."""
        return join_path(self.directory, self._files[name])

    def close(self) -> None:
        """Releases the open files."""
        for reader in [self.refs, *self.field_readers.values()]:
            reader.close()

    def __enter__(self) -> "ShardFiles":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass
class FieldRefs:
    """Where one field's values of a run of datapoints are: for a scalar
    field the record index of each datapoint's value (`starts`); for a list
    field each list's first record (`starts`) and length (`lengths`)."""

    field: str
    starts: Any  # int64 numpy array, or a list without numpy
    lengths: Any | None


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def read_field_refs(shard: ShardFiles, rows: Any, fields: Sequence[str]) -> dict[str, FieldRefs]:
    """The refs of the datapoints at `rows` of `shard` (a range, or a
    sequence or integer array of valid indices, repeats allowed) for
    `fields`, in that order. A step-1 range is read as one run.

    Raises sackli.CorruptionError naming refs.bag and the datapoint for a
    record that is not a list of one ref per field, and naming the field and
    its file too for a ref outside the field's file.
    """
    if isinstance(rows, range) and rows.step == 1:
        data, offsets = _bulk.read_packed(shard.refs, rows.start, len(rows))
    else:
        data, offsets = _bulk.start_read_indices(shard.refs, rows).packed()
    positions = {field: i for i, field in enumerate(shard.fields)}
    wanted = [(field, positions[field], shard.fields[field].is_list) for field in fields]
    np = _numpy()
    if np is not None and len(rows):
        # The plan reads the wanted fields whole; its columns come in spec order.
        specs = [(name, ftype.is_list, 0, 0, False) for name, ftype in shard.fields.items()]
        plan = resolve_mask({field: True for field, _, _ in wanted}, specs, shard.directory)
        columns = _engine.parse_dataset_refs(data, offsets, plan)
        if columns is not None:
            by_position = dict(zip(plan.positions, columns))
            parsed = {}
            for field, position, _ in wanted:
                starts, lengths = by_position[position]
                parsed[field] = refs = FieldRefs(
                    field, np.frombuffer(starts, np.int64),
                    None if lengths is None else np.frombuffer(lengths, np.int64))
                _check_bounds(np, shard, rows, refs)
            return parsed
    return _parse_records(shard, rows, data, offsets, wanted)


# --- The per-record path -------------------------------------------------------


def _parse_records(
    shard: ShardFiles, rows: Any, data: Any, offsets: Any, wanted: list[tuple[str, int, bool]]
) -> dict[str, FieldRefs]:
    view, ends = memoryview(data), memoryview(offsets).cast("B").cast("q")
    columns: dict[str, tuple[list[int], list[int]]] = {field: ([], []) for field, _, _ in wanted}
    num_fields = len(shard.fields)
    sizes = {field: len(shard.field_readers[field]) for field, _, _ in wanted}
    for k in range(len(ends) - 1):
        row = int(rows[k])
        try:
            refs = unpack_refs(view[ends[k]:ends[k + 1]])
        except Exception:  # msgpack raises several kinds for bad bytes
            refs = None
        if not isinstance(refs, list) or len(refs) != num_fields:
            raise CorruptionError(
                f"{shard.path('refs')}: the refs of datapoint {row} are not a msgpack list of "
                f"{num_fields} entries (one per field of spec.json)")
        for field, position, is_list in wanted:
            starts, lengths = columns[field]
            ref = refs[position]
            if is_list and ref == []:
                starts.append(0)
                lengths.append(0)
            elif is_list and _is_pair(ref) and ref[0] + ref[1] <= sizes[field]:
                starts.append(ref[0])
                lengths.append(ref[1])
            elif not is_list and type(ref) is int and 0 <= ref < sizes[field]:
                starts.append(ref)
            else:
                raise _bad_ref(shard, row, field, ref)
    np = _numpy()
    convert = (lambda values: np.array(values, np.int64)) if np is not None else list
    return {field: FieldRefs(field, convert(columns[field][0]),
                             convert(columns[field][1]) if is_list else None)
            for field, _, is_list in wanted}


def _is_pair(ref: Any) -> bool:
    return (type(ref) is list and len(ref) == 2 and all(type(x) is int for x in ref)
            and ref[0] >= 0 and ref[1] >= 0)


def _bad_ref(shard: ShardFiles, row: int, field: str, ref: Any) -> CorruptionError:
    return CorruptionError(
        f"{shard.path('refs')}: datapoint {row} refers to {ref!r} in field {field!r}, but "
        f"{shard.path(field)} has {len(shard.field_readers[field])} records")


def _check_bounds(np: Any, shard: ShardFiles, rows: Any, refs: FieldRefs) -> None:
    """Raises for the first ref of a bulk-parsed column outside its file."""
    size = len(shard.field_readers[refs.field])
    stops = refs.starts + (1 if refs.lengths is None else refs.lengths)
    bad = np.flatnonzero(stops > size)
    if len(bad):
        k = int(bad[0])
        ref: Any = int(refs.starts[k])
        if refs.lengths is not None:
            ref = [ref, int(refs.lengths[k])]
        raise _bad_ref(shard, int(rows[k]), refs.field, ref)
