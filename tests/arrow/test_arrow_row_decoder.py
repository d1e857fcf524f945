"""sackli.arrow.RowDecoder (sackli/arrow/_row_decoder.py): records a loader
hands out, decoded with the schema beside their set, for every row
encoding; pickled copies decode the same without reading the file."""

from __future__ import annotations

import os
import pickle

import pyarrow as pa
import pytest

import sackli
import sackli.arrow

TABLE = pa.table({
    "image": pa.array([b"\x89PNG %d" % i for i in range(50)], pa.binary()),
    "label": pa.array([i % 7 for i in range(50)], pa.int64()),
    "path": pa.array([f"c{i % 7}/{i:03d}.png" for i in range(50)], pa.string()),
    "score": pa.array([None if i % 5 == 0 else i / 2 for i in range(50)], pa.float64()),
})


@pytest.mark.parametrize("encoding", ["row", "arrow", "json"])
def test_records_decode_to_the_rows_written(tmp_path, encoding):
    spec = str(tmp_path / "rows@3.bagz")
    sackli.arrow.write_table(TABLE, spec, encoding=encoding)
    reader = sackli.Reader(str(tmp_path / "rows@*.bagz"))
    rows = sackli.arrow.RowDecoder(str(tmp_path / "rows@*.bagz"))
    assert rows.schema.names == TABLE.schema.names
    expected = TABLE.to_pylist()
    assert [rows(record) for record in reader] == expected
    assert rows.decode_many(reader[[4, 0, 4]]) == [expected[4], expected[0], expected[4]]
    batch = rows.decode_batch(reader[10:20])
    assert batch.num_rows == 10
    assert batch.column("label").to_pylist() == TABLE["label"][10:20].to_pylist()
    assert rows.decode_many([]) == []


def test_columns_decode_only_those(tmp_path):
    sackli.arrow.write_table(TABLE, str(tmp_path / "rows.bag"))
    rows = sackli.arrow.RowDecoder(tmp_path / "rows.bag", columns=["path", "label"])
    assert rows(sackli.Reader(str(tmp_path / "rows.bag"))[8]) == {"path": "c1/008.png", "label": 1}
    with pytest.raises(KeyError, match="no column 'nope'"):
        sackli.arrow.RowDecoder(tmp_path / "rows.bag", columns=["nope"])


def test_a_pickled_decoder_reads_no_file(tmp_path):
    sackli.arrow.write_table(TABLE, str(tmp_path / "rows.bagz"))
    records = list(sackli.Reader(str(tmp_path / "rows.bagz")))
    copy = pickle.dumps(sackli.arrow.RowDecoder(str(tmp_path / "rows.bagz"), columns=["label"]))
    for name in os.listdir(tmp_path):  # the schema file and the bag go away
        os.remove(tmp_path / name)
    rows = pickle.loads(copy)
    assert [row["label"] for row in rows.decode_many(records)] == TABLE["label"].to_pylist()
    assert "columns=['label']" in repr(rows)


def test_bad_records_and_missing_schemas_are_named(tmp_path):
    sackli.arrow.write_table(TABLE, str(tmp_path / "rows.bag"))
    rows = sackli.arrow.RowDecoder(str(tmp_path / "rows.bag"))
    good = sackli.Reader(str(tmp_path / "rows.bag"))[0]
    with pytest.raises(sackli.CorruptionError, match=r"rows\.bag: record 1 "):
        rows.decode_many([good, b"\x01garbage"])
    with sackli.Writer(str(tmp_path / "plain.bag")) as writer:
        writer.write(b"no schema")
    with pytest.raises(FileNotFoundError, match="plain.bag.arrow_schema"):
        sackli.arrow.RowDecoder(str(tmp_path / "plain.bag"))
