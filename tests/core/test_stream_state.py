"""Streams that checkpoint: `read_indices_iter`'s `sackli.IndexStream`
(`state_dict` / `load_state_dict`) and `sackli.EpochStream`, without any
data-loading framework."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import sackli
from sackli import datasets

N = 103
RECORDS = [b"record %d" % i for i in range(N)]
ORDER = np.random.default_rng(3).permutation(N)


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    path = tmp_path_factory.mktemp("bags") / "stream.bagz"
    with sackli.Writer(path) as writer:
        writer.write_many(RECORDS)
    with sackli.Reader(path) as reader:
        yield reader


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dataset") / "ds"
    with datasets.ShardedDatasetWriter(str(folder), {"i": "int(32)"}, shard_length=40) as writer:
        for i in range(N):
            writer.append({"i": i})
    with datasets.ShardedDatasetReader(str(folder)) as reader:
        yield reader


def _resumed(source, indices, k, **kwargs):
    """The first k items of a stream, and the rest from a new stream given its state."""
    stream = source.read_indices_iter(indices, **kwargs)
    first = [next(stream) for _ in range(k)]
    state = json.loads(json.dumps(stream.state_dict()))  # a checkpoint holds it as it is
    later = source.read_indices_iter(indices, **kwargs)
    later.load_state_dict(state)
    return first, list(later), state


@pytest.mark.parametrize("kind", [list, np.asarray, tuple])
@pytest.mark.parametrize("k", [0, 1, 5, 6, 16, 50, N - 1, N])
def test_a_new_stream_continues_where_the_state_was_taken(reader, kind, k) -> None:
    # Batches of 6 (after a first of 16) put k on and off batch boundaries.
    first, rest, state = _resumed(reader, kind(ORDER.tolist()), k, read_ahead=6)
    assert first + rest == [RECORDS[i] for i in ORDER]
    assert state["position"] == k and state["indices"] == N


def test_an_iterator_of_indices_resumes_by_skipping(reader) -> None:
    stream = reader.read_indices_iter(iter(range(N)))
    assert [next(stream) for _ in range(40)] == RECORDS[:40]
    state = stream.state_dict()
    assert state == {"position": 40, "indices": None, "fingerprint": None}
    later = reader.read_indices_iter(iter(range(N)))
    later.load_state_dict(state)
    assert list(later) == RECORDS[40:]


def test_a_datasets_stream_resumes(dataset) -> None:
    first, rest, _ = _resumed(dataset, ORDER, 37, read_ahead=10)
    assert [datapoint["i"] for datapoint in first + rest] == ORDER.tolist()


def test_a_state_of_another_stream_is_refused(reader) -> None:
    """Other indices, or as many of a source of another size."""
    state = reader.read_indices_iter(ORDER).state_dict()
    for other in (reader.read_indices_iter(ORDER[::-1]), reader.read_indices_iter(ORDER[1:]),
                  reader[:-1].read_indices_iter(ORDER % (N - 1))):
        with pytest.raises(ValueError, match="this state is of another stream"):
            other.load_state_dict(state)
    # The same indices as a list and as an array are the same stream.
    reader.read_indices_iter(ORDER.tolist()).load_state_dict(state)


def test_only_a_new_stream_moves(reader) -> None:
    stream = reader.read_indices_iter(ORDER)
    next(stream)
    stream.load_state_dict(stream.state_dict())  # where it is: nothing to do
    with pytest.raises(ValueError, match="load a state into a new stream, before its first item"):
        stream.load_state_dict({**stream.state_dict(), "position": 5})
    assert next(stream) == RECORDS[ORDER[1]]


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [({"position": N + 1}, ValueError, "beyond this stream's 103 indices"),
     ({"position": -1}, ValueError, "position must be >= 0"),
     ({"position": "3"}, TypeError, "position is an int")])
def test_bad_states_are_refused(reader, change, error, message) -> None:
    stream = reader.read_indices_iter(ORDER)
    with pytest.raises(error, match=message):
        stream.load_state_dict({**stream.state_dict(), **change})
    with pytest.raises(TypeError, match=r"the dict state_dict\(\) returns"):
        stream.load_state_dict([3])


def test_a_stream_is_an_iterator_that_does_not_pickle(reader) -> None:
    stream = reader.read_indices_iter(ORDER)
    assert isinstance(stream, sackli.IndexStream) and iter(stream) is stream
    assert repr(stream) == "<sackli stream at 0 of 103 indices>"
    with pytest.raises(TypeError, match="save its state_dict"):
        pickle.dumps(stream)


# --- EpochStream ---------------------------------------------------------------


def _world(source, world_size, epoch=0, consumed=0, **kwargs):
    streams = [sackli.EpochStream(source, seed=9, rank=rank, world_size=world_size, **kwargs)
               for rank in range(world_size)]
    for stream in streams:
        stream.set_epoch(epoch, consumed)
    return streams


def test_an_epoch_stream_reads_its_share_and_resumes(reader) -> None:
    stream, = _world(reader, 1, epoch=2)
    first = list(zip(range(30), iter(stream)))
    state = stream.state_dict()
    assert state["epoch"] == 2 and state["consumed"] == 0 and state["stream"]["position"] == 30
    again, = _world(reader, 1)  # another epoch set: the state overrides it
    again.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert again.epoch == 2
    rest = list(again)
    whole = [RECORDS[i] for i in sackli.shard_indices(N, epoch=2, seed=9)]
    assert [record for _, record in first] + rest == whole
    assert list(again) == whole  # a later iter() reads the epoch afresh


def test_set_epoch_drops_a_loaded_state(reader) -> None:
    stream, = _world(reader, 1)
    iterator = iter(stream)
    next(iterator)
    fresh, = _world(reader, 1)
    fresh.load_state_dict(stream.state_dict())
    fresh.set_epoch(1)
    assert list(fresh) == [RECORDS[i] for i in sackli.shard_indices(N, epoch=1, seed=9)]


def test_an_elastic_resume_through_epoch_streams(reader) -> None:
    """Two ranks read 20 records each; four ranks then share the rest."""
    before = [record for stream in _world(reader, 2, epoch=1)
              for _, record in zip(range(20), stream)]
    after = [list(stream) for stream in _world(reader, 4, epoch=1, consumed=40)]
    assert [len(share) for share in after] == [16] * 4
    read = before + [record for share in after for record in share]
    assert set(read) == set(RECORDS) and len(read) == N + 1  # 63 left: one repeats
    assert sorted(set(before)) == sorted(before)


def test_epoch_position_of_epoch_streams_resumes_in_another_world(reader) -> None:
    """Two ranks read 4 batches of 5; their states give the position, which
    four ranks with batches of 3 load (no loader: one worker each)."""
    ranks = _world(reader, 2, epoch=1, batch_size=5)
    before = [record for stream in ranks for _, record in zip(range(20), stream)]
    position = sackli.epoch_position(*[stream.state_dict() for stream in ranks])
    assert position == sackli.epoch_position(json.loads(json.dumps(ranks[1].state_dict())))
    assert (position["epoch"], position["consumed"]) == (1, 40)
    after = []
    for stream in _world(reader, 3, batch_size=3):
        stream.load_state_dict(position)
        after += list(stream)
    assert sorted(before + after) == sorted(RECORDS)  # 63 left: 21 for each rank


def test_a_state_of_another_rank_is_refused(reader) -> None:
    ranks = _world(reader, 2)
    next(iter(ranks[0]))
    ranks[1].load_state_dict(ranks[0].state_dict())
    with pytest.raises(ValueError, match=r"another share of epoch 0 .*rank 1 of 2.*consumed=K"):
        iter(ranks[1])


def test_an_epoch_stream_pickles_without_its_stream(reader) -> None:
    stream, = _world(reader, 1, epoch=3)
    next(iter(stream))
    copy = pickle.loads(pickle.dumps(stream))
    assert copy.epoch == 3 and copy.state_dict()["stream"] is None
    assert len(list(copy)) == N


def _shout(record: bytes) -> bytes:
    return record.upper()


def test_a_transform_applies_to_each_record_and_keeps_the_position(reader) -> None:
    stream = sackli.EpochStream(reader, seed=9, transform=_shout)
    whole = [RECORDS[i].upper() for i in sackli.shard_indices(N, seed=9)]
    iterator = iter(stream)
    first = [next(iterator) for _ in range(17)]
    state = stream.state_dict()
    assert state["stream"]["position"] == 17
    assert iterator.state_dict() == state["stream"]  # a loader may save the iterator's
    again = sackli.EpochStream(reader, seed=9, transform=_shout)
    again.load_state_dict(state)
    assert first + list(again) == whole
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(iter(again))


def test_a_transform_gets_datapoints_of_a_dataset_reader(dataset) -> None:
    stream = sackli.EpochStream(dataset, shuffle=False, transform=lambda point: point["i"] * 2)
    assert list(stream) == [2 * i for i in range(N)]


def test_an_epoch_stream_checks_its_arguments(reader) -> None:
    with pytest.raises(TypeError, match="read_indices_iter"):
        sackli.EpochStream([b"a"])
    with pytest.raises(ValueError, match="both rank and world_size"):
        sackli.EpochStream(reader, rank=0)
    with pytest.raises(ValueError, match="rank must be in"):
        sackli.EpochStream(reader, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size must be >= 1, not 0"):
        sackli.EpochStream(reader, batch_size=0)
    with pytest.raises(TypeError, match="transform must be a function"):
        sackli.EpochStream(reader, transform=3)
    stream = sackli.EpochStream(reader)
    with pytest.raises(ValueError, match="consumed must be >= 0"):
        stream.set_epoch(0, consumed=-1)
    with pytest.raises(TypeError, match=r"the dict state_dict\(\) returns"):
        stream.load_state_dict({"epoch": 0})
