"""sackli.datasets and the real `bags` 0.5.1 package read each other's files,
and write the same bytes for the same input."""

from __future__ import annotations

import pathlib

import bags
import numpy as np
import pytest

import sackli
from sackli import datasets
from datasets_helpers import ALL_CODECS_SPEC, all_codecs_datapoint, assert_same_datapoint

# Every codec bags itself can write with the installed libraries (its mp4
# encoder fails on this PyAV; see test_mp4_written_by_sackli_reads_in_bags).
BAGS_WRITABLE_SPEC = {k: v for k, v in ALL_CODECS_SPEC.items() if not v.startswith("mp4")}


def _points(count: int, spec: dict) -> list[dict]:
    return [{k: v for k, v in all_codecs_datapoint(i).items() if k in spec} for i in range(count)]


def _files(directory: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def test_bags_file_is_a_bagz_file_with_an_empty_first_record(tmp_path):
    records = [b"abc", b"", b"de" * 100]
    with bags.BagWriter(tmp_path / "x.bag") as writer:
        for record in records:
            writer.append(record)
    assert list(sackli.Reader(str(tmp_path / "x.bag"))) == [b"", *records]


@pytest.mark.parametrize("records", [
    [], [b""], [b"abc", b"", b"de" * 100],
    [bytes([i]) * (3 << 20) for i in range(3)],  # past the writer's 4 MiB of pending records
], ids=["none", "one-empty", "small", "large"])
def test_bag_writer_bytes_match_bags(tmp_path, records):
    with bags.BagWriter(tmp_path / "bags.bag") as writer:
        for record in records:
            writer.append(record)
    with datasets.BagWriter(tmp_path / "sackli.bag") as writer:
        for record in records:
            writer.append(record)
    assert (tmp_path / "sackli.bag").read_bytes() == (tmp_path / "bags.bag").read_bytes()
    assert datasets.BagReader(tmp_path / "bags.bag")[0:10] == records
    assert bags.BagReader(tmp_path / "sackli.bag")[range(0, 10)] == records


def test_dataset_bytes_match_bags_for_every_codec(tmp_path):
    points = _points(4, BAGS_WRITABLE_SPEC)
    with bags.DatasetWriter(tmp_path / "bags", BAGS_WRITABLE_SPEC, bags.encoders) as writer:
        for point in points:
            writer.append(point)
    with datasets.DatasetWriter(tmp_path / "sackli", BAGS_WRITABLE_SPEC) as writer:
        for point in points:
            writer.append(point)
    ours, theirs = _files(tmp_path / "sackli"), _files(tmp_path / "bags")
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        assert ours[name] == theirs[name], name


@pytest.mark.parametrize("shard_size", [1, 300])
def test_sharded_dataset_bytes_match_bags(tmp_path, shard_size):
    spec = {"bar": "int(4)", "baz": "utf8[]", "foo": "msgpack"}
    points = [{"bar": i, "baz": ["w"] * i, "foo": {"i": i}} for i in range(12)]
    for name, module in [("bags", bags), ("sackli", datasets)]:
        with module.ShardedDatasetWriter(tmp_path / name, spec, module.encoders,
                                         shard_size) as writer:
            for point in points:
                writer.append(point)
    assert _files(tmp_path / "sackli") == _files(tmp_path / "bags")


def test_bags_datasets_read_in_sackli(tmp_path):
    points = _points(5, BAGS_WRITABLE_SPEC)
    with bags.ShardedDatasetWriter(tmp_path / "ds", BAGS_WRITABLE_SPEC, bags.encoders,
                                   shard_length=2) as writer:
        for point in points:
            writer.append(point)
    with datasets.ShardedDatasetReader(tmp_path / "ds") as reader:
        assert reader.shards == 3
        for i, point in enumerate(points):
            assert_same_datapoint(reader[i], point)
        for got, point in zip(reader.read_indices(range(5)), points):
            assert_same_datapoint(got, point)


def test_sackli_datasets_read_in_bags(tmp_path):
    points = _points(5, BAGS_WRITABLE_SPEC)
    with datasets.ShardedDatasetWriter(tmp_path / "ds", BAGS_WRITABLE_SPEC,
                                       shard_length=2) as writer:
        for point in points:
            writer.append(point)
    with bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders) as reader:
        assert reader.shards == 3
        for i, point in enumerate(points):
            assert_same_datapoint(reader[i], point)


def test_mp4_written_by_sackli_reads_in_bags(tmp_path):
    video = np.zeros((4, 32, 16, 3), np.uint8)
    video[:, 8:24] = 200  # a bright band survives lossy coding
    with datasets.DatasetWriter(tmp_path / "ds", {"clips": "mp4(15)[]"}) as writer:
        writer.append({"clips": [video, video[:2]]})
    theirs = bags.DatasetReader(tmp_path / "ds", bags.decoders)[0]["clips"]
    ours = datasets.DatasetReader(tmp_path / "ds")[0]["clips"]
    assert [clip.shape for clip in theirs] == [(4, 32, 16, 3), (2, 32, 16, 3)]
    for mine, other, original in zip(ours, theirs, [video, video[:2]]):
        np.testing.assert_array_equal(mine, other)
        assert np.abs(mine.astype(int) - original).mean() < 8


def test_bags_mp4_encoder_fails_on_this_pyav():
    # The reason bags cannot be the mp4 writer in these tests.
    with pytest.raises(AttributeError):
        bags.encoders["mp4"](np.zeros((1, 16, 16, 3), np.uint8), "15")
