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
    if reader.closed:
        raise ValueError("cannot index a closed sackli.Reader")
    return reader._core


class _RecordLookup:
    """What Index and MultiIndex share: a built engine index and its lookups.

    Subclasses say what one lookup returns (`_find`: the answer, or a falsy
    value when the record is absent).
    """

    _KEEP_ALL = False

    def __init__(self, reader: Reader) -> None:
        self._index = _engine.RecordIndex(_core_of(reader), keep_all=self._KEEP_ALL)

    def _find(self, record: Any) -> Any:
        raise NotImplementedError

    def get(self, record: bytes | str, default: _T = None) -> Any:
        """The answer for `record`, or `default` when absent."""
        found = self._find(record)
        return default if found is None else found

    def __getitem__(self, record: bytes | str) -> Any:
        """The answer for `record`; KeyError when absent."""
        found = self._find(record)
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


class Index(_RecordLookup):
    """Maps each distinct record of a reader to the first index holding it.

    Built in one parallel pass over the reader with the GIL released. It keeps
    64-bit hashes and positions, not records, so it fits in memory for bags
    that do not; every hit is confirmed against the stored record, so hash
    collisions never give wrong answers. Lookups accept `bytes` or `str`
    (UTF-8): `index[record]` (KeyError when absent), `index.get(record,
    default=None)`, `record in index`, `len(index)`.
    """

    def _find(self, record: Any) -> int | None:
        return self._index.first(record)


class MultiIndex(_RecordLookup):
    """Maps each distinct record of a reader to all indices holding it,
    ascending (`list[int]`). Built, checked and used like `Index`."""

    _KEEP_ALL = True

    def _find(self, record: Any) -> list[int] | None:
        return self._index.all(record) or None
