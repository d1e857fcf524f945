"""A batch of ranged reads with many in flight: the S3 and GCS stores'
`read_many`.

One thread pool per process (made again after a fork, whose child has
none of its parent's threads), shared by every store: the clients release
the GIL while they wait on the network, so its threads overlap requests,
not Python work.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Callable, TypeVar

__all__ = ["BATCH_IN_FLIGHT", "read_concurrently"]

T = TypeVar("T")

# Requests of batches in flight at once, per process: the engine's default
# remote parallelism (an object store's latency, not the host's cores).
BATCH_IN_FLIGHT = 32

_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pid = -1


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool, _pid
    with _lock:
        if _pool is None or _pid != os.getpid():
            _pool = concurrent.futures.ThreadPoolExecutor(
                BATCH_IN_FLIGHT, thread_name_prefix="sackli-remote")
            _pid = os.getpid()
        return _pool


def read_concurrently(read: Callable[[int, int], T], ranges: list[tuple[int, int]]) -> list[T]:
    """`[read(offset, length) for each range]`, up to `BATCH_IN_FLIGHT` at
    once (one range: in the calling thread). The first error in range order
    is raised, once the reads before it are done."""
    if len(ranges) <= 1:
        return [read(offset, length) for offset, length in ranges]
    futures = [_executor().submit(read, offset, length) for offset, length in ranges]
    try:
        return [future.result() for future in futures]
    finally:
        for future in futures:
            future.cancel()  # after an error: the reads not started yet
