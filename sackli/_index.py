"""`Index` and `MultiIndex`: look records up by their bytes."""

from __future__ import annotations

from typing import Any, TypeVar

from . import _engine
from ._reader import Reader

__all__ = ["Index", "MultiIndex"]

_T = TypeVar("_T")


def _core_of(reader: Reader) -> Any:
    if not isinstance(reader, Reader):
        raise TypeError(f"expected a sackli.Reader, not {type(reader).__name__}")
    return reader._core


class Index:
    """Maps each distinct record of a reader to the first index holding it.

    Built in one parallel pass over the reader with the GIL released. It keeps
    64-bit hashes and positions, not records, so it fits in memory for bags
    that do not; every hit is confirmed against the stored record, so hash
    collisions never give wrong answers. Lookups accept `bytes` or `str`
    (UTF-8).
    """

    def __init__(self, reader: Reader) -> None:
        self._index = _engine.RecordIndex(_core_of(reader), keep_all=False)

    def get(self, record: bytes | str, default: _T = None) -> int | _T:
        """The first index of `record`, or `default` when absent."""
        found = self._index.first(record)
        return default if found is None else found

    def __getitem__(self, record: bytes | str) -> int:
        """The first index of `record`; KeyError when absent."""
        found = self._index.first(record)
        if found is None:
            raise KeyError(record)
        return found

    def __contains__(self, record: object) -> bool:
        try:
            return self._index.first(record) is not None
        except TypeError:
            return False

    def __len__(self) -> int:
        """The number of distinct records (compare with len(reader))."""
        return len(self._index)


class MultiIndex:
    """Maps each distinct record of a reader to all indices holding it,
    ascending. Built and checked like `Index`."""

    def __init__(self, reader: Reader) -> None:
        self._index = _engine.RecordIndex(_core_of(reader), keep_all=True)

    def get(self, record: bytes | str, default: _T = None) -> list[int] | _T:
        """All indices of `record`, or `default` when absent."""
        found = self._index.all(record)
        return found if found else default

    def __getitem__(self, record: bytes | str) -> list[int]:
        """All indices of `record`; KeyError when absent."""
        found = self._index.all(record)
        if not found:
            raise KeyError(record)
        return found

    def __contains__(self, record: object) -> bool:
        try:
            return self._index.first(record) is not None
        except TypeError:
            return False

    def __len__(self) -> int:
        """The number of distinct records (compare with len(reader))."""
        return len(self._index)
