"""Opening a dataset reader again with a read cache, as `sackli.EpochStream`
does for a remote dataset (docs/cache.md, "Loaders cache by default")."""

from __future__ import annotations

import os
from typing import Any, TypeVar

from .._storage import is_remote

__all__ = ["ReopensWithCache"]

Self = TypeVar("Self", bound="ReopensWithCache")


class ReopensWithCache:
    """A reader that keeps the arguments it was opened with (`_opened`, its
    constructor's keywords) besides its folder (`_directory`)."""

    _directory: str
    _opened: dict[str, Any]

    def reopened_with_cache(self: Self, cache_dir: str | os.PathLike[str]) -> Self:
        """This reader's dataset read through the read cache in `cache_dir`:
        a new reader with the same options; this one itself when it reads
        local files or was given a `cache_dir` of its own."""
        if self._opened["cache_dir"] is not None or not is_remote(self._directory):
            return self
        return type(self)(self._directory, **{**self._opened, "cache_dir": cache_dir})
