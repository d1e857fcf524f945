"""The fast paths of sackli.datasets (docs/datasets.md, "Speed"): single
datapoints read without a batch, masks remembered between reads, lists
read item by item or as a batch depending on their length, writes that skip
checks the encoders made. Each must give exactly what the batch path and
the real `bags` package give, and the same errors."""

from __future__ import annotations

import pickle

import bags
import pytest

import sackli
from sackli import datasets

SPEC = {"label": "int(8)", "name": "utf8", "words": "utf8[]"}


def point(i: int) -> dict:
    # Lists of 0 to 39 items: on both sides of the item-by-item limit.
    return {"label": i, "name": f"n{i}", "words": [f"w{i}.{j}" for j in range(i % 40)]}


@pytest.fixture
def folder(tmp_path):
    with bags.DatasetWriter(tmp_path / "ds", SPEC, bags.encoders) as writer:
        for i in range(60):
            writer.append(point(i))
    return tmp_path / "ds"


MASKS = [
    None, {}, {"label": True}, {"words": range(2, 30)}, {"words": range(5, 5)}, {"words": 0},
    {"words": slice(3, None), "name": True}, {"words": range(38, 100)},
    {"label": False, "words": True}, {"words": slice(0, 1)},
]


def bags_read(reader, i, mask):
    """`bags` reading datapoint i; it takes no slices with a None step or
    stop, so those become the equivalent ranges."""
    if mask is None:
        return reader[i]
    as_ranges = {field: range(v.start or 0, 10**6 if v.stop is None else v.stop)
                 if isinstance(v, slice) else v for field, v in mask.items()}
    return reader[i, as_ranges]


@pytest.mark.parametrize("mask", MASKS, ids=repr)
def test_single_reads_equal_bags_and_the_batch_path(folder, mask):
    ours = datasets.DatasetReader(folder)
    theirs = bags.DatasetReader(folder, bags.decoders)
    expected = [bags_read(theirs, i, mask) for i in range(60)]
    for i in range(60):
        assert (ours[i] if mask is None else ours[i, mask]) == expected[i]
        # A fresh dict each time, as most code writes it.
        assert ours[i, None if mask is None else dict(mask)] == expected[i]
    assert ours.read_indices(range(60), mask) == expected


def test_a_remembered_mask_still_checks_value_types(folder):
    reader = datasets.DatasetReader(folder)
    assert reader[1, {"label": True}] == {"label": 1}
    # 1 == True and hash(1) == hash(True): the remembered plan must not answer.
    with pytest.raises(TypeError, match="scalar field 'label' must be a bool"):
        reader[1, {"label": 1}]
    with pytest.raises(TypeError, match="scalar field 'label' must be a bool"):
        reader[1, {"label": 1.0}]
    mask = {"label": True}
    assert reader[2, mask] == {"label": 2}
    mask["label"] = range(1)  # the same dict, changed
    with pytest.raises(TypeError, match="scalar field 'label'"):
        reader[2, mask]
    del mask["label"]
    mask["colour"] = True
    with pytest.raises(ValueError, match="'colour'"):
        reader[2, mask]


def test_a_remembered_mask_still_checks_range_steps(folder):
    reader = datasets.DatasetReader(folder)
    first = reader[1, {"words": range(0, 1)}]
    # range(0, 1) == range(0, 1, 2): the remembered plan must not answer.
    with pytest.raises(ValueError):
        reader[1, {"words": range(0, 1, 2)}]
    assert reader[1, {"words": range(0, 1)}] == first
    mask = {"words": range(0, 1)}
    assert reader[1, mask] == first
    mask["words"] = range(0, 1, 2)  # the same dict, its value equal but not the same
    with pytest.raises(ValueError):
        reader[1, mask]


def test_many_masks_in_turn(folder):
    reader = datasets.DatasetReader(folder)
    for stop in range(100):  # more masks than a reader remembers
        expected = {"words": point(39)["words"][:stop]} if stop else {}  # range(0, 0) is falsy
        assert reader[39, {"words": range(0, stop)}] == expected


def test_views_and_pickles_read_alike(folder):
    reader = datasets.DatasetReader(folder)
    view = reader[10:50:3]
    copy = pickle.loads(pickle.dumps(view))
    for i in range(len(view)):
        assert view[i, {"words": range(1, 20)}] == copy[i, {"words": range(1, 20)}]
        assert view[i] == copy[i] == point(10 + 3 * i)
    assert view[-1] == point(49)
    with pytest.raises(IndexError):
        view[len(view)]
    with pytest.raises(IndexError):
        view[-len(view) - 1]


