"""A warning, once per opened bag, when remote records are read out of
order with no read cache (docs/cache.md, "When sackli warns").

Without a cache every record read at random is a request of its own, and a
shuffled epoch of small records fetches the bag many times over (a block
cache fetches each block once, and no request at all in later epochs).
Scans are left alone: their ranges follow each other and coalesce.
"""

from __future__ import annotations

import threading
import warnings

__all__ = ["OUT_OF_ORDER_READS", "OutOfOrderWatch", "UncachedReadWarning"]

# Out-of-order ranges of one bag before it warns: more than a notebook's
# look at a few records, far less than an epoch.
OUT_OF_ORDER_READS = 1000


class UncachedReadWarning(UserWarning):
    """Remote records are being read out of order (a shuffled epoch) with
    no read cache: each is a request of its own. Pass `cache_dir=`
    (`sackli.Reader.Options`) or set `SACKLI_CACHE_DIR`."""


class OutOfOrderWatch:
    """Counts the ranges of a bag's remote objects that do not start where
    the object's previous range ended; warns once when they reach
    `threshold`. One per opened bag (its `RemoteOpener`); its objects call
    `note` from the engine's threads, so the count takes a lock."""

    def __init__(self, threshold: int = OUT_OF_ORDER_READS) -> None:
        self._threshold = threshold
        self._lock = threading.Lock()
        self._ends: dict[str, int] = {}
        self._count = 0
        self._warned = False

    def note(self, url: str, ranges: list[tuple[int, int]]) -> None:
        """Records that `ranges` (offset, length) of object `url` are being
        fetched, in this order."""
        if self._warned:
            return
        with self._lock:
            end = self._ends.get(url, -1)
            for offset, length in ranges:
                if offset != end:
                    self._count += 1
                end = offset + length
            self._ends[url] = end
            if self._count < self._threshold or self._warned:
                return
            self._warned = True
        warnings.warn(UncachedReadWarning(
            f"{url}: {self._count} remote reads out of order (a shuffled epoch?) with no read "
            "cache: each record is a request of its own, every epoch. Pass cache_dir= "
            "(sackli.Reader.Options) or set SACKLI_CACHE_DIR; sackli.EpochStream caches by "
            "default (docs/cache.md)"), stacklevel=2)
