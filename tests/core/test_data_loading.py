"""What data loaders use: batched fetches (`__getitems__`, `r[list]`,
`r[array]`) and per-(rank, worker) epoch sharding (`sackli.shard_indices`).

PyTorch is not a test dependency: its protocol is exercised directly, as its
DataLoader's map-style fetcher calls it.
"""

from __future__ import annotations

import array
import pickle

import numpy as np
import pytest

import sackli

RECORDS = [b"record %d" % i for i in range(100)]


@pytest.fixture(params=[".bag", ".bagz"])
def reader(tmp_path, request):
    path = tmp_path / f"data{request.param}"
    with sackli.Writer(path) as writer:
        writer.write_many(RECORDS)
    with sackli.Reader(path) as opened:
        yield opened


# --- batched fetches -------------------------------------------------------------


def test_getitems_is_read_indices(reader) -> None:
    assert reader.__getitems__([3, 1, 3, -1]) == [RECORDS[3], RECORDS[1], RECORDS[3], RECORDS[99]]
    assert reader.__getitems__(np.array([7, 0])) == [RECORDS[7], RECORDS[0]]
    assert reader.__getitems__([]) == []
    with pytest.raises(IndexError):
        reader.__getitems__([0, 100])


def _torch_fetch(dataset, batch_indices):
    """What torch.utils.data's _MapDatasetFetcher.fetch does with a batch."""
    if hasattr(dataset, "__getitems__") and dataset.__getitems__:
        return dataset.__getitems__(batch_indices)
    return [dataset[i] for i in batch_indices]


def test_a_worker_copy_fetches_batches(reader) -> None:
    worker_copy = pickle.loads(pickle.dumps(reader))  # as DataLoader workers get it
    assert _torch_fetch(worker_copy, [5, 6, 5]) == [RECORDS[5], RECORDS[6], RECORDS[5]]
    view = pickle.loads(pickle.dumps(reader[10:20]))
    assert _torch_fetch(view, [0, 9]) == [RECORDS[10], RECORDS[19]]


@pytest.mark.parametrize(
    "indices",
    [
        [4, 2, 4],
        [-1, 0],
        [],
        range(3, 9, 2),
        np.array([4, 2, 4]),
        np.array([4, 2], dtype=np.uint8),
        np.array([-1, 0], dtype=np.int32),
        np.arange(100)[::-7],  # strided
        array.array("q", [1, 2]),
    ],
    ids=repr,
)
def test_list_and_array_indices_return_lists(reader, indices) -> None:
    expected = [RECORDS[i] for i in list(indices)]
    assert reader[indices] == expected
    assert reader[indices] == reader.read_indices(indices)


def test_scalars_and_slices_are_unchanged(reader) -> None:
    assert reader[3] == RECORDS[3]
    assert reader[-1] == RECORDS[-1]
    assert reader[np.int64(5)] == RECORDS[5]
    assert reader[np.uint8(5)] == RECORDS[5]
    assert reader[np.array(6)] == RECORDS[6]  # a 0-d integer array is a scalar index
    assert reader[True] == RECORDS[1]
    view = reader[10:20]
    assert isinstance(view, sackli.Reader)
    assert view[[0, -1]] == [RECORDS[10], RECORDS[19]]
    assert view[np.array([2])] == [RECORDS[12]]
    # r[i] stays the engine's C function, without a Python frame.
    assert sackli.Reader.__dict__["__getitem__"] is sackli._engine.reader_getitem


@pytest.mark.parametrize(
    ("index", "error", "message"),
    [
        (1.5, TypeError, "not float"),
        ("3", TypeError, "not str"),
        (b"\x01", TypeError, "not bytes"),
        (None, TypeError, "not NoneType"),
        ((1, 2), TypeError, "not tuple"),
        ({1, 2}, TypeError, "not set"),
        (memoryview(b"ab"), TypeError, "not memoryview"),
        ([1, "x"], TypeError, None),
        ([0.5], TypeError, None),
        (np.array([0.5]), TypeError, "integers"),
        (np.zeros((2, 2), dtype=np.int64), ValueError, "one-dimensional"),
        ([0, 100], IndexError, None),
        (np.array([-101]), IndexError, None),
        (100, IndexError, None),
        (np.int64(-101), IndexError, None),
    ],
    ids=repr,
)
def test_bad_indices(reader, index, error, message) -> None:
    with pytest.raises(error) as raised:
        reader[index]
    if message is not None:
        assert message in str(raised.value)


def test_closed_reader_refuses_lists(reader) -> None:
    reader.close()
    for index in ([0], np.array([0]), 0, slice(None)):
        with pytest.raises(ValueError, match="closed"):
            reader[index]
    with pytest.raises(ValueError, match="closed"):
        reader.__getitems__([0])


# --- shard_indices -----------------------------------------------------------------


def _all_shards(n, world_size, num_workers, **kwargs):
    return {
        (rank, worker): sackli.shard_indices(
            n, rank=rank, world_size=world_size, worker_id=worker, num_workers=num_workers, **kwargs)
        for rank in range(world_size)
        for worker in range(num_workers)
    }


