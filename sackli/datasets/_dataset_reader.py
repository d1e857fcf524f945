"""`DatasetReader`: reads one dataset folder (a shard) written by `bags`
0.5.1 or sackli.datasets.

A mask's read rules (fields, list ranges, codecs) are the engine's
`DatasetReadPlan`, made once per mask. A batch of datapoints is one engine
call (_engine.read_datapoints) with that plan: it reads refs.bag and every
requested field (list items of all datapoints gathered into one batch per
field) on the pool, and makes the bytes, str and int values of the built-in
codecs itself; other (custom) decoders then run per value in Python. Batches
it stops on (a DatasetReadError: refs or values out of the ordinary) go field
by field in Python, which names what is wrong as `bags` does.
"""

from __future__ import annotations

import functools
import json
import os
from itertools import chain
from typing import Any, Mapping, Optional

from .. import CorruptionError, Reader
from .. import _engine
from .._bulk import DEFAULT_MAX_RECORD_BYTES, reader_core
from .._sets import explained_missing
from .._storage import folder_path, join_path, read_object
from ._bag import open_records
from ._batch_values import NATIVE_BYTES, BatchRead, batch_read, native_kind
from ._builtin_codecs import decoders as builtin_decoders, one_argument
from ._closing import ClosesOnExit
from ._concurrent import concurrently_on
from ._datapoints import Datapoint, DatapointSequence, Mask
from ._field_files import COMPRESSION_KEY, field_file, parse_compression
from ._shard_folders import SPEC_FILE
from ._mask import FieldSpecs, MaskPlans
from ._refs import unpack_refs
from ._reopening import ReopensWithCache
from ._spec import FieldType, ShardFolder, parse_spec

__all__ = ["DatasetReader", "read_spec"]

_LIMIT_BYTES = 8
# A mask's plan as _engine.read_datapoints takes it, the engine readers of
# refs.bag and of its fields, and the (field, is_list, decoder) of those
# decoded in Python after it (custom codecs).
EngineFields = tuple[Any, Any, list[Any], list[tuple[str, bool, Any]]]
# (index in the plan, position in the spec, field, type) of each field read.
PlanFields = list[tuple[int, int, str, FieldType]]
# What a reader keeps per mask (see _compile).
Compiled = tuple[Any, PlanFields, list[tuple[Any, ...]], Optional[EngineFields], bool]
# Up to this many records are read one engine call each, more in one batch.
_FEW = 16


def read_spec(directory: str) -> tuple[dict[str, FieldType], dict[str, str]]:
    """The parsed spec.json of a dataset folder, and the file name of each
    field (see _field_files).

    Raises FileNotFoundError naming spec.json when it is missing, and
    ValueError when it is not a valid spec.
    """
    path = join_path(directory, SPEC_FILE)
    try:
        content = read_object(path)
    except FileNotFoundError as error:
        # A write that was killed: say so, and how to complete it.
        raise explained_missing(error, directory) from None
    try:
        raw = json.loads(content)
        compression = raw.pop(COMPRESSION_KEY, None) if isinstance(raw, dict) else None
        fields = parse_spec(raw)
        compressed = parse_compression(compression, fields, path)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{path}: not a valid dataset spec: {error}") from error
    return fields, {field: field_file(field, field in compressed) for field in fields}


