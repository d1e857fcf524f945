"""Batch reads of sackli.datasets (beyond bags): read_indices,
read_indices_iter, iteration with read-ahead and slice views, for one shard
and across shards."""

from __future__ import annotations

import itertools
import threading

import pytest

from sackli import datasets

SPEC = {"label": "int(8)", "text": "utf8", "words": "utf8[]"}


def _point(i: int) -> dict:
    return {"label": i, "text": f"text {i}", "words": [f"w{i}.{j}" for j in range(i % 5)]}


@pytest.fixture(params=["single", "sharded"])
def reader(request, tmp_path):
    """A reader of 23 datapoints: one shard, or shards of 4 (the last short)."""
    if request.param == "single":
        with datasets.DatasetWriter(tmp_path / "ds", SPEC) as writer:
            for i in range(23):
                writer.append(_point(i))
        opened = datasets.DatasetReader(tmp_path / "ds")
    else:
        with datasets.ShardedDatasetWriter(tmp_path / "ds", SPEC, shard_length=4) as writer:
            for i in range(23):
                writer.append(_point(i))
        opened = datasets.ShardedDatasetReader(tmp_path / "ds")
    with opened:
        yield opened


def test_read_indices_in_order_with_duplicates_and_negatives(reader):
    indices = [22, 0, 5, 5, -1, -23, 13, 4]
    assert reader.read_indices(indices) == [_point(i % 23) for i in indices]
    assert reader.read_indices([]) == []


def test_read_indices_with_mask(reader):
    mask = {"label": True, "words": range(1, 3)}
    expected = [{"label": i, "words": _point(i)["words"][1:3]} for i in [4, 9, 3, 0]]
    assert reader.read_indices([4, 9, 3, 0], mask) == expected
    assert reader.read_indices([4, 9], {}) == [{}, {}]
    assert reader.read_indices([4], {"words": slice(2, None)}) == [{"words": ["w4.2", "w4.3"]}]


def test_read_indices_out_of_range(reader):
    with pytest.raises(IndexError, match="23"):
        reader.read_indices([0, 23])
    with pytest.raises(IndexError):
        reader.read_indices([-24])
    with pytest.raises(IndexError):
        reader[23]
    with pytest.raises(TypeError):
        reader["0"]


def test_numpy_indices(reader):
    np = pytest.importorskip("numpy")
    assert reader.read_indices(np.array([3, 1], np.int64)) == [_point(3), _point(1)]
    assert reader[np.int32(7)] == _point(7)


def test_slice_views(reader):
    view = reader[5:20:3]
    assert len(view) == 5
    assert list(view) == [_point(i) for i in range(5, 20, 3)]
    assert view[-1] == _point(17)
    assert view[1, {"label": True}] == {"label": 8}
    assert view.read_indices([4, 0]) == [_point(17), _point(5)]
    assert view[::-1][0] == _point(17)
    assert len(reader[30:]) == 0 and list(reader[30:]) == []
    with pytest.raises(IndexError):
        view[5]


def test_iteration_reads_every_datapoint_in_order(reader):
    assert list(reader) == [_point(i) for i in range(23)]


@pytest.mark.parametrize("read_ahead", [1, 2, 7, 100])
def test_read_indices_iter(reader, read_ahead):
    indices = [3, 22, 3, 0, -2] * 3
    got = list(reader.read_indices_iter(indices, {"text": True}, read_ahead=read_ahead))
    assert got == [{"text": f"text {i % 23}"} for i in indices]


def test_read_indices_iter_infinite_generator(reader):
    endless = itertools.cycle([1, 2])
    got = list(itertools.islice(reader.read_indices_iter(endless, read_ahead=3), 7))
    assert got == [_point(1), _point(2)] * 3 + [_point(1)]


def test_read_indices_iter_error_surfaces_at_its_position(reader):
    def indices():
        yield 1
        yield 2
        raise RuntimeError("source failed")

    iterator = reader.read_indices_iter(indices(), read_ahead=2)
    assert next(iterator) == _point(1)
    assert next(iterator) == _point(2)
    with pytest.raises(RuntimeError, match="source failed"):
        next(iterator)


def test_read_indices_iter_bad_index_after_good_ones(reader):
    iterator = reader.read_indices_iter([0, 1, 99, 2], read_ahead=10)
    assert [next(iterator), next(iterator)] == [_point(0), _point(1)]
    with pytest.raises(IndexError):
        next(iterator)


def test_read_indices_iter_rejects_bad_read_ahead(reader):
    with pytest.raises(ValueError):
        reader.read_indices_iter([0], read_ahead=0)


def test_threads_share_one_reader(reader):
    results: dict[int, list] = {}

    def work(worker: int) -> None:
        indices = [(worker * 7 + k) % 23 for k in range(50)]
        results[worker] = [reader.read_indices(indices[k:k + 5]) for k in range(0, 50, 5)]

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker, batches in results.items():
        indices = [(worker * 7 + k) % 23 for k in range(50)]
        assert [p for batch in batches for p in batch] == [_point(i) for i in indices]


def test_bag_reader_batch_and_negative_index(tmp_path):
    with datasets.BagWriter(tmp_path / "x.bag") as writer:
        for i in range(10):
            writer.append(bytes([i]) * i)
    reader = datasets.BagReader(tmp_path / "x.bag")
    assert reader[-1] == bytes([9]) * 9
    assert reader.read_indices([3, 3, 0]) == [b"\3\3\3", b"\3\3\3", b""]
    assert reader[slice(8, None)] == [bytes([8]) * 8, bytes([9]) * 9]
    with pytest.raises(IndexError):
        reader[10]
    with pytest.raises(ValueError):
        reader[range(0, 10, 2)]


def test_views_pickle_and_reopen(reader):
    import pickle

    view = reader[3:9:2]
    copy = pickle.loads(pickle.dumps(view))
    assert list(copy) == [_point(i) for i in (3, 5, 7)]
    assert copy.read_indices([-1], {"label": True}) == [{"label": 7}]


def test_torch_style_batched_fetch(reader):
    assert reader.__getitems__([2, 0]) == [_point(2), _point(0)]
