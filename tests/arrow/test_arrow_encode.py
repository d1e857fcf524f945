"""sackli.arrow._encode: column= (values byte for byte, nulls) and
callable encodings (and the matching callable decode)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import sackli
import sackli.arrow
from arrow_helpers import (  # registered by conftest.py
    files_in, records_of, write_records,
)


# --- column=, callables ----------------------------------------------------


COLUMN_VALUES = [b"abc", b"", b"\x00\xff", b"x" * 1000, b"last"]


@pytest.mark.parametrize("array", [
    pa.array(COLUMN_VALUES, pa.binary()),
    pa.array(COLUMN_VALUES, pa.large_binary()),
    pa.array(COLUMN_VALUES, pa.binary_view()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES], pa.string()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES], pa.large_string()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES], pa.string_view()),
    pa.array([v.decode("latin-1") for v in COLUMN_VALUES]).dictionary_encode(),
    pa.array([b"ab", b"cd", b"\x00\x00", b"gh", b"ij"], pa.binary(2)),
], ids=["binary", "large_binary", "binary_view", "string", "large_string", "string_view",
        "dictionary", "fixed_size_binary"])
@pytest.mark.parametrize("sliced", [False, True], ids=["whole", "sliced"])
def test_column_writes_values_byte_for_byte(tmp_path, array, sliced):
    """column= writes each value as one record, exactly its bytes (strings as
    UTF-8), also from a slice; no schema file is written."""
    table = pa.table({"k": range(5), "v": array})
    expected = [v.encode() if isinstance(v, str) else v for v in array.to_pylist()]
    if sliced:
        table, expected = table.slice(1, 3), expected[1:4]
    paths = sackli.arrow.write_table(table, tmp_path / "c.bag", column="v")
    assert records_of(paths[0]) == expected
    assert files_in(tmp_path) == ["c.bag"]


def test_column_null_raises_naming_row(tmp_path):
    """A null in column= raises ValueError naming the column and the row
    (counted across chunks), leaving no file behind."""
    table = pa.concat_tables([pa.table({"c": ["a", "b"]}), pa.table({"c": ["c", None, "e"]})])
    for spec in ["n.bag", "n@2.bagz"]:
        with pytest.raises(ValueError, match=r"'c' is null at row 3\b"):
            sackli.arrow.write_table(table, tmp_path / spec, column="c")
    assert files_in(tmp_path) == []


def test_column_skip_nulls_leaves_them_out(tmp_path):
    """skip_nulls=True leaves null values out (the count is then unknown up
    front, so `@2` still splits evenly)."""
    table = pa.concat_tables([pa.table({"c": ["a", None]}), pa.table({"c": ["c", None, "e"]})])
    paths = sackli.arrow.write_table(table, tmp_path / "n@2.bag", column="c", skip_nulls=True)
    assert [records_of(p) for p in paths] == [[b"a", b"c"], [b"e"]]
    assert files_in(tmp_path) == ["n-00000-of-00002.bag", "n-00001-of-00002.bag"]


def test_callable_encoding_and_decode(tmp_path):
    """A function can encode rows (returning an Arrow array or bytes-likes)
    and decode records (returning a RecordBatch, Table or StructArray); no
    schema file is written for a function's records."""
    table = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})

    def as_arrow(batch):
        return pc.binary_join_element_wise(batch.column("s"), batch.column("a").cast(pa.string()),
                                           ":")

    sackli.arrow.write_table(table, tmp_path / "arrow.bag", encoding=as_arrow)
    sackli.arrow.write_table(table, tmp_path / "bytes.bag",
                             encoding=lambda b: [memoryview(b"m%d" % v) for v in
                                                 b.column("a").to_pylist()])
    assert records_of(tmp_path / "arrow.bag") == [b"x:1", b"y:2", b"z:3"]
    assert records_of(tmp_path / "bytes.bag") == [b"m1", b"m2", b"m3"]
    assert files_in(tmp_path) == ["arrow.bag", "bytes.bag"]

    def decode(records):
        return pa.record_batch({"length": pc.binary_length(records),
                                "upper": pc.utf8_upper(records.cast(pa.large_string()))})

    batches = list(sackli.arrow.read_batches(str(tmp_path / "arrow.bag"), decode=decode,
                                             batch_size=2))
    assert [b.num_rows for b in batches] == [2, 1]
    assert pa.Table.from_batches(batches).to_pydict() == {
        "length": [3, 3, 3], "upper": ["X:1", "Y:2", "Z:3"]}
    as_table = sackli.arrow.read_table(str(tmp_path / "arrow.bag"),
                                       decode=lambda r: pa.table({"r": r}), with_index=True)
    assert as_table.to_pydict() == {"r": [b"x:1", b"y:2", b"z:3"], "index": [0, 1, 2]}
    as_struct = sackli.arrow.read_table(
        str(tmp_path / "arrow.bag"),
        decode=lambda r: pa.StructArray.from_arrays([pc.binary_length(r)], ["n"]))
    assert as_struct.to_pydict() == {"n": [3, 3, 3]}


