"""Decoded arrays of sackli.datasets are writable and their own: torch takes
them without a warning, and writing to one changes no other datapoint and
not the file. The values are still those `bags` reads from the same files."""

from __future__ import annotations

import pathlib
import warnings

import bags
import numpy as np
import pytest
import torch

from sackli import datasets

SPEC = {"g": "array(float32,10,4)", "i": "png", "h": "jpeg(80)", "n": "array(int16,3)[]"}
ARRAY_FIELDS = ("g", "i", "h")


def _point(i: int) -> dict:
    return {"g": np.full((10, 4), i, np.float32), "i": np.full((16, 12, 4), i, np.uint8),
            "h": np.full((8, 8, 3), 10 * i, np.uint8),
            "n": [np.arange(3, dtype=np.int16) + i for _ in range(i % 3)]}


def _write(folder: pathlib.Path, count: int = 6) -> None:
    with datasets.ShardedDatasetWriter(folder, SPEC, shard_length=4) as writer:
        for i in range(count):
            writer.append(_point(i))


def _files(folder: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _arrays(point: dict) -> list[np.ndarray]:
    return [point[field] for field in ARRAY_FIELDS] + list(point["n"])


# Every way a reader hands out datapoints: one at a time, a batch (the
# engine's path), iteration and a mask of one field's neighbours.
READS = {
    "one": lambda reader: [reader[i] for i in range(len(reader))],
    "batch": lambda reader: reader.read_indices(range(len(reader))),
    "iter": lambda reader: list(reader),
    "mask": lambda reader: [reader[i, {"g": True, "i": True, "h": True, "n": True}]
                            for i in range(len(reader))],
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_decoded_arrays_are_writable_and_equal_to_bags(tmp_path, read):
    _write(tmp_path / "ds")
    with datasets.ShardedDatasetReader(tmp_path / "ds") as ours, \
            bags.ShardedDatasetReader(tmp_path / "ds", bags.decoders) as theirs:
        points = read(ours)
        assert len(points) == 6
        for i, point in enumerate(points):
            expected = theirs[i]
            assert len(point["n"]) == len(expected["n"]) == i % 3
            for got, want in zip(_arrays(point), _arrays(expected)):
                assert got.flags.writeable
                assert not want.flags.writeable  # what bags gives: read-only views
                assert (got.dtype, got.shape) == (want.dtype, want.shape)
                np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_writing_to_a_decoded_array_changes_nothing_else(tmp_path, read):
    _write(tmp_path / "ds")
    before = _files(tmp_path / "ds")
    with datasets.ShardedDatasetReader(tmp_path / "ds") as reader:
        first = read(reader)
        for point in first:
            for array in _arrays(point):
                array[...] = 77
        again = read(reader)
        for i, point in enumerate(again):
            for got, want in zip(_arrays(point), _arrays(_point(i))):
                if got.dtype == np.uint8 and got.shape == (8, 8, 3):  # JPEG is lossy
                    assert np.abs(got.astype(int) - want).max() <= 2
                else:
                    np.testing.assert_array_equal(got, want)
        # Two datapoints never share memory, nor do a datapoint's list items.
        arrays = [array for point in again for array in _arrays(point)]
        for k, a in enumerate(arrays):
            for b in arrays[k + 1:]:
                assert not np.shares_memory(a, b)
    assert _files(tmp_path / "ds") == before


def test_torch_takes_decoded_arrays_without_a_warning(tmp_path):
    _write(tmp_path / "ds")
    with datasets.ShardedDatasetReader(tmp_path / "ds") as reader:
        points = [reader[0], *reader.read_indices([1, 2, 5])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensors = [torch.as_tensor(array) for point in points for array in _arrays(point)]
    tensors[0][0, 0] = 5.0
    assert points[0]["g"][0, 0] == 5.0  # as_tensor shares the array's memory: no copy
