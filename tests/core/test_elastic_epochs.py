"""`shard_indices(..., consumed=K)`: resuming an epoch after its first K
indices, also with another world size: every remaining record is read once
and every rank reads as many."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import sackli


def _shares(n, world_size, num_workers, **kwargs):
    """{(rank, worker): indices} of the whole world."""
    return {(rank, worker): sackli.shard_indices(
                n, rank=rank, world_size=world_size, worker_id=worker, num_workers=num_workers,
                **kwargs).tolist()
            for rank in range(world_size) for worker in range(num_workers)}


def _loader_takes(shares, world_size, num_workers, batch, rounds):
    """What a PyTorch-style loader on every rank took in `rounds` rounds of a
    batch per worker (its workers in turn), and K, the indices consumed."""
    taken = []
    for rank in range(world_size):
        for worker in range(num_workers):
            taken += shares[rank, worker][: rounds * batch]
    return taken, world_size * rounds * num_workers * batch


def _check_rest(n, consumed, rest_shares, world_size, drop_remainder):
    """The shares after `consumed` (a list of what ranks read) hold every
    record left once (drop_remainder: less a remainder; else repeating only
    remaining records), and every rank as many."""
    rest = [i for share in rest_shares.values() for i in share]
    left = set(range(n)) - set(consumed)
    per_rank = collections.Counter()
    for (rank, _), share in rest_shares.items():
        per_rank[rank] += len(share)
    assert len(set(per_rank.values())) <= 1
    if drop_remainder:
        assert len(rest) == len(set(rest)) and set(rest) <= left
        assert len(rest) == len(left) - len(left) % world_size
    else:
        assert set(rest) == left
        assert len(rest) == -(-len(left) // world_size) * world_size


worlds = st.integers(1, 5)


def _rounds(shares, batch):
    """The most whole rounds (a batch from every worker) the shares hold."""
    return min(len(share) for share in shares.values()) // batch


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 300), w1=worlds, w2=worlds, w3=worlds, workers=st.integers(1, 3),
       batch=st.integers(1, 4), shuffle=st.booleans(), drop_remainder=st.booleans(),
       data=st.data())
def test_loader_resumes_in_other_worlds_read_each_record_once(
        n, w1, w2, w3, workers, batch, shuffle, drop_remainder, data) -> None:
    common = {"epoch": 3, "seed": 11, "shuffle": shuffle, "drop_remainder": drop_remainder}
    shares = _shares(n, w1, workers, **common)
    rounds = data.draw(st.integers(0, _rounds(shares, batch)), "rounds")
    consumed, k = _loader_takes(shares, w1, workers, batch, rounds)
    # Lockstep ranks took a prefix of the epoch's (padded) order.
    ranks = _shares(n, w1, 1, **common)
    padded = [ranks[rank, 0][j] for j in range(len(ranks[0, 0])) for rank in range(w1)]
    assert sorted(consumed) == sorted(padded[:k])
    resumed = _shares(n, w2, workers, consumed=k, **common)
    _check_rest(n, consumed, resumed, w2, drop_remainder)

    # A second resume counts from the start of the epoch too.
    more_rounds = data.draw(st.integers(0, _rounds(resumed, batch)), "more rounds")
    more, k2 = _loader_takes(resumed, w2, workers, batch, more_rounds)
    _check_rest(n, consumed + more, _shares(n, w3, workers, consumed=k + k2, **common),
                w3, drop_remainder)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 200), k=st.integers(0, 250), world_size=worlds,
       workers=st.integers(1, 3), shuffle=st.booleans(), drop_remainder=st.booleans())
def test_any_k_skips_that_prefix_of_the_epochs_order(
        n, k, world_size, workers, shuffle, drop_remainder) -> None:
    common = {"epoch": 1, "seed": 2, "shuffle": shuffle, "drop_remainder": drop_remainder}
    order = sackli.shard_indices(n, **{**common, "drop_remainder": False}).tolist()
    shares = _shares(n, world_size, workers, consumed=k, **common)
    rest = order[k:]
    if drop_remainder:
        rest = rest[: len(rest) - len(rest) % world_size]
    else:  # repeated from its start (cyclically, when fewer than the ranks)
        rest = (rest * world_size)[: -(-len(rest) // world_size) * world_size]
    # Dealt round-robin to ranks, then to workers, as at the epoch's start.
    for (rank, worker), share in shares.items():
        assert share == rest[rank::world_size][worker::workers]


def test_consumed_zero_is_the_whole_epoch() -> None:
    for rank in range(3):
        kwargs = {"epoch": 2, "seed": 4, "rank": rank, "world_size": 3, "worker_id": 1,
                  "num_workers": 2}
        assert (sackli.shard_indices(101, consumed=0, **kwargs).tolist()
                == sackli.shard_indices(101, **kwargs).tolist())


def test_a_resume_with_more_ranks() -> None:
    """Two ranks read 3 records each of 10 (in index order); four ranks share the 4 left."""
    shares = _shares(10, 4, 1, shuffle=False, consumed=6)
    assert [shares[rank, 0] for rank in range(4)] == [[6], [7], [8], [9]]
    shares = _shares(10, 3, 1, shuffle=False, consumed=6)
    assert [shares[rank, 0] for rank in range(3)] == [[6, 9], [7, 6], [8, 7]]
    shares = _shares(10, 3, 1, shuffle=False, consumed=6, drop_remainder=True)
    assert [shares[rank, 0] for rank in range(3)] == [[6], [7], [8]]


@pytest.mark.parametrize("k", [10, 11, 1000])
def test_nothing_is_left_after_the_epoch(k) -> None:
    mine = sackli.shard_indices(10, consumed=k, rank=1, world_size=2)
    assert mine.dtype == np.int64 and mine.tolist() == []


def test_consumed_is_checked() -> None:
    with pytest.raises(ValueError, match="consumed must be >= 0, not -1"):
        sackli.shard_indices(10, consumed=-1)
    with pytest.raises(TypeError):
        sackli.shard_indices(10, consumed=2.0)


# --- batches dealt whole, and epoch_position -----------------------------------


def _loader_world(n, consumed, world_size, num_workers, batch, steps, drop_remainder):
    """A world of PyTorch-style loaders (a batch from each worker in turn)
    over `shard_indices(..., batch_size=batch)`, each rank stopped after
    `steps` batches: (the records read, each rank's EpochStream states as
    a StatefulDataLoader would hold them)."""
    common = {"epoch": 2, "seed": 5, "drop_remainder": drop_remainder, "consumed": consumed,
              "batch_size": batch}
    read, checkpoints = [], []
    for rank in range(world_size):
        states = []
        for worker in range(num_workers):
            share = sackli.shard_indices(n, rank=rank, world_size=world_size, worker_id=worker,
                                         num_workers=num_workers, **common).tolist()
            mine = len(range(worker, steps, num_workers))  # step s is worker s % workers'
            taken = share[: mine * batch]
            read += taken
            layout = {"num_records": n, "seed": 5, "shuffle": True,
                      "drop_remainder": drop_remainder, "world_size": world_size, "rank": rank,
                      "num_workers": num_workers, "worker": worker, "batch_size": batch}
            states.append({"epoch": 2, "consumed": consumed, "layout": layout,
                           "stream": {"position": len(taken), "indices": len(share),
                                      "fingerprint": 0}})
        checkpoints.append({"_snapshot": {"_worker_snapshots": {
            f"worker_{i}": {"dataset_state": state} for i, state in enumerate(states)}}})
    return read, checkpoints


layouts = st.tuples(worlds, st.integers(1, 3), st.integers(1, 5))  # ranks, workers, batch


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 200), first=layouts, second=layouts, third=layouts,
       drop_remainder=st.booleans(), data=st.data())
def test_batches_dealt_whole_resume_exactly_at_any_step(
        n, first, second, third, drop_remainder, data) -> None:
    """Two resumes in other layouts (ranks, workers, batch size), each at
    any step: the three runs read disjoint records, all of the epoch."""
    consumed, runs = 0, []
    for world_size, workers, batch in (first, second):
        per_rank = len(sackli.shard_indices(n, world_size=world_size, consumed=consumed,
                                            drop_remainder=drop_remainder))
        steps = data.draw(st.integers(0, -(-per_rank // batch)), "steps")
        read, checkpoints = _loader_world(n, consumed, world_size, workers, batch, steps,
                                          drop_remainder)
        position = sackli.epoch_position(*checkpoints)
        assert position == sackli.epoch_position(checkpoints[-1])  # one rank suffices
        if steps == -(-per_rank // batch):
            assert position["consumed"] == max(n, consumed)  # the epoch is done
        else:
            assert position["consumed"] == consumed + world_size * steps * batch
            assert len(read) == len(set(read)) == world_size * steps * batch
        consumed = position["consumed"]
        runs.append(read)
    world_size, workers, batch = third
    rest, _ = _loader_world(n, consumed, world_size, workers, batch, 10**6, drop_remainder)
    before = runs[0] + runs[1]
    assert set(runs[0]).isdisjoint(runs[1]) and set(before).isdisjoint(rest)
    if not drop_remainder:
        assert set(before + rest) == set(range(n))


def test_batch_size_one_is_the_record_by_record_deal() -> None:
    for rank, worker in [(0, 0), (1, 2), (2, 1)]:
        kwargs = {"epoch": 1, "seed": 3, "rank": rank, "world_size": 3, "worker_id": worker,
                  "num_workers": 3}
        order = sackli.shard_indices(50, epoch=1, seed=3).tolist()
        assert (sackli.shard_indices(50, batch_size=1, **kwargs).tolist()
                == (order + order[:1])[rank::3][worker::3])


def test_a_rank_stopped_inside_a_batch_is_refused() -> None:
    """Three steps of 4 with two workers: worker 0 read steps 0 and 2 (8
    records), worker 1 step 1 (4)."""
    _, (checkpoint,) = _loader_world(40, 0, 1, 2, 4, 3, False)
    assert sackli.epoch_position(checkpoint)["consumed"] == 12
    workers = checkpoint["_snapshot"]["_worker_snapshots"]
    streams = [workers[f"worker_{i}"]["dataset_state"]["stream"] for i in range(2)]
    streams[1]["position"] = 3  # a hole in step 1
    with pytest.raises(ValueError, match="not its first steps"):
        sackli.epoch_position(checkpoint)
    streams[0]["position"], streams[1]["position"] = 5, 4  # steps 0, 1 and a record of 2
    with pytest.raises(ValueError, match="stopped after 1 of the 4 records of a batch"):
        sackli.epoch_position(checkpoint)


def test_epoch_position_refuses_what_it_cannot_place() -> None:
    _, (checkpoint,) = _loader_world(40, 0, 1, 2, 4, 3, False)
    workers = checkpoint["_snapshot"]["_worker_snapshots"]
    with pytest.raises(ValueError, match="no sackli.EpochStream state"):
        sackli.epoch_position({"dataset_state": None})
    with pytest.raises(ValueError, match=r"worker\(s\) \[1\] of rank 0 \(of 2\) are missing"):
        sackli.epoch_position(workers["worker_0"])
    other = {**workers["worker_1"]["dataset_state"], "epoch": 3}
    with pytest.raises(ValueError, match="different runs or epochs"):
        sackli.epoch_position([workers["worker_0"], other])
