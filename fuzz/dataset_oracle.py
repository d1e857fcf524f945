"""An independent reader of `bags` datasets (one shard folder), from
docs/datasets.md: the fuzzer's source of truth for sackli.datasets.

It never imports sackli: `spec.json` is parsed with `json`, each bags file
is read through oracle.open_bag (a bags file is a TAIL bag whose record 0 is
empty: bags record i is its record i + 1), refs with `msgpack`.

* Opening: `spec.json` must be a JSON object of field -> type (`name`,
  `name(args)`, either with `[]`), plus optionally `sackli/compression`
  ({field: "zstd..."}: that field is `<field>.bagz`); a missing `spec.json`,
  `refs.bag` or field file is not_found, anything else wrong is invalid (the
  spec) or corrupt (a bags file: it does not open as a bag, or its first
  record does not start at offset 0).
* Datapoint i: refs.bag's record i must be a msgpack list with one entry per
  field (sorted field order); each field the mask reads must have a ref that
  lies in its file: an int for a scalar, [] or [start, count] for a list;
  else corrupt. Its records must read (corrupt) and decode (invalid):
  bytes as they are, utf8 strictly, int(n[,big]) by int.from_bytes (any
  size, as bags does), msgpack; another decoder name is invalid.
* A datapoint with several problems may report any of them: its outcome is
  a DatapointError listing every kind.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

import msgpack

from .oracle import OracleBag, OracleError, open_bag

__all__ = ["DatapointError", "OracleDataset", "column", "open_dataset"]

_TYPE = re.compile(r"^([a-z0-9-_]+)(\([a-z0-9-_,.]*\))?$")
COMPRESSION_KEY = "sackli/compression"
_ZSTD = re.compile(r"^zstd(?:\((-?[0-9]+)\))?$")


class DatapointError(OracleError):
    """A datapoint that cannot be read: `kinds` are the error classes any of
    its problems gives."""

    def __init__(self, problems: list[OracleError]) -> None:
        super().__init__(problems[0].kind, "; ".join(p.message for p in problems), problems[0].path)
        self.problems = problems
        self.kinds = sorted({p.kind for p in problems})


def _problems(error: OracleError) -> list[OracleError]:
    return error.problems if isinstance(error, DatapointError) else [error]


@dataclass(frozen=True)
class Field:
    name: str
    is_list: bool
    dtype: str
    args: tuple[str, ...]
    file: str


def _decoder(field: Field) -> Callable[[bytes], Any] | None:
    if field.dtype == "bytes":
        return bytes
    if field.dtype == "utf8":
        return lambda data: data.decode("utf-8")
    if field.dtype == "int":
        order = "big" if field.args[1:2] == ("big",) else "little"
        return lambda data: int.from_bytes(data, order)
    if field.dtype == "msgpack":
        return lambda data: msgpack.unpackb(data)
    return None


def _parse_field(name: Any, text: Any, compressed: set[str], folder: str) -> Field:
    spec = os.path.join(folder, "spec.json")
    if not isinstance(name, str) or name in ("", ".", "..", "refs") or "/" in name or "\0" in name:
        raise OracleError("invalid", f"{spec}: bad field name {name!r}", spec)
    if not isinstance(text, str):
        raise OracleError("invalid", f"{spec}: field {name!r}: a type must be a str", spec)
    is_list = text.endswith("[]")
    match = _TYPE.match(text[:-2] if is_list else text)
    if not match:
        raise OracleError("invalid", f"{spec}: field {name!r}: bad type {text!r}", spec)
    args = tuple(match.group(2)[1:-1].split(",")) if match.group(2) else ()
    file = os.path.join(folder, f"{name}.bagz" if name in compressed else f"{name}.bag")
    return Field(name, is_list, match.group(1), args, file)


def _bags_file(path: str, remote: bool) -> OracleBag:
    """A bags file as a bag of its records (view [1:])."""
    bag = open_bag([path], remote=remote)
    if len(bag) == 0 or bag.outcome(0) != b"":
        raise OracleError("corrupt", f"{path}: not a bags file", path)
    return bag


@dataclass
class OracleDataset:
    folder: str
    fields: list[Field]  # in spec order (sorted by name, as bags writes them)
    refs: OracleBag
    bags: dict[str, OracleBag]

    def __len__(self) -> int:
        return len(self.refs) - 1

    @property
    def files(self) -> list[str]:
        return [os.path.join(self.folder, "spec.json"), os.path.join(self.folder, "refs.bag")] + [
            f.file for f in self.fields]

    def _record(self, field: Field, k: int) -> Any:
        """Bags record k of `field`'s file, decoded; or a DatapointError
        (a field without a decoder and a damaged record are both problems:
        a reader may meet either first)."""
        stored = self.bags[field.name].outcome(k + 1)
        decode = _decoder(field)
        problems = [stored] if isinstance(stored, OracleError) else []
        if decode is None:
            problems.append(OracleError("invalid", f"field {field.name!r}: no decoder for "
                                        f"{field.dtype!r}", field.file))
        if problems:
            return DatapointError(problems)
        try:
            return decode(stored)
        except Exception as error:  # noqa: BLE001 - each decoder has its own errors
            return OracleError("invalid", f"record {k} of field {field.name!r}: {error}", field.file)

    def datapoint(self, row: int, mask: dict[str, Any] | None = None) -> dict[str, Any] | DatapointError:
        """Datapoint `row` (0 <= row < len) with the fields (and list items)
        the mask selects: True, or (first, last) of a list, last None for all.
        A mask that selects no field reads nothing (not even the refs)."""
        if not any((True if mask is None else mask.get(f.name, False)) is not False
                   for f in self.fields):
            return {}
        refs = self.refs_of(row)
        if isinstance(refs, OracleError):
            return refs
        out: dict[str, Any] = {}
        problems: list[OracleError] = []
        for field, ref in zip(self.fields, refs):
            selection = True if mask is None else mask.get(field.name, False)
            if selection is False:
                continue
            span = self.span(row, field, refs)
            if isinstance(span, OracleError):
                problems.append(span)
                continue
            start, stop = span
            if field.is_list and selection is not True:
                first, last = selection
                if last is not None:
                    stop = min(stop, start + last)
                start += first
            values = [self._record(field, k) for k in range(start, stop)]
            errors = [p for v in values if isinstance(v, OracleError) for p in _problems(v)]
            if errors:
                problems += errors
            else:
                out[field.name] = values if field.is_list else values[0]
        return DatapointError(problems) if problems else out

    def refs_of(self, row: int) -> list[Any] | DatapointError:
        """Datapoint `row`'s refs: a msgpack list with one entry per field."""
        stored = self.refs.outcome(row + 1)
        if isinstance(stored, OracleError):
            return DatapointError([stored])
        try:
            refs = msgpack.unpackb(stored)
        except Exception:  # noqa: BLE001 - msgpack raises several kinds
            refs = None
        if type(refs) is not list or len(refs) != len(self.fields):
            return DatapointError([OracleError("corrupt", f"refs of datapoint {row}",
                                               os.path.join(self.folder, "refs.bag"))])
        return refs

    def span(self, row: int, field: Field, refs: list[Any]) -> tuple[int, int] | OracleError:
        """[start, stop) of `field`'s records for the datapoint: one record
        for a scalar (an int ref), [] or [start, count] for a list."""
        ref = refs[self.fields.index(field)]
        length = len(self.bags[field.name]) - 1
        if not field.is_list:
            if type(ref) is int and 0 <= ref < length:
                return ref, ref + 1
        elif ref == []:
            return 0, 0
        elif (type(ref) is list and len(ref) == 2 and all(type(x) is int for x in ref)
              and ref[0] >= 0 and ref[1] >= 0 and ref[0] + ref[1] <= length):
            return ref[0], ref[0] + ref[1]
        return OracleError("corrupt", f"datapoint {row}: ref {ref!r} of {field.name!r}",
                           os.path.join(self.folder, "refs.bag"))


