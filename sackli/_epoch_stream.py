"""`EpochStream`: a ready iterable dataset over a reader, an epoch at a
time, that data loaders can checkpoint.

It works out which indices this rank and loader worker read (with
`shard_indices`) and reads them with `read_indices_iter`; its position is
a small dict (`state_dict`). It needs no framework: it reads PyTorch's
distributed rank and loader worker only from a torch that the program has
already imported, and never imports torch itself.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Callable, Iterator

from ._loader_cache import with_loader_cache
from ._shard_indices import shard_indices

__all__ = ["EpochStream"]

_STATE_KEYS = {"epoch", "consumed", "stream"}
# A state's layout: what decides the epoch's order, then how it is dealt.
ORDER_KEYS = ("num_records", "seed", "shuffle")
DEAL_KEYS = ("drop_remainder", "world_size", "rank", "num_workers", "worker", "batch_size")


def _distributed() -> tuple[int, int] | None:
    """(rank, world size) of an initialised torch.distributed, else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_rank(), dist.get_world_size()


def _worker() -> tuple[int, int]:
    """(id, count) of the PyTorch loader worker this runs in; (0, 1) outside one."""
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    return (0, 1) if info is None else (info.id, info.num_workers)


class _Transformed(map):
    """A stream with a function applied to each item: `map` (a C-level
    step per item) that still gives and takes the stream's state."""

    def __new__(cls, function: Callable[[Any], Any], stream: Any) -> "_Transformed":
        self = super().__new__(cls, function, stream)
        self._stream = stream
        return self

    def state_dict(self) -> dict[str, Any]:
        return self._stream.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._stream.load_state_dict(state)

    def __reduce__(self) -> Any:
        raise TypeError("a sackli stream cannot be pickled: save its state_dict() instead")


def _describe(layout: dict[str, Any]) -> str:
    return (f"rank {layout['rank']} of {layout['world_size']}, loader worker "
            f"{layout['worker']} of {layout['num_workers']}, batches of {layout['batch_size']}"
            + (", drop_remainder" if layout["drop_remainder"] else ""))


def _count(name: str, value: Any) -> int:
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {value!r}") from None
    if number < 0:
        raise ValueError(f"{name} must be >= 0, not {number}")
    return number


