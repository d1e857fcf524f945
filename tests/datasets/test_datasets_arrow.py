"""sackli.arrow on sackli.datasets folders: read_table / read_batches give
one column per field, write_table(..., spec=) writes a dataset that the real
`bags` 0.5.1 reads (byte-identical to what it writes), DuckDB and Polars
query the result, and bad input raises clear errors. Remote folders run
against the moto S3 server and fake-gcs-server (tests/remote_servers.py)."""

from __future__ import annotations

import struct

import bags
import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pytest

import sackli
import sackli.arrow
from sackli import datasets
from sackli.datasets._recognise import dataset_layout
from sackli.datasets._refs import pack_refs, unpack_refs
from remote_helpers import remote, servers  # noqa: F401 (fixtures, loaded through conftest.py)

SPEC = {"image": "bytes", "label": "int(8)", "words": "utf8[]"}


def _point(i: int) -> dict:
    return {"image": bytes([i % 256]) * (3 + i % 7), "label": i * 1000,
            "words": [f"w{j}" for j in range(i % 5)]}


def _write(directory, count: int, spec=SPEC, point=_point, **options) -> None:
    if options.get("sharded", True):
        options.pop("sharded", None)
        writer = datasets.ShardedDatasetWriter(directory, spec, **options)
    else:
        writer = datasets.DatasetWriter(directory, spec, compression=options.get("compression"))
    with writer:
        for i in range(count):
            writer.append(point(i))


# --- Reading ---------------------------------------------------------------


@pytest.mark.parametrize("sharded", [True, False])
def test_read_table_gives_one_decoded_column_per_field(tmp_path, sharded):
    _write(tmp_path / "ds", 23, sharded=sharded, **({"shard_length": 10} if sharded else {}))
    table = sackli.arrow.read_table(tmp_path / "ds")
    assert table.schema == pa.schema([
        pa.field("image", pa.large_binary(), nullable=False),
        pa.field("label", pa.uint64(), nullable=False),
        pa.field("words", pa.list_(pa.large_string()), nullable=False)])
    assert table.to_pylist() == [_point(i) for i in range(23)]


def test_fields_selects_and_orders_columns_and_batches_follow_shards(tmp_path):
    _write(tmp_path / "ds", 25, shard_length=10)
    reader = sackli.arrow.read_batches(tmp_path / "ds", fields=["words", "label"], batch_size=4,
                                       with_index=True)
    batches = list(reader)
    assert [b.num_rows for b in batches] == [4, 4, 2, 4, 4, 2, 4, 1]  # never across shards
    table = pa.Table.from_batches(batches)
    assert table.column_names == ["words", "label", "index"]
    assert table.to_pylist() == [{"words": _point(i)["words"], "label": i * 1000, "index": i}
                                 for i in range(25)]
    # A reader works as a source too (its stride of shards); a view of one does not.
    odd_shards = datasets.ShardedDatasetReader(tmp_path / "ds", shard_start=1, shard_step=2)
    assert sackli.arrow.read_table(odd_shards, fields=["label"]).column(0).to_pylist() == [
        i * 1000 for i in range(10, 20)]
    with pytest.raises(ValueError, match="whole datasets only, not views"):
        sackli.arrow.read_table(odd_shards[2:5])


def test_indices_read_chosen_datapoints_in_order(tmp_path):
    _write(tmp_path / "ds", 25, shard_length=10)
    wanted = [24, 3, 3, -1, 11, 0, 19, 12]
    reader = sackli.arrow.read_batches(tmp_path / "ds", fields=["label", "words"],
                                       indices=np.array(wanted), batch_size=2, with_index="at")
    batches = list(reader)
    # Batches stay in one shard: [24], [3, 3], [24], [11], [0], [19, 12].
    assert [b.num_rows for b in batches] == [1, 2, 1, 1, 1, 2]
    expected = [{"label": i % 25 * 1000, "words": _point(i % 25)["words"], "at": i % 25}
                for i in wanted]
    assert pa.Table.from_batches(batches).to_pylist() == expected
    assert sackli.arrow.read_table(tmp_path / "ds", fields=["label"], indices=slice(20, None, 2)
                                   ).column(0).to_pylist() == [20000, 22000, 24000]
    assert sackli.arrow.read_table(tmp_path / "ds", indices=[]).num_rows == 0
    with pytest.raises(IndexError, match=r"datapoint index 25 \(indices\[1\]\) out of range "
                                         r"for 25 datapoints"):
        sackli.arrow.read_table(tmp_path / "ds", indices=[0, 25])
    with pytest.raises(TypeError, match="indices must be integers"):
        sackli.arrow.read_table(tmp_path / "ds", indices=[0.5])


