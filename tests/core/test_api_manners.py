"""API manners (issue 31, section 5): mistakes a newcomer makes get a clear
TypeError, objects print what they are, and the odd spellings line up:

- `write_many` refuses a single str / bytes-like object as its iterable;
- `sackli.maps.write` says what it expects (and takes a mapping);
- Index, MultiIndex, MapBuffer, IntMap and the dataset writers have reprs;
- iterating an Index gives its keys (the distinct records), as a dict does;
- `Reader.shard_sizes` is a property like `paths` (the call still works);
- `read_range` takes a negative start, as indexing does.
"""

from __future__ import annotations

import os
import warnings

import pytest

import sackli
import sackli.datasets
import sackli.maps
from sackli.formats import JsonLinesWriter, TextLinesWriter, TFRecordWriter

RECORDS = [b"a", b"b", b"a", b"c", b"b", b""]
SINGLE_RECORDS = ["abc", b"abc", bytearray(b"abc"), memoryview(b"abc")]


def write_bag(path, records=RECORDS) -> str:
    with sackli.Writer(path) as writer:
        writer.write_many(records)
    return os.fspath(path)


# --- write_many refuses one record as its iterable -------------------------------


def _bag_writers(folder):
    """(name, open) of every bag writer with a write_many, and how to count
    what a closed one wrote."""
    return [
        ("Writer", lambda: sackli.Writer(folder / "w.bag"), lambda: len(sackli.Reader(folder / "w.bag"))),
        ("ShardedWriter", lambda: sackli.ShardedWriter(str(folder / "s@2.bag")),
         lambda: len(sackli.Reader(str(folder / "s@2.bag")))),
        ("ShardedWriter(num_records)",
         lambda: sackli.ShardedWriter(str(folder / "n@2.bag"), num_records=1),
         lambda: len(sackli.Reader(str(folder / "n@2.bag")))),
        ("ShardedWriter(@*)",
         lambda: sackli.ShardedWriter(str(folder / "m@*.bag"), max_shard_bytes=1 << 20),
         lambda: len(sackli.Reader(str(folder / "m@*.bag")))),
    ]


@pytest.mark.parametrize("single", SINGLE_RECORDS, ids=lambda value: type(value).__name__)
def test_write_many_refuses_a_single_record(tmp_path, single):
    for name, open_writer, count in _bag_writers(tmp_path):
        with open_writer() as writer:
            with pytest.raises(TypeError, match=r"write_many.*list of records.*write\(") as caught:
                writer.write_many(single)
            assert type(single).__name__ in str(caught.value), name
            writer.write_many([b"x"])  # the writer is still usable, nothing was written
        assert count() == 1, name


@pytest.mark.parametrize("single", SINGLE_RECORDS, ids=lambda value: type(value).__name__)
@pytest.mark.parametrize("writer_class", [JsonLinesWriter, TextLinesWriter, TFRecordWriter])
def test_record_file_write_many_refuses_a_single_record(tmp_path, writer_class, single):
    with writer_class(tmp_path / "out") as writer:
        with pytest.raises(TypeError, match=r"write_many.*list of records.*write\("):
            writer.write_many(single)
        assert writer.records_written == 0


def test_write_many_still_takes_any_iterable_of_records(tmp_path):
    write_bag(tmp_path / "g.bag", (r for r in [b"a", "b", bytearray(b"c"), memoryview(b"d")]))
    assert list(sackli.Reader(tmp_path / "g.bag")) == [b"a", b"b", b"c", b"d"]


# --- sackli.maps.write says what it expects ---------------------------------------


def test_maps_write_takes_a_mapping_as_mapbuffer_does(tmp_path):
    data = {3: b"x", 1: b"yy", 2: b""}
    assert sackli.maps.write(tmp_path / "d.mb", data) == 3
    assert (tmp_path / "d.mb").read_bytes() == bytes(sackli.maps.MapBuffer(data).tobytes())
    mapbuffer = pytest.importorskip("mapbuffer")
    assert (tmp_path / "d.mb").read_bytes() == mapbuffer.MapBuffer(data).tobytes()


