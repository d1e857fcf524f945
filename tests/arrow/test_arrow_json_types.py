"""sackli.arrow._json_types: rows written with encoding="json" and read
back with their types (with or without the schema file)."""

from __future__ import annotations

import base64
import datetime
import decimal
import json

import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    assert_tables_equal, records_of, write_records,
)


# --- encoding="json" ----------------------------------------------------------


def json_table() -> pa.Table:
    return pa.table({
        "int64": pa.array([1, None, -2**63]),
        "int8": pa.array([1, None, -5], pa.int8()),
        "uint32": pa.array([1, None, 2**32 - 1], pa.uint32()),
        "float64": pa.array([1.5, None, -0.25]),
        "float32": pa.array([1.5, None, -0.25], pa.float32()),
        "bool": pa.array([True, None, False]),
        "string": pa.array(["a", None, 'q"uote\n\u00e9\U0001F600']),
        "large_string": pa.array(["a", None, "b"], pa.large_string()),
        "binary": pa.array([b"\x00\xff", None, b""]),
        "fixed_size_binary": pa.array([b"ab", None, b"cd"], pa.binary(2)),
        "list": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
        "list_string": pa.array([["a", None], None, []], pa.list_(pa.string())),
        "struct": pa.array([{"x": 1, "y": "a"}, None, {"x": None, "y": "b"}],
                           pa.struct([("x", pa.int64()), ("y", pa.string())])),
        "nested": pa.array([[{"v": [1.0]}], None, [None]],
                           pa.list_(pa.struct([("v", pa.list_(pa.float64()))]))),
        "timestamp_s": pa.array([0, None, 1600000000], pa.timestamp("s")),
        "timestamp_us_utc": pa.array([0, None, 1600000000123456], pa.timestamp("us", tz="UTC")),
        "decimal": pa.array([decimal.Decimal("1.23"), None, decimal.Decimal("-4.50")],
                            pa.decimal128(10, 2)),
        "dictionary": pa.array(["a", None, "b"]).dictionary_encode(),
        "null": pa.nulls(3),
    }, metadata={"k": "v"})


@pytest.mark.parametrize("spec", ["j.bag", "j@2.bagz"])
def test_json_round_trip(tmp_path, spec):
    """encoding="json" writes one JSON object per row (binary as base64,
    timestamps ISO 8601, decimals as strings) and decode="json" gives the
    table back with its written schema."""
    table = json_table()
    sackli.arrow.write_table(table, tmp_path / spec, encoding="json")
    records = records_of(str(tmp_path / spec))
    assert len(records) == 3
    first = json.loads(records[0])
    assert first["int64"] == 1 and first["string"] == "a" and first["null"] is None
    assert base64.b64decode(first["binary"]) == b"\x00\xff"
    assert first["timestamp_s"] == "1970-01-01T00:00:00" and first["decimal"] == "1.23"
    assert first["struct"] == {"x": 1, "y": "a"}
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / spec), decode="json"), table)
    projected = sackli.arrow.read_table(str(tmp_path / spec), decode="json",
                                        columns=["string", "int8"])
    assert projected.column_names == ["string", "int8"]
    assert projected.column("int8").to_pylist() == [1, None, -5]


@pytest.mark.parametrize("array", [
    pa.array([datetime.date(2020, 1, 2), None], pa.date32()),
    pa.array([datetime.date(2020, 1, 2), None], pa.date64()),
    pa.array([0, None], pa.time32("s")),
    pa.array([3600 * 10**6, None], pa.time64("us")),
    pa.array([1600000000123, None], pa.timestamp("ms")),
    pa.array([1600000000123456789, None], pa.timestamp("ns")),
    pa.array([5, None], pa.duration("s")),
    pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int64())),
], ids=["date32", "date64", "time32", "time64", "timestamp_ms", "timestamp_ns", "duration",
        "map"])
def test_json_round_trip_of_types_the_encoding_converts(tmp_path, array):
    """Dates, times, timestamps, durations and maps, which encoding="json"
    documents how it writes, read back with decode="json" and the schema
    file write_table wrote."""
    table = pa.table({"v": array, "k": pa.array([1, 2])})
    sackli.arrow.write_table(table, tmp_path / "j.bag", encoding="json")
    assert_tables_equal(sackli.arrow.read_table(str(tmp_path / "j.bag"), decode="json"), table)


def test_json_without_schema_file_infers_columns(tmp_path):
    """decode="json" on JSON records written by hand infers the columns."""
    write_records(tmp_path / "raw.bag", [b'{"a": 1, "b": "x"}', b'{"a": 2, "b": null}'])
    back = sackli.arrow.read_table(str(tmp_path / "raw.bag"), decode="json")
    assert back.to_pydict() == {"a": [1, 2], "b": ["x", None]}


# --- NaN and infinities ----------------------------------------------------------


def _strict_json(record: bytes) -> object:
    """Parses as a strict JSON parser (jq, JavaScript) would: no bare NaN."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(record, parse_constant=refuse)


def test_json_rows_with_nan_and_infinities_are_valid_json_and_round_trip(tmp_path):
    inf, nan = float("inf"), float("nan")
    table = pa.table({
        "f64": pa.array([1.5, nan, inf, -inf, None], pa.float64()),
        "f32": pa.array([nan, 0.25, None, -inf, inf], pa.float32()),
        "deep": pa.array([[nan, 1.0], None, [], [-inf], [inf, None]], pa.list_(pa.float64())),
        "pair": pa.array([{"x": -inf, "s": "a"}, {"x": 2.0, "s": "NaN"}, None,
                          {"x": nan, "s": None}, {"x": None, "s": "b"}],
                         pa.struct([("x", pa.float64()), ("s", pa.string())])),
        "text": ["NaN", "Infinity", "-Infinity", "x", None],  # strings stay strings
    })
    sackli.arrow.write_table(table, tmp_path / "f.bag", encoding="json")
    with sackli.Reader(str(tmp_path / "f.bag")) as reader:
        rows = [_strict_json(record) for record in reader]
    assert rows[1]["f64"] == "NaN" and rows[2]["f64"] == "Infinity" and rows[3]["f64"] == "-Infinity"
    back = sackli.arrow.read_table(str(tmp_path / "f.bag"), decode="json")
    assert back.schema == table.schema
    assert repr(back.to_pydict()) == repr(table.to_pydict())  # repr: nan == nan


def test_json_rows_without_non_finite_values_keep_their_numbers(tmp_path):
    table = pa.table({"f": pa.array([1.0, -2.5, None], pa.float64())})
    sackli.arrow.write_table(table, tmp_path / "g.bag", encoding="json")
    with sackli.Reader(str(tmp_path / "g.bag")) as reader:
        assert list(reader) == [b'{"f":1.0}', b'{"f":-2.5}', b'{"f":null}']


def test_json_text_in_a_number_place_is_corruption(tmp_path):
    table = pa.table({"f": pa.array([1.0], pa.float64())})
    sackli.arrow.write_table(table, tmp_path / "h.bag", encoding="json")
    schema_file = tmp_path / "h.bag.arrow_schema"
    with sackli.Writer(str(tmp_path / "h.bag")) as writer:
        writer.write_many([b'{"f":"NaN"}', b'{"f":"many"}'])
    assert schema_file.exists()
    with pytest.raises(sackli.CorruptionError, match="h.bag"):
        sackli.arrow.read_table(str(tmp_path / "h.bag"), decode="json")
