"""Iterators that read ahead: batches are decoded on the engine's thread pool
while the caller consumes the previous one.

Records come out of `itertools.chain` over lists, so producing one record is
a C-level step; Python code runs once per batch.

A batch that fails (a corrupt record, a file changed under the reader) is
read again one record at a time, so the iterator yields every record before
the failing one and then raises that record's error, as `r[i]` would; with
`on_skip` (see `_skipping`), a record that does not decode is reported there
and left out instead.
"""

from __future__ import annotations

import collections
import itertools
from typing import Any, Callable, Iterable, Iterator

from ._skipping import SkipHandler, one_by_one

__all__ = ["index_batches", "iterate_range"]

# What a failing batch raises for a bad record; other errors (Ctrl-C, a bad
# index) pass through as they are.
_RECORD_ERRORS = (ValueError, OSError)

# The first batch is small so the first record arrives quickly; batches then
# double up to the full size.
_FIRST_BATCH = 16
# Batches decoded ahead of the one being consumed.
_BATCHES_AHEAD = 1


def _batch_sizes(full: int) -> Iterator[int]:
    size = min(_FIRST_BATCH, full)
    while True:
        yield size
        size = min(size * 2, full)


def iterate_range(core: Any, start: int, stop: int, batch: int, read_ahead: bool,
                  on_skip: SkipHandler | None = None) -> Iterator[bytes]:
    """Records [start, stop) of a reader core, in order."""

    def batches() -> Iterator[Iterable[bytes]]:
        sizes = _batch_sizes(batch)
        position = start
        if not read_ahead:
            while position < stop:
                n = min(next(sizes), stop - position)
                try:
                    records: Iterable[bytes] = core.read_range(position, n)
                except _RECORD_ERRORS:
                    records = one_by_one(core, range(position, position + n), on_skip)
                yield records
                position += n
            return
        pending: collections.deque = collections.deque()
        while position < stop or pending:
            while position < stop and len(pending) <= _BATCHES_AHEAD:
                n = min(next(sizes), stop - position)
                pending.append((core.start_records_range(position, n), position, n))
                position += n
            read, first, n = pending.popleft()
            try:
                records = read.result()
            except _RECORD_ERRORS:
                records = one_by_one(core, range(first, first + n), on_skip)
            yield records

    return itertools.chain.from_iterable(batches())


def _bad_index_error(core: Any, value: Any) -> Exception:
    try:
        index = value.__index__()
    except (AttributeError, TypeError):
        return TypeError(f"indices must be integers, not {type(value).__name__}")
    return IndexError(f"index {index} out of range for a reader of {len(core)} records")


def index_batches(core: Any, indices: Iterable[Any], batch: int,
                  on_skip: SkipHandler | None = None) -> Iterator[Iterable[bytes]]:
    """The records at `indices` (any iterable, pulled lazily) of a reader
    core, in batches: lists, or one record at a time after a failed batch.

    An exception raised by the iterable, or a bad index, surfaces after the
    records before its position.
    """
    source = iter(indices)
    take_next: Callable[[], Any] = source.__next__

    def pull(n: int) -> tuple[list[Any], BaseException | None, bool]:
        """Up to n indices; the error that stopped early; whether exhausted."""
        chunk: list[Any] = []
        append = chunk.append
        try:
            for _ in range(n):
                append(take_next())
        except StopIteration:
            return chunk, None, True
        except Exception as error:  # surfaces in order, at its position
            return chunk, error, True
        return chunk, None, False

    sizes = _batch_sizes(batch)
    pending: collections.deque = collections.deque()
    exhausted = False
    while pending or not exhausted:
        while not exhausted and len(pending) <= _BATCHES_AHEAD:
            chunk, error, exhausted = pull(next(sizes))
            valid = core.valid_prefix(chunk)
            if valid < len(chunk):
                error = _bad_index_error(core, chunk[valid])
                del chunk[valid:]
                exhausted = True
            read = core.start_records(chunk) if chunk else None
            pending.append((read, chunk, error))
        read, chunk, error = pending.popleft()
        if read is not None:
            try:
                records: Iterable[bytes] = read.result()
            except _RECORD_ERRORS:
                records = one_by_one(core, chunk, on_skip)
            yield records
        if error is not None:
            raise error