def test_sharded_single_reads_find_their_shard(tmp_path):
    with datasets.ShardedDatasetWriter(tmp_path / "ds", SPEC, shard_length=7) as writer:
        assert [writer.append(point(i)) for i in range(30)] == list(range(30))
    reader = datasets.ShardedDatasetReader(tmp_path / "ds")
    assert reader.shards == 5
    assert [reader[i] for i in range(30)] == [point(i) for i in range(30)]
    assert reader[-1, {"words": range(0, 2)}] == {"words": ["w29.0", "w29.1"]}


def test_sharded_writer_indices_match_bags(tmp_path):
    with bags.ShardedDatasetWriter(tmp_path / "theirs", SPEC, bags.encoders,
                                   shard_length=4) as theirs, \
            datasets.ShardedDatasetWriter(tmp_path / "ours", SPEC, shard_length=4) as ours:
        for i in range(10):
            assert ours.append(point(i)) == theirs.append(point(i))
            assert len(ours) == len(theirs) and ours.shards == theirs.shards


def test_single_read_of_a_value_that_does_not_decode(tmp_path):
    with datasets.DatasetWriter(tmp_path / "ds", {"name": "bytes", "words": "bytes[]"}) as writer:
        writer.append({"name": b"ok", "words": [b"a"]})
        writer.append({"name": b"\xff", "words": [b"b", b"\xfe", b"c"]})
    (tmp_path / "ds" / "spec.json").write_text('{"name": "utf8", "words": "utf8[]"}')
    reader = datasets.DatasetReader(tmp_path / "ds")
    assert reader[0] == {"name": "ok", "words": ["a"]}
    with pytest.raises(ValueError, match=r"name\.bag: record 1 of field 'name' does not decode"):
        reader[1]
    with pytest.raises(ValueError, match=r"words\.bag: record 2 of field 'words' does not decode"):
        reader[1, {"words": True}]
    assert reader[1, {"words": range(0, 1)}] == {"words": ["b"]}


def test_int_decoders_keep_their_byte_order(tmp_path):
    spec = {"big": "int(4,big)", "little": "int(4)", "any": "int"}
    with datasets.DatasetWriter(tmp_path / "ds", spec) as writer:
        writer.append({"big": 258, "little": 258, "any": 70000})
    assert (tmp_path / "ds" / "big.bag").read_bytes()[:4] == b"\x00\x00\x01\x02"
    assert datasets.DatasetReader(tmp_path / "ds")[0] == {"big": 258, "little": 258, "any": 70000}
    reader = bags.DatasetReader(tmp_path / "ds", bags.decoders)
    assert reader[0] == {"big": 258, "little": 258, "any": 70000}


def test_checked_appends_still_refuse_bad_values(tmp_path):
    writer = datasets.DatasetWriter(tmp_path / "ds", SPEC)
    writer.append(point(1))
    with pytest.raises(TypeError, match="list field"):
        writer.append({**point(2), "words": 5})
    with pytest.raises(ValueError, match="field 'label'"):
        writer.append({**point(2), "label": "two"})
    assert len(writer) == 1
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.append(point(3))
    bag = datasets.BagWriter(tmp_path / "x.bag")
    with pytest.raises(TypeError, match="bytes"):
        bag.extend([b"a", "b"])
    assert len(bag) == 0
    bag.close()
    with pytest.raises(ValueError, match="closed"):
        bag.append(b"c")
    assert datasets.DatasetReader(tmp_path / "ds")[0] == point(1)
    assert sackli.Reader(str(tmp_path / "x.bag")).read() == [b""]


@pytest.mark.parametrize("compression", [None, {"name": "zstd", "words": "zstd(1)"}])
def test_shards_end_where_the_exact_size_says(tmp_path, compression):
    """The sharded writer asks for the exact size only once a cheap upper
    bound reaches shard_size; shards must still end at the first datapoint
    whose exact size reaches it (values compress well here, so the bound
    is loose)."""
    points = [{**point(i), "name": "x" * (50 + i)} for i in range(80)]
    shard_size = 1500
    expected, length = [], 0
    probe = datasets.DatasetWriter(tmp_path / "probe", SPEC, compression=compression)
    for datapoint in points:  # the exact size after every append
        probe.append(datapoint)
        length += 1
        if probe.size >= shard_size:
            expected.append(length)
            probe.discard()
            probe = datasets.DatasetWriter(tmp_path / f"probe{len(expected)}", SPEC,
                                           compression=compression)
            length = 0
    probe.discard()
    if length:
        expected.append(length)
    with datasets.ShardedDatasetWriter(tmp_path / "ds", SPEC, shard_size=shard_size,
                                       compression=compression) as writer:
        for datapoint in points:
            writer.append(datapoint)
    reader = datasets.ShardedDatasetReader(tmp_path / "ds")
    assert [len(shard) for shard in reader.shard_readers] == expected
    assert len(expected) > 3
    assert list(reader) == points