def test_raw_decode_gives_the_stored_bytes(tmp_path):
    _write(tmp_path / "ds", 6)
    table = sackli.arrow.read_table(tmp_path / "ds", decode="raw", fields=["label", "words"])
    assert table.schema.types == [pa.large_binary(), pa.list_(pa.large_binary())]
    assert table.column("label").to_pylist() == [struct.pack("<Q", i * 1000) for i in range(6)]
    assert table.column("words").to_pylist()[3] == [b"w0", b"w1", b"w2"]


ARROW_TYPES_SPEC = {
    "u8": "int(1)", "u16": "int(2,big)", "u24": "int(3)", "u32big": "int(4,big)", "any": "int",
    "huge": "int(9)", "text": "utf8", "blob": "bytes", "packed": "msgpack",
    "scalar": "array(float64)", "flag": "array(bool)", "grid": "array(int16,3,2)",
    "grids": "array(uint8,2)[]", "counts": "int(2)[]",
}


def _typed_point(i: int) -> dict:
    return {
        "u8": i, "u16": 300 * i, "u24": 70000 * i, "u32big": 2 ** 31 + i, "any": 2 ** 60 * (i % 2),
        "huge": 2 ** 70 + i, "text": f"caf\u00e9 {i}", "blob": bytes(i), "packed": {"i": i},
        "scalar": np.float64(i / 4), "flag": np.bool_(i % 3 == 0),
        "grid": np.arange(6, dtype=np.int16).reshape(3, 2) * i,
        "grids": [np.array([j, i], np.uint8) for j in range(i % 3)], "counts": list(range(i)),
    }


def test_every_mapped_type_decodes_to_its_arrow_type(tmp_path):
    _write(tmp_path / "ds", 5, ARROW_TYPES_SPEC, _typed_point, sharded=False)
    table = sackli.arrow.read_table(tmp_path / "ds")
    assert dict(zip(table.column_names, table.schema.types)) == {
        "any": pa.uint64(), "blob": pa.large_binary(), "counts": pa.list_(pa.uint16()),
        "flag": pa.bool_(), "grid": pa.list_(pa.list_(pa.int16(), 2), 3),
        "grids": pa.list_(pa.list_(pa.uint8(), 2)), "huge": pa.large_binary(),
        "packed": pa.large_binary(), "scalar": pa.float64(), "text": pa.large_string(),
        "u16": pa.uint16(), "u24": pa.uint32(), "u32big": pa.uint32(), "u8": pa.uint8()}
    for i, row in enumerate(table.to_pylist()):
        expected = _typed_point(i)
        assert row["huge"] == (2 ** 70 + i).to_bytes(9, "little")
        assert row["packed"] == datasets.encoders["msgpack"]({"i": i})
        assert row["grid"] == expected["grid"].tolist()
        assert row["grids"] == [g.tolist() for g in expected["grids"]]
        for name in ("u8", "u16", "u24", "u32big", "any", "text", "blob", "counts"):
            assert row[name] == expected[name], name
        assert row["scalar"] == i / 4 and row["flag"] == (i % 3 == 0)


