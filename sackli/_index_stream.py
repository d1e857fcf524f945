"""`IndexStream`: an iterator over the items at a sequence of indices that
knows how far it got, so a checkpoint can hold its position.

`Reader.read_indices_iter` and the dataset readers' `read_indices_iter`
return one. It is an `itertools.chain` over the read-ahead batches, so
producing an item stays a C-level step: Python code runs once per batch,
and the position is worked out only when asked for (the batch's list
iterator knows how many items it has left).
"""

from __future__ import annotations

import itertools
import operator
import zlib
from typing import Any, Callable, Iterable, Iterator

__all__ = ["IndexStream"]

# Reads the items at some indices in batches: (indices, on_skip) -> batches,
# each a list (the fast path) or another iterable (an error path, read one
# by one). on_skip, when given, is called for each index left out.
BatchReader = Callable[[Iterable[Any], Any], Iterator[Iterable[Any]]]

# Indices sampled (evenly spaced) for a stream's fingerprint.
_FINGERPRINT_SAMPLES = 64


class _Progress:
    """How far a stream got: `done` indices before the current list batch,
    whose iterator and length are `batch` and `batch_length`."""

    __slots__ = ("done", "batch", "batch_length", "started")

    def __init__(self) -> None:
        self.done = 0
        self.batch: Any = None
        self.batch_length = 0
        self.started = False

    def position(self) -> int:
        if self.batch is None:
            return self.done
        return self.done + self.batch_length - self.batch.__length_hint__()


def _is_sequence(indices: Any) -> bool:
    """Whether `indices` can be measured and sliced (list, tuple, range,
    one-dimensional numpy array), so a stream can check and skip it."""
    if isinstance(indices, (list, tuple, range)):
        return True
    return getattr(indices, "ndim", None) == 1 and hasattr(indices, "__len__")


def _fingerprint(indices: Any, num_items: int) -> int:
    """A cheap checksum of a sequence of indices: its length, some evenly
    spaced entries and the size of what they index."""
    count = len(indices)
    step = max(1, count // _FINGERPRINT_SAMPLES)
    sample = [_entry(indices[i]) for i in range(0, count, step)]
    if count:
        sample.append(_entry(indices[count - 1]))
    return zlib.crc32(repr((num_items, count, sample)).encode())


def _entry(index: Any) -> Any:
    """An index as an int (the same for list and numpy entries); a bad one
    as it is (it raises at its position when read, not here)."""
    try:
        return operator.index(index)
    except TypeError:
        return repr(index)


def _counted(items: Iterable[Any], progress: _Progress) -> Iterator[Any]:
    for item in items:
        progress.done += 1
        yield item


def _batches(progress: _Progress, indices: Any, read: BatchReader, on_skip: Any) -> Iterator[Any]:
    """The batches of the stream, from its position on, keeping `progress`."""
    progress.started = True
    if progress.done:
        if _is_sequence(indices):
            indices = indices[progress.done:]
        else:
            indices = itertools.islice(indices, progress.done, None)
    def counting_skips(skipped: Any) -> Any:
        progress.done += 1
        return on_skip(skipped)

    for batch in read(indices, None if on_skip is None else counting_skips):
        progress.done = progress.position()
        if type(batch) is list:
            progress.batch, progress.batch_length = iter(batch), len(batch)
            yield progress.batch
        else:
            progress.batch, progress.batch_length = None, 0
            yield _counted(batch, progress)


class IndexStream(itertools.chain):
    """An iterator over the records (or datapoints) at a sequence of indices,
    read ahead, that can say how far it got: `state_dict()` gives its
    position as a small dict, and `load_state_dict(state)` makes a new
    stream over the same indices continue after that position.

    `Reader.read_indices_iter` and the dataset readers' `read_indices_iter`
    return one. Example:

      >>> stream = reader.read_indices_iter(indices)
      >>> first = [next(stream) for _ in range(100)]
      >>> state = stream.state_dict()     # {"position": 100, ...}
      >>> later = reader.read_indices_iter(indices)
      >>> later.load_state_dict(state)   # continues with the 101st
    """

    __module__ = "sackli"
    _progress: _Progress
    _indices: Any
    _count: int | None
    _fingerprint: int | None

    @classmethod
    def over(cls, indices: Iterable[Any], num_items: int, read: BatchReader,
             on_skip: Any = None) -> "IndexStream":
        """The stream of the items at `indices` (of a source of `num_items`),
        read in batches by `read`."""
        measured = _is_sequence(indices)
        if not measured:
            indices = iter(indices)  # a TypeError here, not at the first next()
        progress = _Progress()
        stream = cls.from_iterable(_batches(progress, indices, read, on_skip))
        stream._progress = progress
        stream._indices = indices
        if measured:
            stream._count, stream._fingerprint = len(indices), _fingerprint(indices, num_items)
        else:
            stream._count = stream._fingerprint = None
        return stream

    @property
    def position(self) -> int:
        """How many indices the stream has consumed: items it returned, and
        records `skip_corrupt` left out."""
        return self._progress.position()

    def state_dict(self) -> dict[str, Any]:
        """The stream's position, as a small dict of ints: `position` (as
        the property), and `indices` and `fingerprint`, which let
        `load_state_dict` tell a state of another stream (None when the
        indices are an iterator, which cannot be measured)."""
        return {"position": self.position, "indices": self._count,
                "fingerprint": self._fingerprint}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continues after `state["position"]` indices (a `state_dict()` of
        a stream over the same indices of the same source).

        Only a stream that has not yet returned an item can be moved (a
        state is for a new stream made on resuming); loading the position it
        already has is allowed. ValueError for a state of another stream,
        a stream already started, or a position beyond the indices.
        """
        if not isinstance(state, dict) or "position" not in state:
            raise TypeError(f"a stream's state is the dict state_dict() returns, not {state!r}")
        try:
            position = operator.index(state["position"])
        except TypeError:
            raise TypeError(f"a stream's position is an int, not {state['position']!r}") from None
        if position < 0:
            raise ValueError(f"a stream's position must be >= 0, not {position}")
        theirs = (state.get("indices"), state.get("fingerprint"))
        if theirs != (self._count, self._fingerprint):
            raise ValueError(
                f"this state is of another stream ({theirs[0]} indices, fingerprint "
                f"{theirs[1]}), not of this one ({self._count} indices, fingerprint "
                f"{self._fingerprint}): make the stream over the same indices of the same source")
        if self._count is not None and position > self._count:
            raise ValueError(f"position {position} is beyond this stream's {self._count} indices")
        progress = self._progress
        if position == progress.position():
            return
        if progress.started:
            raise ValueError(
                "load a state into a new stream, before its first item: this one is at "
                f"position {progress.position()}")
        progress.done = position

    def __reduce__(self) -> Any:
        raise TypeError("a sackli stream cannot be pickled: save its state_dict() instead")

    def __repr__(self) -> str:
        total = "?" if self._count is None else self._count
        return f"<sackli stream at {self.position} of {total} indices>"
