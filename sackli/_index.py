"""`Index` and `MultiIndex`: look records up by their bytes.

Both are thin subclasses of the engine's index, so `index[record]`,
`index.get(record)`, `record in index` and `len(index)` run in C++ without a
Python frame. Iterating one gives its keys, as iterating a dict does.
"""

from __future__ import annotations

from typing import Any, Iterator

from . import _engine
from ._batching import records_per_batch
from ._read_ahead import iterate_range
from ._reader import Reader

__all__ = ["Index", "MultiIndex", "DEFAULT_MAX_MEMORY_BYTES"]

# Decoded records an index keeps in memory by default (see Index).
DEFAULT_MAX_MEMORY_BYTES = 1 << 30


def _core_of(reader: Reader) -> Any:
    if not isinstance(reader, Reader):
        raise TypeError(f"expected a sackli.Reader, not {type(reader).__name__}")
    if reader.closed:
        raise ValueError("cannot index a closed sackli.Reader")
    return reader._core


def _describe(reader: Reader) -> str:
    """How a repr names the records of `reader`: its spec, and the slice of a
    view, as the reader's own repr writes it."""
    text = repr(reader.file_spec)
    start, step, length = reader._core.view
    if (start, step, length) != (0, 1, reader._core.bag.size):
        stop = start + step * length
        text += f"[{start}:{'' if stop < 0 else stop}:{step}]"
    return text


def _check_budget(max_memory_bytes: Any) -> int:
    if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int):
        raise TypeError(f"max_memory_bytes must be an int, not {type(max_memory_bytes).__name__}")
    if max_memory_bytes < 0:
        raise ValueError(f"max_memory_bytes must be >= 0, not {max_memory_bytes}")
    return max_memory_bytes


class _RecordLookup(_engine.RecordIndex):
    """What Index and MultiIndex share: building over a reader."""

    _KEEP_ALL = False
    # Records per read-ahead batch of an iteration, at most.
    _ITERATION_BATCH_BYTES = 1 << 20

    def __init__(self, reader: Reader, *, max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> None:
        core = _core_of(reader)
        super().__init__(core, self._KEEP_ALL, _check_budget(max_memory_bytes))
        # Kept for iteration and the repr: the core outlives `reader.close()`.
        self._records = core
        self._source = _describe(reader)

    def _every_record(self) -> Iterator[bytes]:
        """The indexed records in order, read again in read-ahead batches."""
        batch = records_per_batch(self._ITERATION_BATCH_BYTES,
                                  self._records.approximate_bytes_per_record())
        return iterate_range(self._records, 0, len(self._records), batch, read_ahead=True)

    def __repr__(self) -> str:
        return (f"<sackli.{type(self).__name__} of {self._source}: "
                f"{len(self._records)} records, {len(self)} distinct>")


class Index(_RecordLookup):
    """Maps each distinct record of a reader to the first index holding it.

    Built in one pass over the reader (records hashed, or decoded, in
    parallel) with the GIL released. Every hash match is confirmed by
    comparing bytes, so hash collisions never give wrong answers: records
    of uncompressed memory-mapped files (`.bag` on local disk) are compared
    where they lie, at no memory cost; other records (`.bagz`, remote files)
    are kept in memory, decoded, up to `max_memory_bytes`, and beyond that
    a lookup reads its candidate back from the bag (slower, but an index of
    a bag far larger than memory still works).

    Lookups accept `bytes`, `str` (UTF-8) or any bytes-like object:
    `index[record]` (KeyError when absent), `index.get(record, default=None)`,
    `record in index`, `len(index)` (the number of distinct records).
    Iterating an index gives the distinct records in the order they first
    appear (`list(index)`), as iterating a dict gives its keys; it reads the
    records again. The index keeps its own hold on the files: closing the
    reader does not affect it.

    Args:
      reader: an open `sackli.Reader` (or a view of one: indices are the
        view's).
      max_memory_bytes: decoded records kept to confirm lookups in memory
        (default 1 GiB); `memory_bytes` and `confirms_in_memory` tell what
        the built index holds.
    """

    def __iter__(self) -> Iterator[bytes]:
        """The distinct records (the keys) in the order they first appear,
        as iterating a dict gives its keys: the records are read again and
        each kept where the index says it first appears."""
        for position, record in enumerate(self._every_record()):
            if self[record] == position:
                yield record


class MultiIndex(_RecordLookup):
    """Maps each distinct record of a reader to all indices holding it,
    ascending (`list[int]`). Built, checked and used like `Index`."""

    _KEEP_ALL = True

    def __iter__(self) -> Iterator[bytes]:
        """The distinct records in the order they first appear, as for
        `Index`. A record's positions are looked up once, at its first
        appearance; the later ones are remembered until passed (so a record
        repeated k times costs one lookup, not k lists of k positions)."""
        later: set[int] = set()
        for position, record in enumerate(self._every_record()):
            if position in later:
                later.discard(position)
                continue
            positions = self[record]
            if positions[0] == position:
                later.update(positions[1:])
                yield record