def _arrow_int_width(field: Field) -> int | None:
    """Bytes of the unsigned Arrow integer an int field becomes: `int` 8,
    `int(n[,little|big])` the smallest of 1, 2, 4, 8 >= n (n <= 8); None
    (raw bytes) otherwise."""
    if not field.args:
        return 8
    size = field.args[0]
    if not (size.isdigit() and 1 <= int(size) <= 8) or field.args[1:] not in ((), ("little",), ("big",)):
        return None
    return next(width for width in (1, 2, 4, 8) if width >= int(size))


def _arrow_item(field: Field, stored: bytes, k: int) -> Any:
    """A stored value as sackli.arrow's dataset columns hold it: utf8 as
    str, an int field of at most 8 bytes by int.from_bytes (a value longer
    than its width is damage), anything else the stored bytes."""
    if field.dtype == "utf8":
        try:
            return stored.decode("utf-8")
        except UnicodeDecodeError as error:
            return DatapointError([OracleError("corrupt", f"record {k} of {field.name!r}: {error}",
                                               field.file)])
    width = _arrow_int_width(field) if field.dtype == "int" else None
    if width is None:
        return stored
    if len(stored) > width:
        return DatapointError([OracleError("corrupt", f"record {k} of {field.name!r}: "
                                           f"{len(stored)} bytes", field.file)])
    return int.from_bytes(stored, "big" if field.args[1:2] == ("big",) else "little")


