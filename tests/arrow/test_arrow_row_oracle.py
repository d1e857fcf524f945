"""The engine's row decoder against an independent reader of docs/format.md
section 11 (the oracle below, written from the document alone): on valid
rows and on thousands of mutated ones, both accept the same records and
give the same values, or both reject them."""

from __future__ import annotations

import random
import struct
from typing import Any

import pyarrow as pa

import sackli
from sackli.arrow._row_codec import NativeRowDecoder, NativeRowEncoder


class Reject(Exception):
    """The oracle's verdict: not a row of the schema."""


_INT_FORMATS = {pa.int8(): "<b", pa.int16(): "<h", pa.int32(): "<i", pa.int64(): "<q",
                pa.uint32(): "<I"}


def _fixed_width(t: pa.DataType) -> int | None:
    """A fixed-width type's slot size, or None for variable-width types."""
    if t in _INT_FORMATS:
        return struct.calcsize(_INT_FORMATS[t])
    if pa.types.is_boolean(t):
        return 1
    if pa.types.is_null(t):
        return 0
    return None


def _take(data: bytes, at: int, size: int) -> bytes:
    if at < 0 or size < 0 or at + size > len(data):
        raise Reject("beyond the value")
    return data[at:at + size]


def _u32(data: bytes, at: int) -> int:
    return struct.unpack("<I", _take(data, at, 4))[0]


