"""`Index` and `MultiIndex`: look records up by their bytes.

Both are thin subclasses of the engine's index, so `index[record]`,
`index.get(record)`, `record in index` and `len(index)` run in C++ without a
Python frame.
"""

from __future__ import annotations

from typing import Any

from . import _engine
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


def _check_budget(max_memory_bytes: Any) -> int:
    if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int):
        raise TypeError(f"max_memory_bytes must be an int, not {type(max_memory_bytes).__name__}")
    if max_memory_bytes < 0:
        raise ValueError(f"max_memory_bytes must be >= 0, not {max_memory_bytes}")
    return max_memory_bytes


class _RecordLookup(_engine.RecordIndex):
    """What Index and MultiIndex share: building over a reader."""

    _KEEP_ALL = False

    def __init__(self, reader: Reader, *, max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> None:
        super().__init__(_core_of(reader), self._KEEP_ALL, _check_budget(max_memory_bytes))


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
    `record in index`, `len(index)` (the number of distinct records). The
    index keeps its own hold on the files: closing the reader does not
    affect it.

    Args:
      reader: an open `sackli.Reader` (or a view of one: indices are the
        view's).
      max_memory_bytes: decoded records kept to confirm lookups in memory
        (default 1 GiB); `memory_bytes` and `confirms_in_memory` tell what
        the built index holds.
    """


class MultiIndex(_RecordLookup):
    """Maps each distinct record of a reader to all indices holding it,
    ascending (`list[int]`). Built, checked and used like `Index`."""

    _KEEP_ALL = True