def test_only_the_requested_fields_are_read(tmp_path):
    # image is stored compressed and then damaged: reading it fails, reading
    # the other fields never touches it.
    _write(tmp_path / "ds", 8, sharded=False, compression={"image": "zstd", "words": "zstd"})
    assert sackli.arrow.read_table(tmp_path / "ds").to_pylist() == [_point(i) for i in range(8)]
    path = tmp_path / "ds" / "image.bagz"
    data = bytearray(path.read_bytes())
    data[0:8] = b"\xff" * 8  # the first frame's magic number
    path.write_bytes(bytes(data))
    table = sackli.arrow.read_table(tmp_path / "ds", fields=["label", "words"])
    assert table.column("label").to_pylist() == [i * 1000 for i in range(8)]
    with pytest.raises(sackli.CorruptionError, match="image.bagz"):
        sackli.arrow.read_table(tmp_path / "ds", fields=["image"])


def test_a_bags_dataset_reads_and_scattered_refs_are_followed(tmp_path):
    with bags.ShardedDatasetWriter(tmp_path / "ds", SPEC, bags.encoders, shard_length=4) as writer:
        for i in range(9):
            writer.append(_point(i))
    assert sackli.arrow.read_table(tmp_path / "ds").to_pylist() == [_point(i) for i in range(9)]
    # A shard whose refs point at values out of order (a valid dataset that
    # bags does not write): each ref is followed.
    shard = tmp_path / "one"
    shard.mkdir()
    with datasets.BagWriter(str(shard / "label.bag")) as labels:
        labels.extend([struct.pack("<Q", v) for v in (10, 20, 30)])
    with datasets.BagWriter(str(shard / "words.bag")) as words:
        words.extend([b"a", b"b", b"c"])
    with datasets.BagWriter(str(shard / "refs.bag")) as refs:
        for ref in ([2, [1, 2]], [0, []]):
            refs.append(pack_refs(ref))
        # Valid msgpack that bags does not write (an array16 header, a
        # uint16 for a small number): read by the per-record path.
        refs.append(b"\xdc\x00\x02" + b"\xcd\x00\x02" + pack_refs([0, 1]))
    (shard / "spec.json").write_text('{"label": "int(8)", "words": "utf8[]"}')
    assert sackli.arrow.read_table(shard).to_pylist() == [
        {"label": 30, "words": ["b", "c"]}, {"label": 10, "words": []},
        {"label": 30, "words": ["a"]}]
    assert list(datasets.DatasetReader(shard))[2] == {"label": 30, "words": ["a"]}


def test_empty_dataset_reads_as_an_empty_table(tmp_path):
    datasets.DatasetWriter(tmp_path / "ds", SPEC).close()
    table = sackli.arrow.read_table(tmp_path / "ds", fields=["label"])
    assert table.num_rows == 0 and table.schema.types == [pa.uint64()]


def test_duckdb_and_polars_query_a_dataset(tmp_path):
    _write(tmp_path / "ds", 30, shard_length=7)
    labels = sackli.arrow.read_batches(tmp_path / "ds", fields=["label", "words"])
    total, longest = duckdb.sql(
        "select sum(label), max(len(words)) from labels").fetchall()[0]
    assert (total, longest) == (sum(i * 1000 for i in range(30)), 4)
    frame = pl.from_arrow(sackli.arrow.read_table(tmp_path / "ds", fields=["label", "image"]))
    assert frame.filter(pl.col("label") >= 28000)["image"].to_list() == [
        _point(28)["image"], _point(29)["image"]]
    # Array fields arrive as fixed-size arrays, shape kept.
    with datasets.DatasetWriter(tmp_path / "grid", {"grid": "array(uint8,2,3)"}) as writer:
        writer.append({"grid": np.arange(6, dtype=np.uint8).reshape(2, 3)})
    grids = sackli.arrow.read_table(tmp_path / "grid")
    assert duckdb.sql("select typeof(grid), grid[2][3] from grids").fetchall() == [
        ("UTINYINT[3][2]", 5)]
    assert pl.from_arrow(grids).schema["grid"] == pl.Array(pl.UInt8, shape=(2, 3))