class DatasetReader(DatapointSequence, ShardFolder, ReopensWithCache, ClosesOnExit):
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
      cache_dir: a local folder that keeps what is fetched from `gs://` /
        `s3://` objects (see `sackli.Reader.Options`; by default
        `SACKLI_CACHE_DIR`, or none).
      cache_max_bytes: the cache's budget (by default
        `SACKLI_CACHE_MAX_BYTES`, or 10 GiB).
      max_record_bytes: the most one stored field value (or one refs
        record) may be (default 4 GiB; None: no cap); reading a larger one
        raises sackli.RecordTooLargeError naming its file and record.

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
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_max_bytes: int | None = None,
        max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._directory = folder_path(directory)
        # How it was opened (`ReopensWithCache` opens it so again).
        self._opened = {"decoders": decoders, "cache_index": cache_index, "cache_dir": cache_dir,
                        "cache_max_bytes": cache_max_bytes, "max_record_bytes": max_record_bytes}
        self._fields, self._files = read_spec(self._directory)
        self._files["refs"] = "refs.bag"
        self._decoders = builtin_decoders if decoders is None else decoders
        names = ["refs", *self._fields]
        opened = concurrently_on(self._directory,
                                 [functools.partial(open_records, self._path(name), cache_index,
                                                    cache_dir=cache_dir,
                                                    cache_max_bytes=cache_max_bytes,
                                                    max_record_bytes=max_record_bytes)
                                  for name in names])
        self._refs, *field_readers = opened
        self._readers = dict(zip(self._fields, field_readers))
        self._rows = range(len(self._refs))
        # Readers never change length: cache it (len() on a Reader costs a call).
        self._lengths = {field: len(reader) for field, reader in self._readers.items()}
        self._decoders_by_field: dict[str, Any] = {}
        self._batch_reads: dict[str, BatchRead | None] = {}
        # How the engine makes each field's values: a built-in codec's kind,
        # or None for a codec that runs in Python (on the records' bytes).
        self._native_kinds = [native_kind(self._decoders.get(ftype.dtype), ftype.args)
                              for ftype in self._fields.values()]
        self._field_specs: FieldSpecs = [
            (field, ftype.is_list, *(kind or NATIVE_BYTES))
            for (field, ftype), kind in zip(self._fields.items(), self._native_kinds)]
        self._plans = MaskPlans(self._field_specs, self._directory, self._compile)

    def __getstate__(self) -> dict[str, Any]:
        # The compiled mask plans hold engine plans and bound methods, which
        # do not pickle: the copy compiles its own.
        state = dict(self.__dict__)
        del state["_plans"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plans = MaskPlans(self._field_specs, self._directory, self._compile)

    def _path(self, name: str) -> str:
        return join_path(self._directory, self._files[name])


    @property
    def size(self) -> int:
        """Bytes of the dataset's bag files (spec.json excluded, as in `bags`)."""
        readers = [self._refs, *self._readers.values()]
        return sum(r.stored_bytes + _LIMIT_BYTES * (len(r) + 1) for r in readers)

    def _compile(self, plan: Any) -> Compiled:
        """A mask's engine plan; its fields (index, position, field, type);
        the steps `_read_row` takes for it (per field to read, everything
        bound: reader, length, decoder, so that the loop over fields looks
        nothing up); what _engine.read_datapoints takes, with the decoders
        that run in Python after it (None when a field has no decoder: the
        field-by-field way raises, naming it, when the field is read); and
        whether a single datapoint is read by the engine too."""
        names = list(self._fields)
        fields: PlanFields = []
        steps = []
        engine_readers = []
        decode_here: list[tuple[str, bool, Any]] = []
        for index, position in enumerate(plan.positions):
            field = names[position]
            ftype = self._fields[field]
            fields.append((index, position, field, ftype))
            try:
                decode = self._decoder(field, ftype)
            except ValueError:
                decode = None  # _read_values raises when the field is read
            steps.append((index, position, field, ftype, ftype.is_list,
                          self._readers[field].__getitem__, self._lengths[field], decode))
            engine_readers.append(reader_core(self._readers[field]))
            if self._native_kinds[position] is None:
                decode_here.append((field, ftype.is_list, decode))
        # The engine readers are taken here, once per mask, not per read.
        engine = (plan, reader_core(self._refs), engine_readers, decode_here) if all(
            decode is not None for _, _, decode in decode_here) else None
        # One engine call for one datapoint costs more than a record read
        # (~0.8 us against ~0.1-0.3), but less than a loop over a list's
        # items: the engine reads single datapoints that have a list field.
        rows_by_engine = engine is not None and plan.any_list
        return plan, fields, steps, engine, rows_by_engine

    def _read_row(self, row: int, mask: Mask | None) -> Datapoint:
        # One datapoint. With a list field: one engine call (as a batch of
        # one). Scalars only: single-record engine reads in one flat loop
        # over precompiled steps; at ~2 us per `r[i, {"label": True}]`,
        # every lookup counts.
        plan, _, steps, engine, rows_by_engine = self._plans.get(mask)
        if rows_by_engine:
            read = self._engine_datapoints((row,), engine)
            if read is not None:
                return read[0]
        if not steps:
            return {}
        try:
            refs = unpack_refs(self._refs[row])
        except Exception:
            refs = None
        if type(refs) is not list or len(refs) != len(self._fields):
            self._read_refs([row])  # raises, naming the datapoint
        datapoint: Datapoint = {}
        for index, position, field, ftype, is_list, get, length, decode in steps:
            ref = refs[position]
            if not is_list:
                if type(ref) is not int or not 0 <= ref < length:
                    raise self._bad_ref(row, field, ref)
                if decode is not None:
                    try:
                        datapoint[field] = decode(get(ref))
                        continue
                    except Exception:  # a bad value: _read_values says which
                        pass
                datapoint[field] = self._read_values(field, ftype, ref)
                continue
            start, stop = self._list_span(row, field, ref, length)
            (start,), (stop,) = plan.list_items(index, [start], [stop])
            if start >= stop:
                datapoint[field] = []
                continue
            if decode is not None and stop - start <= _FEW:
                try:
                    datapoint[field] = list(map(decode, map(get, range(start, stop))))
                    continue
                except Exception:  # a bad value: _read_values says which
                    pass
            datapoint[field] = self._read_values(field, ftype, range(start, stop))
        return datapoint

    def _read_rows(self, rows: list[int], mask: Mask | None) -> list[Datapoint]:
        plan, fields, _, engine, _ = self._plans.get(mask)
        datapoints: list[Datapoint] = [{} for _ in rows]
        if not rows or not fields:
            return datapoints
        if engine is not None:
            read = self._engine_datapoints(rows, engine)
            if read is not None:
                return read
        refs = self._read_refs(rows)
        for index, position, field, ftype in fields:
            field_refs = [datapoint_refs[position] for datapoint_refs in refs]
            if ftype.is_list:
                self._read_lists(rows, field, ftype, field_refs, plan, index, datapoints)
            else:
                self._read_scalars(rows, field, ftype, field_refs, datapoints)
        return datapoints

    def _engine_datapoints(self, rows: Any, engine: EngineFields) -> list[Datapoint] | None:
        """The datapoints at `rows` from one _engine.read_datapoints call,
        the fields of other codecs decoded here; None when they must be read
        field by field (something in them is out of the ordinary: the engine
        returns a DatasetReadError)."""
        plan, refs, readers, decode_here = engine
        datapoints = _engine.read_datapoints(refs, rows, plan, readers)
        if type(datapoints) is not list:
            return None
        if not decode_here:
            return datapoints
        try:
            for field, is_list, decode in decode_here:
                if is_list:
                    for datapoint in datapoints:
                        datapoint[field] = list(map(decode, datapoint[field]))
                else:
                    for datapoint in datapoints:
                        datapoint[field] = decode(datapoint[field])
        except ImportError:
            raise
        except Exception:  # a value that does not decode: the slower way names it
            return None
        return datapoints

    def _read_refs(self, rows: list[int]) -> list[list[Any]]:
        """The refs of the datapoints at `rows`, one entry per field."""
        records = [self._refs[rows[0]]] if len(rows) == 1 else self._refs.read_indices(rows)
        try:
            refs = list(map(unpack_refs, records))
        except Exception:  # msgpack raises several kinds for bad bytes
            refs = None
        count = len(self._fields)
        if refs is None or not (set(map(type, refs)) <= {list} and set(map(len, refs)) <= {count}):
            row = self._bad_refs_row(rows, records)
            raise CorruptionError(
                f"{self._path('refs')}: the refs of datapoint {row} are not a msgpack list "
                f"of {count} entries (one per field of spec.json)")
        return refs

    def _bad_refs_row(self, rows: list[int], records: list[bytes]) -> int:
        """The first of `rows` whose refs record does not hold a datapoint's refs."""
        for row, record in zip(rows, records):
            try:
                refs = unpack_refs(record)
            except Exception:
                return row
            if not isinstance(refs, list) or len(refs) != len(self._fields):
                return row
        raise AssertionError("no bad refs among the rows")

    def _decoder(self, field: str, ftype: FieldType) -> Any:
        """`decode(buffer)` for the field's values."""
        decode = self._decoders_by_field.get(field)
        if decode is not None:
            return decode
        try:
            decode = self._decoders[ftype.dtype]
        except KeyError:
            raise ValueError(
                f"field {field!r} of {self._directory}: no decoder for type "
                f"{ftype.dtype!r}") from None
        decode = self._decoders_by_field[field] = one_argument(decode, ftype.args)
        return decode

    def _batch_read(self, field: str, ftype: FieldType) -> BatchRead | None:
        """The field's whole-batch read and decode (see _batch_values), if
        its codec has one."""
        try:
            return self._batch_reads[field]
        except KeyError:
            read = self._batch_reads[field] = batch_read(
                self._decoders.get(ftype.dtype), ftype.args)
            return read

    def _read_values(self, field: str, ftype: FieldType, indices: Any) -> Any:
        """The decoded values at `indices` of the field's file: a list for a
        list or range of indices (a batch), one value for an int.

        Raises ValueError naming the file and record when a value does not
        decode (an ImportError of a missing codec library passes as it is).
        """
        decode = self._decoder(field, ftype)
        reader = self._readers[field]
        if type(indices) is int:
            indices = [indices]
            records = [reader[indices[0]]]
            single = True
        else:
            if len(indices) > _FEW:
                read = self._batch_read(field, ftype)
                values = None if read is None else read(reader, indices)
                if values is not None:
                    return values
            # A batch costs a fixed ~1.5 us; a few records are cheaper one by one.
            records = (list(map(reader.__getitem__, indices)) if len(indices) <= _FEW
                       else reader.read_indices(indices))
            single = False
        try:
            return decode(records[0]) if single else list(map(decode, records))
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
        length = self._lengths[field]
        if not (set(map(type, indices)) <= {int} and 0 <= min(indices) and max(indices) < length):
            for row, index in zip(rows, indices):
                if type(index) is not int or not 0 <= index < length:  # bools are not refs
                    raise self._bad_ref(row, field, index)
        for datapoint, value in zip(datapoints, self._read_values(field, ftype, indices)):
            datapoint[field] = value

    def _read_lists(
        self, rows: list[int], field: str, ftype: FieldType, field_refs: list[Any],
        plan: Any, index: int, datapoints: list[Datapoint],
    ) -> None:
        starts, stops = self._list_spans(rows, field, field_refs)
        # The plan's field `index`: its range clipped to each list.
        starts, stops = plan.list_items(index, starts, stops)
        # Items of all datapoints in one batch; a start past its stop is an empty list.
        indices = list(chain.from_iterable(map(range, starts, stops)))
        values = self._read_values(field, ftype, indices) if indices else []
        position = 0
        for datapoint, start, stop in zip(datapoints, starts, stops):
            count = stop - start if stop > start else 0
            datapoint[field] = values[position:position + count]
            position += count

    def _list_spans(
        self, rows: list[int], field: str, field_refs: list[Any]
    ) -> tuple[list[int], list[int]]:
        """[start, stop) of each datapoint's items of a list field: checked
        for the whole batch at once, datapoint by datapoint only to name a
        bad one."""
        length = self._lengths[field]
        try:
            if not (set(map(type, field_refs)) <= {list} and set(map(len, field_refs)) <= {0, 2}):
                raise TypeError
            starts = [ref[0] if ref else 0 for ref in field_refs]
            counts = [ref[1] if ref else 0 for ref in field_refs]
            if not (set(map(type, starts)) <= {int} and set(map(type, counts)) <= {int}):
                raise TypeError
            stops = list(map(int.__add__, starts, counts))
            if starts and (min(starts) < 0 or min(counts) < 0 or max(stops) > length):
                raise ValueError
            return starts, stops
        except (TypeError, ValueError):
            # One by one: raises naming the first bad datapoint.
            spans = [self._list_span(row, field, ref, length) for row, ref in zip(rows, field_refs)]
            return [span[0] for span in spans], [span[1] for span in spans]

    def _list_span(self, row: int, field: str, ref: Any, length: int) -> tuple[int, int]:
        """[start, stop) of a list field's items from its ref."""
        if type(ref) is list:
            if len(ref) == 2:
                start, count = ref
                if (type(start) is int and type(count) is int and start >= 0 and count >= 0
                        and start + count <= length):
                    return start, start + count
            elif not ref:
                return 0, 0
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