@pytest.mark.parametrize("n", [0, 1, 7, 24, 1001])
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 1), (2, 3), (4, 2), (3, 1)])
def test_shards_cover_every_record_once_when_even(n, world_size, num_workers) -> None:
    shards = _all_shards(n, world_size, num_workers, epoch=1, seed=5, drop_remainder=True)
    together = np.concatenate(list(shards.values()))
    assert len(together) == n - n % world_size
    assert len(set(together.tolist())) == len(together)  # disjoint
    per_rank = [sum(len(shards[r, w]) for w in range(num_workers)) for r in range(world_size)]
    assert len(set(per_rank)) == 1  # every rank runs as many steps
    for shard in shards.values():
        assert shard.dtype == np.int64 and shard.ndim == 1
        assert ((0 <= shard) & (shard < max(n, 1))).all()


@pytest.mark.parametrize("n", [1, 7, 1001])
def test_padding_repeats_the_start_of_the_order(n) -> None:
    world_size = 4
    shards = _all_shards(n, world_size, 2, epoch=0, seed=1)
    together = np.concatenate(list(shards.values()))
    padded = -(-n // world_size) * world_size
    assert len(together) == padded
    assert set(together.tolist()) == set(range(n))  # every record at least once
    per_rank = [len(shards[r, 0]) + len(shards[r, 1]) for r in range(world_size)]
    assert per_rank == [padded // world_size] * world_size


def test_order_depends_only_on_seed_and_epoch() -> None:
    first = sackli.shard_indices(1000, epoch=2, seed=7, rank=1, world_size=2, worker_id=1, num_workers=2)
    again = sackli.shard_indices(1000, epoch=2, seed=7, rank=1, world_size=2, worker_id=1, num_workers=2)
    assert first.tolist() == again.tolist()
    next_epoch = sackli.shard_indices(1000, epoch=3, seed=7, rank=1, world_size=2, worker_id=1, num_workers=2)
    other_seed = sackli.shard_indices(1000, epoch=2, seed=8, rank=1, world_size=2, worker_id=1, num_workers=2)
    assert first.tolist() != next_epoch.tolist()
    assert first.tolist() != other_seed.tolist()
    # A whole epoch is a permutation.
    assert sorted(sackli.shard_indices(1000, epoch=3).tolist()) == list(range(1000))


def test_order_is_pinned() -> None:
    """The order comes from PCG64's raw stream, which numpy keeps stable: a
    change here would reorder every resumed training run."""
    assert sackli.shard_indices(10, epoch=0, seed=0).tolist() == [3, 2, 1, 8, 6, 0, 7, 4, 5, 9]
    assert sackli.shard_indices(10, epoch=1, seed=0).tolist() == [7, 4, 5, 1, 9, 8, 6, 2, 0, 3]


def test_without_shuffle_ranks_and_workers_deal_round_robin() -> None:
    shards = _all_shards(10, 2, 2, shuffle=False)
    assert shards[0, 0].tolist() == [0, 4, 8]
    assert shards[0, 1].tolist() == [2, 6]
    assert shards[1, 0].tolist() == [1, 5, 9]
    assert shards[1, 1].tolist() == [3, 7]
    assert sackli.shard_indices(5, shuffle=False, world_size=2, rank=1).tolist() == [1, 3, 0]
    assert sackli.shard_indices(5, shuffle=False, world_size=2, rank=1,
                                drop_remainder=True).tolist() == [1, 3]


def test_shard_indices_feed_a_reader(reader) -> None:
    mine = sackli.shard_indices(len(reader), epoch=4, seed=1, rank=0, world_size=3,
                                worker_id=1, num_workers=2)
    expected = [RECORDS[i] for i in mine]
    assert reader[mine] == expected
    assert list(reader.read_indices_iter(mine)) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_records": -1}, "num_records must be >= 0"),
        ({"rank": 2, "world_size": 2}, "rank must be in"),
        ({"rank": -1}, "rank must be in"),
        ({"worker_id": 3, "num_workers": 3}, "worker_id must be in"),
        ({"world_size": 0}, "rank must be in"),
        ({"epoch": -1}, "epoch and seed must be >= 0"),
    ],
)
def test_shard_indices_refuses_bad_arguments(kwargs, message) -> None:
    arguments = {"num_records": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        sackli.shard_indices(**arguments)
    with pytest.raises(TypeError):
        sackli.shard_indices(10.0)


def test_integer_arrays_in_a_foreign_byte_order_are_read_by_value(tmp_path):
    """A big-endian or 4-byte index array means the indices it holds (once
    misread as native 8-byte integers)."""
    np = pytest.importorskip("numpy")
    path = tmp_path / "a.bag"
    with sackli.Writer(path) as writer:
        writer.write_many(b"%d" % i for i in range(10))
    reader = sackli.Reader(path)
    assert reader.read_indices(np.array([3, 1], dtype=">i8")) == [b"3", b"1"]
    assert reader.read_indices(np.array([2, 9], dtype="<i4")) == [b"2", b"9"]