# --- Recognising a dataset -------------------------------------------------


def test_how_a_path_is_recognised(tmp_path):
    _write(tmp_path / "sharded", 3)
    _write(tmp_path / "one", 3, sharded=False)
    sackli.Writer(str(tmp_path / "bag.bag")).close()
    (tmp_path / "other").mkdir()
    assert dataset_layout(tmp_path / "sharded") == "sharded"
    assert dataset_layout(tmp_path / "sharded" / "000000") == "shard"
    assert dataset_layout(tmp_path / "one") == "shard"
    assert dataset_layout(tmp_path / "bag.bag") is None
    assert dataset_layout(str(tmp_path / "one") + "@2.bag") is None
    assert dataset_layout(tmp_path / "missing") is None
    with pytest.raises(ValueError, match="other: a directory, but not a dataset"):
        sackli.arrow.read_table(tmp_path / "other")
    assert sackli.arrow.read_table(tmp_path / "bag.bag").num_rows == 0


# --- Reading errors --------------------------------------------------------


def test_read_errors_name_the_field_and_file(tmp_path):
    _write(tmp_path / "ds", 4)
    with pytest.raises(ValueError, match=r"no field 'nope'.*'image', 'label', 'words'"):
        sackli.arrow.read_table(tmp_path / "ds", fields=["label", "nope"])
    with pytest.raises(ValueError, match="columns= is for bags"):
        sackli.arrow.read_table(tmp_path / "ds", columns=["label"])
    with pytest.raises(ValueError, match="schema= is for bags"):
        sackli.arrow.read_table(tmp_path / "ds", schema=pa.schema([]))
    with pytest.raises(ValueError, match="decode='auto' or 'raw'"):
        sackli.arrow.read_table(tmp_path / "ds", decode="json")
    sackli.Writer(str(tmp_path / "x.bag")).close()
    with pytest.raises(ValueError, match="fields= is for dataset folders"):
        sackli.arrow.read_table(tmp_path / "x.bag", fields=["label"])
    _rewrite_label_refs(tmp_path / "ds" / "000000", {1: 5})
    with pytest.raises(sackli.CorruptionError, match=r"refs.bag: datapoint 1 refers to 5 in "
                                                     r"field 'label', but .*label.bag has 4"):
        sackli.arrow.read_table(tmp_path / "ds", fields=["label"])
    _rewrite_label_refs(tmp_path / "ds" / "000000", {1: 2 ** 64 - 1})
    with pytest.raises(sackli.CorruptionError, match=f"datapoint 1 refers to {2 ** 64 - 1} in"):
        sackli.arrow.read_table(tmp_path / "ds", fields=["label"])
    _rewrite_label_refs(tmp_path / "ds" / "000000", {1: "five"})
    with pytest.raises(sackli.CorruptionError, match="datapoint 1 refers to 'five' in field 'label'"):
        sackli.arrow.read_table(tmp_path / "ds", fields=["label"])
    with datasets.BagWriter(str(tmp_path / "refs.bag")) as writer:
        writer.extend([pack_refs([0, 0, []]), pack_refs([1, 1])])
    (tmp_path / "ds" / "000000" / "refs.bag").unlink()
    (tmp_path / "refs.bag").rename(tmp_path / "ds" / "000000" / "refs.bag")
    with pytest.raises(sackli.CorruptionError, match="the refs of datapoint 1 are not a msgpack list"):
        sackli.arrow.read_table(tmp_path / "ds", fields=["label"])


def _rewrite_label_refs(shard, changes: dict) -> None:
    refs = [unpack_refs(r) for r in datasets.BagReader(str(shard / "refs.bag"))[0:]]
    for row, value in changes.items():
        refs[row][1] = value
    (shard / "refs.bag").unlink()
    with datasets.BagWriter(str(shard / "refs.bag")) as writer:
        for ref in refs:
            writer.append(pack_refs(ref))


