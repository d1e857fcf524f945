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