def test_callable_errors(tmp_path):
    """Functions that return the wrong number of records or rows, nulls, or
    the wrong type are refused with a clear error."""
    table = pa.table({"a": [1, 2, 3]})
    with pytest.raises(ValueError, match="returned 1 records for a batch of 3 rows"):
        sackli.arrow.write_table(table, tmp_path / "a.bag", encoding=lambda b: [b"x"])
    with pytest.raises(ValueError, match="null records"):
        sackli.arrow.write_table(table, tmp_path / "a.bag",
                                 encoding=lambda b: pa.array([b"x", None, b"z"]))
    assert files_in(tmp_path) == []
    write_records(tmp_path / "r.bag", [b"1", b"2", b"3"])
    with pytest.raises(TypeError, match="RecordBatch, Table or StructArray"):
        sackli.arrow.read_table(str(tmp_path / "r.bag"), decode=lambda r: r)
    with pytest.raises(ValueError, match="returned 1 rows for 3 records"):
        sackli.arrow.read_table(str(tmp_path / "r.bag"),
                                decode=lambda r: pa.record_batch({"x": [1]}))


# --- Errors ------------------------------------------------------------------


def test_bad_arguments(tmp_path):
    """Bad encoding / decode names, column= on a non-binary column, unknown
    columns, columns= without a decode, batch_size < 1 and a clashing
    with_index are refused."""
    table = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})
    with pytest.raises(ValueError, match="encoding must be"):
        sackli.arrow.write_table(table, tmp_path / "x.bag", encoding="csv")
    with pytest.raises(TypeError, match="column 'a' is int64"):
        sackli.arrow.write_table(table, tmp_path / "x.bag", column="a")
    with pytest.raises(KeyError, match="no column 'zz'"):
        sackli.arrow.write_table(table, tmp_path / "x.bag", column="zz")
    assert files_in(tmp_path) == []
    spec = str(tmp_path / "good.bag")
    sackli.arrow.write_table(table, spec)
    with pytest.raises(ValueError, match="decode must be"):
        sackli.arrow.read_table(spec, decode="csv")
    with pytest.raises(KeyError, match="no column 'nope'"):
        sackli.arrow.read_table(spec, decode="arrow", columns=["a", "nope"])
    with pytest.raises(ValueError, match="columns= needs"):
        sackli.arrow.read_table(spec, decode="raw", columns=["a"])
    with pytest.raises(ValueError, match="batch_size"):
        sackli.arrow.read_table(spec, batch_size=0)
    with pytest.raises(ValueError, match="with_index='a'"):
        sackli.arrow.read_table(spec, decode="arrow", with_index="a")
    with pytest.raises(TypeError, match="source must be"):
        sackli.arrow.read_table(42)