@pytest.mark.parametrize("field_type, value, message", [
    ("int(2)", b"\x01\x02\x03", r"record 1 holds 3 bytes, more than an int\(2\)"),
    ("utf8", b"\xff\xfe", "record 1 is not UTF-8"),
    ("array(float32,2)", b"\x00" * 4, r"record 1 holds 4 bytes; an array\(float32,2\) value takes 8"),
])
def test_values_of_the_wrong_shape_are_corruption(tmp_path, field_type, value, message):
    good = {"int(2)": b"\x01\x00", "utf8": b"ok", "array(float32,2)": b"\x00" * 8}[field_type]
    identity = {name: (lambda v, *args: v) for name in ("int", "utf8", "array")}
    with datasets.DatasetWriter(tmp_path / "ds", {"x": field_type}, encoders=identity) as writer:
        writer.append({"x": good})
        writer.append({"x": value})
    with pytest.raises(sackli.CorruptionError, match=rf"field 'x' \(.*x.bag\): {message}"):
        sackli.arrow.read_table(tmp_path / "ds")


def test_a_bad_list_item_is_named_by_its_record_in_the_field_file(tmp_path):
    identity = {"int": lambda v, *args: v}
    with datasets.DatasetWriter(tmp_path / "ds", {"x": "int(2)[]"}, encoders=identity) as writer:
        writer.append({"x": [b"\x01\x00", b"\x02\x00"]})
        writer.append({"x": [b"\x03\x00\x00"]})
    batches = sackli.arrow.read_batches(tmp_path / "ds", batch_size=1)
    assert next(batches).column(0).to_pylist() == [[1, 2]]
    with pytest.raises(sackli.CorruptionError,
                       match=r"x.bag\): record 2 holds 3 bytes, more than an int\(2\) value"):
        next(batches)


# --- Writing ---------------------------------------------------------------


def _table() -> pa.Table:
    return pa.table({
        "label": pa.array([5, 0, 2 ** 40], pa.int64()),
        "caption": ["a cat", "", "caf\u00e9"],
        "image": [b"\x89PNG", b"", b"\x00\x01"],
        "score": pa.array([0.5, -1.0, 2.25], pa.float32()),
        "flag": [True, False, True],
        "embedding": pa.array([[1, 2, 3, 4]] * 3, pa.list_(pa.int8(), 4)),
        "tags": [["x"], [], ["y", "z"]],
        "sizes": pa.array([[1], [2, 3], []], pa.list_(pa.uint16())),
    })


def _expected_datapoints() -> list[dict]:
    return [
        {"label": label, "caption": caption, "image": image, "score": np.float32(score),
         "flag": np.bool_(flag), "embedding": np.array([1, 2, 3, 4], np.int8), "tags": tags,
         "sizes": sizes}
        for label, caption, image, score, flag, tags, sizes in zip(
            [5, 0, 2 ** 40], ["a cat", "", "caf\u00e9"], [b"\x89PNG", b"", b"\x00\x01"],
            [0.5, -1.0, 2.25], [True, False, True], [["x"], [], ["y", "z"]], [[1], [2, 3], []])]


INFERRED_SPEC = {
    "label": "int(8)", "caption": "utf8", "image": "bytes", "score": "array(float32)",
    "flag": "array(bool)", "embedding": "array(int8,4)", "tags": "utf8[]", "sizes": "int(2)[]"}


def test_write_table_infers_the_spec_and_bags_reads_it_byte_for_byte(tmp_path):
    shards = sackli.arrow.write_table(_table(), tmp_path / "ds", spec="auto", shard_length=2)
    assert shards == [str(tmp_path / "ds" / "000000"), str(tmp_path / "ds" / "000001")]
    reader = bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders)
    assert reader.spec == {f: t for f, t in datasets.DatasetReader(shards[0]).spec.items()}
    # The same datapoints written by bags itself: the same bytes.
    with bags.ShardedDatasetWriter(tmp_path / "bags", INFERRED_SPEC, bags.encoders,
                                   shard_length=2) as writer:
        for datapoint in _expected_datapoints():
            writer.append(datapoint)
    for shard in ("000000", "000001"):
        for path in sorted((tmp_path / "bags" / shard).iterdir()):
            assert (tmp_path / "ds" / shard / path.name).read_bytes() == path.read_bytes(), path
    assert reader[2]["tags"] == ["y", "z"] and reader[2]["label"] == 2 ** 40


