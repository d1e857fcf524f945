"""The whole-batch reads of sackli.datasets (sackli/datasets/_batch_values.py
and the bulk row check of `read_indices`): batches above the item-by-item
limit, with repeated, out-of-order and negative indices, across shards and
through views, must give exactly what the real `bags` package gives datapoint
by datapoint, and fall back (still equal) where the shortcut does not apply."""

from __future__ import annotations

import json

import bags
import pytest

from sackli import datasets

SPEC = {
    "b1": "int(1)", "b2": "int(2)", "b4": "int(4)", "b8": "int(8)", "big": "int(8,big)",
    "odd": "int(3)", "any": "int", "raw": "bytes", "words": "utf8[]",
}
N = 50
# 40 indices (above the limit of 16 read one by one): repeats, any order, negatives.
INDICES = [49, 0, 3, 3, -1, 17, -50, 8, 8, 8, *range(30, 0, -1)]


def point(i: int) -> dict:
    return {
        "b1": i, "b2": 256 + i, "b4": 70000 * i, "b8": (1 << 40) + i, "big": (1 << 50) + i,
        "odd": 65536 + i, "any": i * 1000, "raw": bytes([i]) * (i % 7),
        "words": [f"w{i}.{j}" for j in range(i % 4)],  # empty lists too
    }


def write_bags(directory, shard_length=None) -> None:
    if shard_length is None:
        with bags.DatasetWriter(directory, SPEC, bags.encoders) as writer:
            for i in range(N):
                writer.append(point(i))
    else:
        with bags.ShardedDatasetWriter(directory, SPEC, bags.encoders,
                                       shard_length=shard_length) as writer:
            for i in range(N):
                writer.append(point(i))


@pytest.mark.parametrize("mask", [None, {"b8": True}, {"big": True, "words": range(1, 3)},
                                  {"raw": True, "odd": True}])
def test_batches_equal_bags_one_by_one(tmp_path, mask):
    write_bags(tmp_path / "ds")
    theirs = bags.DatasetReader(tmp_path / "ds", bags.decoders)
    # bags reads negative indices wrongly: it gets the positive ones.
    expected = [theirs[i % N] if mask is None else theirs[i % N, mask] for i in INDICES]
    ours = datasets.DatasetReader(tmp_path / "ds")
    assert ours.read_indices(INDICES, mask) == expected
    assert list(ours.read_indices_iter(INDICES, mask, read_ahead=20)) == expected


def test_batches_across_shards_equal_bags(tmp_path):
    write_bags(tmp_path / "ds", shard_length=7)
    ours = datasets.ShardedDatasetReader(tmp_path / "ds")
    assert ours.shards == 8
    theirs = [bags.DatasetReader(tmp_path / "ds" / f"{s:06d}", bags.decoders) for s in range(8)]
    expected = [theirs[(i % N) // 7][(i % N) % 7] for i in INDICES]
    assert ours.read_indices(INDICES) == expected
    assert list(ours) == [point(i) for i in range(N)]


def test_views_map_batches_to_their_rows(tmp_path):
    write_bags(tmp_path / "ds")
    view = datasets.DatasetReader(tmp_path / "ds")[3:50:2]  # rows 3, 5, ..., 49
    assert len(view) == 24
    indices = [23, 0, -1, -24, *range(20)]
    assert view.read_indices(indices, {"b4": True}) == [
        {"b4": 70000 * (3 + 2 * (i % 24))} for i in indices]
    with pytest.raises(IndexError, match="24"):
        view.read_indices([*range(20), 24])
    with pytest.raises(IndexError):
        view.read_indices([*range(20), -25])
    with pytest.raises(TypeError):
        view.read_indices([*range(20), "1"])


def test_indices_of_other_types_take_the_checked_path(tmp_path):
    write_bags(tmp_path / "ds")
    reader = datasets.DatasetReader(tmp_path / "ds")
    # bool is an int subclass (bags indexes with it as 0 / 1); generators and ranges work too.
    assert reader.read_indices([True, *range(20), False], {"b2": True}) == [
        {"b2": 256 + i} for i in [1, *range(20), 0]]
    assert reader.read_indices((i for i in range(30, 10, -1)), {"b1": True}) == [
        {"b1": i} for i in range(30, 10, -1)]
    np = pytest.importorskip("numpy")
    assert reader.read_indices(np.arange(20, dtype=np.int32), {"b1": True}) == [
        {"b1": i} for i in range(20)]


def test_int_records_of_another_size_decode_as_bags_does(tmp_path):
    """A spec that says int(4) over records of 1 to 3 bytes: bags decodes
    each record whatever its length; so must the batch path (no shortcut)."""
    with datasets.DatasetWriter(tmp_path / "ds", {"n": "int"}) as writer:
        for i in range(40):
            writer.append({"n": i * 300})  # 0 to 2 bytes
    (tmp_path / "ds" / "spec.json").write_text(json.dumps({"n": "int(4)"}))
    theirs = bags.DatasetReader(tmp_path / "ds", bags.decoders)
    ours = datasets.DatasetReader(tmp_path / "ds")
    assert ours.read_indices(range(40)) == [theirs[i] for i in range(40)]
    assert ours.read_indices(range(40)) == [{"n": i * 300} for i in range(40)]


def test_compressed_int_and_bytes_fields_batch_alike(tmp_path):
    with datasets.DatasetWriter(tmp_path / "ds", SPEC,
                                compression={"b8": "zstd", "raw": "zstd"}) as writer:
        for i in range(N):
            writer.append(point(i))
    reader = datasets.DatasetReader(tmp_path / "ds")
    assert reader.read_indices(INDICES) == [point(i % N) for i in INDICES]


def test_custom_decoders_are_called_per_value(tmp_path):
    write_bags(tmp_path / "ds")
    decoders = {**datasets.decoders, "int": lambda buffer, *args: len(buffer),
                "bytes": lambda buffer: buffer[::-1]}
    reader = datasets.DatasetReader(tmp_path / "ds", decoders=decoders)
    got = reader.read_indices(INDICES, {"b8": True, "raw": True})
    assert got == [{"b8": 8, "raw": point(i % N)["raw"][::-1]} for i in INDICES]


def test_int_list_fields_read_whole_and_in_parts(tmp_path):
    """A list of ints longer than the item-by-item limit: one datapoint's
    items are read as a range, a batch's as a list."""
    spec = {"ids": "int(4)[]", "big": "int(2,big)[]"}
    with bags.DatasetWriter(tmp_path / "ds", spec, bags.encoders) as writer:
        for i in range(5):
            writer.append({"ids": [i * 100 + j for j in range(30 * i)],
                           "big": [j * 7 for j in range(20 + i)]})
    theirs = bags.DatasetReader(tmp_path / "ds", bags.decoders)
    ours = datasets.DatasetReader(tmp_path / "ds")
    assert [ours[i] for i in range(5)] == [theirs[i] for i in range(5)]
    assert ours.read_indices([4, 0, 4, 2]) == [theirs[i] for i in [4, 0, 4, 2]]
    mask = {"ids": range(3, 50)}
    assert [ours[i, mask] for i in range(5)] == [theirs[i, mask] for i in range(5)]