@pytest.mark.parametrize("items, message", [
    ([(1, "x")], r"values must be bytes-like, not str: encode it"),
    ({1: "x"}, r"values must be bytes-like, not str: encode it"),
    ([(1, 5)], r"values must be bytes-like, not int"),  # bytes(5) would be 5 zero bytes
    ([(1, None)], r"values must be bytes-like, not NoneType"),
    ([1, 2], r"\(int key, bytes-like value\) pairs.*int"),
    ([(1, b"x", 3)], r"\(int key, bytes-like value\) pairs.*tuple of 3"),
    ([("a", b"x")], r"keys must be integers, not str"),
    ([(1.5, b"x")], r"keys must be integers, not float"),
    (5, r"a mapping or an iterable of \(int key, bytes-like value\) pairs, not int"),
    ("ab", r"a mapping or an iterable of \(int key, bytes-like value\) pairs, not str"),
])
def test_maps_write_says_what_it_expects(tmp_path, items, message):
    with pytest.raises(TypeError, match=message):
        sackli.maps.write(tmp_path / "m.mb", items)
    assert os.listdir(tmp_path) == []


def test_maps_write_names_the_bad_item(tmp_path):
    with pytest.raises(TypeError, match=r"not str: encode it \(item 2, key 7\)"):
        sackli.maps.write(tmp_path / "m.mb", [(5, b"a"), (6, b"b"), (7, "c")])


def test_maps_write_still_takes_bytes_like_values(tmp_path):
    pairs = [(1, b"a"), (2, bytearray(b"bb")), (3, memoryview(b"ccc"))]
    sackli.maps.write(tmp_path / "m.mb", iter(pairs))
    assert sackli.maps.MapBuffer(tmp_path / "m.mb").todict() == {1: b"a", 2: b"bb", 3: b"ccc"}


# --- reprs ----------------------------------------------------------------------


def test_index_reprs_name_the_bag_and_sizes(tmp_path):
    path = write_bag(tmp_path / "x.bag")
    reader = sackli.Reader(path)
    assert repr(sackli.Index(reader)) == f"<sackli.Index of {path!r}: 6 records, 4 distinct>"
    multi = sackli.MultiIndex(reader)
    assert repr(multi) == f"<sackli.MultiIndex of {path!r}: 6 records, 4 distinct>"
    view = sackli.Index(reader[1::2])
    reader.close()  # an index keeps its own hold on the files
    assert repr(view) == f"<sackli.Index of {path!r}[1:7:2]: 3 records, 3 distinct>"


def test_map_reprs_name_the_source_and_count(tmp_path):
    sackli.maps.write(tmp_path / "m.mb", {1: b"a", 2: b"b"}, compress="zstd")
    path = os.fspath(tmp_path / "m.mb")
    assert repr(sackli.maps.MapBuffer(path)) == f"<sackli.maps.MapBuffer of {path!r}: 2 keys, zstd>"
    assert repr(sackli.maps.MapBuffer({7: b"x"})) == "<sackli.maps.MapBuffer of <bytes>: 1 key>"
    assert repr(sackli.maps.IntMap({1: 2, 3: 4})) == "<sackli.maps.IntMap of <bytes>: 2 keys>"
    (tmp_path / "i.im").write_bytes(sackli.maps.IntMap({1: 2}).tobytes())
    intmap = sackli.maps.IntMap(os.fspath(tmp_path / "i.im"))
    assert repr(intmap) == f"<sackli.maps.IntMap of {os.fspath(tmp_path / 'i.im')!r}: 1 key>"


def test_a_damaged_map_still_has_a_repr():
    damaged = sackli.maps.MapBuffer(b"not a map at all")
    assert repr(damaged).startswith("<sackli.maps.MapBuffer of <bytes>: unreadable (")