class EpochStream:
    """The records (or datapoints) this rank and loader worker read in an
    epoch, as an iterable dataset that data loaders can checkpoint.

    Each `iter()` reads this process's share of the current epoch, chosen by
    `sackli.shard_indices` (a permutation seeded by `(seed, epoch)`, dealt a
    batch at a time to ranks and then to loader workers), with
    `source.read_indices_iter`. `set_epoch(epoch, consumed=K)` moves to an
    epoch, or resumes one after its first K indices, with any world size
    (see `shard_indices`). `state_dict()` is this worker's position and
    layout as a small dict; after `load_state_dict(state)`, the next
    `iter()` continues from it exactly (later ones start their epoch
    afresh). To resume with another number of workers, world size or batch
    size, `sackli.epoch_position(loader_state)` turns the workers' states
    into a position that any layout loads.

    Rank and world size: `rank` and `world_size` when given; else those of
    `torch.distributed` when the program has imported and initialised it
    (looked up when the stream is made, at `set_epoch` and at each
    `iter()`); else 0 of 1. The loader worker: PyTorch's
    `torch.utils.data.get_worker_info()` when torch is imported; else 0 of
    1. The stream never imports torch: with PyTorch, make it an
    `IterableDataset` by mixing the two.

    Args:
      source: what to read: a `sackli.Reader`, a `sackli.datasets` reader,
        or anything with `len()` and `read_indices_iter(indices)`. A
        `sackli.Reader` of `gs://` or `s3://` files with no cache of its
        own is reopened with the user's cache folder (`stream.source`;
        `SACKLI_LOADER_CACHE=0` turns that off; docs/cache.md).
      seed: the seed shared by every rank and worker of a run.
      shuffle: a new order every epoch (else index order).
      drop_remainder: leave records out rather than repeat some so that
        every rank reads as many (see `shard_indices`).
      rank: this process among the training processes.
      world_size: the number of training processes.
      batch_size: the data loader's batch size (per rank). The epoch's
        order is dealt in batches of it, so that after k steps the ranks
        have read exactly its first `world_size * k * batch_size` records
        with any number of workers, and a checkpoint at any step resumes
        exactly in another layout. None deals record by record, which is
        exact only after whole rounds of workers (`epoch_position` refuses
        the others).
      transform: a function applied to each record (each datapoint of a
        `sackli.datasets` reader) in the loader worker, before the loader
        batches them; with `spawn` workers it must pickle (a module-level
        function). The stream's position counts the records it gave the
        function.

    Example:
      >>> class Stream(sackli.EpochStream, torch.utils.data.IterableDataset):
      ...     pass
      >>> dataset = Stream(sackli.Reader("train@*.bagz"), seed=1234, batch_size=256)
      >>> loader = torchdata.stateful_dataloader.StatefulDataLoader(
      ...     dataset, batch_size=256, num_workers=4)
      >>> for epoch in range(10):
      ...     dataset.set_epoch(epoch)
      ...     for batch in loader: ...
    """

    def __init__(self, source: Any, *, seed: int = 0, shuffle: bool = True,
                 drop_remainder: bool = False, rank: int | None = None,
                 world_size: int | None = None, batch_size: int | None = None,
                 transform: Callable[[Any], Any] | None = None) -> None:
        if not hasattr(source, "read_indices_iter") or not hasattr(source, "__len__"):
            raise TypeError(
                "EpochStream reads a sackli.Reader, a sackli.datasets reader or anything "
                f"with len() and read_indices_iter(), not {type(source).__name__}")
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither (torch.distributed's)")
        if rank is not None:
            rank, world_size = _count("rank", rank), _count("world_size", world_size)
            if rank >= world_size:
                raise ValueError(f"rank must be in [0, world_size={world_size}), not {rank}")
        if batch_size is not None and _count("batch_size", batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, not {batch_size}")
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be a function of a record, not {transform!r}")
        # A remote Reader with no cache gets the user's (docs/cache.md).
        self.source = with_loader_cache(source)
        self.seed = _count("seed", seed)
        self.shuffle, self.drop_remainder = bool(shuffle), bool(drop_remainder)
        self.batch_size = None if batch_size is None else operator.index(batch_size)
        self.transform = transform
        self._explicit = rank is not None
        self._rank, self._world_size = (rank, world_size) if rank is not None else (0, 1)
        self._epoch = self._consumed = 0
        self._stream: Any = None   # the stream the last iter() gave, in this process
        self._loaded: Any = None   # a loaded stream state, for the next iter()
        self._loaded_layout: Any = None  # the layout of the state loaded
        self._update_world()

    def _update_world(self) -> None:
        if not self._explicit:
            self._rank, self._world_size = _distributed() or (self._rank, self._world_size)

    @property
    def epoch(self) -> int:
        """The epoch the next `iter()` reads."""
        return self._epoch

    @property
    def consumed(self) -> int:
        """How many indices of the epoch's order all ranks had read before
        this epoch's streams started (see `set_epoch`)."""
        return self._consumed

    def set_epoch(self, epoch: int, consumed: int = 0) -> None:
        """Reads `epoch` from the next `iter()` on, skipping the first
        `consumed` indices of its order, which all ranks together have read
        (for a resume with another world size; `sackli.epoch_position`
        works it out from checkpoints). Call it before each epoch, as with
        PyTorch's `DistributedSampler`. It drops a state loaded and not yet
        used."""
        self._epoch, self._consumed = _count("epoch", epoch), _count("consumed", consumed)
        self._stream = self._loaded = self._loaded_layout = None
        self._update_world()

    def _layout(self) -> dict[str, Any]:
        """How this process's share is dealt: the order, then the deal."""
        worker_id, num_workers = _worker()
        return {"num_records": len(self.source), "seed": self.seed, "shuffle": self.shuffle,
                "drop_remainder": self.drop_remainder, "world_size": self._world_size,
                "rank": self._rank, "num_workers": num_workers, "worker": worker_id,
                "batch_size": self.batch_size or 1}

    def indices(self) -> Any:
        """The indices this rank and loader worker read in the current
        epoch (after `consumed`), a numpy int64 array."""
        self._update_world()
        worker_id, num_workers = _worker()
        return shard_indices(
            len(self.source), epoch=self._epoch, seed=self.seed, shuffle=self.shuffle,
            rank=self._rank, world_size=self._world_size, worker_id=worker_id,
            num_workers=num_workers, drop_remainder=self.drop_remainder,
            consumed=self._consumed, batch_size=self.batch_size or 1)

    def __iter__(self) -> Iterator[Any]:
        stream = self.source.read_indices_iter(self.indices())
        if self._loaded is not None:
            self._check_deal()
            try:
                stream.load_state_dict(self._loaded)
            except ValueError as error:
                raise ValueError(
                    f"the loaded state is of another share of epoch {self._epoch} than this "
                    f"one ({_describe(self._layout())}): a worker's state resumes the same "
                    "seed, world size, rank, workers and batch size; for another, resume "
                    "from sackli.epoch_position(states) (or set_epoch(epoch, consumed=K)) "
                    f"({error})") from None
        self._loaded = self._loaded_layout = None
        self._stream = stream
        return stream if self.transform is None else _Transformed(self.transform, stream)

    def _check_deal(self) -> None:
        """ValueError unless the loaded state was dealt as this stream is."""
        theirs, mine = self._loaded_layout, self._layout()
        if theirs is None or all(theirs[key] == mine[key] for key in DEAL_KEYS):
            return
        raise ValueError(
            f"the loaded state is of another share of epoch {self._epoch} "
            f"({_describe(theirs)}) than this one ({_describe(mine)}): a worker's state "
            "resumes the same layout; for another, load sackli.epoch_position(states), "
            "the position of all the workers' states (or set_epoch(epoch, consumed=K))")

    def state_dict(self) -> dict[str, Any]:
        """Where this rank and worker are, a small dict of ints and bools:
        `epoch`, `consumed` (as the property), `stream` (the position of the
        stream the last `iter()` returned; None before the first) and
        `layout` (the epoch's order and how it is dealt: `num_records`,
        `seed`, `shuffle`, `drop_remainder`, `world_size`, `rank`,
        `num_workers`, `worker`, `batch_size`), from which
        `sackli.epoch_position` works out what all workers have read."""
        if self._stream is not None:
            stream, layout = self._stream.state_dict(), self._layout()
        else:  # a loaded state not yet used is still where this worker is
            stream, layout = self._loaded, self._loaded_layout or self._layout()
        return {"epoch": self._epoch, "consumed": self._consumed, "stream": stream,
                "layout": layout}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continues from `state`: a `state_dict()` of the same source and
        seed (the next `iter()` continues where that worker's stream stopped;
        it needs the same layout), or a position from
        `sackli.epoch_position` (any layout; like `set_epoch(epoch,
        consumed=K)`, it holds until the next `set_epoch`). ValueError for
        a state of another order (records, seed or shuffle) or, at
        `iter()`, a worker's state of another layout."""
        if not isinstance(state, dict) or not _STATE_KEYS <= set(state) <= _STATE_KEYS | {"layout"}:
            raise TypeError(f"an EpochStream's state is the dict state_dict() returns, not {state!r}")
        epoch, consumed = _count("epoch", state["epoch"]), _count("consumed", state["consumed"])
        if state["stream"] is not None and not isinstance(state["stream"], dict):
            raise TypeError(f"a stream's state is a dict, not {state['stream']!r}")
        layout = state.get("layout")
        if layout is not None:
            if not isinstance(layout, dict) or not set(ORDER_KEYS) <= set(layout):
                raise TypeError(f"a state's layout is the dict state_dict() gives, not {layout!r}")
            mine = self._layout()
            differ = [f"{key} {layout[key]!r}, not {mine[key]!r}"
                      for key in ORDER_KEYS if layout[key] != mine[key]]
            if differ:
                raise ValueError(
                    "this state is of another epoch order (" + "; ".join(differ) + "): "
                    "resume with the same source, seed and shuffle")
            if state["stream"] is not None and not set(DEAL_KEYS) <= set(layout):
                raise TypeError(f"a worker's state has its whole layout, not {layout!r}")
        self._epoch, self._consumed = epoch, consumed
        self._loaded, self._stream = state["stream"], None
        self._loaded_layout = layout if state["stream"] is not None else None

    def __getstate__(self) -> dict[str, Any]:
        # A copy (a loader worker's) starts its own streams: the one this
        # process is reading stays here.
        return {**self.__dict__, "_stream": None}

    def __repr__(self) -> str:
        batches = "" if self.batch_size is None else f", batches of {self.batch_size}"
        return (f"<sackli.EpochStream epoch {self._epoch} (consumed {self._consumed}) of "
                f"{len(self.source)} records, rank {self._rank} of {self._world_size}"
                f"{batches}>")
