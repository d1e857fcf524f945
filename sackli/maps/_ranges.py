"""Maps whose bytes are fetched by range (remote objects, or any object that
answers ``obj[a:b]``): a remote map's header and index come in one ranged GET
in the common case, and a batch of values in a few coalesced GETs handed to
the storage layer in one call (`RemoteObject.read_many`, which keeps them in
flight at once) rather than one request per key."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from .._storage import RemoteObject

# Ranges closer than this are fetched together (the bytes between are cheaper
# than another request), up to a run of at most MAX_RUN bytes.
COALESCE_GAP = 64 * 1024
MAX_RUN = 16 * 1024 * 1024
# The first GET of a remote map: the header and, for maps of up to about 4,000
# keys, the whole index with it.
HEAD_BYTES = 64 * 1024

# Reads a batch of (begin, end) runs: their bytes, in order.
RunsFetcher = Callable[[list[tuple[int, int]]], list[bytes]]


def coalesce(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Runs of byte ranges covering `spans` (begin, end), in order, merging
    neighbours up to COALESCE_GAP apart into runs of at most MAX_RUN bytes."""
    runs: list[tuple[int, int]] = []
    for begin, end in sorted(spans):
        if runs and begin <= runs[-1][1] + COALESCE_GAP and max(end, runs[-1][1]) - runs[-1][0] <= MAX_RUN:
            runs[-1] = (runs[-1][0], max(end, runs[-1][1]))
        else:
            runs.append((begin, end))
    return runs


def fetch_spans(spans: Sequence[tuple[int, int]], fetch_runs: RunsFetcher) -> list[bytes]:
    """The bytes of each span, read as coalesced runs in one
    `fetch_runs(runs)` call."""
    runs = coalesce(spans)
    contents = fetch_runs(runs) if runs else []
    starts = [begin for begin, _ in runs]
    out = []
    for begin, end in spans:
        k = bisect.bisect_right(starts, begin) - 1
        offset = begin - starts[k]
        out.append(bytes(memoryview(contents[k])[offset:offset + end - begin]))
    return out


class RemoteMapObject:
    """A `gs://` or `s3://` map as a sliceable buffer: ``obj[a:b]`` is one
    ranged GET (with the storage layer's retries), except that the first
    HEAD_BYTES are fetched once and served from memory."""

    def __init__(self, remote: RemoteObject) -> None:
        self._object = remote
        self.name = self._object.url
        self._head: bytes | None = None

    def __len__(self) -> int:
        return self._object.size

    def read(self, begin: int, end: int) -> bytes:
        """Bytes [begin, end) of the object."""
        if begin >= end:
            return b""
        if end <= HEAD_BYTES:
            if self._head is None:
                self._head = self._object.read(0, min(HEAD_BYTES, len(self)))
            return self._head[begin:end]
        return self._object.read(begin, end - begin)

    def read_many(self, runs: list[tuple[int, int]]) -> list[bytes]:
        """Bytes [begin, end) of each run, in order: those beyond the head
        in one `read_many` of the object (its requests in flight at once)."""
        far = [(begin, end - begin) for begin, end in runs if end > HEAD_BYTES and end > begin]
        fetched = iter(self._object.read_many(far) if far else [])
        return [next(fetched) if end > HEAD_BYTES and end > begin else self.read(begin, end)
                for begin, end in runs]

    def __getitem__(self, window: slice) -> bytes:
        if not isinstance(window, slice):
            raise TypeError("a remote map is read by slices")
        begin, end, _ = window.indices(len(self))
        return self.read(begin, end)


def fetcher(buffer: Any) -> RunsFetcher:
    """How to read a batch of [begin, end) runs of `buffer`: a remote map's
    in one batch of overlapping requests, other buffers' slice by slice."""
    if isinstance(buffer, RemoteMapObject):
        return buffer.read_many
    return lambda runs: [bytes(buffer[begin:end]) for begin, end in runs]
