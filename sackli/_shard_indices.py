"""`shard_indices`: which records one data-loading worker reads in an epoch.

Distributed training runs `world_size` processes (ranks), each with
`num_workers` loader workers; every (rank, worker) pair must read its own
part of the data, and every epoch should see the records in a new order that
is the same on every machine and after a restart. `shard_indices` computes
that part from nothing but numbers, so each worker can call it on its own.
"""

from __future__ import annotations

import operator
from typing import Any

__all__ = ["shard_indices"]


def _permutation(np: Any, num_records: int, seed: int, epoch: int) -> Any:
    """A permutation of range(num_records) that depends only on (seed, epoch).

    It sorts by PCG64's raw 64-bit outputs, whose stream numpy keeps stable
    across versions and platforms (unlike Generator.permutation's algorithm),
    with a stable sort, so ties cannot make it vary.
    """
    bits = np.random.PCG64(np.random.SeedSequence([seed, epoch]))
    keys = bits.random_raw(num_records)
    return np.argsort(keys, kind="stable")


def shard_indices(
    num_records: int,
    *,
    epoch: int = 0,
    seed: int = 0,
    shuffle: bool = True,
    rank: int = 0,
    world_size: int = 1,
    worker_id: int = 0,
    num_workers: int = 1,
    drop_remainder: bool = False,
    consumed: int = 0,
    batch_size: int = 1,
) -> Any:
    """The record indices that worker `worker_id` of rank `rank` reads in `epoch`.

    The records are put in one order for the epoch (a permutation seeded by
    `(seed, epoch)` when `shuffle`, else 0, 1, 2...), and that order is dealt
    out a batch of `batch_size` at a time: the first batch to rank 0, the
    next to rank 1, and so on round the ranks, and each rank's batches (its
    steps) to its `num_workers` workers in turn, as a data loader takes
    batches from its workers. So the shares of all (rank, worker) pairs are
    disjoint and together hold every record once; after k steps of every
    rank, what the ranks have read is the first
    `k * world_size * batch_size` entries of the order, whatever the number
    of workers. The result depends only on the arguments: the same on every
    machine, run and restart. With `batch_size=1` (the default) this is
    record by record round-robin, to ranks and then to workers.

    Every rank gets the same number of indices, so that all ranks run the same
    number of steps: with `drop_remainder=False` (the default) ranks whose
    share is one short repeat records from the start of the epoch's order (as
    PyTorch's DistributedSampler does); with `drop_remainder=True` the last
    `num_records % world_size` records of the order are left out instead.
    Each rank's last step may be a short batch (an equal part of what the
    last round leaves). Workers of one rank may differ by a batch (a data
    loader merges them).

    Resuming mid-epoch, also with another world size: `consumed=K` says that
    the ranks have together read the first K indices of the epoch's order,
    which is what ranks reading their shares in lockstep (as synchronous
    data-parallel training does) have done after K / world_size indices
    each. The rest of the order, from its K-th entry on, is then dealt out
    as above to the `world_size` ranks given now (which may be more or fewer
    than before) and their workers, so together they read each remaining
    record once, and every rank the same count. The repeats of
    `drop_remainder=False` come from the start of the remaining order; with
    `drop_remainder=True`, the last `(num_records - K) % world_size` records
    of the order are left out. K always counts from the start of the epoch,
    however many resumes came before; K >= num_records leaves nothing.
    `consumed=0` is the whole epoch.

    Under a data loader, give `batch_size` the loader's batch size: then
    after k steps of every rank, K = world_size * k * batch_size exactly, at
    any step and with any number of workers (`sackli.epoch_position`
    works it out from the loaders' states; docs/loaders.md, "Elastic
    resumes"). A resume may use another batch size: K counts records.

    Args:
      num_records: the number of records, e.g. `len(reader)`.
      epoch: the epoch number; each gives a new order when `shuffle`.
      seed: the seed shared by every rank and worker of a run.
      shuffle: whether to permute the records (else in index order).
      rank: this process among the training processes (e.g.
        `torch.distributed.get_rank()`).
      world_size: the number of training processes (e.g.
        `torch.distributed.get_world_size()`).
      worker_id: this loader worker among its rank's workers (e.g.
        `torch.utils.data.get_worker_info()`'s `id`).
      num_workers: the number of loader workers of each rank (e.g.
        `torch.utils.data.get_worker_info()`'s `num_workers`).
      drop_remainder: leave records out rather than repeat some (see above).
      consumed: how many indices of the epoch's order all ranks together
        have read already (see above); 0 for the start of the epoch.
      batch_size: how many indices of the order a rank takes per step (its
        data loader's batch size), the unit of the deal (see above).

    Returns:
      A one-dimensional numpy int64 array, for `reader.read_indices`,
      `reader[indices]` or `reader.read_indices_iter`.

    Memory: the epoch's order is built whole, 16 bytes per record while it
    is computed (1.6 GB for 10^8 records, in each worker that calls this).

    Example:
      >>> reader = sackli.Reader("train@*.bagz")
      >>> mine = sackli.shard_indices(len(reader), epoch=3, seed=42, rank=1,
      ...                             world_size=4, worker_id=0, num_workers=2)
      >>> for record in reader.read_indices_iter(mine): ...
    """
    try:
        import numpy as np
    except ImportError:
        raise ImportError("sackli.shard_indices needs numpy: pip install numpy") from None
    num_records, epoch, seed = (operator.index(v) for v in (num_records, epoch, seed))
    consumed, batch_size = operator.index(consumed), operator.index(batch_size)
    rank, world_size = operator.index(rank), operator.index(world_size)
    worker_id, num_workers = operator.index(worker_id), operator.index(num_workers)
    if num_records < 0:
        raise ValueError(f"num_records must be >= 0, not {num_records}")
    if epoch < 0 or seed < 0:
        raise ValueError(f"epoch and seed must be >= 0, not {epoch} and {seed}")
    if consumed < 0:
        raise ValueError(f"consumed must be >= 0, not {consumed}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), not {rank}")
    if not 0 <= worker_id < num_workers:
        raise ValueError(f"worker_id must be in [0, num_workers={num_workers}), not {worker_id}")

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")

    if shuffle:
        order = _permutation(np, num_records, seed, epoch)
    else:
        order = np.arange(num_records, dtype=np.int64)
    remaining = max(0, num_records - consumed)
    positions = share_positions(np, remaining, rank=rank, world_size=world_size,
                                worker_id=worker_id, num_workers=num_workers,
                                batch_size=batch_size, drop_remainder=drop_remainder)
    if not remaining:
        return np.zeros(0, dtype=np.int64)
    # Positions past the remaining order are the repeats, from its start.
    return np.ascontiguousarray(order[consumed + positions % remaining], dtype=np.int64)