def column(dataset: OracleDataset, name: str) -> list[Any] | DatapointError:
    """Field `name` of every datapoint as `sackli.arrow.read_table(folder,
    fields=[name])` gives it, or the problems that reading it meets."""
    field = next(f for f in dataset.fields if f.name == name)
    problems: list[OracleError] = []
    values: list[Any] = []
    for row in range(len(dataset)):
        refs = dataset.refs_of(row)
        span = refs if isinstance(refs, OracleError) else dataset.span(row, field, refs)
        if isinstance(span, OracleError):
            problems += _problems(span)
            continue
        items = []
        for k in range(*span):
            stored = dataset.bags[field.name].outcome(k + 1)
            item = stored if isinstance(stored, OracleError) else _arrow_item(field, stored, k)
            if isinstance(item, OracleError):
                problems += _problems(item)
            items.append(item)
        values.append(items if field.is_list else items[0])
    return DatapointError(problems) if problems else values


def open_dataset(folder: str, remote: bool = False) -> OracleDataset | OracleError:
    """The dataset in shard folder `folder`, or the OracleError of opening it;
    `remote`: as read from an object store given the folder's files (its
    folders are no objects)."""
    spec_path = os.path.join(folder, "spec.json")
    if not os.path.isfile(spec_path):
        kind = "os" if os.path.isdir(spec_path) and not remote else "not_found"
        return OracleError(kind, f"{spec_path}: no spec", spec_path)
    try:
        with open(spec_path, "rb") as file:
            spec = json.loads(file.read())
        if not isinstance(spec, dict):
            raise ValueError("not a dict")
        compression = spec.pop(COMPRESSION_KEY, {})
        if not isinstance(compression, dict) or any(
                field not in spec or not isinstance(value, str) or not _ZSTD.match(value)
                for field, value in compression.items()):
            raise ValueError(f"bad {COMPRESSION_KEY}: {compression!r}")
        fields = [_parse_field(name, text, set(compression), folder)
                  for name, text in sorted(spec.items())]
    except OracleError as error:
        return error
    except ValueError as error:  # json's errors are ValueErrors
        return OracleError("invalid", f"{spec_path}: {error}", spec_path)
    # A reader may open the files in any order: an error lists every kind.
    bags: dict[str, OracleBag] = {}
    errors: list[OracleError] = []
    for name, path in [("refs.bag", os.path.join(folder, "refs.bag"))] + [
            (field.name, field.file) for field in fields]:
        try:
            bags[name] = _bags_file(path, remote)
        except OracleError as error:
            errors.append(error)
    if errors:
        errors[0].alternatives = sorted({e.kind for e in errors})  # type: ignore[attr-defined]
        return errors[0]
    return OracleDataset(folder, fields, bags.pop("refs.bag"), bags)