def test_write_then_read_gives_the_values_back(tmp_path):
    sackli.arrow.write_table(_table(), tmp_path / "ds", spec="auto", sharded=False)
    assert (tmp_path / "ds" / "spec.json").exists()
    back = sackli.arrow.read_table(tmp_path / "ds")
    original = _table()
    for name in original.column_names:
        assert back.column(name).to_pylist() == original.column(name).to_pylist(), name
    assert back.schema.field("label").type == pa.uint64()  # bags' int is unsigned


def test_dictionary_columns_are_written_as_their_values(tmp_path):
    table = pa.table({"kind": pa.array(["cat", "dog", "cat"]).dictionary_encode()})
    sackli.arrow.write_table(table, tmp_path / "ds", spec="auto")
    assert list(datasets.ShardedDatasetReader(tmp_path / "ds")) == [
        {"kind": "cat"}, {"kind": "dog"}, {"kind": "cat"}]


def test_given_types_override_inference(tmp_path):
    table = pa.table({"meta": pa.array([{"k": 1}, {"k": 2}]), "label": pa.array([1, 2], pa.uint8())})
    sackli.arrow.write_table(table, tmp_path / "ds", spec={"meta": "msgpack", "label": "int"},
                             compression={"meta": "zstd"})
    reader = datasets.ShardedDatasetReader(tmp_path / "ds")
    assert list(reader) == [{"meta": {"k": 1}, "label": 1}, {"meta": {"k": 2}, "label": 2}]
    assert (tmp_path / "ds" / "000000" / "meta.bagz").exists()


def test_images_from_fixed_size_lists(tmp_path):
    images = np.arange(2 * 4 * 3 * 3, dtype=np.uint8).reshape(2, 4, 3, 3)
    column = pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(pa.array(images.ravel()), 3), 3), 4)
    sackli.arrow.write_table(pa.table({"png": column}), tmp_path / "ds", spec={"png": "png"})
    reader = bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders)
    np.testing.assert_array_equal(reader[1]["png"], images[1])


def test_write_errors(tmp_path):
    with pytest.raises(ValueError, match=r"column 'meta' is struct<k: int64>, which maps to no "
                                         r"dataset field type; give its type in spec="):
        sackli.arrow.write_table(pa.table({"meta": [{"k": 1}]}), tmp_path / "a", spec="auto")
    with pytest.raises(ValueError, match="spec names 'nope', which the table lacks"):
        sackli.arrow.write_table(_table(), tmp_path / "b", spec={"nope": "utf8"})
    with pytest.raises(ValueError, match="column 'caption' .*: row 1 is null"):
        sackli.arrow.write_table(pa.table({"caption": ["a", None]}), tmp_path / "c", spec="auto")
    with pytest.raises(ValueError, match="encoding: for bags, not for a dataset"):
        sackli.arrow.write_table(_table(), tmp_path / "d", spec="auto", encoding="json")
    with pytest.raises(TypeError, match="shard_length: for datasets only"):
        sackli.arrow.write_table(_table(), tmp_path / "e.bag", shard_length=3)
    assert not any((tmp_path / name).exists() for name in "abcd")


def test_failed_write_leaves_no_shard(tmp_path):
    # The negative label in the last row fails in the third shard, after two were finished.
    table = pa.table({"label": pa.array([1, 2, 3, 4, -5], pa.int64())})
    with pytest.raises(ValueError, match=r"field 'label'.*int encoder rejected a value"):
        sackli.arrow.write_table(table, tmp_path / "ds", spec="auto", shard_length=2)
    assert list((tmp_path / "ds").iterdir()) == []