def _bit(bitmap: bytes, i: int) -> bool:
    return bool(bitmap[i // 8] >> (i % 8) & 1)


def _fixed_value(t: pa.DataType, slot: bytes) -> Any:
    if pa.types.is_null(t):
        return None
    if pa.types.is_boolean(t):
        return slot[0] != 0
    return struct.unpack(_INT_FORMATS[t], slot)[0]


def _variable_value(t: pa.DataType, data: bytes) -> Any:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Reject("not UTF-8") from None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return data
    if pa.types.is_struct(t):
        return _struct_body([t.field(i) for i in range(t.num_fields)], data)
    if pa.types.is_fixed_size_list(t):
        return _elements(t.value_type, data, t.list_size)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _elements(t.value_type, data[4:], _u32(data, 0))
    raise AssertionError(t)


def _elements(t: pa.DataType, data: bytes, count: int) -> list[Any]:
    bitmap = _take(data, 0, (count + 7) // 8)
    rest = data[len(bitmap):]
    width = _fixed_width(t)
    if width is not None:
        if len(rest) != width * count:
            raise Reject("elements of another length")
        slots = _take(rest, 0, width * count)
        return [_fixed_value(t, slots[e * width:(e + 1) * width]) if _bit(bitmap, e) else None
                for e in range(count)]
    ends = [_u32(rest, 4 * e) for e in range(count)]
    area = rest[4 * count:]
    values, begin = [], 0
    for e, end in enumerate(ends):
        if end < begin:
            raise Reject("ends out of order")
        value = _take(area, begin, end - begin)
        values.append(_variable_value(t, value) if _bit(bitmap, e) else None)
        begin = end
    if len(area) != begin:
        raise Reject("elements of another length")
    return values


def _struct_body(fields: list[pa.Field], data: bytes) -> dict[str, Any]:
    widths = [_fixed_width(f.type) for f in fields]
    bitmap_size = (len(fields) + 7) // 8
    fixed_size = sum(w for w in widths if w is not None)
    variable = sum(w is None for w in widths)
    header = bitmap_size + fixed_size + 4 * variable
    bitmap = _take(data, 0, bitmap_size)
    ends = [_u32(data, bitmap_size + fixed_size + 4 * v) for v in range(variable)]
    area = _take(data, header, len(data) - header)
    if len(area) != (ends[-1] if ends else 0):
        raise Reject("a struct body of another length")  # it ends at its last end
    out, slot, v = {}, bitmap_size, 0
    for j, (field, width) in enumerate(zip(fields, widths)):
        valid = _bit(bitmap, j)
        if width is not None:
            out[field.name] = _fixed_value(field.type, data[slot:slot + width]) if valid else None
            slot += width
            continue
        begin, end = (ends[v - 1] if v else 0), ends[v]
        v += 1
        if not valid:
            out[field.name] = None  # a null field's span is never read
            continue
        if begin > end:
            raise Reject("ends out of order")
        out[field.name] = _variable_value(field.type, _take(area, begin, end - begin))
    return out


def oracle_row(schema: pa.Schema, record: bytes) -> dict[str, Any]:
    """The row `record` holds, by docs/format.md section 11; Reject if none."""
    if not record or record[0] != 1:
        raise Reject("version")
    return _struct_body(list(schema), record[1:])


SCHEMA = pa.schema([
    ("i8", pa.int8()), ("b", pa.bool_()), ("s", pa.string()), ("n", pa.null()),
    ("ll", pa.list_(pa.list_(pa.int16()))),
    ("fl", pa.list_(pa.large_binary(), 2)),
    ("st", pa.struct([("u", pa.uint32()), ("t", pa.large_string()),
                      ("l", pa.large_list(pa.bool_()))])),
    ("q", pa.int64()),
])


def _random_row(rng: random.Random) -> dict[str, Any]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.2 else value

    def text() -> str:
        return "".join(rng.choice("aé€😀z") for _ in range(rng.randrange(4)))

    return {
        "i8": maybe(rng.randrange(-128, 128)), "b": maybe(rng.random() < 0.5),
        "s": maybe(text()), "n": None,
        "ll": maybe([maybe([maybe(rng.randrange(-9, 9)) for _ in range(rng.randrange(3))])
                     for _ in range(rng.randrange(3))]),
        "fl": maybe([maybe(bytes(rng.randrange(3))), maybe(b"xy")]),
        "st": maybe({"u": maybe(rng.randrange(2**32)), "t": maybe(text()),
                     "l": maybe([maybe(rng.random() < 0.5) for _ in range(rng.randrange(4))])}),
        "q": maybe(rng.randrange(-2**63, 2**63)),
    }


def _engine_row(decoder: NativeRowDecoder, record: bytes) -> dict[str, Any] | None:
    """The engine's row, or None when it raises CorruptionError."""
    ends = memoryview(struct.pack("<2q", 0, len(record))).cast("q")
    try:
        return decoder.decode(record, ends, "o.bag", 0).to_pylist()[0]
    except sackli.CorruptionError:
        return None


def test_engine_and_oracle_agree_on_valid_and_mutated_rows():
    rng = random.Random(11)
    rows = [_random_row(rng) for _ in range(200)]
    data, offsets = NativeRowEncoder(SCHEMA).encode(pa.RecordBatch.from_pylist(rows, SCHEMA))
    records = [bytes(memoryview(data)[offsets[k]:offsets[k + 1]]) for k in range(len(rows))]
    decoder = NativeRowDecoder(SCHEMA, None)
    for row, record in zip(rows, records):
        assert oracle_row(SCHEMA, record) == row
        assert _engine_row(decoder, record) == row
    agreed = {"accepted": 0, "rejected": 0}
    for _ in range(4000):
        record = bytearray(rng.choice(records))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(record))
            choice = rng.randrange(3)
            if choice == 0:
                record[at] ^= 1 << rng.randrange(8)
            elif choice == 1:
                del record[at:]
            else:
                record[at:at + 4] = struct.pack("<I", rng.choice([0, 1, 3, 200, 2**31]))
            if not record:
                break
        record = bytes(record)
        try:
            expected = oracle_row(SCHEMA, record)
        except Reject:
            expected = None
        assert _engine_row(decoder, record) == expected, record.hex()
        agreed["accepted" if expected is not None else "rejected"] += 1
    assert agreed["accepted"] > 300 and agreed["rejected"] > 300, agreed
