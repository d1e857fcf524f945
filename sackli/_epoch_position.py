"""`epoch_position`: where a run is in its epoch, from the states its
`EpochStream` workers saved, as a position that any layout (number of
workers, world size, batch size) resumes exactly.

Each worker's state says how the epoch's order was dealt (`layout`) and how
far that worker's stream got, so the records the workers have read are
known exactly. They form a prefix of the epoch's order when the deal is by
batches of the loader's size (see `shard_indices`); anything else is
refused with a ValueError that says why, never turned into a guess.
"""

from __future__ import annotations

import operator
from typing import Any, Iterator

from ._epoch_stream import DEAL_KEYS, ORDER_KEYS
from ._shard_indices import dealt_length, share_positions

__all__ = ["epoch_position"]

# torchdata's StatefulDataLoader: batches yielded since its last snapshot of
# the workers' states (with snapshot_every_n_steps > 1), replayed on resume.
_STEPS_SINCE_SNAPSHOT = "_steps_since_snapshot"


def _is_worker_state(value: Any) -> bool:
    return (isinstance(value, dict) and {"epoch", "consumed", "stream"} <= set(value)
            and isinstance(value.get("layout"), dict)
            and set(ORDER_KEYS + DEAL_KEYS) <= set(value["layout"]))


def _walk(value: Any, found: list[dict[str, Any]], extra: list[int]) -> None:
    """Collects the EpochStream worker states (and torchdata's steps since
    its snapshot) anywhere in a checkpoint."""
    if _is_worker_state(value):
        found.append(value)
    elif isinstance(value, dict):
        steps = value.get(_STEPS_SINCE_SNAPSHOT)
        if isinstance(steps, int) and not isinstance(steps, bool):
            extra.append(steps)
        for item in value.values():
            _walk(item, found, extra)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, found, extra)