# --- Remote ----------------------------------------------------------------


def test_remote_dataset_write_and_field_subset_read(remote):
    table = pa.table({"image": [bytes(100 + i) for i in range(40)],
                      "label": pa.array(range(40), pa.uint32()),
                      "words": [[f"w{j}" for j in range(i % 3)] for i in range(40)]})
    shards = sackli.arrow.write_table(table, remote.url("ds"), spec="auto", shard_length=25)
    assert shards == [remote.url("ds/000000"), remote.url("ds/000001")]
    assert dataset_layout(remote.url("ds")) == "sharded"
    assert dataset_layout(remote.url("ds/000001")) == "shard"
    back = sackli.arrow.read_table(remote.url("ds"))
    assert back.column("words").to_pylist() == table.column("words").to_pylist()
    assert back.column("label").to_pylist() == list(range(40))
    remote.proxy.reset_counts()
    sackli.arrow.read_table(remote.url("ds"), fields=["label"])
    # Per shard: spec.json; refs.bag and label.bag each opened (its offsets
    # come with its last 8 bytes) and read in one coalesced GET. image.bag
    # and words.bag are not even opened.
    assert remote.proxy.counts["GET"] == 2 * (1 + 2 + 2)
    remote.proxy.reset_counts()
    sackli.arrow.read_table(remote.url("ds"), fields=["label", "image", "words"])
    assert remote.proxy.counts["GET"] == 2 * (1 + 2 + 2 * 3)
    # A remote bag is still a bag.
    with sackli.Writer(remote.url("x.bag")) as writer:
        writer.write(b"raw")
    assert sackli.arrow.read_table(remote.url("x.bag")).column(0).to_pylist() == [b"raw"]


def test_refs_parse_the_same_without_numpy(tmp_path, monkeypatch):
    # Machines without numpy (the CLI's verify) parse refs record by record.
    from sackli.datasets import _ref_columns

    _write(tmp_path / "ds", 40, sharded=False)
    shard = _ref_columns.ShardFiles(str(tmp_path / "ds"))
    bulk = _ref_columns.read_field_refs(shard, range(3, 33), ["words", "label"])
    monkeypatch.setattr(_ref_columns, "_numpy", lambda: None)
    plain = _ref_columns.read_field_refs(shard, range(3, 33), ["words", "label"])
    assert plain["label"].starts == bulk["label"].starts.tolist() == list(range(3, 33))
    assert plain["words"].starts == bulk["words"].starts.tolist()
    assert plain["words"].lengths == bulk["words"].lengths.tolist() == [i % 5 for i in range(3, 33)]
    _rewrite_label_refs(tmp_path / "ds", {7: 40})
    shard = _ref_columns.ShardFiles(str(tmp_path / "ds"))
    with pytest.raises(sackli.CorruptionError, match="datapoint 7 refers to 40 in field 'label'"):
        _ref_columns.read_field_refs(shard, range(40), ["label"])


def test_shards_with_different_specs(tmp_path):
    for shard, spec in (("000000", {"label": "int(8)", "words": "utf8[]"}),
                        ("000001", {"label": "int(4)", "words": "utf8[]"}),
                        ("000002", {"label": "int(8)"})):
        with datasets.DatasetWriter(tmp_path / "ds" / shard, spec) as writer:
            writer.append({name: ([] if name == "words" else 1) for name in spec})
    with pytest.raises(ValueError, match=r"000001: field 'label' is int\(4\) there but int\(8\) in "
                                         r".*000000: shards must share a spec"):
        sackli.arrow.read_table(tmp_path / "ds", fields=["label"])
    assert sackli.arrow.read_table(tmp_path / "ds" / "000001").num_rows == 1
    (tmp_path / "ds" / "000001" / "spec.json").write_text('{"label": "int(8)", "words": "utf8[]"}')
    with pytest.raises(ValueError, match=r"000002: no field 'words' in the dataset"):
        sackli.arrow.read_table(tmp_path / "ds")