def test_dataset_writer_reprs_name_the_folder_and_size(tmp_path):
    spec = {"n": "int"}
    with sackli.datasets.ShardedDatasetWriter(tmp_path / "sharded", spec, shard_length=2) as writer:
        for n in range(3):
            writer.append({"n": n})
        assert repr(writer) == (f"<sackli.datasets.ShardedDatasetWriter({str(tmp_path / 'sharded')!r}): "
                                "3 datapoints, 2 shards>")
    with sackli.datasets.DatasetWriter(tmp_path / "plain", spec) as writer:
        writer.append({"n": 1})
        assert repr(writer) == f"<sackli.datasets.DatasetWriter({str(tmp_path / 'plain')!r}): 1 datapoints>"
    with sackli.datasets.BagWriter(tmp_path / "b.bag") as writer:
        writer.append(b"x")
        assert repr(writer) == f"<sackli.datasets.BagWriter({str(tmp_path / 'b.bag')!r}): 1 records>"


# --- iterating an index gives its keys ------------------------------------------------


@pytest.mark.parametrize("suffix", [".bag", ".bagz"])
def test_iterating_an_index_gives_the_distinct_records_in_order(tmp_path, suffix):
    reader = sackli.Reader(write_bag(tmp_path / ("x" + suffix)))
    index, multi = sackli.Index(reader), sackli.MultiIndex(reader)
    view = sackli.Index(reader[::-1])
    reader.close()
    assert list(index) == list(multi) == [b"a", b"b", b"c", b""]
    assert list(view) == [b"", b"b", b"c", b"a"]
    assert {record: index[record] for record in index} == {b"a": 0, b"b": 1, b"c": 3, b"": 5}
    assert dict(zip(multi, map(multi.__getitem__, multi))) == {
        b"a": [0, 2], b"b": [1, 4], b"c": [3], b"": [5]}


def test_iterating_a_multi_index_of_many_repeats(tmp_path):
    """Each record's positions are looked up once (not once per repeat,
    which would build k lists of k positions)."""
    records = [b"same"] * 20_000 + [b"other"] + [b"same"] * 100
    multi = sackli.MultiIndex(sackli.Reader(write_bag(tmp_path / "r.bag", records)))
    assert list(multi) == [b"same", b"other"]


def test_iterating_an_empty_index(tmp_path):
    assert list(sackli.Index(sackli.Reader(write_bag(tmp_path / "e.bag", [])))) == []


# --- shard_sizes is a property, as paths and stored_bytes are -----------------------


def test_shard_sizes_is_a_property_and_the_call_still_works(tmp_path):
    with sackli.ShardedWriter(str(tmp_path / "s@3.bag"), num_records=7) as writer:
        writer.write_many(b"%d" % i for i in range(7))
    reader = sackli.Reader(str(tmp_path / "s@3.bag"))
    assert reader.shard_sizes == [3, 2, 2]
    assert isinstance(reader.shard_sizes, list)
    assert len(reader.shard_sizes) == len(reader.paths)
    assert reader[1:].shard_sizes == [3, 2, 2]  # a view has its bag's sizes
    with pytest.warns(DeprecationWarning, match="shard_sizes is a property"):
        called = reader.shard_sizes()
    assert called == [3, 2, 2] and type(called) is list


def test_the_property_itself_does_not_warn(tmp_path):
    reader = sackli.Reader(write_bag(tmp_path / "x.bag"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reader.shard_sizes == [6]


# --- read_range takes a negative start ------------------------------------------------


def test_read_range_takes_a_negative_start(tmp_path):
    reader = sackli.Reader(write_bag(tmp_path / "x.bag"))
    assert reader.read_range(-3, 2) == RECORDS[-3:-1]
    assert reader.read_range(-6, 6) == RECORDS
    assert reader.read_range(-1, 0) == []
    assert list(reader.read_range_iter(-3, 3)) == RECORDS[-3:]
    assert reader[1:].read_range(-2, 2) == RECORDS[-2:]


@pytest.mark.parametrize("start, count", [(-7, 1), (-1, 2), (-3, 4), (-2**70, 1)])
def test_read_range_still_refuses_what_is_outside(tmp_path, start, count):
    reader = sackli.Reader(write_bag(tmp_path / "x.bag"))
    with pytest.raises(IndexError, match=rf"\[{start}, {start + count}\) out of range .* 6 records"):
        reader.read_range(start, count)
    with pytest.raises(IndexError):
        reader.read_range_iter(start, count)
