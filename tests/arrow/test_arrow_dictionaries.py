"""Dictionary columns keep their dictionary: one per set, unified from the
batches written, recorded in the schema file, and given back on read with
the codes as written, in every batch; sets without a recorded dictionary
read as before."""

from __future__ import annotations

import pickle

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sackli
import sackli.arrow
from sackli.arrow._dictionaries import DICTIONARIES_KEY
from sackli.arrow._schema_file import schema_message
from cli_helpers import ok  # registered by conftest.py

KIND = pa.dictionary(pa.int32(), pa.string())


def _batch(values: list[str | None], dictionary: list[str], level: list[int]) -> pa.RecordBatch:
    codes = pa.array([None if v is None else dictionary.index(v) for v in values], pa.int32())
    return pa.record_batch({
        "kind": pa.DictionaryArray.from_arrays(codes, pa.array(dictionary)),
        "level": pa.array(level, pa.int64()),
    })


# Three batches whose dictionaries differ in content and order, with an
# entry no row uses ("unused").
THREE = pa.Table.from_batches([
    _batch(["b", "a", None, "b"], ["b", "a", "unused"], [1, 2, 3, 4]),
    _batch(["c", "a"], ["c", "a"], [5, 6]),
    _batch(["d", "b", "c"], ["a", "d", "b", "c"], [7, 8, 9]),
])
UNIFIED = THREE.unify_dictionaries()
DICTIONARY = UNIFIED.column("kind").chunk(0).dictionary
CODES = pa.chunked_array([c.indices for c in UNIFIED.column("kind").chunks]).combine_chunks()


def _assert_recorded_dictionary(column: pa.ChunkedArray) -> None:
    """Every chunk has the set's dictionary; the codes are as written."""
    assert column.type == KIND
    for chunk in column.chunks:
        assert chunk.dictionary.equals(DICTIONARY), chunk.dictionary
    codes = pa.chunked_array([c.indices for c in column.chunks], pa.int32()).combine_chunks()
    assert codes.equals(CODES), codes


def test_unify_order_is_first_appearance():
    assert DICTIONARY.to_pylist() == ["b", "a", "unused", "c", "d"]


@pytest.mark.parametrize("encoding", ["row", "arrow", "json"])
@pytest.mark.parametrize("spec", ["one.bagz", "set@2.bag", "sized@*.bagz"])
def test_three_batches_round_trip_with_identical_dictionary_and_codes(tmp_path, encoding, spec):
    target = str(tmp_path / spec)
    extra = {"max_shard_bytes": 64} if "@*" in spec else {}
    sackli.arrow.write_table(THREE, target, encoding=encoding, **extra)
    got = sackli.arrow.read_table(target.replace("@2", "@*"))
    _assert_recorded_dictionary(got.column("kind"))
    assert got.column("level").to_pylist() == list(range(1, 10))
    # One record per batch: every batch still has the one dictionary.
    for batch in sackli.arrow.read_batches(target.replace("@2", "@*"), batch_size=1):
        assert batch.column(0).dictionary.equals(DICTIONARY)
    # Indices and projections too.
    picked = sackli.arrow.read_table(target.replace("@2", "@*"), indices=[8, 0], columns=["kind"])
    assert picked.column("kind").chunk(0).dictionary.equals(DICTIONARY)
    assert picked.column("kind").chunk(0).indices.to_pylist() == [CODES[8].as_py(),
                                                                  CODES[0].as_py()]


def test_the_dictionary_is_in_the_schema_file_and_read_schema_hides_it(tmp_path):
    target = str(tmp_path / "t.bagz")
    sackli.arrow.write_table(THREE, target)
    raw = pa.ipc.read_schema(pa.py_buffer(open(target + ".arrow_schema", "rb").read()))
    assert DICTIONARIES_KEY in raw.metadata
    assert sackli.arrow.read_schema(target) == THREE.schema
    assert DICTIONARIES_KEY not in (sackli.arrow.read_schema(target).metadata or {})


def test_a_stream_of_batches_is_unified_as_it_comes(tmp_path):
    target = str(tmp_path / "stream@3.bagz")
    reader = pa.RecordBatchReader.from_batches(THREE.schema, THREE.to_batches())
    sackli.arrow.write_table(reader, target)
    got = sackli.arrow.read_table(str(tmp_path / "stream@*.bagz"))
    _assert_recorded_dictionary(got.column("kind"))


def test_row_decoder_gives_the_recorded_dictionary_also_when_pickled(tmp_path):
    target = str(tmp_path / "t.bagz")
    sackli.arrow.write_table(THREE, target)
    rows = sackli.arrow.RowDecoder(target)
    records = list(sackli.Reader(target))
    for decoder in (rows, pickle.loads(pickle.dumps(rows))):
        batch = decoder.decode_batch(records[4:6])
        assert batch.column("kind").dictionary.equals(DICTIONARY)
        assert batch.column("kind").indices.equals(CODES[4:6])
        assert decoder(records[8]) == {"kind": "c", "level": 9}