def dealt_length(remaining: int, world_size: int, drop_remainder: bool) -> int:
    """How many positions of the `remaining` order the ranks read together:
    a multiple of `world_size`, by repeats or by leaving a remainder out."""
    if drop_remainder:
        return remaining - remaining % world_size
    return -(-remaining // world_size) * world_size


def share_positions(np: Any, remaining: int, *, rank: int, world_size: int, worker_id: int,
                    num_workers: int, batch_size: int, drop_remainder: bool) -> Any:
    """The positions in the remaining order (0 is its first entry; those past
    its end are the repeats) that one (rank, worker) pair reads, in order.

    The deal: rank r's step s is the batch at positions
    `(s * world_size + r) * batch_size` onwards, so the ranks' first k steps
    are the first `k * world_size * batch_size` positions; the last step of
    every rank is one short batch of an equal share of what is left. The
    steps of a rank go to its workers in turn (step s to worker
    s % num_workers), as a data loader takes batches from its workers.
    """
    per_rank = dealt_length(remaining, world_size, drop_remainder) // world_size
    full, tail = divmod(per_rank, batch_size)
    round_size = world_size * batch_size
    steps = np.arange(worker_id, full, num_workers, dtype=np.int64)
    starts = steps * round_size + rank * batch_size
    positions = (starts[:, None] + np.arange(batch_size, dtype=np.int64)[None, :]).ravel()
    if tail and full % num_workers == worker_id:
        start = full * round_size + rank * tail
        positions = np.concatenate([positions, np.arange(start, start + tail, dtype=np.int64)])
    return positions
