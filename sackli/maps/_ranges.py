"""Maps whose bytes are fetched by range (remote objects, or any object that
answers ``obj[a:b]``): a remote map's header and index come in one ranged GET
in the common case, and a batch of values in a few coalesced GETs run in
parallel rather than one request per key."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._storage import RemoteObject

# Ranges closer than this are fetched together (the bytes between are cheaper
# than another request), up to a run of at most MAX_RUN bytes.
COALESCE_GAP = 64 * 1024
MAX_RUN = 16 * 1024 * 1024
# The first GET of a remote map: the header and, for maps of up to about 4,000
# keys, the whole index with it.
HEAD_BYTES = 64 * 1024
MAX_PARALLEL_REQUESTS = 16


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


def fetch_spans(spans: Sequence[tuple[int, int]], fetch: Callable[[int, int], bytes],
                parallel: bool) -> list[bytes]:
    """The bytes of each span, read as coalesced runs with `fetch(begin,
    end)` (in parallel threads when `parallel`)."""
    runs = coalesce(spans)
    if parallel and len(runs) > 1:
        with ThreadPoolExecutor(min(MAX_PARALLEL_REQUESTS, len(runs))) as pool:
            contents = list(pool.map(lambda run: fetch(*run), runs))
    else:
        contents = [fetch(*run) for run in runs]
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

    def __getitem__(self, window: slice) -> bytes:
        if not isinstance(window, slice):
            raise TypeError("a remote map is read by slices")
        begin, end, _ = window.indices(len(self))
        return self.read(begin, end)


def fetcher(buffer: Any) -> tuple[Callable[[int, int], bytes], bool]:
    """How to read [begin, end) of `buffer`, and whether reads may overlap."""
    if isinstance(buffer, RemoteMapObject):
        return buffer.read, True
    return (lambda begin, end: bytes(buffer[begin:end])), False