def _by_worker(states: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The state of each worker of one rank, checked to be of one run,
    epoch and layout, and complete."""
    layout, first = states[0]["layout"], states[0]
    rank, num_workers = layout["rank"], layout["num_workers"]
    by_worker: dict[int, dict[str, Any]] = {}
    for state in states:
        theirs = state["layout"]
        differ = [key for key in ORDER_KEYS + DEAL_KEYS if key != "worker"
                  and theirs[key] != layout[key]]
        if differ or (state["epoch"], state["consumed"]) != (first["epoch"], first["consumed"]):
            raise ValueError(
                f"the states of rank {rank} are of different runs or epochs (they differ in "
                + ", ".join(differ or ["epoch or consumed"]) + "): give one run's checkpoint")
        if by_worker.setdefault(theirs["worker"], state)["stream"] != state["stream"]:
            raise ValueError(f"two states of loader worker {theirs['worker']} of rank {rank} "
                             "are at different points: give each rank's checkpoint once")
    missing = sorted(set(range(num_workers)) - set(by_worker))
    if missing:
        raise ValueError(
            f"the states of loader worker(s) {missing} of rank {rank} (of {num_workers}) are "
            "missing: give the whole loader state of each rank")
    return by_worker


def _one_rank(states: list[dict[str, Any]], extra_steps: int) -> tuple[dict[str, Any], int]:
    """(the shared layout, the steps the rank has taken) from the states of
    all workers of one rank: what they read must be the rank's first steps."""
    try:
        import numpy as np
    except ImportError:
        raise ImportError("sackli.epoch_position needs numpy: pip install numpy") from None
    by_worker = _by_worker(states)
    layout = states[0]["layout"]
    rank, num_workers, batch = layout["rank"], layout["num_workers"], layout["batch_size"]
    epoch, consumed = operator.index(states[0]["epoch"]), operator.index(states[0]["consumed"])
    remaining = max(0, layout["num_records"] - consumed)
    deal = {key: layout[key] for key in ("world_size", "batch_size", "drop_remainder")}
    taken = []
    for worker in range(num_workers):
        stream = by_worker[worker]["stream"]
        count = 0 if stream is None else operator.index(stream["position"])
        share = share_positions(np, remaining, rank=rank, worker_id=worker,
                                num_workers=num_workers, **deal)
        if stream is not None and stream.get("indices") not in (None, len(share)):
            raise ValueError(
                f"the stream of worker {worker} of rank {rank} read {stream['indices']} "
                f"indices, not the {len(share)} of its share: a state of another source")
        if count > len(share):
            raise ValueError(f"worker {worker} of rank {rank} is at {count} records, "
                             f"beyond its share of {len(share)}")
        taken.append(share[:count])
    # The rank's positions in step order are increasing: its steps are rounds.
    mine = share_positions(np, remaining, rank=rank, worker_id=0, num_workers=1, **deal)
    read = np.sort(np.concatenate(taken))
    if not np.array_equal(read, mine[:len(read)]):
        counts = ", ".join(f"worker {w} {len(t)}" for w, t in enumerate(taken))
        raise ValueError(
            f"the workers of rank {rank} have read records that are not its first steps "
            f"(records read: {counts}; the deal is by batches of {batch}), so no position "
            "resumes them exactly. Give EpochStream(batch_size=...) the loader's batch "
            "size, so that every step is a whole batch of one worker")
    if len(read) == len(mine):
        steps = -(-len(mine) // batch)  # the epoch is done
    elif len(read) % batch:
        raise ValueError(
            f"rank {rank} stopped after {len(read) % batch} of the {batch} records of a "
            "batch, and a position must fall between steps: checkpoint between batches (a "
            "data loader's state does), or give EpochStream the batch size it is read in")
    else:
        steps = len(read) // batch
    return {**layout, "epoch": epoch, "consumed": consumed}, steps + extra_steps


def epoch_position(*checkpoints: Any) -> dict[str, Any]:
    """The position of a run in its epoch, from its `EpochStream` states, as
    a state that `EpochStream.load_state_dict` loads in any layout: another
    number of loader workers, world size or batch size. Nothing read is read
    again and nothing is missed.

    Each checkpoint holds the states of the `EpochStream` workers of one
    rank: a torchdata `StatefulDataLoader.state_dict()` (its workers'
    states are found inside it, with the steps it took since its last
    snapshot), an `EpochStream.state_dict()`, or a list or dict of these.
    Give one rank's checkpoint (the ranks of synchronous training are in
    lockstep, so one rank's steps are every rank's) or those of all ranks,
    which are then checked to be at the same step.

    The workers' records make an exact position when the `EpochStream` was
    given the loader's `batch_size`: after k steps, the ranks have read the
    first `world_size * k * batch_size` records of the epoch's order.
    ValueError, saying why, when they are not a prefix of the order: a
    stream dealt record by record under a loader of bigger batches (at a
    step that is not a whole round of workers), a rank stopped inside a
    batch, ranks at different steps, states of different runs or epochs,
    or a worker's state missing.

    Returns:
      `{"epoch": e, "consumed": K, "stream": None, "layout": {...}}`, where
      K counts the records of the epoch's order read so far (the number of
      records when the epoch is done); `layout` holds `num_records`, `seed`
      and `shuffle`, which the stream that loads it must share.

    Example:
      >>> position = sackli.epoch_position(checkpoint["loader"])
      >>> dataset.load_state_dict(position)  # a new loader, any layout
    """
    ranks: dict[int, tuple[dict[str, Any], int]] = {}
    for checkpoint in checkpoints:
        found: list[dict[str, Any]] = []
        extra: list[int] = []
        _walk(checkpoint, found, extra)
        if not found:
            raise ValueError(
                "no sackli.EpochStream state in this checkpoint: give the loader's "
                "state_dict() (torchdata's StatefulDataLoader) or EpochStream.state_dict()s, "
                "saved by this version of sackli")
        by_rank: dict[int, list[dict[str, Any]]] = {}
        for state in found:
            by_rank.setdefault(state["layout"]["rank"], []).append(state)
        if len(by_rank) > 1 and extra:
            raise ValueError("give each rank's loader state as its own checkpoint")
        for rank, states in by_rank.items():
            if rank in ranks:
                raise ValueError(f"two checkpoints hold the states of rank {rank}")
            ranks[rank] = _one_rank(states, sum(extra))
    if not ranks:
        raise ValueError("epoch_position needs at least one checkpoint")
    layouts = {rank: layout for rank, (layout, _) in ranks.items()}
    first = next(iter(layouts.values()))
    shared = ORDER_KEYS + ("epoch", "consumed", "world_size", "batch_size", "drop_remainder")
    for rank, layout in layouts.items():
        differ = [key for key in shared if layout[key] != first[key]]
        if differ:
            raise ValueError(f"the states of rank {rank} are of another run or epoch than "
                             f"rank {first['rank']}'s (they differ in {', '.join(differ)})")
    steps = {rank: count for rank, (_, count) in ranks.items()}
    if len(set(steps.values())) > 1:
        raise ValueError(
            "the ranks are at different steps (" + ", ".join(
                f"rank {rank} after {count}" for rank, count in sorted(steps.items()))
            + "): an exact position needs ranks in lockstep, as synchronous training is")
    step = next(iter(steps.values()))
    num_records, consumed = first["num_records"], first["consumed"]
    world_size, batch = first["world_size"], first["batch_size"]
    per_rank = dealt_length(max(0, num_records - consumed), world_size,
                            first["drop_remainder"]) // world_size
    if step >= -(-per_rank // batch):
        consumed = max(consumed, num_records)  # the epoch is done
    else:
        consumed += step * world_size * batch
    return {"epoch": first["epoch"], "consumed": consumed, "stream": None,
            "layout": {key: first[key] for key in ORDER_KEYS}}