def test_schema_given_keeps_the_dictionary_or_casts_to_values(tmp_path):
    target = str(tmp_path / "t.bagz")
    sackli.arrow.write_table(THREE, target)
    same = sackli.arrow.read_table(target, schema=pa.schema([("kind", KIND)]))
    _assert_recorded_dictionary(same.column("kind"))
    values = sackli.arrow.read_table(target, schema=pa.schema([("kind", pa.string())]))
    assert values.column("kind").to_pylist() == THREE.column("kind").to_pylist()


def test_an_old_set_without_a_recorded_dictionary_reads_as_before(tmp_path):
    target = str(tmp_path / "old.bagz")
    sackli.arrow.write_table(THREE, target)
    with open(target + ".arrow_schema", "wb") as file:   # as sets written before
        file.write(schema_message(THREE.schema, "row"))
    got = sackli.arrow.read_table(target)
    assert got.column("kind").type == KIND
    assert got.column("kind").to_pylist() == THREE.column("kind").to_pylist()
    assert got.column("kind").chunk(0).dictionary.to_pylist() == ["b", "a", "c", "d"]  # rebuilt


def test_a_value_missing_from_the_recorded_dictionary_is_corruption(tmp_path):
    target = str(tmp_path / "t.bagz")
    sackli.arrow.write_table(THREE, target)
    with open(target + ".arrow_schema", "wb") as file:
        file.write(schema_message(THREE.schema, "row", {"kind": pa.array(["a", "b"])}))
    with pytest.raises(sackli.CorruptionError,
                       match=r"t\.bagz: records from 0 on hold a value of column 'kind' that is "
                             "not in the dictionary recorded in the schema file"):
        sackli.arrow.read_table(target)


def test_a_dictionary_recorded_for_another_column_is_corruption(tmp_path):
    target = str(tmp_path / "t.bagz")
    sackli.arrow.write_table(THREE, target)
    with open(target + ".arrow_schema", "wb") as file:
        file.write(schema_message(THREE.schema, "row", {"level": pa.array([1, 2])}))
    with pytest.raises(sackli.CorruptionError, match=r"arrow_schema: a dictionary is recorded "
                                                     "for 'level'"):
        sackli.arrow.read_table(target)


def test_dictionaries_that_outgrow_the_index_type_are_refused(tmp_path):
    small = pa.dictionary(pa.int8(), pa.string())
    batches = [pa.record_batch({"k": pa.array([f"{b}-{i}" for i in range(100)]).cast(small)})
               for b in range(2)]
    target = tmp_path / "t.bagz"
    with pytest.raises(ValueError, match=r"column 'k': the dictionaries of its batches hold 200 "
                                         r"values together, more than int8 codes can address"):
        sackli.arrow.write_table(pa.Table.from_batches(batches), target)
    assert not target.exists()


def test_nested_dictionaries_keep_their_values(tmp_path):
    tags = pa.list_(pa.dictionary(pa.int8(), pa.string()))
    table = pa.table({"tags": pa.array([["x", "y"], ["y"]], tags)})
    target = str(tmp_path / "nested.bagz")
    sackli.arrow.write_table(table, target)
    got = sackli.arrow.read_table(target)
    assert got.schema == table.schema
    assert got.column("tags").to_pylist() == [["x", "y"], ["y"]]


def test_cli_convert_from_parquet_keeps_the_dictionary(tmp_path):
    pq.write_table(THREE, tmp_path / "in.parquet", row_group_size=4)
    stored = pq.read_table(tmp_path / "in.parquet")
    want = stored.unify_dictionaries()
    ok("convert", "in.parquet", "out@2.bagz", cwd=tmp_path)
    got = sackli.arrow.read_table(str(tmp_path / "out@*.bagz"))
    column = got.column("kind")
    dictionary = want.column("kind").chunk(0).dictionary
    assert all(chunk.dictionary.equals(dictionary) for chunk in column.chunks)
    assert column.to_pylist() == THREE.column("kind").to_pylist()
    codes = [c.indices for c in want.column("kind").chunks]
    assert pa.chunked_array([c.indices for c in column.chunks]).combine_chunks().equals(
        pa.chunked_array(codes).combine_chunks())


def test_duckdb_and_polars_read_the_recorded_dictionary(tmp_path):
    target = str(tmp_path / "t.bagz")
    sackli.arrow.write_table(THREE, target)
    batches = sackli.arrow.read_batches(target, batch_size=3)
    counts = duckdb.sql("select kind, count(*) as n from batches group by kind "
                        "order by kind").fetchall()
    assert counts == [("a", 2), ("b", 3), ("c", 2), ("d", 1), (None, 1)]
    frame = pl.from_arrow(sackli.arrow.read_table(target))
    assert frame["kind"].dtype == pl.Categorical
    assert frame["kind"].to_list() == THREE.column("kind").to_pylist()
